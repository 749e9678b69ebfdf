//! RFC 6902 JSON patch, with the behaviour of kube-apiserver's patch library.
//!
//! kube-apiserver applies JSON patches with `gopkg.in/evanphx/json-patch.v4`,
//! which differs from the RFC (and from the `json-patch` crate) in ways a client
//! can see, so this module follows that library rather than the crate:
//!
//! - operations are checked when applied, not when decoded: an unknown `op`, a
//!   missing `path` or `from` fails with 422, not 400, and a missing `value`
//!   means `null`;
//! - `replace` of a missing object member adds it; `test` of a missing member
//!   against `null` passes;
//! - negative array indices count from the end;
//! - `test` compares objects one way: every member of the document's value must
//!   be in the patch's value;
//! - `copy` may not grow the document by more than 3 MiB in total;
//! - error messages are the library's, e.g. `testing value /a failed: test failed`.
//!
//! kube-apiserver rejects patches of more than 10000 operations with 413.

use serde_json::{Map, Value};

use super::{PatchError, json_kind};

/// The most operations kube-apiserver accepts in one JSON patch.
pub const MAX_OPERATIONS: usize = 10_000;
/// The most bytes `copy` operations may add to a document (`--json-patch-max-copy-bytes`).
pub const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// The library's suffix for a missing path or key.
const MISSING: &str = "missing value";
/// The library's suffix for an out-of-range index.
const INVALID_INDEX: &str = "invalid index referenced";

/// Applies a decoded JSON patch document (a list of operations) to `original`.
pub fn apply(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let operations = decode_operations(patch)?;
    if operations.len() > MAX_OPERATIONS {
        return Err(PatchError::TooManyOperations {
            max: MAX_OPERATIONS,
            got: operations.len(),
        });
    }
    let mut doc = original.clone();
    let mut copied = 0;
    for operation in operations {
        apply_operation(&mut doc, operation, &mut copied)?;
    }
    Ok(doc)
}

/// One operation object; `None` stands for a `null` entry in the list.
type Operation<'a> = Option<&'a Map<String, Value>>;

/// Checks the document is a list of objects, as Go's decoder into `jsonpatch.Patch` does.
fn decode_operations(patch: &Value) -> Result<Vec<Operation<'_>>, PatchError> {
    let items = match patch {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => {
            return Err(PatchError::UnexpectedJsonType {
                found: json_kind(other),
                expected: "jsonpatch.Patch",
            });
        }
    };
    items
        .iter()
        .map(|item| match item {
            Value::Null => Ok(None),
            Value::Object(operation) => Ok(Some(operation)),
            other => Err(PatchError::UnexpectedJsonType {
                found: json_kind(other),
                expected: "jsonpatch.Operation",
            }),
        })
        .collect()
}

/// Applies one operation; a failure is [`PatchError::OperationFailed`] in the library's words.
fn apply_operation(
    doc: &mut Value,
    operation: Operation<'_>,
    copied: &mut usize,
) -> Result<(), PatchError> {
    let kind = operation
        .and_then(|operation| operation.get("op"))
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let operation = Op(operation);
    match kind {
        "add" => add(doc, operation),
        "remove" => remove(doc, operation),
        "replace" => replace(doc, operation),
        "move" => move_value(doc, operation),
        "test" => test(doc, operation),
        "copy" => copy(doc, operation, copied),
        other => Err(failed(format!("Unexpected kind: {other}"))),
    }
}

/// Accessors for the fields of one operation (`None` for a `null` list entry).
#[derive(Clone, Copy)]
struct Op<'a>(Operation<'a>);

impl<'a> Op<'a> {
    /// `path`, or the library's error when it is missing or not a string.
    fn path(self) -> Result<&'a str, PatchError> {
        self.string("path", "operation missing path field")
    }

    /// `from`, or the library's error when it is missing or not a string.
    fn from(self) -> Result<&'a str, PatchError> {
        self.string("from", "operation, missing from field")
    }

    /// A string field, with Go's decoding errors.
    fn string(self, field: &str, missing: &str) -> Result<&'a str, PatchError> {
        match self.get(field) {
            None | Some(Value::Null) => Err(failed(format!("{missing}: {MISSING}"))),
            Some(Value::String(text)) => Ok(text),
            Some(other) => Err(failed(format!(
                "json: cannot unmarshal {} into Go value of type string",
                json_kind(other)
            ))),
        }
    }

    /// `value`; absent and `null` both mean `null`.
    fn value(self) -> Value {
        self.get("value").cloned().unwrap_or(Value::Null)
    }

    /// Whether the operation has a `value` member (even `null`).
    fn has_value(self) -> bool {
        self.get("value").is_some()
    }

    /// A member of the operation object.
    fn get(self, field: &str) -> Option<&'a Value> {
        self.0.and_then(|operation| operation.get(field))
    }
}

