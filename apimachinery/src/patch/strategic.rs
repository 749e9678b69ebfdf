//! Strategic merge patch, as kube-apiserver applies it to built-in types.
//!
//! A strategic merge patch is a JSON merge patch whose lists can merge instead
//! of being replaced. How a field merges comes from the type's OpenAPI v3
//! schema (`k8s.io/apimachinery/pkg/util/strategicpatch`):
//!
//! - `x-kubernetes-patch-strategy` is `merge`, `retainKeys`, `merge,retainKeys`
//!   or `replace`. Lists whose strategy includes `merge` merge: lists of
//!   objects by `x-kubernetes-patch-merge-key` (or, when that is absent, the
//!   first of `x-kubernetes-list-map-keys`), lists of scalars as a set. Other
//!   lists are replaced. Objects merge member by member unless their strategy
//!   is `replace`.
//! - A field the schema does not describe merges as in a JSON merge patch:
//!   objects merge, lists are replaced.
//!
//! The patch may carry directives:
//!
//! - `null` deletes a member;
//! - `{"$patch": "replace"}` in an object replaces it by the rest of the patch
//!   object, `{"$patch": "delete"}` empties it; in a merging list, an element
//!   `{"$patch": "replace"}` replaces the list by the other patch elements and
//!   `{"name": "x", "$patch": "delete"}` deletes the element with that key;
//! - `"$deleteFromPrimitiveList/<field>": [values]` removes values from a
//!   merging list of scalars;
//! - `"$setElementOrder/<field>": [...]` gives the order of a merging list:
//!   listed items come in that order, items only on the server keep their
//!   place relative to them;
//! - `"$retainKeys": [fields]` clears every member of the object not listed.
//!
//! Values copied from the patch are cleaned the way kube's decoding into a typed
//! object would clean them: `null` members and directive keys are dropped (a
//! new member that is itself a `$patch` directive is dropped whole, as kube
//! does).
//!
//! ```
//! # use apimachinery::patch::strategic::{apply, Schema};
//! # use serde_json::{json, Map, Value};
//! let components: Map<String, Value> = serde_json::from_value(json!({
//!     "PodSpec": {"properties": {"containers": {
//!         "type": "array", "items": {"type": "object"},
//!         "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"
//!     }}}
//! })).unwrap();
//! let root = json!({"$ref": "#/components/schemas/PodSpec"});
//! let original = json!({"containers": [{"name": "a", "image": "a:1"}]});
//! let patch = json!({"containers": [{"name": "b", "image": "b:1"}]});
//! let patched = apply(&original, &patch, Some(Schema::new(&root, &components))).unwrap();
//! assert_eq!(patched["containers"].as_array().unwrap().len(), 2);
//! ```

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value};

use super::{PatchError, go_format, go_string, go_type, json_kind};

/// The key of the `$patch` directive.
const DIRECTIVE: &str = "$patch";
/// The key of the `$retainKeys` directive.
const RETAIN_KEYS: &str = "$retainKeys";
/// The key prefix of the `$deleteFromPrimitiveList/<field>` directive.
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
/// The key prefix of the `$setElementOrder/<field>` directive.
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
/// How many `$ref`/`allOf` hops [`SchemaLookup::resolve`] follows.
const MAX_REFERENCE_DEPTH: usize = 32;
/// Go's name for the type of a JSON list.
const GO_LIST: &str = "[]interface {}";
/// Go's name for the type of a JSON object.
const GO_MAP: &str = "map[string]interface {}";

/// Resolves the references of an OpenAPI v3 document for the patcher.
///
/// Implemented for a `components.schemas` map (schema name to schema), so the
/// caller can pass `openapi["components"]["schemas"].as_object()`.
pub trait SchemaLookup {
    /// The schema a `$ref` such as `#/components/schemas/io.k8s.api.core.v1.PodSpec` names.
    fn lookup(&self, reference: &str) -> Option<&Value>;

    /// Follows `$ref` and single-`allOf` wrappers to the schema they stand for.
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        let mut current = schema;
        for _ in 0..MAX_REFERENCE_DEPTH {
            let next = match current.get("$ref").and_then(Value::as_str) {
                Some(reference) => self.lookup(reference),
                None => current
                    .get("allOf")
                    .and_then(Value::as_array)
                    .and_then(|all| all.first()),
            };
            match next {
                Some(next) => current = next,
                None => return current,
            }
        }
        current
    }
}

impl SchemaLookup for Map<String, Value> {
    /// Looks the last segment of the reference up in the map.
    fn lookup(&self, reference: &str) -> Option<&Value> {
        let name = reference.rsplit('/').next().unwrap_or(reference);
        self.get(name)
    }
}

/// A lookup with no schemas, for patches without type information.
struct NoSchemas;

impl SchemaLookup for NoSchemas {
    /// Finds nothing.
    fn lookup(&self, _reference: &str) -> Option<&Value> {
        None
    }
}

/// Where the patcher stands in a type's schema: a schema node (if known) and the lookup.
#[derive(Clone, Copy)]
pub struct Schema<'a> {
    node: Option<&'a Value>,
    lookup: &'a dyn SchemaLookup,
}

impl<'a> Schema<'a> {
    /// The schema of an object's type, e.g. `{"$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment"}`.
    pub fn new(root: &'a Value, lookup: &'a dyn SchemaLookup) -> Self {
        Schema {
            node: Some(lookup.resolve(root)),
            lookup,
        }
    }

    /// No type information: every field merges as in a JSON merge patch.
    pub fn unknown() -> Self {
        Schema {
            node: None,
            lookup: &NoSchemas,
        }
    }

    /// The schema of a member and its patch metadata.
    fn field(self, key: &str) -> (Schema<'a>, PatchMeta) {
        let Some(node) = self.node else {
            return (self, PatchMeta::default());
        };
        if let Some(property) = node
            .get("properties")
            .and_then(|properties| properties.get(key))
        {
            let resolved = self.lookup.resolve(property);
            let meta = PatchMeta::from_schema(property, resolved);
            return (
                Schema {
                    node: Some(resolved),
                    lookup: self.lookup,
                },
                meta,
            );
        }
        let values = node
            .get("additionalProperties")
            .filter(|values| values.is_object());
        let node = values.map(|values| self.lookup.resolve(values));
        (
            Schema {
                node,
                lookup: self.lookup,
            },
            PatchMeta::default(),
        )
    }

    /// The schema of a list's elements.
    fn items(self) -> Schema<'a> {
        let node = self
            .node
            .and_then(|node| node.get("items"))
            .map(|items| self.lookup.resolve(items));
        Schema {
            node,
            lookup: self.lookup,
        }
    }
}

/// The patch strategy and merge key of one field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct PatchMeta {
    strategies: Vec<String>,
    merge_key: String,
}

