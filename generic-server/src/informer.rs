//! Informers: how in-process controllers follow a resource. Every object is
//! delivered once at the start, then on each change, and all again on each
//! resync period.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::registry::Store;
use crate::storage::cacher::WatchEventType;

/// A change a controller is told about.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The object exists in this state (added, modified, or resynced).
    Present(Value),
    /// The object was deleted; its last state.
    Deleted(Value),
}

/// Follows a store, calling `on_change` for every object and change, until
/// `on_change` returns false.
pub fn follow(
    store: Arc<Store>,
    resync: Duration,
    on_change: impl Fn(Change) -> bool + Send + 'static,
) {
    tokio::spawn(async move {
        loop {
            let (snapshot, mut events) = match store.subscribe().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(resource = %store.resource.plural, error = %e, "informer cannot list; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            for obj in &snapshot.objects {
                if !on_change(Change::Present(obj.value())) {
                    return;
                }
            }
            let resync_at = tokio::time::sleep(resync);
            tokio::pin!(resync_at);
            loop {
                tokio::select! {
                    _ = &mut resync_at => break,
                    event = events.recv() => match event {
                        Ok(event) => {
                            let value = event.object.value();
                            let change = match event.kind {
                                WatchEventType::Deleted => Change::Deleted(value),
                                _ => Change::Present(value),
                            };
                            if !on_change(change) {
                                return;
                            }
                        }
                        Err(_) => break,
                    },
                }
            }
        }
    });
}
