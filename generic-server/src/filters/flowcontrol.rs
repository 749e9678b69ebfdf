//! API Priority and Fairness at the front door, kube's
//! `WithPriorityAndFairness`: FlowSchemas and PriorityLevelConfigurations
//! are followed from the watch cache; each request is classified (the first
//! schema by matchingPrecedence, then name, whose rules match it), passes at
//! once on an exempt level, and on a limited one takes its seats within the
//! level's share of the server's, waits for them in its flow's
//! shuffle-sharded queue, or gets kube's 429. Responses name the schema and
//! level (`X-Kubernetes-PF-FlowSchema-UID`, `X-Kubernetes-PF-PriorityLevel-UID`);
//! `apiserver_flowcontrol_*` metrics and
//! `/debug/api_priority_and_fairness/dump_priority_levels` show what happens.
//! Each front door replica does its own accounting, as each kube-apiserver does.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use apimachinery::flowcontrol::queueset::{self, Place, QueueSet, RejectReason, Ticket};
use apimachinery::flowcontrol::{self, Digest, bootstrap};
use http::{HeaderName, HeaderValue};
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;

use crate::request::{ApiRequest, ApiResponse, Handler, REQUEST_TIMEOUT};
use crate::storage::cacher::{Cacher, Derived, ResourceCache, generic_ingest};

/// The response header naming the request's FlowSchema.
pub const FLOW_SCHEMA_UID: HeaderName = HeaderName::from_static("x-kubernetes-pf-flowschema-uid");
/// The response header naming the request's priority level.
pub const PRIORITY_LEVEL_UID: HeaderName =
    HeaderName::from_static("x-kubernetes-pf-prioritylevel-uid");
/// The path of kube's per-level table.
pub const DUMP_PRIORITY_LEVELS: &str = "/debug/api_priority_and_fairness/dump_priority_levels";
/// kube's `--max-requests-inflight` plus `--max-mutating-requests-inflight`.
pub const DEFAULT_SERVER_SEATS: u32 = 400 + 200;
/// How often the object counts LISTs are estimated from are refreshed.
const COUNT_REFRESH: Duration = Duration::from_secs(30);
/// The most resources counted: a client naming made-up resources cannot
/// grow the counts (or the etcd reads) without bound.
const MAX_COUNTED: usize = 1024;

/// Seat holders: the ticket a waiter is handed once it may execute.
type Waiter = oneshot::Sender<Ticket>;

/// One priority level's state, kept across configuration changes by name.
struct Level {
    name: String,
    queues: Mutex<QueueSet<Waiter>>,
}

impl Level {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueSet<Waiter>> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Hands `started` their tickets; a waiter that went away gives its seats
/// straight back (which may start others).
fn deliver(set: &mut QueueSet<Waiter>, mut started: Vec<(Waiter, Ticket)>) {
    while let Some((waiter, ticket)) = started.pop() {
        if let Err(ticket) = waiter.send(ticket) {
            started.extend(set.finish(ticket, Instant::now()));
        }
    }
}

/// A level as configured now.
struct LevelConfig {
    state: Arc<Level>,
    uid: String,
    exempt: bool,
    nominal: u32,
}

/// A FlowSchema ready to match, with its level and metrics.
struct Schema {
    object: FlowSchema,
    name: String,
    uid: Option<HeaderValue>,
    level_uid: Option<HeaderValue>,
    exempt: bool,
    level: Arc<Level>,
    metrics: SchemaMetrics,
}

/// The configuration in effect: schemas in matching order, levels by name.
#[derive(Default)]
struct Configuration {
    schemas: Vec<Schema>,
    levels: Vec<LevelConfig>,
}

/// kube's API Priority and Fairness filter.
pub struct PriorityAndFairness {
    config: Derived<Configuration>,
    states: Mutex<HashMap<String, Arc<Level>>>,
    server_seats: u32,
    counts: Arc<ObjectCounts>,
    metrics: &'static FlowControlMetrics,
}

/// What the filter decided for one request: the headers to answer with,
/// and the seats held until [`Admission::respond`] (or drop).
#[must_use]
pub struct Admission {
    headers: Option<(HeaderValue, HeaderValue)>,
    held: Option<(Arc<Level>, Ticket)>,
    executing: Option<(Gauge, Gauge, i64)>,
}

impl Admission {
    /// A request the filter does not classify (long-running ones but
    /// watches, as kube), or every request on a server without the filter.
    pub fn unclassified() -> Admission {
        Admission {
            headers: None,
            held: None,
            executing: None,
        }
    }

