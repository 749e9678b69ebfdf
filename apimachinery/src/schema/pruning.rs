//! Pruning of fields a structural schema does not specify (kube's
//! `pruning.PruneWithOptions` plus the ObjectMeta coercion of root and
//! embedded `metadata`), reporting what was dropped in strict-decoding form.

use serde_json::{Map, Value};

use super::structural::Structural;

/// ObjectMeta's JSON fields: everything else in `metadata` is dropped.
const OBJECT_META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

const OWNER_REFERENCE_FIELDS: [&str; 6] = [
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];
const MANAGED_FIELDS_ENTRY_FIELDS: [&str; 7] = [
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

/// Drops the fields of `obj` that `schema` does not specify, except under
/// `x-kubernetes-preserve-unknown-fields`. `apiVersion`, `kind` and
/// `metadata` are kept at the root (when `is_root`) and in embedded
/// resources, with `metadata` cut down to ObjectMeta's fields.
///
/// Returns the paths of the dropped fields, sorted (`spec.foo`); kube
/// reports each as `unknown field "<path>"` for `fieldValidation`.
pub fn prune(obj: &mut Value, schema: &Structural, is_root: bool) -> Vec<String> {
    let mut pruner = Pruner::default();
    if is_root && !schema.x_embedded_resource {
        let mut root = schema.clone();
        root.x_embedded_resource = true;
        pruner.prune(obj, Some(&root));
    } else {
        pruner.prune(obj, Some(schema));
    }
    let mut paths = pruner.unknown;
    paths.sort();
    paths
}

/// The walk state: the current path (kube's `UnknownFieldPathOptions`).
#[derive(Default)]
struct Pruner {
    parent: Vec<String>,
    unknown: Vec<String>,
}

impl Pruner {
    fn push_key(&mut self, k: &str) {
        if !self.parent.is_empty() {
            self.parent.push(".".into());
        }
        self.parent.push(k.to_string());
    }

    fn push_index(&mut self, i: usize) {
        self.parent.push(format!("[{i}]"));
    }

    fn record(&mut self, k: &str) {
        let depth = self.parent.len();
        self.push_key(k);
        self.unknown.push(self.parent.concat());
        self.parent.truncate(depth);
    }

    fn prune(&mut self, x: &mut Value, s: Option<&Structural>) {
        if let Some(s) = s.filter(|s| s.x_preserve_unknown_fields) {
            self.skip_prune(x, s);
            return;
        }
        let depth = self.parent.len();
        match x {
            Value::Object(map) => {
                let Some(s) = s else {
                    let keys: Vec<String> = map.keys().cloned().collect();
                    for k in keys {
                        self.record(&k);
                        map.remove(&k);
                    }
                    return;
                };
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    if s.x_embedded_resource && is_meta_field(&k) {
                        self.coerce_meta(&k, map);
                        continue;
                    }
                    let Some(v) = map.get_mut(&k) else { continue };
                    if let Some(prop) = s.property(&k) {
                        self.push_key(&k);
                        self.prune(v, Some(prop));
                        self.parent.truncate(depth);
                    } else if s.additional_properties.is_some() {
                        self.push_key(&k);
                        self.prune(v, s.additional_schema());
                        self.parent.truncate(depth);
                    } else {
                        if !is_meta_field(&k) || !self.parent.is_empty() {
                            self.record(&k);
                        }
                        map.remove(&k);
                    }
                }
            }
            Value::Array(items) => {
                let item_schema = s.and_then(|s| s.items.as_deref());
                for (i, v) in items.iter_mut().enumerate() {
                    self.push_index(i);
                    self.prune(v, item_schema);
                    self.parent.truncate(depth);
                }
            }
            _ => {}
        }
    }

    /// Under `x-kubernetes-preserve-unknown-fields`: keep unknown fields but
    /// still prune inside the specified ones.
    fn skip_prune(&mut self, x: &mut Value, s: &Structural) {
        let depth = self.parent.len();
        match x {
            Value::Object(map) => {
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    if s.x_embedded_resource && is_meta_field(&k) {
                        self.coerce_meta(&k, map);
                        continue;
                    }
                    let Some(v) = map.get_mut(&k) else { continue };
                    if let Some(prop) = s.property(&k) {
                        self.push_key(&k);
                        self.prune(v, Some(prop));
                        self.parent.truncate(depth);
                    } else if s.additional_properties.is_some() {
                        self.push_key(&k);
                        self.prune(v, s.additional_schema());
                        self.parent.truncate(depth);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = s.items.as_deref() {
                    for (i, v) in items.iter_mut().enumerate() {
                        self.push_index(i);
                        self.skip_prune(v, item_schema);
                        self.parent.truncate(depth);
                    }
                }
            }
            _ => {}
        }
    }

    /// ObjectMeta coercion of a resource's `metadata`: unknown fields are
    /// dropped (and reported), fields of the wrong type silently dropped.
    /// `apiVersion`/`kind` that are not strings are dropped too.
    fn coerce_meta(&mut self, k: &str, map: &mut Map<String, Value>) {
        let depth = self.parent.len();
        match k {
            "apiVersion" | "kind" => {
                if map.get(k).is_some_and(|v| !v.is_string()) {
                    map.remove(k);
                }
            }
            _ => {
                let Some(Value::Object(meta)) = map.get_mut(k) else {
                    if map.get(k).is_some_and(|v| !v.is_null()) {
                        map.remove(k);
                    }
                    return;
                };
                self.push_key(k);
                let keys: Vec<String> = meta.keys().cloned().collect();
                for field in keys {
                    if !OBJECT_META_FIELDS.contains(&field.as_str()) {
                        self.record(&field);
                        meta.remove(&field);
                        continue;
                    }
                    if meta.get(&field).is_some_and(|v| !meta_type_ok(&field, v)) {
                        meta.remove(&field);
                        continue;
                    }
                    let entries = match field.as_str() {
                        "ownerReferences" => Some(&OWNER_REFERENCE_FIELDS[..]),
                        "managedFields" => Some(&MANAGED_FIELDS_ENTRY_FIELDS[..]),
                        _ => None,
                    };
                    if let (Some(allowed), Some(Value::Array(list))) =
                        (entries, meta.get_mut(&field))
                    {
                        self.push_key(&field);
                        let inner = self.parent.len();
                        for (i, entry) in list.iter_mut().enumerate() {
                            self.push_index(i);
                            if let Value::Object(entry) = entry {
                                let unknown: Vec<String> = entry
                                    .keys()
                                    .filter(|f| !allowed.contains(&f.as_str()))
                                    .cloned()
                                    .collect();
                                for f in unknown {
                                    self.record(&f);
                                    entry.remove(&f);
                                }
                            }
                            self.parent.truncate(inner);
                        }
                        self.parent.truncate(depth + 1);
                    }
                }
                self.parent.truncate(depth);
            }
        }
    }
}

fn is_meta_field(k: &str) -> bool {
    matches!(k, "apiVersion" | "kind" | "metadata")
}

/// Whether an ObjectMeta field holds a value of its Go type.
fn meta_type_ok(field: &str, v: &Value) -> bool {
    if v.is_null() {
        return true;
    }
    match field {
        "generation" | "deletionGracePeriodSeconds" => v.is_i64(),
        "labels" | "annotations" => v
            .as_object()
            .is_some_and(|m| m.values().all(Value::is_string)),
        "finalizers" => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        "ownerReferences" | "managedFields" => {
            v.as_array().is_some_and(|a| a.iter().all(Value::is_object))
        }
        _ => v.is_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Structural {
        Structural::new(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "replicas": {"type": "integer"},
                    "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                        "strict": {"type": "object", "properties": {"a": {"type": "string"}}}
                    }},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                        "spec": {"type": "object", "properties": {"image": {"type": "string"}}}
                    }}
                }},
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
            }
        }))
        .unwrap()
    }

    #[test]
    fn pruning_table() {
        let cases = [
            // root: type and object meta kept, unknown top-level field dropped
            (
                json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "a", "labels": {"x": "y"}}, "extra": 1}),
                json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "a", "labels": {"x": "y"}}}),
                vec!["extra"],
            ),
            // nested and in list items
            (
                json!({"spec": {"replicas": 1, "foo": true, "ports": [{"port": 1, "name": "x"}, {"port": 2}]}}),
                json!({"spec": {"replicas": 1, "ports": [{"port": 1}, {"port": 2}]}}),
                vec!["spec.foo", "spec.ports[0].name"],
            ),
            // additionalProperties keeps every key
            (
                json!({"spec": {"labels": {"a": "1", "b": "2"}}}),
                json!({"spec": {"labels": {"a": "1", "b": "2"}}}),
                vec![],
            ),
            // preserve-unknown-fields keeps unknowns but prunes inside known fields
            (
                json!({"spec": {"config": {"anything": {"deep": 1}, "strict": {"a": "x", "b": "y"}}}}),
                json!({"spec": {"config": {"anything": {"deep": 1}, "strict": {"a": "x"}}}}),
                vec!["spec.config.strict.b"],
            ),
            // embedded resource: type meta kept, metadata cut to ObjectMeta
            (
                json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1},
                    "spec": {"image": "nginx", "command": ["x"]}, "other": 1}}}),
                json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"image": "nginx"}}}}),
                vec![
                    "spec.template.metadata.bogus",
                    "spec.template.other",
                    "spec.template.spec.command",
                ],
            ),
            // root metadata unknown fields
            (
                json!({"metadata": {"name": "a", "foo": "bar", "ownerReferences": [{"name": "o", "x": 1}]}}),
                json!({"metadata": {"name": "a", "ownerReferences": [{"name": "o"}]}}),
                vec!["metadata.foo", "metadata.ownerReferences[0].x"],
            ),
        ];
        let s = schema();
        for (input, want, dropped) in cases {
            let mut obj = input.clone();
            assert_eq!(prune(&mut obj, &s, true), dropped, "from {input}");
            assert_eq!(obj, want, "from {input}");
        }
    }

    #[test]
    fn not_root_drops_type_meta() {
        let s =
            Structural::new(&json!({"type": "object", "properties": {"a": {"type": "string"}}}))
                .unwrap();
        let mut obj = json!({"a": "x", "kind": "K", "b": 1});
        assert_eq!(prune(&mut obj, &s, false), vec!["b"]);
        assert_eq!(obj, json!({"a": "x"}));
    }
}
