//! Service cluster IPs and node ports: allocated when a Service is written
//! (an admission plugin), released when it goes (a repair actor that also
//! reclaims what a failed write left behind).
//!
//! Each allocation is an etcd key created only if absent, so replicas of
//! the core server never hand out the same IP or port twice.

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

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

/// The service IP range and node port range.
#[derive(Debug, Clone)]
pub struct Ranges {
    base: u32,
    size: u32,
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
        Ok(Ranges {
            base: u32::from(ip) & !(size - 1),
            size,
            cidr: cidr.into(),
            node_ports,
        })
    }

    /// The first usable address: the `kubernetes` service's.
    pub fn first(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.base + 1)
    }

    fn contains(&self, ip: Ipv4Addr) -> bool {
        let ip = u32::from(ip);
        ip > self.base && ip < self.base + self.size - 1
    }

    fn random_ip(&self) -> Ipv4Addr {
        // Skip the network address, the first address (reserved for the
        // `kubernetes` service) and the broadcast address.
        Ipv4Addr::from(self.base + 2 + rand::rng().random_range(0..self.size - 3))
    }
}

fn ip_key(ip: &str) -> String {
    format!("{PREFIX}serviceips/{ip}")
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
}

impl ServiceAllocator {
    /// An allocator keeping its state in `storage`.
    pub fn new(storage: Arc<dyn Storage>, ranges: Ranges) -> Self {
        ServiceAllocator { storage, ranges }
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
        let chosen = if ip.is_empty() {
            let mut found = None;
            for _ in 0..64 {
                let candidate = self.ranges.random_ip().to_string();
                if self
                    .take(
                        &ip_key(&candidate),
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
            found
                .ok_or_else(|| Error::internal("failed to allocate a service IP: range is full"))?
        } else {
            let parsed: Ipv4Addr = ip
                .parse()
                .map_err(|_| invalid(json!([ip]), "must be a valid IP address".into()))?;
            if !self.ranges.contains(parsed) {
                return Err(invalid(
                    json!([ip]),
                    format!(
                        "failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {}",
                        self.ranges.cidr
                    ),
                ));
            }
            if !self
                .take(&ip_key(&ip), attrs.namespace, attrs.name, attrs.dry_run)
                .await?
            {
                return Err(invalid(
                    json!([ip]),
                    format!("failed to allocate IP {ip}: provided IP is already allocated"),
                ));
            }
            ip
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

/// The keys a Service holds.
fn keys_of(svc: &Value) -> Vec<String> {
    let mut keys = Vec::new();
    for ip in svc
        .pointer("/spec/clusterIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(ip) = ip.as_str().filter(|ip| *ip != "None") {
            keys.push(ip_key(ip));
        }
    }
    keys.extend(node_ports_of(svc).into_iter().map(port_key));
    keys
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

/// Releases what deleted Services held, and reclaims allocations no Service holds.
pub struct AllocationRepair {
    storage: Arc<dyn Storage>,
    services: Arc<Store>,
}

impl AllocationRepair {
    /// Starts following `services`; when its informer has synced.
    pub fn start(storage: Arc<dyn Storage>, services: Arc<Store>) -> informer::Synced {
        let addr = AllocationRepair {
            storage,
            services: services.clone(),
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
            ctx.spawn(async move { reclaim(storage, services).await }.into_actor(this));
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
        let namespace = msg
            .svc
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let name = msg
            .svc
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let keep = if msg.deleted {
            Vec::new()
        } else {
            keys_of(&msg.svc)
        };
        let storage = self.storage.clone();
        ctx.spawn(
            async move {
                let Ok(page) = storage.range(PREFIX, &prefix_end(PREFIX), 0, 0).await else {
                    return;
                };
                for kv in page.kvs {
                    if held_by(&kv.value, &namespace, &name) && !keep.contains(&kv.key) {
                        let _ = storage.delete(&kv.key, Some(kv.mod_revision)).await;
                    }
                }
            }
            .into_actor(self),
        );
    }
}

/// Deletes allocations older than the grace period whose Service is gone.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let r = Ranges::new("10.96.0.0/12", 30000..=32767).unwrap();
        assert_eq!(r.first(), Ipv4Addr::new(10, 96, 0, 1));
        assert!(r.contains(Ipv4Addr::new(10, 100, 3, 4)));
        assert!(!r.contains(Ipv4Addr::new(10, 112, 0, 1)));
        for _ in 0..1000 {
            let ip = r.random_ip();
            assert!(r.contains(ip) && ip != r.first());
        }
        assert!(Ranges::new("10.0.0.0", 1..=2).is_err());
    }

    #[test]
    fn holders_and_keys() {
        let svc = json!({"spec": {"clusterIPs": ["10.96.0.9"], "ports": [{"port": 80, "nodePort": 30080}, {"port": 81}]}});
        assert_eq!(keys_of(&svc), vec![ip_key("10.96.0.9"), port_key(30080)]);
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
            let allocator = ServiceAllocator::new(storage, ranges);
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
        let allocator = ServiceAllocator::new(storage, ranges);
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
        let allocator = ServiceAllocator::new(storage, ranges);
        let mut svc = json!({"spec": {"ports": [{"port": 80}, {"port": 81}, {"port": 82}]}});
        let err = allocator
            .node_ports(&mut svc, None, &attrs)
            .await
            .expect_err("a full range");
        assert!(err.to_string().contains("range is full"), "{err}");
    }
}
