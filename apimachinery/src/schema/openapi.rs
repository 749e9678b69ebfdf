//! The schema as kube-apiserver publishes it under `/openapi/v3` for a CRD
//! version (kube's `controller/openapi/builder`, v3 options): the
//! structural schema unfolded (`x-kubernetes-int-or-string` spelled out as
//! `anyOf`), value validations, defaults, `nullable` and
//! `x-kubernetes-validations` kept; `example` and `externalDocs` dropped.

use serde_json::{Map, Value, json};

use super::structural::{AdditionalProperties, Structural};

const OBJECT_META_REF: &str =
    "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const METADATA_DESCRIPTION: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const EMBEDDED_API_VERSION_DESCRIPTION: &str = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND_DESCRIPTION: &str = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// The schema node as published: kube's `Unfold` then `ToKubeOpenAPI`,
/// keys in kube-openapi's order, properties sorted by name.
pub fn to_openapi(schema: &Structural) -> Value {
    let mut s = schema.clone();
    unfold(&mut s);
    Value::Object(render(&s))
}

/// The whole definition of a custom resource kind for `/openapi/v3`:
/// the schema plus `apiVersion`, `kind` and `metadata` (also in embedded
/// resources) and the `x-kubernetes-group-version-kind` extension. Without
/// a schema it is a bare `type: object`.
pub fn to_openapi_resource(
    schema: Option<&Structural>,
    group: &str,
    version: &str,
    kind: &str,
) -> Value {
    let mut out = match schema {
        None => {
            let mut m = Map::new();
            m.insert("type".into(), json!("object"));
            m
        }
        Some(schema) => {
            let mut m = match to_openapi(schema) {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            set_property(
                &mut m,
                "metadata",
                json!({"allOf": [{"$ref": OBJECT_META_REF}], "description": METADATA_DESCRIPTION}),
            );
            set_property(
                &mut m,
                "apiVersion",
                json!({"description": API_VERSION_DESCRIPTION, "type": "string"}),
            );
            set_property(
                &mut m,
                "kind",
                json!({"description": KIND_DESCRIPTION, "type": "string"}),
            );
            add_embedded_properties(&mut m);
            m
        }
    };
    out.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([{"group": group, "kind": kind, "version": version}]),
    );
    Value::Object(out)
}

/// kube's `Unfold`: `x-kubernetes-int-or-string` without the anyOf pattern
/// gets `anyOf: [{type: integer}, {type: string}]` (or an `allOf` entry
/// holding it when `anyOf` is taken).
fn unfold(s: &mut Structural) {
    if let Some(items) = s.items.as_deref_mut() {
        unfold(items);
    }
    for (_, p) in s.properties.iter_mut().flatten() {
        unfold(p);
    }
    if let Some(AdditionalProperties::Schema(extra)) = s.additional_properties.as_mut() {
        unfold(extra);
    }
    if !s.x_int_or_string
        || has_int_or_string_pair(&s.any_of)
        || s.all_of
            .first()
            .is_some_and(|a| has_int_or_string_pair(&a.any_of))
    {
        return;
    }
    let pair = vec![bare("integer"), bare("string")];
    if s.any_of.is_empty() {
        s.any_of = pair;
    } else {
        s.all_of.insert(
            0,
            Structural {
                any_of: pair,
                ..Structural::default()
            },
        );
    }
}

fn bare(type_: &str) -> Structural {
    Structural {
        type_: type_.to_string(),
        ..Structural::default()
    }
}

fn has_int_or_string_pair(any_of: &[Structural]) -> bool {
    let plain = |s: &Structural, t: &str| to_openapi_plain(s) == json!({"type": t});
    any_of.len() == 2 && plain(&any_of[0], "integer") && plain(&any_of[1], "string")
}

fn to_openapi_plain(s: &Structural) -> Value {
    Value::Object(render(s))
}

fn number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

