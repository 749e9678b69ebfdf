//! Core v1 Events, selectable by the object they are about.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use apimachinery::validation;
use generic_server::strategy::{Strategy, string_at};
use serde_json::{Value, json};

/// The rules of `v1/Event`.
pub struct EventStrategy;

/// Longest `reportingInstance`, `action` and `reason` of an event with an `eventTime`.
const SHORT_LIMIT: usize = 128;
/// Longest `message` of an event with an `eventTime`.
const MESSAGE_LIMIT: usize = 1024;

/// The fields kube answers a core v1 Event with even when unset: its times
/// and `source` are Go structs that omitempty does not omit, and the
/// reporting strings have no omitempty.
pub(crate) fn answered_unset_fields(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    map.entry("source").or_insert_with(|| json!({}));
    for time in ["firstTimestamp", "lastTimestamp", "eventTime"] {
        map.entry(time).or_insert(Value::Null);
    }
    for reporting in ["reportingComponent", "reportingInstance"] {
        map.entry(reporting).or_insert_with(|| json!(""));
    }
}

/// kube's legacy Event validation (`legacyValidateEvent`), all a core v1
/// request gets: the event's namespace is its object's, and an event with
/// an `eventTime` names who reported it and what was done.
fn validate_event(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let namespace = text(obj, "/metadata/namespace");
    let object_namespace = text(obj, "/involvedObject/namespace");
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            object_namespace,
            "does not match event.namespace",
        )
    };
    if text(obj, "/eventTime").is_empty() {
        let allowed = if object_namespace.is_empty() {
            namespace.is_empty() || namespace == "default"
        } else {
            namespace == object_namespace
        };
        if !allowed {
            errs.push(mismatch());
        }
        return errs;
    }
    if object_namespace.is_empty() && !["default", "kube-system"].contains(&namespace) {
        errs.push(mismatch());
    }
    let controller = text(obj, "/reportingComponent");
    if controller.is_empty() {
        errs.push(FieldError::required("reportingComponent", ""));
    }
    errs.extend(
        validation::qualified_name(controller)
            .into_iter()
            .map(|m| FieldError::invalid("reportingComponent", controller, m)),
    );
    for (field, limit) in [
        ("reportingInstance", SHORT_LIMIT),
        ("action", SHORT_LIMIT),
        ("reason", SHORT_LIMIT),
        ("message", MESSAGE_LIMIT),
    ] {
        let value = text(obj, &format!("/{field}"));
        if value.is_empty() && field != "message" {
            errs.push(FieldError::required(field, ""));
        }
        if value.len() > limit {
            errs.push(FieldError::invalid(
                field,
                "",
                format!("can have at most {limit} characters"),
            ));
        }
    }
    errs
}

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The age of the timestamp at `pointer`, `<unknown>` if unset.
fn age_at(obj: &Value, pointer: &str) -> String {
    table::age_of(Some(text(obj, pointer)).filter(|t| !t.is_empty()))
}

/// The first non-empty of `values`.
fn first_set<'a>(values: &[&'a str]) -> &'a str {
    values
        .iter()
        .find(|v| !v.is_empty())
        .copied()
        .unwrap_or_default()
}

/// kube's `printEvent` cells: first and last seen from the old timestamps,
/// else the event time, a series' last observation and count winning; a
/// singleton counts 1.
fn event_cells(obj: &Value) -> Vec<Value> {
    let first = if text(obj, "/firstTimestamp").is_empty() {
        age_at(obj, "/eventTime")
    } else {
        age_at(obj, "/firstTimestamp")
    };
    let mut last = if text(obj, "/lastTimestamp").is_empty() {
        first.clone()
    } else {
        age_at(obj, "/lastTimestamp")
    };
    let mut count = obj.get("count").and_then(Value::as_i64).unwrap_or(0);
    if let Some(series) = obj.get("series").filter(|s| s.is_object()) {
        last = age_at(series, "/lastObservedTime");
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = text(obj, "/involvedObject/kind").to_lowercase();
    let name = text(obj, "/involvedObject/name");
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    let component = first_set(&[
        text(obj, "/source/component"),
        text(obj, "/reportingComponent"),
    ]);
    let instance = first_set(&[text(obj, "/source/host"), text(obj, "/reportingInstance")]);
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(text(obj, "/type")),
        json!(text(obj, "/reason")),
        json!(target),
        json!(text(obj, "/involvedObject/fieldPath")),
        json!(source),
        json!(text(obj, "/message").trim()),
        json!(first),
        json!(count),
        table::name_cell(obj),
    ]
}

