//! Request bodies in, objects out: media types, decoding and normalisation.
//!
//! Bodies arrive as JSON, YAML or Kubernetes protobuf and become
//! `serde_json::Value`. A [`Codec`] then checks an object's structure against
//! its type and drops unknown fields, reporting them for `fieldValidation`.

use std::marker::PhantomData;

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use apimachinery::error::{Error, Reason, Result};

/// The JSON media type.
pub const JSON: &str = "application/json";
/// The YAML media type.
pub const YAML: &str = "application/yaml";
/// The Kubernetes protobuf media type (request bodies, and answers made at the door: [`crate::protobuf`]).
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Largest request body accepted, as kube-apiserver (3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A body media type the server can decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaType {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl MediaType {
    /// Parses a Content-Type header for an object body (create, update).
    pub fn from_content_type(content_type: Option<&str>) -> Result<MediaType> {
        let essence = content_type.map(essence).unwrap_or(JSON);
        match essence {
            "" | JSON | "*/*" => Ok(MediaType::Json),
            YAML | "application/x-yaml" | "text/yaml" => Ok(MediaType::Yaml),
            PROTOBUF => Ok(MediaType::Protobuf),
            _ => Err(unsupported_media_type(&[JSON, YAML, PROTOBUF])),
        }
    }
}

/// The media type without parameters, lowercased.
pub fn essence(content_type: &str) -> &str {
    content_type.split(';').next().unwrap_or("").trim()
}

/// 415 with kube-apiserver's wording.
pub fn unsupported_media_type(accepted: &[&str]) -> Error {
    Error::new(
        Reason::UnsupportedMediaType,
        format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        ),
    )
}

/// Decodes a body into a JSON value.
pub fn decode_body(media: MediaType, body: &[u8]) -> Result<Value> {
    if body.len() > MAX_BODY_BYTES {
        return Err(too_large());
    }
    match media {
        MediaType::Json => serde_json::from_slice(body).map_err(|e| {
            Error::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        }),
        MediaType::Yaml => decode_yaml(body),
        MediaType::Protobuf => proto::k8s::decode(body)
            .map_err(|e| Error::bad_request(format!("unable to decode protobuf body: {e}"))),
    }
}

/// Decodes YAML (or JSON, which is YAML) into a JSON value. A body that is
/// a JSON object (what kubectl sends, even as an apply patch) is read by
/// the JSON parser, which gives the same value faster.
pub fn decode_yaml(body: &[u8]) -> Result<Value> {
    if looks_like_json(body)
        && let Ok(value) = serde_json::from_slice(body)
    {
        return Ok(value);
    }
    apimachinery::yaml::to_json(body)
        .map_err(|e| Error::bad_request(format!("error converting YAML to JSON: {e}")))
}

/// Whether a body starts as a JSON object does.
fn looks_like_json(body: &[u8]) -> bool {
    body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Largest body decoded on the thread that received it; a larger one, or
/// YAML that is not JSON (its reader recurses deeper per level), is decoded
/// on the blocking pool so that the threads serving others stay free.
const INLINE_DECODE_BYTES: usize = 64 * 1024;

/// [`decode_body`], off the request's thread when the body may take long.
pub async fn decode(media: MediaType, body: &[u8]) -> Result<Value> {
    if body.len() <= INLINE_DECODE_BYTES {
        if media != MediaType::Yaml {
            return decode_body(media, body);
        }
        if looks_like_json(body)
            && let Ok(value) = serde_json::from_slice(body)
        {
            return Ok(value);
        }
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(too_large());
    }
    let body = Bytes::copy_from_slice(body);
    crate::runtime::offload(move || decode_body(media, &body)).await
}

/// 413 RequestEntityTooLarge.
pub fn too_large() -> Error {
    Error::new(
        Reason::RequestEntityTooLarge,
        format!("Request entity too large: limit is {MAX_BODY_BYTES}"),
    )
}

/// kube's words for a value of the wrong type met while a patched object
/// is restored into its type (apimachinery's unstructured converter), from
/// serde's (`invalid type: string "x", expected a map`); `None` when the
/// error is not a type mismatch of a map, list or struct.
pub fn cannot_restore(serde_error: &str) -> Option<String> {
    let rest = serde_error.strip_prefix("invalid type: ")?;
    let (found, expected) = rest.split_once(", expected ")?;
    let found = match found.split([' ', '`']).next()? {
        "string" => "string",
        "integer" => "int64",
        "floating" => "float64",
        "boolean" => "bool",
        "sequence" => "slice",
        "map" => "map",
        _ => return None,
    };
    let expected = expected.split(" at line ").next()?;
    if expected == "a map" {
        Some(format!("cannot restore map from {found}"))
    } else if expected == "a sequence" {
        Some(format!("cannot restore slice from {found}"))
    } else if expected.starts_with("struct ") {
        Some(format!("cannot restore struct from: {found}"))
    } else {
        None
    }
}

/// An object after structural checking.
#[derive(Debug)]
pub struct Normalized {
    /// The object with unknown fields dropped.
    pub object: Value,
    /// Paths of the dropped unknown fields, e.g. `data.bogus`.
    pub unknown_fields: Vec<String>,
}

/// Checks an object's structure against its type.
pub trait Codec: Send + Sync + 'static {
    /// Decodes the object into its type and back, dropping unknown fields;
    /// a structural error (a string where a number belongs) is [`crate::Error::Decode`].
    fn normalize(&self, obj: Value) -> crate::Result<Normalized>;
}

/// The codec of a k8s-openapi type: a round trip through the Rust type.
pub struct TypedCodec<K>(PhantomData<fn() -> K>);

impl<K> Default for TypedCodec<K> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<K: Serialize + DeserializeOwned + 'static> Codec for TypedCodec<K> {
    fn normalize(&self, mut obj: Value) -> crate::Result<Normalized> {
        let decode = |e: serde_json::Error| crate::Error::Decode(e.to_string());
        unwrap_base64(&mut obj);
        let typed: K = K::deserialize(&obj).map_err(decode)?;
        let mut object = serde_json::to_value(&typed).map_err(decode)?;
        // A type that does not carry its apiVersion and kind (an author's
        // kind; k8s-openapi's carry them) keeps the ones it was sent with.
        if let (Value::Object(out), Value::Object(sent)) = (&mut object, &obj) {
            for key in ["apiVersion", "kind"] {
                if let (false, Some(value)) = (out.contains_key(key), sent.get(key)) {
                    out.insert(key.to_string(), value.clone());
                }
            }
        }
        let mut unknown_fields = Vec::new();
        diff_unknown(&obj, &object, "", &mut unknown_fields);
        Ok(Normalized {
            object,
            unknown_fields,
        })
    }
}

