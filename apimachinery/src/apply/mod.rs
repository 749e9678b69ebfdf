//! Server-side apply and `metadata.managedFields`, as kube-apiserver does them
//! (`sigs.k8s.io/structured-merge-diff` driven by kube's field manager).
//!
//! Every write records who set which fields:
//!
//! - [`update`] runs on every create, update and non-apply patch: the fields
//!   the write added or changed go to its manager (an `Update` entry per
//!   manager, API version and subresource), other managers lose them, removed
//!   fields leave every entry.
//! - [`apply`] runs on `application/apply-patch+yaml` patches: the
//!   configuration is merged into the object following the schema (list maps
//!   by key, sets by value, granular maps per key, atomic values whole),
//!   fields the applier applied last time and no longer applies are removed
//!   unless someone else owns them, and a change to a field another manager
//!   owns is a conflict unless forced. The applier's `Apply` entry becomes
//!   exactly the configuration's fields.
//!
//! Objects are typed by their kind's OpenAPI v3 schema ([`Schema`]); fields
//! are tracked as [`Set`]s of paths and stored in the `FieldsV1` JSON form.
//!
//! ```
//! # use apimachinery::apply::{apply, update, Schema};
//! # use serde_json::json;
//! let now = "2024-05-01T10:00:00Z";
//! let mut created = json!({"apiVersion": "v1", "kind": "ConfigMap",
//!                          "metadata": {"name": "cm"}, "data": {"a": "1"}});
//! update(None, &mut created, "kubectl-create", "v1", "", now, Schema::deduced()).unwrap();
//! let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
//!                     "metadata": {"name": "cm"}, "data": {"a": "2"}});
//! let error = apply(Some(&created), &config, "kubectl", "v1", "", false, now, Schema::deduced())
//!     .unwrap_err();
//! assert_eq!(
//!     error.message(),
//!     r#"Apply failed with 1 conflict: conflict with "kubectl-create" using v1: .data.a"#
//! );
//! ```

mod error;
mod fieldpath;
mod managed;
mod schema;
mod typed;

use serde_json::Value;

pub use error::{ApplyError, Conflict, Operation};
pub(crate) use fieldpath::go_quote;
pub use fieldpath::{PathElement, Set, path_string};
pub use schema::Schema;

/// Records a create, update or non-apply patch by `manager` in `new`'s `metadata.managedFields`.
///
/// `old` is the stored object (`None` on create; an object without `metadata.uid` is also
/// taken as a create, compared against as the empty object). `now` is an RFC 3339 time.
/// Like kube:
///
/// - the manager's entry is `Update` for `api_version` and `subresource`; it gets the fields
///   `new` adds or changes (merged with its previous entry, time set to `now`), other entries
///   lose them, and fields `new` removes leave every entry;
/// - `apiVersion`, `kind` and server-set metadata (`name`, `namespace`, `uid`,
///   `resourceVersion`, `generation`, `creationTimestamp`, `managedFields`, ...) are never
///   recorded, nor changes below the schema's reset fields;
/// - managedFields sent in `new` replace the stored ones (ignored on a subresource); `[]` or
///   `[{}]` clears them, and an update of an object without managedFields stays untracked;
/// - more than ten `Update` entries are folded into `ancient-changes` entries;
/// - an object that does not fit its schema keeps its stored managedFields (kube's
///   `UpdateNoErrors`), so this never fails; the `Result` is for callers' symmetry with [`apply`].
pub fn update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: &str,
    now: &str,
    schema: Schema<'_>,
) -> Result<(), ApplyError> {
    let id = managed::ManagerId::new(manager, Operation::Update, api_version, subresource);
    managed::update(old, new, &id, now, schema);
    Ok(())
}

