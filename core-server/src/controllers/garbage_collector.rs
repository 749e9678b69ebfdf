//! The garbage collector: follows every object of a server, and acts on
//! ownerReferences as kube's garbage collector does.
//!
//! - Background: once none of an object's owners exists, the object is deleted.
//! - Orphan: an owner deleted with the `orphan` finalizer loses its
//!   references from its dependents, then the finalizer.
//! - Foreground: an owner deleted with the `foregroundDeletion` finalizer
//!   first has its dependents deleted, then loses the finalizer.
//!
//! It acts through the server's own API ([`Loopback`]), so owners served by
//! other servers of the chain are looked up the same way. The core server's
//! collector is the cluster's only one: besides its own stores it follows
//! what its delegates serve (custom resources, CRDs) through its own watch
//! cache of etcd ([`follow_delegates`]), metadata only, so it sees the
//! whole ownership graph as kube's collector does: a custom resource owned
//! by a ConfigMap is collected, and an orphaning or foreground deletion
//! reaches dependents on both sides.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::{Value, json};

use apimachinery::error::{Reason, Result};
use apimachinery::group_version::group_version_path;
use apimachinery::keys::key_prefix;
use apimachinery::label_selector::Labels;
use generic_server::discovery::{self, Discovery, Group};
use generic_server::informer::{self, Change};
use generic_server::loopback::Loopback;
use generic_server::registry::Store;
use generic_server::storage::cacher::{CachedObject, Cacher, Ingest};

/// How long a dependent whose owner is not (yet) known waits before the
/// owner is looked up: informers of other resources may still be loading.
const OWNER_GRACE: Duration = Duration::from_secs(2);
/// How often dependents whose owners this collector does not follow (objects
/// of aggregated servers) have their owners looked up again.
const REMOTE_OWNER_RECHECK: Duration = Duration::from_secs(5);
/// How often the collector's informers deliver every object again.
const RESYNC: Duration = Duration::from_secs(300);

/// One owner reference.
#[derive(Debug, Clone, PartialEq)]
struct Owner {
    uid: String,
    api_version: String,
    kind: String,
    name: String,
}

/// What the collector knows of one object.
#[derive(Debug, Clone)]
struct Node {
    api_version: String,
    kind: String,
    namespace: String,
    name: String,
    owners: Vec<Owner>,
    finalizers: Vec<String>,
    deleting: bool,
}

impl Node {
    fn from(obj: &Value) -> Option<(String, Node)> {
        let meta = obj.get("metadata")?;
        let text = |v: &Value, k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let uid = text(meta, "uid");
        if uid.is_empty() {
            return None;
        }
        let owners = meta
            .get("ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|o| Owner {
                uid: text(o, "uid"),
                api_version: text(o, "apiVersion"),
                kind: text(o, "kind"),
                name: text(o, "name"),
            })
            .collect();
        let finalizers = meta
            .get("finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect();
        let node = Node {
            api_version: text(obj, "apiVersion"),
            kind: text(obj, "kind"),
            namespace: text(meta, "namespace"),
            name: text(meta, "name"),
            owners,
            finalizers,
            deleting: meta.get("deletionTimestamp").is_some_and(|t| !t.is_null()),
        };
        Some((uid, node))
    }
}

/// The garbage collector actor.
pub struct GarbageCollector {
    client: Loopback,
    discovery: Arc<Discovery>,
    /// Objects that have owners or are being deleted, by uid: what the
    /// collector acts on. Every other object is only in `present`.
    nodes: HashMap<String, Node>,
    /// Hashes of the uids of every object that exists (owners included).
    present: HashSet<u64>,
    dependents: HashMap<String, HashSet<String>>,
}

/// The compact key of a uid in `present`: a cluster's worth of objects
/// fits in 8 bytes each (a collision can only keep a dependent alive).
fn uid_key(uid: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    uid.hash(&mut hasher);
    hasher.finish()
}

