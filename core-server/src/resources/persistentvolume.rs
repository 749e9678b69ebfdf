//! PersistentVolumes: cluster-scoped, reclaim policy Retain and volume mode
//! Filesystem by default, created Pending.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, has, is_set, items, text};
use apimachinery::quantity;

/// The sources a PersistentVolume may name, one of which it must have.
const SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "nfs",
    "rbd",
    "quobyte",
    "iscsi",
    "cinder",
    "cephfs",
    "fc",
    "flocker",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

/// The access modes kube knows, with the abbreviations its printers use.
const ACCESS_MODES: &[(&str, &str)] = &[
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
];

/// The rules of `v1/PersistentVolume`.
pub struct PersistentVolumeStrategy;

/// kube's `GetAccessModesAsString`: `RWO,ROX`, in a fixed order.
pub fn access_modes_string(modes: &[Value]) -> String {
    ACCESS_MODES
        .iter()
        .filter(|(mode, _)| modes.iter().any(|m| m.as_str() == Some(mode)))
        .map(|(_, short)| *short)
        .collect::<Vec<_>>()
        .join(",")
}

/// Checks access modes against the known ones (`Unsupported value`).
pub fn validate_access_modes(modes: &[Value], field: &str) -> Vec<FieldError> {
    let known: Vec<&str> = ACCESS_MODES.iter().map(|(m, _)| *m).collect();
    let mut errs = Vec::new();
    for mode in modes {
        let mode = mode.as_str().unwrap_or_default();
        if !known.contains(&mode) {
            errs.push(FieldError::not_supported(field, mode, &known));
        }
    }
    if modes.iter().any(|m| m == "ReadWriteOncePod") && modes.len() > 1 {
        errs.push(FieldError::forbidden(
            field,
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    errs
}

/// The storage class of a volume or claim: the field, else the beta annotation.
pub fn storage_class(obj: &Value) -> String {
    let class = text(obj, "/spec/storageClassName");
    if class.is_empty() {
        text(
            obj,
            "/metadata/annotations/volume.beta.kubernetes.io~1storage-class",
        )
        .to_string()
    } else {
        class.to_string()
    }
}

/// An optional string cell, `<unset>` when absent.
pub fn unset_if_absent(obj: &Value, pointer: &str) -> Value {
    if is_set(obj, pointer) {
        fields::text_cell(obj, pointer)
    } else {
        json!("<unset>")
    }
}

impl Strategy for PersistentVolumeStrategy {
    /// DELETE answers with the object, as kube's registry declares (`ReturnDeletedObject`).
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn defaults(&self, obj: &mut Value) {
        default(obj, "/spec/persistentVolumeReclaimPolicy", json!("Retain"));
        default(obj, "/spec/volumeMode", json!("Filesystem"));
        if is_set(obj, "/spec/hostPath") {
            default(obj, "/spec/hostPath/type", json!(""));
        }
        default(obj, "/status/phase", json!("Pending"));
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Pending", "lastPhaseTransitionTime": generic_server::registry::now_rfc3339()});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let modes = items(obj, "/spec/accessModes");
        if modes.is_empty() {
            errs.push(FieldError::required("spec.accessModes", ""));
        }
        errs.extend(validate_access_modes(modes, "spec.accessModes"));
        if !has(obj, "/spec/capacity") {
            errs.push(FieldError::required("spec.capacity", ""));
        } else if !is_set(obj, "/spec/capacity/storage") {
            errs.push(FieldError::not_supported(
                "spec.capacity",
                json!(fields::value(obj, "/spec/capacity")),
                &["storage"],
            ));
        }
        errs.extend(quantity::validate_list(
            obj.pointer("/spec/capacity"),
            "spec.capacity",
        ));
        let policy = text(obj, "/spec/persistentVolumeReclaimPolicy");
        if !matches!(policy, "Delete" | "Recycle" | "Retain") {
            errs.push(FieldError::not_supported(
                "spec.persistentVolumeReclaimPolicy",
                policy,
                &["Delete", "Recycle", "Retain"],
            ));
        }
        let mode = text(obj, "/spec/volumeMode");
        if !matches!(mode, "Block" | "Filesystem") {
            errs.push(FieldError::not_supported(
                "spec.volumeMode",
                mode,
                &["Block", "Filesystem"],
            ));
        }
        let sources: Vec<&str> = SOURCES
            .iter()
            .copied()
            .filter(|s| is_set(obj, &format!("/spec/{s}")))
            .collect();
        match sources.as_slice() {
            [] => errs.push(FieldError::required("spec", "must specify a volume type")),
            [_] => {}
            [_, second, ..] => errs.push(FieldError::forbidden(
                format!("spec.{second}"),
                "may not specify more than 1 volume type",
            )),
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        // kube names the volume mode's path without `spec` here.
        for (pointer, field) in [
            ("/spec/volumeMode", "volumeMode"),
            ("/spec/nodeAffinity", "spec.nodeAffinity"),
        ] {
            if is_set(old, pointer) {
                errs.extend(fields::immutable(new, old, pointer, field));
            }
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new("Capacity", "string", "capacity is the description of the persistent volume's resources and capacity."),
            Column::new("Access Modes", "string", "accessModes contains all ways the volume can be mounted."),
            Column::new(
                "Reclaim Policy",
                "string",
                "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
            ),
            Column::new("Status", "string", "phase indicates if a volume is available, bound to a claim, or released by a claim."),
            Column::new(
                "Claim",
                "string",
                "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
            ),
            Column::new("StorageClass", "string", "storageClassName is the name of StorageClass to which this persistent volume belongs."),
            Column::new("VolumeAttributesClass", "string", "Name of VolumeAttributesClass to which this persistent volume belongs."),
            Column::new(
                "Reason",
                "string",
                "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
            ),
            table::age_column(),
            Column::new(
                "VolumeMode",
                "string",
                "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
            )
            .wide(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let claim = if is_set(obj, "/spec/claimRef") {
            format!(
                "{}/{}",
                text(obj, "/spec/claimRef/namespace"),
                text(obj, "/spec/claimRef/name")
            )
        } else {
            String::new()
        };
        let phase = if is_set(obj, "/metadata/deletionTimestamp") {
            "Terminating"
        } else {
            text(obj, "/status/phase")
        };
        vec![
            table::name_cell(obj),
            fields::text_cell(obj, "/spec/capacity/storage"),
            json!(access_modes_string(items(obj, "/spec/accessModes"))),
            fields::text_cell(obj, "/spec/persistentVolumeReclaimPolicy"),
            json!(phase),
            json!(claim),
            json!(storage_class(obj)),
            unset_if_absent(obj, "/spec/volumeAttributesClassName"),
            fields::text_cell(obj, "/status/reason"),
            table::age_cell(obj),
            unset_if_absent(obj, "/spec/volumeMode"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_and_row() {
        let mut pv = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}});
        PersistentVolumeStrategy.prepare_for_create(&mut pv);
        PersistentVolumeStrategy.defaults(&mut pv);
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["spec"]["volumeMode"], "Filesystem");
        assert_eq!(pv["status"]["phase"], "Pending");
        assert!(
            PersistentVolumeStrategy.validate(&pv).is_empty(),
            "{:?}",
            PersistentVolumeStrategy.validate(&pv)
        );
        let cells = PersistentVolumeStrategy.cells(&pv);
        assert_eq!(
            (cells[1].clone(), cells[2].clone(), cells[4].clone()),
            (json!("1Gi"), json!("RWO"), json!("Pending"))
        );
        assert_eq!(cells[7], "<unset>");
        assert_eq!(cells.len(), PersistentVolumeStrategy.columns().len());
        let bare = json!({"spec": {"persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem"}});
        let errs: Vec<String> = PersistentVolumeStrategy
            .validate(&bare)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "spec.accessModes: Required value",
                "spec.capacity: Required value",
                "spec: Required value: must specify a volume type"
            ]
        );
    }
}
