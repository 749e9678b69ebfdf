//! `subresources` (kube's `ValidateCustomResourceDefinitionSubresources`):
//! the scale subresource's replica and selector paths.

use crate::error::FieldError;
use serde_json::Value;

use super::columns::validate_simple_json_path;
use crate::schema::path::child;

/// Validates the subresources at `path` (e.g. `spec.subresources`).
pub(super) fn validate_subresources(subresources: Option<&Value>, path: &str) -> Vec<FieldError> {
    let Some(scale) = subresources
        .and_then(|s| s.get("scale"))
        .filter(|s| !s.is_null())
    else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    let get = |k: &str| scale.get(k).and_then(Value::as_str).unwrap_or_default();
    for (field, prefix, msg) in [
        (
            "specReplicasPath",
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let fpath = child(path, &format!("scale.{field}"));
        let value = get(field);
        if value.is_empty() {
            errs.push(FieldError::required(fpath, ""));
            continue;
        }
        let problems = validate_simple_json_path(value, &fpath);
        if !problems.is_empty() {
            errs.extend(problems);
        } else if !value.starts_with(prefix) {
            errs.push(FieldError::invalid(fpath, value, msg));
        }
    }
    let selector = get("labelSelectorPath");
    if !selector.is_empty() {
        let fpath = child(path, "scale.labelSelectorPath");
        let problems = validate_simple_json_path(selector, &fpath);
        if !problems.is_empty() {
            errs.extend(problems);
        } else if !selector.starts_with(".spec.") && !selector.starts_with(".status.") {
            errs.push(FieldError::invalid(
                fpath,
                selector,
                "should be a json path under either .spec or .status",
            ));
        }
    }
    errs
}
