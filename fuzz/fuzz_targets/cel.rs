//! CEL validation rules (`x-kubernetes-validations`): compiled against a
//! schema with the static cost limits, then evaluated on an object with the
//! runtime cost budget (`apimachinery::cel::{compile, validate}`).
//!
//! Input: line 1 the rule (a tab starts its `messageExpression`), line 2 the
//! `spec` schema as JSON (anything else: a default schema with every kind of
//! field), then the `spec` to validate as JSON, or `[new, old]` for an update
//! (transition rules with `oldSelf`).
#![no_main]

use apimachinery::cel::{compile, validate_with_warnings};
use kubechain_fuzz::{abort_on_uncaught, json, split_lines, text, tolerate_caught_panics_in};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

const PATH: &str = "spec.versions[0].schema.openAPIV3Schema";

fn default_spec_schema() -> Value {
    json!({"type": "object", "properties": {
        "replicas": {"type": "integer", "minimum": 0},
        "minReplicas": {"type": "integer"},
        "maxReplicas": {"type": "integer"},
        "ratio": {"type": "number"},
        "enabled": {"type": "boolean"},
        "name": {"type": "string", "maxLength": 63},
        "created": {"type": "string", "format": "date-time"},
        "ttl": {"type": "string", "format": "duration"},
        "port": {"x-kubernetes-int-or-string": true},
        "cpu": {"type": "string", "maxLength": 20},
        "tags": {"type": "array", "maxItems": 10, "x-kubernetes-list-type": "set",
                 "items": {"type": "string", "maxLength": 10}},
        "ports": {"type": "array", "maxItems": 8, "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "required": ["name"], "properties": {
                      "name": {"type": "string", "maxLength": 15},
                      "port": {"type": "integer"}}}},
        "labels": {"type": "object", "maxProperties": 16,
                   "additionalProperties": {"type": "string", "maxLength": 63}},
        "nested": {"type": "object", "properties": {
            "list": {"type": "array", "maxItems": 4, "items": {"type": "array", "maxItems": 4,
                     "items": {"type": "integer"}}}}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    }})
}

fuzz_target!(
    init: tolerate_caught_panics_in(&["/cel-0."]),
    |data: &[u8]| abort_on_uncaught(|| run(data))
);

fn run(data: &[u8]) {
    let parts = split_lines(data, 3);
    let rule = text(parts[0]);
    let (rule, message_expression) = match rule.split_once('\t') {
        Some((rule, message)) => (rule, Some(message)),
        None => (rule.as_str(), None),
    };
    let mut spec = parts
        .get(1)
        .and_then(|s| json(s))
        .filter(Value::is_object)
        .unwrap_or_else(default_spec_schema);
    let mut entry = json!({"rule": rule});
    if let Some(message_expression) = message_expression {
        entry["messageExpression"] = json!(message_expression);
    }
    spec["x-kubernetes-validations"] = json!([entry]);
    let schema = json!({"type": "object", "properties": {"spec": spec}});
    let Ok(rules) = compile(&schema, PATH) else {
        return;
    };
    let (new, old) = match parts.get(2).and_then(|s| json(s)) {
        Some(Value::Array(pair)) if pair.len() == 2 => (pair[0].clone(), Some(pair[1].clone())),
        Some(new) => (new, None),
        None => return,
    };
    let object = |spec: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
                   "metadata": {"name": "w", "namespace": "default"}, "spec": spec})
    };
    let old = old.map(object);
    let _ = validate_with_warnings(&rules, &object(new), old.as_ref());
}
