//! kube's admission webhooks (admissionregistration.k8s.io/v1): the
//! Mutating- and ValidatingWebhookConfigurations, read from the watch cache
//! and compiled again only after one changes, matched against each write
//! (rules, namespaceSelector, objectSelector), and called with an
//! AdmissionReview v1 over HTTPS. Mutating webhooks run one after another
//! and may patch the object; validating webhooks run side by side.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::error::{Error, Reason, Result, reason_for_code};
use base64::Engine;
use serde_json::{Value, json};

use super::matching::{self, Conditions, Criteria, Matched, Namespaces, UserAuthorizer, Versioned};
use super::{AdmissionPlugin, Attributes};
use crate::filters::rbac::Rbac;
use crate::service_client::{Clients, ObjectReader, post_review};
use crate::storage::cacher::{Cacher, Derived, ResourceCache, generic_ingest};
use apimachinery::cel::admission::Inputs;

/// The group of the webhook configurations.
const GROUP: &str = "admissionregistration.k8s.io";
/// kube's default `timeoutSeconds`, and the most it allows.
const DEFAULT_TIMEOUT: u64 = 10;
const MAX_TIMEOUT: u64 = 30;

/// One webhook of a configuration, ready to match and call.
struct Hook {
    name: String,
    /// The configuration the webhook belongs to.
    configuration: String,
    criteria: Criteria,
    conditions: Conditions,
    fail_open: bool,
    timeout: Duration,
    dry_run_safe: bool,
    reinvoke: bool,
    client_config: Value,
}

impl Hook {
    fn parse(hook: &Value) -> Hook {
        let seconds = hook["timeoutSeconds"]
            .as_u64()
            .unwrap_or(DEFAULT_TIMEOUT)
            .clamp(1, MAX_TIMEOUT);
        Hook {
            name: hook["name"].as_str().unwrap_or_default().to_string(),
            configuration: String::new(),
            criteria: Criteria::parse(hook, "rules"),
            conditions: Conditions::parse(hook),
            fail_open: hook["failurePolicy"] == "Ignore",
            timeout: Duration::from_secs(seconds),
            dry_run_safe: matches!(hook["sideEffects"].as_str(), Some("None" | "NoneOnDryRun")),
            reinvoke: hook["reinvocationPolicy"] == "IfNeeded",
            client_config: hook["clientConfig"].clone(),
        }
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
    /// The webhooks, from the mutating then the validating configurations.
    configured: Derived<Configured>,
    namespaces: Namespaces,
    rbac: Rbac,
    reader: Arc<dyn ObjectReader>,
    clients: Clients,
}

impl Webhooks {
    /// Follows the webhook configurations (and namespaces, for
    /// namespaceSelector, and the RBAC policy, for matchConditions'
    /// `authorizer`) in `cacher`; a Service a webhook names is resolved to
    /// its endpoints from storage.
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
        Ok(Webhooks {
            configured: Derived::new(caches),
            rbac: Rbac::new(&cacher, etcd_root).await?,
            namespaces: Namespaces::new(cacher, etcd_root).await?,
            reader,
            clients: Clients::new(None),
        })
    }

    /// Reads the namespaces of namespaceSelectors from `namespaces`
    /// instead of the server's own cache.
    pub fn with_namespaces(mut self, namespaces: Namespaces) -> Self {
        self.namespaces = namespaces;
        self
    }

    /// Resolves the Services webhooks name through `reader` instead of
    /// storage (an aggregated server asks the front door).
    pub fn resolving_services(mut self, reader: Arc<dyn ObjectReader>) -> Self {
        self.reader = reader;
        self
    }

