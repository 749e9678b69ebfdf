//! What kube's service account controller and root CA publisher share: one
//! object kept in every namespace. It is created when an active namespace
//! appears (and on each resync), created again when it is deleted, and put
//! right when it drifts; a terminating or missing namespace gets nothing
//! (the create fails there, quietly, as kube ignores that failure).

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use apimachinery::error::{Error, Reason};
use generic_server::informer::{self, Change};
use generic_server::loopback::Loopback;
use generic_server::registry::Store;
use generic_server::storage::cacher::CachedObject;
use serde_json::Value;

/// How often namespaces and kept objects are delivered again.
const RESYNC: Duration = Duration::from_secs(30);

/// The object a [`PerNamespaceController`] keeps in each namespace.
pub trait KeptObject: Send + std::marker::Sync + 'static {
    /// Its resource, a core v1 plural.
    const RESOURCE: &'static str;
    /// Its name, the same in every namespace.
    const NAME: &'static str;

    /// The object to create.
    fn desired(&self) -> Value;

    /// The existing object put right, or `None` when it may stay as it is.
    fn reset(&self, _existing: &Value) -> Option<Value> {
        None
    }
}

/// Keeps a [`KeptObject`] in every active namespace.
pub struct PerNamespaceController<K: KeptObject> {
    client: Loopback,
    kept: Arc<K>,
}

impl<K: KeptObject> PerNamespaceController<K> {
    /// A controller keeping `kept`, acting through `client`.
    pub fn new(client: Loopback, kept: K) -> Self {
        PerNamespaceController {
            client,
            kept: Arc::new(kept),
        }
    }

    /// Starts the controller on `namespaces` and on `objects` (the kept
    /// object's resource); ready when both informers have synced.
    pub fn follow(self, namespaces: Arc<Store>, objects: Arc<Store>) -> Vec<informer::Synced> {
        let controller = self.start();
        let on_namespace = controller.clone();
        let namespaces = informer::follow(namespaces, RESYNC, move |change| {
            if let Change::Present(ns) = change {
                on_namespace.do_send(Sync(ns));
            }
            true
        });
        // Only the kept object's changes reach the actor, and only the kept
        // object is parsed: a resource such as configmaps has many others,
        // all delivered again at every resync.
        let objects = informer::follow_view(objects, RESYNC, kept_only::<K>, move |change| {
            controller.do_send(ObjectChanged(change));
            true
        });
        vec![namespaces, objects]
    }
}

/// The kept object of a namespace, parsed; any other object passes by.
fn kept_only<K: KeptObject>(obj: &CachedObject) -> Option<Value> {
    (obj.name == K::NAME).then(|| obj.value())
}

impl<K: KeptObject> Actor for PerNamespaceController<K> {
    type Context = Context<Self>;
}

/// A namespace's current state.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync(pub Value);

/// The kept object changed (or was delivered again at a resync).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ObjectChanged(pub Change);

impl<K: KeptObject> Handler<Sync> for PerNamespaceController<K> {
    type Result = ();

    fn handle(&mut self, Sync(ns): Sync, _ctx: &mut Context<Self>) {
        let active = text(&ns, "/status/phase") == Some("Active")
            && ns
                .pointer("/metadata/deletionTimestamp")
                .is_none_or(Value::is_null);
        if let (true, Some(name)) = (active, text(&ns, "/metadata/name")) {
            tokio::spawn(ensure(self.client.clone(), self.kept.clone(), name.into()));
        }
    }
}

impl<K: KeptObject> Handler<ObjectChanged> for PerNamespaceController<K> {
    type Result = ();

    fn handle(&mut self, ObjectChanged(change): ObjectChanged, _ctx: &mut Context<Self>) {
        match change {
            // Whatever the namespace's phase, as kube: a create in a
            // terminating namespace is refused, and that is ignored.
            Change::Deleted(object) => {
                if let Some(ns) = text(&object, "/metadata/namespace") {
                    tokio::spawn(ensure(self.client.clone(), self.kept.clone(), ns.into()));
                }
            }
            Change::Present(object) => {
                if let (Some(ns), Some(update)) = (
                    text(&object, "/metadata/namespace").map(str::to_string),
                    self.kept.reset(&object),
                ) {
                    let client = self.client.clone();
                    tokio::spawn(async move { put_right::<K>(&client, &ns, &update).await });
                }
            }
        }
    }
}

