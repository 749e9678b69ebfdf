//! Autoregistration: a local APIService for every group and version the
//! chain serves (built-ins and every served CRD version), with
//! kube-apiserver's priorities, so `kubectl get apiservices` looks like a
//! real cluster's. Only the replica holding the lease writes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use apimachinery::error::Reason;
use futures::StreamExt as _;
use generic_server::Error::NotReady;
use generic_server::discovery::{Discovery, Group, group_priority};
use generic_server::health::HealthCheck;
use generic_server::loopback::Loopback;
use generic_server::registry::{ListOptions, Store};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;

use crate::apiservice::is_local;

/// The label kube-aggregator puts on what it manages.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";
const PATH: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

/// An APIService name: `v1.` for core, `<version>.<group>` otherwise.
fn name_of(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// kube-apiserver's version priorities: GA 15, beta 9, alpha 1; a custom
/// resource's versions 100.
fn version_priority(version: &str, builtin: bool) -> i64 {
    if !builtin {
        return 100;
    }
    if version.contains("alpha") {
        1
    } else if version.contains("beta") {
        9
    } else {
        15
    }
}

/// The local APIServices the chain's discovery calls for.
pub fn desired(groups: &[Group]) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for group in groups {
        let name = group
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let builtin = group_priority(name) != 1000;
        for version in group["versions"].as_array().into_iter().flatten() {
            let v = version["version"].as_str().unwrap_or_default();
            let apiservice = json!({
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": name_of(name, v), "labels": {AUTOMANAGED: if builtin { "onstart" } else { "true" }}},
                "spec": {
                    "group": name,
                    "version": v,
                    "groupPriorityMinimum": if builtin { group_priority(name) } else { 1000 },
                    "versionPriority": version_priority(v, builtin),
                },
            });
            out.insert(name_of(name, v), apiservice);
        }
    }
    out
}

/// The autoregistration controller: keeps local APIServices in step with
/// discovery while this replica leads. One reconcile runs at a time; a
/// change during one is taken up when it ends, a failure a second later.
pub struct AutoRegistration {
    client: Loopback,
    discovery: Arc<Discovery>,
    leader: watch::Receiver<bool>,
    running: bool,
    again: bool,
}

impl AutoRegistration {
    /// A controller writing through `client` while `leader` says so.
    pub fn new(client: Loopback, discovery: Arc<Discovery>, leader: watch::Receiver<bool>) -> Self {
        AutoRegistration {
            client,
            discovery,
            leader,
            running: false,
            again: false,
        }
    }
}

/// Discovery or the leadership changed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Changed;

impl Actor for AutoRegistration {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.add_stream(WatchStream::new(self.discovery.subscribe()).map(|_| Changed));
        ctx.add_stream(WatchStream::new(self.leader.clone()).map(|_| Changed));
    }
}

impl StreamHandler<Changed> for AutoRegistration {
    fn handle(&mut self, _: Changed, ctx: &mut Context<Self>) {
        ctx.notify(Changed);
    }

    fn finished(&mut self, _ctx: &mut Context<Self>) {}
}

impl Handler<Changed> for AutoRegistration {
    type Result = ();

    fn handle(&mut self, _: Changed, ctx: &mut Context<Self>) {
        if !*self.leader.borrow() {
            return;
        }
        if self.running {
            self.again = true;
            return;
        }
        self.running = true;
        let (client, groups) = (self.client.clone(), self.discovery.local());
        ctx.spawn(
            async move { reconcile(&client, &groups).await }
                .into_actor(self)
                .map(|result, this, ctx| {
                    this.running = false;
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "autoregistration incomplete; retrying");
                        ctx.notify_later(Changed, Duration::from_secs(1));
                    } else if std::mem::take(&mut this.again) {
                        ctx.notify(Changed);
                    }
                }),
        );
    }
}

/// kube's `autoregister-completion` readiness check: ready once the
/// delegates' discovery has arrived and every group/version it serves has
/// its local APIService (whichever replica wrote them).
pub fn completion_check(apiservices: Arc<Store>, discovery: Arc<Discovery>) -> HealthCheck {
    Arc::new(move || {
        let (apiservices, discovery) = (apiservices.clone(), discovery.clone());
        Box::pin(async move {
            if !discovery.delegates_known() {
                return Err(NotReady("no discovery from the delegates yet".into()));
            }
            let cached = ListOptions {
                resource_version: Some("0".into()),
                ..Default::default()
            };
            let list = apiservices
                .list("", &cached)
                .await
                .map_err(|e| NotReady(e.to_string()))?;
            let existing: std::collections::HashSet<&str> =
                list.items.iter().map(|s| s.name.as_str()).collect();
            let missing = desired(&discovery.local())
                .into_keys()
                .filter(|name| !existing.contains(&name.as_str()))
                .count();
            match missing {
                0 => Ok(()),
                n => Err(NotReady(format!("{n} APIServices not registered yet"))),
            }
        })
    })
}

