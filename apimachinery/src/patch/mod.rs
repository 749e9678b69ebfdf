//! PATCH bodies applied to stored objects, the way kube-apiserver applies them.
//!
//! Three of the four patch types kube-apiserver accepts are handled here, on
//! objects held as `serde_json::Value`:
//!
//! - [`json`]: RFC 6902 JSON patch (`application/json-patch+json`), with the
//!   quirks of the `evanphx/json-patch` v4 library kube-apiserver uses.
//! - [`merge`]: RFC 7386 JSON merge patch (`application/merge-patch+json`).
//! - [`strategic`]: strategic merge patch
//!   (`application/strategic-merge-patch+json`), driven by the OpenAPI v3
//!   schema of the type.
//!
//! Server-side apply (`application/apply-patch+yaml`) belongs to the field
//! manager; [`apply_patch`] refuses it with [`PatchError::ApplyNotHandled`].
//!
//! Every failure is a [`PatchError`] that knows the HTTP code, Status reason
//! and Status message kube-apiserver would answer with.
//!
//! ```
//! # use apimachinery::patch::{apply_patch, PatchType};
//! let original = serde_json::json!({"metadata": {"name": "cm", "labels": {"a": "1"}}});
//! let kind = PatchType::from_content_type("application/merge-patch+json; charset=utf-8").unwrap();
//! let patched = apply_patch(kind, &original, br#"{"metadata":{"labels":{"a":null,"b":"2"}}}"#, None).unwrap();
//! assert_eq!(patched["metadata"]["labels"], serde_json::json!({"b": "2"}));
//! ```

use serde_json::Value;

pub mod json;
pub mod merge;
pub mod strategic;

pub use strategic::{Schema, SchemaLookup};

/// The patch types kube-apiserver accepts, by request `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// The patch type for a `Content-Type` header, parameters such as `; charset=utf-8` ignored.
    ///
    /// Like kube-apiserver, everything from the first `;` on is dropped and the
    /// rest must match exactly (no trimming, case-sensitive).
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let media_type = match content_type.find(';') {
            Some(index) if index > 0 => &content_type[..index],
            _ => content_type,
        };
        [
            PatchType::Json,
            PatchType::Merge,
            PatchType::StrategicMerge,
            PatchType::Apply,
        ]
        .into_iter()
        .find(|kind| kind.content_type() == media_type)
    }

    /// The media type that selects this patch type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Why a patch could not be applied; `Display` is kube's underlying error text.
