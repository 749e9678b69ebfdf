//! `selectableFields` (kube's `ValidateCustomResourceSelectableFields`) and
//! the field-path resolution it shares with `x-kubernetes-validations`
//! (kube's `cel.ValidFieldPath`).

use crate::error::{Error, FieldError, FieldErrorKind};
use serde_json::Value;

use crate::schema::path::{child, index};
use crate::schema::structural::Structural;

/// At most this many distinct selectable fields.
const MAX_SELECTABLE_FIELDS: usize = 8;

/// Validates `fields` against the schema inside `validation`
/// (`{openAPIV3Schema: ...}`); `schema_path` is where a schema that cannot
/// be built is reported.
pub(super) fn validate_with_schema(
    fields: &[&Value],
    validation: &Value,
    schema_path: &str,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let schema = match validation.get("openAPIV3Schema").filter(|s| !s.is_null()) {
        None => None,
        Some(raw) => match Structural::new(raw) {
            Ok(s) => Some(s),
            Err(e) => {
                errs.push(FieldError::invalid(schema_path, "", e.to_string()));
                None
            }
        },
    };
    errs.extend(validate_selectable_fields(fields, schema.as_ref(), path));
    errs
}

fn validate_selectable_fields(
    fields: &[&Value],
    schema: Option<&Structural>,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut unique: Vec<String> = Vec::new();
    for (i, field) in fields.iter().enumerate() {
        let fpath = child(&index(path, i), "jsonPath");
        let json_path = field
            .get("jsonPath")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if json_path.is_empty() {
            errs.push(FieldError::required(fpath, ""));
            continue;
        }
        let (resolved, found) = match schema
            .ok_or_else(|| Error::bad_request("does not refer to a valid field"))
            .and_then(|s| valid_field_path(json_path, s, false))
        {
            Ok(r) => r,
            Err(e) => {
                errs.push(FieldError::invalid(
                    fpath,
                    json_path,
                    format!("is an invalid path: {e}"),
                ));
                continue;
            }
        };
        if resolved.first().is_some_and(|root| root == "metadata") {
            errs.push(FieldError::invalid(
                &fpath,
                json_path,
                "must not point to fields in metadata",
            ));
        }
        if !matches!(found.type_.as_str(), "string" | "boolean" | "integer") {
            errs.push(FieldError::invalid(
                &fpath,
                json_path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        let key = resolved.join("\u{0}");
        if unique.contains(&key) {
            errs.push(FieldError::duplicate(fpath, json_path));
        } else {
            unique.push(key);
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS {
        errs.push(FieldError {
            kind: FieldErrorKind::TooMany,
            field: path.to_string(),
            value: None,
            detail: format!(
                "{}: must have at most {MAX_SELECTABLE_FIELDS} items",
                unique.len()
            ),
        });
    }
    errs
}

/// Splits a JSON path into `.`, `[`, `]` and the text between them; a
/// token starting with `'` runs to its closing quote.
fn tokens(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = path.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '.' | '[' | ']') {
            out.push(c.to_string());
            i += 1;
            continue;
        }
        let start = i;
        if c == '\'' {
            i += 1;
            while i < chars.len() {
                if chars[i] == '\\' {
                    i += 2;
                    continue;
                }
                if chars[i] == '\'' {
                    i += 1;
                    break;
                }
                i += 1;
            }
        }
        while i < chars.len() && !matches!(chars[i], '.' | '[' | ']') {
            i += 1;
        }
        out.push(chars[start..i.min(chars.len())].iter().collect());
    }
    out
}

fn unescape_single_quoted(s: &str) -> Result<String, Error> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\'') => out.push('\''),
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => {
                return Err(Error::bad_request(format!("invalid escape char \\{other}")));
            }
            None => return Err(Error::bad_request("invalid escape char \\")),
        }
    }
    Ok(out)
}

