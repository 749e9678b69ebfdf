//! kube's NodeRestriction admission: what the Node authorizer lets a kubelet
//! write, narrowed to its own node. It may create and update only its own
//! Node (without setting its taints, a config source, or labels outside the
//! kubelet's own), create only mirror pods bound to itself and owned by its
//! Node (referencing no service account, secret, config map, claim or
//! trust bundle), delete and update the status of only pods bound to
//! itself, write only its own Lease in `kube-node-lease` and its own
//! CSINode, and update only the status of claims. Evictions and token
//! requests, which are not stored, ask [`eviction_refusal`],
//! [`token_pod`] and [`token_refusal`].

use std::collections::BTreeSet;
use std::sync::Arc;

use apimachinery::error::{Error, Reason, Result};
use apimachinery::group_version::GroupResource;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation, cached, forbidden};
use generic_server::filters::node::graph::{Kind, PodEdges};
use generic_server::filters::node::{NODE_LEASE_NAMESPACE, node_identity};
use generic_server::request::UserInfo;
use generic_server::storage::cacher::{Cacher, ResourceCache};
use serde_json::Value;

use crate::resources::fields::{is_set, items, text};

/// The annotation marking a mirror pod.
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The label namespace only administrators may set on nodes.
const NODE_RESTRICTION_LABELS: &str = "node-restriction.kubernetes.io";
/// The `kubernetes.io` labels a kubelet may set on its Node (kube's `kubeletLabels`).
const KUBELET_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];
/// The label namespaces a kubelet may use freely (kube's `kubeletLabelNamespaces`).
const KUBELET_LABEL_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

/// kube's NodeRestriction admission plugin, reading Nodes from the watch cache.
pub struct NodeRestriction {
    cacher: Arc<Cacher>,
    nodes: Arc<ResourceCache>,
}

impl NodeRestriction {
    /// Reads Nodes (for a mirror pod's owner's uid) from the server's cache.
    pub async fn new(cacher: Arc<Cacher>, etcd_root: &str) -> Result<Self> {
        let nodes = super::watch(&cacher, etcd_root, "", "nodes").await?;
        Ok(NodeRestriction { cacher, nodes })
    }

    /// A mirror pod bound to the node, owned by its Node (by uid), using nothing else.
    async fn pod_create(&self, attrs: &Attributes<'_>, node: &str, pod: &Value) -> Result<()> {
        if let Err(why) = mirror_pod_owner(node, pod) {
            return Err(forbidden(attrs, &why));
        }
        let Some(found) = cached(&self.cacher, &self.nodes, node).await? else {
            return Err(Error::NotFound {
                resource: GroupResource::new("", "nodes"),
                name: node.to_string(),
            });
        };
        let (expected, found) = (text(pod, "/metadata/ownerReferences/0/uid"), found.value());
        let uid = text(&found, "/metadata/uid");
        if expected != uid {
            return Err(forbidden(
                attrs,
                &format!("node {node} UID mismatch: expected {expected} got {uid}"),
            ));
        }
        mirror_pod_references(node, pod).map_err(|why| forbidden(attrs, &why))
    }

    /// The checks for a write by the kubelet of `node` (`new`: the object written, if any).
    async fn check(&self, attrs: &Attributes<'_>, node: &str, new: Option<&Value>) -> Result<()> {
        let resource = &attrs.resource;
        let checked = match (resource.group.as_str(), resource.plural.as_str()) {
            ("", "pods") => match (attrs.operation, attrs.subresource, new) {
                (Operation::Create, "", Some(pod)) => {
                    return self.pod_create(attrs, node, pod).await;
                }
                (Operation::Delete, "", _) => {
                    match text(attrs.old.unwrap_or(&Value::Null), "/spec/nodeName") == node {
                        true => Ok(()),
                        false => Err(format!(
                            "node {node:?} can only delete pods with spec.nodeName set to itself"
                        )),
                    }
                }
                (_, _, pod) => pod_write(attrs, node, pod.unwrap_or(&Value::Null)),
            },
            ("", "nodes") => node_write(attrs, node, new),
            ("", "persistentvolumeclaims") => claim_write(attrs, node, new),
            ("coordination.k8s.io", "leases") if attrs.namespace != NODE_LEASE_NAMESPACE => Err(
                format!("can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"),
            ),
            ("coordination.k8s.io", "leases") => named_after_node(attrs, node, new, "node lease"),
            ("storage.k8s.io", "csinodes") => named_after_node(attrs, node, new, "CSINode"),
            _ => Ok(()),
        };
        checked.map_err(|why| forbidden(attrs, &why))
    }
}

