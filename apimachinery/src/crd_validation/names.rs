//! `spec.names` and `status.acceptedNames` (kube's
//! `ValidateCustomResourceDefinitionNames`).

use crate::error::FieldError;
use crate::validation::dns1035_label;
use serde_json::Value;

use crate::schema::path::{child, index};

/// Validates the names that are set; which are required is the caller's.
pub(super) fn validate_names(names: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let get = |k: &str| names.get(k).and_then(Value::as_str).unwrap_or_default();
    for field in ["plural", "singular"] {
        let value = get(field);
        let problems = dns1035_label(value);
        if !value.is_empty() && !problems.is_empty() {
            errs.push(FieldError::invalid(
                child(path, field),
                value,
                problems.join(","),
            ));
        }
    }
    for field in ["kind", "listKind"] {
        let value = get(field);
        let problems = dns1035_label(&value.to_lowercase());
        if !value.is_empty() && !problems.is_empty() {
            errs.push(FieldError::invalid(
                child(path, field),
                value,
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    problems.join(",")
                ),
            ));
        }
    }
    let list = |k: &str| -> Vec<String> {
        names
            .get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    for (i, short) in list("shortNames").iter().enumerate() {
        let problems = dns1035_label(short);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                index(&child(path, "shortNames"), i),
                short.as_str(),
                problems.join(","),
            ));
        }
    }
    let (kind, list_kind) = (get("kind"), get("listKind"));
    if !kind.is_empty() && kind == list_kind {
        errs.push(FieldError::invalid(
            child(path, "listKind"),
            list_kind,
            "kind and listKind may not be the same",
        ));
    }
    for (i, category) in list("categories").iter().enumerate() {
        let problems = dns1035_label(category);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                index(&child(path, "categories"), i),
                category.as_str(),
                problems.join(","),
            ));
        }
    }
    errs
}
