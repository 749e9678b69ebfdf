//! Field sets and their `FieldsV1` encoding (structured-merge-diff's `fieldpath`).
//!
//! A [`Set`] is a tree of [`PathElement`]s: `members` are the paths the set
//! holds, `children` the subtrees below an element. A path can be a member and
//! have children at once (a list item that is owned as a whole and field by
//! field). `FieldsV1` writes the tree as JSON: one key per element (`f:name`,
//! `k:{"name":"web"}`, `v:"value"`, `i:0`), `{}` for a member without
//! children, and `".": {}` inside an element's object when it is both a member
//! and a parent.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use super::error::ApplyError;

/// One step of a path into an object.
#[derive(Debug, Clone)]
pub enum PathElement {
    /// A field of a struct or a key of a map (`f:name`, printed `.name`).
    Field(String),
    /// An item of a list map, named by its key fields sorted by name (`k:{"name":"web"}`).
    Key(Vec<(String, Value)>),
    /// An item of a set, named by its value (`v:"a"`, printed `[="a"]`).
    Value(Value),
    /// An item of a list by position (`i:0`); kube never writes these for typed lists.
    Index(i64),
}

impl PathElement {
    /// The rank of the element's kind in kube's ordering (fields, keys, values, indices).
    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The element as a `FieldsV1` key (`f:name`, `k:{...}`, `v:...`, `i:n`).
    pub fn to_fields_v1_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| format!("{}:{}", go_json_string(name), go_json(value)))
                    .collect();
                format!("k:{{{}}}", fields.join(","))
            }
            PathElement::Value(value) => format!("v:{}", go_json(value)),
            PathElement::Index(index) => format!("i:{index}"),
        }
    }

    /// Parses a `FieldsV1` key; `Ok(None)` for a prefix kube does not know (kube skips those).
    pub fn from_fields_v1_key(key: &str) -> Result<Option<PathElement>, ApplyError> {
        let invalid =
            |reason: String| ApplyError::Invalid(format!("parsing key as path element: {reason}"));
        let bytes = key.as_bytes();
        if bytes.len() < 2 {
            return Err(invalid("key must be 2 characters long".to_owned()));
        }
        if bytes[1] != b':' {
            return Ok(None);
        }
        let body = &key[2..];
        let element = match bytes[0] {
            b'f' => PathElement::Field(body.to_owned()),
            b'v' => PathElement::Value(
                serde_json::from_str(body).map_err(|error| invalid(error.to_string()))?,
            ),
            b'i' => PathElement::Index(
                body.parse()
                    .map_err(|_| invalid(format!("invalid index {body:?}")))?,
            ),
            b'k' => {
                let Value::Object(object) =
                    serde_json::from_str(body).map_err(|error| invalid(error.to_string()))?
                else {
                    return Err(invalid(format!("key {body:?} is not a JSON object")));
                };
                let mut fields: Vec<(String, Value)> = object.into_iter().collect();
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                PathElement::Key(fields)
            }
            _ => return Ok(None),
        };
        Ok(Some(element))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PathElement {
    /// kube's order: fields by name, then keys, then set values, then indices.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => compare_fields(a, b),
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl fmt::Display for PathElement {
    /// The element as kube prints it in conflicts: `.name`, `[name="web"]`, `[="a"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| format!("{name}={}", go_value_string(value)))
                    .collect();
                write!(f, "[{}]", fields.join(","))
            }
            PathElement::Value(value) => write!(f, "[={}]", go_value_string(value)),
            PathElement::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// A path printed as kube prints it (`.spec.containers[name="web"].image`).
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of paths into an object, stored as a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    /// An empty set.
    pub fn new() -> Set {
        Set::default()
    }

    /// Whether the set holds no path.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// The elements that are members at this level.
    pub(crate) fn members(&self) -> &BTreeSet<PathElement> {
        &self.members
    }

    /// The subtrees below this level.
    pub(crate) fn children(&self) -> &BTreeMap<PathElement, Set> {
        &self.children
    }

    /// Adds a path (the empty path, the root, is never stored).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Adds an element as a member of this level.
    pub(crate) fn insert_member(&mut self, element: PathElement) {
        self.members.insert(element);
    }

    /// Adds a subtree below an element (merged with any subtree already there).
    pub(crate) fn insert_child(&mut self, element: PathElement, set: Set) {
        if set.is_empty() {
            return;
        }
        let merged = match self.children.get(&element) {
            Some(mine) => mine.union(&set),
            None => set,
        };
        self.children.insert(element, merged);
    }

    /// Whether the set holds the path.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self
                .children
                .get(first)
                .is_some_and(|child| child.has(rest)),
        }
    }

    /// The subtree below one element, if any.
    pub fn child(&self, element: &PathElement) -> Option<&Set> {
        self.children.get(element)
    }

    /// Every path in either set.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (element, child) in &other.children {
            let merged = match out.children.get(element) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(element.clone(), merged);
        }
        out
    }

    /// The paths of `self` that are not in `other` (a member removes only itself, not its children).
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (element, child) in &self.children {
            let rest = match other.children.get(element) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                children.insert(element.clone(), rest);
            }
        }
        Set { members, children }
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (element, child) in &self.children {
            if let Some(theirs) = other.children.get(element) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    children.insert(element.clone(), both);
                }
            }
        }
        Set { members, children }
    }

    /// The paths of `self` that are neither in `other` nor below a member of `other`.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (element, child) in &self.children {
            if other.members.contains(element) {
                continue;
            }
            let rest = match other.children.get(element) {
                Some(theirs) => child.recursive_difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                children.insert(element.clone(), rest);
            }
        }
        Set { members, children }
    }

    /// Every path, in kube's iteration order (this level's members, then each subtree).
    pub fn paths(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    /// Appends the paths below `prefix` to `out`.
    fn collect_paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        for member in &self.members {
            let mut path = prefix.clone();
            path.push(member.clone());
            out.push(path);
        }
        for (element, child) in &self.children {
            prefix.push(element.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The set as a `FieldsV1` object, keys in kube's order.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1_contents(false))
    }

    /// The object for this level; `include_self` writes the `"."` marker first.
    fn fields_v1_contents(&self, include_self: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if include_self && !self.is_empty() {
            out.insert(".".to_owned(), Value::Object(Map::new()));
        }
        let mut elements: BTreeSet<&PathElement> = self.members.iter().collect();
        elements.extend(self.children.keys());
        for element in elements {
            let member = self.members.contains(element);
            let contents = match self.children.get(element) {
                Some(child) => child.fields_v1_contents(member),
                None => Map::new(),
            };
            out.insert(element.to_fields_v1_key(), Value::Object(contents));
        }
        out
    }

    /// Reads a `FieldsV1` object (unknown key prefixes are skipped, as kube does).
    pub fn from_fields_v1(fields: &Value) -> Result<Set, ApplyError> {
        let Value::Object(object) = fields else {
            return Err(ApplyError::Invalid(format!(
                "FieldsV1 must be a JSON object, got {fields}"
            )));
        };
        Ok(read_fields_v1(object)?.0.unwrap_or_default())
    }
}

/// Reads one level: the subtree below it (if it has one) and whether the level is itself a member.
fn read_fields_v1(object: &Map<String, Value>) -> Result<(Option<Set>, bool), ApplyError> {
    let mut children: Option<Set> = None;
    let mut is_member = false;
    for (key, value) in object {
        if key == "." {
            is_member = true;
            continue;
        }
        let Some(element) = PathElement::from_fields_v1_key(key)? else {
            continue;
        };
        let Value::Object(inner) = value else {
            return Err(ApplyError::Invalid(format!(
                "FieldsV1 entry {key:?} must be a JSON object"
            )));
        };
        let (grandchildren, child_is_member) = read_fields_v1(inner)?;
        let set = children.get_or_insert_with(Set::new);
        if child_is_member {
            set.members.insert(element.clone());
        }
        if let Some(grandchildren) = grandchildren {
            set.children.insert(element, grandchildren);
        }
    }
    if children.is_none() {
        is_member = true;
    }
    Ok((children, is_member))
}

/// Orders key field lists as kube does: field by field (name, then value), shorter first.
fn compare_fields(a: &[(String, Value)], b: &[(String, Value)]) -> Ordering {
    for ((a_name, a_value), (b_name, b_value)) in a.iter().zip(b) {
        let order = a_name
            .cmp(b_name)
            .then_with(|| compare_values(a_value, b_value));
        if order != Ordering::Equal {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

/// kube's total order on values: numbers, strings, booleans, lists, maps, null.
pub(crate) fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(value: &Value) -> u8 {
        match value {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => compare_numbers(a, b),
        (Value::String(a), Value::String(b)) => a.cmp(b),
        (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
        (Value::Array(a), Value::Array(b)) => {
            for (a, b) in a.iter().zip(b) {
                let order = compare_values(a, b);
                if order != Ordering::Equal {
                    return order;
                }
            }
            a.len().cmp(&b.len())
        }
        (Value::Object(a), Value::Object(b)) => compare_maps(a, b),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Compares two JSON numbers by value (integers exactly, otherwise as floats).
fn compare_numbers(a: &serde_json::Number, b: &serde_json::Number) -> Ordering {
    let as_int = |n: &serde_json::Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (as_int(a), as_int(b)) {
        (Some(a), Some(b)) => a.cmp(&b),
        _ => {
            let (a, b) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
            a.partial_cmp(&b).unwrap_or(Ordering::Equal)
        }
    }
}

/// Compares maps by their keys in lexical order, as kube's `MapCompare` does.
fn compare_maps(a: &Map<String, Value>, b: &Map<String, Value>) -> Ordering {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for (index, key) in keys.into_iter().enumerate() {
        let order = if index == a.len() {
            Ordering::Less
        } else if index == b.len() {
            Ordering::Greater
        } else {
            match (a.get(key), b.get(key)) {
                (None, _) => Ordering::Greater,
                (_, None) => Ordering::Less,
                (Some(a), Some(b)) => compare_values(a, b),
            }
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// A value as structured-merge-diff's `value.ToString` prints it (strings Go-quoted).
fn go_value_string(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => match (number.as_i64(), number.as_u64()) {
            (Some(int), _) => int.to_string(),
            (_, Some(int)) => int.to_string(),
            _ => go_float(number.as_f64().unwrap_or(0.0)),
        },
        Value::String(text) => go_quote(text),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_value_string).collect();
            format!("[{}]", items.join(","))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            entries
                .into_iter()
                .map(|(key, value)| format!("{key}={}", go_value_string(value)))
                .collect()
        }
    }
}

/// A float as Go's `%v` prints it (`strconv` shortest `'g'`: exponent form from 1e6 or below 1e-4).
fn go_float(float: f64) -> String {
    let scientific = format!("{float:e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return scientific;
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        return float.to_string();
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// A string quoted as Go's `%q` (`strconv.Quote`) quotes it.
pub(crate) fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A value as compact JSON the way Go writes it: object keys sorted, `<`, `>`, `&` escaped.
pub(crate) fn go_json(value: &Value) -> String {
    match value {
        Value::String(text) => go_json_string(text),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_json).collect();
            format!("[{}]", items.join(","))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(key, value)| format!("{}:{}", go_json_string(key), go_json(value)))
                .collect();
            format!("{{{}}}", entries.join(","))
        }
        other => other.to_string(),
    }
}

/// A string as a JSON string the way Go's encoder writes it (HTML-safe).
fn go_json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(name: &str) -> PathElement {
        PathElement::Field(name.to_owned())
    }

    fn key(name: &str, value: Value) -> PathElement {
        PathElement::Key(vec![(name.to_owned(), value)])
    }

    /// Parses and re-encodes; the text must come back byte for byte.
    fn round_trip(fields: &str) {
        let value: Value = serde_json::from_str(fields).unwrap();
        let set = Set::from_fields_v1(&value).unwrap();
        assert_eq!(serde_json::to_string(&set.to_fields_v1()).unwrap(), fields);
    }

    #[test]
    fn round_trips_a_deployment_created_by_kubectl() {
        // kube-apiserver's managedFields for `kubectl create deployment` (an Update entry).
        round_trip(concat!(
            r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:progressDeadlineSeconds":{},"#,
            r#""f:replicas":{},"f:revisionHistoryLimit":{},"f:selector":{},"f:strategy":{"f:rollingUpdate":"#,
            r#"{".":{},"f:maxSurge":{},"f:maxUnavailable":{}},"f:type":{}},"f:template":{"f:metadata":"#,
            r#"{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":"#,
            r#"{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"#,
            r#""k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"#,
            r#""f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"#,
            r#""f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"#,
            r#""f:terminationGracePeriodSeconds":{}}}}}"#
        ));
    }

    #[test]
    fn round_trips_a_pod_applied_client_side() {
        // From a kube issue: kubectl-client-side-apply's entry on a Pod.
        round_trip(concat!(
            r#"{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},"#,
            r#""f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"#,
            r#""f:name":{},"f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"#,
            r#""f:containerPort":{},"f:protocol":{}}},"f:resources":{},"f:terminationMessagePath":{},"#,
            r#""f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"#,
            r#""f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}"#
        ));
    }

    #[test]
    fn round_trips_sets_and_the_docs_example() {
        round_trip(r#"{"f:data":{"f:key":{}},"f:metadata":{"f:labels":{"f:test-label":{}}}}"#);
        round_trip(r#"{"f:metadata":{"f:finalizers":{".":{},"v:\"a/b\"":{},"v:\"c\"":{}}}}"#);
        round_trip(r#"{"f:list":{"k:{\"a\":1}":{},"v:1":{},"v:\"x\"":{},"i:0":{}}}"#);
    }

    #[test]
    fn key_fields_are_sorted_and_escaped_like_go() {
        let value = json!({"f:spec": {"k:{\"protocol\":\"TCP\",\"containerPort\":80}": {}}});
        let set = Set::from_fields_v1(&value).unwrap();
        let encoded = serde_json::to_string(&set.to_fields_v1()).unwrap();
        assert_eq!(
            encoded,
            r#"{"f:spec":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{}}}"#
        );
        let element = PathElement::Value(json!("a<b"));
        assert_eq!(element.to_fields_v1_key(), r#"v:"a\u003cb""#);
    }

    #[test]
    fn members_and_children_encode_with_dot() {
        let mut set = Set::new();
        set.insert(&[
            field("spec"),
            field("containers"),
            key("name", json!("web")),
        ]);
        set.insert(&[
            field("spec"),
            field("containers"),
            key("name", json!("web")),
            field("image"),
        ]);
        set.insert(&[field("metadata"), field("labels"), field("app")]);
        assert_eq!(
            set.to_fields_v1(),
            json!({
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}}}}
            })
        );
        assert!(set.has(&[
            field("spec"),
            field("containers"),
            key("name", json!("web"))
        ]));
        assert!(!set.has(&[field("spec"), field("containers")]));
    }

    #[test]
    fn unknown_prefixes_are_skipped_and_bad_keys_rejected() {
        let set = Set::from_fields_v1(&json!({"x:foo": {}, "f:a": {}})).unwrap();
        assert_eq!(set.paths(), vec![vec![field("a")]]);
        assert!(Set::from_fields_v1(&json!({"f": {}})).is_err());
        assert!(Set::from_fields_v1(&json!({"k:[1]": {}})).is_err());
    }

    #[test]
    fn set_operations_follow_kube() {
        let mut a = Set::new();
        a.insert(&[field("a"), field("b"), field("c")]);
        a.insert(&[field("a"), field("d")]);
        a.insert(&[field("x")]);
        let mut b = Set::new();
        b.insert(&[field("a"), field("b")]);
        b.insert(&[field("x")]);
        // A plain difference keeps a.b.c (only the member a.b is removed).
        assert!(a.difference(&b).has(&[field("a"), field("b"), field("c")]));
        // A recursive difference drops everything below a.b.
        let recursive = a.recursive_difference(&b);
        assert_eq!(recursive.paths(), vec![vec![field("a"), field("d")]]);
        assert_eq!(a.intersection(&b).paths(), vec![vec![field("x")]]);
        assert_eq!(a.union(&b).paths().len(), 4);
    }

    #[test]
    fn paths_print_like_kube() {
        let path = [
            field("spec"),
            field("ports"),
            PathElement::Key(vec![
                ("containerPort".to_owned(), json!(80)),
                ("protocol".to_owned(), json!("TCP")),
            ]),
            field("name"),
        ];
        assert_eq!(
            path_string(&path),
            r#".spec.ports[containerPort=80,protocol="TCP"].name"#
        );
        assert_eq!(
            PathElement::Value(json!("a\"b")).to_string(),
            r#"[="a\"b"]"#
        );
        assert_eq!(PathElement::Index(3).to_string(), "[3]");
    }

    #[test]
    fn values_order_like_kube() {
        assert_eq!(compare_values(&json!(2), &json!(10)), Ordering::Less);
        assert_eq!(compare_values(&json!(1), &json!(1.0)), Ordering::Equal);
        assert_eq!(compare_values(&json!(5), &json!("a")), Ordering::Less);
        assert_eq!(compare_values(&json!("a"), &json!(true)), Ordering::Less);
        assert_eq!(compare_values(&json!(null), &json!({})), Ordering::Greater);
        assert!(field("z") < key("a", json!(1)));
        assert!(PathElement::Value(json!(1)) < PathElement::Index(0));
    }
}
