//! The ServiceCIDR controller (kube-controller-manager's `servicecidrs`):
//! every ServiceCIDR gets the finalizer `networking.k8s.io/service-cidr-finalizer`
//! and the condition Ready=True. One being deleted keeps its finalizer
//! while an IPAddress of the allocator lies in it and in no other
//! ServiceCIDR that stays (Ready=False, reason Terminating); once none
//! does, and the allocators have had time to see the deletion, the
//! finalizer goes and the ServiceCIDR with it.

use std::time::Duration;

use actix::prelude::*;
use apimachinery::error::{Reason, Result};
use generic_server::loopback::Loopback;
use generic_server::registry::now_rfc3339;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::default_service_cidr::SERVICE_CIDRS;
use crate::cluster_ip::{self, ClusterIps, FINALIZER, Prefix, managed, prefixes, terminating};

/// How long a deleted ServiceCIDR keeps its finalizer at least, so no
/// allocator still takes IPs from it (kube's `deletionGracePeriod`).
const DELETION_GRACE: Duration = Duration::from_secs(10);

/// The message of Ready=True.
const READY: &str = "Kubernetes Service CIDR is ready";
/// The message of Ready=False while IPs hold a deleted ServiceCIDR.
const BLOCKED: &str = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR";

/// What a ServiceCIDR needs next.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Add the finalizer.
    AddFinalizer,
    /// Write Ready=True.
    MarkReady,
    /// Write Ready=False, reason Terminating: IPs still need it.
    MarkBlocked,
    /// Look again after this long (the deletion grace).
    Wait(Duration),
    /// Remove the finalizer: it may go.
    RemoveFinalizer,
    /// Nothing to write.
    Nothing,
}

fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

fn has_finalizer(obj: &Value) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// The Ready condition of a ServiceCIDR.
fn ready_condition(obj: &Value) -> Option<&Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == "Ready")
}

/// Whether `cidr` may go without orphaning an IPAddress: every range of it
/// lies within another ServiceCIDR that stays, or no IPAddress of the
/// allocator lies in it alone.
pub fn can_delete(cidr: &Value, all: &[Value], addresses: &[Value]) -> bool {
    let others: Vec<Prefix> = all
        .iter()
        .filter(|c| name(c) != name(cidr) && !terminating(c))
        .flat_map(prefixes)
        .collect();
    let own = prefixes(cidr);
    if own.iter().all(|p| others.iter().any(|o| o.covers(p))) {
        return true;
    }
    addresses.iter().filter(|a| managed(a)).all(|address| {
        let Some(ip) = name(address).parse().ok() else {
            return true;
        };
        !own.iter().any(|p| p.contains(ip)) || others.iter().any(|o| o.contains(ip))
    })
}

/// What `cidr` needs, among `all` the ServiceCIDRs and the IPAddresses, at `now`.
pub fn step(cidr: &Value, all: &[Value], addresses: &[Value], now: OffsetDateTime) -> Step {
    let ready = ready_condition(cidr);
    if terminating(cidr) {
        if !has_finalizer(cidr) {
            return Step::Nothing;
        }
        if !can_delete(cidr, all, addresses) {
            let blocked =
                ready.is_some_and(|c| c["status"] == "False" && c["reason"] == "Terminating");
            return if blocked {
                Step::Nothing
            } else {
                Step::MarkBlocked
            };
        }
        let deleted = cidr["metadata"]["deletionTimestamp"]
            .as_str()
            .and_then(|t| {
                OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
            })
            .unwrap_or(now);
        let left = DELETION_GRACE.saturating_sub((now - deleted).try_into().unwrap_or_default());
        return if left.is_zero() {
            Step::RemoveFinalizer
        } else {
            Step::Wait(left)
        };
    }
    if !has_finalizer(cidr) {
        return Step::AddFinalizer;
    }
    if ready.is_some_and(|c| c["status"] == "True" && c["message"] == READY) {
        Step::Nothing
    } else {
        Step::MarkReady
    }
}

/// The ServiceCIDR with its Ready condition set (the transition time kept
/// when the status stays).
fn with_ready(cidr: &Value, status: &str, reason: &str, message: &str) -> Value {
    let mut conditions: Vec<Value> = cidr
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let since = ready_condition(cidr)
        .filter(|c| c["status"] == status)
        .and_then(|c| c["lastTransitionTime"].as_str().map(str::to_string))
        .unwrap_or_else(now_rfc3339);
    conditions.retain(|c| c["type"] != "Ready");
    conditions.push(
        json!({"type": "Ready", "status": status, "lastTransitionTime": since,
        "reason": reason, "message": message}),
    );
    let mut updated = cidr.clone();
    updated["status"]["conditions"] = json!(conditions);
    updated
}