/// A node's pod must be a mirror pod bound to it with one controller owner
/// reference, to its Node.
fn mirror_pod_owner(node: &str, pod: &Value) -> std::result::Result<(), String> {
    let mirror = pod
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION));
    if !mirror {
        return Err(format!(
            "pod does not have {MIRROR_POD_ANNOTATION:?} annotation, node {node:?} can only create mirror pods"
        ));
    }
    if text(pod, "/spec/nodeName") != node {
        return Err(format!(
            "node {node:?} can only create pods with spec.nodeName set to itself"
        ));
    }
    let owner = match items(pod, "/metadata/ownerReferences") {
        [owner] => owner,
        [] => {
            return Err(format!(
                "node {node:?} can only create pods with an owner reference set to itself"
            ));
        }
        _ => {
            return Err(format!(
                "node {node:?} can only create pods with a single owner reference set to itself"
            ));
        }
    };
    if text(owner, "/apiVersion") != "v1"
        || text(owner, "/kind") != "Node"
        || text(owner, "/name") != node
    {
        return Err(format!(
            "node {node:?} can only create pods with an owner reference set to itself"
        ));
    }
    if owner["controller"] != Value::Bool(true) {
        return Err(format!(
            "node {node:?} can only create pods with a controller owner reference set to itself"
        ));
    }
    if owner["blockOwnerDeletion"] == Value::Bool(true) {
        return Err(format!(
            "node {node:?} must not set blockOwnerDeletion on an owner reference"
        ));
    }
    Ok(())
}

/// A node's mirror pod may reference no service account, secret, config
/// map, cluster trust bundle or claim.
fn mirror_pod_references(node: &str, pod: &Value) -> std::result::Result<(), String> {
    let references = PodEdges::of(pod).references;
    let references_a = |kind: Kind| references.iter().any(|r| r.kind == kind);
    let volumes = items(pod, "/spec/volumes");
    let what = if !text(pod, "/spec/serviceAccountName").is_empty() {
        "a service account"
    } else if references_a(Kind::Secret) {
        "secrets"
    } else if references_a(Kind::ConfigMap) {
        "configmaps"
    } else if volumes.iter().any(|v| {
        items(v, "/projected/sources")
            .iter()
            .any(|s| is_set(s, "/clusterTrustBundle"))
    }) {
        "clustertrustbundles"
    } else if volumes.iter().any(|v| is_set(v, "/persistentVolumeClaim")) {
        "persistentvolumeclaims"
    } else {
        return Ok(());
    };
    Err(format!(
        "node {node:?} can not create pods that reference {what}"
    ))
}

/// Pods: the status of its own pods updated (mirror pods are created, and
/// pods deleted, in [`NodeRestriction::check`]).
fn pod_write(attrs: &Attributes<'_>, node: &str, pod: &Value) -> std::result::Result<(), String> {
    match (attrs.subresource, attrs.operation) {
        ("status", Operation::Update) => {
            let old = attrs.old.unwrap_or(&Value::Null);
            if text(old, "/spec/nodeName") != node {
                return Err(format!(
                    "node {node:?} can only update pod status for pods with spec.nodeName set to itself"
                ));
            }
            let labels = |p: &Value| {
                p.pointer("/metadata/labels")
                    .cloned()
                    .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
            };
            if labels(old) != labels(pod) {
                return Err(format!(
                    "node {node:?} cannot update labels through pod status"
                ));
            }
            Ok(())
        }
        ("status", operation) => Err(format!("unexpected operation {:?}", operation.as_str())),
        ("", operation) => Err(format!(
            "unexpected operation {:?}, node {node:?} can only create and delete mirror pods",
            operation.as_str()
        )),
        (other, _) => Err(format!(
            "unexpected pod subresource {other:?}, only 'status' and 'eviction' are allowed"
        )),
    }
}

