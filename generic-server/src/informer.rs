//! Informers: how in-process controllers follow a resource. Every object is
//! delivered once at the start, then on each change, and all again on each
//! resync period.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

use crate::registry::Store;
use crate::storage::cacher::{CachedObject, Cacher, Snapshot, WatchEvent, WatchEventType};
use apimachinery::error::Result;

/// A change a controller is told about.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The object exists in this state (added, modified, or resynced).
    Present(Value),
    /// The object was deleted; its last state.
    Deleted(Value),
}

/// What an informer starts from: a snapshot and the live events after it.
type Subscription = (Snapshot, broadcast::Receiver<Arc<WatchEvent>>);

/// Tells when an informer has delivered every object of its first snapshot
/// (kube's "has synced"): a controller's post-start hook waits for it.
pub struct Synced(oneshot::Receiver<()>);

impl Synced {
    /// Waits until the first snapshot is delivered (or the informer ended).
    pub async fn wait(self) {
        let _ = self.0.await;
    }

    /// Waits for every informer of `all`.
    pub async fn all(all: Vec<Synced>) {
        for synced in all {
            synced.wait().await;
        }
    }
}

/// What a controller reads of a cached object: the value it is handed, or
/// `None` to pass the object by without parsing it.
pub type View = fn(&CachedObject) -> Option<Value>;

/// The whole object, parsed (what [`follow`] hands on).
pub fn whole(obj: &CachedObject) -> Option<Value> {
    Some(obj.value())
}

/// Follows a store, calling `on_change` for every object and change, until
/// `on_change` returns false.
pub fn follow(
    store: Arc<Store>,
    resync: Duration,
    on_change: impl Fn(Change) -> bool + Send + 'static,
) -> Synced {
    follow_view(store, resync, whole, on_change)
}

/// Follows a store like [`follow`], handing on what `view` reads of each
/// object: a controller that keeps one name, or reads only an object's
/// metadata, does not parse every object of a large resource at each
/// resync.
pub fn follow_view(
    store: Arc<Store>,
    resync: Duration,
    view: View,
    on_change: impl Fn(Change) -> bool + Send + 'static,
) -> Synced {
    let name = store.resource.plural.clone();
    follow_source(
        name,
        move || {
            let store = store.clone();
            async move { Some(store.subscribe().await) }
        },
        resync,
        view,
        on_change,
    )
}

/// Follows the cache registered in `cacher` under `prefix` like
/// [`follow`], until the cache is unregistered.
pub fn follow_cache(
    cacher: Arc<Cacher>,
    prefix: String,
    resync: Duration,
    on_change: impl Fn(Change) -> bool + Send + 'static,
) -> Synced {
    follow_source(
        prefix.clone(),
        move || {
            let (cacher, prefix) = (cacher.clone(), prefix.clone());
            async move {
                let cache = cacher.registered(&prefix)?;
                Some(Ok(cache.snapshot_and_subscribe(&prefix, cacher.progress())))
            }
        },
        resync,
        whole,
        on_change,
    )
}

/// The informer loop over any source; a source answering `None` has
/// nothing more to follow.
fn follow_source<F>(
    name: String,
    subscribe: impl Fn() -> F + Send + 'static,
    resync: Duration,
    view: View,
    on_change: impl Fn(Change) -> bool + Send + 'static,
) -> Synced
where
    F: Future<Output = Option<Result<Subscription>>> + Send,
{
    let (synced, first) = oneshot::channel();
    let mut synced = Some(synced);
    tokio::spawn(async move {
        loop {
            let (snapshot, mut events) = match subscribe().await {
                None => return,
                Some(Ok(s)) => s,
                Some(Err(e)) => {
                    tracing::warn!(source = %name, error = %e, "informer cannot list; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            for value in snapshot.objects.iter().filter_map(|obj| view(obj)) {
                if !on_change(Change::Present(value)) {
                    return;
                }
            }
            if let Some(synced) = synced.take() {
                let _ = synced.send(());
            }
            let resync_at = tokio::time::sleep(resync);
            tokio::pin!(resync_at);
            loop {
                tokio::select! {
                    _ = &mut resync_at => break,
                    event = events.recv() => match event {
                        Ok(event) => {
                            if let Some(value) = view(&event.object) {
                                let change = match event.kind {
                                    WatchEventType::Deleted => Change::Deleted(value),
                                    _ => Change::Present(value),
                                };
                                if !on_change(change) {
                                    return;
                                }
                            }
                        }
                        Err(_) => break,
                    },
                }
            }
        }
    });
    Synced(first)
}