impl GarbageCollector {
    /// Starts collecting for the given stores, acting through `client`;
    /// the collector, and when its informers have synced.
    pub fn start(
        stores: Vec<Arc<Store>>,
        client: Loopback,
        discovery: Arc<Discovery>,
    ) -> (Addr<Self>, Vec<informer::Synced>) {
        let addr = GarbageCollector {
            client,
            discovery,
            nodes: HashMap::new(),
            present: HashSet::new(),
            dependents: HashMap::new(),
        }
        .start();
        let synced = stores
            .into_iter()
            .map(|store| follow(&addr, store))
            .collect();
        (addr, synced)
    }

    fn unlink(&mut self, uid: &str) {
        if let Some(old) = self.nodes.remove(uid) {
            for owner in &old.owners {
                if let Some(set) = self.dependents.get_mut(&owner.uid) {
                    set.remove(uid);
                    if set.is_empty() {
                        self.dependents.remove(&owner.uid);
                    }
                }
            }
        }
    }

    fn path(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<String> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let (plural, namespaced) = self.discovery.documents().find_kind(group, version, kind)?;
        let base = group_version_path(group, version);
        Some(if namespaced {
            format!("{base}/namespaces/{namespace}/{plural}/{name}")
        } else {
            format!("{base}/{plural}/{name}")
        })
    }

    fn node_path(&self, node: &Node) -> Option<String> {
        self.path(&node.api_version, &node.kind, &node.namespace, &node.name)
    }

    /// Deletes `uid` if none of its owners exists any more (checked live for
    /// owners this collector does not follow).
    fn check_owners(&self, uid: &str, ctx: &mut Context<Self>) {
        let Some(node) = self.nodes.get(uid).cloned() else {
            return;
        };
        if node.owners.is_empty() || node.deleting {
            return;
        }
        let known: Vec<bool> = node
            .owners
            .iter()
            .map(|o| self.present.contains(&uid_key(&o.uid)))
            .collect();
        if known.iter().any(|k| *k) {
            return;
        }
        let Some(path) = self.node_path(&node) else {
            return;
        };
        let owner_paths: Vec<(Owner, Option<String>)> = node
            .owners
            .iter()
            .map(|o| {
                (
                    o.clone(),
                    self.path(&o.api_version, &o.kind, &node.namespace, &o.name),
                )
            })
            .collect();
        let client = self.client.clone();
        let uid = uid.to_string();
        ctx.spawn(
            async move {
                for (owner, owner_path) in owner_paths {
                    // An owner we cannot resolve is assumed to exist.
                    let Some(owner_path) = owner_path else { return };
                    match client.get(&owner_path).await {
                        Ok(found) if found.pointer("/metadata/uid").and_then(Value::as_str) == Some(&owner.uid) => return,
                        Ok(_) => {}
                        Err(e) if e.reason() == Reason::NotFound => {}
                        Err(_) => return,
                    }
                }
                tracing::info!(%path, %uid, "garbage collecting an object whose owners are gone");
                let options = json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background", "preconditions": {"uid": uid}});
                if let Err(e) = client.call(http::Method::DELETE, &path, "", Some(&options)).await {
                    if !matches!(e.reason(), Reason::NotFound | Reason::Conflict) {
                        tracing::warn!(%path, error = %e, "garbage collection failed");
                    }
                }
            }
            .into_actor(self),
        );
    }

    /// Orphan or foreground processing of an owner being deleted.
    fn finalize_owner(&self, uid: &str, ctx: &mut Context<Self>) {
        let Some(node) = self.nodes.get(uid).cloned() else {
            return;
        };
        if !node.deleting {
            return;
        }
        let orphan = node.finalizers.iter().any(|f| f == "orphan");
        let foreground = node.finalizers.iter().any(|f| f == "foregroundDeletion");
        if !orphan && !foreground {
            return;
        }
        let dependents: Vec<(String, Node)> = self
            .dependents
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|d| self.nodes.get(d).map(|n| (d.clone(), n.clone())))
            .collect();
        let dependent_paths: Vec<String> = dependents
            .iter()
            .filter_map(|(_, n)| self.node_path(n))
            .collect();
        let Some(owner_path) = self.node_path(&node) else {
            return;
        };
        let client = self.client.clone();
        let owner_uid = uid.to_string();
        ctx.spawn(
            async move {
                let result = if orphan {
                    orphan_dependents(&client, &dependent_paths, &owner_uid).await
                } else {
                    delete_dependents(&client, &dependent_paths).await
                };
                if let Err(e) = result {
                    tracing::warn!(owner = %owner_path, error = %e, "garbage collector: dependents not done yet");
                    return;
                }
                if foreground && !dependent_paths.is_empty() {
                    // Wait for the dependents' deletion events.
                    return;
                }
                let finalizer = if orphan { "orphan" } else { "foregroundDeletion" };
                if let Err(e) = remove_finalizer(&client, &owner_path, finalizer).await {
                    tracing::warn!(owner = %owner_path, error = %e, "garbage collector: removing {finalizer} failed");
                }
            }
            .into_actor(self),
        );
    }
}

