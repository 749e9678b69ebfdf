//! Shared watches: identical watches sent down one link (same path,
//! selectors and output; each from its own resourceVersion) ride one watch
//! on the next server, whose events are fanned out here.
//!
//! A thousand agents watching the same resource then cost the next server
//! one stream, not a thousand, and each event crosses the gRPC hop once.
//! The hub keeps the last events it passed on, so a watch from a recent
//! resourceVersion joins with a replay; one from further back, or one that
//! asks for initial events, gets a watch of its own as before. Each
//! watcher keeps its own timeout; a watcher too slow to keep up is ended
//! (its client watches again, as after any closed watch).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, Method, StatusCode};
use tokio::sync::{broadcast, oneshot, watch};

use crate::request::{ApiRequest, ApiResponse, Body, BodyStream, Handler};

/// Event lines kept per shared watch for watchers that join from the past,
/// at most this many and this many bytes (a thousand agents each with a
/// watch of its own, say kubelets' pods on their node, keep little each).
const RING_LINES: usize = 1024;
const RING_BYTES: usize = 64 * 1024;
/// Event lines buffered per watcher before a slow one is ended (allocated
/// up front for each shared watch: about 10 KiB).
const BUFFERED_LINES: usize = 128;

/// One event line of a shared watch.
#[derive(Clone, Debug)]
struct Line {
    /// The resourceVersion of the event's object (0 if it has none).
    revision: u64,
    /// An ERROR event: every watcher gets it, then the watch ends.
    error: bool,
    bytes: Bytes,
}

/// The shared watches of one link, by what they watch.
#[derive(Default)]
pub struct WatchHub {
    shared: Mutex<HashMap<String, Weak<Shared>>>,
}

/// What makes a watch shareable: what it watches, and from where.
struct Share {
    key: String,
    after: u64,
    timeout: Duration,
}

impl Share {
    /// The watch a request asks for, if it can share: a watch from a given
    /// resourceVersion, without initial events.
    fn of(req: &ApiRequest) -> Option<Share> {
        if req.method != Method::GET || req.info.verb != "watch" {
            return None;
        }
        let mut after = None;
        let mut timeout = None;
        let mut rest = Vec::new();
        for (name, value) in form_urlencoded::parse(req.query.as_bytes()) {
            match &*name {
                "resourceVersion" => after = Some(value.parse::<u64>().ok().filter(|v| *v > 0)?),
                "timeoutSeconds" => timeout = crate::request::timeout_seconds(&value).ok()?,
                "sendInitialEvents" | "resourceVersionMatch" => return None,
                _ => rest.push((name.into_owned(), value.into_owned())),
            }
        }
        rest.sort();
        let accept = req.header(http::header::ACCEPT).unwrap_or_default();
        Some(Share {
            key: format!("{}?{rest:?}|{accept}", req.path),
            after: after?,
            timeout: timeout.unwrap_or_else(default_timeout),
        })
    }
}

/// kube's default watch timeout: a random time between 30 and 60 minutes.
fn default_timeout() -> Duration {
    use rand::Rng;
    Duration::from_secs(rand::rng().random_range(1800..3600))
}

/// One watch on the next server and the watchers riding it.
struct Shared {
    /// The head of the watch on the next server once it answered: `Some`
    /// with its status and headers, or `None` if it refused (each watcher
    /// then asks on its own and gets its own answer).
    head: watch::Receiver<Option<Option<(StatusCode, HeaderMap)>>>,
    state: Mutex<State>,
    /// Dropped with the last watcher: stops the pump.
    _stop: oneshot::Sender<()>,
}

struct State {
    /// The last event lines, oldest first.
    ring: VecDeque<Line>,
    /// Their bytes.
    ring_bytes: usize,
    /// The ring holds every event after this resourceVersion.
    ring_start: u64,
    /// The resourceVersion of the last event passed on.
    last: u64,
    /// `None` once the shared watch has ended.
    sender: Option<broadcast::Sender<Line>>,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A watcher after `after`: the lines it missed and the live ones, or
    /// `None` if the ring no longer reaches back that far.
    fn join(&self, after: u64) -> Option<(Vec<Bytes>, broadcast::Receiver<Line>)> {
        let state = self.state();
        let sender = state.sender.as_ref()?;
        if after < state.ring_start {
            return None;
        }
        let replay = state
            .ring
            .iter()
            .filter(|line| line.revision > after)
            .map(|line| line.bytes.clone())
            .collect();
        Some((replay, sender.subscribe()))
    }

