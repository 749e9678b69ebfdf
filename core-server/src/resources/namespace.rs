//! Namespaces: created Active with the `kubernetes` finalizer; deleting one
//! turns it Terminating until the namespace controller has removed its
//! content and finalized it.

use apimachinery::error::{Error, FieldError, Result};
use apimachinery::group_version::GroupResource;
use apimachinery::table::{self, Column};
use apimachinery::validation::NameRule;
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

/// The finalizer the namespace controller owns.
pub const FINALIZER: &str = "kubernetes";
/// The label every namespace carries with its own name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The rules of `v1/Namespace`.
pub struct NamespaceStrategy;

fn finalizers(obj: &Value) -> &[Value] {
    obj.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

impl Strategy for NamespaceStrategy {
    fn defaults(&self, obj: &mut Value) {
        let name = obj
            .pointer("/metadata/name")
            .cloned()
            .unwrap_or(Value::Null);
        if !obj["metadata"]["labels"].is_object() {
            obj["metadata"]["labels"] = json!({});
        }
        obj["metadata"]["labels"][NAME_LABEL] = name;
    }

    /// Active, keeping the finalizers asked for and adding `kubernetes`.
    fn prepare_for_create(&self, obj: &mut Value) {
        let mut kept = finalizers(obj).to_vec();
        if !kept.iter().any(|f| f == FINALIZER) {
            kept.push(json!(FINALIZER));
        }
        obj["spec"] = json!({"finalizers": kept});
        obj["status"] = json!({"phase": "Active"});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        new["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
    }

    fn update_subresource(&self, subresource: &str, new: &Value, old: &Value) -> Option<Value> {
        if subresource != "finalize" {
            return None;
        }
        let mut merged = old.clone();
        merged["spec"]["finalizers"] = new
            .pointer("/spec/finalizers")
            .cloned()
            .unwrap_or(json!([]));
        Some(merged)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        finalizers(obj)
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f.as_str()
                    .is_none_or(|f| !apimachinery::validation::qualified_name(f).is_empty())
            })
            .map(|(i, f)| {
                FieldError::invalid(
                    format!("spec.finalizers[{i}]"),
                    f.clone(),
                    "name is neither a standard finalizer name nor is it fully qualified",
                )
            })
            .collect()
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn return_deleted_object(&self) -> bool {
        true
    }

    /// kube's namespace storage wraps its store without declaring
    /// `DeleteReturnsDeletedObject`, so its OpenAPI says Status.
    fn openapi_delete_returns_object(&self) -> bool {
        false
    }

    fn begin_delete(&self, obj: &mut Value) -> Result<bool> {
        if obj
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
        {
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Err(Error::Conflict {
                resource: GroupResource::new("", "namespaces"),
                name: name.into(),
                detail: "The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.".into(),
            });
        }
        if finalizers(obj).is_empty() {
            return Ok(false);
        }
        obj["status"]["phase"] = json!("Terminating");
        Ok(true)
    }

    fn may_remove(&self, obj: &Value) -> bool {
        finalizers(obj).is_empty()
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new("Status", "string", "The status of the namespace"),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let phase = obj.pointer("/status/phase").cloned().unwrap_or(json!(""));
        vec![table::name_cell(obj), phase, table::age_cell(obj)]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.phase"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_defaults_and_deletion() {
        let mut ns = json!({"metadata": {"name": "team-a"}, "spec": {"finalizers": []}});
        NamespaceStrategy.prepare_for_create(&mut ns);
        NamespaceStrategy.defaults(&mut ns);
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(ns["status"]["phase"], "Active");
        assert_eq!(ns["metadata"]["labels"][NAME_LABEL], "team-a");
        assert!(NamespaceStrategy.begin_delete(&mut ns).unwrap());
        assert_eq!(ns["status"]["phase"], "Terminating");
        assert!(!NamespaceStrategy.may_remove(&ns));
        ns["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        assert_eq!(
            NamespaceStrategy.begin_delete(&mut ns).unwrap_err().code(),
            409
        );
        let finalized = NamespaceStrategy
            .update_subresource("finalize", &json!({"spec": {"finalizers": []}}), &ns)
            .unwrap();
        assert!(NamespaceStrategy.may_remove(&finalized));
    }

    #[test]
    fn create_keeps_the_finalizers_asked_for_as_kube_does() {
        let mut ns = json!({"metadata": {"name": "held"},
            "spec": {"finalizers": ["example.com/hold"], "other": true}});
        NamespaceStrategy.prepare_for_create(&mut ns);
        assert_eq!(
            ns["spec"],
            json!({"finalizers": ["example.com/hold", "kubernetes"]})
        );
        let mut ns = json!({"metadata": {"name": "held"},
            "spec": {"finalizers": ["kubernetes", "example.com/hold"]}});
        NamespaceStrategy.prepare_for_create(&mut ns);
        assert_eq!(
            ns["spec"]["finalizers"],
            json!(["kubernetes", "example.com/hold"])
        );
    }
}
