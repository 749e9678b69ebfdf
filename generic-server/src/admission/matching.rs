//! Which writes a webhook or a policy is for: kube's rules (operations,
//! groups, versions, resources with subresources, scope, resource names),
//! namespaceSelector and objectSelector, and matchConditions in CEL; and
//! the AdmissionRequest both are shown.

use std::sync::Arc;

use apimachinery::cel::admission::{
    Activation, Authorize, Expression, Inputs, RUNTIME_COST_BUDGET, Uses,
};
use apimachinery::error::{Error, Result};
use apimachinery::label_selector::LabelSelector;
use serde_json::{Map, Value, json};

use super::{Attributes, Operation};
use crate::filters::rbac::{Rbac, SUPERUSERS};
use crate::request::UserInfo;
use crate::storage::cacher::{Cacher, ResourceCache};
use apimachinery::rbac::{Decision, Policy, User};

/// The resources no webhook or policy is called for, so that a broken one
/// can always be removed (kube's `IsExemptAdmissionConfigurationResource`).
const EXEMPT: &[&str] = &[
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
];

/// Whether the write is to an admission configuration itself.
pub fn exempt(attrs: &Attributes<'_>) -> bool {
    attrs.resource.group == "admissionregistration.k8s.io"
        && EXEMPT.contains(&attrs.resource.plural.as_str())
}

/// The strings of a JSON list (none for anything else).
fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

fn any_or(list: &[String], wanted: &str) -> bool {
    list.iter().any(|item| item == "*" || item == wanted)
}

/// One rule: which operations on which resources it is for.
#[derive(Debug, Default)]
pub struct Rule {
    operations: Vec<String>,
    groups: Vec<String>,
    versions: Vec<String>,
    resources: Vec<String>,
    names: Vec<String>,
    scope: String,
}

impl Rule {
    /// A rule as written (`operations`, `apiGroups`, `apiVersions`,
    /// `resources`, `resourceNames`, `scope`).
    pub fn parse(rule: &Value) -> Rule {
        Rule {
            operations: strings(&rule["operations"]),
            groups: strings(&rule["apiGroups"]),
            versions: strings(&rule["apiVersions"]),
            resources: strings(&rule["resources"]),
            names: strings(&rule["resourceNames"]),
            scope: rule["scope"].as_str().unwrap_or("*").to_string(),
        }
    }

    /// Whether the rule covers the write, were it made in `version`.
    pub fn matches(&self, attrs: &Attributes<'_>, version: &str) -> bool {
        let resource = attrs.resource;
        let scoped = match self.scope.as_str() {
            "Cluster" => !resource.namespaced,
            "Namespaced" => resource.namespaced,
            _ => true,
        };
        let resource_matches = self.resources.iter().any(|pattern| {
            let (name, sub) = pattern.split_once('/').unwrap_or((pattern, ""));
            (name == "*" || name == resource.plural) && (sub == "*" || sub == attrs.subresource)
        });
        scoped
            && resource_matches
            && any_or(&self.operations, attrs.operation.as_str())
            && any_or(&self.groups, &resource.group)
            && any_or(&self.versions, version)
            && (self.names.is_empty() || self.names.iter().any(|n| n == attrs.name))
    }
}

/// The version in which a webhook or policy sees a write its rules match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matched {
    /// The version the request was made in.
    AsRequested,
    /// Another served version of the resource (matchPolicy Equivalent).
    Equivalent(String),
}

impl Matched {
    /// The version named, if not the request's.
    pub fn version(&self) -> Option<&str> {
        match self {
            Matched::AsRequested => None,
            Matched::Equivalent(version) => Some(version),
        }
    }
}

/// A write's objects as a webhook or policy sees them: in the version its
/// rules matched, converted when that is not the request's.
pub struct Versioned<'a> {
    /// The version, when not the request's.
    pub version: Option<&'a str>,
    /// The object written (none on delete).
    pub object: Option<std::borrow::Cow<'a, Value>>,
    /// The stored object, on update and delete.
    pub old: Option<std::borrow::Cow<'a, Value>>,
}

