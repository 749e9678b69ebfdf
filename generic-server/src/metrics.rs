//! Each process's Prometheus metrics, named and labelled as
//! kube-apiserver's: requests (at the front door, and at each server behind
//! it), latency per hop, etcd requests, stored objects, watch events and the
//! process itself. Served at `/metrics` (text format): through the
//! pipeline where a server has one, else on a plain metrics listener.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, OnceLock, RwLock, Weak};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::request::ApiRequest;
use crate::request_info::RequestInfo;
use crate::storage::cacher::ResourceCache;

/// kube-apiserver's latency buckets, in seconds.
const BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];
/// kube's buckets for etcd requests, in seconds.
const ETCD_BUCKETS: [f64; 19] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0,
];
/// Finer buckets for one hop, whose share of a request is often below 5 ms.
const HOP_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];
/// Non-resource paths reported by name; any other is `other`, so a client
/// cannot grow the metrics without bound.
const NAMED_PATHS: &[&str] = &[
    "/api",
    "/apis",
    "/version",
    "/healthz",
    "/livez",
    "/readyz",
    "/metrics",
    "/openapi/v2",
    "/openapi/v3",
];

/// The process's metrics, shared by everything in it (as kube's legacy
/// registry is).
pub fn global() -> &'static Metrics {
    static GLOBAL: LazyLock<Metrics> = LazyLock::new(Metrics::default);
    &GLOBAL
}

/// What a request is counted under (kube's label names, sorted).
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    component: &'static str,
    dry_run: &'static str,
    group: String,
    resource: String,
    scope: &'static str,
    subresource: String,
    verb: &'static str,
    version: String,
}

/// A request's labels plus its response code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    code: String,
    #[prometheus(flatten)]
    request: RequestLabels,
}

/// `readOnly` or `mutating`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    request_kind: &'static str,
}

/// One hop a request takes at the front door.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HopLabels {
    hop: &'static str,
}

/// An etcd request: what it did, to which resource.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EtcdLabels {
    operation: &'static str,
    r#type: String,
}

/// A resource, as kube labels watch events.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatchLabels {
    group: String,
    resource: String,
    version: String,
}

/// The metrics of one process.
pub struct Metrics {
    registry: Registry,
    requests: Family<CodeLabels, Counter>,
    latencies: Family<RequestLabels, Histogram>,
    inflight: Family<KindLabels, Gauge>,
    hops: Family<HopLabels, Histogram>,
    etcd: Family<EtcdLabels, Histogram>,
    watch_events: Family<WatchLabels, Counter>,
    caches: Arc<Caches>,
    /// What the process serves: requests for anything else share one label.
    served: OnceLock<Arc<crate::discovery::Discovery>>,
    /// API Priority and Fairness's (`apiserver_flowcontrol_*`).
    pub flowcontrol: crate::filters::flowcontrol::FlowControlMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<CodeLabels, Counter>::default();
        registry.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code",
            requests.clone(),
        );
        let latencies = Family::<RequestLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component",
            latencies.clone(),
        );
        let inflight = Family::<KindLabels, Gauge>::default();
        registry.register(
            "apiserver_current_inflight_requests",
            "Number of requests being served, by kind (watches included)",
            inflight.clone(),
        );
        let hops = Family::<HopLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(HOP_BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            "kubechain_hop_duration_seconds",
            "Latency of each hop a request takes, in seconds: front-door (the whole request, as the client sees it up to the response head), delegation (the gRPC call to the servers behind), proxy (an aggregated server)",
            hops.clone(),
        );
        let etcd = Family::<EtcdLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(ETCD_BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            "etcd_request_duration_seconds",
            "Etcd request latency in seconds for each operation and object type",
            etcd.clone(),
        );
        let watch_events = Family::<WatchLabels, Counter>::default();
        registry.register(
            "apiserver_watch_events",
            "Number of events sent in watch clients",
            watch_events.clone(),
        );
        let caches = Arc::new(Caches::default());
        registry.register_collector(Box::new(caches.clone()));
        registry.register_collector(Box::new(Process));
        let flowcontrol = crate::filters::flowcontrol::FlowControlMetrics::register(&mut registry);
        Metrics {
            registry,
            requests,
            latencies,
            inflight,
            hops,
            etcd,
            watch_events,
            caches,
            served: OnceLock::new(),
            flowcontrol,
        }
    }
}

/// A request being served: counted when [`InFlight::done`] is called, or
/// dropped uncounted (the inflight gauge goes down either way).
pub struct InFlight<'a> {
    metrics: &'a Metrics,
    labels: RequestLabels,
    kind: KindLabels,
    started: std::time::Instant,
    hop: Option<&'static str>,
}

