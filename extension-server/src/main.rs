//! extension-server: the end of the server chain. It will serve
//! CustomResourceDefinitions and their custom resources; every path it does
//! not serve gets a 404 Status.

mod cel;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use generic_server::delegation::DelegationService;
use generic_server::discovery::Discovery;
use generic_server::options::{self, EtcdOptions, TlsOptions};
use generic_server::request::NotFoundHandler;
use generic_server::server::{ApiServer, HealthCheck};

/// The extension server's options.
#[derive(Parser, Debug)]
#[command(version, about = "kubechain extension-server: custom resources, the end of the chain")]
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
    let (_cacher, etcd_check) = options::start_storage(&options.etcd).await.context("connecting to etcd")?;
    let discovery = Arc::new(Discovery::default());
    let checks: Vec<(String, HealthCheck)> = vec![("etcd".into(), etcd_check)];
    let server = Arc::new(ApiServer::new("extension-server", discovery.clone(), Arc::new(NotFoundHandler), checks));
    tracing::info!(listen = %options.listen, "extension-server serving");
    let service = DelegationService::new(server, discovery, options.allowed_callers);
    options::serve_grpc(options.listen, &tls, service).await.context("serving gRPC")
}
