//! The watch cache: one etcd watch over every key feeds an in-memory cache
//! per resource, and LIST, GET and WATCH are served from memory.
//!
//! Because the watch covers every key, each revision etcd hands out arrives
//! as an event, so the dispatcher's progress is exact: once it has applied
//! revision R, every cache is current at R. A consistent read asks etcd for
//! its revision (one cheap read, shared by every request that arrived before
//! it was sent) and waits until the dispatcher has applied it.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{Mutex, broadcast, oneshot, watch};

use apimachinery::label_selector::Labels;

use super::{Event, EventKind, EventStream, Storage, prefix_end};
use crate::Error;

/// Events kept per resource for watches that resume from a past revision.
const RING_CAPACITY: usize = 1024;
/// Events buffered per resource for slow watchers before they are dropped
/// (a dropped watch is resumed by its client, an informer re-lists). Its
/// buffer is allocated whole (about 40 bytes an event) for every watched
/// resource, every custom resource included: 1,024 keeps it near 40 KiB.
const BROADCAST_CAPACITY: usize = 1024;
/// Objects on the first page of a resource's initial list.
const LIST_PAGE: i64 = 1000;
/// Bytes aimed at on each later page: etcd 3.4 walks its index from a
/// page's first key to the end of the range whatever the limit, so a load
/// costs (objects)² ÷ (page size), and pages must be large.
const LOAD_PAGE_BYTES: usize = 16 * 1024 * 1024;
/// Most objects on one page of an initial list.
const LOAD_PAGE_MAX: i64 = 20_000;
/// How long a consistent read waits for the cache before giving up.
const FRESHNESS_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the cache proves it is current with etcd (reads etcd's
/// revision and sees its events reach it).
const PROOF_PERIOD: Duration = Duration::from_secs(1);
/// How long the cache may go without that proof before it counts as stale:
/// it ends its watches and refuses new ones and consistent reads until it
/// is current again, so that clients go on at a replica that is (a
/// replica cut from etcd would otherwise serve silent watches).
const STALE_AFTER: Duration = Duration::from_secs(4);

/// One cached object: its JSON (with `metadata.resourceVersion` set) and the
/// few parsed attributes selectors need.
#[derive(Debug)]
pub struct CachedObject {
    /// The etcd key (shared with the cache's index).
    pub key: Arc<str>,
    /// The revision of this state (for a deleted object: the delete's).
    pub revision: i64,
    /// The object's JSON as served.
    pub bytes: Bytes,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: Labels,
    /// Extra selectable fields the resource declares, by field path.
    pub fields: Vec<(String, String)>,
}

impl CachedObject {
    /// Parses the object.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }
}

/// Turns a stored key and value into a cached object at a revision, or
/// `None` if the value is not an object of the resource.
pub type Ingest = Arc<dyn Fn(&str, &[u8], i64) -> Option<CachedObject> + Send + Sync>;

/// The field of a lean cached object (one that only says who an object
/// is) holding its uid.
pub const UID_FIELD: &str = "metadata.uid";

/// Ingests any object: parses it, stamps the revision, reads name,
/// namespace and labels.
pub fn generic_ingest() -> Ingest {
    ingest_with(Arc::new(|_: &Value| Vec::new()))
}

/// Ingests only who an object is: its name, namespace, and its uid (as the
/// cached bytes, not JSON: such a cache is never served, and as the field
/// [`UID_FIELD`]), for a server that checks objects exist (the front door,
/// for tokens) without holding them.
pub fn uid_ingest() -> Ingest {
    Arc::new(|key: &str, value: &[u8], revision: i64| {
        /// The fields kept (the rest is skipped unparsed).
        #[derive(serde::Deserialize)]
        struct Object<'a> {
            #[serde(borrow)]
            metadata: Meta<'a>,
        }
        #[derive(serde::Deserialize)]
        struct Meta<'a> {
            #[serde(borrow, default)]
            name: std::borrow::Cow<'a, str>,
            #[serde(borrow, default)]
            namespace: std::borrow::Cow<'a, str>,
            #[serde(borrow, default)]
            uid: std::borrow::Cow<'a, str>,
        }
        let object: Object<'_> = serde_json::from_slice(value).ok()?;
        let meta = object.metadata;
        let bytes = meta.uid.as_bytes().to_vec();
        Some(CachedObject {
            key: key.into(),
            revision,
            namespace: meta.namespace.into_owned(),
            name: meta.name.into_owned(),
            labels: Labels::default(),
            fields: vec![(UID_FIELD.to_string(), meta.uid.into_owned())],
            bytes: Bytes::from(bytes),
        })
    })
}

/// Ingests objects, reading the extra selectable `fields` of each.
pub fn ingest_with(fields: Arc<dyn Fn(&Value) -> Vec<(String, String)> + Send + Sync>) -> Ingest {
    Arc::new(move |key: &str, value: &[u8], revision: i64| {
        let mut obj: Value = serde_json::from_slice(value).ok()?;
        if let (true, Some(meta)) = (
            revision > 0,
            obj.get_mut("metadata").and_then(Value::as_object_mut),
        ) {
            meta.insert(
                "resourceVersion".into(),
                Value::String(revision.to_string()),
            );
        }
        let meta = obj.get("metadata")?;
        let text = |k: &str| {
            meta.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let labels = meta
            .get("labels")
            .and_then(Value::as_object)
            .map(Labels::from_map)
            .unwrap_or_default();
        Some(CachedObject {
            key: key.into(),
            revision,
            namespace: text("namespace"),
            name: text("name"),
            labels,
            fields: fields(&obj),
            // Exactly as long as the JSON: a cache holds many of these.
            bytes: Bytes::from(serde_json::to_vec(&obj).ok()?.into_boxed_slice()),
        })
    })
}

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEventType {
    /// The object appeared (or started matching).
    Added,
    /// The object changed.
    Modified,
    /// The object went away (or stopped matching).
    Deleted,
}

impl WatchEventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            WatchEventType::Added => "ADDED",
            WatchEventType::Modified => "MODIFIED",
            WatchEventType::Deleted => "DELETED",
        }
    }
}

