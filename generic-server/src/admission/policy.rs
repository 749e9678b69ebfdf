//! kube's ValidatingAdmissionPolicy plugin (admissionregistration.k8s.io/v1):
//! ValidatingAdmissionPolicies and their bindings read from the watch
//! cache and compiled again only after one changes; for each write a
//! policy's matchConstraints and a binding's matchResources cover, the
//! params the binding names are looked up, then the matchConditions,
//! variables, validations (with message and messageExpression) and
//! auditAnnotations run in CEL, and each failed validation is handled as
//! the binding's validationActions say: Deny refuses the write in kube's
//! words, Warn sends a `Warning` header, Audit adds the
//! `validation.policy.admission.k8s.io/validation_failure` annotation.

use std::sync::Arc;

use apimachinery::cel::admission::{
    Activation, CelValue, Expression, Inputs, RUNTIME_COST_BUDGET, Uses,
};
use apimachinery::error::{Error, Reason, Result, StatusCause};
use apimachinery::label_selector::LabelSelector;
use serde_json::{Value, json};

use super::matching::{self, Conditions, Criteria, Namespaces, UserAuthorizer, Versioned};
use super::{AdmissionPlugin, Attributes};
use crate::filters::rbac::Rbac;
use crate::resource::Resource;
use crate::storage::cacher::{Cacher, Derived, ResourceCache, generic_ingest};

/// The group of the policies.
const GROUP: &str = "admissionregistration.k8s.io";
/// kube's longest message a messageExpression may produce.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;
/// kube's longest audit annotation value.
const MAX_ANNOTATION_BYTES: usize = 10 * 1024;
/// The annotation a failed validation with the Audit action adds.
const VALIDATION_FAILURE: &str = "validation.policy.admission.k8s.io/validation_failure";

/// A kind whose objects may serve as params: its group, kind, plural and scope.
#[derive(Debug, Clone)]
pub struct ParamKind {
    group: String,
    kind: String,
    plural: String,
    namespaced: bool,
}

impl ParamKind {
    /// The kind a server serves.
    pub fn of(resource: &Resource) -> ParamKind {
        ParamKind {
            group: resource.group.clone(),
            kind: resource.kind.clone(),
            plural: resource.plural.clone(),
            namespaced: resource.namespaced,
        }
    }

