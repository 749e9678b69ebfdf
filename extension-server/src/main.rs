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
use generic_server::config::Config;
use generic_server::informer;
use generic_server::loopback::Loopback;
use generic_server::service_client::{Clients, StorageReader};
use kubechain_apiserver::{ChainEndpoint, Server};

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
    /// A Unix socket to serve delegation on as well, for callers on this
    /// host (the launcher's): no TLS, and only this user's processes may call.
    #[arg(long, env = "KUBECHAIN_GRPC_SOCKET")]
    grpc_socket: Option<std::path::PathBuf>,
    /// Certificate CNs allowed to call this server.
    #[arg(
        long,
        env = "KUBECHAIN_ALLOWED_CALLERS",
        value_delimiter = ',',
        default_value = "kubechain-aggregator,kubechain-core-server"
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
    let endpoint = ChainEndpoint {
        listen: options.listen,
        socket: options.grpc_socket,
        allowed_callers: options.allowed_callers,
    };
    let server = Server::in_chain("extension-server", &options.config, None).await?;
    let storage = server.storage();
    let mut server = server
        .with_stored(vec![crd::resource()], &storage)
        .install()
        .await
        .context("installing CRDs")?;
    let crds = server
        .api()
        .store("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .context("the CRD store")?;
    let (api, cacher) = (server.api().clone(), storage.cacher().clone());
    let context = controllers::crd::Context {
        server: api.clone(),
        admission: server.admission().clone(),
        etcd_root: storage.prefix().to_string(),
        client: Loopback::new(api.clone(), "system:apiextensions-controller"),
        reader: Arc::new(StorageReader::new(
            cacher.storage().clone(),
            storage.prefix(),
        )),
        cacher,
        webhooks: Arc::new(Clients::new(None)),
    };
    server.add_post_start_hook("start-apiextensions-controllers", async move {
        let controller = controllers::crd::CrdController::new(context).start();
        informer::follow(crds.clone(), Duration::from_secs(60), move |change| {
            controller.do_send(controllers::crd::Sync(change));
            true
        })
        .wait()
        .await;
        controllers::crd::served_at_start(api, crds).await;
    });
    server
        .serve_delegation(endpoint)
        .await
        .context("serving gRPC")
}
