//! metrics-server: the sample aggregated API server, and the example to
//! copy for building one on generic-server. It serves `metrics.k8s.io/v1beta1`
//! (NodeMetrics and PodMetrics, get and list, with discovery and OpenAPI)
//! over HTTPS, trusts the aggregator by its front-proxy client certificate,
//! and reports the host's real CPU and memory usage for the host's Node.
//!
//! Like a real aggregated server it talks only to the front door, with its
//! own client certificate: it reads its Node there, and leaves every
//! decision to it (TokenReview for bearer tokens, SubjectAccessReview for
//! each request, as kube's delegated authentication and authorization do;
//! its user needs `system:auth-delegator`).
//!
//! ```text
//! metrics-server --listen 0.0.0.0:4443 --front-door https://127.0.0.1:6443 \
//!     --tls-cert-file metrics-server.crt --tls-private-key-file metrics-server.key \
//!     --client-ca-file ca.crt --requestheader-client-ca-file front-proxy-ca.crt \
//!     --requestheader-allowed-names front-proxy-client
//! ```

mod api;
mod sampler;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use generic_server::config::{self, TlsOptions};
use generic_server::discovery::Discovery;
use generic_server::filters::delegated::{DelegatedAuthorizer, DelegatedTokens, FrontDoor};
use generic_server::filters::requestheader::RequestHeaderOptions;
use generic_server::pipeline::{self, Pipeline};
use generic_server::request::NotFoundHandler;
use generic_server::server::ApiServer;

/// metrics-server's options.
#[derive(Parser, Debug)]
#[command(
    version,
    about = "kubechain metrics-server: metrics.k8s.io for the host's node"
)]
struct Options {
    /// Address of the HTTPS server.
    #[arg(long, env = "KUBECHAIN_LISTEN", default_value = "0.0.0.0:4443")]
    listen: SocketAddr,
    /// The Node object this host is; default: the host name.
    #[arg(long, env = "KUBECHAIN_NODE_NAME")]
    node_name: Option<String>,
    /// How often the host's usage is measured (seconds, e.g. `10s`).
    #[arg(long, default_value = "10s", value_parser = config::seconds)]
    metric_resolution: Duration,
    /// HTTP worker threads.
    #[arg(long, env = "KUBECHAIN_WORKERS", default_value_t = 2)]
    workers: usize,
    /// Where to serve `/livez`, `/readyz` and `/healthz` over plain HTTP,
    /// for kubelet or docker probes (and `/metrics`, with `--plain-metrics`).
    #[arg(long, env = "KUBECHAIN_METRICS_ADDRESS")]
    metrics_address: Option<SocketAddr>,
    /// Also serve `/metrics` on `--metrics-address`, to anyone who reaches
    /// it; without it `/metrics` is served over HTTPS, behind RBAC.
    #[arg(long, env = "KUBECHAIN_PLAIN_METRICS")]
    plain_metrics: bool,
    /// The cluster's front door (the aggregator), the only server this one calls.
    #[arg(long, env = "KUBECHAIN_FRONT_DOOR")]
    front_door: String,
    #[command(flatten)]
    tls: TlsOptions,
    #[command(flatten)]
    requestheader: RequestHeaderOptions,
    #[command(flatten)]
    logging: config::Logging,
}

fn main() -> anyhow::Result<()> {
    generic_server::health::probe_if_asked();
    let options = Options::parse();
    config::run(options.logging, run(options))
}

async fn run(options: Options) -> anyhow::Result<()> {
    let tls = options.tls.load().context("loading TLS files")?;
    let front_door =
        Arc::new(FrontDoor::new(&options.front_door, &tls).context("a client of the front door")?);
    let authenticator = options
        .requestheader
        .authenticator(&tls.ca)
        .context("loading the front-proxy CA")?
        .with_token_reviews(DelegatedTokens::new(front_door.clone()));
    let https = tls.https_server_trusting(&[authenticator.front_proxy_ca()])?;
    let node = match options.node_name {
        Some(name) => name,
        None => nix::unistd::gethostname()?.to_string_lossy().into_owned(),
    };
    let resolution = options.metric_resolution.max(Duration::from_secs(1));
    let usage = sampler::start(resolution);
    let checks = vec![(
        "metric-collection".to_string(),
        sampler::check(usage.clone(), resolution),
    )];
    let server = Arc::new(ApiServer::new(
        "metrics-server",
        Arc::new(Discovery::default()),
        Arc::new(NotFoundHandler),
        checks,
    ));
    server.install_read_only(api::resources(api::Nodes {
        front_door: front_door.clone(),
        name: node.clone(),
        usage,
    }));
    if let Some(addr) = options.metrics_address {
        generic_server::metrics::serve(addr, server.clone(), options.plain_metrics)?;
    }

    let authorizer = DelegatedAuthorizer::new(front_door);
    let door = Arc::new(
        Pipeline::new(authenticator, Box::new(authorizer), server).named("metrics-server"),
    );
    tracing::info!(listen = %options.listen, %node, "metrics-server serving");
    pipeline::serve_https(options.listen, https, door, options.workers, Duration::ZERO)
        .await
        .context("serving HTTPS")
}