/// The ServiceCIDR with its finalizers changed: ours added or removed.
fn with_finalizer(cidr: &Value, present: bool) -> Value {
    let mut finalizers: Vec<Value> = cidr
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    finalizers.retain(|f| f != FINALIZER);
    if present {
        finalizers.push(json!(FINALIZER));
    }
    let mut updated = cidr.clone();
    updated["metadata"]["finalizers"] = json!(finalizers);
    updated
}

/// Keeps the finalizer and Ready condition of every ServiceCIDR.
pub struct ServiceCidrController {
    client: Loopback,
    cluster_ips: ClusterIps,
}

impl ServiceCidrController {
    /// A controller reading through `cluster_ips`' stores, writing through `client`.
    pub fn new(client: Loopback, cluster_ips: ClusterIps) -> Self {
        ServiceCidrController {
            client,
            cluster_ips,
        }
    }
}

impl Actor for ServiceCidrController {
    type Context = Context<Self>;
}

/// A ServiceCIDR (by name) changed: see what it needs.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync(pub String);

/// An IPAddress went: ServiceCIDRs being deleted may go now.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SyncTerminating;

/// Carries out what a ServiceCIDR needs; how long to wait, if it must.
async fn reconcile(
    client: Loopback,
    cluster_ips: ClusterIps,
    key: String,
) -> Result<Option<Duration>> {
    let all = cluster_ips.service_cidrs().await?;
    let Some(cidr) = all.iter().find(|c| name(c) == key) else {
        return Ok(None);
    };
    let addresses = cluster_ips.ip_addresses().await?;
    let path = format!("{SERVICE_CIDRS}/{key}");
    let write = match step(cidr, &all, &addresses, OffsetDateTime::now_utc()) {
        Step::Nothing => return Ok(None),
        Step::Wait(left) => return Ok(Some(left)),
        Step::AddFinalizer => client.update(&path, &with_finalizer(cidr, true)).await,
        Step::RemoveFinalizer => {
            tracing::info!(servicecidr = %key, "no IPAddress needs the ServiceCIDR any more: removing its finalizer");
            client.update(&path, &with_finalizer(cidr, false)).await
        }
        Step::MarkReady => {
            client
                .update(
                    &format!("{path}/status"),
                    &with_ready(cidr, "True", "", READY),
                )
                .await
        }
        Step::MarkBlocked => {
            tracing::info!(servicecidr = %key, "deleting the ServiceCIDR is blocked by IPAddresses in it");
            client
                .update(
                    &format!("{path}/status"),
                    &with_ready(cidr, "False", "Terminating", BLOCKED),
                )
                .await
        }
    };
    match write {
        Ok(_) => Ok(None),
        // Changed or gone meanwhile: its next event brings it back.
        Err(e) if matches!(e.reason(), Reason::Conflict | Reason::NotFound) => Ok(None),
        Err(e) => Err(e),
    }
}

impl Handler<Sync> for ServiceCidrController {
    type Result = ();

    fn handle(&mut self, Sync(key): Sync, ctx: &mut Context<Self>) {
        let (client, cluster_ips) = (self.client.clone(), self.cluster_ips.clone());
        let again = key.clone();
        ctx.spawn(reconcile(client, cluster_ips, key).into_actor(self).map(
            move |result, _, ctx| match result {
                Ok(Some(left)) => {
                    ctx.notify_later(Sync(again), left);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::info!(servicecidr = %again, %error, "syncing a ServiceCIDR, again soon");
                    ctx.notify_later(Sync(again), Duration::from_secs(1));
                }
            },
        ));
    }
}

impl Handler<SyncTerminating> for ServiceCidrController {
    type Result = ();

    fn handle(&mut self, _: SyncTerminating, ctx: &mut Context<Self>) {
        let cluster_ips = self.cluster_ips.clone();
        ctx.spawn(
            async move { cluster_ips.service_cidrs().await.unwrap_or_default() }
                .into_actor(self)
                .map(|all, _, ctx| {
                    for cidr in all.iter().filter(|c| terminating(c)) {
                        ctx.notify(Sync(name(cidr).to_string()));
                    }
                }),
        );
    }
}

