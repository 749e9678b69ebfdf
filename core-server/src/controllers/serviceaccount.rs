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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use generic_server::server::ApiServer;

    use super::*;

    /// A loopback client of a server holding namespaces and service
    /// accounts over memory storage.
    async fn client() -> Loopback {
        let resources = crate::resources::all()
            .into_iter()
            .filter(|r| {
                r.group.is_empty() && matches!(r.plural.as_str(), "namespaces" | "serviceaccounts")
            })
            .collect();
        let (server, _) = ApiServer::in_memory(resources).await.expect("a server");
        Loopback::new(server, "test")
    }

    /// The namespace's `default` ServiceAccount, polled for up to 5 s.
    async fn default_account(client: &Loopback, namespace: &str) -> Option<Value> {
        let path = format!("/api/v1/namespaces/{namespace}/serviceaccounts/default");
        for _ in 0..100 {
            if let Ok(sa) = client.get(&path).await {
                return Some(sa);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    #[actix::test]
    async fn an_active_namespace_gets_a_default_account_and_a_terminating_one_does_not() {
        let client = client().await;
        let controller = ServiceAccountController::new(client.clone()).start();
        for name in ["active", "terminating"] {
            let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            client
                .create("/api/v1/namespaces", &ns)
                .await
                .expect("namespace");
        }
        let active = json!({"metadata": {"name": "active"}, "status": {"phase": "Active"}});
        let terminating = json!({"metadata": {"name": "terminating", "deletionTimestamp": "2026-01-01T00:00:00Z"},
                                 "status": {"phase": "Terminating"}});
        controller.send(Sync(terminating)).await.expect("delivered");
        controller
            .send(Sync(active.clone()))
            .await
            .expect("delivered");
        let sa = default_account(&client, "active")
            .await
            .expect("a default account");
        assert_eq!(sa["metadata"]["namespace"], "active");
        assert!(
            client
                .get("/api/v1/namespaces/terminating/serviceaccounts/default")
                .await
                .is_err(),
            "a terminating namespace gets no account"
        );

        // Deleted, it comes back on the next sync; an existing one is kept.
        client
            .delete("/api/v1/namespaces/active/serviceaccounts/default")
            .await
            .expect("deleted");
        controller
            .send(Sync(active.clone()))
            .await
            .expect("delivered");
        let again = default_account(&client, "active").await.expect("recreated");
        assert_ne!(again["metadata"]["uid"], sa["metadata"]["uid"]);
        controller.send(Sync(active)).await.expect("delivered");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let kept = default_account(&client, "active").await.expect("kept");
        assert_eq!(kept["metadata"]["uid"], again["metadata"]["uid"]);
    }
}
