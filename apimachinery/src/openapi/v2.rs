//! `/openapi/v2`: every group-version's v3 documents merged into one Swagger
//! 2.0 document, in JSON (`proto::openapi_v2::encode` gives
//! the protobuf form kubectl reads when it validates a `kind: List` manifest).
//!
//! Paths keep their operations as kube writes them in v2 ([`add_paths`]):
//! a request body becomes a `body` parameter, its media types `consumes`,
//! the response media types `produces`, parameter schemas flat.
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
        // A reference keeps its extensions (`x-kubernetes-patch-strategy`), as kube's v2 does.
        for (key, value) in object.iter().filter(|(key, _)| key.starts_with("x-")) {
            out.insert(key.clone(), value.clone());
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
    // A scalar kube types by `oneOf` (IntOrString, Quantity) is a string in v2.
    let scalar_one_of = object
        .get("oneOf")
        .and_then(Value::as_array)
        .is_some_and(|options| {
            options
                .iter()
                .any(|o| o.get("type") == Some(&json!("string")))
        });
    if scalar_one_of && !out.contains_key("type") {
        out.insert("type".into(), json!("string"));
    }
    if out.get("type").and_then(Value::as_str) == Some("array") && !out.contains_key("items") {
        out.insert("items".into(), json!({}));
    }
    Value::Object(out)
}

/// HTTP methods of a path item.
const METHODS: [&str; 7] = ["get", "put", "post", "delete", "options", "head", "patch"];

/// Adds the paths of one v3 group-version document to `paths`, in v2 form.
pub fn add_paths(paths: &mut Map<String, Value>, v3_document: &Value) {
    let Some(items) = v3_document.get("paths").and_then(Value::as_object) else {
        return;
    };
    for (path, item) in items {
        let mut converted = Map::new();
        if let Some(Value::Array(params)) = item.get("parameters") {
            let params = params.iter().map(parameter_to_v2).collect();
            converted.insert("parameters".into(), Value::Array(params));
        }
        for method in METHODS {
            if let Some(op) = item.get(method) {
                converted.insert(method.into(), operation_to_v2(op));
            }
        }
        paths.insert(path.clone(), Value::Object(converted));
    }
}

