//! core-server: the built-in APIs of Kubernetes (core v1, and the groups
//! that follow), served over gRPC to the aggregator. What it does not serve
//! it hands to the extension server.

mod admission;
mod allocation;
mod binding;
mod bootstrap_policy;
mod cluster_ip;
mod controllers;
mod escalation;
mod eviction;
mod proxy;
mod resources;
mod reviews;
mod tokens;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use allocation::{Ranges, ServiceAllocator};
use anyhow::Context as _;
use clap::Parser;
use generic_server::admission::AdmissionPlugin;
use generic_server::config::{Config, Delegate};
use generic_server::loopback::Loopback;
use generic_server::server::ApiServer;
use kubechain_apiserver::{ChainEndpoint, Server};
use serde_json::json;

/// Namespaces that exist from the start.
const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The core server's options.
#[derive(Parser, Debug)]
#[command(version, about = "kubechain core-server: the built-in Kubernetes APIs")]
struct Options {
    /// Address of the gRPC delegation endpoint.
    #[arg(long, env = "KUBECHAIN_LISTEN", default_value = "127.0.0.1:7443")]
    listen: SocketAddr,
    /// The extension server's gRPC endpoints, used until replicas register in etcd.
    #[arg(
        long,
        env = "KUBECHAIN_EXTENSION_ENDPOINT",
        value_delimiter = ',',
        default_value = "https://127.0.0.1:7444"
    )]
    extension_endpoint: Vec<String>,
    /// The name the extension server's certificate is verified against.
    #[arg(
        long,
        env = "KUBECHAIN_EXTENSION_SERVER_NAME",
        default_value = "extension-server"
    )]
    extension_server_name: String,
    /// The range service cluster IPs are allocated from.
    #[arg(
        long,
        env = "KUBECHAIN_SERVICE_CLUSTER_IP_RANGE",
        default_value = "10.96.0.0/12"
    )]
    service_cluster_ip_range: String,
    /// The range node ports are allocated from (`low-high`).
    #[arg(
        long,
        env = "KUBECHAIN_SERVICE_NODE_PORT_RANGE",
        default_value = "30000-32767"
    )]
    service_node_port_range: String,
    /// The address clients reach the API at (the `kubernetes` service's endpoint).
    #[arg(long, env = "KUBECHAIN_ADVERTISE_ADDRESS", default_value = "127.0.0.1")]
    advertise_address: String,
    /// The port clients reach the API at.
    #[arg(long, env = "KUBECHAIN_ADVERTISE_PORT", default_value_t = 6443)]
    advertise_port: u16,
    /// EC P-256 private key (PKCS#8 PEM) that signs service account tokens.
    #[arg(long, env = "KUBECHAIN_SERVICE_ACCOUNT_SIGNING_KEY_FILE")]
    service_account_signing_key_file: Option<std::path::PathBuf>,
    /// The issuer (and default audience) of service account tokens.
    #[arg(
        long,
        env = "KUBECHAIN_SERVICE_ACCOUNT_ISSUER",
        default_value = "https://kubernetes.default.svc.cluster.local"
    )]
    service_account_issuer: String,
    /// The longest a requested service account token lives (a Go duration,
    /// as kube's flag: `48h`); longer requests are cut to it.
    #[arg(
        long,
        env = "KUBECHAIN_SERVICE_ACCOUNT_MAX_TOKEN_EXPIRATION",
        default_value = "48h",
        value_parser = max_token_expiration
    )]
    service_account_max_token_expiration: std::time::Duration,
    /// The cluster's CA bundle (PEM certificates) that the root CA
    /// publisher puts into every namespace's `kube-root-ca.crt` ConfigMap
    /// (kube-controller-manager's flag); without it, none is published.
    #[arg(long, env = "KUBECHAIN_ROOT_CA_FILE")]
    root_ca_file: Option<std::path::PathBuf>,
    /// A Unix socket to serve delegation on as well, for callers on this
    /// host (the launcher's): no TLS, and only this user's processes may call.
    #[arg(long, env = "KUBECHAIN_GRPC_SOCKET")]
    grpc_socket: Option<std::path::PathBuf>,
    /// Certificate CNs allowed to call this server.
    #[arg(
        long,
        env = "KUBECHAIN_ALLOWED_CALLERS",
        value_delimiter = ',',
        default_value = "kubechain-aggregator"
    )]
    allowed_callers: Vec<String>,
    #[command(flatten)]
    config: Config,
}

