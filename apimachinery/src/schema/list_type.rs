//! Uniqueness of `x-kubernetes-list-type: set` items and of the keys of
//! `x-kubernetes-list-type: map` items (kube's `listtype.ValidateListSetsAndMaps`).

use crate::error::FieldError;
use serde_json::{Map, Value};

use super::path::{child, index, key};
use super::structural::Structural;
use super::validation::json_equal;

/// Validates the set and map lists under `obj`; errors are `Duplicate value`
/// at the index of the first repeated occurrence.
pub(crate) fn validate_list_sets_and_maps(
    path: &str,
    s: &Structural,
    obj: &Value,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Value::Object(map) = obj {
        walk_object(path, s, map, &mut errs);
    }
    errs
}

fn walk_object(path: &str, s: &Structural, map: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    if let Some(extra) = s.additional_schema() {
        for (k, v) in map {
            walk(&key(path, k), extra, v, errs);
        }
    }
    if s.properties.is_some() {
        for (k, v) in map {
            if let Some(prop) = s.property(k) {
                walk(&child(path, k), prop, v, errs);
            }
        }
    }
}

fn walk(path: &str, s: &Structural, x: &Value, errs: &mut Vec<FieldError>) {
    match x {
        Value::Array(items) => walk_array(path, s, items, errs),
        Value::Object(map) => walk_object(path, s, map, errs),
        _ => {}
    }
}

fn walk_array(path: &str, s: &Structural, items: &[Value], errs: &mut Vec<FieldError>) {
    match s.x_list_type.as_deref() {
        Some("set") => {
            for i in first_repeats(items) {
                errs.push(FieldError::duplicate(index(path, i), items[i].clone()));
            }
        }
        Some("map") => errs.extend(validate_list_map(path, s, items)),
        _ => {}
    }
    if let Some(item_schema) = &s.items {
        for (i, item) in items.iter().enumerate() {
            walk(&index(path, i), item_schema, item, errs);
        }
    }
}

/// The indices where a value appears for the second time.
fn first_repeats(values: &[Value]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let earlier = values[..i].iter().filter(|w| json_equal(v, w)).count();
        if earlier == 1 {
            out.push(i);
        }
    }
    out
}

fn validate_list_map(path: &str, s: &Structural, items: &[Value]) -> Vec<FieldError> {
    for (i, item) in items.iter().enumerate() {
        if !item.is_null() && !item.is_object() {
            return vec![FieldError::invalid(
                index(path, i),
                item.clone(),
                "must be an object for an array of list-type map",
            )];
        }
    }
    if items.len() <= 1 {
        return Vec::new();
    }
    // An absent key (or a null item) counts as its own value, distinct from
    // every real key value including null.
    let keys: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut key = Map::new();
            if let Some(obj) = item.as_object() {
                for field in &s.x_list_map_keys {
                    if let Some(v) = obj.get(field) {
                        key.insert(field.clone(), v.clone());
                    }
                }
            }
            Value::Object(key)
        })
        .collect();
    first_repeats(&keys)
        .into_iter()
        .map(|i| FieldError::duplicate(index(path, i), keys[i].clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Structural {
        Structural::new(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "protocol"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "protocol": {"type": "string"}}}},
                "byName": {"type": "object", "additionalProperties": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}}}
            }}}
        }))
        .unwrap()
    }

    fn messages(obj: Value) -> Vec<String> {
        validate_list_sets_and_maps("", &schema(), &obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn set_duplicates() {
        assert_eq!(
            messages(json!({"spec": {"tags": ["a", "b", "a", "a"]}})),
            vec![r#"spec.tags[2]: Duplicate value: "a""#]
        );
        assert!(messages(json!({"spec": {"tags": ["a", "b"]}})).is_empty());
        assert_eq!(
            messages(json!({"spec": {"byName": {"x": [1, 1]}}})),
            vec!["spec.byName[x][1]: Duplicate value: 1"]
        );
    }

    #[test]
    fn map_duplicate_keys() {
        assert_eq!(
            messages(json!({"spec": {"ports": [
                {"name": "http", "protocol": "TCP"},
                {"name": "http", "protocol": "UDP"},
                {"name": "http", "protocol": "TCP", "port": 2}
            ]}})),
            vec![r#"spec.ports[2]: Duplicate value: {"name":"http","protocol":"TCP"}"#]
        );
        assert_eq!(
            messages(json!({"spec": {"ports": [{"name": "a"}, "x"]}})),
            vec![
                r#"spec.ports[1]: Invalid value: "x": must be an object for an array of list-type map"#
            ]
        );
    }
}
