//! events.k8s.io/v1 Events. In kube these are the core v1 Events seen
//! through another version (one storage); here they are their own resource
//! with their own etcd keys. They print as core Events do.

use generic_server::error::FieldError;
use generic_server::strategy::{Strategy, string_at};
use generic_server::table::Column;
use generic_server::validation;
use serde_json::{Value, json};

use super::event::EventStrategy;
use super::fields::{self, has, is_set, text};

/// Longest `reportingInstance`, `action` and `reason`.
const SHORT_LIMIT: usize = 128;
/// Longest `note`.
const NOTE_LIMIT: usize = 1024;

/// The rules of `events.k8s.io/v1/Event`.
pub struct EventsV1Strategy;

/// The same event in core v1 terms, for the printer.
fn as_core(obj: &Value) -> Value {
    let first_of = |pointers: &[&str]| {
        pointers
            .iter()
            .map(|p| fields::value(obj, p))
            .find(|v| !v.is_null())
            .unwrap_or(Value::Null)
    };
    json!({
        "metadata": fields::value(obj, "/metadata"),
        "involvedObject": fields::value(obj, "/regarding"),
        "reason": fields::value(obj, "/reason"),
        "message": fields::value(obj, "/note"),
        "type": fields::value(obj, "/type"),
        "eventTime": fields::value(obj, "/eventTime"),
        "firstTimestamp": fields::value(obj, "/deprecatedFirstTimestamp"),
        "lastTimestamp": first_of(&["/deprecatedLastTimestamp", "/series/lastObservedTime"]),
        "count": first_of(&["/deprecatedCount", "/series/count"]),
        "source": {
            "component": if has(obj, "/deprecatedSource/component") { fields::value(obj, "/deprecatedSource/component") } else { fields::value(obj, "/reportingController") },
            "host": if has(obj, "/deprecatedSource/host") { fields::value(obj, "/deprecatedSource/host") } else { fields::value(obj, "/reportingInstance") },
        },
    })
}

fn length(obj: &Value, field: &str, limit: usize, errs: &mut Vec<FieldError>) {
    if text(obj, &format!("/{field}")).len() > limit {
        errs.push(FieldError::invalid(
            field,
            "",
            format!("can have at most {limit} characters"),
        ));
    }
}

impl Strategy for EventsV1Strategy {
    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let namespace = text(obj, "/metadata/namespace");
        if text(obj, "/regarding/namespace").is_empty()
            && !["default", "kube-system"].contains(&namespace)
            && is_set(obj, "/regarding")
        {
            errs.push(FieldError::invalid(
                "regarding.namespace",
                "",
                "does not match event.namespace",
            ));
        }
        let controller = text(obj, "/reportingController");
        if controller.is_empty() {
            errs.push(FieldError::required("reportingController", ""));
        } else {
            errs.extend(
                validation::qualified_name(controller)
                    .into_iter()
                    .map(|m| FieldError::invalid("reportingController", controller, m)),
            );
        }
        for field in ["reportingInstance", "action", "reason"] {
            if text(obj, &format!("/{field}")).is_empty() {
                errs.push(FieldError::required(field, ""));
            }
            length(obj, field, SHORT_LIMIT, &mut errs);
        }
        length(obj, "note", NOTE_LIMIT, &mut errs);
        if !is_set(obj, "/eventTime") {
            errs.push(FieldError::required("eventTime", ""));
        }
        let kind = text(obj, "/type");
        if kind != "Normal" && kind != "Warning" {
            errs.push(FieldError::invalid(
                "type",
                "",
                format!("has invalid value: {kind}"),
            ));
        }
        for field in [
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
            "deprecatedSource",
        ] {
            if has(obj, &format!("/{field}")) {
                errs.push(FieldError::invalid(field, "", "needs to be unset"));
            }
        }
        if is_set(obj, "/series") {
            if fields::int(obj, "/series/count").unwrap_or(0) < 2 {
                errs.push(FieldError::invalid(
                    "series.count",
                    "",
                    "should be at least 2",
                ));
            }
            if !is_set(obj, "/series/lastObservedTime") {
                errs.push(FieldError::required("series.lastObservedTime", ""));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for field in [
            "action",
            "reason",
            "reportingController",
            "reportingInstance",
            "regarding",
            "related",
            "type",
            "eventTime",
        ] {
            errs.extend(fields::immutable(new, old, &format!("/{field}"), field));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        EventStrategy.columns()
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        EventStrategy.cells(&as_core(obj))
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ]
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        Some(string_at(obj, field).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_and_row() {
        let ev = json!({"metadata": {"name": "e", "namespace": "default"}, "eventTime": "2024-01-01T00:00:00.000000Z",
            "reportingController": "example.com/ctl", "reportingInstance": "ctl-1", "action": "Sync", "reason": "Synced",
            "type": "Normal", "note": "all good", "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}});
        assert!(
            EventsV1Strategy.validate(&ev).is_empty(),
            "{:?}",
            EventsV1Strategy.validate(&ev)
        );
        let cells = EventsV1Strategy.cells(&ev);
        assert_eq!(cells[3], "pod/p");
        assert_eq!(cells[5], "example.com/ctl, ctl-1");
        assert_eq!(cells[6], "all good");
        let bad = json!({"metadata": {"name": "e", "namespace": "default"}, "type": "Odd"});
        let errs: Vec<String> = EventsV1Strategy
            .validate(&bad)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            errs.contains(&"type: Invalid value: \"\": has invalid value: Odd".to_string()),
            "{errs:?}"
        );
        assert!(errs.contains(&"eventTime: Required value".to_string()));
    }
}
