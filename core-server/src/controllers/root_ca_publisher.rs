//! kube's root CA certificate publisher: every namespace holds the
//! ConfigMap `kube-root-ca.crt`, whose `ca.crt` is the cluster's CA bundle,
//! so a pod can verify the API server (the ServiceAccount admission plugin
//! projects it into every pod's token volume). It is created when a
//! namespace appears, created again when deleted, and reset when its data
//! differs from the bundle or its description annotation is missing or
//! empty; other edits (labels, other annotations, `binaryData`) are kept,
//! as kube keeps them.

use serde_json::{Value, json};

use super::per_namespace::{KeptObject, PerNamespaceController};

/// The ConfigMap's name (kube's `RootCACertConfigMapName`).
pub const CONFIG_MAP_NAME: &str = "kube-root-ca.crt";
/// The key of the CA bundle in its data.
const CA_KEY: &str = "ca.crt";
/// The annotation describing its use.
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// kube's description, word for word.
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// The `kube-root-ca.crt` ConfigMap holding one CA bundle.
pub struct RootCaConfigMap {
    /// The PEM bundle, as read from `--root-ca-file`.
    bundle: String,
}

impl RootCaConfigMap {
    /// The ConfigMap publishing `bundle` (PEM certificates).
    pub fn new(bundle: String) -> Self {
        RootCaConfigMap { bundle }
    }

    /// The data the ConfigMap holds: the bundle, and nothing else.
    fn data(&self) -> Value {
        json!({ CA_KEY: self.bundle })
    }
}

impl KeptObject for RootCaConfigMap {
    const RESOURCE: &'static str = "configmaps";
    const NAME: &'static str = CONFIG_MAP_NAME;

    fn desired(&self) -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP_NAME, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
            "data": self.data(),
        })
    }

    /// kube compares the whole of `data` with the bundle, and only asks the
    /// annotation to be there: a description changed to another non-empty
    /// text is kept.
    fn reset(&self, existing: &Value) -> Option<Value> {
        let data_matches = existing.get("data") == Some(&self.data());
        let described = existing
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
            .and_then(Value::as_str)
            .is_some_and(|d| !d.is_empty());
        if data_matches && described {
            return None;
        }
        let mut update = existing.clone();
        let object = update.as_object_mut()?;
        object.insert("data".into(), self.data());
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()?;
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations
            .as_object_mut()?
            .insert(DESCRIPTION_ANNOTATION.into(), DESCRIPTION.into());
        Some(update)
    }
}

/// Publishes the cluster's CA bundle into every namespace.
pub type RootCaPublisher = PerNamespaceController<RootCaConfigMap>;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use actix::Actor;
    use generic_server::informer::Change;

    use super::*;
    use crate::controllers::per_namespace::tests::{
        active, client, namespaces, terminating, until,
    };
    use crate::controllers::per_namespace::{ObjectChanged, Sync};

    const BUNDLE: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const PATH: &str = "/api/v1/namespaces/team/configmaps/kube-root-ca.crt";

    fn publisher() -> RootCaConfigMap {
        RootCaConfigMap::new(BUNDLE.into())
    }

    /// Whether `cm` is what the publisher writes.
    fn published(cm: &Value) -> bool {
        cm["data"] == json!({"ca.crt": BUNDLE})
            && cm["metadata"]["annotations"]["kubernetes.io/description"] == DESCRIPTION
    }

    #[test]
    fn the_desired_configmap_is_kubes() {
        let cm = publisher().desired();
        assert_eq!(cm["metadata"]["name"], "kube-root-ca.crt");
        assert!(published(&cm));
        assert_eq!(publisher().reset(&cm), None, "as created, it stays");
    }

    #[test]
    fn drifted_data_or_a_missing_description_is_reset_and_other_edits_are_kept() {
        let kept = json!({"metadata": {"name": CONFIG_MAP_NAME, "resourceVersion": "7",
            "labels": {"team": "a"},
            "annotations": {"kubernetes.io/description": "ours now", "other": "x"}},
            "data": {"ca.crt": BUNDLE}, "binaryData": {"b": "AAE="}});
        assert_eq!(
            publisher().reset(&kept),
            None,
            "kube asks only for a description"
        );

        let edited = json!({"metadata": {"name": CONFIG_MAP_NAME, "resourceVersion": "7",
            "labels": {"team": "a"}, "annotations": {"other": "x"}},
            "data": {"ca.crt": "forged", "extra": "y"}, "binaryData": {"b": "AAE="}});
        let reset = publisher().reset(&edited).expect("reset");
        assert!(published(&reset));
        assert_eq!(
            reset["metadata"]["resourceVersion"], "7",
            "a conditional update"
        );
        assert_eq!(reset["metadata"]["labels"], json!({"team": "a"}));
        assert_eq!(reset["metadata"]["annotations"]["other"], "x");
        assert_eq!(reset["binaryData"], json!({"b": "AAE="}));

        let emptied = json!({"metadata": {"name": CONFIG_MAP_NAME,
            "annotations": {"kubernetes.io/description": ""}}});
        assert!(published(&publisher().reset(&emptied).expect("reset")));
        let bare = json!({"metadata": {"name": CONFIG_MAP_NAME}, "data": {"ca.crt": BUNDLE}});
        assert!(published(&publisher().reset(&bare).expect("reset")));
    }

    #[actix::test]
    async fn published_in_active_namespaces_recreated_and_reset() {
        let client = client("configmaps").await;
        let controller = RootCaPublisher::new(client.clone(), publisher()).start();
        namespaces(&client, &["team", "leaving"]).await;
        controller
            .send(Sync(terminating("leaving")))
            .await
            .expect("delivered");
        controller
            .send(Sync(active("team")))
            .await
            .expect("delivered");
        let first = until(&client, PATH, published).await.expect("published");
        assert!(
            client
                .get("/api/v1/namespaces/leaving/configmaps/kube-root-ca.crt")
                .await
                .is_err(),
            "a terminating namespace gets nothing"
        );

        // Deleted, it comes back.
        client.delete(PATH).await.expect("deleted");
        controller
            .send(ObjectChanged(Change::Deleted(first.clone())))
            .await
            .expect("delivered");
        let again = until(&client, PATH, |cm| {
            cm["metadata"]["uid"] != first["metadata"]["uid"]
        })
        .await
        .expect("recreated");
        assert!(published(&again));

        // Its data edited, it is reset, keeping what else was changed.
        let mut forged = again.clone();
        forged["data"]["ca.crt"] = json!("forged");
        forged["metadata"]["labels"] = json!({"team": "a"});
        let forged = client.update(PATH, &forged).await.expect("edited");
        controller
            .send(ObjectChanged(Change::Present(forged.clone())))
            .await
            .expect("delivered");
        let reset = until(&client, PATH, published).await.expect("reset");
        assert_eq!(reset["metadata"]["uid"], again["metadata"]["uid"]);
        assert_eq!(reset["metadata"]["labels"], json!({"team": "a"}));

        // Edited again while the publisher was away: a namespace resync
        // finds it.
        let mut stripped = reset.clone();
        stripped["metadata"]["annotations"] = json!({});
        client.update(PATH, &stripped).await.expect("edited");
        controller
            .send(Sync(active("team")))
            .await
            .expect("delivered");
        until(&client, PATH, published).await.expect("reset again");

        // A stale state (a newer one is on its way) writes nothing.
        controller
            .send(ObjectChanged(Change::Present(forged)))
            .await
            .expect("delivered");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(published(&client.get(PATH).await.expect("kept")));
    }
}
