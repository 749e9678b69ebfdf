//! autoscaling/v2 HorizontalPodAutoscalers: minReplicas 1, a CPU 80%
//! target when no metric is given, and kube's scale-up/scale-down rules
//! filled in wherever `behavior` is set.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use apimachinery::validation;
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, int, is_set, items, text};

/// The metric sources and the field each one fills.
const SOURCES: &[(&str, &str)] = &[
    ("ContainerResource", "containerResource"),
    ("External", "external"),
    ("Object", "object"),
    ("Pods", "pods"),
    ("Resource", "resource"),
];

/// How many metrics the Targets column shows.
const SHOWN: usize = 2;

/// The rules of `autoscaling/v2/HorizontalPodAutoscaler`.
pub struct HorizontalPodAutoscalerStrategy;

/// kube's default scaling rules, filled field by field into what the user gave.
fn default_rules(obj: &mut Value, direction: &str) {
    let pointer = format!("/spec/behavior/{direction}");
    let mut rules = obj
        .pointer(&pointer)
        .filter(|r| r.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let scale_up = direction == "scaleUp";
    if scale_up {
        default(&mut rules, "/stabilizationWindowSeconds", json!(0));
    }
    default(&mut rules, "/selectPolicy", json!("Max"));
    if !is_set(&rules, "/policies") {
        rules["policies"] = if scale_up {
            json!([{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}])
        } else {
            json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])
        };
    }
    fields::set(obj, &pointer, rules);
}

fn validate_metric(metric: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let kind = text(metric, "/type");
    let Some((_, field)) = SOURCES.iter().find(|(k, _)| *k == kind) else {
        if kind.is_empty() {
            errs.push(FieldError::required(
                format!("{path}.type"),
                "must specify a metric source type",
            ));
        } else {
            errs.push(FieldError::not_supported(
                format!("{path}.type"),
                kind,
                &SOURCES.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            ));
        }
        return errs;
    };
    let Some(source) = metric.get(*field).filter(|s| !s.is_null()) else {
        errs.push(FieldError::required(
            format!("{path}.{field}"),
            "must populate information for the given metric source",
        ));
        return errs;
    };
    let target = format!("{path}.{field}.target");
    match text(source, "/target/type") {
        "Utilization" if !is_set(source, "/target/averageUtilization") => {
            errs.push(FieldError::required(
                format!("{target}.averageUtilization"),
                "must set either a target raw value or a target utilization",
            ))
        }
        "Value" if !is_set(source, "/target/value") => errs.push(FieldError::required(
            format!("{target}.value"),
            "must set either a target value",
        )),
        "AverageValue" if !is_set(source, "/target/averageValue") => {
            errs.push(FieldError::required(
                format!("{target}.averageValue"),
                "must set either a target value for metric or a per-pod target",
            ))
        }
        "Utilization" | "Value" | "AverageValue" => {}
        "" => errs.push(FieldError::required(
            format!("{target}.type"),
            "must specify a metric target type",
        )),
        other => errs.push(FieldError::not_supported(
            format!("{target}.type"),
            other,
            &["Utilization", "Value", "AverageValue"],
        )),
    }
    if int(source, "/target/averageUtilization").is_some_and(|u| u <= 0) {
        errs.push(FieldError::invalid(
            format!("{target}.averageUtilization"),
            int(source, "/target/averageUtilization").unwrap_or(0),
            "must be greater than 0",
        ));
    }
    if matches!(kind, "Resource" | "ContainerResource") && text(source, "/name").is_empty() {
        errs.push(FieldError::required(
            format!("{path}.{field}.name"),
            "must specify a resource name",
        ));
    }
    errs
}

