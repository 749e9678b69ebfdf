//! kube's admission webhooks (admissionregistration.k8s.io/v1): the
//! Mutating- and ValidatingWebhookConfigurations, read from the watch cache
//! and compiled again only after one changes, matched against each write
//! (rules, namespaceSelector, objectSelector), and called with an
//! AdmissionReview v1 over HTTPS. Mutating webhooks run one after another
//! and may patch the object; validating webhooks run side by side.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use apimachinery::error::{Error, Reason, Result, reason_for_code};
use apimachinery::label_selector::LabelSelector;
use base64::Engine;
use serde_json::{Map, Value, json};

use super::{AdmissionPlugin, Attributes, Operation};
use crate::service_client::{Clients, ObjectReader, post_review};
use crate::storage::cacher::{Cacher, ResourceCache, generic_ingest};

/// The group of the webhook configurations.
const GROUP: &str = "admissionregistration.k8s.io";
/// kube's default `timeoutSeconds`, and the most it allows.
const DEFAULT_TIMEOUT: u64 = 10;
const MAX_TIMEOUT: u64 = 30;

/// The resources no webhook is called for, so that a broken webhook can
/// always be removed (kube's `IsExemptAdmissionConfigurationResource`).
const EXEMPT: &[&str] = &[
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
];

/// One rule of a webhook: which operations on which resources it is for.
#[derive(Debug, Default)]
struct Rule {
    operations: Vec<String>,
    groups: Vec<String>,
    versions: Vec<String>,
    resources: Vec<String>,
    scope: String,
}

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

impl Rule {
    fn parse(rule: &Value) -> Rule {
        Rule {
            operations: strings(&rule["operations"]),
            groups: strings(&rule["apiGroups"]),
            versions: strings(&rule["apiVersions"]),
            resources: strings(&rule["resources"]),
            scope: rule["scope"].as_str().unwrap_or("*").to_string(),
        }
    }

    /// Whether the rule covers the write; `exact` (matchPolicy Exact)
    /// also requires its version, where Equivalent takes any.
    fn matches(&self, attrs: &Attributes<'_>, exact: bool) -> bool {
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
            && (!exact || any_or(&self.versions, &resource.version))
    }
}

/// One webhook of a configuration, ready to match and call.
struct Hook {
    name: String,
    rules: Vec<Rule>,
    exact: bool,
    namespace_selector: std::result::Result<LabelSelector, String>,
    object_selector: std::result::Result<LabelSelector, String>,
    fail_open: bool,
    timeout: Duration,
    dry_run_safe: bool,
    reinvoke: bool,
    client_config: Value,
}

