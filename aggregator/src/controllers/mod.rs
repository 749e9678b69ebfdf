//! The aggregator's controllers, each started as a named post-start hook
//! (`/readyz?verbose` lists them). Only the replica holding the
//! `aggregator-controllers` lease writes.

pub mod autoregister;
pub mod available;
pub mod namespaces;

use std::sync::Arc;
use std::time::Duration;

use actix::Actor;
use anyhow::Context as _;
use generic_server::informer::{self, Change};
use generic_server::loopback::Loopback;
use generic_server::request::Handler;
use generic_server::service_client::Clients;
use kubechain_apiserver::{Chained, Installed};
use tokio::sync::watch;

use crate::proxy::Routes;

/// What the aggregator's controllers share.
pub struct Shared {
    /// A client of the aggregator's own APIs and the chain behind it.
    pub client: Loopback,
    /// The front door's handler, which reaches aggregated servers too.
    pub front_door: Arc<dyn Handler>,
    /// HTTPS clients to aggregated servers.
    pub clients: Arc<Clients>,
    /// Where the proxy sends each aggregated group.
    pub routes: Routes,
    /// Whether this replica holds the controllers' lease.
    pub leader: watch::Receiver<bool>,
}

/// Adds the APIService availability controller, autoregistration and the
/// namespace controller.
pub fn add_post_start_hooks(server: &mut Installed<Chained>, shared: Shared) -> anyhow::Result<()> {
    let apiservices = server
        .api()
        .store("apiregistration.k8s.io", "v1", "apiservices")
        .context("the APIService store")?;
    let available = available::AvailableConditionController::new(
        shared.client.clone(),
        shared.clients,
        server.discovery().clone(),
        shared.routes,
        shared.leader.clone(),
        server.etcd().clone(),
    );
    server.api().add_health_check(
        "autoregister-completion",
        autoregister::completion_check(apiservices.clone(), server.discovery().clone()),
    );
    server.add_post_start_hook("apiservice-status-available-controller", async move {
        let controller = available.start();
        informer::follow(apiservices, Duration::from_secs(300), move |change| {
            controller.do_send(available::Sync(change));
            true
        })
        .wait()
        .await;
    });
    let (client, discovery, leader) = (
        shared.client,
        server.discovery().clone(),
        shared.leader.clone(),
    );
    server.add_post_start_hook("apiservice-registration-controller", async move {
        autoregister::AutoRegistration::new(client, discovery, leader).start();
    });
    // The namespace controller reaches every server, aggregated ones too,
    // through the front door's own handler.
    let finalizer = namespaces::NamespaceController::new(
        Loopback::new(
            shared.front_door,
            "system:serviceaccount:kube-system:namespace-controller",
        ),
        server.discovery().clone(),
        shared.leader,
    );
    let (cacher, prefix) = (
        server.storage().cacher().clone(),
        apimachinery::keys::key_prefix(server.storage().prefix(), "", "namespaces"),
    );
    server.add_post_start_hook("start-namespace-controller", async move {
        if let Err(e) = cacher
            .register(&prefix, generic_server::storage::cacher::generic_ingest())
            .await
        {
            tracing::error!(error = %e, "cannot cache namespaces; the namespace controller does not run");
            return;
        }
        let finalizer = finalizer.start();
        informer::follow_cache(cacher, prefix, Duration::from_secs(30), move |change| {
            if let Change::Present(ns) = change {
                finalizer.do_send(namespaces::Sync(ns));
            }
            true
        })
        .wait()
        .await;
    });
    Ok(())
}
