//! autoscaling/v1 HorizontalPodAutoscalers: the autoscaling/v2 objects seen
//! through the older shape, as in kube (one storage, one cache). v1 has one
//! target, `targetCPUUtilizationPercentage`; the rest of a v2 object (other
//! metrics, behavior, current metrics, conditions) rides in kube's
//! `autoscaling.alpha.kubernetes.io/*` annotations, so that an object
//! written in either version reads back whole in the other. Validation and
//! printing are v2's, of the converted object, as kube validates and
//! prints its internal object.

use std::sync::Arc;

use apimachinery::error::{FieldError, Result};
use apimachinery::table::Column;
use generic_server::strategy::{Converter, SharedStorage, Strategy};
use serde_json::{Map, Value, json};

use super::fields::{default, int, items};
use super::horizontalpodautoscaler::HorizontalPodAutoscalerStrategy;

/// The annotations that keep what v1 has no field for.
const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";

/// The rules of `autoscaling/v1/HorizontalPodAutoscaler`.
pub struct HorizontalPodAutoscalerV1Strategy;

/// The averageUtilization of a CPU utilization metric (`target` in a spec,
/// `current` in a status), if `metric` is one.
fn cpu_utilization(metric: &Value, field: &str) -> Option<i64> {
    let resource = &metric["resource"];
    let utilization = &resource[field];
    let is_cpu = metric["type"] == "Resource" && resource["name"] == "cpu";
    let is_utilization = field == "current" || utilization["type"] == "Utilization";
    (is_cpu && is_utilization)
        .then(|| utilization["averageUtilization"].as_i64())
        .flatten()
}

/// The metrics of `list` but the first CPU utilization one, and that one's value.
fn split_cpu(list: Vec<Value>, field: &str) -> (Option<i64>, Vec<Value>) {
    let mut cpu = None;
    let mut rest = Vec::new();
    for metric in list {
        match cpu_utilization(&metric, field) {
            Some(value) if cpu.is_none() => cpu = Some(value),
            _ => rest.push(metric),
        }
    }
    (cpu, rest)
}

/// Moves `value` into annotation `name` (as JSON), unless it is empty.
fn annotate(annotations: &mut Map<String, Value>, name: &str, value: &Value) {
    let empty = value.is_null() || value.as_array().is_some_and(Vec::is_empty);
    if !empty {
        annotations.insert(name.into(), json!(value.to_string()));
    }
}

/// Takes annotation `name` out, parsed.
fn take(annotations: &mut Map<String, Value>, name: &str) -> Option<Value> {
    let text = annotations.remove(name)?;
    serde_json::from_str(text.as_str()?).ok()
}

/// An autoscaling/v2 object in autoscaling/v1's shape.
fn to_v1(mut obj: Value) -> Value {
    let spec = obj["spec"].take();
    let status = obj["status"].take();
    let (cpu, metrics) = split_cpu(items(&spec, "/metrics").to_vec(), "target");
    let (current_cpu, current) = split_cpu(items(&status, "/currentMetrics").to_vec(), "current");
    let mut annotations = obj["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    annotate(&mut annotations, METRICS, &json!(metrics));
    annotate(&mut annotations, BEHAVIOR, &spec["behavior"]);
    annotate(&mut annotations, CURRENT_METRICS, &json!(current));
    annotate(&mut annotations, CONDITIONS, &status["conditions"]);
    if !annotations.is_empty() {
        obj["metadata"]["annotations"] = Value::Object(annotations);
    }
    let mut v1_spec =
        json!({"scaleTargetRef": spec["scaleTargetRef"], "maxReplicas": spec["maxReplicas"]});
    if let Some(min) = spec.get("minReplicas") {
        v1_spec["minReplicas"] = min.clone();
    }
    if let Some(cpu) = cpu {
        v1_spec["targetCPUUtilizationPercentage"] = json!(cpu);
    }
    obj["spec"] = v1_spec;
    if status.is_object() {
        let mut v1_status = json!({"currentReplicas": status["currentReplicas"].as_i64().unwrap_or(0),
                                   "desiredReplicas": status["desiredReplicas"].as_i64().unwrap_or(0)});
        for field in ["observedGeneration", "lastScaleTime"] {
            if let Some(value) = status.get(field) {
                v1_status[field] = value.clone();
            }
        }
        if let Some(cpu) = current_cpu {
            v1_status["currentCPUUtilizationPercentage"] = json!(cpu);
        }
        obj["status"] = v1_status;
    } else if let Some(map) = obj.as_object_mut() {
        map.remove("status");
    }
    obj
}

/// An autoscaling/v1 object in autoscaling/v2's shape, with v2's defaults.
fn to_v2(mut obj: Value) -> Value {
    let spec = obj["spec"].take();
    let status = obj["status"].take();
    let mut annotations = obj["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut metrics = Vec::new();
    if let Some(cpu) = spec["targetCPUUtilizationPercentage"].as_i64() {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": cpu}}}));
    }
    metrics.extend(
        take(&mut annotations, METRICS)
            .and_then(|m| m.as_array().cloned())
            .unwrap_or_default(),
    );
    let behavior = take(&mut annotations, BEHAVIOR);
    let mut current = Vec::new();
    if let Some(cpu) = status["currentCPUUtilizationPercentage"].as_i64() {
        current.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "current": {"averageUtilization": cpu}}}));
    }
    current.extend(
        take(&mut annotations, CURRENT_METRICS)
            .and_then(|m| m.as_array().cloned())
            .unwrap_or_default(),
    );
    let conditions = take(&mut annotations, CONDITIONS);
    match (annotations.is_empty(), obj["metadata"].as_object_mut()) {
        (true, Some(metadata)) => {
            metadata.remove("annotations");
        }
        (false, _) => obj["metadata"]["annotations"] = Value::Object(annotations),
        _ => {}
    }
    let mut v2_spec =
        json!({"scaleTargetRef": spec["scaleTargetRef"], "maxReplicas": spec["maxReplicas"]});
    if let Some(min) = spec.get("minReplicas") {
        v2_spec["minReplicas"] = min.clone();
    }
    if !metrics.is_empty() {
        v2_spec["metrics"] = json!(metrics);
    }
    if let Some(behavior) = behavior {
        v2_spec["behavior"] = behavior;
    }
    obj["spec"] = v2_spec;
    if status.is_object() {
        let mut v2_status =
            json!({"desiredReplicas": status["desiredReplicas"].as_i64().unwrap_or(0)});
        for field in ["observedGeneration", "lastScaleTime", "currentReplicas"] {
            if let Some(value) = status.get(field) {
                v2_status[field] = value.clone();
            }
        }
        // No omitempty on autoscaling/v2's `currentMetrics`: null when none.
        v2_status["currentMetrics"] = if current.is_empty() {
            Value::Null
        } else {
            json!(current)
        };
        if let Some(conditions) = conditions {
            v2_status["conditions"] = conditions;
        }
        obj["status"] = v2_status;
    }
    HorizontalPodAutoscalerStrategy.defaults(&mut obj);
    obj
}

