//! policy/v1 PodDisruptionBudgets: minAvailable or maxUnavailable (not both).

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, is_set, text};
use super::workload;

/// The rules of `policy/v1/PodDisruptionBudget`.
pub struct PodDisruptionBudgetStrategy;

impl Strategy for PodDisruptionBudgetStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0});
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if is_set(obj, "/spec/minAvailable") && is_set(obj, "/spec/maxUnavailable") {
            errs.push(FieldError::invalid(
                "spec",
                fields::value(obj, "/spec"),
                "minAvailable and maxUnavailable cannot be both set",
            ));
        }
        for field in ["minAvailable", "maxUnavailable"] {
            errs.extend(workload::validate_int_or_percent(
                obj.pointer(&format!("/spec/{field}")),
                &format!("spec.{field}"),
                true,
            ));
        }
        if let Some(selector) = obj.pointer("/spec/selector").filter(|s| !s.is_null()) {
            errs.extend(fields::label_selector(selector, "spec.selector"));
        }
        let policy = text(obj, "/spec/unhealthyPodEvictionPolicy");
        if is_set(obj, "/spec/unhealthyPodEvictionPolicy")
            && !["AlwaysAllow", "IfHealthyBudget"].contains(&policy)
        {
            errs.push(FieldError::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                policy,
                &["AlwaysAllow", "IfHealthyBudget"],
            ));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Min Available",
                "string",
                "The minimum number of pods that must be available.",
            ),
            Column::new(
                "Max Unavailable",
                "string",
                "The maximum number of pods that may be unavailable.",
            ),
            Column::new(
                "Allowed Disruptions",
                "integer",
                "Calculated number of pods that may be disrupted at this time.",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            json!(workload::int_or_percent_cell(obj, "/spec/minAvailable")),
            json!(workload::int_or_percent_cell(obj, "/spec/maxUnavailable")),
            fields::int_cell(obj, "/status/disruptionsAllowed"),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_and_row() {
        let pdb = json!({"metadata": {"name": "p"}, "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}});
        assert!(PodDisruptionBudgetStrategy.validate(&pdb).is_empty());
        let cells = PodDisruptionBudgetStrategy.cells(&pdb);
        assert_eq!(
            (cells[1].clone(), cells[2].clone()),
            (json!("50%"), json!("N/A"))
        );
        let both = json!({"spec": {"minAvailable": 1, "maxUnavailable": 1}});
        assert_eq!(
            PodDisruptionBudgetStrategy.validate(&both)[0].detail,
            "minAvailable and maxUnavailable cannot be both set"
        );
    }
}
