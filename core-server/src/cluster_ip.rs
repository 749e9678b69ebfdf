//! Service ClusterIPs as kube's MultiCIDRServiceAllocator hands them out:
//! from any Ready `networking.k8s.io/v1` ServiceCIDR, each IP taken an
//! `IPAddress` object named by the address, pointing at its Service.
//!
//! Creating the IPAddress is the allocation: the store creates an object
//! only if absent, so replicas of the core server never hand out an IP
//! twice.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use apimachinery::error::{Error, Reason, Result};
use generic_server::registry::{DeleteOptions, ListOptions, Store, WriteOptions};
use generic_server::request::UserInfo;
use rand::Rng;
use serde_json::{Value, json};

/// The name of the ServiceCIDR the API server keeps for its own range.
pub const DEFAULT_SERVICE_CIDR: &str = "kubernetes";
/// The finalizer that holds a ServiceCIDR while IPs only it covers exist.
pub const FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";
/// The label naming an IPAddress's family (`IPv4`, `IPv6`).
pub const LABEL_IP_FAMILY: &str = "ipaddress.kubernetes.io/ip-family";
/// The label naming who manages an IPAddress.
pub const LABEL_MANAGED_BY: &str = "ipaddress.kubernetes.io/managed-by";
/// The manager of the IPAddresses Services hold (kube's `ipallocator.ControllerName`).
pub const MANAGED_BY: &str = "ipallocator.k8s.io";

/// Why an IP could not be allocated, in kube's words.
#[derive(Debug, thiserror::Error)]
pub enum AllocationError {
    /// No Ready ServiceCIDR holds the IP.
    #[error("the provided network does not match the current range")]
    MismatchedNetwork,
    /// Another Service holds the IP.
    #[error("provided IP is already allocated")]
    Allocated,
    /// Every Ready ServiceCIDR is full.
    #[error("range is full")]
    Full,
    /// The stores failed.
    #[error(transparent)]
    Api(#[from] Error),
}

/// One CIDR of a ServiceCIDR: a network and its prefix length, with the
/// addresses as numbers (an IPv4 address in the low 32 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    network: u128,
    bits: u8,
    v6: bool,
}

/// An address as a number, and whether it is IPv6 (IPv4-mapped ones count as IPv4).
fn number(ip: IpAddr) -> (u128, bool) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), false),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => (u128::from(u32::from(v4)), false),
            None => (u128::from(v6), true),
        },
    }
}

impl Prefix {
    /// Parses a CIDR as kube's lenient parser reads it.
    pub fn parse(cidr: &str) -> Option<Prefix> {
        let parsed = apimachinery::ip::parse_cidr_lenient(cidr)?;
        let (network, v6) = number(parsed.network);
        let bits = if v6 || parsed.network.is_ipv6() {
            // An IPv4-mapped network's prefix counts the 96 mapped bits.
            if v6 {
                parsed.prefix
            } else {
                parsed.prefix.checked_sub(96)?
            }
        } else {
            parsed.prefix
        };
        Some(Prefix { network, bits, v6 })
    }

    fn width(&self) -> u8 {
        if self.v6 { 128 } else { 32 }
    }

    /// Whether this is an IPv6 range.
    pub fn is_ipv6(&self) -> bool {
        self.v6
    }

    /// The broadcast address (the last of the network).
    fn broadcast(&self) -> u128 {
        let host = u32::from(self.width() - self.bits);
        let hosts = 1u128.checked_shl(host).map_or(u128::MAX, |n| n - 1);
        self.network | hosts
    }

    /// The first and last addresses a Service may hold: never the network
    /// address, nor an IPv4 network's broadcast address; `None` when the
    /// range holds none.
    fn usable(&self) -> Option<(u128, u128)> {
        let first = self.network.checked_add(1)?;
        let last = if self.v6 {
            self.broadcast()
        } else {
            self.broadcast().checked_sub(1)?
        };
        (first <= last).then_some((first, last))
    }