///
/// Use [`PatchError::code`], [`PatchError::reason`] and
/// [`PatchError::status_message`] to build the `Status` kube-apiserver returns:
/// for some errors kube hides the detail behind a generic message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// 400: the body is not JSON (the decoder's message).
    #[error("{0}")]
    InvalidJson(String),
    /// 400: the body is JSON of the wrong shape, e.g. a JSON patch that is not a list.
    #[error("json: cannot unmarshal {found} into Go value of type {expected}")]
    UnexpectedJsonType {
        /// What the body holds: `object`, `array`, `string`, `number` or `bool`.
        found: &'static str,
        /// The Go type kube decodes into, e.g. `jsonpatch.Patch`.
        expected: &'static str,
    },
    /// 413: a JSON patch has more operations than kube-apiserver allows.
    #[error("The allowed maximum operations in a JSON patch is {max}, got {got}")]
    TooManyOperations {
        /// The limit (10000).
        max: usize,
        /// The number of operations in the patch.
        got: usize,
    },
    /// 422: a JSON patch operation failed (`test` mismatch, missing path, bad index, ...).
    #[error("{0}")]
    OperationFailed(String),
    /// 400: a merge patch that is `null`, a scalar or not JSON.
    #[error("Invalid JSON Patch")]
    InvalidMergePatch,
    /// 422: the patched document cannot be an object (e.g. the patch replaced it by a list).
    #[error(" \"\" is invalid: patch: Invalid value: {patched:?}: {reason}")]
    InvalidResult {
        /// The patched document, as compact JSON.
        patched: String,
        /// Why it is not an object.
        reason: String,
    },
    /// 400: a `$deleteFromPrimitiveList` key without a field name.
    #[error("invalid patch format of primitive list")]
    BadPrimitiveListFormat,
    /// 400: `$retainKeys` is not a list, or the patch sets a key it does not retain.
    #[error("invalid patch format of retainKeys")]
    BadRetainKeysFormat,
    /// 400: a `$setElementOrder` key without a field name.
    #[error("invalid patch format of setElementOrder list")]
    BadSetElementOrderFormat,
    /// 422: a list whose elements are lists.
    #[error("lists of lists are not supported")]
    ListOfLists,
    /// 500: a `$patch` directive other than `replace`/`delete` (or `merge` on a map).
    #[error("unknown patch type: {directive} in map: {map}")]
    UnknownDirective {
        /// The directive, as Go's `%s` prints it.
        directive: String,
        /// The map holding it, as Go's `%v` prints it.
        map: String,
    },
    /// 500: `$patch: merge` inside a list.
    #[error("merging lists cannot yet be specified in the patch")]
    MergeDirectiveInList,
    /// 500: an element of a merged list lacks the merge key.
    #[error("map: {map} does not contain declared merge key: {key}")]
    MissingMergeKey {
        /// The element, as Go's `%v` prints it.
        map: String,
        /// The merge key.
        key: String,
    },
    /// 500: a list of objects has the merge strategy but no merge key.
    #[error("cannot merge lists without merge key for {0}")]
    NoMergeKeyDeclared(String),
    /// 500: a value has the wrong JSON type for its directive or list.
    #[error("expected a {expected}, but received a {actual}")]
    BadArgType {
        /// The Go type expected.
        expected: &'static str,
        /// The Go type found.
        actual: String,
    },
    /// 500: a merged list mixes element types.
    #[error("list element types are not identical: {0}")]
    MixedElementTypes(String),
    /// 500: element types asked of lists that are all empty.
    #[error("no elements in any of the given slices")]
    NoElements,
    /// 500: a list of objects holds something else at this index.
    #[error("value for key {0} is not a map")]
    NotAMap(usize),
    /// 500: the schema declares a patch strategy kube does not understand.
    #[error("unexpected patch strategy: {0}")]
    UnexpectedPatchStrategy(String),
    /// 500: a patch list is not in the order its `$setElementOrder` list gives.
    #[error("the order in patch list:\n{patch}\n doesn't match $setElementOrder list:\n{order}")]
    SetElementOrderMismatch {
        /// The patch list, as Go's `%v` prints it.
        patch: String,
        /// The `$setElementOrder` list, as Go's `%v` prints it.
        order: String,
    },
    /// 500: server-side apply reached the plain patcher; it must go to the field manager.
    #[error(
        "apply patches (application/apply-patch+yaml) are handled by server-side apply, not by apply_patch"
    )]
    ApplyNotHandled,
}

impl PatchError {
    /// The HTTP status code kube-apiserver answers with.
    pub fn code(&self) -> u16 {
        match self {
            PatchError::InvalidJson(_)
            | PatchError::UnexpectedJsonType { .. }
            | PatchError::InvalidMergePatch
            | PatchError::BadPrimitiveListFormat
            | PatchError::BadRetainKeysFormat
            | PatchError::BadSetElementOrderFormat => 400,
            PatchError::TooManyOperations { .. } => 413,
            PatchError::OperationFailed(_)
            | PatchError::InvalidResult { .. }
            | PatchError::ListOfLists => 422,
            _ => 500,
        }
    }

