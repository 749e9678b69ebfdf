//! Objects' JSON turned into the protobuf kube-apiserver answers with.
//!
//! The inverse of the decoder's rules (see the module above): a field is
//! written when the JSON has it (not null), in field-number order, so a
//! pointer set to zero (`replicas: 0`) reaches the client and a field the
//! JSON leaves out decodes as Go's zero value; repeated scalars unpacked,
//! as proto2 writes them; map entries by sorted key, as Go's marshaller
//! writes them. The messages with a JSON form of their own (`Time`,
//! `IntOrString`, `Quantity`, `RawExtension`, the CRD schema unions, the
//! string-list wrappers) are built back from that form.
//!
//! ```
//! let namespace = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
//! let body = proto::k8s::encode(&namespace)?;
//! assert!(body.starts_with(b"k8s\0"));
//! assert_eq!(proto::k8s::decode(&body)?, namespace);
//! # Ok::<(), proto::k8s::Error>(())
//! ```

use base64::Engine as _;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::Value as Json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{EXTENSIONS, Error, INLINE, MAGIC, MAX_DEPTH, SCHEMAS, Schemas};

/// The media type of a protobuf watch stream: length-prefixed `WatchEvent`s.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Whether objects of an apiVersion have protobuf schemas (built-in groups
/// do; custom resources do not, and kube answers them in JSON only).
pub fn serves(api_version: &str) -> bool {
    SCHEMAS
        .as_ref()
        .is_ok_and(|schemas| schemas.packages.contains_key(api_version))
}

/// Encodes an object (its JSON, with `apiVersion` and `kind`) as the body
/// kube sends for it: `k8s\0` and a `runtime.Unknown` around the object.
pub fn encode(object: &Json) -> Result<Vec<u8>, Error> {
    let schemas = SCHEMAS
        .as_ref()
        .map_err(|e| Error::Schemas(e.to_string()))?;
    let mut out = MAGIC.to_vec();
    schemas.envelope(object, &mut out)?;
    Ok(out)
}

/// Encodes a watch event (`{"type": ..., "object": ...}`) as one frame of a
/// protobuf watch stream: a 4-byte big-endian length, then a `WatchEvent`
/// {1 type, 2 object} whose object holds the encoded object.
pub fn encode_watch_event(event: &Json) -> Result<Vec<u8>, Error> {
    let event_type = event.get("type").and_then(Json::as_str).unwrap_or_default();
    let object = encode(event.get("object").unwrap_or(&Json::Null))?;
    // The nested lengths are known up front, so the object is copied once.
    let raw_extension = bytes_field_len(1, object.len());
    let watch_event = bytes_field_len(1, event_type.len()) + bytes_field_len(2, raw_extension);
    let length = u32::try_from(watch_event)
        .map_err(|_| Error::Malformed("a watch event of more than 4 GiB".to_owned()))?;
    let mut frame = Vec::with_capacity(watch_event + 4);
    frame.extend_from_slice(&length.to_be_bytes());
    write_bytes(1, event_type.as_bytes(), &mut frame);
    encode_key(2, WireType::LengthDelimited, &mut frame);
    encode_varint(raw_extension as u64, &mut frame);
    write_bytes(1, &object, &mut frame);
    Ok(frame)
}

/// The encoded length of a length-delimited field `number` holding `len` bytes.
fn bytes_field_len(number: u32, len: usize) -> usize {
    key_len(number) + encoded_len_varint(len as u64) + len
}

