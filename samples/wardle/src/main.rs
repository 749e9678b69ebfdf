//! wardle-server: kube's sample-apiserver rebuilt on kubechain-apiserver.
//! Flunders and Fischers of `wardle.example.com/v1alpha1`, Flunders of
//! `v1beta1` (converted both ways, stored as v1beta1), in etcd (or memory),
//! every verb served by the builder's generic store, and the BanFlunder
//! admission plugin.

mod admission;
mod conversion;
mod strategy;
mod types;

use std::sync::Arc;

use anyhow::Context as _;
use kubechain_apiserver::{Conversion, Resource, Server, ServerOptions, StorageOptions};
use types::{v1alpha1, v1beta1};

/// wardle-server's options: kube's, nothing of its own.
#[derive(clap::Parser, Debug)]
#[command(
    version,
    about = "kube's sample-apiserver (wardle.example.com) on kubechain-apiserver"
)]
struct Options {
    #[command(flatten)]
    server: ServerOptions,
    #[command(flatten)]
    storage: StorageOptions,
}

fn main() -> anyhow::Result<()> {
    let options: Options = kubechain_apiserver::parse();
    kubechain_apiserver::run(options.server.logging, run(options))
}

async fn run(options: Options) -> anyhow::Result<()> {
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
    server
        .with_admission(ban)
        .with_stored(resources, &options.storage)
        .serve()
        .await
        .context("serving wardle.example.com")
}
