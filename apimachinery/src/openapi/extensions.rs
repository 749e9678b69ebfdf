//! The `x-kubernetes-*` list, map and patch extensions, applied from the generated table.
//!
//! kube derives the strategic-merge-patch tags from its Go struct tags; most of
//! them follow from the list type, which is what this module does:
//!
//! | list type | `x-kubernetes-patch-strategy` | `x-kubernetes-patch-merge-key` |
//! |---|---|---|
//! | `map` (keys k1, k2…) | `merge` | k1 |
//! | `set` of scalars | `merge` | — |
//! | `set` of objects, `atomic` | — | — |
//!
//! The exceptions (retainKeys, atomic lists that still merge, newer APIs
//! without patch tags) come from `list_meta::PATCH_OVERRIDES`.

use serde_json::{Map, Value};

use super::list_meta::{ATOMIC_STRUCTS, FIELD_META, FieldMeta, PATCH_OVERRIDES, PatchOverride};

const LIST_TYPE: &str = "x-kubernetes-list-type";
const LIST_MAP_KEYS: &str = "x-kubernetes-list-map-keys";
const MAP_TYPE: &str = "x-kubernetes-map-type";
const PATCH_STRATEGY: &str = "x-kubernetes-patch-strategy";
const PATCH_MERGE_KEY: &str = "x-kubernetes-patch-merge-key";
const UNIONS: &str = "x-kubernetes-unions";

/// One of kube's discriminated unions (`+union` in its Go types, which
/// k8s-openapi does not carry).
struct Union {
    /// The schema holding it.
    schema: &'static str,
    /// The field naming which member is set.
    discriminator: &'static str,
    /// Each member field and the discriminator value naming it.
    members: &'static [(&'static str, &'static str)],
}

/// kube's discriminated unions, checked against kube 1.33's published
/// OpenAPI (`tests/data/kube-1.33-openapi.json`).
const DISCRIMINATED_UNIONS: &[Union] = &[
    Union {
        schema: "io.k8s.api.core.v1.AppArmorProfile",
        discriminator: "type",
        members: &[("localhostProfile", "LocalhostProfile")],
    },
    Union {
        schema: "io.k8s.api.core.v1.SeccompProfile",
        discriminator: "type",
        members: &[("localhostProfile", "LocalhostProfile")],
    },
    Union {
        schema: "io.k8s.api.flowcontrol.v1.LimitResponse",
        discriminator: "type",
        members: &[("queuing", "Queuing")],
    },
    Union {
        schema: "io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationSpec",
        discriminator: "type",
        members: &[("exempt", "Exempt"), ("limited", "Limited")],
    },
    Union {
        schema: "io.k8s.api.flowcontrol.v1.Subject",
        discriminator: "kind",
        members: &[
            ("group", "Group"),
            ("serviceAccount", "ServiceAccount"),
            ("user", "User"),
        ],
    },
];

/// Adds the list, map and patch extensions the table holds for schema `name`.
pub(crate) fn annotate(name: &str, schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if ATOMIC_STRUCTS.binary_search(&name).is_ok() {
        object.insert(MAP_TYPE.into(), "atomic".into());
    }
    if let Some(union) = DISCRIMINATED_UNIONS.iter().find(|u| u.schema == name) {
        let members: Map<String, Value> = union
            .members
            .iter()
            .map(|(field, value)| (field.to_string(), Value::from(*value)))
            .collect();
        let union = serde_json::json!([{
            "discriminator": union.discriminator,
            "fields-to-discriminateBy": members,
        }]);
        object.insert(UNIONS.into(), union);
    }
    let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for meta in rows_for(name) {
        if let Some(property) = properties
            .get_mut(meta.property)
            .and_then(Value::as_object_mut)
        {
            apply_field_meta(meta, property);
        }
    }
    for patch in overrides_for(name) {
        if let Some(property) = properties
            .get_mut(patch.property)
            .and_then(Value::as_object_mut)
        {
            apply_patch_override(patch, property);
        }
    }
}

/// The table rows of schema `name` (the table is sorted by schema).
fn rows_for(name: &str) -> &'static [FieldMeta] {
    let start = FIELD_META.partition_point(|meta| meta.schema < name);
    let end = FIELD_META.partition_point(|meta| meta.schema <= name);
    &FIELD_META[start..end]
}

/// The patch overrides of schema `name` (the table is sorted by schema).
fn overrides_for(name: &str) -> &'static [PatchOverride] {
    let start = PATCH_OVERRIDES.partition_point(|patch| patch.schema < name);
    let end = PATCH_OVERRIDES.partition_point(|patch| patch.schema <= name);
    &PATCH_OVERRIDES[start..end]
}