fn main() -> anyhow::Result<()> {
    let options: Options = kubechain_apiserver::parse();
    kubechain_apiserver::run(options.config.logging, run(options))
}

async fn run(options: Options) -> anyhow::Result<()> {
    let extension = Delegate {
        component: "extension-server",
        endpoints: &options.extension_endpoint,
        server_name: &options.extension_server_name,
    };
    let root_ca_bundle = root_ca_bundle(options.root_ca_file.as_deref())?;
    let endpoint = ChainEndpoint {
        listen: options.listen,
        socket: options.grpc_socket.clone(),
        allowed_callers: options.allowed_callers.clone(),
    };
    let server = Server::in_chain("core-server", &options.config, Some(extension)).await?;
    let storage = server.storage();
    let (cacher, prefix) = (storage.cacher().clone(), storage.prefix());

    let ranges = service_ranges(&options)?;
    let cluster_ips = Arc::new(OnceLock::new());
    let allocator = ServiceAllocator::new(
        cacher.storage().clone(),
        ranges.clone(),
        cluster_ips.clone(),
    );
    let policy = Arc::new(OnceLock::new());
    // Between NamespaceLifecycle and the cluster's policies and webhooks,
    // in kube's order; ResourceQuota comes last.
    let plugins: Vec<Arc<dyn AdmissionPlugin>> = vec![
        Arc::new(
            admission::limit_ranger::LimitRanger::new(cacher.clone(), prefix)
                .await
                .context("limit ranger")?,
        ),
        Arc::new(
            admission::service_account::ServiceAccount::new(cacher.clone(), prefix)
                .await
                .context("service account admission")?,
        ),
        Arc::new(
            admission::node_restriction::NodeRestriction::new(cacher.clone(), prefix)
                .await
                .context("node restriction")?,
        ),
        Arc::new(
            admission::pod_security::PodSecurity::new(cacher.clone(), prefix)
                .await
                .context("pod security admission")?,
        ),
        Arc::new(
            admission::priority::Priority::new(cacher.clone(), prefix)
                .await
                .context("priority admission")?,
        ),
        Arc::new(admission::default_toleration_seconds::DefaultTolerationSeconds),
        Arc::new(
            admission::default_storage_class::DefaultStorageClass::new(cacher.clone(), prefix)
                .await
                .context("default storage class admission")?,
        ),
        Arc::new(
            admission::runtime_class::RuntimeClass::new(cacher.clone(), prefix)
                .await
                .context("runtime class admission")?,
        ),
        Arc::new(admission::certificates::approval::CertificateApproval {
            policy: policy.clone(),
        }),
        Arc::new(admission::certificates::signing::CertificateSigning {
            policy: policy.clone(),
        }),
        Arc::new(admission::certificates::subject_restriction::CertificateSubjectRestriction),
        Arc::new(allocator),
        Arc::new(resources::CsrRequester),
        Arc::new(escalation::Escalation {
            rbac: policy.clone(),
        }),
    ];
    let mut server = plugins
        .into_iter()
        .fold(
            server.with_stored(declared_resources(), &storage),
            Server::with_admission,
        )
        .install()
        .await
        .context("installing resources")?;
    let rbac = Arc::new(
        generic_server::filters::rbac::Rbac::new(&cacher, prefix)
            .await
            .context("following the RBAC policy")?,
    );
    let _ = policy.set(rbac.clone());
    let node = Arc::new(
        generic_server::filters::node::NodeAuthorizer::new(&cacher, prefix)
            .await
            .context("following pods for the Node authorizer")?,
    );
    reviews::install(server.api(), node, rbac);
    let (statuses, computed) = resources::component_statuses(
        cacher.storage().clone(),
        options.config.etcd.etcd_servers.len(),
    );
    server.api().add_read_only(&statuses, computed);
    binding::install(server.api());
    eviction::install(server.api());
    install_token_requests(server.api(), &options)?;
    install_proxies(server.api())?;

    let ips = cluster_ip_allocator(server.api())?;
    let _ = cluster_ips.set(ips.clone());

    let client = Loopback::new(server.api().clone(), "system:kube-controller-manager");
    for name in SYSTEM_NAMESPACES {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        if let Err(e) = client.create("/api/v1/namespaces", &ns).await {
            if e.reason() != apimachinery::error::Reason::AlreadyExists {
                return Err(e).context(format!("creating namespace {name}"));
            }
        }
    }
    // The `kubernetes` service's IP comes from the default ServiceCIDR.
    controllers::default_service_cidr::DefaultServiceCidrController::new(
        Loopback::new(server.api().clone(), "system:apiserver"),
        ranges.cidr(),
    )
    .ensure()
    .await
    .context("creating the default ServiceCIDR")?;
    bootstrap_kubernetes_service(server.api(), &client, &ranges, &options).await?;
    bootstrap_priority_classes(&client).await?;
    controllers::add_post_start_hooks(&mut server, client, root_ca_bundle, ranges.cidr(), ips);
    server
        .serve_delegation(endpoint)
        .await
        .context("serving gRPC")
}