/// Makes a collector follow one store.
fn follow(addr: &Addr<GarbageCollector>, store: Arc<Store>) -> informer::Synced {
    let addr = addr.clone();
    informer::follow_view(store, RESYNC, graph_view, move |change| {
        addr.do_send(Observe(change));
        true
    })
}

/// Makes a collector follow every resource its server's delegates serve, as
/// discovery lists them, reading their keys from `cacher` (the server's own
/// etcd watch) under `etcd_root`; a resource that leaves discovery is let go.
pub fn follow_delegates(
    addr: &Addr<GarbageCollector>,
    cacher: Arc<Cacher>,
    discovery: Arc<Discovery>,
    etcd_root: &str,
) {
    let (addr, root) = (addr.clone(), etcd_root.trim_end_matches('/').to_string());
    let mut changes = discovery.subscribe();
    tokio::spawn(async move {
        let mut followed: HashSet<String> = HashSet::new();
        loop {
            let wanted = delegate_prefixes(&discovery.delegates(), &root);
            for gone in followed.difference(&wanted) {
                cacher.unregister(gone);
            }
            followed.retain(|p| wanted.contains(p));
            for prefix in wanted.difference(&followed.clone()) {
                if let Err(e) = cacher.register(prefix, graph_ingest()).await {
                    tracing::warn!(%prefix, error = %e, "garbage collector cannot follow a delegate's resource");
                    continue;
                }
                let addr = addr.clone();
                informer::follow_cache(cacher.clone(), prefix.clone(), RESYNC, move |change| {
                    addr.do_send(Observe(change));
                    true
                });
                followed.insert(prefix.clone());
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    });
}

/// The etcd key prefix of each resource in discovery groups.
fn delegate_prefixes(groups: &[Group], root: &str) -> HashSet<String> {
    groups
        .iter()
        .flat_map(|group| {
            let name = discovery::group_name(group);
            discovery::versions(group)
                .iter()
                .flat_map(discovery::resources)
                .filter_map(|r| r.get("resource").and_then(Value::as_str))
                .filter(|plural| !plural.contains('/'))
                .map(move |plural| key_prefix(root, name, plural))
        })
        .collect()
}

/// What the collector reads of an object: its kind and the metadata of the
/// ownership graph. Parsed as this, an object's other fields (a ConfigMap's
/// data, managedFields) are skipped, never allocated.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct GraphObject {
    api_version: Option<Value>,
    kind: Option<Value>,
    metadata: Option<GraphMeta>,
}

/// The metadata fields of [`GraphObject`].
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct GraphMeta {
    name: Option<Value>,
    namespace: Option<Value>,
    uid: Option<Value>,
    owner_references: Option<Value>,
    finalizers: Option<Value>,
    deletion_timestamp: Option<Value>,
}

/// An object as the collector keeps it (`None` if it is not an object with metadata).
fn graph_of(bytes: &[u8]) -> Option<Value> {
    let obj: GraphObject = serde_json::from_slice(bytes).ok()?;
    let meta = obj.metadata?;
    let mut kept = serde_json::Map::new();
    for (field, value) in [
        ("name", meta.name),
        ("namespace", meta.namespace),
        ("uid", meta.uid),
        ("ownerReferences", meta.owner_references),
        ("finalizers", meta.finalizers),
        ("deletionTimestamp", meta.deletion_timestamp),
    ] {
        if let Some(value) = value {
            kept.insert(field.into(), value);
        }
    }
    Some(json!({"apiVersion": obj.api_version, "kind": obj.kind, "metadata": kept}))
}

/// The collector's view of a cached object (its informers' [`informer::View`]).
fn graph_view(obj: &CachedObject) -> Option<Value> {
    graph_of(&obj.bytes)
}

/// Keeps of an object only what the collector reads ([`graph_of`]).
fn graph_ingest() -> Ingest {
    Arc::new(|key: &str, value: &[u8], revision: i64| {
        let slim = graph_of(value)?;
        let text = |k: &str| slim["metadata"][k].as_str().unwrap_or_default().to_string();
        Some(CachedObject {
            key: key.into(),
            revision,
            bytes: serde_json::to_vec(&slim).ok()?.into(),
            namespace: text("namespace"),
            name: text("name"),
            labels: Labels::default(),
            fields: Vec::new(),
        })
    })
}

impl Actor for GarbageCollector {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Owners served by other servers of the chain send this collector no
        // events: their dependents are looked at again on a period.
        ctx.run_interval(REMOTE_OWNER_RECHECK, |gc, ctx| {
            let candidates: Vec<String> = gc
                .nodes
                .iter()
                // check_owners skips those with an owner this collector follows.
                .filter(|(_, n)| !n.owners.is_empty())
                .map(|(uid, _)| uid.clone())
                .collect();
            for uid in candidates {
                gc.check_owners(&uid, ctx);
            }
        });
    }
}

