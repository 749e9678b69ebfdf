//! Unknown-field detection for `fieldValidation=Strict|Warn`.
//!
//! kube-apiserver decodes built-ins with sigs.k8s.io/json's strict decoder and
//! prunes custom resources against their structural schema; both report each
//! dropped field by its path: object keys joined with `.`, list positions as
//! `[i]`, map keys like object keys (`spec.template.spec.containers[0].bogus`,
//! `data.bogus`). The decoder keeps at most 100 of them; so does this walker.

use serde_json::{Map, Value};

use super::components::Components;

/// The most unknown fields reported for one object (kube's strict decoder stops at 100).
const MAX_UNKNOWN_FIELDS: usize = 100;

/// Fields every top-level object may carry even when its schema does not list them.
const ALWAYS_KNOWN_AT_ROOT: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// The paths of the fields of `value` that `schema` does not declare, in document order.
///
/// `schema` may be a kind's schema or a `$ref` to it. A subtree is accepted
/// whole under `x-kubernetes-preserve-unknown-fields: true` and under schemas
/// that say nothing about its shape (no `properties`, `additionalProperties`
/// or `items`: RawExtension, JSON, IntOrString, Quantity, …).
pub fn unknown_fields(value: &Value, schema: &Value, components: &Components) -> Vec<String> {
    let mut walker = Walker {
        components,
        found: Vec::new(),
    };
    walker.walk(value, schema, &mut String::new());
    walker.found
}

/// The state of one walk: where to resolve refs, what was found so far.
struct Walker<'a> {
    components: &'a Components,
    found: Vec<String>,
}

impl Walker<'_> {
    /// Checks `value` against `schema`; `path` is the value's path (empty at the root).
    fn walk(&mut self, value: &Value, schema: &Value, path: &mut String) {
        if self.found.len() >= MAX_UNKNOWN_FIELDS || preserves_unknown(schema) {
            return;
        }
        let schema = self.components.resolve(schema);
        if preserves_unknown(schema) {
            return;
        }
        match value {
            Value::Object(object) => self.walk_object(object, schema, path),
            Value::Array(items) => self.walk_array(items, schema, path),
            _ => {}
        }
    }

    /// Checks each key of an object against `properties`, or each value against `additionalProperties`.
    fn walk_object(&mut self, object: &Map<String, Value>, schema: &Value, path: &mut String) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema
            .get("additionalProperties")
            .filter(|sub| sub.is_object());
        if properties.is_none() && additional.is_none() {
            return;
        }
        let embedded = path.is_empty() || is_embedded_resource(schema);
        for (key, child) in object {
            let len = path.len();
            push_key(path, key);
            match (properties.and_then(|p| p.get(key)), additional) {
                (Some(sub), _) | (None, Some(sub)) => self.walk(child, sub, path),
                (None, None) if embedded && ALWAYS_KNOWN_AT_ROOT.contains(&key.as_str()) => {}
                (None, None) => self.report(path),
            }
            path.truncate(len);
        }
    }

    /// Checks each element of a list against `items`.
    fn walk_array(&mut self, items: &[Value], schema: &Value, path: &mut String) {
        let Some(item_schema) = schema.get("items").filter(|sub| sub.is_object()) else {
            return;
        };
        for (index, item) in items.iter().enumerate() {
            let len = path.len();
            path.push_str(&format!("[{index}]"));
            self.walk(item, item_schema, path);
            path.truncate(len);
        }
    }

    /// Records one unknown field, keeping kube's cap and dropping duplicates.
    fn report(&mut self, path: &str) {
        if self.found.len() < MAX_UNKNOWN_FIELDS && !self.found.iter().any(|seen| seen == path) {
            self.found.push(path.to_string());
        }
    }
}

/// Appends `.key` (or `key` at the root) to `path`.
fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

/// Whether a schema accepts any field below it.
fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
        || schema.get("additionalProperties").and_then(Value::as_bool) == Some(true)
}

/// Whether a CRD schema marks an embedded object (it may carry apiVersion, kind, metadata).
fn is_embedded_resource(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
    use serde_json::json;

    fn schema_of<K: schemars::JsonSchema>(components: &mut Components) -> Value {
        let name = components.add::<K>();
        json!({"$ref": format!("#/components/schemas/{name}")})
    }

    #[test]
    fn config_map_data_is_a_string_map_and_bogus_top_level_is_reported() {
        let mut components = Components::new();
        let schema = schema_of::<ConfigMap>(&mut components);
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"a": "b"}, "bogus": 1},
            "data": {"bogus": "fine, data is a map"},
            "bogus": {"nested": true},
        });
        assert_eq!(
            unknown_fields(&object, &schema, &components),
            ["metadata.bogus", "bogus"]
        );
    }

    #[test]
    fn deployment_reports_kube_paths() {
        let mut components = Components::new();
        let schema = schema_of::<Deployment>(&mut components);
        let object = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {
                "selector": {"matchLabels": {"app": "x"}},
                "template": {
                    "metadata": {"labels": {"app": "x"}},
                    "spec": {"containers": [
                        {"name": "a", "image": "nginx", "bogus": 1,
                         "ports": [{"containerPort": 80}, {"containerPort": 81, "typo": "x"}],
                         "resources": {"limits": {"cpu": "1"}}},
                    ]},
                },
            },
        });
        assert_eq!(
            unknown_fields(&object, &schema, &components),
            [
                "spec.template.spec.containers[0].bogus",
                "spec.template.spec.containers[0].ports[1].typo"
            ]
        );
    }

    #[test]
    fn valid_objects_have_no_unknown_fields() {
        let mut components = Components::new();
        let schema = schema_of::<Deployment>(&mut components);
        let object = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "annotations": {"x": "y"}, "ownerReferences": []},
            "spec": {"replicas": 2, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
                "template": {"spec": {"containers": [{"name": "a", "env": [{"name": "A", "value": "1"}]}]}}},
            "status": {"conditions": [{"type": "Available", "status": "True"}]},
        });
        assert!(unknown_fields(&object, &schema, &components).is_empty());
    }

    #[test]
    fn map_values_and_preserved_subtrees() {
        let components = Components::new();
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "byName": {"type": "object", "additionalProperties": {
                        "type": "object", "properties": {"size": {"type": "integer"}}}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "raw": {"type": "object"},
                }},
            },
        });
        let object = json!({
            "apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "f"},
            "spec": {"byName": {"a": {"size": 1, "colour": "red"}}, "free": {"any": {"thing": 1}}, "raw": {"x": 1}},
        });
        assert_eq!(
            unknown_fields(&object, &schema, &components),
            ["spec.byName.a.colour"]
        );
    }
}
