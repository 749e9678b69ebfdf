//! The parts of a CRD's structural schema that CEL rules see, and the CEL
//! declaration types built from them.
//!
//! [`Schema`] is read leniently from the raw `openAPIV3Schema` JSON (the CRD
//! strategy validates its structure elsewhere). [`decl_type`] mirrors
//! kube-apiserver's `SchemaDeclType`: it decides which fields a rule may
//! reference, under which (escaped) names, and bounds the size of every list,
//! map and string for the cost estimator: `maxItems`, `maxProperties` and
//! `maxLength` when declared, otherwise the most that fits in one request.

use std::sync::Arc;

use serde_json::Value;

use crate::error::Error;

/// The largest request body kube-apiserver accepts (3 MiB): the bound for
/// every list, map and string that declares no limit of its own.
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// Serialized size of `""`.
const MIN_STRING_SIZE: u64 = 2;
/// Serialized size of `true`.
const MIN_BOOL_SIZE: u64 = 4;
/// Serialized size of `0`.
const MIN_NUMBER_SIZE: u64 = 1;
/// Serialized size of `"0s"`.
const MIN_DURATION_SIZE: u64 = 4;
/// Serialized size of `"2006-01-02"`.
const DATE_SIZE: u64 = 12;
/// Serialized size of `"2006-01-02T15:04:05Z"`.
const MIN_DATETIME_SIZE: u64 = 22;
/// Longest serialized duration kube accepts.
const MAX_DURATION_SIZE: u64 = 32;
/// Longest serialized date-time kube accepts.
const MAX_DATETIME_SIZE: u64 = 39;

/// One `x-kubernetes-validations` entry as written in the schema.
#[derive(Debug, Clone, Default)]
pub struct RawRule {
    /// The CEL expression that must evaluate to true.
    pub rule: String,
    /// The fixed message shown when the rule fails.
    pub message: String,
    /// A CEL expression producing the message.
    pub message_expression: String,
    /// The field error type to report (`FieldValueInvalid` when absent).
    pub reason: Option<String>,
    /// A relative path (`.x`, `['x']`) the error is reported at.
    pub field_path: String,
    /// Whether a transition rule also runs without an old value.
    pub optional_old_self: Option<bool>,
    /// The entry as written, for error values.
    pub raw: Value,
}