/// A change to one cached object, shared by every watcher.
#[derive(Debug)]
pub struct WatchEvent {
    /// What happened.
    pub kind: WatchEventType,
    /// The object's state after the change (for deletes: its last state).
    pub object: Arc<CachedObject>,
    /// The object's state before the change, if it existed.
    pub prev: Option<Arc<CachedObject>>,
    /// Lazily encoded `{"type":..,"object":..}\n` line, shared by watchers.
    encoded: OnceLock<Bytes>,
}

impl WatchEvent {
    /// A new event.
    pub fn new(
        kind: WatchEventType,
        object: Arc<CachedObject>,
        prev: Option<Arc<CachedObject>>,
    ) -> Self {
        WatchEvent {
            kind,
            object,
            prev,
            encoded: OnceLock::new(),
        }
    }

    /// The event's revision.
    pub fn revision(&self) -> i64 {
        self.object.revision
    }

    /// The JSON watch line for this event, encoded once.
    pub fn json_line(&self) -> Bytes {
        self.encoded
            .get_or_init(|| crate::watch_event::line(self.kind.as_str(), &self.object.bytes))
            .clone()
    }
}

/// A cache read: objects and the revision they are exact at.
pub struct Snapshot {
    /// The objects in key order.
    pub objects: Vec<Arc<CachedObject>>,
    /// The revision the snapshot is exact at.
    pub revision: i64,
}

/// Which page of a cache [`ResourceCache::page`] reads.
pub struct PageRange<'a> {
    /// The key prefix listed (a namespace's, or the resource's).
    pub prefix: &'a str,
    /// The first key the page may hold.
    pub start: &'a str,
    /// Most objects on the page (0: no limit).
    pub limit: usize,
    /// The revision a continued list is pinned to, or `None` for the latest.
    pub at: Option<i64>,
    /// The dispatcher's progress (every event up to it is applied).
    pub progress: i64,
    /// Whether to count the objects after a full page.
    pub count_rest: bool,
}

/// A page of a cache read.
pub struct Page {
    /// The objects in key order.
    pub objects: Vec<Arc<CachedObject>>,
    /// The revision the page is exact at.
    pub revision: i64,
    /// Whether more objects follow the page.
    pub more: bool,
    /// How many objects follow it, when counted.
    pub remaining: Option<i64>,
}

/// The cache of one resource (one key prefix).
pub struct ResourceCache {
    prefix: String,
    /// How stored values become cached objects: the store's (with its
    /// resource's selectable fields) once a store serves the prefix.
    ingest: RwLock<Ingest>,
    /// Whether the store serving the prefix registered it (see
    /// [`Cacher::serve`]), rather than only readers.
    served: std::sync::atomic::AtomicBool,
    state: RwLock<CacheState>,
}

/// What an initial list found: the objects, and the keys whose values do
/// not decode.
#[derive(Default)]
struct Loaded {
    objects: BTreeMap<Arc<str>, Arc<CachedObject>>,
    undecodable: BTreeSet<Arc<str>>,
}

struct CacheState {
    objects: BTreeMap<Arc<str>, Arc<CachedObject>>,
    /// Keys whose stored values do not decode: never served, and named in
    /// the error a read of them gets.
    undecodable: BTreeSet<Arc<str>>,
    /// The last revision applied to this cache.
    applied: i64,
    /// The ring holds every event after this revision.
    ring_start: i64,
    ring: VecDeque<Arc<WatchEvent>>,
    /// Live events for watchers; its buffer is made when the first watcher
    /// subscribes, so a resource nobody watches holds none.
    sender: std::sync::OnceLock<broadcast::Sender<Arc<WatchEvent>>>,
}

impl CacheState {
    /// The state of a cache just loaded at `revision`.
    fn new(loaded: Loaded, revision: i64) -> CacheState {
        CacheState {
            objects: loaded.objects,
            undecodable: loaded.undecodable,
            applied: revision,
            ring_start: revision,
            ring: VecDeque::with_capacity(64),
            sender: std::sync::OnceLock::new(),
        }
    }

    /// A receiver of live events.
    fn subscribe(&self) -> broadcast::Receiver<Arc<WatchEvent>> {
        self.sender
            .get_or_init(|| broadcast::channel(BROADCAST_CAPACITY).0)
            .subscribe()
    }
}

/// Where a watch starts.
pub enum WatchStart {
    /// Replay these events, then follow the live stream.
    Cached {
        /// Events after the revision that the ring still holds.
        replay: Vec<Arc<WatchEvent>>,
        /// Events from now on.
        live: broadcast::Receiver<Arc<WatchEvent>>,
    },
    /// The revision is older than the cache remembers: read etcd's history.
    History(EventStream),
}

impl ResourceCache {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, CacheState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, CacheState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The key prefix this cache holds.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Ingests a stored value.
    pub fn ingest(&self, key: &str, value: &[u8], revision: i64) -> Option<CachedObject> {
        (self.ingester())(key, value, revision)
    }

