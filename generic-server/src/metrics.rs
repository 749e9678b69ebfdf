//! The front door's Prometheus metrics, named and labelled as
//! kube-apiserver's, served at `/metrics` (text format) to those allowed
//! to read it: what dashboards and alerts built for kube-apiserver read.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::request::ApiRequest;
use crate::request_info::RequestInfo;

/// kube-apiserver's latency buckets, in seconds.
const BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
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

/// The metrics of one front door.
pub struct Metrics {
    registry: Registry,
    requests: Family<CodeLabels, Counter>,
    latencies: Family<RequestLabels, Histogram>,
    inflight: Family<KindLabels, Gauge>,
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
        Metrics {
            registry,
            requests,
            latencies,
            inflight,
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
}

impl Metrics {
    /// Starts counting a request.
    pub fn start(&self, req: &ApiRequest) -> InFlight<'_> {
        let labels = labels(req);
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
        }
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

/// kube's labels for a request: the verb as it reports it (`LIST`,
/// `WATCH`, `APPLY`), and the scope it was asked in.
fn labels(req: &ApiRequest) -> RequestLabels {
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
    fn requests_are_counted_under_kubes_names_and_labels() {
        let metrics = Metrics::default();
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
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
        assert!(
            !text.contains("verb=\"WATCH\",version=\"v1\",le="),
            "a watch's latency was observed"
        );
    }
}