impl<'a> Versioned<'a> {
    /// The write's objects in the `matched` version.
    pub async fn of(
        attrs: &Attributes<'a>,
        object: Option<&'a Value>,
        matched: &'a Matched,
    ) -> Result<Versioned<'a>> {
        use std::borrow::Cow;
        let (Some(version), Some(equivalents)) = (matched.version(), attrs.equivalents) else {
            return Ok(Versioned {
                version: None,
                object: object.map(Cow::Borrowed),
                old: attrs.old.map(Cow::Borrowed),
            });
        };
        let convert = |object: Option<&'a Value>| async move {
            match object {
                None => Ok(None),
                Some(object) => equivalents
                    .convert(attrs.resource, object, version)
                    .await
                    .map(|o| Some(Cow::Owned(o))),
            }
        };
        Ok(Versioned {
            version: Some(version),
            object: convert(object).await?,
            old: convert(attrs.old).await?,
        })
    }

    /// The object written, if any.
    pub fn object(&self) -> Option<&Value> {
        self.object.as_deref()
    }

    /// The stored object, if any.
    pub fn old(&self) -> Option<&Value> {
        self.old.as_deref()
    }
}

/// A label selector as written; a malformed one is kept as its error.
fn selector(value: Option<&Value>) -> std::result::Result<LabelSelector, String> {
    match value {
        None | Some(Value::Null) => Ok(LabelSelector::everything()),
        Some(object) => {
            LabelSelector::from_label_selector_object(object).map_err(|e| e.to_string())
        }
    }
}

/// The labels of an object.
fn labels(object: &Value) -> Map<String, Value> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// The writes a webhook, a policy or a binding is for: rules (and
/// excluded rules), matchPolicy, and the two selectors.
#[derive(Debug)]
pub struct Criteria {
    rules: Vec<Rule>,
    excluded: Vec<Rule>,
    exact: bool,
    namespace_selector: std::result::Result<LabelSelector, String>,
    object_selector: std::result::Result<LabelSelector, String>,
}

impl Criteria {
    /// The criteria of `spec`, whose rules are in `rules_field` (`rules`
    /// for a webhook, `resourceRules` for a policy's matchConstraints).
    pub fn parse(spec: &Value, rules_field: &str) -> Criteria {
        let rules = |field: &str| {
            spec[field]
                .as_array()
                .into_iter()
                .flatten()
                .map(Rule::parse)
                .collect()
        };
        Criteria {
            rules: rules(rules_field),
            excluded: rules("excludeResourceRules"),
            exact: spec["matchPolicy"] == "Exact",
            namespace_selector: selector(spec.get("namespaceSelector")),
            object_selector: selector(spec.get("objectSelector")),
        }
    }

    /// Whether the rules cover the write (the cheap first test), and in
    /// which version: the request's when a rule names it, else (with
    /// matchPolicy Equivalent) the first other served version one names.
    pub fn matched(&self, attrs: &Attributes<'_>) -> Option<Matched> {
        let in_version = |version: &str| {
            self.rules.iter().any(|rule| rule.matches(attrs, version))
                && !self
                    .excluded
                    .iter()
                    .any(|rule| rule.matches(attrs, version))
        };
        if in_version(&attrs.resource.version) {
            return Some(Matched::AsRequested);
        }
        if self.exact {
            return None;
        }
        attrs
            .equivalents
            .into_iter()
            .flat_map(|e| &e.versions)
            .find(|version| in_version(version))
            .map(|version| Matched::Equivalent(version.clone()))
    }

    /// Whether the rules cover the write in any version.
    pub fn covers(&self, attrs: &Attributes<'_>) -> bool {
        self.matched(attrs).is_some()
    }

