//! The resource quota controller: keeps each ResourceQuota's `status.hard`
//! equal to its `spec.hard` and recounts `status.used` from what its
//! namespace holds (custom resources' object counts included), when a quota
//! is created or its limits change, soon after objects are deleted (so
//! deleting frees quota), and on a slow resync.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use apimachinery::error::{Reason, Result};
use apimachinery::quantity::{Quantity, ResourceList, to_json};
use apimachinery::resource_quota;
use generic_server::informer::{self, Change};
use generic_server::loopback::Loopback;
use generic_server::registry::{ListOptions, Store};
use generic_server::storage::cacher::{CachedObject, Cacher};
use serde_json::Value;

/// How long a namespace's recount waits for more changes to gather.
const SETTLE: Duration = Duration::from_millis(300);
/// How often every quota is recounted (kube's `--resource-quota-sync-period`).
const RESYNC: Duration = Duration::from_secs(300);
/// Status writes tried per quota per recount.
const ATTEMPTS: usize = 3;
/// When a quota names an object count not yet countable (a custom
/// resource whose cache is still being set up), how soon it is tried again.
const RETRY: Duration = Duration::from_secs(3);

/// What a recount reads and writes through.
#[derive(Clone)]
struct Counter {
    client: Loopback,
    quotas: Arc<Store>,
    /// The server's own namespaced stores, one per resource.
    counted: Arc<Vec<Arc<Store>>>,
    /// The server's cache, which holds the delegates' resources too (the
    /// garbage collector follows them): custom resources are counted there.
    cacher: Arc<Cacher>,
    root: String,
    /// The delegates' key prefixes whose deletions are followed.
    followed: Arc<Mutex<HashSet<String>>>,
}

/// Recounts the quotas of namespaces.
pub struct ResourceQuotaController {
    counter: Counter,
    pending: HashSet<String>,
}

/// A namespace whose quotas may need a recount.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync(pub String);

/// An object's namespace, if it has one.
/// What the controller reads of an object other than a pod: its namespace.
fn namespace_only(obj: &CachedObject) -> Option<Value> {
    Some(serde_json::json!({"metadata": {"namespace": obj.namespace}}))
}

fn namespace_of(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .map(str::to_string)
}

/// Whether a quota's status does not yet reflect its spec.
fn stale(quota: &Value) -> bool {
    let hard = quota.pointer("/spec/hard");
    let used = quota.pointer("/status/used").and_then(Value::as_object);
    hard != quota.pointer("/status/hard")
        || hard
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .any(|(k, _)| used.is_none_or(|u| !u.contains_key(k)))
}

/// Sends a recount of the namespace of each deleted object.
fn on_deletion(controller: Addr<ResourceQuotaController>) -> impl Fn(Change) -> bool + Send {
    move |change| {
        if let Change::Deleted(obj) = change
            && let Some(ns) = namespace_of(&obj)
        {
            controller.do_send(Sync(ns));
        }
        true
    }
}