/// Resolves a JSON path such as `.spec.name` or `.spec.map['key']` against
/// `schema`, returning the path's segments and the schema it reaches.
pub(super) fn valid_field_path<'a>(
    path: &str,
    schema: &'a Structural,
    allow_array: bool,
) -> Result<(Vec<String>, &'a Structural), Error> {
    let mut current = schema;
    let mut segments = Vec::new();
    let toks = tokens(path);
    let mut it = toks.iter();
    let step = |current: &'a Structural, name: &str| -> Result<&'a Structural, Error> {
        if current.properties.is_some() {
            current
                .property(name)
                .ok_or_else(|| Error::bad_request("does not refer to a valid field"))
        } else if current.additional_properties.is_some() {
            current
                .additional_schema()
                .ok_or_else(|| Error::bad_request("does not refer to a valid field"))
        } else {
            Err(Error::bad_request("does not refer to a valid field"))
        }
    };
    while let Some(tok) = it.next() {
        match tok.as_str() {
            "[" => {
                if !allow_array {
                    return Err(Error::bad_request("array notation is not allowed"));
                }
                let quoted = it
                    .next()
                    .ok_or_else(|| Error::bad_request("unexpected end of JSON path"))?;
                if quoted.len() < 2 || !quoted.starts_with('\'') || !quoted.ends_with('\'') {
                    return Err(Error::bad_request(format!(
                        "expected single quoted string but got {quoted}"
                    )));
                }
                let name = unescape_single_quoted(&quoted[1..quoted.len() - 1])
                    .map_err(|e| Error::bad_request(format!("invalid string literal: {e}")))?;
                current = step(current, &name)?;
                segments.push(name);
                match it.next().map(String::as_str) {
                    Some("]") => {}
                    Some(other) => {
                        return Err(Error::bad_request(format!("expected ] but got {other}")));
                    }
                    None => return Err(Error::bad_request("unexpected end of JSON path")),
                }
            }
            "." => {
                let name = it
                    .next()
                    .ok_or_else(|| Error::bad_request("unexpected end of JSON path"))?;
                current = step(current, name)?;
                segments.push(name.clone());
            }
            other => {
                return Err(Error::bad_request(format!(
                    "expected [ or . but got: {other}"
                )));
            }
        }
    }
    Ok((segments, current))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Structural {
        Structural::new(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "color": {"type": "string", "enum": ["red"]},
                "size": {"type": "integer"},
                "ratio": {"type": "number"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }},
            "metadata": {"type": "object"}
        }}))
        .unwrap()
    }

    #[test]
    fn field_paths() {
        let s = schema();
        assert_eq!(
            valid_field_path(".spec.color", &s, false)
                .map(|(p, f)| (p, f.type_.clone()))
                .ok(),
            Some((vec!["spec".into(), "color".into()], "string".into()))
        );
        assert_eq!(
            valid_field_path(".spec.labels['a.b']", &s, true)
                .map(|(p, _)| p)
                .ok(),
            Some(vec!["spec".into(), "labels".into(), "a.b".into()])
        );
        assert_eq!(
            valid_field_path(".spec.labels['a']", &s, false)
                .unwrap_err()
                .to_string(),
            "array notation is not allowed"
        );
        assert_eq!(
            valid_field_path(".spec.nope", &s, false)
                .unwrap_err()
                .to_string(),
            "does not refer to a valid field"
        );
        assert_eq!(
            valid_field_path("spec", &s, false).unwrap_err().to_string(),
            "expected [ or . but got: spec"
        );
        assert_eq!(
            valid_field_path(".spec.", &s, false)
                .unwrap_err()
                .to_string(),
            "unexpected end of JSON path"
        );
    }

    #[test]
    fn selectable_fields_table() {
        let s = schema();
        let run = |fields: Value| -> Vec<String> {
            let list: Vec<&Value> = fields.as_array().unwrap().iter().collect();
            validate_selectable_fields(&list, Some(&s), "spec.selectableFields")
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert!(run(json!([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"}])).is_empty());
        assert_eq!(
            run(json!([{"jsonPath": ".spec.ratio"}])),
            vec![
                r#"spec.selectableFields[0].jsonPath: Invalid value: ".spec.ratio": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."#
            ]
        );
        assert_eq!(
            run(json!([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.color"}])),
            vec![r#"spec.selectableFields[1].jsonPath: Duplicate value: ".spec.color""#]
        );
        assert_eq!(
            run(json!([{}])),
            vec!["spec.selectableFields[0].jsonPath: Required value"]
        );
        assert_eq!(
            run(json!([{"jsonPath": ".spec.missing"}])),
            vec![
                r#"spec.selectableFields[0].jsonPath: Invalid value: ".spec.missing": is an invalid path: does not refer to a valid field"#
            ]
        );
    }

    #[test]
    fn at_most_eight_selectable_fields() {
        let props: serde_json::Map<String, Value> = (0..9)
            .map(|i| (format!("f{i}"), json!({"type": "string"})))
            .collect();
        let s = Structural::new(
            &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}),
        )
        .unwrap();
        let fields: Vec<Value> = (0..9)
            .map(|i| json!({"jsonPath": format!(".spec.f{i}")}))
            .collect();
        let refs: Vec<&Value> = fields.iter().collect();
        let errs: Vec<String> =
            validate_selectable_fields(&refs, Some(&s), "spec.selectableFields")
                .iter()
                .map(ToString::to_string)
                .collect();
        assert_eq!(
            errs,
            vec!["spec.selectableFields: Too many: 9: must have at most 8 items"]
        );
    }
}