/// Drops the line breaks from the base64 fields (`[]byte` in kube's types)
/// of the kinds that have them: kube's JSON decoder skips them, and
/// `base64` and kustomize's secret generator wrap their output; the strict
/// decoder of the typed round trip would refuse them.
fn unwrap_base64(obj: &mut Value) {
    fn unwrap(value: Option<&mut Value>) {
        if let Some(Value::String(text)) = value {
            if text.contains(['\r', '\n']) {
                text.retain(|c| c != '\r' && c != '\n');
            }
        }
    }
    fn unwrap_each(values: Option<&mut Value>) {
        if let Some(Value::Object(values)) = values {
            values.values_mut().for_each(|v| unwrap(Some(v)));
        }
    }
    match obj.get("kind").and_then(Value::as_str).unwrap_or_default() {
        "Secret" => unwrap_each(obj.pointer_mut("/data")),
        "ConfigMap" => unwrap_each(obj.pointer_mut("/binaryData")),
        "CertificateSigningRequest" => {
            unwrap(obj.pointer_mut("/spec/request"));
            unwrap(obj.pointer_mut("/status/certificate"));
        }
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => {
            if let Some(Value::Array(webhooks)) = obj.get_mut("webhooks") {
                for webhook in webhooks {
                    unwrap(webhook.pointer_mut("/clientConfig/caBundle"));
                }
            }
        }
        "APIService" => unwrap(obj.pointer_mut("/spec/caBundle")),
        "CustomResourceDefinition" => {
            unwrap(obj.pointer_mut("/spec/conversion/webhook/clientConfig/caBundle"))
        }
        _ => {}
    }
}

/// A codec that accepts any object as is (for schemaless kinds).
pub struct OpaqueCodec;

impl Codec for OpaqueCodec {
    fn normalize(&self, obj: Value) -> crate::Result<Normalized> {
        Ok(Normalized {
            object: obj,
            unknown_fields: Vec::new(),
        })
    }
}