    /// The webhooks as the caches hold them now.
    fn configured(&self) -> Arc<Configured> {
        self.configured.get(|caches| {
            let compile = |cache: &ResourceCache| -> Vec<Hook> {
                cache
                    .snapshot(cache.prefix(), 0)
                    .objects
                    .iter()
                    .flat_map(|object| {
                        let configuration = object.value();
                        let name = configuration["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default();
                        configuration["webhooks"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|hook| Hook {
                                configuration: name.to_string(),
                                ..Hook::parse(hook)
                            })
                            .collect::<Vec<_>>()
                    })
                    .collect()
            };
            Configured {
                mutating: compile(&caches[0]),
                validating: compile(&caches[1]),
            }
        })
    }

    /// The webhooks of `hooks` that the write must go through.
    async fn relevant<'h>(
        &self,
        hooks: &'h [Hook],
        attrs: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<Vec<(&'h Hook, Matched)>> {
        if hooks.is_empty() || matching::exempt(attrs) {
            return Ok(Vec::new());
        }
        let mut relevant = Vec::new();
        for hook in hooks {
            let Some(matched) = hook.criteria.matched(attrs) else {
                continue;
            };
            let selected = hook
                .criteria
                .selects(attrs, object, &self.namespaces)
                .await
                .map_err(|why| {
                    Error::internal(format!("failed calling webhook {:?}: {why}", hook.name))
                })?;
            if !selected {
                continue;
            }
            if !hook.conditions.is_empty() {
                let versioned = Versioned::of(attrs, object, &matched).await?;
                let request = matching::admission_request(attrs, "", versioned.version);
                let uses = hook.conditions.uses();
                let inputs = Inputs {
                    request: Some(&request),
                    authorizer: uses
                        .has("authorizer")
                        .then(|| UserAuthorizer::new(&self.rbac, attrs.user)),
                    ..Default::default()
                };
                let input = matching::activation(attrs, &versioned, inputs, uses);
                match hook.conditions.hold(&input) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(_) if hook.fail_open => continue,
                    Err(why) => return Err(super::forbidden(attrs, &why)),
                }
            }
            if attrs.dry_run && !hook.dry_run_safe {
                return Err(Error::bad_request(format!(
                    "admission webhook {:?} does not support dry run",
                    hook.name
                )));
            }
            relevant.push((hook, matched));
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
    /// 500; with Ignore it is logged, noted for the audit log under `key`
    /// (kube's `failed-open.…/round_R_index_I`), and the write goes on.
    fn failed(&self, hook: &Hook, why: String, attrs: &Attributes<'_>, key: String) -> Result<()> {
        if hook.fail_open {
            tracing::warn!(webhook = %hook.name, error = %why, "failed calling webhook, failing open");
            attrs.annotate(key, hook.name.clone());
            return Ok(());
        }
        Err(Error::internal(format!(
            "failed calling webhook {:?}: {why}",
            hook.name
        )))
    }
}

/// The AdmissionReview v1 a webhook receives for the write, in the
/// version its rules matched.
fn review(attrs: &Attributes<'_>, uid: &str, versioned: &Versioned<'_>) -> Value {
    let mut request = matching::admission_request(attrs, uid, versioned.version);
    request["object"] = json!(versioned.object());
    request["oldObject"] = json!(versioned.old());
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

/// Passes a response's warnings to the client, and its auditAnnotations
/// to the audit event (as `<webhook>/<key>`).
fn pass_notes(hook: &Hook, attrs: &Attributes<'_>, response: &Value) {
    for warning in response["warnings"].as_array().into_iter().flatten() {
        if let Some(text) = warning.as_str() {
            attrs.warn(text);
        }
    }
    for (key, value) in response["auditAnnotations"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if let Some(value) = value.as_str() {
            attrs.annotate(format!("{}/{key}", hook.name), value);
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
            changed[index] = self.mutate(hook, attrs, &uid, obj, (0, index)).await?;
        }
        for (index, hook) in hooks.iter().enumerate() {
            if hook.0.reinvoke && changed[index + 1..].iter().any(|c| *c) {
                self.mutate(hook, attrs, &uid, obj, (1, index)).await?;
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
        // One review per version the webhooks' rules matched in.
        let mut reviews: Vec<(&Matched, Value)> = Vec::new();
        for (_, matched) in &hooks {
            if !reviews.iter().any(|(m, _)| *m == matched) {
                let versioned = Versioned::of(attrs, obj, matched).await?;
                reviews.push((matched, review(attrs, &uid, &versioned)));
            }
        }
        let answers = futures::future::join_all(hooks.iter().map(|(hook, matched)| {
            let review = reviews
                .iter()
                .find(|(m, _)| *m == matched)
                .map(|(_, review)| review)
                .unwrap_or(&Value::Null);
            self.call(hook, review, &uid)
        }))
        .await;
        for (index, ((hook, _), answer)) in hooks.iter().zip(answers).enumerate() {
            match answer {
                Err(why) => {
                    let key = format!(
                        "failed-open.validating.webhook.admission.k8s.io/round_0_index_{index}"
                    );
                    self.failed(hook, why, attrs, key)?
                }
                Ok(response) => {
                    pass_notes(hook, attrs, &response);
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
    /// Calls one mutating webhook, the `index`-th of `round` (0, or 1 when
    /// reinvoked), and applies its patch; whether it changed the object.
    /// kube's `mutation.webhook…` annotation records the call.
    /// A webhook matched in another version sees the object converted to
    /// it, and its patch is converted back.
    async fn mutate(
        &self,
        (hook, matched): &(&Hook, Matched),
        attrs: &Attributes<'_>,
        uid: &str,
        obj: &mut Value,
        (round, index): (usize, usize),
    ) -> Result<bool> {
        let versioned = Versioned::of(attrs, Some(obj), matched).await?;
        let review = review(attrs, uid, &versioned);
        let mut seen = match matched.version() {
            Some(_) => versioned.object.map(std::borrow::Cow::into_owned),
            None => None,
        };
        let at = format!("round_{round}_index_{index}");
        let changed = match self.call(hook, &review, uid).await {
            Err(why) => {
                let key = format!("failed-open.mutating.webhook.admission.k8s.io/{at}");
                return self.failed(hook, why, attrs, key).map(|()| false);
            }
            Ok(response) => {
                pass_notes(hook, attrs, &response);
                if response["allowed"] != true {
                    return Err(denied(&hook.name, &response["status"]));
                }
                match (matched.version(), attrs.equivalents, seen.as_mut()) {
                    (Some(_), Some(equivalents), Some(seen)) => {
                        let changed = apply_patch(hook, &response, seen)?;
                        if changed {
                            let version = &attrs.resource.version;
                            *obj = equivalents.convert(attrs.resource, seen, version).await?;
                        }
                        changed
                    }
                    _ => apply_patch(hook, &response, obj)?,
                }
            }
        };
        let record =
            json!({"configuration": hook.configuration, "webhook": hook.name, "mutated": changed});
        attrs.annotate(
            format!("mutation.webhook.admission.k8s.io/{at}"),
            record.to_string(),
        );
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            hook.criteria.selects_object(Some(&labelled), None),
            Ok(true)
        );
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
