//! apps/v1 StatefulSets: OrderedReady, RollingUpdate with partition 0, PVC
//! retention Retain/Retain, 10 revisions and one replica by default; only
//! replicas, ordinals, template, updateStrategy, revisionHistoryLimit,
//! persistentVolumeClaimRetentionPolicy and minReadySeconds may change.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, int, is_set, text};
use super::{persistentvolumeclaim, pod_spec, workload};

/// What an update may change in a StatefulSet's spec.
const MUTABLE: &[&str] = &[
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

/// The rules of `apps/v1/StatefulSet`.
pub struct StatefulSetStrategy;

/// The StatefulSet with its template as its pods get it: each volume claim
/// template a volume of the pod (the controller adds them), so that the
/// containers may mount them.
fn with_claim_volumes(obj: &Value) -> std::borrow::Cow<'_, Value> {
    let claims: Vec<&str> = fields::items(obj, "/spec/volumeClaimTemplates")
        .iter()
        .map(|claim| text(claim, "/metadata/name"))
        .filter(|name| !name.is_empty())
        .collect();
    let declared = |name: &str| {
        fields::items(obj, "/spec/template/spec/volumes")
            .iter()
            .any(|v| text(v, "/name") == name)
    };
    let missing: Vec<&str> = claims.into_iter().filter(|n| !declared(n)).collect();
    if missing.is_empty()
        || !obj
            .pointer("/spec/template/spec")
            .is_some_and(Value::is_object)
    {
        return std::borrow::Cow::Borrowed(obj);
    }
    let mut completed = obj.clone();
    let spec = &mut completed["spec"]["template"]["spec"];
    if !spec["volumes"].is_array() {
        spec["volumes"] = json!([]);
    }
    if let Some(volumes) = spec["volumes"].as_array_mut() {
        for name in missing {
            volumes.push(json!({"name": name, "persistentVolumeClaim": {"claimName": name}}));
        }
    }
    std::borrow::Cow::Owned(completed)
}

