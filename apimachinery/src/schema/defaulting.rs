//! Structural defaulting (kube's `structuraldefaulting.Default`) followed by
//! the removal of nulls that are neither nullable nor defaultable
//! (`PruneNonNullableNullsWithoutDefaults`), as the CR decoder runs them.

use serde_json::Value;

use super::structural::Structural;

/// Applies the schema's defaults to `obj`, then drops null values of fields
/// that are not nullable and have no default.
///
/// A `default` applies when its field is absent, or null while the field is
/// not nullable; defaults nest (a defaulted object gets its own fields'
/// defaults), and apply inside list items and map values.
pub fn apply_defaults(obj: &mut Value, schema: &Structural) {
    default(obj, Some(schema));
    prune_non_nullable_nulls(obj, Some(schema));
}

fn is_non_nullable_null(x: &Value, s: Option<&Structural>) -> bool {
    x.is_null() && s.is_some_and(|s| !s.nullable)
}

/// kube's `Default`: fill absent (or non-nullable null) properties, then
/// recurse into every field, item and map value.
fn default(x: &mut Value, s: Option<&Structural>) {
    let Some(s) = s else { return };
    match x {
        Value::Object(map) => {
            if let Some(props) = &s.properties {
                for (k, prop) in props {
                    let Some(d) = &prop.default else { continue };
                    let replace = match map.get(k) {
                        None => true,
                        Some(v) => v.is_null() && !prop.nullable,
                    };
                    if replace {
                        map.insert(k.clone(), d.clone());
                    }
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.property(k) {
                    default(v, Some(prop));
                } else if s.additional_properties.is_some() {
                    let extra = s.additional_schema();
                    if is_non_nullable_null(v, extra) {
                        // kube swaps in the default but recurses into the old
                        // (null) value, so the swapped-in default is not
                        // defaulted further.
                        if let Some(d) = extra.and_then(|e| e.default.clone()) {
                            *v = d;
                        }
                        continue;
                    }
                    default(v, extra);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.items.as_deref();
            for v in items.iter_mut() {
                if is_non_nullable_null(v, item_schema) {
                    if let Some(d) = item_schema.and_then(|i| i.default.clone()) {
                        *v = d;
                    }
                    continue;
                }
                default(v, item_schema);
            }
        }
        _ => {}
    }
}

/// kube's `PruneNonNullableNullsWithoutDefaults`.
fn prune_non_nullable_nulls(x: &mut Value, s: Option<&Structural>) {
    match x {
        Value::Object(map) => {
            let doomed: Vec<String> = map
                .iter()
                .filter(|(k, v)| {
                    let schema = s.and_then(|s| s.field_schema(k));
                    v.is_null() && schema.is_some_and(|f| !f.nullable && f.default.is_none())
                })
                .map(|(k, _)| k.clone())
                .collect();
            for k in doomed {
                map.remove(&k);
            }
            for (k, v) in map.iter_mut() {
                prune_non_nullable_nulls(v, s.and_then(|s| s.field_schema(k)));
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for v in items {
                prune_non_nullable_nulls(v, item_schema);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Structural {
        Structural::new(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "default": {}, "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "auto", "nullable": true},
                "strategy": {"type": "object", "default": {"type": "Rolling"}, "properties": {
                    "type": {"type": "string"},
                    "maxSurge": {"type": "integer", "default": 25}
                }},
                "ports": {"type": "array", "items": {"type": "object", "default": {"port": 80}, "properties": {
                    "port": {"type": "integer"},
                    "protocol": {"type": "string", "default": "TCP"}
                }}},
                "limits": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                    "max": {"type": "integer", "default": 10}
                }}},
                "note": {"type": "string"}
            }}}
        }))
        .unwrap()
    }

    #[test]
    fn defaults_table() {
        let cases = [
            (
                json!({}),
                json!({"spec": {"replicas": 1, "mode": "auto", "strategy": {"type": "Rolling", "maxSurge": 25}}}),
            ),
            (
                json!({"spec": {"replicas": 3, "strategy": {"type": "Recreate"}}}),
                json!({"spec": {"replicas": 3, "strategy": {"type": "Recreate", "maxSurge": 25}, "mode": "auto"}}),
            ),
            (
                json!({"spec": {"replicas": null, "mode": null}}),
                json!({"spec": {"replicas": 1, "mode": null, "strategy": {"type": "Rolling", "maxSurge": 25}}}),
            ),
            (
                json!({"spec": {"ports": [{"port": 8080}, {}, null]}}),
                json!({"spec": {"ports": [{"port": 8080, "protocol": "TCP"}, {"protocol": "TCP"}, {"port": 80}],
                    "replicas": 1, "mode": "auto", "strategy": {"type": "Rolling", "maxSurge": 25}}}),
            ),
            (
                json!({"spec": {"limits": {"cpu": {}, "mem": {"max": 2}}, "note": null}}),
                json!({"spec": {"limits": {"cpu": {"max": 10}, "mem": {"max": 2}},
                    "replicas": 1, "mode": "auto", "strategy": {"type": "Rolling", "maxSurge": 25}}}),
            ),
        ];
        let s = schema();
        for (input, want) in cases {
            let mut obj = input.clone();
            apply_defaults(&mut obj, &s);
            assert_eq!(obj, want, "from {input}");
        }
    }

    #[test]
    fn unknown_fields_are_left_alone() {
        let mut obj = json!({"spec": {"replicas": 2, "mode": "x", "strategy": {"type": "R", "maxSurge": 1}, "extra": null}});
        apply_defaults(&mut obj, &schema());
        assert_eq!(obj["spec"]["extra"], Value::Null);
    }
}
