//! storage.k8s.io/v1 StorageClasses: reclaim policy Delete and binding mode
//! Immediate by default; provisioner, parameters and reclaim policy never change.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use apimachinery::validation;
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, text};

/// The annotations that make a class the default.
const DEFAULT_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io~1is-default-class",
    "storageclass.beta.kubernetes.io~1is-default-class",
];
/// Most parameters a class may carry.
const MAX_PARAMETERS: usize = 512;

/// The rules of `storage.k8s.io/v1/StorageClass`.
pub struct StorageClassStrategy;

impl Strategy for StorageClassStrategy {
    /// DELETE answers with the object, as kube's registry declares (`ReturnDeletedObject`).
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn defaults(&self, obj: &mut Value) {
        default(obj, "/reclaimPolicy", json!("Delete"));
        default(obj, "/volumeBindingMode", json!("Immediate"));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let provisioner = text(obj, "/provisioner");
        if provisioner.is_empty() {
            errs.push(FieldError::required("provisioner", ""));
        } else {
            errs.extend(
                validation::qualified_name(&provisioner.to_lowercase())
                    .into_iter()
                    .map(|m| FieldError::invalid("provisioner", provisioner, m)),
            );
        }
        let parameters = fields::object(obj, "/parameters").map_or(0, |p| p.len());
        if parameters > MAX_PARAMETERS {
            errs.push(FieldError::too_long("parameters", MAX_PARAMETERS));
        }
        let policy = text(obj, "/reclaimPolicy");
        if !matches!(policy, "Delete" | "Retain") {
            errs.push(FieldError::not_supported(
                "reclaimPolicy",
                policy,
                &["Delete", "Retain"],
            ));
        }
        let mode = text(obj, "/volumeBindingMode");
        if !matches!(mode, "Immediate" | "WaitForFirstConsumer") {
            errs.push(FieldError::not_supported(
                "volumeBindingMode",
                mode,
                &["Immediate", "WaitForFirstConsumer"],
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        for field in ["parameters", "provisioner", "reclaimPolicy"] {
            if new.get(field) != old.get(field) {
                errs.push(FieldError::forbidden(
                    field,
                    format!("updates to {field} are forbidden."),
                ));
            }
        }
        errs.extend(fields::immutable(
            new,
            old,
            "/volumeBindingMode",
            "volumeBindingMode",
        ));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Provisioner",
                "string",
                "provisioner indicates the type of the provisioner.",
            ),
            Column::new(
                "ReclaimPolicy",
                "string",
                "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class.",
            ),
            Column::new(
                "VolumeBindingMode",
                "string",
                "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.",
            ),
            Column::new(
                "AllowVolumeExpansion",
                "string",
                "allowVolumeExpansion shows whether the storage class allow volume expand.",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let is_default = DEFAULT_ANNOTATIONS
            .iter()
            .any(|a| text(obj, &format!("/metadata/annotations/{a}")) == "true");
        let name = text(obj, "/metadata/name");
        let name = if is_default {
            format!("{name} (default)")
        } else {
            name.to_string()
        };
        let or = |pointer: &str, fallback: &str| {
            let v = text(obj, pointer);
            json!(if v.is_empty() { fallback } else { v })
        };
        vec![
            json!(name),
            fields::text_cell(obj, "/provisioner"),
            or("/reclaimPolicy", "Delete"),
            or("/volumeBindingMode", "Immediate"),
            json!(obj.get("allowVolumeExpansion") == Some(&Value::Bool(true))),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_and_row() {
        let mut sc = json!({"metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "rancher.io/local-path"});
        StorageClassStrategy.defaults(&mut sc);
        assert_eq!(
            (sc["reclaimPolicy"].clone(), sc["volumeBindingMode"].clone()),
            (json!("Delete"), json!("Immediate"))
        );
        assert!(
            StorageClassStrategy.validate(&sc).is_empty(),
            "{:?}",
            StorageClassStrategy.validate(&sc)
        );
        assert_eq!(StorageClassStrategy.cells(&sc)[0], "standard (default)");
        assert_eq!(StorageClassStrategy.cells(&sc)[4], false);
        let mut changed = sc.clone();
        changed["provisioner"] = json!("example.com/other");
        assert_eq!(
            StorageClassStrategy.validate_update(&changed, &sc)[0].to_string(),
            "provisioner: Forbidden: updates to provisioner are forbidden."
        );
    }
}