    /// The cache's ingest as it is now.
    fn ingester(&self) -> Ingest {
        self.ingest
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether a store serves this prefix (its ingest is the cache's).
    fn served(&self) -> bool {
        self.served.load(std::sync::atomic::Ordering::Acquire)
    }

    fn apply(&self, event: &Event) {
        let ingest = self.ingester();
        let mut state = self.write();
        let revision = event.revision();
        let prev = state.objects.get(event.kv.key.as_str()).cloned();
        let watch_event = match event.kind {
            EventKind::Put => {
                let Some(object) = ingest(&event.kv.key, &event.kv.value, revision) else {
                    tracing::warn!(key = %event.kv.key, "an object that does not decode was stored");
                    state.objects.remove(event.kv.key.as_str());
                    state.undecodable.insert(event.kv.key.as_str().into());
                    return;
                };
                state.undecodable.remove(event.kv.key.as_str());
                let object = Arc::new(object);
                state.objects.insert(object.key.clone(), object.clone());
                let kind = if prev.is_some() {
                    WatchEventType::Modified
                } else {
                    WatchEventType::Added
                };
                WatchEvent::new(kind, object, prev)
            }
            EventKind::Delete => {
                state.objects.remove(event.kv.key.as_str());
                state.undecodable.remove(event.kv.key.as_str());
                let Some(prev) = prev else { return };
                let Some(last) = ingest(&prev.key, &prev_value(&prev), revision) else {
                    return;
                };
                WatchEvent::new(WatchEventType::Deleted, Arc::new(last), Some(prev))
            }
        };
        state.applied = revision;
        let watch_event = Arc::new(watch_event);
        if state.ring.len() == RING_CAPACITY {
            if let Some(old) = state.ring.pop_front() {
                state.ring_start = old.revision();
            }
        }
        state.ring.push_back(watch_event.clone());
        if let Some(sender) = state.sender.get() {
            let _ = sender.send(watch_event);
        }
    }

    /// Every object under `prefix` (a namespace's, or all), with the revision
    /// the snapshot is exact at, given the dispatcher's progress.
    pub fn snapshot(&self, prefix: &str, progress: i64) -> Snapshot {
        let state = self.read();
        let end = prefix_end(prefix);
        let objects = state
            .objects
            .range::<str, _>((Bound::Included(prefix), Bound::Excluded(end.as_str())))
            .map(|(_, o)| o.clone())
            .collect();
        Snapshot {
            objects,
            revision: progress.max(state.applied),
        }
    }

    /// One page of the objects under `prefix`, from key `start` on: the
    /// first `limit` (all when 0) that `keep` selects. `at` asks for the
    /// state at that revision (a continued list): `None` when the cache
    /// cannot show it, because this resource changed since or the cache has
    /// not reached it yet. A page costs its length, not the cache's size.
    pub fn page(&self, range: PageRange<'_>, keep: impl Fn(&CachedObject) -> bool) -> Option<Page> {
        let state = self.read();
        let revision = match range.at {
            Some(at) if state.applied > at || range.progress.max(state.applied) < at => {
                return None;
            }
            Some(at) => at,
            None => range.progress.max(state.applied),
        };
        let end = prefix_end(range.prefix);
        let start = range.start.max(range.prefix);
        let mut page = Page {
            objects: Vec::new(),
            revision,
            more: false,
            remaining: None,
        };
        if start >= end.as_str() {
            return Some(page);
        }
        let mut rest = state
            .objects
            .range::<str, _>((Bound::Included(start), Bound::Excluded(end.as_str())))
            .map(|(_, o)| o);
        for object in rest.by_ref() {
            if !keep(object) {
                continue;
            }
            if range.limit > 0 && page.objects.len() == range.limit {
                page.more = true;
                // Only a page of everything says how much is left, as kube's does.
                page.remaining = range.count_rest.then(|| 1 + rest.count() as i64);
                break;
            }
            page.objects.push(object.clone());
        }
        Some(page)
    }

    /// One object by key.
    pub fn get(&self, key: &str) -> Option<Arc<CachedObject>> {
        self.read().objects.get(key).cloned()
    }

    /// The keys under `prefix` whose stored values do not decode.
    pub fn undecodable(&self, prefix: &str) -> Vec<String> {
        let state = self.read();
        let end = prefix_end(prefix);
        state
            .undecodable
            .range::<str, _>((Bound::Included(prefix), Bound::Excluded(end.as_str())))
            .map(|key| key.to_string())
            .collect()
    }

    /// The last revision that changed this cache (a cheap change check).
    pub fn applied(&self) -> i64 {
        self.read().applied
    }

    /// How many objects the cache holds.
    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts a watch after `revision`, from the ring when it reaches back
    /// that far, otherwise from etcd's history.
    pub async fn watch_from(
        &self,
        storage: &dyn Storage,
        revision: i64,
    ) -> Result<WatchStart, Error> {
        {
            let state = self.read();
            if revision >= state.ring_start {
                let replay = state
                    .ring
                    .iter()
                    .filter(|e| e.revision() > revision)
                    .cloned()
                    .collect();
                return Ok(WatchStart::Cached {
                    replay,
                    live: state.subscribe(),
                });
            }
        }
        let stream = storage
            .watch(&self.prefix, &prefix_end(&self.prefix), revision + 1)
            .await?;
        Ok(WatchStart::History(stream))
    }

    /// Subscribes to live events, with a snapshot taken atomically with it.
    pub fn snapshot_and_subscribe(
        &self,
        prefix: &str,
        progress: i64,
    ) -> (Snapshot, broadcast::Receiver<Arc<WatchEvent>>) {
        let state = self.read();
        let end = prefix_end(prefix);
        let objects = state
            .objects
            .range::<str, _>((Bound::Included(prefix), Bound::Excluded(end.as_str())))
            .map(|(_, o)| o.clone())
            .collect();
        (
            Snapshot {
                objects,
                revision: progress.max(state.applied),
            },
            state.subscribe(),
        )
    }
}

/// The stored JSON of a cached object (its served form is fine to re-ingest).
fn prev_value(prev: &CachedObject) -> Bytes {
    prev.bytes.clone()
}

/// The watch cache of one server.
pub struct Cacher {
    storage: Arc<dyn Storage>,
    caches: RwLock<HashMap<String, Arc<ResourceCache>>>,
    /// Held while applying a batch, and while a new cache takes its snapshot.
    dispatch: Mutex<()>,
    progress: watch::Sender<i64>,
    revisions: RevisionReader,
    /// Set while the cache cannot prove it is current (see [`STALE_AFTER`]).
    stale: std::sync::atomic::AtomicBool,
}

impl Cacher {
    /// Starts the cache's etcd watch (from the current revision).
    pub async fn start(storage: Arc<dyn Storage>) -> Result<Arc<Cacher>, Error> {
        let start = storage.current_revision().await?;
        let cacher = Arc::new(Cacher {
            storage: storage.clone(),
            caches: RwLock::new(HashMap::new()),
            dispatch: Mutex::new(()),
            progress: watch::channel(start).0,
            revisions: RevisionReader::new(storage),
            stale: std::sync::atomic::AtomicBool::new(false),
        });
        tokio::spawn(cacher.clone().run(start));
        tokio::spawn(cacher.clone().prove_current());
        Ok(cacher)
    }

    /// Proves, every [`PROOF_PERIOD`], that the cache is current with etcd;
    /// without a proof for [`STALE_AFTER`], marks it stale and ends its
    /// watches (their clients watch again, elsewhere while it is stale).
    async fn prove_current(self: Arc<Self>) {
        let mut proven = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(PROOF_PERIOD).await;
            let proof = tokio::time::timeout(STALE_AFTER, async {
                let revision = self.revisions.read().await?;
                self.wait_for(revision).await
            })
            .await;
            if let Ok(Ok(())) = proof {
                proven = tokio::time::Instant::now();
                if self.stale.swap(false, std::sync::atomic::Ordering::AcqRel) {
                    tracing::info!("watch cache is current with etcd again");
                }
            } else if proven.elapsed() >= STALE_AFTER
                && !self.stale.swap(true, std::sync::atomic::Ordering::AcqRel)
            {
                tracing::warn!(
                    progress = self.progress(),
                    "watch cache cannot prove it is current with etcd; ending its watches and refusing consistent reads until it is"
                );
                self.end_watches();
            }
        }
    }

    /// Ends every live watch of every cache (its clients watch again).
    fn end_watches(&self) {
        let caches = self.caches.read().unwrap_or_else(|e| e.into_inner());
        for cache in caches.values() {
            cache.write().sender = std::sync::OnceLock::new();
        }
    }

    /// Refuses when the cache cannot prove it is current with etcd: what a
    /// consistent read or a new watch asks first.
    pub fn check_current(&self) -> Result<(), Error> {
        match self.stale.load(std::sync::atomic::Ordering::Acquire) {
            true => Err(Error::Unavailable(format!(
                "the watch cache cannot prove it is current with etcd (at revision {})",
                self.progress()
            ))),
            false => Ok(()),
        }
    }

    /// The storage behind the cache.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The last revision applied to every cache.
    pub fn progress(&self) -> i64 {
        *self.progress.borrow()
    }

    /// Registers (or returns) the cache of a key prefix for a reader (an
    /// admission plugin, an authorizer, a controller), loading it from etcd
    /// at the dispatcher's current revision. The reader gets whatever the
    /// prefix's cache holds: its own `ingest`'s objects until the store
    /// serving the prefix registers it ([`Cacher::serve`]), that store's
    /// after (whole objects, with their selectable fields).
    pub async fn register(
        &self,
        prefix: &str,
        ingest: Ingest,
    ) -> Result<Arc<ResourceCache>, Error> {
        if let Some(cache) = self.cache(prefix) {
            return Ok(cache);
        }
        let _dispatch = self.dispatch.lock().await;
        match self.cache(prefix) {
            Some(cache) => Ok(cache),
            None => self.insert(prefix, ingest, false).await,
        }
    }

    /// Registers the cache of the store that serves a key prefix: the
    /// store's `ingest` (what its selectors read) is the cache's whoever
    /// registered the prefix first. A cache only readers registered is
    /// reloaded in place from etcd with it (the readers keep the same
    /// cache; its watches end, to start again from a list); one a store
    /// already serves (another version's view of the same storage) is
    /// returned as it is.
    pub async fn serve(&self, prefix: &str, ingest: Ingest) -> Result<Arc<ResourceCache>, Error> {
        if let Some(cache) = self.cache(prefix).filter(|c| c.served()) {
            return Ok(cache);
        }
        let _dispatch = self.dispatch.lock().await;
        let Some(cache) = self.cache(prefix) else {
            return self.insert(prefix, ingest, true).await;
        };
        if !cache.served() {
            let revision = self.progress();
            let objects = self.load(prefix, &ingest, revision).await?;
            *cache.ingest.write().unwrap_or_else(|e| e.into_inner()) = ingest;
            *cache.write() = CacheState::new(objects, revision);
            cache
                .served
                .store(true, std::sync::atomic::Ordering::Release);
        }
        Ok(cache)
    }

    /// Loads a new cache of `prefix` at the dispatcher's progress and
    /// registers it (the caller holds the dispatch lock).
    async fn insert(
        &self,
        prefix: &str,
        ingest: Ingest,
        served: bool,
    ) -> Result<Arc<ResourceCache>, Error> {
        let revision = self.progress();
        let objects = self.load(prefix, &ingest, revision).await?;
        let cache = Arc::new(ResourceCache {
            prefix: prefix.to_string(),
            ingest: RwLock::new(ingest),
            served: std::sync::atomic::AtomicBool::new(served),
            state: RwLock::new(CacheState::new(objects, revision)),
        });
        self.caches
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(prefix.to_string(), cache.clone());
        crate::metrics::global().track(&cache);
        Ok(cache)
    }

    /// The objects under `prefix` at `revision`, read from etcd in pages.
    async fn load(&self, prefix: &str, ingest: &Ingest, revision: i64) -> Result<Loaded, Error> {
        let mut loaded = Loaded::default();
        let end = prefix_end(prefix);
        let mut start = prefix.to_string();
        let (mut limit, mut ceiling) = (LIST_PAGE, LOAD_PAGE_MAX);
        loop {
            let page = match self.storage.range(&start, &end, limit, revision).await {
                Ok(page) => page,
                // Objects bigger than the last page's: fewer, from now on.
                Err(Error::TooLarge(_)) if limit > 1 => {
                    limit = (limit / 4).max(1);
                    ceiling = limit;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let bytes: usize = page.kvs.iter().map(|kv| kv.value.len()).sum();
            for kv in &page.kvs {
                match ingest(&kv.key, &kv.value, kv.mod_revision) {
                    Some(obj) => {
                        loaded.objects.insert(obj.key.clone(), Arc::new(obj));
                    }
                    None => {
                        tracing::warn!(key = %kv.key, "a stored object does not decode");
                        loaded.undecodable.insert(kv.key.as_str().into());
                    }
                }
            }
            limit = next_load_page(bytes, page.kvs.len()).min(ceiling);
            match page.kvs.last() {
                Some(last) if page.more => start = format!("{}\0", last.key),
                _ => return Ok(loaded),
            }
        }
    }

    /// Drops the cache of a prefix (e.g. a deleted CRD's).
    pub fn unregister(&self, prefix: &str) {
        self.caches
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(prefix);
    }

    /// The cache registered for a prefix, if any.
    pub fn registered(&self, prefix: &str) -> Option<Arc<ResourceCache>> {
        self.cache(prefix)
    }

    fn cache(&self, prefix: &str) -> Option<Arc<ResourceCache>> {
        self.caches
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(prefix)
            .cloned()
    }

    /// The cache a key belongs to: the longest registered prefix of it.
    fn cache_for_key(&self, key: &str) -> Option<Arc<ResourceCache>> {
        let caches = self.caches.read().unwrap_or_else(|e| e.into_inner());
        key.char_indices()
            .filter(|(_, c)| *c == '/')
            .map(|(i, _)| &key[..=i])
            .filter_map(|prefix| caches.get(prefix))
            .last()
            .cloned()
    }

    /// Waits until every cache is current with etcd (a consistent read).
    pub async fn wait_fresh(&self) -> Result<i64, Error> {
        self.check_current()?;
        let revision = self.current_revision().await?;
        self.wait_for(revision).await?;
        Ok(revision)
    }

    /// etcd's current revision, from a read sent after this call (shared
    /// with every caller waiting for the same read).
    pub async fn current_revision(&self) -> Result<i64, Error> {
        self.revisions.read().await
    }

    /// Waits until the dispatcher has applied `revision`.
    pub async fn wait_for(&self, revision: i64) -> Result<(), Error> {
        let mut progress = self.progress.subscribe();
        match tokio::time::timeout(FRESHNESS_TIMEOUT, progress.wait_for(|p| *p >= revision)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(Error::Unavailable("watch cache stopped".into())),
            Err(_) => Err(Error::Unavailable(format!(
                "watch cache did not reach revision {revision} (at {})",
                self.progress()
            ))),
        }
    }

    async fn run(self: Arc<Self>, start: i64) {
        let mut next = start + 1;
        let mut backoff = Duration::from_millis(100);
        loop {
            let mut stream = match self.storage.watch("\0", "\0", next).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "watch cache: cannot watch etcd, retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            while let Some(batch) = stream.next().await {
                match batch {
                    Ok(events) => {
                        backoff = Duration::from_millis(100);
                        next = self.apply(&events).await.max(next - 1) + 1;
                    }
                    Err(Error::Compacted { compacted, .. }) => {
                        tracing::error!(
                            compacted,
                            "watch cache fell behind compaction; reloading caches"
                        );
                        next = self.reload().await + 1;
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "watch cache: etcd watch ended, resuming");
                        break;
                    }
                }
            }
            tokio::time::sleep(backoff).await;
        }
    }

    /// Applies a batch of events; returns the last revision applied.
    async fn apply(&self, events: &[Event]) -> i64 {
        let _dispatch = self.dispatch.lock().await;
        let mut last = self.progress();
        for event in events {
            if let Some(cache) = self.cache_for_key(&event.kv.key) {
                cache.apply(event);
            }
            last = last.max(event.revision());
        }
        self.progress.send_replace(last);
        last
    }

    /// Reloads every cache in place from etcd after losing the event
    /// stream; their watchers are ended, to start again from a list.
    async fn reload(&self) -> i64 {
        let caches: Vec<Arc<ResourceCache>> = self
            .caches
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        let _dispatch = self.dispatch.lock().await;
        let revision = self
            .storage
            .current_revision()
            .await
            .unwrap_or_else(|_| self.progress());
        for cache in caches {
            match self.load(&cache.prefix, &cache.ingester(), revision).await {
                Ok(objects) => *cache.write() = CacheState::new(objects, revision),
                Err(e) => {
                    tracing::error!(prefix = %cache.prefix, error = %e, "reloading cache failed");
                }
            }
        }
        self.progress.send_replace(revision);
        revision
    }
}

/// The size of an initial list's next page, from the last page's objects:
/// about [`LOAD_PAGE_BYTES`] of them, at most [`LOAD_PAGE_MAX`].
fn next_load_page(bytes: usize, objects: usize) -> i64 {
    let mean = (bytes / objects.max(1)).max(1);
    i64::try_from(LOAD_PAGE_BYTES / mean).map_or(LOAD_PAGE_MAX, |n| n.clamp(1, LOAD_PAGE_MAX))
}

/// Reads etcd's current revision, one read shared by every caller that
/// asked before it was sent.
struct RevisionReader {
    waiting: Arc<std::sync::Mutex<Vec<oneshot::Sender<Result<i64, Error>>>>>,
    wake: Arc<tokio::sync::Notify>,
}

impl RevisionReader {
    fn new(storage: Arc<dyn Storage>) -> Self {
        let waiting: Arc<std::sync::Mutex<Vec<oneshot::Sender<Result<i64, Error>>>>> =
            Arc::default();
        let wake = Arc::new(tokio::sync::Notify::new());
        let (w, n) = (waiting.clone(), wake.clone());
        tokio::spawn(async move {
            loop {
                n.notified().await;
                loop {
                    let batch = std::mem::take(&mut *w.lock().unwrap_or_else(|e| e.into_inner()));
                    if batch.is_empty() {
                        break;
                    }
                    let result = storage.current_revision().await;
                    // A failure is a safe answer for those who asked while
                    // the read was out too (only a success must come from a
                    // read sent after the question): when etcd does not
                    // answer, nobody waits for a second timeout.
                    let late = if result.is_err() {
                        std::mem::take(&mut *w.lock().unwrap_or_else(|e| e.into_inner()))
                    } else {
                        Vec::new()
                    };
                    for waiter in batch.into_iter().chain(late) {
                        let _ = waiter.send(result.clone());
                    }
                }
            }
        });
        RevisionReader { waiting, wake }
    }