impl ResourceQuotaController {
    /// Starts the controller over `quotas`, counting the objects of
    /// `stores` (the server's own) and of the custom resources `cacher`
    /// holds under `root`; ready when its informers have synced.
    pub fn start(
        client: Loopback,
        quotas: Arc<Store>,
        stores: Vec<Arc<Store>>,
        cacher: Arc<Cacher>,
        root: String,
    ) -> informer::Synced {
        let mut seen = HashSet::new();
        let counted: Vec<Arc<Store>> = stores
            .into_iter()
            .filter(|s| s.resource.namespaced)
            .filter(|s| seen.insert((s.resource.group.clone(), s.resource.plural.clone())))
            .collect();
        let counter = Counter {
            client,
            quotas: quotas.clone(),
            counted: Arc::new(counted.clone()),
            cacher,
            root,
            followed: Arc::default(),
        };
        let controller = ResourceQuotaController {
            counter,
            pending: HashSet::new(),
        }
        .start();
        for store in counted {
            let pods = store.resource.group.is_empty() && store.resource.plural == "pods";
            let deleted = on_deletion(controller.clone());
            let controller = controller.clone();
            // Deletions free quota, and so does a pod that has finished;
            // of other objects only the namespace is read.
            let view: informer::View = if pods {
                informer::whole
            } else {
                namespace_only
            };
            informer::follow_view(
                store,
                Duration::from_secs(3600),
                view,
                move |change| match change {
                    Change::Present(pod) if pods && resource_quota::finished(&pod) => {
                        if let Some(ns) = namespace_of(&pod) {
                            controller.do_send(Sync(ns));
                        }
                        true
                    }
                    change => deleted(change),
                },
            );
        }
        informer::follow(quotas, RESYNC, move |change| {
            if let Change::Present(quota) = change
                && stale(&quota)
                && let Some(ns) = namespace_of(&quota)
            {
                controller.do_send(Sync(ns));
            }
            true
        })
    }
}

impl Actor for ResourceQuotaController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(RESYNC, |this, ctx| {
            let quotas = this.counter.quotas.clone();
            let me = ctx.address();
            tokio::spawn(async move {
                let Ok(all) = quotas.list("", &ListOptions::default()).await else {
                    return;
                };
                let namespaces: HashSet<String> = all
                    .items
                    .iter()
                    .filter_map(|q| namespace_of(&q.value()))
                    .collect();
                for ns in namespaces {
                    me.do_send(Sync(ns));
                }
            });
        });
    }
}

impl Handler<Sync> for ResourceQuotaController {
    type Result = ();

    fn handle(&mut self, Sync(ns): Sync, ctx: &mut Context<Self>) {
        if !self.pending.insert(ns.clone()) {
            return;
        }
        ctx.run_later(SETTLE, move |this, ctx| {
            this.pending.remove(&ns);
            let (counter, me) = (this.counter.clone(), ctx.address());
            tokio::spawn(async move {
                match counter.recount(&ns, &me).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tokio::time::sleep(RETRY).await;
                        me.do_send(Sync(ns));
                    }
                    Err(e) => {
                        tracing::warn!(namespace = %ns, error = %e, "recounting resource quotas failed")
                    }
                }
            });
        });
    }
}

impl Counter {
    /// What a quota's namespace uses of its `spec.hard`.
    async fn usage(
        &self,
        quota: &Value,
        ns: &str,
        me: &Addr<ResourceQuotaController>,
    ) -> Result<ResourceList> {
        let hard = apimachinery::quantity::resource_list(quota.pointer("/spec/hard"));
        let mut used = ResourceList::new();
        for store in self.counted.iter() {
            let (group, plural) = (&store.resource.group, &store.resource.plural);
            if !hard
                .keys()
                .any(|n| resource_quota::tracks(group, plural, n))
            {
                continue;
            }
            let objects: Vec<Value> = store
                .list(ns, &ListOptions::default())
                .await?
                .items
                .iter()
                .map(|o| o.value())
                .collect();
            used.extend(resource_quota::total(quota, group, plural, &objects));
        }
        let delegated: Vec<(String, Quantity)> = hard
            .keys()
            .filter(|n| !used.contains_key(*n))
            .filter_map(|n| Some((n.clone(), self.delegated_count(n, ns, me)?)))
            .collect();
        used.extend(delegated);
        Ok(used)
    }

    /// `count/<plural>.<group>` of a resource a delegate serves (a custom
    /// resource), from the cache the garbage collector keeps of it; its
    /// deletions are followed from then on. `None` for a resource not known.
    fn delegated_count(
        &self,
        name: &str,
        ns: &str,
        me: &Addr<ResourceQuotaController>,
    ) -> Option<Quantity> {
        let (plural, group) = name.strip_prefix("count/")?.split_once('.')?;
        let prefix = apimachinery::keys::key_prefix(&self.root, group, plural);
        let cache = self.cacher.registered(&prefix)?;
        let first = self
            .followed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(prefix.clone());
        if first {
            informer::follow_cache(
                self.cacher.clone(),
                prefix.clone(),
                RESYNC,
                on_deletion(me.clone()),
            );
        }
        let count = cache.snapshot(&format!("{prefix}{ns}/"), 0).objects.len();
        Some(Quantity::from_units(count as i64))
    }

