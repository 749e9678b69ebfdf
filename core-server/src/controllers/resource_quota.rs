//! The resource quota controller: keeps each ResourceQuota's `status.hard`
//! equal to its `spec.hard` and recounts `status.used` from what its
//! namespace holds, when a quota is created or its limits change, soon after
//! objects are deleted (so deleting frees quota), and on a slow resync.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use apimachinery::error::{Reason, Result};
use apimachinery::quantity::{ResourceList, to_json};
use apimachinery::resource_quota;
use generic_server::informer::{self, Change};
use generic_server::loopback::Loopback;
use generic_server::registry::{ListOptions, Store};
use serde_json::Value;

/// How long a namespace's recount waits for more changes to gather.
const SETTLE: Duration = Duration::from_millis(300);
/// How often every quota is recounted (kube's `--resource-quota-sync-period`).
const RESYNC: Duration = Duration::from_secs(300);
/// Status writes tried per quota per recount.
const ATTEMPTS: usize = 3;

/// Recounts the quotas of namespaces.
pub struct ResourceQuotaController {
    client: Loopback,
    quotas: Arc<Store>,
    counted: Arc<Vec<Arc<Store>>>,
    pending: HashSet<String>,
}

/// A namespace whose quotas may need a recount.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync(pub String);

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

impl ResourceQuotaController {
    /// Starts the controller over `quotas`, counting the objects of
    /// `stores` (the server's own); ready when its informers have synced.
    pub fn start(client: Loopback, quotas: Arc<Store>, stores: Vec<Arc<Store>>) -> informer::Synced {
        let mut seen = HashSet::new();
        let counted: Vec<Arc<Store>> = stores
            .into_iter()
            .filter(|s| s.resource.namespaced)
            .filter(|s| seen.insert((s.resource.group.clone(), s.resource.plural.clone())))
            .collect();
        let controller = ResourceQuotaController {
            client,
            quotas: quotas.clone(),
            counted: Arc::new(counted.clone()),
            pending: HashSet::new(),
        }
        .start();
        for store in counted {
            let controller = controller.clone();
            let pods = store.resource.group.is_empty() && store.resource.plural == "pods";
            informer::follow(store, Duration::from_secs(3600), move |change| {
                // Deletions free quota, and so does a pod that has finished.
                let freed = match &change {
                    Change::Deleted(obj) => Some(obj),
                    Change::Present(pod) if pods => pod
                        .pointer("/status/phase")
                        .and_then(Value::as_str)
                        .filter(|p| matches!(*p, "Succeeded" | "Failed"))
                        .map(|_| pod),
                    Change::Present(_) => None,
                };
                if let Some(ns) = freed.and_then(namespace_of) {
                    controller.do_send(Sync(ns));
                }
                true
            });
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
            let quotas = this.quotas.clone();
            let me = ctx.address();
            tokio::spawn(async move {
                let Ok(all) = quotas.list("", &ListOptions::default()).await else {
                    return;
                };
                let namespaces: HashSet<String> =
                    all.items.iter().filter_map(|q| namespace_of(&q.value())).collect();
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
        ctx.run_later(SETTLE, move |this, _ctx| {
            this.pending.remove(&ns);
            let (client, quotas, counted) = (this.client.clone(), this.quotas.clone(), this.counted.clone());
            tokio::spawn(async move {
                if let Err(e) = recount(&client, &quotas, &counted, &ns).await {
                    tracing::warn!(namespace = %ns, error = %e, "recounting resource quotas failed");
                }
            });
        });
    }
}

/// What a quota's namespace uses of its `spec.hard`.
async fn usage(quota: &Value, counted: &[Arc<Store>], ns: &str) -> Result<ResourceList> {
    let hard = apimachinery::quantity::resource_list(quota.pointer("/spec/hard"));
    let mut used = ResourceList::new();
    for store in counted {
        let (group, plural) = (&store.resource.group, &store.resource.plural);
        if !hard.keys().any(|n| resource_quota::tracks(group, plural, n)) {
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
    Ok(used)
}

/// Recounts every quota of a namespace and writes the statuses that changed.
async fn recount(client: &Loopback, quotas: &Store, counted: &[Arc<Store>], ns: &str) -> Result<()> {
    for quota in quotas.list(ns, &ListOptions::default()).await?.items {
        let mut quota = quota.value();
        let name = quota["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let path = format!("/api/v1/namespaces/{ns}/resourcequotas/{name}");
        for _ in 0..ATTEMPTS {
            let status = serde_json::json!({
                "hard": quota.pointer("/spec/hard").cloned().unwrap_or_else(|| serde_json::json!({})),
                "used": to_json(&usage(&quota, counted, ns).await?),
            });
            if quota.get("status") == Some(&status) {
                break;
            }
            quota["status"] = status;
            match client.update(&format!("{path}/status"), &quota).await {
                Ok(_) => break,
                Err(e) if e.reason() == Reason::Conflict => quota = client.get(&path).await?,
                Err(e) if e.reason() == Reason::NotFound => break,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
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
        let (server, _) = ApiServer::in_memory(resources).await.expect("a server");
        let client = Loopback::new(server.clone(), "test");
        let quotas = server.store("", "v1", "resourcequotas").expect("quotas");
        ResourceQuotaController::start(client.clone(), quotas, server.stores())
            .wait()
            .await;
        let base = "/api/v1/namespaces/ns";
        for name in ["a", "b"] {
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
            client.create(&format!("{base}/configmaps"), &cm).await.expect("configmap");
        }
        let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
            "spec": {"hard": {"configmaps": "5", "count/configmaps": "5", "requests.cpu": "1", "widgets": "1"}}});
        client.create(&format!("{base}/resourcequotas"), &quota).await.expect("quota");
        let status = |want: Value| {
            let client = client.clone();
            async move {
                let mut last = Value::Null;
                for _ in 0..100 {
                    last = client.get(&format!("{base}/resourcequotas/q")).await.expect("quota");
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
        client.delete(&format!("{base}/configmaps/a")).await.expect("deleted");
        status(json!({"hard": hard, "used": {"configmaps": "1", "count/configmaps": "1", "requests.cpu": "0"}})).await;
    }
}
