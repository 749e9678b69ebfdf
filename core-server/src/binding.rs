//! Binding a pod to a node, what a scheduler does: core v1 `bindings`
//! (the pod named by the Binding) and `pods/binding` (the pod named by the
//! path). The pod's `spec.nodeName` is set once and for all, its
//! `PodScheduled` condition turns True and the Binding's annotations are
//! copied onto it; a pod already bound, or being deleted, answers 409 as
//! in kube (`BindingREST`), and the answer is a Success Status.

use std::sync::Arc;

use apimachinery::error::{Error, FieldError, Result};
use apimachinery::group_version::{GroupResource, GroupVersionKind};
use generic_server::registry::{Store, WriteOptions, now_rfc3339};
use generic_server::request::ApiRequest;
use generic_server::resource::Resource;
use generic_server::rest::{CreateOnly, Unstored};
use generic_server::server::ApiServer;
use k8s_openapi::api::core::v1::Binding;
use serde_json::{Value, json};

use crate::resources::fields::{is_set, text};

/// The kind both endpoints take.
fn binding_kind() -> GroupVersionKind {
    GroupVersionKind::new("", "v1", "Binding")
}

/// The top-level `bindings` resource, for discovery (create only).
pub fn resource() -> Resource {
    Resource::builtin::<Binding>(Unstored).verbs(&["create"])
}

/// Serves `bindings` and `pods/binding` on `server`, binding the pods of
/// its pod store (if it has one).
pub fn install(server: &ApiServer) {
    let Some(pods) = server.store("", "v1", "pods") else {
        return;
    };
    let bind = Arc::new(Bind { pods: pods.clone() });
    server.add_create_only(&resource(), "", binding_kind(), bind.clone());
    server.add_create_only(&pods.resource, "binding", binding_kind(), bind);
}

/// The Success Status kube answers a binding with.
pub(crate) fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

/// kube's checks of a Binding (`ValidatePodBinding`).
fn validate(binding: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let kind = text(binding, "/target/kind");
    if !kind.is_empty() && kind != "Node" {
        errs.push(FieldError::not_supported(
            "target.kind",
            kind,
            &["Node", "<empty>"],
        ));
    }
    if text(binding, "/target/name").is_empty() {
        errs.push(FieldError::required("target.name", ""));
    }
    errs
}

/// Why `pod` cannot be bound, if it cannot: kube's conflicts.
fn refusal(pod: &Value, binding: &Value) -> Option<String> {
    let name = text(pod, "/metadata/name");
    let uid = text(binding, "/metadata/uid");
    if !uid.is_empty() && uid != text(pod, "/metadata/uid") {
        return Some(format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            text(pod, "/metadata/uid")
        ));
    }
    if is_set(pod, "/metadata/deletionTimestamp") {
        return Some(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    let node = text(pod, "/spec/nodeName");
    if !node.is_empty() {
        return Some(format!("pod {name} is already assigned to node {node:?}"));
    }
    None
}

/// `pod` bound as `binding` says: its node, its annotations, scheduled.
fn bound(mut pod: Value, binding: &Value) -> Value {
    pod["spec"]["nodeName"] = json!(text(binding, "/target/name"));
    if let Some(annotations) = binding
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        let into = pod["metadata"]
            .as_object_mut()
            .map(|m| m.entry("annotations").or_insert_with(|| json!({})));
        if let Some(Value::Object(into)) = into {
            for (k, v) in annotations {
                into.insert(k.clone(), v.clone());
            }
        }
    }
    let scheduled = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                           "lastTransitionTime": now_rfc3339()});
    let conditions = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut conditions: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c["type"] != "PodScheduled")
        .collect();
    conditions.push(scheduled);
    pod["status"]["conditions"] = json!(conditions);
    pod
}

/// Binds pods of one store.
struct Bind {
    pods: Arc<Store>,
}

#[async_trait::async_trait]
impl CreateOnly for Bind {
    async fn create(&self, req: &ApiRequest, binding: Value) -> Result<Value> {
        let name = text(&binding, "/metadata/name").to_string();
        if req.info.subresource == "binding" && name != req.info.name {
            return Err(Error::bad_request(
                "name in URL does not match name in Binding object",
            ));
        }
        let errs = validate(&binding);
        if !errs.is_empty() {
            return Err(Error::invalid("", "Binding", &name, errs));
        }
        let namespace = &req.info.namespace;
        let pod = self.pods.get(namespace, &name, None).await?.value();
        if let Some(detail) = refusal(&pod, &binding) {
            return Err(Error::Conflict {
                resource: GroupResource::new("", "pods/binding"),
                name,
                detail,
            });
        }
        // The version read: a pod changed meanwhile is a conflict.
        let opts = WriteOptions {
            dry_run: req.param("dryRun").is_some_and(|d| d == "All"),
            user: req.user.clone(),
            ..WriteOptions::default()
        };
        self.pods
            .update(namespace, &name, "binding", bound(pod, &binding), &opts)
            .await?;
        Ok(success())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_names_a_node() {
        let good = json!({"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}});
        assert!(validate(&good).is_empty());
        let bad = json!({"metadata": {"name": "p"}, "target": {"kind": "Pod"}});
        let errs = validate(&bad);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(
            errs[0].to_string(),
            "target.kind: Unsupported value: \"Pod\": supported values: \"Node\", \"<empty>\""
        );
        assert_eq!(errs[1].to_string(), "target.name: Required value");
    }

    #[test]
    fn a_pod_is_bound_once() {
        let pod = json!({"metadata": {"name": "p", "uid": "u1", "resourceVersion": "7"},
                         "spec": {"containers": []},
                         "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}});
        let binding =
            json!({"metadata": {"name": "p", "annotations": {"a": "b"}}, "target": {"name": "n1"}});
        assert_eq!(refusal(&pod, &binding), None);
        let done = bound(pod.clone(), &binding);
        assert_eq!(done["spec"]["nodeName"], "n1");
        assert_eq!(done["metadata"]["annotations"]["a"], "b");
        assert_eq!(done["metadata"]["resourceVersion"], "7");
        let conditions = done["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0]["status"], "True");
        assert_eq!(
            refusal(&done, &binding).as_deref(),
            Some("pod p is already assigned to node \"n1\"")
        );
        let other = json!({"metadata": {"name": "p", "uid": "u2"}, "target": {"name": "n1"}});
        assert!(
            refusal(&pod, &other)
                .unwrap()
                .contains("UID in precondition: u2")
        );
    }
}