/// The `add` operation.
fn add(doc: &mut Value, op: Op<'_>) -> Result<(), PatchError> {
    let path = op
        .path()
        .map_err(|_| failed(format!("add operation failed to decode path: {MISSING}")))?;
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        failed(format!(
            "add operation does not apply: doc is missing path: \"{path}\": {MISSING}"
        ))
    })?;
    container_add(container, &key, op.value())
        .map_err(|error| failed(format!("error in add for path: '{path}': {error}")))
}

/// The `remove` operation.
fn remove(doc: &mut Value, op: Op<'_>) -> Result<(), PatchError> {
    let path = op
        .path()
        .map_err(|_| failed(format!("remove operation failed to decode path: {MISSING}")))?;
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        failed(format!(
            "remove operation does not apply: doc is missing path: \"{path}\": {MISSING}"
        ))
    })?;
    container_remove(container, &key)
        .map(drop)
        .map_err(|error| failed(format!("error in remove for path: '{path}': {error}")))
}

/// The `replace` operation.
fn replace(doc: &mut Value, op: Op<'_>) -> Result<(), PatchError> {
    let path = op
        .path()
        .map_err(|error| failed(format!("replace operation failed to decode path: {error}")))?;
    if path.is_empty() {
        return replace_root(doc, op);
    }
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        failed(format!(
            "replace operation does not apply: doc is missing path: {path}: {MISSING}"
        ))
    })?;
    if container_get(container, &key).is_err() {
        return Err(failed(format!(
            "replace operation does not apply: doc is missing key: {path}: {MISSING}"
        )));
    }
    container_set(container, &key, op.value())
        .map_err(|error| failed(format!("error in remove for path: '{path}': {error}")))
}

/// `replace` of the whole document, which must become an object or a list.
fn replace_root(doc: &mut Value, op: Op<'_>) -> Result<(), PatchError> {
    match op.value() {
        value @ (Value::Object(_) | Value::Array(_)) => {
            *doc = value;
            Ok(())
        }
        _ => Err(failed(
            "replace operation value must be object or array: %!w(<nil>)".to_owned(),
        )),
    }
}

/// The `move` operation.
fn move_value(doc: &mut Value, op: Op<'_>) -> Result<(), PatchError> {
    let from = op
        .from()
        .map_err(|error| failed(format!("move operation failed to decode from: {error}")))?;
    let (container, key) = find_object(doc, from).ok_or_else(|| {
        failed(format!(
            "move operation does not apply: doc is missing from path: {from}: {MISSING}"
        ))
    })?;
    container_get(container, &key)
        .map_err(|error| failed(format!("error in move for path: '{key}': {error}")))?;
    let value = container_remove(container, &key)
        .map_err(|error| failed(format!("error in move for path: '{key}': {error}")))?;
    let path = op
        .path()
        .map_err(|error| failed(format!("move operation failed to decode path: {error}")))?;
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        failed(format!(
            "move operation does not apply: doc is missing destination path: {path}: {MISSING}"
        ))
    })?;
    container_add(container, &key, value)
        .map_err(|error| failed(format!("error in move for path: '{path}': {error}")))
}

/// The `test` operation.
fn test(doc: &mut Value, op: Op<'_>) -> Result<(), PatchError> {
    let path = op
        .path()
        .map_err(|error| failed(format!("test operation failed to decode path: {error}")))?;
    let mismatch = || failed(format!("testing value {path} failed: test failed"));
    if path.is_empty() {
        return if op.has_value() && library_equal(doc, &op.value()) {
            Ok(())
        } else {
            Err(mismatch())
        };
    }
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        failed(format!(
            "test operation does not apply: is missing path: {path}: {MISSING}"
        ))
    })?;
    let current = container_get(container, &key)
        .map_err(|error| failed(format!("error in test for path: '{path}': {error}")))?;
    let expected = op.value();
    let passed = match current {
        None => expected.is_null(),
        Some(current) => op.has_value() && library_equal(current, &expected),
    };
    if passed { Ok(()) } else { Err(mismatch()) }
}

