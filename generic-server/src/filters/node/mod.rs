//! kube's Node authorizer (`--authorization-mode=Node`, before RBAC): a
//! kubelet (user `system:node:<name>` in group `system:nodes`) may read the
//! secrets, config maps, claims and volumes of the pods bound to its node,
//! ask tokens for their service accounts, and reach its own Node, Lease,
//! CSINode and volume attachments; for the rest of what kubelets need it
//! holds the bootstrap `system:node` rules. Everything else gets no opinion
//! (with kube's reason), so RBAC decides. The relationships come from the
//! watch cache: pods, persistent volumes and volume attachments feed a
//! [`graph::Graph`] event by event; a request costs a few lookups.

pub mod graph;

use std::sync::{Arc, OnceLock, RwLock};

use apimachinery::error::Result;
use apimachinery::rbac::rule_allows;
use bytes::Bytes;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use self::graph::{Graph, PodEdges, PvEdges, Vertex};
use super::authorization::{Authorizer, Opinion, attributes};
use crate::request::UserInfo;
use crate::request_info::RequestInfo;
use crate::storage::cacher::{
    CachedObject, Cacher, Ingest, ResourceCache, UID_FIELD, WatchEventType,
};
use apimachinery::label_selector::Labels;

/// The group every kubelet's identity is in.
pub const NODES_GROUP: &str = "system:nodes";
/// The prefix of a kubelet's user name, before its node's name.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The namespace of the nodes' heartbeat Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The node a user is the kubelet of (kube's `NodeIdentity`): `None` when
/// the user is not a node, `Some("")` for a node whose name is missing.
pub fn node_identity(user: &UserInfo) -> Option<&str> {
    let name = user.name.strip_prefix(NODE_USER_PREFIX)?;
    user.in_group(NODES_GROUP).then_some(name)
}

/// The bootstrap `system:node` ClusterRole's rules, which the Node
/// authorizer applies itself to the requests it does not subdivide (kube's
/// `bootstrappolicy.NodeRules()`; the stored role has no subjects).
pub fn node_rules() -> &'static [PolicyRule] {
    static RULES: OnceLock<Vec<PolicyRule>> = OnceLock::new();
    RULES.get_or_init(|| {
        let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| PolicyRule {
            api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
            resources: Some(resources.iter().map(|s| s.to_string()).collect()),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let read = &["get", "list", "watch"][..];
        vec![
            rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
            rule(
                &["authorization.k8s.io"],
                &["localsubjectaccessreviews", "subjectaccessreviews"],
                &["create"],
            ),
            rule(&[""], &["services"], read),
            rule(&[""], &["nodes"], &["create", "get", "list", "watch"]),
            rule(&[""], &["nodes/status"], &["patch", "update"]),
            rule(&[""], &["nodes"], &["patch", "update"]),
            rule(&[""], &["events"], &["create", "patch", "update"]),
            rule(&[""], &["pods"], read),
            rule(&[""], &["pods"], &["create", "delete"]),
            rule(&[""], &["pods/status"], &["patch", "update"]),
            rule(&[""], &["pods/eviction"], &["create"]),
            rule(&[""], &["configmaps", "secrets"], read),
            rule(
                &[""],
                &["persistentvolumeclaims", "persistentvolumes"],
                &["get"],
            ),
            rule(&[""], &["endpoints"], &["get"]),
            rule(
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
                &["create", "get", "list", "watch"],
            ),
            rule(
                &["coordination.k8s.io"],
                &["leases"],
                &["create", "delete", "get", "patch", "update"],
            ),
            rule(&["storage.k8s.io"], &["volumeattachments"], &["get"]),
            rule(&[""], &["serviceaccounts/token"], &["create"]),
            rule(
                &[""],
                &["persistentvolumeclaims/status"],
                &["get", "patch", "update"],
            ),
            rule(&["storage.k8s.io"], &["csidrivers"], read),
            rule(
                &["storage.k8s.io"],
                &["csinodes"],
                &["create", "delete", "get", "patch", "update"],
            ),
            rule(&["node.k8s.io"], &["runtimeclasses"], read),
        ]
    })
}