    async fn read(&self) -> Result<i64, Error> {
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tx);
        self.wake.notify_one();
        rx.await
            .unwrap_or_else(|_| Err(Error::Unavailable("revision reader stopped".into())))
    }
}

/// Converts a raw storage event into a watch event for a cache, given the
/// previous state when etcd supplied it.
pub fn history_event(cache: &ResourceCache, event: &Event) -> Option<WatchEvent> {
    let prev = event
        .prev
        .as_ref()
        .and_then(|p| cache.ingest(&p.key, &p.value, p.mod_revision))
        .map(Arc::new);
    match event.kind {
        EventKind::Put => {
            let object =
                Arc::new(cache.ingest(&event.kv.key, &event.kv.value, event.revision())?);
            let kind = if event.kv.create_revision == event.revision() {
                WatchEventType::Added
            } else {
                WatchEventType::Modified
            };
            Some(WatchEvent::new(kind, object, prev))
        }
        EventKind::Delete => {
            let before = event.prev.as_ref()?;
            let object = Arc::new(cache.ingest(&before.key, &before.value, event.revision())?);
            Some(WatchEvent::new(WatchEventType::Deleted, object, prev))
        }
    }
}

/// A value computed from some caches (a policy, the compiled webhooks),
/// rebuilt only once one of them has moved on; readers never wait for a
/// rebuild they do not need.
pub struct Derived<T> {
    caches: Vec<Arc<ResourceCache>>,
    /// The value and the caches' revisions it was built at.
    current: RwLock<(Vec<i64>, Arc<T>)>,
    rebuilding: std::sync::Mutex<()>,
}