    /// Whether the selectors accept the write: the namespace's labels
    /// (`None` when the namespaceSelector does not apply), and the object's
    /// or the old object's labels. A malformed selector is the error.
    pub async fn selects(
        &self,
        attrs: &Attributes<'_>,
        object: Option<&Value>,
        namespaces: &Namespaces,
    ) -> std::result::Result<bool, String> {
        let namespace_selector = self.namespace_selector.as_ref().map_err(Clone::clone)?;
        if !namespace_selector.is_empty()
            && let Some(labels) = namespaces
                .of(attrs, object)
                .await
                .map_err(|e| e.to_string())?
            && !namespace_selector.matches(&labels)
        {
            return Ok(false);
        }
        self.selects_object(object, attrs.old)
    }

    /// Whether the objectSelector accepts the object or the object it
    /// replaces.
    pub fn selects_object(
        &self,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> std::result::Result<bool, String> {
        let object_selector = self.object_selector.as_ref().map_err(Clone::clone)?;
        Ok(object_selector.is_empty()
            || [object, old]
                .into_iter()
                .flatten()
                .any(|o| object_selector.matches(&labels(o))))
    }
}

/// The namespaces a server follows, from its watch cache: for
/// NamespaceLifecycle, namespaceSelectors and `namespaceObject`.
pub struct Namespaces {
    cacher: Arc<Cacher>,
    namespaces: Arc<ResourceCache>,
    /// Where a namespace the cache does not hold is asked for (an
    /// aggregated server's front door: its cache is a copy that may lag).
    fallback: Option<Arc<dyn super::NamespaceSource>>,
}

impl Namespaces {
    /// Follows namespaces in `cacher`.
    pub async fn new(cacher: Arc<Cacher>, etcd_root: &str) -> Result<Namespaces> {
        let prefix = apimachinery::keys::key_prefix(etcd_root, "", "namespaces");
        let namespaces = cacher
            .register(&prefix, crate::storage::cacher::generic_ingest())
            .await?;
        Ok(Namespaces {
            cacher,
            namespaces,
            fallback: None,
        })
    }

    /// Asks `source` for a namespace the cache does not hold, as kube's
    /// admission plugins fall back to a live lookup.
    pub fn with_fallback(mut self, source: Arc<dyn super::NamespaceSource>) -> Self {
        self.fallback = Some(source);
        self
    }

    /// The Namespace `name`; one created a moment ago is waited for.
    pub async fn get(&self, name: &str) -> Result<Option<Value>> {
        let cached = super::cached(&self.cacher, &self.namespaces, name).await?;
        match (cached, &self.fallback) {
            (Some(namespace), _) => Ok(Some(namespace.value())),
            (None, Some(fallback)) => super::NamespaceSource::lookup(fallback.as_ref(), name).await,
            (None, None) => Ok(None),
        }
    }

    /// The namespace the write is in (`None` for a cluster-scoped write).
    pub async fn namespace(&self, attrs: &Attributes<'_>) -> Result<Option<Value>> {
        if attrs.namespace.is_empty() || is_namespace(attrs) {
            return Ok(None);
        }
        match self.get(attrs.namespace).await? {
            Some(namespace) => Ok(Some(namespace)),
            None => Err(Error::NotFound {
                resource: apimachinery::group_version::GroupResource::new("", "namespaces"),
                name: attrs.namespace.into(),
            }),
        }
    }

    /// The labels a namespaceSelector is matched against: the
    /// namespace's, a Namespace's own, or `None` for other cluster-scoped
    /// writes (where the selector does not apply).
    pub async fn of(
        &self,
        attrs: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<Option<Map<String, Value>>> {
        if is_namespace(attrs) {
            return Ok(object.or(attrs.old).map(labels));
        }
        Ok(self.namespace(attrs).await?.as_ref().map(labels))
    }
}

/// Whether the write is to a Namespace.
fn is_namespace(attrs: &Attributes<'_>) -> bool {
    attrs.resource.group.is_empty() && attrs.resource.plural == "namespaces"
}

/// CEL conditions that must all hold (matchConditions), each with its name.
#[derive(Debug, Default)]
pub struct Conditions(Vec<(String, std::result::Result<Expression, String>)>);

impl Conditions {
    /// The `matchConditions` of `spec`.
    pub fn parse(spec: &Value) -> Conditions {
        Conditions(
            spec["matchConditions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let name = c["name"].as_str().unwrap_or_default().to_string();
                    (
                        name,
                        Expression::compile(c["expression"].as_str().unwrap_or_default()),
                    )
                })
                .collect(),
        )
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The root variables they read.
    pub fn uses(&self) -> Uses {
        self.0
            .iter()
            .filter_map(|(_, c)| c.as_ref().ok())
            .fold(Uses::default(), |uses, c| uses.with(c.uses()))
    }

