//! storage.k8s.io/v1 CSIDrivers: how kubelet and the attach/detach
//! controller treat a CSI driver's volumes. Attach required, persistent
//! volumes only and fsGroup applied to ReadWriteOnce volumes with a
//! filesystem by default; `attachRequired` and `volumeLifecycleModes` never
//! change, and every change of the spec bumps the generation.

use apimachinery::error::FieldError;
use apimachinery::openapi::property_description;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use k8s_openapi::api::storage::v1::CSIDriverSpec;
use serde_json::{Value, json};

use super::fields::{self, has, int, is_set, items, text};

/// The fsGroup policies kube knows, in the order its message lists them.
const FS_GROUP_POLICIES: [&str; 3] = ["File", "None", "ReadWriteOnceWithFSType"];
/// The volume lifecycle modes kube knows.
const LIFECYCLE_MODES: [&str; 2] = ["Persistent", "Ephemeral"];
/// The shortest token lifetime a driver may ask for: ten minutes.
const MIN_TOKEN_SECONDS: i64 = 600;
/// The longest token lifetime a driver may ask for: 2^32 seconds.
const MAX_TOKEN_SECONDS: i64 = 1 << 32;
/// An alpha field (MutableCSINodeAllocatableCount, off in 1.33) kube drops.
const NODE_ALLOCATABLE_PERIOD: &str = "/spec/nodeAllocatableUpdatePeriodSeconds";

/// The rules of `storage.k8s.io/v1/CSIDriver`.
pub struct CSIDriverStrategy;

/// Sets `value` at `pointer` when nothing (or null) is there.
fn default_unset(obj: &mut Value, pointer: &str, value: Value) {
    if !is_set(obj, pointer) {
        fields::set(obj, pointer, value);
    }
}