impl<T: Default> Derived<T> {
    /// A value built from `caches`, not built yet.
    pub fn new(caches: Vec<Arc<ResourceCache>>) -> Derived<T> {
        Derived {
            current: RwLock::new((vec![-1; caches.len()], Arc::default())),
            caches,
            rebuilding: std::sync::Mutex::default(),
        }
    }

    /// The caches the value is built from.
    pub fn caches(&self) -> &[Arc<ResourceCache>] {
        &self.caches
    }

    /// The value as the caches hold it now, built by `build` if they moved.
    pub fn get(&self, build: impl FnOnce(&[Arc<ResourceCache>]) -> T) -> Arc<T> {
        // The common case, without allocating: nothing moved.
        {
            let current = self.current.read().unwrap_or_else(|e| e.into_inner());
            if current
                .0
                .iter()
                .zip(&self.caches)
                .all(|(built, cache)| *built == cache.applied())
            {
                return current.1.clone();
            }
        }
        let applied = || self.caches.iter().map(|c| c.applied()).collect::<Vec<_>>();
        let fresh = |applied: &[i64]| {
            let current = self.current.read().unwrap_or_else(|e| e.into_inner());
            (current.0 == applied).then(|| current.1.clone())
        };
        if let Some(current) = fresh(&applied()) {
            return current;
        }
        let _one_at_a_time = self.rebuilding.lock().unwrap_or_else(|e| e.into_inner());
        let revisions = applied();
        if let Some(current) = fresh(&revisions) {
            return current;
        }
        let value = Arc::new(build(&self.caches));
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = (revisions, value.clone());
        value
    }
}

