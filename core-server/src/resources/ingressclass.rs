//! networking.k8s.io/v1 IngressClasses: the controller never changes;
//! parameters default to cluster scope.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, is_set, text};

/// The rules of `networking.k8s.io/v1/IngressClass`.
pub struct IngressClassStrategy;

impl Strategy for IngressClassStrategy {
    fn defaults(&self, obj: &mut Value) {
        if is_set(obj, "/spec/parameters") {
            default(obj, "/spec/parameters/scope", json!("Cluster"));
        }
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let controller = text(obj, "/spec/controller");
        if controller.is_empty() {
            errs.push(FieldError::required("spec.controller", ""));
        } else if controller.len() > 250 {
            errs.push(FieldError::too_long("spec.controller", 250));
        }
        if is_set(obj, "/spec/parameters") {
            for field in ["kind", "name"] {
                if text(obj, &format!("/spec/parameters/{field}")).is_empty() {
                    errs.push(FieldError::required(format!("spec.parameters.{field}"), ""));
                }
            }
            let (scope, namespace) = (
                text(obj, "/spec/parameters/scope"),
                text(obj, "/spec/parameters/namespace"),
            );
            match scope {
                "Cluster" if !namespace.is_empty() => errs.push(FieldError::forbidden(
                    "spec.parameters.namespace",
                    "`parameters.scope` is set to 'Cluster'",
                )),
                "Namespace" if namespace.is_empty() => errs.push(FieldError::required(
                    "spec.parameters.namespace",
                    "`parameters.scope` is set to 'Namespace'",
                )),
                "Cluster" | "Namespace" => {}
                other => errs.push(FieldError::not_supported(
                    "spec.parameters.scope",
                    other,
                    &["Cluster", "Namespace"],
                )),
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(fields::immutable(
            new,
            old,
            "/spec/controller",
            "spec.controller",
        ));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Controller",
                "string",
                "Controller that is responsible for handling this class",
            ),
            Column::new(
                "Parameters",
                "string",
                "A reference to a resource with additional parameters",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let parameters = if is_set(obj, "/spec/parameters") {
            let group = text(obj, "/spec/parameters/apiGroup");
            let kind = if is_set(obj, "/spec/parameters/apiGroup") {
                format!("{}.{group}", text(obj, "/spec/parameters/kind"))
            } else {
                text(obj, "/spec/parameters/kind").to_string()
            };
            format!("{kind}/{}", text(obj, "/spec/parameters/name"))
        } else {
            "<none>".into()
        };
        vec![
            table::name_cell(obj),
            fields::text_cell(obj, "/spec/controller"),
            json!(parameters),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_and_row() {
        let mut class = json!({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx", "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb"}}});
        IngressClassStrategy.defaults(&mut class);
        assert_eq!(class["spec"]["parameters"]["scope"], "Cluster");
        assert!(IngressClassStrategy.validate(&class).is_empty());
        assert_eq!(
            IngressClassStrategy.cells(&class)[2],
            "IngressParameters.k8s.example.com/external-lb"
        );
        let mut changed = class.clone();
        changed["spec"]["controller"] = json!("example.com/other");
        assert_eq!(
            IngressClassStrategy.validate_update(&changed, &class)[0].detail,
            "field is immutable"
        );
    }
}