/// The `copy` operation; `copied` accumulates the bytes copied so far.
fn copy(doc: &mut Value, op: Op<'_>, copied: &mut usize) -> Result<(), PatchError> {
    let from = op
        .from()
        .map_err(|error| failed(format!("copy operation failed to decode from: {error}")))?;
    let (container, key) = find_object(doc, from).ok_or_else(|| {
        failed(format!(
            "copy operation does not apply: doc is missing from path: {from}: {MISSING}"
        ))
    })?;
    let value = container_get(container, &key)
        .map_err(|error| failed(format!("error in copy for from: '{from}': {error}")))?
        .cloned();
    let path = op
        .path()
        .map_err(|_| failed(format!("copy operation failed to decode path: {MISSING}")))?;
    let (container, key) = find_object(doc, path).ok_or_else(|| {
        failed(format!(
            "copy operation does not apply: doc is missing destination path: {path}: {MISSING}"
        ))
    })?;
    *copied += value.as_ref().map_or(0, encoded_size);
    if *copied > MAX_COPY_BYTES {
        return Err(failed(format!(
            "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_COPY_BYTES}"
        )));
    }
    container_add(container, &key, value.unwrap_or(Value::Null))
        .map_err(|error| failed(format!("error while adding value during copy: {error}")))
}

/// The size Go's encoder gives a value (compact, with `<`, `>`, `&`, U+2028/9 escaped).
fn encoded_size(value: &Value) -> usize {
    let text = value.to_string();
    let escaped: usize = text
        .chars()
        .map(|c| match c {
            '<' | '>' | '&' => 5,
            '\u{2028}' | '\u{2029}' => 3,
            _ => 0,
        })
        .sum();
    text.len() + escaped
}

/// Decodes one JSON pointer token (`~1` is `/`, `~0` is `~`).
fn decode_token(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// The library's `findObject`: the container holding the last token of `path`.
///
/// As in the library, everything before the first `/` is ignored, and a path
/// without `/` (including the empty path) finds nothing.
fn find_object<'a>(doc: &'a mut Value, path: &str) -> Option<(&'a mut Value, String)> {
    let tokens: Vec<&str> = path.split('/').collect();
    let (last, parents) = tokens.split_last()?;
    let parents = parents.get(1..)?;
    let mut container = doc;
    for token in parents {
        let next = child_mut(container, &decode_token(token))?;
        if !(next.is_object() || next.is_array()) {
            return None;
        }
        container = next;
    }
    Some((container, decode_token(last)))
}

/// A non-null child of an object or list, as the library's `get` finds it.
fn child_mut<'a>(container: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    let child = match container {
        Value::Object(map) => map.get_mut(key),
        Value::Array(items) => {
            let index = existing_index(key, items.len()).ok()?;
            items.get_mut(index)
        }
        _ => None,
    };
    child.filter(|child| !child.is_null())
}

/// The library's `get`: `Ok(None)` for a missing or null member, `Err` for a bad index.
fn container_get<'a>(container: &'a Value, key: &str) -> Result<Option<&'a Value>, PatchError> {
    let value = match container {
        Value::Object(map) => map.get(key),
        Value::Array(items) => items.get(existing_index(key, items.len())?),
        _ => None,
    };
    Ok(value.filter(|value| !value.is_null()))
}