    /// The response, with the headers naming the schema and level; the
    /// seats are given back (for a watch: it is initialized once its
    /// response starts).
    pub fn respond(self, resp: ApiResponse) -> ApiResponse {
        self.name(resp)
    }

    /// The response, with the headers naming the schema and level; the
    /// seats are held for as long as `self` is.
    pub fn name(&self, mut resp: ApiResponse) -> ApiResponse {
        if let Some((schema, level)) = &self.headers {
            resp.headers.insert(FLOW_SCHEMA_UID, schema.clone());
            resp.headers.insert(PRIORITY_LEVEL_UID, level.clone());
        }
        resp
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some((requests, seats, held)) = &self.executing {
            requests.dec();
            seats.dec_by(*held);
        }
        if let Some((level, ticket)) = self.held.take() {
            let mut set = level.lock();
            let started = set.finish(ticket, Instant::now());
            deliver(&mut set, started);
        }
    }
}

/// Classifies `req` and takes its seats (waiting for them if need be), or
/// answers kube's 429; without a filter, every request passes unclassified.
pub async fn admit(
    filter: Option<&PriorityAndFairness>,
    req: &ApiRequest,
) -> Result<Admission, ApiResponse> {
    match filter {
        Some(filter) => filter.admit(req).await,
        None => Ok(Admission::unclassified()),
    }
}

impl PriorityAndFairness {
    /// Follows FlowSchemas and PriorityLevelConfigurations in `cacher`,
    /// sharing `server_seats` among the levels; LISTs are estimated from
    /// object counts read from `etcd` now and then.
    pub async fn new(
        cacher: &Cacher,
        etcd_root: &str,
        etcd: Option<etcd_client::Client>,
        server_seats: u32,
    ) -> crate::Result<Arc<PriorityAndFairness>> {
        let mut caches = Vec::new();
        for resource in ["flowschemas", "prioritylevelconfigurations"] {
            let prefix = apimachinery::keys::key_prefix(etcd_root, flowcontrol::GROUP, resource);
            caches.push(cacher.register(&prefix, generic_ingest()).await?);
        }
        let counts = Arc::new(ObjectCounts::new(etcd_root));
        if let Some(etcd) = etcd {
            counts.clone().refresh_in_background(etcd);
        }
        Ok(Arc::new(PriorityAndFairness {
            config: Derived::new(caches),
            states: Mutex::default(),
            server_seats,
            counts,
            metrics: &crate::metrics::global().flowcontrol,
        }))
    }

    fn configuration(&self) -> Arc<Configuration> {
        self.config.get(|caches| self.build(caches))
    }

    /// Classifies and admits one request (see [`admit`]).
    pub async fn admit(&self, req: &ApiRequest) -> Result<Admission, ApiResponse> {
        let watch = req.info.verb == "watch";
        if req.is_long_running() && !watch {
            return Ok(Admission::unclassified());
        }
        let config = self.configuration();
        let digest = Digest {
            user: &req.user.name,
            groups: &req.user.groups,
            resource_request: req.info.is_resource_request,
            verb: &req.info.verb,
            api_group: &req.info.api_group,
            resource: &req.info.resource,
            subresource: &req.info.subresource,
            namespace: &req.info.namespace,
            path: &req.path,
        };
        let Some(schema) = config
            .schemas
            .iter()
            .find(|s| flowcontrol::matches(&s.object, &digest))
        else {
            return Ok(Admission::unclassified());
        };
        let headers = match (&schema.uid, &schema.level_uid) {
            (Some(fs), Some(pl)) => Some((fs.clone(), pl.clone())),
            _ => None,
        };
        let m = &schema.metrics;
        if schema.exempt {
            m.dispatched.inc();
            m.executing.inc();
            m.executing_seats.inc();
            return Ok(Admission {
                headers,
                held: None,
                executing: Some((m.executing.clone(), m.executing_seats.clone(), 1)),
            });
        }
        let seats = if req.info.verb == "list" {
            flowcontrol::list_seats(self.counts.get(&req.info.api_group, &req.info.resource))
        } else {
            1
        };
        let hash = flowcontrol::flow_hash(
            &schema.name,
            flowcontrol::distinguisher(&schema.object, &digest),
        );
        let arrived = Instant::now();
        let level = &schema.level;
        let queued = {
            let mut set = level.lock();
            match set.start_now(seats, hash, arrived) {
                Some(ticket) => Ok(ticket),
                None => {
                    let (tx, rx) = oneshot::channel();
                    match set.enqueue(seats, hash, tx, arrived) {
                        Ok((place, started)) => {
                            deliver(&mut set, started);
                            Err(Ok((place, rx)))
                        }
                        Err(reason) => Err(Err(reason)),
                    }
                }
            }
        };
        let ticket = match queued {
            Ok(ticket) => ticket,
            Err(Err(reason)) => return Err(self.reject(schema, headers, reason, arrived)),
            Err(Ok((place, rx))) => {
                m.in_queue.inc();
                let wait_limit = req.deadline().unwrap_or(REQUEST_TIMEOUT) / 4;
                let waited = Waiting {
                    level: level.clone(),
                    place,
                    rx: Some(rx),
                    in_queue: m.in_queue.clone(),
                }
                .wait(wait_limit)
                .await;
                match waited {
                    Ok(ticket) => ticket,
                    Err(reason) => return Err(self.reject(schema, headers, reason, arrived)),
                }
            }
        };
        m.wait_executed.observe(arrived.elapsed().as_secs_f64());
        m.dispatched.inc();
        m.executing.inc();
        let held = i64::from(ticket.seats());
        m.executing_seats.inc_by(held);
        Ok(Admission {
            headers,
            held: Some((level.clone(), ticket)),
            executing: Some((m.executing.clone(), m.executing_seats.clone(), held)),
        })
    }

