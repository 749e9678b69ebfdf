//! Watches: the per-client watcher that replays history or initial events, then follows the cache, with bookmarks and selectors.

use super::*;
use tokio::time::Instant;

/// What a watch produces, typed; the watch handler encodes it for the client.
pub enum WatchItem {
    /// An object event: its type for this watcher, the object, and the
    /// cache's event when this watcher sees it as the cache does (its
    /// encoding is then shared by every such watcher).
    Event(WatchEventType, Arc<CachedObject>, Option<Arc<WatchEvent>>),
    /// A bookmark at a revision; `initial_end` marks the end of initial events.
    Bookmark {
        /// The revision.
        revision: i64,
        /// Whether this bookmark ends `sendInitialEvents`.
        initial_end: bool,
    },
    /// A terminal error.
    Error(Error),
}

/// The items of one watch, ending when the watch does.
pub type WatchStream = tokio_stream::wrappers::ReceiverStream<WatchItem>;

/// One running watch: replays, then forwards live events, with bookmarks
/// and a deadline, until the client goes away.
pub(super) struct Watcher {
    opts: ListOptions,
    prefix: String,
    tx: mpsc::Sender<WatchItem>,
    cache: Arc<ResourceCache>,
    cacher: Arc<Cacher>,
    send_initial_end: Option<i64>,
    converter: Option<(Arc<dyn Converter>, String)>,
    /// Selectors are in the stored resource's terms (a view of its storage).
    stored_terms: bool,
}

/// How often bookmarks are sent to watchers that allow them.
pub(super) const BOOKMARK_PERIOD: Duration = Duration::from_secs(60);
/// How long before its deadline a watch sends its last bookmark.
const BOOKMARK_BEFORE_DEADLINE: Duration = Duration::from_secs(2);

/// When a watch ending at `deadline` sends its next bookmark, seen at
/// `now`: a period on, or just before the deadline if that comes first (so
/// that its client resumes from as late a version as it can), or never once
/// that time has passed (kube's cacheWatcher does the same).
fn next_bookmark(now: Instant, deadline: Instant) -> Option<Instant> {
    let last = deadline.checked_sub(BOOKMARK_BEFORE_DEADLINE)?;
    let at = (now + BOOKMARK_PERIOD).min(last);
    (at > now).then_some(at)
}

impl Watcher {
    async fn send(&self, item: WatchItem) -> bool {
        self.tx.send(item).await.is_ok()
    }

    /// Whether the event's previous and new states match the selectors.
    fn selects(&self, event: &WatchEvent) -> (bool, bool) {
        let before = event.prev.as_ref().is_some_and(|p| self.matches(p));
        (before, self.matches(&event.object))
    }

    /// Sends an event if it concerns this watcher; false when the client is gone.
    async fn forward(&self, event: &Arc<WatchEvent>) -> bool {
        let Some((converter, version)) = &self.converter else {
            return self.forward_served(event, None).await;
        };
        // A view of another resource's storage selects in the stored terms.
        let matched = self.stored_terms.then(|| self.selects(event));
        if matched == Some((false, false)) {
            return true;
        }
        let mut objects = vec![event.object.clone()];
        objects.extend(event.prev.clone());
        let Ok(mut converted) =
            present_with(converter.as_ref(), &self.cache, objects, version).await
        else {
            return true;
        };
        let object = converted.remove(0);
        let prev = converted.pop();
        self.forward_served(
            &Arc::new(WatchEvent::new(event.kind, object, prev)),
            matched,
        )
        .await
    }