impl Schemas {
    /// A `runtime.Unknown` {1 typeMeta, 2 raw, 3 contentEncoding, 4 contentType} around `object`.
    fn envelope(&self, object: &Json, out: &mut Vec<u8>) -> Result<(), Error> {
        let text = |key| object.get(key).and_then(Json::as_str).unwrap_or_default();
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        let desc = self
            .message(api_version, kind)
            .ok_or_else(|| Error::UnknownKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })?;
        let mut raw = Vec::with_capacity(256);
        self.write_message(&desc, object, 0, &mut raw)
            .map_err(|e| match e {
                Error::Malformed(reason) => Error::MalformedObject {
                    api_version: api_version.to_owned(),
                    kind: kind.to_owned(),
                    reason: reason.trim_start_matches(PATH_MARK).to_owned(),
                },
                other => other,
            })?;
        let mut type_meta = Vec::with_capacity(api_version.len() + kind.len() + 4);
        write_bytes(1, api_version.as_bytes(), &mut type_meta);
        write_bytes(2, kind.as_bytes(), &mut type_meta);
        out.reserve(raw.len() + type_meta.len() + 16);
        write_bytes(1, &type_meta, out);
        write_bytes(2, &raw, out);
        // Go writes the empty encoding and content type too.
        write_bytes(3, b"", out);
        write_bytes(4, b"", out);
        Ok(())
    }

    /// The fields of one message (without its own key and length).
    fn write_message(
        &self,
        desc: &MessageDescriptor,
        json: &Json,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            return Err(Error::TooDeep);
        }
        if self.write_special(desc, json, depth, out)? {
            return Ok(());
        }
        let Json::Object(fields) = json else {
            return Err(Error::Malformed(format!(
                "{} must be an object, not {}",
                desc.name(),
                json_type(json)
            )));
        };
        let mut numbered: Vec<FieldDescriptor> = desc.fields().collect();
        numbered.sort_by_key(FieldDescriptor::number);
        for field in numbered {
            if field.json_name() == INLINE {
                // A Go struct embedded inline: its fields are the parent's.
                if let Kind::Message(inner) = field.kind() {
                    let mut nested = Vec::new();
                    self.write_message(&inner, json, depth + 1, &mut nested)?;
                    write_bytes(field.number(), &nested, out);
                }
                continue;
            }
            let value = match fields.get(field.json_name()) {
                None | Some(Json::Null) => continue,
                Some(value) => value,
            };
            self.write_field(&field, value, depth + 1, out)
                .map_err(|e| within(field.json_name(), e))?;
        }
        Ok(())
    }

    /// One field: a map, a repeated field or a single value.
    fn write_field(
        &self,
        field: &FieldDescriptor,
        value: &Json,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        let number = field.number();
        if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                return Ok(());
            };
            let Json::Object(entries) = value else {
                return Err(Error::Malformed(format!("a map, not {}", json_type(value))));
            };
            let (key_kind, value_kind) = (
                entry.map_entry_key_field().kind(),
                entry.map_entry_value_field().kind(),
            );
            // By key, as Go writes map entries.
            let mut entries: Vec<_> = entries.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (key, item) in entries {
                let mut pair = Vec::with_capacity(key.len() + 16);
                self.write_value(1, &key_kind, &Json::String(key.clone()), depth, &mut pair)?;
                if !item.is_null() {
                    self.write_value(2, &value_kind, item, depth, &mut pair)
                        .map_err(|e| within(key, e))?;
                }
                write_bytes(number, &pair, out);
            }
            return Ok(());
        }
        let kind = field.kind();
        if field.is_list() {
            let Json::Array(items) = value else {
                return Err(Error::Malformed(format!(
                    "a list, not {}",
                    json_type(value)
                )));
            };
            for (i, item) in items.iter().enumerate() {
                match (item, &kind) {
                    // A nil element of a list of objects is an empty one to Go.
                    (Json::Null, Kind::Message(_)) => write_bytes(number, b"", out),
                    (Json::Null, _) => {}
                    (item, kind) => self
                        .write_value(number, kind, item, depth, out)
                        .map_err(|e| within(&i.to_string(), e))?,
                }
            }
            return Ok(());
        }
        self.write_value(number, &kind, value, depth, out)
    }

    /// One value with its key.
    fn write_value(
        &self,
        number: u32,
        kind: &Kind,
        value: &Json,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        match kind {
            Kind::Message(desc) => {
                let mut nested = Vec::new();
                self.write_message(desc, value, depth + 1, &mut nested)?;
                write_bytes(number, &nested, out);
            }
            Kind::String => match value {
                Json::String(s) => write_bytes(number, s.as_bytes(), out),
                Json::Number(n) => write_bytes(number, n.to_string().as_bytes(), out),
                Json::Bool(b) => write_bytes(number, b.to_string().as_bytes(), out),
                other => {
                    return Err(Error::Malformed(format!(
                        "a string, not {}",
                        json_type(other)
                    )));
                }
            },
            Kind::Bytes => write_bytes(number, &bytes_of(value)?, out),
            Kind::Bool => {
                let b = value
                    .as_bool()
                    .ok_or_else(|| Error::Malformed(format!("a bool, not {}", json_type(value))))?;
                encode_key(number, WireType::Varint, out);
                encode_varint(u64::from(b), out);
            }
            Kind::Double => {
                encode_key(number, WireType::SixtyFourBit, out);
                out.extend_from_slice(&float_of(value)?.to_le_bytes());
            }
            Kind::Float => {
                encode_key(number, WireType::ThirtyTwoBit, out);
                // Narrowing is the point: the field is a float32.
                #[allow(clippy::cast_possible_truncation)]
                out.extend_from_slice(&(float_of(value)? as f32).to_le_bytes());
            }
            Kind::Sint32 | Kind::Sint64 => {
                let n = integer_of(value)?;
                encode_key(number, WireType::Varint, out);
                encode_varint(((n << 1) ^ (n >> 63)) as u64, out);
            }
            Kind::Fixed32 | Kind::Sfixed32 => {
                encode_key(number, WireType::ThirtyTwoBit, out);
                out.extend_from_slice(&(integer_of(value)? as u32).to_le_bytes());
            }
            Kind::Fixed64 | Kind::Sfixed64 => {
                encode_key(number, WireType::SixtyFourBit, out);
                out.extend_from_slice(&(integer_of(value)? as u64).to_le_bytes());
            }
            Kind::Enum(desc) => {
                let n = match value {
                    Json::String(name) => desc.get_value_by_name(name).map_or(0, |v| v.number()),
                    other => i32::try_from(integer_of(other)?).unwrap_or_default(),
                };
                encode_key(number, WireType::Varint, out);
                encode_varint(i64::from(n) as u64, out);
            }
            // int32, int64, uint32, uint64: varints (negative ones sign-extended).
            _ => {
                let n = integer_of(value)?;
                encode_key(number, WireType::Varint, out);
                encode_varint(n as u64, out);
            }
        }
        Ok(())
    }

    /// The messages with a JSON form of their own; `false` for the rest.
    fn write_special(
        &self,
        desc: &MessageDescriptor,
        json: &Json,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Result<bool, Error> {
        let name = desc.full_name();
        match name.strip_prefix("k8s.io.apimachinery.pkg.") {
            Some("apis.meta.v1.Time" | "apis.meta.v1.MicroTime") => {
                let text = json.as_str().unwrap_or_default();
                let time = OffsetDateTime::parse(text, &Rfc3339)
                    .map_err(|e| Error::Malformed(format!("time {text:?} ({e})")))?;
                write_varint(1, time.unix_timestamp() as u64, out);
                write_varint(2, u64::from(time.nanosecond()), out);
                return Ok(true);
            }
            Some("apis.meta.v1.Duration") => {
                let text = json.as_str().unwrap_or_default();
                let nanos = parse_go_duration(text)
                    .ok_or_else(|| Error::Malformed(format!("duration {text:?}")))?;
                write_varint(1, nanos as u64, out);
                return Ok(true);
            }
            Some("util.intstr.IntOrString") => {
                match json {
                    Json::String(s) => {
                        write_varint(1, 1, out);
                        write_varint(2, 0, out);
                        write_bytes(3, s.as_bytes(), out);
                    }
                    other => {
                        write_varint(1, 0, out);
                        write_varint(2, integer_of(other)? as u64, out);
                        write_bytes(3, b"", out);
                    }
                }
                return Ok(true);
            }
            Some("api.resource.Quantity" | "api.resource.QuantityValue") => {
                let text = match json {
                    Json::String(s) => s.clone(),
                    other => other.to_string(),
                };
                write_bytes(1, text.as_bytes(), out);
                return Ok(true);
            }
            Some("runtime.RawExtension" | "apis.meta.v1.FieldsV1") => {
                write_bytes(1, &raw_json(json)?, out);
                return Ok(true);
            }
            Some("runtime.Unknown") => {
                self.envelope(json, out)?;
                return Ok(true);
            }
            _ => {}
        }
        if desc.package_name().starts_with(EXTENSIONS) {
            let schema = |number, out: &mut Vec<u8>| -> Result<(), Error> {
                let Some(field) = desc.get_field(number) else {
                    return Ok(());
                };
                self.write_value(number, &field.kind(), json, depth, out)
            };
            match (desc.name(), json) {
                ("JSON", _) => write_bytes(1, &raw_json(json)?, out),
                ("JSONSchemaPropsOrBool", Json::Bool(allows)) => {
                    write_varint(1, u64::from(*allows), out);
                }
                ("JSONSchemaPropsOrBool", _) => {
                    write_varint(1, 1, out);
                    schema(2, out)?;
                }
                ("JSONSchemaPropsOrArray" | "JSONSchemaPropsOrStringArray", Json::Array(_)) => {
                    if let Some(field) = desc.get_field(2) {
                        self.write_field(&field, json, depth, out)?;
                    }
                }
                ("JSONSchemaPropsOrArray" | "JSONSchemaPropsOrStringArray", _) => schema(1, out)?,
                _ => return Ok(false),
            }
            return Ok(true);
        }
        if let Json::Array(items) = json
            && is_string_list_wrapper(desc)
        {
            for item in items {
                if let Some(s) = item.as_str() {
                    write_bytes(1, s.as_bytes(), out);
                }
            }
            return Ok(true);
        }
        Ok(false)
    }
}