/// Converts HorizontalPodAutoscalers between the stored v2 and v1.
struct HpaConverter;

#[async_trait::async_trait]
impl Converter for HpaConverter {
    fn storage_version(&self) -> String {
        "autoscaling/v2".into()
    }

    async fn convert(&self, objects: Vec<Value>, api_version: &str) -> Result<Vec<Value>> {
        Ok(objects
            .into_iter()
            .map(|obj| {
                let from = obj["apiVersion"].as_str().unwrap_or_default().to_string();
                let mut converted = match (from.as_str(), api_version) {
                    (from, to) if from == to => obj,
                    (_, "autoscaling/v1") => to_v1(obj),
                    _ => to_v2(obj),
                };
                converted["apiVersion"] = json!(api_version);
                converted
            })
            .collect())
    }
}

impl Strategy for HorizontalPodAutoscalerV1Strategy {
    fn shared_storage(&self) -> Option<SharedStorage> {
        Some(SharedStorage {
            group: "autoscaling",
            plural: "horizontalpodautoscalers",
            converter: Arc::new(HpaConverter),
            field_label: str::to_string,
        })
    }

    fn defaults(&self, obj: &mut Value) {
        default(obj, "/spec/minReplicas", json!(1));
        // kube answers what it stored as autoscaling/v2, whose defaults give
        // a target-less autoscaler 80% CPU.
        let other_metrics = obj
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(METRICS));
        if !other_metrics {
            default(obj, "/spec/targetCPUUtilizationPercentage", json!(80));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"currentReplicas": 0, "desiredReplicas": 0});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = HorizontalPodAutoscalerStrategy.validate(&to_v2(obj.clone()));
        if int(obj, "/spec/targetCPUUtilizationPercentage").is_some_and(|t| t < 1) {
            errs.push(FieldError::invalid(
                "spec.targetCPUUtilizationPercentage",
                int(obj, "/spec/targetCPUUtilizationPercentage").unwrap_or(0),
                "must be greater than 0",
            ));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        HorizontalPodAutoscalerStrategy.columns()
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        HorizontalPodAutoscalerStrategy.cells(&to_v2(obj.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2() -> Value {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "annotations": {"team": "a"}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 2, "maxReplicas": 5,
                     "metrics": [
                        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}}],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
            "status": {"currentReplicas": 3, "desiredReplicas": 3,
                       "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40, "averageValue": "40m"}}}],
                       "conditions": [{"type": "AbleToScale", "status": "True"}]}})
    }

    #[test]
    fn v2_reads_as_v1_and_back_whole() {
        let mut stored = v2();
        HorizontalPodAutoscalerStrategy.defaults(&mut stored);
        let v1 = to_v1(stored.clone());
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 40);
        assert!(v1["spec"].get("metrics").is_none());
        let annotations = &v1["metadata"]["annotations"];
        assert_eq!(annotations["team"], "a");
        assert!(annotations[METRICS].as_str().unwrap().contains("memory"));
        assert!(annotations[BEHAVIOR].is_string());
        assert!(annotations[CONDITIONS].is_string());
        let mut back = to_v2(v1);
        back["apiVersion"] = json!("autoscaling/v2");
        // The current CPU metric keeps its utilization (v1 has no averageValue).
        stored["status"]["currentMetrics"][0]["resource"]["current"] =
            json!({"averageUtilization": 40});
        assert_eq!(back, stored);
    }

    #[test]
    fn a_v1_object_gets_v2_defaults_and_v2_validation() {
        let v1 = json!({"metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}});
        let v2 = to_v2(v1.clone());
        assert_eq!(v2["spec"]["minReplicas"], 1);
        assert_eq!(
            v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(to_v1(v2)["spec"]["targetCPUUtilizationPercentage"], 80);
        let bad = json!({"metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment"}, "maxReplicas": 0, "targetCPUUtilizationPercentage": 0}});
        let errs = HorizontalPodAutoscalerV1Strategy.validate(&bad);
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|e| e.starts_with("spec.maxReplicas")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|e| e.starts_with("spec.scaleTargetRef.name: Required")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|e| e.starts_with("spec.targetCPUUtilizationPercentage")),
            "{text:?}"
        );
    }
}
