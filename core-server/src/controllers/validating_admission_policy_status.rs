//! The ValidatingAdmissionPolicy status controller (kube's
//! `validatingadmissionpolicy-status-controller`): a policy whose
//! `metadata.generation` is ahead of its `status.observedGeneration` is
//! type-checked, and its status gets that generation and
//! `typeChecking.expressionWarnings` (an empty `typeChecking` when every
//! expression checks).
//!
//! Built-in kinds are checked against this server's OpenAPI schemas;
//! custom resources against the schemas of the CRDs listed (through the
//! chain) when a policy is checked.

use std::sync::Arc;

use actix::prelude::*;
use apimachinery::cel::type_checking::{ExpressionWarning, KindSchemas, type_check};
use apimachinery::error::{Error, Reason};
use apimachinery::group_version::GroupVersionKind;
use apimachinery::openapi::inline_refs;
use generic_server::loopback::Loopback;
use generic_server::registry::Store;
use serde_json::{Value, json};

/// Where custom resource definitions are listed.
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// Where policies are served.
const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";

/// Writes the type-checking status of ValidatingAdmissionPolicies.
pub struct PolicyStatusController {
    client: Loopback,
    builtins: Arc<Vec<Arc<Store>>>,
}

impl PolicyStatusController {
    /// A controller writing through `client`, checking built-in kinds
    /// against the schemas of `stores` (the server's own).
    pub fn new(client: Loopback, stores: Vec<Arc<Store>>) -> Self {
        PolicyStatusController {
            client,
            builtins: Arc::new(stores),
        }
    }
}

impl Actor for PolicyStatusController {
    type Context = Context<Self>;
}

/// A policy's current state.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync(pub Value);

impl Handler<Sync> for PolicyStatusController {
    type Result = ();

    fn handle(&mut self, Sync(policy): Sync, _ctx: &mut Context<Self>) {
        let generation = policy
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let observed = policy
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if generation <= observed {
            return;
        }
        let (client, builtins) = (self.client.clone(), self.builtins.clone());
        tokio::spawn(async move {
            if let Err(e) = reconcile(&client, builtins, policy, generation).await
                && !matches!(e.reason(), Reason::Conflict | Reason::NotFound)
            {
                tracing::warn!(error = %e, "writing a ValidatingAdmissionPolicy's status failed");
            }
        });
    }
}

/// Type-checks `policy` and writes its status for `generation`; a
/// conflict means a newer state is on its way to the controller.
async fn reconcile(
    client: &Loopback,
    builtins: Arc<Vec<Arc<Store>>>,
    mut policy: Value,
    generation: i64,
) -> Result<(), Error> {
    let name = policy
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    // Without an extension server there are no custom resources to check;
    // any other failure leaves the policy to the next resync.
    let crds = match client.get(CRDS).await {
        Ok(list) => list["items"].as_array().cloned().unwrap_or_default(),
        Err(e) if e.reason() == Reason::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let spec = policy["spec"].clone();
    let checked = tokio::task::spawn_blocking(move || type_check(&spec, &Kinds { builtins, crds }));
    let Ok(warnings) = checked.await else {
        return Err(Error::internal("type checking the policy failed"));
    };
    policy["status"] = status(&policy["status"], generation, &warnings);
    client
        .update(&format!("{POLICIES}/{name}/status"), &policy)
        .await
        .map(|_| ())
}

/// `current` status with the checked generation and its warnings (other
/// fields, such as conditions, kept).
fn status(current: &Value, generation: i64, warnings: &[ExpressionWarning]) -> Value {
    let mut status = match current {
        Value::Object(_) => current.clone(),
        _ => json!({}),
    };
    status["observedGeneration"] = json!(generation);
    status["typeChecking"] = match warnings {
        [] => json!({}),
        _ => json!({
            "expressionWarnings": warnings.iter().map(ExpressionWarning::to_value).collect::<Vec<_>>()
        }),
    };
    status
}

/// The kinds a policy can match: this server's built-ins and the CRDs'.
struct Kinds {
    builtins: Arc<Vec<Arc<Store>>>,
    crds: Vec<Value>,
}

impl Kinds {
    /// The CRD serving `group`'s version `version` whose `names.<name>`
    /// is `value`.
    fn crd(&self, group: &str, version: &str, name: &str, value: &str) -> Option<&Value> {
        self.crds.iter().find(|crd| {
            let spec = &crd["spec"];
            spec["group"] == group
                && spec["names"][name] == value
                && served_version(crd, version).is_some()
        })
    }
}

/// A CRD's entry for `version`, if it defines it.
fn served_version<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == version)
}

impl KindSchemas for Kinds {
    fn kind(&self, group: &str, version: &str, resource: &str) -> Option<String> {
        let builtin = self.builtins.iter().find(|s| {
            let r = &s.resource;
            r.group == group && r.version == version && r.plural == resource
        });
        match builtin {
            Some(store) => Some(store.resource.kind.clone()),
            None => self.crd(group, version, "plural", resource)?["spec"]["names"]["kind"]
                .as_str()
                .map(String::from),
        }
    }

    fn schema(&self, gvk: &GroupVersionKind) -> Option<Value> {
        let builtin = self.builtins.iter().find(|s| s.resource.gvk() == *gvk);
        if let Some(store) = builtin {
            let schema = store.schema()?;
            return Some(inline_refs(&schema.root, &schema.components));
        }
        let crd = self.crd(&gvk.group, &gvk.version, "kind", &gvk.kind)?;
        served_version(crd, &gvk.version)?
            .pointer("/schema/openAPIV3Schema")
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds() -> Kinds {
        let crd = json!({"spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}}],
        }});
        Kinds {
            builtins: Arc::new(Vec::new()),
            crds: vec![crd],
        }
    }

    #[test]
    fn custom_resources_are_known_by_their_crds() {
        let kinds = kinds();
        assert_eq!(
            kinds.kind("example.com", "v1", "widgets").as_deref(),
            Some("Widget")
        );
        assert_eq!(kinds.kind("example.com", "v2", "widgets"), None);
        assert_eq!(
            kinds.schema(&GroupVersionKind::new("example.com", "v1", "Widget")),
            Some(json!({"type": "object"}))
        );
        assert_eq!(
            kinds.schema(&GroupVersionKind::new("example.com", "v1", "Gadget")),
            None
        );
    }

    #[test]
    fn status_keeps_other_fields_and_empties_type_checking() {
        let current = json!({"conditions": [{"type": "X"}], "observedGeneration": 1});
        let warning = ExpressionWarning {
            field_ref: "spec.validations[0].expression".into(),
            warning: "w".into(),
        };
        assert_eq!(
            status(&current, 2, &[warning]),
            json!({"conditions": [{"type": "X"}], "observedGeneration": 2, "typeChecking": {
                "expressionWarnings": [{"fieldRef": "spec.validations[0].expression", "warning": "w"}]}})
        );
        assert_eq!(
            status(&Value::Null, 3, &[]),
            json!({"observedGeneration": 3, "typeChecking": {}})
        );
    }
}