    /// The `Status.reason` kube-apiserver answers with (`""` is `StatusReasonUnknown`).
    pub fn reason(&self) -> &'static str {
        match (self, self.code()) {
            (_, 400) => "BadRequest",
            (_, 413) => "RequestEntityTooLarge",
            (_, 422) => "Invalid",
            (PatchError::ApplyNotHandled, _) => "InternalError",
            _ => "",
        }
    }

    /// The `Status.message` kube-apiserver answers with.
    ///
    /// JSON patch failures and lists of lists come back from kube as a generic
    /// 422 whose message hides the detail; the detail stays in `Display`.
    pub fn status_message(&self) -> String {
        match self {
            PatchError::TooManyOperations { .. } => format!("Request entity too large: {self}"),
            PatchError::OperationFailed(_) | PatchError::ListOfLists => {
                "the server rejected our request due to an error in our request".to_owned()
            }
            PatchError::ApplyNotHandled => format!("Internal error occurred: {self}"),
            _ => self.to_string(),
        }
    }
}

/// The Status kube-apiserver answers a failed patch with.
impl From<PatchError> for crate::error::Error {
    fn from(e: PatchError) -> Self {
        crate::error::Error::new(crate::error::reason_for_code(e.code()), e.status_message())
    }
}

/// Applies a patch body of the given type to `original`, returning the patched object.
///
/// `schema` is the OpenAPI v3 schema of the object's type, used by strategic
/// merge patches only; without it every field merges as in a JSON merge patch.
/// The result is always a JSON object: a patch that turns the document into
/// anything else fails with [`PatchError::InvalidResult`] (422), as kube's
/// decoding of the patched bytes would.
pub fn apply_patch(
    kind: PatchType,
    original: &Value,
    patch_bytes: &[u8],
    schema: Option<Schema<'_>>,
) -> Result<Value, PatchError> {
    let patched = match kind {
        PatchType::Json => json::apply(original, &decode_body(patch_bytes)?)?,
        PatchType::Merge => {
            let patch =
                serde_json::from_slice(patch_bytes).map_err(|_| PatchError::InvalidMergePatch)?;
            merge::apply(original, &patch)?
        }
        PatchType::StrategicMerge => {
            strategic::apply(original, &decode_body(patch_bytes)?, schema)?
        }
        PatchType::Apply => return Err(PatchError::ApplyNotHandled),
    };
    ensure_object(patched)
}

/// Decodes a JSON body, with Go's message for an empty one.
fn decode_body(bytes: &[u8]) -> Result<Value, PatchError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(PatchError::InvalidJson(
            "unexpected end of JSON input".to_owned(),
        ));
    }
    serde_json::from_slice(bytes).map_err(|error| PatchError::InvalidJson(error.to_string()))
}

/// Rejects a patched document that is not an object, as kube's decoder would.
fn ensure_object(patched: Value) -> Result<Value, PatchError> {
    if patched.is_object() {
        return Ok(patched);
    }
    Err(PatchError::InvalidResult {
        reason: no_version_kind(&patched),
        patched: patched.to_string(),
    })
}

/// kube's words for a JSON document it cannot read `apiVersion` and `kind` from.
pub fn no_version_kind(value: &Value) -> String {
    format!(
        "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
        json_kind(value)
    )
}

/// The JSON type word Go's decoder uses in its errors.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The Go type a decoded JSON value has in kube (ints stay `int64`).
pub(crate) fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(number) if number.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A decoded JSON value printed as Go's `%v` prints it (maps sorted, `map[k:v]`).
pub fn go_format(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => match number.as_f64() {
            Some(float) if number.is_f64() => go_float(float),
            _ => number.to_string(),
        },
        Value::String(text) => text.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_format).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", go_format(v)))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

/// A value printed as Go's `%s` prints it.
pub(crate) fn go_string(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "%!s(<nil>)".to_owned(),
        other => format!("%!s({}={})", go_type(other), go_format(other)),
    }
}

