//! The namespace controller: empties a Terminating namespace of everything
//! namespaced that the front door's discovery lists (built-ins, custom
//! resources, aggregated APIs), then removes the `kubernetes` finalizer so
//! the namespace goes away. It runs in the aggregator, on the replica that
//! holds the controllers' lease, because only the front door reaches every
//! server. While content remains it says why in the namespace's status
//! conditions, as kube's namespace controller does, so `kubectl describe
//! namespace` shows what a stuck namespace waits for.
//!
//! An aggregated server that is down blocks the namespace, as in kube, but
//! only if what it last reported serving (remembered in etcd, so across
//! aggregator restarts) has something to delete there: a stale
//! metrics.k8s.io (read-only), or a server never seen to answer, holds up
//! no namespace.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use apimachinery::error::Reason;
use apimachinery::group_version::{api_version, group_version_path};
use generic_server::discovery::{self, Discovery, Documents};
use generic_server::loopback::Loopback;
use generic_server::registry::now_rfc3339;
use serde_json::{Value, json};
use tokio::sync::watch;

/// The finalizer this controller owns.
const FINALIZER: &str = "kubernetes";

/// Retry delay while content remains (objects waiting on finalizers).
const RETRY: Duration = Duration::from_secs(2);

/// Empties and finalizes deleted namespaces.
pub struct NamespaceController {
    client: Loopback,
    discovery: Arc<Discovery>,
    leader: watch::Receiver<bool>,
    busy: HashSet<String>,
}

impl NamespaceController {
    /// A controller acting through `client` (the front door's handler),
    /// finding resources in `discovery`, while `leader` says this replica leads.
    pub fn new(client: Loopback, discovery: Arc<Discovery>, leader: watch::Receiver<bool>) -> Self {
        NamespaceController {
            client,
            discovery,
            leader,
            busy: HashSet::new(),
        }
    }
}

impl Actor for NamespaceController {
    type Context = Context<Self>;
}

/// A namespace's current state.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync(pub Value);

/// A finalization attempt ended; `done` if the namespace was finalized.
#[derive(Message)]
#[rtype(result = "()")]
struct Finished {
    name: String,
    done: bool,
}

impl Handler<Sync> for NamespaceController {
    type Result = ();

    fn handle(&mut self, Sync(ns): Sync, ctx: &mut Context<Self>) {
        let deleting = ns
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        let finalizers = ns
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let name = ns
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !deleting
            || !*self.leader.borrow()
            || !finalizers.iter().any(|f| f == FINALIZER)
            || !self.busy.insert(name.clone())
        {
            return;
        }
        let (client, discovery) = (self.client.clone(), self.discovery.clone());
        let me = ctx.address();
        tokio::spawn(async move {
            let done = match finalize(&client, &discovery, &name).await {
                Ok(done) => done,
                Err(e) => {
                    tracing::warn!(namespace = %name, error = %e, "namespace cleanup failed; retrying");
                    false
                }
            };
            me.do_send(Finished { name, done });
        });
    }
}

impl Handler<Finished> for NamespaceController {
    type Result = ();

    fn handle(&mut self, msg: Finished, ctx: &mut Context<Self>) {
        self.busy.remove(&msg.name);
        if msg.done {
            return;
        }
        let client = self.client.clone();
        ctx.run_later(RETRY, move |_, ctx| {
            let me = ctx.address();
            tokio::spawn(async move {
                if let Ok(ns) = client
                    .get(&format!("/api/v1/namespaces/{}", msg.name))
                    .await
                {
                    me.do_send(Sync(ns));
                }
            });
        });
    }
}

/// A namespaced collection that content is deleted from.
struct Collection {
    /// Its path in the namespace.
    path: String,
    /// `<plural>.<group>`, as kube names it in conditions.
    label: String,
    /// Without `deletecollection`: listed, then deleted one by one.
    one_by_one: bool,
}

/// Every namespaced resource that can be emptied (`deletecollection`, or
/// `list` and `delete`), preferred version of each group, in `namespace`;
/// and the group versions whose servers are down while they last served
/// something to delete.
fn collections(docs: &Documents, namespace: &str) -> (Vec<Collection>, Vec<String>) {
    let mut collections = Vec::new();
    let mut stale = Vec::new();
    for group in &docs.groups {
        let name = discovery::group_name(group);
        let Some(version) = discovery::versions(group).first() else {
            continue;
        };
        let v = version["version"].as_str().unwrap_or_default();
        let mut deletable = Vec::new();
        for r in discovery::resources(version) {
            let verbs = r
                .get("verbs")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let has = |verb: &str| verbs.iter().any(|v| v == verb);
            let whole = has("deletecollection");
            if r["scope"] == "Namespaced" && (whole || (has("list") && has("delete"))) {
                let plural = r["resource"].as_str().unwrap_or_default();
                deletable.push(Collection {
                    path: format!(
                        "{}/namespaces/{namespace}/{plural}",
                        group_version_path(name, v)
                    ),
                    label: format!("{plural}.{name}"),
                    one_by_one: !whole,
                });
            }
        }
        // A server that is down holds the namespace only if what it last
        // reported (remembered across restarts) has something to delete
        // here; one never seen to serve anything holds nothing up.
        if version["freshness"] == "Stale" {
            if !deletable.is_empty() {
                stale.push(api_version(name, v));
            }
            continue;
        }
        collections.extend(deletable);
    }
    (collections, stale)
}

