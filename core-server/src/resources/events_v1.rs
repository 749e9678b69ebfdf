//! events.k8s.io/v1 Events: the core v1 Events seen through another shape,
//! as in kube. One storage (`/registry/events/`) and one cache serve both;
//! this resource converts on the way in and out (`involvedObject` is
//! `regarding`, `message` is `note`, the older fields are `deprecated*`).
//! They print as core Events do.

use std::sync::Arc;

use apimachinery::error::{FieldError, Result};
use apimachinery::table::Column;
use apimachinery::validation;
use generic_server::strategy::Converter;
use generic_server::strategy::{SharedStorage, Strategy, string_at};
use serde_json::{Value, json};

use super::event::EventStrategy;
use super::fields::{self, has, is_set, text};

/// Longest `reportingInstance`, `action` and `reason`.
const SHORT_LIMIT: usize = 128;
/// Longest `note`.
const NOTE_LIMIT: usize = 1024;

/// The rules of `events.k8s.io/v1/Event`.
pub struct EventsV1Strategy;

/// Fields named differently in core v1 and events.k8s.io/v1 (the rest,
/// metadata included, are the same).
const RENAMED: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// Converts Events between the stored core v1 shape and events.k8s.io/v1.
struct EventsConverter;

/// What kube answers an events.k8s.io/v1 Event with: the deprecated times
/// and source as the Go structs they are (null, `{}`), and the empty
/// reporting strings omitted (omitempty here, unlike core v1's).
fn answered_unset_fields(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    map.entry("deprecatedSource").or_insert_with(|| json!({}));
    for time in ["deprecatedFirstTimestamp", "deprecatedLastTimestamp"] {
        map.entry(time).or_insert(Value::Null);
    }
    for reporting in ["reportingController", "reportingInstance"] {
        if map.get(reporting) == Some(&json!("")) {
            map.remove(reporting);
        }
    }
}

#[async_trait::async_trait]
impl Converter for EventsConverter {
    fn storage_version(&self) -> String {
        "v1".into()
    }

    async fn convert(&self, objects: Vec<Value>, api_version: &str) -> Result<Vec<Value>> {
        let to_events = api_version == "events.k8s.io/v1";
        Ok(objects
            .into_iter()
            .map(|mut obj| {
                if let Some(map) = obj.as_object_mut() {
                    for (core, events) in RENAMED {
                        let (from, to) = if to_events {
                            (core, events)
                        } else {
                            (events, core)
                        };
                        if let Some(value) = map.remove(*from) {
                            map.insert(to.to_string(), value);
                        }
                    }
                    map.insert("apiVersion".into(), json!(api_version));
                }
                if to_events {
                    answered_unset_fields(&mut obj);
                } else {
                    super::event::answered_unset_fields(&mut obj);
                }
                obj
            })
            .collect())
    }
}

/// A field selector label of events.k8s.io/v1 as core v1 names it.
fn core_field_label(label: &str) -> String {
    for (core, events) in RENAMED {
        if label == *events {
            return core.to_string();
        }
        if let Some(rest) = label.strip_prefix(events).and_then(|r| r.strip_prefix('.')) {
            return format!("{core}.{rest}");
        }
    }
    label.to_string()
}

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

    fn defaults(&self, obj: &mut Value) {
        answered_unset_fields(obj);
    }

    fn shared_storage(&self) -> Option<SharedStorage> {
        Some(SharedStorage {
            group: "",
            plural: "events",
            converter: Arc::new(EventsConverter),
            field_label: core_field_label,
        })
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

    #[tokio::test]
    async fn core_events_and_events_v1_convert_both_ways() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Pulled", "message": "pulled the image",
            "source": {"component": "kubelet", "host": "n1"}, "firstTimestamp": "2024-01-01T00:00:00Z",
            "lastTimestamp": "2024-01-01T00:00:01Z", "count": 2, "type": "Normal", "reportingComponent": "kubelet",
            "reportingInstance": "n1", "eventTime": null});
        let converted = EventsConverter
            .convert(vec![core.clone()], "events.k8s.io/v1")
            .await
            .unwrap();
        let v1 = &converted[0];
        assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
        assert_eq!(v1["regarding"]["name"], "p");
        assert_eq!(v1["note"], "pulled the image");
        assert_eq!(v1["reportingController"], "kubelet");
        assert_eq!(v1["deprecatedSource"]["host"], "n1");
        assert_eq!(v1["deprecatedCount"], 2);
        assert_eq!(v1["deprecatedLastTimestamp"], "2024-01-01T00:00:01Z");
        assert!(v1.get("involvedObject").is_none() && v1.get("message").is_none());
        let back = EventsConverter.convert(converted, "v1").await.unwrap();
        assert_eq!(back[0], core);
        assert_eq!(core_field_label("regarding.uid"), "involvedObject.uid");
        assert_eq!(
            core_field_label("reportingController"),
            "reportingComponent"
        );
        assert_eq!(core_field_label("metadata.name"), "metadata.name");
    }

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