    /// Whether a Service may hold `ip` from this range (kube's `PrefixContainsIP`).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (n, v6) = number(ip);
        v6 == self.v6
            && self
                .usable()
                .is_some_and(|(first, last)| first <= n && n <= last)
    }

    /// Whether `other` lies within this range (kube's `ContainsPrefix`).
    pub fn covers(&self, other: &Prefix) -> bool {
        self.v6 == other.v6
            && self.bits <= other.bits
            && self.network <= other.network
            && other.broadcast() <= self.broadcast()
    }

    /// The address at number `n` of this family.
    fn address(&self, n: u128) -> IpAddr {
        if self.v6 {
            IpAddr::V6(Ipv6Addr::from(n))
        } else {
            IpAddr::V4(Ipv4Addr::from(n as u32))
        }
    }

    /// How many addresses at the bottom of the range are kept for Services
    /// that ask for an IP (KEP-3070): min(max(16, size/16), 256) of the
    /// network's size, none for a network of 16 addresses or fewer.
    fn static_block(&self) -> u128 {
        let host = u32::from(self.width() - self.bits);
        let size = 1u128.checked_shl(host).unwrap_or(u128::MAX);
        if size <= 16 {
            0
        } else {
            (size / 16).clamp(16, 256)
        }
    }

    /// The addresses to try for a dynamic allocation, in order: from a
    /// random start in the upper block, round it, then from a random start
    /// in the lower block (kept for static allocations), round it.
    pub fn candidates(&self) -> impl Iterator<Item = IpAddr> + '_ {
        // kube allocates from no IPv6 range wider than a /64.
        let usable = self.usable().filter(|_| !self.v6 || self.bits >= 64);
        let (first, last) = usable.unwrap_or((1, 0));
        let split = first
            .saturating_add(self.static_block())
            .min(last.saturating_add(1));
        let mut rng = rand::rng();
        let upper = round(split, last, rng.random());
        let lower = round(first, split.saturating_sub(1), rng.random());
        upper.chain(lower).map(|n| self.address(n))
    }
}

/// Every number of `first..=last` once, starting at the one `pick` lands
/// on and wrapping round (none when the block is empty).
fn round(first: u128, last: u128, pick: u128) -> impl Iterator<Item = u128> {
    let len = if first <= last {
        (last - first).saturating_add(1)
    } else {
        0
    };
    let start = pick.checked_rem(len).unwrap_or(0);
    (0..len).map(move |i| first + (start + i) % len)
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.address(self.network), self.bits)
    }
}

/// The IP family label value of an address.
pub fn family(ip: IpAddr) -> &'static str {
    if number(ip).1 { "IPv6" } else { "IPv4" }
}

/// The CIDRs of a ServiceCIDR that parse.
pub fn prefixes(cidr: &Value) -> Vec<Prefix> {
    cidr.pointer("/spec/cidrs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(Prefix::parse)
        .collect()
}

/// Whether an object is being deleted.
pub fn terminating(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// Whether IPs may be allocated from a ServiceCIDR: its Ready condition is
/// true (or not set yet: kube assumes Ready when no controller ran) and it
/// is not being deleted.
pub fn allocates(cidr: &Value) -> bool {
    let ready = cidr
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .is_none_or(|c| c["status"] == "True");
    ready && !terminating(cidr)
}

/// The Service an IPAddress names, as (namespace, name), when its parent
/// is a core Service.
pub fn parent_service(address: &Value) -> Option<(&str, &str)> {
    let parent = address.pointer("/spec/parentRef")?;
    let group = parent.get("group").and_then(Value::as_str).unwrap_or("");
    if !group.is_empty() || parent["resource"] != "services" {
        return None;
    }
    Some((
        parent
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or(""),
        parent.get("name").and_then(Value::as_str).unwrap_or(""),
    ))
}

/// Whether the Service allocator manages an IPAddress (kube's label).
pub fn managed(address: &Value) -> bool {
    address.pointer(&format!(
        "/metadata/labels/{}",
        LABEL_MANAGED_BY.replace('/', "~1")
    )) == Some(&json!(MANAGED_BY))
}

/// The IPAddress that records `ip` as held by the Service `namespace/name`.
pub fn ip_address(ip: IpAddr, namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
        "metadata": {"name": ip.to_string(), "labels": {LABEL_IP_FAMILY: family(ip), LABEL_MANAGED_BY: MANAGED_BY}},
        "spec": {"parentRef": {"resource": "services", "namespace": namespace, "name": name}},
    })
}

