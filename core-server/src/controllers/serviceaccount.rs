//! The service account controller: every active namespace has a `default`
//! ServiceAccount.

use actix::prelude::*;
use apimachinery::error::Reason;
use generic_server::loopback::Loopback;
use serde_json::{Value, json};

/// Creates the `default` ServiceAccount of each namespace.
pub struct ServiceAccountController {
    client: Loopback,
}

impl ServiceAccountController {
    /// A controller acting through `client`.
    pub fn new(client: Loopback) -> Self {
        ServiceAccountController { client }
    }
}

impl Actor for ServiceAccountController {
    type Context = Context<Self>;
}

/// A namespace's current state.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync(pub Value);

impl Handler<Sync> for ServiceAccountController {
    type Result = ();

    fn handle(&mut self, Sync(ns): Sync, _ctx: &mut Context<Self>) {
        let active = ns.pointer("/status/phase").and_then(Value::as_str) == Some("Active")
            && ns
                .pointer("/metadata/deletionTimestamp")
                .is_none_or(Value::is_null);
        let Some(name) = ns
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return;
        };
        if !active {
            return;
        }
        let client = self.client.clone();
        tokio::spawn(async move {
            let path = format!("/api/v1/namespaces/{name}/serviceaccounts");
            match client.get(&format!("{path}/default")).await {
                Ok(_) => {}
                Err(e) if e.reason() == Reason::NotFound => {
                    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
                    if let Err(e) = client.create(&path, &sa).await {
                        if !matches!(
                            e.reason(),
                            Reason::AlreadyExists | Reason::NotFound | Reason::Forbidden
                        ) {
                            tracing::warn!(namespace = %name, error = %e, "creating the default service account failed");
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(namespace = %name, error = %e, "reading the default service account failed")
                }
            }
        });
    }
}
