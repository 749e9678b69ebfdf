//! The structural schema model: an `openAPIV3Schema` resolved into a typed
//! tree (kube's `schema.Structural` and `NewStructural`).
//!
//! One type serves both the structural part (type, properties, items,
//! additionalProperties, extensions) and the nested value validations under
//! `allOf`/`anyOf`/`oneOf`/`not`, which in kube are full schemas too.

use regex::Regex;
use serde_json::{Map, Value};

use crate::error::Error;

/// A compiled `pattern`, keeping its source for messages.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// The pattern as written in the schema.
    pub source: String,
    /// The compiled expression; `None` when it does not compile.
    pub regex: Option<Regex>,
}

/// `additionalProperties`: either a boolean or a schema.
#[derive(Debug, Clone)]
pub enum AdditionalProperties {
    /// `additionalProperties: true|false`.
    Bool(bool),
    /// `additionalProperties: {schema}`.
    Schema(Box<Structural>),
}

/// A structural schema node (kube's `Structural`, plus the value validations
/// kube-openapi validates against).
#[derive(Debug, Clone, Default)]
pub struct Structural {
    /// `type`, empty when absent.
    pub type_: String,
    /// `description`.
    pub description: String,
    /// `title`.
    pub title: String,
    /// `nullable`.
    pub nullable: bool,
    /// `default`; `None` when absent or null.
    pub default: Option<Value>,
    /// `format`, empty when absent.
    pub format: String,
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMaximum`.
    pub exclusive_maximum: bool,
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `exclusiveMinimum`.
    pub exclusive_minimum: bool,
    /// `maxLength`.
    pub max_length: Option<i64>,
    /// `minLength`.
    pub min_length: Option<i64>,
    /// `pattern`.
    pub pattern: Option<Pattern>,
    /// `maxItems`.
    pub max_items: Option<i64>,
    /// `minItems`.
    pub min_items: Option<i64>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `enum`.
    pub enum_values: Option<Vec<Value>>,
    /// `maxProperties`.
    pub max_properties: Option<i64>,
    /// `minProperties`.
    pub min_properties: Option<i64>,
    /// `required`.
    pub required: Vec<String>,
    /// `items` (a single schema; arrays of schemas are not structural).
    pub items: Option<Box<Structural>>,
    /// `properties` in schema order; `None` when absent or empty.
    pub properties: Option<Vec<(String, Structural)>>,
    /// `additionalProperties`.
    pub additional_properties: Option<AdditionalProperties>,
    /// `allOf`.
    pub all_of: Vec<Structural>,
    /// `anyOf`.
    pub any_of: Vec<Structural>,
    /// `oneOf`.
    pub one_of: Vec<Structural>,
    /// `not`.
    pub not: Option<Box<Structural>>,
    /// `externalDocs` (kept only so nested value validations can be checked).
    pub external_docs: Option<Value>,
    /// `x-kubernetes-preserve-unknown-fields: true`.
    pub x_preserve_unknown_fields: bool,
    /// `x-kubernetes-embedded-resource: true`.
    pub x_embedded_resource: bool,
    /// `x-kubernetes-int-or-string: true`.
    pub x_int_or_string: bool,
    /// `x-kubernetes-list-type`.
    pub x_list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`.
    pub x_list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type`.
    pub x_map_type: Option<String>,
    /// `x-kubernetes-validations` (kept verbatim; CEL is not evaluated here).
    pub x_validations: Vec<Value>,
}

impl Structural {
    /// Builds the structural schema from an `openAPIV3Schema` value, failing
    /// like kube's `NewStructural` on fields a structural schema cannot hold.
    pub fn new(schema: &Value) -> Result<Structural, Error> {
        let map = schema.as_object().ok_or_else(|| {
            Error::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type JSONSchemaProps",
                json_kind(schema)
            ))
        })?;
        unsupported_fields(map)?;
        let mut s = Structural {
            type_: string_field(map, "type")?,
            description: string_field(map, "description")?,
            title: string_field(map, "title")?,
            nullable: bool_field(map, "nullable")?,
            default: map.get("default").filter(|d| !d.is_null()).cloned(),
            format: string_field(map, "format")?,
            maximum: number_field(map, "maximum")?,
            exclusive_maximum: bool_field(map, "exclusiveMaximum")?,
            minimum: number_field(map, "minimum")?,
            exclusive_minimum: bool_field(map, "exclusiveMinimum")?,
            max_length: int_field(map, "maxLength")?,
            min_length: int_field(map, "minLength")?,
            pattern: None,
            max_items: int_field(map, "maxItems")?,
            min_items: int_field(map, "minItems")?,
            unique_items: bool_field(map, "uniqueItems")?,
            multiple_of: number_field(map, "multipleOf")?,
            enum_values: match map.get("enum") {
                None | Some(Value::Null) => None,
                Some(Value::Array(values)) => Some(values.clone()),
                Some(other) => return Err(type_error("enum", other, "[]JSON")),
            },
            max_properties: int_field(map, "maxProperties")?,
            min_properties: int_field(map, "minProperties")?,
            required: string_list(map, "required")?,
            external_docs: map.get("externalDocs").filter(|d| !d.is_null()).cloned(),
            x_embedded_resource: bool_field(map, "x-kubernetes-embedded-resource")?,
            x_int_or_string: bool_field(map, "x-kubernetes-int-or-string")?,
            x_list_type: optional_string(map, "x-kubernetes-list-type")?,
            x_list_map_keys: string_list(map, "x-kubernetes-list-map-keys")?,
            x_map_type: optional_string(map, "x-kubernetes-map-type")?,
            x_validations: match map.get("x-kubernetes-validations") {
                Some(Value::Array(rules)) => rules.clone(),
                _ => Vec::new(),
            },
            ..Structural::default()
        };
        let pattern = string_field(map, "pattern")?;
        if !pattern.is_empty() {
            s.pattern = Some(Pattern {
                regex: Regex::new(&pattern).ok(),
                source: pattern,
            });
        }
        match map.get("x-kubernetes-preserve-unknown-fields") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(true)) => s.x_preserve_unknown_fields = true,
            Some(Value::Bool(false)) => {
                return Err(Error::bad_request(
                    "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined",
                ));
            }
            Some(other) => {
                return Err(type_error(
                    "x-kubernetes-preserve-unknown-fields",
                    other,
                    "bool",
                ));
            }
        }
        match map.get("items") {
            None | Some(Value::Null) => {}
            Some(Value::Array(_)) => {
                return Err(Error::bad_request(
                    "OpenAPIV3Schema 'items' must be a schema, but is an array",
                ));
            }
            Some(items) => s.items = Some(Box::new(Structural::new(items)?)),
        }
        match map.get("properties") {
            None | Some(Value::Null) => {}
            Some(Value::Object(props)) => {
                if !props.is_empty() {
                    let mut out = Vec::with_capacity(props.len());
                    for (k, v) in props {
                        out.push((k.clone(), Structural::new(v)?));
                    }
                    s.properties = Some(out);
                }
            }
            Some(other) => {
                return Err(type_error(
                    "properties",
                    other,
                    "map[string]JSONSchemaProps",
                ));
            }
        }
        match map.get("additionalProperties") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => s.additional_properties = Some(AdditionalProperties::Bool(*b)),
            Some(schema) => {
                s.additional_properties = Some(AdditionalProperties::Schema(Box::new(
                    Structural::new(schema)?,
                )))
            }
        }
        s.all_of = schema_list(map, "allOf")?;
        s.any_of = schema_list(map, "anyOf")?;
        s.one_of = schema_list(map, "oneOf")?;
        if let Some(not) = map.get("not").filter(|n| !n.is_null()) {
            s.not = Some(Box::new(Structural::new(not)?));
        }
        Ok(s)
    }

    /// The schema of the named property, if declared.
    pub fn property(&self, name: &str) -> Option<&Structural> {
        self.properties
            .as_ref()?
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// The schema of the `additionalProperties`, when it is a schema.
    pub fn additional_schema(&self) -> Option<&Structural> {
        match &self.additional_properties {
            Some(AdditionalProperties::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// The schema that applies to the value under `key` of an object:
    /// the property's, else the `additionalProperties` schema.
    pub fn field_schema(&self, key: &str) -> Option<&Structural> {
        self.property(key).or_else(|| self.additional_schema())
    }

    /// Whether this node carries any value validation (kube's non-nil,
    /// non-zero `ValueValidation`).
    pub fn has_value_validation(&self) -> bool {
        !self.format.is_empty()
            || self.maximum.is_some()
            || self.exclusive_maximum
            || self.minimum.is_some()
            || self.exclusive_minimum
            || self.max_length.is_some()
            || self.min_length.is_some()
            || self.pattern.is_some()
            || self.max_items.is_some()
            || self.min_items.is_some()
            || self.unique_items
            || self.multiple_of.is_some()
            || self.enum_values.is_some()
            || self.max_properties.is_some()
            || self.min_properties.is_some()
            || !self.required.is_empty()
            || !self.all_of.is_empty()
            || !self.any_of.is_empty()
            || !self.one_of.is_empty()
            || self.not.is_some()
    }

    /// Whether any vendor extension other than the validations is set.
    pub fn has_extensions(&self) -> bool {
        self.x_preserve_unknown_fields
            || self.x_embedded_resource
            || self.x_int_or_string
            || self.x_list_type.is_some()
            || !self.x_list_map_keys.is_empty()
            || self.x_map_type.is_some()
    }
}

/// The JSON kind of a value, as Go's decoder names it in errors.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_error(field: &str, value: &Value, go_type: &str) -> Error {
    Error::bad_request(format!(
        "json: cannot unmarshal {} into Go struct field JSONSchemaProps.{field} of type {go_type}",
        json_kind(value)
    ))
}

fn unsupported_fields(map: &Map<String, Value>) -> Result<(), Error> {
    let set = |k: &str| match map.get(k) {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    };
    for (key, name) in [
        ("id", "id"),
        ("$schema", "schema"),
        ("$ref", "$ref"),
        ("patternProperties", "patternProperties"),
        ("dependencies", "dependencies"),
    ] {
        if set(key) {
            return Err(Error::bad_request(format!(
                "OpenAPIV3Schema '{name}' is not supported"
            )));
        }
    }
    if map.get("additionalItems").is_some_and(|v| !v.is_null()) {
        return Err(Error::bad_request(
            "OpenAPIV3Schema 'additionalItems' is not supported",
        ));
    }
    if set("definitions") {
        return Err(Error::bad_request(
            "OpenAPIV3Schema 'definitions' is not supported",
        ));
    }
    Ok(())
}

fn string_field(map: &Map<String, Value>, key: &str) -> Result<String, Error> {
    Ok(optional_string(map, key)?.unwrap_or_default())
}

fn optional_string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, Error> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(type_error(key, other, "string")),
    }
}

fn bool_field(map: &Map<String, Value>, key: &str) -> Result<bool, Error> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(type_error(key, other, "bool")),
    }
}

fn number_field(map: &Map<String, Value>, key: &str) -> Result<Option<f64>, Error> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(other) => Err(type_error(key, other, "float64")),
    }
}

fn int_field(map: &Map<String, Value>, key: &str) -> Result<Option<i64>, Error> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| type_error(key, &Value::Number(n.clone()), "int64")),
        Some(other) => Err(type_error(key, other, "int64")),
    }
}

fn string_list(map: &Map<String, Value>, key: &str) -> Result<Vec<String>, Error> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| type_error(key, i, "string"))
            })
            .collect(),
        Some(other) => Err(type_error(key, other, "[]string")),
    }
}

fn schema_list(map: &Map<String, Value>, key: &str) -> Result<Vec<Structural>, Error> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(Structural::new).collect(),
        Some(other) => Err(type_error(key, other, "[]JSONSchemaProps")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resolves_nested_schemas() {
        let s = Structural::new(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "replicas": {"type": "integer", "default": 1, "maximum": 3},
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}
                }}
            }
        }))
        .unwrap();
        let spec = s.property("spec").unwrap();
        let replicas = spec.property("replicas").unwrap();
        assert_eq!(replicas.type_, "integer");
        assert_eq!(replicas.default, Some(json!(1)));
        assert_eq!(replicas.maximum, Some(3.0));
        let tags = spec.property("tags").unwrap();
        assert_eq!(tags.items.as_ref().unwrap().type_, "string");
        assert_eq!(tags.x_list_type.as_deref(), Some("set"));
        assert_eq!(
            spec.property("labels")
                .unwrap()
                .additional_schema()
                .unwrap()
                .type_,
            "string"
        );
        assert_eq!(
            spec.field_schema("labels").map(|s| s.type_.as_str()),
            Some("object")
        );
        let port = spec.property("port").unwrap();
        assert!(port.x_int_or_string);
        assert_eq!(port.any_of.len(), 2);
        assert!(s.property("status").is_none());
    }

    #[test]
    fn rejects_what_kube_rejects() {
        let cases = [
            (
                json!({"$ref": "#/x"}),
                "OpenAPIV3Schema '$ref' is not supported",
            ),
            (json!({"id": "x"}), "OpenAPIV3Schema 'id' is not supported"),
            (
                json!({"$schema": "x"}),
                "OpenAPIV3Schema 'schema' is not supported",
            ),
            (
                json!({"items": [{"type": "string"}]}),
                "OpenAPIV3Schema 'items' must be a schema, but is an array",
            ),
            (
                json!({"patternProperties": {"a": {}}}),
                "OpenAPIV3Schema 'patternProperties' is not supported",
            ),
            (
                json!({"x-kubernetes-preserve-unknown-fields": false}),
                "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined",
            ),
            (
                json!({"type": 5}),
                "json: cannot unmarshal number into Go struct field JSONSchemaProps.type of type string",
            ),
        ];
        for (schema, want) in cases {
            assert_eq!(
                Structural::new(&schema).unwrap_err().to_string(),
                want,
                "{schema}"
            );
        }
    }

    #[test]
    fn null_default_is_no_default() {
        let s = Structural::new(&json!({"type": "string", "default": null})).unwrap();
        assert!(s.default.is_none());
    }
}
