//! Custom resource data as CEL values, the way kube's `UnstructuredToVal`
//! maps them: schema objects become maps keyed by escaped property names
//! (only declared properties are visible), `additionalProperties` maps keep
//! their keys, integers stay integers, `number` fields are doubles,
//! `x-kubernetes-int-or-string` stays whatever it is, and strings with
//! `format: byte`, `duration`, `date` or `date-time` become bytes, durations
//! and timestamps.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use chrono::{DateTime, FixedOffset, NaiveDate, TimeZone as _};
use kube_cel::cel::Value as CelValue;
use kube_cel::cel::objects::{Key, Map};
use serde_json::Value;

use super::schema::{Schema, escape};

/// Converts `value` to a CEL value typed by `schema`.
pub fn to_cel(value: &Value, schema: &Schema) -> CelValue {
    if value.is_null() {
        return CelValue::Null;
    }
    if schema.int_or_string {
        return untyped(value);
    }
    match (schema.ty.as_str(), value) {
        ("object", Value::Object(fields)) => {
            if let Some(additional) = &schema.additional_properties {
                let map = fields
                    .iter()
                    .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v, additional)));
                return map_value(map.collect());
            }
            if schema.properties.is_empty() {
                return untyped(value);
            }
            let map = schema.properties.iter().filter_map(|(name, prop)| {
                let v = fields.get(name)?;
                Some((Key::String(Arc::new(escape(name)?)), to_cel(v, prop)))
            });
            map_value(map.collect())
        }
        ("array", Value::Array(items)) => {
            let item_schema = schema.items.as_deref();
            let items = items
                .iter()
                .map(|v| item_schema.map_or_else(|| untyped(v), |s| to_cel(v, s)));
            CelValue::List(Arc::new(items.collect()))
        }
        ("string", Value::String(s)) => match schema.format.as_str() {
            "byte" => match base64::engine::general_purpose::STANDARD.decode(s) {
                Ok(bytes) => CelValue::Bytes(Arc::new(bytes)),
                Err(_) => CelValue::String(Arc::new(s.clone())),
            },
            "duration" => parse_duration(s)
                .map_or_else(|| CelValue::String(Arc::new(s.clone())), CelValue::Duration),
            "date" => parse_date(s).map_or_else(
                || CelValue::String(Arc::new(s.clone())),
                CelValue::Timestamp,
            ),
            "date-time" => DateTime::parse_from_rfc3339(s).map_or_else(
                |_| CelValue::String(Arc::new(s.clone())),
                CelValue::Timestamp,
            ),
            _ => CelValue::String(Arc::new(s.clone())),
        },
        ("integer", Value::Number(n)) => match n.as_i64() {
            Some(i) => CelValue::Int(i),
            None => n
                .as_f64()
                .map_or(CelValue::Null, |f| CelValue::Int(f as i64)),
        },
        ("number", Value::Number(n)) => CelValue::Float(n.as_f64().unwrap_or_default()),
        _ => untyped(value),
    }
}

fn map_value(map: HashMap<Key, CelValue>) -> CelValue {
    CelValue::Map(Map { map: Arc::new(map) })
}

/// JSON without a schema: integers that fit stay integers.
fn untyped(value: &Value) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => CelValue::Int(i),
            (None, Some(u)) => CelValue::UInt(u),
            _ => CelValue::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(untyped).collect())),
        Value::Object(fields) => map_value(
            fields
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), untyped(v)))
                .collect(),
        ),
    }
}

fn parse_date(s: &str) -> Option<DateTime<FixedOffset>> {
    let date = NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    let utc = FixedOffset::east_opt(0)?;
    Some(utc.from_utc_datetime(&date.and_hms_opt(0, 0, 0)?))
}

/// Parses a Go duration (`1h30m`, `1.5s`, `-300ms`).
pub fn parse_duration(s: &str) -> Option<chrono::Duration> {
    let (negative, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
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
        nanos += number * scale;
    }
    let nanos = if negative { -nanos } else { nanos };
    Some(chrono::Duration::nanoseconds(nanos as i64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_json_by_schema() {
        let schema = Schema::parse(&json!({"type": "object", "properties": {
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "port": {"x-kubernetes-int-or-string": true},
            "my-field": {"type": "string"},
            "timeout": {"type": "string", "format": "duration"}
        }}));
        let value = to_cel(
            &json!({"count": 3, "ratio": 1, "port": "http", "my-field": "x", "timeout": "1m30s", "extra": 1}),
            &schema,
        );
        let CelValue::Map(map) = value else {
            panic!("map")
        };
        let get = |k: &str| map.map.get(&Key::String(Arc::new(k.into()))).cloned();
        assert_eq!(get("count"), Some(CelValue::Int(3)));
        assert_eq!(get("ratio"), Some(CelValue::Float(1.0)));
        assert_eq!(get("port"), Some(CelValue::String(Arc::new("http".into()))));
        assert_eq!(
            get("my__dash__field"),
            Some(CelValue::String(Arc::new("x".into())))
        );
        assert_eq!(
            get("timeout"),
            Some(CelValue::Duration(chrono::Duration::seconds(90)))
        );
        assert_eq!(get("extra"), None);
    }

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_duration("1h30m"), Some(chrono::Duration::minutes(90)));
        assert_eq!(
            parse_duration("-1.5s"),
            Some(chrono::Duration::milliseconds(-1500))
        );
        assert_eq!(parse_duration("10"), None);
    }
}
