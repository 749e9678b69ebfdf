//! The OpenAPI v2 document model served in protobuf at `/openapi/v2`
//! (gnostic's `openapi_v2` package), and its encoding from the JSON document.

use prost::Message;
use serde_json::{Map, Value};

#[allow(missing_docs, clippy::all)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/openapi.v2.rs"));
}

pub use generated::*;

/// The document in gnostic's protobuf form
/// (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`).
pub fn encode(document: &Value) -> Vec<u8> {
    let text = |key: &str| {
        document
            .pointer(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let definitions = document
        .get("definitions")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, schema)| named_schema(name, schema))
        .collect();
    Document {
        swagger: text("/swagger"),
        info: Some(Info {
            title: text("/info/title"),
            version: text("/info/version"),
        }),
        paths: Some(Paths {
            vendor_extension: Vec::new(),
            path: document
                .get("paths")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(name, item)| NamedPathItem {
                    name: name.clone(),
                    value: Some(path_item(item)),
                })
                .collect(),
        }),
        definitions: Some(Definitions {
            additional_properties: definitions,
        }),
    }
    .encode_to_vec()
}

/// One path's operations and shared parameters.
fn path_item(item: &Value) -> PathItem {
    let op = |method: &str| item.get(method).map(operation);
    PathItem {
        get: op("get"),
        put: op("put"),
        post: op("post"),
        delete: op("delete"),
        options: op("options"),
        head: op("head"),
        patch: op("patch"),
        parameters: parameters(item),
    }
}

/// The strings of an array field.
fn strings(value: &Value, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

/// The `x-` keys of an object, as vendor extensions.
fn vendor_extensions(value: &Value) -> Vec<NamedAny> {
    value
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.starts_with("x-"))
        .map(|(key, value)| NamedAny {
            name: key.clone(),
            value: Some(any(value)),
        })
        .collect()
}

fn operation(op: &Value) -> Operation {
    let text = |key: &str| {
        op.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let responses = op
        .get("responses")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(code, response)| NamedResponseValue {
            name: code.clone(),
            value: Some(ResponseValue {
                oneof: Some(response_value::Oneof::Response(Response {
                    description: response
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    schema: response.get("schema").map(|schema| SchemaItem {
                        oneof: Some(schema_item::Oneof::Schema(schema_to_protobuf(schema))),
                    }),
                })),
            }),
        })
        .collect();
    Operation {
        tags: strings(op, "tags"),
        description: text("description"),
        operation_id: text("operationId"),
        produces: strings(op, "produces"),
        consumes: strings(op, "consumes"),
        parameters: parameters(op),
        responses: Some(Responses {
            response_code: responses,
        }),
        schemes: strings(op, "schemes"),
        vendor_extension: vendor_extensions(op),
    }
}

/// The `parameters` of a path item or an operation.
fn parameters(owner: &Value) -> Vec<ParametersItem> {
    owner
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|param| ParametersItem {
            oneof: Some(parameters_item::Oneof::Parameter(parameter(param))),
        })
        .collect()
}

fn parameter(param: &Value) -> Parameter {
    let text = |key: &str| {
        param
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let flag = |key: &str| param.get(key).and_then(Value::as_bool).unwrap_or_default();
    let oneof = match param.get("in").and_then(Value::as_str) {
        Some("body") => parameter::Oneof::BodyParameter(BodyParameter {
            description: text("description"),
            name: text("name"),
            r#in: text("in"),
            required: flag("required"),
            schema: param.get("schema").map(schema_to_protobuf),
        }),
        Some("path") => parameter::Oneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(non_body_parameter::Oneof::PathParameterSubSchema(
                PathParameterSubSchema {
                    required: flag("required"),
                    r#in: text("in"),
                    description: text("description"),
                    name: text("name"),
                    r#type: text("type"),
                    unique_items: flag("uniqueItems"),
                },
            )),
        }),
        _ => parameter::Oneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(non_body_parameter::Oneof::QueryParameterSubSchema(
                QueryParameterSubSchema {
                    required: flag("required"),
                    r#in: text("in"),
                    description: text("description"),
                    name: text("name"),
                    r#type: text("type"),
                    unique_items: flag("uniqueItems"),
                },
            )),
        }),
    };
    Parameter { oneof: Some(oneof) }
}

fn named_schema(name: &str, schema: &Value) -> NamedSchema {
    NamedSchema {
        name: name.to_string(),
        value: Some(schema_to_protobuf(schema)),
    }
}

/// A value as gnostic's `Any` (its YAML; JSON is YAML).
fn any(value: &Value) -> Any {
    Any {
        yaml: value.to_string(),
    }
}

