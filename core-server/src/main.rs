//! core-server: the built-in APIs of Kubernetes (core v1, and the groups
//! that follow), served over gRPC to the aggregator. What it does not serve
//! it hands to the extension server.

mod controllers;
mod resources;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix::Actor;
use anyhow::Context as _;
use clap::Parser;
use generic_server::admission::{Admission, NamespaceLifecycle};
use generic_server::delegation::{DelegationService, GrpcDelegate};
use generic_server::discovery::Discovery;
use generic_server::garbage_collector::GarbageCollector;
use generic_server::informer::{self, Change};
use generic_server::loopback::Loopback;
use generic_server::options::{self, EtcdOptions, TlsOptions};
use generic_server::server::{ApiServer, HealthCheck};
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
    /// The extension server's gRPC endpoint.
    #[arg(long, env = "KUBECHAIN_EXTENSION_ENDPOINT", default_value = "https://127.0.0.1:7444")]
    extension_endpoint: String,
    /// The name the extension server's certificate is verified against.
    #[arg(long, env = "KUBECHAIN_EXTENSION_SERVER_NAME", default_value = "extension-server")]
    extension_server_name: String,
    /// Certificate CNs allowed to call this server.
    #[arg(long, env = "KUBECHAIN_ALLOWED_CALLERS", value_delimiter = ',', default_value = "kubechain-aggregator")]
    allowed_callers: Vec<String>,
    #[command(flatten)]
    etcd: EtcdOptions,
    #[command(flatten)]
    tls: TlsOptions,
}

fn main() -> anyhow::Result<()> {
    options::run(run(Options::parse()))
}

async fn run(options: Options) -> anyhow::Result<()> {
    let tls = options.tls.load().context("loading TLS files")?;
    let (cacher, etcd_check) = options::start_storage(&options.etcd).await.context("connecting to etcd")?;
    let prefix = options.etcd.etcd_prefix.trim_end_matches('/').to_string();

    let delegate = GrpcDelegate::new("extension-server", &options.extension_endpoint, &options.extension_server_name, &tls)
        .context("extension server endpoint")?;
    let discovery = Arc::new(Discovery::default());
    delegate.follow_discovery(discovery.clone());
    let checks: Vec<(String, HealthCheck)> = vec![("etcd".into(), etcd_check)];
    let server = Arc::new(ApiServer::new("core-server", discovery.clone(), Arc::new(delegate), checks));

    let lifecycle = NamespaceLifecycle::new(cacher.clone(), &prefix).await.context("namespace lifecycle")?;
    let admission = Admission::new(vec![Arc::new(lifecycle)]);
    server.install(resources::all(), &cacher, &admission, &prefix).await.context("installing resources")?;

    let client = Loopback::new(server.clone(), "system:kube-controller-manager");
    for name in SYSTEM_NAMESPACES {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        if let Err(e) = client.create("/api/v1/namespaces", &ns).await {
            if e.reason() != generic_server::error::Reason::AlreadyExists {
                return Err(e).context(format!("creating namespace {name}"));
            }
        }
    }
    start_controllers(&server, client, discovery.clone());

    tracing::info!(listen = %options.listen, "core-server serving");
    let service = DelegationService::new(server, discovery, options.allowed_callers);
    options::serve_grpc(options.listen, &tls, service).await.context("serving gRPC")
}

/// Starts the namespace and service account controllers on namespace events.
fn start_controllers(server: &Arc<ApiServer>, client: Loopback, discovery: Arc<Discovery>) {
    let Some(namespaces) = server.store("", "v1", "namespaces") else { return };
    GarbageCollector::start(server.stores(), client.clone(), discovery.clone());
    let finalizer = controllers::namespace::NamespaceController::new(client.clone(), discovery).start();
    let accounts = controllers::serviceaccount::ServiceAccountController::new(client).start();
    informer::follow(namespaces, Duration::from_secs(30), move |change| {
        if let Change::Present(ns) = change {
            finalizer.do_send(controllers::namespace::Sync(ns.clone()));
            accounts.do_send(controllers::serviceaccount::Sync(ns));
        }
        true
    });
}
