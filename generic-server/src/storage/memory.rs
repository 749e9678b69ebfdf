//! An in-memory [`Storage`] with etcd's revision semantics, for unit tests.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;

use super::{Event, EventKind, EventStream, KeyValue, Page, Result, Storage};
use crate::Error;

/// A multi-version in-memory key-value store.
pub struct MemoryStorage {
    state: Mutex<State>,
    events: broadcast::Sender<Vec<Event>>,
}

#[derive(Default)]
struct State {
    revision: i64,
    /// Every version of every key: (revision, value or None if deleted).
    versions: BTreeMap<String, Vec<(i64, Option<KeyValue>)>>,
    history: Vec<Event>,
}

impl Default for MemoryStorage {
    fn default() -> Self {
        MemoryStorage {
            state: Mutex::new(State {
                revision: 1,
                ..Default::default()
            }),
            events: broadcast::channel(4096).0,
        }
    }
}

impl State {
    fn latest(&self, key: &str) -> Option<&KeyValue> {
        self.versions.get(key)?.last()?.1.as_ref()
    }

    fn at(&self, key: &str, revision: i64) -> Option<&KeyValue> {
        self.versions
            .get(key)?
            .iter()
            .rev()
            .find(|(r, _)| *r <= revision)?
            .1
            .as_ref()
    }

    fn record(&mut self, event: Event, sender: &broadcast::Sender<Vec<Event>>) {
        let value = (event.kind == EventKind::Put).then(|| event.kv.clone());
        self.versions
            .entry(event.kv.key.clone())
            .or_default()
            .push((self.revision, value));
        self.history.push(event.clone());
        let _ = sender.send(vec![event]);
    }
}

impl MemoryStorage {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn put(
        &self,
        key: &str,
        value: Bytes,
        check: impl FnOnce(Option<&KeyValue>) -> Result<()>,
    ) -> Result<i64> {
        let mut state = self.lock();
        let prev = state.latest(key).cloned();
        check(prev.as_ref())?;
        state.revision += 1;
        let revision = state.revision;
        let kv = KeyValue {
            key: key.into(),
            value,
            create_revision: prev.as_ref().map_or(revision, |p| p.create_revision),
            mod_revision: revision,
            stale: false,
        };
        state.record(
            Event {
                kind: EventKind::Put,
                kv,
                prev,
            },
            &self.events,
        );
        Ok(revision)
    }
}

#[async_trait::async_trait]
impl Storage for MemoryStorage {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        Ok(self.lock().latest(key).cloned())
    }

    async fn range(&self, start: &str, end: &str, limit: i64, revision: i64) -> Result<Page> {
        let state = self.lock();
        if revision > state.revision {
            return Err(Error::FutureRevision(revision));
        }
        let at = if revision > 0 {
            revision
        } else {
            state.revision
        };
        let keys = if end == "\0" {
            state.versions.range(start.to_string()..)
        } else {
            state.versions.range(start.to_string()..end.to_string())
        };
        let all: Vec<KeyValue> = keys
            .filter_map(|(key, _)| state.at(key, at).cloned())
            .collect();
        let count = all.len() as i64;
        let take = if limit > 0 { limit as usize } else { all.len() };
        let more = all.len() > take;
        Ok(Page {
            kvs: all.into_iter().take(take).collect(),
            revision: state.revision,
            more,
            count,
        })
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<i64> {
        self.put(key, value, |prev| match prev {
            Some(_) => Err(Error::AlreadyExists(key.into())),
            None => Ok(()),
        })
    }

    async fn update(&self, key: &str, value: Bytes, expected: i64) -> Result<i64> {
        self.put(key, value, |prev| match prev {
            None => Err(Error::NotFound(key.into())),
            Some(p) if p.mod_revision != expected => Err(Error::Conflict {
                key: key.into(),
                expected,
                current: Some(p.clone()),
            }),
            Some(_) => Ok(()),
        })
    }

    async fn delete(&self, key: &str, expected: Option<i64>) -> Result<(KeyValue, i64)> {
        let mut state = self.lock();
        let Some(prev) = state.latest(key).cloned() else {
            return Err(Error::NotFound(key.into()));
        };
        if let Some(expected) = expected.filter(|e| *e != prev.mod_revision) {
            return Err(Error::Conflict {
                key: key.into(),
                expected,
                current: Some(prev),
            });
        }
        state.revision += 1;
        let revision = state.revision;
        let kv = KeyValue {
            key: key.into(),
            value: Bytes::new(),
            create_revision: 0,
            mod_revision: revision,
            stale: false,
        };
        state.record(
            Event {
                kind: EventKind::Delete,
                kv,
                prev: Some(prev.clone()),
            },
            &self.events,
        );
        Ok((prev, revision))
    }

    async fn watch(&self, start: &str, end: &str, from_revision: i64) -> Result<EventStream> {
        let (start, end) = (start.to_string(), end.to_string());
        // An end of "\0" means every key from start, as in etcd.
        let in_range = move |e: &Event| e.kv.key >= start && (end == "\0" || e.kv.key < end);
        let (replay, live) = {
            let state = self.lock();
            let replay: Vec<Event> = state
                .history
                .iter()
                .filter(|e| e.revision() >= from_revision && in_range(e))
                .cloned()
                .collect();
            (replay, self.events.subscribe())
        };
        let last_replayed = replay.last().map_or(0, Event::revision);
        let replay = futures::stream::iter((!replay.is_empty()).then_some(Ok(replay)));
        let live = BroadcastStream::new(live).filter_map(move |batch| {
            let batch: Option<Vec<Event>> = batch.ok().map(|b| {
                b.into_iter()
                    .filter(|e| {
                        e.revision() > last_replayed && e.revision() >= from_revision && in_range(e)
                    })
                    .collect()
            });
            async move { batch.filter(|b: &Vec<Event>| !b.is_empty()).map(Ok) }
        });
        Ok(replay.chain(live).boxed())
    }

    async fn current_revision(&self) -> Result<i64> {
        Ok(self.lock().revision)
    }
}

