//! Evicting a pod (`pods/eviction`, a policy/v1 Eviction), what `kubectl
//! drain` asks: a pod that is not running (Pending, Succeeded, Failed) or
//! already being deleted is deleted at once; a running one only if the
//! PodDisruptionBudget that selects it allows a disruption, which the
//! eviction spends (the budget's `disruptionsAllowed` and `disruptedPods`)
//! before it deletes the pod. Otherwise kube's answers: 429 when the
//! budget allows none (or has not been computed yet), 500 when two budgets
//! select the pod.

use std::sync::Arc;

use apimachinery::error::{Error, Reason, Result, StatusCause};
use apimachinery::group_version::GroupVersionKind;
use apimachinery::label_selector::LabelSelector;
use generic_server::registry::{DeleteOptions, ListOptions, Store, WriteOptions, now_rfc3339};
use generic_server::request::ApiRequest;
use generic_server::rest::CreateOnly;
use generic_server::server::ApiServer;
use serde_json::{Value, json};

use crate::admission::node_restriction;
use crate::resources::fields::{is_set, text};

/// How often a spent disruption is retried when the budget changed meanwhile.
const BUDGET_ATTEMPTS: usize = 5;

/// Serves `pods/eviction` on `server`, if it stores pods and budgets.
pub fn install(server: &ApiServer) {
    let (Some(pods), Some(budgets)) = (
        server.store("", "v1", "pods"),
        server.store("policy", "v1", "poddisruptionbudgets"),
    ) else {
        return;
    };
    let kind = GroupVersionKind::new("policy", "v1", "Eviction");
    let resource = pods.resource.clone();
    server.add_create_only(
        &resource,
        "eviction",
        kind,
        Arc::new(Evict { pods, budgets }),
    );
}

/// Whether `pod` may go without asking its budget: not running, or going.
fn ignores_budget(pod: &Value) -> bool {
    is_set(pod, "/metadata/deletionTimestamp")
        || matches!(
            text(pod, "/status/phase"),
            "" | "Pending" | "Succeeded" | "Failed"
        )
}

/// kube's refusal of an eviction its budget does not allow.
fn too_many_requests(cause: String) -> Error {
    Error::WithCauses {
        reason: Reason::TooManyRequests,
        message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
        causes: vec![StatusCause {
            reason: Some("DisruptionBudget".into()),
            message: Some(cause),
            field: None,
        }],
    }
}