fn schema_to_protobuf(schema: &Value) -> Schema {
    let text = |key: &str| {
        schema
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let number = |key: &str| schema.get(key).and_then(Value::as_f64).unwrap_or_default();
    let integer = |key: &str| schema.get(key).and_then(Value::as_i64).unwrap_or_default();
    let flag = |key: &str| schema.get(key).and_then(Value::as_bool).unwrap_or_default();
    let empty = Map::new();
    let object = schema.as_object().unwrap_or(&empty);
    Schema {
        r#ref: text("$ref"),
        format: text("format"),
        title: text("title"),
        description: text("description"),
        default: schema.get("default").map(any),
        multiple_of: number("multipleOf"),
        maximum: number("maximum"),
        exclusive_maximum: flag("exclusiveMaximum"),
        minimum: number("minimum"),
        exclusive_minimum: flag("exclusiveMinimum"),
        max_length: integer("maxLength"),
        min_length: integer("minLength"),
        pattern: text("pattern"),
        max_items: integer("maxItems"),
        min_items: integer("minItems"),
        unique_items: flag("uniqueItems"),
        max_properties: integer("maxProperties"),
        min_properties: integer("minProperties"),
        required: schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        r#enum: schema
            .get("enum")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(any)
            .collect(),
        additional_properties: schema.get("additionalProperties").map(|extra| {
            let oneof = match extra {
                Value::Bool(b) => additional_properties_item::Oneof::Boolean(*b),
                other => {
                    additional_properties_item::Oneof::Schema(Box::new(schema_to_protobuf(other)))
                }
            };
            Box::new(AdditionalPropertiesItem { oneof: Some(oneof) })
        }),
        r#type: schema
            .get("type")
            .and_then(Value::as_str)
            .map(|t| TypeItem {
                value: vec![t.to_string()],
            }),
        items: schema.get("items").map(|item| ItemsItem {
            schema: vec![schema_to_protobuf(item)],
        }),
        all_of: Vec::new(),
        properties: schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| Properties {
                additional_properties: properties
                    .iter()
                    .map(|(name, sub)| named_schema(name, sub))
                    .collect(),
            }),
        read_only: flag("readOnly"),
        example: schema.get("example").map(any),
        vendor_extension: object
            .iter()
            .filter(|(key, _)| key.starts_with("x-"))
            .map(|(key, value)| NamedAny {
                name: key.clone(),
                value: Some(any(value)),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GVK: &str = "x-kubernetes-group-version-kind";

    #[test]
    fn protobuf_carries_definitions_types_and_extensions() {
        let document = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "definitions": {"io.k8s.api.core.v1.ConfigMap": {
                "type": "object", "required": ["a"],
                "properties": {"data": {"type": "object", "additionalProperties": {"type": "string"}}},
                GVK: [{"group": "", "version": "v1", "kind": "ConfigMap"}],
            }},
        });
        let decoded = Document::decode(encode(&document).as_slice()).expect("decodes");
        assert_eq!(decoded.swagger, "2.0");
        let definitions = decoded
            .definitions
            .expect("definitions")
            .additional_properties;
        let config_map = definitions[0].value.as_ref().expect("schema");
        assert_eq!(
            config_map.r#type.as_ref().map(|t| t.value.clone()),
            Some(vec!["object".to_string()])
        );
        assert_eq!(config_map.required, ["a"]);
        let extension = &config_map.vendor_extension[0];
        assert_eq!(extension.name, GVK);
        let kinds: Value =
            serde_json::from_str(&extension.value.as_ref().expect("value").yaml).expect("JSON");
        assert_eq!(kinds[0]["kind"], "ConfigMap");
        let data = &config_map
            .properties
            .as_ref()
            .expect("properties")
            .additional_properties[0];
        assert_eq!(data.name, "data");
    }

    #[test]
    fn protobuf_carries_paths_operations_and_parameters() {
        let document = json!({
            "swagger": "2.0",
            "paths": {"/api/v1/namespaces/{namespace}/pods/{name}": {
                "parameters": [{"in": "path", "name": "name", "required": true, "type": "string"}],
                "patch": {
                    "operationId": "patchCoreV1NamespacedPod",
                    "consumes": ["application/merge-patch+json"],
                    "parameters": [
                        {"in": "body", "name": "body", "required": true, "schema": {"$ref": "#/definitions/Patch"}},
                        {"in": "query", "name": "force", "type": "boolean"},
                    ],
                    "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/Pod"}}},
                    "x-kubernetes-action": "patch",
                },
            }},
        });
        let decoded = Document::decode(encode(&document).as_slice()).expect("decodes");
        let paths = decoded.paths.expect("paths").path;
        assert_eq!(paths[0].name, "/api/v1/namespaces/{namespace}/pods/{name}");
        let item = paths[0].value.as_ref().expect("item");
        let patch = item.patch.as_ref().expect("patch");
        assert_eq!(patch.operation_id, "patchCoreV1NamespacedPod");
        assert_eq!(patch.consumes, ["application/merge-patch+json"]);
        assert_eq!(patch.vendor_extension[0].name, "x-kubernetes-action");
        let Some(parameters_item::Oneof::Parameter(Parameter {
            oneof: Some(parameter::Oneof::BodyParameter(body)),
        })) = &patch.parameters[0].oneof
        else {
            panic!("a body parameter first: {:?}", patch.parameters);
        };
        assert_eq!(
            body.schema.as_ref().map(|s| s.r#ref.as_str()),
            Some("#/definitions/Patch")
        );
        let Some(parameters_item::Oneof::Parameter(Parameter {
            oneof:
                Some(parameter::Oneof::NonBodyParameter(NonBodyParameter {
                    oneof: Some(non_body_parameter::Oneof::QueryParameterSubSchema(force)),
                })),
        })) = &patch.parameters[1].oneof
        else {
            panic!("a query parameter: {:?}", patch.parameters);
        };
        assert_eq!(
            (force.name.as_str(), force.r#type.as_str()),
            ("force", "boolean")
        );
        assert!(item.get.is_none());
        assert_eq!(item.parameters.len(), 1);
        let responses = patch.responses.as_ref().expect("responses");
        assert_eq!(responses.response_code[0].name, "200");
    }
}