/// The in-process identity the allocator writes as (kube's loopback client).
fn apiserver() -> UserInfo {
    UserInfo {
        name: "system:apiserver".into(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
        ..Default::default()
    }
}

/// Allocates and releases ClusterIPs over the ServiceCIDR and IPAddress stores.
#[derive(Clone)]
pub struct ClusterIps {
    cidrs: Arc<Store>,
    addresses: Arc<Store>,
}

impl ClusterIps {
    /// An allocator over the served `servicecidrs` and `ipaddresses`.
    pub fn new(cidrs: Arc<Store>, addresses: Arc<Store>) -> Self {
        ClusterIps { cidrs, addresses }
    }

    /// The ServiceCIDRs, read consistently (one just created allocates at once).
    pub async fn service_cidrs(&self) -> Result<Vec<Value>> {
        list(&self.cidrs, None).await
    }

    /// The IPAddresses as cached.
    pub async fn ip_addresses(&self) -> Result<Vec<Value>> {
        list(&self.addresses, Some("0")).await
    }

    /// The ranges of the ServiceCIDRs that allocate.
    async fn ready_prefixes(&self) -> Result<Vec<Prefix>> {
        Ok(self
            .service_cidrs()
            .await?
            .iter()
            .filter(|c| allocates(c))
            .flat_map(prefixes)
            .collect())
    }

    /// The IPAddress of `ip` as cached, if any.
    async fn cached(&self, ip: IpAddr) -> Result<Option<Value>> {
        match self.addresses.get("", &ip.to_string(), Some("0")).await {
            Ok(obj) => Ok(Some(obj.value())),
            Err(e) if e.reason() == Reason::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Takes `ip` for the Service: Ok(false) when another holds it.
    async fn take(&self, ip: IpAddr, namespace: &str, name: &str, dry_run: bool) -> Result<bool> {
        let holds = |address: &Value| parent_service(address) == Some((namespace, name));
        if dry_run {
            return Ok(self.cached(ip).await?.is_none_or(|a| holds(&a)));
        }
        let opts = WriteOptions {
            user: apiserver(),
            default_manager: Some("kube-apiserver".into()),
            ..Default::default()
        };
        match self
            .addresses
            .create("", ip_address(ip, namespace, name), &opts)
            .await
        {
            Ok(_) => Ok(true),
            // The Service's own (a retried write): it keeps it.
            Err(e) if e.reason() == Reason::AlreadyExists => {
                match self.addresses.get("", &ip.to_string(), None).await {
                    Ok(current) => Ok(holds(&current.value())),
                    Err(e) if e.reason() == Reason::NotFound => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Allocates the `ip` a Service asked for, from a Ready ServiceCIDR.
    pub async fn allocate(
        &self,
        ip: IpAddr,
        namespace: &str,
        name: &str,
        dry_run: bool,
    ) -> std::result::Result<(), AllocationError> {
        let prefixes = self.ready_prefixes().await?;
        if !prefixes.iter().any(|p| p.contains(ip)) {
            return Err(AllocationError::MismatchedNetwork);
        }
        match self.take(ip, namespace, name, dry_run).await? {
            true => Ok(()),
            false => Err(AllocationError::Allocated),
        }
    }

    /// Allocates a free IP of the family for a Service, from any Ready
    /// ServiceCIDR of that family (tried in a random order).
    pub async fn allocate_next(
        &self,
        ipv6: bool,
        namespace: &str,
        name: &str,
        dry_run: bool,
    ) -> std::result::Result<IpAddr, AllocationError> {
        let mut prefixes: Vec<Prefix> = self
            .ready_prefixes()
            .await?
            .into_iter()
            .filter(|p| p.is_ipv6() == ipv6)
            .collect();
        // A random order spreads Services over the ranges, as kube's map does.
        for i in (1..prefixes.len()).rev() {
            prefixes.swap(i, rand::rng().random_range(0..=i));
        }
        for prefix in prefixes {
            for ip in prefix.candidates() {
                if self.cached(ip).await?.is_some() {
                    continue;
                }
                if self.take(ip, namespace, name, dry_run).await? {
                    return Ok(ip);
                }
            }
        }
        Err(AllocationError::Full)
    }

    /// Deletes the IPAddress `address` (a Service let its IP go), unless it
    /// changed since it was read.
    pub async fn release(&self, address: &Value) {
        let name = address["metadata"]["name"].as_str().unwrap_or_default();
        let opts = DeleteOptions {
            uid: address["metadata"]["uid"].as_str().map(str::to_string),
            resource_version: address["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_string),
            user: apiserver(),
            ..Default::default()
        };
        match self.addresses.delete("", name, &opts).await {
            Ok(_) => tracing::debug!(ip = name, "released a ClusterIP"),
            Err(e) if e.reason() == Reason::NotFound => {}
            Err(e) => tracing::info!(ip = name, error = %e, "releasing a ClusterIP"),
        }
    }

    /// Records `ip` as held by a Service that holds it without an
    /// IPAddress (the repair loop's other way).
    pub async fn record(&self, ip: IpAddr, namespace: &str, name: &str) -> Result<bool> {
        self.take(ip, namespace, name, false).await
    }
}

/// Every object of a store, at `resource_version` (`Some("0")`: as cached;
/// `None`: consistently).
pub async fn list(store: &Store, resource_version: Option<&str>) -> Result<Vec<Value>> {
    let opts = ListOptions {
        resource_version: resource_version.map(str::to_string),
        ..Default::default()
    };
    Ok(store
        .list("", &opts)
        .await?
        .items
        .iter()
        .map(|o| o.value())
        .collect())
}

/// The resourceVersion of an object as a number (0 when missing).
pub fn revision(obj: &Value) -> i64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use generic_server::server::ApiServer;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an IP")
    }

    #[test]
    fn prefixes_hold_all_but_the_network_and_broadcast_addresses() {
        let p = Prefix::parse("10.96.0.0/12").expect("a prefix");
        assert_eq!(p.to_string(), "10.96.0.0/12");
        assert!(!p.contains(ip("10.96.0.0")));
        assert!(p.contains(ip("10.96.0.1")));
        assert!(p.contains(ip("10.111.255.254")));
        assert!(!p.contains(ip("10.111.255.255")));
        assert!(!p.contains(ip("10.112.0.1")));
        assert!(!p.contains(ip("fd00::1")));
        let v6 = Prefix::parse("fd00:10::/112").expect("a prefix");
        assert!(v6.contains(ip("fd00:10::ffff")), "IPv6 has no broadcast");
        assert!(!v6.contains(ip("fd00:10::")));
        assert!(Prefix::parse("10.0.0.0/32").is_some_and(|p| !p.contains(ip("10.0.0.0"))));
        assert!(Prefix::parse("nonsense").is_none());
        let wide = Prefix::parse("10.0.0.0/8").expect("a prefix");
        assert!(wide.covers(&p) && !p.covers(&wide) && p.covers(&p));
        assert!(!v6.covers(&p));
    }

    #[test]
    fn dynamic_candidates_try_the_upper_block_first_and_each_address_once() {
        // A /24: 254 usable, the lowest 16 kept for static allocations.
        let p = Prefix::parse("10.0.0.0/24").expect("a prefix");
        let all: Vec<IpAddr> = p.candidates().collect();
        assert_eq!(all.len(), 254);
        let mut unique = all.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 254);
        let last_octet = |ip: &IpAddr| match ip {
            IpAddr::V4(v4) => v4.octets()[3],
            IpAddr::V6(_) => panic!("IPv4"),
        };
        assert!(all[..238].iter().all(|ip| last_octet(ip) >= 17), "{all:?}");
        assert!(all[238..].iter().all(|ip| last_octet(ip) <= 16), "{all:?}");
        // A /28 has no static block; a /31 and /32 nothing to hand out.
        assert_eq!(
            Prefix::parse("10.0.0.0/28")
                .expect("a prefix")
                .candidates()
                .count(),
            14
        );
        assert_eq!(
            Prefix::parse("10.0.0.0/31")
                .expect("a prefix")
                .candidates()
                .count(),
            0
        );
        assert_eq!(
            Prefix::parse("10.0.0.0/32")
                .expect("a prefix")
                .candidates()
                .count(),
            0
        );
    }

    #[test]
    fn readiness_and_parents() {
        let cidr = |status: Value| json!({"spec": {"cidrs": ["10.0.0.0/24"]}, "status": status});
        assert!(allocates(&cidr(json!({}))), "no condition yet: Ready");
        assert!(allocates(&cidr(
            json!({"conditions": [{"type": "Ready", "status": "True"}]})
        )));
        assert!(!allocates(&cidr(
            json!({"conditions": [{"type": "Ready", "status": "False"}]})
        )));
        let mut deleting = cidr(json!({}));
        deleting["metadata"] = json!({"deletionTimestamp": "2026-01-01T00:00:00Z"});
        assert!(!allocates(&deleting));
        let address = ip_address(ip("10.0.0.5"), "default", "web");
        assert_eq!(parent_service(&address), Some(("default", "web")));
        assert!(managed(&address));
        assert_eq!(address["metadata"]["labels"][LABEL_IP_FAMILY], "IPv4");
        let gateway = json!({"spec": {"parentRef": {"group": "gateway.networking.k8s.io", "resource": "gateways", "name": "gw"}}});
        assert_eq!(parent_service(&gateway), None);
        assert!(!managed(&gateway));
    }

    /// An allocator over in-memory ServiceCIDR and IPAddress stores holding `cidrs`.
    async fn allocator(cidrs: &[(&str, &str, bool)]) -> ClusterIps {
        let resources = crate::resources::all()
            .into_iter()
            .filter(|r| {
                r.group == "networking.k8s.io"
                    && ["servicecidrs", "ipaddresses"].contains(&r.plural.as_str())
            })
            .collect();
        let (server, _) = ApiServer::in_memory(resources).await.expect("a server");
        let store = |plural| {
            server
                .store("networking.k8s.io", "v1", plural)
                .expect("a store")
        };
        let ips = ClusterIps::new(store("servicecidrs"), store("ipaddresses"));
        for (name, cidr, ready) in cidrs {
            let status = if *ready { "True" } else { "False" };
            let obj = json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": name},
                "spec": {"cidrs": [cidr]}});
            let opts = WriteOptions::default();
            let mut created = ips
                .cidrs
                .create("", obj, &opts)
                .await
                .expect("a ServiceCIDR")
                .object;
            created["status"] = json!({"conditions": [{"type": "Ready", "status": status,
                "reason": "", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
            ips.cidrs
                .update("", name, "status", created, &opts)
                .await
                .expect("its status");
        }
        ips
    }

    #[actix::test]
    async fn allocation_is_an_ip_address_from_a_ready_service_cidr() {
        let ips = allocator(&[
            ("kubernetes", "10.96.0.0/28", true),
            ("off", "10.97.0.0/28", false),
        ])
        .await;
        ips.allocate(ip("10.96.0.1"), "default", "kubernetes", false)
            .await
            .expect("allocated");
        let address = ips
            .addresses
            .get("", "10.96.0.1", None)
            .await
            .expect("an IPAddress")
            .value();
        assert_eq!(
            address["spec"]["parentRef"],
            json!({"resource": "services", "namespace": "default", "name": "kubernetes"})
        );
        assert_eq!(
            address["metadata"]["labels"],
            json!({LABEL_IP_FAMILY: "IPv4", LABEL_MANAGED_BY: MANAGED_BY})
        );
        // The same Service may take it again (a retried write); another may not.
        ips.allocate(ip("10.96.0.1"), "default", "kubernetes", false)
            .await
            .expect("its own");
        let taken = ips
            .allocate(ip("10.96.0.1"), "default", "other", false)
            .await
            .expect_err("taken");
        assert_eq!(taken.to_string(), "provided IP is already allocated");
        // Outside every Ready range: the network address, a range not Ready, no range.
        for outside in ["10.96.0.0", "10.97.0.1", "10.98.0.1"] {
            let err = ips
                .allocate(ip(outside), "default", "web", false)
                .await
                .expect_err(outside);
            assert_eq!(
                err.to_string(),
                "the provided network does not match the current range"
            );
        }
        // A dry run takes nothing.
        ips.allocate(ip("10.96.0.2"), "default", "web", true)
            .await
            .expect("a dry run");
        assert!(ips.cached(ip("10.96.0.2")).await.expect("cache").is_none());
        // Dynamic allocation fills the Ready /28 (14 addresses, one taken), then is full.
        let mut got = std::collections::BTreeSet::new();
        for i in 0..13 {
            let next = ips
                .allocate_next(false, "default", &format!("s{i}"), false)
                .await
                .expect("an IP");
            assert!(
                Prefix::parse("10.96.0.0/28")
                    .expect("a prefix")
                    .contains(next),
                "{next}"
            );
            assert!(got.insert(next), "{next} twice");
        }
        let full = ips
            .allocate_next(false, "default", "one-more", false)
            .await
            .expect_err("full");
        assert_eq!(full.to_string(), "range is full");
        assert_eq!(list(&ips.addresses, None).await.expect("list").len(), 14);
        // Releasing gives the IP back.
        let address = ips
            .cached(ip("10.96.0.1"))
            .await
            .expect("cache")
            .expect("held");
        ips.release(&address).await;
        assert!(ips.addresses.get("", "10.96.0.1", None).await.is_err());
        let next = ips
            .allocate_next(false, "default", "one-more", false)
            .await
            .expect("the freed IP");
        assert_eq!(next, ip("10.96.0.1"));
    }
}
