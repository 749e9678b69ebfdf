//! Autoregistration: a local APIService for every group and version the
//! chain serves (built-ins and every served CRD version), with
//! kube-apiserver's priorities, so `kubectl get apiservices` looks like a
//! real cluster's. Only the replica holding the lease writes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use apimachinery::error::Reason;
use generic_server::discovery::{Discovery, group_priority};
use generic_server::loopback::Loopback;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::apiservice::is_local;

/// The label kube-aggregator puts on what it manages.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";
const PATH: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

/// An APIService name: `v1.` for core, `<version>.<group>` otherwise.
fn name_of(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// kube-apiserver's version priorities: GA 15, beta 9, alpha 1; a custom
/// resource's versions 100.
fn version_priority(version: &str, builtin: bool) -> i64 {
    if !builtin {
        return 100;
    }
    if version.contains("alpha") {
        1
    } else if version.contains("beta") {
        9
    } else {
        15
    }
}

/// The local APIServices the chain's discovery calls for.
pub fn desired(groups: &[Value]) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for group in groups {
        let name = group
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let builtin = group_priority(name) != 1000;
        for version in group["versions"].as_array().into_iter().flatten() {
            let v = version["version"].as_str().unwrap_or_default();
            let apiservice = json!({
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": name_of(name, v), "labels": {AUTOMANAGED: if builtin { "onstart" } else { "true" }}},
                "spec": {
                    "group": name,
                    "version": v,
                    "groupPriorityMinimum": if builtin { group_priority(name) } else { 1000 },
                    "versionPriority": version_priority(v, builtin),
                },
            });
            out.insert(name_of(name, v), apiservice);
        }
    }
    out
}

/// Keeps local APIServices in step with discovery while this replica leads.
pub fn start(client: Loopback, discovery: Arc<Discovery>, mut leader: watch::Receiver<bool>) {
    let mut documents = discovery.subscribe();
    tokio::spawn(async move {
        loop {
            if *leader.borrow_and_update() {
                documents.borrow_and_update();
                if let Err(e) = reconcile(&client, &discovery.local()).await {
                    tracing::debug!(error = %e, "autoregistration incomplete; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    continue;
                }
            }
            tokio::select! {
                r = documents.changed() => if r.is_err() { return },
                r = leader.changed() => if r.is_err() { return },
            }
        }
    });
}

/// Creates missing local APIServices and deletes automanaged ones whose
/// group/version is no longer served.
async fn reconcile(client: &Loopback, groups: &[Value]) -> apimachinery::Result<()> {
    let wanted = desired(groups);
    let list = client.get(PATH).await?;
    let existing: HashMap<String, Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            Some((
                s.pointer("/metadata/name")?.as_str()?.to_string(),
                s.clone(),
            ))
        })
        .collect();
    for (name, apiservice) in &wanted {
        if !existing.contains_key(name) {
            match client.create(PATH, apiservice).await {
                Ok(_) => tracing::info!(apiservice = %name, "registered"),
                Err(e) if e.reason() == Reason::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
    }
    for (name, svc) in &existing {
        let automanaged = svc
            .pointer(&format!(
                "/metadata/labels/{}",
                AUTOMANAGED.replace('/', "~1")
            ))
            .and_then(Value::as_str);
        if automanaged == Some("true") && is_local(svc) && !wanted.contains_key(name) {
            match client.delete(&format!("{PATH}/{name}")).await {
                Ok(_) => tracing::info!(apiservice = %name, "unregistered"),
                Err(e) if e.reason() == Reason::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_and_custom_priorities() {
        let groups = vec![
            json!({"metadata": {"name": ""}, "versions": [{"version": "v1"}]}),
            json!({"metadata": {"name": "apps"}, "versions": [{"version": "v1"}]}),
            json!({"metadata": {"name": "example.com"}, "versions": [{"version": "v2"}, {"version": "v1beta1"}]}),
        ];
        let wanted = desired(&groups);
        assert_eq!(
            wanted.keys().collect::<Vec<_>>(),
            vec!["v1.", "v1.apps", "v1beta1.example.com", "v2.example.com"]
        );
        assert_eq!(wanted["v1."]["spec"]["groupPriorityMinimum"], 18000);
        assert_eq!(wanted["v1.apps"]["spec"]["versionPriority"], 15);
        assert_eq!(
            wanted["v2.example.com"]["spec"]["groupPriorityMinimum"],
            1000
        );
        assert_eq!(
            wanted["v2.example.com"]["metadata"]["labels"][AUTOMANAGED],
            "true"
        );
    }
}
