//! apps/v1 Deployments: RollingUpdate 25%/25%, 10 revisions, 600s progress
//! deadline and one replica by default; the selector must match the
//! template and never changes.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, int, is_set, text};
use super::{pod_spec, workload};

/// The rules of `apps/v1/Deployment`.
pub struct DeploymentStrategy;

fn validate_strategy(obj: &Value) -> Vec<FieldError> {
    let rolling = obj
        .pointer("/spec/strategy/rollingUpdate")
        .filter(|v| !v.is_null());
    match text(obj, "/spec/strategy/type") {
        "Recreate" if rolling.is_some() => {
            vec![FieldError::forbidden(
                "spec.strategy.rollingUpdate",
                "may not be specified when strategy `type` is 'Recreate'",
            )]
        }
        "Recreate" => Vec::new(),
        "RollingUpdate" => {
            let Some(rolling) = rolling else {
                return vec![FieldError::required(
                    "spec.strategy.rollingUpdate",
                    "this should be defaulted and never be nil",
                )];
            };
            let (unavailable, surge) = (rolling.get("maxUnavailable"), rolling.get("maxSurge"));
            let mut errs = workload::validate_int_or_percent(
                unavailable,
                "spec.strategy.rollingUpdate.maxUnavailable",
                true,
            );
            errs.extend(workload::validate_int_or_percent(
                surge,
                "spec.strategy.rollingUpdate.maxSurge",
                false,
            ));
            if workload::int_or_percent_value(unavailable) == 0
                && workload::int_or_percent_value(surge) == 0
            {
                errs.push(FieldError::invalid(
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    unavailable.cloned().unwrap_or(json!(0)),
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
            errs
        }
        // kube reports the whole strategy at `spec.strategy`.
        _ => vec![FieldError::not_supported(
            "spec.strategy",
            fields::value(obj, "/spec/strategy"),
            &["Recreate", "RollingUpdate"],
        )],
    }
}

impl Strategy for DeploymentStrategy {
    fn defaults(&self, obj: &mut Value) {
        default(obj, "/spec/replicas", json!(1));
        default(obj, "/spec/strategy/type", json!("RollingUpdate"));
        if text(obj, "/spec/strategy/type") == "RollingUpdate" {
            default(
                obj,
                "/spec/strategy/rollingUpdate/maxUnavailable",
                json!("25%"),
            );
            default(obj, "/spec/strategy/rollingUpdate/maxSurge", json!("25%"));
        }
        default(obj, "/spec/revisionHistoryLimit", json!(10));
        default(obj, "/spec/progressDeadlineSeconds", json!(600));
        pod_spec::default_template(obj, "/spec/template");
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = fields::non_negatives(
            obj,
            &[
                ("/spec/replicas", "spec.replicas"),
                ("/spec/minReadySeconds", "spec.minReadySeconds"),
                ("/spec/revisionHistoryLimit", "spec.revisionHistoryLimit"),
                (
                    "/spec/progressDeadlineSeconds",
                    "spec.progressDeadlineSeconds",
                ),
            ],
        );
        errs.extend(workload::validate_selector_and_template(obj, "ReplicaSet"));
        errs.extend(validate_strategy(obj));
        if let Some(deadline) = int(obj, "/spec/progressDeadlineSeconds")
            && is_set(obj, "/spec/progressDeadlineSeconds")
            && deadline <= int(obj, "/spec/minReadySeconds").unwrap_or(0)
        {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                deadline,
                "must be greater than minReadySeconds",
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(workload::selector_immutable(new, old));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            table::name_column(),
            Column::new("Ready", "string", "Number of the pod with ready state"),
            Column::new(
                "Up-to-date",
                "string",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            Column::new(
                "Available",
                "string",
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            table::age_column(),
        ];
        columns.extend(workload::wide_columns(true));
        columns
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let ready = int(obj, "/status/readyReplicas").unwrap_or(0);
        let desired = int(obj, "/spec/replicas").unwrap_or(0);
        let [containers, images] = workload::template_cells(obj, "/spec/template");
        vec![
            table::name_cell(obj),
            json!(format!("{ready}/{desired}")),
            fields::int_cell(obj, "/status/updatedReplicas"),
            fields::int_cell(obj, "/status/availableReplicas"),
            table::age_cell(obj),
            containers,
            images,
            json!(workload::selector_string(obj)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        let mut d = json!({"metadata": {"name": "web"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
        }});
        DeploymentStrategy.prepare_for_create(&mut d);
        DeploymentStrategy.defaults(&mut d);
        d
    }

    #[test]
    fn defaults() {
        let d = deployment();
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
        assert!(
            DeploymentStrategy.validate(&d).is_empty(),
            "{:?}",
            DeploymentStrategy.validate(&d)
        );
    }

    #[test]
    fn validation_messages() {
        let mut d = deployment();
        d["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
        d["spec"]["replicas"] = json!(-1);
        let errs: Vec<String> = DeploymentStrategy
            .validate(&d)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            errs.contains(
                &"spec.replicas: Invalid value: -1: must be greater than or equal to 0".to_string()
            ),
            "{errs:?}"
        );
        assert!(
            errs.contains(
                &"spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`"
                    .to_string()
            ),
            "{errs:?}"
        );
        let mut moved = deployment();
        moved["spec"]["selector"] = json!({"matchLabels": {"app": "web", "tier": "x"}});
        moved["spec"]["template"]["metadata"]["labels"]["tier"] = json!("x");
        let errs = DeploymentStrategy.validate_update(&moved, &deployment());
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.selector");
        assert_eq!(errs[0].detail, "field is immutable");
        let mut none = deployment();
        none["spec"]["selector"] = Value::Null;
        assert_eq!(
            DeploymentStrategy.validate(&none)[0].to_string(),
            "spec.selector: Required value"
        );
        none["spec"]["selector"] = json!({});
        let errs: Vec<String> = DeploymentStrategy
            .validate(&none)
            .iter()
            .map(|e| e.field.clone())
            .collect();
        assert_eq!(
            errs,
            ["spec.selector", "spec.template.metadata.labels"],
            "an empty selector reads as a missing one: required, matching nothing"
        );
    }

    #[test]
    fn table_row() {
        let mut d = deployment();
        d["status"] = json!({"readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1});
        let cells = DeploymentStrategy.cells(&d);
        assert_eq!(cells[1], "1/1");
        assert_eq!(cells[5], "web");
        assert_eq!(cells[6], "nginx");
        assert_eq!(cells[7], "app=web");
        assert_eq!(cells.len(), DeploymentStrategy.columns().len());
    }
}