/// A float printed as Go's `%v` prints a `float64`.
fn go_float(float: f64) -> String {
    let exponent = if float == 0.0 {
        0
    } else {
        float.abs().log10().floor() as i32
    };
    if (-4..21).contains(&exponent) {
        return float.to_string();
    }
    let scientific = format!("{float:e}");
    match scientific.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => scientific,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        let cases: &[(&str, Option<PatchType>)] = &[
            ("application/json-patch+json", Some(PatchType::Json)),
            (
                "application/merge-patch+json; charset=utf-8",
                Some(PatchType::Merge),
            ),
            (
                "application/strategic-merge-patch+json",
                Some(PatchType::StrategicMerge),
            ),
            ("application/apply-patch+yaml", Some(PatchType::Apply)),
            ("application/json", None),
            ("application/merge-patch+json ;charset=utf-8", None),
            ("Application/Merge-Patch+Json", None),
            ("", None),
        ];
        for (header, expected) in cases {
            assert_eq!(
                PatchType::from_content_type(header),
                *expected,
                "{header:?}"
            );
        }
    }

    #[test]
    fn error_codes_and_status_messages() {
        let too_many = PatchError::TooManyOperations {
            max: 10000,
            got: 10001,
        };
        assert_eq!(too_many.code(), 413);
        assert_eq!(too_many.reason(), "RequestEntityTooLarge");
        assert_eq!(
            too_many.status_message(),
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
        let failed = PatchError::OperationFailed("testing value /a failed: test failed".to_owned());
        assert_eq!((failed.code(), failed.reason()), (422, "Invalid"));
        assert_eq!(
            failed.status_message(),
            "the server rejected our request due to an error in our request"
        );
        assert_eq!(PatchError::InvalidMergePatch.code(), 400);
        assert_eq!(PatchError::BadRetainKeysFormat.reason(), "BadRequest");
        assert_eq!(PatchError::ListOfLists.code(), 422);
        let unknown = PatchError::MergeDirectiveInList;
        assert_eq!((unknown.code(), unknown.reason()), (500, ""));
        assert_eq!(
            unknown.status_message(),
            "merging lists cannot yet be specified in the patch"
        );
    }

    #[test]
    fn apply_patch_dispatches_and_checks_result() {
        let original = json!({"a": 1, "b": [1, 2]});
        let json_patch = apply_patch(
            PatchType::Json,
            &original,
            br#"[{"op":"replace","path":"/a","value":2}]"#,
            None,
        );
        assert_eq!(json_patch.unwrap(), json!({"a": 2, "b": [1, 2]}));
        let merge = apply_patch(PatchType::Merge, &original, br#"{"b":null}"#, None);
        assert_eq!(merge.unwrap(), json!({"a": 1}));
        let smp = apply_patch(PatchType::StrategicMerge, &original, br#"{"c":3}"#, None);
        assert_eq!(smp.unwrap(), json!({"a": 1, "b": [1, 2], "c": 3}));
        assert_eq!(
            apply_patch(PatchType::Apply, &original, b"{}", None),
            Err(PatchError::ApplyNotHandled)
        );
        let to_list = apply_patch(PatchType::Merge, &original, b"[1,null]", None).unwrap_err();
        assert_eq!(to_list.code(), 422);
        assert!(
            to_list.to_string().starts_with(
                " \"\" is invalid: patch: Invalid value: \"[1]\": couldn't get version/kind"
            ),
            "{to_list}"
        );
        let empty = apply_patch(PatchType::Json, &original, b"  ", None).unwrap_err();
        assert_eq!(
            empty,
            PatchError::InvalidJson("unexpected end of JSON input".to_owned())
        );
        let not_json = apply_patch(PatchType::Merge, &original, b"{", None).unwrap_err();
        assert_eq!(not_json, PatchError::InvalidMergePatch);
        let smp_list = apply_patch(PatchType::StrategicMerge, &original, b"[]", None).unwrap_err();
        assert_eq!(
            smp_list.to_string(),
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        assert_eq!(smp_list.code(), 400);
    }

    #[test]
    fn go_formatting() {
        let value = json!({"b": [1, "x", null], "a": {"d": true, "c": 1.5}});
        assert_eq!(go_format(&value), "map[a:map[c:1.5 d:true] b:[1 x <nil>]]");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_string(&json!("x")), "x");
        assert_eq!(go_string(&json!(1)), "%!s(int64=1)");
        assert_eq!(go_type(&json!(1.5)), "float64");
    }
}
