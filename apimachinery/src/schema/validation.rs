//! Validation of a custom resource against its structural schema, with the
//! paths and messages kube-apiserver reports: kube-openapi's schema
//! validator as apiextensions runs it (`ValidateCustomResource` and
//! `kubeOpenAPIResultToFieldErrors`), then embedded resources and list types.

use crate::error::{FieldError, FieldErrorKind};
use serde_json::Value;

use super::path::{go_float, go_number};
use super::structural::{AdditionalProperties, Structural};
use super::{embedded, formats, list_type};

/// Validates a whole custom resource: the schema's value validations,
/// embedded resources (`x-kubernetes-embedded-resource`), and the
/// uniqueness rules of `x-kubernetes-list-type` `set` and `map`.
///
/// Root metadata (name, labels, ...) is the caller's, as in kube.
pub fn validate(obj: &Value, schema: &Structural) -> Vec<FieldError> {
    let mut errs = validate_values(None, obj, schema);
    errs.extend(embedded::validate_embedded("", obj, schema, false));
    errs.extend(list_type::validate_list_sets_and_maps("", schema, obj));
    errs
}

/// Runs only the schema's value validations, with error paths under
/// `prefix` (kube's `fldPath`; `None` is the nil path of custom resources).
pub(crate) fn validate_values(
    prefix: Option<&str>,
    value: &Value,
    schema: &Structural,
) -> Vec<FieldError> {
    let outcome = validate_node("", schema, value);
    outcome
        .errors
        .into_iter()
        .map(|e| e.into_field_error(prefix))
        .collect()
}

/// The kind of a kube-openapi validation failure (its error code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    InvalidType,
    Required,
    TooLong,
    TooShort,
    Pattern,
    Enum,
    MultipleOf,
    Max,
    Min,
    Unique,
    MaxItems,
    MinItems,
    TooFewProperties,
    TooManyProperties,
    UnallowedProperty,
}

/// A kube-openapi error, before conversion into a field error.
#[derive(Debug, Clone)]
enum OpenApiError {
    /// A `*errors.Validation`: tied to a path inside the value.
    Validation {
        code: Code,
        name: String,
        value: Option<Value>,
        limit: Option<i64>,
        values: Vec<Value>,
        message: String,
    },
    /// Any other error (the `allOf`/`anyOf`/`oneOf`/`not` summaries).
    Composite(String),
}

impl OpenApiError {
    fn new(code: Code, name: &str, value: Option<Value>, message: String) -> Self {
        OpenApiError::Validation {
            code,
            name: name.to_string(),
            value,
            limit: None,
            values: Vec::new(),
            message,
        }
    }

    fn with_limit(mut self, max: i64) -> Self {
        if let OpenApiError::Validation { limit, .. } = &mut self {
            *limit = Some(max);
        }
        self
    }

    /// kube's `kubeOpenAPIResultToFieldErrors` for one error.
    fn into_field_error(self, prefix: Option<&str>) -> FieldError {
        let (code, name, value, limit, values, message) = match self {
            OpenApiError::Composite(message) => {
                return FieldError::invalid(prefix.unwrap_or("<nil>"), "", message);
            }
            OpenApiError::Validation {
                code,
                name,
                value,
                limit,
                values,
                message,
            } => (code, name, value, limit, values, message),
        };
        let name = name.strip_prefix('.').unwrap_or(&name);
        let field = match (prefix, name) {
            (p, "") => p.unwrap_or("<nil>").to_string(),
            (None, n) => n.to_string(),
            (Some(p), n) => format!("{p}.{n}"),
        };
        let value = value.unwrap_or_else(|| Value::String(String::new()));
        match code {
            Code::Required => FieldError::required(field, ""),
            Code::Enum => {
                let supported: Vec<String> = values
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                    .collect();
                let refs: Vec<&str> = supported.iter().map(String::as_str).collect();
                FieldError::not_supported(field, value, &refs)
            }
            Code::TooLong => {
                let max = limit.unwrap_or(-1);
                let detail = match max {
                    1 => "may not be more than 1 byte".to_string(),
                    m if m >= 0 => format!("may not be more than {m} bytes"),
                    _ => "value is too long".to_string(),
                };
                FieldError {
                    kind: FieldErrorKind::TooLong,
                    field,
                    value: None,
                    detail,
                }
            }
            Code::MaxItems | Code::TooManyProperties => {
                let max = limit.unwrap_or(-1);
                let items = if max == 1 { "item" } else { "items" };
                let detail = if max >= 0 {
                    format!("must have at most {max} {items}")
                } else {
                    "has too many items".into()
                };
                let detail = match value.as_i64() {
                    Some(actual) => format!("{actual}: {detail}"),
                    None => detail,
                };
                FieldError {
                    kind: FieldErrorKind::TooMany,
                    field,
                    value: None,
                    detail,
                }
            }
            _ => FieldError::invalid(field, value, message),
        }
    }
}