/// Every resource this server declares (discovery, OpenAPI): the stored
/// ones, the reviews, and `componentstatuses` (served computed).
fn declared_resources() -> Vec<generic_server::resource::Resource> {
    let mut all = resources::all();
    all.extend(reviews::resources());
    all.push(resources::component_status());
    all
}

/// The CA bundle of `--root-ca-file`, as written: certificates only (kube
/// refuses a file without one; a private key is refused too, as the bundle
/// is published to every namespace).
fn root_ca_bundle(path: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    let Some(path) = path else {
        tracing::info!("no --root-ca-file: the root CA certificate publisher does not run");
        return Ok(None);
    };
    let read = || format!("reading --root-ca-file {}", path.display());
    let pem = std::fs::read(path).with_context(read)?;
    generic_server::tls::parse_certs(&pem).with_context(read)?;
    if generic_server::tls::parse_key(&pem).is_ok() {
        anyhow::bail!(
            "--root-ca-file {} holds a private key: give the CA certificate only",
            path.display()
        );
    }
    String::from_utf8(pem).map(Some).with_context(read)
}

/// The system PriorityClasses, as kube creates them at start.
async fn bootstrap_priority_classes(client: &Loopback) -> anyhow::Result<()> {
    for (name, value, description) in resources::SYSTEM_PRIORITY_CLASSES {
        let class = json!({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "description": description,
        });
        match client
            .create("/apis/scheduling.k8s.io/v1/priorityclasses", &class)
            .await
        {
            Ok(_) => {}
            Err(e) if e.reason() == apimachinery::error::Reason::AlreadyExists => {}
            Err(e) => return Err(e).context(format!("creating priority class {name}")),
        }
    }
    Ok(())
}

/// Serves `serviceaccounts/<name>/token` when a signing key is configured.
fn install_token_requests(server: &ApiServer, options: &Options) -> anyhow::Result<()> {
    let Some(path) = &options.service_account_signing_key_file else {
        return Ok(());
    };
    let Some(accounts) = server.store("", "v1", "serviceaccounts") else {
        return Ok(());
    };
    let stores = |resource: &str| {
        server
            .store("", "v1", resource)
            .with_context(|| format!("tokens bind to {resource}, which are not installed"))
    };
    let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let signer = generic_server::jwt::Signer::new(&pem, &options.service_account_issuer)?;
    let kind = apimachinery::group_version::GroupVersionKind::new(
        "authentication.k8s.io",
        "v1",
        "TokenRequest",
    );
    let resource = accounts.resource.clone();
    server.add_create_only(
        &resource,
        "token",
        kind,
        Arc::new(tokens::TokenRequests::new(
            signer,
            tokens::TokenStores {
                accounts,
                pods: stores("pods")?,
                secrets: stores("secrets")?,
            },
            &options.service_account_issuer,
            options.service_account_max_token_expiration.as_secs() as i64,
        )),
    );
    Ok(())
}