/// The label keys whose values differ between `a` and `b`.
fn modified_labels(a: &Value, b: &Value) -> BTreeSet<String> {
    let map = |v: &Value| {
        v.pointer("/metadata/labels")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let (a, b) = (map(a), map(b));
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(*v))
        .chain(b.iter().filter(|(k, v)| a.get(*k) != Some(*v)))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The prefix of a label key (`example.com` of `example.com/x`), if any.
fn label_namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or_default()
}

/// Whether `namespace` is `domain` or a subdomain of it.
fn in_domain(namespace: &str, domain: &str) -> bool {
    namespace == domain || namespace.ends_with(&format!(".{domain}"))
}

/// The modified labels a kubelet may not set (kube's `getForbiddenLabels`):
/// the node-restriction ones, and kubernetes.io or k8s.io ones other than the kubelet's.
fn forbidden_labels(modified: BTreeSet<String>) -> Vec<String> {
    modified
        .into_iter()
        .filter(|label| {
            let namespace = label_namespace(label);
            let kubelets = KUBELET_LABELS.contains(&label.as_str())
                || KUBELET_LABEL_NAMESPACES
                    .iter()
                    .any(|allowed| in_domain(namespace, allowed));
            let kubernetes =
                in_domain(namespace, "kubernetes.io") || in_domain(namespace, "k8s.io");
            in_domain(namespace, NODE_RESTRICTION_LABELS) || (kubernetes && !kubelets)
        })
        .collect()
}

/// Its own Node: created without a config source or forbidden labels;
/// updated without changing its taints, config source or forbidden labels.
fn node_write(
    attrs: &Attributes<'_>,
    node: &str,
    new: Option<&Value>,
) -> std::result::Result<(), String> {
    if attrs.name != node {
        return Err(format!(
            "node {node:?} is not allowed to modify node {:?}",
            attrs.name
        ));
    }
    let Some(new) = new else { return Ok(()) };
    let old = attrs.old.unwrap_or(&Value::Null);
    match attrs.operation {
        Operation::Create if is_set(new, "/spec/configSource") => Err(format!(
            "node {node:?} is not allowed to create pods with a non-nil configSource"
        )),
        Operation::Create => match forbidden_labels(modified_labels(new, &Value::Null)) {
            refused if refused.is_empty() => Ok(()),
            refused => Err(format!(
                "node {node:?} is not allowed to set the following labels: {}",
                refused.join(", ")
            )),
        },
        Operation::Update
            if is_set(new, "/spec/configSource")
                && new.pointer("/spec/configSource") != old.pointer("/spec/configSource") =>
        {
            Err(format!(
                "node {node:?} is not allowed to update configSource to a new non-nil configSource"
            ))
        }
        // Missing, null or empty taints are all the same to kube.
        Operation::Update if items(new, "/spec/taints") != items(old, "/spec/taints") => {
            Err(format!("node {node:?} is not allowed to modify taints"))
        }
        Operation::Update => match forbidden_labels(modified_labels(new, old)) {
            refused if refused.is_empty() => Ok(()),
            refused => Err(format!(
                "is not allowed to modify labels: {}",
                refused.join(", ")
            )),
        },
        Operation::Delete => Ok(()),
    }
}

