//! Core v1 Events, selectable by the object they are about.

use apimachinery::table::{self, Column};
use generic_server::strategy::{Strategy, string_at};
use serde_json::{Value, json};

/// The rules of `v1/Event`.
pub struct EventStrategy;

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// When the event was last seen: lastTimestamp, else eventTime, else creation.
fn last_seen(obj: &Value) -> String {
    let ts = [
        "/lastTimestamp",
        "/eventTime",
        "/firstTimestamp",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .map(|p| text(obj, p))
    .find(|t| !t.is_empty());
    let age = table::age_of(ts);
    let count = obj.get("count").and_then(Value::as_i64).unwrap_or(0);
    let first = text(obj, "/firstTimestamp");
    if count > 1 && !first.is_empty() {
        format!("{age} (x{count} over {})", table::age_of(Some(first)))
    } else {
        age
    }
}

impl Strategy for EventStrategy {
    fn allow_create_on_update(&self) -> bool {
        true
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
        let object = format!(
            "{}/{}",
            text(obj, "/involvedObject/kind").to_lowercase(),
            text(obj, "/involvedObject/name")
        );
        let source = [text(obj, "/source/component"), text(obj, "/source/host")]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        let first = text(obj, "/firstTimestamp");
        vec![
            json!(last_seen(obj)),
            json!(text(obj, "/type")),
            json!(text(obj, "/reason")),
            json!(object),
            json!(text(obj, "/involvedObject/fieldPath")),
            json!(source),
            json!(text(obj, "/message")),
            json!(if first.is_empty() {
                "<unknown>".to_string()
            } else {
                table::age_of(Some(first))
            }),
            json!(
                obj.get("count")
                    .and_then(Value::as_i64)
                    .unwrap_or(1)
                    .to_string()
            ),
            table::name_cell(obj),
        ]
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
    fn object_column_and_fields() {
        let ev = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "ConfigMap", "name": "c", "uid": "u"}, "type": "Normal", "reason": "X", "source": {"component": "me"}});
        let cells = EventStrategy.cells(&ev);
        assert_eq!(cells[3], "configmap/c");
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
