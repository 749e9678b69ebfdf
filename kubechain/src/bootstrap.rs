//! What `kubechain up` registers once the cluster answers: the Node the
//! host is (with its real capacity), and metrics-server's Service,
//! EndpointSlice and APIService, as a real cluster's add-on manifests would.

use anyhow::{Context, Result, bail};
use base64::Engine;
use serde_json::{Value, json};

use crate::pki::Pki;

/// The user metrics-server's client certificate names.
const METRICS_SERVER_USER: &str = "kubechain-metrics-server";

/// An HTTPS client authenticated as the cluster admin.
fn admin_client(pki: &Pki) -> Result<reqwest::Client> {
    let admin = pki.files("admin");
    let (cert, key) = (std::fs::read(&admin.cert)?, std::fs::read(&admin.key)?);
    let tls = crate::bench::client::tls_config(&std::fs::read(pki.ca())?, Some((&cert, &key)))?;
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()?)
}

/// Creates an object, or replaces what exists; Ok once it is stored.
async fn ensure(
    client: &reqwest::Client,
    base: &str,
    collection: &str,
    object: &Value,
) -> Result<()> {
    let url = format!("{base}{collection}");
    let body = object.to_string();
    let created = client
        .post(&url)
        .header("Content-Type", "application/json")
        .body(body.clone())
        .send()
        .await?;
    match created.status().as_u16() {
        200..=299 => return Ok(()),
        409 => {}
        code => bail!(
            "creating {collection}: {code} {}",
            created.text().await.unwrap_or_default()
        ),
    }
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let item = format!("{url}/{name}");
    let current: Value = serde_json::from_slice(&client.get(&item).send().await?.bytes().await?)?;
    let mut replacement = object.clone();
    replacement["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let updated = client
        .put(&item)
        .header("Content-Type", "application/json")
        .body(replacement.to_string())
        .send()
        .await?;
    if !updated.status().is_success() {
        bail!(
            "updating {collection}/{name}: {}",
            updated.text().await.unwrap_or_default()
        );
    }
    Ok(())
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
/// metrics-server with its replicas at `metrics` (all on one port).
pub async fn register(
    pki: &Pki,
    base: &str,
    node: &str,
    metrics: &[std::net::SocketAddr],
) -> Result<()> {
    let client = admin_client(pki)?;
    let metrics_port = metrics.first().context("no metrics-server address")?.port();
    let addresses: Vec<String> = metrics.iter().map(|a| a.ip().to_string()).collect();
    let address_type = if metrics[0].is_ipv6() { "IPv6" } else { "IPv4" };
    ensure(&client, base, "/api/v1/nodes", &host_node(node))
        .await
        .context("registering the host's Node")?;
    let ca = base64::engine::general_purpose::STANDARD.encode(std::fs::read(pki.ca())?);
    let objects = [
        (
            "/api/v1/namespaces/kube-system/services",
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "metrics-server", "namespace": "kube-system", "labels": {"k8s-app": "metrics-server"}},
                   "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": metrics_port}]}}),
        ),
        (
            "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices",
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                   "metadata": {"name": "metrics-server", "namespace": "kube-system", "labels": {"kubernetes.io/service-name": "metrics-server"}},
                   "addressType": address_type,
                   "endpoints": addresses.iter().map(|a| json!({"addresses": [a], "conditions": {"ready": true}})).collect::<Vec<_>>(),
                   "ports": [{"name": "https", "port": metrics_port, "protocol": "TCP"}]}),
        ),
        (
            "/apis/apiregistration.k8s.io/v1/apiservices",
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                   "metadata": {"name": "v1beta1.metrics.k8s.io", "labels": {"k8s-app": "metrics-server"}},
                   "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                            "caBundle": ca, "service": {"namespace": "kube-system", "name": "metrics-server", "port": 443}}}),
        ),
    ];
    // What metrics-server's manifest grants it: to delegate its decisions
    // (system:auth-delegator) and to read what it measures.
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let user = json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": METRICS_SERVER_USER}]);
    let grants = [
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
                   "subjects": user}),
        ),
        (
            format!("{rbac}/clusterrolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "metrics-server:system:auth-delegator", "labels": {"k8s-app": "metrics-server"}},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
                   "subjects": user}),
        ),
    ];
    for (collection, object) in &grants {
        ensure(&client, base, collection, object)
            .await
            .with_context(|| format!("registering {collection}"))?;
    }
    for (collection, object) in &objects {
        ensure(&client, base, collection, object)
            .await
            .with_context(|| format!("registering {collection}"))?;
    }
    Ok(())
}