fn validate_behavior(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for direction in ["scaleUp", "scaleDown"] {
        let Some(rules) = obj
            .pointer(&format!("/spec/behavior/{direction}"))
            .filter(|r| r.is_object())
        else {
            continue;
        };
        let path = format!("spec.behavior.{direction}");
        if let Some(window) = int(rules, "/stabilizationWindowSeconds") {
            if window < 0 {
                errs.push(FieldError::invalid(
                    format!("{path}.stabilizationWindowSeconds"),
                    window,
                    "must be greater than or equal to zero",
                ));
            } else if window > 3600 {
                errs.push(FieldError::invalid(
                    format!("{path}.stabilizationWindowSeconds"),
                    window,
                    "must be less than or equal to 3600",
                ));
            }
        }
        let select = text(rules, "/selectPolicy");
        if !select.is_empty() && !["Disabled", "Max", "Min"].contains(&select) {
            errs.push(FieldError::not_supported(
                format!("{path}.selectPolicy"),
                select,
                &["Disabled", "Max", "Min"],
            ));
        }
        for (i, policy) in items(rules, "/policies").iter().enumerate() {
            let ppath = format!("{path}.policies[{i}]");
            let kind = text(policy, "/type");
            if !["Pods", "Percent"].contains(&kind) {
                errs.push(FieldError::not_supported(
                    format!("{ppath}.type"),
                    kind,
                    &["Percent", "Pods"],
                ));
            }
            let value = int(policy, "/value").unwrap_or(0);
            if value <= 0 {
                errs.push(FieldError::invalid(
                    format!("{ppath}.value"),
                    value,
                    "must be greater than zero",
                ));
            }
            let period = int(policy, "/periodSeconds").unwrap_or(0);
            if period <= 0 {
                errs.push(FieldError::invalid(
                    format!("{ppath}.periodSeconds"),
                    period,
                    "must be greater than zero",
                ));
            } else if period > 1800 {
                errs.push(FieldError::invalid(
                    format!("{ppath}.periodSeconds"),
                    period,
                    "must be less than or equal to 1800",
                ));
            }
        }
    }
    errs
}

/// One metric of the Targets column: `cpu: 50%/80%`, `<unknown>/10 (avg)`.
fn format_metric(spec: &Value, status: Option<&Value>) -> String {
    let current = |pointer: &str| {
        status.and_then(|s| s.pointer(pointer)).map(|v| {
            v.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string())
        })
    };
    let unknown = || "<unknown>".to_string();
    match text(spec, "/type") {
        kind @ ("Resource" | "ContainerResource") => {
            let field = if kind == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let name = text(spec, &format!("/{field}/name"));
            if is_set(spec, &format!("/{field}/target/averageValue")) {
                let cur =
                    current(&format!("/{field}/current/averageValue")).unwrap_or_else(unknown);
                format!(
                    "{name}: {cur}/{}",
                    text(spec, &format!("/{field}/target/averageValue"))
                )
            } else {
                let cur = current(&format!("/{field}/current/averageUtilization"))
                    .map(|u| format!("{u}%"))
                    .unwrap_or_else(unknown);
                let target = int(spec, &format!("/{field}/target/averageUtilization"))
                    .map(|u| format!("{u}%"))
                    .unwrap_or_else(|| "<auto>".into());
                format!("{name}: {cur}/{target}")
            }
        }
        "Pods" => format!(
            "{}/{}",
            current("/pods/current/averageValue").unwrap_or_else(unknown),
            text(spec, "/pods/target/averageValue")
        ),
        kind @ ("Object" | "External") => {
            let field = kind.to_lowercase();
            if is_set(spec, &format!("/{field}/target/averageValue")) {
                let cur =
                    current(&format!("/{field}/current/averageValue")).unwrap_or_else(unknown);
                format!(
                    "{cur}/{} (avg)",
                    text(spec, &format!("/{field}/target/averageValue"))
                )
            } else {
                let cur = current(&format!("/{field}/current/value")).unwrap_or_else(unknown);
                format!("{cur}/{}", text(spec, &format!("/{field}/target/value")))
            }
        }
        _ => "<unknown type>".into(),
    }
}

fn targets_cell(obj: &Value) -> String {
    let specs = items(obj, "/spec/metrics");
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = items(obj, "/status/currentMetrics");
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .take(SHOWN)
        .map(|(i, s)| format_metric(s, statuses.get(i)))
        .collect();
    if specs.len() > SHOWN {
        format!("{} + {} more...", list.join(", "), specs.len() - SHOWN)
    } else {
        list.join(", ")
    }
}

