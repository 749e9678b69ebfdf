//! `additionalPrinterColumns` (kube's `ValidateCustomResourceColumnDefinition`)
//! and the simple JSON paths they, and the scale subresource, use.

use crate::error::FieldError;
use serde_json::Value;

use crate::schema::path::child;

const TYPES: &str = "boolean,date,integer,number,string";
const FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";

/// Validates one printer column at `path` (e.g. `spec.additionalPrinterColumns[0]`).
pub(super) fn validate_column(col: &Value, path: &str) -> Vec<FieldError> {
    let get = |k: &str| col.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut errs = Vec::new();
    if get("name").is_empty() {
        errs.push(FieldError::required(child(path, "name"), ""));
    }
    let type_ = get("type");
    if type_.is_empty() {
        errs.push(FieldError::required(
            child(path, "type"),
            format!("must be one of {TYPES}"),
        ));
    } else if !TYPES.split(',').any(|t| t == type_) {
        errs.push(FieldError::invalid(
            child(path, "type"),
            type_,
            format!("must be one of {TYPES}"),
        ));
    }
    let format = get("format");
    if !format.is_empty() && !FORMATS.split(',').any(|f| f == format) {
        errs.push(FieldError::invalid(
            child(path, "format"),
            format,
            format!("must be one of {FORMATS}"),
        ));
    }
    let json_path = get("jsonPath");
    if json_path.is_empty() {
        errs.push(FieldError::required(child(path, "JSONPath"), ""));
    } else {
        errs.extend(validate_simple_json_path(
            json_path,
            &child(path, "JSONPath"),
        ));
    }
    errs
}

/// kube's `validateSimpleJSONPath`: a path in dot notation starting with `.`.
pub(super) fn validate_simple_json_path(s: &str, path: &str) -> Vec<FieldError> {
    if s.is_empty() {
        vec![FieldError::invalid(path, s, "must not be empty")]
    } else if !s.starts_with('.') {
        vec![FieldError::invalid(
            path,
            s,
            "must be a simple json path starting with .",
        )]
    } else {
        Vec::new()
    }
}