impl Strategy for CSIDriverStrategy {
    /// DELETE answers with the object, as kube's registry declares (`ReturnDeletedObject`).
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn defaults(&self, obj: &mut Value) {
        default_unset(obj, "/spec/attachRequired", json!(true));
        default_unset(obj, "/spec/podInfoOnMount", json!(false));
        default_unset(obj, "/spec/storageCapacity", json!(false));
        default_unset(obj, "/spec/fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
        if items(obj, "/spec/volumeLifecycleModes").is_empty() {
            fields::set(obj, "/spec/volumeLifecycleModes", json!(["Persistent"]));
        }
        default_unset(obj, "/spec/requiresRepublish", json!(false));
        default_unset(obj, "/spec/seLinuxMount", json!(false));
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        fields::remove(obj, NODE_ALLOCATABLE_PERIOD);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if !is_set(old, NODE_ALLOCATABLE_PERIOD) {
            fields::remove(new, NODE_ALLOCATABLE_PERIOD);
        }
        // Compared as stored: defaulted.
        self.defaults(new);
        fields::bump_generation_on_change(new, old, "/spec");
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        // kube names the field `attachedRequired` in this message.
        for (pointer, field) in [
            ("/spec/attachRequired", "spec.attachedRequired"),
            ("/spec/podInfoOnMount", "spec.podInfoOnMount"),
            ("/spec/storageCapacity", "spec.storageCapacity"),
        ] {
            if !is_set(obj, pointer) {
                errs.push(FieldError::required(field, ""));
            }
        }
        if is_set(obj, "/spec/fsGroupPolicy") {
            let policy = text(obj, "/spec/fsGroupPolicy");
            if !FS_GROUP_POLICIES.contains(&policy) {
                errs.push(FieldError::not_supported(
                    "spec.fsGroupPolicy",
                    policy,
                    &FS_GROUP_POLICIES,
                ));
            }
        }
        errs.extend(token_requests(items(obj, "/spec/tokenRequests")));
        for mode in items(obj, "/spec/volumeLifecycleModes") {
            let mode = mode.as_str().unwrap_or_default();
            if !LIFECYCLE_MODES.contains(&mode) {
                errs.push(FieldError::not_supported(
                    "spec.volumeLifecycleModes",
                    mode,
                    &LIFECYCLE_MODES,
                ));
            }
        }
        if !is_set(obj, "/spec/seLinuxMount") {
            errs.push(FieldError::required("spec.seLinuxMount", ""));
        }
        if let Some(period) = int(obj, NODE_ALLOCATABLE_PERIOD).filter(|p| *p < 10) {
            errs.push(FieldError::invalid(
                "spec.nodeAllocatableUpdatePeriodSeconds",
                period,
                "must be greater than or equal to 10 seconds",
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(fields::immutable(
            new,
            old,
            "/spec/attachRequired",
            "spec.attachedRequired",
        ));
        errs.extend(fields::immutable(
            new,
            old,
            "/spec/volumeLifecycleModes",
            "spec.volumeLifecycleModes",
        ));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        let doc = property_description::<CSIDriverSpec>;
        vec![
            table::name_column(),
            Column::new("AttachRequired", "boolean", &doc("attachRequired")),
            Column::new("PodInfoOnMount", "boolean", &doc("podInfoOnMount")),
            Column::new("StorageCapacity", "boolean", &doc("storageCapacity")),
            Column::new("TokenRequests", "string", &doc("tokenRequests")),
            Column::new("RequiresRepublish", "boolean", &doc("requiresRepublish")),
            Column::new("Modes", "string", &doc("volumeLifecycleModes")),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let flag = |pointer: &str, unset: bool| {
            json!(
                obj.pointer(pointer)
                    .and_then(Value::as_bool)
                    .unwrap_or(unset)
            )
        };
        let token_requests = if has(obj, "/spec/tokenRequests") {
            let audiences: Vec<&str> = items(obj, "/spec/tokenRequests")
                .iter()
                .map(|t| text(t, "/audience"))
                .collect();
            audiences.join(",")
        } else {
            "<unset>".into()
        };
        let modes: Vec<&str> = items(obj, "/spec/volumeLifecycleModes")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        vec![
            table::name_cell(obj),
            flag("/spec/attachRequired", true),
            flag("/spec/podInfoOnMount", false),
            flag("/spec/storageCapacity", false),
            json!(token_requests),
            flag("/spec/requiresRepublish", false),
            json!(fields::none_if_empty(modes.join(","))),
            table::age_cell(obj),
        ]
    }
}

/// `spec.tokenRequests`: one per audience, each living ten minutes to 2^32 seconds.
fn token_requests(requests: &[Value]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut audiences: Vec<&str> = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        let path = format!("spec.tokenRequests[{i}]");
        let audience = text(request, "/audience");
        if audiences.contains(&audience) {
            errs.push(FieldError::duplicate(format!("{path}.audience"), audience));
            continue;
        }
        audiences.push(audience);
        let Some(seconds) = int(request, "/expirationSeconds") else {
            continue;
        };
        if seconds < MIN_TOKEN_SECONDS {
            errs.push(FieldError::invalid(
                format!("{path}.expirationSeconds"),
                seconds,
                "may not specify a duration less than 10 minutes",
            ));
        }
        if seconds > MAX_TOKEN_SECONDS {
            errs.push(FieldError::invalid(
                format!("{path}.expirationSeconds"),
                seconds,
                "may not specify a duration larger than 2^32 seconds",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn driver() -> Value {
        let mut d = json!({"metadata": {"name": "ebs.csi.aws.com"}, "spec": {"attachRequired": false,
            "tokenRequests": [{"audience": "sts.amazonaws.com"}, {"audience": "vault", "expirationSeconds": 3600}]}});
        CSIDriverStrategy.defaults(&mut d);
        d
    }

    #[test]
    fn defaults_and_row() {
        let mut bare = json!({"metadata": {"name": "hostpath.csi.k8s.io"}});
        CSIDriverStrategy.defaults(&mut bare);
        assert_eq!(
            bare["spec"],
            json!({"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
                "fsGroupPolicy": "ReadWriteOnceWithFSType", "volumeLifecycleModes": ["Persistent"],
                "requiresRepublish": false, "seLinuxMount": false})
        );
        assert!(CSIDriverStrategy.validate(&bare).is_empty());
        let cells = CSIDriverStrategy.cells(&bare);
        assert_eq!(
            cells[1..7],
            [
                json!(true),
                json!(false),
                json!(false),
                json!("<unset>"),
                json!(false),
                json!("Persistent")
            ]
        );
        assert_eq!(
            CSIDriverStrategy.cells(&driver())[4],
            "sts.amazonaws.com,vault"
        );
        let columns = CSIDriverStrategy.columns();
        assert!(
            columns[1]
                .description
                .starts_with("attachRequired indicates this CSI volume driver"),
            "{}",
            columns[1].description
        );
    }

    #[test]
    fn refusals() {
        let mut bad = driver();
        bad["spec"]["fsGroupPolicy"] = json!("Always");
        bad["spec"]["volumeLifecycleModes"] = json!(["Persistent", "Forever"]);
        bad["spec"]["tokenRequests"] =
            json!([{"audience": "a", "expirationSeconds": 60}, {"audience": "a"}]);
        assert_eq!(
            messages(&CSIDriverStrategy.validate(&bad)),
            [
                "spec.fsGroupPolicy: Unsupported value: \"Always\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\"",
                "spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes",
                "spec.tokenRequests[1].audience: Duplicate value: \"a\"",
                "spec.volumeLifecycleModes: Unsupported value: \"Forever\": supported values: \"Persistent\", \"Ephemeral\"",
            ]
        );
    }

    #[test]
    fn immutable_fields_and_generation() {
        let old = driver();
        let mut changed = old.clone();
        changed["spec"]["attachRequired"] = json!(true);
        changed["spec"]["volumeLifecycleModes"] = json!(["Ephemeral"]);
        assert_eq!(
            messages(&CSIDriverStrategy.validate_update(&changed, &old)),
            [
                "spec.attachedRequired: Invalid value: true: field is immutable",
                "spec.volumeLifecycleModes: Invalid value: [\"Ephemeral\"]: field is immutable",
            ]
        );
        // podInfoOnMount and fsGroupPolicy may change; the generation follows.
        let mut mutable = old.clone();
        mutable["spec"]["podInfoOnMount"] = json!(true);
        mutable["spec"]["fsGroupPolicy"] = json!("File");
        assert!(CSIDriverStrategy.validate_update(&mutable, &old).is_empty());
        CSIDriverStrategy.prepare_for_update(&mut mutable, &old);
        assert_eq!(mutable["metadata"]["generation"], 1);
        // The same spec, sent without its defaults, is no change.
        let mut same =
            json!({"metadata": {"name": "ebs.csi.aws.com"}, "spec": old["spec"].clone()});
        fields::remove(&mut same, "/spec/seLinuxMount");
        CSIDriverStrategy.prepare_for_update(&mut same, &old);
        assert!(same["metadata"].get("generation").is_none());
        let mut alpha = json!({"spec": {"nodeAllocatableUpdatePeriodSeconds": 5}});
        CSIDriverStrategy.prepare_for_create(&mut alpha);
        assert_eq!(alpha["spec"], json!({}));
    }
}