    /// kube's matcher: false as soon as one condition is false; else the
    /// errors of those that failed, if any (their failurePolicy decides).
    pub fn hold(&self, input: &Activation) -> std::result::Result<bool, String> {
        let mut budget = RUNTIME_COST_BUDGET;
        let mut errors = Vec::new();
        for (_, condition) in &self.0 {
            match condition
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|c| c.holds(input, &mut budget))
            {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(why) => errors.push(why),
            }
        }
        match errors.len() {
            0 => Ok(true),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }
}

/// kube's AdmissionRequest for the write (without the objects), as a
/// webhook's review and a policy's `request` carry it.
/// `version` is the one the rules matched, when not the request's
/// (`requestKind` and `requestResource` keep the request's).
pub fn admission_request(attrs: &Attributes<'_>, uid: &str, version: Option<&str>) -> Value {
    let resource = attrs.resource;
    let gvk =
        |version: &str| json!({"group": resource.group, "version": version, "kind": resource.kind});
    let gvr = |version: &str| json!({"group": resource.group, "version": version, "resource": resource.plural});
    let requested = &resource.version;
    let seen = version.unwrap_or(requested);
    let user = attrs.user;
    let options = match attrs.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    let mut request = json!({
        "uid": uid,
        "kind": gvk(seen),
        "resource": gvr(seen),
        "requestKind": gvk(requested),
        "requestResource": gvr(requested),
        "name": attrs.name,
        "operation": attrs.operation.as_str(),
        "userInfo": {"username": user.name, "groups": user.groups},
        "dryRun": attrs.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": options},
    });
    if !attrs.namespace.is_empty() {
        request["namespace"] = json!(attrs.namespace);
    }
    if !attrs.subresource.is_empty() {
        request["subResource"] = json!(attrs.subresource);
        request["requestSubResource"] = json!(attrs.subresource);
    }
    if !user.uid.is_empty() {
        request["userInfo"]["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        request["userInfo"]["extra"] = json!(user.extra);
    }
    request
}

/// The CEL `authorizer` of a write: RBAC's decisions for the writing
/// user (or for a ServiceAccount it names).
pub struct UserAuthorizer {
    policy: Arc<Policy>,
    name: String,
    groups: Vec<String>,
}

impl UserAuthorizer {
    /// The authorizer for `user` under the policy `rbac` holds now.
    pub fn new(rbac: &Rbac, user: &UserInfo) -> Arc<dyn Authorize> {
        Arc::new(UserAuthorizer {
            policy: rbac.policy(),
            name: user.name.clone(),
            groups: user.groups.clone(),
        })
    }
}

impl Authorize for UserAuthorizer {
    fn decide(
        &self,
        service_account: Option<(&str, &str)>,
        attrs: &apimachinery::rbac::Attributes<'_>,
    ) -> (bool, String) {
        let (name, groups) = match service_account {
            Some((namespace, name)) => (
                apimachinery::rbac::service_account_user(namespace, name),
                vec![
                    "system:serviceaccounts".to_string(),
                    format!("system:serviceaccounts:{namespace}"),
                    "system:authenticated".to_string(),
                ],
            ),
            None => (self.name.clone(), self.groups.clone()),
        };
        if groups.iter().any(|g| g == SUPERUSERS) {
            return (true, String::new());
        }
        match self.policy.decide(
            &User {
                name: &name,
                groups: &groups,
            },
            attrs,
        ) {
            Decision::Allow(reason) => (true, reason),
            Decision::Deny(reason) => (false, reason),
        }
    }
}

/// What CEL reads of a write: `object` (none on delete), `oldObject`,
/// in the version matched, and the rest as given, converting only the
/// roots in `uses`.
pub fn activation<'a>(
    attrs: &Attributes<'_>,
    versioned: &'a Versioned<'_>,
    inputs: Inputs<'a>,
    uses: Uses,
) -> Activation {
    let object = match attrs.operation {
        Operation::Delete => None,
        _ => versioned.object(),
    };
    let inputs = Inputs {
        object,
        old_object: versioned.old(),
        ..inputs
    };
    Activation::new(inputs, uses)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::admission::test_support::{attributes, configmaps};

    fn attrs<'a>(
        resource: &'a crate::resource::Resource,
        user: &'a UserInfo,
        operation: Operation,
        subresource: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            subresource,
            ..attributes(resource, user, operation, "x")
        }
    }

