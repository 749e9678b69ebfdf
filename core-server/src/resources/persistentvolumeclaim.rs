//! PersistentVolumeClaims: volume mode Filesystem by default, created
//! Pending; the spec is immutable except resources.requests and
//! volumeAttributesClassName (and the binder setting volumeName).

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, is_set, items, text};
use super::persistentvolume::{
    access_modes_string, storage_class, unset_if_absent, validate_access_modes,
};
use apimachinery::quantity;

/// The rules of `v1/PersistentVolumeClaim`.
pub struct PersistentVolumeClaimStrategy;

/// Defaults a claim (also the volumeClaimTemplates of StatefulSets).
pub fn default_claim(claim: &mut Value) {
    default(claim, "/spec/volumeMode", json!("Filesystem"));
    default(claim, "/status/phase", json!("Pending"));
}

impl Strategy for PersistentVolumeClaimStrategy {
    /// DELETE answers with the object, as kube's registry declares (`ReturnDeletedObject`).
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn defaults(&self, obj: &mut Value) {
        default_claim(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Pending"});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let modes = items(obj, "/spec/accessModes");
        if modes.is_empty() && !is_set(obj, "/spec/dataSourceRef") {
            errs.push(FieldError::required(
                "spec.accessModes",
                "at least 1 access mode is required",
            ));
        }
        errs.extend(validate_access_modes(modes, "spec.accessModes"));
        if !is_set(obj, "/spec/resources/requests/storage") {
            errs.push(FieldError::required("spec.resources[storage]", ""));
        }
        errs.extend(quantity::validate_list(
            obj.pointer("/spec/resources/requests"),
            "spec.resources.requests",
        ));
        let mode = text(obj, "/spec/volumeMode");
        if !matches!(mode, "Block" | "Filesystem") {
            errs.push(FieldError::not_supported(
                "spec.volumeMode",
                mode,
                &["Block", "Filesystem"],
            ));
        }
        if let Some(selector) = obj.pointer("/spec/selector").filter(|s| !s.is_null()) {
            errs.extend(fields::label_selector(selector, "spec.selector"));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let comparable = |claim: &Value, other: &Value| {
            let mut spec = claim.get("spec").cloned().unwrap_or_default();
            for field in ["/resources/requests", "/volumeAttributesClassName"] {
                fields::remove(&mut spec, field);
            }
            // The binder may set volumeName, and a default class may be set once.
            for field in ["/volumeName", "/storageClassName"] {
                if !fields::has(other, &format!("/spec{field}")) {
                    fields::remove(&mut spec, field);
                }
            }
            spec
        };
        if comparable(new, old) != comparable(old, old) {
            errs.push(FieldError::forbidden(
                "spec",
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
            ));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Status",
                "string",
                "phase represents the current phase of PersistentVolumeClaim.",
            ),
            Column::new(
                "Volume",
                "string",
                "volumeName is the binding reference to the PersistentVolume backing this claim.",
            ),
            Column::new(
                "Capacity",
                "string",
                "capacity represents the actual resources of the underlying volume.",
            ),
            Column::new(
                "Access Modes",
                "string",
                "accessModes contains the desired access modes the volume should have.",
            ),
            Column::new(
                "StorageClass",
                "string",
                "storageClassName is the name of the StorageClass required by the claim.",
            ),
            Column::new(
                "VolumeAttributesClass",
                "string",
                "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim.",
            ),
            table::age_column(),
            Column::new(
                "VolumeMode",
                "string",
                "volumeMode defines what type of volume is required by the claim.",
            )
            .wide(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let phase = if is_set(obj, "/metadata/deletionTimestamp") {
            "Terminating"
        } else {
            text(obj, "/status/phase")
        };
        let bound = !text(obj, "/spec/volumeName").is_empty();
        let (capacity, modes) = if bound {
            (
                text(obj, "/status/capacity/storage").to_string(),
                access_modes_string(items(obj, "/status/accessModes")),
            )
        } else {
            (String::new(), String::new())
        };
        vec![
            table::name_cell(obj),
            json!(phase),
            fields::text_cell(obj, "/spec/volumeName"),
            json!(capacity),
            json!(modes),
            json!(storage_class(obj)),
            unset_if_absent(obj, "/spec/volumeAttributesClassName"),
            table::age_cell(obj),
            unset_if_absent(obj, "/spec/volumeMode"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> Value {
        let mut pvc = json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        PersistentVolumeClaimStrategy.prepare_for_create(&mut pvc);
        PersistentVolumeClaimStrategy.defaults(&mut pvc);
        pvc
    }

    #[test]
    fn defaults_validation_and_row() {
        let pvc = claim();
        assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
        assert_eq!(pvc["status"]["phase"], "Pending");
        assert!(PersistentVolumeClaimStrategy.validate(&pvc).is_empty());
        let mut bound = pvc.clone();
        bound["spec"]["volumeName"] = json!("pv1");
        assert!(
            PersistentVolumeClaimStrategy
                .validate_update(&bound, &pvc)
                .is_empty()
        );
        let mut changed = pvc.clone();
        changed["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        assert!(
            PersistentVolumeClaimStrategy.validate_update(&changed, &pvc)[0]
                .to_string()
                .starts_with("spec: Forbidden: spec is immutable after creation")
        );
        let cells = PersistentVolumeClaimStrategy.cells(&pvc);
        assert_eq!(cells[1], "Pending");
        assert_eq!(cells[8], "Filesystem");
        let empty = json!({"spec": {"volumeMode": "Filesystem"}});
        assert_eq!(
            PersistentVolumeClaimStrategy.validate(&empty)[1].to_string(),
            "spec.resources[storage]: Required value"
        );
    }
}
