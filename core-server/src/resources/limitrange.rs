//! LimitRanges: container defaults filled from max, default and min as kube does.

use apimachinery::error::FieldError;
use generic_server::strategy::Strategy;
use serde_json::{Map, Value};

use super::fields::{self, items, text};
use apimachinery::quantity;

/// The rules of `v1/LimitRange`.
pub struct LimitRangeStrategy;

/// Fills `target` with the entries of `source` it lacks.
fn fill(item: &mut Value, target: &str, source: &str) {
    let Some(from) = item.get(source).and_then(Value::as_object).cloned() else {
        return;
    };
    let mut into = item
        .get(target)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, v) in from {
        into.entry(k).or_insert(v);
    }
    if !into.is_empty() {
        item[target] = Value::Object(into);
    }
}

impl Strategy for LimitRangeStrategy {
    fn defaults(&self, obj: &mut Value) {
        fields::each_mut(obj, "/spec/limits", |item| {
            if text(item, "/type") == "Container" {
                fill(item, "default", "max");
                fill(item, "defaultRequest", "default");
                fill(item, "defaultRequest", "min");
            }
        });
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for (i, item) in items(obj, "/spec/limits").iter().enumerate() {
            let path = format!("spec.limits[{i}]");
            let kind = text(item, "/type");
            if kind.is_empty() {
                errs.push(FieldError::required(format!("{path}.type"), ""));
            }
            for list in [
                "max",
                "min",
                "default",
                "defaultRequest",
                "maxLimitRequestRatio",
            ] {
                errs.extend(quantity::validate_list(
                    item.get(list),
                    &format!("{path}.{list}"),
                ));
            }
            if kind == "Pod" {
                for list in ["default", "defaultRequest"] {
                    if item
                        .get(list)
                        .and_then(Value::as_object)
                        .is_some_and(|m| !m.is_empty())
                    {
                        errs.push(FieldError::forbidden(
                            format!("{path}.{list}"),
                            "may not be specified when `type` is 'Pod'",
                        ));
                    }
                }
            }
            let get = |list: &str, name: &str| {
                item.pointer(&format!("/{list}/{name}"))
                    .and_then(quantity::of)
            };
            let names: Map<String, Value> = ["min", "max", "default", "defaultRequest"]
                .iter()
                .filter_map(|l| item.get(*l).and_then(Value::as_object))
                .flat_map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())))
                .collect();
            for name in names.keys() {
                if let (Some(min), Some(max)) = (get("min", name), get("max", name))
                    && min > max
                {
                    errs.push(FieldError::invalid(
                        format!("{path}.min[{name}]"),
                        fields::value(item, &format!("/min/{name}")),
                        format!(
                            "min value {} is greater than max value {}",
                            text(item, &format!("/min/{name}")),
                            text(item, &format!("/max/{name}"))
                        ),
                    ));
                }
            }
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn container_defaults_and_row() {
        let mut lr = json!({"metadata": {"name": "l", "creationTimestamp": "2024-01-01T00:00:00Z"}, "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}}]}});
        LimitRangeStrategy.defaults(&mut lr);
        assert_eq!(lr["spec"]["limits"][0]["default"], json!({"cpu": "2"}));
        assert_eq!(
            lr["spec"]["limits"][0]["defaultRequest"],
            json!({"cpu": "2", "memory": "64Mi"})
        );
        assert!(LimitRangeStrategy.validate(&lr).is_empty());
        assert_eq!(LimitRangeStrategy.cells(&lr)[1], "2024-01-01T00:00:00Z");
        let bad = json!({"spec": {"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]}});
        assert_eq!(
            LimitRangeStrategy.validate(&bad)[0].detail,
            "min value 2 is greater than max value 1"
        );
    }
}