/// Server-side applies `config` to `live` (`None`: the apply creates the object) and returns
/// the new object with its managedFields.
///
/// The caller has checked `apiVersion`, `kind`, `metadata.name` and `metadata.namespace`;
/// defaulting, validation and the strategy's resets run on the result afterwards. Errors:
/// [`ApplyError::Conflicts`] when another manager owns a field `config` changes and `force`
/// is off; [`ApplyError::BadRequest`] when `config` sets `metadata.managedFields`;
/// [`ApplyError::Invalid`] when `config` does not fit the schema (an undeclared field, a
/// list-map item without its key, duplicate items).
#[allow(clippy::too_many_arguments)] // kube's Apply(live, applied, manager, force) plus what it reads from its scope
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    api_version: &str,
    subresource: &str,
    force: bool,
    now: &str,
    schema: Schema<'_>,
) -> Result<Value, ApplyError> {
    let id = managed::ManagerId::new(manager, Operation::Apply, api_version, subresource);
    managed::apply(live, config, &id, api_version, force, now, schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    const T1: &str = "2024-05-01T10:00:00Z";
    const T2: &str = "2024-05-01T10:05:00Z";
    const T3: &str = "2024-05-01T10:10:00Z";

    /// Schemas shaped like kube's OpenAPI v3 for Deployment and ConfigMap.
    fn components() -> Map<String, Value> {
        let reference =
            |name: &str| json!({"allOf": [{"$ref": format!("#/components/schemas/{name}")}]});
        let with_default = |name: &str| {
            let mut schema = reference(name);
            schema["default"] = json!({});
            schema
        };
        let strings =
            json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}});
        serde_json::from_value(json!({
            "io.k8s.api.apps.v1.Deployment": {"type": "object", "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": with_default("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
                "spec": with_default("io.k8s.api.apps.v1.DeploymentSpec"),
                "status": with_default("io.k8s.api.apps.v1.DeploymentStatus")
            }},
            "io.k8s.api.core.v1.ConfigMap": {"type": "object", "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": with_default("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
                "data": strings.clone(),
                "binaryData": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}}
            }},
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "properties": {
                "name": {"type": "string"}, "namespace": {"type": "string"}, "uid": {"type": "string"},
                "resourceVersion": {"type": "string"}, "generation": {"type": "integer", "format": "int64"},
                "creationTimestamp": reference("io.k8s.apimachinery.pkg.apis.meta.v1.Time"),
                "labels": strings.clone(), "annotations": strings,
                "finalizers": {"type": "array", "items": {"type": "string", "default": ""},
                               "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
                "ownerReferences": {"type": "array",
                                    "items": with_default("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"),
                                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"]},
                "managedFields": {"type": "array", "items": {"type": "object"}}
            }},
            "io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"type": "string", "format": "date-time"},
            "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference": {"type": "object",
                "required": ["apiVersion", "kind", "name", "uid"], "x-kubernetes-map-type": "atomic",
                "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                               "name": {"type": "string"}, "uid": {"type": "string"}}},
            "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector": {"type": "object",
                "x-kubernetes-map-type": "atomic", "properties": {
                    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "matchExpressions": {"type": "array", "items": {"type": "object"},
                                         "x-kubernetes-list-type": "atomic"}}},
            "io.k8s.api.apps.v1.DeploymentSpec": {"type": "object", "required": ["selector", "template"],
                "properties": {
                    "replicas": {"type": "integer", "format": "int32"},
                    "paused": {"type": "boolean"},
                    "progressDeadlineSeconds": {"type": "integer"},
                    "revisionHistoryLimit": {"type": "integer"},
                    "selector": reference("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"),
                    "strategy": with_default("io.k8s.api.apps.v1.DeploymentStrategy"),
                    "template": with_default("io.k8s.api.core.v1.PodTemplateSpec")
                }},
            "io.k8s.api.apps.v1.DeploymentStrategy": {"type": "object", "properties": {
                "type": {"type": "string"},
                "rollingUpdate": reference("io.k8s.api.apps.v1.RollingUpdateDeployment")}},
            "io.k8s.api.apps.v1.RollingUpdateDeployment": {"type": "object", "properties": {
                "maxSurge": reference("io.k8s.apimachinery.pkg.util.intstr.IntOrString"),
                "maxUnavailable": reference("io.k8s.apimachinery.pkg.util.intstr.IntOrString")}},
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
            "io.k8s.api.apps.v1.DeploymentStatus": {"type": "object", "properties": {
                "replicas": {"type": "integer"}, "readyReplicas": {"type": "integer"}}},
            "io.k8s.api.core.v1.PodTemplateSpec": {"type": "object", "properties": {
                "metadata": with_default("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
                "spec": with_default("io.k8s.api.core.v1.PodSpec")}},
            "io.k8s.api.core.v1.PodSpec": {"type": "object", "required": ["containers"], "properties": {
                "containers": {"type": "array", "items": with_default("io.k8s.api.core.v1.Container"),
                               "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                               "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"},
                "dnsPolicy": {"type": "string"}, "restartPolicy": {"type": "string"},
                "schedulerName": {"type": "string"},
                "terminationGracePeriodSeconds": {"type": "integer"},
                "securityContext": reference("io.k8s.api.core.v1.PodSecurityContext")}},
            "io.k8s.api.core.v1.PodSecurityContext": {"type": "object", "properties": {
                "runAsUser": {"type": "integer"}}},
            "io.k8s.api.core.v1.Container": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "image": {"type": "string"},
                "imagePullPolicy": {"type": "string"},
                "args": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"},
                "ports": {"type": "array", "items": with_default("io.k8s.api.core.v1.ContainerPort"),
                          "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["containerPort", "protocol"]},
                "resources": with_default("io.k8s.api.core.v1.ResourceRequirements"),
                "terminationMessagePath": {"type": "string"},
                "terminationMessagePolicy": {"type": "string"}}},
            "io.k8s.api.core.v1.ContainerPort": {"type": "object", "required": ["containerPort"], "properties": {
                "containerPort": {"type": "integer"}, "name": {"type": "string"},
                "protocol": {"type": "string", "default": "TCP"}}},
            "io.k8s.api.core.v1.ResourceRequirements": {"type": "object", "properties": {
                "limits": {"type": "object",
                           "additionalProperties": reference("io.k8s.apimachinery.pkg.api.resource.Quantity")}}},
            "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"}
        }))
        .unwrap()
    }

    const DEPLOYMENT: &str = "io.k8s.api.apps.v1.Deployment";
    const CONFIG_MAP: &str = "io.k8s.api.core.v1.ConfigMap";

    /// Runs `f` with the schema of `kind`, reset fields given.
    fn with_schema<T>(kind: &str, reset: &[&str], f: impl FnOnce(Schema<'_>) -> T) -> T {
        let components = components();
        let root = json!({"$ref": format!("#/components/schemas/{kind}")});
        f(Schema::new(&root, &components).reset_fields(reset))
    }

    /// The object's managedFields as (manager, operation, fieldsV1) triples.
    fn entries(object: &Value) -> Vec<(String, String, Value)> {
        object["metadata"]["managedFields"]
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .map(|entry| {
                        (
                            entry["manager"].as_str().unwrap().to_owned(),
                            entry["operation"].as_str().unwrap().to_owned(),
                            entry["fieldsV1"].clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The fieldsV1 of one manager's entry.
    fn fields_of(object: &Value, manager: &str) -> Value {
        entries(object)
            .into_iter()
            .find(|(name, _, _)| name == manager)
            .map(|(_, _, fields)| fields)
            .unwrap_or(Value::Null)
    }

    /// A Deployment as `kubectl create deployment nginx --image=nginx --port=80` stores it.
    fn created_deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
            "spec": {
                "progressDeadlineSeconds": 600, "replicas": 1, "revisionHistoryLimit": 10,
                "selector": {"matchLabels": {"app": "nginx"}},
                "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
                "template": {
                    "metadata": {"labels": {"app": "nginx"}},
                    "spec": {
                        "containers": [{
                            "image": "nginx", "imagePullPolicy": "Always", "name": "nginx",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {}, "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File"
                        }],
                        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
                        "schedulerName": "default-scheduler", "securityContext": {},
                        "terminationGracePeriodSeconds": 30
                    }
                }
            },
            "status": {}
        })
    }

    /// Stored-object metadata the server adds after the field manager ran.
    fn stored(mut object: Value) -> Value {
        object["metadata"]["uid"] = json!("5f2e6c1a-0000-4000-8000-000000000001");
        object["metadata"]["resourceVersion"] = json!("100");
        object
    }

    fn config_map(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}, "data": data})
    }

    fn deployment_config(spec: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
    }

    #[test]
    fn create_gives_every_set_field_to_the_manager_as_kube_writes_it() {
        let mut object = created_deployment();
        with_schema(DEPLOYMENT, &["status"], |schema| {
            update(
                None,
                &mut object,
                "kubectl-create",
                "apps/v1",
                "",
                T1,
                schema,
            )
            .unwrap();
        });
        let managed = object["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(managed.len(), 1);
        assert_eq!(managed[0]["manager"], "kubectl-create");
        assert_eq!(managed[0]["operation"], "Update");
        assert_eq!(managed[0]["apiVersion"], "apps/v1");
        assert_eq!(managed[0]["time"], T1);
        assert_eq!(managed[0]["fieldsType"], "FieldsV1");
        // Byte for byte what kube-apiserver stores for this create.
        assert_eq!(
            serde_json::to_string(&managed[0]["fieldsV1"]).unwrap(),
            concat!(
                r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:progressDeadlineSeconds":{},"#,
                r#""f:replicas":{},"f:revisionHistoryLimit":{},"f:selector":{},"f:strategy":{"f:rollingUpdate":"#,
                r#"{".":{},"f:maxSurge":{},"f:maxUnavailable":{}},"f:type":{}},"f:template":{"f:metadata":"#,
                r#"{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":"#,
                r#"{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"#,
                r#""k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"#,
                r#""f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"#,
                r#""f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"#,
                r#""f:terminationGracePeriodSeconds":{}}}}}"#
            )
        );
    }

    #[test]
    fn an_update_by_a_second_manager_moves_only_the_changed_fields() {
        let mut created = created_deployment();
        with_schema(DEPLOYMENT, &["status"], |schema| {
            update(
                None,
                &mut created,
                "kubectl-create",
                "apps/v1",
                "",
                T1,
                schema,
            )
            .unwrap();
            let old = stored(created);
            let mut new = old.clone();
            new["spec"]["replicas"] = json!(3);
            new["metadata"]["labels"]["tier"] = json!("web");
            update(
                Some(&old),
                &mut new,
                "kubectl-edit",
                "apps/v1",
                "",
                T2,
                schema,
            )
            .unwrap();
            assert_eq!(
                fields_of(&new, "kubectl-edit"),
                json!({"f:metadata": {"f:labels": {"f:tier": {}}}, "f:spec": {"f:replicas": {}}})
            );
            let create = fields_of(&new, "kubectl-create");
            assert!(create["f:spec"].get("f:replicas").is_none());
            assert!(create["f:spec"].get("f:revisionHistoryLimit").is_some());
            let order: Vec<String> = entries(&new).into_iter().map(|(name, _, _)| name).collect();
            assert_eq!(order, ["kubectl-create", "kubectl-edit"]);

            // The same manager again: its entry grows, no second entry.
            let old = stored(new);
            let mut again = old.clone();
            again["spec"]["paused"] = json!(true);
            update(
                Some(&old),
                &mut again,
                "kubectl-edit",
                "apps/v1",
                "",
                T3,
                schema,
            )
            .unwrap();
            assert_eq!(entries(&again).len(), 2);
            assert_eq!(
                fields_of(&again, "kubectl-edit"),
                json!({"f:metadata": {"f:labels": {"f:tier": {}}}, "f:spec": {"f:paused": {}, "f:replicas": {}}})
            );
            // Removing a field takes it from its owner.
            let old = stored(again);
            let mut removed = old.clone();
            removed["metadata"]["labels"]
                .as_object_mut()
                .unwrap()
                .remove("tier");
            update(Some(&old), &mut removed, "other", "apps/v1", "", T3, schema).unwrap();
            assert_eq!(
                fields_of(&removed, "kubectl-edit"),
                json!({"f:spec": {"f:paused": {}, "f:replicas": {}}})
            );
            assert_eq!(fields_of(&removed, "other"), Value::Null);
        });
    }

    #[test]
    fn managed_fields_sent_empty_reset_tracking() {
        with_schema(CONFIG_MAP, &[], |schema| {
            let mut created = config_map(json!({"a": "1"}));
            update(None, &mut created, "m1", "v1", "", T1, schema).unwrap();
            let old = stored(created);
            // null or absent: the stored entries are kept.
            let mut kept = old.clone();
            kept["metadata"]["managedFields"] = Value::Null;
            update(Some(&old), &mut kept, "m2", "v1", "", T2, schema).unwrap();
            assert_eq!(entries(&kept).len(), 1);
            // []: cleared, and the update itself is not tracked either.
            let mut reset = old.clone();
            reset["metadata"]["managedFields"] = json!([]);
            reset["data"]["b"] = json!("2");
            update(Some(&old), &mut reset, "m2", "v1", "", T2, schema).unwrap();
            assert!(reset["metadata"].get("managedFields").is_none());
            // Entries sent by the client replace the stored ones.
            let mut replaced = old.clone();
            replaced["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Update",
                "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]);
            update(Some(&old), &mut replaced, "m2", "v1", "", T2, schema).unwrap();
            let names: Vec<String> = entries(&replaced)
                .into_iter()
                .map(|(name, _, _)| name)
                .collect();
            assert_eq!(names, ["x"]);
        });
    }

    #[test]
    fn apply_creates_with_an_apply_entry() {
        let config = deployment_config(json!({
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80}]}]}}
        }));
        let object = with_schema(DEPLOYMENT, &["status"], |schema| {
            apply(None, &config, "kubectl", "apps/v1", "", false, T1, schema).unwrap()
        });
        assert_eq!(object["spec"]["replicas"], 2);
        let managed = object["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(managed.len(), 1);
        assert_eq!(managed[0]["manager"], "kubectl");
        assert_eq!(managed[0]["operation"], "Apply");
        assert_eq!(managed[0]["apiVersion"], "apps/v1");
        assert_eq!(managed[0]["time"], T1);
        assert_eq!(
            managed[0]["fieldsV1"],
            json!({"f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}}}}})
        );
    }

    #[test]
    fn reapplying_without_a_field_removes_it() {
        with_schema(CONFIG_MAP, &[], |schema| {
            let mut first = config_map(json!({"a": "1", "b": "2"}));
            first["metadata"]["labels"] = json!({"x": "1", "y": "2"});
            let object = stored(apply(None, &first, "m1", "v1", "", false, T1, schema).unwrap());
            let mut second = config_map(json!({"a": "1"}));
            second["metadata"]["labels"] = json!({"x": "1"});
            let object = apply(Some(&object), &second, "m1", "v1", "", false, T2, schema).unwrap();
            assert_eq!(object["data"], json!({"a": "1"}));
            assert_eq!(object["metadata"]["labels"], json!({"x": "1"}));
            assert_eq!(
                fields_of(&object, "m1"),
                json!({"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:x": {}}}})
            );
            // Dropping every label drops the map.
            let object = stored(object);
            let third = config_map(json!({"a": "1"}));
            let object = apply(Some(&object), &third, "m1", "v1", "", false, T3, schema).unwrap();
            assert!(object["metadata"].get("labels").is_none());
        });
    }

    #[test]
    fn a_field_kept_by_another_manager_is_not_pruned() {
        with_schema(CONFIG_MAP, &[], |schema| {
            let object = stored(
                apply(
                    None,
                    &config_map(json!({"a": "1", "b": "2"})),
                    "m1",
                    "v1",
                    "",
                    false,
                    T1,
                    schema,
                )
                .unwrap(),
            );
            let object = stored(
                apply(
                    Some(&object),
                    &config_map(json!({"b": "2"})),
                    "m2",
                    "v1",
                    "",
                    false,
                    T2,
                    schema,
                )
                .unwrap(),
            );
            let object = apply(
                Some(&object),
                &config_map(json!({"a": "1"})),
                "m1",
                "v1",
                "",
                false,
                T3,
                schema,
            )
            .unwrap();
            assert_eq!(object["data"], json!({"a": "1", "b": "2"}));
            assert_eq!(fields_of(&object, "m2"), json!({"f:data": {"f:b": {}}}));
        });
    }

    #[test]
    fn changing_a_field_another_manager_owns_is_a_conflict() {
        with_schema(DEPLOYMENT, &["status"], |schema| {
            let first = deployment_config(json!({"replicas": 1, "paused": false}));
            let object =
                stored(apply(None, &first, "m1", "apps/v1", "", false, T1, schema).unwrap());
            let second = deployment_config(json!({"replicas": 3, "paused": true}));
            let error = apply(
                Some(&object),
                &second,
                "m2",
                "apps/v1",
                "",
                false,
                T2,
                schema,
            )
            .unwrap_err();
            assert_eq!(
                error.message(),
                "Apply failed with 2 conflicts: conflicts with \"m1\":\n- .spec.paused\n- .spec.replicas"
            );
            assert_eq!(error.code(), 409);
            assert_eq!(error.causes()[1]["field"], ".spec.replicas");
            assert_eq!(error.causes()[1]["message"], "conflict with \"m1\"");

            // An Update owner is named with its version.
            let mut updated = object.clone();
            updated["spec"]["replicas"] = json!(5);
            update(
                Some(&object),
                &mut updated,
                "kube-controller-manager",
                "apps/v1",
                "",
                T2,
                schema,
            )
            .unwrap();
            let updated = stored(updated);
            let third = deployment_config(json!({"replicas": 1, "paused": false}));
            let error = apply(
                Some(&updated),
                &third,
                "m1",
                "apps/v1",
                "",
                false,
                T3,
                schema,
            )
            .unwrap_err();
            assert_eq!(
                error.message(),
                r#"Apply failed with 1 conflict: conflict with "kube-controller-manager" using apps/v1: .spec.replicas"#
            );
        });
    }

    #[test]
    fn forcing_moves_ownership() {
        with_schema(DEPLOYMENT, &["status"], |schema| {
            let first = deployment_config(json!({"replicas": 1, "paused": false}));
            let object =
                stored(apply(None, &first, "m1", "apps/v1", "", false, T1, schema).unwrap());
            let second = deployment_config(json!({"replicas": 3}));
            let object = apply(
                Some(&object),
                &second,
                "m2",
                "apps/v1",
                "",
                true,
                T2,
                schema,
            )
            .unwrap();
            assert_eq!(object["spec"]["replicas"], 3);
            assert_eq!(
                fields_of(&object, "m1"),
                json!({"f:spec": {"f:paused": {}}})
            );
            assert_eq!(
                fields_of(&object, "m2"),
                json!({"f:spec": {"f:replicas": {}}})
            );
            // m1 re-applying its old config now conflicts with m2.
            let error = apply(
                Some(&stored(object)),
                &first,
                "m1",
                "apps/v1",
                "",
                false,
                T3,
                schema,
            )
            .unwrap_err();
            assert_eq!(
                error.message(),
                r#"Apply failed with 1 conflict: conflict with "m2": .spec.replicas"#
            );
        });
    }

    #[test]
    fn equal_values_are_co_owned() {
        with_schema(DEPLOYMENT, &["status"], |schema| {
            let config = deployment_config(json!({"replicas": 2}));
            let object =
                stored(apply(None, &config, "m1", "apps/v1", "", false, T1, schema).unwrap());
            let object = apply(
                Some(&object),
                &config,
                "m2",
                "apps/v1",
                "",
                false,
                T2,
                schema,
            )
            .unwrap();
            assert_eq!(
                fields_of(&object, "m1"),
                json!({"f:spec": {"f:replicas": {}}})
            );
            assert_eq!(
                fields_of(&object, "m2"),
                json!({"f:spec": {"f:replicas": {}}})
            );
            // Nothing changed for m2, so its entry has no time (and sorts first, as in kube).
            let m2 = &object["metadata"]["managedFields"][0];
            assert_eq!(m2["manager"], "m2");
            assert!(m2.get("time").is_none());
            // m1 dropping the field leaves it with its co-owner.
            let object = stored(object);
            let empty = deployment_config(json!({}));
            let object = apply(
                Some(&object),
                &empty,
                "m1",
                "apps/v1",
                "",
                false,
                T3,
                schema,
            )
            .unwrap();
            assert_eq!(object["spec"]["replicas"], 2);
            assert_eq!(fields_of(&object, "m1"), Value::Null);
        });
    }

    #[test]
    fn containers_merge_by_name() {
        with_schema(DEPLOYMENT, &["status"], |schema| {
            let containers = |items: Value| {
                deployment_config(json!({"template": {"spec": {"containers": items}}}))
            };
            let object = stored(
                apply(
                    None,
                    &containers(json!([{"name": "a", "image": "a:1"}])),
                    "m1",
                    "apps/v1",
                    "",
                    false,
                    T1,
                    schema,
                )
                .unwrap(),
            );
            let object = stored(
                apply(
                    Some(&object),
                    &containers(json!([{"name": "b", "image": "b:1"}])),
                    "m2",
                    "apps/v1",
                    "",
                    false,
                    T2,
                    schema,
                )
                .unwrap(),
            );
            assert_eq!(
                object["spec"]["template"]["spec"]["containers"],
                json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}])
            );
            // m1 changes its container; m2's is kept.
            let object = stored(
                apply(
                    Some(&object),
                    &containers(json!([{"name": "a", "image": "a:2"}])),
                    "m1",
                    "apps/v1",
                    "",
                    false,
                    T3,
                    schema,
                )
                .unwrap(),
            );
            assert_eq!(
                object["spec"]["template"]["spec"]["containers"],
                json!([{"name": "a", "image": "a:2"}, {"name": "b", "image": "b:1"}])
            );
            // m1 drops its container: only m2's remains.
            let object = apply(
                Some(&object),
                &containers(json!([])),
                "m1",
                "apps/v1",
                "",
                false,
                T3,
                schema,
            )
            .unwrap();
            assert_eq!(
                object["spec"]["template"]["spec"]["containers"],
                json!([{"name": "b", "image": "b:1"}])
            );
        });
    }

    #[test]
    fn finalizers_merge_as_a_set() {
        with_schema(CONFIG_MAP, &[], |schema| {
            let with = |finalizers: Value| {
                let mut config = config_map(json!({}));
                config.as_object_mut().unwrap().remove("data");
                config["metadata"]["finalizers"] = finalizers;
                config
            };
            let object = stored(
                apply(None, &with(json!(["x"])), "m1", "v1", "", false, T1, schema).unwrap(),
            );
            let object = stored(
                apply(
                    Some(&object),
                    &with(json!(["y", "x"])),
                    "m2",
                    "v1",
                    "",
                    false,
                    T2,
                    schema,
                )
                .unwrap(),
            );
            assert_eq!(object["metadata"]["finalizers"], json!(["y", "x"]));
            assert_eq!(
                fields_of(&object, "m2"),
                json!({"f:metadata": {"f:finalizers": {"v:\"x\"": {}, "v:\"y\"": {}}}})
            );
            let object = stored(
                apply(
                    Some(&object),
                    &with(json!(["z"])),
                    "m1",
                    "v1",
                    "",
                    false,
                    T3,
                    schema,
                )
                .unwrap(),
            );
            assert_eq!(object["metadata"]["finalizers"], json!(["y", "x", "z"]));
            let object = apply(
                Some(&object),
                &with(json!(["y"])),
                "m2",
                "v1",
                "",
                false,
                T3,
                schema,
            )
            .unwrap();
            assert_eq!(object["metadata"]["finalizers"], json!(["y", "z"]));
        });
    }

    #[test]
    fn atomic_lists_are_replaced_whole() {
        with_schema(DEPLOYMENT, &["status"], |schema| {
            let args = |args: Value| {
                deployment_config(
                    json!({"template": {"spec": {"containers": [{"name": "a", "args": args}]}}}),
                )
            };
            let object = stored(
                apply(
                    None,
                    &args(json!(["1", "2"])),
                    "m1",
                    "apps/v1",
                    "",
                    false,
                    T1,
                    schema,
                )
                .unwrap(),
            );
            let error = apply(
                Some(&object),
                &args(json!(["3"])),
                "m2",
                "apps/v1",
                "",
                false,
                T2,
                schema,
            )
            .unwrap_err();
            assert_eq!(
                error.message(),
                r#"Apply failed with 1 conflict: conflict with "m1": .spec.template.spec.containers[name="a"].args"#
            );
            let object = apply(
                Some(&object),
                &args(json!(["3"])),
                "m2",
                "apps/v1",
                "",
                true,
                T2,
                schema,
            )
            .unwrap();
            assert_eq!(
                object["spec"]["template"]["spec"]["containers"][0]["args"],
                json!(["3"])
            );
            let m1 = fields_of(&object, "m1");
            assert!(m1.to_string().find("f:args").is_none());
        });
    }

    #[test]
    fn config_map_data_without_schema_is_a_granular_map() {
        let object = apply(
            None,
            &config_map(json!({"a": "1"})),
            "m1",
            "v1",
            "",
            false,
            T1,
            Schema::deduced(),
        )
        .unwrap();
        assert_eq!(
            fields_of(&object, "m1"),
            json!({"f:data": {".": {}, "f:a": {}}})
        );
        let object = stored(object);
        let object = stored(
            apply(
                Some(&object),
                &config_map(json!({"b": "2"})),
                "m2",
                "v1",
                "",
                false,
                T2,
                Schema::deduced(),
            )
            .unwrap(),
        );
        assert_eq!(object["data"], json!({"a": "1", "b": "2"}));
        let error = apply(
            Some(&object),
            &config_map(json!({"a": "9"})),
            "m2",
            "v1",
            "",
            false,
            T3,
            Schema::deduced(),
        )
        .unwrap_err();
        assert_eq!(
            error.message(),
            r#"Apply failed with 1 conflict: conflict with "m1": .data.a"#
        );
        // With the ConfigMap schema, data is a declared field: no "." for it.
        let object = with_schema(CONFIG_MAP, &[], |schema| {
            apply(
                None,
                &config_map(json!({"a": "1"})),
                "m1",
                "v1",
                "",
                false,
                T1,
                schema,
            )
            .unwrap()
        });
        assert_eq!(fields_of(&object, "m1"), json!({"f:data": {"f:a": {}}}));
    }

    #[test]
    fn the_first_apply_to_an_untracked_object_meets_its_fields() {
        with_schema(CONFIG_MAP, &[], |schema| {
            let live = stored(config_map(json!({"key": "old"})));
            let error = apply(
                Some(&live),
                &config_map(json!({"key": "new"})),
                "m1",
                "v1",
                "",
                false,
                T1,
                schema,
            )
            .unwrap_err();
            assert_eq!(
                error.message(),
                r#"Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.key"#
            );
            let object = apply(
                Some(&live),
                &config_map(json!({"key": "old"})),
                "m1",
                "v1",
                "",
                false,
                T1,
                schema,
            )
            .unwrap();
            let names: Vec<(String, String)> = entries(&object)
                .into_iter()
                .map(|(name, op, _)| (name, op))
                .collect();
            assert_eq!(
                names,
                [
                    ("m1".to_owned(), "Apply".to_owned()),
                    ("before-first-apply".to_owned(), "Update".to_owned())
                ]
            );
        });
    }

    #[test]
    fn kubectl_takes_over_fields_its_client_side_apply_set() {
        with_schema(CONFIG_MAP, &[], |schema| {
            let last = r#"{"apiVersion":"v1","data":{"key":"1"},"kind":"ConfigMap","metadata":{"annotations":{},"name":"cm","namespace":"default"}}"#;
            let mut created = config_map(json!({"key": "1"}));
            created["metadata"]["annotations"] =
                json!({"kubectl.kubernetes.io/last-applied-configuration": format!("{last}\n")});
            update(
                None,
                &mut created,
                "kubectl-client-side-apply",
                "v1",
                "",
                T1,
                schema,
            )
            .unwrap();
            let live = stored(created);
            let config = config_map(json!({"key": "2"}));
            // Another applier conflicts with the client-side apply's field.
            let error =
                apply(Some(&live), &config, "helm", "v1", "", false, T2, schema).unwrap_err();
            assert_eq!(
                error.message(),
                r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.key"#
            );
            // kubectl upgrading from client-side apply does not, and syncs the annotation.
            let object =
                apply(Some(&live), &config, "kubectl", "v1", "", false, T2, schema).unwrap();
            assert_eq!(object["data"]["key"], "2");
            assert_eq!(
                object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
                "{\"apiVersion\":\"v1\",\"data\":{\"key\":\"2\"},\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\",\"namespace\":\"default\"}}\n"
            );
            assert_eq!(
                fields_of(&object, "kubectl"),
                json!({"f:data": {"f:key": {}}})
            );
        });
    }

    #[test]
    fn reset_fields_are_neither_owned_nor_conflicting() {
        with_schema(DEPLOYMENT, &["spec", "metadata.labels"], |status_schema| {
            let mut live = stored(created_deployment());
            live["status"] = json!({"replicas": 1});
            let mut created = live.clone();
            with_schema(DEPLOYMENT, &["status"], |schema| {
                update(
                    None,
                    &mut created,
                    "kubectl-create",
                    "apps/v1",
                    "",
                    T1,
                    schema,
                )
                .unwrap();
            });
            let live = stored(created);
            let mut new = live.clone();
            new["status"]["replicas"] = json!(2);
            new["spec"]["replicas"] = json!(9);
            update(
                Some(&live),
                &mut new,
                "kube-controller-manager",
                "apps/v1",
                "status",
                T2,
                status_schema,
            )
            .unwrap();
            let managed = new["metadata"]["managedFields"].as_array().unwrap();
            let controller = managed
                .iter()
                .find(|entry| entry["manager"] == "kube-controller-manager")
                .unwrap();
            assert_eq!(controller["subresource"], "status");
            assert_eq!(
                controller["fieldsV1"],
                json!({"f:status": {"f:replicas": {}}})
            );
            // The create's spec.replicas stays with it: the status write's spec change is reset.
            assert!(
                fields_of(&new, "kubectl-create")["f:spec"]
                    .get("f:replicas")
                    .is_some()
            );
        });
    }

    #[test]
    fn structural_errors_are_reported_like_kube() {
        with_schema(DEPLOYMENT, &["status"], |schema| {
            let missing =
                deployment_config(json!({"template": {"spec": {"containers": [{"image": "x"}]}}}));
            let error = apply(None, &missing, "m1", "apps/v1", "", false, T1, schema).unwrap_err();
            assert_eq!(
                error.message(),
                "failed to create typed patch object (default/web; apps/v1, Kind=Deployment): .spec.template.spec.containers: element 0: associative list with keys has an element that omits key field \"name\" (and doesn't have default value)"
            );
            assert_eq!(error.code(), 500);
            let duplicate = deployment_config(
                json!({"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}),
            );
            let error =
                apply(None, &duplicate, "m1", "apps/v1", "", false, T1, schema).unwrap_err();
            assert!(error.message().ends_with(
                ".spec.template.spec.containers: duplicate entries for key [name=\"a\"]"
            ));
            let unknown = deployment_config(json!({"replica": 1}));
            let error = apply(None, &unknown, "m1", "apps/v1", "", false, T1, schema).unwrap_err();
            assert!(
                error
                    .message()
                    .ends_with(".spec.replica: field not declared in schema")
            );
            let mut managed = deployment_config(json!({}));
            managed["metadata"]["managedFields"] = json!([]);
            let error = apply(None, &managed, "m1", "apps/v1", "", false, T1, schema).unwrap_err();
            assert_eq!(
                error,
                ApplyError::BadRequest("metadata.managedFields must be nil".to_owned())
            );
        });
    }

    #[test]
    fn invalid_updates_keep_the_stored_entries() {
        with_schema(DEPLOYMENT, &["status"], |schema| {
            let mut created = created_deployment();
            update(
                None,
                &mut created,
                "kubectl-create",
                "apps/v1",
                "",
                T1,
                schema,
            )
            .unwrap();
            let old = stored(created);
            let mut new = old.clone();
            new["spec"]["template"]["spec"]["containers"][0]
                .as_object_mut()
                .unwrap()
                .remove("name");
            update(Some(&old), &mut new, "bad", "apps/v1", "", T2, schema).unwrap();
            assert_eq!(
                new["metadata"]["managedFields"],
                old["metadata"]["managedFields"]
            );
        });
    }

    #[test]
    fn schemas_without_default_markers_guess_non_pointer_structs() {
        // k8s-openapi's schemas have no `default: {}` on non-pointer structs: a struct that
        // is non-empty at create is taken as one, so only pointer structs with content
        // (here `rollingUpdate`) lose kube's "." marker.
        let mut components = components();
        for schema in components.values_mut() {
            if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
                for property in properties.values_mut() {
                    property.as_object_mut().unwrap().remove("default");
                }
            }
        }
        let root = json!({"$ref": format!("#/components/schemas/{DEPLOYMENT}")});
        let schema = Schema::new(&root, &components).reset_fields(&["status"]);
        let mut object = created_deployment();
        update(
            None,
            &mut object,
            "kubectl-create",
            "apps/v1",
            "",
            T1,
            schema,
        )
        .unwrap();
        let fields = fields_of(&object, "kubectl-create");
        assert_eq!(
            fields["f:metadata"],
            json!({"f:labels": {".": {}, "f:app": {}}})
        );
        assert!(fields["f:spec"]["f:template"].get(".").is_none());
        assert!(
            fields["f:spec"]["f:template"]["f:spec"]["f:containers"]
                .get(".")
                .is_none()
        );
        assert_eq!(
            fields["f:spec"]["f:template"]["f:spec"]["f:securityContext"],
            json!({})
        );
        assert_eq!(
            fields["f:spec"]["f:strategy"]["f:rollingUpdate"],
            json!({"f:maxSurge": {}, "f:maxUnavailable": {}})
        );
    }

    #[test]
    fn a_no_op_apply_keeps_the_entry_time_and_subresources_name_entries() {
        with_schema(DEPLOYMENT, &["spec"], |schema| {
            let config = deployment_config(json!({}));
            let mut config = config;
            config["status"] = json!({"replicas": 1});
            let object = stored(
                apply(
                    None, &config, "ctrl", "apps/v1", "status", false, T1, schema,
                )
                .unwrap(),
            );
            let entry = &object["metadata"]["managedFields"][0];
            assert_eq!(entry["subresource"], "status");
            assert_eq!(entry["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));
            let again = apply(
                Some(&object),
                &config,
                "ctrl",
                "apps/v1",
                "status",
                false,
                T2,
                schema,
            )
            .unwrap();
            assert_eq!(again["metadata"]["managedFields"][0]["time"], T1);
            // The same manager on the main resource is a different entry.
            let mut other = config.clone();
            other["status"]["replicas"] = json!(2);
            let error = apply(
                Some(&object),
                &other,
                "ctrl",
                "apps/v1",
                "",
                false,
                T2,
                with_reset(schema),
            )
            .unwrap_err();
            assert_eq!(
                error.message(),
                r#"Apply failed with 1 conflict: conflict with "ctrl" with subresource "status": .status.replicas"#
            );
        });
    }

    /// The schema with no reset fields.
    fn with_reset(schema: Schema<'_>) -> Schema<'_> {
        schema.reset_fields(&[])
    }

    #[test]
    fn ports_default_their_protocol_key() {
        with_schema(DEPLOYMENT, &["status"], |schema| {
            let with_ports = |ports: Value| {
                deployment_config(
                    json!({"template": {"spec": {"containers": [{"name": "a", "ports": ports}]}}}),
                )
            };
            let object = stored(
                apply(
                    None,
                    &with_ports(json!([{"containerPort": 80}])),
                    "m1",
                    "apps/v1",
                    "",
                    false,
                    T1,
                    schema,
                )
                .unwrap(),
            );
            let object = apply(
                Some(&object),
                &with_ports(json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}])),
                "m1",
                "apps/v1",
                "",
                false,
                T2,
                schema,
            )
            .unwrap();
            assert_eq!(
                object["spec"]["template"]["spec"]["containers"][0]["ports"],
                json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}])
            );
        });
    }
}