/// The result of validating one value: errors and kube-openapi's match
/// count, which picks the closest failing `anyOf`/`oneOf` branch.
#[derive(Debug, Default)]
struct Outcome {
    errors: Vec<OpenApiError>,
    matches: usize,
}

impl Outcome {
    fn fail(err: OpenApiError) -> Outcome {
        Outcome {
            errors: vec![err],
            matches: 0,
        }
    }

    fn merge(&mut self, other: Outcome) {
        self.errors.extend(other.errors);
        self.matches += other.matches;
    }

    fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// The types a value may have: `x-kubernetes-int-or-string` means
/// integer or string.
fn schema_types(s: &Structural) -> Vec<&str> {
    if s.x_int_or_string {
        vec!["integer", "string"]
    } else if s.type_.is_empty() {
        Vec::new()
    } else {
        vec![s.type_.as_str()]
    }
}

/// The JSON type and Go-side format kube-openapi infers from a decoded value.
fn data_type(data: &Value) -> (&'static str, &'static str) {
    match data {
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) if n.is_i64() || n.is_u64() => ("integer", "int64"),
        Value::Number(_) => ("number", "float64"),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
        Value::Null => ("null", ""),
    }
}

/// kube-openapi's `SchemaValidator.Validate`: every applicable validator
/// in its fixed order.
fn validate_node(path: &str, s: &Structural, data: &Value) -> Outcome {
    let mut result = Outcome::default();
    let types = schema_types(s);
    let format = formats::effective_format(&s.type_, s.x_int_or_string, &s.format);
    if data.is_null() {
        result.merge(check_type(path, &types, s.nullable, format, data));
        result.merge(check_enum(path, s, data));
        return result;
    }
    if !types.is_empty() || !format.is_empty() {
        result.merge(check_type(path, &types, s.nullable, format, data));
        result.matches += 1;
    }
    result.merge(check_composition(path, s, data));
    result.matches += 1;
    if let Value::String(text) = data {
        result.merge(check_string(path, s, text));
        result.matches += 1;
        if formats::is_supported(format) {
            if !formats::validates(format, text) {
                let message = format!("{path} in body must be of type {format}: {text:?}");
                result.merge(Outcome::fail(OpenApiError::new(
                    Code::InvalidType,
                    path,
                    Some(data.clone()),
                    message,
                )));
            }
            result.matches += 1;
        }
    }
    if let Value::Number(n) = data {
        result.merge(check_number(path, s, n));
        result.matches += 1;
    }
    if let Value::Array(items) = data {
        result.merge(check_array(path, s, items));
        result.matches += 1;
    }
    result.merge(check_enum(path, s, data));
    result.matches += 1;
    if let Value::Object(map) = data {
        result.merge(check_object(path, s, map));
        result.matches += 1;
    }
    result.matches += 1;
    result
}

fn invalid_type(path: &str, type_name: &str, found: &str) -> Outcome {
    let message = format!("{path} in body must be of type {type_name}: {found:?}");
    Outcome::fail(OpenApiError::new(
        Code::InvalidType,
        path,
        Some(Value::String(found.to_string())),
        message,
    ))
}