impl Hook {
    fn parse(hook: &Value) -> Hook {
        let selector = |field: &str| match hook.get(field) {
            None | Some(Value::Null) => Ok(LabelSelector::everything()),
            Some(object) => {
                LabelSelector::from_label_selector_object(object).map_err(|e| e.to_string())
            }
        };
        let seconds = hook["timeoutSeconds"]
            .as_u64()
            .unwrap_or(DEFAULT_TIMEOUT)
            .clamp(1, MAX_TIMEOUT);
        Hook {
            name: hook["name"].as_str().unwrap_or_default().to_string(),
            rules: hook["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .map(Rule::parse)
                .collect(),
            exact: hook["matchPolicy"] == "Exact",
            namespace_selector: selector("namespaceSelector"),
            object_selector: selector("objectSelector"),
            fail_open: hook["failurePolicy"] == "Ignore",
            timeout: Duration::from_secs(seconds),
            dry_run_safe: matches!(hook["sideEffects"].as_str(), Some("None" | "NoneOnDryRun")),
            reinvoke: hook["reinvocationPolicy"] == "IfNeeded",
            client_config: hook["clientConfig"].clone(),
        }
    }

    /// Whether the object (or the object it replaces) has labels the
    /// objectSelector accepts.
    fn selects_object(&self, object: Option<&Value>, old: Option<&Value>) -> Result<bool> {
        let selector = self.object_selector.as_ref().map_err(|why| {
            Error::internal(format!("failed calling webhook {:?}: {why}", self.name))
        })?;
        if selector.is_empty() {
            return Ok(true);
        }
        let labels = |o: Option<&Value>| {
            o.and_then(|o| o.pointer("/metadata/labels"))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        Ok([object, old]
            .into_iter()
            .flatten()
            .any(|o| selector.matches(&labels(Some(o)))))
    }
}

/// The webhooks of every configuration, in kube's order (configurations
/// by name, webhooks as listed).
#[derive(Default)]
struct Configured {
    mutating: Vec<Hook>,
    validating: Vec<Hook>,
}

/// kube's MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins.
pub struct Webhooks {
    cacher: Arc<Cacher>,
    /// The mutating, then the validating configurations.
    caches: [Arc<ResourceCache>; 2],
    namespaces: Arc<ResourceCache>,
    /// The webhooks and the caches' revisions they were compiled at.
    current: RwLock<([i64; 2], Arc<Configured>)>,
    compiling: Mutex<()>,
    reader: Arc<dyn ObjectReader>,
    clients: Clients,
}

impl Webhooks {
    /// Follows the webhook configurations (and namespaces, for
    /// namespaceSelector) in `cacher`; a Service a webhook names is
    /// resolved to its endpoints from storage.
    pub async fn new(cacher: Arc<Cacher>, etcd_root: &str) -> Result<Webhooks> {
        let reader = Arc::new(crate::service_client::StorageReader::new(
            cacher.storage().clone(),
            etcd_root,
        ));
        let mut caches = Vec::new();
        for resource in [
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations",
        ] {
            let prefix = apimachinery::keys::key_prefix(etcd_root, GROUP, resource);
            caches.push(cacher.register(&prefix, generic_ingest()).await?);
        }
        let caches: [Arc<ResourceCache>; 2] = caches.try_into().unwrap_or_else(|_| unreachable!());
        let prefix = apimachinery::keys::key_prefix(etcd_root, "", "namespaces");
        let namespaces = cacher.register(&prefix, generic_ingest()).await?;
        Ok(Webhooks {
            cacher,
            caches,
            namespaces,
            current: RwLock::new(([-1; 2], Arc::default())),
            compiling: Mutex::default(),
            reader,
            clients: Clients::new(None),
        })
    }

    /// The webhooks as the caches hold them now.
    fn configured(&self) -> Arc<Configured> {
        let applied = || self.caches.each_ref().map(|c| c.applied());
        let fresh = |applied: [i64; 2]| {
            let current = self.current.read().unwrap_or_else(|e| e.into_inner());
            (current.0 == applied).then(|| current.1.clone())
        };
        if let Some(current) = fresh(applied()) {
            return current;
        }
        let _one_at_a_time = self.compiling.lock().unwrap_or_else(|e| e.into_inner());
        let revisions = applied();
        if let Some(current) = fresh(revisions) {
            return current;
        }
        let compile = |cache: &ResourceCache| -> Vec<Hook> {
            cache
                .snapshot(cache.prefix(), 0)
                .objects
                .iter()
                .flat_map(|object| {
                    let configuration = object.value();
                    configuration["webhooks"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(Hook::parse)
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        let configured = Arc::new(Configured {
            mutating: compile(&self.caches[0]),
            validating: compile(&self.caches[1]),
        });
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = (revisions, configured.clone());
        configured
    }

    /// The labels of the namespace the write is in, or `None` when the
    /// namespaceSelector does not apply (a cluster-scoped object other
    /// than a Namespace).
    async fn namespace_labels(
        &self,
        attrs: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<Option<Map<String, Value>>> {
        let labels = |o: &Value| {
            o.pointer("/metadata/labels")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let is_namespace = attrs.resource.group.is_empty() && attrs.resource.plural == "namespaces";
        if is_namespace {
            return Ok(object.or(attrs.old).map(labels));
        }
        if attrs.namespace.is_empty() {
            return Ok(None);
        }
        match super::cached(&self.cacher, &self.namespaces, attrs.namespace).await? {
            Some(namespace) => Ok(Some(labels(&namespace.value()))),
            None => Err(Error::NotFound {
                resource: apimachinery::group_version::GroupResource::new("", "namespaces"),
                name: attrs.namespace.into(),
            }),
        }
    }

    /// The webhooks of `hooks` that the write must go through.
    async fn relevant<'h>(
        &self,
        hooks: &'h [Hook],
        attrs: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<Vec<&'h Hook>> {
        let resource = attrs.resource;
        if hooks.is_empty()
            || (resource.group == GROUP && EXEMPT.contains(&resource.plural.as_str()))
        {
            return Ok(Vec::new());
        }
        let mut namespace_labels = None;
        let mut relevant = Vec::new();
        for hook in hooks {
            if !hook
                .rules
                .iter()
                .any(|rule| rule.matches(attrs, hook.exact))
            {
                continue;
            }
            let selector = hook.namespace_selector.as_ref().map_err(|why| {
                Error::internal(format!("failed calling webhook {:?}: {why}", hook.name))
            })?;
            if !selector.is_empty() {
                if namespace_labels.is_none() {
                    namespace_labels = Some(self.namespace_labels(attrs, object).await?);
                }
                if let Some(Some(labels)) = &namespace_labels
                    && !selector.matches(labels)
                {
                    continue;
                }
            }
            if !hook.selects_object(object, attrs.old)? {
                continue;
            }
            if attrs.dry_run && !hook.dry_run_safe {
                return Err(Error::bad_request(format!(
                    "admission webhook {:?} does not support dry run",
                    hook.name
                )));
            }
            relevant.push(hook);
        }
        Ok(relevant)
    }

    /// Calls one webhook: its response if it answered as a webhook must,
    /// else why not (a failure its failurePolicy decides about).
    async fn call(
        &self,
        hook: &Hook,
        review: &Value,
        uid: &str,
    ) -> std::result::Result<Value, String> {
        let query = format!("timeout={}s", hook.timeout.as_secs());
        let answer = post_review(
            self.reader.as_ref(),
            &self.clients,
            &hook.client_config,
            &query,
            review,
            hook.timeout,
        )
        .await
        .map_err(|why| format!("failed to call webhook: {why}"))?;
        let mut answer = answer;
        let response = answer
            .get_mut("response")
            .filter(|r| r.is_object())
            .map(Value::take)
            .ok_or("received invalid webhook response: response is empty")?;
        if response["uid"] != uid {
            return Err(format!(
                "received invalid webhook response: expected response.uid={uid:?}, got {:?}",
                response["uid"].as_str().unwrap_or_default()
            ));
        }
        Ok(response)
    }

    /// Whether a failed call stops the write (failurePolicy Fail), as kube's
    /// 500; with Ignore it is logged and the write goes on.
    fn failed(&self, hook: &Hook, why: String) -> Result<()> {
        if hook.fail_open {
            tracing::warn!(webhook = %hook.name, error = %why, "failed calling webhook, failing open");
            return Ok(());
        }
        Err(Error::internal(format!(
            "failed calling webhook {:?}: {why}",
            hook.name
        )))
    }
}

/// The AdmissionReview v1 a webhook receives for the write.
fn review(attrs: &Attributes<'_>, uid: &str, object: Option<&Value>) -> Value {
    let resource = attrs.resource;
    let kind = json!({"group": resource.group, "version": resource.version, "kind": resource.kind});
    let gvr =
        json!({"group": resource.group, "version": resource.version, "resource": resource.plural});
    let user = attrs.user;
    let options = match attrs.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    let mut request = json!({
        "uid": uid,
        "kind": kind,
        "resource": gvr,
        "requestKind": kind,
        "requestResource": gvr,
        "name": attrs.name,
        "operation": attrs.operation.as_str(),
        "userInfo": {"username": user.name, "groups": user.groups},
        "object": object,
        "oldObject": attrs.old,
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
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// kube's error for a webhook's refusal (`ToStatusErr`): its status's code
/// (400 when below it) and `admission webhook "x" denied the request: why`.
fn denied(name: &str, status: &Value) -> Error {
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let by = format!("admission webhook {name:?} denied the request");
    let message = match (status["message"].as_str(), status["reason"].as_str()) {
        (Some(message), _) if !message.is_empty() => format!("{by}: {message}"),
        (_, Some(reason)) if !reason.is_empty() => format!("{by}: {reason}"),
        _ => format!("{by} without explanation"),
    };
    let reason = status["reason"]
        .as_str()
        .and_then(Reason::parse)
        .filter(|r| r.http_code() == code)
        .unwrap_or_else(|| reason_for_code(code));
    Error::new(reason, message)
}

/// Passes a response's warnings to the client.
fn pass_warnings(attrs: &Attributes<'_>, response: &Value) {
    for warning in response["warnings"].as_array().into_iter().flatten() {
        if let Some(text) = warning.as_str() {
            attrs.warn(text);
        }
    }
}

/// Applies a mutating webhook's JSONPatch, if it sent one; whether the
/// object changed.
fn apply_patch(hook: &Hook, response: &Value, object: &mut Value) -> Result<bool> {
    let Some(patch) = response["patch"].as_str().filter(|p| !p.is_empty()) else {
        return Ok(false);
    };
    let invalid = |why: String| {
        Error::internal(format!(
            "received invalid webhook response from {:?}: {why}",
            hook.name
        ))
    };
    if response["patchType"] != "JSONPatch" {
        return Err(invalid(format!(
            "unsupported patch type {}",
            response["patchType"]
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(|e| invalid(format!("patch is not base64: {e}")))?;
    let operations: Value =
        serde_json::from_slice(&bytes).map_err(|e| invalid(format!("patch is not JSON: {e}")))?;
    let patched = apimachinery::patch::json::apply(object, &operations)
        .map_err(|e| Error::internal(e.status_message()))?;
    let changed = patched != *object;
    *object = patched;
    Ok(changed)
}

#[async_trait::async_trait]
impl AdmissionPlugin for Webhooks {
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<()> {
        let configured = self.configured();
        let hooks = self
            .relevant(&configured.mutating, attrs, Some(obj))
            .await?;
        if hooks.is_empty() {
            return Ok(());
        }
        let uid = uuid::Uuid::new_v4().to_string();
        // Which webhooks changed the object, in call order: a webhook
        // asking to be reinvoked is called again once if a later one did.
        let mut changed = vec![false; hooks.len()];
        for (index, hook) in hooks.iter().enumerate() {
            changed[index] = self.mutate(hook, attrs, &uid, obj).await?;
        }
        for (index, hook) in hooks.iter().enumerate() {
            if hook.reinvoke && changed[index + 1..].iter().any(|c| *c) {
                self.mutate(hook, attrs, &uid, obj).await?;
            }
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        let configured = self.configured();
        let hooks = self.relevant(&configured.validating, attrs, obj).await?;
        if hooks.is_empty() {
            return Ok(());
        }
        let uid = uuid::Uuid::new_v4().to_string();
        let review = review(attrs, &uid, obj);
        let answers =
            futures::future::join_all(hooks.iter().map(|hook| self.call(hook, &review, &uid)))
                .await;
        for (hook, answer) in hooks.iter().zip(answers) {
            match answer {
                Err(why) => self.failed(hook, why)?,
                Ok(response) => {
                    pass_warnings(attrs, &response);
                    if response["allowed"] != true {
                        return Err(denied(&hook.name, &response["status"]));
                    }
                }
            }
        }
        Ok(())
    }
}

impl Webhooks {
    /// Calls one mutating webhook and applies its patch; whether it changed
    /// the object.
    async fn mutate(
        &self,
        hook: &Hook,
        attrs: &Attributes<'_>,
        uid: &str,
        obj: &mut Value,
    ) -> Result<bool> {
        let review = review(attrs, uid, Some(obj));
        match self.call(hook, &review, uid).await {
            Err(why) => self.failed(hook, why).map(|()| false),
            Ok(response) => {
                pass_warnings(attrs, &response);
                if response["allowed"] != true {
                    return Err(denied(&hook.name, &response["status"]));
                }
                apply_patch(hook, &response, obj)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::UserInfo;

    fn attrs<'a>(
        resource: &'a crate::resource::Resource,
        user: &'a UserInfo,
        operation: Operation,
        subresource: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            operation,
            resource,
            subresource,
            namespace: "ns",
            name: "x",
            old: None,
            user,
            dry_run: false,
            warnings: Default::default(),
        }
    }

    struct Plain;
    impl crate::strategy::Strategy for Plain {}

    fn configmaps() -> crate::resource::Resource {
        crate::resource::Resource::builtin::<k8s_openapi::api::core::v1::ConfigMap>(Plain)
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
        assert!(all.matches(&create, true));
        assert!(!all.matches(&status, true), "no subresource in the rule");
        let subs = rule(
            json!({"operations": ["UPDATE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["configmaps/*"]}),
        );
        assert!(!subs.matches(&create, true), "CREATE is not UPDATE");
        assert!(subs.matches(&status, true));
        let star = rule(
            json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v2"], "resources": ["*"], "scope": "Namespaced"}),
        );
        assert!(!star.matches(&create, true), "Exact needs the version");
        assert!(star.matches(&create, false), "Equivalent takes any version");
        let cluster = rule(
            json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "scope": "Cluster"}),
        );
        assert!(!cluster.matches(&create, true), "configmaps are namespaced");
    }

    #[test]
    fn refusals_are_in_kubes_words() {
        let error = denied(
            "deny.example.com",
            &json!({"code": 403, "message": "no thanks"}),
        );
        assert_eq!(error.code(), 403);
        assert_eq!(
            error.to_string(),
            "admission webhook \"deny.example.com\" denied the request: no thanks"
        );
        let error = denied("deny.example.com", &Value::Null);
        assert_eq!(error.code(), 400);
        assert_eq!(
            error.to_string(),
            "admission webhook \"deny.example.com\" denied the request without explanation"
        );
        let error = denied(
            "d.example.com",
            &json!({"code": 200, "reason": "Gone fishing"}),
        );
        assert_eq!(error.code(), 400, "a refusal is never below 400");
        assert!(
            error
                .to_string()
                .ends_with("denied the request: Gone fishing")
        );
    }

    #[test]
    fn patches_and_selectors() {
        let hook = Hook::parse(&json!({
            "name": "m.example.com", "sideEffects": "None", "timeoutSeconds": 99,
            "objectSelector": {"matchLabels": {"team": "a"}},
        }));
        assert_eq!(hook.timeout, Duration::from_secs(MAX_TIMEOUT));
        assert!(hook.dry_run_safe && !hook.fail_open);
        let labelled = json!({"metadata": {"labels": {"team": "a"}}});
        let other = json!({"metadata": {"labels": {"team": "b"}}});
        assert!(hook.selects_object(Some(&labelled), None).unwrap());
        assert!(!hook.selects_object(Some(&other), None).unwrap());
        assert!(hook.selects_object(Some(&other), Some(&labelled)).unwrap());
        let patch = base64::engine::general_purpose::STANDARD
            .encode(r#"[{"op": "add", "path": "/data", "value": {"k": "v"}}]"#);
        let mut object = json!({"metadata": {"name": "x"}});
        let response = json!({"patchType": "JSONPatch", "patch": patch});
        assert!(apply_patch(&hook, &response, &mut object).unwrap());
        assert_eq!(object["data"]["k"], "v");
        assert!(!apply_patch(&hook, &json!({}), &mut object).unwrap());
        let bad = json!({"patchType": "Merge", "patch": "e30="});
        assert_eq!(
            apply_patch(&hook, &bad, &mut object).unwrap_err().code(),
            500
        );
    }
}
