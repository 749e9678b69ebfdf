//! aggregator: the front door. It terminates TLS, authenticates and
//! authorizes every request, answers discovery from its own cache, and
//! delegates the rest down the chain over gRPC.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use generic_server::delegation::GrpcDelegate;
use generic_server::discovery::Discovery;
use generic_server::filters::authentication::Authenticator;
use generic_server::filters::authorization::MastersOnly;
use generic_server::front_door::{self, FrontDoor};
use generic_server::options::{self, EtcdOptions, TlsOptions};
use generic_server::server::{ApiServer, HealthCheck};

/// The aggregator's options.
#[derive(Parser, Debug)]
#[command(version, about = "kubechain aggregator: the cluster's front door")]
struct Options {
    /// Address of the HTTPS front door.
    #[arg(long, env = "KUBECHAIN_LISTEN", default_value = "0.0.0.0:6443")]
    listen: SocketAddr,
    /// The core server's gRPC endpoints, used until replicas register in etcd.
    #[arg(long, env = "KUBECHAIN_CORE_ENDPOINT", value_delimiter = ',', default_value = "https://127.0.0.1:7443")]
    core_endpoint: Vec<String>,
    /// The name the core server's certificate is verified against.
    #[arg(long, env = "KUBECHAIN_CORE_SERVER_NAME", default_value = "core-server")]
    core_server_name: String,
    /// A static token file (`token,user,uid,"group1,group2"` per line).
    #[arg(long, env = "KUBECHAIN_TOKEN_AUTH_FILE")]
    token_auth_file: Option<std::path::PathBuf>,
    /// Public key (PEM) that verifies service account tokens.
    #[arg(long, env = "KUBECHAIN_SERVICE_ACCOUNT_KEY_FILE")]
    service_account_key_file: Option<std::path::PathBuf>,
    /// The issuer (and audience) service account tokens must name.
    #[arg(long, env = "KUBECHAIN_SERVICE_ACCOUNT_ISSUER", default_value = "https://kubernetes.default.svc.cluster.local")]
    service_account_issuer: String,
    /// HTTP worker threads.
    #[arg(long, env = "KUBECHAIN_WORKERS", default_value_t = 2)]
    workers: usize,
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
    let backend = options::start_storage(&options.etcd).await.context("connecting to etcd")?;
    let etcd_check = backend.etcd_check.clone();
    let core = GrpcDelegate::new("core-server", &options.core_endpoint, &options.core_server_name, &tls)
        .context("core server endpoint")?;
    let discovery = Arc::new(Discovery::default());
    core.follow_endpoints(generic_server::endpoints::watch_endpoints(backend.etcd.clone(), "core-server"));
    core.follow_discovery(discovery.clone());
    let ping = core.clone();
    let core_check: HealthCheck = Arc::new(move || {
        let core = ping.clone();
        Box::pin(async move { core.ping().await })
    });
    let known = discovery.clone();
    let discovery_check: HealthCheck = Arc::new(move || {
        let ready = !known.documents().groups.is_empty();
        Box::pin(async move { if ready { Ok(()) } else { Err("no discovery from the core server yet".into()) } })
    });
    let checks: Vec<(String, HealthCheck)> =
        vec![("etcd".into(), etcd_check), ("core-server".into(), core_check), ("discovery".into(), discovery_check)];
    let server = Arc::new(ApiServer::new("aggregator", discovery, Arc::new(core), checks));

    let mut authenticator = match &options.token_auth_file {
        Some(path) => Authenticator::with_token_file(path).with_context(|| format!("reading {}", path.display()))?,
        None => Authenticator::default(),
    };
    if let Some(path) = &options.service_account_key_file {
        let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        authenticator = authenticator.with_service_accounts(generic_server::jwt::Verifier::new(&pem, &options.service_account_issuer)?);
    }
    let door = Arc::new(FrontDoor::new(authenticator, Box::new(MastersOnly), server));
    tracing::info!(listen = %options.listen, "aggregator serving");
    front_door::serve_https(options.listen, tls.https_server()?, door, options.workers).await.context("serving HTTPS")
}
