//! The rules of each kind: defaults, what a write may set, validation.

use kubechain_apiserver::Strategy;
use kubechain_apiserver::apimachinery::error::FieldError;
use serde_json::{Value, json};

/// The reference types a Flunder may name.
const REFERENCE_TYPES: [&str; 2] = ["Flunder", "Fischer"];

/// A Flunder's status is the server's: empty on create, kept on update.
fn server_status(new: &mut Value, old: Option<&Value>) {
    new["status"] = old
        .and_then(|old| old.get("status"))
        .cloned()
        .unwrap_or_else(|| json!({}));
}

/// v1alpha1 Flunders: a reference defaults its type to `Flunder`; the type
/// must be one of the two, and needs a reference.
pub struct Flunders;

impl Strategy for Flunders {
    fn defaults(&self, obj: &mut Value) {
        let spec = &mut obj["spec"];
        let referenced = spec["reference"].as_str().is_some_and(|r| !r.is_empty());
        if referenced && spec.get("referenceType").is_none_or(Value::is_null) {
            spec["referenceType"] = json!("Flunder");
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        server_status(obj, None);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        server_status(new, Some(old));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec = &obj["spec"];
        let mut errors = Vec::new();
        if let Some(kind) = spec.get("referenceType").filter(|t| !t.is_null()) {
            if !kind.as_str().is_some_and(|k| REFERENCE_TYPES.contains(&k)) {
                errors.push(FieldError::not_supported(
                    "spec.referenceType",
                    kind.clone(),
                    &REFERENCE_TYPES,
                ));
            }
            if spec["reference"].as_str().is_none_or(str::is_empty) {
                errors.push(FieldError::required(
                    "spec.reference",
                    "a reference type needs a reference",
                ));
            }
        }
        errors
    }
}

/// v1beta1 Flunders, kube's sample's validation: the reference type names
/// which of the two references is set, and only that one.
pub struct BetaFlunders;

impl Strategy for BetaFlunders {
    fn prepare_for_create(&self, obj: &mut Value) {
        server_status(obj, None);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        server_status(new, Some(old));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let text = |field: &str| obj["spec"][field].as_str().unwrap_or_default();
        let (flunder, fischer, kind) = (
            text("flunderReference"),
            text("fischerReference"),
            text("referenceType"),
        );
        let mut errors = Vec::new();
        let invalid = |field: &str, value: &str, message: &str| {
            FieldError::invalid(&format!("spec.{field}"), json!(value), message)
        };
        if !flunder.is_empty() && !fischer.is_empty() {
            errors.push(invalid(
                "fischerReference",
                fischer,
                "cannot be set with flunderReference at the same time",
            ));
        } else if !flunder.is_empty() && kind != "Flunder" {
            errors.push(invalid(
                "flunderReference",
                flunder,
                "cannot be set if referenceType is not Flunder",
            ));
        } else if !fischer.is_empty() && kind != "Fischer" {
            errors.push(invalid(
                "fischerReference",
                fischer,
                "cannot be set if referenceType is not Fischer",
            ));
        } else if fischer.is_empty() && kind == "Fischer" {
            errors.push(FieldError::required(
                "spec.fischerReference",
                "cannot be empty if referenceType is Fischer",
            ));
        } else if flunder.is_empty() && kind == "Flunder" {
            errors.push(FieldError::required(
                "spec.flunderReference",
                "cannot be empty if referenceType is Flunder",
            ));
        }
        if !kind.is_empty() && !REFERENCE_TYPES.contains(&kind) {
            errors.push(invalid("referenceType", kind, "must be Flunder or Fischer"));
        }
        errors
    }
}

/// Fischers: no rules beyond the store's.
pub struct Fischers;

impl Strategy for Fischers {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_defaults_its_type_and_a_type_needs_a_reference() {
        let mut flunder = json!({"spec": {"reference": "other"}});
        Flunders.defaults(&mut flunder);
        assert_eq!(flunder["spec"]["referenceType"], "Flunder");
        assert!(Flunders.validate(&flunder).is_empty());
        let lonely = json!({"spec": {"referenceType": "Fischer"}});
        let errors = Flunders.validate(&lonely);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "spec.reference");
        let odd = json!({"spec": {"reference": "x", "referenceType": "Fish"}});
        assert_eq!(Flunders.validate(&odd)[0].field, "spec.referenceType");
        let mut bare = json!({"spec": {}});
        Flunders.defaults(&mut bare);
        assert!(bare["spec"].get("referenceType").is_none());
    }

    #[test]
    fn a_beta_flunder_sets_the_one_reference_its_type_names() {
        let fields = |spec: Value| -> Vec<String> {
            BetaFlunders
                .validate(&json!({"spec": spec}))
                .into_iter()
                .map(|e| e.field)
                .collect()
        };
        assert!(fields(json!({"flunderReference": "a", "referenceType": "Flunder"})).is_empty());
        assert!(fields(json!({})).is_empty());
        assert_eq!(
            fields(
                json!({"flunderReference": "a", "fischerReference": "b", "referenceType": "Flunder"})
            ),
            ["spec.fischerReference"]
        );
        assert_eq!(
            fields(json!({"flunderReference": "a"})),
            ["spec.flunderReference"]
        );
        assert_eq!(
            fields(json!({"referenceType": "Fischer"})),
            ["spec.fischerReference"]
        );
        assert_eq!(
            fields(json!({"referenceType": "Fish"})),
            ["spec.referenceType"]
        );
    }
}