/// The Node authorizer.
pub struct NodeAuthorizer {
    graph: Arc<RwLock<Graph>>,
    pods: Arc<ResourceCache>,
    /// The tasks applying the caches' events to the graph.
    followers: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for NodeAuthorizer {
    fn drop(&mut self) {
        for follower in &self.followers {
            follower.abort();
        }
    }
}

impl NodeAuthorizer {
    /// Follows pods, persistent volumes and volume attachments in `cacher`
    /// (registering lean caches of them, what the graph needs and uids,
    /// unless the server serves them and so holds them whole already).
    pub async fn new(cacher: &Cacher, etcd_root: &str) -> crate::Result<NodeAuthorizer> {
        let key = |group: &str, resource: &str| {
            apimachinery::keys::key_prefix(etcd_root, group, resource)
        };
        let pods = cacher
            .register(&key("", "pods"), lean_ingest(PodEdges::of))
            .await?;
        let volumes = cacher
            .register(&key("", "persistentvolumes"), lean_ingest(PvEdges::of))
            .await?;
        let attachments = cacher
            .register(
                &key("storage.k8s.io", "volumeattachments"),
                lean_ingest(attachment_node),
            )
            .await?;
        let graph = Arc::new(RwLock::new(Graph::default()));
        let followers = vec![
            follow(
                pods.clone(),
                graph.clone(),
                Feed {
                    edges: PodEdges::of,
                    clear: Graph::clear_pods,
                    set: |g, o, edges| g.set_pod(&o.namespace, &o.name, edges),
                },
            ),
            follow(
                volumes,
                graph.clone(),
                Feed {
                    edges: PvEdges::of,
                    clear: Graph::clear_volumes,
                    set: |g, o, edges| g.set_volume(&o.name, edges),
                },
            ),
            follow(
                attachments,
                graph.clone(),
                Feed {
                    edges: attachment_node,
                    clear: Graph::clear_attachments,
                    set: |g, o, node| g.set_attachment(&o.name, node),
                },
            ),
        ];
        Ok(NodeAuthorizer {
            graph,
            pods,
            followers,
        })
    }

    /// The pods cache the authorizer follows: where it registered it (a
    /// server that does not serve pods), each pod's name, namespace and
    /// uid (in the field [`UID_FIELD`]), for whoever else needs to know
    /// which pods exist (the front door's bound tokens).
    pub fn pods(&self) -> Arc<ResourceCache> {
        self.pods.clone()
    }

    fn related(&self, node: &str, vertex: Vertex, info: &RequestInfo) -> Opinion {
        if info.name.is_empty() {
            return no_opinion("No Object name found");
        }
        let graph = self.graph.read().unwrap_or_else(|e| e.into_inner());
        if graph.related(node, vertex, &info.namespace, &info.name) {
            Opinion::Allow(String::new())
        } else {
            no_opinion(&format!(
                "no relationship found between node '{node}' and this object"
            ))
        }
    }