/// Writes the list/map extensions of one property and the patch tags its list type implies.
fn apply_field_meta(meta: &FieldMeta, property: &mut Map<String, Value>) {
    if let Some(list_type) = meta.list_type {
        property.insert(LIST_TYPE.into(), list_type.into());
    }
    if !meta.map_keys.is_empty() {
        property.insert(
            LIST_MAP_KEYS.into(),
            meta.map_keys.iter().copied().collect(),
        );
    }
    if let Some(map_type) = meta.map_type {
        property.insert(MAP_TYPE.into(), map_type.into());
    }
    let (strategy, merge_key) = derived_patch_tags(meta, property);
    set_patch_tags(property, strategy, merge_key);
}

/// The patch tags kube's conventions give a list of this type.
fn derived_patch_tags(
    meta: &FieldMeta,
    property: &Map<String, Value>,
) -> (Option<&'static str>, Option<&'static str>) {
    match meta.list_type {
        Some("map") => (Some("merge"), meta.map_keys.first().copied()),
        Some("set") if holds_scalars(property) => (Some("merge"), None),
        _ => (None, None),
    }
}

/// Whether an array schema's items are scalars (no ref, not an object or array).
fn holds_scalars(property: &Map<String, Value>) -> bool {
    let Some(items) = property.get("items") else {
        return false;
    };
    let compound = items.get("$ref").is_some()
        || items.get("allOf").is_some()
        || matches!(
            items.get("type").and_then(Value::as_str),
            Some("object" | "array")
        );
    !compound
}

/// Replaces the derived patch tags with the upstream ones.
fn apply_patch_override(patch: &PatchOverride, property: &mut Map<String, Value>) {
    set_patch_tags(property, patch.strategy, patch.merge_key);
}

/// Sets (or removes, for `None`) both patch extensions.
fn set_patch_tags(
    property: &mut Map<String, Value>,
    strategy: Option<&str>,
    merge_key: Option<&str>,
) {
    for (key, value) in [(PATCH_STRATEGY, strategy), (PATCH_MERGE_KEY, merge_key)] {
        match value {
            Some(value) => {
                property.insert(key.into(), value.into());
            }
            None => {
                property.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_are_sorted_for_binary_search() {
        assert!(
            FIELD_META
                .windows(2)
                .all(|p| (p[0].schema, p[0].property) < (p[1].schema, p[1].property))
        );
        assert!(
            PATCH_OVERRIDES
                .windows(2)
                .all(|p| (p[0].schema, p[0].property) < (p[1].schema, p[1].property))
        );
        assert!(ATOMIC_STRUCTS.windows(2).all(|p| p[0] < p[1]));
    }

    #[test]
    fn discriminated_unions_name_their_members() {
        let mut schema = json!({"properties": {"type": {"type": "string"}}});
        annotate("io.k8s.api.flowcontrol.v1.Subject", &mut schema);
        assert_eq!(
            schema[UNIONS],
            json!([{"discriminator": "kind", "fields-to-discriminateBy": {
                "group": "Group", "serviceAccount": "ServiceAccount", "user": "User"}}])
        );
    }

    #[test]
    fn map_list_derives_merge_on_first_key() {
        let mut schema =
            json!({"properties": {"ports": {"type": "array", "items": {"$ref": "x"}}}});
        annotate("io.k8s.api.core.v1.ServiceSpec", &mut schema);
        let ports = &schema["properties"]["ports"];
        assert_eq!(
            ports["x-kubernetes-list-map-keys"],
            json!(["port", "protocol"])
        );
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "port");
        assert_eq!(ports["x-kubernetes-patch-strategy"], "merge");
    }

    #[test]
    fn set_of_scalars_merges_and_overrides_win() {
        let mut schema = json!({"properties": {
            "finalizers": {"type": "array", "items": {"type": "string"}},
        }});
        annotate(
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            &mut schema,
        );
        assert_eq!(
            schema["properties"]["finalizers"]["x-kubernetes-patch-strategy"],
            "merge"
        );

        let mut rule =
            json!({"properties": {"verbs": {"type": "array", "items": {"type": "string"}}}});
        annotate("io.k8s.api.flowcontrol.v1.ResourcePolicyRule", &mut rule);
        assert_eq!(rule["properties"]["verbs"]["x-kubernetes-list-type"], "set");
        assert!(
            rule["properties"]["verbs"]
                .get("x-kubernetes-patch-strategy")
                .is_none()
        );
    }

    #[test]
    fn env_and_conditions_follow_upstream() {
        let mut container =
            json!({"properties": {"env": {"type": "array", "items": {"$ref": "x"}}}});
        annotate("io.k8s.api.core.v1.Container", &mut container);
        assert_eq!(
            container["properties"]["env"]["x-kubernetes-patch-merge-key"],
            "name"
        );
        let mut status =
            json!({"properties": {"conditions": {"type": "array", "items": {"$ref": "x"}}}});
        annotate("io.k8s.api.apps.v1.DeploymentStatus", &mut status);
        assert_eq!(
            status["properties"]["conditions"]["x-kubernetes-patch-merge-key"],
            "type"
        );
        assert_eq!(
            status["properties"]["conditions"]["x-kubernetes-patch-strategy"],
            "merge"
        );
    }
}