/// Only the status of a claim, and in it only its capacity, conditions and
/// allocated resources.
fn claim_write(
    attrs: &Attributes<'_>,
    node: &str,
    new: Option<&Value>,
) -> std::result::Result<(), String> {
    if attrs.subresource != "status" {
        return Err("may only update PVC status".into());
    }
    if attrs.operation != Operation::Update {
        return Err(format!(
            "unexpected operation {:?}",
            attrs.operation.as_str()
        ));
    }
    let comparable = |claim: &Value| {
        let mut claim = claim.clone();
        if let Some(meta) = claim.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
        if let Some(status) = claim.get_mut("status").and_then(Value::as_object_mut) {
            for field in [
                "capacity",
                "conditions",
                "allocatedResourceStatuses",
                "allocatedResources",
            ] {
                status.remove(field);
            }
        }
        claim
    };
    if comparable(attrs.old.unwrap_or(&Value::Null)) != comparable(new.unwrap_or(&Value::Null)) {
        return Err(format!(
            "node {node:?} is not allowed to update fields other than status.capacity and status.conditions"
        ));
    }
    Ok(())
}

/// Its own Lease (in `kube-node-lease`) or CSINode: named after the node.
fn named_after_node(
    attrs: &Attributes<'_>,
    node: &str,
    new: Option<&Value>,
    what: &str,
) -> std::result::Result<(), String> {
    let name = match (attrs.operation, new) {
        (Operation::Create, Some(new)) => text(new, "/metadata/name"),
        _ => attrs.name,
    };
    if name != node {
        return Err(format!(
            "can only access {what} with the same name as the requesting node"
        ));
    }
    Ok(())
}

/// The node a write is by, `None` when no node wrote it; a node's user
/// without a node name is refused (the why).
fn writing_node<'a>(attrs: &'a Attributes<'_>) -> std::result::Result<Option<&'a str>, String> {
    match node_identity(attrs.user) {
        None => Ok(None),
        Some("") => Err(format!(
            "could not determine node from user {:?}",
            attrs.user.name
        )),
        Some(node) => Ok(Some(node)),
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for NodeRestriction {
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<()> {
        match writing_node(attrs).map_err(|why| forbidden(attrs, &why))? {
            Some(node) => self.check(attrs, node, Some(obj)).await,
            None => Ok(()),
        }
    }

    /// Deletes are not admitted (mutated), only validated: checked here.
    async fn validate(&self, attrs: &Attributes<'_>, _obj: Option<&Value>) -> Result<()> {
        if attrs.operation != Operation::Delete {
            return Ok(());
        }
        match writing_node(attrs).map_err(|why| forbidden(attrs, &why))? {
            Some(node) => self.check(attrs, node, None).await,
            None => Ok(()),
        }
    }
}

/// kube's refusal (`<plural> "<name>" is forbidden: <why>`) of a write to a
/// core resource that is not stored (an eviction, a token request).
pub fn refused(plural: &str, name: &str, why: String) -> Error {
    Error::Refused {
        resource: GroupResource::new("", plural),
        name: name.into(),
        reason: Reason::Forbidden,
        why,
        causes: Vec::new(),
    }
}

/// Why a kubelet may not evict `pod`: it is not bound to its node.
pub fn eviction_refusal(user: &UserInfo, pod: &Value) -> Option<String> {
    let node = node_identity(user)?;
    (text(pod, "/spec/nodeName") != node)
        .then(|| format!("node {node} can only evict pods with spec.nodeName set to itself"))
}

/// The pod a kubelet's TokenRequest is bound to: it must name one, with
/// its uid (kube's NodeRestriction on `serviceaccounts/token`). `Ok(None)`
/// when no node asks; the why when it is refused.
pub fn token_pod<'a>(
    user: &UserInfo,
    request: &'a Value,
) -> std::result::Result<Option<&'a str>, String> {
    let Some(node) = node_identity(user) else {
        return Ok(None);
    };
    if node.is_empty() {
        return Err(format!(
            "could not determine node from user {:?}",
            user.name
        ));
    }
    let reference = &request["spec"]["boundObjectRef"];
    let name = text(reference, "/name");
    if text(reference, "/apiVersion") != "v1"
        || text(reference, "/kind") != "Pod"
        || name.is_empty()
    {
        return Err("node requested token not bound to a pod".into());
    }
    if text(reference, "/uid").is_empty() {
        return Err("node requested token with a pod binding without a uid".into());
    }
    Ok(Some(name))
}

