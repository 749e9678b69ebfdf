//! wardle-server: kube's sample-apiserver rebuilt on kubechain-apiserver.
//! Flunders and Fischers of `wardle.example.com/v1alpha1`, stored in etcd
//! (or memory), every verb served by the builder's generic store, and the
//! BanFlunder admission plugin.

mod admission;
mod strategy;
mod types;

use std::sync::Arc;

use anyhow::Context as _;
use kubechain_apiserver::{Resource, Server, ServerOptions, StorageOptions};

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
    let resources = vec![
        Resource::builtin::<types::Flunder>(strategy::Flunders),
        Resource::builtin::<types::Fischer>(strategy::Fischers),
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