/// One v3 parameter in v2 form: its schema's type beside its name.
fn parameter_to_v2(param: &Value) -> Value {
    let mut out = Map::new();
    for (key, value) in param.as_object().into_iter().flatten() {
        match key.as_str() {
            "schema" => {
                for (k, v) in value.as_object().into_iter().flatten() {
                    out.insert(k.clone(), v.clone());
                }
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// One v3 operation in v2 form.
fn operation_to_v2(op: &Value) -> Value {
    let mut out = Map::new();
    let media = |content: &Value| -> Vec<String> {
        content
            .as_object()
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default()
    };
    let body = op.get("requestBody");
    let consumes = body
        .map(|b| media(&b["content"]))
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| vec!["*/*".to_string()]);
    let mut params: Vec<Value> = op
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(parameter_to_v2)
        .collect();
    if let Some(body) = body {
        let schema = body["content"]
            .as_object()
            .and_then(|c| c.values().next())
            .map(|m| schema_to_v2(&m["schema"]))
            .unwrap_or_else(|| json!({}));
        params.insert(
            0,
            json!({"in": "body", "name": "body", "required": true, "schema": schema}),
        );
    }
    let mut produces = BTreeSet::new();
    let mut responses = Map::new();
    for (code, response) in op
        .get("responses")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let mut converted = Map::new();
        if let Some(description) = response.get("description") {
            converted.insert("description".into(), description.clone());
        }
        if let Some(content) = response.get("content").and_then(Value::as_object) {
            produces.extend(content.keys().cloned());
            if let Some(first) = content.values().next() {
                converted.insert("schema".into(), schema_to_v2(&first["schema"]));
            }
        }
        responses.insert(code.clone(), Value::Object(converted));
    }
    for (key, value) in op.as_object().into_iter().flatten() {
        match key.as_str() {
            "description" | "operationId" | "tags" => {
                out.insert(key.clone(), value.clone());
            }
            k if k.starts_with("x-") => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    out.insert("consumes".into(), json!(consumes));
    out.insert("produces".into(), json!(produces));
    if !params.is_empty() {
        out.insert("parameters".into(), Value::Array(params));
    }
    out.insert("responses".into(), Value::Object(responses));
    out.insert("schemes".into(), json!(["https"]));
    Value::Object(out)
}

/// The whole v2 document over `paths` and `definitions`; a `$ref` to a
/// definition that is not there becomes an unconstrained schema, so the
/// document always parses.
pub fn document(
    mut paths: Map<String, Value>,
    mut definitions: Map<String, Value>,
    version: &str,
) -> Value {
    let names: BTreeSet<String> = definitions.keys().cloned().collect();
    for schema in definitions.values_mut() {
        drop_dangling_refs(schema, &names);
    }
    for item in paths.values_mut() {
        for method in METHODS {
            let Some(op) = item.get_mut(method) else {
                continue;
            };
            for param in op
                .get_mut("parameters")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(schema) = param.get_mut("schema") {
                    drop_dangling_refs(schema, &names);
                }
            }
            for response in op
                .get_mut("responses")
                .and_then(Value::as_object_mut)
                .into_iter()
                .flat_map(|r| r.values_mut())
            {
                if let Some(schema) = response.get_mut("schema") {
                    drop_dangling_refs(schema, &names);
                }
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": version},
        "paths": paths,
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
    fn scalars_typed_by_one_of_are_strings() {
        let int_or_string = json!({"format": "int-or-string",
            "oneOf": [{"type": "integer"}, {"type": "string"}]});
        assert_eq!(
            schema_to_v2(&int_or_string),
            json!({"format": "int-or-string", "type": "string"})
        );
        let quantity = json!({"oneOf": [{"type": "string"}, {"type": "number"}]});
        assert_eq!(schema_to_v2(&quantity), json!({"type": "string"}));
    }

    #[test]
    fn operations_take_their_body_as_a_parameter() {
        let v3 = json!({"paths": {"/api/v1/namespaces/{namespace}/pods/{name}": {
            "parameters": [{"in": "path", "name": "name", "required": true,
                "schema": {"type": "string", "uniqueItems": true}}],
            "patch": {
                "operationId": "patchCoreV1NamespacedPod",
                "parameters": [{"in": "query", "name": "force", "schema": {"type": "boolean"}}],
                "requestBody": {"content": {
                    "application/merge-patch+json": {"schema": {"$ref": "#/components/schemas/Patch"}},
                    "application/json-patch+json": {"schema": {"$ref": "#/components/schemas/Patch"}},
                }, "required": true},
                "responses": {"200": {"description": "OK", "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/Pod"}},
                }}},
                "x-kubernetes-action": "patch",
            },
            "get": {"operationId": "readCoreV1NamespacedPod", "responses": {}},
        }}});
        let mut paths = Map::new();
        add_paths(&mut paths, &v3);
        let document = document(paths, Map::new(), "v1.33.0");
        let item = &document["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"];
        assert_eq!(
            item["parameters"][0],
            json!({"in": "path", "name": "name", "required": true, "type": "string", "uniqueItems": true})
        );
        let patch = &item["patch"];
        assert_eq!(patch["parameters"][0]["in"], "body");
        assert_eq!(patch["parameters"][0]["name"], "body");
        assert_eq!(
            patch["parameters"][1],
            json!({"in": "query", "name": "force", "type": "boolean"})
        );
        assert_eq!(
            patch["consumes"],
            json!([
                "application/merge-patch+json",
                "application/json-patch+json"
            ])
        );
        assert_eq!(patch["produces"], json!(["application/json"]));
        assert_eq!(patch["x-kubernetes-action"], "patch");
        // Definitions that are not there leave unconstrained schemas.
        assert_eq!(patch["parameters"][0]["schema"], json!({}));
        assert_eq!(patch["responses"]["200"]["schema"], json!({}));
        assert_eq!(item["get"]["consumes"], json!(["*/*"]));
    }

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
        let strategy = json!({"allOf": [{"$ref": "#/components/schemas/S"}],
            "x-kubernetes-patch-strategy": "retainKeys"});
        assert_eq!(
            schema_to_v2(&strategy),
            json!({"$ref": "#/definitions/S", "x-kubernetes-patch-strategy": "retainKeys"})
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
        let document = document(Map::new(), definitions, "v1.33.0");
        let options = &document["definitions"]["Options"];
        assert_eq!(options[GVK].as_array().map(Vec::len), Some(2));
        assert_eq!(options["properties"]["x"], json!({}));
    }
}