/// The budget with one disruption spent on `pod`, or why it cannot be.
fn spend(mut budget: Value, pod: &str) -> Result<Value> {
    let name = text(&budget, "/metadata/name").to_string();
    let observed = budget["status"]["observedGeneration"].as_i64().unwrap_or(0);
    let generation = budget["metadata"]["generation"].as_i64().unwrap_or(0);
    if observed < generation {
        return Err(too_many_requests(format!(
            "The disruption budget {name} is still being processed by the server."
        )));
    }
    let allowed = budget["status"]["disruptionsAllowed"].as_i64().unwrap_or(0);
    if allowed < 0 {
        return Err(Error::new(
            Reason::Forbidden,
            "pdb disruptions allowed is negative",
        ));
    }
    if allowed == 0 {
        return Err(too_many_requests(format!(
            "The disruption budget {name} needs {} healthy pods and has {} currently",
            budget["status"]["desiredHealthy"].as_i64().unwrap_or(0),
            budget["status"]["currentHealthy"].as_i64().unwrap_or(0),
        )));
    }
    let disrupted = budget["status"]["disruptedPods"]
        .as_object()
        .map(|m| m.len())
        .unwrap_or(0);
    // kube's bound on pods awaiting their deletion's effect on the budget.
    if disrupted > 2000 {
        return Err(Error::new(
            Reason::Forbidden,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    budget["status"]["disruptionsAllowed"] = json!(allowed - 1);
    budget["status"]["disruptedPods"][pod] = json!(now_rfc3339());
    Ok(budget)
}

/// Evicts pods of one store, asking the budgets of another.
struct Evict {
    pods: Arc<Store>,
    budgets: Arc<Store>,
}

impl Evict {
    /// The budgets in `namespace` that select `pod`.
    async fn budgets_of(&self, namespace: &str, pod: &Value) -> Result<Vec<Value>> {
        let labels = pod["metadata"]["labels"].as_object();
        let listed = self
            .budgets
            .list(namespace, &ListOptions::default())
            .await?;
        Ok(listed
            .items
            .iter()
            .map(|b| b.value())
            .filter(|b| {
                // A budget without a selector, or with an empty one, selects
                // nothing (kube's eviction skips it).
                let selector = &b["spec"]["selector"];
                let empty = selector.as_object().is_none_or(|s| s.is_empty());
                !empty
                    && LabelSelector::from_label_selector_object(selector)
                        .is_ok_and(|s| s.matches(labels))
            })
            .collect())
    }

    /// Spends a disruption of `budget` on `pod`, again on a newer budget if
    /// another eviction spent one meanwhile.
    async fn spend_on(
        &self,
        namespace: &str,
        mut budget: Value,
        pod: &str,
        opts: &WriteOptions,
    ) -> Result<()> {
        let name = text(&budget, "/metadata/name").to_string();
        for _ in 0..BUDGET_ATTEMPTS {
            let spent = spend(budget, pod)?;
            match self
                .budgets
                .update(namespace, &name, "status", spent, opts)
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if e.reason() == Reason::Conflict => {
                    budget = self.budgets.get(namespace, &name, None).await?.value();
                }
                Err(e) => return Err(e),
            }
        }
        Err(too_many_requests(format!(
            "The disruption budget {name} changed too often to spend a disruption"
        )))
    }
}

#[async_trait::async_trait]
impl CreateOnly for Evict {
    async fn create(&self, req: &ApiRequest, eviction: Value) -> Result<Value> {
        let name = &req.info.name;
        if text(&eviction, "/metadata/name") != name {
            return Err(Error::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let namespace = &req.info.namespace;
        let options = &eviction["deleteOptions"];
        let dry_run = req.param("dryRun").is_some_and(|d| d == "All")
            || options["dryRun"]
                .as_array()
                .is_some_and(|d| d.iter().any(|v| v == "All"));
        let delete = DeleteOptions {
            uid: options
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(String::from),
            resource_version: options
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from),
            propagation_policy: options["propagationPolicy"].as_str().map(String::from),
            dry_run,
            user: req.user.clone(),
        };
        let pod = self.pods.get(namespace, name, None).await?.value();
        // NodeRestriction: a kubelet evicts only pods bound to its node.
        if let Some(why) = node_restriction::eviction_refusal(&req.user, &pod) {
            return Err(node_restriction::refused("pods", name, why));
        }
        if !ignores_budget(&pod) {
            let mut budgets = self.budgets_of(namespace, &pod).await?;
            if budgets.len() > 1 {
                return Err(Error::internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                ));
            }
            if let Some(budget) = budgets.pop() {
                let opts = WriteOptions {
                    dry_run,
                    user: req.user.clone(),
                    ..WriteOptions::default()
                };
                self.spend_on(namespace, budget, name, &opts).await?;
            }
        }
        self.pods.delete(namespace, name, &delete).await?;
        Ok(crate::binding::success())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(generation: i64, observed: i64, allowed: i64) -> Value {
        json!({"metadata": {"name": "b", "generation": generation},
               "status": {"observedGeneration": observed, "disruptionsAllowed": allowed,
                          "desiredHealthy": 2, "currentHealthy": 2}})
    }

    #[test]
    fn a_budget_allows_what_it_has_left() {
        let spent = spend(budget(1, 1, 1), "p").unwrap();
        assert_eq!(spent["status"]["disruptionsAllowed"], 0);
        assert!(spent["status"]["disruptedPods"]["p"].is_string());
        let none = spend(spent, "q").unwrap_err();
        assert_eq!(none.code(), 429);
        let status = serde_json::to_value(none.to_status()).unwrap();
        assert_eq!(
            status["message"],
            "Cannot evict pod as it would violate the pod's disruption budget."
        );
        assert_eq!(status["details"]["causes"][0]["reason"], "DisruptionBudget");
        assert_eq!(
            status["details"]["causes"][0]["message"],
            "The disruption budget b needs 2 healthy pods and has 2 currently"
        );
        let stale = spend(budget(2, 1, 3), "p").unwrap_err();
        assert!(
            serde_json::to_value(stale.to_status()).unwrap()["details"]["causes"][0]["message"]
                .as_str()
                .unwrap()
                .contains("still being processed")
        );
        assert_eq!(spend(budget(1, 1, -1), "p").unwrap_err().code(), 403);
    }

    #[test]
    fn pods_that_do_not_run_go_without_asking() {
        assert!(ignores_budget(&json!({"status": {"phase": "Pending"}})));
        assert!(ignores_budget(&json!({"status": {"phase": "Succeeded"}})));
        assert!(!ignores_budget(&json!({"status": {"phase": "Running"}})));
        assert!(ignores_budget(
            &json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}})
        ));
    }
}