/// Memory storage with faults a unit test turns on: a revision ahead of
/// what the watch delivers (a lagging cache), range answers above a size
/// failing as etcd's client fails a message too large, and creates that
/// find their key taken.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Faulty {
    /// The store behind the faults.
    pub inner: MemoryStorage,
    /// Added to every current revision.
    pub lag: std::sync::atomic::AtomicI64,
    /// Range answers above this many bytes fail (0: none do).
    pub answer_cap: std::sync::atomic::AtomicUsize,
    /// The limit of every range asked for, in order.
    pub limits: Mutex<Vec<i64>>,
    /// How many of the next creates find their key already taken.
    pub collisions: std::sync::atomic::AtomicUsize,
    /// Revision reads fail (each once `revision_release` is notified).
    pub revision_down: std::sync::atomic::AtomicBool,
    /// What a failing revision read waits for.
    pub revision_release: tokio::sync::Notify,
    /// Revision reads sent.
    pub revision_reads: std::sync::atomic::AtomicUsize,
}

#[cfg(test)]
#[async_trait::async_trait]
impl Storage for Faulty {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.inner.get(key).await
    }
    async fn range(&self, start: &str, end: &str, limit: i64, revision: i64) -> Result<Page> {
        use std::sync::atomic::Ordering::Relaxed;
        self.limits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(limit);
        let page = self.inner.range(start, end, limit, revision).await?;
        let bytes: usize = page.kvs.iter().map(|kv| kv.value.len()).sum();
        let cap = self.answer_cap.load(Relaxed);
        if cap > 0 && bytes > cap {
            return Err(Error::TooLarge(format!("{bytes} bytes")));
        }
        Ok(page)
    }
    async fn create(&self, key: &str, value: Bytes) -> Result<i64> {
        use std::sync::atomic::Ordering::Relaxed;
        let taken = self
            .collisions
            .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if taken {
            return Err(Error::AlreadyExists(key.to_string()));
        }
        self.inner.create(key, value).await
    }
    async fn update(&self, key: &str, value: Bytes, expected: i64) -> Result<i64> {
        self.inner.update(key, value, expected).await
    }
    async fn delete(&self, key: &str, expected: Option<i64>) -> Result<(KeyValue, i64)> {
        self.inner.delete(key, expected).await
    }
    async fn watch(&self, start: &str, end: &str, from: i64) -> Result<EventStream> {
        self.inner.watch(start, end, from).await
    }
    async fn current_revision(&self) -> Result<i64> {
        use std::sync::atomic::Ordering::Relaxed;
        self.revision_reads.fetch_add(1, Relaxed);
        if self.revision_down.load(Relaxed) {
            self.revision_release.notified().await;
            return Err(Error::Unavailable("etcd did not answer".into()));
        }
        let lag = self.lag.load(Relaxed);
        Ok(self.inner.current_revision().await? + lag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn conformance() {
        super::super::conformance::run(&MemoryStorage::default(), "/t").await;
    }
}