    /// Sends an event already in the watcher's version; `matched` tells
    /// whether its previous and new states match, when already known.
    async fn forward_served(&self, event: &Arc<WatchEvent>, matched: Option<(bool, bool)>) -> bool {
        let (before, now) = matched.unwrap_or_else(|| self.selects(event));
        let (object, shared) = (event.object.clone(), Some(event.clone()));
        let item = match (event.kind, before, now) {
            (WatchEventType::Deleted, false, false) | (_, false, false) => return true,
            (WatchEventType::Deleted, _, _) => {
                WatchItem::Event(WatchEventType::Deleted, object, shared)
            }
            (WatchEventType::Added, _, true) => {
                WatchItem::Event(WatchEventType::Added, object, shared)
            }
            (_, false, true) => WatchItem::Event(WatchEventType::Added, object, None),
            (_, true, true) => WatchItem::Event(WatchEventType::Modified, object, shared),
            (_, true, false) => {
                // Stopped matching: a DELETED with the old content at the new revision.
                let Some(prev) = &event.prev else { return true };
                let Some(restamped) = self.cache.ingest(&prev.key, &prev.bytes, event.revision())
                else {
                    return true;
                };
                return self
                    .send(WatchItem::Event(
                        WatchEventType::Deleted,
                        Arc::new(restamped),
                        None,
                    ))
                    .await;
            }
        };
        self.send(item).await
    }

    /// Delivers the live events already queued for this watch, which hold
    /// every event up to the cache's progress (the cache queues an event
    /// before it moves its progress past it); returns the revision a
    /// bookmark may then carry, or `None` when the watch must end (the
    /// client is gone, or this watch fell behind and lost events).
    async fn drain(
        &self,
        live: &mut Option<tokio::sync::broadcast::Receiver<Arc<WatchEvent>>>,
    ) -> Option<i64> {
        let mut revision = self.cacher.progress();
        let Some(live) = live else {
            return Some(revision);
        };
        loop {
            match live.try_recv() {
                Ok(event) => {
                    revision = revision.max(event.revision());
                    if !self.forward(&event).await {
                        return None;
                    }
                }
                Err(tokio::sync::broadcast::error::TryRecvError::Empty) => return Some(revision),
                Err(_) => return None,
            }
        }
    }

    fn matches(&self, obj: &CachedObject) -> bool {
        obj.key.starts_with(&self.prefix) && selects(obj, &self.opts)
    }

    async fn run(
        self,
        replay: Vec<Arc<WatchEvent>>,
        live: Option<tokio::sync::broadcast::Receiver<Arc<WatchEvent>>>,
        history: Option<crate::storage::EventStream>,
    ) {
        let ends = Instant::now() + self.opts.timeout.unwrap_or_else(default_watch_timeout);
        let deadline = tokio::time::sleep_until(ends);
        let mut bookmark =
            next_bookmark(Instant::now(), ends).filter(|_| self.opts.allow_bookmarks);
        tokio::pin!(deadline);
        for event in &replay {
            if !self.forward(event).await {
                return;
            }
        }
        if let Some(revision) = self.send_initial_end {
            if self.opts.allow_bookmarks && self.opts.send_initial_events == Some(true) {
                let item = WatchItem::Bookmark {
                    revision,
                    initial_end: true,
                };
                if !self.send(item).await {
                    return;
                }
            }
        }
        let mut live = live;
        let mut history = history;
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = self.tx.closed() => return,
                // While it replays etcd's history, the cache's progress is
                // ahead of what this watch delivered: no bookmark then.
                _ = tokio::time::sleep_until(bookmark.unwrap_or(ends)), if bookmark.is_some() && history.is_none() => {
                    let Some(revision) = self.drain(&mut live).await else { return };
                    let item = WatchItem::Bookmark { revision, initial_end: false };
                    if !self.send(item).await { return; }
                    bookmark = next_bookmark(Instant::now(), ends);
                }
                event = next_live(&mut live), if live.is_some() => match event {
                    Some(event) => if !self.forward(&event).await { return },
                    None => return,
                },
                batch = next_history(&mut history), if history.is_some() => match batch {
                    Some(Ok(events)) => {
                        for raw in &events {
                            if let Some(event) = history_event(&self.cache, raw) {
                                if !self.forward(&Arc::new(event)).await { return; }
                            }
                        }
                    }
                    Some(Err(crate::Error::Compacted { requested, compacted })) => {
                        let err = Error::new(Reason::Gone, format!("too old resource version: {} ({compacted})", requested - 1));
                        let _ = self.send(WatchItem::Error(err)).await;
                        return;
                    }
                    _ => return,
                },
            }
        }
    }
}