/// Whether an IPAddress change may unblock a deletion.
pub fn unblocks(change: &generic_server::informer::Change) -> bool {
    matches!(change, generic_server::informer::Change::Deleted(a) if cluster_ip::managed(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(name: &str, cidrs: Value) -> Value {
        json!({"metadata": {"name": name, "finalizers": [FINALIZER]}, "spec": {"cidrs": cidrs},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "", "message": READY,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    }

    fn deleting(mut obj: Value, at: &str) -> Value {
        obj["metadata"]["deletionTimestamp"] = json!(at);
        obj
    }

    fn address(ip: &str) -> Value {
        cluster_ip::ip_address(ip.parse().expect("an IP"), "default", "web")
    }

    fn at(t: &str) -> OffsetDateTime {
        OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).expect("a time")
    }

    #[test]
    fn a_new_service_cidr_gets_the_finalizer_then_ready() {
        let now = at("2026-01-01T00:00:00Z");
        let mut bare = json!({"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.200.0.0/16"]}});
        assert_eq!(step(&bare, &[], &[], now), Step::AddFinalizer);
        bare = with_finalizer(&bare, true);
        assert_eq!(bare["metadata"]["finalizers"], json!([FINALIZER]));
        assert_eq!(step(&bare, &[], &[], now), Step::MarkReady);
        let ready = with_ready(&bare, "True", "", READY);
        assert_eq!(step(&ready, &[], &[], now), Step::Nothing);
        // The default controller's message is replaced by this controller's.
        let mut default = ready.clone();
        default["status"]["conditions"][0]["message"] =
            json!("Kubernetes default Service CIDR is ready");
        assert_eq!(step(&default, &[], &[], now), Step::MarkReady);
        let kept = with_ready(&default, "True", "", READY);
        assert_eq!(
            kept["status"]["conditions"][0]["lastTransitionTime"],
            default["status"]["conditions"][0]["lastTransitionTime"],
            "no transition"
        );
    }

    #[test]
    fn a_deleted_service_cidr_waits_for_the_ips_only_it_covers() {
        let now = at("2026-01-01T00:01:00Z");
        let extra = deleting(
            cidr("extra", json!(["10.200.0.0/16"])),
            "2026-01-01T00:00:00Z",
        );
        let kubernetes = cidr("kubernetes", json!(["10.96.0.0/12"]));
        let all = [kubernetes.clone(), extra.clone()];
        // An IP in it: blocked, Terminating.
        let inside = [address("10.200.0.5"), address("10.96.0.1")];
        assert_eq!(step(&extra, &all, &inside, now), Step::MarkBlocked);
        let blocked = with_ready(&extra, "False", "Terminating", BLOCKED);
        let condition = &blocked["status"]["conditions"][0];
        assert_eq!(
            (&condition["status"], &condition["reason"]),
            (&json!("False"), &json!("Terminating"))
        );
        assert_eq!(
            step(&blocked, &all, &inside, now),
            Step::Nothing,
            "written once"
        );
        // An IP not the allocator's does not block.
        let mut foreign = address("10.200.0.5");
        foreign["metadata"]["labels"] = json!({});
        assert_eq!(step(&extra, &all, &[foreign], now), Step::RemoveFinalizer);
        // No IP in it: the finalizer goes once the grace has passed.
        assert_eq!(
            step(&extra, &all, &[address("10.96.0.1")], now),
            Step::RemoveFinalizer
        );
        let early = at("2026-01-01T00:00:04Z");
        assert_eq!(
            step(&extra, &all, &[], early),
            Step::Wait(Duration::from_secs(6))
        );
        // Another ServiceCIDR that stays covers it: IPs in it do not block.
        let wider = cidr("wider", json!(["10.0.0.0/8"]));
        let covered = [kubernetes.clone(), extra.clone(), wider.clone()];
        assert_eq!(step(&extra, &covered, &inside, now), Step::RemoveFinalizer);
        // ... unless that one is going too.
        let going = deleting(wider, "2026-01-01T00:00:00Z");
        assert_eq!(
            step(&extra, &[kubernetes, extra.clone(), going], &inside, now),
            Step::MarkBlocked
        );
        // Without the finalizer, nothing is left to do.
        assert_eq!(
            step(&with_finalizer(&extra, false), &all, &inside, now),
            Step::Nothing
        );
    }
}
