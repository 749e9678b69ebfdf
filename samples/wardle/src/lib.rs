//! wardle-server: kube's sample-apiserver rebuilt on kubechain-apiserver.
//! Flunders and Fischers of `wardle.example.com/v1alpha1`, Flunders of
//! `v1beta1` (converted both ways, stored as v1beta1), in etcd (or memory),
//! every verb served by the builder's generic store, and the BanFlunder
//! admission plugin. The binary runs [`run`]; a test can run it in its own
//! process with [`kubechain_apiserver::spawn`].

mod admission;
mod conversion;
mod strategy;
pub mod types;

use std::sync::Arc;

use kubechain_apiserver::{Conversion, Error, Resource, Server, ServerOptions, StorageOptions};
use types::{v1alpha1, v1beta1};

/// wardle-server's options: kube's, nothing of its own.
#[derive(clap::Parser, Debug)]
#[command(
    name = "wardle-server",
    version,
    about = "kube's sample-apiserver (wardle.example.com) on kubechain-apiserver"
)]
pub struct Options {
    /// How it serves and reaches the cluster.
    #[command(flatten)]
    pub server: ServerOptions,
    /// Where it stores Flunders and Fischers.
    #[command(flatten)]
    pub storage: StorageOptions,
}

/// Serves `wardle.example.com` until the process is asked to stop.
pub async fn run(options: Options) -> Result<(), Error> {
    let server = Server::new("wardle-server", options.server)?;
    let flunders = Conversion::<v1beta1::Flunder, v1alpha1::Flunder>::shared();
    let resources = vec![
        Resource::builtin::<v1beta1::Flunder>(strategy::BetaFlunders)
            .converted_by(flunders.clone()),
        Resource::builtin::<v1alpha1::Flunder>(strategy::Flunders).converted_by(flunders),
        Resource::builtin::<v1alpha1::Fischer>(strategy::Fischers),
    ];
    let ban = Arc::new(admission::BanFlunder {
        server: server.api(),
    });
    let storage = options.storage.connect().await?;
    server
        .with_admission(ban)
        .with_stored(resources, &storage)
        .serve()
        .await
}