    /// The built-in kinds most often used as params, for servers that do
    /// not serve them (ConfigMaps and Secrets).
    fn common() -> [ParamKind; 2] {
        let core = |kind: &str, plural: &str| ParamKind {
            group: String::new(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced: true,
        };
        [core("ConfigMap", "configmaps"), core("Secret", "secrets")]
    }
}

/// One validation of a policy.
struct Validation {
    expression: std::result::Result<Expression, String>,
    message: String,
    message_expression: Option<std::result::Result<Expression, String>>,
    reason: Reason,
}

/// One binding of a policy: where it applies, its params, its actions.
struct Binding {
    name: String,
    criteria: Option<Criteria>,
    param_ref: Option<Value>,
    deny: bool,
    warn: bool,
    audit: bool,
    actions: Value,
}

/// One policy, compiled, with its bindings in name order.
struct Policy {
    name: String,
    fail_closed: bool,
    criteria: Criteria,
    /// `paramKind` as `(apiVersion, kind)`.
    param_kind: Option<(String, String)>,
    conditions: Conditions,
    variables: Vec<(String, std::result::Result<Expression, String>)>,
    validations: Vec<Validation>,
    audit_annotations: Vec<(String, std::result::Result<Expression, String>)>,
    bindings: Vec<Binding>,
    /// The root variables its expressions read.
    uses: Uses,
}

/// Compiles an optional expression field.
fn expression(value: &Value) -> Option<std::result::Result<Expression, String>> {
    value
        .as_str()
        .filter(|s| !s.trim().is_empty())
        .map(Expression::compile)
}

/// A list of named expressions (variables, audit annotations): each
/// item's `name_field` and its compiled `expression_field`.
fn named(
    items: &[Value],
    name_field: &str,
    expression_field: &str,
) -> Vec<(String, std::result::Result<Expression, String>)> {
    items
        .iter()
        .map(|item| {
            let name = item[name_field].as_str().unwrap_or_default().to_string();
            let compiled = expression(&item[expression_field])
                .unwrap_or_else(|| Err(format!("{expression_field} is required")));
            (name, compiled)
        })
        .collect()
}

impl Policy {
    fn parse(policy: &Value, bindings: Vec<Binding>) -> Policy {
        let spec = &policy["spec"];
        let list = |field: &str| spec[field].as_array().cloned().unwrap_or_default();
        Policy {
            name: policy["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .into(),
            fail_closed: spec["failurePolicy"] != "Ignore",
            criteria: Criteria::parse(&spec["matchConstraints"], "resourceRules"),
            param_kind: spec["paramKind"].as_object().map(|kind| {
                let text = |f: &str| kind.get(f).and_then(Value::as_str).unwrap_or_default();
                (text("apiVersion").to_string(), text("kind").to_string())
            }),
            conditions: Conditions::parse(spec),
            variables: named(&list("variables"), "name", "expression"),
            validations: list("validations")
                .iter()
                .map(|v| Validation {
                    expression: expression(&v["expression"])
                        .unwrap_or_else(|| Err("expression is required".into())),
                    message: v["message"].as_str().unwrap_or_default().trim().into(),
                    message_expression: expression(&v["messageExpression"]),
                    reason: v["reason"]
                        .as_str()
                        .and_then(Reason::parse)
                        .unwrap_or(Reason::Invalid),
                })
                .collect(),
            audit_annotations: named(&list("auditAnnotations"), "key", "valueExpression"),
            bindings,
            uses: Uses::default(),
        }
        .with_uses()
    }

    /// The policy, knowing which root variables its expressions read.
    fn with_uses(mut self) -> Policy {
        let named = self
            .variables
            .iter()
            .chain(&self.audit_annotations)
            .map(|(_, e)| e);
        let validations = self
            .validations
            .iter()
            .flat_map(|v| std::iter::once(&v.expression).chain(v.message_expression.as_ref()));
        self.uses = named
            .chain(validations)
            .filter_map(|e| e.as_ref().ok())
            .fold(self.conditions.uses(), |uses, e| uses.with(e.uses()));
        self
    }
}

impl Binding {
    fn parse(binding: &Value) -> Binding {
        let spec = &binding["spec"];
        let actions = spec["validationActions"].clone();
        let has = |action: &str| {
            actions
                .as_array()
                .into_iter()
                .flatten()
                .any(|a| a == action)
        };
        Binding {
            name: binding["metadata"]["name"].as_str().unwrap_or_default().into(),
            criteria: spec.get("matchResources").filter(|m| m.is_object()).map(|m| {
                let mut resources = m.clone();
                // Without resourceRules a binding narrows nothing.
                if resources["resourceRules"].as_array().is_none_or(Vec::is_empty) {
                    resources["resourceRules"] = json!([{"operations": ["*"], "apiGroups": ["*"],
                        "apiVersions": ["*"], "resources": ["*/*"]}]);
                }
                Criteria::parse(&resources, "resourceRules")
            }),
            param_ref: spec.get("paramRef").filter(|p| p.is_object()).cloned(),
            deny: has("Deny"),
            warn: has("Warn"),
            audit: has("Audit"),
            actions,
        }
    }
}

/// The policies of the cluster, in name order.
#[derive(Default)]
struct Compiled {
    policies: Vec<Policy>,
}

/// A validation that failed, as kube's PolicyDecision.
struct Failure {
    message: String,
    reason: Reason,
    /// The failing validation's index (an error elsewhere counts as 0).
    index: usize,
}

/// A refusal on the way: the policy, the binding (absent when the policy
/// itself is misconfigured), the message and its reason.
struct Denial {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: Reason,
}

/// kube's ValidatingAdmissionPolicy plugin.
pub struct Policies {
    /// The policies, then their bindings.
    compiled: Derived<Compiled>,
    namespaces: Namespaces,
    rbac: Rbac,
    cacher: Arc<Cacher>,
    etcd_root: String,
    crds: Arc<ResourceCache>,
    kinds: Vec<ParamKind>,
}

impl Policies {
    /// Follows the policies and bindings (and namespaces, the RBAC policy
    /// for `authorizer`, and CRDs for custom param kinds) in `cacher`;
    /// `kinds` are the built-in kinds this server can read params of.
    pub async fn new(
        cacher: Arc<Cacher>,
        etcd_root: &str,
        kinds: Vec<ParamKind>,
    ) -> Result<Policies> {
        let mut caches = Vec::new();
        for resource in [
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
        ] {
            let prefix = apimachinery::keys::key_prefix(etcd_root, GROUP, resource);
            caches.push(cacher.register(&prefix, generic_ingest()).await?);
        }
        let crds = apimachinery::keys::key_prefix(
            etcd_root,
            "apiextensions.k8s.io",
            "customresourcedefinitions",
        );
        Ok(Policies {
            compiled: Derived::new(caches),
            rbac: Rbac::new(&cacher, etcd_root).await?,
            namespaces: Namespaces::new(cacher.clone(), etcd_root).await?,
            crds: cacher.register(&crds, generic_ingest()).await?,
            cacher,
            etcd_root: etcd_root.to_string(),
            kinds,
        })
    }