impl Metrics {
    /// Starts counting a request at the front door (its latency is also
    /// the `front-door` hop's).
    pub fn start(&self, req: &ApiRequest) -> InFlight<'_> {
        let mut counted = self.start_behind(req);
        counted.hop = Some("front-door");
        counted
    }

    /// Labels requests by what `discovery` serves: a resource, version or
    /// group it does not name is counted as `other`, so made-up names do
    /// not grow a series each (the first server of a process sets it).
    pub fn label_by(&self, discovery: Arc<crate::discovery::Discovery>) {
        let _ = self.served.set(discovery);
    }

    /// Starts counting a request delegated to this server.
    pub fn start_behind(&self, req: &ApiRequest) -> InFlight<'_> {
        let served = self.served.get().map(|d| d.documents());
        let labels = labels(req, |group, version, resource, subresource| {
            served
                .as_ref()
                .is_some_and(|docs| docs.serves(group, version, resource, subresource))
        });
        let kind = KindLabels {
            request_kind: match labels.verb {
                "GET" | "LIST" | "WATCH" => "readOnly",
                _ => "mutating",
            },
        };
        self.inflight.get_or_create(&kind).inc();
        InFlight {
            metrics: self,
            labels,
            kind,
            started: std::time::Instant::now(),
            hop: None,
        }
    }

    /// Records one hop's latency (`front-door`, `delegation`, `proxy`).
    pub fn hop(&self, hop: &'static str, started: Instant) {
        self.hops
            .get_or_create(&HopLabels { hop })
            .observe(started.elapsed().as_secs_f64());
    }

    /// Records an etcd request (`get`, `list`, `create`, …) on `key`.
    pub fn etcd(&self, operation: &'static str, key: &str, started: Instant) {
        let labels = EtcdLabels {
            operation,
            r#type: self.caches.resource_of(key),
        };
        self.etcd
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
    }

    /// The counter of events sent to watchers of a resource.
    pub fn watch_events(&self, group: &str, version: &str, resource: &str) -> Counter {
        self.watch_events
            .get_or_create(&WatchLabels {
                group: group.into(),
                resource: resource.into(),
                version: version.into(),
            })
            .clone()
    }

    /// Sets the etcd key prefix (`/registry`) resources' keys start with.
    pub fn set_etcd_root(&self, root: &str) {
        let _ = self.caches.root.set(root.trim_end_matches('/').to_string());
    }

    /// Counts the objects of a watch cache as `apiserver_storage_objects`.
    pub fn track(&self, cache: &Arc<ResourceCache>) {
        let label = self.caches.label(cache.prefix());
        self.caches
            .tracked
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(cache.prefix().to_string(), (label, Arc::downgrade(cache)));
    }

    /// The media type of [`Metrics::render`]'s text.
    pub const CONTENT_TYPE: &'static str =
        "application/openmetrics-text; version=1.0.0; charset=utf-8";

    /// The OpenMetrics text exposition of every metric (what Prometheus
    /// scrapes; samples keep kube's names, `apiserver_request_total` …).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl InFlight<'_> {
    /// The response head is out with `code`: counts the request and, but
    /// for watches (which last as long as they are open), its latency.
    pub fn done(mut self, code: u16) {
        let m = self.metrics;
        if self.labels.verb != "WATCH" {
            m.latencies
                .get_or_create(&self.labels)
                .observe(self.started.elapsed().as_secs_f64());
        }
        if let Some(hop) = self.hop.filter(|_| self.labels.verb != "WATCH") {
            m.hop(hop, self.started);
        }
        let request = std::mem::take(&mut self.labels);
        m.requests
            .get_or_create(&CodeLabels {
                code: code.to_string(),
                request,
            })
            .inc();
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.metrics.inflight.get_or_create(&self.kind).dec();
    }
}

/// The watch caches whose objects are counted, by key prefix, and the
/// resource each prefix is (what etcd requests are labelled with).
#[derive(Debug, Default)]
struct Caches {
    root: OnceLock<String>,
    tracked: RwLock<HashMap<String, (String, Weak<ResourceCache>)>>,
}

impl Caches {
    /// kube's name of the resource under `prefix`: `configmaps`,
    /// `deployments.apps`.
    fn label(&self, prefix: &str) -> String {
        let root = self.root.get().map_or("", String::as_str);
        let path = prefix
            .strip_prefix(root)
            .unwrap_or(prefix)
            .trim_matches('/');
        match path.split_once('/') {
            Some((group, resource)) => format!("{resource}.{group}"),
            None => path.to_string(),
        }
    }

    /// The resource a key belongs to, if its prefix is tracked; else `other`.
    fn resource_of(&self, key: &str) -> String {
        let tracked = self.tracked.read().unwrap_or_else(|e| e.into_inner());
        key.char_indices()
            .filter(|(_, c)| *c == '/')
            .take(4)
            .filter_map(|(i, _)| tracked.get(&key[..=i]))
            .last()
            .map_or_else(|| "other".to_string(), |(label, _)| label.clone())
    }
}