/// A message with one repeated string field `items` (`Verbs`, `ExtraValue`).
fn is_string_list_wrapper(desc: &MessageDescriptor) -> bool {
    let mut fields = desc.fields();
    match (fields.next(), fields.next()) {
        (Some(field), None) => {
            field.name() == "items" && field.is_list() && field.kind() == Kind::String
        }
        _ => false,
    }
}

/// A length-delimited field.
fn write_bytes(number: u32, bytes: &[u8], out: &mut Vec<u8>) {
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// A varint field.
fn write_varint(number: u32, value: u64, out: &mut Vec<u8>) {
    encode_key(number, WireType::Varint, out);
    encode_varint(value, out);
}

/// The JSON held as bytes (`RawExtension`, `FieldsV1`, CRD `JSON`).
fn raw_json(json: &Json) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(json).map_err(|e| Error::Malformed(e.to_string()))
}

/// A `[]byte` field: base64 in JSON.
fn bytes_of(value: &Json) -> Result<Vec<u8>, Error> {
    match value {
        Json::String(text) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| Error::Malformed(format!("invalid base64 ({e})"))),
        other => Err(Error::Malformed(format!(
            "base64 bytes, not {}",
            json_type(other)
        ))),
    }
}

fn integer_of(value: &Json) -> Result<i64, Error> {
    let n = match value {
        Json::Number(n) => n
            .as_i64()
            .or_else(|| n.as_u64().map(|u| u as i64))
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Json::String(s) => s.parse().ok(),
        _ => None,
    };
    n.ok_or_else(|| Error::Malformed(format!("an integer, not {value}")))
}