impl PatchMeta {
    /// Reads the extensions of a property (its own, else those of the schema it refers to).
    fn from_schema(property: &Value, resolved: &Value) -> Self {
        let extension = |name: &str| property.get(name).or_else(|| resolved.get(name));
        let strategies: Vec<String> = extension("x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .map(|text| text.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        let mut merge_key = extension("x-kubernetes-patch-merge-key")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let is_map_list =
            extension("x-kubernetes-list-type").and_then(Value::as_str) == Some("map");
        if merge_key.is_empty() && is_map_list && strategies.iter().any(|s| s == "merge") {
            let keys = extension("x-kubernetes-list-map-keys").and_then(Value::as_array);
            let first = keys.and_then(|keys| keys.first()).and_then(Value::as_str);
            merge_key = first.unwrap_or_default().to_owned();
        }
        PatchMeta {
            strategies,
            merge_key,
        }
    }

    /// The strategy other than `retainKeys` (kube's `extractRetainKeysPatchStrategy`).
    fn strategy(&self) -> Result<&str, PatchError> {
        let retain = "retainKeys";
        match self.strategies.as_slice() {
            [] => Ok(""),
            [single] if single == retain => Ok(""),
            [single] => Ok(single),
            [first, second] if first == retain => Ok(second),
            [first, second] if second == retain => Ok(first),
            strategies => {
                let strategies: Vec<Value> =
                    strategies.iter().cloned().map(Value::String).collect();
                Err(PatchError::UnexpectedPatchStrategy(go_format(
                    &Value::Array(strategies),
                )))
            }
        }
    }
}

/// Applies a decoded strategic merge patch to `original`.
///
/// `schema` is the schema of `original`'s type; `None` merges every field as
/// in a JSON merge patch (directives still apply). A `null` patch changes nothing.
pub fn apply(
    original: &Value,
    patch: &Value,
    schema: Option<Schema<'_>>,
) -> Result<Value, PatchError> {
    let patch = match patch {
        Value::Object(patch) => patch.clone(),
        Value::Null => return Ok(original.clone()),
        other => {
            return Err(PatchError::UnexpectedJsonType {
                found: json_kind(other),
                expected: GO_MAP,
            });
        }
    };
    let original = original.as_object().cloned().unwrap_or_default();
    let schema = schema.unwrap_or_else(Schema::unknown);
    merge_map(original, patch, schema).map(Value::Object)
}

/// Merges a patch object into an original object (kube's `mergeMap`).
fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: Schema<'_>,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.get(DIRECTIVE).cloned() {
        return map_directive(&directive, patch);
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_ordered_lists(&mut original, &mut patch, schema)?;
    // Removed members go in one pass at the end (each removal on its own
    // would shift the rest).
    let mut removed = HashSet::new();
    for (key, patch_value) in patch {
        let (key, is_delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
            (field_of(&key, DELETE_FROM_PRIMITIVE_LIST)?, true)
        } else {
            (key, false)
        };
        if patch_value.is_null() {
            removed.insert(key);
            continue;
        }
        let current = match removed.contains(&key) {
            true => None,
            false => original.get_mut(&key).map(std::mem::take),
        };
        let merged = match current {
            None if is_delete_list => None,
            None => take_patch_value(patch_value),
            Some(current) => merge_member(current, patch_value, &key, is_delete_list, schema)?,
        };
        match merged {
            Some(value) => {
                removed.remove(&key);
                original.insert(key, value);
            }
            None => {
                removed.insert(key);
            }
        }
    }
    if !removed.is_empty() {
        original.retain(|key, _| !removed.contains(key));
    }
    Ok(original)
}

/// The new value of a member present in both the original and the patch (`None` removes it).
fn merge_member(
    current: Value,
    patch_value: Value,
    key: &str,
    is_delete_list: bool,
    schema: Schema<'_>,
) -> Result<Option<Value>, PatchError> {
    match (current, patch_value) {
        (Value::Object(current), Value::Object(patch)) => {
            let (field, meta) = schema.field(key);
            let merged = match meta.strategy()? {
                "replace" => clean_map(patch),
                _ => merge_map(current, patch, field)?,
            };
            Ok(Some(Value::Object(merged)))
        }
        (Value::Array(current), Value::Array(patch)) => {
            let (field, meta) = schema.field(key);
            let strategy = meta.strategy()?;
            let merged = merge_list_field(
                current,
                patch,
                field.items(),
                strategy,
                &meta.merge_key,
                is_delete_list,
            )?;
            Ok(Some(Value::Array(merged)))
        }
        (current, patch) if is_delete_list && go_type(&current) != go_type(&patch) => {
            Ok(Some(current))
        }
        (_, patch) => Ok(take_patch_value(patch)),
    }
}

/// Applies a `$patch` directive found in a patch object (kube's `handleDirectiveInMergeMap`).
fn map_directive(
    directive: &Value,
    mut patch: Map<String, Value>,
) -> Result<Map<String, Value>, PatchError> {
    match directive.as_str() {
        Some("replace") => {
            remove_member(&mut patch, DIRECTIVE);
            Ok(clean_map(patch))
        }
        Some("delete") => Ok(Map::new()),
        _ => Err(PatchError::UnknownDirective {
            directive: go_string(directive),
            map: go_format(&Value::Object(patch)),
        }),
    }
}

/// Applies `$retainKeys`: members not listed are cleared from the original.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), PatchError> {
    let Some(retain) = remove_member(patch, RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(PatchError::BadRetainKeysFormat);
    };
    let retain: HashSet<&str> = retain.iter().filter_map(Value::as_str).collect();
    let retained = |key: &str| retain.contains(key);
    let stray = patch.iter().any(|(key, value)| {
        !value.is_null()
            && !key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            && !key.starts_with(SET_ELEMENT_ORDER)
            && !retained(key)
    });
    if stray {
        return Err(PatchError::BadRetainKeysFormat);
    }
    original.retain(|key, _| retained(key));
    Ok(())
}

/// Processes every `$setElementOrder/<field>` with its list (kube's `mergePatchIntoOriginal`).
fn merge_ordered_lists(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: Schema<'_>,
) -> Result<(), PatchError> {
    if !patch.keys().any(|key| key.starts_with(SET_ELEMENT_ORDER)) {
        return Ok(());
    }
    // The directives and the fields they order leave the patch in one pass
    // each (removing members one by one would shift the rest every time).
    let (orders, rest): (Map<String, Value>, Map<String, Value>) = std::mem::take(patch)
        .into_iter()
        .partition(|(key, _)| key.starts_with(SET_ELEMENT_ORDER));
    *patch = rest;
    let mut ordered_fields = HashSet::new();
    for (key, order) in orders {
        let Value::Array(order) = order else {
            return Err(PatchError::BadArgType {
                expected: GO_LIST,
                actual: go_type(&order).to_owned(),
            });
        };
        let field = field_of(&key, SET_ELEMENT_ORDER)?;
        if let Some(ordered) = ordered_list(
            original.get(&field),
            patch.get(&field),
            &order,
            &field,
            schema,
        )? {
            original.insert(field.clone(), Value::Array(ordered));
            ordered_fields.insert(field);
        }
    }
    if !ordered_fields.is_empty() {
        patch.retain(|key, _| !ordered_fields.contains(key));
    }
    Ok(())
}