/// What one pass over a namespace's content found.
#[derive(Debug, Default)]
struct Content {
    /// Why not every server's resources are known, if they are not.
    discovery_failure: Option<String>,
    /// Collections whose deletion failed, with why.
    delete_failures: Vec<String>,
    /// Objects left, by `<plural>.<group>`.
    remaining: BTreeMap<String, usize>,
    /// Objects left, by finalizer they carry.
    finalizers: BTreeMap<String, usize>,
}

impl Content {
    /// Whether the namespace may be finalized.
    fn gone(&self) -> bool {
        self.discovery_failure.is_none()
            && self.delete_failures.is_empty()
            && self.remaining.is_empty()
    }

    /// The status conditions kube's namespace controller keeps, as they
    /// stand after this pass (type, failing, reason, message).
    fn conditions(&self) -> [(&'static str, bool, &'static str, String); 5] {
        let counts = |counts: &BTreeMap<String, usize>, verb: &str| {
            let mut parts: Vec<String> = counts
                .iter()
                .map(|(what, n)| format!("{what} {verb} {n} resource instances"))
                .collect();
            parts.sort();
            parts.join(", ")
        };
        let mut failures = self.delete_failures.clone();
        failures.sort();
        [
            match &self.discovery_failure {
                Some(why) => (
                    "NamespaceDeletionDiscoveryFailure",
                    true,
                    "DiscoveryFailed",
                    why.clone(),
                ),
                None => (
                    "NamespaceDeletionDiscoveryFailure",
                    false,
                    "ResourcesDiscovered",
                    "All resources successfully discovered".into(),
                ),
            },
            (
                "NamespaceDeletionGroupVersionParsingFailure",
                false,
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed".into(),
            ),
            if failures.is_empty() {
                (
                    "NamespaceDeletionContentFailure",
                    false,
                    "ContentDeleted",
                    "All content successfully deleted, may be waiting on finalization".into(),
                )
            } else {
                (
                    "NamespaceDeletionContentFailure",
                    true,
                    "ContentDeletionFailed",
                    format!(
                        "Failed to delete all resource types, {} remaining: {}",
                        failures.len(),
                        failures.join(", ")
                    ),
                )
            },
            if self.remaining.is_empty() {
                (
                    "NamespaceContentRemaining",
                    false,
                    "ContentRemoved",
                    "All content successfully removed".into(),
                )
            } else {
                (
                    "NamespaceContentRemaining",
                    true,
                    "SomeResourcesRemain",
                    format!(
                        "Some resources are remaining: {}",
                        counts(&self.remaining, "has")
                    ),
                )
            },
            if self.finalizers.is_empty() {
                (
                    "NamespaceFinalizersRemaining",
                    false,
                    "ContentHasNoFinalizers",
                    "All content-preserving finalizers finished".into(),
                )
            } else {
                (
                    "NamespaceFinalizersRemaining",
                    true,
                    "SomeFinalizersRemain",
                    format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        counts(&self.finalizers, "in")
                    ),
                )
            },
        ]
    }

    /// Writes the conditions into a namespace's status, keeping each
    /// condition's transition time unless its status flips; whether
    /// anything changed.
    fn update_status(&self, ns: &mut Value, now: &str) -> bool {
        let mut conditions = ns
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut changed = false;
        for (kind, failing, reason, message) in self.conditions() {
            let status = if failing { "True" } else { "False" };
            let fresh = json!({"type": kind, "status": status, "lastTransitionTime": now, "reason": reason, "message": message});
            match conditions.iter_mut().find(|c| c["type"] == kind) {
                None => {
                    conditions.push(fresh);
                    changed = true;
                }
                Some(old)
                    if old["status"] != status
                        || old["reason"] != reason
                        || old["message"] != message.as_str() =>
                {
                    if old["status"] != status {
                        old["lastTransitionTime"] = json!(now);
                    }
                    old["status"] = json!(status);
                    old["reason"] = json!(reason);
                    old["message"] = json!(message);
                    changed = true;
                }
                Some(_) => {}
            }
        }
        if changed {
            ns["status"]["conditions"] = json!(conditions);
        }
        changed
    }
}

