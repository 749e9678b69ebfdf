//! kube's DefaultTolerationSeconds admission: a pod that does not tolerate
//! the `not-ready` and `unreachable` NoExecute taints tolerates them for
//! 300 seconds, on create and update.

use apimachinery::error::Result;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation};
use serde_json::{Value, json};

use crate::resources::fields::{items, text};

/// How long a pod tolerates a not-ready or unreachable node.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;
/// The taints of a node that is not ready, or unreachable.
const TAINTS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// kube's DefaultTolerationSeconds admission plugin.
pub struct DefaultTolerationSeconds;

/// Adds the tolerations of [`TAINTS`] the spec lacks (a toleration with no
/// key or no effect covers them too).
fn add_default_tolerations(spec: &mut Value) {
    for key in TAINTS {
        let tolerated = items(spec, "/tolerations").iter().any(|t| {
            let (k, effect) = (text(t, "/key"), text(t, "/effect"));
            (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        });
        if tolerated {
            continue;
        }
        if !spec["tolerations"].is_array() {
            spec["tolerations"] = json!([]);
        }
        if let Some(list) = spec["tolerations"].as_array_mut() {
            list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}));
        }
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for DefaultTolerationSeconds {
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<()> {
        if super::writes(attrs, "", "pods")
            && matches!(attrs.operation, Operation::Create | Operation::Update)
            && let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object())
        {
            add_default_tolerations(spec);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_tolerations_are_added_unless_tolerated() {
        let mut spec = json!({});
        add_default_tolerations(&mut spec);
        assert_eq!(
            spec["tolerations"],
            json!([
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ])
        );
        let mut own = json!({"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]});
        add_default_tolerations(&mut own);
        assert_eq!(own["tolerations"].as_array().map(Vec::len), Some(2));
        assert_eq!(own["tolerations"][0]["tolerationSeconds"], 5);
        assert_eq!(own["tolerations"][1]["key"], "node.kubernetes.io/not-ready");
        let mut everything = json!({"tolerations": [{"operator": "Exists"}]});
        add_default_tolerations(&mut everything);
        assert_eq!(everything["tolerations"].as_array().map(Vec::len), Some(1));
    }
}
