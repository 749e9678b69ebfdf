//! RFC 7386 JSON merge patch, as kube-apiserver's patch library applies it.
//!
//! `null` deletes a member, objects merge recursively and everything else
//! replaces. kube-apiserver uses `gopkg.in/evanphx/json-patch.v4`, whose
//! result differs from the RFC's (and from `json_patch::merge`) in one way a
//! client can see: a value that does not merge into an existing object is
//! copied with its `null`s pruned, including `null` list elements and `null`
//! members of objects inside lists, except when it replaces an object, where
//! it is copied as is. A patch that is `null` or a scalar is rejected (400); a
//! patch that is a list replaces the whole document.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::PatchError;

/// Applies a decoded merge patch to `original`.
pub fn apply(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    match (original, patch) {
        (Value::Object(original), Value::Object(patch)) => {
            let mut merged = original.clone();
            merge_objects(&mut merged, patch);
            Ok(Value::Object(merged))
        }
        (_, Value::Object(_) | Value::Array(_)) => Ok(pruned(patch.clone())),
        _ => Err(PatchError::InvalidMergePatch),
    }
}

/// Merges `patch` into `doc` member by member; the members it deletes go
/// in one pass at the end (each removal on its own would shift the rest).
fn merge_objects(doc: &mut Map<String, Value>, patch: &Map<String, Value>) {
    let mut deleted = HashSet::new();
    for (key, value) in patch {
        if value.is_null() {
            if doc.contains_key(key) {
                deleted.insert(key.as_str());
            }
            continue;
        }
        match doc.get_mut(key) {
            Some(current) if !current.is_null() => {
                let merged = merge_value(std::mem::take(current), value);
                *current = merged;
            }
            _ => {
                doc.insert(key.clone(), pruned(value.clone()));
            }
        }
    }
    if !deleted.is_empty() {
        doc.retain(|name, _| !deleted.contains(name.as_str()));
    }
}

/// Merges one patch value into the current (non-null) value of a member.
fn merge_value(current: Value, patch: &Value) -> Value {
    match (current, patch) {
        (Value::Object(mut current), Value::Object(patch)) => {
            merge_objects(&mut current, patch);
            Value::Object(current)
        }
        (Value::Object(_), patch) => patch.clone(),
        (_, patch) => pruned(patch.clone()),
    }
}

/// Drops `null` members and `null` list elements, recursively.
fn pruned(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, pruned(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .filter(|v| !v.is_null())
                .map(pruned)
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc7386_examples() {
        // The test cases of RFC 7386, appendix A (documents that are objects).
        let cases: Vec<(Value, Value, Value)> = vec![
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (doc, patch, expected) in cases {
            assert_eq!(apply(&doc, &patch).unwrap(), expected, "{patch} on {doc}");
        }
    }

    #[test]
    fn kubernetes_configmap_patch() {
        let original = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "labels": {"a": "1", "b": "2"}},
            "data": {"x": "1", "y": "2"}
        });
        let patch =
            json!({"metadata": {"labels": {"b": null, "c": "3"}}, "data": {"y": null, "z": "3"}});
        let expected = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "labels": {"a": "1", "c": "3"}},
            "data": {"x": "1", "z": "3"}
        });
        assert_eq!(apply(&original, &patch).unwrap(), expected);
    }

    #[test]
    fn nulls_are_pruned_like_the_go_library() {
        let cases: Vec<(Value, Value, Value)> = vec![
            // New values lose their nulls, also inside lists.
            (
                json!({}),
                json!({"a": [1, null, {"x": null, "y": 1}]}),
                json!({"a": [1, {"y": 1}]}),
            ),
            // Replacing a scalar prunes.
            (json!({"a": 1}), json!({"a": [null, 2]}), json!({"a": [2]})),
            // Replacing an object copies the value as is.
            (
                json!({"a": {"k": 1}}),
                json!({"a": [null, 2]}),
                json!({"a": [null, 2]}),
            ),
            // A null member in the document is replaced as if missing.
            (
                json!({"a": null}),
                json!({"a": {"b": null, "c": 1}}),
                json!({"a": {"c": 1}}),
            ),
        ];
        for (doc, patch, expected) in cases {
            assert_eq!(apply(&doc, &patch).unwrap(), expected, "{patch} on {doc}");
        }
    }

    #[test]
    fn invalid_patches() {
        for patch in [json!(null), json!("x"), json!(1), json!(true)] {
            assert_eq!(
                apply(&json!({"a": 1}), &patch),
                Err(PatchError::InvalidMergePatch),
                "{patch}"
            );
        }
        assert_eq!(
            apply(&json!({"a": 1}), &json!([1, null])).unwrap(),
            json!([1])
        );
    }

    #[test]
    fn member_order_is_kept() {
        let patched = apply(
            &json!({"a": 1, "b": 2, "c": 3}),
            &json!({"a": null, "d": 4}),
        )
        .unwrap();
        let keys: Vec<&String> = patched.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["b", "c", "d"]);
    }
}