/// An object changed (from an informer).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Observe(pub Change);

/// Look at an object's owners again.
#[derive(Message)]
#[rtype(result = "()")]
struct Recheck(String);

impl Handler<Observe> for GarbageCollector {
    type Result = ();

    fn handle(&mut self, Observe(change): Observe, ctx: &mut Context<Self>) {
        match change {
            Change::Present(obj) => {
                let Some((uid, node)) = Node::from(&obj) else {
                    return;
                };
                self.unlink(&uid);
                for owner in &node.owners {
                    self.dependents
                        .entry(owner.uid.clone())
                        .or_default()
                        .insert(uid.clone());
                }
                self.present.insert(uid_key(&uid));
                let has_owners = !node.owners.is_empty();
                if !has_owners && !node.deleting {
                    return;
                }
                self.nodes.insert(uid.clone(), node);
                self.finalize_owner(&uid, ctx);
                if has_owners {
                    ctx.notify_later(Recheck(uid), OWNER_GRACE);
                }
            }
            Change::Deleted(obj) => {
                let Some((uid, node)) = Node::from(&obj) else {
                    return;
                };
                self.unlink(&uid);
                self.present.remove(&uid_key(&uid));
                for dependent in self.dependents.get(&uid).cloned().unwrap_or_default() {
                    self.check_owners(&dependent, ctx);
                }
                // A foreground owner waits for its dependents: look again.
                for owner in &node.owners {
                    self.finalize_owner(&owner.uid, ctx);
                }
            }
        }
    }
}

impl Handler<Recheck> for GarbageCollector {
    type Result = ();

    fn handle(&mut self, Recheck(uid): Recheck, ctx: &mut Context<Self>) {
        self.check_owners(&uid, ctx);
    }
}

/// Removes the owner's reference from each dependent.
async fn orphan_dependents(client: &Loopback, paths: &[String], owner_uid: &str) -> Result<()> {
    for path in paths {
        update_with_retry(client, path, |obj| {
            let Some(refs) = obj
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            else {
                return false;
            };
            let before = refs.len();
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
            let changed = before != refs.len();
            // kube omits an empty list: the last reference takes the field with it.
            if refs.is_empty() {
                if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("ownerReferences");
                }
            }
            changed
        })
        .await?;
    }
    Ok(())
}