    /// kube's 429 for a rejected request, counted.
    fn reject(
        &self,
        schema: &Schema,
        headers: Option<(HeaderValue, HeaderValue)>,
        reason: RejectReason,
        arrived: Instant,
    ) -> ApiResponse {
        let m = &schema.metrics;
        m.wait_rejected.observe(arrived.elapsed().as_secs_f64());
        if let Some(i) = RejectReason::ALL.iter().position(|r| *r == reason) {
            m.rejected[i].inc();
        }
        tracing::debug!(flow_schema = %schema.name, priority_level = %schema.level.name, reason = reason.as_str(), "rejected by priority and fairness");
        let resp: ApiResponse = apimachinery::Error::too_many_requests().into();
        Admission {
            headers,
            held: None,
            executing: None,
        }
        .respond(resp)
    }

    /// Builds the configuration in effect from the caches: kube's mandatory
    /// objects stand in for missing ones; schemas naming no level are left out.
    fn build(&self, caches: &[Arc<ResourceCache>]) -> Configuration {
        fn decode<T: DeserializeOwned>(cache: Option<&Arc<ResourceCache>>) -> Vec<T> {
            let Some(cache) = cache else {
                return Vec::new();
            };
            cache
                .snapshot(cache.prefix(), 0)
                .objects
                .iter()
                .filter_map(|o| match serde_json::from_slice(&o.bytes) {
                    Ok(typed) => Some(typed),
                    Err(e) => {
                        tracing::warn!(key = %o.key, error = %e, "skipping a flow control object that does not decode");
                        None
                    }
                })
                .collect()
        }
        let mut schemas: Vec<FlowSchema> = decode(caches.first());
        let mut levels: Vec<PriorityLevelConfiguration> = decode(caches.get(1));
        for mandatory in bootstrap::mandatory_flow_schemas() {
            let Ok(m) = serde_json::from_value::<FlowSchema>(mandatory) else {
                continue;
            };
            if !schemas.iter().any(|s| s.metadata.name == m.metadata.name) {
                schemas.push(m);
            }
        }
        for mandatory in bootstrap::mandatory_priority_levels() {
            let Ok(m) = serde_json::from_value::<PriorityLevelConfiguration>(mandatory) else {
                continue;
            };
            if !levels.iter().any(|l| l.metadata.name == m.metadata.name) {
                levels.push(m);
            }
        }
        levels.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let shares: Vec<u32> = levels.iter().map(shares).collect();
        let limits = flowcontrol::nominal_limits(self.server_seats, &shares);
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        let mut configured = Vec::with_capacity(levels.len());
        for (level, nominal) in levels.iter().zip(limits) {
            let name = level.metadata.name.clone().unwrap_or_default();
            let exempt = level.spec.as_ref().is_some_and(|s| s.type_ == "Exempt");
            let config = queueset::Config {
                concurrency_limit: nominal,
                queuing: queuing(level),
            };
            let state = states
                .entry(name.clone())
                .or_insert_with(|| {
                    Arc::new(Level {
                        name: name.clone(),
                        queues: Mutex::new(QueueSet::new(config)),
                    })
                })
                .clone();
            {
                let mut set = state.lock();
                let started = set.configure(config, Instant::now());
                deliver(&mut set, started);
            }
            if !exempt {
                self.metrics.nominal(&name).set(i64::from(nominal));
            }
            configured.push(LevelConfig {
                state,
                uid: level.metadata.uid.clone().unwrap_or_default(),
                exempt,
                nominal,
            });
        }
        // Levels deleted since are forgotten once idle.
        states.retain(|name, state| {
            configured.iter().any(|l| l.state.name == *name) || {
                let set = state.lock();
                set.waiting() > 0 || set.executing() > 0
            }
        });
        drop(states);
        let precedence = |s: &FlowSchema| {
            s.spec
                .as_ref()
                .and_then(|s| s.matching_precedence)
                .unwrap_or(1000)
        };
        schemas.sort_by(|a, b| {
            precedence(a)
                .cmp(&precedence(b))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        let header = |uid: &str| {
            (!uid.is_empty())
                .then(|| HeaderValue::from_str(uid).ok())
                .flatten()
        };
        let schemas = schemas
            .into_iter()
            .filter_map(|object| {
                let level_name = &object.spec.as_ref()?.priority_level_configuration.name;
                let level = configured.iter().find(|l| l.state.name == *level_name)?;
                let name = object.metadata.name.clone().unwrap_or_default();
                Some(Schema {
                    uid: header(object.metadata.uid.as_deref().unwrap_or_default()),
                    level_uid: header(&level.uid),
                    exempt: level.exempt,
                    level: level.state.clone(),
                    metrics: self.metrics.schema(&name, level_name),
                    name,
                    object,
                })
            })
            .collect();
        Configuration {
            schemas,
            levels: configured,
        }
    }

    /// kube's `dump_priority_levels` table: one row per level.
    pub fn dump_priority_levels(&self) -> String {
        let config = self.configuration();
        let mut rows = vec![
            [
                "PriorityLevelName",
                "ActiveQueues",
                "IsIdle",
                "IsQuiescing",
                "WaitingRequests",
                "ExecutingRequests",
                "DispatchedRequests",
                "RejectedRequests",
                "TimedoutRequests",
                "CancelledRequests",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for level in &config.levels {
            if level.exempt {
                let mut row = vec![level.state.name.clone()];
                row.extend(std::iter::repeat_n("<none>".to_string(), 9));
                rows.push(row);
                continue;
            }
            let set = level.state.lock();
            let stats = set.stats();
            rows.push(vec![
                level.state.name.clone(),
                set.active_queues().to_string(),
                (set.waiting() == 0 && set.executing() == 0).to_string(),
                "false".to_string(),
                set.waiting().to_string(),
                set.executing().to_string(),
                stats.dispatched.to_string(),
                stats.rejected.to_string(),
                stats.timed_out.to_string(),
                stats.cancelled.to_string(),
            ]);
        }
        tabulate(&rows)
    }

    /// The nominal limit of each level (name, seats), for tests and logs.
    pub fn nominal_limits(&self) -> Vec<(String, u32)> {
        self.configuration()
            .levels
            .iter()
            .map(|l| (l.state.name.clone(), l.nominal))
            .collect()
    }
}

/// A level's nominal concurrency shares (kube's defaults: 30 for a
/// limited level, 0 for an exempt one).
fn shares(level: &PriorityLevelConfiguration) -> u32 {
    let spec = level.spec.as_ref();
    let shares = match spec.map(|s| s.type_.as_str()) {
        Some("Exempt") => spec
            .and_then(|s| s.exempt.as_ref())
            .and_then(|e| e.nominal_concurrency_shares)
            .unwrap_or(0),
        _ => spec
            .and_then(|s| s.limited.as_ref())
            .and_then(|l| l.nominal_concurrency_shares)
            .unwrap_or(30),
    };
    u32::try_from(shares).unwrap_or(0)
}

/// A limited level's queuing, if it queues.
fn queuing(level: &PriorityLevelConfiguration) -> Option<queueset::Queuing> {
    let response = level
        .spec
        .as_ref()?
        .limited
        .as_ref()?
        .limit_response
        .as_ref()?;
    if response.type_ != "Queue" {
        return None;
    }
    let q = response.queuing.as_ref()?;
    let positive = |v: Option<i32>, default: u32| {
        v.and_then(|v| u32::try_from(v).ok())
            .filter(|v| *v > 0)
            .unwrap_or(default)
    };
    Some(queueset::Queuing {
        queues: positive(q.queues, 64),
        hand_size: positive(q.hand_size, 8),
        queue_length_limit: positive(q.queue_length_limit, 50),
    })
}

/// Go's `tabwriter` as kube's dump uses it (minimum width 8, padding 1):
/// cells joined by `,` then padded to their column's width.
fn tabulate(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; columns];
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns.saturating_sub(1)) {
            widths[i] = widths[i].max((cell.len() + 2).max(8));
        }
    }
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < row.len() {
                let _ = write!(out, "{:<width$}", format!("{cell},"), width = widths[i]);
            } else {
                out.push_str(cell);
            }
        }
        out.push('\n');
    }
    out
}