/// The string at `pointer` in `value`.
fn text<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// The collection path of the kept resource in `namespace`.
fn collection<K: KeptObject>(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/{}", K::RESOURCE)
}

/// Creates the kept object in `namespace` if it is missing, or puts it
/// right if it drifted.
async fn ensure<K: KeptObject>(client: Loopback, kept: Arc<K>, namespace: String) {
    let path = collection::<K>(&namespace);
    match client.get(&format!("{path}/{}", K::NAME)).await {
        Ok(existing) => {
            if let Some(update) = kept.reset(&existing) {
                put_right::<K>(&client, &namespace, &update).await;
            }
        }
        Err(e) if e.reason() == Reason::NotFound => {
            if let Err(e) = client.create(&path, &kept.desired()).await
                && !expected(&e)
            {
                tracing::warn!(%namespace, object = K::NAME, error = %e, "creating a per-namespace object failed; retrying at the next resync");
            }
        }
        Err(e) => {
            tracing::warn!(%namespace, object = K::NAME, error = %e, "reading a per-namespace object failed; retrying at the next resync");
        }
    }
}

/// Writes `update`, the kept object put right, back to `namespace`.
async fn put_right<K: KeptObject>(client: &Loopback, namespace: &str, update: &Value) {
    let path = format!("{}/{}", collection::<K>(namespace), K::NAME);
    if let Err(e) = client.update(&path, update).await
        && !expected(&e)
    {
        tracing::warn!(%namespace, object = K::NAME, error = %e, "resetting a per-namespace object failed; retrying at the next resync");
    }
}

/// Failures that need nothing done: another replica (or an earlier sync)
/// was first, a newer state is on its way, or the namespace is missing or
/// terminating.
fn expected(e: &Error) -> bool {
    match e.reason() {
        Reason::AlreadyExists | Reason::Conflict | Reason::NotFound => true,
        Reason::Forbidden => e.to_string().contains("because it is being terminated"),
        _ => false,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use generic_server::server::ApiServer;
    use serde_json::json;

    use super::*;

    /// A loopback client of a server holding namespaces and the core
    /// `resource` over memory storage.
    pub(crate) async fn client(resource: &str) -> Loopback {
        let resources = crate::resources::all()
            .into_iter()
            .filter(|r| r.group.is_empty() && [resource, "namespaces"].contains(&r.plural.as_str()))
            .collect();
        let (server, _) = ApiServer::in_memory(resources).await.expect("a server");
        Loopback::new(server, "test")
    }

    /// Creates the namespaces `names`.
    pub(crate) async fn namespaces(client: &Loopback, names: &[&str]) {
        for name in names {
            let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            client
                .create("/api/v1/namespaces", &ns)
                .await
                .expect("namespace");
        }
    }

    /// An active namespace as the informer delivers it.
    pub(crate) fn active(name: &str) -> Value {
        json!({"metadata": {"name": name}, "status": {"phase": "Active"}})
    }

    /// A terminating namespace as the informer delivers it.
    pub(crate) fn terminating(name: &str) -> Value {
        json!({"metadata": {"name": name, "deletionTimestamp": "2026-01-01T00:00:00Z"},
               "status": {"phase": "Terminating"}})
    }

    /// The object at `path` once `accept` takes it, polled for up to 5 s.
    pub(crate) async fn until(
        client: &Loopback,
        path: &str,
        accept: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        for _ in 0..100 {
            if let Ok(found) = client.get(path).await
                && accept(&found)
            {
                return Some(found);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    #[test]
    fn only_missing_and_terminating_namespaces_and_lost_races_are_expected() {
        let terminating = Error::new(
            Reason::Forbidden,
            "configmaps \"x\" is forbidden: unable to create new content in namespace gone because it is being terminated",
        );
        assert!(expected(&terminating));
        assert!(expected(&Error::new(Reason::Conflict, "modified")));
        assert!(expected(&Error::new(Reason::AlreadyExists, "exists")));
        let quota = Error::new(Reason::Forbidden, "exceeded quota: objects");
        assert!(!expected(&quota), "an admission refusal is worth a warning");
        assert!(!expected(&Error::internal("etcd")));
    }
}