    /// kube's decision for the request, with its reason.
    pub fn decide(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Opinion {
        let Some(node) = node_identity(user) else {
            return no_opinion("");
        };
        if node.is_empty() {
            return no_opinion(&format!("unknown node for user {:?}", user.name));
        }
        if info.is_resource_request {
            let verb = info.verb.as_str();
            let sub = info.subresource.as_str();
            match (info.api_group.as_str(), info.resource.as_str()) {
                ("", "secrets") => return self.read_namespaced(node, Vertex::Secret, info),
                ("", "configmaps") => return self.read_namespaced(node, Vertex::ConfigMap, info),
                ("", "persistentvolumeclaims") if sub == "status" => {
                    return match verb {
                        "update" | "patch" => {
                            self.related(node, Vertex::PersistentVolumeClaim, info)
                        }
                        _ => no_opinion("can only get/update/patch this type"),
                    };
                }
                ("", "persistentvolumeclaims") => {
                    return self.get(node, Vertex::PersistentVolumeClaim, info);
                }
                ("", "persistentvolumes") => {
                    return self.get(node, Vertex::PersistentVolume, info);
                }
                ("storage.k8s.io", "volumeattachments") => {
                    return self.get(node, Vertex::VolumeAttachment, info);
                }
                ("", "serviceaccounts") => {
                    if verb != "create" || info.name.is_empty() {
                        return no_opinion(
                            "can only create tokens for individual service accounts",
                        );
                    }
                    if sub != "token" {
                        return no_opinion("can only create token subresource of serviceaccount");
                    }
                    return self.related(node, Vertex::ServiceAccount, info);
                }
                ("coordination.k8s.io", "leases") => return own_lease(node, info),
                ("storage.k8s.io", "csinodes") => return own_csinode(node, info),
                ("", "nodes") => return own_node(node, info),
                ("", "pods") => return self.pod(node, info),
                _ => {}
            }
        }
        let attrs = attributes(info, path);
        if node_rules().iter().any(|rule| rule_allows(rule, &attrs)) {
            Opinion::Allow(String::new())
        } else {
            no_opinion("")
        }
    }

    /// Reads (get, list or watch of one name) of objects related to the node.
    fn read_namespaced(&self, node: &str, vertex: Vertex, info: &RequestInfo) -> Opinion {
        if !matches!(info.verb.as_str(), "get" | "list" | "watch") {
            return no_opinion("can only read resources of this type");
        }
        if !info.subresource.is_empty() {
            return no_opinion("cannot read subresource");
        }
        if info.namespace.is_empty() {
            return no_opinion("can only read namespaced object of this type");
        }
        self.related(node, vertex, info)
    }

    /// A get of one object related to the node.
    fn get(&self, node: &str, vertex: Vertex, info: &RequestInfo) -> Opinion {
        if info.verb != "get" {
            return no_opinion("can only get individual resources of this type");
        }
        if !info.subresource.is_empty() {
            return no_opinion("cannot get subresource");
        }
        self.related(node, vertex, info)
    }

    /// Pods: its own, and watches of them by `spec.nodeName`; creates and
    /// deletes (of mirror pods), status updates and evictions are left to
    /// NodeRestriction admission.
    fn pod(&self, node: &str, info: &RequestInfo) -> Opinion {
        match (info.subresource.as_str(), info.verb.as_str()) {
            ("", "get") => self.get(node, Vertex::Pod, info),
            ("", "list" | "watch") => {
                if info
                    .field_selector
                    .iter()
                    .any(|(field, value)| field == "spec.nodeName" && value == node)
                {
                    return Opinion::Allow(String::new());
                }
                if !info.name.is_empty() {
                    return self.related(node, Vertex::Pod, info);
                }
                no_opinion("can only list/watch pods with spec.nodeName field selector")
            }
            ("", "create" | "delete") | ("status", "update" | "patch") | ("eviction", "create") => {
                Opinion::Allow(String::new())
            }
            _ => no_opinion(""),
        }
    }
}

/// No opinion, and why.
fn no_opinion(reason: &str) -> Opinion {
    Opinion::NoOpinion(reason.to_string())
}

/// Nodes: reads of its own; creates and updates (left to NodeRestriction admission).
fn own_node(node: &str, info: &RequestInfo) -> Opinion {
    match (info.subresource.as_str(), info.verb.as_str()) {
        ("", "create" | "update" | "patch") | ("status", "update" | "patch") => {
            Opinion::Allow(String::new())
        }
        ("", "get" | "list" | "watch") => match info.name.as_str() {
            name if name == node => Opinion::Allow(String::new()),
            "" => no_opinion(&format!(
                "node '{node}' cannot read all nodes, only its own Node object"
            )),
            other => no_opinion(&format!(
                "node '{node}' cannot read '{other}', only its own Node object"
            )),
        },
        _ => no_opinion(""),
    }
}

/// Its own Lease in `kube-node-lease` (a create's name is NodeRestriction's to check).
fn own_lease(node: &str, info: &RequestInfo) -> Opinion {
    let verb = info.verb.as_str();
    if !matches!(verb, "get" | "create" | "update" | "patch" | "delete") {
        return no_opinion("can only get, create, update, patch, or delete a node lease");
    }
    if info.namespace != NODE_LEASE_NAMESPACE {
        return no_opinion(&format!(
            "can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"
        ));
    }
    if verb != "create" && info.name != node {
        return no_opinion("can only access node lease with the same name as the requesting node");
    }
    Opinion::Allow(String::new())
}

/// Its own CSINode (a create's name is NodeRestriction's to check).
fn own_csinode(node: &str, info: &RequestInfo) -> Opinion {
    let verb = info.verb.as_str();
    if !matches!(verb, "get" | "create" | "update" | "patch" | "delete") {
        return no_opinion("can only get, create, update, patch, or delete a CSINode");
    }
    if !info.subresource.is_empty() {
        return no_opinion("cannot authorize CSINode subresources");
    }
    if verb != "create" && info.name != node {
        return no_opinion("can only access CSINode with the same name as the requesting node");
    }
    Opinion::Allow(String::new())
}

#[async_trait::async_trait]
impl Authorizer for NodeAuthorizer {
    async fn opinion(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<Opinion> {
        Ok(self.decide(user, info, path))
    }
}

/// The lean form a cache keeps of an object for the graph: who it is, and
/// its edges under `nodeGraph` (read back as they are when the cache
/// re-ingests its own copy, as it does for a delete).
#[derive(Serialize, serde::Deserialize)]
struct Lean<E> {
    metadata: LeanMeta,
    #[serde(rename = "nodeGraph")]
    node_graph: E,
}

#[derive(Serialize, serde::Deserialize, Default)]
struct LeanMeta {
    #[serde(default)]
    name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    namespace: String,
    #[serde(default)]
    uid: String,
}

/// Ingests objects as [`Lean`] ones, their edges read by `edges`.
fn lean_ingest<E: Serialize + DeserializeOwned + 'static>(
    edges: impl Fn(&Value) -> E + Send + Sync + 'static,
) -> Ingest {
    Arc::new(move |key: &str, value: &[u8], revision: i64| {
        let object: Value = serde_json::from_slice(value).ok()?;
        let metadata: LeanMeta = serde_json::from_value(object.get("metadata")?.clone()).ok()?;
        let node_graph = match object.get("nodeGraph") {
            Some(lean) => serde_json::from_value(lean.clone()).ok()?,
            None => edges(&object),
        };
        let uid = metadata.uid.clone();
        let (name, namespace) = (metadata.name.clone(), metadata.namespace.clone());
        let lean = Lean {
            metadata,
            node_graph,
        };
        Some(CachedObject {
            key: key.into(),
            revision,
            bytes: Bytes::from(serde_json::to_vec(&lean).ok()?),
            namespace,
            name,
            labels: Labels::default(),
            fields: vec![(UID_FIELD.to_string(), uid)],
        })
    })
}

/// The node a volume attachment is for.
fn attachment_node(attachment: &Value) -> String {
    attachment
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The edges of a cached object: a lean one's, or read by `edges` from a
/// whole one (a server's own cache of a resource it serves).
fn edges_of<E: DeserializeOwned>(object: &CachedObject, edges: fn(&Value) -> E) -> Option<E> {
    let value: Value = serde_json::from_slice(&object.bytes).ok()?;
    match value.get("nodeGraph") {
        Some(lean) => serde_json::from_value(lean.clone()).ok(),
        None => Some(edges(&value)),
    }
}

/// How one followed resource enters the graph.
struct Feed<E> {
    /// Reads a whole object's edges.
    edges: fn(&Value) -> E,
    /// Forgets every object of the resource.
    clear: fn(&mut Graph),
    /// Sets (or, with `None`, removes) one object.
    set: fn(&mut Graph, &CachedObject, Option<E>),
}

/// Loads what `cache` holds into the graph (after clearing the resource's
/// part of it), then applies its events as they come (loading afresh after
/// falling behind).
fn follow<E: DeserializeOwned + Send + 'static>(
    cache: Arc<ResourceCache>,
    graph: Arc<RwLock<Graph>>,
    feed: Feed<E>,
) -> tokio::task::JoinHandle<()> {
    let Feed { edges, clear, set } = feed;
    let load = move |graph: &RwLock<Graph>| {
        let (snapshot, events) = cache.snapshot_and_subscribe(cache.prefix(), 0);
        let mut graph = graph.write().unwrap_or_else(|e| e.into_inner());
        clear(&mut graph);
        for object in &snapshot.objects {
            set(&mut graph, object, edges_of(object, edges));
        }
        events
    };
    let mut events = load(&graph);
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) => {
                    let found = match event.kind {
                        WatchEventType::Deleted => None,
                        _ => edges_of(&event.object, edges),
                    };
                    let mut graph = graph.write().unwrap_or_else(|e| e.into_inner());
                    set(&mut graph, &event.object, found);
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::info!(missed, "the node authorizer's graph fell behind; reloading");
                    events = load(&graph);
                }
                // The cache ended its watches (reloaded, stale, or shaped
                // anew by the store that serves it): read it again.
                Err(RecvError::Closed) => events = load(&graph),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Storage;
    use crate::storage::memory::MemoryStorage;
    use http::Method;
    use serde_json::json;