/// The structural parts of one schema node that CEL validation needs.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// `type`, empty when absent.
    pub ty: String,
    /// `format`, empty when absent.
    pub format: String,
    /// `properties`, in declaration order.
    pub properties: Vec<(String, Schema)>,
    /// `items`.
    pub items: Option<Box<Schema>>,
    /// `additionalProperties` when it is a schema.
    pub additional_properties: Option<Box<Schema>>,
    /// `maxItems`.
    pub max_items: Option<i64>,
    /// `maxLength`.
    pub max_length: Option<i64>,
    /// `maxProperties`.
    pub max_properties: Option<i64>,
    /// `required`.
    pub required: Vec<String>,
    /// Whether `default` is set.
    pub has_default: bool,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `x-kubernetes-embedded-resource`.
    pub embedded_resource: bool,
    /// `x-kubernetes-list-type`.
    pub list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type`.
    pub map_type: Option<String>,
    /// `x-kubernetes-validations`.
    pub rules: Vec<RawRule>,
}

impl Schema {
    /// Reads a schema node from its JSON form.
    pub fn parse(value: &Value) -> Schema {
        let str_of = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let int_of = |key: &str| value.get(key).and_then(Value::as_i64);
        let bool_of = |key: &str| value.get(key).and_then(Value::as_bool).unwrap_or(false);
        let properties = value
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(k, v)| (k.clone(), Schema::parse(v)))
                    .collect()
            })
            .unwrap_or_default();
        let strings = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default()
        };
        let rules = value
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .map(|rules| rules.iter().map(parse_rule).collect())
            .unwrap_or_default();
        Schema {
            ty: str_of("type"),
            format: str_of("format"),
            properties,
            items: value
                .get("items")
                .filter(|v| v.is_object())
                .map(|v| Box::new(Schema::parse(v))),
            additional_properties: value
                .get("additionalProperties")
                .filter(|v| v.is_object())
                .map(|v| Box::new(Schema::parse(v))),
            max_items: int_of("maxItems"),
            max_length: int_of("maxLength"),
            max_properties: int_of("maxProperties"),
            required: strings("required"),
            has_default: value.get("default").is_some_and(|d| !d.is_null()),
            int_or_string: bool_of("x-kubernetes-int-or-string"),
            embedded_resource: bool_of("x-kubernetes-embedded-resource"),
            list_type: value
                .get("x-kubernetes-list-type")
                .and_then(Value::as_str)
                .map(String::from),
            list_map_keys: strings("x-kubernetes-list-map-keys"),
            map_type: value
                .get("x-kubernetes-map-type")
                .and_then(Value::as_str)
                .map(String::from),
            rules,
        }
    }

    /// The schema of a property.
    pub fn property(&self, name: &str) -> Option<&Schema> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, s)| s)
    }

    /// kube's `WithTypeAndObjectMeta`: at a resource root `apiVersion`, `kind`,
    /// `metadata.name` and `metadata.generateName` are always visible, and
    /// nothing else of `metadata`.
    pub fn with_type_and_object_meta(&self) -> Schema {
        let string = || Schema {
            ty: "string".into(),
            ..Schema::default()
        };
        let meta_ok = self.property("metadata").is_some_and(|m| {
            m.ty == "object"
                && m.property("name").is_some_and(|n| n.ty == "string")
                && m.property("generateName").is_some_and(|n| n.ty == "string")
        });
        if self.property("kind").is_some_and(|k| k.ty == "string")
            && self
                .property("apiVersion")
                .is_some_and(|k| k.ty == "string")
            && meta_ok
        {
            return self.clone();
        }
        let mut result = self.clone();
        let metadata = Schema {
            ty: "object".into(),
            properties: vec![("name".into(), string()), ("generateName".into(), string())],
            ..Schema::default()
        };
        for (name, schema) in [
            ("kind", string()),
            ("apiVersion", string()),
            ("metadata", metadata),
        ] {
            match result.properties.iter_mut().find(|(k, _)| k == name) {
                Some((_, existing)) => *existing = schema,
                None => result.properties.push((name.into(), schema)),
            }
        }
        result
    }

    /// Whether items of this list correlate with the old list's items (by key).
    pub fn is_map_list(&self) -> bool {
        self.ty == "array"
            && self.list_type.as_deref() == Some("map")
            && !self.list_map_keys.is_empty()
    }
}

fn parse_rule(value: &Value) -> RawRule {
    let str_of = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    RawRule {
        rule: str_of("rule"),
        message: str_of("message"),
        message_expression: str_of("messageExpression"),
        reason: value
            .get("reason")
            .and_then(Value::as_str)
            .map(String::from),
        field_path: str_of("fieldPath"),
        optional_old_self: value.get("optionalOldSelf").and_then(Value::as_bool),
        raw: value.clone(),
    }
}

/// A CEL type derived from a schema node, with its size bounds.
#[derive(Debug)]
pub struct DeclType {
    /// What kind of value this is.
    pub kind: DeclKind,
    /// Most elements (list items, map entries, string bytes) a value can have.
    pub max_elements: u64,
    /// Fewest bytes a value takes when serialized as JSON.
    pub min_size: u64,
}

/// The kinds of CEL values a schema node can hold.
#[derive(Debug)]
pub enum DeclKind {
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `double`.
    Double,
    /// `string`.
    String,
    /// `bytes` (`format: byte`).
    Bytes,
    /// `google.protobuf.Duration` (`format: duration`).
    Duration,
    /// `google.protobuf.Timestamp` (`format: date` or `date-time`).
    Timestamp,
    /// `dyn` (`x-kubernetes-int-or-string`).
    Dyn,
    /// A list of the item type.
    List(Arc<DeclType>),
    /// A map from string to the value type.
    Map(Arc<DeclType>),
    /// An object with its (escaped) field names.
    Object(Vec<(String, Arc<DeclType>)>),
}

impl DeclType {
    fn simple(kind: DeclKind, min_size: u64) -> Arc<DeclType> {
        Arc::new(DeclType {
            kind,
            max_elements: 0,
            min_size,
        })
    }

    /// The type of an object field, by escaped name.
    pub fn field(&self, name: &str) -> Option<&Arc<DeclType>> {
        match &self.kind {
            DeclKind::Object(fields) => fields.iter().find(|(k, _)| k == name).map(|(_, t)| t),
            _ => None,
        }
    }
}

/// kube's `SchemaDeclType`: the CEL type of a schema node, or `None` when the
/// node is not visible to rules (no type and not int-or-string, or a list or
/// map of such nodes).
pub fn decl_type(schema: &Schema, is_resource_root: bool) -> Option<Arc<DeclType>> {
    if schema.int_or_string {
        return Some(Arc::new(DeclType {
            kind: DeclKind::Dyn,
            max_elements: MAX_REQUEST_SIZE_BYTES - 2,
            min_size: 1,
        }));
    }
    let rooted;
    let schema = if is_resource_root {
        rooted = schema.with_type_and_object_meta();
        &rooted
    } else {
        schema
    };
    match schema.ty.as_str() {
        "array" => {
            let items = schema.items.as_ref()?;
            let item_type = decl_type(items, items.embedded_resource)?;
            let max = match schema.max_items {
                Some(n) => n.max(0) as u64,
                None => (MAX_REQUEST_SIZE_BYTES - 2) / (item_type.min_size + 1),
            };
            Some(Arc::new(DeclType {
                kind: DeclKind::List(item_type),
                max_elements: max,
                min_size: 2,
            }))
        }
        "object" => {
            if let Some(additional) = &schema.additional_properties {
                let value_type = decl_type(additional, additional.embedded_resource)?;
                let max = match schema.max_properties {
                    Some(n) => n.max(0) as u64,
                    None => (MAX_REQUEST_SIZE_BYTES - 2) / (value_type.min_size + 6),
                };
                return Some(Arc::new(DeclType {
                    kind: DeclKind::Map(value_type),
                    max_elements: max,
                    min_size: 2,
                }));
            }
            let mut fields = Vec::new();
            let mut min_size = 2;
            for (name, prop) in &schema.properties {
                let Some(field_type) = decl_type(prop, prop.embedded_resource) else {
                    continue;
                };
                if schema.required.contains(name) && !prop.has_default {
                    min_size += name.len() as u64 + field_type.min_size + 4;
                }
                if let Some(escaped) = escape(name) {
                    fields.push((escaped, field_type));
                }
            }
            Some(Arc::new(DeclType {
                kind: DeclKind::Object(fields),
                max_elements: 0,
                min_size,
            }))
        }
        "string" => {
            let unbounded = MAX_REQUEST_SIZE_BYTES - 2;
            let (kind, min_size, max) = match schema.format.as_str() {
                "byte" => (
                    DeclKind::Bytes,
                    MIN_STRING_SIZE,
                    schema.max_length.map_or(unbounded, |n| n.max(0) as u64),
                ),
                "duration" => (DeclKind::Duration, MIN_DURATION_SIZE, MAX_DURATION_SIZE),
                "date" => (DeclKind::Timestamp, DATE_SIZE, DATE_SIZE),
                "date-time" => (DeclKind::Timestamp, MIN_DATETIME_SIZE, MAX_DATETIME_SIZE),
                // maxLength counts code points; a code point takes up to 4 bytes.
                _ => (
                    DeclKind::String,
                    MIN_STRING_SIZE,
                    schema.max_length.map_or(unbounded, |n| n.max(0) as u64 * 4),
                ),
            };
            Some(Arc::new(DeclType {
                kind,
                max_elements: max,
                min_size,
            }))
        }
        "boolean" => Some(DeclType::simple(DeclKind::Bool, MIN_BOOL_SIZE)),
        "number" => Some(DeclType::simple(DeclKind::Double, MIN_NUMBER_SIZE)),
        "integer" => Some(DeclType::simple(DeclKind::Int, MIN_NUMBER_SIZE)),
        _ => None,
    }
}

/// Words CEL reserves: a property named like one is reached as `__word__`.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// kube's property-name escaping for CEL: `__` becomes `__underscores__`, `.`
/// `__dot__`, `-` `__dash__`, `/` `__slash__`, reserved words `__word__`.
/// Names with other characters, or starting with a digit, are not reachable.
pub fn escape(name: &str) -> Option<String> {
    let first = name.chars().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// kube's `ValidFieldPath`: checks a rule's `fieldPath` (`.a.b`, `.m['k']`,
/// `['a.b']`) against the schema and returns it in field-path form
/// (`a.b`, `m[k]`).
pub fn valid_field_path(path: &str, schema: &Schema) -> Result<String, Error> {
    let tokens = tokenize_field_path(path)?;
    let mut current = schema;
    let mut out = String::new();
    let mut tokens = tokens.into_iter();
    while let Some(token) = tokens.next() {
        let (name, bracketed) = match token.as_str() {
            "[" => {
                let quoted = tokens
                    .next()
                    .ok_or_else(|| Error::bad_request("unexpected end of JSON path"))?;
                if quoted.len() < 2 || !quoted.starts_with('\'') || !quoted.ends_with('\'') {
                    return Err(Error::bad_request(format!(
                        "expected single quoted string but got {quoted}"
                    )));
                }
                let name = unescape_single_quote(&quoted[1..quoted.len() - 1])?;
                match tokens.next().as_deref() {
                    Some("]") => {}
                    Some(other) => {
                        return Err(Error::bad_request(format!("expected ] but got {other}")));
                    }
                    None => return Err(Error::bad_request("unexpected end of JSON path")),
                }
                (name, true)
            }
            "." => (
                tokens
                    .next()
                    .ok_or_else(|| Error::bad_request("unexpected end of JSON path"))?,
                false,
            ),
            other => {
                return Err(Error::bad_request(format!(
                    "expected [ or . but got: {other}"
                )));
            }
        };
        let _ = bracketed;
        if !current.properties.is_empty() {
            current = current
                .property(&name)
                .ok_or_else(|| Error::bad_request("does not refer to a valid field"))?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
        } else if let Some(additional) = &current.additional_properties {
            current = additional;
            out.push_str(&format!("[{name}]"));
        } else {
            return Err(Error::bad_request("does not refer to a valid field"));
        }
    }
    Ok(out)
}

fn tokenize_field_path(path: &str) -> Result<Vec<String>, Error> {
    let mut tokens = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if rest.starts_with('\'') {
            let bytes = rest.as_bytes();
            let end = (1..bytes.len())
                .find(|&i| bytes[i] == b'\'' && bytes[i - 1] != b'\\')
                .ok_or_else(|| Error::bad_request("unexpected end of JSON path"))?;
            tokens.push(rest[..=end].to_string());
            rest = &rest[end + 1..];
        } else if let Some(d) = rest.find(['.', '[', ']']) {
            if d == 0 {
                tokens.push(rest[..1].to_string());
                rest = &rest[1..];
            } else {
                tokens.push(rest[..d].to_string());
                rest = &rest[d..];
            }
        } else {
            tokens.push(rest.to_string());
            rest = "";
        }
    }
    Ok(tokens)
}

fn unescape_single_quote(s: &str) -> Result<String, Error> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escaped = match chars.next() {
            Some('a') => '\u{7}',
            Some('b') => '\u{8}',
            Some('f') => '\u{c}',
            Some('n') => '\n',
            Some('r') => '\r',
            Some('t') => '\t',
            Some('v') => '\u{b}',
            Some('\'') => '\'',
            Some('\\') => '\\',
            Some(other) => {
                return Err(Error::bad_request(format!(
                    "invalid string literal: invalid escape char \\{other}"
                )));
            }
            None => {
                return Err(Error::bad_request(
                    "invalid string literal: invalid escape char \\",
                ));
            }
        };
        out.push(escaped);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes_like_kube() {
        assert_eq!(escape("foo").as_deref(), Some("foo"));
        assert_eq!(escape("foo-bar").as_deref(), Some("foo__dash__bar"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("1abc"), None);
        assert_eq!(escape("a b"), None);
    }

    #[test]
    fn bounds_come_from_the_schema_or_the_request_size() {
        let bounded = Schema::parse(
            &json!({"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 5}}),
        );
        let t = decl_type(&bounded, false).expect("visible");
        assert_eq!(t.max_elements, 10);
        let DeclKind::List(item) = &t.kind else {
            panic!("list")
        };
        assert_eq!(item.max_elements, 20);
        let unbounded = Schema::parse(&json!({"type": "array", "items": {"type": "string"}}));
        let t = decl_type(&unbounded, false).expect("visible");
        assert_eq!(t.max_elements, (MAX_REQUEST_SIZE_BYTES - 2) / 3);
    }

    #[test]
    fn resource_roots_expose_type_and_object_meta() {
        let root = Schema::parse(
            &json!({"type": "object", "properties": {"metadata": {"type": "object"}}}),
        );
        let t = decl_type(&root, true).expect("visible");
        assert!(t.field("apiVersion").is_some());
        assert!(
            t.field("metadata")
                .expect("metadata")
                .field("name")
                .is_some()
        );
        assert!(
            t.field("metadata")
                .expect("metadata")
                .field("labels")
                .is_none()
        );
    }

    #[test]
    fn field_paths_are_checked_against_the_schema() {
        let s = Schema::parse(&json!({"type": "object", "properties": {
            "x": {"type": "integer"},
            "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"y": {"type": "string"}}}},
            "a.b": {"type": "string"}
        }}));
        assert_eq!(valid_field_path(".x", &s).ok().as_deref(), Some("x"));
        assert_eq!(
            valid_field_path(".m['k'].y", &s).ok().as_deref(),
            Some("m[k].y")
        );
        assert_eq!(valid_field_path("['a.b']", &s).ok().as_deref(), Some("a.b"));
        assert!(valid_field_path(".z", &s).is_err());
        assert!(valid_field_path("x", &s).is_err());
    }
}
