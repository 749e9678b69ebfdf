//! Kubernetes protobuf: request bodies turned into the JSON of the same
//! object ([`decode`]), and objects' JSON turned into the protobuf answers
//! kube-apiserver sends ([`encode`], [`encode_watch_event`]).
//!
//! kubectl 1.31+ (and any client-go program that asks for it) sends bodies as
//! `application/vnd.kubernetes.protobuf`: the magic bytes `k8s\0`, then a
//! `runtime.Unknown` {1 typeMeta {1 apiVersion, 2 kind}, 2 raw object message,
//! 3 contentEncoding, 4 contentType}. kubechain stores and answers JSON only,
//! so [`decode`] turns such a body into the `serde_json::Value` that Go's
//! protobuf unmarshal followed by JSON marshal of the Kubernetes type gives:
//!
//! ```
//! // kubectl create namespace x, cut down to the name
//! let body = b"k8s\0\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x07\x0a\x05\x0a\x01x\x12\x00";
//! let object = proto::k8s::decode(body)?;
//! assert_eq!(object, serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}));
//! # Ok::<(), proto::k8s::Error>(())
//! ```
//!
//! The schemas are `proto/k8s/*.proto` (written by `proto/k8s/gen.py`, field
//! names are the JSON names) and `proto/k8s/kinds.txt` (apiVersion and kind to
//! message). The conversion rules:
//!
//! - Unset fields are left out. Go's marshaller writes every non-pointer field,
//!   so `0`, `false`, `""` and the empty `Time{}` are on the wire for fields
//!   the client never set, and only Go's types tell them from a pointer set to
//!   zero on purpose (`replicas: 0`, `storageClassName: ""`). For the messages
//!   listed in `proto/k8s/zero_fields.txt` (written by `probe.py`, which asks
//!   kubectl's own Go types) a zero field is kept exactly when Go's JSON keeps
//!   it. For other messages, zero numbers and bools are kept and empty strings
//!   and bytes left out. An empty `Time` is always left out.
//! - int64 and uint64 are JSON numbers; bytes are base64; maps are objects
//!   with sorted keys; a field with JSON name `,inline` (a Go struct embedded
//!   with `json:",inline"`) spreads its fields into the parent.
//! - Messages with their own JSON form: `Time` (RFC 3339), `MicroTime` (RFC
//!   3339 with microseconds), `Duration` (Go duration string), `IntOrString`,
//!   `Quantity`, `RawExtension` / `FieldsV1` / CRD `JSON` (the embedded JSON),
//!   the CRD schema unions `JSONSchemaPropsOr{Bool,Array,StringArray}`, a
//!   nested `runtime.Unknown`, and string-list wrappers (`Verbs`,
//!   `ExtraValue`: one repeated string field `items`) which become arrays.

mod encode;

pub use encode::{WATCH_CONTENT_TYPE, encode, encode_watch_event, serves};

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use base64::Engine as _;
use prost_reflect::{
    DescriptorPool, DynamicMessage, Kind, MapKey, MessageDescriptor, ReflectMessage, Value,
};
use serde_json::{Map, Number, Value as Json};
use time::OffsetDateTime;
use time::macros::format_description;

/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every Kubernetes protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";
/// `apiVersion kind message` lines for every top-level kind, written by `gen.py`.
const KINDS: &str = include_str!("../../k8s/kinds.txt");
/// `message field...` lines: the fields whose zero value Go's JSON keeps, written by `probe.py`.
const ZERO_FIELDS: &str = include_str!("../../k8s/zero_fields.txt");
/// The JSON name `gen.py` gives a Go struct embedded with `json:",inline"`.
const INLINE: &str = ",inline";

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";
const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";
const EXTENSIONS: &str = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions";
/// Kinds that `metav1.AddToGroupVersion` registers in every group/version.
const META_KINDS: &[&str] = &[
    "CreateOptions",
    "DeleteOptions",
    "GetOptions",
    "ListOptions",
    "PatchOptions",
    "Status",
    "UpdateOptions",
    "WatchEvent",
];

/// The deepest nesting of a decoded object, in JSON levels, counted across
/// nested envelopes and the JSON inside `RawExtension`s. Built-in objects
/// nest far less (a CRD schema 30 properties deep is 60 levels); the
/// decoder's recursion costs about 16 KiB of stack a level in a debug
/// build, so the bound keeps it within a worker thread's stack.
pub const MAX_DEPTH: usize = 64;

/// The most envelope bytes one body may have decoded, summed over its
/// nested envelopes. Each level holds the bytes of the levels inside it
/// while they decode, so without a bound a 3 MiB body of envelopes nested
/// 64 deep held 64 copies of itself (788 MiB). A real object's nested
/// envelope (a ControllerRevision's data) is decoded once or twice.
pub const MAX_DECODED_BYTES: usize = 16 << 20;

