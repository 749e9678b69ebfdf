//! `/openapi/v2`: every group-version's v3 schemas merged into one Swagger
//! 2.0 document, in JSON (`proto::openapi_v2::encode` gives
//! the protobuf form kubectl reads when it validates a `kind: List` manifest).
//!
//! Only definitions are published (clients take paths from `/openapi/v3`).
//! Each schema is reduced to what Swagger 2.0 can say and what kubectl's
//! parser accepts: `$ref`s point into `#/definitions/`, a lone `allOf` ref
//! becomes the ref, arrays always have one item schema, and `anyOf`,
//! `oneOf`, `not` and `nullable` are dropped (the server validates those).
//! As kube publishes custom resources in v2, a node that keeps unknown
//! fields loses its properties and items (kubectl would call those fields
//! unknown), and a nullable one its type too (kubectl would refuse null).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// Where v3 documents keep their schemas.
const V3_REF: &str = "#/components/schemas/";
/// Where a v2 document keeps them.
const V2_REF: &str = "#/definitions/";
/// The extension naming the kinds a definition is.
const GVK: &str = "x-kubernetes-group-version-kind";

/// Schema keywords Swagger 2.0 shares with OpenAPI v3, copied as they are.
const PLAIN: &[&str] = &[
    "description",
    "format",
    "title",
    "default",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "readOnly",
    "example",
];

/// Adds the schemas of one v3 group-version document to `definitions`,
/// uniting the kinds of a definition several documents share.
pub fn add_definitions(definitions: &mut Map<String, Value>, v3_document: &Value) {
    let Some(schemas) = v3_document
        .pointer("/components/schemas")
        .and_then(Value::as_object)
    else {
        return;
    };
    for (name, schema) in schemas {
        let converted = schema_to_v2(schema);
        match definitions.get_mut(name) {
            Some(existing) => unite_kinds(existing, &converted),
            None => {
                definitions.insert(name.clone(), converted);
            }
        }
    }
}

/// Adds the group-version-kinds of `other` that `existing` lacks.
fn unite_kinds(existing: &mut Value, other: &Value) {
    let Some(more) = other.get(GVK).and_then(Value::as_array) else {
        return;
    };
    let Some(object) = existing.as_object_mut() else {
        return;
    };
    let kinds = object
        .entry(GVK)
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(kinds) = kinds.as_array_mut() {
        for kind in more {
            if !kinds.contains(kind) {
                kinds.push(kind.clone());
            }
        }
    }
}

/// One v3 schema in Swagger 2.0 form.
pub fn schema_to_v2(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else {
        return json!({});
    };
    let description = object.get("description").cloned();
    let reference = object.get("$ref").and_then(Value::as_str).or_else(|| {
        match object
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            Some([only]) => only.get("$ref").and_then(Value::as_str),
            _ => None,
        }
    });
    if let Some(reference) = reference {
        let name = reference.strip_prefix(V3_REF).unwrap_or(reference);
        let mut out = Map::from_iter([("$ref".to_string(), json!(format!("{V2_REF}{name}")))]);
        if let Some(description) = description {
            out.insert("description".into(), description);
        }
        return Value::Object(out);
    }
    let flag = |name: &str| object.get(name) == Some(&Value::Bool(true));
    let nullable = flag("nullable");
    let open = nullable || flag("x-kubernetes-preserve-unknown-fields");
    let mut out = Map::new();
    for (key, value) in object {
        match key.as_str() {
            "type" | "properties" | "items" if nullable => {}
            "properties" | "items" if open => {}
            "required" => {
                // A nullable property may be null, which kubectl takes for missing.
                let nullable_property = |name: &Value| {
                    name.as_str()
                        .and_then(|n| object.get("properties")?.get(n)?.get("nullable"))
                        == Some(&Value::Bool(true))
                };
                let kept: Vec<Value> = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|name| !nullable_property(name))
                    .cloned()
                    .collect();
                if !kept.is_empty() {
                    out.insert(key.clone(), Value::Array(kept));
                }
            }
            "type" => {
                let types: Vec<&str> = match value {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                let types: Vec<&str> = types.into_iter().filter(|t| *t != "null").collect();
                if let [only] = types.as_slice() {
                    out.insert("type".into(), json!(only));
                }
            }
            "properties" => {
                let properties: Map<String, Value> = value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, s)| (name.clone(), schema_to_v2(s)))
                    .collect();
                out.insert("properties".into(), Value::Object(properties));
            }
            "additionalProperties" => {
                let converted = match value {
                    Value::Bool(b) => Value::Bool(*b),
                    other => schema_to_v2(other),
                };
                out.insert(key.clone(), converted);
            }
            "items" => {
                let item = match value {
                    Value::Array(items) => items.first().map(schema_to_v2),
                    other => Some(schema_to_v2(other)),
                };
                out.insert(key.clone(), item.unwrap_or_else(|| json!({})));
            }
            k if PLAIN.contains(&k) || k.starts_with("x-") => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    if out.get("type").and_then(Value::as_str) == Some("array") && !out.contains_key("items") {
        out.insert("items".into(), json!({}));
    }
    Value::Object(out)
}

