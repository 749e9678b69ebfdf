//! apps/v1 ControllerRevisions: immutable snapshots of a controller's template.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, text};

/// The rules of `apps/v1/ControllerRevision`.
pub struct ControllerRevisionStrategy;

/// The controlling owner as kube prints it: `daemonset.apps/name`, `<none>` if none.
pub fn controller_of(obj: &Value) -> String {
    let owner = fields::items(obj, "/metadata/ownerReferences")
        .iter()
        .find(|o| o.get("controller") == Some(&Value::Bool(true)));
    let Some(owner) = owner else {
        return "<none>".into();
    };
    let group = text(owner, "/apiVersion")
        .rsplit_once('/')
        .map(|(g, _)| g)
        .unwrap_or_default();
    let kind = if group.is_empty() {
        text(owner, "/kind").to_string()
    } else {
        format!("{}.{group}", text(owner, "/kind"))
    };
    format!("{}/{}", kind.to_lowercase(), text(owner, "/name"))
}

impl Strategy for ControllerRevisionStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if !fields::is_set(obj, "/data") {
            errs.push(FieldError::required("data", "data is mandatory"));
        }
        errs.extend(fields::non_negative(obj, "/revision", "revision"));
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(fields::immutable(new, old, "/data", "data"));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new("Controller", "string", "Controller of the object"),
            Column::new(
                "Revision",
                "string",
                "Revision indicates the revision of the state represented by Data.",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            json!(controller_of(obj)),
            fields::int_cell(obj, "/revision"),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_column_and_immutable_data() {
        let rev = json!({"metadata": {"name": "r", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": true}]}, "revision": 2, "data": {"a": 1}});
        assert_eq!(
            ControllerRevisionStrategy.cells(&rev)[1],
            "daemonset.apps/agent"
        );
        let mut changed = rev.clone();
        changed["data"] = json!({"a": 2});
        assert_eq!(
            ControllerRevisionStrategy.validate_update(&changed, &rev)[0].detail,
            "field is immutable"
        );
        let fields: Vec<String> = ControllerRevisionStrategy
            .validate(&json!({"revision": -1}))
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(fields, ["data", "revision"], "kube's order");
    }
}
