//! Storage: a narrow key-value interface with revisions, as etcd v3 gives it.
//!
//! [`Storage`] is implemented by etcd ([`etcd::EtcdStorage`]) and by an
//! in-memory double for unit tests ([`memory::MemoryStorage`]); both pass the
//! same conformance suite ([`conformance`]). Values are opaque bytes here;
//! the registry stores JSON.

pub mod cacher;
pub mod encryption;
pub mod etcd;
pub mod memory;

use std::pin::Pin;

use crate::Error;
use bytes::Bytes;
use futures::Stream;

/// One stored key with its revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The full key.
    pub key: String,
    /// The stored bytes (empty for a delete event without a previous value).
    pub value: Bytes,
    /// The revision that created the key.
    pub create_revision: i64,
    /// The revision of the last change (for a delete event: the delete's).
    pub mod_revision: i64,
    /// The value was read with an encryption key that no longer writes:
    /// an update rewrites it even when the object is unchanged.
    pub stale: bool,
}

/// One page of a range read.
#[derive(Debug, Clone)]
pub struct Page {
    /// The keys, in key order.
    pub kvs: Vec<KeyValue>,
    /// The store revision the page was read at.
    pub revision: i64,
    /// Whether keys remain beyond this page.
    pub more: bool,
    /// How many keys the range held from its start (this page included).
    pub count: i64,
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Created or modified.
    Put,
    /// Deleted.
    Delete,
}

/// A change to one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// The key after the change; for a delete, the key with the delete's revision.
    pub kv: KeyValue,
    /// The key before the change, when the store provides it.
    pub prev: Option<KeyValue>,
}

impl Event {
    /// The revision of the change.
    pub fn revision(&self) -> i64 {
        self.kv.mod_revision
    }
}

/// A stream of event batches in revision order; an `Err` ends it.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Vec<Event>>> + Send>>;

/// Result of storage operations.
pub type Result<T> = std::result::Result<T, Error>;

/// A revisioned key-value store.
#[async_trait::async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Reads one key at the latest revision.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// Reads keys in `[start, end)`, at most `limit` (0 = all), at `revision` (0 = latest).
    async fn range(&self, start: &str, end: &str, limit: i64, revision: i64) -> Result<Page>;

    /// Creates a key that must not exist; returns the new revision.
    async fn create(&self, key: &str, value: Bytes) -> Result<i64>;

    /// Replaces a key whose mod revision must equal `expected`; returns the new revision.
    async fn update(&self, key: &str, value: Bytes, expected: i64) -> Result<i64>;

    /// Deletes a key (if `expected` is set, only at that mod revision);
    /// returns the deleted value and the delete's revision.
    async fn delete(&self, key: &str, expected: Option<i64>) -> Result<(KeyValue, i64)>;

    /// Streams changes to keys in `[start, end)` from `from_revision` (inclusive).
    async fn watch(&self, start: &str, end: &str, from_revision: i64) -> Result<EventStream>;

    /// The store's current revision.
    async fn current_revision(&self) -> Result<i64>;
}

