//! extension-server: the end of the server chain. It serves
//! CustomResourceDefinitions and their custom resources; every path it does
//! not serve gets a 404 Status.

mod controllers;
mod conversion;
mod crd;
mod custom_resource;

use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Duration;

use actix::Actor;
use anyhow::Context as _;
use clap::Parser;
use generic_server::admission::{Admission, NamespaceLifecycle};
use generic_server::delegation::DelegationService;
use generic_server::discovery::Discovery;
use generic_server::informer;
use generic_server::loopback::Loopback;
use generic_server::options::{self, EtcdOptions, TlsOptions};
use generic_server::request::NotFoundHandler;
use generic_server::server::{ApiServer, HealthCheck};

/// The extension server's options.
#[derive(Parser, Debug)]
#[command(
    version,
    about = "kubechain extension-server: custom resources, the end of the chain"
)]
struct Options {
    /// Address of the gRPC delegation endpoint.
    #[arg(long, env = "KUBECHAIN_LISTEN", default_value = "127.0.0.1:7444")]
    listen: SocketAddr,
    /// Certificate CNs allowed to call this server.
    #[arg(
        long,
        env = "KUBECHAIN_ALLOWED_CALLERS",
        value_delimiter = ',',
        default_value = "kubechain-aggregator,kubechain-core-server"
    )]
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
    let backend = options::start_storage(&options.etcd)
        .await
        .context("connecting to etcd")?;
    let (cacher, etcd_check) = (backend.cacher.clone(), backend.etcd_check.clone());
    let prefix = options.etcd.etcd_prefix.trim_end_matches('/').to_string();
    let discovery = Arc::new(Discovery::default());
    let checks: Vec<(String, HealthCheck)> = vec![("etcd".into(), etcd_check)];
    let server = Arc::new(ApiServer::new(
        "extension-server",
        discovery.clone(),
        Arc::new(NotFoundHandler),
        checks,
    ));
    let lifecycle = NamespaceLifecycle::new(cacher.clone(), &prefix)
        .await
        .context("namespace lifecycle")?;
    let admission = Admission::new(vec![Arc::new(lifecycle)]);
    server
        .install(vec![crd::resource()], &cacher, &admission, &prefix)
        .await
        .context("installing CRDs")?;
    let crds = server
        .store("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .context("the CRD store")?;
    let client = Loopback::new(server.clone(), "system:apiextensions-controller");
    let reader = Arc::new(generic_server::service_client::StorageReader::new(
        cacher.storage().clone(),
        &prefix,
    ));
    let webhooks = Arc::new(generic_server::service_client::Clients::new(None));
    let context = controllers::crd::Context {
        server: server.clone(),
        cacher,
        admission,
        etcd_root: prefix,
        client,
        reader,
        webhooks,
    };
    let controller = controllers::crd::CrdController::new(context).start();
    informer::follow(crds, Duration::from_secs(60), move |change| {
        controller.do_send(controllers::crd::Sync(change));
        true
    });
    tracing::info!(listen = %options.listen, "extension-server serving");
    let service = DelegationService::new(server, discovery, options.allowed_callers);
    options::serve_grpc(
        options.listen,
        &tls,
        service,
        backend.etcd,
        "extension-server",
    )
    .await
    .context("serving gRPC")
}