pub(super) async fn next_live(
    live: &mut Option<tokio::sync::broadcast::Receiver<Arc<WatchEvent>>>,
) -> Option<Arc<WatchEvent>> {
    match live.as_mut()?.recv().await {
        Ok(event) => Some(event),
        Err(_) => None,
    }
}

pub(super) async fn next_history(
    history: &mut Option<crate::storage::EventStream>,
) -> Option<std::result::Result<Vec<crate::storage::Event>, crate::Error>> {
    history.as_mut()?.next().await
}

/// kube's default watch timeout: a random time between 30 and 60 minutes.
pub(super) fn default_watch_timeout() -> Duration {
    use rand::Rng;
    Duration::from_secs(rand::rng().random_range(1800..3600))
}

impl Store {
    /// Watches objects; the returned stream of typed events ends when the
    /// client goes away, on timeout, or after an error event.
    pub async fn watch(&self, namespace: &str, opts: ListOptions) -> Result<WatchStream> {
        self.check_selectors(&opts)?;
        let opts = self.storage_options(&opts).into_owned();
        let prefix = self.list_prefix(namespace);
        let rv = opts.resource_version.clone().unwrap_or_default();
        let initial = opts
            .send_initial_events
            .unwrap_or(rv.is_empty() || rv == "0");
        // A stale cache would serve a silent watch: refused, the client
        // watches elsewhere.
        self.cacher
            .check_current()
            .map_err(|e| storage_error(self, "", e))?;
        let (tx, rx) = mpsc::channel::<WatchItem>(256);
        let (replay, live, history, initial_revision) = if initial {
            if rv.is_empty() {
                self.fresh().await?;
            }
            let (snapshot, live) = self
                .cache
                .snapshot_and_subscribe(&prefix, self.cacher.progress());
            let replay = snapshot
                .objects
                .into_iter()
                .filter(|o| self.matches(o, &opts))
                .map(|o| Arc::new(WatchEvent::new(WatchEventType::Added, o, None)))
                .collect();
            (replay, Some(live), None, Some(snapshot.revision))
        } else {
            let revision = parse_rv(&rv)?;
            match self.cache.watch_from(self.storage.as_ref(), revision).await {
                Ok(WatchStart::Cached { replay, live }) => (replay, Some(live), None, None),
                Ok(WatchStart::History(stream)) => (Vec::new(), None, Some(stream), None),
                Err(crate::Error::Compacted { .. }) => {
                    return Err(Error::new(
                        Reason::Gone,
                        format!("too old resource version: {revision}"),
                    ));
                }
                Err(e) => return Err(storage_error(self, "", e)),
            }
        };
        let watcher = Watcher {
            opts,
            prefix,
            tx,
            cache: self.cache.clone(),
            cacher: self.cacher.clone(),
            send_initial_end: initial_revision,
            converter: self
                .converter
                .clone()
                .map(|c| (c, self.resource.api_version())),
            stored_terms: self.field_label.is_some(),
        };
        tokio::spawn(watcher.run(replay, live, history));
        Ok(tokio_stream::wrappers::ReceiverStream::new(rx))
    }

    /// A consistent snapshot of every object, and the events that follow it:
    /// how controllers in the same process follow a resource.
    pub async fn subscribe(
        &self,
    ) -> Result<(
        crate::storage::cacher::Snapshot,
        tokio::sync::broadcast::Receiver<Arc<WatchEvent>>,
    )> {
        self.fresh().await?;
        Ok(self
            .cache
            .snapshot_and_subscribe(&self.prefix, self.cacher.progress()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_bookmarks_every_period_and_just_before_its_deadline() {
        let now = Instant::now();
        let long = now + Duration::from_secs(600);
        assert_eq!(next_bookmark(now, long), Some(now + BOOKMARK_PERIOD));
        // A short watch: one bookmark, two seconds before it ends.
        let short = now + Duration::from_secs(4);
        assert_eq!(
            next_bookmark(now, short),
            Some(now + Duration::from_secs(2))
        );
        // Sent then: none after it.
        assert_eq!(next_bookmark(now + Duration::from_secs(2), short), None);
        // Too short for one.
        assert_eq!(next_bookmark(now, now + Duration::from_secs(1)), None);
    }
}
