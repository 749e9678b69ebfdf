//! Walking values against their type: validation, field sets, comparison, merge, removal
//! (structured-merge-diff's `typed` package).
//!
//! Absent values are `None`; an explicit `null` is `Some(Value::Null)`, which a
//! map or list treats as empty and a scalar as a value. A map or list that is
//! empty (or null) on both sides of a comparison or merge is a leaf, which keeps
//! the difference between `{}`, `[]` and `null`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use super::fieldpath::{PathElement, Set, path_string};
use super::schema::{ListType, MapType, ScalarKind, Shape, TypeNode};
use crate::patch::{go_format, go_type};

/// Validation errors, printed as structured-merge-diff prints them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Errors(Vec<String>);

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => f.write_str(one),
            many => {
                f.write_str("errors:")?;
                for error in many {
                    write!(f, "\n  {error}")?;
                }
                Ok(())
            }
        }
    }
}

/// Collects errors at the current path.
#[derive(Default)]
struct Trail {
    path: Vec<PathElement>,
    errors: Vec<String>,
}

impl Trail {
    /// Records an error at the current path.
    fn error(&mut self, message: impl fmt::Display) {
        let path = path_string(&self.path);
        if path.is_empty() {
            self.errors.push(message.to_string());
        } else {
            self.errors.push(format!("{path}: {message}"));
        }
    }

    /// Ok if nothing went wrong.
    fn finish(self) -> Result<(), Errors> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(Errors(self.errors))
        }
    }
}

/// The items of a granular list with their path elements; errors for items without one.
fn list_items<'v>(
    list: &ListType<'_>,
    items: &'v [Value],
    trail: &mut Trail,
) -> Vec<(PathElement, &'v Value)> {
    let mut out = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match list.item_element(item) {
            Ok(element) => out.push((element, item)),
            Err(message) => trail.error(format_args!("element {index}: {message}")),
        }
    }
    out
}

/// The object of a map value (`None` for null, absent or a non-object).
fn as_map(value: Option<&Value>) -> Option<&Map<String, Value>> {
    value.and_then(Value::as_object)
}

/// The items of a list value (empty for null, absent or a non-array).
fn as_list(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// Whether a map or list value is absent, null or empty.
fn is_empty_container(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Object(object)) => object.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        Some(_) => false,
    }
}

/// Deep equality as structured-merge-diff sees it (numbers compare by value).
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| values_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, x)| y.get(key).is_some_and(|y| values_equal(x, y)))
        }
        _ => a == b,
    }
}

/// Checks a value against its type: scalar types, declared fields (when `strict`),
/// list keys and (unless `allow_duplicates`) duplicate items.
pub(crate) fn validate(
    value: &Value,
    node: TypeNode<'_>,
    strict: bool,
    allow_duplicates: bool,
) -> Result<(), Errors> {
    let mut validator = Validator {
        trail: Trail::default(),
        strict,
        allow_duplicates,
    };
    validator.walk(value, node);
    validator.trail.finish()
}

/// The state of [`validate`].
struct Validator {
    trail: Trail,
    strict: bool,
    allow_duplicates: bool,
}

impl Validator {
    /// Validates one value.
    fn walk(&mut self, value: &Value, node: TypeNode<'_>) {
        match node.shape(Some(value)) {
            Shape::Scalar(kind) => self.scalar(value, kind),
            Shape::Map(map) => match value {
                Value::Object(object) => self.map(object, &map),
                Value::Null => {}
                other => self
                    .trail
                    .error(format_args!("expected map, got &{{{}}}", go_format(other))),
            },
            Shape::List(list) => match value {
                Value::Array(items) => self.list(items, &list),
                Value::Null => {}
                other => self
                    .trail
                    .error(format_args!("expected list, got &{{{}}}", go_format(other))),
            },
        }
    }

