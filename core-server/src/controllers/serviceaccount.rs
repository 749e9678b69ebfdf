//! The service account controller: every active namespace has a `default`
//! ServiceAccount, created again when it is deleted.

use serde_json::{Value, json};

use super::per_namespace::{KeptObject, PerNamespaceController};

/// The `default` ServiceAccount, as kube's controller creates it.
pub struct DefaultServiceAccount;

impl KeptObject for DefaultServiceAccount {
    const RESOURCE: &'static str = "serviceaccounts";
    const NAME: &'static str = "default";

    fn desired(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": Self::NAME}})
    }
}

/// Creates the `default` ServiceAccount of each namespace.
pub type ServiceAccountController = PerNamespaceController<DefaultServiceAccount>;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use actix::Actor;

    use super::*;
    use crate::controllers::per_namespace::tests::{
        active, client, namespaces, terminating, until,
    };
    use crate::controllers::per_namespace::{ObjectChanged, Sync};
    use generic_server::informer::Change;

    #[actix::test]
    async fn an_active_namespace_gets_a_default_account_and_a_terminating_one_does_not() {
        let client = client("serviceaccounts").await;
        let controller =
            ServiceAccountController::new(client.clone(), DefaultServiceAccount).start();
        namespaces(&client, &["active", "terminating"]).await;
        controller
            .send(Sync(terminating("terminating")))
            .await
            .expect("delivered");
        controller
            .send(Sync(active("active")))
            .await
            .expect("delivered");
        let path = "/api/v1/namespaces/active/serviceaccounts/default";
        let sa = until(&client, path, |_| true)
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

        // Deleted, it comes back; an existing one is kept as it is.
        client.delete(path).await.expect("deleted");
        controller
            .send(ObjectChanged(Change::Deleted(sa.clone())))
            .await
            .expect("delivered");
        let again = until(&client, path, |a| {
            a["metadata"]["uid"] != sa["metadata"]["uid"]
        })
        .await
        .expect("recreated");
        let labelled = client
            .update(
                path,
                &json!({"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": "default", "labels": {"team": "a"}}}),
            )
            .await
            .expect("labelled");
        controller
            .send(ObjectChanged(Change::Present(labelled.clone())))
            .await
            .expect("delivered");
        controller
            .send(Sync(active("active")))
            .await
            .expect("delivered");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let kept = client.get(path).await.expect("kept");
        assert_eq!(kept["metadata"]["uid"], again["metadata"]["uid"]);
        assert_eq!(kept["metadata"]["labels"], labelled["metadata"]["labels"]);
    }
}
