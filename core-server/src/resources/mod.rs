//! The built-in resources this server serves: one small strategy each.

mod configmap;
mod event;
mod namespace;
mod secret;
mod serviceaccount;

pub use namespace::FINALIZER as NAMESPACE_FINALIZER;

use generic_server::resource::{GroupVersionKind, Resource};
use k8s_openapi::api::core::v1;

/// Every resource of the core server, in discovery order.
pub fn all() -> Vec<Resource> {
    vec![
        Resource::builtin::<v1::ConfigMap>(configmap::ConfigMapStrategy).short_names(&["cm"]),
        Resource::builtin::<v1::Event>(event::EventStrategy).short_names(&["ev"]),
        Resource::builtin::<v1::Namespace>(namespace::NamespaceStrategy)
            .short_names(&["ns"])
            .verbs(&["create", "delete", "get", "list", "patch", "update", "watch"])
            .subresource("finalize", &["update"])
            .subresource("status", &["get", "patch", "update"]),
        Resource::builtin::<v1::Secret>(secret::SecretStrategy),
        Resource::builtin::<v1::ServiceAccount>(serviceaccount::ServiceAccountStrategy)
            .short_names(&["sa"])
            .subresource_of_kind("token", GroupVersionKind::new("authentication.k8s.io", "v1", "TokenRequest"), &["create"]),
    ]
}

/// Validation shared by configmaps and secrets: data keys and total size.
pub(crate) mod data {
    use generic_server::error::FieldError;
    use serde_json::Value;

    /// Largest total size of a ConfigMap's or Secret's data.
    pub const MAX_BYTES: usize = 1024 * 1024;

    fn valid_key(key: &str) -> bool {
        !key.is_empty() && key.len() <= 253 && key != "." && key != ".." && key.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
    }

    /// Problems with the keys of the given maps, and keys present in two of them.
    pub fn validate_keys(obj: &Value, fields: &[&str]) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for field in fields {
            for key in obj.get(*field).and_then(Value::as_object).into_iter().flat_map(|m| m.keys()) {
                if !valid_key(key) {
                    errs.push(FieldError::invalid(
                        format!("{field}[{key}]"),
                        key.as_str(),
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                    ));
                }
                if seen.contains(&key.as_str()) {
                    errs.push(FieldError::invalid(format!("{field}[{key}]"), key.as_str(), "duplicate of key present in another map"));
                }
                seen.push(key);
            }
        }
        errs
    }

    /// The total size of the values of the given maps (strings as stored).
    pub fn total_size(obj: &Value, fields: &[&str]) -> usize {
        fields
            .iter()
            .filter_map(|f| obj.get(*f).and_then(Value::as_object))
            .flat_map(|m| m.iter())
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum()
    }

    /// The number of entries in the given maps.
    pub fn count(obj: &Value, fields: &[&str]) -> usize {
        fields.iter().filter_map(|f| obj.get(*f).and_then(Value::as_object)).map(|m| m.len()).sum()
    }

    /// Errors for changing data of an object marked `immutable`.
    pub fn validate_immutable(new: &Value, old: &Value, fields: &[&str]) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if old.get("immutable") != Some(&Value::Bool(true)) {
            return errs;
        }
        if new.get("immutable") != Some(&Value::Bool(true)) {
            errs.push(FieldError::forbidden("immutable", "field is immutable when `immutable` is set"));
        }
        for field in fields {
            if new.get(*field) != old.get(*field) {
                errs.push(FieldError::forbidden(*field, "field is immutable when `immutable` is set"));
            }
        }
        errs
    }
}