    /// Checks a scalar against its declared type (`null` always passes).
    fn scalar(&mut self, value: &Value, kind: ScalarKind) {
        let fits = match (kind, value) {
            (_, Value::Null) | (ScalarKind::Untyped, _) => true,
            (ScalarKind::Numeric, value) => value.is_number(),
            (ScalarKind::String, value) => value.is_string(),
            (ScalarKind::Boolean, value) => value.is_boolean(),
        };
        if fits {
            return;
        }
        match kind {
            ScalarKind::Numeric => self.trail.error(format_args!(
                "expected numeric (int or float), got {}",
                go_type(value)
            )),
            ScalarKind::String => self.trail.error(format_args!(
                "expected string, got &value.valueUnstructured{{Value:{}}}",
                go_format(value)
            )),
            _ => self.trail.error(format_args!(
                "expected boolean, got &{{{}}}",
                go_format(value)
            )),
        }
    }

    /// Validates the members of a map.
    fn map(&mut self, object: &Map<String, Value>, map: &MapType<'_>) {
        for (key, child) in object {
            self.trail.path.push(PathElement::Field(key.clone()));
            if self.strict && !map.accepts(key) {
                self.trail.error("field not declared in schema");
            } else {
                self.walk(child, map.child(key));
            }
            self.trail.path.pop();
        }
    }

    /// Validates the items of a list.
    fn list(&mut self, items: &[Value], list: &ListType<'_>) {
        let mut seen = BTreeSet::new();
        for (index, item) in items.iter().enumerate() {
            let element = if list.is_atomic() {
                PathElement::Index(index as i64)
            } else {
                match list.item_element(item) {
                    Ok(element) => element,
                    Err(message) => {
                        self.trail.error(format_args!("element {index}: {message}"));
                        continue;
                    }
                }
            };
            if !list.is_atomic() && !seen.insert(element.clone()) && !self.allow_duplicates {
                self.trail
                    .error(format_args!("duplicate entries for key {element}"));
                continue;
            }
            self.trail.path.push(element);
            self.walk(item, list.element);
            self.trail.path.pop();
        }
    }
}

/// The leaf paths a value sets: scalars, atomic maps and lists, list items,
/// map entries that are not declared struct fields.
pub(crate) fn to_field_set(value: &Value, node: TypeNode<'_>) -> Result<Set, Errors> {
    let mut walker = FieldSetWalker {
        trail: Trail::default(),
        set: Set::new(),
    };
    walker.walk(value, node);
    let FieldSetWalker { trail, set } = walker;
    trail.finish().map(|()| set)
}

/// The state of [`to_field_set`].
struct FieldSetWalker {
    trail: Trail,
    set: Set,
}

impl FieldSetWalker {
    /// Adds the paths of one value.
    fn walk(&mut self, value: &Value, node: TypeNode<'_>) {
        match node.shape(Some(value)) {
            Shape::Scalar(_) => self.set.insert(&self.trail.path),
            Shape::Map(map) if map.atomic => self.set.insert(&self.trail.path),
            Shape::Map(map) => {
                let Value::Object(object) = value else { return };
                for (key, child) in object {
                    self.trail.path.push(PathElement::Field(key.clone()));
                    self.walk(child, map.child(key));
                    if !map.declares(key) {
                        self.set.insert(&self.trail.path);
                    }
                    self.trail.path.pop();
                }
            }
            Shape::List(list) if list.is_atomic() => self.set.insert(&self.trail.path),
            Shape::List(list) => {
                let Value::Array(items) = value else { return };
                let items = list_items(&list, items, &mut self.trail);
                let mut counts: BTreeMap<&PathElement, usize> = BTreeMap::new();
                for (element, _) in &items {
                    *counts.entry(element).or_default() += 1;
                }
                let mut done = BTreeSet::new();
                for (element, item) in &items {
                    if !done.insert(element) {
                        continue;
                    }
                    self.trail.path.push(element.clone());
                    if counts.get(element) == Some(&1) {
                        self.walk(item, list.element);
                    }
                    self.set.insert(&self.trail.path);
                    self.trail.path.pop();
                }
            }
        }
    }
}

/// What changed from one value to another.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Comparison {
    /// Paths only in the new value.
    pub(crate) added: Set,
    /// Leaves in both, with different values.
    pub(crate) modified: Set,
    /// Paths only in the old value.
    pub(crate) removed: Set,
}