impl Collector for Caches {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counts: Vec<(String, i64)> = {
            let tracked = self.tracked.read().unwrap_or_else(|e| e.into_inner());
            let mut counts: Vec<(String, i64)> = tracked
                .values()
                .filter_map(|(label, cache)| {
                    let cache = cache.upgrade()?;
                    Some((
                        label.clone(),
                        i64::try_from(cache.len()).unwrap_or(i64::MAX),
                    ))
                })
                .collect();
            counts.sort();
            counts
        };
        if counts.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(
            "apiserver_storage_objects",
            "Number of stored objects at the time of last check split by kind",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (resource, count) in counts {
            let labels = [("resource", resource)];
            ConstGauge::new(count).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// The process's CPU, memory, file descriptors and start time, read from
/// `/proc/self` at each scrape (Prometheus' `process_*` metrics).
#[derive(Debug)]
struct Process;

/// Linux reports times in `/proc` in ticks of 1/100 s, and memory in pages.
const TICKS_PER_SECOND: f64 = 100.0;
const PAGE_BYTES: i64 = 4096;

impl Process {
    /// Fields of `/proc/self/stat` after the command name, from field 3.
    fn stat() -> Option<Vec<String>> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let after = stat.rsplit_once(')')?.1;
        Some(after.split_whitespace().map(str::to_string).collect())
    }

    fn boot_time() -> Option<f64> {
        std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|t| t.trim().parse().ok())
    }
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use prometheus_client::metrics::MetricType;
        let Some(stat) = Process::stat() else {
            return Ok(());
        };
        // Fields 14, 15 (utime, stime), 22 (starttime), 23 (vsize), 24 (rss);
        // `stat` starts at field 3.
        let field = |n: usize| stat.get(n - 3).and_then(|f| f.parse::<f64>().ok());
        let cpu = field(14).unwrap_or(0.0) + field(15).unwrap_or(0.0);
        let cpu = ConstCounter::new(cpu / TICKS_PER_SECOND);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            MetricType::Counter,
        )?)?;
        let rss = field(24).unwrap_or(0.0) as i64 * PAGE_BYTES;
        ConstGauge::new(rss).encode(encoder.encode_descriptor(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            None,
            MetricType::Gauge,
        )?)?;
        ConstGauge::new(field(23).unwrap_or(0.0) as i64).encode(encoder.encode_descriptor(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            None,
            MetricType::Gauge,
        )?)?;
        if let (Some(boot), Some(start)) = (Process::boot_time(), field(22)) {
            ConstGauge::new(boot + start / TICKS_PER_SECOND).encode(encoder.encode_descriptor(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                None,
                MetricType::Gauge,
            )?)?;
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            ConstGauge::new(fds.count() as i64).encode(encoder.encode_descriptor(
                "process_open_fds",
                "Number of open file descriptors",
                None,
                MetricType::Gauge,
            )?)?;
        }
        Ok(())
    }
}

/// kube's labels for a request: the verb as it reports it (`LIST`,
/// `WATCH`, `APPLY`), and the scope it was asked in; a resource that
/// `served` does not know is `other`, in no group or version.
fn labels(req: &ApiRequest, served: impl Fn(&str, &str, &str, &str) -> bool) -> RequestLabels {
    let info: &RequestInfo = &req.info;
    let dry_run = if req.query.split('&').any(|p| p == "dryRun=All") {
        "All"
    } else {
        ""
    };
    if !info.is_resource_request {
        let path = NAMED_PATHS
            .iter()
            .find(|p| **p == req.path)
            .copied()
            .unwrap_or("other");
        return RequestLabels {
            component: "",
            dry_run,
            group: String::new(),
            resource: String::new(),
            scope: "",
            subresource: path.to_string(),
            verb: method_verb(req.method.as_str()),
            version: String::new(),
        };
    }
    let apply = req
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch"));
    let verb = match info.verb.as_str() {
        "get" => "GET",
        "list" => "LIST",
        "watch" => "WATCH",
        "create" => "POST",
        "update" => "PUT",
        "patch" if apply => "APPLY",
        "patch" => "PATCH",
        "delete" | "deletecollection" => "DELETE",
        _ => method_verb(req.method.as_str()),
    };
    let scope = if !info.name.is_empty() {
        "resource"
    } else if !info.namespace.is_empty() && info.resource != "namespaces" {
        "namespace"
    } else {
        "cluster"
    };
    if !served(
        &info.api_group,
        &info.api_version,
        &info.resource,
        &info.subresource,
    ) {
        return RequestLabels {
            component: "apiserver",
            dry_run,
            group: String::new(),
            resource: "other".into(),
            scope,
            subresource: String::new(),
            verb,
            version: String::new(),
        };
    }
    RequestLabels {
        component: "apiserver",
        dry_run,
        group: info.api_group.clone(),
        resource: info.resource.clone(),
        scope,
        subresource: info.subresource.clone(),
        verb,
        version: info.api_version.clone(),
    }
}