/// A request waiting for its seats; taken out of its queue if dropped
/// before it got them (its client went away).
struct Waiting {
    level: Arc<Level>,
    place: Place,
    rx: Option<oneshot::Receiver<Ticket>>,
    in_queue: Gauge,
}

impl Waiting {
    /// The ticket, once dispatched; rejected past `limit`.
    async fn wait(mut self, limit: Duration) -> Result<Ticket, RejectReason> {
        let Some(rx) = self.rx.as_mut() else {
            return Err(RejectReason::Cancelled);
        };
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(ticket)) => {
                self.rx = None;
                Ok(ticket)
            }
            Ok(Err(_)) => Err(RejectReason::Cancelled),
            Err(_) => self.leave(RejectReason::TimeOut),
        }
    }

    /// Leaves the queue for `reason`; a ticket that came meanwhile is taken.
    fn leave(&mut self, reason: RejectReason) -> Result<Ticket, RejectReason> {
        let mut set = self.level.lock();
        if set.remove(self.place, reason).is_some() {
            self.rx = None;
            return Err(reason);
        }
        match self.rx.take().map(|mut rx| rx.try_recv()) {
            Some(Ok(ticket)) => Ok(ticket),
            _ => Err(reason),
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.in_queue.dec();
        if self.rx.is_some()
            && let Ok(ticket) = self.leave(RejectReason::Cancelled)
        {
            let mut set = self.level.lock();
            let started = set.finish(ticket, Instant::now());
            deliver(&mut set, started);
        }
    }
}

