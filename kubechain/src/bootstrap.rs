//! What `kubechain up` registers once the cluster answers: the Node the
//! host is (with its real capacity), and metrics-server's Service,
//! EndpointSlice and APIService, as a real cluster's add-on manifests would.

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::client::{Api, Credentials};
use crate::pki::Pki;
use crate::register::{Registration, ensure, subject};

/// The user metrics-server's client certificate names.
const METRICS_SERVER_USER: &str = "kubechain-metrics-server";

/// A client of the front door at `base`, authenticated as the cluster admin.
fn admin_api(pki: &Pki, base: &str) -> Result<Api> {
    let admin = pki.files("admin");
    let (cert, key) = (std::fs::read(&admin.cert)?, std::fs::read(&admin.key)?);
    let ca = std::fs::read(pki.ca())?;
    let tls = crate::client::tls_config(&ca, Some((&cert, &key)))?;
    Credentials {
        server: base.to_string(),
        tls,
        ca,
    }
    .api()
}

/// The host's CPU count and memory (KiB) from `/proc`.
fn host_capacity() -> (usize, u64) {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines().find_map(|l| {
                l.strip_prefix("MemTotal:")
                    .map(|v| v.trim().trim_end_matches("kB").trim().to_string())
            })
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (cpus, memory)
}

/// The Node object of this host.
fn host_node(name: &str) -> Value {
    let (cpus, memory) = host_capacity();
    let capacity = json!({"cpu": cpus.to_string(), "memory": format!("{memory}Ki"), "pods": "110", "ephemeral-storage": "0"});
    let now = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": if std::env::consts::ARCH == "aarch64" { "arm64" } else { "amd64" },
            "node-role.kubernetes.io/control-plane": "",
        }},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubechainHost",
                            "message": "the host running kubechain", "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"kernelVersion": kernel, "osImage": "kubechain host", "operatingSystem": "linux",
                         "architecture": std::env::consts::ARCH, "kubeletVersion": "v1.33.0", "kubeProxyVersion": "",
                         "containerRuntimeVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
        },
    })
}

/// Registers, through the front door at `base`, the host's Node and
/// metrics-server with its replicas at `metrics` (all on one port), the way
/// `kubechain register` registers any aggregated server.
pub async fn register(
    pki: &Pki,
    base: &str,
    node: &str,
    metrics: &[std::net::SocketAddr],
) -> Result<()> {
    let api = admin_api(pki, base)?;
    ensure(&api, "/api/v1/nodes", &host_node(node))
        .await
        .context("registering the host's Node")?;
    let user = subject(&format!("user:{METRICS_SERVER_USER}"))?;
    // What metrics-server's manifest grants it beyond any aggregated
    // server's: to read what it measures.
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let mut objects = vec![
        (
            format!("{rbac}/clusterroles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "system:metrics-server", "labels": {"k8s-app": "metrics-server"}},
                   "rules": [{"apiGroups": [""], "resources": ["nodes", "nodes/metrics", "pods"], "verbs": ["get", "list", "watch"]}]}),
        ),
        (
            format!("{rbac}/clusterrolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "system:metrics-server", "labels": {"k8s-app": "metrics-server"}},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:metrics-server"},
                   "subjects": [user]}),
        ),
        (
            // metrics-server's manifest lets admin, edit and view read metrics.
            format!("{rbac}/clusterroles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "system:aggregated-metrics-reader", "labels": {
                       "k8s-app": "metrics-server",
                       "rbac.authorization.k8s.io/aggregate-to-admin": "true",
                       "rbac.authorization.k8s.io/aggregate-to-edit": "true",
                       "rbac.authorization.k8s.io/aggregate-to-view": "true"}},
                   "rules": [{"apiGroups": ["metrics.k8s.io"], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]}]}),
        ),
    ];
    let registration = Registration {
        group: "metrics.k8s.io".to_string(),
        versions: vec!["v1beta1".to_string()],
        service: ("kube-system".to_string(), "metrics-server".to_string()),
        service_port: 443,
        addresses: metrics.to_vec(),
        ca: std::fs::read(pki.ca())?,
        subject: user,
        group_priority_minimum: 100,
        version_priority: 100,
    };
    objects.extend(registration.objects()?);
    for (collection, object) in &objects {
        ensure(&api, collection, object)
            .await
            .with_context(|| format!("registering {collection}"))?;
    }
    Ok(())
}