    /// Recounts every quota of a namespace and writes the statuses that
    /// changed; false if an object count it names could not be counted.
    async fn recount(&self, ns: &str, me: &Addr<ResourceQuotaController>) -> Result<bool> {
        let mut complete = true;
        for quota in self.quotas.list(ns, &ListOptions::default()).await?.items {
            let mut quota = quota.value();
            let name = quota["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let path = format!("/api/v1/namespaces/{ns}/resourcequotas/{name}");
            for _ in 0..ATTEMPTS {
                let used = self.usage(&quota, ns, me).await?;
                let hard = quota
                    .pointer("/spec/hard")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({}));
                complete &= hard
                    .as_object()
                    .into_iter()
                    .flatten()
                    .all(|(k, _)| used.contains_key(k) || !k.starts_with("count/"));
                let status = serde_json::json!({"hard": hard, "used": to_json(&used)});
                if quota.get("status") == Some(&status) {
                    break;
                }
                quota["status"] = status;
                match self.client.update(&format!("{path}/status"), &quota).await {
                    Ok(_) => break,
                    Err(e) if e.reason() == Reason::Conflict => {
                        quota = self.client.get(&path).await?
                    }
                    Err(e) if e.reason() == Reason::NotFound => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(complete)
    }
}

#[cfg(test)]
mod tests {
    use generic_server::server::ApiServer;
    use serde_json::json;

    use super::*;

    #[actix::test]
    async fn a_quota_gets_its_hard_limits_and_a_count_that_follows_deletions() {
        let resources = crate::resources::all()
            .into_iter()
            .filter(|r| {
                r.group.is_empty()
                    && matches!(r.plural.as_str(), "resourcequotas" | "configmaps" | "pods")
            })
            .collect();
        let (server, cacher) = ApiServer::in_memory(resources).await.expect("a server");
        let client = Loopback::new(server.clone(), "test");
        let quotas = server.store("", "v1", "resourcequotas").expect("quotas");
        ResourceQuotaController::start(
            client.clone(),
            quotas,
            server.stores(),
            cacher,
            "/registry".into(),
        )
        .wait()
        .await;
        let base = "/api/v1/namespaces/ns";
        for name in ["a", "b"] {
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
            client
                .create(&format!("{base}/configmaps"), &cm)
                .await
                .expect("configmap");
        }
        let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
            "spec": {"hard": {"configmaps": "5", "count/configmaps": "5", "requests.cpu": "1", "widgets": "1"}}});
        client
            .create(&format!("{base}/resourcequotas"), &quota)
            .await
            .expect("quota");
        let status = |want: Value| {
            let client = client.clone();
            async move {
                let mut last = Value::Null;
                for _ in 0..100 {
                    last = client
                        .get(&format!("{base}/resourcequotas/q"))
                        .await
                        .expect("quota");
                    if last["status"] == want {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                panic!("status never became {want}: {last}");
            }
        };
        let hard = json!({"configmaps": "5", "count/configmaps": "5", "requests.cpu": "1", "widgets": "1"});
        // What nothing counts (`widgets`) is left out, as kube does.
        status(json!({"hard": hard, "used": {"configmaps": "2", "count/configmaps": "2", "requests.cpu": "0"}})).await;
        client
            .delete(&format!("{base}/configmaps/a"))
            .await
            .expect("deleted");
        status(json!({"hard": hard, "used": {"configmaps": "1", "count/configmaps": "1", "requests.cpu": "0"}})).await;
    }
}