/// How many objects each resource has in etcd, counted now and then, for
/// the seats of LISTs (kube reads its storage's object counts).
struct ObjectCounts {
    root: String,
    counts: RwLock<HashMap<String, Option<u64>>>,
    wanted: tokio::sync::Notify,
}

impl ObjectCounts {
    fn new(root: &str) -> ObjectCounts {
        ObjectCounts {
            root: root.to_string(),
            counts: RwLock::default(),
            wanted: tokio::sync::Notify::new(),
        }
    }

    /// The count of `group`'s `resource`, if known yet; asks for it if not.
    fn get(&self, group: &str, resource: &str) -> Option<u64> {
        let prefix = apimachinery::keys::key_prefix(&self.root, group, resource);
        if let Some(count) = self
            .counts
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&prefix)
        {
            return *count;
        }
        let mut counts = self.counts.write().unwrap_or_else(|e| e.into_inner());
        if counts.len() < MAX_COUNTED {
            counts.entry(prefix).or_insert(None);
            self.wanted.notify_one();
        }
        None
    }

    /// Counts every prefix asked about, at once when a new one is asked
    /// about and every [`COUNT_REFRESH`] anyway.
    fn refresh_in_background(self: Arc<Self>, mut etcd: etcd_client::Client) {
        tokio::spawn(async move {
            loop {
                let prefixes: Vec<String> = self
                    .counts
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .keys()
                    .cloned()
                    .collect();
                for prefix in prefixes {
                    let options = etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_count_only();
                    if let Ok(resp) = etcd.get(prefix.as_str(), Some(options)).await {
                        let count = u64::try_from(resp.count()).unwrap_or(0);
                        self.counts
                            .write()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(prefix, Some(count));
                    }
                }
                let _ = tokio::time::timeout(COUNT_REFRESH, self.wanted.notified()).await;
            }
        });
    }
}

/// Serves `/debug/api_priority_and_fairness/dump_priority_levels` (to those
/// the pipeline authorized for it): a route of the server's
/// [`Router`](crate::router::Router) at [`DUMP_PRIORITY_LEVELS`].
pub struct PriorityLevelsDump(pub Arc<PriorityAndFairness>);

#[async_trait::async_trait]
impl Handler for PriorityLevelsDump {
    async fn handle(&self, _req: ApiRequest) -> ApiResponse {
        ApiResponse::bytes(
            http::StatusCode::OK,
            "text/plain; charset=utf-8",
            self.0.dump_priority_levels(),
        )
    }
}