impl Comparison {
    /// Drops the ignored fields and everything below them from all three sets.
    pub(crate) fn exclude(&mut self, ignored: &Set) {
        if ignored.is_empty() {
            return;
        }
        self.added = self.added.recursive_difference(ignored);
        self.modified = self.modified.recursive_difference(ignored);
        self.removed = self.removed.recursive_difference(ignored);
    }

    /// Added and modified paths.
    pub(crate) fn changed(&self) -> Set {
        self.added.union(&self.modified)
    }
}

/// Compares an old value with a new one (duplicate list items allowed on both sides).
pub(crate) fn compare(old: &Value, new: &Value, node: TypeNode<'_>) -> Result<Comparison, Errors> {
    let mut walker = CompareWalker {
        trail: Trail::default(),
        comparison: Comparison::default(),
    };
    walker.node(Some(old), Some(new), node);
    let CompareWalker { trail, comparison } = walker;
    trail.finish().map(|()| comparison)
}

/// The state of [`compare`].
struct CompareWalker {
    trail: Trail,
    comparison: Comparison,
}

impl CompareWalker {
    /// Compares one position; at least one side is present.
    fn node(&mut self, old: Option<&Value>, new: Option<&Value>, node: TypeNode<'_>) {
        let old_shape = node.shape(old);
        let new_shape = node.shape(new);
        if old.is_some() && new.is_some() && !old_shape.same_kind(&new_shape) {
            // The value changed kind (deduced types): the position is modified, whatever
            // was below the old value is removed and whatever is below the new one added.
            self.comparison.modified.insert(&self.trail.path);
            self.children(old, None, &old_shape);
            self.children(None, new, &new_shape);
            return;
        }
        let shape = if new.is_some() { new_shape } else { old_shape };
        let leaf = match &shape {
            Shape::Scalar(_) => true,
            Shape::Map(map) => map.atomic || (is_empty_container(old) && is_empty_container(new)),
            Shape::List(list) => {
                list.is_atomic() || (is_empty_container(old) && is_empty_container(new))
            }
        };
        if leaf {
            self.leaf(old, new);
            return;
        }
        self.children(old, new, &shape);
        match (old, new) {
            (None, _) => self.comparison.added.insert(&self.trail.path),
            (_, None) => self.comparison.removed.insert(&self.trail.path),
            _ => {}
        }
    }

    /// Records a leaf as added, removed or modified.
    fn leaf(&mut self, old: Option<&Value>, new: Option<&Value>) {
        match (old, new) {
            (None, Some(_)) => self.comparison.added.insert(&self.trail.path),
            (Some(_), None) => self.comparison.removed.insert(&self.trail.path),
            (Some(old), Some(new)) if !values_equal(old, new) => {
                self.comparison.modified.insert(&self.trail.path);
            }
            _ => {}
        }
    }

    /// Compares the members or items below a granular map or list.
    fn children(&mut self, old: Option<&Value>, new: Option<&Value>, shape: &Shape<'_>) {
        match shape {
            Shape::Map(map) if !map.atomic => self.map_items(as_map(old), as_map(new), map),
            Shape::List(list) if !list.is_atomic() => {
                self.list_items(as_list(old), as_list(new), list)
            }
            _ => {}
        }
    }

    /// Compares map members, old keys first.
    fn map_items(
        &mut self,
        old: Option<&Map<String, Value>>,
        new: Option<&Map<String, Value>>,
        map: &MapType<'_>,
    ) {
        let keys = old.into_iter().flat_map(Map::keys).chain(
            new.into_iter()
                .flat_map(Map::keys)
                .filter(|key| old.is_none_or(|old| !old.contains_key(*key))),
        );
        for key in keys {
            self.trail.path.push(PathElement::Field(key.clone()));
            self.node(
                old.and_then(|old| old.get(key)),
                new.and_then(|new| new.get(key)),
                map.child(key),
            );
            self.trail.path.pop();
        }
    }