/// Why a kubelet's token may not be bound to `pod` (as it is on record):
/// another uid, or a pod scheduled on another node.
pub fn token_refusal(user: &UserInfo, request: &Value, pod: &Value) -> Option<String> {
    let node = node_identity(user)?;
    let wanted = text(request, "/spec/boundObjectRef/uid");
    if wanted != text(pod, "/metadata/uid") {
        return Some(format!(
            "the UID in the bound object reference ({wanted}) does not match the UID in record. The object might have been deleted and then recreated"
        ));
    }
    (text(pod, "/spec/nodeName") != node)
        .then(|| "node requested token bound to a pod scheduled on a different node".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use generic_server::resource::Resource;
    use generic_server::storage::Storage;
    use generic_server::storage::memory::MemoryStorage;
    use serde_json::json;

    struct Plain;
    impl generic_server::strategy::Strategy for Plain {}

    fn kubelet(node: &str) -> UserInfo {
        UserInfo {
            name: format!("system:node:{node}"),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
            ..Default::default()
        }
    }

    fn attrs<'a>(
        resource: &'a Resource,
        user: &'a UserInfo,
        operation: Operation,
        subresource: &'a str,
        namespace: &'a str,
        name: &'a str,
        old: Option<&'a Value>,
    ) -> Attributes<'a> {
        Attributes {
            operation,
            resource,
            subresource,
            namespace,
            name,
            old,
            user,
            dry_run: false,
            equivalents: None,
            warnings: Default::default(),
        }
    }

    async fn plugin() -> NodeRestriction {
        let storage = Arc::new(MemoryStorage::default());
        storage
            .create(
                "/registry/nodes/n1",
                serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "node-uid"}}))
                    .unwrap()
                    .into(),
            )
            .await
            .unwrap();
        let cacher = Cacher::start(storage).await.unwrap();
        NodeRestriction::new(cacher, "/registry").await.unwrap()
    }

    fn mirror(extra: Value) -> Value {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "static-web-n1", "namespace": "ns",
                "annotations": {"kubernetes.io/config.mirror": "hash"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "node-uid", "controller": true}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}});
        if let (Some(spec), Some(extra)) = (pod["spec"].as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        pod
    }

    #[tokio::test]
    async fn a_node_creates_only_its_own_mirror_pods_referencing_nothing() {
        let plugin = plugin().await;
        let pods = Resource::builtin::<k8s_openapi::api::core::v1::Pod>(Plain);
        let n1 = kubelet("n1");
        let create = attrs(
            &pods,
            &n1,
            Operation::Create,
            "",
            "ns",
            "static-web-n1",
            None,
        );
        let mut pod = mirror(json!({}));
        assert!(plugin.admit(&create, &mut pod).await.is_ok());
        let cases = [
            (
                json!({"volumes": [{"name": "s", "secret": {"secretName": "db"}}]}),
                "pods \"static-web-n1\" is forbidden: node \"n1\" can not create pods that reference secrets",
            ),
            (
                json!({"serviceAccountName": "default"}),
                "pods \"static-web-n1\" is forbidden: node \"n1\" can not create pods that reference a service account",
            ),
            (
                json!({"volumes": [{"name": "c", "configMap": {"name": "cfg"}}]}),
                "pods \"static-web-n1\" is forbidden: node \"n1\" can not create pods that reference configmaps",
            ),
            (
                json!({"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}),
                "pods \"static-web-n1\" is forbidden: node \"n1\" can not create pods that reference persistentvolumeclaims",
            ),
            (
                json!({"nodeName": "n2"}),
                "pods \"static-web-n1\" is forbidden: node \"n1\" can only create pods with spec.nodeName set to itself",
            ),
        ];
        for (extra, message) in cases {
            let mut pod = mirror(extra);
            let err = plugin.admit(&create, &mut pod).await.unwrap_err();
            assert_eq!(err.to_string(), message);
        }
        let mut plain = mirror(json!({}));
        plain["metadata"]["annotations"] = json!({});
        assert_eq!(
            plugin
                .admit(&create, &mut plain)
                .await
                .unwrap_err()
                .to_string(),
            "pods \"static-web-n1\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"n1\" can only create mirror pods"
        );
        let mut stranger = mirror(json!({}));
        stranger["metadata"]["ownerReferences"][0]["uid"] = json!("other");
        assert_eq!(
            plugin
                .admit(&create, &mut stranger)
                .await
                .unwrap_err()
                .to_string(),
            "pods \"static-web-n1\" is forbidden: node n1 UID mismatch: expected other got node-uid"
        );
        // Someone else's pod: not deleted; its own: deleted; others' writes untouched.
        let elsewhere = json!({"spec": {"nodeName": "n2"}});
        let delete = attrs(
            &pods,
            &n1,
            Operation::Delete,
            "",
            "ns",
            "web",
            Some(&elsewhere),
        );
        assert_eq!(
            plugin
                .validate(&delete, None)
                .await
                .unwrap_err()
                .to_string(),
            "pods \"web\" is forbidden: node \"n1\" can only delete pods with spec.nodeName set to itself"
        );
        let here = json!({"spec": {"nodeName": "n1"}});
        let delete = attrs(&pods, &n1, Operation::Delete, "", "ns", "web", Some(&here));
        assert!(plugin.validate(&delete, None).await.is_ok());
        let admin = UserInfo {
            name: "admin".into(),
            ..Default::default()
        };
        let delete = attrs(
            &pods,
            &admin,
            Operation::Delete,
            "",
            "ns",
            "web",
            Some(&elsewhere),
        );
        assert!(plugin.validate(&delete, None).await.is_ok());
        // Status: only of its own pods, labels untouched.
        let status = attrs(
            &pods,
            &n1,
            Operation::Update,
            "status",
            "ns",
            "web",
            Some(&elsewhere),
        );
        assert_eq!(
            plugin
                .admit(&status, &mut json!({"spec": {"nodeName": "n2"}}))
                .await
                .unwrap_err()
                .to_string(),
            "pods \"web\" is forbidden: node \"n1\" can only update pod status for pods with spec.nodeName set to itself"
        );
        let status = attrs(
            &pods,
            &n1,
            Operation::Update,
            "status",
            "ns",
            "web",
            Some(&here),
        );
        assert!(plugin.admit(&status, &mut here.clone()).await.is_ok());
    }

    #[tokio::test]
    async fn a_node_writes_only_its_own_node_lease_and_csinode() {
        let plugin = plugin().await;
        let nodes = Resource::builtin::<k8s_openapi::api::core::v1::Node>(Plain);
        let n1 = kubelet("n1");
        let node =
            |labels: Value| json!({"metadata": {"name": "n1", "labels": labels}, "spec": {}});
        let create = attrs(&nodes, &n1, Operation::Create, "", "", "n1", None);
        let mut allowed = node(
            json!({"kubernetes.io/hostname": "n1", "node.kubernetes.io/exclude-from-external-load-balancers": "", "example.com/rack": "r1"}),
        );
        assert!(plugin.admit(&create, &mut allowed).await.is_ok());
        let mut refused = node(
            json!({"node-restriction.kubernetes.io/pool": "gpu", "node-role.kubernetes.io/control-plane": ""}),
        );
        assert_eq!(
            plugin
                .admit(&create, &mut refused)
                .await
                .unwrap_err()
                .to_string(),
            "nodes \"n1\" is forbidden: node \"n1\" is not allowed to set the following labels: node-restriction.kubernetes.io/pool, node-role.kubernetes.io/control-plane"
        );
        let other = attrs(&nodes, &n1, Operation::Create, "", "", "n2", None);
        assert_eq!(
            plugin
                .admit(&other, &mut node(json!({})))
                .await
                .unwrap_err()
                .to_string(),
            "nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\""
        );
        let old = json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
        let update = attrs(&nodes, &n1, Operation::Update, "", "", "n1", Some(&old));
        assert_eq!(
            plugin
                .admit(
                    &update,
                    &mut json!({"metadata": {"name": "n1"}, "spec": {}})
                )
                .await
                .unwrap_err()
                .to_string(),
            "nodes \"n1\" is forbidden: node \"n1\" is not allowed to modify taints"
        );
        assert_eq!(
            plugin.admit(&update, &mut json!({"metadata": {"name": "n1", "labels": {"kubernetes.io/role": "x"}}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}})).await.unwrap_err().to_string(),
            "nodes \"n1\" is forbidden: is not allowed to modify labels: kubernetes.io/role"
        );
        let leases = Resource::builtin::<k8s_openapi::api::coordination::v1::Lease>(Plain);
        let create = attrs(
            &leases,
            &n1,
            Operation::Create,
            "",
            "kube-node-lease",
            "n2",
            None,
        );
        assert_eq!(
            plugin
                .admit(&create, &mut json!({"metadata": {"name": "n2"}}))
                .await
                .unwrap_err()
                .to_string(),
            "leases.coordination.k8s.io \"n2\" is forbidden: can only access node lease with the same name as the requesting node"
        );
        assert!(
            plugin
                .admit(&create, &mut json!({"metadata": {"name": "n1"}}))
                .await
                .is_ok()
        );
        let csinodes = Resource::builtin::<k8s_openapi::api::storage::v1::CSINode>(Plain);
        let create = attrs(&csinodes, &n1, Operation::Create, "", "", "n1", None);
        assert!(
            plugin
                .admit(&create, &mut json!({"metadata": {"name": "n1"}}))
                .await
                .is_ok()
        );
        let delete = attrs(&csinodes, &n1, Operation::Delete, "", "", "n2", None);
        assert_eq!(
            plugin
                .validate(&delete, None)
                .await
                .unwrap_err()
                .to_string(),
            "csinodes.storage.k8s.io \"n2\" is forbidden: can only access CSINode with the same name as the requesting node"
        );
    }

    #[test]
    fn tokens_and_evictions_are_for_its_own_pods() {
        let n1 = kubelet("n1");
        let pod = json!({"metadata": {"name": "web", "uid": "u1"}, "spec": {"nodeName": "n2"}});
        let why = eviction_refusal(&n1, &pod).unwrap_or_default();
        assert_eq!(
            refused("pods", "web", why).to_string(),
            "pods \"web\" is forbidden: node n1 can only evict pods with spec.nodeName set to itself"
        );
        let unbound = json!({"spec": {}});
        assert_eq!(
            token_pod(&n1, &unbound),
            Err("node requested token not bound to a pod".to_string())
        );
        let request = json!({"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u1"}}});
        assert_eq!(token_pod(&n1, &request), Ok(Some("web")));
        assert_eq!(
            token_refusal(&n1, &request, &pod).as_deref(),
            Some("node requested token bound to a pod scheduled on a different node")
        );
        let recreated = json!({"metadata": {"uid": "u2"}, "spec": {"nodeName": "n1"}});
        assert_eq!(
            token_refusal(&n1, &request, &recreated).as_deref(),
            Some(
                "the UID in the bound object reference (u1) does not match the UID in record. The object might have been deleted and then recreated"
            )
        );
        let here = json!({"metadata": {"uid": "u1"}, "spec": {"nodeName": "n1"}});
        assert_eq!(token_refusal(&n1, &request, &here), None);
        let admin = UserInfo::default();
        assert_eq!(token_pod(&admin, &unbound), Ok(None));
        assert_eq!(eviction_refusal(&admin, &pod), None);
    }
}
