//! storage.k8s.io/v1 VolumeAttachments: the intent to attach a volume to a
//! node, for a CSI driver's attacher. The spec never changes; the attacher
//! reports through `status`, which a create starts empty.

use apimachinery::error::FieldError;
use apimachinery::openapi::property_description;
use apimachinery::table::{self, Column};
use apimachinery::validation;
use generic_server::strategy::Strategy;
use k8s_openapi::api::storage::v1::{
    VolumeAttachmentSource, VolumeAttachmentSpec, VolumeAttachmentStatus,
};
use serde_json::{Value, json};

use super::fields::{self, default, int, is_set, text};

/// The largest total size of `status.attachmentMetadata`.
const MAX_METADATA_BYTES: usize = 256 * 1024;
/// The longest error message `status.attachError` or `detachError` may hold.
const MAX_ERROR_MESSAGE: usize = 1024;

/// What kube says of a source with neither or both of its fields.
const ONE_SOURCE: &str = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";

/// The rules of `storage.k8s.io/v1/VolumeAttachment`.
pub struct VolumeAttachmentStrategy;

/// Checks kube applies on create and update alike (`ValidateVolumeAttachment`).
fn common(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if text(obj, "/spec/attacher").is_empty() {
        errs.push(FieldError::required("spec.attacher", ""));
    }
    let (pv, inline) = (
        is_set(obj, "/spec/source/persistentVolumeName"),
        is_set(obj, "/spec/source/inlineVolumeSpec"),
    );
    match (pv, inline) {
        (false, false) => errs.push(FieldError::required("spec.source", ONE_SOURCE)),
        (true, true) => errs.push(FieldError::forbidden("spec.source", ONE_SOURCE)),
        (true, false) if text(obj, "/spec/source/persistentVolumeName").is_empty() => {
            errs.push(FieldError::required(
                "spec.source.persistentVolumeName",
                "must specify non empty persistentVolumeName",
            ))
        }
        _ => {}
    }
    let node = text(obj, "/spec/nodeName");
    for msg in validation::dns1123_subdomain(node) {
        errs.push(FieldError::invalid("spec.nodeName", node, msg));
    }
    let metadata_bytes: usize = fields::object(obj, "/status/attachmentMetadata")
        .into_iter()
        .flatten()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if metadata_bytes > MAX_METADATA_BYTES {
        errs.push(FieldError::too_long(
            "status.attachmentMetadata",
            MAX_METADATA_BYTES,
        ));
    }
    for which in ["attachError", "detachError"] {
        if text(obj, &format!("/status/{which}/message")).len() > MAX_ERROR_MESSAGE {
            // kube names the metadata bound here.
            errs.push(FieldError::too_long(
                format!("status.{which}.message"),
                MAX_METADATA_BYTES,
            ));
        }
        if let Some(code) = int(obj, &format!("/status/{which}/errorCode")).filter(|c| *c < 0) {
            errs.push(FieldError::invalid(
                format!("status.{which}.errorCode"),
                code,
                "must be between 0 and 2147483647, inclusive",
            ));
        }
    }
    errs
}