/// Deletes each dependent (background).
async fn delete_dependents(client: &Loopback, paths: &[String]) -> Result<()> {
    for path in paths {
        match client
            .call(
                http::Method::DELETE,
                path,
                "propagationPolicy=Background",
                None,
            )
            .await
        {
            Ok(_) => {}
            Err(e) if e.reason() == Reason::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Removes one finalizer from an object.
async fn remove_finalizer(client: &Loopback, path: &str, finalizer: &str) -> Result<()> {
    update_with_retry(client, path, |obj| {
        let Some(list) = obj
            .pointer_mut("/metadata/finalizers")
            .and_then(Value::as_array_mut)
        else {
            return false;
        };
        let before = list.len();
        list.retain(|f| f != finalizer);
        before != list.len()
    })
    .await
}

/// Reads, changes and writes an object, retrying lost races; a missing
/// object or a change that changes nothing is done.
async fn update_with_retry(
    client: &Loopback,
    path: &str,
    change: impl Fn(&mut Value) -> bool,
) -> Result<()> {
    for _ in 0..10 {
        let mut obj = match client.get(path).await {
            Ok(obj) => obj,
            Err(e) if e.reason() == Reason::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        if !change(&mut obj) {
            return Ok(());
        }
        match client.update(path, &obj).await {
            Ok(_) => return Ok(()),
            Err(e) if e.reason() == Reason::Conflict => continue,
            Err(e) if e.reason() == Reason::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Err(apimachinery::error::Error::new(
        Reason::Conflict,
        format!("{path} kept changing"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collector_reads_only_the_ownership_graph() {
        let configmap = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "a", "namespace": "ns", "uid": "u1",
                "labels": {"x": "y"}, "managedFields": [{"manager": "kubectl"}],
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u0"}],
                "finalizers": ["f"], "deletionTimestamp": null
            },
            "data": {"big": "x".repeat(4096)}
        });
        let bytes = serde_json::to_vec(&configmap).unwrap();
        let slim = graph_of(&bytes).expect("an object with metadata");
        assert_eq!(
            slim,
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {
                    "name": "a", "namespace": "ns", "uid": "u1",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u0"}],
                    "finalizers": ["f"]
                }
            })
        );
        assert_eq!(graph_of(b"[1, 2]"), None);
        assert_eq!(graph_of(br#"{"kind": "X"}"#), None);
        let cached = graph_ingest()("/registry/configmaps/ns/a", &bytes, 7).expect("ingested");
        assert_eq!(
            (
                cached.name.as_str(),
                cached.namespace.as_str(),
                cached.revision
            ),
            ("a", "ns", 7)
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&cached.bytes).unwrap(),
            slim
        );
    }

    #[test]
    fn delegates_resources_are_followed_at_their_storage_prefixes() {
        let groups = vec![Group::new(json!({
            "metadata": {"name": "example.com"},
            "versions": [
                {"version": "v2", "resources": [{"resource": "widgets"}, {"resource": "widgets/status"}]},
                {"version": "v1", "resources": [{"resource": "widgets"}, {"resource": "gadgets"}]}
            ]
        }))];
        let prefixes = delegate_prefixes(&groups, "/registry");
        assert_eq!(
            prefixes,
            HashSet::from([
                "/registry/example.com/widgets/".to_string(),
                "/registry/example.com/gadgets/".to_string(),
            ])
        );
    }

    #[test]
    fn the_graph_keeps_only_what_ownership_needs() {
        let stored = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "ns", "uid": "u1", "labels": {"a": "b"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "boss", "uid": "u0"}],
                "finalizers": ["example.com/hold"], "managedFields": [{"manager": "kubectl"}]},
            "spec": {"big": "x".repeat(1000)}
        });
        let obj = graph_ingest()(
            "/registry/example.com/widgets/ns/w",
            &serde_json::to_vec(&stored).unwrap(),
            7,
        )
        .expect("ingested");
        assert!(obj.bytes.len() < 300, "{} bytes kept", obj.bytes.len());
        let (uid, node) = Node::from(&obj.value()).expect("a node");
        assert_eq!(uid, "u1");
        assert_eq!(
            (node.kind.as_str(), node.api_version.as_str()),
            ("Widget", "example.com/v1")
        );
        assert_eq!((node.namespace.as_str(), node.name.as_str()), ("ns", "w"));
        assert_eq!(node.owners[0].uid, "u0");
        assert_eq!(node.finalizers, ["example.com/hold"]);
        assert!(!node.deleting);
    }
}
