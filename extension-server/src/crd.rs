//! CustomResourceDefinitions as a resource: defaults, what a write may
//! change, validation, and the cleanup finalizer every CRD carries.

use apimachinery::error::{FieldError, Result};
use apimachinery::group_version::GroupVersionKind;
use generic_server::resource::Resource;
use generic_server::strategy::Strategy;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

/// The finalizer that keeps a CRD until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The `customresourcedefinitions` resource.
pub fn resource() -> Resource {
    Resource::builtin::<CustomResourceDefinition>(CrdStrategy)
        .short_names(&["crd", "crds"])
        .categories(&["api-extensions"])
        .status()
        // kube stores CRDs as apiextensions.k8s.io/v1beta1 and announces
        // that version's storageVersionHash; ours are v1 JSON, but the hash
        // is an opaque token that clients compare with kube's, so it is
        // kube's.
        .stored_as(GroupVersionKind::new(
            "apiextensions.k8s.io",
            "v1beta1",
            "CustomResourceDefinition",
        ))
}

/// The rules of `apiextensions.k8s.io/v1` CustomResourceDefinition.
pub struct CrdStrategy;

/// The storage version of a CRD.
pub fn storage_version(crd: &Value) -> Option<&str> {
    versions(crd)
        .iter()
        .find(|v| v["storage"] == true)
        .and_then(|v| v["name"].as_str())
}

/// The versions of a CRD.
pub fn versions(crd: &Value) -> &[Value] {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A condition of a CRD's status, if present.
pub fn condition<'a>(crd: &'a Value, kind: &str) -> Option<&'a Value> {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Whether a condition is True.
pub fn is_true(crd: &Value, kind: &str) -> bool {
    condition(crd, kind).is_some_and(|c| c["status"] == "True")
}

impl Strategy for CrdStrategy {
    fn defaults(&self, crd: &mut Value) {
        apimachinery::crd_validation::default_crd(crd);
    }

    fn prepare_for_create(&self, crd: &mut Value) {
        apimachinery::crd_validation::prepare_for_create(crd);
        let mut finalizers = crd["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(json!(CLEANUP_FINALIZER));
            crd["metadata"]["finalizers"] = json!(finalizers);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        apimachinery::crd_validation::prepare_for_update(new, old);
    }

    fn validate(&self, crd: &Value) -> Vec<FieldError> {
        let mut errs = apimachinery::crd_validation::validate_crd(crd, None);
        errs.extend(validation_rules(crd));
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        // With the spec unchanged (a status write), only the status is checked.
        if new.get("spec") == old.get("spec") {
            apimachinery::crd_validation::validate_crd_status_update(new, old)
        } else {
            let mut errs = apimachinery::crd_validation::validate_crd(new, Some(old));
            errs.extend(validation_rules(new));
            errs
        }
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn return_deleted_object(&self) -> bool {
        true
    }

    /// kube's CRD storage wraps its store without declaring
    /// `DeleteReturnsDeletedObject`, so its OpenAPI says Status.
    fn openapi_delete_returns_object(&self) -> bool {
        false
    }

    fn begin_delete(&self, crd: &mut Value) -> Result<bool> {
        if crd
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
        {
            return Ok(true);
        }
        set_condition(
            crd,
            "Terminating",
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        );
        Ok(true)
    }
}

/// Compiles every version's CEL rules, reporting what does not compile or
/// costs too much.
fn validation_rules(crd: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, version) in versions(crd).iter().enumerate() {
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            if let Err(e) = apimachinery::cel::compile(
                schema,
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
            ) {
                errs.extend(e);
            }
        }
    }
    errs
}

/// Sets (or replaces) a status condition, keeping its transition time when
/// the status does not change.
pub fn set_condition(crd: &mut Value, kind: &str, status: &str, reason: &str, message: &str) {
    let now = generic_server::registry::now_rfc3339();
    let previous = condition(crd, kind).cloned();
    let since = match &previous {
        Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    let entry = json!({"type": kind, "status": status, "lastTransitionTime": since, "reason": reason, "message": message});
    if !crd["status"]["conditions"].is_array() {
        crd["status"]["conditions"] = json!([]);
    }
    if let Some(conditions) = crd["status"]["conditions"].as_array_mut() {
        match conditions.iter_mut().find(|c| c["type"] == kind) {
            Some(existing) => *existing = entry,
            None => conditions.push(entry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_adds_finalizer_status_and_defaults() {
        let mut crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}});
        CrdStrategy.defaults(&mut crd);
        CrdStrategy.prepare_for_create(&mut crd);
        assert_eq!(crd["metadata"]["finalizers"], json!([CLEANUP_FINALIZER]));
        assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
        assert_eq!(crd["spec"]["names"]["singular"], "widget");
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
        assert!(CrdStrategy.begin_delete(&mut crd).unwrap());
        assert!(is_true(&crd, "Terminating"));
    }
}
