//! coordination.k8s.io/v1 Leases: leader election and node heartbeats.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, int, is_set, text};

/// The rules of `coordination.k8s.io/v1/Lease`.
pub struct LeaseStrategy;

impl Strategy for LeaseStrategy {
    fn defaults(&self, obj: &mut Value) {
        // A struct in kube's Lease: answered `{}` when unset.
        if !is_set(obj, "/spec") {
            obj["spec"] = json!({});
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(duration) = int(obj, "/spec/leaseDurationSeconds").filter(|d| *d <= 0) {
            errs.push(FieldError::invalid(
                "spec.leaseDurationSeconds",
                duration,
                "must be greater than 0",
            ));
        }
        errs.extend(fields::non_negative(
            obj,
            "/spec/leaseTransitions",
            "spec.leaseTransitions",
        ));
        let strategy = text(obj, "/spec/strategy");
        if is_set(obj, "/spec/strategy") && strategy != "OldestEmulationVersion" {
            errs.push(FieldError::not_supported(
                "spec.strategy",
                strategy,
                &["OldestEmulationVersion"],
            ));
        }
        if is_set(obj, "/spec/preferredHolder") && !is_set(obj, "/spec/strategy") {
            errs.push(FieldError::forbidden(
                "spec.preferredHolder",
                "may only be specified if `strategy` is defined",
            ));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new("Holder", "string", "The holder of the lease"),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            json!(text(obj, "/spec/holderIdentity")),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_and_row() {
        let lease = json!({"metadata": {"name": "kube-scheduler"}, "spec": {"holderIdentity": "node-1_abc", "leaseDurationSeconds": 15}});
        assert!(LeaseStrategy.validate(&lease).is_empty());
        assert_eq!(LeaseStrategy.cells(&lease)[1], "node-1_abc");
        let bad = json!({"spec": {"leaseDurationSeconds": 0}});
        assert_eq!(
            LeaseStrategy.validate(&bad)[0].to_string(),
            "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
        );
    }
}
