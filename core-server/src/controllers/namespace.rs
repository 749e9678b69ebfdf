//! The namespace controller: empties a Terminating namespace of everything
//! namespaced that discovery lists (built-ins, custom resources, anything a
//! delegate serves), then removes the `kubernetes` finalizer so the
//! namespace goes away.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use generic_server::discovery::Discovery;
use generic_server::error::Reason;
use generic_server::loopback::Loopback;
use generic_server::resource::group_version_path;
use serde_json::{Value, json};

use crate::resources::NAMESPACE_FINALIZER as FINALIZER;

/// Retry delay while content remains (objects waiting on finalizers).
const RETRY: Duration = Duration::from_secs(2);

/// Empties and finalizes deleted namespaces.
pub struct NamespaceController {
    client: Loopback,
    discovery: Arc<Discovery>,
    busy: HashSet<String>,
}

impl NamespaceController {
    /// A controller acting through `client`, finding resources in `discovery`.
    pub fn new(client: Loopback, discovery: Arc<Discovery>) -> Self {
        NamespaceController {
            client,
            discovery,
            busy: HashSet::new(),
        }
    }
}

impl Actor for NamespaceController {
    type Context = Context<Self>;
}

/// A namespace's current state.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync(pub Value);

/// A finalization attempt ended; `done` if the namespace was finalized.
#[derive(Message)]
#[rtype(result = "()")]
struct Finished {
    name: String,
    done: bool,
}

impl Handler<Sync> for NamespaceController {
    type Result = ();

    fn handle(&mut self, Sync(ns): Sync, ctx: &mut Context<Self>) {
        let deleting = ns
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        let finalizers = ns
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let name = ns
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !deleting
            || !finalizers.iter().any(|f| f == FINALIZER)
            || !self.busy.insert(name.clone())
        {
            return;
        }
        let (client, discovery) = (self.client.clone(), self.discovery.clone());
        let me = ctx.address();
        tokio::spawn(async move {
            let done = match finalize(&client, &discovery, &name).await {
                Ok(done) => done,
                Err(e) => {
                    tracing::warn!(namespace = %name, error = %e, "namespace cleanup failed; retrying");
                    false
                }
            };
            me.do_send(Finished { name, done });
        });
    }
}

impl Handler<Finished> for NamespaceController {
    type Result = ();

    fn handle(&mut self, msg: Finished, ctx: &mut Context<Self>) {
        self.busy.remove(&msg.name);
        if msg.done {
            return;
        }
        let client = self.client.clone();
        ctx.run_later(RETRY, move |_, ctx| {
            let me = ctx.address();
            tokio::spawn(async move {
                if let Ok(ns) = client
                    .get(&format!("/api/v1/namespaces/{}", msg.name))
                    .await
                {
                    me.do_send(Sync(ns));
                }
            });
        });
    }
}

/// Every namespaced resource that supports deletecollection, preferred
/// version of each group, as collection paths in `namespace`.
fn collections(discovery: &Discovery, namespace: &str) -> Vec<String> {
    let docs = discovery.documents();
    let mut paths = Vec::new();
    for group in &docs.groups {
        let name = group
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(version) = group.pointer("/versions/0") else {
            continue;
        };
        let v = version["version"].as_str().unwrap_or_default();
        for r in version
            .get("resources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let verbs = r
                .get("verbs")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if r["scope"] == "Namespaced" && verbs.iter().any(|v| v == "deletecollection") {
                let plural = r["resource"].as_str().unwrap_or_default();
                paths.push(format!(
                    "{}/namespaces/{namespace}/{plural}",
                    group_version_path(name, v)
                ));
            }
        }
    }
    paths
}

/// Deletes the namespace's content; finalizes it once nothing is left.
async fn finalize(
    client: &Loopback,
    discovery: &Discovery,
    name: &str,
) -> generic_server::Result<bool> {
    let paths = collections(discovery, name);
    for path in &paths {
        match client.delete(path).await {
            Ok(_) => {}
            Err(e) if matches!(e.reason(), Reason::NotFound | Reason::MethodNotAllowed) => {}
            Err(e) => return Err(e),
        }
    }
    for path in &paths {
        let list = match client.get(path).await {
            Ok(list) => list,
            Err(e) if e.reason() == Reason::NotFound => continue,
            Err(e) => return Err(e),
        };
        if list
            .get("items")
            .and_then(Value::as_array)
            .is_some_and(|items| !items.is_empty())
        {
            return Ok(false);
        }
    }
    let path = format!("/api/v1/namespaces/{name}");
    let mut ns = client.get(&path).await?;
    let remaining: Vec<Value> = ns
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    ns["spec"]["finalizers"] = json!(remaining);
    match client.update(&format!("{path}/finalize"), &ns).await {
        Ok(_) => Ok(true),
        Err(e) if e.reason() == Reason::NotFound => Ok(true),
        Err(e) => Err(e),
    }
}