fn render(s: &Structural) -> Map<String, Value> {
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    if !s.description.is_empty() {
        put("description", json!(s.description));
    }
    if !s.type_.is_empty() {
        put("type", json!(s.type_));
    }
    if s.nullable {
        put("nullable", json!(true));
    }
    if !s.format.is_empty() {
        put("format", json!(s.format));
    }
    if !s.title.is_empty() {
        put("title", json!(s.title));
    }
    if let Some(d) = &s.default {
        put("default", d.clone());
    }
    if let Some(v) = s.maximum {
        put("maximum", number(v));
    }
    if s.exclusive_maximum {
        put("exclusiveMaximum", json!(true));
    }
    if let Some(v) = s.minimum {
        put("minimum", number(v));
    }
    if s.exclusive_minimum {
        put("exclusiveMinimum", json!(true));
    }
    for (k, v) in [("maxLength", s.max_length), ("minLength", s.min_length)] {
        if let Some(v) = v {
            put(k, json!(v));
        }
    }
    if let Some(p) = &s.pattern {
        put("pattern", json!(p.source));
    }
    for (k, v) in [("maxItems", s.max_items), ("minItems", s.min_items)] {
        if let Some(v) = v {
            put(k, json!(v));
        }
    }
    if s.unique_items {
        put("uniqueItems", json!(true));
    }
    if let Some(v) = s.multiple_of {
        put("multipleOf", number(v));
    }
    if let Some(e) = &s.enum_values {
        put("enum", Value::Array(e.clone()));
    }
    for (k, v) in [
        ("maxProperties", s.max_properties),
        ("minProperties", s.min_properties),
    ] {
        if let Some(v) = v {
            put(k, json!(v));
        }
    }
    if !s.required.is_empty() {
        put("required", json!(s.required));
    }
    if let Some(items) = &s.items {
        put("items", Value::Object(render(items)));
    }
    for (k, list) in [
        ("allOf", &s.all_of),
        ("oneOf", &s.one_of),
        ("anyOf", &s.any_of),
    ] {
        if !list.is_empty() {
            put(
                k,
                Value::Array(list.iter().map(|n| Value::Object(render(n))).collect()),
            );
        }
    }
    if let Some(not) = &s.not {
        put("not", Value::Object(render(not)));
    }
    if let Some(props) = &s.properties {
        let mut sorted: Vec<&(String, Structural)> = props.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let rendered: Map<String, Value> = sorted
            .into_iter()
            .map(|(k, v)| (k.clone(), Value::Object(render(v))))
            .collect();
        put("properties", Value::Object(rendered));
    }
    match &s.additional_properties {
        Some(AdditionalProperties::Bool(b)) => put("additionalProperties", json!(b)),
        Some(AdditionalProperties::Schema(extra)) => {
            put("additionalProperties", Value::Object(render(extra)))
        }
        None => {}
    }
    if s.x_embedded_resource {
        put("x-kubernetes-embedded-resource", json!(true));
    }
    if s.x_int_or_string {
        put("x-kubernetes-int-or-string", json!(true));
    }
    if !s.x_list_map_keys.is_empty() {
        put("x-kubernetes-list-map-keys", json!(s.x_list_map_keys));
    }
    if let Some(t) = &s.x_list_type {
        put("x-kubernetes-list-type", json!(t));
    }
    if let Some(t) = &s.x_map_type {
        put("x-kubernetes-map-type", json!(t));
    }
    if s.x_preserve_unknown_fields {
        put("x-kubernetes-preserve-unknown-fields", json!(true));
    }
    if !s.x_validations.is_empty() {
        put(
            "x-kubernetes-validations",
            Value::Array(s.x_validations.clone()),
        );
    }
    m
}

/// Adds (or replaces) a property, keeping properties sorted by name.
fn set_property(m: &mut Map<String, Value>, name: &str, schema: Value) {
    let mut props = match m.remove("properties") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    props.insert(name.to_string(), schema);
    let mut entries: Vec<(String, Value)> = props.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    m.insert(
        "properties".into(),
        Value::Object(entries.into_iter().collect()),
    );
}