    fn kubelet(node: &str) -> UserInfo {
        UserInfo {
            name: format!("{NODE_USER_PREFIX}{node}"),
            groups: vec![NODES_GROUP.into(), "system:authenticated".into()],
            ..Default::default()
        }
    }

    async fn put(storage: &MemoryStorage, key: &str, value: Value) {
        storage
            .create(key, serde_json::to_vec(&value).unwrap().into())
            .await
            .unwrap();
    }

    fn ask(method: Method, path: &str, query: &str) -> RequestInfo {
        RequestInfo::parse(&method, path, query)
    }

    /// The decision once the graph has caught up with the cache.
    async fn decided(node: &NodeAuthorizer, user: &UserInfo, info: &RequestInfo) -> Opinion {
        for _ in 0..100 {
            if let Opinion::Allow(r) = node.decide(user, info, "") {
                return Opinion::Allow(r);
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        node.decide(user, info, "")
    }

    #[tokio::test]
    async fn a_kubelet_reaches_what_its_pods_use_and_nothing_else() {
        let storage = Arc::new(MemoryStorage::default());
        let cacher = Cacher::start(storage.clone()).await.unwrap();
        let authorizer = NodeAuthorizer::new(&cacher, "/registry").await.unwrap();
        let n1 = kubelet("n1");
        let secret = ask(Method::GET, "/api/v1/namespaces/ns/secrets/db", "");
        let refused = "no relationship found between node 'n1' and this object";
        assert_eq!(
            authorizer.decide(&n1, &secret, ""),
            Opinion::NoOpinion(refused.into())
        );
        put(&storage, "/registry/pods/ns/web", json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {"nodeName": "n1", "serviceAccountName": "runner", "containers": [{"name": "c", "image": "i"}],
                     "volumes": [{"name": "db", "secret": {"secretName": "db"}}, {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}})).await;
        put(&storage, "/registry/persistentvolumes/pv1", json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "pv1"}, "spec": {"claimRef": {"namespace": "ns", "name": "data"},
            "csi": {"driver": "d", "volumeHandle": "h", "nodePublishSecretRef": {"name": "csi", "namespace": "storage"}}}})).await;
        cacher.wait_fresh().await.unwrap();
        assert_eq!(
            decided(&authorizer, &n1, &secret).await,
            Opinion::Allow(String::new())
        );
        let watch_one = ask(
            Method::GET,
            "/api/v1/namespaces/ns/secrets",
            "watch=true&fieldSelector=metadata.name%3Ddb",
        );
        assert_eq!(
            authorizer.decide(&n1, &watch_one, ""),
            Opinion::Allow(String::new())
        );
        let pv = ask(Method::GET, "/api/v1/persistentvolumes/pv1", "");
        assert_eq!(
            decided(&authorizer, &n1, &pv).await,
            Opinion::Allow(String::new())
        );
        let csi = ask(Method::GET, "/api/v1/namespaces/storage/secrets/csi", "");
        assert_eq!(
            authorizer.decide(&n1, &csi, ""),
            Opinion::Allow(String::new())
        );
        let token = ask(
            Method::POST,
            "/api/v1/namespaces/ns/serviceaccounts/runner/token",
            "",
        );
        assert_eq!(
            authorizer.decide(&n1, &token, ""),
            Opinion::Allow(String::new())
        );
        // Another node: no relationship; writes and lists: kube's reasons.
        let n2 = kubelet("n2");
        assert_eq!(
            authorizer.decide(&n2, &secret, ""),
            Opinion::NoOpinion("no relationship found between node 'n2' and this object".into())
        );
        let update = ask(Method::PUT, "/api/v1/namespaces/ns/secrets/db", "");
        assert_eq!(
            authorizer.decide(&n1, &update, ""),
            Opinion::NoOpinion("can only read resources of this type".into())
        );
        let list = ask(Method::GET, "/api/v1/namespaces/ns/secrets", "");
        assert_eq!(
            authorizer.decide(&n1, &list, ""),
            Opinion::NoOpinion("No Object name found".into())
        );
        let get_account = ask(
            Method::GET,
            "/api/v1/namespaces/ns/serviceaccounts/runner",
            "",
        );
        assert_eq!(
            authorizer.decide(&n1, &get_account, ""),
            Opinion::NoOpinion("can only create tokens for individual service accounts".into())
        );
        // The pod goes: so does the relationship.
        storage.delete("/registry/pods/ns/web", None).await.unwrap();
        cacher.wait_fresh().await.unwrap();
        let mut gone = false;
        for _ in 0..100 {
            if authorizer.decide(&n1, &secret, "") == Opinion::NoOpinion(refused.into()) {
                gone = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(gone, "a deleted pod's secret stays reachable");
        assert!(authorizer.pods().is_empty());
    }

    /// A pod bound to `n1` that reads the ConfigMap `cfg`: stored, then
    /// `n1`'s kubelet may read that ConfigMap.
    async fn kubelet_reads_its_pods_configmap(
        storage: &MemoryStorage,
        cacher: &Cacher,
        authorizer: &NodeAuthorizer,
    ) {
        put(storage, "/registry/pods/ns/web", json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}})).await;
        cacher.wait_fresh().await.unwrap();
        let cfg = ask(Method::GET, "/api/v1/namespaces/ns/configmaps/cfg", "");
        assert_eq!(
            decided(authorizer, &kubelet("n1"), &cfg).await,
            Opinion::Allow(String::new())
        );
    }

    #[tokio::test]
    async fn a_server_serving_pods_relates_them_from_its_own_cache() {
        let storage = Arc::new(MemoryStorage::default());
        let cacher = Cacher::start(storage.clone()).await.unwrap();
        let whole = crate::storage::cacher::generic_ingest();
        cacher.register("/registry/pods/", whole).await.unwrap();
        let authorizer = NodeAuthorizer::new(&cacher, "/registry").await.unwrap();
        kubelet_reads_its_pods_configmap(&storage, &cacher, &authorizer).await;
        assert!(
            authorizer
                .pods()
                .get("/registry/pods/ns/web")
                .is_some_and(|p| p.value()["spec"]["containers"].is_array())
        );
    }

    #[tokio::test]
    async fn the_graph_follows_pods_once_their_store_serves_the_cache_it_registered() {
        let storage = Arc::new(MemoryStorage::default());
        let cacher = Cacher::start(storage.clone()).await.unwrap();
        let authorizer = NodeAuthorizer::new(&cacher, "/registry").await.unwrap();
        let whole = crate::storage::cacher::generic_ingest();
        cacher.serve("/registry/pods/", whole).await.unwrap();
        kubelet_reads_its_pods_configmap(&storage, &cacher, &authorizer).await;
    }

    #[test]
    fn a_kubelet_has_its_own_node_lease_and_csinode_and_its_pods_by_node() {
        let user = kubelet("n1");
        let info = |method: Method, path: &str, query: &str| ask(method, path, query);
        let allow = Opinion::Allow(String::new());
        let own = |info: &RequestInfo| own_node("n1", info);
        assert_eq!(own(&info(Method::GET, "/api/v1/nodes/n1", "")), allow);
        assert_eq!(
            own(&info(
                Method::GET,
                "/api/v1/nodes",
                "fieldSelector=metadata.name%3Dn1&watch=1"
            )),
            allow
        );
        assert_eq!(
            own(&info(Method::GET, "/api/v1/nodes/n2", "")),
            no_opinion("node 'n1' cannot read 'n2', only its own Node object")
        );
        assert_eq!(
            own(&info(Method::GET, "/api/v1/nodes", "")),
            no_opinion("node 'n1' cannot read all nodes, only its own Node object")
        );
        assert_eq!(
            own(&info(Method::PATCH, "/api/v1/nodes/n1/status", "")),
            allow
        );
        assert_eq!(
            own(&info(Method::DELETE, "/api/v1/nodes/n1", "")),
            no_opinion("")
        );
        let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
        assert_eq!(
            own_lease("n1", &info(Method::PUT, &format!("{leases}/n1"), "")),
            allow
        );
        assert_eq!(own_lease("n1", &info(Method::POST, leases, "")), allow);
        assert_eq!(
            own_lease("n1", &info(Method::GET, &format!("{leases}/n2"), "")),
            no_opinion("can only access node lease with the same name as the requesting node")
        );
        assert_eq!(
            own_lease(
                "n1",
                &info(
                    Method::GET,
                    "/apis/coordination.k8s.io/v1/namespaces/default/leases/n1",
                    ""
                )
            ),
            no_opinion("can only access leases in the \"kube-node-lease\" system namespace")
        );
        assert_eq!(
            own_lease("n1", &info(Method::GET, leases, "")),
            no_opinion("can only get, create, update, patch, or delete a node lease")
        );
        let csinodes = "/apis/storage.k8s.io/v1/csinodes";
        assert_eq!(own_csinode("n1", &info(Method::POST, csinodes, "")), allow);
        assert_eq!(
            own_csinode("n1", &info(Method::GET, &format!("{csinodes}/n2"), "")),
            no_opinion("can only access CSINode with the same name as the requesting node")
        );
        // Identities: only `system:node:<name>` in `system:nodes` is a node.
        assert_eq!(node_identity(&user), Some("n1"));
        let outsider = UserInfo {
            name: "system:node:n1".into(),
            ..Default::default()
        };
        assert_eq!(node_identity(&outsider), None);
        // The static rules: services and events yes, deleting namespaces no.
        let attrs_allowed = |method: Method, path: &str| {
            let i = info(method, path, "");
            node_rules()
                .iter()
                .any(|r| rule_allows(r, &attributes(&i, path)))
        };
        assert!(attrs_allowed(Method::GET, "/api/v1/services"));
        assert!(attrs_allowed(Method::POST, "/api/v1/namespaces/ns/events"));
        assert!(attrs_allowed(
            Method::GET,
            "/apis/storage.k8s.io/v1/csidrivers"
        ));
        assert!(!attrs_allowed(Method::DELETE, "/api/v1/namespaces/ns"));
    }

    #[tokio::test]
    async fn pods_are_listed_by_node_and_written_under_admission() {
        let storage = Arc::new(MemoryStorage::default());
        let cacher = Cacher::start(storage.clone()).await.unwrap();
        let authorizer = NodeAuthorizer::new(&cacher, "/registry").await.unwrap();
        let n1 = kubelet("n1");
        let decide = |method: Method, path: &str, query: &str| {
            authorizer.decide(&n1, &ask(method, path, query), path)
        };
        let allow = Opinion::Allow(String::new());
        assert_eq!(
            decide(
                Method::GET,
                "/api/v1/pods",
                "fieldSelector=spec.nodeName%3Dn1&watch=true"
            ),
            allow
        );
        assert_eq!(
            decide(
                Method::GET,
                "/api/v1/pods",
                "fieldSelector=spec.nodeName%3Dn2"
            ),
            no_opinion("can only list/watch pods with spec.nodeName field selector")
        );
        assert_eq!(
            decide(Method::POST, "/api/v1/namespaces/ns/pods", ""),
            allow
        );
        assert_eq!(
            decide(Method::PATCH, "/api/v1/namespaces/ns/pods/p/status", ""),
            allow
        );
        assert_eq!(
            decide(Method::POST, "/api/v1/namespaces/ns/pods/p/eviction", ""),
            allow
        );
        assert_eq!(
            decide(Method::PUT, "/api/v1/namespaces/ns/pods/p", ""),
            no_opinion("")
        );
        assert_eq!(
            decide(Method::GET, "/api/v1/namespaces/ns/pods/p", ""),
            no_opinion("no relationship found between node 'n1' and this object")
        );
    }
}
