//! Embedded resources (`x-kubernetes-embedded-resource`): their `apiVersion`,
//! `kind` and `metadata` are checked like a top-level object's (kube's
//! `objectmeta.Validate`).

use crate::error::FieldError;
use crate::validation::{self, NameRule};
use serde_json::{Value, json};

use super::path::{child, index, key};
use super::structural::{Structural, json_kind};

/// Validates every embedded resource in `obj`. With `is_resource_root`,
/// `obj` itself is checked as a resource too.
pub(crate) fn validate_embedded(
    path: &str,
    obj: &Value,
    schema: &Structural,
    is_resource_root: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk(path, obj, schema, is_resource_root, &mut errs);
    errs
}

fn walk(path: &str, x: &Value, s: &Structural, embedded: bool, errs: &mut Vec<FieldError>) {
    match x {
        Value::Object(map) => {
            if embedded || s.x_embedded_resource {
                errs.extend(validate_resource(path, map));
            }
            for (k, v) in map {
                if let Some(prop) = s.property(k) {
                    walk(&child(path, k), v, prop, false, errs);
                } else if let Some(extra) = s.additional_schema() {
                    walk(&key(path, k), v, extra, false, errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &s.items {
                for (i, v) in items.iter().enumerate() {
                    walk(&index(path, i), v, item_schema, false, errs);
                }
            }
        }
        _ => {}
    }
}

/// kube's `validateEmbeddedResource`.
fn validate_resource(path: &str, x: &serde_json::Map<String, Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !x.contains_key("apiVersion") {
        errs.push(FieldError::required(child(path, "apiVersion"), ""));
    }
    if !x.contains_key("kind") {
        errs.push(FieldError::required(child(path, "kind"), ""));
    }
    for (k, v) in x {
        match k.as_str() {
            "apiVersion" => match v.as_str() {
                None => errs.push(FieldError::invalid(
                    child(path, "apiVersion"),
                    v.clone(),
                    "must be a string",
                )),
                Some("") => errs.push(FieldError::invalid(
                    child(path, "apiVersion"),
                    "",
                    "must not be empty",
                )),
                Some(api_version) if api_version.matches('/').count() > 1 => {
                    errs.push(FieldError::invalid(
                        child(path, "apiVersion"),
                        api_version,
                        format!("unexpected GroupVersion string: {api_version}"),
                    ))
                }
                Some(_) => {}
            },
            "kind" => match v.as_str() {
                None => errs.push(FieldError::invalid(
                    child(path, "kind"),
                    v.clone(),
                    "must be a string",
                )),
                Some("") => errs.push(FieldError::invalid(
                    child(path, "kind"),
                    "",
                    "must not be empty",
                )),
                Some(kind) => {
                    let problems = validation::dns1035_label(&kind.to_lowercase());
                    if !problems.is_empty() {
                        errs.push(FieldError::invalid(
                            child(path, "kind"),
                            kind,
                            format!(
                                "may have mixed case, but should otherwise match: {}",
                                problems.join(",")
                            ),
                        ));
                    }
                }
            },
            "metadata" => errs.extend(validate_metadata(&child(path, "metadata"), v)),
            _ => {}
        }
    }
    errs
}

/// Whether a JSON value fits a Go type.
type TypeCheck = fn(&Value) -> bool;

/// The Go type of an ObjectMeta field, for decode errors.
fn meta_field_type(field: &str) -> Option<(&'static str, TypeCheck)> {
    let string: TypeCheck = Value::is_string;
    let int: TypeCheck = |v| v.is_i64();
    let string_map: TypeCheck = |v| {
        v.as_object()
            .is_some_and(|m| m.values().all(Value::is_string))
    };
    let list: TypeCheck = Value::is_array;
    Some(match field {
        "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion"
        | "creationTimestamp" | "deletionTimestamp" => ("string", string),
        "generation" | "deletionGracePeriodSeconds" => ("int64", int),
        "labels" | "annotations" => ("map[string]string", string_map),
        "finalizers" => ("[]string", list),
        "ownerReferences" => ("[]v1.OwnerReference", list),
        "managedFields" => ("[]v1.ManagedFieldsEntry", list),
        _ => return None,
    })
}

/// Decodes embedded metadata like kube does into an ObjectMeta, then runs
/// ObjectMeta validation with path-segment names.
fn validate_metadata(path: &str, v: &Value) -> Vec<FieldError> {
    let Some(map) = v.as_object() else {
        if v.is_null() {
            return Vec::new();
        }
        let msg = format!(
            "json: cannot unmarshal {} into Go value of type v1.ObjectMeta",
            json_kind(v)
        );
        return vec![FieldError::invalid(path, v.clone(), msg)];
    };
    for (k, field) in map {
        if field.is_null() {
            continue;
        }
        if let Some((go_type, ok)) = meta_field_type(k)
            && !ok(field)
        {
            let msg = format!(
                "json: cannot unmarshal {} into Go struct field ObjectMeta.{k} of type {go_type}",
                json_kind(field)
            );
            return vec![FieldError::invalid(path, v.clone(), msg)];
        }
    }
    let mut meta = map.clone();
    if meta
        .get("name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        meta.insert("name".into(), Value::String("fakename".into()));
    }
    let namespaced = meta
        .get("namespace")
        .and_then(Value::as_str)
        .is_some_and(|ns| !ns.is_empty());
    validation::object_meta(
        &json!({"metadata": meta}),
        namespaced,
        NameRule::PathSegment,
    )
    .into_iter()
    .map(|mut e| {
        let rest = e
            .field
            .strip_prefix("metadata")
            .unwrap_or(&e.field)
            .to_string();
        e.field = format!("{path}{rest}");
        e
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Structural {
        Structural::new(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                "items": {"type": "array", "items": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}
            }}}
        }))
        .unwrap()
    }

    fn messages(obj: Value) -> Vec<String> {
        validate_embedded("", &obj, &schema(), false)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn embedded_resources_need_type_meta() {
        assert_eq!(
            messages(json!({"spec": {"template": {}}})),
            vec![
                "spec.template.apiVersion: Required value",
                "spec.template.kind: Required value"
            ]
        );
        assert!(
            messages(json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod"}}})).is_empty()
        );
        assert_eq!(
            messages(json!({"spec": {"items": [{"apiVersion": "v1", "kind": "Bad_Kind"}]}})),
            vec![
                "spec.items[0].kind: Invalid value: \"Bad_Kind\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"template": {"apiVersion": 1, "kind": ""}}})),
            vec![
                "spec.template.apiVersion: Invalid value: 1: must be a string",
                "spec.template.kind: Invalid value: \"\": must not be empty",
            ]
        );
    }

    #[test]
    fn embedded_metadata_is_object_meta() {
        let errs = messages(
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a/b", "labels": {"bad key": "x"}}}}}),
        );
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with(
            "spec.template.metadata.name: Invalid value: \"a/b\": may not contain '/'"
        ));
        assert!(errs[1].starts_with("spec.template.metadata.labels: Invalid value: \"bad key\""));
        let errs = messages(
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": "x"}}}}),
        );
        assert_eq!(
            errs,
            vec![
                r#"spec.template.metadata: Invalid value: {"labels":"x"}: json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string"#
            ]
        );
    }
}