    /// Passes a chunk of event lines on; false when the watch is over.
    fn publish(&self, chunk: &Bytes) -> bool {
        // Kept lines must not pin the (larger) receive buffer they came in.
        let chunk = Bytes::copy_from_slice(chunk);
        let mut state = self.state();
        let mut start = 0;
        while start < chunk.len() {
            let end = chunk[start..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(chunk.len(), |i| start + i + 1);
            let bytes = if chunk[end - 1] == b'\n' {
                chunk.slice(start..end)
            } else {
                // Streams carry whole lines; should one ever arrive cut, end it.
                let mut whole = chunk[start..end].to_vec();
                whole.push(b'\n');
                whole.into()
            };
            start = end;
            if bytes.len() <= 1 {
                continue;
            }
            let error = crate::watch_event::is_error(&bytes);
            let revision = crate::watch_event::last_resource_version(&bytes)
                .and_then(|v| v.parse().ok())
                .unwrap_or(state.last);
            let line = Line {
                revision,
                error,
                bytes,
            };
            state.last = state.last.max(revision);
            state.ring_bytes += line.bytes.len();
            state.ring.push_back(line.clone());
            while state.ring.len() > RING_LINES || state.ring_bytes > RING_BYTES {
                let Some(old) = state.ring.pop_front() else {
                    break;
                };
                state.ring_bytes -= old.bytes.len();
                state.ring_start = old.revision;
            }
            if let Some(sender) = &state.sender {
                let _ = sender.send(line);
            }
            if error {
                state.sender = None;
                return false;
            }
        }
        true
    }

    /// Ends every watcher (after what was already sent).
    fn end(&self) {
        self.state().sender = None;
    }
}

impl WatchHub {
    /// Serves a watch, sharing one on the next server when it can;
    /// `next` opens watches there.
    pub async fn watch(&self, req: ApiRequest, next: Arc<dyn Handler>) -> ApiResponse {
        let Some(share) = Share::of(&req) else {
            return next.handle(req).await;
        };
        // Join the shared watch, or start one (its first watcher opens it,
        // the others wait for its head).
        let (shared, joined, opener) = {
            let mut hubs = self.lock();
            match hubs.get(&share.key).and_then(Weak::upgrade) {
                Some(shared) if shared.state().sender.is_some() => {
                    let joined = shared.join(share.after);
                    (shared, joined, None)
                }
                _ => {
                    let (sender, live) = broadcast::channel(BUFFERED_LINES);
                    let (stop, stopped) = oneshot::channel();
                    let (head, head_rx) = watch::channel(None);
                    let shared = Arc::new(Shared {
                        head: head_rx,
                        state: Mutex::new(State {
                            ring: VecDeque::new(),
                            ring_bytes: 0,
                            ring_start: share.after,
                            last: share.after,
                            sender: Some(sender),
                        }),
                        _stop: stop,
                    });
                    hubs.retain(|_, shared| shared.strong_count() > 0);
                    hubs.insert(share.key.clone(), Arc::downgrade(&shared));
                    (shared, Some((Vec::new(), live)), Some((head, stopped)))
                }
            }
        };
        if let Some((head, stopped)) = opener {
            // The shared watch has no timeout of its own; each watcher has one.
            let mut upstream = req.clone();
            upstream.query = without(&req.query, &["timeoutSeconds"]);
            let resp = next.handle(upstream.clone()).await;
            match resp.body {
                Body::Stream(body) if resp.status == StatusCode::OK => {
                    head.send_replace(Some(Some((resp.status, resp.headers))));
                    tokio::spawn(pump(
                        Arc::downgrade(&shared),
                        next.clone(),
                        upstream,
                        body,
                        stopped,
                    ));
                }
                body => {
                    shared.end();
                    head.send_replace(Some(None));
                    return ApiResponse {
                        status: resp.status,
                        headers: resp.headers,
                        body,
                    };
                }
            }
        }
        let head = shared
            .head
            .clone()
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|head| head.clone().flatten());
        match (head, joined) {
            (Some((status, headers)), Some((replay, live))) => subscription(
                shared,
                status,
                headers,
                replay,
                live,
                share.after,
                share.timeout,
            ),
            // Refused, or from further back than the shared watch reaches.
            _ => next.handle(req).await,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Weak<Shared>>> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Reads the shared watch on the next server and passes its events on,
/// continuing from the last event when the next server ends it, until the
/// last watcher leaves or the watch fails.
async fn pump(
    shared: Weak<Shared>,
    next: Arc<dyn Handler>,
    mut request: ApiRequest,
    mut body: BodyStream,
    mut stopped: oneshot::Receiver<()>,
) {
    loop {
        let chunk = tokio::select! {
            _ = &mut stopped => return,
            chunk = body.next() => chunk,
        };
        let Some(shared) = shared.upgrade() else {
            return;
        };
        match chunk {
            Some(chunk) => {
                if !shared.publish(&chunk) {
                    return;
                }
            }
            None => {
                let last = shared.state().last;
                let mut query = without(&request.query, &["resourceVersion"]);
                query.push_str(&format!("&resourceVersion={last}"));
                request.query = query;
                let resp = next.handle(request.clone()).await;
                match resp.body {
                    Body::Stream(more) if resp.status == StatusCode::OK => body = more,
                    _ => {
                        tracing::info!(path = %request.path, status = %resp.status, "shared watch could not continue; ending its watchers");
                        shared.end();
                        return;
                    }
                }
            }
        }
    }
}

/// A query string without some parameters.
fn without(query: &str, names: &[&str]) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        if !names.contains(&&*name) {
            out.append_pair(&name, &value);
        }
    }
    out.finish()
}

/// One watcher's response: the replay, then live events after `after`,
/// until its timeout, the end of the shared watch, or it falls behind.
fn subscription(
    shared: Arc<Shared>,
    status: StatusCode,
    headers: HeaderMap,
    replay: Vec<Bytes>,
    live: broadcast::Receiver<Line>,
    after: u64,
    timeout: Duration,
) -> ApiResponse {
    let deadline = tokio::time::Instant::now() + timeout;
    let replay = futures::stream::iter(replay);
    let live = futures::stream::unfold(
        (shared, live, false),
        move |(shared, mut live, done)| async move {
            if done {
                return None;
            }
            loop {
                let line = tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => return None,
                    line = live.recv() => line,
                };
                match line {
                    Ok(line) if line.error => return Some((line.bytes, (shared, live, true))),
                    Ok(line) if line.revision > after => {
                        return Some((line.bytes, (shared, live, false)));
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        tracing::info!("watcher too slow for its shared watch; ending it");
                        return None;
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    );
    ApiResponse {
        status,
        headers,
        body: Body::Stream(replay.chain(live).boxed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::UserInfo;
    use tokio::sync::mpsc;

    /// The next server: each watch it opens is fed by the test.
    #[derive(Default)]
    struct Next {
        opened: Mutex<Vec<(String, mpsc::UnboundedSender<Bytes>)>>,
        /// How long a watch takes to open.
        delay: Duration,
        /// Answers every watch with 400 instead.
        refuse: bool,
    }

    impl Next {
        fn queries(&self) -> Vec<String> {
            self.opened
                .lock()
                .unwrap()
                .iter()
                .map(|(q, _)| q.clone())
                .collect()
        }

        /// Sends event lines on the `i`th watch opened.
        fn send(&self, i: usize, revisions: &[u64]) {
            let lines: String = revisions.iter().map(|r| line(*r)).collect();
            self.opened.lock().unwrap()[i].1.send(lines.into()).unwrap();
        }

        /// Ends the `i`th watch opened (as the next server's timeout does).
        fn end(&self, i: usize) {
            let (closed, _) = mpsc::unbounded_channel();
            self.opened.lock().unwrap()[i].1 = closed;
        }
    }

    #[async_trait::async_trait]
    impl Handler for Next {
        async fn handle(&self, req: ApiRequest) -> ApiResponse {
            tokio::time::sleep(self.delay).await;
            if self.refuse {
                self.opened
                    .lock()
                    .unwrap()
                    .push((req.query.clone(), mpsc::unbounded_channel().0));
                return ApiResponse::bytes(StatusCode::BAD_REQUEST, "application/json", "{}");
            }
            let (tx, rx) = mpsc::unbounded_channel();
            self.opened.lock().unwrap().push((req.query.clone(), tx));
            let body = tokio_stream::wrappers::UnboundedReceiverStream::new(rx).boxed();
            ApiResponse {
                status: StatusCode::OK,
                headers: HeaderMap::new(),
                body: Body::Stream(body),
            }
        }
    }

    fn line(revision: u64) -> String {
        format!(
            "{{\"type\":\"ADDED\",\"object\":{{\"metadata\":{{\"resourceVersion\":\"{revision}\"}}}}}}\n"
        )
    }

    fn watch(query: &str) -> ApiRequest {
        ApiRequest::new(
            Method::GET,
            "/api/v1/namespaces/a/configmaps",
            query,
            HeaderMap::new(),
            Bytes::new(),
            UserInfo::default(),
        )
    }

    /// The next `n` lines a watcher receives, as resourceVersions.
    async fn receive(body: &mut BodyStream, n: usize) -> Vec<u64> {
        let mut got = Vec::new();
        while got.len() < n {
            let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
                .await
                .expect("an event in time")
                .expect("the watch still open");
            for l in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let v = crate::watch_event::last_resource_version(l).unwrap();
                got.push(v.parse().unwrap());
            }
        }
        got
    }

    async fn open(hub: &WatchHub, next: &Arc<Next>, query: &str) -> BodyStream {
        let resp = hub.watch(watch(query), next.clone()).await;
        assert_eq!(resp.status, StatusCode::OK);
        match resp.body {
            Body::Stream(s) => s,
            Body::Full(_) | Body::Pieces(_) => panic!("a watch streams"),
        }
    }

    async fn ended(body: &mut BodyStream) -> bool {
        matches!(
            tokio::time::timeout(Duration::from_secs(5), body.next()).await,
            Ok(None)
        )
    }

    #[tokio::test]
    async fn watchers_from_a_version_share_one_watch_and_late_ones_replay() {
        let (hub, next) = (WatchHub::default(), Arc::new(Next::default()));
        let mut a = open(
            &hub,
            &next,
            "watch=true&resourceVersion=5&timeoutSeconds=60",
        )
        .await;
        let mut b = open(&hub, &next, "watch=true&resourceVersion=5").await;
        // One watch on the next server, without either watcher's timeout.
        assert_eq!(next.queries(), ["watch=true&resourceVersion=5"]);
        next.send(0, &[6, 7]);
        assert_eq!(receive(&mut a, 2).await, [6, 7]);
        assert_eq!(receive(&mut b, 2).await, [6, 7]);
        // A watcher from 6 gets 7 again from the ring, then live events.
        let mut c = open(&hub, &next, "resourceVersion=6&watch=true").await;
        next.send(0, &[8]);
        assert_eq!(receive(&mut c, 2).await, [7, 8]);
        assert_eq!(receive(&mut a, 1).await, [8]);
        // A watcher from ahead of the shared watch skips what it has seen.
        let mut d = open(&hub, &next, "watch=true&resourceVersion=9").await;
        next.send(0, &[9, 10]);
        assert_eq!(receive(&mut d, 1).await, [10]);
        // Further back than the ring reaches: a watch of its own.
        let _e = open(&hub, &next, "watch=true&resourceVersion=4").await;
        assert_eq!(next.queries().len(), 2);
        assert_eq!(next.queries()[1], "watch=true&resourceVersion=4");
    }

    #[tokio::test]
    async fn watchers_arriving_together_open_one_watch() {
        let next = Arc::new(Next {
            delay: Duration::from_millis(50),
            ..Default::default()
        });
        let hub = Arc::new(WatchHub::default());
        let opens = (0..20).map(|_| {
            let (hub, next) = (hub.clone(), next.clone());
            tokio::spawn(async move { open(&hub, &next, "watch=true&resourceVersion=5").await })
        });
        let mut bodies = Vec::new();
        for open in opens {
            bodies.push(open.await.unwrap());
        }
        assert_eq!(next.queries().len(), 1);
        next.send(0, &[6]);
        for body in &mut bodies {
            assert_eq!(receive(body, 1).await, [6]);
        }
    }

    #[tokio::test]
    async fn a_refused_watch_is_each_watchers_own_answer() {
        let next = Arc::new(Next {
            delay: Duration::from_millis(50),
            refuse: true,
            ..Default::default()
        });
        let hub = Arc::new(WatchHub::default());
        let opens = (0..3).map(|_| {
            let (hub, next) = (hub.clone(), next.clone());
            tokio::spawn(
                async move { hub.watch(watch("watch=true&resourceVersion=5"), next).await },
            )
        });
        for open in opens {
            assert_eq!(open.await.unwrap().status, StatusCode::BAD_REQUEST);
        }
        // The first opened for all; the others, refused, asked on their own.
        assert_eq!(next.queries().len(), 3);
    }

    #[tokio::test]
    async fn the_replay_is_bounded_in_bytes() {
        let (hub, next) = (WatchHub::default(), Arc::new(Next::default()));
        let mut a = open(&hub, &next, "watch=true&resourceVersion=5").await;
        let padding = "x".repeat(RING_BYTES);
        let big = format!(
            "{{\"type\":\"ADDED\",\"object\":{{\"metadata\":{{\"resourceVersion\":\"6\"}},\"data\":\"{padding}\"}}}}\n"
        );
        next.opened.lock().unwrap()[0].1.send(big.into()).unwrap();
        next.send(0, &[7]);
        assert_eq!(receive(&mut a, 2).await, [6, 7]);
        // The big event no longer fits: from before it, a watch of its own.
        let _b = open(&hub, &next, "watch=true&resourceVersion=5").await;
        assert_eq!(next.queries().len(), 2);
        let mut c = open(&hub, &next, "watch=true&resourceVersion=6").await;
        next.send(0, &[8]);
        assert_eq!(receive(&mut c, 2).await, [7, 8]);
        assert_eq!(next.queries().len(), 2);
    }

    #[tokio::test]
    async fn watches_that_differ_or_want_initial_events_do_not_share() {
        let (hub, next) = (WatchHub::default(), Arc::new(Next::default()));
        let _a = open(&hub, &next, "watch=true&resourceVersion=5").await;
        let _b = open(
            &hub,
            &next,
            "watch=true&resourceVersion=5&labelSelector=x%3Dy",
        )
        .await;
        let _c = open(&hub, &next, "watch=true").await;
        let _d = open(&hub, &next, "watch=true&resourceVersion=0").await;
        let _e = open(
            &hub,
            &next,
            "watch=true&resourceVersion=5&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        )
        .await;
        assert_eq!(next.queries().len(), 5);
    }

    #[tokio::test]
    async fn an_ended_watch_continues_from_its_last_event() {
        let (hub, next) = (WatchHub::default(), Arc::new(Next::default()));
        let mut a = open(&hub, &next, "watch=true&resourceVersion=5").await;
        next.send(0, &[6, 7]);
        assert_eq!(receive(&mut a, 2).await, [6, 7]);
        next.end(0);
        for _ in 0..100 {
            if next.queries().len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(next.queries()[1], "watch=true&resourceVersion=7");
        next.send(1, &[8]);
        assert_eq!(receive(&mut a, 1).await, [8]);
    }

    #[tokio::test]
    async fn an_error_ends_every_watcher_and_the_next_watch_starts_afresh() {
        let (hub, next) = (WatchHub::default(), Arc::new(Next::default()));
        let mut a = open(&hub, &next, "watch=true&resourceVersion=5").await;
        let mut b = open(&hub, &next, "watch=true&resourceVersion=5").await;
        let error = r#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#;
        next.opened.lock().unwrap()[0]
            .1
            .send(format!("{error}\n").into())
            .unwrap();
        for body in [&mut a, &mut b] {
            let chunk = body.next().await.unwrap();
            assert!(chunk.starts_with(error.as_bytes()));
            assert!(ended(body).await);
        }
        let _c = open(&hub, &next, "watch=true&resourceVersion=5").await;
        assert_eq!(next.queries().len(), 2);
    }

    #[tokio::test]
    async fn the_shared_watch_closes_with_its_last_watcher() {
        let (hub, next) = (WatchHub::default(), Arc::new(Next::default()));
        let a = open(&hub, &next, "watch=true&resourceVersion=5").await;
        let b = open(&hub, &next, "watch=true&resourceVersion=5").await;
        drop(a);
        next.send(0, &[6]);
        assert!(!next.opened.lock().unwrap()[0].1.is_closed());
        drop(b);
        for _ in 0..100 {
            if next.opened.lock().unwrap()[0].1.is_closed() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the watch on the next server outlived its watchers");
    }

    #[tokio::test]
    async fn each_watcher_keeps_its_own_timeout() {
        let (hub, next) = (WatchHub::default(), Arc::new(Next::default()));
        let mut short = open(&hub, &next, "watch=true&resourceVersion=5&timeoutSeconds=1").await;
        let mut long = open(&hub, &next, "watch=true&resourceVersion=5").await;
        assert!(ended(&mut short).await);
        next.send(0, &[6]);
        assert_eq!(receive(&mut long, 1).await, [6]);
    }
}
