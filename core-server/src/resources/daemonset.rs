//! apps/v1 DaemonSets: RollingUpdate with maxUnavailable 1 and maxSurge 0,
//! 10 revisions by default; the selector must match the template and never
//! changes.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, text};
use super::{pod_spec, workload};

/// The rules of `apps/v1/DaemonSet`.
pub struct DaemonSetStrategy;

fn validate_update_strategy(obj: &Value) -> Vec<FieldError> {
    match text(obj, "/spec/updateStrategy/type") {
        "OnDelete" => Vec::new(),
        "RollingUpdate" => {
            let Some(rolling) = obj
                .pointer("/spec/updateStrategy/rollingUpdate")
                .filter(|v| !v.is_null())
            else {
                return vec![FieldError::required(
                    "spec.updateStrategy.rollingUpdate",
                    "",
                )];
            };
            let path = "spec.updateStrategy.rollingUpdate";
            let (unavailable, surge) = (rolling.get("maxUnavailable"), rolling.get("maxSurge"));
            let mut errs = workload::validate_int_or_percent(
                unavailable,
                &format!("{path}.maxUnavailable"),
                true,
            );
            errs.extend(workload::validate_int_or_percent(
                surge,
                &format!("{path}.maxSurge"),
                true,
            ));
            match (
                workload::int_or_percent_value(unavailable) != 0,
                workload::int_or_percent_value(surge) != 0,
            ) {
                (true, true) => errs.push(FieldError::invalid(
                    format!("{path}.maxSurge"),
                    surge.cloned().unwrap_or(Value::Null),
                    "may not be set when maxUnavailable is non-zero",
                )),
                (false, false) => errs.push(FieldError::required(
                    format!("{path}.maxUnavailable"),
                    "cannot be 0 when maxSurge is 0",
                )),
                _ => {}
            }
            errs
        }
        other => vec![FieldError::not_supported(
            "spec.updateStrategy",
            other,
            &["RollingUpdate", "OnDelete"],
        )],
    }
}

impl Strategy for DaemonSetStrategy {
    fn defaults(&self, obj: &mut Value) {
        default(obj, "/spec/updateStrategy/type", json!("RollingUpdate"));
        if text(obj, "/spec/updateStrategy/type") == "RollingUpdate" {
            default(
                obj,
                "/spec/updateStrategy/rollingUpdate/maxUnavailable",
                json!(1),
            );
            default(obj, "/spec/updateStrategy/rollingUpdate/maxSurge", json!(0));
        }
        default(obj, "/spec/revisionHistoryLimit", json!(10));
        pod_spec::default_template(obj, "/spec/template");
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0});
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = fields::non_negatives(
            obj,
            &[
                ("/spec/minReadySeconds", "spec.minReadySeconds"),
                ("/spec/revisionHistoryLimit", "spec.revisionHistoryLimit"),
            ],
        );
        errs.extend(workload::validate_selector_and_template(obj, "DaemonSet"));
        errs.extend(validate_update_strategy(obj));
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(workload::selector_immutable(new, old));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            table::name_column(),
            Column::new(
                "Desired",
                "integer",
                "The total number of nodes that should be running the daemon pod.",
            ),
            Column::new(
                "Current",
                "integer",
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
            ),
            Column::new(
                "Ready",
                "integer",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
            ),
            Column::new(
                "Up-to-date",
                "integer",
                "The total number of nodes that are running updated daemon pod",
            ),
            Column::new(
                "Available",
                "integer",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
            ),
            Column::new(
                "Node Selector",
                "string",
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            table::age_column(),
        ];
        columns.extend(workload::wide_columns(true));
        columns
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let [containers, images] = workload::template_cells(obj, "/spec/template");
        vec![
            table::name_cell(obj),
            fields::int_cell(obj, "/status/desiredNumberScheduled"),
            fields::int_cell(obj, "/status/currentNumberScheduled"),
            fields::int_cell(obj, "/status/numberReady"),
            fields::int_cell(obj, "/status/updatedNumberScheduled"),
            fields::int_cell(obj, "/status/numberAvailable"),
            json!(fields::format_labels(
                obj.pointer("/spec/template/spec/nodeSelector")
            )),
            table::age_cell(obj),
            containers,
            images,
            json!(fields::format_selector(obj.pointer("/spec/selector"))),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_and_row() {
        let mut ds = json!({"metadata": {"name": "agent"}, "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "a", "image": "agent:1"}]}}
        }});
        DaemonSetStrategy.prepare_for_create(&mut ds);
        DaemonSetStrategy.defaults(&mut ds);
        assert_eq!(
            ds["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
        assert!(
            DaemonSetStrategy.validate(&ds).is_empty(),
            "{:?}",
            DaemonSetStrategy.validate(&ds)
        );
        ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!(0);
        assert_eq!(
            DaemonSetStrategy.validate(&ds)[0].to_string(),
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"
        );
        let cells = DaemonSetStrategy.cells(&ds);
        assert_eq!(cells[6], "<none>");
        assert_eq!(cells[10], "app=agent");
        assert_eq!(cells.len(), DaemonSetStrategy.columns().len());
    }
}