    /// Reads the namespaces of namespaceSelectors and `namespaceObject`
    /// from `namespaces` instead of the server's own cache.
    pub fn with_namespaces(mut self, namespaces: Namespaces) -> Self {
        self.namespaces = namespaces;
        self
    }

    /// The policies as the caches hold them now.
    fn compiled(&self) -> Arc<Compiled> {
        self.compiled.get(|caches| {
            let objects = |cache: &ResourceCache| -> Vec<Value> {
                cache
                    .snapshot(cache.prefix(), 0)
                    .objects
                    .iter()
                    .map(|o| o.value())
                    .collect()
            };
            let bindings = objects(&caches[1]);
            let policies = objects(&caches[0])
                .iter()
                .map(|policy| {
                    let name = &policy["metadata"]["name"];
                    let bound = bindings
                        .iter()
                        .filter(|b| b["spec"]["policyName"] == *name)
                        .map(Binding::parse)
                        .collect();
                    Policy::parse(policy, bound)
                })
                .filter(|policy| !policy.bindings.is_empty())
                .collect();
            Compiled { policies }
        })
    }

    /// The plural and scope of `kind` in `group`: a kind this server knows,
    /// or a custom resource's.
    fn resolve(&self, group: &str, kind: &str) -> Option<(String, bool)> {
        let known = self
            .kinds
            .iter()
            .cloned()
            .chain(ParamKind::common())
            .find(|k| k.group == group && k.kind == kind);
        if let Some(k) = known {
            return Some((k.plural, k.namespaced));
        }
        self.crds
            .snapshot(self.crds.prefix(), 0)
            .objects
            .iter()
            .map(|crd| crd.value())
            .find(|crd| crd["spec"]["group"] == group && crd["spec"]["names"]["kind"] == kind)
            .map(|crd| {
                let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
                (plural.to_string(), crd["spec"]["scope"] == "Namespaced")
            })
    }