/// kube-openapi's type validator, with its handling of formats.
fn check_type(path: &str, types: &[&str], nullable: bool, format: &str, data: &Value) -> Outcome {
    let ok = Outcome {
        errors: Vec::new(),
        matches: 1,
    };
    let contains = |t: &str| types.contains(&t);
    if data.is_null() {
        if !types.is_empty() && !contains("null") && !nullable {
            return invalid_type(path, &types.join(","), "null");
        }
        return ok;
    }
    let (sch_type, data_format) = data_type(data);
    let is_float_int = sch_type == "number"
        && data
            .as_f64()
            .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
        && contains("integer");
    let is_int_float = sch_type == "integer" && contains("number");
    let string_or_slice = data.is_string() || data.is_array();
    let type_matches = contains(sch_type) || is_float_int || is_int_float;
    let numeric = contains("number") || contains("integer");
    if !string_or_slice && !format.is_empty() && !type_matches && data_format != format {
        return invalid_type(path, format, data_format);
    }
    if !numeric && !format.is_empty() && string_or_slice {
        return ok;
    }
    if !type_matches {
        return invalid_type(path, &types.join(","), sch_type);
    }
    ok
}

/// `allOf`, `anyOf`, `oneOf` and `not` (kube-openapi's schemaPropsValidator).
fn check_composition(path: &str, s: &Structural, data: &Value) -> Outcome {
    let mut main = Outcome::default();
    if !s.any_of.is_empty() {
        let mut best: Option<Outcome> = None;
        let mut first_success: Option<Outcome> = None;
        for branch in &s.any_of {
            let result = validate_node(path, branch, data);
            if result.is_valid() {
                best = None;
                first_success = Some(result);
                break;
            }
            if best.as_ref().is_none_or(|b| result.matches > b.matches) {
                best = Some(result);
            }
        }
        if first_success.is_none() {
            main.errors.push(OpenApiError::Composite(format!(
                "{path:?} must validate at least one schema (anyOf)"
            )));
        }
        if let Some(best) = best.or(first_success) {
            main.merge(best);
        }
    }
    if !s.one_of.is_empty() {
        let mut best: Option<Outcome> = None;
        let mut first_success: Option<Outcome> = None;
        let mut validated = 0;
        for branch in &s.one_of {
            let result = validate_node(path, branch, data);
            if result.is_valid() {
                validated += 1;
                best = None;
                if first_success.is_none() {
                    first_success = Some(result);
                }
                continue;
            }
            if validated == 0 && best.as_ref().is_none_or(|b| result.matches > b.matches) {
                best = Some(result);
            }
        }
        if validated != 1 {
            let extra = if validated == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {validated} valid alternatives")
            };
            main.errors.push(OpenApiError::Composite(format!(
                "{path:?} must validate one and only one schema (oneOf). {extra}"
            )));
            if let Some(best) = best {
                main.merge(best);
            }
        } else if let Some(success) = first_success {
            main.merge(success);
        }
    }
    if !s.all_of.is_empty() {
        let mut validated = 0;
        for branch in &s.all_of {
            let result = validate_node(path, branch, data);
            if result.is_valid() {
                validated += 1;
            }
            main.merge(result);
        }
        if validated != s.all_of.len() {
            let extra = if validated == 0 {
                ". None validated"
            } else {
                ""
            };
            main.errors.push(OpenApiError::Composite(format!(
                "{path:?} must validate all the schemas (allOf){extra}"
            )));
        }
    }
    if let Some(not) = &s.not
        && validate_node(path, not, data).is_valid()
    {
        main.errors.push(OpenApiError::Composite(format!(
            "{path:?} must not validate the schema (not)"
        )));
    }
    main.matches += 1;
    main
}

/// `maxLength`, `minLength` (in Unicode characters) and `pattern`; the first
/// failure only, as kube-openapi reports it.
fn check_string(path: &str, s: &Structural, text: &str) -> Outcome {
    let value = Some(Value::String(text.to_string()));
    let length = text.chars().count() as i64;
    if let Some(max) = s.max_length
        && length > max
    {
        let message = format!("{path} in body should be at most {max} chars long");
        return Outcome::fail(
            OpenApiError::new(Code::TooLong, path, value, message).with_limit(max),
        );
    }
    if let Some(min) = s.min_length
        && length < min
    {
        let message = format!("{path} in body should be at least {min} chars long");
        return Outcome::fail(OpenApiError::new(Code::TooShort, path, value, message));
    }
    if let Some(pattern) = &s.pattern {
        let matched = pattern.regex.as_ref().is_some_and(|r| r.is_match(text));
        if !matched {
            let shown = match &pattern.regex {
                Some(_) => pattern.source.clone(),
                None => format!("{}, but pattern is invalid", pattern.source),
            };
            let message = format!("{path} in body should match '{shown}'");
            return Outcome::fail(OpenApiError::new(Code::Pattern, path, value, message));
        }
    }
    Outcome::default()
}