/// An HTTP method as a static label.
fn method_verb(method: &str) -> &'static str {
    match method {
        "GET" | "HEAD" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::UserInfo;
    use http::{HeaderMap, Method};
    use serde_json::json;

    fn request(method: Method, path: &str, query: &str) -> ApiRequest {
        ApiRequest::new(
            method,
            path,
            query,
            HeaderMap::new(),
            Default::default(),
            UserInfo::default(),
        )
    }

    #[test]
    fn etcd_keys_are_labelled_with_the_resource_their_cache_holds() {
        let caches = Caches::default();
        let _ = caches.root.set("/registry".into());
        assert_eq!(caches.label("/registry/configmaps/"), "configmaps");
        assert_eq!(
            caches.label("/registry/apps/deployments/"),
            "deployments.apps"
        );
        let cache = |prefix: &str| {
            let label = caches.label(prefix);
            caches
                .tracked
                .write()
                .expect("lock")
                .insert(prefix.into(), (label, Weak::new()));
        };
        cache("/registry/pods/");
        cache("/registry/apps/deployments/");
        assert_eq!(caches.resource_of("/registry/pods/ns/web"), "pods");
        assert_eq!(
            caches.resource_of("/registry/apps/deployments/ns/web"),
            "deployments.apps"
        );
        assert_eq!(
            caches.resource_of("/registry/apps/replicasets/ns/web"),
            "other"
        );
        assert_eq!(
            caches.resource_of("/kubechain/endpoints/core-server/1"),
            "other"
        );
    }

    #[test]
    fn requests_are_counted_under_kubes_names_and_labels() {
        let metrics = Metrics::default();
        let discovery = Arc::new(crate::discovery::Discovery::default());
        discovery.set_own([
            json!({"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [
                {"resource": "configmaps"}, {"resource": "pods", "subresources": [{"subresource": "log"}]}]}]}),
            json!({"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": [
                {"resource": "deployments"}]}]}),
        ]
        .map(Arc::new));
        metrics.label_by(discovery);
        // Made-up resources, subresources, versions and groups: one series.
        for path in [
            "/api/v1/namespaces/team/made-up-1",
            "/api/v1/namespaces/team/made-up-2/x",
            "/api/v1/namespaces/team/pods/web/made-up",
            "/apis/apps/v9/deployments",
            "/apis/made.up/v1/things",
        ] {
            metrics.start(&request(Method::GET, path, "")).done(404);
        }
        for _ in 0..2 {
            metrics
                .start(&request(
                    Method::GET,
                    "/api/v1/namespaces/team/configmaps",
                    "",
                ))
                .done(200);
        }
        metrics
            .start(&request(
                Method::GET,
                "/apis/apps/v1/namespaces/team/deployments/web",
                "",
            ))
            .done(404);
        let watch = metrics.start(&request(Method::GET, "/api/v1/pods", "watch=true"));
        let open = metrics.render();
        assert!(
            open.contains("apiserver_current_inflight_requests{request_kind=\"readOnly\"} 1"),
            "{open}"
        );
        watch.done(200);
        metrics
            .start(&request(Method::GET, "/healthz", ""))
            .done(200);
        metrics
            .start(&request(Method::GET, "/no/such/path", ""))
            .done(404);
        let text = metrics.render();
        for line in [
            "apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 2",
            "apiserver_request_total{code=\"404\",component=\"apiserver\",dry_run=\"\",group=\"apps\",resource=\"deployments\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\"} 1",
            "apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"cluster\",subresource=\"\",verb=\"WATCH\",version=\"v1\"} 1",
            "apiserver_request_total{code=\"200\",component=\"\",dry_run=\"\",group=\"\",resource=\"\",scope=\"\",subresource=\"/healthz\",verb=\"GET\",version=\"\"} 1",
            "apiserver_request_total{code=\"404\",component=\"\",dry_run=\"\",group=\"\",resource=\"\",scope=\"\",subresource=\"other\",verb=\"GET\",version=\"\"} 1",
            "apiserver_request_duration_seconds_count{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 2",
            "apiserver_current_inflight_requests{request_kind=\"readOnly\"} 0",
            "apiserver_request_total{code=\"404\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"other\",scope=\"namespace\",subresource=\"\",verb=\"LIST\",version=\"\"} 1",
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
        assert!(!text.contains("made"), "{text}");
        assert!(
            !text.contains("verb=\"WATCH\",version=\"v1\",le="),
            "a watch's latency was observed"
        );
    }
}