    /// The params a binding names (kube's `CollectParams`): `[None]` when the
    /// policy takes none, empty when none were found and that is allowed.
    async fn params(
        &self,
        policy: &Policy,
        binding: &Binding,
        attrs: &Attributes<'_>,
    ) -> std::result::Result<Vec<Option<Value>>, String> {
        let (Some((api_version, kind)), Some(param_ref)) = (&policy.param_kind, &binding.param_ref)
        else {
            return Ok(vec![None]);
        };
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        let (plural, namespaced) = self
            .resolve(group, kind)
            .ok_or_else(|| format!("paramKind kind `{api_version}, Kind={kind}` not known"))?;
        let text = |field: &str| param_ref[field].as_str().unwrap_or_default();
        let prefix = apimachinery::keys::key_prefix(&self.etcd_root, group, &plural);
        let cache = self
            .cacher
            .register(&prefix, generic_ingest())
            .await
            .map_err(|e| e.to_string())?;
        let directory = match (namespaced, text("namespace"), attrs.namespace) {
            (true, "", "") => {
                return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
            }
            (true, "", namespace) | (true, namespace, _) => format!("{prefix}{namespace}/"),
            (false, "", _) => prefix,
            (false, _, _) => {
                return Err(
                    "paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
                        .into(),
                );
            }
        };
        let found: Vec<Value> = match (text("name"), param_ref.get("selector")) {
            (name, _) if !name.is_empty() => {
                let key = format!("{directory}{name}");
                let mut param = cache.get(&key);
                if param.is_none() {
                    // A param created a moment ago: wait until the cache has it.
                    self.cacher.wait_fresh().await.map_err(|e| e.to_string())?;
                    param = cache.get(&key);
                }
                param.map(|p| p.value()).into_iter().collect()
            }
            (_, Some(selector)) if selector.is_object() => {
                let selector = LabelSelector::from_label_selector_object(selector)
                    .map_err(|e| e.to_string())?;
                cache
                    .snapshot(&directory, 0)
                    .objects
                    .iter()
                    .map(|p| p.value())
                    .filter(|p| {
                        let labels = p["metadata"]["labels"].as_object().cloned();
                        selector.matches(&labels.unwrap_or_default())
                    })
                    .collect()
            }
            _ => return Err("one of name or selector must be provided".into()),
        };
        if found.is_empty() && param_ref["parameterNotFoundAction"] == "Deny" {
            return Err(
                "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
            );
        }
        Ok(found.into_iter().map(Some).collect())
    }

    /// Runs a policy against one param: the validations that failed (and
    /// the expressions that failed to run, when the policy fails closed).
    fn evaluate(
        &self,
        policy: &Policy,
        input: &mut Activation,
        attrs: &Attributes<'_>,
    ) -> Vec<Failure> {
        let error = |message: String| Failure {
            message,
            reason: Reason::Invalid,
            index: 0,
        };
        match policy.conditions.hold(input) {
            Ok(true) => {}
            Ok(false) => return Vec::new(),
            Err(why) if policy.fail_closed => return vec![error(why)],
            Err(_) => return Vec::new(),
        }
        let mut budget = RUNTIME_COST_BUDGET;
        for (name, variable) in &policy.variables {
            // A variable that fails is left out: kube evaluates variables
            // lazily, so the failure shows only where one is read.
            if let Ok(value) = variable
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|v| v.evaluate(input, &mut budget))
            {
                input.set_variable(name, value);
            }
        }
        let mut failures = Vec::new();
        for (index, validation) in policy.validations.iter().enumerate() {
            let held = validation
                .expression
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|e| e.holds(input, &mut budget));
            match held {
                Ok(true) => {}
                Ok(false) => failures.push(Failure {
                    message: failure_message(validation, input, &mut budget),
                    reason: validation.reason,
                    index,
                }),
                Err(why) if policy.fail_closed => failures.push(Failure {
                    index,
                    ..error(why)
                }),
                Err(_) => {}
            }
        }
        for (key, annotation) in &policy.audit_annotations {
            let value = annotation
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|a| a.evaluate(input, &mut budget));
            match value {
                Ok(CelValue::String(value)) if !value.trim().is_empty() => {
                    let mut value = value.trim().to_string();
                    value.truncate(value.floor_char_boundary(MAX_ANNOTATION_BYTES));
                    attrs.annotate(format!("{}/{key}", policy.name), value);
                }
                Ok(CelValue::String(_) | CelValue::Null) => {}
                Ok(other) if policy.fail_closed => failures.push(error(format!(
                    "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                    annotation.as_ref().map(|a| a.source.as_str()).unwrap_or_default(),
                    apimachinery::cel::admission::type_name(&other)
                ))),
                Err(why) if policy.fail_closed => failures.push(error(why)),
                _ => {}
            }
        }
        failures
    }

    /// Follows each failure as the binding's validationActions say.
    fn act(
        &self,
        policy: &Policy,
        binding: &Binding,
        failures: Vec<Failure>,
        attrs: &Attributes<'_>,
        denials: &mut Vec<Denial>,
    ) {
        for failure in failures {
            if binding.warn {
                attrs.warn(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                    policy.name, binding.name, failure.message
                ));
            }
            if binding.audit {
                let value = json!([{
                    "message": failure.message,
                    "policy": policy.name,
                    "binding": binding.name,
                    "expressionIndex": failure.index,
                    "validationActions": binding.actions,
                }]);
                attrs.annotate(VALIDATION_FAILURE, value.to_string());
            }
            if binding.deny {
                denials.push(Denial {
                    policy: policy.name.clone(),
                    binding: Some(binding.name.clone()),
                    message: failure.message,
                    reason: failure.reason,
                });
            }
        }
    }
}