/// kube's `addEmbeddedProperties` (v3): embedded resources get `apiVersion`,
/// `kind`, `metadata`, and require `kind` and `apiVersion`.
fn add_embedded_properties(m: &mut Map<String, Value>) {
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        for (_, v) in props.iter_mut() {
            if let Value::Object(p) = v {
                add_embedded_properties(p);
            }
        }
    }
    for k in ["items", "additionalProperties"] {
        if let Some(Value::Object(sub)) = m.get_mut(k) {
            add_embedded_properties(sub);
        }
    }
    if m.get("x-kubernetes-embedded-resource") != Some(&Value::Bool(true)) {
        return;
    }
    set_property(
        m,
        "apiVersion",
        json!({"description": EMBEDDED_API_VERSION_DESCRIPTION, "type": "string"}),
    );
    set_property(
        m,
        "kind",
        json!({"description": EMBEDDED_KIND_DESCRIPTION, "type": "string"}),
    );
    set_property(
        m,
        "metadata",
        json!({"description": METADATA_DESCRIPTION, "$ref": OBJECT_META_REF}),
    );
    let mut required: Vec<Value> = match m.remove("required") {
        Some(Value::Array(r)) => r,
        _ => Vec::new(),
    };
    for name in ["kind", "apiVersion"] {
        if !required.iter().any(|r| r == name) {
            required.push(json!(name));
        }
    }
    m.insert("required".into(), Value::Array(required));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_schema_like_kube() {
        let s = Structural::new(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "description": "Spec.", "properties": {
                    "replicas": {"type": "integer", "default": 1, "minimum": 0},
                    "port": {"x-kubernetes-int-or-string": true},
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "name": {"type": "string", "nullable": true, "example": "x", "externalDocs": {"url": "https://e"}}
                }, "x-kubernetes-validations": [{"rule": "self.replicas >= 0"}]}
            }
        }))
        .unwrap();
        let published = to_openapi(&s);
        assert_eq!(
            published,
            json!({
                "type": "object",
                "properties": {"spec": {
                    "description": "Spec.",
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "nullable": true},
                        "port": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
                        "replicas": {"type": "integer", "default": 1, "minimum": 0},
                        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
                    },
                    "x-kubernetes-validations": [{"rule": "self.replicas >= 0"}]
                }}
            })
        );
        let keys: Vec<&String> = published["properties"]["spec"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["name", "port", "replicas", "tags"]);
    }

    #[test]
    fn resource_definition_adds_type_and_object_meta() {
        let s = Structural::new(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
            }}}
        }))
        .unwrap();
        let def = to_openapi_resource(Some(&s), "example.com", "v1", "Foo");
        let props = def["properties"].as_object().unwrap();
        assert_eq!(
            props.keys().collect::<Vec<_>>(),
            ["apiVersion", "kind", "metadata", "spec"]
        );
        assert_eq!(
            def["properties"]["metadata"]["allOf"][0]["$ref"],
            OBJECT_META_REF
        );
        assert_eq!(def["properties"]["kind"]["type"], "string");
        assert_eq!(
            def["x-kubernetes-group-version-kind"],
            json!([{"group": "example.com", "kind": "Foo", "version": "v1"}])
        );
        let template = &def["properties"]["spec"]["properties"]["template"];
        assert_eq!(template["required"], json!(["kind", "apiVersion"]));
        assert_eq!(
            template["properties"]["apiVersion"]["description"],
            EMBEDDED_API_VERSION_DESCRIPTION
        );
        let bare = to_openapi_resource(None, "example.com", "v1", "Foo");
        assert_eq!(
            bare,
            json!({"type": "object", "x-kubernetes-group-version-kind": [{"group": "example.com", "kind": "Foo", "version": "v1"}]})
        );
    }
}