/// Serves `pods/proxy` and `services/proxy`, sent on to pod IPs.
fn install_proxies(server: &ApiServer) -> anyhow::Result<()> {
    let store = |plural: &str| {
        server
            .store("", "v1", plural)
            .with_context(|| format!("the proxies read {plural}, which are not installed"))
    };
    let upstream = generic_server::upstream::Upstream::new().context("the proxies' client")?;
    server.add_connect(
        "proxy",
        Arc::new(proxy::PodProxy::new(store("pods")?, upstream.clone())),
    );
    server.add_connect(
        "proxy",
        Arc::new(proxy::ServiceProxy::new(
            store("services")?,
            store("endpoints")?,
            store("pods")?,
            upstream,
        )),
    );
    Ok(())
}

/// A Go duration of at least ten minutes (the shortest token kube signs).
fn max_token_expiration(text: &str) -> Result<std::time::Duration, String> {
    match generic_server::request::go_duration(text) {
        Some(d) if d >= std::time::Duration::from_secs(600) => Ok(d),
        Some(_) => Err("must be at least 10m".into()),
        None => Err(format!("{text:?} is not a duration such as 48h")),
    }
}

/// The ClusterIP allocator over the served ServiceCIDRs and IPAddresses
/// (kube 1.33 allocates from them: MultiCIDRServiceAllocator is on).
fn cluster_ip_allocator(server: &ApiServer) -> anyhow::Result<cluster_ip::ClusterIps> {
    let store = |plural: &str| {
        server
            .store("networking.k8s.io", "v1", plural)
            .with_context(|| format!("ClusterIPs are allocated as networking.k8s.io/v1 {plural}, which are not served"))
    };
    Ok(cluster_ip::ClusterIps::new(
        store("servicecidrs")?,
        store("ipaddresses")?,
    ))
}

fn service_ranges(options: &Options) -> anyhow::Result<Ranges> {
    let (low, high) = options
        .service_node_port_range
        .split_once('-')
        .and_then(|(l, h)| Some((l.trim().parse::<u16>().ok()?, h.trim().parse::<u16>().ok()?)))
        .context("--service-node-port-range must be low-high")?;
    Ranges::new(&options.service_cluster_ip_range, low..=high).map_err(anyhow::Error::msg)
}

/// The `kubernetes` service in `default`, pointing at the front door.
async fn bootstrap_kubernetes_service(
    server: &ApiServer,
    client: &Loopback,
    ranges: &Ranges,
    options: &Options,
) -> anyhow::Result<()> {
    use apimachinery::error::Reason;
    let ip = ranges.first().to_string();
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip],
                 "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": options.advertise_port}]},
    });
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": options.advertise_address}],
                     "ports": [{"name": "https", "port": options.advertise_port, "protocol": "TCP"}]}],
    });
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [options.advertise_address], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": options.advertise_port, "protocol": "TCP"}],
    });
    for ((group, version, plural), object) in [
        (("", "v1", "services"), service),
        (("", "v1", "endpoints"), endpoints),
        (("discovery.k8s.io", "v1", "endpointslices"), slice),
    ] {
        if server.store(group, version, plural).is_none() {
            continue;
        }
        let path = format!(
            "{}/namespaces/default/{plural}",
            apimachinery::group_version::group_version_path(group, version)
        );
        match client.create(&path, &object).await {
            Ok(_) => {}
            Err(e) if matches!(e.reason(), Reason::AlreadyExists | Reason::NotFound) => {}
            Err(e) => return Err(e).context(format!("creating {path}/kubernetes")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";

    /// What `--root-ca-file` holding `pem` gives.
    fn bundle_of(pem: &str) -> anyhow::Result<Option<String>> {
        let dir = std::env::temp_dir().join(format!("root-ca-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("ca.crt");
        std::fs::write(&path, pem)?;
        let bundle = root_ca_bundle(Some(&path));
        std::fs::remove_dir_all(&dir)?;
        bundle
    }

    #[test]
    fn the_root_ca_file_holds_certificates_and_no_key() {
        assert_eq!(root_ca_bundle(None).expect("no flag"), None);
        let two = format!("{CERT}{CERT}");
        assert_eq!(bundle_of(&two).expect("a bundle"), Some(two));
        assert!(bundle_of("").is_err(), "no certificate");
        assert!(bundle_of(&format!("{CERT}{KEY}")).is_err(), "a key");
        assert!(root_ca_bundle(Some(std::path::Path::new("/nonexistent/ca.crt"))).is_err());
    }
}
