//! The rules that make a schema structural (kube's `ValidateStructural`:
//! invariants and completeness), with kube's paths and messages.

use crate::error::FieldError;
use serde_json::Value;

use super::path::{child, index, key};
use super::structural::Structural;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// Checks that `s` is structural; `path` is where the schema sits
/// (e.g. `spec.validation.openAPIV3Schema`). Errors are sorted by their
/// text, as kube sorts them.
pub(crate) fn validate_structural(path: &str, s: &Structural) -> Vec<FieldError> {
    let mut errs = Vec::new();
    invariants(s, Level::Root, path, &mut errs);
    value_validation_completeness(s, Some(s), path, path, &mut errs);
    errs.sort_by_cached_key(ToString::to_string);
    errs
}

fn invariants(s: &Structural, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    if s.type_ == "array" && s.items.is_none() {
        errs.push(FieldError::required(
            child(path, "items"),
            "must be specified",
        ));
    }
    if let Some(items) = &s.items {
        invariants(items, Level::Item, &child(path, "items"), errs);
    }
    for (k, v) in s.properties.iter().flatten() {
        invariants(v, Level::Field, &key(&child(path, "properties"), k), errs);
    }
    if s.additional_properties.is_some() {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                child(path, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(extra) = s.additional_schema() {
            invariants(
                extra,
                Level::Field,
                &child(path, "additionalProperties"),
                errs,
            );
        }
    }
    if s.x_int_or_string && s.x_preserve_unknown_fields {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.x_int_or_string && s.x_embedded_resource {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-embedded-resource"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    value_validation(
        s,
        is_int_or_string_any_of(s),
        is_int_or_string_all_of(s),
        lvl,
        path,
        errs,
    );

    let check_metadata = lvl == Level::Root || s.x_embedded_resource;
    if s.x_embedded_resource && s.type_ != "object" {
        let msg = "must be object if x-kubernetes-embedded-resource is true";
        if s.type_.is_empty() {
            errs.push(FieldError::required(child(path, "type"), msg));
        } else {
            errs.push(FieldError::invalid(
                child(path, "type"),
                s.type_.as_str(),
                msg,
            ));
        }
    } else if s.type_.is_empty() && !s.x_int_or_string && !s.x_preserve_unknown_fields {
        let msg = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(child(path, "type"), msg));
    }
    if s.x_embedded_resource && s.additional_properties.is_some() {
        errs.push(FieldError::forbidden(
            child(path, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !s.type_.is_empty() && s.type_ != "object" {
        errs.push(FieldError::invalid(
            child(path, "type"),
            s.type_.as_str(),
            "must be object at the root",
        ));
    }
    for meta in ["kind", "apiVersion"] {
        if let Some(prop) = s.property(meta).filter(|_| check_metadata)
            && prop.type_ != "string"
        {
            errs.push(FieldError::invalid(
                child(&key(&child(path, "properties"), meta), "type"),
                prop.type_.as_str(),
                "must be string",
            ));
        }
    }
    if let Some(metadata) = s.property("metadata") {
        metadata_invariants(
            metadata,
            check_metadata,
            lvl,
            &key(&child(path, "properties"), "metadata"),
            errs,
        );
    }
    if s.x_embedded_resource && !s.x_preserve_unknown_fields && s.properties.is_none() {
        errs.push(FieldError::required(
            child(path, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn metadata_invariants(
    s: &Structural,
    check_metadata: bool,
    lvl: Level,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if check_metadata && s.type_ != "object" {
        errs.push(FieldError::invalid(
            child(path, "type"),
            s.type_.as_str(),
            "must be object",
        ));
    }
    if lvl != Level::Root {
        return;
    }
    let only_names = s.properties.as_ref().is_none_or(|props| {
        let has = |n: &str| props.iter().any(|(k, _)| k == n);
        (has("name") && has("generateName") && props.len() == 2)
            || ((has("name") || has("generateName")) && props.len() == 1)
    });
    let restricted = !only_names
        || !s.description.is_empty()
        || !s.title.is_empty()
        || s.nullable
        || s.items.is_some()
        || s.additional_properties.is_some()
        || s.has_extensions()
        || !s.x_validations.is_empty()
        || s.has_value_validation();
    if restricted {
        errs.push(FieldError::forbidden(
            path,
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

/// Whether `s` is exactly `{type: <t>}` with nothing else set.
fn is_bare_type(s: &Structural, t: &str) -> bool {
    s.type_ == t
        && s.description.is_empty()
        && s.title.is_empty()
        && !s.nullable
        && s.default.is_none()
        && s.items.is_none()
        && s.properties.is_none()
        && s.additional_properties.is_none()
        && s.external_docs.is_none()
        && !s.has_value_validation()
        && !s.has_extensions()
        && s.x_validations.is_empty()
}

fn is_int_or_string_pair(any_of: &[Structural]) -> bool {
    any_of.len() == 2 && is_bare_type(&any_of[0], "integer") && is_bare_type(&any_of[1], "string")
}

/// `anyOf: [{type: integer}, {type: string}]`: kube's first int-or-string exception.
fn is_int_or_string_any_of(s: &Structural) -> bool {
    is_int_or_string_pair(&s.any_of)
}

/// `allOf: [{anyOf: [{type: integer}, {type: string}]}, ...]`: the second.
fn is_int_or_string_all_of(s: &Structural) -> bool {
    s.all_of
        .first()
        .is_some_and(|first| is_int_or_string_pair(&first.any_of))
}

fn value_validation(
    v: &Structural,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    lvl: Level,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if !skip_any_of {
        for (i, n) in v.any_of.iter().enumerate() {
            nested(n, false, lvl, &index(&child(path, "anyOf"), i), errs);
        }
    }
    for (i, n) in v.all_of.iter().enumerate() {
        nested(
            n,
            skip_first_all_of_any_of && i == 0,
            lvl,
            &index(&child(path, "allOf"), i),
            errs,
        );
    }
    for (i, n) in v.one_of.iter().enumerate() {
        nested(n, false, lvl, &index(&child(path, "oneOf"), i), errs);
    }
    if let Some(not) = &v.not {
        nested(not, false, lvl, &child(path, "not"), errs);
    }
    if let Some(pattern) = &v.pattern
        && let Err(e) = regex::Regex::new(&pattern.source)
    {
        let detail = e
            .to_string()
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_string();
        errs.push(FieldError::invalid(
            child(path, "pattern"),
            pattern.source.as_str(),
            format!(
                "must be a valid regular expression, but isn't: error parsing regexp: {detail}"
            ),
        ));
    }
}

/// A value validation under `allOf`/`anyOf`/`oneOf`/`not`: everything
/// structural is forbidden there.
fn nested(v: &Structural, skip_any_of: bool, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    value_validation(v, skip_any_of, false, lvl, path, errs);
    if let Some(items) = &v.items {
        nested(items, false, lvl, &child(path, "items"), errs);
    }
    for (k, p) in v.properties.iter().flatten() {
        nested(
            p,
            false,
            Level::Field,
            &key(&child(path, "properties"), k),
            errs,
        );
    }
    let forbid = |errs: &mut Vec<FieldError>, field: &str, msg: &str| {
        errs.push(FieldError::forbidden(child(path, field), msg))
    };
    if !v.type_.is_empty() {
        forbid(errs, "type", "must be empty to be structural");
    }
    if v.additional_properties.is_some() {
        forbid(
            errs,
            "additionalProperties",
            "must be undefined to be structural",
        );
    }
    if v.default.is_some() {
        forbid(errs, "default", "must be undefined to be structural");
    }
    if !v.title.is_empty() {
        forbid(errs, "title", "must be empty to be structural");
    }
    if !v.description.is_empty() {
        forbid(errs, "description", "must be empty to be structural");
    }
    if v.nullable {
        forbid(errs, "nullable", "must be false to be structural");
    }
    if v.external_docs.is_some() {
        forbid(errs, "externalDocs", "must be undefined to be structural");
    }
    if v.x_preserve_unknown_fields {
        forbid(
            errs,
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        );
    }
    if v.x_embedded_resource {
        forbid(
            errs,
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        );
    }
    if v.x_int_or_string {
        forbid(
            errs,
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        );
    }
    if !v.x_list_map_keys.is_empty() {
        forbid(
            errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if v.x_list_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if v.x_map_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        );
    }
    if !v.x_validations.is_empty() {
        forbid(
            errs,
            "x-kubernetes-validations",
            "must be empty to be structural",
        );
    }
    if v.property("metadata").is_some() {
        errs.push(FieldError::forbidden(
            key(&child(path, "properties"), "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

fn defined_in(s_path: &str, v_path: &str) -> FieldError {
    FieldError::required(s_path, format!("because it is defined in {v_path}"))
}

/// Every property or items a value validation mentions must also be
/// specified structurally (kube checks the root's value validations).
fn value_validation_completeness(
    v: &Structural,
    s: Option<&Structural>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        errs.push(defined_in(s_path, v_path));
        return;
    };
    if let Some(not) = &v.not {
        nested_completeness(not, Some(s), s_path, &child(v_path, "not"), errs);
    }
    for (name, list) in [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ] {
        for (i, n) in list.iter().enumerate() {
            nested_completeness(n, Some(s), s_path, &index(&child(v_path, name), i), errs);
        }
    }
}

fn nested_completeness(
    v: &Structural,
    s: Option<&Structural>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        errs.push(defined_in(s_path, v_path));
        return;
    };
    value_validation_completeness(v, Some(s), s_path, v_path, errs);
    if let Some(items) = &v.items {
        nested_completeness(
            items,
            s.items.as_deref(),
            &child(s_path, "items"),
            &child(v_path, "items"),
            errs,
        );
    }
    for (k, p) in v.properties.iter().flatten() {
        let s_prop_path = key(&child(s_path, "properties"), k);
        let v_prop_path = key(&child(v_path, "properties"), k);
        match s.property(k) {
            None => errs.push(defined_in(&s_prop_path, &v_prop_path)),
            Some(sp) => nested_completeness(p, Some(sp), &s_prop_path, &v_prop_path, errs),
        }
    }
}

/// Whether a raw (JSON) schema is structural; used to relax update rules
/// for CRDs that were stored before a rule existed.
pub(crate) fn is_structural(schema: &Value) -> bool {
    Structural::new(schema).is_ok_and(|s| validate_structural("", &s).is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(schema: Value) -> Vec<String> {
        let s = Structural::new(&schema).unwrap();
        validate_structural("spec.validation.openAPIV3Schema", &s)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn structural_rules_table() {
        let p = "spec.validation.openAPIV3Schema";
        let cases: Vec<(Value, Vec<String>)> = vec![
            (
                json!({"properties": {"spec": {"type": "object"}}}),
                vec![format!(
                    "{p}.type: Required value: must not be empty at the root"
                )],
            ),
            (
                json!({"type": "array", "items": {"type": "string"}}),
                vec![format!(
                    "{p}.type: Invalid value: \"array\": must be object at the root"
                )],
            ),
            (
                json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}),
                vec![format!(
                    "{p}.properties[spec].type: Required value: must not be empty for specified object fields"
                )],
            ),
            (
                json!({"type": "object", "properties": {"list": {"type": "array", "items": {}}}}),
                vec![format!(
                    "{p}.properties[list].items.type: Required value: must not be empty for specified array items"
                )],
            ),
            (
                json!({"type": "object", "properties": {"list": {"type": "array"}}}),
                vec![format!(
                    "{p}.properties[list].items: Required value: must be specified"
                )],
            ),
            (
                json!({"type": "object", "additionalProperties": {"type": "string"}}),
                vec![format!(
                    "{p}.additionalProperties: Forbidden: must not be used at the root"
                )],
            ),
            (
                json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
                vec![format!(
                    "{p}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
                )],
            ),
            (
                json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}}}}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"kind": {"type": "integer"}}}),
                vec![format!(
                    "{p}.properties[kind].type: Invalid value: \"integer\": must be string"
                )],
            ),
            (
                json!({"type": "object", "properties": {"t": {"type": "string", "x-kubernetes-embedded-resource": true}}}),
                vec![
                    format!(
                        "{p}.properties[t].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
                    ),
                    format!(
                        "{p}.properties[t].type: Invalid value: \"string\": must be object if x-kubernetes-embedded-resource is true"
                    ),
                ],
            ),
            (
                json!({"type": "object", "properties": {"v": {"type": "string", "anyOf": [{"type": "string", "description": "d"}]}}}),
                vec![
                    format!(
                        "{p}.properties[v].anyOf[0].description: Forbidden: must be empty to be structural"
                    ),
                    format!(
                        "{p}.properties[v].anyOf[0].type: Forbidden: must be empty to be structural"
                    ),
                ],
            ),
            (
                json!({"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}}}),
                vec![format!(
                    "{p}.properties[port].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"
                )],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "anyOf": [{"properties": {"b": {"maxLength": 1}}}]}),
                vec![format!(
                    "{p}.properties[b]: Required value: because it is defined in {p}.anyOf[0].properties[b]"
                )],
            ),
            (
                json!({"type": "object", "properties": {"v": {"type": "object", "allOf": [{"properties": {"metadata": {}}}]}}}),
                vec![format!(
                    "{p}.properties[v].allOf[0].properties[metadata]: Forbidden: must not be specified in a nested context"
                )],
            ),
            (
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                vec![],
            ),
        ];
        for (schema, want) in cases {
            assert_eq!(messages(schema.clone()), want, "{schema}");
        }
    }

    #[test]
    fn invalid_pattern() {
        let errs = messages(
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}}),
        );
        assert_eq!(errs.len(), 1);
        assert!(errs[0].starts_with("spec.validation.openAPIV3Schema.properties[a].pattern: Invalid value: \"([\": must be a valid regular expression, but isn't: "));
    }

    #[test]
    fn structural_check_of_raw_schemas() {
        assert!(is_structural(&json!({"type": "object"})));
        assert!(!is_structural(&json!({"properties": {}})));
        assert!(!is_structural(&json!({"$ref": "#/x"})));
    }
}