/// The message of a failed validation: its messageExpression's string,
/// else its message, else `failed expression: …`.
fn failure_message(validation: &Validation, input: &Activation, budget: &mut i64) -> String {
    let evaluated = validation
        .message_expression
        .as_ref()
        .and_then(|e| e.as_ref().ok())
        .and_then(|e| e.evaluate(input, budget).ok());
    if let Some(CelValue::String(message)) = evaluated {
        let message = message.trim();
        if !message.is_empty() && message.len() <= MAX_MESSAGE_BYTES && !message.contains('\n') {
            return message.to_string();
        }
    }
    if !validation.message.is_empty() {
        return validation.message.clone();
    }
    let source = validation
        .expression
        .as_ref()
        .map(|e| e.source.trim())
        .unwrap_or_default();
    format!("failed expression: {source}")
}

/// A misconfigured policy or binding, refused when the policy fails closed.
fn configuration_error(
    policy: &Policy,
    binding: Option<&Binding>,
    why: String,
    denials: &mut Vec<Denial>,
) {
    if !policy.fail_closed {
        tracing::warn!(policy = %policy.name, error = %why, "ignoring a misconfigured policy");
        return;
    }
    let message = match binding {
        None => format!("failed to configure policy: {why}"),
        Some(_) => format!("failed to configure binding: {why}"),
    };
    denials.push(Denial {
        policy: policy.name.clone(),
        binding: binding.map(|b| b.name.clone()),
        message,
        reason: Reason::Invalid,
    });
}