fn float_of(value: &Json) -> Result<f64, Error> {
    value
        .as_f64()
        .ok_or_else(|| Error::Malformed(format!("a number, not {}", json_type(value))))
}

fn json_type(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a bool",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

/// Prefixes a malformed value's reason with where it is: `a.b: reason`.
fn within(at: &str, e: Error) -> Error {
    match e {
        Error::Malformed(reason) => match reason.strip_prefix(PATH_MARK) {
            Some(path) => Error::Malformed(format!("{PATH_MARK}{at}.{path}")),
            None => Error::Malformed(format!("{PATH_MARK}{at}: {reason}")),
        },
        other => other,
    }
}

/// Starts a reason that [`within`] has prefixed with a path (removed by [`Schemas::envelope`]).
const PATH_MARK: &str = "\u{1}";

/// Parses a Go duration string (`1h2m3.5s`, `300ms`, `-1.5µs`) into nanoseconds.
fn parse_go_duration(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let amount: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += amount * scale;
    }
    let nanos = total.round() as i64;
    Some(if negative { -nanos } else { nanos })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::decode;
    use super::*;
    use serde_json::json;

    /// Objects as kubechain stores them; each must decode back to itself.
    fn samples() -> Vec<Json> {
        vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "default", "uid": "u-1", "resourceVersion": "42",
                    "creationTimestamp": "2026-12-06T07:31:01Z", "labels": {"b": "2", "a": "1"},
                    "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                        "time": "2026-12-06T07:31:01Z", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:data": {"f:k": {}}}}]},
                "data": {"k": "v", "empty": ""}, "binaryData": {"bin": "AAH//g=="}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "namespace": "default", "generation": 3},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "d"}},
                    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                    "template": {"metadata": {"labels": {"app": "d"}},
                        "spec": {"containers": [{"name": "c", "image": "nginx",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}},
                            "securityContext": {"runAsUser": -1}}],
                            "terminationGracePeriodSeconds": 30}}},
                "status": {"observedGeneration": 3}}),
            json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                "message": "configmaps \"x\" not found", "reason": "NotFound",
                "details": {"name": "x", "kind": "configmaps", "causes": [{"field": "a", "message": "b"}]}, "code": 404}),
            json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {"resourceVersion": "7", "continue": "abc", "remainingItemCount": 2},
                "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}, "immutable": true}]}),
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
                "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                    "renewTime": "2026-12-06T07:31:01.123456Z", "acquireTime": "2026-12-06T07:31:01.000000Z"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "true"}}]}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "foos.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "foos", "kind": "Foo"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object",
                            "x-kubernetes-preserve-unknown-fields": true,
                            "properties": {"spec": {"type": "object", "default": {"a": 1},
                                "additionalProperties": false,
                                "items": {"type": "string"},
                                "enum": ["x", 2],
                                "required": ["a"],
                                "properties": {"a": {"type": "integer", "minimum": 1.5}}},
                                "tags": {"type": "array", "items": [{"type": "string"}]}},
                            "additionalProperties": {"type": "string"}}}}]}}),
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {},
                "spec": {"token": "t"},
                "status": {"authenticated": true, "user": {"username": "u", "groups": ["g"],
                    "extra": {"scopes": ["a", "b"]}}}}),
            json!({"apiVersion": "v1", "kind": "APIResourceList", "groupVersion": "v1",
                "resources": [{"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                    "verbs": ["get", "list"], "shortNames": ["po"]}]}),
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {"resourceVersion": "9"},
                "items": [{"metadata": {"name": "a"}}]}),
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "r"},
                "data": {"spec": {"template": {"x": 1}}}, "revision": 2}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque",
                "data": {"k": "dg=="}}),
        ]
    }

    #[test]
    fn every_sample_decodes_back_to_itself() {
        for object in samples() {
            let body = encode(&object).unwrap();
            let back = decode(&body).unwrap();
            // The decoder writes Go's JSON; the items of a typed list carry no kind.
            assert_eq!(back, object, "{}", object["kind"]);
        }
    }

    #[test]
    fn the_envelope_is_kubes() {
        let body =
            encode(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}))
                .unwrap();
        // k8s\0 | typeMeta {v1, Namespace} | raw {metadata {name x}} | "" | ""
        let expected =
            b"k8s\0\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x05\x0a\x03\x0a\x01x\x1a\x00\x22\x00";
        assert_eq!(body, expected.to_vec());
    }

    #[test]
    fn zero_pointers_are_sent_and_absent_fields_are_not() {
        let with_zero = encode(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"}, "spec": {"replicas": 0}}))
        .unwrap();
        let without = encode(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"}, "spec": {}}))
        .unwrap();
        // spec {1 replicas 0} is two bytes longer than spec {}.
        assert_eq!(with_zero.len(), without.len() + 2);
    }

    #[test]
    fn watch_events_are_length_prefixed() {
        let event = json!({"type": "ADDED", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}});
        let frame = encode_watch_event(&event).unwrap();
        let length = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(length, frame.len() - 4);
        // type "ADDED", then object {raw: k8s\0 ...}
        assert_eq!(&frame[4..11], b"\x0a\x05ADDED");
        let object = encode(&event["object"]).unwrap();
        assert!(frame.ends_with(&object));
    }

    #[test]
    fn custom_resources_and_bad_values_are_refused() {
        assert!(matches!(
            encode(&json!({"apiVersion": "example.com/v1", "kind": "Foo"})),
            Err(Error::UnknownKind { .. })
        ));
        assert!(!serves("example.com/v1"));
        assert!(serves("v1") && serves("apps/v1"));
        let err = encode(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 5, "labels": {"a": [1]}}}))
            .unwrap_err();
        assert!(matches!(err, Error::MalformedObject { .. }), "{err}");
        let err = encode(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"a": [1]}}}),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("metadata.labels.a: a string, not a list"),
            "{err}"
        );
    }

    #[test]
    fn deep_objects_are_bounded() {
        let mut deep = json!({});
        for _ in 0..200 {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"versions": [{"schema": {"openAPIV3Schema": deep}}]}});
        assert!(matches!(encode(&crd), Err(Error::TooDeep)));
    }

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go_duration("1h0m0s"), Some(3_600_000_000_000));
        assert_eq!(parse_go_duration("1.5s"), Some(1_500_000_000));
        assert_eq!(parse_go_duration("300ms"), Some(300_000_000));
        assert_eq!(parse_go_duration("-2µs"), Some(-2_000));
        assert_eq!(parse_go_duration("0s"), Some(0));
        assert_eq!(parse_go_duration("5x"), None);
        assert_eq!(parse_go_duration(""), None);
    }
}