impl Strategy for EventStrategy {
    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn defaults(&self, obj: &mut Value) {
        answered_unset_fields(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_event(obj)
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new("Last Seen", "string", "Time since the event was last seen"),
            Column::new("Type", "string", "Type of this event"),
            Column::new(
                "Reason",
                "string",
                "Short, machine understandable string that gives the reason for this event",
            ),
            Column::new("Object", "string", "The object this Event is about"),
            Column::new("Subobject", "string", "The field of the object").wide(),
            Column::new("Source", "string", "The component reporting this event").wide(),
            Column::new(
                "Message",
                "string",
                "A human-readable description of the status of this operation",
            ),
            Column::new(
                "First Seen",
                "string",
                "The time at which the event was first recorded",
            )
            .wide(),
            Column::new(
                "Count",
                "string",
                "The number of times this event has occurred",
            )
            .wide(),
            Column {
                format: "name".into(),
                ..Column::new("Name", "string", "The event's name").wide()
            },
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        event_cells(obj)
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "source" => Some(text(obj, "/source/component").to_string()),
            other => Some(string_at(obj, other).unwrap_or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_fields_and_legacy_validation() {
        let mut event = json!({"metadata": {"name": "e", "namespace": "team"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "team"}, "reason": "R"});
        EventStrategy.defaults(&mut event);
        assert_eq!(event["source"], json!({}));
        assert_eq!(event["eventTime"], Value::Null);
        assert_eq!(event["reportingComponent"], "");
        assert!(EventStrategy.validate(&event).is_empty());
        event["involvedObject"]["namespace"] = json!("other");
        assert_eq!(
            EventStrategy.validate(&event)[0].to_string(),
            r#"involvedObject.namespace: Invalid value: "other": does not match event.namespace"#
        );
        // A new-style event names who reported it.
        let new_style = json!({"metadata": {"name": "e", "namespace": "team"}, "eventTime": "2025-01-01T00:00:00.000000Z",
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "team"}});
        let fields: Vec<String> = EventStrategy
            .validate(&new_style)
            .iter()
            .map(|e| e.field.clone())
            .collect();
        assert_eq!(fields[0], "reportingComponent");
        assert_eq!(
            fields[fields.len() - 3..],
            ["reportingInstance", "action", "reason"]
        );
    }

    #[test]
    fn rows_as_kubes_printer() {
        let now = time::OffsetDateTime::now_utc();
        let ago = |secs: i64| {
            (now - time::Duration::seconds(secs))
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default()
        };
        // An events.k8s.io-style event: event time, reporting controller, a series.
        let series = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Node"},
            "eventTime": ago(3 * 86400), "reportingComponent": "kubelet", "reportingInstance": "node-a",
            "series": {"count": 4, "lastObservedTime": ago(10 * 3600)}, "message": " hello \n"});
        let cells = EventStrategy.cells(&series);
        assert_eq!(cells[0], "10h", "{cells:?}");
        assert_eq!(cells[3], "node");
        assert_eq!(cells[5], "kubelet, node-a");
        assert_eq!(cells[6], "hello");
        assert_eq!(cells[7], "3d");
        assert_eq!(cells[8], 4);
        // A core event: last and first timestamps, its count, a host without component.
        let core = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "firstTimestamp": ago(100 * 86400), "lastTimestamp": ago(20 * 3600), "count": 3,
            "source": {"host": "node-b"}});
        let cells = EventStrategy.cells(&core);
        assert_eq!(cells[0], "20h", "{cells:?}");
        assert_eq!(cells[5], ", node-b");
        assert_eq!(cells[7], "100d");
        assert_eq!(cells[8], 3);
    }

    #[test]
    fn object_column_and_fields() {
        let ev = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "ConfigMap", "name": "c", "uid": "u"}, "type": "Normal", "reason": "X", "source": {"component": "me"}});
        let cells = EventStrategy.cells(&ev);
        assert_eq!(cells[3], "configmap/c");
        assert_eq!(cells[5], "me");
        // No timestamps: unknown ages, a singleton's count.
        assert_eq!(cells[0], "<unknown>");
        assert_eq!(cells[7], "<unknown>");
        assert_eq!(cells[8], 1);
        assert_eq!(
            EventStrategy
                .field_value(&ev, "involvedObject.uid")
                .as_deref(),
            Some("u")
        );
        assert_eq!(
            EventStrategy.field_value(&ev, "source").as_deref(),
            Some("me")
        );
        assert_eq!(
            EventStrategy
                .field_value(&ev, "involvedObject.namespace")
                .as_deref(),
            Some("")
        );
    }
}