/// Collects the paths present (and not null) in `original` but missing from
/// `normalized`: the fields the type does not know.
fn diff_unknown(original: &Value, normalized: &Value, path: &str, out: &mut Vec<String>) {
    match (original, normalized) {
        (Value::Object(orig), Value::Object(norm)) => {
            for (key, value) in orig {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match norm.get(key) {
                    Some(n) => diff_unknown(value, n, &child, out),
                    None if !value.is_null() && !is_empty_container(value) => out.push(child),
                    None => {}
                }
            }
        }
        (Value::Array(orig), Value::Array(norm)) => {
            for (i, (o, n)) in orig.iter().zip(norm).enumerate() {
                diff_unknown(o, n, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Empty maps and lists vanish in a round trip without being unknown.
fn is_empty_container(value: &Value) -> bool {
    matches!(value, Value::Object(m) if m.is_empty())
        || matches!(value, Value::Array(a) if a.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    #[test]
    fn typed_codec_drops_and_reports_unknown_fields() {
        let codec = TypedCodec::<ConfigMap>::default();
        let n = codec
            .normalize(
                json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","bogus":1},
                "data":{"k":"v"},"extra":{"x":1},"binaryData":null}),
            )
            .unwrap();
        assert_eq!(n.unknown_fields, vec!["metadata.bogus", "extra"]);
        assert_eq!(n.object["data"]["k"], "v");
        assert!(n.object.get("extra").is_none());
    }

    #[test]
    fn base64_may_be_wrapped_but_text_keeps_its_lines() {
        let codec = TypedCodec::<ConfigMap>::default();
        let n = codec
            .normalize(
                json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},
                "data":{"text":"YWJj\nZGVm"},"binaryData":{"b":"YWJj\r\nZGVm\n"}}),
            )
            .unwrap();
        assert_eq!(n.object["binaryData"]["b"], "YWJjZGVm");
        assert_eq!(n.object["data"]["text"], "YWJj\nZGVm");
        let broken = codec.normalize(json!({"apiVersion":"v1","kind":"ConfigMap",
            "metadata":{"name":"a"},"binaryData":{"b":"YW Jj"}}));
        assert!(broken.is_err(), "only line breaks are skipped");
    }

    #[test]
    fn typed_codec_rejects_wrong_types() {
        let codec = TypedCodec::<ConfigMap>::default();
        let err = codec.normalize(
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":1}}),
        );
        assert!(err.is_err());
    }

    #[test]
    fn media_types() {
        assert_eq!(
            MediaType::from_content_type(Some("application/json; charset=utf-8")).unwrap(),
            MediaType::Json
        );
        assert_eq!(
            MediaType::from_content_type(Some(PROTOBUF)).unwrap(),
            MediaType::Protobuf
        );
        assert_eq!(
            MediaType::from_content_type(Some("text/plain"))
                .unwrap_err()
                .code(),
            415
        );
    }

    #[test]
    fn deep_and_expanding_bodies_are_refused() {
        let deep_json = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let err = decode_body(MediaType::Json, deep_json.as_bytes()).unwrap_err();
        assert_eq!(err.code(), 400);
        assert!(err.to_string().contains("recursion limit"), "{err}");
        let deep_yaml = format!("a: {}{}", "[".repeat(10_000), "]".repeat(10_000));
        let err = decode_body(MediaType::Yaml, deep_yaml.as_bytes()).unwrap_err();
        assert_eq!(err.code(), 400);
        // "Billion laughs": nine levels of aliases, each ten times the last.
        let mut laughs = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
        {
            let refs = vec![format!("*{prev}"); 10].join(",");
            laughs.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        let err = decode_body(MediaType::Yaml, laughs.as_bytes()).unwrap_err();
        assert_eq!(err.code(), 400);
        assert!(
            err.to_string()
                .contains("error converting YAML to JSON: yaml: line "),
            "{err}"
        );
    }

    #[test]
    fn type_mismatches_in_kubes_words() {
        assert_eq!(
            cannot_restore("invalid type: string \"x\", expected a map").as_deref(),
            Some("cannot restore map from string")
        );
        assert_eq!(
            cannot_restore("invalid type: integer `5`, expected a sequence").as_deref(),
            Some("cannot restore slice from int64")
        );
        assert_eq!(
            cannot_restore("invalid type: string \"x\", expected struct ObjectMeta").as_deref(),
            Some("cannot restore struct from: string")
        );
        assert_eq!(cannot_restore("missing field `name`"), None);
        assert_eq!(
            apimachinery::patch::go_format(
                &serde_json::json!({"data": "x", "a": [1, true, null], "m": {"k": 1.5}})
            ),
            "map[a:[1 true <nil>] data:x m:map[k:1.5]]"
        );
    }

    #[test]
    fn yaml_and_bad_json() {
        assert_eq!(
            decode_yaml(b"a: 1\nb: [x]").unwrap(),
            json!({"a":1,"b":["x"]})
        );
        assert_eq!(
            decode_body(MediaType::Json, b"{nope").unwrap_err().code(),
            400
        );
        assert_eq!(
            decode_body(MediaType::Yaml, b"a: [").unwrap_err().code(),
            400
        );
    }
}