    #[test]
    fn rules_match_as_kube_splits_resources() {
        let resource = configmaps();
        let user = UserInfo::default();
        let create = attrs(&resource, &user, Operation::Create, "");
        let status = attrs(&resource, &user, Operation::Update, "status");
        let rule = |value: Value| Rule::parse(&value);
        let all = rule(
            json!({"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}),
        );
        assert!(all.matches(&create, "v1"));
        assert!(!all.matches(&status, "v1"), "no subresource in the rule");
        let subs = rule(
            json!({"operations": ["UPDATE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["configmaps/*"]}),
        );
        assert!(!subs.matches(&create, "v1"), "CREATE is not UPDATE");
        assert!(subs.matches(&status, "v1"));
        let star = rule(
            json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v2"], "resources": ["*"], "scope": "Namespaced"}),
        );
        assert!(!star.matches(&create, "v1"), "the rule names v2");
        assert!(star.matches(&create, "v2"), "as if made in v2");
        let cluster = rule(
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "scope": "Cluster"}),
        );
        assert!(!cluster.matches(&create, "v1"), "configmaps are namespaced");
        let named = rule(
            json!({"operations": ["*"], "apiGroups": [""], "apiVersions": ["*"], "resources": ["configmaps"], "resourceNames": ["y"]}),
        );
        assert!(!named.matches(&create, "v1"), "only the named object");
    }

    /// Converts by rewriting apiVersion, as CRDs' strategy None does.
    struct Renaming;

    #[async_trait::async_trait]
    impl crate::strategy::Converter for Renaming {
        fn storage_version(&self) -> String {
            "v1".into()
        }
        async fn convert(&self, mut objects: Vec<Value>, to: &str) -> Result<Vec<Value>> {
            for object in &mut objects {
                object["apiVersion"] = json!(to);
            }
            Ok(objects)
        }
    }

    #[tokio::test]
    async fn equivalent_rules_see_the_write_in_their_version() {
        let resource = configmaps();
        let user = UserInfo::default();
        let equivalents = crate::admission::Equivalents {
            versions: vec!["v2".into(), "v3".into()],
            converter: Arc::new(Renaming),
        };
        let old = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        let create = Attributes {
            equivalents: Some(&equivalents),
            old: Some(&old),
            ..attrs(&resource, &user, Operation::Update, "")
        };
        let criteria = |policy: &str, versions: Value| {
            Criteria::parse(
                &json!({"matchPolicy": policy, "rules": [{"operations": ["*"], "apiGroups": [""],
                    "apiVersions": versions, "resources": ["configmaps"]}]}),
                "rules",
            )
        };
        let equivalent = criteria("Equivalent", json!(["v3", "v2"]));
        let matched = equivalent.matched(&create);
        assert_eq!(
            matched,
            Some(Matched::Equivalent("v2".into())),
            "first served version named"
        );
        assert_eq!(criteria("Exact", json!(["v2"])).matched(&create), None);
        assert_eq!(
            criteria("Equivalent", json!(["v1", "v2"])).matched(&create),
            Some(Matched::AsRequested),
            "the request's own version first"
        );
        assert_eq!(
            criteria("Equivalent", json!(["v9"])).matched(&create),
            None,
            "not served"
        );

        let object = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        let Some(matched) = matched else {
            unreachable!()
        };
        let seen = Versioned::of(&create, Some(&object), &matched)
            .await
            .expect("converted");
        assert_eq!(seen.object().map(|o| &o["apiVersion"]), Some(&json!("v2")));
        assert_eq!(seen.old().map(|o| &o["apiVersion"]), Some(&json!("v2")));
        let request = admission_request(&create, "u", seen.version);
        assert_eq!(request["kind"]["version"], "v2");
        assert_eq!(request["resource"]["version"], "v2");
        assert_eq!(request["requestKind"]["version"], "v1");
        assert_eq!(request["requestResource"]["version"], "v1");
    }

    #[test]
    fn object_selectors_see_the_old_object_too() {
        let criteria = Criteria::parse(
            &json!({"objectSelector": {"matchLabels": {"team": "a"}}}),
            "rules",
        );
        let labelled = json!({"metadata": {"labels": {"team": "a"}}});
        let other = json!({"metadata": {"labels": {"team": "b"}}});
        assert_eq!(criteria.selects_object(Some(&labelled), None), Ok(true));
        assert_eq!(criteria.selects_object(Some(&other), None), Ok(false));
        assert_eq!(
            criteria.selects_object(Some(&other), Some(&labelled)),
            Ok(true)
        );
    }

    #[test]
    fn excluded_rules_win() {
        let resource = configmaps();
        let user = UserInfo::default();
        let create = attrs(&resource, &user, Operation::Create, "");
        let criteria = Criteria::parse(
            &json!({
                "resourceRules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}],
                "excludeResourceRules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["*"], "resources": ["configmaps"], "resourceNames": ["x"]}],
            }),
            "resourceRules",
        );
        assert!(!criteria.covers(&create));
    }

    #[test]
    fn conditions_short_circuit_on_false_and_report_errors() {
        let (request, object) = (json!({"operation": "CREATE"}), json!({"a": 1}));
        let inputs = Inputs {
            object: Some(&object),
            request: Some(&request),
            ..Default::default()
        };
        let input = Activation::new(inputs, Uses::ALL);
        let conditions = |list: Value| Conditions::parse(&json!({"matchConditions": list}));
        let both = conditions(json!([
            {"name": "bad", "expression": "object.nope == 1"},
            {"name": "no", "expression": "object.a == 2"},
        ]));
        assert_eq!(
            both.hold(&input),
            Ok(false),
            "a false condition wins over an error"
        );
        let error = conditions(json!([{"name": "bad", "expression": "object.nope == 1"}]));
        assert_eq!(
            error.hold(&input),
            Err("expression 'object.nope == 1' resulted in error: no such key: nope".into())
        );
        let yes =
            conditions(json!([{"name": "yes", "expression": "request.operation == 'CREATE'"}]));
        assert_eq!(yes.hold(&input), Ok(true));
    }

    #[tokio::test]
    async fn a_namespace_the_cache_lacks_is_asked_of_the_fallback() {
        struct Live;
        #[async_trait::async_trait]
        impl crate::admission::NamespaceSource for Live {
            async fn lookup(&self, name: &str) -> Result<Option<Value>> {
                Ok((name == "fresh").then(|| json!({"metadata": {"name": "fresh"}})))
            }
        }
        let storage = Arc::new(crate::storage::memory::MemoryStorage::default());
        let cacher = Cacher::start(storage).await.unwrap();
        let cached = Namespaces::new(cacher.clone(), "/registry").await.unwrap();
        assert!(cached.get("fresh").await.unwrap().is_none());
        let namespaces = Namespaces::new(cacher, "/registry")
            .await
            .unwrap()
            .with_fallback(Arc::new(Live));
        let fresh = namespaces.get("fresh").await.unwrap().unwrap();
        assert_eq!(fresh["metadata"]["name"], "fresh");
        assert!(namespaces.get("other").await.unwrap().is_none());
    }
}