/// The merged list for one `$setElementOrder` directive, `None` when neither side has it.
fn ordered_list(
    original: Option<&Value>,
    patch: Option<&Value>,
    order: &[Value],
    field: &str,
    schema: Schema<'_>,
) -> Result<Option<Vec<Value>>, PatchError> {
    let original = original.map(as_list).transpose()?;
    let patch = patch.map(as_list).transpose()?;
    let (field_schema, meta) = schema.field(field);
    let strategy = meta.strategy()?;
    let merge_key = meta.merge_key.as_str();
    validate_order(patch.unwrap_or_default(), order, merge_key)?;
    let merged = match (original, patch) {
        (Some(original), None) => original.to_vec(),
        (None, Some(patch)) => clean_list(remove_directives_in_list(patch.to_vec())),
        (Some(original), Some(patch)) => merge_list_field(
            original.to_vec(),
            patch.to_vec(),
            field_schema.items(),
            strategy,
            merge_key,
            false,
        )?,
        (None, None) => return Ok(None),
    };
    let (in_order, server_only) = partition(merged, order, merge_key)?;
    let kind = element_kind(&[original.unwrap_or_default(), patch.unwrap_or_default()])?;
    let ordered = normalize_order(
        in_order,
        server_only,
        order,
        original.unwrap_or_default(),
        merge_key,
        kind,
    )?;
    Ok(Some(ordered))
}

/// A value that must be a list, as a slice.
fn as_list(value: &Value) -> Result<&[Value], PatchError> {
    value
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| PatchError::BadArgType {
            expected: GO_LIST,
            actual: go_type(value).to_owned(),
        })
}

/// Checks the patch list follows the `$setElementOrder` list (kube's `validatePatchWithSetOrderList`).
fn validate_order(patch: &[Value], order: &[Value], merge_key: &str) -> Result<(), PatchError> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let kept: Vec<&Value> = if merge_key.is_empty() {
        patch.iter().collect()
    } else {
        split_deletions(patch)?.0
    };
    let (mut in_patch, mut in_order) = (0, 0);
    while in_patch < kept.len() && in_order < order.len() {
        if has_directive(kept[in_patch]) {
            in_patch += 1;
            continue;
        }
        if merge_key_equal(kept[in_patch], &order[in_order], merge_key)? {
            in_patch += 1;
        }
        in_order += 1;
    }
    if in_patch < kept.len() && in_order >= order.len() {
        return Err(PatchError::SetElementOrderMismatch {
            patch: go_format(&Value::Array(patch.to_vec())),
            order: go_format(&Value::Array(order.to_vec())),
        });
    }
    Ok(())
}

/// Whether two list items have the same merge key value (or are equal, with no merge key).
fn merge_key_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool, PatchError> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    Ok(merge_key_value(left, merge_key)? == merge_key_value(right, merge_key)?)
}

/// The merge key value of a list item, which must be an object holding it.
fn merge_key_value<'a>(item: &'a Value, merge_key: &str) -> Result<&'a Value, PatchError> {
    let object = item.as_object().ok_or_else(|| bad_map(item))?;
    object
        .get(merge_key)
        .ok_or_else(|| PatchError::MissingMergeKey {
            map: go_format(item),
            key: merge_key.to_owned(),
        })
}

/// Merges a list field by its strategy (kube's `mergeSliceHandler`).
fn merge_list_field(
    original: Vec<Value>,
    patch: Vec<Value>,
    items: Schema<'_>,
    strategy: &str,
    merge_key: &str,
    is_delete_list: bool,
) -> Result<Vec<Value>, PatchError> {
    if strategy == "merge" || is_delete_list {
        merge_list(original, patch, items, merge_key, is_delete_list)
    } else {
        Ok(clean_list(patch))
    }
}

/// Merges two lists (kube's `mergeSlice`).
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    items: Schema<'_>,
    merge_key: &str,
    is_delete_list: bool,
) -> Result<Vec<Value>, PatchError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = element_kind(&[original.as_slice(), patch.as_slice()])?;
    let (original, patch, merged) = if kind != GO_MAP {
        if is_delete_list {
            let deleted = Positions::by_value(&patch);
            return Ok(original
                .into_iter()
                .filter(|item| deleted.first(item, |i| patch[i] == *item).is_none())
                .collect());
        }
        let merged = dedup(original.iter().chain(&patch).cloned().collect());
        (original, patch, merged)
    } else {
        if merge_key.is_empty() {
            return Err(PatchError::NoMergeKeyDeclared("struct".to_owned()));
        }
        let (original, patch) = apply_list_directives(original, patch, merge_key)?;
        let merged = merge_list_items(original.clone(), &patch, merge_key, items)?;
        (original, patch, merged)
    };
    let (in_patch, server_only) = partition(merged, &patch, merge_key)?;
    normalize_order(in_patch, server_only, &patch, &original, merge_key, kind)
}

/// Applies `$patch` elements of a list of objects (kube's `mergeSliceWithSpecialElements`).
///
/// Returns the original without deleted items (or the patch's plain items on
/// `replace`) and the patch without its directive elements.
fn apply_list_directives(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut plain = Vec::new();
    let mut replace = false;
    // The merge key values of `$patch: delete` items, removed in one pass.
    let mut deleted = Vec::new();
    for item in patch {
        let Some(directive) = item.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let key_value = merge_key_value(&item, merge_key)?.clone();
                // kube's deletion scans the original once: it must hold objects.
                if deleted.is_empty()
                    && let Some(index) = first_non_map(&original)
                {
                    return Err(PatchError::NotAMap(index));
                }
                deleted.push(key_value);
            }
            Some("replace") => replace = true,
            Some("merge") => return Err(PatchError::MergeDirectiveInList),
            _ => {
                return Err(PatchError::UnknownDirective {
                    directive: go_string(directive),
                    map: go_format(&item),
                });
            }
        }
    }
    if !deleted.is_empty() {
        let keys = Positions::by_value(&deleted);
        original.retain(|item| {
            item.get(merge_key)
                .is_none_or(|key| keys.first(key, |i| deleted[i] == *key).is_none())
        });
    }
    Ok(if replace {
        (clean_list(plain), Vec::new())
    } else {
        (original, plain)
    })
}

/// The index of the first item that is not an object.
fn first_non_map(list: &[Value]) -> Option<usize> {
    list.iter().position(|item| !item.is_object())
}

/// Merges plain patch items into the original by merge key (kube's `mergeSliceWithoutSpecialElements`).
fn merge_list_items(
    mut original: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    items: Schema<'_>,
) -> Result<Vec<Value>, PatchError> {
    let mut keys = KeyedList::new(&original, merge_key);
    for item in patch {
        let key_value = merge_key_value(item, merge_key)?;
        let patch_item = item.as_object().cloned().unwrap_or_default();
        match keys.find(&original, key_value)? {
            Some(index) => {
                let current = original[index].as_object().cloned().unwrap_or_default();
                original[index] = Value::Object(merge_map(current, patch_item, items)?);
            }
            None => {
                keys.positions.insert(key_value, original.len());
                original.push(Value::Object(clean_map(patch_item)));
            }
        }
    }
    Ok(original)
}

/// A list of objects looked up by merge key value as kube's
/// `findMapInSliceBasedOnKeyValue` scans it from the start (an item that
/// is not an object before the match is an error), in constant time.
struct KeyedList<'k> {
    merge_key: &'k str,
    positions: Positions,
    first_non_map: Option<usize>,
}

impl<'k> KeyedList<'k> {
    fn new(list: &[Value], merge_key: &'k str) -> Self {
        let mut positions = Positions::default();
        for (index, item) in list.iter().enumerate() {
            if let Some(key) = item.get(merge_key) {
                positions.insert(key, index);
            }
        }
        KeyedList {
            merge_key,
            positions,
            first_non_map: first_non_map(list),
        }
    }

