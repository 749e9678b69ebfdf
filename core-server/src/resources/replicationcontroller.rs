//! ReplicationControllers: one replica by default, and the selector and
//! labels default from the template's labels, as kube does.

use apimachinery::error::FieldError;
use apimachinery::label_selector::LabelSelector;
use apimachinery::table::{self, Column};
use apimachinery::validation;
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, has};
use super::{pod_spec, workload};

/// The rules of `v1/ReplicationController`.
pub struct ReplicationControllerStrategy;

fn selector(obj: &Value) -> LabelSelector {
    let requirements: Vec<String> = fields::object(obj, "/spec/selector")
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    LabelSelector::parse(&requirements.join(",")).unwrap_or_else(|_| LabelSelector::nothing())
}

impl Strategy for ReplicationControllerStrategy {
    fn defaults(&self, obj: &mut Value) {
        if let Some(labels) = obj
            .pointer("/spec/template/metadata/labels")
            .filter(|l| l.is_object())
            .cloned()
        {
            if !has(obj, "/spec/selector") {
                fields::set(obj, "/spec/selector", labels.clone());
            }
            if !has(obj, "/metadata/labels") {
                fields::set(obj, "/metadata/labels", labels);
            }
        }
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
        if !has(obj, "/spec/selector") {
            errs.push(FieldError::required("spec.selector", ""));
        }
        errs.extend(validation::labels(
            obj.pointer("/spec/selector"),
            "spec.selector",
        ));
        let template = obj.pointer("/spec/template");
        errs.extend(pod_spec::validate_controller_template(
            template,
            "spec.template",
            &selector(obj),
            "ReplicationController",
        ));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            table::name_column(),
            Column::new(
                "Desired",
                "integer",
                "Replicas is the number of desired replicas.",
            ),
            Column::new(
                "Current",
                "integer",
                "Replicas is the most recently observed number of replicas.",
            ),
            Column::new(
                "Ready",
                "integer",
                "The number of ready replicas for this replication controller.",
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
            json!(fields::format_labels(obj.pointer("/spec/selector"))),
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
    fn selector_and_labels_default_from_template() {
        let mut rc = json!({"metadata": {"name": "rc"}, "spec": {"template": {"metadata": {"labels": {"app": "rc"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        ReplicationControllerStrategy.prepare_for_create(&mut rc);
        ReplicationControllerStrategy.defaults(&mut rc);
        assert_eq!(rc["spec"]["selector"], json!({"app": "rc"}));
        assert_eq!(rc["metadata"]["labels"], json!({"app": "rc"}));
        assert_eq!(rc["spec"]["replicas"], 1);
        assert!(
            ReplicationControllerStrategy.validate(&rc).is_empty(),
            "{:?}",
            ReplicationControllerStrategy.validate(&rc)
        );
        rc["spec"]["selector"] = json!({"app": "other"});
        assert_eq!(
            ReplicationControllerStrategy.validate(&rc)[0].field,
            "spec.template.metadata.labels"
        );
        assert_eq!(ReplicationControllerStrategy.cells(&rc)[7], "app=other");
    }
}
