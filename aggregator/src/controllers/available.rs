//! The availability controller: checks every APIService (local ones are
//! always available; remote ones resolve their Service to endpoints and
//! answer a discovery probe), keeps the proxy's routes and the remote
//! groups' discovery current on every replica, and, on the replica that
//! holds the lease, writes the `Available` condition.
//!
//! The probe's answer is also the group's discovery, so a group shows up
//! the moment its server is available, and goes Stale (last resources kept)
//! the moment it is not: no minute of staleness.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use generic_server::discovery::Discovery;
use generic_server::informer::Change;
use generic_server::loopback::Loopback;
use generic_server::registry::now_rfc3339;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::apiservice::{self, is_local};
use crate::proxy::{Route, Routes};
use generic_server::service_client::{self as backend, Clients, ServiceRef, Unavailable};

/// How often every APIService is checked even without events.
const RESYNC: Duration = Duration::from_secs(5);
/// The probe's timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Where the resources each aggregated server last reported are kept, so
/// that they outlive the aggregator: what a server that is down now may
/// still hold (the namespace controller waits for it only then).
use apimachinery::keys::AGGREGATED_DISCOVERY as REMEMBERED;

/// What the last check of a remote APIService found.
#[derive(Clone, Debug)]
struct Checked {
    endpoints: Vec<std::net::SocketAddr>,
    /// The version's resources (aggregated discovery form), last known.
    resources: Vec<Value>,
    result: Result<(), Unavailable>,
}

/// The controller actor.
pub struct AvailableConditionController {
    client: Loopback,
    clients: Arc<Clients>,
    discovery: Arc<Discovery>,
    routes: Routes,
    leader: watch::Receiver<bool>,
    apiservices: HashMap<String, Value>,
    checked: HashMap<String, Checked>,
    etcd: etcd_client::Client,
}

impl AvailableConditionController {
    /// A controller writing status through `client` when `leader` says so.
    pub fn new(
        client: Loopback,
        clients: Arc<Clients>,
        discovery: Arc<Discovery>,
        routes: Routes,
        leader: watch::Receiver<bool>,
        etcd: etcd_client::Client,
    ) -> Self {
        AvailableConditionController {
            client,
            clients,
            discovery,
            routes,
            leader,
            apiservices: HashMap::new(),
            checked: HashMap::new(),
            etcd,
        }
    }

    fn check(&self, name: String, ctx: &mut Context<Self>) {
        let Some(svc) = self.apiservices.get(&name).cloned() else {
            return;
        };
        if is_local(&svc) {
            self.write_condition(&svc, Ok(()), ctx);
            return;
        }
        let (client, clients) = (self.client.clone(), self.clients.clone());
        let known = self.checked.get(&name).map(|c| c.resources.clone());
        let (mut etcd, key) = (self.etcd.clone(), format!("{REMEMBERED}{name}"));
        let leads = *self.leader.borrow();
        ctx.spawn(
            async move {
                let previous = match known {
                    Some(known) => known,
                    None => remembered(&mut etcd, &key).await,
                };
                let result = probe(&client, &clients, &svc).await;
                if let Ok((_, resources)) = &result
                    && leads
                    && *resources != previous
                    && let Ok(json) = serde_json::to_string(resources)
                    && let Err(e) = etcd.put(key.as_str(), json, None).await
                {
                    tracing::debug!(%key, error = %e, "cannot remember discovery");
                }
                (result, previous)
            }
            .into_actor(self)
            .map(move |(result, previous), this, ctx| {
                let checked = match result {
                    Ok((endpoints, resources)) => Checked {
                        endpoints,
                        resources,
                        result: Ok(()),
                    },
                    Err((endpoints, reason)) => Checked {
                        endpoints,
                        resources: previous,
                        result: Err(reason),
                    },
                };
                let changed = this.checked.get(&name).is_none_or(|old| {
                    old.result != checked.result
                        || old.resources != checked.resources
                        || old.endpoints != checked.endpoints
                });
                this.checked.insert(name.clone(), checked.clone());
                if changed {
                    this.publish();
                }
                if let Some(svc) = this.apiservices.get(&name).cloned() {
                    this.write_condition(&svc, checked.result, ctx);
                }
            }),
        );
    }

