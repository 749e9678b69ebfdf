//! PodTemplates: a pod template stored on its own.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields;
use super::pod_spec;

/// The rules of `v1/PodTemplate`.
pub struct PodTemplateStrategy;

impl Strategy for PodTemplateStrategy {
    /// DELETE answers with the object, as kube's registry declares (`ReturnDeletedObject`).
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn defaults(&self, obj: &mut Value) {
        pod_spec::default_template(obj, "/template");
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        pod_spec::validate_template(&fields::value(obj, "/template"), "template")
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Containers",
                "string",
                "Names of each container in the template.",
            ),
            Column::new(
                "Images",
                "string",
                "Images referenced by each container in the template.",
            ),
            Column::new("Pod Labels", "string", "The labels for the pod template."),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let (containers, images) = pod_spec::containers_and_images(obj.pointer("/template/spec"));
        vec![
            table::name_cell(obj),
            containers,
            images,
            json!(fields::format_labels(
                obj.pointer("/template/metadata/labels")
            )),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_and_row() {
        let mut pt = json!({"metadata": {"name": "t"}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}});
        PodTemplateStrategy.defaults(&mut pt);
        assert_eq!(pt["template"]["spec"]["dnsPolicy"], "ClusterFirst");
        assert!(PodTemplateStrategy.validate(&pt).is_empty());
        assert_eq!(PodTemplateStrategy.cells(&pt)[3], "a=b");
        let bad = json!({"template": {"spec": {"containers": [], "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}}});
        assert_eq!(
            PodTemplateStrategy.validate(&bad)[0].to_string(),
            "template.spec.containers: Required value"
        );
    }
}