/// Deletes the namespace's content and counts what is left.
async fn delete_content(client: &Loopback, discovery: &Discovery, name: &str) -> Content {
    let mut content = Content::default();
    let (collections, stale) = collections(&discovery.documents(), name);
    if !discovery.delegates_known() {
        content.discovery_failure = Some(
            "Discovery failed: the resources of the servers behind the front door are not known yet".into(),
        );
    } else if !stale.is_empty() {
        let failing: Vec<String> = stale
            .iter()
            .map(|gv| format!("{gv}: stale GroupVersion discovery: {gv}"))
            .collect();
        content.discovery_failure = Some(format!(
            "Discovery failed for some groups, {} failing: unable to retrieve the complete list of server APIs: {}",
            stale.len(),
            failing.join(", ")
        ));
    }
    for c in &collections {
        if let Err(e) = empty(client, c).await {
            content.delete_failures.push(format!("{}: {e}", c.label));
        }
    }
    for c in &collections {
        let list = match client.get(&c.path).await {
            Ok(list) => list,
            Err(e) if e.reason() == Reason::NotFound => continue,
            Err(e) => {
                content.delete_failures.push(format!("{}: {e}", c.label));
                continue;
            }
        };
        let items = list
            .get("items")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if items.is_empty() {
            continue;
        }
        content.remaining.insert(c.label.clone(), items.len());
        for finalizer in items
            .iter()
            .filter_map(|i| i.pointer("/metadata/finalizers").and_then(Value::as_array))
            .flatten()
            .filter_map(Value::as_str)
        {
            *content.finalizers.entry(finalizer.to_string()).or_default() += 1;
        }
    }
    content
}

