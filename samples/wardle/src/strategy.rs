//! The rules of each kind: defaults, what a write may set, validation.

use kubechain_apiserver::Strategy;
use kubechain_apiserver::apimachinery::error::FieldError;
use serde_json::{Value, json};

/// The reference types a Flunder may name.
const REFERENCE_TYPES: [&str; 2] = ["Flunder", "Fischer"];

/// Flunders: a reference defaults its type to `Flunder`; the type must be
/// one of the two, and needs a reference; the status is the server's.
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
        obj["status"] = json!({});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        new["status"] = old.get("status").cloned().unwrap_or_else(|| json!({}));
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
}