/// Whether a key/value would ingest (used by tests).
#[cfg(test)]
fn json_ingest() -> Ingest {
    Arc::new(|key: &str, value: &[u8], revision: i64| {
        let mut v: Value = serde_json::from_slice(value).ok()?;
        v["metadata"]["resourceVersion"] = Value::String(revision.to_string());
        let name = v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Some(CachedObject {
            key: key.into(),
            revision,
            bytes: serde_json::to_vec(&v).ok()?.into(),
            namespace: String::new(),
            name,
            labels: Labels::default(),
            fields: Vec::new(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::memory::MemoryStorage;

    fn obj(name: &str) -> Bytes {
        serde_json::to_vec(&serde_json::json!({"metadata":{"name":name}}))
            .unwrap()
            .into()
    }

    #[tokio::test]
    async fn cache_follows_writes_and_serves_consistent_reads() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::default());
        storage.create("/r/cm/a", obj("a")).await.unwrap();
        storage.create("/r/other/x", obj("x")).await.unwrap();
        let cacher = Cacher::start(storage.clone()).await.unwrap();
        let cache = cacher.register("/r/cm/", json_ingest()).await.unwrap();
        assert_eq!(cache.len(), 1);
        let rev = storage.create("/r/cm/b", obj("b")).await.unwrap();
        storage.create("/r/other/y", obj("y")).await.unwrap();
        let fresh = cacher.wait_fresh().await.unwrap();
        assert!(fresh > rev);
        let snap = cache.snapshot("/r/cm/", cacher.progress());
        assert_eq!(
            snap.objects
                .iter()
                .map(|o| o.name.as_str())
                .collect::<Vec<_>>(),
            vec!["a", "b"]
        );
        assert_eq!(snap.revision, fresh);
        let b = cache.get("/r/cm/b").unwrap();
        assert_eq!(b.value()["metadata"]["resourceVersion"], rev.to_string());
    }

    /// An ingest that selects by the name's length (a store's field).
    fn sized_ingest() -> Ingest {
        ingest_with(Arc::new(|obj: &Value| {
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            vec![("size".to_string(), name.len().to_string())]
        }))
    }

    #[tokio::test]
    async fn the_store_serving_a_prefix_shapes_its_cache_whoever_registered_it_first() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::default());
        storage.create("/r/ns/a", obj("a")).await.unwrap();
        let cacher = Cacher::start(storage.clone()).await.unwrap();
        let fields = |cache: &ResourceCache, key: &str| cache.get(key).unwrap().fields.clone();
        let size = |n: &str| vec![("size".to_string(), n.to_string())];

        // A reader (an admission plugin made before the stores) comes first.
        let reader = cacher.register("/r/ns/", generic_ingest()).await.unwrap();
        assert!(fields(&reader, "/r/ns/a").is_empty());
        let mut live = reader.snapshot_and_subscribe("/r/ns/", cacher.progress()).1;

        let served = cacher.serve("/r/ns/", sized_ingest()).await.unwrap();
        assert!(
            Arc::ptr_eq(&reader, &served),
            "the reader keeps the same cache"
        );
        assert_eq!(fields(&reader, "/r/ns/a"), size("1"));
        // The reader's watch ends, to start again from a list.
        assert!(matches!(
            live.recv().await,
            Err(broadcast::error::RecvError::Closed)
        ));
        storage.create("/r/ns/bb", obj("bb")).await.unwrap();
        cacher.wait_fresh().await.unwrap();
        assert_eq!(fields(&served, "/r/ns/bb"), size("2"));

        // Later readers and stores of the prefix get the served cache as it is.
        let later = cacher.register("/r/ns/", generic_ingest()).await.unwrap();
        assert_eq!(fields(&later, "/r/ns/bb"), size("2"));
        let view = cacher.serve("/r/ns/", generic_ingest()).await.unwrap();
        assert!(Arc::ptr_eq(&view, &served));
        assert_eq!(fields(&view, "/r/ns/a"), size("1"));
    }

    #[tokio::test]
    async fn pages_are_read_from_their_start_and_pinned_to_their_revision() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::default());
        for name in ["a", "b", "c", "d", "e"] {
            storage
                .create(&format!("/r/cm/{name}"), obj(name))
                .await
                .unwrap();
        }
        let cacher = Cacher::start(storage.clone()).await.unwrap();
        let cache = cacher.register("/r/cm/", json_ingest()).await.unwrap();
        let names = |page: &Page| {
            page.objects
                .iter()
                .map(|o| o.name.clone())
                .collect::<Vec<_>>()
        };
        let range = |start, at| PageRange {
            prefix: "/r/cm/",
            start,
            limit: 2,
            at,
            progress: cacher.progress(),
            count_rest: true,
        };
        let first = cache.page(range("/r/cm/", None), |_| true).unwrap();
        assert_eq!(names(&first), ["a", "b"]);
        assert!(first.more);
        assert_eq!(first.remaining, Some(3));
        let next = cache
            .page(range("/r/cm/b\0", Some(first.revision)), |o| o.name != "c")
            .unwrap();
        assert_eq!(names(&next), ["d", "e"]);
        assert!(!next.more);
        assert_eq!(next.remaining, None);
        // A start outside the prefix reads nothing rather than panicking.
        let outside = cache.page(range("/r/cn/", None), |_| true).unwrap();
        assert!(outside.objects.is_empty());
        // Once the resource changed, the cache cannot show the old revision.
        storage.create("/r/cm/f", obj("f")).await.unwrap();
        cacher.wait_fresh().await.unwrap();
        assert!(
            cache
                .page(range("/r/cm/b\0", Some(first.revision)), |_| true)
                .is_none()
        );
        // Nor one it has not reached yet.
        let ahead = cacher.progress() + 10;
        assert!(cache.page(range("/r/cm/", Some(ahead)), |_| true).is_none());
    }

    #[tokio::test]
    async fn watch_replays_from_ring_and_follows_live() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::default());
        let cacher = Cacher::start(storage.clone()).await.unwrap();
        let cache = cacher.register("/r/cm/", json_ingest()).await.unwrap();
        let r1 = storage.create("/r/cm/a", obj("a")).await.unwrap();
        let r2 = storage.update("/r/cm/a", obj("a"), r1).await.unwrap();
        cacher.wait_fresh().await.unwrap();
        let WatchStart::Cached { replay, mut live } =
            cache.watch_from(storage.as_ref(), r1).await.unwrap()
        else {
            panic!("expected the ring to cover r1");
        };
        assert_eq!(
            replay
                .iter()
                .map(|e| (e.kind, e.revision()))
                .collect::<Vec<_>>(),
            vec![(WatchEventType::Modified, r2)]
        );
        let (_, r3) = storage.delete("/r/cm/a", None).await.unwrap();
        let deleted = tokio::time::timeout(Duration::from_secs(2), live.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (deleted.kind, deleted.revision()),
            (WatchEventType::Deleted, r3)
        );
        assert_eq!(
            deleted.object.value()["metadata"]["resourceVersion"],
            r3.to_string()
        );
        assert!(
            String::from_utf8_lossy(&deleted.json_line())
                .starts_with("{\"type\":\"DELETED\",\"object\":{")
        );
    }

    #[tokio::test]
    async fn old_revisions_come_from_history() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::default());
        let r1 = storage.create("/r/cm/a", obj("a")).await.unwrap();
        storage.update("/r/cm/a", obj("a"), r1).await.unwrap();
        let cacher = Cacher::start(storage.clone()).await.unwrap();
        let cache = cacher.register("/r/cm/", json_ingest()).await.unwrap();
        let WatchStart::History(mut stream) =
            cache.watch_from(storage.as_ref(), r1 - 1).await.unwrap()
        else {
            panic!("expected history");
        };
        let batch = stream.next().await.unwrap().unwrap();
        let event = history_event(&cache, &batch[0]).unwrap();
        assert_eq!((event.kind, event.revision()), (WatchEventType::Added, r1));
    }

    #[test]
    fn load_pages_aim_at_a_size_in_bytes() {
        assert_eq!(next_load_page(1000 * 1024, 1000), 16 * 1024);
        assert_eq!(next_load_page(1000 * 100, 1000), LOAD_PAGE_MAX);
        assert_eq!(next_load_page(4 * 1024 * 1024, 2), 8);
        assert_eq!(next_load_page(100 * 1024 * 1024, 1), 1);
        assert_eq!(next_load_page(0, 0), LOAD_PAGE_MAX);
    }

    #[tokio::test]
    async fn a_load_too_large_for_one_message_asks_for_fewer_objects() {
        let capped = Arc::new(crate::storage::memory::Faulty::default());
        capped
            .answer_cap
            .store(10 * 1024, std::sync::atomic::Ordering::Relaxed);
        let padding = "x".repeat(1000);
        for i in 0..50 {
            let name = format!("o{i:02}");
            let value = serde_json::json!({"metadata": {"name": name}, "data": padding});
            let key = format!("/r/cm/{name}");
            capped
                .create(&key, serde_json::to_vec(&value).expect("json").into())
                .await
                .expect("created");
        }
        let storage: Arc<dyn Storage> = capped.clone();
        let cacher = Cacher::start(storage).await.expect("cacher");
        let cache = cacher
            .register("/r/cm/", json_ingest())
            .await
            .expect("loaded");
        assert_eq!(cache.len(), 50, "every object loaded");
        let limits = capped.limits.lock().expect("limits").clone();
        // 1000, 250, 62 and 15 objects are too many; then pages of 3.
        assert_eq!(&limits[..5], &[1000, 250, 62, 15, 3], "{limits:?}");
        assert!(limits[5..].iter().all(|&l| l == 3), "{limits:?}");
    }

    #[tokio::test]
    async fn revision_reads_are_shared() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::default());
        let reader = RevisionReader::new(storage.clone());
        let reads = futures::future::join_all((0..50).map(|_| reader.read())).await;
        assert!(reads.iter().all(|r| *r.as_ref().unwrap() == 1));
    }

    #[tokio::test]
    async fn who_asks_while_a_revision_read_fails_shares_the_failure() {
        use std::sync::atomic::Ordering::Relaxed;
        let faulty = Arc::new(crate::storage::memory::Faulty::default());
        faulty.revision_down.store(true, Relaxed);
        let reader = RevisionReader::new(faulty.clone());
        let late = async {
            // Asks once the first read is out.
            while faulty.revision_reads.load(Relaxed) == 0 {
                tokio::task::yield_now().await;
            }
            let answer = reader.read();
            tokio::pin!(answer);
            let answer = futures::future::poll_fn(|cx| {
                let polled = answer.as_mut().poll(cx);
                // Queued: now the first read may fail (one failure only).
                faulty.revision_release.notify_one();
                polled
            });
            answer.await
        };
        let both = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            futures::future::join(reader.read(), late),
        )
        .await
        .expect("nobody waits for a second read");
        assert!(both.0.is_err() && both.1.is_err(), "{both:?}");
        assert_eq!(faulty.revision_reads.load(Relaxed), 1, "one read for both");
    }
}