impl Strategy for HorizontalPodAutoscalerStrategy {
    fn defaults(&self, obj: &mut Value) {
        default(obj, "/spec/minReplicas", json!(1));
        if items(obj, "/spec/metrics").is_empty() {
            fields::set(
                obj,
                "/spec/metrics",
                json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
            );
        }
        if obj.pointer("/spec/behavior").is_some_and(Value::is_object) {
            default_rules(obj, "scaleUp");
            default_rules(obj, "scaleDown");
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // `currentMetrics` and `desiredReplicas` have no omitempty in autoscaling/v2.
        obj["status"] = json!({"currentMetrics": null, "desiredReplicas": 0});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let max = int(obj, "/spec/maxReplicas").unwrap_or(0);
        if let Some(min) = int(obj, "/spec/minReplicas") {
            if min < 1 {
                errs.push(FieldError::invalid(
                    "spec.minReplicas",
                    min,
                    "must be greater than or equal to 1",
                ));
            }
            if max < min {
                errs.push(FieldError::invalid(
                    "spec.maxReplicas",
                    max,
                    "must be greater than or equal to `minReplicas`",
                ));
            }
        }
        if max < 1 {
            errs.push(FieldError::invalid(
                "spec.maxReplicas",
                max,
                "must be greater than 0",
            ));
        }
        for field in ["kind", "name"] {
            let value = text(obj, &format!("/spec/scaleTargetRef/{field}"));
            let path = format!("spec.scaleTargetRef.{field}");
            if value.is_empty() {
                errs.push(FieldError::required(path, ""));
            } else {
                errs.extend(
                    validation::path_segment_name(value)
                        .into_iter()
                        .map(|m| FieldError::invalid(path.clone(), value, m)),
                );
            }
        }
        for (i, metric) in items(obj, "/spec/metrics").iter().enumerate() {
            errs.extend(validate_metric(metric, &format!("spec.metrics[{i}]")));
        }
        errs.extend(validate_behavior(obj));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Reference",
                "string",
                "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.",
            ),
            Column::new(
                "Targets",
                "string",
                "metrics contains the specifications for which to use to calculate the desired replica count.",
            ),
            Column::new(
                "MinPods",
                "string",
                "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
            ),
            Column::new(
                "MaxPods",
                "string",
                "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
            ),
            Column::new(
                "Replicas",
                "string",
                "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let reference = format!(
            "{}/{}",
            text(obj, "/spec/scaleTargetRef/kind"),
            text(obj, "/spec/scaleTargetRef/name")
        );
        let min = int(obj, "/spec/minReplicas")
            .map(|m| m.to_string())
            .unwrap_or_else(|| "<unset>".into());
        vec![
            table::name_cell(obj),
            json!(reference),
            json!(targets_cell(obj)),
            json!(min),
            fields::int_cell(obj, "/spec/maxReplicas"),
            fields::int_cell(obj, "/status/currentReplicas"),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hpa(behavior: Option<Value>) -> Value {
        let mut h = json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5}});
        if let Some(b) = behavior {
            h["spec"]["behavior"] = b;
        }
        HorizontalPodAutoscalerStrategy.prepare_for_create(&mut h);
        HorizontalPodAutoscalerStrategy.defaults(&mut h);
        h
    }

    #[test]
    fn defaults() {
        let h = hpa(None);
        assert_eq!(h["spec"]["minReplicas"], 1);
        assert_eq!(
            h["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert!(h["spec"].get("behavior").is_none());
        let with = hpa(Some(
            json!({"scaleDown": {"stabilizationWindowSeconds": 60}}),
        ));
        assert_eq!(
            with["spec"]["behavior"]["scaleUp"]["policies"][0],
            json!({"type": "Pods", "value": 4, "periodSeconds": 15})
        );
        assert_eq!(
            with["spec"]["behavior"]["scaleUp"]["stabilizationWindowSeconds"],
            0
        );
        assert_eq!(
            with["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
            60
        );
        assert_eq!(
            with["spec"]["behavior"]["scaleDown"]["policies"],
            json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])
        );
        assert!(
            HorizontalPodAutoscalerStrategy.validate(&with).is_empty(),
            "{:?}",
            HorizontalPodAutoscalerStrategy.validate(&with)
        );
    }

    #[test]
    fn validation_and_row() {
        let mut h = hpa(None);
        h["spec"]["minReplicas"] = json!(6);
        assert_eq!(
            HorizontalPodAutoscalerStrategy.validate(&h)[0].to_string(),
            "spec.maxReplicas: Invalid value: 5: must be greater than or equal to `minReplicas`"
        );
        let cells = HorizontalPodAutoscalerStrategy.cells(&hpa(None));
        assert_eq!(cells[1], "Deployment/web");
        assert_eq!(cells[2], "cpu: <unknown>/80%");
        assert_eq!(cells[3], "1");
    }
}