    /// The index of the first object of `list` whose merge key is `key_value`.
    fn find(&self, list: &[Value], key_value: &Value) -> Result<Option<usize>, PatchError> {
        let found = self.positions.first(key_value, |i| {
            list[i].get(self.merge_key) == Some(key_value)
        });
        match (found, self.first_non_map) {
            (Some(found), Some(bad)) if bad < found => Err(PatchError::NotAMap(bad)),
            (None, Some(bad)) => Err(PatchError::NotAMap(bad)),
            (found, _) => Ok(found),
        }
    }
}

/// Where equal values sit in a list, found in constant time: indexes are
/// bucketed by a hash that agrees with `==` on JSON values (object members
/// in any order), and each candidate is confirmed by the caller.
#[derive(Default)]
struct Positions(HashMap<u64, Vec<usize>>);

impl Positions {
    /// Every item of `list` at its index.
    fn by_value(list: &[Value]) -> Self {
        let mut positions = Positions::default();
        for (index, item) in list.iter().enumerate() {
            positions.insert(item, index);
        }
        positions
    }

    /// Records that `index` holds `probe` (an item, or its merge key value).
    fn insert(&mut self, probe: &Value, index: usize) {
        self.0.entry(hash_value(probe)).or_default().push(index);
    }

    /// The first recorded index that may hold `probe` and that `is` confirms.
    fn first(&self, probe: &Value, is: impl Fn(usize) -> bool) -> Option<usize> {
        let candidates = self.0.get(&hash_value(probe))?;
        candidates.iter().copied().find(|&index| is(index))
    }
}

/// A hash of a JSON value equal for equal values: object members are
/// combined in any order, numbers by their value.
fn hash_value(value: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    feed(value, &mut hasher);
    hasher.finish()
}

fn feed(value: &Value, hasher: &mut DefaultHasher) {
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(b) => (1u8, b).hash(hasher),
        Value::Number(n) => {
            // -0.0 == 0.0; integers too large for an f64 only collide.
            let n = n.as_f64().unwrap_or(0.0);
            (2u8, if n == 0.0 { 0 } else { n.to_bits() }).hash(hasher)
        }
        Value::String(text) => (3u8, text).hash(hasher),
        Value::Array(items) => {
            (4u8, items.len()).hash(hasher);
            items.iter().for_each(|item| feed(item, hasher));
        }
        Value::Object(map) => {
            let members = map.iter().fold(0u64, |sum, (key, value)| {
                let mut member = DefaultHasher::new();
                key.hash(&mut member);
                feed(value, &mut member);
                sum.wrapping_add(member.finish())
            });
            (5u8, map.len(), members).hash(hasher)
        }
    }
}

/// Splits `merged` into items found in `by` and items only the server has.
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut found = Vec::new();
    let mut server_only = Vec::new();
    let values = Positions::by_value(if merge_key.is_empty() { by } else { &[] });
    let keys = KeyedList::new(if merge_key.is_empty() { &[] } else { by }, merge_key);
    for item in merged {
        let present = if merge_key.is_empty() {
            values.first(&item, |i| by[i] == item).is_some()
        } else {
            keys.find(by, merge_key_value(&item, merge_key)?)?.is_some()
        };
        if present {
            found.push(item)
        } else {
            server_only.push(item)
        }
    }
    Ok((found, server_only))
}

/// Orders a merged list (kube's `normalizeElementOrder`).
///
/// Patch items follow `patch_order`, server-only items follow `server_order`,
/// and the two are interleaved: a server-only item goes before a patch item
/// when the server had it first, and patch items the server lacked come as
/// early as possible.
fn normalize_order(
    in_patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: &str,
) -> Result<Vec<Value>, PatchError> {
    let in_patch = sort_by_order(in_patch, patch_order, merge_key, kind)?;
    let server_only = sort_by_order(server_only, server_order, merge_key, kind)?;
    let server_positions = Order::new(server_order, merge_key, kind);
    let position = |item: &Value| server_positions.of(item);
    let mut merged = Vec::with_capacity(in_patch.len() + server_only.len());
    let mut server_only = server_only.into_iter().peekable();
    for item in in_patch {
        while let Some(next) = server_only.peek() {
            match (position(next), position(&item)) {
                (Some(left), Some(right)) if left < right => merged.extend(server_only.next()),
                _ => break,
            }
        }
        merged.push(item);
    }
    merged.extend(server_only);
    Ok(merged)
}

/// Sorts items by their position in `order`, `$patch: delete` items last (kube's `normalizeSliceOrder`).
fn sort_by_order(
    items: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: &str,
) -> Result<Vec<Value>, PatchError> {
    let (mut kept, deleted) = if kind == GO_MAP {
        for item in items.iter().chain(order) {
            merge_key_value(item, merge_key)?;
        }
        let (kept, deleted) = split_deletions(&items)?;
        (
            kept.into_iter().cloned().collect::<Vec<_>>(),
            deleted.into_iter().cloned().collect::<Vec<_>>(),
        )
    } else {
        (items, Vec::new())
    };
    let positions = Order::new(order, merge_key, kind);
    kept.sort_by_cached_key(|item| positions.of(item).unwrap_or(usize::MAX));
    kept.extend(deleted);
    Ok(kept)
}

/// The positions of a list's items as kube's `index` finds them: by merge
/// key value for objects (`null` when missing), by value otherwise.
struct Order<'a> {
    list: &'a [Value],
    merge_key: Option<&'a str>,
    positions: Positions,
}

impl<'a> Order<'a> {
    fn new(list: &'a [Value], merge_key: &'a str, kind: &str) -> Self {
        let merge_key = (kind == GO_MAP).then_some(merge_key);
        let mut order = Order {
            list,
            merge_key,
            positions: Positions::default(),
        };
        for (index, item) in list.iter().enumerate() {
            order.positions.insert(order.probe(item), index);
        }
        order
    }

    /// What an item is found by: its merge key value, or itself.
    fn probe<'v>(&self, item: &'v Value) -> &'v Value {
        match self.merge_key {
            Some(key) => item.get(key).unwrap_or(&Value::Null),
            None => item,
        }
    }

    /// The position of the first item found as `item` is.
    fn of(&self, item: &Value) -> Option<usize> {
        let wanted = self.probe(item);
        self.positions
            .first(wanted, |i| self.probe(&self.list[i]) == wanted)
    }
}

/// Splits list items into kept ones and `$patch: delete` ones; all must be objects.
fn split_deletions(items: &[Value]) -> Result<(Vec<&Value>, Vec<&Value>), PatchError> {
    let mut kept = Vec::new();
    let mut deleted = Vec::new();
    for item in items {
        let object = item.as_object().ok_or_else(|| bad_map(item))?;
        if object.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") {
            deleted.push(item);
        } else {
            kept.push(item);
        }
    }
    Ok((kept, deleted))
}

/// The Go type shared by the elements of the lists (kube's `sliceElementType`).
fn element_kind(lists: &[&[Value]]) -> Result<&'static str, PatchError> {
    let mut kind = None;
    for item in lists.iter().flat_map(|list| list.iter()) {
        let current = go_type(item);
        match kind {
            None if current == GO_LIST => return Err(PatchError::ListOfLists),
            None => kind = Some(current),
            Some(previous) if previous != current => {
                let lists: Vec<Value> = lists
                    .iter()
                    .map(|list| Value::Array(list.to_vec()))
                    .collect();
                return Err(PatchError::MixedElementTypes(go_format(&Value::Array(
                    lists,
                ))));
            }
            Some(_) => {}
        }
    }
    kind.ok_or(PatchError::NoElements)
}