thread_local! {
    /// Envelope bytes decoded so far for the body this thread decodes.
    static DECODED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Why a body could not be decoded, or an object encoded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The body does not start with `k8s\0`.
    #[error("not a Kubernetes protobuf body: it does not start with the magic bytes \"k8s\\0\"")]
    BadMagic,
    /// The `runtime.Unknown` envelope is not valid protobuf, or names no kind.
    #[error("malformed runtime.Unknown envelope: {0}")]
    MalformedEnvelope(String),
    /// No schema is known for this apiVersion and kind.
    #[error("unknown kind {api_version}/{kind}")]
    UnknownKind {
        /// The envelope's `typeMeta.apiVersion`.
        api_version: String,
        /// The envelope's `typeMeta.kind`.
        kind: String,
    },
    /// The object bytes do not decode as the message for their kind.
    #[error("malformed {api_version}/{kind} object: {reason}")]
    MalformedObject {
        /// The envelope's `typeMeta.apiVersion`.
        api_version: String,
        /// The envelope's `typeMeta.kind`.
        kind: String,
        /// What went wrong.
        reason: String,
    },
    /// The object nests deeper than [`MAX_DEPTH`] levels (envelopes inside
    /// envelopes, or JSON inside a `RawExtension`).
    #[error("the object nests more than {MAX_DEPTH} levels deep")]
    TooDeep,
    /// The object's nested envelopes add up to more than [`MAX_DECODED_BYTES`].
    #[error("the object's nested envelopes hold more than {} MiB", MAX_DECODED_BYTES >> 20)]
    TooLarge,
    /// A value inside the object is malformed; the envelope reports it as
    /// [`Error::MalformedObject`], naming the kind.
    #[error("{0}")]
    Malformed(String),
    /// The compiled-in schemas do not load (a build problem, not a bad body).
    #[error("the built-in Kubernetes protobuf schemas are unusable: {0}")]
    Schemas(String),
}

/// Decodes a Kubernetes protobuf body (`k8s\0` + `runtime.Unknown`) into the
/// object's JSON, with `apiVersion` and `kind` taken from the envelope.
pub fn decode(body: &[u8]) -> Result<Json, Error> {
    let envelope = body.strip_prefix(MAGIC).ok_or(Error::BadMagic)?;
    let schemas = SCHEMAS
        .as_ref()
        .map_err(|e| Error::Schemas(e.to_string()))?;
    DECODED.with(|decoded| decoded.set(0));
    schemas.decode_envelope(envelope, 0)
}

static SCHEMAS: LazyLock<Result<Schemas, Error>> = LazyLock::new(Schemas::load);

/// The descriptor pool, the kind table and the zero-field table, loaded once.
struct Schemas {
    pool: DescriptorPool,
    unknown: MessageDescriptor,
    kinds: HashMap<(String, String), MessageDescriptor>,
    /// The proto packages each apiVersion's kinds live in, for kinds missing from the table.
    packages: HashMap<String, Vec<String>>,
    /// For each message probed with kubectl: the JSON names of the fields Go writes even when zero.
    zero_fields: HashMap<String, HashSet<String>>,
}