/// The whole v2 document over `definitions`; a `$ref` to a definition that
/// is not there becomes an unconstrained schema, so the document always
/// parses.
pub fn document(mut definitions: Map<String, Value>, version: &str) -> Value {
    let names: BTreeSet<String> = definitions.keys().cloned().collect();
    for schema in definitions.values_mut() {
        drop_dangling_refs(schema, &names);
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": version},
        "paths": {},
        "definitions": definitions,
    })
}

fn drop_dangling_refs(schema: &mut Value, names: &BTreeSet<String>) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        let known = reference
            .strip_prefix(V2_REF)
            .is_some_and(|name| names.contains(name));
        if !known {
            object.remove("$ref");
        }
        return;
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = object.get_mut(key) {
            drop_dangling_refs(sub, names);
        }
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for sub in properties.values_mut() {
            drop_dangling_refs(sub, names);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_point_into_definitions_and_lone_all_of_becomes_a_ref() {
        let v3 = json!({
            "type": "object",
            "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/Meta"}], "default": {}, "description": "m"},
                "spec": {"$ref": "#/components/schemas/Spec"},
                "size": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
                "tags": {"type": "array"},
                "note": {"type": ["string", "null"], "nullable": true},
            },
        });
        let v2 = schema_to_v2(&v3);
        assert_eq!(
            v2["properties"]["metadata"],
            json!({"$ref": "#/definitions/Meta", "description": "m"})
        );
        assert_eq!(
            v2["properties"]["spec"],
            json!({"$ref": "#/definitions/Spec"})
        );
        assert_eq!(
            v2["properties"]["size"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert_eq!(
            v2["properties"]["tags"],
            json!({"type": "array", "items": {}})
        );
        assert_eq!(v2["properties"]["note"], json!({}));
    }

    #[test]
    fn open_and_nullable_nodes_accept_what_kubectl_would_call_unknown() {
        let v3 = json!({
            "type": "object",
            "required": ["spec", "note"],
            "properties": {
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"known": {"type": "string"}}},
                "note": {"type": "string", "nullable": true},
                "list": {"type": "array", "x-kubernetes-preserve-unknown-fields": true,
                    "items": {"type": "string"}},
            },
        });
        let v2 = schema_to_v2(&v3);
        assert_eq!(
            v2["properties"]["spec"],
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(v2["properties"]["note"], json!({}));
        assert_eq!(
            v2["properties"]["list"],
            json!({"type": "array", "x-kubernetes-preserve-unknown-fields": true, "items": {}})
        );
        assert_eq!(v2["required"], json!(["spec"]));
    }

    #[test]
    fn shared_definitions_unite_their_kinds_and_dangling_refs_go() {
        let doc = |kind: &str| {
            json!({"components": {"schemas": {
                "Options": {"type": "object", "properties": {"x": {"$ref": "#/components/schemas/Gone"}},
                            GVK: [{"group": "", "version": "v1", "kind": kind}]},
            }}})
        };
        let mut definitions = Map::new();
        add_definitions(&mut definitions, &doc("A"));
        add_definitions(&mut definitions, &doc("B"));
        add_definitions(&mut definitions, &doc("A"));
        let document = document(definitions, "v1.33.0");
        let options = &document["definitions"]["Options"];
        assert_eq!(options[GVK].as_array().map(Vec::len), Some(2));
        assert_eq!(options["properties"]["x"], json!({}));
    }
}