/// The library's `set` (used by `replace` once the key is known to exist).
fn container_set(container: &mut Value, key: &str, value: Value) -> Result<(), PatchError> {
    match container {
        Value::Object(map) => {
            map.insert(key.to_owned(), value);
            Ok(())
        }
        Value::Array(items) => {
            let index = existing_index(key, items.len())?;
            if let Some(slot) = items.get_mut(index) {
                *slot = value;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The library's `add`: set a member, or insert into a list (`-` appends).
fn container_add(container: &mut Value, key: &str, value: Value) -> Result<(), PatchError> {
    match container {
        Value::Object(map) => {
            map.insert(key.to_owned(), value);
            Ok(())
        }
        Value::Array(items) => {
            if key == "-" {
                items.push(value);
                return Ok(());
            }
            let index = parse_index(key).map_err(|error| {
                failed(format!(
                    "value was not a proper array index: '{key}': {error}"
                ))
            })?;
            let index = resolve_index(index, items.len() + 1)?;
            items.insert(index, value);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The library's `remove`, returning the removed value.
fn container_remove(container: &mut Value, key: &str) -> Result<Value, PatchError> {
    match container {
        Value::Object(map) => remove_member(map, key).ok_or_else(|| {
            failed(format!(
                "Unable to remove nonexistent key: {key}: {MISSING}"
            ))
        }),
        Value::Array(items) => {
            let index = resolve_index(parse_index(key)?, items.len())?;
            Ok(items.remove(index))
        }
        _ => Ok(Value::Null),
    }
}

/// Removes a member while keeping the order of the others.
fn remove_member(map: &mut Map<String, Value>, key: &str) -> Option<Value> {
    map.shift_remove(key)
}

/// An index of an existing element (negative counts from the end), as `get` checks it.
fn existing_index(key: &str, len: usize) -> Result<usize, PatchError> {
    let index = parse_index(key)?;
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let adjusted = if index < 0 {
        if index < -len {
            return Err(failed(format!(
                "Unable to access invalid index: {index}: {INVALID_INDEX}"
            )));
        }
        index + len
    } else {
        index
    };
    if adjusted >= len {
        return Err(failed(format!(
            "Unable to access invalid index: {adjusted}: {INVALID_INDEX}"
        )));
    }
    usize::try_from(adjusted).map_err(|_| {
        failed(format!(
            "Unable to access invalid index: {adjusted}: {INVALID_INDEX}"
        ))
    })
}

/// A position for `add` (bound is `len + 1`) or `remove` (bound is `len`).
fn resolve_index(index: i64, bound: usize) -> Result<usize, PatchError> {
    let bound = i64::try_from(bound).unwrap_or(i64::MAX);
    let invalid = || {
        failed(format!(
            "Unable to access invalid index: {index}: {INVALID_INDEX}"
        ))
    };
    if index >= bound || index < -bound {
        return Err(invalid());
    }
    let adjusted = if index < 0 { index + bound } else { index };
    usize::try_from(adjusted).map_err(|_| invalid())
}

/// Go's `strconv.Atoi`, with its error text.
fn parse_index(key: &str) -> Result<i64, PatchError> {
    key.parse::<i64>().map_err(|error| {
        let reason = match error.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        failed(format!("strconv.Atoi: parsing {key:?}: {reason}"))
    })
}

/// A failed operation, in the library's words.
fn failed(text: String) -> PatchError {
    PatchError::OperationFailed(text)
}

/// The library's value equality: every member of `current` must be in `expected`.
fn library_equal(current: &Value, expected: &Value) -> bool {
    match (current, expected) {
        (Value::Object(current), Value::Object(expected)) => {
            current
                .iter()
                .all(|(key, value)| match (value, expected.get(key)) {
                    (_, None) => false,
                    (Value::Null, Some(other)) => other.is_null(),
                    (value, Some(other)) => library_equal(value, other),
                })
        }
        (Value::Array(current), Value::Array(expected)) => {
            current.len() == expected.len()
                && current
                    .iter()
                    .zip(expected)
                    .all(|(a, b)| library_equal(a, b))
        }
        (Value::Object(_) | Value::Array(_), _) => false,
        (current, expected) => current == expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(doc: Value, patch: Value) -> Result<Value, PatchError> {
        apply(&doc, &patch)
    }

    fn failure(doc: Value, patch: Value) -> String {
        match run(doc, patch) {
            Err(PatchError::OperationFailed(message)) => message,
            other => panic!("expected an operation failure, got {other:?}"),
        }
    }

    #[test]
    fn operations_apply_table() {
        let cases: Vec<(Value, Value, Value)> = vec![
            (
                json!({"a": 1}),
                json!([{"op": "add", "path": "/b", "value": 2}]),
                json!({"a": 1, "b": 2}),
            ),
            (
                json!({"a": [1, 2]}),
                json!([{"op": "add", "path": "/a/1", "value": 9}]),
                json!({"a": [1, 9, 2]}),
            ),
            (
                json!({"a": [1, 2]}),
                json!([{"op": "add", "path": "/a/-", "value": 9}]),
                json!({"a": [1, 2, 9]}),
            ),
            (
                json!({"a": [1, 2]}),
                json!([{"op": "add", "path": "/a/2", "value": 9}]),
                json!({"a": [1, 2, 9]}),
            ),
            (
                json!({"a": [1, 2]}),
                json!([{"op": "add", "path": "/a/-1", "value": 9}]),
                json!({"a": [1, 2, 9]}),
            ),
            (
                json!({"a": 1}),
                json!([{"op": "add", "path": "/b"}]),
                json!({"a": 1, "b": null}),
            ),
            (
                json!({"a": 1, "b": 2}),
                json!([{"op": "remove", "path": "/a"}]),
                json!({"b": 2}),
            ),
            (
                json!({"a": [1, 2, 3]}),
                json!([{"op": "remove", "path": "/a/-1"}]),
                json!({"a": [1, 2]}),
            ),
            (
                json!({"a": 1}),
                json!([{"op": "replace", "path": "/a", "value": 2}]),
                json!({"a": 2}),
            ),
            (
                json!({"a": 1}),
                json!([{"op": "replace", "path": "/b", "value": 2}]),
                json!({"a": 1, "b": 2}),
            ),
            (
                json!({"a": [1, 2]}),
                json!([{"op": "replace", "path": "/a/-1", "value": 5}]),
                json!({"a": [1, 5]}),
            ),
            (
                json!({"a": {"b": 1}}),
                json!([{"op": "move", "from": "/a/b", "path": "/c"}]),
                json!({"a": {}, "c": 1}),
            ),
            (
                json!({"a": [1, 2, 3]}),
                json!([{"op": "move", "from": "/a/0", "path": "/a/2"}]),
                json!({"a": [2, 3, 1]}),
            ),
            (
                json!({"a": {"b": 1}}),
                json!([{"op": "copy", "from": "/a", "path": "/c"}]),
                json!({"a": {"b": 1}, "c": {"b": 1}}),
            ),
            (
                json!({"a": 1}),
                json!([{"op": "copy", "from": "/x", "path": "/c"}]),
                json!({"a": 1, "c": null}),
            ),
            (
                json!({"a/b": 1, "m~n": 2}),
                json!([{"op": "remove", "path": "/a~1b"}, {"op": "remove", "path": "/m~0n"}]),
                json!({}),
            ),
            (
                json!({"a": 1}),
                json!([{"op": "test", "path": "/a", "value": 1}]),
                json!({"a": 1}),
            ),
            (
                json!({"a": 1}),
                json!([{"op": "test", "path": "/missing", "value": null}]),
                json!({"a": 1}),
            ),
            (
                json!({"a": {"x": 1}}),
                json!([{"op": "test", "path": "/a", "value": {"x": 1, "y": 2}}]),
                json!({"a": {"x": 1}}),
            ),
            (
                json!({"a": 1}),
                json!([{"op": "replace", "path": "", "value": {"z": 1}}]),
                json!({"z": 1}),
            ),
            (json!({"a": 1}), json!(null), json!({"a": 1})),
        ];
        for (doc, patch, expected) in cases {
            assert_eq!(
                run(doc.clone(), patch.clone()).unwrap(),
                expected,
                "{patch} on {doc}"
            );
        }
    }

    #[test]
    fn paths_ignore_text_before_first_slash() {
        let patched = run(
            json!({"a": 1}),
            json!([{"op": "add", "path": "x/b", "value": 2}]),
        )
        .unwrap();
        assert_eq!(patched, json!({"a": 1, "b": 2}));
    }

    #[test]
    fn failures_use_library_messages() {
        let cases: Vec<(Value, Value, &str)> = vec![
            (
                json!({"a": 1}),
                json!([{"op": "test", "path": "/a", "value": 2}]),
                "testing value /a failed: test failed",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "test", "path": "/b", "value": 2}]),
                "testing value /b failed: test failed",
            ),
            (
                json!({"a": {"x": 1, "y": 2}}),
                json!([{"op": "test", "path": "/a", "value": {"x": 1}}]),
                "testing value /a failed: test failed",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "add", "path": "/x/y", "value": 2}]),
                "add operation does not apply: doc is missing path: \"/x/y\": missing value",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "add", "path": "", "value": 2}]),
                "add operation does not apply: doc is missing path: \"\": missing value",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "add", "value": 2}]),
                "add operation failed to decode path: missing value",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "remove", "path": "/b"}]),
                "error in remove for path: '/b': Unable to remove nonexistent key: b: missing value",
            ),
            (
                json!({"a": [1]}),
                json!([{"op": "remove", "path": "/a/5"}]),
                "error in remove for path: '/a/5': Unable to access invalid index: 5: invalid index referenced",
            ),
            (
                json!({"a": [1]}),
                json!([{"op": "add", "path": "/a/x", "value": 1}]),
                "error in add for path: '/a/x': value was not a proper array index: 'x': strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            (
                json!({"a": [1]}),
                json!([{"op": "add", "path": "/a/3", "value": 1}]),
                "error in add for path: '/a/3': Unable to access invalid index: 3: invalid index referenced",
            ),
            (
                json!({"a": [1]}),
                json!([{"op": "replace", "path": "/a/1", "value": 1}]),
                "replace operation does not apply: doc is missing key: /a/1: missing value",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "replace", "value": 1}]),
                "replace operation failed to decode path: operation missing path field: missing value",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "replace", "path": "", "value": 1}]),
                "replace operation value must be object or array: %!w(<nil>)",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "move", "from": "/b", "path": "/c"}]),
                "error in move for path: 'b': Unable to remove nonexistent key: b: missing value",
            ),
            (
                json!({"a": {"b": 1}}),
                json!([{"op": "move", "from": "/a", "path": "/a/b"}]),
                "move operation does not apply: doc is missing destination path: /a/b: missing value",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "move", "path": "/c"}]),
                "move operation failed to decode from: operation, missing from field: missing value",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "copy", "from": "/x/y", "path": "/c"}]),
                "copy operation does not apply: doc is missing from path: /x/y: missing value",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "frobnicate", "path": "/a"}]),
                "Unexpected kind: frobnicate",
            ),
            (
                json!({"a": 1}),
                json!([{"path": "/a"}]),
                "Unexpected kind: unknown",
            ),
            (json!({"a": 1}), json!([null]), "Unexpected kind: unknown"),
            (
                json!({"a": 1}),
                json!([{"op": "add", "path": 5, "value": 1}]),
                "add operation failed to decode path: missing value",
            ),
            (
                json!({"a": 1}),
                json!([{"op": "test", "path": 5}]),
                "test operation failed to decode path: json: cannot unmarshal number into Go value of type string",
            ),
        ];
        for (doc, patch, message) in cases {
            assert_eq!(
                failure(doc.clone(), patch.clone()),
                message,
                "{patch} on {doc}"
            );
        }
    }

    #[test]
    fn failed_patch_leaves_original_untouched() {
        let original = json!({"a": 1});
        let patch = json!([{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 3}]);
        assert!(apply(&original, &patch).is_err());
        assert_eq!(original, json!({"a": 1}));
    }

    #[test]
    fn decoding_errors_are_bad_requests() {
        let not_list = run(json!({}), json!({"op": "add"})).unwrap_err();
        assert_eq!(
            not_list.to_string(),
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        );
        assert_eq!(not_list.code(), 400);
        let not_object = run(json!({}), json!(["add"])).unwrap_err();
        assert_eq!(
            not_object.to_string(),
            "json: cannot unmarshal string into Go value of type jsonpatch.Operation"
        );
    }

    #[test]
    fn operation_limit_is_enforced() {
        let op = json!({"op": "test", "path": "/a", "value": 1});
        let at_limit = Value::Array(vec![op.clone(); MAX_OPERATIONS]);
        assert!(run(json!({"a": 1}), at_limit).is_ok());
        let over = Value::Array(vec![op; MAX_OPERATIONS + 1]);
        let error = run(json!({"a": 1}), over).unwrap_err();
        assert_eq!(
            error,
            PatchError::TooManyOperations {
                max: 10000,
                got: 10001
            }
        );
        assert_eq!(error.code(), 413);
    }

    #[test]
    fn copy_size_is_limited() {
        let big = "x".repeat(1024 * 1024);
        let patch = json!([
            {"op": "copy", "from": "/a", "path": "/b"},
            {"op": "copy", "from": "/a", "path": "/c"},
            {"op": "copy", "from": "/a", "path": "/d"},
        ]);
        let message = failure(json!({"a": big}), patch);
        assert!(message.starts_with("Unable to complete the copy, the accumulated size increase of copy is 3145734, exceeding the limit 3145728"), "{message}");
    }
}