    /// Swaps in the routes and the remote groups' discovery.
    fn publish(&self) {
        let mut routes = HashMap::new();
        let mut versions: HashMap<String, Vec<(i64, Value)>> = HashMap::new();
        let mut priorities: HashMap<String, i64> = HashMap::new();
        for (name, svc) in &self.apiservices {
            let group = svc
                .pointer("/spec/group")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let version = svc
                .pointer("/spec/version")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let priority = svc
                .pointer("/spec/groupPriorityMinimum")
                .and_then(Value::as_i64)
                .unwrap_or(1000);
            let entry = priorities.entry(group.clone()).or_insert(priority);
            *entry = (*entry).max(priority);
            let Some(service) = ServiceRef::of(svc) else {
                continue;
            };
            let checked = self.checked.get(name);
            let available = checked.is_some_and(|c| c.result.is_ok());
            let endpoints = checked.map(|c| c.endpoints.clone()).unwrap_or_default();
            routes.insert(
                (group.clone(), version.clone()),
                Route {
                    apiservice: svc.clone(),
                    service,
                    endpoints,
                    available,
                },
            );
            let resources = checked.map(|c| c.resources.clone()).unwrap_or_default();
            let freshness = if available { "Current" } else { "Stale" };
            let version_priority = svc
                .pointer("/spec/versionPriority")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            versions.entry(group).or_default().push((
                version_priority,
                json!({"version": version, "resources": resources, "freshness": freshness}),
            ));
        }
        *self.routes.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(routes);
        let groups: Vec<Value> = versions
            .into_iter()
            .map(|(group, mut list)| {
                list.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| {
                    generic_server::discovery::compare_versions(a.1["version"].as_str().unwrap_or(""), b.1["version"].as_str().unwrap_or(""))
                }));
                json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": list.into_iter().map(|(_, v)| v).collect::<Vec<_>>()})
            })
            .collect();
        self.discovery.set_priorities(priorities);
        self.discovery.set_remote(groups);
    }

    /// Writes the Available condition, if this replica leads and it changed.
    fn write_condition(
        &self,
        svc: &Value,
        result: Result<(), Unavailable>,
        ctx: &mut Context<Self>,
    ) {
        if !*self.leader.borrow() {
            return;
        }
        let (status, reason, message) = match (&result, is_local(svc)) {
            (Ok(()), true) => (
                "True",
                "Local",
                "Local APIServices are always available".to_string(),
            ),
            (Ok(()), false) => ("True", "Passed", "all checks passed".to_string()),
            (Err(e), _) => ("False", e.reason, e.message.clone()),
        };
        let current = apiservice::available(svc);
        if current.is_some_and(|c| {
            c["status"] == status && c["reason"] == reason && c["message"] == message.as_str()
        }) {
            return;
        }
        let since = match current {
            Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
            _ => json!(now_rfc3339()),
        };
        let mut updated = svc.clone();
        updated["status"] = json!({"conditions": [{"type": "Available", "status": status, "lastTransitionTime": since, "reason": reason, "message": message}]});
        let client = self.client.clone();
        let name = svc
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        ctx.spawn(
            async move {
                let path = format!("/apis/apiregistration.k8s.io/v1/apiservices/{name}/status");
                if let Err(e) = client.update(&path, &updated).await {
                    tracing::debug!(apiservice = %name, error = %e, "status not written (will retry)");
                }
            }
            .into_actor(self),
        );
    }
}

/// Resolves and probes a remote APIService; on success its endpoints and
/// resources, otherwise the endpoints found and why it is unavailable.
async fn probe(
    client: &Loopback,
    clients: &Clients,
    svc: &Value,
) -> Result<(Vec<std::net::SocketAddr>, Vec<Value>), (Vec<std::net::SocketAddr>, Unavailable)> {
    let Some(service) = ServiceRef::of(svc) else {
        return Ok((Vec::new(), Vec::new()));
    };
    let endpoints = backend::resolve(client, &service)
        .await
        .map_err(|e| (Vec::new(), e))?;
    let group = svc
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = svc
        .pointer("/spec/version")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let path = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut failure = String::from("no endpoint answered");
    for endpoint in &endpoints {
        let ca = svc
            .pointer("/spec/caBundle")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let insecure = svc.pointer("/spec/insecureSkipTLSVerify") == Some(&Value::Bool(true));
        let http = match clients.client(ca, insecure, &service, *endpoint) {
            Ok(c) => c,
            Err(e) => {
                return Err((
                    endpoints.clone(),
                    Unavailable {
                        reason: "FailedDiscoveryCheck",
                        message: e.to_string(),
                    },
                ));
            }
        };
        let url = format!(
            "https://{}:{}{path}",
            service.server_name(),
            endpoint.port()
        );
        let sent = http
            .get(&url)
            .header("X-Remote-User", "system:kube-aggregator")
            .header("X-Remote-Group", "system:masters")
            .header("Accept", "application/json")
            .timeout(PROBE_TIMEOUT)
            .send()
            .await;
        match sent {
            Ok(resp) if resp.status().is_success() || resp.status().is_redirection() => {
                let list: Value = resp
                    .bytes()
                    .await
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or_default();
                return Ok((endpoints, resources_of(&list)));
            }
            Ok(resp) => {
                failure = format!(
                    "failing or missing response from {url}: bad status from {url}: {}",
                    resp.status().as_u16()
                )
            }
            Err(e) => {
                failure = format!(
                    "failing or missing response from {url}: Get \"{url}\": {}",
                    generic_server::service_client::describe(&e)
                )
            }
        }
    }
    Err((
        endpoints,
        Unavailable {
            reason: "FailedDiscoveryCheck",
            message: failure,
        },
    ))
}