impl Schemas {
    fn load() -> Result<Self, Error> {
        let pool = DescriptorPool::decode(crate::K8S_FILE_DESCRIPTOR_SET)
            .map_err(|e| Error::Schemas(e.to_string()))?;
        let unknown = pool
            .get_message_by_name(UNKNOWN)
            .ok_or_else(|| Error::Schemas(format!("{UNKNOWN} is missing")))?;
        let mut kinds = HashMap::new();
        let mut packages: HashMap<String, Vec<String>> = HashMap::new();
        for line in data_lines(KINDS) {
            let [api_version, kind, message] = line.split_whitespace().collect::<Vec<_>>()[..]
            else {
                return Err(Error::Schemas(format!("kinds.txt: bad line {line:?}")));
            };
            let desc = pool
                .get_message_by_name(message)
                .ok_or_else(|| Error::Schemas(format!("kinds.txt: no message {message}")))?;
            let in_version = packages.entry(api_version.to_owned()).or_default();
            if !in_version.iter().any(|p| p == desc.package_name()) {
                in_version.push(desc.package_name().to_owned());
            }
            kinds.insert((api_version.to_owned(), kind.to_owned()), desc);
        }
        let zero_fields = data_lines(ZERO_FIELDS)
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                Some((words.next()?.to_owned(), words.map(str::to_owned).collect()))
            })
            .collect();
        Ok(Self {
            pool,
            unknown,
            kinds,
            packages,
            zero_fields,
        })
    }

    /// The message for a kind: from the table, else `<package>.<kind>`, else metav1's options kinds.
    fn message(&self, api_version: &str, kind: &str) -> Option<MessageDescriptor> {
        let key = (api_version.to_owned(), kind.to_owned());
        let by_package = || {
            let packages = self.packages.get(api_version)?;
            packages
                .iter()
                .find_map(|package| self.pool.get_message_by_name(&format!("{package}.{kind}")))
        };
        let meta = || {
            META_KINDS
                .contains(&kind)
                .then(|| self.pool.get_message_by_name(&format!("{META}.{kind}")))
                .flatten()
        };
        // Discovery documents and metadata-only objects: metav1's, served
        // as `v1` (legacy discovery) or `meta.k8s.io/v1`.
        let discovery = || {
            matches!(api_version, "" | "v1" | "meta.k8s.io/v1")
                .then(|| self.pool.get_message_by_name(&format!("{META}.{kind}")))
                .flatten()
        };
        self.kinds
            .get(&key)
            .cloned()
            .or_else(by_package)
            .or_else(meta)
            .or_else(discovery)
    }

    /// Decodes a `runtime.Unknown` (after the magic bytes) into the object's JSON.
    fn decode_envelope(&self, envelope: &[u8], depth: usize) -> Result<Json, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::TooDeep);
        }
        let decoded = DECODED.with(|decoded| {
            decoded.set(decoded.get() + envelope.len());
            decoded.get()
        });
        if decoded > MAX_DECODED_BYTES {
            return Err(Error::TooLarge);
        }
        let unknown = DynamicMessage::decode(self.unknown.clone(), envelope)
            .map_err(|e| Error::MalformedEnvelope(e.to_string()))?;
        self.unknown_to_json(&unknown, depth)
    }

    fn unknown_to_json(&self, unknown: &DynamicMessage, depth: usize) -> Result<Json, Error> {
        let type_meta = message_field(unknown, 1);
        let api_version = type_meta
            .as_ref()
            .map(|t| string_field(t, 1))
            .unwrap_or_default();
        let kind = type_meta
            .as_ref()
            .map(|t| string_field(t, 2))
            .unwrap_or_default();
        let raw = bytes_field(unknown, 2);
        let encoding = string_field(unknown, 3);
        if !encoding.is_empty() {
            return Err(Error::MalformedEnvelope(format!(
                "unsupported contentEncoding {encoding:?}"
            )));
        }
        let content_type = string_field(unknown, 4);
        if content_type.starts_with("application/json") {
            let object: Json =
                serde_json::from_slice(&raw).map_err(|e| Error::MalformedObject {
                    api_version,
                    kind,
                    reason: e.to_string(),
                })?;
            return within_depth(&object, depth)
                .then_some(object)
                .ok_or(Error::TooDeep);
        }
        if !content_type.is_empty() && content_type != CONTENT_TYPE {
            return Err(Error::MalformedEnvelope(format!(
                "unsupported contentType {content_type:?}"
            )));
        }
        if kind.is_empty() {
            return Err(Error::MalformedEnvelope(
                "typeMeta.kind is empty".to_owned(),
            ));
        }
        let Some(desc) = self.message(&api_version, &kind) else {
            return Err(Error::UnknownKind { api_version, kind });
        };
        let fields = DynamicMessage::decode(desc, raw.as_slice())
            .map_err(|e| Error::Malformed(e.to_string()))
            .and_then(|object| self.message_to_json(&object, depth));
        let fields = match fields {
            Ok(fields) => fields,
            Err(Error::Malformed(reason)) => {
                return Err(Error::MalformedObject {
                    api_version,
                    kind,
                    reason,
                });
            }
            Err(other) => return Err(other),
        };
        let mut object = Map::new();
        if !api_version.is_empty() {
            object.insert("apiVersion".to_owned(), Json::String(api_version));
        }
        object.insert("kind".to_owned(), Json::String(kind));
        if let Some(Json::Object(fields)) = fields {
            object.extend(fields);
        }
        Ok(Json::Object(object))
    }

    /// The JSON of a message, or `None` where Go's JSON would leave it out (an empty `Time`).
    fn message_to_json(
        &self,
        message: &DynamicMessage,
        depth: usize,
    ) -> Result<Option<Json>, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::TooDeep);
        }
        let desc = message.descriptor();
        let name = desc.full_name();
        match name.strip_prefix("k8s.io.apimachinery.pkg.") {
            Some("apis.meta.v1.Time") => return time_json(message, false),
            Some("apis.meta.v1.MicroTime") => return time_json(message, true),
            Some("apis.meta.v1.Duration") => {
                return Ok(Some(Json::String(go_duration(int_field(message, 1)))));
            }
            Some("util.intstr.IntOrString") => return Ok(Some(int_or_string(message))),
            Some("api.resource.Quantity" | "api.resource.QuantityValue") => {
                let quantity = string_field(message, 1);
                return Ok(Some(Json::String(if quantity.is_empty() {
                    "0".to_owned()
                } else {
                    quantity
                })));
            }
            Some("runtime.RawExtension" | "apis.meta.v1.FieldsV1") => {
                return self.raw_json(&bytes_field(message, 1), depth);
            }
            Some("runtime.Unknown") => {
                return self
                    .unknown_to_json(message, depth)
                    .map(Some)
                    .map_err(nested);
            }
            _ => {}
        }
        if desc.package_name().starts_with(EXTENSIONS)
            && let Some(json) = self.schema_union(message, depth)?
        {
            return Ok(Some(json));
        }
        if let Some(items) = string_list_wrapper(message) {
            return Ok(Some(items));
        }
        let zero_fields = self.zero_fields.get(name);
        let mut fields: Vec<_> = message.fields().collect();
        fields.sort_by_key(|(field, _)| field.number());
        let mut object = Map::new();
        for (field, value) in fields {
            let json = match value {
                Value::List(items) if items.is_empty() => None,
                Value::List(items) => Some(self.list_to_json(&field.kind(), items, depth + 1)?),
                Value::Map(entries) if entries.is_empty() => None,
                Value::Map(entries) => {
                    let value_kind = match field.kind() {
                        Kind::Message(entry) => entry.map_entry_value_field().kind(),
                        kind => kind,
                    };
                    let mut entries: Vec<_> = entries
                        .iter()
                        .map(|(key, value)| (map_key(key), value))
                        .collect();
                    entries.sort_by(|a, b| a.0.cmp(&b.0));
                    let mut map = Map::new();
                    for (key, value) in entries {
                        map.insert(
                            key,
                            self.value_to_json(&value_kind, value, depth + 1)?
                                .unwrap_or(Json::Null),
                        );
                    }
                    Some(Json::Object(map))
                }
                value if is_zero(value) => {
                    let keep = match zero_fields {
                        Some(kept) => kept.contains(field.json_name()),
                        None => !matches!(value, Value::String(_) | Value::Bytes(_)),
                    };
                    if keep {
                        self.value_to_json(&field.kind(), value, depth + 1)?
                    } else {
                        None
                    }
                }
                value => self.value_to_json(&field.kind(), value, depth + 1)?,
            };
            match json {
                Some(Json::Object(inner)) if field.json_name() == INLINE => object.extend(inner),
                Some(json) => {
                    object.insert(field.json_name().to_owned(), json);
                }
                None => {}
            }
        }
        Ok(Some(Json::Object(object)))
    }

    /// The items of a repeated field; an item with no JSON of its own (an empty `Time`) is `null`.
    fn list_to_json(&self, kind: &Kind, items: &[Value], depth: usize) -> Result<Json, Error> {
        let items = items.iter().map(|item| {
            Ok(self
                .value_to_json(kind, item, depth + 1)?
                .unwrap_or(Json::Null))
        });
        Ok(Json::Array(items.collect::<Result<_, Error>>()?))
    }

    /// A single value (a field's, a list item's or a map entry's).
    fn value_to_json(
        &self,
        kind: &Kind,
        value: &Value,
        depth: usize,
    ) -> Result<Option<Json>, Error> {
        Ok(match value {
            Value::String(s) => Some(Json::String(s.clone())),
            Value::Bytes(b) => Some(Json::String(
                base64::engine::general_purpose::STANDARD.encode(b),
            )),
            Value::Bool(b) => Some(Json::Bool(*b)),
            Value::I32(n) => Some(Json::from(*n)),
            Value::I64(n) => Some(Json::from(*n)),
            Value::U32(n) => Some(Json::from(*n)),
            Value::U64(n) => Some(Json::from(*n)),
            Value::F32(n) => Number::from_f64(f64::from(*n)).map(Json::Number),
            Value::F64(n) => Number::from_f64(*n).map(Json::Number),
            Value::EnumNumber(n) => Some(match kind {
                Kind::Enum(desc) => desc
                    .get_value(*n)
                    .map_or(Json::from(*n), |v| Json::String(v.name().to_owned())),
                _ => Json::from(*n),
            }),
            Value::Message(message) => self.message_to_json(message, depth)?,
            Value::List(items) => Some(self.list_to_json(kind, items, depth)?),
            Value::Map(_) => return Err(Error::Malformed("map inside a list".to_owned())),
        })
    }

    /// Raw bytes holding JSON (or a nested protobuf object); base64 if they are neither.
    fn raw_json(&self, raw: &[u8], depth: usize) -> Result<Option<Json>, Error> {
        if raw.is_empty() {
            return Ok(None);
        }
        if let Some(envelope) = raw.strip_prefix(MAGIC) {
            return self
                .decode_envelope(envelope, depth)
                .map(Some)
                .map_err(nested);
        }
        let json = serde_json::from_slice(raw).unwrap_or_else(|_| {
            Json::String(base64::engine::general_purpose::STANDARD.encode(raw))
        });
        if !within_depth(&json, depth) {
            return Err(Error::TooDeep);
        }
        Ok(Some(json))
    }

    /// The CRD schema unions (marshalled as whichever side is set) and CRD `JSON`.
    fn schema_union(&self, message: &DynamicMessage, depth: usize) -> Result<Option<Json>, Error> {
        let name = message.descriptor().name().to_owned();
        let schema = |number| match message_field(message, number) {
            Some(schema) => self.message_to_json(&schema, depth),
            None => Ok(None),
        };
        let list = |number| {
            let field = message.descriptor().get_field(number)?;
            match message.get_field(&field).as_ref() {
                Value::List(items) if !items.is_empty() => {
                    Some(self.list_to_json(&field.kind(), items, depth))
                }
                _ => None,
            }
        };
        match name.as_str() {
            // {1 allows, 2 schema}
            "JSONSchemaPropsOrBool" => Ok(Some(match schema(2)? {
                Some(schema) => schema,
                None => Json::Bool(matches!(
                    message.get_field_by_number(1).as_deref(),
                    Some(Value::Bool(true))
                )),
            })),
            // {1 schema, 2 jSONSchemas} and {1 schema, 2 property}
            "JSONSchemaPropsOrArray" | "JSONSchemaPropsOrStringArray" => list(2)
                .transpose()?
                .map_or_else(|| schema(1), |items| Ok(Some(items))),
            "JSON" => self.raw_json(&bytes_field(message, 1), depth),
            _ => Ok(None),
        }
    }
}