/// A bound as kube-openapi prints it: an int64 when both the value and the
/// bound are integral, else Go's `%v` of a float64.
fn bound_text(data: &serde_json::Number, bound: f64) -> String {
    if data.is_i64() && bound.fract() == 0.0 && bound.abs() < 9.2e18 {
        format!("{}", bound as i64)
    } else {
        go_float(bound)
    }
}

/// `multipleOf`, `minimum` and `maximum` (with their exclusive forms).
fn check_number(path: &str, s: &Structural, n: &serde_json::Number) -> Outcome {
    let mut out = Outcome {
        errors: Vec::new(),
        matches: 1,
    };
    let data = n.as_f64().unwrap_or(0.0);
    let value = Some(Value::Number(n.clone()));
    if let Some(factor) = s.multiple_of {
        if factor <= 0.0 {
            let message = format!(
                "factor MultipleOf declared for {path} must be positive: {}",
                go_float(factor)
            );
            out.errors.push(OpenApiError::new(
                Code::MultipleOf,
                path,
                Some(Value::from(factor)),
                message,
            ));
        } else {
            let not_multiple = match n.as_i64() {
                Some(i) if factor.fract() == 0.0 => i % (factor as i64) != 0,
                _ => {
                    let mult = if factor < 1.0 {
                        1.0 / factor * data
                    } else {
                        data / factor
                    };
                    !is_json_integer(mult)
                }
            };
            if not_multiple {
                let message = format!(
                    "{path} in body should be a multiple of {}",
                    bound_text(n, factor)
                );
                out.errors.push(OpenApiError::new(
                    Code::MultipleOf,
                    path,
                    value.clone(),
                    message,
                ));
            }
        }
    }
    if let Some(min) = s.minimum {
        let fails = if s.exclusive_minimum {
            data <= min
        } else {
            data < min
        };
        if fails {
            let op = if s.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            let message = format!("{path} in body should be {op} {}", bound_text(n, min));
            out.errors
                .push(OpenApiError::new(Code::Min, path, value.clone(), message));
        }
    }
    if let Some(max) = s.maximum {
        let fails = if s.exclusive_maximum {
            data >= max
        } else {
            data > max
        };
        if fails {
            let op = if s.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            let message = format!("{path} in body should be {op} {}", bound_text(n, max));
            out.errors
                .push(OpenApiError::new(Code::Max, path, value, message));
        }
    }
    out
}

/// go-openapi's `IsFloat64AJSONInteger`, with its tolerance.
fn is_json_integer(f: f64) -> bool {
    if !f.is_finite() {
        return false;
    }
    let g = f.trunc();
    f == g || (f - g).abs() / (f.abs() + g.abs()) < 1e-9
}

/// `items`, `minItems`, `maxItems` and `uniqueItems`.
fn check_array(path: &str, s: &Structural, items: &[Value]) -> Outcome {
    let mut out = Outcome::default();
    if let Some(item_schema) = &s.items {
        for (i, item) in items.iter().enumerate() {
            out.merge(validate_node(&format!("{path}[{i}]"), item_schema, item));
        }
    }
    let size = items.len() as i64;
    if let Some(min) = s.min_items
        && size < min
    {
        let message = format!("{path} in body should have at least {min} items");
        out.errors.push(OpenApiError::new(
            Code::MinItems,
            path,
            Some(Value::from(size)),
            message,
        ));
    }
    if let Some(max) = s.max_items
        && size > max
    {
        let message = format!("{path} in body should have at most {max} items");
        out.errors.push(
            OpenApiError::new(Code::MaxItems, path, Some(Value::from(size)), message)
                .with_limit(max),
        );
    }
    if s.unique_items {
        let duplicated = items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].iter().any(|b| json_equal(a, b)));
        if duplicated {
            let message = format!("{path} in body shouldn't contain duplicates");
            out.errors
                .push(OpenApiError::new(Code::Unique, path, None, message));
        }
    }
    out.matches += 1;
    out
}