/// Removes repeated scalars, keeping the first of each.
fn dedup(items: Vec<Value>) -> Vec<Value> {
    let mut unique: Vec<Value> = Vec::with_capacity(items.len());
    let mut seen = Positions::default();
    for item in items {
        if seen.first(&item, |i| unique[i] == item).is_none() {
            seen.insert(&item, unique.len());
            unique.push(item);
        }
    }
    unique
}

/// Whether a list item is an object carrying `$patch`.
fn has_directive(item: &Value) -> bool {
    item.get(DIRECTIVE).is_some()
}

/// The error for a list item that should be an object.
fn bad_map(item: &Value) -> PatchError {
    PatchError::BadArgType {
        expected: GO_MAP,
        actual: go_type(item).to_owned(),
    }
}

/// The field a `$deleteFromPrimitiveList/<field>` or `$setElementOrder/<field>` key names.
fn field_of(key: &str, prefix: &str) -> Result<String, PatchError> {
    match key.split_once('/') {
        Some((head, field)) if head == prefix => Ok(field.to_owned()),
        _ if prefix == DELETE_FROM_PRIMITIVE_LIST => Err(PatchError::BadPrimitiveListFormat),
        _ => Err(PatchError::BadSetElementOrderFormat),
    }
}

/// A patch value taken as is (kube drops its nulls, and drops it whole if it is a `$patch` object).
fn take_patch_value(value: Value) -> Option<Value> {
    remove_directives(discard_nulls(value)).map(clean)
}

/// Drops `null` members of objects, recursively (kube's `discardNullValuesFromPatch`).
fn discard_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, discard_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(discard_nulls).collect()),
        other => other,
    }
}

/// Drops objects carrying `$patch`, recursively (kube's `removeDirectives`).
fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) if map.contains_key(DIRECTIVE) => None,
        Value::Object(map) => Some(Value::Object(
            map.into_iter()
                .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                .collect(),
        )),
        Value::Array(items) => Some(Value::Array(remove_directives_in_list(items))),
        other => Some(other),
    }
}

/// Drops list items that are (or hold) `$patch` objects, cleaning the others.
fn remove_directives_in_list(items: Vec<Value>) -> Vec<Value> {
    items.into_iter().filter_map(remove_directives).collect()
}

/// Cleans a value copied from the patch as kube's typed decoding would.
///
/// `null` members and directive keys disappear; `null` list items stay.
fn clean(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(clean_map(map)),
        Value::Array(items) => Value::Array(clean_list(items)),
        other => other,
    }
}

/// [`clean`] for an object.
fn clean_map(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter()
        .filter(|(key, value)| !value.is_null() && !is_directive_key(key))
        .map(|(key, value)| (key, clean(value)))
        .collect()
}

/// [`clean`] for the items of a list.
fn clean_list(items: Vec<Value>) -> Vec<Value> {
    items.into_iter().map(clean).collect()
}