/// Whether `json`, placed `depth` levels down, stays within [`MAX_DEPTH`]
/// (walked without recursion).
fn within_depth(json: &Json, depth: usize) -> bool {
    let mut stack = vec![(json, depth)];
    while let Some((value, level)) = stack.pop() {
        if level > MAX_DEPTH {
            return false;
        }
        match value {
            Json::Array(items) => stack.extend(items.iter().map(|v| (v, level + 1))),
            Json::Object(fields) => stack.extend(fields.values().map(|v| (v, level + 1))),
            _ => {}
        }
    }
    true
}

/// A message with one repeated string field `items` (`Verbs`, `ExtraValue`) is a JSON array.
fn string_list_wrapper(message: &DynamicMessage) -> Option<Json> {
    let desc = message.descriptor();
    let mut fields = desc.fields();
    let field = fields.next()?;
    if fields.next().is_some()
        || field.name() != "items"
        || !field.is_list()
        || field.kind() != Kind::String
    {
        return None;
    }
    let items = match message.get_field(&field).as_ref() {
        Value::List(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|s| Json::String(s.to_owned()))
            .collect(),
        _ => Vec::new(),
    };
    Some(Json::Array(items))
}

/// An error of an object nested in another: too deep stays too deep; the
/// rest is malformed, in the nested error's words.
fn nested(e: Error) -> Error {
    match e {
        Error::TooDeep => Error::TooDeep,
        Error::TooLarge => Error::TooLarge,
        other => Error::Malformed(other.to_string()),
    }
}

