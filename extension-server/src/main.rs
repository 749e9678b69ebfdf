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
use generic_server::admission::quota::ResourceQuota;
use generic_server::admission::{self, Admission, AdmissionPlugin, NamespaceLifecycle};
use generic_server::config::{self, Config};
use generic_server::informer;
use generic_server::loopback::Loopback;
use generic_server::service_client::{Clients, StorageReader};

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
    generic_server::health::probe_if_asked();
    let options = Options::parse();
    config::run(options.config.logging, run(options))
}

async fn run(options: Options) -> anyhow::Result<()> {
    let mut server = options
        .config
        .complete(None)
        .await?
        .new("extension-server")?;
    let lifecycle = NamespaceLifecycle::new(server.cacher.clone(), &server.etcd_root)
        .await
        .context("namespace lifecycle")?;
    let mut plugins: Vec<Arc<dyn AdmissionPlugin>> = vec![Arc::new(lifecycle)];
    plugins.extend(
        admission::dynamic(&server.cacher, &server.etcd_root, Vec::new())
            .await
            .context("admission policies and webhooks")?,
    );
    plugins.push(Arc::new(
        ResourceQuota::new(server.cacher.clone(), &server.etcd_root)
            .await
            .context("resource quota")?,
    ));
    let admission = Admission::new(plugins);
    server
        .install(vec![crd::resource()], &admission)
        .await
        .context("installing CRDs")?;
    let crds = server
        .server
        .store("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .context("the CRD store")?;
    let context = controllers::crd::Context {
        server: server.server.clone(),
        cacher: server.cacher.clone(),
        admission,
        etcd_root: server.etcd_root.clone(),
        client: Loopback::new(server.server.clone(), "system:apiextensions-controller"),
        reader: Arc::new(StorageReader::new(
            server.cacher.storage().clone(),
            &server.etcd_root,
        )),
        webhooks: Arc::new(Clients::new(None)),
    };
    let api = server.server.clone();
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
        .run_grpc(options.listen, options.grpc_socket, options.allowed_callers)
        .await
        .context("serving gRPC")
}