/// kube's refusal by a policy: 403's words with the validation's reason
/// and code, and the denial as the one cause.
fn refusal(attrs: &Attributes<'_>, denial: Denial) -> Error {
    let message = match &denial.binding {
        Some(binding) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{binding}' denied request: {}",
            denial.policy, denial.message
        ),
        None => format!(
            "ValidatingAdmissionPolicy '{}' denied request: {}",
            denial.policy, denial.message
        ),
    };
    Error::Refused {
        resource: attrs.resource.group_resource(),
        name: attrs.name.to_string(),
        reason: denial.reason,
        why: message.clone(),
        causes: vec![StatusCause {
            message: Some(message),
            ..Default::default()
        }],
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for Policies {
    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        if matching::exempt(attrs) {
            return Ok(());
        }
        let compiled = self.compiled();
        if compiled.policies.is_empty() {
            return Ok(());
        }
        let mut denials = Vec::new();
        let (mut request, mut namespace) = (None, None);
        for policy in &compiled.policies {
            let Some(matched) = policy.criteria.matched(attrs) else {
                continue;
            };
            match policy.criteria.selects(attrs, obj, &self.namespaces).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(why) => {
                    configuration_error(policy, None, why, &mut denials);
                    continue;
                }
            }
            // A policy matched in another served version sees the write in it.
            let versioned = Versioned::of(attrs, obj, &matched).await?;
            let converted_request = match versioned.version {
                Some(version) if policy.uses.has("request") => {
                    let uid = uuid::Uuid::new_v4().to_string();
                    Some(matching::admission_request(attrs, &uid, Some(version)))
                }
                _ => None,
            };
            for binding in &policy.bindings {
                if let Some(criteria) = &binding.criteria {
                    if !criteria.covers(attrs) {
                        continue;
                    }
                    match criteria.selects(attrs, obj, &self.namespaces).await {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(why) => {
                            configuration_error(policy, Some(binding), why, &mut denials);
                            continue;
                        }
                    }
                }
                let params = match self.params(policy, binding, attrs).await {
                    Ok(params) => params,
                    Err(why) => {
                        configuration_error(policy, Some(binding), why, &mut denials);
                        continue;
                    }
                };
                // What only some policies read is made once, when one does.
                let uid = || uuid::Uuid::new_v4().to_string();
                if policy.uses.has("request") && request.is_none() {
                    request = Some(matching::admission_request(attrs, &uid(), None));
                }
                if policy.uses.has("namespaceObject") && namespace.is_none() {
                    let found = self.namespaces.namespace(attrs).await?.map(|mut ns| {
                        if let Some(meta) = ns["metadata"].as_object_mut() {
                            meta.remove("managedFields");
                        }
                        ns
                    });
                    namespace = Some(found);
                }
                for param in params {
                    let inputs = Inputs {
                        request: converted_request.as_ref().or(request.as_ref()),
                        params: param.as_ref(),
                        namespace: namespace.as_ref().and_then(Option::as_ref),
                        authorizer: policy
                            .uses
                            .has("authorizer")
                            .then(|| UserAuthorizer::new(&self.rbac, attrs.user)),
                        ..Default::default()
                    };
                    let mut input = matching::activation(attrs, &versioned, inputs, policy.uses);
                    let failures = self.evaluate(policy, &mut input, attrs);
                    self.act(policy, binding, failures, attrs, &mut denials);
                }
            }
        }
        match denials.into_iter().next() {
            Some(denial) => Err(refusal(attrs, denial)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Operation;
    use crate::admission::test_support::{attributes, configmaps};

    fn policy(spec: Value) -> Policy {
        Policy::parse(
            &json!({"metadata": {"name": "p"}, "spec": spec}),
            Vec::new(),
        )
    }

    #[test]
    fn messages_fall_back_as_kubes_do() {
        let object = json!({"n": 7});
        let inputs = Inputs {
            object: Some(&object),
            ..Default::default()
        };
        let input = Activation::new(inputs, Uses::ALL);
        let p = policy(json!({"validations": [
            {"expression": "object.n < 5", "messageExpression": "'n is ' + string(object.n)"},
            {"expression": "object.n < 5", "message": " too many "},
            {"expression": " object.n < 5 "},
            {"expression": "object.n < 5", "messageExpression": "'two\\nlines'", "message": "plain"},
        ]}));
        let mut budget = RUNTIME_COST_BUDGET;
        let messages: Vec<String> = p
            .validations
            .iter()
            .map(|v| failure_message(v, &input, &mut budget))
            .collect();
        assert_eq!(
            messages,
            [
                "n is 7",
                "too many",
                "failed expression: object.n < 5",
                "plain"
            ]
        );
    }

    #[test]
    fn bindings_without_rules_narrow_nothing() {
        let binding = Binding::parse(&json!({"metadata": {"name": "b"}, "spec": {
            "policyName": "p", "validationActions": ["Warn", "Audit"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"a": "b"}}}}}));
        assert!(!binding.deny && binding.warn && binding.audit);
        let resource = configmaps();
        let user = crate::request::UserInfo::default();
        let attrs = attributes(&resource, &user, Operation::Create, "x");
        assert!(binding.criteria.as_ref().is_some_and(|c| c.covers(&attrs)));
    }

    #[test]
    fn refusals_are_in_kubes_words() {
        let resource =
            crate::admission::test_support::resource::<k8s_openapi::api::apps::v1::Deployment>();
        let user = crate::request::UserInfo::default();
        let attrs = attributes(&resource, &user, Operation::Create, "web");
        let error = refusal(
            &attrs,
            Denial {
                policy: "replicas".into(),
                binding: Some("replicas-binding".into()),
                message: "failed expression: object.spec.replicas <= 5".into(),
                reason: Reason::Invalid,
            },
        );
        assert_eq!(error.code(), 422);
        assert_eq!(
            error.to_string(),
            "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'replicas' with binding 'replicas-binding' denied request: failed expression: object.spec.replicas <= 5"
        );
    }
}