/// `Time` and `MicroTime` {1 seconds, 2 nanos}: RFC 3339 in UTC, or left out when zero.
fn time_json(message: &DynamicMessage, micro: bool) -> Result<Option<Json>, Error> {
    let (seconds, nanos) = (int_field(message, 1), int_field(message, 2));
    if seconds == 0 && nanos == 0 {
        return Ok(None);
    }
    let time = OffsetDateTime::from_unix_timestamp(seconds)
        .and_then(|t| t.replace_nanosecond(u32::try_from(nanos).unwrap_or(0)))
        .map_err(|e| Error::Malformed(format!("time out of range: {e}")))?;
    let formatted = if micro {
        time.format(format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
        ))
    } else {
        time.format(format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
        ))
    };
    formatted
        .map(|s| Some(Json::String(s)))
        .map_err(|e| Error::Malformed(e.to_string()))
}

/// `IntOrString` {1 type (0 int, 1 string), 2 intVal, 3 strVal}.
fn int_or_string(message: &DynamicMessage) -> Json {
    if int_field(message, 1) == 1 {
        Json::String(string_field(message, 3))
    } else {
        Json::from(int_field(message, 2))
    }
}

/// Formats nanoseconds the way Go's `time.Duration.String` does: `1h0m0s`, `1.5s`, `300ms`.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    if u < 1_000_000_000 {
        let (digits, unit) = match u {
            0..1_000 => (0, "ns"),
            1_000..1_000_000 => (3, "µs"),
            _ => (6, "ms"),
        };
        return format!("{sign}{}{unit}", decimal(u, digits));
    }
    let seconds = decimal(u % 60_000_000_000, 9);
    let minutes = u / 60_000_000_000;
    match (minutes / 60, minutes % 60) {
        (0, 0) => format!("{sign}{seconds}s"),
        (0, m) => format!("{sign}{m}m{seconds}s"),
        (h, m) => format!("{sign}{h}h{m}m{seconds}s"),
    }
}

/// `value / 10^digits` with its fraction, trailing zeros dropped: `decimal(1500, 3)` is `1.5`.
fn decimal(value: u64, digits: u32) -> String {
    let scale = 10u64.pow(digits);
    let fraction = format!("{:0width$}", value % scale, width = digits as usize);
    let fraction = fraction.trim_end_matches('0');
    if fraction.is_empty() {
        format!("{}", value / scale)
    } else {
        format!("{}.{fraction}", value / scale)
    }
}

/// `0`, `false`, `""` or empty bytes: what Go writes for a value field nobody set.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Bool(b) => !b,
        Value::I32(n) => *n == 0,
        Value::I64(n) => *n == 0,
        Value::U32(n) => *n == 0,
        Value::U64(n) => *n == 0,
        Value::F32(n) => *n == 0.0,
        Value::F64(n) => *n == 0.0,
        Value::String(s) => s.is_empty(),
        Value::Bytes(b) => b.is_empty(),
        _ => false,
    }
}

/// The lines of a generated table, without comments and blank lines.
fn data_lines(table: &str) -> impl Iterator<Item = &str> {
    table
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
}

fn map_key(key: &MapKey) -> String {
    match key {
        MapKey::String(s) => s.clone(),
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
    }
}

fn message_field(message: &DynamicMessage, number: u32) -> Option<DynamicMessage> {
    match message.get_field_by_number(number).as_deref() {
        Some(Value::Message(m)) if message.has_field_by_number(number) => Some(m.clone()),
        _ => None,
    }
}

