//! The core server's controllers, each an actor fed by an informer, started
//! as named post-start hooks (`/readyz?verbose` lists them); a hook ends
//! once its informers have synced.

pub mod garbage_collector;
pub mod serviceaccount;

use std::time::Duration;

use actix::Actor;
use generic_server::config::GenericServer;
use generic_server::informer::{self, Change};
use generic_server::loopback::Loopback;

use crate::allocation::AllocationRepair;

/// Adds the core server's controllers: the garbage collector (over this
/// server's objects and its delegates'), the service account controller on
/// namespace events, and the repair of service IP and node port allocations.
pub fn add_post_start_hooks(server: &mut GenericServer, client: Loopback) {
    let api = server.server.clone();
    let (discovery, cacher, root) = (
        server.discovery.clone(),
        server.cacher.clone(),
        server.etcd_root.clone(),
    );
    let gc_client = client.clone();
    server.add_post_start_hook("start-garbage-collector-controller", async move {
        let (collector, synced) =
            garbage_collector::GarbageCollector::start(api.stores(), gc_client, discovery.clone());
        garbage_collector::follow_delegates(&collector, cacher, discovery, &root);
        informer::Synced::all(synced).await;
    });
    if let Some(namespaces) = server.server.store("", "v1", "namespaces") {
        server.add_post_start_hook("start-service-account-controller", async move {
            let accounts = serviceaccount::ServiceAccountController::new(client).start();
            informer::follow(namespaces, Duration::from_secs(30), move |change| {
                if let Change::Present(ns) = change {
                    accounts.do_send(serviceaccount::Sync(ns));
                }
                true
            })
            .wait()
            .await;
        });
    }
    if let Some(services) = server.server.store("", "v1", "services") {
        let storage = server.cacher.storage().clone();
        server.add_post_start_hook("start-service-ip-repair-controllers", async move {
            AllocationRepair::start(storage, services).wait().await;
        });
    }
}