/// Creates missing local APIServices and deletes automanaged ones whose
/// group/version is no longer served.
async fn reconcile(client: &Loopback, groups: &[Group]) -> apimachinery::Result<()> {
    let wanted = desired(groups);
    let list = client.get(PATH).await?;
    let existing: HashMap<String, Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            Some((
                s.pointer("/metadata/name")?.as_str()?.to_string(),
                s.clone(),
            ))
        })
        .collect();
    for (name, apiservice) in &wanted {
        if !existing.contains_key(name) {
            match client.create(PATH, apiservice).await {
                Ok(_) => tracing::info!(apiservice = %name, "registered"),
                Err(e) if e.reason() == Reason::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
    }
    for (name, svc) in &existing {
        let automanaged = svc
            .pointer(&format!(
                "/metadata/labels/{}",
                AUTOMANAGED.replace('/', "~1")
            ))
            .and_then(Value::as_str);
        if automanaged == Some("true") && is_local(svc) && !wanted.contains_key(name) {
            match client.delete(&format!("{PATH}/{name}")).await {
                Ok(_) => tracing::info!(apiservice = %name, "unregistered"),
                Err(e) if e.reason() == Reason::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use generic_server::server::ApiServer;

    use super::*;

    /// A client of a server holding APIServices over memory storage.
    async fn client() -> Loopback {
        let (server, _) = ApiServer::in_memory(vec![crate::apiservice::resource()])
            .await
            .expect("a server");
        Loopback::new(server, "test")
    }

    /// The names of the APIServices once `done` says they are what is wanted (5 s at most).
    async fn apiservices(client: &Loopback, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let mut names = Vec::new();
        for _ in 0..100 {
            let list = client.get(PATH).await.expect("a list");
            names = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.pointer("/metadata/name")?.as_str().map(String::from))
                .collect();
            if done(&names) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        names
    }

    fn group(name: &str, versions: &[&str]) -> Value {
        let versions: Vec<Value> = versions
            .iter()
            .map(|v| json!({"version": v, "resources": []}))
            .collect();
        json!({"metadata": {"name": name}, "versions": versions})
    }

    #[actix::test]
    async fn the_leader_registers_what_discovery_serves_and_unregisters_what_it_stops_serving() {
        let client = client().await;
        let discovery = Arc::new(Discovery::default());
        discovery.set_own(vec![group("", &["v1"]), group("example.com", &["v1"])]);
        let (lead, leader) = watch::channel(false);
        AutoRegistration::new(client.clone(), discovery.clone(), leader).start();

        // Not leading: nothing is written.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(apiservices(&client, |_| true).await.is_empty());

        lead.send(true).expect("sent");
        let names = apiservices(&client, |n| n.len() == 2).await;
        assert_eq!(names, ["v1.", "v1.example.com"]);

        // A served version goes (a CRD deleted): its automanaged APIService goes too.
        discovery.set_own(vec![group("", &["v1"]), group("example.com", &["v2"])]);
        let names = apiservices(&client, |n| {
            n.iter().any(|s| s == "v2.example.com") && n.len() == 2
        })
        .await;
        assert_eq!(names, ["v1.", "v2.example.com"]);
    }

    #[test]
    fn builtin_and_custom_priorities() {
        let groups = [
            json!({"metadata": {"name": ""}, "versions": [{"version": "v1"}]}),
            json!({"metadata": {"name": "apps"}, "versions": [{"version": "v1"}]}),
            json!({"metadata": {"name": "example.com"}, "versions": [{"version": "v2"}, {"version": "v1beta1"}]}),
        ]
        .map(Group::new);
        let wanted = desired(&groups);
        assert_eq!(
            wanted.keys().collect::<Vec<_>>(),
            vec!["v1.", "v1.apps", "v1beta1.example.com", "v2.example.com"]
        );
        assert_eq!(wanted["v1."]["spec"]["groupPriorityMinimum"], 18000);
        assert_eq!(wanted["v1.apps"]["spec"]["versionPriority"], 15);
        assert_eq!(
            wanted["v2.example.com"]["spec"]["groupPriorityMinimum"],
            1000
        );
        assert_eq!(
            wanted["v2.example.com"]["metadata"]["labels"][AUTOMANAGED],
            "true"
        );
    }
}