/// JSON equality with numbers compared by value (1 == 1.0).
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// `enum`.
fn check_enum(path: &str, s: &Structural, data: &Value) -> Outcome {
    let Some(values) = &s.enum_values else {
        return Outcome::default();
    };
    if values.is_empty() || (!data.is_null() && values.iter().any(|v| json_equal(v, data))) {
        return Outcome::default();
    }
    let listed: Vec<String> = values.iter().map(go_enum_value).collect();
    let message = format!("{path} in body should be one of [{}]", listed.join(" "));
    Outcome::fail(OpenApiError::Validation {
        code: Code::Enum,
        name: path.to_string(),
        value: Some(data.clone()),
        limit: None,
        values: values.clone(),
        message,
    })
}

/// An enum value as Go's `%v` prints it inside a slice.
fn go_enum_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => go_number(n),
        Value::Null => "<nil>".into(),
        other => other.to_string(),
    }
}

/// `minProperties`, `maxProperties`, `additionalProperties`, `properties`
/// and `required`.
fn check_object(path: &str, s: &Structural, map: &serde_json::Map<String, Value>) -> Outcome {
    let count = map.len() as i64;
    if let Some(min) = s.min_properties
        && count < min
    {
        let message = format!("{path} in body should have at least {min} properties");
        return Outcome::fail(OpenApiError::new(
            Code::TooFewProperties,
            path,
            Some(Value::from(count)),
            message,
        ));
    }
    if let Some(max) = s.max_properties
        && count > max
    {
        let message = format!("{path} in body should have at most {max} properties");
        return Outcome::fail(
            OpenApiError::new(
                Code::TooManyProperties,
                path,
                Some(Value::from(count)),
                message,
            )
            .with_limit(max),
        );
    }
    let mut out = Outcome::default();
    match &s.additional_properties {
        Some(AdditionalProperties::Bool(false)) => {
            for k in map.keys() {
                if s.property(k).is_none() {
                    let message = format!("{path}.{k} in body is a forbidden property");
                    out.errors.push(OpenApiError::new(
                        Code::UnallowedProperty,
                        path,
                        Some(Value::String(k.clone())),
                        message,
                    ));
                }
            }
        }
        Some(AdditionalProperties::Schema(extra)) => {
            for (k, v) in map {
                if s.property(k).is_none() {
                    out.merge(validate_node(&format!("{path}.{k}"), extra, v));
                }
            }
        }
        _ => {}
    }
    if let Some(props) = &s.properties {
        for (name, prop) in props {
            if let Some(v) = map.get(name) {
                let child = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                out.merge(validate_node(&child, prop, v));
            }
        }
    }
    for k in &s.required {
        if !map.contains_key(k) {
            let name = format!("{path}.{k}");
            let message = format!("{name} in body is required");
            out.errors
                .push(OpenApiError::new(Code::Required, &name, None, message));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(spec_props: Value) -> Structural {
        Structural::new(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": spec_props}}
        }))
        .unwrap()
    }

    fn messages(props: Value, spec: Value) -> Vec<String> {
        let s = schema(props);
        validate(
            &json!({"apiVersion": "example.com/v1", "kind": "Foo", "spec": spec}),
            &s,
        )
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    #[test]
    fn keywords_report_kube_messages() {
        let cases: Vec<(Value, Value, Vec<&str>)> = vec![
            (
                json!({"replicas": {"type": "integer"}}),
                json!({"replicas": "three"}),
                vec![
                    r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
                ],
            ),
            (
                json!({"replicas": {"type": "integer"}}),
                json!({"replicas": 1.5}),
                vec![
                    r#"spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#,
                ],
            ),
            (
                json!({"replicas": {"type": "integer"}}),
                json!({"replicas": 2.0}),
                vec![],
            ),
            (
                json!({"ratio": {"type": "number"}}),
                json!({"ratio": 2}),
                vec![],
            ),
            (
                json!({"on": {"type": "boolean"}}),
                json!({"on": "yes"}),
                vec![
                    r#"spec.on: Invalid value: "string": spec.on in body must be of type boolean: "string""#,
                ],
            ),
            (
                json!({"list": {"type": "array", "items": {"type": "string"}}}),
                json!({"list": {"a": 1}}),
                vec![
                    r#"spec.list: Invalid value: "object": spec.list in body must be of type array: "object""#,
                ],
            ),
            (
                json!({"obj": {"type": "object"}}),
                json!({"obj": [1]}),
                vec![
                    r#"spec.obj: Invalid value: "array": spec.obj in body must be of type object: "array""#,
                ],
            ),
            (
                json!({"name": {"type": "string"}}),
                json!({"name": null}),
                vec![
                    r#"spec.name: Invalid value: "null": spec.name in body must be of type string: "null""#,
                ],
            ),
            (
                json!({"name": {"type": "string", "nullable": true}}),
                json!({"name": null}),
                vec![],
            ),
            (
                json!({"size": {"type": "integer", "maximum": 3}}),
                json!({"size": 5}),
                vec![
                    "spec.size: Invalid value: 5: spec.size in body should be less than or equal to 3",
                ],
            ),
            (
                json!({"size": {"type": "integer", "maximum": 3, "exclusiveMaximum": true}}),
                json!({"size": 3}),
                vec!["spec.size: Invalid value: 3: spec.size in body should be less than 3"],
            ),
            (
                json!({"size": {"type": "integer", "minimum": 1}}),
                json!({"size": 0}),
                vec![
                    "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
                ],
            ),
            (
                json!({"size": {"type": "number", "minimum": 0.5, "exclusiveMinimum": true}}),
                json!({"size": 0.5}),
                vec!["spec.size: Invalid value: 0.5: spec.size in body should be greater than 0.5"],
            ),
            (
                json!({"size": {"type": "number", "maximum": 1000000}}),
                json!({"size": 2000000.5}),
                vec![
                    "spec.size: Invalid value: 2000000.5: spec.size in body should be less than or equal to 1e+06",
                ],
            ),
            (
                json!({"step": {"type": "integer", "multipleOf": 5}}),
                json!({"step": 7}),
                vec!["spec.step: Invalid value: 7: spec.step in body should be a multiple of 5"],
            ),
            (
                json!({"step": {"type": "number", "multipleOf": 0.1}}),
                json!({"step": 0.3}),
                vec![],
            ),
            (
                json!({"name": {"type": "string", "maxLength": 3}}),
                json!({"name": "abcd"}),
                vec!["spec.name: Too long: may not be more than 3 bytes"],
            ),
            (
                json!({"name": {"type": "string", "maxLength": 3}}),
                json!({"name": "äöü"}),
                vec![],
            ),
            (
                json!({"name": {"type": "string", "minLength": 3}}),
                json!({"name": "ab"}),
                vec![
                    r#"spec.name: Invalid value: "ab": spec.name in body should be at least 3 chars long"#,
                ],
            ),
            (
                json!({"name": {"type": "string", "pattern": "^[a-z]+$"}}),
                json!({"name": "Abc"}),
                vec![
                    r#"spec.name: Invalid value: "Abc": spec.name in body should match '^[a-z]+$'"#,
                ],
            ),
            (
                json!({"color": {"type": "string", "enum": ["red", "blue"]}}),
                json!({"color": "pink"}),
                vec![r#"spec.color: Unsupported value: "pink": supported values: "red", "blue""#],
            ),
            (
                json!({"level": {"type": "integer", "enum": [1, 2]}}),
                json!({"level": 3}),
                vec![r#"spec.level: Unsupported value: 3: supported values: "1", "2""#],
            ),
            (
                json!({"list": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}),
                json!({"list": ["a", "b", "c"]}),
                vec!["spec.list: Too many: 3: must have at most 2 items"],
            ),
            (
                json!({"list": {"type": "array", "items": {"type": "string"}, "minItems": 2}}),
                json!({"list": ["a"]}),
                vec!["spec.list: Invalid value: 1: spec.list in body should have at least 2 items"],
            ),
            (
                json!({"list": {"type": "array", "items": {"type": "integer"}, "uniqueItems": true}}),
                json!({"list": [1, 2, 1]}),
                vec![
                    r#"spec.list: Invalid value: "": spec.list in body shouldn't contain duplicates"#,
                ],
            ),
            (
                json!({"labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 1}}),
                json!({"labels": {"a": "1", "b": "2"}}),
                vec!["spec.labels: Too many: 2: must have at most 1 item"],
            ),
            (
                json!({"labels": {"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 2}}),
                json!({"labels": {"a": "1"}}),
                vec![
                    "spec.labels: Invalid value: 1: spec.labels in body should have at least 2 properties",
                ],
            ),
            (
                json!({"labels": {"type": "object", "additionalProperties": {"type": "string"}}}),
                json!({"labels": {"a": 1}}),
                vec![
                    r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#,
                ],
            ),
            (
                json!({"when": {"type": "string", "format": "date-time"}}),
                json!({"when": "yesterday"}),
                vec![
                    r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#,
                ],
            ),
            (
                json!({"id": {"type": "string", "format": "uuid"}}),
                json!({"id": "123e4567-e89b-12d3-a456-426614174000"}),
                vec![],
            ),
            (
                json!({"tag": {"type": "string", "format": "int32"}}),
                json!({"tag": "x"}),
                vec![],
            ),
            (
                json!({"n": {"type": "integer", "format": "int32"}}),
                json!({"n": true}),
                vec![r#"spec.n: Invalid value: "": spec.n in body must be of type int32: """#],
            ),
        ];
        for (props, spec, want) in cases {
            assert_eq!(
                messages(props.clone(), spec.clone()),
                want,
                "schema {props} value {spec}"
            );
        }
    }

    #[test]
    fn required_fields() {
        let s = Structural::new(&json!({
            "type": "object",
            "required": ["spec"],
            "properties": {"spec": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}
        }))
        .unwrap();
        let msgs: Vec<String> = validate(&json!({}), &s)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(msgs, vec!["spec: Required value"]);
        let msgs: Vec<String> = validate(&json!({"spec": {}}), &s)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(msgs, vec!["spec.name: Required value"]);
    }

    #[test]
    fn int_or_string() {
        let props = json!({"port": {"x-kubernetes-int-or-string": true}});
        assert!(messages(props.clone(), json!({"port": 80})).is_empty());
        assert!(messages(props.clone(), json!({"port": "http"})).is_empty());
        assert_eq!(
            messages(props, json!({"port": true})),
            vec![
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#
            ]
        );
        let with_any_of = json!({"port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}});
        assert_eq!(
            messages(with_any_of, json!({"port": true})),
            vec![
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
                r#"<nil>: Invalid value: "": "spec.port" must validate at least one schema (anyOf)"#,
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer: "boolean""#,
            ]
        );
    }

    #[test]
    fn compositions() {
        let one_of = json!({"v": {"type": "integer", "oneOf": [{"minimum": 5}, {"maximum": 10}]}});
        assert_eq!(
            messages(one_of.clone(), json!({"v": 7})),
            vec![
                r#"<nil>: Invalid value: "": "spec.v" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
            ]
        );
        assert!(messages(one_of, json!({"v": 3})).is_empty());
        let all_of = json!({"v": {"type": "integer", "allOf": [{"minimum": 5}, {"maximum": 10}]}});
        assert_eq!(
            messages(all_of, json!({"v": 11})),
            vec![
                "spec.v: Invalid value: 11: spec.v in body should be less than or equal to 10",
                r#"<nil>: Invalid value: "": "spec.v" must validate all the schemas (allOf)"#,
            ]
        );
        let not = json!({"v": {"type": "string", "not": {"enum": ["x"]}}});
        assert_eq!(
            messages(not.clone(), json!({"v": "x"})),
            vec![r#"<nil>: Invalid value: "": "spec.v" must not validate the schema (not)"#]
        );
        assert!(messages(not, json!({"v": "y"})).is_empty());
        let any_of =
            json!({"v": {"type": "string", "anyOf": [{"maxLength": 1}, {"pattern": "^a"}]}});
        assert!(messages(any_of.clone(), json!({"v": "abc"})).is_empty());
        assert_eq!(messages(any_of, json!({"v": "bcd"})).len(), 2);
    }

    #[test]
    fn nested_items_paths() {
        let props = json!({"ports": {"type": "array", "items": {"type": "object", "required": ["port"], "properties": {"port": {"type": "integer", "minimum": 1}}}}});
        assert_eq!(
            messages(props, json!({"ports": [{"port": 0}, {}]})),
            vec![
                "spec.ports[0].port: Invalid value: 0: spec.ports[0].port in body should be greater than or equal to 1",
                "spec.ports[1].port: Required value",
            ]
        );
    }

    #[test]
    fn default_validation_uses_prefix() {
        let s = Structural::new(&json!({"type": "integer"})).unwrap();
        let errs = validate_values(Some("spec.x.default"), &json!("a"), &s);
        assert_eq!(
            errs[0].to_string(),
            r#"spec.x.default: Invalid value: "string":  in body must be of type integer: "string""#
        );
    }
}
