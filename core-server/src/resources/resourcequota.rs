//! ResourceQuotas: quantities checked; the quota controller fills the status.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, items};
use apimachinery::quantity;

/// The scopes a quota may name.
const SCOPES: &[&str] = &[
    "BestEffort",
    "CrossNamespacePodAffinity",
    "NotBestEffort",
    "NotTerminating",
    "PriorityClass",
    "Terminating",
    "VolumeAttributesClass",
];

/// The rules of `v1/ResourceQuota`.
pub struct ResourceQuotaStrategy;

/// The Request and Limit cells: `name: used/hard` pairs, `limits.*` in the second.
fn usage_cells(obj: &Value) -> (String, String) {
    let mut names: Vec<&String> = fields::object(obj, "/status/hard")
        .into_iter()
        .flat_map(|m| m.keys())
        .collect();
    names.sort();
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    for name in names {
        let quantity = |list: &str| {
            let v = fields::value(obj, &format!("/status/{list}/{}", fields::escape(name)));
            v.as_str().map(str::to_string).unwrap_or_else(|| {
                if v.is_null() {
                    "0".into()
                } else {
                    v.to_string()
                }
            })
        };
        let entry = format!("{name}: {}/{}", quantity("used"), quantity("hard"));
        if name.split('.').next() == Some("limits") && name.contains('.') {
            limits.push(entry)
        } else {
            requests.push(entry)
        }
    }
    (requests.join(", "), limits.join(", "))
}

impl Strategy for ResourceQuotaStrategy {
    /// DELETE answers with the object, as kube's registry declares (`ReturnDeletedObject`).
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = quantity::validate_list(obj.pointer("/spec/hard"), "spec.hard");
        for (i, scope) in items(obj, "/spec/scopes").iter().enumerate() {
            let scope = scope.as_str().unwrap_or_default();
            if !SCOPES.contains(&scope) {
                errs.push(FieldError::not_supported(
                    format!("spec.scopes[{i}]"),
                    scope,
                    SCOPES,
                ));
            }
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Request",
                "string",
                "Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
            Column::new(
                "Limit",
                "string",
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let (requests, limits) = usage_cells(obj);
        vec![
            table::name_cell(obj),
            json!(requests),
            json!(limits),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_and_row() {
        let quota = json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "10", "limits.cpu": "4"}},
            "status": {"hard": {"pods": "10", "limits.cpu": "4"}, "used": {"pods": "2", "limits.cpu": "1"}}});
        assert!(ResourceQuotaStrategy.validate(&quota).is_empty());
        let cells = ResourceQuotaStrategy.cells(&quota);
        assert_eq!(cells[1], "pods: 2/10");
        assert_eq!(cells[2], "limits.cpu: 1/4");
        let bad = json!({"spec": {"hard": {"pods": "ten"}}});
        assert_eq!(
            ResourceQuotaStrategy.validate(&bad)[0].field,
            "spec.hard[pods]"
        );
    }
}