/// A schema and its level, as kube labels flow control metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FlowLabels {
    flow_schema: String,
    priority_level: String,
}

/// A rejection's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RejectLabels {
    flow_schema: String,
    priority_level: String,
    reason: &'static str,
}

/// A wait's labels: whether the request went on to execute.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WaitLabels {
    execute: &'static str,
    flow_schema: String,
    priority_level: String,
}

/// A level's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LevelLabels {
    priority_level: String,
}

/// kube's buckets for the time a request waits in its queue, in seconds.
const WAIT_BUCKETS: [f64; 9] = [0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 15.0];

/// The `apiserver_flowcontrol_*` metrics.
pub struct FlowControlMetrics {
    dispatched: Family<FlowLabels, Counter>,
    rejected: Family<RejectLabels, Counter>,
    in_queue: Family<FlowLabels, Gauge>,
    executing: Family<FlowLabels, Gauge>,
    executing_seats: Family<FlowLabels, Gauge>,
    wait: Family<WaitLabels, Histogram>,
    nominal: Family<LevelLabels, Gauge>,
}

/// One schema's metrics, made once per configuration so that requests only count.
struct SchemaMetrics {
    dispatched: Counter,
    rejected: [Counter; 4],
    in_queue: Gauge,
    executing: Gauge,
    executing_seats: Gauge,
    wait_executed: Histogram,
    wait_rejected: Histogram,
}