/// The end of the range holding every key with `prefix`.
pub fn prefix_end(prefix: &str) -> String {
    let mut bytes = prefix.as_bytes().to_vec();
    while let Some(last) = bytes.pop() {
        if last < 0xff {
            bytes.push(last + 1);
            return String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    "\0".into()
}

/// Makes what `storage` holds under `prefix` exactly `wanted` (key to
/// value), writing only what differs; returns how many keys were written
/// or removed. For copies kept of objects read elsewhere (computed
/// resources, the front door's objects), not for the cluster's own.
pub async fn replace_prefix(
    storage: &dyn Storage,
    prefix: &str,
    mut wanted: std::collections::BTreeMap<String, Bytes>,
) -> Result<usize> {
    let held = storage.range(prefix, &prefix_end(prefix), 0, 0).await?;
    let mut changed = 0;
    for kv in &held.kvs {
        match wanted.remove(&kv.key) {
            Some(value) if value == kv.value => {}
            Some(value) => {
                storage.update(&kv.key, value, kv.mod_revision).await?;
                changed += 1;
            }
            None => {
                storage.delete(&kv.key, Some(kv.mod_revision)).await?;
                changed += 1;
            }
        }
    }
    for (key, value) in wanted {
        storage.create(&key, value).await?;
        changed += 1;
    }
    Ok(changed)
}

/// A storage conformance suite run against every implementation.
#[cfg(test)]
pub mod conformance {
    use super::*;
    use futures::StreamExt;

    /// Runs every check against a fresh store whose keys start with `root`.
    pub async fn run(store: &dyn Storage, root: &str) {
        crud(store, root).await;
        ranges(store, root).await;
        watches(store, root).await;
    }

    async fn crud(store: &dyn Storage, root: &str) {
        let key = format!("{root}/crud/a");
        assert_eq!(store.get(&key).await.unwrap(), None);
        let r1 = store
            .create(&key, Bytes::from_static(b"one"))
            .await
            .unwrap();
        assert!(matches!(
            store.create(&key, Bytes::from_static(b"x")).await,
            Err(Error::AlreadyExists(_))
        ));
        let kv = store.get(&key).await.unwrap().unwrap();
        assert_eq!(
            (kv.value.as_ref(), kv.mod_revision, kv.create_revision),
            (b"one".as_ref(), r1, r1)
        );
        let r2 = store
            .update(&key, Bytes::from_static(b"two"), r1)
            .await
            .unwrap();
        assert!(r2 > r1);
        match store.update(&key, Bytes::from_static(b"three"), r1).await {
            Err(Error::Conflict {
                current: Some(cur), ..
            }) => assert_eq!(cur.mod_revision, r2),
            other => panic!("expected conflict, got {other:?}"),
        }
        assert!(matches!(
            store.delete(&key, Some(r1)).await,
            Err(Error::Conflict { .. })
        ));
        let (old, r3) = store.delete(&key, Some(r2)).await.unwrap();
        assert_eq!(old.value.as_ref(), b"two");
        assert!(r3 > r2);
        assert!(matches!(
            store.delete(&key, None).await,
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            store.update(&key, Bytes::new(), r2).await,
            Err(Error::NotFound(_))
        ));
        assert!(store.current_revision().await.unwrap() >= r3);
    }

    async fn ranges(store: &dyn Storage, root: &str) {
        let prefix = format!("{root}/range/");
        let mut revs = Vec::new();
        for name in ["a", "b", "c", "d"] {
            revs.push(
                store
                    .create(&format!("{prefix}{name}"), Bytes::from(name))
                    .await
                    .unwrap(),
            );
        }
        let end = prefix_end(&prefix);
        let page = store.range(&prefix, &end, 2, 0).await.unwrap();
        assert_eq!(page.kvs.len(), 2);
        assert!(page.more);
        assert_eq!(page.count, 4);
        let next = format!("{}\0", page.kvs[1].key);
        let rest = store.range(&next, &end, 0, page.revision).await.unwrap();
        assert_eq!(
            rest.kvs
                .iter()
                .map(|kv| kv.value.as_ref())
                .collect::<Vec<_>>(),
            vec![b"c".as_ref(), b"d".as_ref()]
        );
        assert!(!rest.more);
        // Reads at an older revision see the old state.
        store.delete(&format!("{prefix}a"), None).await.unwrap();
        let old = store.range(&prefix, &end, 0, revs[3]).await.unwrap();
        assert_eq!(old.kvs.len(), 4);
        let now = store.range(&prefix, &end, 0, 0).await.unwrap();
        assert_eq!(now.kvs.len(), 3);
    }

    async fn watches(store: &dyn Storage, root: &str) {
        let prefix = format!("{root}/watch/");
        let end = prefix_end(&prefix);
        let start = store.current_revision().await.unwrap() + 1;
        let mut stream = store.watch(&prefix, &end, start).await.unwrap();
        let key = format!("{prefix}x");
        let r1 = store.create(&key, Bytes::from_static(b"1")).await.unwrap();
        let r2 = store
            .update(&key, Bytes::from_static(b"2"), r1)
            .await
            .unwrap();
        store
            .create(&format!("{root}/elsewhere"), Bytes::new())
            .await
            .unwrap();
        let (_, r3) = store.delete(&key, None).await.unwrap();
        let mut seen = Vec::new();
        while seen.len() < 3 {
            let batch = tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
                .await
                .expect("watch event in time")
                .expect("stream open")
                .unwrap();
            seen.extend(batch);
        }
        assert_eq!(
            seen.iter()
                .map(|e| (e.kind, e.revision()))
                .collect::<Vec<_>>(),
            vec![
                (EventKind::Put, r1),
                (EventKind::Put, r2),
                (EventKind::Delete, r3)
            ]
        );
        assert_eq!(
            seen[2].prev.as_ref().map(|p| p.value.as_ref()),
            Some(b"2".as_ref())
        );
        // A watch from an old revision replays history.
        let mut replay = store.watch(&prefix, &end, r2).await.unwrap();
        let first = replay.next().await.unwrap().unwrap();
        assert_eq!(first[0].revision(), r2);
    }

    #[test]
    fn prefix_end_increments_last_byte() {
        assert_eq!(prefix_end("/registry/configmaps/"), "/registry/configmaps0");
    }
}