/// The resources an aggregated server last reported, as remembered in etcd.
async fn remembered(etcd: &mut etcd_client::Client, key: &str) -> Vec<Value> {
    let Ok(resp) = etcd.get(key, None).await else {
        return Vec::new();
    };
    resp.kvs()
        .first()
        .and_then(|kv| serde_json::from_slice(kv.value()).ok())
        .unwrap_or_default()
}

/// Aggregated-discovery resources from a legacy `APIResourceList`.
fn resources_of(list: &Value) -> Vec<Value> {
    let items = list["resources"].as_array().cloned().unwrap_or_default();
    let mut out: Vec<Value> = Vec::new();
    for r in items
        .iter()
        .filter(|r| !r["name"].as_str().unwrap_or_default().contains('/'))
    {
        let mut entry = json!({
            "resource": r["name"],
            // As kube's: the group and version only where they differ.
            "responseKind": {"group": "", "version": "", "kind": r["kind"]},
            "scope": if r["namespaced"] == true { "Namespaced" } else { "Cluster" },
            "singularResource": r.get("singularName").cloned().unwrap_or(json!("")),
            "verbs": r.get("verbs").cloned().unwrap_or(json!([])),
        });
        for field in ["shortNames", "categories"] {
            if let Some(v) = r.get(field) {
                entry[field] = v.clone();
            }
        }
        out.push(entry);
    }
    for sub in items
        .iter()
        .filter(|r| r["name"].as_str().unwrap_or_default().contains('/'))
    {
        let name = sub["name"].as_str().unwrap_or_default();
        let (parent, subresource) = name.split_once('/').unwrap_or((name, ""));
        if let Some(entry) = out.iter_mut().find(|e| e["resource"] == parent) {
            let kind = json!({"group": sub.get("group").cloned().unwrap_or(json!("")), "version": sub.get("version").cloned().unwrap_or(json!("")), "kind": sub["kind"]});
            let item = json!({"subresource": subresource, "responseKind": kind, "verbs": sub.get("verbs").cloned().unwrap_or(json!([]))});
            match entry.get_mut("subresources").and_then(Value::as_array_mut) {
                Some(list) => list.push(item),
                None => entry["subresources"] = json!([item]),
            }
        }
    }
    out
}

impl Actor for AvailableConditionController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(RESYNC, |this, ctx| {
            for name in this.apiservices.keys().cloned().collect::<Vec<_>>() {
                this.check(name, ctx);
            }
        });
    }
}

/// An APIService changed (from the informer).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync(pub Change);

/// A Service or EndpointSlice changed: recheck the remote APIServices.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Recheck;

impl Handler<Sync> for AvailableConditionController {
    type Result = ();

    fn handle(&mut self, Sync(change): Sync, ctx: &mut Context<Self>) {
        match change {
            Change::Present(svc) => {
                let name = svc
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let spec_changed = self
                    .apiservices
                    .get(&name)
                    .is_none_or(|old| old["spec"] != svc["spec"]);
                self.apiservices.insert(name.clone(), svc);
                if spec_changed {
                    self.publish();
                }
                self.check(name, ctx);
            }
            Change::Deleted(svc) => {
                let name = svc
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                self.apiservices.remove(name);
                self.checked.remove(name);
                self.publish();
                if *self.leader.borrow() {
                    let (mut etcd, key) = (self.etcd.clone(), format!("{REMEMBERED}{name}"));
                    ctx.spawn(
                        async move {
                            let _ = etcd.delete(key.as_str(), None).await;
                        }
                        .into_actor(self),
                    );
                }
            }
        }
    }
}

impl Handler<Recheck> for AvailableConditionController {
    type Result = ();

    fn handle(&mut self, _: Recheck, ctx: &mut Context<Self>) {
        let remote: Vec<String> = self
            .apiservices
            .iter()
            .filter(|(_, s)| !is_local(s))
            .map(|(n, _)| n.clone())
            .collect();
        for name in remote {
            self.check(name, ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_resource_lists_become_aggregated_entries() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "metrics.k8s.io/v1beta1", "resources": [
            {"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"]},
            {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]},
            {"name": "pods/status", "namespaced": true, "kind": "PodMetrics", "verbs": ["get"]},
        ]});
        let entries = resources_of(&list);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0]["scope"], "Cluster");
        assert_eq!(entries[1]["responseKind"]["kind"], "PodMetrics");
        assert_eq!(entries[1]["subresources"][0]["subresource"], "status");
    }
}
