//! Service cluster IPs and node ports: allocated when a Service is written
//! (an admission plugin), released when it goes (a repair actor that also
//! reclaims what a failed write left behind, and records a Service's IP
//! that has no IPAddress).
//!
//! A cluster IP is an IPAddress object ([`crate::cluster_ip`]); a node port
//! an etcd key. Each is created only if absent, so replicas of the core
//! server never hand out the same IP or port twice.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::ops::RangeInclusive;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::cluster_ip::{self, AllocationError, ClusterIps};
use actix::prelude::*;
use apimachinery::error::{Error, FieldError, Result};
use bytes::Bytes;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation};
use generic_server::informer::{self, Change};
use generic_server::registry::{Store, now_rfc3339};
use generic_server::storage::{Storage, prefix_end};
use rand::Rng;
use serde_json::{Value, json};

/// Where allocations live in etcd.
use apimachinery::keys::ALLOCATIONS as PREFIX;
/// An allocation younger than this is never reclaimed (its Service may be
/// in the middle of being created).
const GRACE: Duration = Duration::from_secs(60);

/// The service IP range (the default ServiceCIDR's) and node port range.
#[derive(Debug, Clone)]
pub struct Ranges {
    base: u32,
    cidr: String,
    node_ports: RangeInclusive<u16>,
}

impl Ranges {
    /// Parses a CIDR such as `10.96.0.0/12` and a node port range.
    pub fn new(cidr: &str, node_ports: RangeInclusive<u16>) -> std::result::Result<Ranges, String> {
        let (ip, bits) = cidr
            .split_once('/')
            .ok_or_else(|| format!("{cidr} is not a CIDR"))?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| format!("{cidr}: bad address"))?;
        let bits: u32 = bits
            .parse()
            .ok()
            .filter(|b| (8..=30).contains(b))
            .ok_or_else(|| format!("{cidr}: prefix must be 8..=30"))?;
        let size = 1u32 << (32 - bits);
        let base = u32::from(ip) & !(size - 1);
        Ok(Ranges {
            base,
            cidr: format!("{}/{bits}", Ipv4Addr::from(base)),
            node_ports,
        })
    }

    /// The first usable address: the `kubernetes` service's.
    pub fn first(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.base + 1)
    }

    /// The service IP range, canonical (the default ServiceCIDR's `spec.cidrs`).
    pub fn cidr(&self) -> &str {
        &self.cidr
    }
}

fn port_key(port: i64) -> String {
    format!("{PREFIX}nodeports/{port}")
}

fn holder(namespace: &str, name: &str) -> Bytes {
    Bytes::from(json!({"namespace": namespace, "name": name, "time": now_rfc3339()}).to_string())
}

fn held_by(value: &[u8], namespace: &str, name: &str) -> bool {
    serde_json::from_slice::<Value>(value)
        .is_ok_and(|v| v["namespace"] == namespace && v["name"] == name)
}

/// Allocates cluster IPs and node ports for Services.
pub struct ServiceAllocator {
    storage: Arc<dyn Storage>,
    ranges: Ranges,
    cluster_ips: Arc<OnceLock<ClusterIps>>,
}

impl ServiceAllocator {
    /// An allocator keeping node ports in `storage` and cluster IPs as
    /// IPAddresses (once `cluster_ips` is set, when the stores are installed).
    pub fn new(
        storage: Arc<dyn Storage>,
        ranges: Ranges,
        cluster_ips: Arc<OnceLock<ClusterIps>>,
    ) -> Self {
        ServiceAllocator {
            storage,
            ranges,
            cluster_ips,
        }
    }