    /// Compares list items by path element; duplicated items compare as one atomic value.
    fn list_items(&mut self, old: &[Value], new: &[Value], list: &ListType<'_>) {
        let old = list_items(list, old, &mut self.trail);
        let new = list_items(list, new, &mut self.trail);
        let mut order: Vec<&PathElement> = Vec::new();
        let mut old_by: BTreeMap<&PathElement, Vec<&Value>> = BTreeMap::new();
        let mut new_by: BTreeMap<&PathElement, Vec<&Value>> = BTreeMap::new();
        for (element, item) in &old {
            let entry = old_by.entry(element).or_default();
            if entry.is_empty() {
                order.push(element);
            }
            entry.push(item);
        }
        for (element, item) in &new {
            let entry = new_by.entry(element).or_default();
            if entry.is_empty() && !old_by.contains_key(element) {
                order.push(element);
            }
            entry.push(item);
        }
        for element in order {
            let old_items = old_by.get(element).map_or(&[][..], Vec::as_slice);
            let new_items = new_by.get(element).map_or(&[][..], Vec::as_slice);
            self.trail.path.push(element.clone());
            match (old_items.len(), new_items.len()) {
                (0..=1, 0..=1) => self.node(
                    old_items.first().copied(),
                    new_items.first().copied(),
                    list.element,
                ),
                (2.., 2..) => {
                    let same = old_items.len() == new_items.len()
                        && old_items
                            .iter()
                            .zip(new_items)
                            .all(|(a, b)| values_equal(a, b));
                    if !same {
                        self.comparison.modified.insert(&self.trail.path);
                    }
                }
                (2.., _) => {
                    if let Some(new) = new_items.first() {
                        self.node(None, Some(new), list.element);
                    }
                    self.comparison.removed.insert(&self.trail.path);
                }
                (_, _) => {
                    if let Some(old) = old_items.first() {
                        self.node(Some(old), None, list.element);
                    }
                    self.comparison.added.insert(&self.trail.path);
                }
            }
            self.trail.path.pop();
        }
    }
}

/// Merges an applied configuration into a live value: list maps merge by key, sets
/// by value, granular maps per key; scalars and atomic values are replaced whole.
pub(crate) fn merge(live: &Value, config: &Value, node: TypeNode<'_>) -> Result<Value, Errors> {
    let mut trail = Trail::default();
    let merged = merge_node(Some(live), Some(config), node, &mut trail);
    trail.finish()?;
    Ok(merged.unwrap_or_else(|| Value::Object(Map::new())))
}

/// Merges one position; `None` when nothing is left.
fn merge_node(
    live: Option<&Value>,
    config: Option<&Value>,
    node: TypeNode<'_>,
    trail: &mut Trail,
) -> Option<Value> {
    let keep_config = || config.or(live).cloned();
    if live.is_none() || config.is_none() {
        // Merging with nothing keeps the value as it is (both inputs were validated).
        return keep_config();
    }
    let live_shape = node.shape(live);
    let shape = node.shape(config.or(live));
    if live.is_some() && config.is_some() && !live_shape.same_kind(&shape) {
        return keep_config();
    }
    match shape {
        Shape::Scalar(_) => keep_config(),
        Shape::Map(map) if map.atomic => keep_config(),
        Shape::List(list) if list.is_atomic() => keep_config(),
        _ if is_empty_container(live) && is_empty_container(config) => keep_config(),
        Shape::Map(map) => merge_map(as_map(live), as_map(config), &map, trail),
        Shape::List(list) => merge_list(as_list(live), as_list(config), &list, trail),
    }
}