/// Whether a member name is a patch directive rather than data.
fn is_directive_key(key: &str) -> bool {
    key == DIRECTIVE
        || key == RETAIN_KEYS
        || key.starts_with(SET_ELEMENT_ORDER)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

/// Removes a member while keeping the order of the others, returning it.
fn remove_member(map: &mut Map<String, Value>, key: &str) -> Option<Value> {
    if !map.contains_key(key) {
        return None;
    }
    let mut removed = None;
    for (name, value) in std::mem::take(map) {
        if name == key {
            removed = Some(value);
        } else {
            map.insert(name, value);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A hand-made `components.schemas` map shaped like kube's OpenAPI v3.
    fn components() -> Map<String, Value> {
        let schemas = json!({
            "io.k8s.api.apps.v1.Deployment": {
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}},
                    "spec": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}], "default": {}}
                }
            },
            "io.k8s.api.apps.v1.DeploymentSpec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer"},
                    "selector": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"}]},
                    "strategy": {
                        "allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentStrategy"}],
                        "default": {},
                        "x-kubernetes-patch-strategy": "retainKeys"
                    },
                    "template": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec"}], "default": {}}
                }
            },
            "io.k8s.api.apps.v1.DeploymentStrategy": {
                "type": "object",
                "properties": {
                    "type": {"type": "string"},
                    "rollingUpdate": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.RollingUpdateDeployment"}]}
                }
            },
            "io.k8s.api.apps.v1.RollingUpdateDeployment": {
                "type": "object",
                "properties": {
                    "maxSurge": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"}]},
                    "maxUnavailable": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"}]}
                }
            },
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
            "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector": {
                "type": "object",
                "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}}},
                "x-kubernetes-map-type": "atomic"
            },
            "io.k8s.api.core.v1.PodTemplateSpec": {
                "type": "object",
                "properties": {
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}},
                    "spec": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}], "default": {}}
                }
            },
            "io.k8s.api.core.v1.PodSpec": {
                "type": "object",
                "properties": {
                    "containers": {
                        "type": "array",
                        "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}], "default": {}},
                        "x-kubernetes-list-map-keys": ["name"],
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-patch-merge-key": "name",
                        "x-kubernetes-patch-strategy": "merge"
                    },
                    "tolerations": {
                        "type": "array",
                        "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.Toleration"}], "default": {}},
                        "x-kubernetes-list-type": "atomic"
                    },
                    "volumes": {
                        "type": "array",
                        "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.Volume"}], "default": {}},
                        "x-kubernetes-list-map-keys": ["name"],
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-patch-merge-key": "name",
                        "x-kubernetes-patch-strategy": "merge,retainKeys"
                    },
                    "nodeSelector": {"type": "object", "additionalProperties": {"type": "string", "default": ""}, "x-kubernetes-map-type": "atomic"},
                    "hostAliases": {
                        "type": "array",
                        "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.HostAlias"}], "default": {}},
                        "x-kubernetes-list-map-keys": ["ip"],
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-patch-strategy": "merge"
                    }
                }
            },
            "io.k8s.api.core.v1.HostAlias": {
                "type": "object",
                "properties": {"ip": {"type": "string"}, "hostnames": {"type": "array", "items": {"type": "string"}}}
            },
            "io.k8s.api.core.v1.Container": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "image": {"type": "string"},
                    "args": {"type": "array", "items": {"type": "string", "default": ""}, "x-kubernetes-list-type": "atomic"},
                    "env": {
                        "type": "array",
                        "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.EnvVar"}], "default": {}},
                        "x-kubernetes-list-map-keys": ["name"],
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-patch-merge-key": "name",
                        "x-kubernetes-patch-strategy": "merge"
                    },
                    "ports": {
                        "type": "array",
                        "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.ContainerPort"}], "default": {}},
                        "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-patch-merge-key": "containerPort",
                        "x-kubernetes-patch-strategy": "merge"
                    }
                }
            },
            "io.k8s.api.core.v1.EnvVar": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "value": {"type": "string"}}
            },
            "io.k8s.api.core.v1.ContainerPort": {
                "type": "object",
                "properties": {"containerPort": {"type": "integer"}, "name": {"type": "string"}, "protocol": {"type": "string"}}
            },
            "io.k8s.api.core.v1.Toleration": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "operator": {"type": "string"}, "effect": {"type": "string"}}
            },
            "io.k8s.api.core.v1.Volume": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "hostPath": {"type": "object"},
                    "emptyDir": {"type": "object"},
                    "configMap": {"type": "object"}
                }
            },
            "io.k8s.api.core.v1.ConfigMap": {
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "data": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}}
                }
            },
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "annotations": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
                    "finalizers": {
                        "type": "array",
                        "items": {"type": "string", "default": ""},
                        "x-kubernetes-list-type": "set",
                        "x-kubernetes-patch-strategy": "merge"
                    },
                    "ownerReferences": {
                        "type": "array",
                        "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"}], "default": {}},
                        "x-kubernetes-list-map-keys": ["uid"],
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-patch-merge-key": "uid",
                        "x-kubernetes-patch-strategy": "merge"
                    }
                }
            },
            "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference": {
                "type": "object",
                "properties": {"uid": {"type": "string"}, "name": {"type": "string"}, "kind": {"type": "string"}}
            }
        });
        serde_json::from_value(schemas).unwrap()
    }

    fn deployment_root() -> Value {
        json!({"$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment"})
    }

    fn patch_deployment(original: Value, patch: Value) -> Result<Value, PatchError> {
        let components = components();
        let root = deployment_root();
        apply(&original, &patch, Some(Schema::new(&root, &components)))
    }

    fn patch_kind(kind: &str, original: Value, patch: Value) -> Result<Value, PatchError> {
        let components = components();
        let root = json!({"$ref": format!("#/components/schemas/{kind}")});
        apply(&original, &patch, Some(Schema::new(&root, &components)))
    }

    fn pod_template(spec: Value) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "patch-demo"},
            "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": spec}}
        })
    }

    fn pod_spec(patched: &Value) -> &Value {
        &patched["spec"]["template"]["spec"]
    }

    #[test]
    fn docs_containers_merge_by_name() {
        // kubectl patch deployment patch-demo --patch-file patch-file.yaml (docs: "Use a strategic merge patch").
        let original = pod_template(
            json!({"containers": [{"name": "patch-demo-ctr", "image": "nginx"}],
            "tolerations": [{"effect": "NoSchedule", "key": "dedicated", "value": "test-team"}]}),
        );
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "patch-demo-ctr-2", "image": "redis"}]}}}});
        let patched = patch_deployment(original, patch).unwrap();
        assert_eq!(
            pod_spec(&patched)["containers"],
            json!([{"name": "patch-demo-ctr-2", "image": "redis"}, {"name": "patch-demo-ctr", "image": "nginx"}])
        );
        assert_eq!(patched["spec"]["replicas"], json!(2));
    }

    #[test]
    fn docs_tolerations_are_replaced() {
        // "Notice that the tolerations list in the PodSpec was replaced, not merged."
        let original = pod_template(
            json!({"containers": [{"name": "patch-demo-ctr", "image": "nginx"}],
            "tolerations": [{"effect": "NoSchedule", "key": "dedicated", "value": "test-team"}]}),
        );
        let patch = json!({"spec": {"template": {"spec": {"tolerations": [{"effect": "NoSchedule", "key": "disktype", "value": "ssd"}]}}}});
        let patched = patch_deployment(original, patch).unwrap();
        assert_eq!(
            pod_spec(&patched)["tolerations"],
            json!([{"effect": "NoSchedule", "key": "disktype", "value": "ssd"}])
        );
        assert_eq!(
            pod_spec(&patched)["containers"],
            json!([{"name": "patch-demo-ctr", "image": "nginx"}])
        );
    }

    #[test]
    fn docs_retain_keys_strategy() {
        // Docs: "Use strategic merge patch to update a Deployment using the retainKeys strategy".
        let original = json!({
            "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}
        });
        let plain = json!({"spec": {"strategy": {"type": "Recreate"}}});
        let merged = patch_deployment(original.clone(), plain).unwrap();
        assert_eq!(
            merged["spec"]["strategy"],
            json!({"type": "Recreate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
        );
        let retained = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        let patched = patch_deployment(original, retained).unwrap();
        assert_eq!(patched["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn retain_keys_rejects_unlisted_members() {
        let original = json!({"spec": {"strategy": {"type": "RollingUpdate"}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 1}}}});
        assert_eq!(
            patch_deployment(original.clone(), patch),
            Err(PatchError::BadRetainKeysFormat)
        );
        let not_list = json!({"spec": {"strategy": {"$retainKeys": "type"}}});
        let error = patch_deployment(original, not_list).unwrap_err();
        assert_eq!(
            (error.to_string().as_str(), error.code()),
            ("invalid patch format of retainKeys", 400)
        );
    }

    #[test]
    fn docs_patch_delete_directive() {
        // $patch: delete removes a container by its merge key; on a map it empties the map.
        let original = pod_template(json!({"containers": [
            {"name": "patch-demo-ctr", "image": "nginx"},
            {"name": "patch-demo-ctr-2", "image": "redis"}
        ]}));
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "patch-demo-ctr-2", "$patch": "delete"}]}}}});
        let patched = patch_deployment(original.clone(), patch).unwrap();
        assert_eq!(
            pod_spec(&patched)["containers"],
            json!([{"name": "patch-demo-ctr", "image": "nginx"}])
        );
        let map_delete =
            json!({"spec": {"template": {"metadata": {"labels": {"$patch": "delete"}}}}});
        let patched = patch_deployment(original, map_delete).unwrap();
        assert_eq!(patched["spec"]["template"]["metadata"]["labels"], json!({}));
    }

    #[test]
    fn patch_replace_directive() {
        let original = pod_template(json!({"containers": [
            {"name": "a", "image": "a:1"},
            {"name": "b", "image": "b:1"}
        ]}));
        let list_replace = json!({"spec": {"template": {"spec": {"containers": [
            {"$patch": "replace"},
            {"name": "c", "image": "c:1"}
        ]}}}});
        let patched = patch_deployment(original.clone(), list_replace).unwrap();
        assert_eq!(
            pod_spec(&patched)["containers"],
            json!([{"name": "c", "image": "c:1"}])
        );
        let map_replace = json!({"spec": {"template": {"metadata": {"labels": {"$patch": "replace", "tier": "web"}}}}});
        let patched = patch_deployment(original, map_replace).unwrap();
        assert_eq!(
            patched["spec"]["template"]["metadata"]["labels"],
            json!({"tier": "web"})
        );
    }

    #[test]
    fn kubectl_apply_second_configmap_apply() {
        // What client-side `kubectl apply` sends when data.b is dropped and data.c added.
        let last_applied = "{\"apiVersion\":\"v1\",\"data\":{\"a\":\"1\",\"c\":\"3\"},\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":{},\"labels\":{\"tier\":\"two\"},\"name\":\"cm\",\"namespace\":\"default\"}}\n";
        let original = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default", "labels": {"tier": "one"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "old"}},
            "data": {"a": "1", "b": "2"}
        });
        let patch = json!({
            "data": {"b": null, "c": "3"},
            "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied}, "labels": {"tier": "two"}}
        });
        let patched = patch_kind("io.k8s.api.core.v1.ConfigMap", original, patch).unwrap();
        assert_eq!(patched["data"], json!({"a": "1", "c": "3"}));
        assert_eq!(patched["metadata"]["labels"], json!({"tier": "two"}));
        assert_eq!(
            patched["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            json!(last_applied)
        );
        assert_eq!(patched["metadata"]["name"], json!("cm"));
    }

    #[test]
    fn kubectl_set_image() {
        // kubectl set image deployment/web app=nginx:1.27 sends $setElementOrder with the new image.
        let original = pod_template(json!({"containers": [
            {"name": "app", "image": "nginx:1.25", "ports": [{"containerPort": 80}]},
            {"name": "sidecar", "image": "busybox"}
        ]}));
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
            "containers": [{"image": "nginx:1.27", "name": "app"}]
        }}}});
        let patched = patch_deployment(original, patch).unwrap();
        assert_eq!(
            pod_spec(&patched)["containers"],
            json!([
                {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
                {"name": "sidecar", "image": "busybox"}
            ])
        );
    }

    #[test]
    fn kubectl_rollout_restart() {
        // kubectl rollout restart adds an annotation to the pod template.
        let original = pod_template(json!({"containers": [{"name": "app", "image": "nginx"}]}));
        let patch = json!({"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z"
        }}}}});
        let patched = patch_deployment(original, patch).unwrap();
        let metadata = &patched["spec"]["template"]["metadata"];
        assert_eq!(
            metadata["annotations"],
            json!({"kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z"})
        );
        assert_eq!(metadata["labels"], json!({"app": "nginx"}));
        assert_eq!(
            pod_spec(&patched)["containers"],
            json!([{"name": "app", "image": "nginx"}])
        );
    }

    #[test]
    fn set_element_order_reorders_and_keeps_server_only_items() {
        let original = pod_template(json!({"containers": [
            {"name": "a", "image": "a"}, {"name": "b", "image": "b"}, {"name": "c", "image": "c"}
        ]}));
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
            "containers": [{"name": "c", "image": "c2"}]
        }}}});
        let patched = patch_deployment(original, patch).unwrap();
        assert_eq!(
            pod_spec(&patched)["containers"],
            json!([{"name": "b", "image": "b"}, {"name": "c", "image": "c2"}, {"name": "a", "image": "a"}])
        );
    }

    #[test]
    fn set_element_order_mismatch_is_an_error() {
        let original = pod_template(json!({"containers": [{"name": "a"}, {"name": "b"}]}));
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "a"}],
            "containers": [{"name": "b", "image": "x"}]
        }}}});
        let error = patch_deployment(original, patch).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the order in patch list:\n[map[image:x name:b]]\n doesn't match $setElementOrder list:\n[map[name:a]]"
        );
        assert_eq!(error.code(), 500);
    }

    #[test]
    fn ports_merge_by_container_port_and_env_by_name() {
        let original = pod_template(json!({"containers": [{
            "name": "app",
            "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443, "name": "https"}],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
        }]}));
        let patch = json!({"spec": {"template": {"spec": {"containers": [{
            "name": "app",
            "ports": [{"containerPort": 443, "protocol": "TCP"}, {"containerPort": 8080, "name": "alt"}],
            "env": [{"name": "B", "value": "3"}, {"name": "A", "$patch": "delete"}, {"name": "C", "value": "4"}]
        }]}}}});
        let patched = patch_deployment(original, patch).unwrap();
        let container = &pod_spec(&patched)["containers"][0];
        assert_eq!(
            container["ports"],
            json!([
                {"containerPort": 80, "name": "http"},
                {"containerPort": 443, "name": "https", "protocol": "TCP"},
                {"containerPort": 8080, "name": "alt"}
            ])
        );
        assert_eq!(
            container["env"],
            json!([{"name": "B", "value": "3"}, {"name": "C", "value": "4"}])
        );
    }

    #[test]
    fn finalizers_merge_as_a_set() {
        let original = json!({"metadata": {"name": "d", "finalizers": ["a", "b"]}});
        let add = json!({"metadata": {"finalizers": ["b", "c"]}});
        let patched = patch_deployment(original.clone(), add).unwrap();
        assert_eq!(patched["metadata"]["finalizers"], json!(["a", "b", "c"]));
        let new_only = json!({"metadata": {"finalizers": ["c"]}});
        let patched = patch_deployment(original.clone(), new_only).unwrap();
        assert_eq!(patched["metadata"]["finalizers"], json!(["c", "a", "b"]));
        let delete = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
        let patched = patch_deployment(original.clone(), delete).unwrap();
        assert_eq!(patched["metadata"]["finalizers"], json!(["b"]));
        let ordered = json!({"metadata": {
            "$setElementOrder/finalizers": ["b", "c", "a"],
            "finalizers": ["c"]
        }});
        let patched = patch_deployment(original.clone(), ordered).unwrap();
        assert_eq!(patched["metadata"]["finalizers"], json!(["b", "c", "a"]));
        let cleared = json!({"metadata": {"finalizers": null}});
        let patched = patch_deployment(original, cleared).unwrap();
        assert_eq!(patched["metadata"], json!({"name": "d"}));
    }

    #[test]
    fn long_lists_merge_by_key_with_deletions_new_items_and_order() {
        // 3,000 containers: every other one patched, every tenth deleted,
        // two new ones (the second patched twice), and members whose
        // objects list their keys in another order still match.
        let n = 3000;
        let containers: Vec<Value> = (0..n)
            .map(|i| json!({"name": format!("c{i}"), "image": "old"}))
            .collect();
        let original = pod_template(json!({"containers": containers}));
        let mut patched_items = vec![json!({"name": "new", "image": "a"})];
        for i in (0..n).rev() {
            if i % 10 == 0 {
                patched_items.push(json!({"$patch": "delete", "name": format!("c{i}")}));
            } else if i % 2 == 0 {
                patched_items.push(json!({"image": "new", "name": format!("c{i}")}));
            }
        }
        patched_items.push(json!({"name": "new", "args": ["x"]}));
        let patch = json!({"spec": {"template": {"spec": {"containers": patched_items}}}});
        let patched = patch_deployment(original, patch).unwrap();
        let names: Vec<&str> = pod_spec(&patched)["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        let kept = (0..n).filter(|i| i % 10 != 0);
        assert_eq!(names.len(), kept.clone().count() + 1);
        assert_eq!(names.iter().filter(|name| **name == "new").count(), 1);
        let containers = pod_spec(&patched)["containers"].as_array().unwrap();
        let by_name = |name: &str| containers.iter().find(|c| c["name"] == name).unwrap();
        assert_eq!(
            by_name("new"),
            &json!({"name": "new", "image": "a", "args": ["x"]})
        );
        assert_eq!(by_name("c2")["image"], "new");
        assert_eq!(by_name("c3")["image"], "old");
        // Patched items come in the patch's order (descending), the
        // server's other items in theirs, interleaved as kube does.
        let patched_order: Vec<&str> = names
            .iter()
            .copied()
            .filter(|name| by_name(name)["image"] != "old")
            .collect();
        let expected: Vec<String> = std::iter::once("new".to_string())
            .chain(
                (0..n)
                    .rev()
                    .filter(|i| i % 2 == 0 && i % 10 != 0)
                    .map(|i| format!("c{i}")),
            )
            .collect();
        assert_eq!(patched_order, expected);
    }

    #[test]
    fn owner_references_merge_by_uid() {
        let original = json!({"metadata": {"ownerReferences": [
            {"uid": "1", "name": "rs-a", "kind": "ReplicaSet"},
            {"uid": "2", "name": "rs-b", "kind": "ReplicaSet"}
        ]}});
        let patch = json!({"metadata": {"ownerReferences": [
            {"uid": "2", "name": "rs-b2"},
            {"uid": "1", "$patch": "delete"},
            {"uid": "3", "name": "rs-c", "kind": "ReplicaSet"}
        ]}});
        let patched = patch_deployment(original, patch).unwrap();
        assert_eq!(
            patched["metadata"]["ownerReferences"],
            json!([
                {"uid": "2", "name": "rs-b2", "kind": "ReplicaSet"},
                {"uid": "3", "name": "rs-c", "kind": "ReplicaSet"}
            ])
        );
    }

    #[test]
    fn list_map_keys_stand_in_for_missing_merge_key() {
        let original =
            pod_template(json!({"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}]}));
        let patch = json!({"spec": {"template": {"spec": {"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["b"]}]}}}});
        let patched = patch_deployment(original, patch).unwrap();
        assert_eq!(
            pod_spec(&patched)["hostAliases"],
            json!([{"ip": "10.0.0.1", "hostnames": ["b"]}])
        );
    }

    #[test]
    fn volumes_merge_with_retain_keys() {
        let original = pod_template(json!({"volumes": [
            {"name": "data", "emptyDir": {}},
            {"name": "config", "configMap": {"name": "cm"}}
        ]}));
        let patch = json!({"spec": {"template": {"spec": {"volumes": [
            {"name": "data", "hostPath": {"path": "/tmp"}, "$retainKeys": ["hostPath", "name"]}
        ]}}}});
        let patched = patch_deployment(original, patch).unwrap();
        assert_eq!(
            pod_spec(&patched)["volumes"],
            json!([{"name": "data", "hostPath": {"path": "/tmp"}}, {"name": "config", "configMap": {"name": "cm"}}])
        );
    }

    #[test]
    fn null_deletes_and_new_values_are_cleaned() {
        let original =
            pod_template(json!({"containers": [{"name": "app", "image": "nginx", "args": ["a"]}]}));
        let patch = json!({
            "metadata": {"labels": {"x": "1", "gone": null}},
            "spec": {"replicas": null, "template": {"spec": {
                "containers": [{"name": "app", "args": null}, {"name": "new", "image": null, "env": [{"name": "A", "value": null}]}],
                "nodeSelector": {"disk": "ssd", "zone": null, "$patch": "replace"}
            }}}
        });
        let patched = patch_deployment(original, patch).unwrap();
        assert_eq!(
            patched["metadata"],
            json!({"name": "patch-demo", "labels": {"x": "1"}})
        );
        assert!(patched["spec"].get("replicas").is_none());
        assert_eq!(
            pod_spec(&patched)["containers"],
            json!([{"name": "app", "image": "nginx"}, {"name": "new", "env": [{"name": "A"}]}])
        );
        assert!(
            pod_spec(&patched).get("nodeSelector").is_none(),
            "a new $patch map is dropped as kube does"
        );
    }

    #[test]
    fn unknown_fields_merge_like_a_merge_patch() {
        let original = json!({"spec": {"custom": {"a": 1, "list": [1, 2]}, "other": "x"}});
        let patch = json!({"spec": {"custom": {"b": 2, "list": [3]}, "other": {"now": "object"}}});
        let patched = patch_deployment(original.clone(), patch.clone()).unwrap();
        assert_eq!(
            patched,
            json!({"spec": {"custom": {"a": 1, "list": [3], "b": 2}, "other": {"now": "object"}}})
        );
        let without_schema = apply(&original, &patch, None).unwrap();
        assert_eq!(without_schema, patched);
    }

    #[test]
    fn directive_errors() {
        let original = pod_template(json!({"containers": [{"name": "a"}]}));
        let containers =
            |items: Value| json!({"spec": {"template": {"spec": {"containers": items}}}});
        let cases: Vec<(Value, &str, u16)> = vec![
            (
                containers(json!([{"name": "a", "$patch": "merge"}])),
                "merging lists cannot yet be specified in the patch",
                500,
            ),
            (
                containers(json!([{"name": "a", "$patch": "nope"}])),
                "unknown patch type: nope in map: map[$patch:nope name:a]",
                500,
            ),
            (
                containers(json!([{"$patch": "delete"}])),
                "map: map[$patch:delete] does not contain declared merge key: name",
                500,
            ),
            (
                containers(json!([{"image": "x"}])),
                "map: map[image:x] does not contain declared merge key: name",
                500,
            ),
            (
                containers(json!([["a"]])),
                "list element types are not identical: [[map[name:a]] [[a]]]",
                500,
            ),
            (
                containers(json!(["a"])),
                "list element types are not identical: [[map[name:a]] [a]]",
                500,
            ),
            (
                json!({"spec": {"$patch": "merge"}}),
                "unknown patch type: merge in map: map[$patch:merge]",
                500,
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveList": ["a"]}}),
                "invalid patch format of primitive list",
                400,
            ),
            (
                json!({"metadata": {"$setElementOrder": ["a"]}}),
                "invalid patch format of setElementOrder list",
                400,
            ),
            (
                json!({"metadata": {"$setElementOrder/finalizers": "a"}}),
                "expected a []interface {}, but received a string",
                500,
            ),
        ];
        for (patch, message, code) in cases {
            let error = patch_deployment(original.clone(), patch.clone()).unwrap_err();
            assert_eq!(
                (error.to_string().as_str(), error.code()),
                (message, code),
                "{patch}"
            );
        }
    }

    #[test]
    fn lists_of_lists_are_unprocessable() {
        let original = pod_template(json!({"containers": []}));
        let patch = json!({"spec": {"template": {"spec": {"containers": [["a"]]}}}});
        let error = patch_deployment(original, patch).unwrap_err();
        assert_eq!(
            (error, 422),
            (PatchError::ListOfLists, PatchError::ListOfLists.code())
        );
    }

    #[test]
    fn whole_object_directives_and_null_patch() {
        let original = json!({"metadata": {"name": "x"}, "spec": {"replicas": 1}});
        assert_eq!(
            patch_deployment(original.clone(), json!({"$patch": "delete"})).unwrap(),
            json!({})
        );
        assert_eq!(
            patch_deployment(original.clone(), Value::Null).unwrap(),
            original
        );
        let error = patch_deployment(original, json!([1])).unwrap_err();
        assert_eq!(
            error.to_string(),
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
    }

    #[test]
    fn unexpected_patch_strategy() {
        let schemas: Map<String, Value> = serde_json::from_value(json!({
            "T": {"properties": {"items": {"type": "array", "x-kubernetes-patch-strategy": "merge,replace"}}}
        }))
        .unwrap();
        let root = json!({"$ref": "#/components/schemas/T"});
        let error = apply(
            &json!({"items": [1]}),
            &json!({"items": [2]}),
            Some(Schema::new(&root, &schemas)),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "unexpected patch strategy: [merge replace]"
        );
    }

    #[test]
    fn resolve_follows_refs_and_all_of() {
        let schemas = components();
        let wrapper = json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.EnvVar"}], "default": {}});
        let resolved = schemas.resolve(&wrapper);
        assert!(resolved["properties"].get("value").is_some());
        let dangling = json!({"$ref": "#/components/schemas/Missing"});
        assert_eq!(schemas.resolve(&dangling), &dangling);
    }
}