fn string_field(message: &DynamicMessage, number: u32) -> String {
    match message.get_field_by_number(number).as_deref() {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

fn bytes_field(message: &DynamicMessage, number: u32) -> Vec<u8> {
    match message.get_field_by_number(number).as_deref() {
        Some(Value::Bytes(b)) => b.to_vec(),
        _ => Vec::new(),
    }
}

fn int_field(message: &DynamicMessage, number: u32) -> i64 {
    match message.get_field_by_number(number).as_deref() {
        Some(Value::I64(n)) => *n,
        Some(Value::I32(n)) => i64::from(*n),
        _ => 0,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Bodies captured from kubectl v1.33.1 on the wire (`kubectl create ...`, `auth can-i`).
    const NAMESPACE: &str = "6b3873000a0f0a02763112094e616d65737061636512190a110a017812001a0022002a0032003800420012001a020a001a002200";
    const CONFIG_MAP: &str = "6b3873000a0f0a0276311209436f6e6669674d6170122b0a110a017812001a0022002a0032003800420012060a01611201621a0e0a0362696e12070001fffe62696e1a002200";
    const SECRET: &str = "6b3873000a0c0a027631120653656372657412230a110a017312001a0022002a0032003800420012060a016b1201761a064f70617175651a002200";
    const DEPLOYMENT: &str = "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412b0010a1b0a016412001a0022002a003200380042005a080a036170701201641282010803120a0a080a036170701201641a6a0a1a0a0012001a0022002a003200380042005a080a03617070120164124c122e0a056e67696e7812056e67696e782a00320a0a001000185022002a0042006a007200800100880100900100a201001a00320042004a0052005800600068008201008a01009a0100c2010022020a00280038001a0c0800100018002000280038001a002200";
    const SERVICE_ACCOUNT: &str = "6b3873000a140a027631120e536572766963654163636f756e7412140a120a02736112001a0022002a003200380042001a002200";
    const TOKEN_REQUEST: &str = "6b3873000a280a1861757468656e7469636174696f6e2e6b38732e696f2f7631120c546f6b656e52657175657374121d0a100a0012001a0022002a00320038004200120320901c1a040a0012001a002200";
    const SELF_SUBJECT_ACCESS_REVIEW: &str = "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a656374416363657373526576696577123c0a100a0012001a0022002a00320038004200121e0a1c0a0764656661756c7412036765741a0022002a04706f647332003a001a08080012001a0020001a002200";
    const ROLE: &str = "6b3873000a240a1c726261632e617574686f72697a6174696f6e2e6b38732e696f2f76311204526f6c6512280a110a017212001a0022002a0032003800420012130a036765740a046c69737412001a04706f64731a002200";
    const INGRESS: &str = "6b3873000a1f0a146e6574776f726b696e672e6b38732e696f2f76311207496e677265737312650a130a03696e6712001a0022002a00320038004200124a12120a07666f6f2e636f6d12076d792d636572741a2d0a07666f6f2e636f6d12220a200a1e0a042f626172120f220d0a047376633112050a0010903f1a05457861637422056e67696e781a020a001a002200";
    const POD_DISRUPTION_BUDGET: &str = "6b3873000a200a09706f6c6963792f76311213506f6444697372757074696f6e42756467657412380a110a017012001a0022002a0032003800420012170a09080110001a03353025120a0a080a036170701201781a0a080018002000280030001a002200";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn length_delimited(number: u32, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        prost::encoding::encode_key(number, prost::encoding::WireType::LengthDelimited, &mut out);
        prost::encoding::encode_varint(data.len() as u64, &mut out);
        out.extend_from_slice(data);
        out
    }

    /// `k8s\0` + `runtime.Unknown` around raw object bytes.
    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [
            length_delimited(1, api_version.as_bytes()),
            length_delimited(2, kind.as_bytes()),
        ]
        .concat();
        [
            MAGIC.to_vec(),
            length_delimited(1, &type_meta),
            length_delimited(2, raw),
        ]
        .concat()
    }

    /// A body for an object given in protobuf's own JSON mapping (Time as {seconds}, Quantity as {string}, ...).
    fn body(api_version: &str, kind: &str, object: Json) -> Vec<u8> {
        use prost::Message as _;
        let schemas = SCHEMAS.as_ref().unwrap();
        let message =
            DynamicMessage::deserialize(schemas.message(api_version, kind).unwrap(), object)
                .unwrap();
        envelope(api_version, kind, &message.encode_to_vec())
    }

    #[test]
    fn namespace_from_kubectl() {
        // 6b 38 73 00 | 0a 0f (0a 02 "v1") (12 09 "Namespace") | 12 19 (0a 11 <ObjectMeta: name "x",
        // generateName, namespace, selfLink, uid, resourceVersion "", generation 0, creationTimestamp {}>)
        // (12 00 <spec>) (1a 02 0a 00 <status.phase "">) | 1a 00 | 22 00
        let object = decode(&hex(NAMESPACE)).unwrap();
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}, "spec": {}, "status": {}})
        );
    }

    #[test]
    fn config_map_with_binary_data() {
        let object = decode(&hex(CONFIG_MAP)).unwrap();
        let expected = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
            "data": {"a": "b"}, "binaryData": {"bin": "AAH//mJpbg=="}});
        assert_eq!(object, expected);
    }

    #[test]
    fn secret_data_is_base64() {
        let object = decode(&hex(SECRET)).unwrap();
        let expected = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"k": "dg=="}, "type": "Opaque"});
        assert_eq!(object, expected);
    }

    #[test]
    fn deployment_from_kubectl_matches_go_json() {
        // What kubectl itself prints for these bytes (`-o json`), less `creationTimestamp: null`.
        let object = decode(&hex(DEPLOYMENT)).unwrap();
        let expected = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"app": "d"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "d"}},
                "template": {"metadata": {"labels": {"app": "d"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx",
                        "ports": [{"containerPort": 80}], "resources": {}}]}},
                "strategy": {}},
            "status": {}});
        assert_eq!(object, expected);
    }

    #[test]
    fn deployment_with_strategy_resources_and_timestamp() {
        let pod_spec = json!({
            "containers": [{"name": "web", "image": "nginx:1.27",
                "ports": [{"containerPort": 8080, "protocol": "TCP", "hostPort": 0}],
                "resources": {"limits": {"cpu": {"string": "500m"}, "memory": {"string": "128Mi"}},
                              "requests": {"cpu": {"string": "100m"}}},
                "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef":
                    {"localObjectReference": {"name": "cfg"}, "key": "mode"}}}],
                "stdin": false}],
            "volumes": [{"name": "data", "volumeSource": {"configMap": {"localObjectReference": {"name": "cfg"}}}}],
            "terminationGracePeriodSeconds": 0,
            "hostNetwork": false});
        let object = decode(&body("apps/v1", "Deployment", json!({
            "metadata": {"name": "web", "namespace": "default", "generation": 0,
                         "creationTimestamp": {"seconds": 1704164645}, "labels": {"app": "web"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}, "creationTimestamp": {}}, "spec": pod_spec},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                    "maxSurge": {"type": 1, "strVal": "25%"}, "maxUnavailable": {"type": 0, "intVal": 1}}},
                "minReadySeconds": 0, "paused": false}})))
        .unwrap();
        let expected = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default",
                         "creationTimestamp": "2024-01-02T03:04:05Z", "labels": {"app": "web"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                    "containers": [{"name": "web", "image": "nginx:1.27",
                        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m"}},
                        "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}}]}],
                    "volumes": [{"name": "data", "configMap": {"name": "cfg"}}],
                    "terminationGracePeriodSeconds": 0}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}}});
        assert_eq!(object, expected);
    }

    #[test]
    fn service_account_from_kubectl() {
        let object = decode(&hex(SERVICE_ACCOUNT)).unwrap();
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}})
        );
    }

    #[test]
    fn token_request_from_kubectl() {
        // `kubectl create token sa --duration=1h`
        let object = decode(&hex(TOKEN_REQUEST)).unwrap();
        let expected = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "metadata": {}, "spec": {"expirationSeconds": 3600}, "status": {}});
        assert_eq!(object, expected);
    }

    #[test]
    fn self_subject_access_review_from_kubectl() {
        // `kubectl auth can-i get pods`. SubjectAccessReviewStatus is not in zero_fields.txt
        // (kubectl prints no JSON for it), so its zero bools stay.
        let object = decode(&hex(SELF_SUBJECT_ACCESS_REVIEW)).unwrap();
        let expected = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {},
            "spec": {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}},
            "status": {"allowed": false, "denied": false}});
        assert_eq!(object, expected);
    }

    #[test]
    fn role_rules_list_verbs() {
        let object = decode(&hex(ROLE)).unwrap();
        let expected = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r"},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]});
        assert_eq!(object, expected);
    }

    #[test]
    fn ingress_from_kubectl() {
        let object = decode(&hex(INGRESS)).unwrap();
        let expected = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "ing"},
            "spec": {"ingressClassName": "nginx",
                "tls": [{"hosts": ["foo.com"], "secretName": "my-cert"}],
                "rules": [{"host": "foo.com", "http": {"paths": [{"path": "/bar", "pathType": "Exact",
                    "backend": {"service": {"name": "svc1", "port": {"number": 8080}}}}]}}]},
            "status": {"loadBalancer": {}}});
        assert_eq!(object, expected);
    }

    #[test]
    fn pod_disruption_budget_min_available_percent() {
        // Go keeps the status counters at zero: they have no omitempty.
        let object = decode(&hex(POD_DISRUPTION_BUDGET)).unwrap();
        let expected = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "p"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "x"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}});
        assert_eq!(object, expected);
    }

    #[test]
    fn pod_disruption_budget_min_available_int() {
        let object = decode(&body(
            "policy/v1",
            "PodDisruptionBudget",
            json!({"spec": {"minAvailable": {"type": 0, "intVal": 2}}}),
        ))
        .unwrap();
        assert_eq!(object["spec"], json!({"minAvailable": 2}));
    }

    #[test]
    fn zero_values_follow_go_json() {
        // nodePort is an omitempty int32, storageClassName a *string, volumeMode a *string left unset.
        let service = decode(&body("v1", "Service",
            json!({"spec": {"ports": [{"port": 80, "nodePort": 0, "protocol": ""}], "clusterIP": ""}}))).unwrap();
        assert_eq!(service["spec"], json!({"ports": [{"port": 80}]}));
        let claim = decode(&body(
            "v1",
            "PersistentVolumeClaim",
            json!({"spec": {"storageClassName": "", "volumeName": ""}}),
        ))
        .unwrap();
        assert_eq!(claim["spec"], json!({"storageClassName": ""}));
    }

    #[test]
    fn extra_values_are_string_lists() {
        let object = decode(&body(
            "authorization.k8s.io/v1",
            "SubjectAccessReview",
            json!({
            "spec": {"user": "alice", "groups": ["dev"], "extra": {"scopes": {"items": ["a", "b"]}},
                     "nonResourceAttributes": {"path": "/healthz", "verb": "get"}}}),
        ))
        .unwrap();
        assert_eq!(
            object["spec"],
            json!({"user": "alice", "groups": ["dev"],
            "extra": {"scopes": ["a", "b"]}, "nonResourceAttributes": {"path": "/healthz", "verb": "get"}})
        );
    }

    #[test]
    fn micro_time_duration_and_raw_extension() {
        let lease = decode(&body(
            "coordination.k8s.io/v1",
            "Lease",
            json!({
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                     "renewTime": {"seconds": 1704164645, "nanos": 123456789}}}),
        ))
        .unwrap();
        assert_eq!(
            lease["spec"],
            json!({"holderIdentity": "a", "leaseDurationSeconds": 15,
            "renewTime": "2024-01-02T03:04:05.123456Z"})
        );
        let metrics = decode(&body(
            "metrics.k8s.io/v1beta1",
            "NodeMetrics",
            json!({
            "window": {"duration": 30_000_000_000_i64}, "usage": {"cpu": {"string": "250m"}}}),
        ))
        .unwrap();
        assert_eq!(
            metrics,
            json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
            "window": "30s", "usage": {"cpu": "250m"}})
        );
        let raw = base64::engine::general_purpose::STANDARD.encode(br#"{"spec":{"template":{}}}"#);
        let revision = decode(&body(
            "apps/v1",
            "ControllerRevision",
            json!({"data": {"raw": raw}, "revision": 2}),
        ))
        .unwrap();
        assert_eq!(revision["data"], json!({"spec": {"template": {}}}));
        assert_eq!(revision["revision"], json!(2));
    }

    #[test]
    fn lists_and_options_kinds_resolve() {
        let list = decode(&body(
            "v1",
            "PodList",
            json!({"items": [{"metadata": {"name": "p"}}]}),
        ))
        .unwrap();
        assert_eq!(
            list,
            json!({"apiVersion": "v1", "kind": "PodList", "items": [{"metadata": {"name": "p"}}]})
        );
        let options = decode(&body(
            "apps/v1",
            "DeleteOptions",
            json!({"propagationPolicy": "Foreground", "preconditions": {"uid": "u1"}}),
        ))
        .unwrap();
        assert_eq!(options["preconditions"], json!({"uid": "u1"}));
    }

    #[test]
    fn go_durations() {
        let cases = [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (300_000_000, "300ms"),
            (1_500_000_000, "1.5s"),
            (30_000_000_000, "30s"),
            (90_000_000_000, "1m30s"),
            (3_600_000_000_000, "1h0m0s"),
            (-3_723_000_000_000, "-1h2m3s"),
        ];
        for (nanos, text) in cases {
            assert_eq!(go_duration(nanos), text, "{nanos}ns");
        }
    }

    #[test]
    fn kind_table_covers_the_groups() {
        let schemas = SCHEMAS.as_ref().unwrap();
        for (api_version, kind, message) in [
            ("v1", "Pod", "k8s.io.api.core.v1.Pod"),
            ("apps/v1", "StatefulSet", "k8s.io.api.apps.v1.StatefulSet"),
            (
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                "k8s.io.api.rbac.v1.ClusterRoleBinding",
            ),
            (
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
            ),
            (
                "apiregistration.k8s.io/v1",
                "APIService",
                "k8s.io.kube_aggregator.pkg.apis.apiregistration.v1.APIService",
            ),
            (
                "storage.k8s.io/v1",
                "CSIDriver",
                "k8s.io.api.storage.v1.CSIDriver",
            ),
            ("events.k8s.io/v1", "Event", "k8s.io.api.events.v1.Event"),
            (
                "metrics.k8s.io/v1beta1",
                "PodMetrics",
                "k8s.io.metrics.pkg.apis.metrics.v1beta1.PodMetrics",
            ),
        ] {
            assert_eq!(
                schemas.message(api_version, kind).unwrap().full_name(),
                message
            );
        }
        assert!(schemas.kinds.len() > 300, "{} kinds", schemas.kinds.len());
        assert!(
            schemas
                .zero_fields
                .contains_key("k8s.io.api.core.v1.PodSpec")
        );
    }

    #[test]
    fn bad_magic() {
        assert!(matches!(
            decode(br#"{"kind":"Namespace"}"#),
            Err(Error::BadMagic)
        ));
        assert!(matches!(decode(b"k8s"), Err(Error::BadMagic)));
    }

    #[test]
    fn unknown_kind() {
        let err = decode(&envelope("example.com/v1", "Widget", b"")).unwrap_err();
        assert!(matches!(&err, Error::UnknownKind { api_version, kind }
            if api_version == "example.com/v1" && kind == "Widget"));
        assert_eq!(err.to_string(), "unknown kind example.com/v1/Widget");
    }

    /// ControllerRevisions nested `levels` deep, each in the `data`
    /// RawExtension of the one above, around `core` in the innermost `data`.
    fn nested_revisions(levels: usize, core: &[u8]) -> Vec<u8> {
        let data = |raw: &[u8]| length_delimited(2, &length_delimited(1, raw));
        let mut body = envelope("apps/v1", "ControllerRevision", &data(core));
        for _ in 0..levels {
            body = envelope("apps/v1", "ControllerRevision", &data(&body));
        }
        body
    }

    #[test]
    fn nested_envelopes_are_bounded() {
        // Each level is one JSON level: the object is its parent's `data`.
        let ok = decode(&nested_revisions(MAX_DEPTH - 1, b"")).unwrap();
        assert_eq!(ok["data"]["data"]["kind"], "ControllerRevision");
        let err = decode(&nested_revisions(MAX_DEPTH + 1, b"")).unwrap_err();
        assert!(matches!(err, Error::TooDeep), "{err}");
        // The crafted request of the hardening issue: thousands of levels,
        // ~800 KB, refused by depth or by the bytes its levels hold.
        let body = nested_revisions(20_000, b"");
        assert!(body.len() > 500_000, "{}", body.len());
        let err = decode(&body).unwrap_err();
        assert!(matches!(err, Error::TooDeep | Error::TooLarge), "{err}");
        // Big levels: what they hold together is bounded, not only their depth.
        let big = nested_revisions(10, &vec![b' '; 2 << 20]);
        assert!(matches!(decode(&big).unwrap_err(), Error::TooLarge));
        let one = decode(&nested_revisions(2, &vec![b' '; 2 << 20])).unwrap();
        assert_eq!(one["kind"], "ControllerRevision");
    }

    #[test]
    fn raw_json_counts_toward_the_depth() {
        let arrays = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        // 40 envelopes around 40 nested arrays: over the limit.
        let err = decode(&nested_revisions(40, arrays(40).as_bytes())).unwrap_err();
        assert!(matches!(err, Error::TooDeep), "{err}");
        let ok = decode(&nested_revisions(40, arrays(20).as_bytes())).unwrap();
        assert_eq!(ok["kind"], "ControllerRevision");
    }

    #[test]
    fn truncated_bytes() {
        let namespace = hex(NAMESPACE);
        let err = decode(&namespace[..namespace.len() - 10]).unwrap_err();
        assert!(matches!(err, Error::MalformedEnvelope(_)), "{err}");
        // An intact envelope around a cut-off object: ObjectMeta claims 0x11 bytes, has 3.
        let err = decode(&envelope(
            "v1",
            "Namespace",
            &[0x0a, 0x11, 0x0a, 0x01, b'x'],
        ))
        .unwrap_err();
        assert!(matches!(err, Error::MalformedObject { .. }), "{err}");
        let err = decode(&envelope("v1", "", b"")).unwrap_err();
        assert!(matches!(err, Error::MalformedEnvelope(_)), "{err}");
    }
}