impl FlowControlMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut Registry) -> FlowControlMetrics {
        let m = FlowControlMetrics {
            dispatched: Family::default(),
            rejected: Family::default(),
            in_queue: Family::default(),
            executing: Family::default(),
            executing_seats: Family::default(),
            wait: Family::new_with_constructor(
                (|| Histogram::new(WAIT_BUCKETS)) as fn() -> Histogram,
            ),
            nominal: Family::default(),
        };
        registry.register(
            "apiserver_flowcontrol_dispatched_requests",
            "Number of requests executed by API Priority and Fairness subsystem",
            m.dispatched.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_rejected_requests",
            "Number of requests rejected by API Priority and Fairness subsystem",
            m.rejected.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_current_inqueue_requests",
            "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
            m.in_queue.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_current_executing_requests",
            "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
            m.executing.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_current_executing_seats",
            "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem",
            m.executing_seats.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_request_wait_duration_seconds",
            "Length of time a request spent waiting in its queue",
            m.wait.clone(),
        );
        registry.register(
            "apiserver_flowcontrol_nominal_limit_seats",
            "Nominal number of execution seats configured for each priority level",
            m.nominal.clone(),
        );
        m
    }

    fn nominal(&self, level: &str) -> Gauge {
        self.nominal
            .get_or_create(&LevelLabels {
                priority_level: level.to_string(),
            })
            .clone()
    }

    fn schema(&self, schema: &str, level: &str) -> SchemaMetrics {
        let labels = FlowLabels {
            flow_schema: schema.to_string(),
            priority_level: level.to_string(),
        };
        let wait = |execute| {
            self.wait
                .get_or_create(&WaitLabels {
                    execute,
                    flow_schema: schema.to_string(),
                    priority_level: level.to_string(),
                })
                .clone()
        };
        SchemaMetrics {
            dispatched: self.dispatched.get_or_create(&labels).clone(),
            rejected: RejectReason::ALL.map(|reason| {
                self.rejected
                    .get_or_create(&RejectLabels {
                        flow_schema: schema.to_string(),
                        priority_level: level.to_string(),
                        reason: reason.as_str(),
                    })
                    .clone()
            }),
            in_queue: self.in_queue.get_or_create(&labels).clone(),
            executing: self.executing.get_or_create(&labels).clone(),
            executing_seats: self.executing_seats.get_or_create(&labels).clone(),
            wait_executed: wait("true"),
            wait_rejected: wait("false"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::UserInfo;
    use crate::storage::Storage;
    use crate::storage::memory::MemoryStorage;
    use http::HeaderMap;
    use serde_json::json;

    fn request(user: &str, groups: &[&str], path: &str) -> ApiRequest {
        ApiRequest::new(
            http::Method::GET,
            path,
            "",
            HeaderMap::new(),
            bytes::Bytes::new(),
            UserInfo {
                name: user.into(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
                ..Default::default()
            },
        )
    }

    async fn put(storage: &MemoryStorage, key: &str, value: serde_json::Value) {
        storage
            .create(key, serde_json::to_vec(&value).expect("json").into())
            .await
            .expect("stored");
    }

    #[tokio::test]
    async fn classifies_queues_rejects_and_names_the_schema() {
        let storage = Arc::new(MemoryStorage::default());
        let cacher = Cacher::start(storage.clone()).await.expect("a cache");
        let root = "/registry/flowcontrol.apiserver.k8s.io";
        put(&storage, &format!("{root}/prioritylevelconfigurations/tiny"), json!({
            "metadata": {"name": "tiny", "uid": "pl-uid"},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 1}}}}
        })).await;
        put(&storage, &format!("{root}/flowschemas/bots"), json!({
            "metadata": {"name": "bots", "uid": "fs-uid"},
            "spec": {"priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 100,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": [{"kind": "User", "user": {"name": "bot"}}],
                           "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}]}]}
        })).await;
        cacher.wait_fresh().await.expect("fresh");
        // 5 + 1 shares of 12 seats: the tiny level gets 2.
        let apf = PriorityAndFairness::new(&cacher, "/registry", None, 12)
            .await
            .expect("the filter");
        assert!(apf.nominal_limits().contains(&("tiny".to_string(), 2)));
        let path = "/api/v1/namespaces/ns/configmaps";
        let bot = request("bot", &["system:authenticated"], path);
        let first = apf.admit(&bot).await.expect("a seat");
        let second = apf.admit(&bot).await.expect("a seat");
        let resp = first.respond(ApiResponse::bytes(http::StatusCode::OK, "text/plain", ""));
        assert_eq!(resp.headers[FLOW_SCHEMA_UID], "fs-uid");
        assert_eq!(resp.headers[PRIORITY_LEVEL_UID], "pl-uid");
        // Both seats taken again: the next waits in the queue (of one), the one after is refused.
        let third = apf.admit(&bot).await.expect("a seat");
        let waiting = {
            let bot = bot.clone();
            let apf = apf.clone();
            tokio::spawn(async move { apf.admit(&bot).await.is_ok() })
        };
        let tiny = |apf: &PriorityAndFairness| {
            let config = apf.configuration();
            let level = config
                .levels
                .iter()
                .find(|l| l.state.name == "tiny")
                .expect("tiny");
            level.state.lock().waiting()
        };
        while tiny(&apf) == 0 {
            tokio::task::yield_now().await;
        }
        let refused = apf.admit(&bot).await.err().expect("refused");
        assert_eq!(refused.status, http::StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers[http::header::RETRY_AFTER], "1");
        assert_eq!(refused.headers[FLOW_SCHEMA_UID], "fs-uid");
        // An admin is exempt meanwhile; someone else goes to catch-all.
        let admin = request("admin", &["system:masters", "system:authenticated"], path);
        assert!(apf.admit(&admin).await.expect("exempt").held.is_none());
        let other = apf
            .admit(&request("alice", &["system:authenticated"], path))
            .await
            .expect("catch-all has room");
        assert!(other.held.is_some());
        drop((second, third));
        assert!(waiting.await.expect("the waiter"), "the queued request ran");
        let dump = apf.dump_priority_levels();
        assert!(
            dump.starts_with("PriorityLevelName, ActiveQueues, IsIdle,"),
            "{dump}"
        );
        assert!(dump.contains("exempt,            <none>,"), "{dump}");
        let tiny = dump.lines().find(|l| l.starts_with("tiny,")).expect("tiny");
        let cells: Vec<&str> = tiny.split(',').map(str::trim).collect();
        // Nothing waits or executes; 4 dispatched, 1 rejected.
        assert_eq!(
            cells,
            ["tiny", "0", "true", "false", "0", "0", "4", "1", "0", "0"],
            "{dump}"
        );
    }

    #[tokio::test]
    async fn waiters_time_out_at_a_quarter_of_their_timeout_and_leave_when_cancelled() {
        let storage = Arc::new(MemoryStorage::default());
        let cacher = Cacher::start(storage.clone()).await.expect("a cache");
        let root = "/registry/flowcontrol.apiserver.k8s.io";
        put(&storage, &format!("{root}/prioritylevelconfigurations/one"), json!({
            "metadata": {"name": "one", "uid": "pl-uid"},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 2, "handSize": 1, "queueLengthLimit": 5}}}}
        })).await;
        put(&storage, &format!("{root}/flowschemas/bots"), json!({
            "metadata": {"name": "bots", "uid": "fs-uid"},
            "spec": {"priorityLevelConfiguration": {"name": "one"}, "matchingPrecedence": 100,
                "rules": [{"subjects": [{"kind": "User", "user": {"name": "bot"}}],
                           "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}]}]}
        })).await;
        cacher.wait_fresh().await.expect("fresh");
        // 1 share of 6: one seat.
        let apf = PriorityAndFairness::new(&cacher, "/registry", None, 6)
            .await
            .expect("the filter");
        let path = "/api/v1/namespaces/ns/configmaps";
        let bot = request("bot", &[], path);
        let _running = apf.admit(&bot).await.expect("the seat");
        let level = || {
            let config = apf.configuration();
            let level = config
                .levels
                .iter()
                .find(|l| l.state.name == "one")
                .expect("one");
            let set = level.state.lock();
            (set.waiting(), set.stats())
        };
        // `?timeout=1s` waits at most 250 ms.
        let mut hasty = bot.clone();
        hasty.query = "timeout=1s".into();
        let started = Instant::now();
        let refused = apf.admit(&hasty).await.err().expect("timed out");
        assert_eq!(refused.status, http::StatusCode::TOO_MANY_REQUESTS);
        assert!(started.elapsed() >= Duration::from_millis(250));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(level().1.timed_out, 1);
        // A client that goes away leaves the queue.
        let gone = {
            let (apf, bot) = (apf.clone(), bot.clone());
            tokio::spawn(async move { apf.admit(&bot).await.is_ok() })
        };
        while level().0 == 0 {
            tokio::task::yield_now().await;
        }
        gone.abort();
        let _ = gone.await;
        let (waiting, stats) = level();
        assert_eq!((waiting, stats.cancelled), (0, 1));
        let rendered = crate::metrics::global().render();
        assert!(
            rendered.contains("apiserver_flowcontrol_rejected_requests_total{flow_schema=\"bots\",priority_level=\"one\",reason=\"time-out\"} 1"),
            "{rendered}"
        );
    }

    /// What admission costs per request with kube's bootstrap objects: an
    /// admin's (exempt) and a ServiceAccount's (workload-low, uncongested).
    /// Run with `cargo test --release -p kubechain-generic-server --lib admission_cost -- --ignored --nocapture`.
    #[tokio::test]
    #[ignore]
    async fn admission_cost() {
        let storage = Arc::new(MemoryStorage::default());
        let cacher = Cacher::start(storage.clone()).await.expect("a cache");
        let root = "/registry/flowcontrol.apiserver.k8s.io";
        for (resource, objects) in [
            ("flowschemas", bootstrap::mandatory_flow_schemas()),
            ("flowschemas", bootstrap::suggested_flow_schemas()),
            (
                "prioritylevelconfigurations",
                bootstrap::mandatory_priority_levels(),
            ),
            (
                "prioritylevelconfigurations",
                bootstrap::suggested_priority_levels(),
            ),
        ] {
            for mut object in objects {
                let name = object["metadata"]["name"]
                    .as_str()
                    .expect("a name")
                    .to_string();
                object["metadata"]["uid"] = json!(format!("uid-{name}"));
                put(&storage, &format!("{root}/{resource}/{name}"), object).await;
            }
        }
        cacher.wait_fresh().await.expect("fresh");
        let apf = PriorityAndFairness::new(&cacher, "/registry", None, DEFAULT_SERVER_SEATS)
            .await
            .expect("the filter");
        let path = "/api/v1/namespaces/ns/configmaps/one";
        let admin = request("admin", &["system:masters", "system:authenticated"], path);
        let account = request(
            "system:serviceaccount:ns:bot",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated",
            ],
            path,
        );
        for (who, req) in [
            ("admin (exempt)", &admin),
            ("ServiceAccount (workload-low)", &account),
        ] {
            let rounds = 200_000u32;
            let started = Instant::now();
            for _ in 0..rounds {
                let admitted = apf.admit(req).await.expect("admitted");
                let resp =
                    admitted.respond(ApiResponse::bytes(http::StatusCode::OK, "text/plain", ""));
                assert!(resp.headers.contains_key(FLOW_SCHEMA_UID));
            }
            eprintln!("{who}: {:?} per request", started.elapsed() / rounds);
        }
    }

    #[test]
    fn tables_are_padded_as_go_pads_them() {
        let rows = vec![
            vec!["Name".to_string(), "A".into(), "Last".into()],
            vec!["a-long-name".to_string(), "1".into(), "x".into()],
        ];
        assert_eq!(
            tabulate(&rows),
            "Name,        A,      Last\na-long-name, 1,      x\n"
        );
    }
}