/// Deletes what a collection holds: at once, or item by item.
async fn empty(client: &Loopback, c: &Collection) -> apimachinery::Result<()> {
    let gone =
        |e: &apimachinery::Error| matches!(e.reason(), Reason::NotFound | Reason::MethodNotAllowed);
    if !c.one_by_one {
        return client
            .delete(&c.path)
            .await
            .map(drop)
            .or_else(|e| if gone(&e) { Ok(()) } else { Err(e) });
    }
    let list = match client.get(&c.path).await {
        Ok(list) => list,
        Err(e) if gone(&e) => return Ok(()),
        Err(e) => return Err(e),
    };
    let names = list
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| i.pointer("/metadata/name").and_then(Value::as_str));
    for name in names {
        match client.delete(&format!("{}/{name}", c.path)).await {
            Ok(_) => {}
            Err(e) if gone(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Deletes the namespace's content and reports on it in the namespace's
/// status; finalizes the namespace once nothing is left.
async fn finalize(
    client: &Loopback,
    discovery: &Discovery,
    name: &str,
) -> apimachinery::Result<bool> {
    let content = delete_content(client, discovery, name).await;
    let path = format!("/api/v1/namespaces/{name}");
    let mut ns = match client.get(&path).await {
        Ok(ns) => ns,
        Err(e) if e.reason() == Reason::NotFound => return Ok(true),
        Err(e) => return Err(e),
    };
    if content.update_status(&mut ns, &now_rfc3339()) {
        ns = client.update(&format!("{path}/status"), &ns).await?;
    }
    if !content.gone() {
        return Ok(false);
    }
    let remaining: Vec<Value> = ns
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    ns["spec"]["finalizers"] = json!(remaining);
    match client.update(&format!("{path}/finalize"), &ns).await {
        Ok(_) => Ok(true),
        Err(e) if e.reason() == Reason::NotFound => Ok(true),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition<'a>(ns: &'a Value, kind: &str) -> &'a Value {
        ns["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
            .unwrap_or_else(|| panic!("no {kind} condition in {ns}"))
    }

    #[test]
    fn remaining_content_and_finalizers_are_counted_in_kube_words() {
        let content = Content {
            remaining: BTreeMap::from([
                ("widgets.example.com".into(), 2),
                ("configmaps.".into(), 1),
            ]),
            finalizers: BTreeMap::from([("example.com/hold".into(), 3)]),
            ..Content::default()
        };
        assert!(!content.gone());
        let mut ns = json!({"metadata": {"name": "team"}, "status": {"phase": "Terminating"}});
        assert!(content.update_status(&mut ns, "2026-01-01T00:00:00Z"));
        let remaining = condition(&ns, "NamespaceContentRemaining");
        assert_eq!(remaining["status"], "True");
        assert_eq!(remaining["reason"], "SomeResourcesRemain");
        assert_eq!(
            remaining["message"],
            "Some resources are remaining: configmaps. has 1 resource instances, widgets.example.com has 2 resource instances"
        );
        let finalizers = condition(&ns, "NamespaceFinalizersRemaining");
        assert_eq!(finalizers["status"], "True");
        assert_eq!(
            finalizers["message"],
            "Some content in the namespace has finalizers remaining: example.com/hold in 3 resource instances"
        );
        let discovered = condition(&ns, "NamespaceDeletionDiscoveryFailure");
        assert_eq!(discovered["status"], "False");
        assert_eq!(discovered["reason"], "ResourcesDiscovered");
        assert_eq!(ns["status"]["conditions"].as_array().unwrap().len(), 5);
        assert_eq!(ns["status"]["phase"], "Terminating");
    }

    #[test]
    fn a_condition_keeps_its_transition_time_until_its_status_flips() {
        let stuck = Content {
            remaining: BTreeMap::from([("configmaps.".into(), 2)]),
            ..Content::default()
        };
        let mut ns = json!({"metadata": {"name": "team"}});
        assert!(stuck.update_status(&mut ns, "T1"));
        assert!(!stuck.update_status(&mut ns, "T2"), "nothing changed");
        let fewer = Content {
            remaining: BTreeMap::from([("configmaps.".into(), 1)]),
            ..Content::default()
        };
        assert!(fewer.update_status(&mut ns, "T3"));
        let remaining = condition(&ns, "NamespaceContentRemaining");
        assert_eq!(remaining["lastTransitionTime"], "T1");
        assert_eq!(
            remaining["message"],
            "Some resources are remaining: configmaps. has 1 resource instances"
        );
        let empty = Content::default();
        assert!(empty.gone());
        assert!(empty.update_status(&mut ns, "T4"));
        let remaining = condition(&ns, "NamespaceContentRemaining");
        assert_eq!(remaining["status"], "False");
        assert_eq!(remaining["reason"], "ContentRemoved");
        assert_eq!(remaining["lastTransitionTime"], "T4");
        assert_eq!(
            condition(&ns, "NamespaceDeletionContentFailure")["lastTransitionTime"],
            "T1"
        );
    }

    #[test]
    fn a_down_aggregated_server_blocks_only_if_it_had_something_to_delete() {
        let group = |name: &str, freshness: &str, verbs: Value| {
            json!({"metadata": {"name": name}, "versions": [{"version": "v1", "freshness": freshness,
                "resources": [{"resource": "things", "scope": "Namespaced", "verbs": verbs}]}]})
        };
        let docs = Documents::new(vec![
            json!({"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [
                {"resource": "configmaps", "scope": "Namespaced", "verbs": ["list", "deletecollection"]},
                {"resource": "nodes", "scope": "Cluster", "verbs": ["list", "deletecollection"]}]}]}),
            group(
                "up.example.com",
                "Current",
                json!(["list", "deletecollection"]),
            ),
            group("readonly.example.com", "Stale", json!(["get", "list"])),
            group(
                "down.example.com",
                "Stale",
                json!(["list", "deletecollection"]),
            ),
            json!({"metadata": {"name": "unknown.example.com"}, "versions": [{"version": "v1", "freshness": "Stale", "resources": []}]}),
        ]);
        let (collections, stale) = collections(&docs, "team");
        let mut paths: Vec<&str> = collections.iter().map(|c| c.path.as_str()).collect();
        paths.sort();
        assert_eq!(
            paths,
            [
                "/api/v1/namespaces/team/configmaps",
                "/apis/up.example.com/v1/namespaces/team/things"
            ]
        );
        let mut stale = stale;
        stale.sort();
        // Never seen to serve anything: it holds nothing up.
        assert_eq!(stale, ["down.example.com/v1"]);
    }

    #[test]
    fn failures_keep_the_namespace() {
        let failed = Content {
            delete_failures: vec!["widgets.example.com: boom".into()],
            ..Content::default()
        };
        assert!(!failed.gone());
        let mut ns = json!({"metadata": {"name": "team"}});
        failed.update_status(&mut ns, "T");
        assert_eq!(
            condition(&ns, "NamespaceDeletionContentFailure")["message"],
            "Failed to delete all resource types, 1 remaining: widgets.example.com: boom"
        );
        let undiscovered = Content {
            discovery_failure: Some("not yet".into()),
            ..Content::default()
        };
        assert!(!undiscovered.gone());
        undiscovered.update_status(&mut ns, "T");
        assert_eq!(
            condition(&ns, "NamespaceDeletionDiscoveryFailure")["status"],
            "True"
        );
    }
}