    /// Takes `key` for a service; Ok(false) if someone else holds it.
    async fn take(&self, key: &str, namespace: &str, name: &str, dry_run: bool) -> Result<bool> {
        if dry_run {
            let current = self.storage.get(key).await?;
            return Ok(current.is_none_or(|kv| held_by(&kv.value, namespace, name)));
        }
        match self.storage.create(key, holder(namespace, name)).await {
            Ok(_) => Ok(true),
            Err(generic_server::Error::AlreadyExists(_)) => {
                let current = self.storage.get(key).await?;
                Ok(current.is_some_and(|kv| held_by(&kv.value, namespace, name)))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn cluster_ip(
        &self,
        svc: &mut Value,
        old: Option<&Value>,
        attrs: &Attributes<'_>,
    ) -> Result<()> {
        let old_ip = old
            .and_then(|o| o.pointer("/spec/clusterIP"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let ip = svc
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if ip == "None" || (!old_ip.is_empty() && ip == old_ip) {
            return Ok(());
        }
        let invalid = |value: Value, detail: String| {
            Error::invalid(
                "",
                "Service",
                attrs.name,
                vec![FieldError::invalid("spec.clusterIPs", value, detail)],
            )
        };
        let ips = self
            .cluster_ips
            .get()
            .ok_or_else(|| Error::internal("the ClusterIP allocator is not ready"))?;
        let (namespace, name, dry_run) = (attrs.namespace, attrs.name, attrs.dry_run);
        let chosen = if ip.is_empty() {
            let ipv6 = svc
                .pointer("/spec/ipFamilies/0")
                .is_some_and(|f| f == "IPv6");
            match ips.allocate_next(ipv6, namespace, name, dry_run).await {
                Ok(ip) => ip.to_string(),
                Err(AllocationError::Api(e)) => return Err(e),
                Err(e) => {
                    return Err(Error::internal(format!(
                        "failed to allocate a serviceIP: {e}"
                    )));
                }
            }
        } else {
            let parsed: IpAddr = ip
                .parse()
                .map_err(|_| invalid(json!([ip]), "must be a valid IP address".into()))?;
            match ips.allocate(parsed, namespace, name, dry_run).await {
                Ok(()) => ip,
                Err(AllocationError::Api(e)) => return Err(e),
                Err(e) => {
                    return Err(invalid(
                        json!([ip]),
                        format!("failed to allocate IP {ip}: {e}"),
                    ));
                }
            }
        };
        svc["spec"]["clusterIP"] = json!(chosen);
        svc["spec"]["clusterIPs"] = json!([chosen]);
        Ok(())
    }

    async fn node_ports(
        &self,
        svc: &mut Value,
        old: Option<&Value>,
        attrs: &Attributes<'_>,
    ) -> Result<()> {
        let old_ports = old.map(node_ports_of).unwrap_or_default();
        let count = svc
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        // Ports this Service already names: a random pick must not repeat
        // one, though the Service itself holds it.
        let mut claimed = node_ports_of(svc);
        for i in 0..count {
            let pointer = format!("/spec/ports/{i}/nodePort");
            let requested = svc.pointer(&pointer).and_then(Value::as_i64).unwrap_or(0);
            if requested != 0 && old_ports.contains(&requested) {
                continue;
            }
            let port = if requested == 0 {
                let mut found = None;
                let range = self.ranges.node_ports.clone();
                for _ in 0..64 {
                    let candidate = i64::from(rand::rng().random_range(range.clone()));
                    if claimed.contains(&candidate) {
                        continue;
                    }
                    if self
                        .take(
                            &port_key(candidate),
                            attrs.namespace,
                            attrs.name,
                            attrs.dry_run,
                        )
                        .await?
                    {
                        found = Some(candidate);
                        break;
                    }
                }
                found.ok_or_else(|| {
                    Error::internal("failed to allocate a node port: range is full")
                })?
            } else {
                let field = format!("spec.ports[{i}].nodePort");
                let in_range =
                    u16::try_from(requested).is_ok_and(|p| self.ranges.node_ports.contains(&p));
                if !in_range {
                    let detail = format!(
                        "provided port is not in the valid range. The range of valid ports is {}-{}",
                        self.ranges.node_ports.start(),
                        self.ranges.node_ports.end()
                    );
                    return Err(Error::invalid(
                        "",
                        "Service",
                        attrs.name,
                        vec![FieldError::invalid(field, requested, detail)],
                    ));
                }
                if !self
                    .take(
                        &port_key(requested),
                        attrs.namespace,
                        attrs.name,
                        attrs.dry_run,
                    )
                    .await?
                {
                    let cause =
                        FieldError::invalid(field, requested, "provided port is already allocated");
                    return Err(Error::invalid("", "Service", attrs.name, vec![cause]));
                }
                requested
            };
            claimed.push(port);
            svc["spec"]["ports"][i]["nodePort"] = json!(port);
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for ServiceAllocator {
    async fn admit(&self, attrs: &Attributes<'_>, svc: &mut Value) -> Result<()> {
        let is_service = attrs.resource.group.is_empty() && attrs.resource.plural == "services";
        if !is_service || !attrs.subresource.is_empty() || attrs.operation == Operation::Delete {
            return Ok(());
        }
        let kind = svc
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_string();
        if kind != "ExternalName" {
            self.cluster_ip(svc, attrs.old, attrs).await?;
        }
        if kind == "NodePort" || kind == "LoadBalancer" {
            self.node_ports(svc, attrs.old, attrs).await?;
        }
        Ok(())
    }
}

/// The node port keys a Service holds.
fn keys_of(svc: &Value) -> Vec<String> {
    node_ports_of(svc).into_iter().map(port_key).collect()
}

/// The cluster IPs a Service holds (none for a headless one).
fn cluster_ips_of(svc: &Value) -> Vec<String> {
    svc.pointer("/spec/clusterIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|ip| !ip.is_empty() && *ip != "None")
        .map(str::to_string)
        .collect()
}

/// The node ports a Service names (none for a port without one).
fn node_ports_of(svc: &Value) -> Vec<i64> {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .filter(|&p| p != 0)
        .collect()
}

/// The (namespace, name) of an object.
fn who(obj: &Value) -> (String, String) {
    let field = |f: &str| {
        obj.pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (field("namespace"), field("name"))
}

/// Releases what deleted Services held, reclaims allocations no Service
/// holds, and records the cluster IPs Services hold without an IPAddress
/// (kube's repair loops, `repairip` for the IPs).
pub struct AllocationRepair {
    storage: Arc<dyn Storage>,
    services: Arc<Store>,
    cluster_ips: ClusterIps,
}

impl AllocationRepair {
    /// Starts following `services`; when its informer has synced.
    pub fn start(
        storage: Arc<dyn Storage>,
        services: Arc<Store>,
        cluster_ips: ClusterIps,
    ) -> informer::Synced {
        let addr = AllocationRepair {
            storage,
            services: services.clone(),
            cluster_ips,
        }
        .start();
        let events = addr.clone();
        informer::follow(services, Duration::from_secs(600), move |change| {
            let (svc, deleted) = match change {
                Change::Present(svc) => (svc, false),
                Change::Deleted(svc) => (svc, true),
            };
            events.do_send(Released { svc, deleted });
            true
        })
    }
}

impl Actor for AllocationRepair {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(Duration::from_secs(60), |this, ctx| {
            let (storage, services) = (this.storage.clone(), this.services.clone());
            let cluster_ips = this.cluster_ips.clone();
            ctx.spawn(
                async move {
                    reclaim(storage, services.clone()).await;
                    repair_cluster_ips(&cluster_ips, &services).await;
                }
                .into_actor(this),
            );
        });
    }
}

/// A Service changed or went away: release what it no longer holds.
#[derive(Message)]
#[rtype(result = "()")]
struct Released {
    svc: Value,
    deleted: bool,
}

impl Handler<Released> for AllocationRepair {
    type Result = ();

    fn handle(&mut self, msg: Released, ctx: &mut Context<Self>) {
        let (namespace, name) = who(&msg.svc);
        let (keep, keep_ips) = if msg.deleted {
            (Vec::new(), Vec::new())
        } else {
            (keys_of(&msg.svc), cluster_ips_of(&msg.svc))
        };
        // A cluster IP only changes when a Service becomes an ExternalName one.
        let external = msg
            .svc
            .pointer("/spec/type")
            .is_some_and(|t| t == "ExternalName");
        let scan_ips = msg.deleted || external;
        let seen = cluster_ip::revision(&msg.svc);
        let (storage, cluster_ips) = (self.storage.clone(), self.cluster_ips.clone());
        ctx.spawn(
            async move {
                let ports = format!("{PREFIX}nodeports/");
                if let Ok(page) = storage.range(&ports, &prefix_end(&ports), 0, 0).await {
                    for kv in page.kvs {
                        if held_by(&kv.value, &namespace, &name) && !keep.contains(&kv.key) {
                            let _ = storage.delete(&kv.key, Some(kv.mod_revision)).await;
                        }
                    }
                }
                if !scan_ips {
                    return;
                }
                let Ok(addresses) = cluster_ips.ip_addresses().await else {
                    return;
                };
                for address in addresses {
                    if releasable(&address, &namespace, &name, &keep_ips, seen) {
                        cluster_ips.release(&address).await;
                    }
                }
            }
            .into_actor(self),
        );
    }
}

/// Whether a Service seen at revision `seen`, holding `keep`, lets go of
/// `address`: the allocator's, naming the Service, not kept, and taken
/// before that revision (a newer one is an allocation in flight for a
/// write not yet seen).
fn releasable(address: &Value, namespace: &str, name: &str, keep: &[String], seen: i64) -> bool {
    let ip = address["metadata"]["name"].as_str().unwrap_or_default();
    cluster_ip::managed(address)
        && cluster_ip::parent_service(address) == Some((namespace, name))
        && !keep.iter().any(|k| k == ip)
        && cluster_ip::revision(address) < seen
}

/// Whether an object was created more than the grace period ago.
fn older_than_grace(obj: &Value) -> bool {
    let created = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        });
    created.is_some_and(|t| time::OffsetDateTime::now_utc() - t >= GRACE)
}

/// Deletes node port allocations older than the grace period whose Service
/// is gone (and what earlier versions kept as keys for cluster IPs).
async fn reclaim(storage: Arc<dyn Storage>, services: Arc<Store>) {
    let Ok(page) = storage.range(PREFIX, &prefix_end(PREFIX), 0, 0).await else {
        return;
    };
    let now = time::OffsetDateTime::now_utc();
    for kv in page.kvs {
        let Ok(holder) = serde_json::from_slice::<Value>(&kv.value) else {
            continue;
        };
        let since = holder["time"].as_str().and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        });
        if since.is_none_or(|t| now - t < GRACE) {
            continue;
        }
        let (namespace, name) = (
            holder["namespace"].as_str().unwrap_or_default(),
            holder["name"].as_str().unwrap_or_default(),
        );
        let held = match services.get(namespace, name, None).await {
            Ok(svc) => keys_of(&svc.value()).contains(&kv.key),
            Err(e) if e.reason() == apimachinery::error::Reason::NotFound => false,
            Err(_) => true,
        };
        if !held {
            tracing::info!(key = %kv.key, "reclaiming an allocation no service holds");
            let _ = storage.delete(&kv.key, Some(kv.mod_revision)).await;
        }
    }
}

/// What the repair of cluster IPs does, from the Services and IPAddresses.
#[derive(Debug, Default, PartialEq)]
struct IpRepair {
    /// IPAddresses (by name) whose Service is gone or holds another IP.
    orphaned: Vec<String>,
    /// Cluster IPs Services hold without an IPAddress: (ip, namespace, name).
    unrecorded: Vec<(String, String, String)>,
}

/// Compares the Services' cluster IPs with the allocator's IPAddresses:
/// an IPAddress older than the grace period whose Service is gone or holds
/// another IP is orphaned; a Service's IP without an IPAddress unrecorded.
fn plan_ip_repair(services: &[Value], addresses: &[Value]) -> IpRepair {
    let mut held: BTreeMap<String, (String, String)> = BTreeMap::new();
    for svc in services {
        for ip in cluster_ips_of(svc) {
            held.insert(ip, who(svc));
        }
    }
    let recorded: BTreeSet<&str> = addresses
        .iter()
        .filter_map(|a| a["metadata"]["name"].as_str())
        .collect();
    let mut plan = IpRepair::default();
    for address in addresses.iter().filter(|a| cluster_ip::managed(a)) {
        let ip = address["metadata"]["name"].as_str().unwrap_or_default();
        let holder = held
            .get(ip)
            .map(|(namespace, name)| (namespace.as_str(), name.as_str()));
        if holder != cluster_ip::parent_service(address) && older_than_grace(address) {
            plan.orphaned.push(ip.to_string());
        }
    }
    for (ip, (namespace, name)) in held {
        if !recorded.contains(ip.as_str()) {
            plan.unrecorded.push((ip, namespace, name));
        }
    }
    plan
}

/// Deletes orphaned IPAddresses and records the IPs Services hold without one.
async fn repair_cluster_ips(cluster_ips: &ClusterIps, services: &Store) {
    // The IPAddresses first, as cached, then the Services as they are: an
    // IP released meanwhile is not recorded again for a Service gone.
    let Ok(addresses) = cluster_ips.ip_addresses().await else {
        return;
    };
    let Ok(services) = cluster_ip::list(services, None).await else {
        return;
    };
    let plan = plan_ip_repair(&services, &addresses);
    for address in &addresses {
        let name = address["metadata"]["name"].as_str().unwrap_or_default();
        if plan.orphaned.iter().any(|o| o == name) {
            tracing::info!(ip = name, "releasing a ClusterIP no service holds");
            cluster_ips.release(address).await;
        }
    }
    for (ip, namespace, name) in plan.unrecorded {
        let Ok(parsed) = ip.parse::<IpAddr>() else {
            continue;
        };
        match cluster_ips.record(parsed, &namespace, &name).await {
            Ok(true) => {
                tracing::info!(%ip, %namespace, %name, "Cluster IP is not allocated; repairing")
            }
            Ok(false) => {
                tracing::warn!(%ip, %namespace, %name, "Cluster IP was assigned to multiple services")
            }
            Err(error) => tracing::warn!(%ip, %error, "recording a ClusterIP"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let r = Ranges::new("10.96.0.0/12", 30000..=32767).expect("ranges");
        assert_eq!(r.first(), Ipv4Addr::new(10, 96, 0, 1));
        assert_eq!(r.cidr(), "10.96.0.0/12");
        let sloppy = Ranges::new("10.96.3.4/12", 30000..=32767).expect("ranges");
        assert_eq!(sloppy.cidr(), "10.96.0.0/12", "the canonical network");
        assert!(Ranges::new("10.0.0.0", 1..=2).is_err());
    }

    #[test]
    fn holders_and_keys() {
        let svc = json!({"spec": {"clusterIPs": ["10.96.0.9"], "ports": [{"port": 80, "nodePort": 30080}, {"port": 81}]}});
        assert_eq!(keys_of(&svc), vec![port_key(30080)]);
        assert_eq!(cluster_ips_of(&svc), vec!["10.96.0.9"]);
        assert!(cluster_ips_of(&json!({"spec": {"clusterIPs": ["None"]}})).is_empty());
        assert!(held_by(&holder("a", "b"), "a", "b"));
        assert!(!held_by(&holder("a", "b"), "a", "c"));
    }

    #[actix::test]
    async fn one_service_never_gets_the_same_node_port_twice() {
        use generic_server::request::UserInfo;
        use generic_server::storage::memory::MemoryStorage;
        let services = crate::resources::all()
            .into_iter()
            .find(|r| r.group.is_empty() && r.plural == "services")
            .expect("services");
        let user = UserInfo::default();
        let attrs = Attributes {
            operation: Operation::Create,
            resource: &services,
            subresource: "",
            namespace: "ns",
            name: "web",
            old: None,
            user: &user,
            dry_run: false,
            equivalents: None,
            warnings: Default::default(),
        };
        // Two free ports and two ports to fill: each port gets its own,
        // though the Service holds both after the first pick.
        for _ in 0..20 {
            let storage = Arc::new(MemoryStorage::default());
            let ranges = Ranges::new("10.96.0.0/12", 30000..=30001).expect("ranges");
            let allocator = ServiceAllocator::new(storage, ranges, Default::default());
            let mut svc = json!({"spec": {"ports": [{"port": 80}, {"port": 81}]}});
            allocator
                .node_ports(&mut svc, None, &attrs)
                .await
                .expect("ports");
            let mut got: Vec<i64> = (0..2)
                .map(|i| {
                    svc["spec"]["ports"][i]["nodePort"]
                        .as_i64()
                        .expect("a node port")
                })
                .collect();
            got.sort();
            assert_eq!(got, vec![30000, 30001]);
        }
        // A port the Service names itself is not handed to its other port.
        let storage = Arc::new(MemoryStorage::default());
        let ranges = Ranges::new("10.96.0.0/12", 30000..=30001).expect("ranges");
        let allocator = ServiceAllocator::new(storage, ranges, Default::default());
        let mut svc = json!({"spec": {"ports": [{"port": 80}, {"port": 81, "nodePort": 30000}]}});
        allocator
            .node_ports(&mut svc, None, &attrs)
            .await
            .expect("ports");
        assert_eq!(svc["spec"]["ports"][0]["nodePort"], 30001);
        assert_eq!(svc["spec"]["ports"][1]["nodePort"], 30000);
        // Three ports in a range of two: refused, not doubled up.
        let storage = Arc::new(MemoryStorage::default());
        let ranges = Ranges::new("10.96.0.0/12", 30000..=30001).expect("ranges");
        let allocator = ServiceAllocator::new(storage, ranges, Default::default());
        let mut svc = json!({"spec": {"ports": [{"port": 80}, {"port": 81}, {"port": 82}]}});
        let err = allocator
            .node_ports(&mut svc, None, &attrs)
            .await
            .expect_err("a full range");
        assert!(err.to_string().contains("range is full"), "{err}");
    }

    fn address(ip: &str, namespace: &str, name: &str, created: &str, rv: &str) -> Value {
        let mut a = cluster_ip::ip_address(ip.parse().expect("an IP"), namespace, name);
        a["metadata"]["creationTimestamp"] = json!(created);
        a["metadata"]["resourceVersion"] = json!(rv);
        a
    }

    #[test]
    fn a_service_releases_the_ips_it_let_go_but_not_one_in_flight() {
        let old = "2020-01-01T00:00:00Z";
        let a = address("10.96.0.5", "default", "web", old, "10");
        assert!(releasable(&a, "default", "web", &[], 20), "deleted");
        assert!(
            !releasable(&a, "default", "web", &["10.96.0.5".into()], 20),
            "kept"
        );
        assert!(!releasable(&a, "default", "other", &[], 20), "another's");
        assert!(
            !releasable(&a, "default", "web", &[], 5),
            "taken after the state seen"
        );
        let mut foreign = a.clone();
        foreign["metadata"]["labels"] = json!({});
        assert!(
            !releasable(&foreign, "default", "web", &[], 20),
            "not the allocator's"
        );
    }

    #[test]
    fn the_ip_repair_reconciles_both_ways() {
        let (old, now) = ("2020-01-01T00:00:00Z", now_rfc3339());
        let svc = |ns: &str, name: &str, ips: Value| json!({"metadata": {"namespace": ns, "name": name}, "spec": {"clusterIPs": ips}});
        let services = [
            svc("default", "kubernetes", json!(["10.96.0.1"])),
            svc("default", "web", json!(["10.96.0.7"])),
            svc("default", "headless", json!(["None"])),
        ];
        let mut foreign = address("10.96.0.9", "default", "gone", old, "1");
        foreign["metadata"]["labels"] = json!({});
        let addresses = [
            address("10.96.0.1", "default", "kubernetes", old, "1"),
            // The Service is gone: orphaned once old enough.
            address("10.96.0.2", "default", "gone", old, "1"),
            address("10.96.0.3", "default", "gone", &now, "1"),
            // Another Service holds the IP than the one named.
            address("10.96.0.4", "default", "kubernetes", old, "1"),
            // Not the allocator's: left alone.
            foreign,
        ];
        let plan = plan_ip_repair(&services, &addresses);
        assert_eq!(
            plan,
            IpRepair {
                orphaned: vec!["10.96.0.2".into(), "10.96.0.4".into()],
                unrecorded: vec![("10.96.0.7".into(), "default".into(), "web".into())],
            }
        );
    }
}
