//! apps/v1 ReplicaSets: one replica by default; the selector must match the
//! template and never changes.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default};
use super::{pod_spec, workload};

/// The rules of `apps/v1/ReplicaSet`.
pub struct ReplicaSetStrategy;

impl Strategy for ReplicaSetStrategy {
    fn defaults(&self, obj: &mut Value) {
        default(obj, "/spec/replicas", json!(1));
        pod_spec::default_template(obj, "/spec/template");
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"replicas": 0});
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = fields::non_negatives(
            obj,
            &[
                ("/spec/replicas", "spec.replicas"),
                ("/spec/minReadySeconds", "spec.minReadySeconds"),
            ],
        );
        errs.extend(workload::validate_selector_and_template(obj, "ReplicaSet"));
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
                "Replicas is the number of desired pods.",
            ),
            Column::new(
                "Current",
                "integer",
                "Replicas is the most recently observed number of non-terminating pods.",
            ),
            Column::new(
                "Ready",
                "integer",
                "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
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
            fields::int_cell(obj, "/spec/replicas"),
            fields::int_cell(obj, "/status/replicas"),
            fields::int_cell(obj, "/status/readyReplicas"),
            table::age_cell(obj),
            containers,
            images,
            json!(workload::selector_string(obj)),
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.replicas"]
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        Some(match field {
            "status.replicas" => fields::int(obj, "/status/replicas")
                .unwrap_or(0)
                .to_string(),
            other => fields::field_string(obj, other),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_and_row() {
        let mut rs = json!({"metadata": {"name": "r"}, "spec": {
            "selector": {"matchLabels": {"app": "r"}},
            "template": {"metadata": {"labels": {"app": "r"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        }});
        ReplicaSetStrategy.prepare_for_create(&mut rs);
        ReplicaSetStrategy.defaults(&mut rs);
        assert_eq!(rs["spec"]["replicas"], 1);
        assert!(ReplicaSetStrategy.validate(&rs).is_empty());
        rs["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        assert_eq!(
            ReplicaSetStrategy.validate(&rs)[0].to_string(),
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
        );
        let cells = ReplicaSetStrategy.cells(&rs);
        assert_eq!(
            (cells[1].clone(), cells[2].clone(), cells[3].clone()),
            (json!(1), json!(0), json!(0))
        );
        assert_eq!(
            ReplicaSetStrategy
                .field_value(&rs, "status.replicas")
                .as_deref(),
            Some("0")
        );
    }
}
