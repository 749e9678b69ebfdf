//! scheduling.k8s.io/v1 PriorityClasses: preemption PreemptLowerPriority by
//! default; user classes stay at or below one billion and `system-` names
//! are reserved; value and preemption policy never change.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, int, text};

/// The highest priority a user-defined class may have.
const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;
/// The built-in classes kube reserves and creates at start: name, value, description.
pub const SYSTEM_CLASSES: &[(&str, i64, &str)] = &[
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// The rules of `scheduling.k8s.io/v1/PriorityClass`.
pub struct PriorityClassStrategy;

impl Strategy for PriorityClassStrategy {
    fn defaults(&self, obj: &mut Value) {
        default(obj, "/preemptionPolicy", json!("PreemptLowerPriority"));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let (name, value) = (text(obj, "/metadata/name"), int(obj, "/value").unwrap_or(0));
        if name.starts_with("system-") {
            match SYSTEM_CLASSES.iter().find(|(n, _, _)| *n == name) {
                Some((_, expected, _)) if *expected == value => {}
                Some((_, expected, _)) => errs.push(FieldError::forbidden(
                    "metadata.name",
                    format!("priority class names with 'system-' prefix are reserved for system use only. error: value of {name} PriorityClass must be {expected}"),
                )),
                None => errs.push(FieldError::forbidden(
                    "metadata.name",
                    format!("priority class names with 'system-' prefix are reserved for system use only. error: {name} is not a known system priority class"),
                )),
            }
        } else if value > HIGHEST_USER_PRIORITY {
            errs.push(FieldError::forbidden(
                "value",
                format!(
                    "maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"
                ),
            ));
        }
        let policy = text(obj, "/preemptionPolicy");
        if !matches!(policy, "Never" | "PreemptLowerPriority") {
            errs.push(FieldError::not_supported(
                "preemptionPolicy",
                policy,
                &["Never", "PreemptLowerPriority"],
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("value") != old.get("value") {
            errs.push(FieldError::forbidden(
                "value",
                "may not be changed in an update.",
            ));
        }
        errs.extend(fields::immutable(
            new,
            old,
            "/preemptionPolicy",
            "preemptionPolicy",
        ));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Value",
                "integer",
                "value represents the integer value of this priority class.",
            ),
            Column::new(
                "Global-Default",
                "boolean",
                "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
            ),
            table::age_column(),
            Column::new(
                "PreemptionPolicy",
                "string",
                "preemptionPolicy is the Policy for preempting pods with lower priority.",
            ),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let policy = text(obj, "/preemptionPolicy");
        vec![
            table::name_cell(obj),
            fields::int_cell(obj, "/value"),
            json!(obj.get("globalDefault") == Some(&Value::Bool(true))),
            table::age_cell(obj),
            json!(if policy.is_empty() {
                "PreemptLowerPriority"
            } else {
                policy
            }),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_and_row() {
        let mut pc = json!({"metadata": {"name": "high"}, "value": 1000});
        PriorityClassStrategy.defaults(&mut pc);
        assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
        assert!(PriorityClassStrategy.validate(&pc).is_empty());
        assert_eq!(PriorityClassStrategy.cells(&pc)[1], 1000);
        let huge = json!({"metadata": {"name": "huge"}, "value": 2_000_000_000i64, "preemptionPolicy": "Never"});
        assert_eq!(
            PriorityClassStrategy.validate(&huge)[0].to_string(),
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
        );
        let mut changed = pc.clone();
        changed["value"] = json!(5);
        assert_eq!(
            PriorityClassStrategy.validate_update(&changed, &pc)[0].to_string(),
            "value: Forbidden: may not be changed in an update."
        );
    }
}