/// Merges map members: live keys in their order, then new keys in the configuration's order.
fn merge_map(
    live: Option<&Map<String, Value>>,
    config: Option<&Map<String, Value>>,
    map: &MapType<'_>,
    trail: &mut Trail,
) -> Option<Value> {
    let mut out = Map::new();
    let new_keys = config
        .into_iter()
        .flat_map(Map::keys)
        .filter(|key| live.is_none_or(|live| !live.contains_key(*key)));
    for key in live.into_iter().flat_map(Map::keys).chain(new_keys) {
        trail.path.push(PathElement::Field(key.clone()));
        let merged = merge_node(
            live.and_then(|live| live.get(key)),
            config.and_then(|config| config.get(key)),
            map.child(key),
            trail,
        );
        trail.path.pop();
        if let Some(merged) = merged {
            out.insert(key.clone(), merged);
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// Merges list items by path element, in kube's order: live items keep their place
/// and the configuration's items come in its order, shared items where the
/// configuration puts them relative to each other.
fn merge_list(
    live: &[Value],
    config: &[Value],
    list: &ListType<'_>,
    trail: &mut Trail,
) -> Option<Value> {
    let live = list_items(list, live, trail);
    let config = list_items(list, config, trail);
    // Live items by element; a duplicated element maps to None.
    let mut live_by: BTreeMap<&PathElement, Option<&Value>> = BTreeMap::new();
    for (element, item) in &live {
        live_by
            .entry(element)
            .and_modify(|slot| *slot = None)
            .or_insert(Some(*item));
    }
    let mut config_by: BTreeMap<&PathElement, &Value> = BTreeMap::new();
    let mut config_order: Vec<&PathElement> = Vec::new();
    for (element, item) in &config {
        if config_by.insert(element, item).is_some() {
            trail.error(format_args!("duplicate entries for key {element}"));
        } else {
            config_order.push(element);
        }
    }
    let mut shared = config_order
        .iter()
        .copied()
        .filter(|element| live_by.contains_key(element))
        .collect::<Vec<_>>()
        .into_iter();
    let mut next_shared = shared.next();
    let mut merged_config: BTreeSet<&PathElement> = BTreeSet::new();
    let mut out = Vec::new();
    let merge_item = |element: &PathElement,
                      live: Option<&Value>,
                      config: Option<&Value>,
                      out: &mut Vec<Value>,
                      trail: &mut Trail| {
        trail.path.push(element.clone());
        if let Some(item) = merge_node(live, config, list.element, trail) {
            out.push(item);
        }
        trail.path.pop();
    };
    let (mut l, mut r) = (0, 0);
    while l < live.len() || r < config_order.len() {
        if l < live.len() && r < config_order.len() {
            let element = &live[l].0;
            if element == config_order[r] {
                merged_config.insert(element);
                let live_item = live_by.get(element).copied().flatten();
                merge_item(
                    element,
                    live_item,
                    config_by.get(element).copied(),
                    &mut out,
                    trail,
                );
                l += 1;
                r += 1;
                next_shared = shared.next();
                continue;
            }
            if config_by.contains_key(element) && next_shared.is_some_and(|next| next != element) {
                l += 1;
                continue;
            }
        }
        if l < live.len() {
            let (element, item) = &live[l];
            if !config_by.contains_key(element) {
                merge_item(element, Some(item), None, &mut out, trail);
                l += 1;
                continue;
            }
            if merged_config.contains(element) {
                l += 1;
                continue;
            }
        }
        if r < config_order.len() {
            let element = config_order[r];
            merged_config.insert(element);
            let live_item = live_by.get(element).copied().flatten();
            merge_item(
                element,
                live_item,
                config_by.get(element).copied(),
                &mut out,
                trail,
            );
            r += 1;
            if next_shared.is_some_and(|next| next == element) {
                next_shared = shared.next();
            }
        }
    }
    (!out.is_empty()).then_some(Value::Array(out))
}

/// Removes the paths of `set` from a value: a member goes with everything below it.
/// Maps and lists emptied by the removal go too (kube leaves a `null` there).
pub(crate) fn remove_items(value: &Value, set: &Set, node: TypeNode<'_>) -> Value {
    remove_node(value, set, node).unwrap_or_else(|| Value::Object(Map::new()))
}

/// Removes below one value; `None` when nothing is left of a map or list.
fn remove_node(value: &Value, set: &Set, node: TypeNode<'_>) -> Option<Value> {
    match node.shape(Some(value)) {
        Shape::Scalar(_) => Some(value.clone()),
        Shape::Map(map) => {
            let Value::Object(object) = value else {
                return Some(value.clone());
            };
            if object.is_empty() || map.atomic {
                return None;
            }
            let mut out = Map::new();
            for (key, child) in object {
                let element = PathElement::Field(key.clone());
                if set.members().contains(&element) {
                    continue;
                }
                let kept = match set.child(&element) {
                    Some(below) => remove_node(child, below, map.child(key)),
                    None => Some(child.clone()),
                };
                if let Some(kept) = kept {
                    out.insert(key.clone(), kept);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Shape::List(list) => {
            let Value::Array(items) = value else {
                return Some(value.clone());
            };
            if items.is_empty() || list.is_atomic() {
                return None;
            }
            let mut out = Vec::new();
            for item in items {
                let Ok(element) = list.item_element(item) else {
                    out.push(item.clone());
                    continue;
                };
                if set.members().contains(&element) {
                    continue;
                }
                match set.child(&element) {
                    Some(below) => out.push(
                        remove_node(item, below, list.element)
                            .unwrap_or_else(|| Value::Object(Map::new())),
                    ),
                    None => out.push(item.clone()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
    }
}

/// The set plus, as members, the declared struct fields it has paths below
/// (so pruning a struct's last field prunes the struct; maps are not affected).
pub(crate) fn ensure_named_fields_are_members(set: &Set, node: TypeNode<'_>) -> Set {
    let shape = node.shape(None);
    let mut out = Set::new();
    for member in set.members() {
        out.insert_member(member.clone());
    }
    for (element, below) in set.children() {
        let child = match (element, &shape) {
            (PathElement::Field(name), Shape::Map(map)) => {
                if map.declares(name) {
                    out.insert_member(element.clone());
                }
                map.child(name)
            }
            (PathElement::Key(_), Shape::List(list)) => list.element,
            _ => node.untyped(),
        };
        out.insert_child(
            element.clone(),
            ensure_named_fields_are_members(below, child),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::schema::Schema;
    use serde_json::json;

    fn components() -> Map<String, Value> {
        serde_json::from_value(json!({
            "Thing": {"type": "object", "properties": {
                "name": {"type": "string"},
                "replicas": {"type": "integer"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "args": {"type": "array", "items": {"type": "string"}},
                "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {
                              "name": {"type": "string"}, "value": {"type": "string"}, "extra": {"type": "string"}}}},
                "nested": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                "atomic": {"type": "object", "x-kubernetes-map-type": "atomic",
                           "properties": {"a": {"type": "string"}}}
            }}
        }))
        .unwrap()
    }

    fn with_root<T>(f: impl FnOnce(TypeNode<'_>) -> T) -> T {
        let components = components();
        let root = json!({"$ref": "#/components/schemas/Thing"});
        let schema = Schema::new(&root, &components);
        f(schema.root())
    }

    fn fields(set: &Set) -> Value {
        set.to_fields_v1()
    }

    #[test]
    fn field_sets_own_leaves_items_and_map_entries() {
        let set = with_root(|node| {
            to_field_set(
                &json!({
                    "name": "x", "labels": {"a": "1"}, "tags": ["t"], "args": ["a"],
                    "items": [{"name": "i", "value": "v"}], "nested": {"a": "1"}, "atomic": {"a": "1"}
                }),
                node,
            )
            .unwrap()
        });
        assert_eq!(
            fields(&set),
            json!({
                "f:args": {}, "f:atomic": {},
                "f:items": {"k:{\"name\":\"i\"}": {".": {}, "f:name": {}, "f:value": {}}},
                "f:labels": {"f:a": {}}, "f:name": {}, "f:nested": {"f:a": {}},
                "f:tags": {"v:\"t\"": {}}
            })
        );
    }

    #[test]
    fn compare_marks_new_structs_and_items() {
        let comparison = with_root(|node| {
            compare(
                &json!({"name": "x", "items": [{"name": "i", "value": "v"}]}),
                &json!({"name": "y", "labels": {"a": "1"}, "items": [{"name": "j"}], "nested": {}}),
                node,
            )
            .unwrap()
        });
        assert_eq!(
            fields(&comparison.added),
            json!({"f:items": {"k:{\"name\":\"j\"}": {".": {}, "f:name": {}}},
                   "f:labels": {".": {}, "f:a": {}}, "f:nested": {}})
        );
        assert_eq!(fields(&comparison.modified), json!({"f:name": {}}));
        assert_eq!(
            fields(&comparison.removed),
            json!({"f:items": {"k:{\"name\":\"i\"}": {".": {}, "f:name": {}, "f:value": {}}}})
        );
    }

    #[test]
    fn merge_follows_list_and_map_types() {
        let merged = with_root(|node| {
            merge(
                &json!({"labels": {"a": "1"}, "tags": ["x"], "args": ["1", "2"],
                        "items": [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}],
                        "atomic": {"a": "1"}, "nested": {"a": "1"}}),
                &json!({"labels": {"b": "2"}, "tags": ["y"], "args": ["3"],
                        "items": [{"name": "c"}, {"name": "a", "extra": "e"}],
                        "atomic": {}, "nested": {"b": "2"}}),
                node,
            )
            .unwrap()
        });
        assert_eq!(
            merged,
            json!({"labels": {"a": "1", "b": "2"}, "tags": ["x", "y"], "args": ["3"],
                   "items": [{"name": "c"}, {"name": "a", "value": "1", "extra": "e"}, {"name": "b", "value": "2"}],
                   "atomic": {}, "nested": {"a": "1", "b": "2"}})
        );
    }

    #[test]
    fn merge_keeps_live_order_for_live_only_items() {
        let merged = with_root(|node| {
            merge(
                &json!({"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
                &json!({"items": [{"name": "c"}, {"name": "d"}, {"name": "a"}]}),
                node,
            )
            .unwrap()
        });
        assert_eq!(
            merged["items"],
            json!([{"name": "b"}, {"name": "c"}, {"name": "d"}, {"name": "a"}])
        );
    }

    #[test]
    fn validation_reports_kube_errors() {
        let errors = with_root(|node| {
            validate(
                &json!({"bogus": 1, "replicas": "x",
                        "items": [{"name": "a"}, {"name": "a"}, {"value": "v"}]}),
                node,
                true,
                false,
            )
            .unwrap_err()
        });
        assert_eq!(
            errors.to_string(),
            concat!(
                "errors:\n  .bogus: field not declared in schema\n",
                "  .replicas: expected numeric (int or float), got string\n",
                "  .items: duplicate entries for key [name=\"a\"]\n",
                "  .items: element 2: associative list with keys has an element that omits key field \"name\" (and doesn't have default value)"
            )
        );
    }

    #[test]
    fn removal_drops_members_and_emptied_parents() {
        let removed = with_root(|node| {
            let mut set = Set::new();
            set.insert(&[
                PathElement::Field("labels".into()),
                PathElement::Field("a".into()),
            ]);
            set.insert(&[
                PathElement::Field("items".into()),
                PathElement::Key(vec![("name".into(), json!("a"))]),
            ]);
            set.insert(&[
                PathElement::Field("tags".into()),
                PathElement::Value(json!("x")),
            ]);
            remove_items(
                &json!({"labels": {"a": "1"}, "tags": ["x", "y"], "name": "n",
                        "items": [{"name": "a"}, {"name": "b"}]}),
                &set,
                node,
            )
        });
        assert_eq!(
            removed,
            json!({"tags": ["y"], "name": "n", "items": [{"name": "b"}]})
        );
    }

    #[test]
    fn named_fields_become_members() {
        let set = with_root(|node| {
            let mut set = Set::new();
            set.insert(&[
                PathElement::Field("nested".into()),
                PathElement::Field("a".into()),
            ]);
            set.insert(&[
                PathElement::Field("labels".into()),
                PathElement::Field("a".into()),
            ]);
            ensure_named_fields_are_members(&set, node)
        });
        assert_eq!(
            fields(&set),
            json!({"f:labels": {".": {}, "f:a": {}}, "f:nested": {".": {}, "f:a": {}}})
        );
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(values_equal(
            &json!({"a": [1, 2.0]}),
            &json!({"a": [1.0, 2]})
        ));
        assert!(!values_equal(&json!(1), &json!("1")));
    }
}