fn validate_policies(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match text(obj, "/spec/podManagementPolicy") {
        "OrderedReady" | "Parallel" => {}
        "" => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        other => errs.push(FieldError::invalid(
            "spec.podManagementPolicy",
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    match text(obj, "/spec/updateStrategy/type") {
        "OnDelete" if is_set(obj, "/spec/updateStrategy/rollingUpdate") => {
            errs.push(FieldError::invalid(
                "spec.updateStrategy.rollingUpdate",
                fields::value(obj, "/spec/updateStrategy/rollingUpdate"),
                "only allowed for updateStrategy 'RollingUpdate'",
            ))
        }
        "OnDelete" => {}
        "RollingUpdate" => {
            errs.extend(fields::non_negative(
                obj,
                "/spec/updateStrategy/rollingUpdate/partition",
                "spec.updateStrategy.rollingUpdate.partition",
            ));
        }
        "" => errs.push(FieldError::required("spec.updateStrategy", "")),
        other => errs.push(FieldError::invalid(
            "spec.updateStrategy",
            other,
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
    for when in ["whenDeleted", "whenScaled"] {
        let policy = text(
            obj,
            &format!("/spec/persistentVolumeClaimRetentionPolicy/{when}"),
        );
        if !matches!(policy, "Retain" | "Delete") {
            errs.push(FieldError::not_supported(
                format!("spec.persistentVolumeClaimRetentionPolicy.{when}"),
                policy,
                &["Retain", "Delete"],
            ));
        }
    }
    errs
}

impl Strategy for StatefulSetStrategy {
    fn defaults(&self, obj: &mut Value) {
        default(obj, "/spec/podManagementPolicy", json!("OrderedReady"));
        default(obj, "/spec/updateStrategy/type", json!("RollingUpdate"));
        if text(obj, "/spec/updateStrategy/type") == "RollingUpdate" {
            default(
                obj,
                "/spec/updateStrategy/rollingUpdate/partition",
                json!(0),
            );
        }
        default(
            obj,
            "/spec/persistentVolumeClaimRetentionPolicy/whenDeleted",
            json!("Retain"),
        );
        default(
            obj,
            "/spec/persistentVolumeClaimRetentionPolicy/whenScaled",
            json!("Retain"),
        );
        default(obj, "/spec/replicas", json!(1));
        default(obj, "/spec/revisionHistoryLimit", json!(10));
        pod_spec::default_template(obj, "/spec/template");
        // apps/v1 answers claim templates as whole v1 PersistentVolumeClaims.
        fields::each_mut(obj, "/spec/volumeClaimTemplates", |claim| {
            default(claim, "/apiVersion", json!("v1"));
            default(claim, "/kind", json!("PersistentVolumeClaim"));
            pod_spec::null_creation_timestamp(claim);
            persistentvolumeclaim::default_claim(claim);
        });
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"replicas": 0, "availableReplicas": 0});
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
                ("/spec/ordinals/start", "spec.ordinals.start"),
            ],
        );
        errs.extend(validate_policies(obj));
        errs.extend(workload::validate_selector_and_template(
            &with_claim_volumes(obj),
            "StatefulSet",
        ));
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let frozen = |obj: &Value| {
            let mut spec = obj.get("spec").cloned().unwrap_or_default();
            for field in MUTABLE {
                fields::remove(&mut spec, &format!("/{field}"));
            }
            spec
        };
        if frozen(new) != frozen(old) {
            errs.push(FieldError::forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![
            table::name_column(),
            Column::new("Ready", "string", "Number of the pod with ready state"),
            table::age_column(),
        ];
        columns.extend(workload::wide_columns(false));
        columns
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let ready = int(obj, "/status/readyReplicas").unwrap_or(0);
        let desired = int(obj, "/spec/replicas").unwrap_or(0);
        let [containers, images] = workload::template_cells(obj, "/spec/template");
        vec![
            table::name_cell(obj),
            json!(format!("{ready}/{desired}")),
            table::age_cell(obj),
            containers,
            images,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sts() -> Value {
        let mut s = json!({"metadata": {"name": "db"}, "spec": {
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
        }});
        StatefulSetStrategy.prepare_for_create(&mut s);
        StatefulSetStrategy.defaults(&mut s);
        s
    }

    #[test]
    fn defaults() {
        let s = sts();
        assert_eq!(s["spec"]["replicas"], 1);
        assert_eq!(s["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            s["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(
            s["spec"]["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(s["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(
            s["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
        assert!(
            StatefulSetStrategy.validate(&s).is_empty(),
            "{:?}",
            StatefulSetStrategy.validate(&s)
        );
    }

    #[test]
    fn containers_mount_the_claim_templates_and_nothing_unknown() {
        let mut s = sts();
        s["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] =
            json!([{"name": "data", "mountPath": "/var/lib/postgresql"}]);
        let errs = StatefulSetStrategy.validate(&s);
        assert!(errs.is_empty(), "{errs:?}");
        s["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] =
            json!([{"name": "logs", "mountPath": "/var/log"}]);
        let errs = StatefulSetStrategy.validate(&s);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].to_string().contains("volumeMounts[0].name"),
            "{errs:?}"
        );
    }

    #[test]
    fn only_some_fields_change() {
        let old = sts();
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(3);
        assert!(StatefulSetStrategy.validate_update(&new, &old).is_empty());
        new["spec"]["serviceName"] = json!("other");
        let errs = StatefulSetStrategy.validate_update(&new, &old);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].to_string().starts_with(
            "spec: Forbidden: updates to statefulset spec for fields other than 'replicas'"
        ));
        let cells = StatefulSetStrategy.cells(&old);
        assert_eq!(cells[1], "0/1");
        assert_eq!(cells.len(), StatefulSetStrategy.columns().len());
    }
}
