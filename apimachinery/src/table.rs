//! `meta.k8s.io/v1` Table output: columns per resource, rows with the
//! object's metadata, ages preformatted as kubectl prints them.

use serde::Serialize;
use serde_json::{Value, json};

/// The Accept parameters that ask for a Table.
pub fn wants_table(accept: &str) -> bool {
    wants_as(accept, &["Table"])
}

/// Whether an Accept header asks for objects' metadata only
/// (`as=PartialObjectMetadata` or `PartialObjectMetadataList`, group meta.k8s.io),
/// what client-go's metadata informers ask.
pub fn wants_metadata(accept: &str) -> bool {
    wants_as(
        accept,
        &["PartialObjectMetadata", "PartialObjectMetadataList"],
    )
}

fn wants_as(accept: &str, kinds: &[&str]) -> bool {
    accept.split(',').any(|part| {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        params.contains(&"g=meta.k8s.io")
            && params.iter().any(|p| {
                p.strip_prefix("as=")
                    .is_some_and(|kind| kinds.contains(&kind))
            })
    })
}

/// An object's metadata as a meta.k8s.io/v1 PartialObjectMetadata.
pub fn partial_object_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// A column definition.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Column {
    /// The header, e.g. `Name`.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `name` for the name column, otherwise usually empty.
    pub format: String,
    /// What the column shows.
    pub description: String,
    /// 0 always shown; higher only with `-o wide`.
    pub priority: i32,
}

impl Column {
    /// A column shown by default.
    pub fn new(name: &str, type_: &str, description: &str) -> Self {
        Column {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: description.into(),
            priority: 0,
        }
    }

    /// A column shown only with `-o wide`.
    pub fn wide(mut self) -> Self {
        self.priority = 1;
        self
    }
}

/// The Name column.
pub fn name_column() -> Column {
    Column {
        format: "name".into(),
        ..Column::new(
            "Name",
            "string",
            "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        )
    }
}

/// `metadata.creationTimestamp`'s description (kube's swagger doc).
const CREATION_TIMESTAMP: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The Age column (preformatted, so typed string).
pub fn age_column() -> Column {
    Column::new("Age", "string", CREATION_TIMESTAMP)
}

/// The Created At column of kube's default table (`date`: RFC 3339).
pub fn created_at_column() -> Column {
    Column::new("Created At", "date", CREATION_TIMESTAMP)
}

/// kube's default table (`rest.NewDefaultTableConvertor`), for a resource
/// without a printer: Name and Created At.
pub fn default_columns() -> Vec<Column> {
    vec![name_column(), created_at_column()]
}

/// The cells of [`default_columns`].
pub fn default_cells(obj: &Value) -> Vec<Value> {
    vec![name_cell(obj), created_at_cell(obj)]
}

/// The object's name as a cell.
pub fn name_cell(obj: &Value) -> Value {
    obj.pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::String(String::new()))
}

/// The creation timestamp as a Created At cell: RFC 3339 in UTC, kube's
/// zero time when there is none.
pub fn created_at_cell(obj: &Value) -> Value {
    let created = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        });
    let text = created
        .map(|t| t.to_offset(time::UtcOffset::UTC))
        .and_then(|t| {
            t.replace_nanosecond(0)
                .ok()?
                .format(&time::format_description::well_known::Rfc3339)
                .ok()
        });
    Value::String(text.unwrap_or_else(|| "0001-01-01T00:00:00Z".into()))
}

/// The object's age as a cell.
pub fn age_cell(obj: &Value) -> Value {
    Value::String(age_of(
        obj.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
    ))
}

/// The age since an RFC3339 timestamp, as kubectl prints it (`<unknown>` if absent).
pub fn age_of(timestamp: Option<&str>) -> String {
    let Some(ts) = timestamp.and_then(|t| {
        time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
    }) else {
        return "<unknown>".into();
    };
    let elapsed = time::OffsetDateTime::now_utc() - ts;
    human_duration(elapsed.whole_seconds())
}

/// kube's `duration.HumanDuration`: `42s`, `5m10s`, `3h`, `2d4h`, `3y`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let seconds = seconds.max(0);
    let (minutes, hours) = (seconds / 60, seconds / 3600);
    let days = hours / 24;
    let years = days / 365;
    let with = |big: i64, unit: &str, small: i64, small_unit: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{small_unit}")
        }
    };
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        with(minutes, "m", seconds % 60, "s")
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        with(hours, "h", minutes % 60, "m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        with(days, "d", hours % 24, "h")
    } else if days < 365 * 2 {
        format!("{days}d")
    } else if days < 365 * 8 {
        with(years, "y", days % 365, "d")
    } else {
        format!("{years}y")
    }
}

/// What a row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// A PartialObjectMetadata (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter.
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// One table row for an object.
pub fn row(cells: Vec<Value>, obj: &Value, include: IncludeObject) -> Value {
    match include {
        IncludeObject::None => json!({ "cells": cells }),
        IncludeObject::Metadata => json!({
            "cells": cells,
            "object": partial_object_metadata(obj),
        }),
        IncludeObject::Object => json!({ "cells": cells, "object": obj }),
    }
}

/// A whole Table.
pub fn table(
    columns: Option<&[Column]>,
    rows: Vec<Value>,
    resource_version: &str,
    continue_token: &str,
) -> Value {
    let mut metadata = serde_json::Map::new();
    if !resource_version.is_empty() {
        metadata.insert("resourceVersion".into(), resource_version.into());
    }
    if !continue_token.is_empty() {
        metadata.insert("continue".into(), continue_token.into());
    }
    let mut t = json!({ "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "rows": rows });
    if let Some(columns) = columns {
        t["columnDefinitions"] = serde_json::to_value(columns).unwrap_or(Value::Null);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_table_is_kubes_name_and_created_at() {
        let columns = default_columns();
        let shape: Vec<_> = columns
            .iter()
            .map(|c| (c.name.as_str(), c.type_.as_str(), c.format.as_str()))
            .collect();
        assert_eq!(
            shape,
            [("Name", "string", "name"), ("Created At", "date", "")]
        );
        assert!(
            columns[1]
                .description
                .starts_with("CreationTimestamp is a timestamp")
        );
        let obj =
            json!({"metadata": {"name": "a", "creationTimestamp": "2025-05-01T12:00:00+02:00"}});
        assert_eq!(
            default_cells(&obj),
            [json!("a"), json!("2025-05-01T10:00:00Z")]
        );
        let unset = json!({"metadata": {"name": "b"}});
        assert_eq!(default_cells(&unset)[1], json!("0001-01-01T00:00:00Z"));
    }

    #[test]
    fn human_durations_match_kubectl() {
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (47 * 3600, "47h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
            (800 * 86400, "2y70d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn accept_negotiation() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }

    #[test]
    fn rows_carry_metadata() {
        let obj = json!({"metadata":{"name":"a","namespace":"n","labels":{"x":"y"}}});
        let r = row(vec![name_cell(&obj)], &obj, IncludeObject::Metadata);
        assert_eq!(r["object"]["metadata"]["labels"]["x"], "y");
        assert_eq!(r["cells"][0], "a");
    }
}