impl Strategy for VolumeAttachmentStrategy {
    /// DELETE answers with the object, as kube's registry declares (`ReturnDeletedObject`).
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn defaults(&self, obj: &mut Value) {
        // The inline PersistentVolumeSpec gets a PersistentVolume's defaults.
        if is_set(obj, "/spec/source/inlineVolumeSpec") {
            default(
                obj,
                "/spec/source/inlineVolumeSpec/persistentVolumeReclaimPolicy",
                json!("Retain"),
            );
            default(
                obj,
                "/spec/source/inlineVolumeSpec/volumeMode",
                json!("Filesystem"),
            );
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"attached": false});
    }

    /// A status write changes only the status; an error's `errorCode` (an
    /// alpha field, MutableCSINodeAllocatableCount, off in 1.33) is dropped
    /// unless the stored error already has one.
    fn update_subresource(&self, subresource: &str, new: &Value, old: &Value) -> Option<Value> {
        if subresource != "status" {
            return None;
        }
        let mut merged = old.clone();
        match new.get("status") {
            Some(status) => merged["status"] = status.clone(),
            None => fields::remove(&mut merged, "/status"),
        }
        for which in ["attachError", "detachError"] {
            let code = format!("/status/{which}/errorCode");
            if !is_set(old, &code) {
                fields::remove(&mut merged, &code);
            }
        }
        fields::set(
            &mut merged,
            "/metadata/resourceVersion",
            json!(text(new, "/metadata/resourceVersion")),
        );
        Some(merged)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = common(obj);
        // v1 objects are held to the CSI driver and PV name rules too.
        errs.extend(fields::csi_driver_name(
            text(obj, "/spec/attacher"),
            "spec.attacher",
        ));
        if is_set(obj, "/spec/source/persistentVolumeName") {
            let pv = text(obj, "/spec/source/persistentVolumeName");
            for msg in validation::dns1123_subdomain(pv) {
                errs.push(FieldError::invalid(
                    "spec.source.persistentVolumeName",
                    pv,
                    msg,
                ));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = common(new);
        errs.extend(fields::immutable(new, old, "/spec", "spec"));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column {
                format: "name".into(),
                ..Column::new(
                    "Attacher",
                    "string",
                    &property_description::<VolumeAttachmentSpec>("attacher"),
                )
            },
            Column::new(
                "PV",
                "string",
                &property_description::<VolumeAttachmentSource>("persistentVolumeName"),
            ),
            Column::new(
                "Node",
                "string",
                &property_description::<VolumeAttachmentSpec>("nodeName"),
            ),
            Column::new(
                "Attached",
                "boolean",
                &property_description::<VolumeAttachmentStatus>("attached"),
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            fields::text_cell(obj, "/spec/attacher"),
            fields::text_cell(obj, "/spec/source/persistentVolumeName"),
            fields::text_cell(obj, "/spec/nodeName"),
            json!(obj.pointer("/status/attached") == Some(&Value::Bool(true))),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn attachment() -> Value {
        json!({"metadata": {"name": "csi-123"}, "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "node-a",
            "source": {"persistentVolumeName": "pv-1"}}})
    }

    #[test]
    fn create_starts_unattached_and_row() {
        let mut va = attachment();
        va["status"] = json!({"attached": true});
        VolumeAttachmentStrategy.prepare_for_create(&mut va);
        assert_eq!(va["status"], json!({"attached": false}));
        assert!(VolumeAttachmentStrategy.validate(&va).is_empty());
        assert_eq!(
            VolumeAttachmentStrategy.cells(&va)[1..5],
            [
                json!("ebs.csi.aws.com"),
                json!("pv-1"),
                json!("node-a"),
                json!(false)
            ]
        );
        assert_eq!(VolumeAttachmentStrategy.columns()[1].format, "name");
        let mut inline = json!({"spec": {"source": {"inlineVolumeSpec": {"csi": {"driver": "d", "volumeHandle": "h"}}}}});
        VolumeAttachmentStrategy.defaults(&mut inline);
        assert_eq!(
            inline["spec"]["source"]["inlineVolumeSpec"]["persistentVolumeReclaimPolicy"],
            "Retain"
        );
    }

    #[test]
    fn refusals() {
        let none = json!({"spec": {"attacher": "", "nodeName": "node-a", "source": {}}});
        assert_eq!(
            messages(&VolumeAttachmentStrategy.validate(&none)),
            [
                "spec.attacher: Required value",
                "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
                "spec.attacher: Required value",
                "spec.attacher: Invalid value: \"\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ]
        );
        let both = json!({"spec": {"attacher": "a.example.com", "nodeName": "",
            "source": {"persistentVolumeName": "pv", "inlineVolumeSpec": {}}}});
        let errs = messages(&VolumeAttachmentStrategy.validate(&both));
        assert_eq!(
            errs[0],
            "spec.source: Forbidden: must specify exactly one of inlineVolumeSpec and persistentVolumeName"
        );
        assert!(
            errs[1]
                .starts_with("spec.nodeName: Invalid value: \"\": a lowercase RFC 1123 subdomain")
        );
        let long = json!({"spec": {"attacher": format!("{}.example.com", "a".repeat(60)), "nodeName": "n",
            "source": {"persistentVolumeName": "pv"}}});
        assert_eq!(
            messages(&VolumeAttachmentStrategy.validate(&long)),
            ["spec.attacher: Too long: may not be more than 63 bytes"]
        );
    }

    #[test]
    fn spec_is_immutable() {
        let old = attachment();
        let mut new = old.clone();
        new["spec"]["nodeName"] = json!("node-b");
        let errs = VolumeAttachmentStrategy.validate_update(&new, &old);
        assert_eq!(
            (errs.len(), errs[0].field.as_str(), errs[0].detail.as_str()),
            (1, "spec", "field is immutable")
        );
        let mut status = old.clone();
        status["status"] =
            json!({"attached": true, "attachmentMetadata": {"devicePath": "/dev/xvdba"}});
        assert!(
            VolumeAttachmentStrategy
                .validate_update(&status, &old)
                .is_empty()
        );
        // A status write keeps the spec and drops a new errorCode.
        let mut write = old.clone();
        write["spec"]["nodeName"] = json!("ignored");
        write["status"] =
            json!({"attached": false, "attachError": {"message": "boom", "errorCode": 5}});
        let merged = VolumeAttachmentStrategy.update_subresource("status", &write, &old);
        assert_eq!(
            merged
                .as_ref()
                .map(|m| (m["spec"]["nodeName"].clone(), m["status"].clone())),
            Some((
                json!("node-a"),
                json!({"attached": false, "attachError": {"message": "boom"}})
            ))
        );
        assert!(
            VolumeAttachmentStrategy
                .update_subresource("", &write, &old)
                .is_none()
        );
    }
}
