//! metrics-server: the sample aggregated API server, and the example to
//! copy for building one on generic-server. It serves `metrics.k8s.io/v1beta1`
//! (NodeMetrics and PodMetrics, get and list, with discovery and OpenAPI)
//! over HTTPS, trusts the aggregator by its front-proxy client certificate
//! (whose CA and names it follows in `kube-system/extension-apiserver-authentication`),
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
//!     --client-ca-file ca.crt
//! ```

mod api;
mod sampler;

use std::time::Duration;

use anyhow::Context as _;
use generic_server::config;
use kubechain_apiserver::{Server, ServerOptions};

/// metrics-server's options.
#[derive(clap::Parser, Debug)]
#[command(
    version,
    about = "kubechain metrics-server: metrics.k8s.io for the host's node"
)]
struct Options {
    /// The Node object this host is; default: the host name.
    #[arg(long, env = "KUBECHAIN_NODE_NAME")]
    node_name: Option<String>,
    /// How often the host's usage is measured (seconds, e.g. `10s`).
    #[arg(long, default_value = "10s", value_parser = config::seconds)]
    metric_resolution: Duration,
    #[command(flatten)]
    server: ServerOptions,
}

fn main() -> anyhow::Result<()> {
    let options: Options = kubechain_apiserver::parse();
    kubechain_apiserver::run(options.server.logging, run(options))
}

async fn run(options: Options) -> anyhow::Result<()> {
    let server = Server::new("metrics-server", options.server)?;
    let node = match options.node_name {
        Some(name) => name,
        None => nix::unistd::gethostname()?.to_string_lossy().into_owned(),
    };
    let resolution = options.metric_resolution.max(Duration::from_secs(1));
    let usage = sampler::start(resolution);
    let nodes = api::Nodes {
        front_door: server.front_door(),
        name: node.clone(),
        usage: usage.clone(),
    };
    tracing::info!(%node, "measuring the host");
    server
        .with_check("metric-collection", sampler::check(usage, resolution))
        // Listed every second: a new measurement is served (and watched)
        // within a second of being taken; an unchanged one is no event.
        .with_computed(api::resources(nodes), Duration::from_secs(1))
        .serve()
        .await
        .context("serving metrics.k8s.io")
}
