//! The aggregator's handler: requests for a group and version served by an
//! aggregated server are proxied to it, streamed both ways, with the
//! authenticated user in `X-Remote-*` headers and the front-proxy client
//! certificate; everything else goes to the API server chain.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use apimachinery::error::Error;
use bytes::Bytes;
use futures::StreamExt;
use generic_server::filters::request_path;
use generic_server::request::{ApiRequest, ApiResponse, Body, Handler, UserInfo};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde_json::Value;

use generic_server::service_client::{Clients, ServiceRef};

/// Where a remote group/version is served.
#[derive(Clone, Debug)]
pub struct Route {
    /// The APIService.
    pub apiservice: Value,
    /// Its service.
    pub service: ServiceRef,
    /// Ready endpoints, in the order to try them.
    pub endpoints: Vec<SocketAddr>,
    /// Whether it passed its availability checks.
    pub available: bool,
}

/// The routes of every remote APIService by (group, version), swapped as a
/// whole so readers never wait on a check.
pub type Routes = Arc<RwLock<Arc<HashMap<(String, String), Route>>>>;

/// Request headers never passed to a backend.
const DROPPED: &[&str] = &[
    "connection",
    "host",
    "content-length",
    "transfer-encoding",
    "te",
    "upgrade",
    "keep-alive",
    "authorization",
];
/// Response headers never passed back.
const DROPPED_BACK: &[&str] = &[
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
];

/// The aggregator's top-level handler.
pub struct Aggregator {
    chain: Arc<dyn Handler>,
    routes: Routes,
    clients: Arc<Clients>,
}

impl Aggregator {
    /// Proxies remote groups per `routes`, everything else to `chain`.
    pub fn new(chain: Arc<dyn Handler>, routes: Routes, clients: Arc<Clients>) -> Self {
        Aggregator {
            chain,
            routes,
            clients,
        }
    }

    fn route(&self, path: &str) -> Option<Route> {
        let rest = path.strip_prefix("/openapi/v3").unwrap_or(path);
        let mut parts = rest.strip_prefix("/apis/")?.split('/');
        let (group, version) = (parts.next()?, parts.next()?);
        let routes = self
            .routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        routes
            .get(&(group.to_string(), version.to_string()))
            .cloned()
    }

    async fn proxy(&self, route: Route, req: ApiRequest) -> ApiResponse {
        if !route.available || route.endpoints.is_empty() {
            return Error::unavailable("service unavailable").into();
        }
        let headers = outgoing_headers(&req.headers, &req.user);
        let query = if req.query.is_empty() {
            String::new()
        } else {
            format!("?{}", req.query)
        };
        let mut last_error = String::new();
        for endpoint in &route.endpoints {
            let ca = route
                .apiservice
                .pointer("/spec/caBundle")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let insecure =
                route.apiservice.pointer("/spec/insecureSkipTLSVerify") == Some(&Value::Bool(true));
            let client = match self.clients.client(ca, insecure, &route.service, *endpoint) {
                Ok(c) => c,
                Err(e) => return Error::internal(format!("backend TLS configuration: {e}")).into(),
            };
            let url = format!(
                "https://{}:{}{}{query}",
                route.service.server_name(),
                endpoint.port(),
                request_path::encode(&req.path)
            );
            let method = reqwest::Method::from_bytes(req.method.as_str().as_bytes())
                .unwrap_or(reqwest::Method::GET);
            let sending = client
                .request(method, &url)
                .headers(headers.clone())
                .body(req.body.clone())
                .send();
            let sent = match req.deadline() {
                None => sending.await,
                Some(deadline) => match tokio::time::timeout(deadline, sending).await {
                    Ok(sent) => sent,
                    Err(_) => {
                        tracing::warn!(%endpoint, ?deadline, "the backend did not answer in time");
                        return Error::new(
                            apimachinery::error::Reason::Timeout,
                            "Timeout: request did not complete within requested timeout - context deadline exceeded",
                        )
                        .into();
                    }
                },
            };
            match sent {
                Ok(resp) => return response(resp),
                // Never reached the backend: another endpoint may serve it.
                Err(e) if e.is_connect() => {
                    last_error = generic_server::service_client::describe(&e);
                    tracing::debug!(%endpoint, error = %last_error, "backend refused the connection; trying the next endpoint");
                }
                Err(e) => {
                    tracing::warn!(%endpoint, error = %generic_server::service_client::describe(&e), "proxying to the backend failed");
                    return Error::unavailable("service unavailable").into();
                }
            }
        }
        tracing::warn!(service = %route.service.server_name(), error = %last_error, "no backend endpoint answered");
        Error::unavailable("service unavailable").into()
    }
}

/// The headers a backend gets: the client's (minus hop-by-hop and
/// identity headers) plus the aggregator's `X-Remote-*` identity.
pub fn outgoing_headers(incoming: &HeaderMap, user: &UserInfo) -> reqwest::header::HeaderMap {
    let mut out = reqwest::header::HeaderMap::new();
    for (name, value) in incoming {
        let n = name.as_str();
        if DROPPED.contains(&n) || n.starts_with("x-remote-") || n.starts_with("impersonate-") {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            reqwest::header::HeaderName::from_bytes(n.as_bytes()),
            reqwest::header::HeaderValue::from_bytes(value.as_bytes()),
        ) {
            out.append(name, value);
        }
    }
    let set = |out: &mut reqwest::header::HeaderMap, name: &str, value: &str| {
        if let (Ok(name), Ok(value)) = (
            reqwest::header::HeaderName::from_bytes(name.as_bytes()),
            reqwest::header::HeaderValue::from_str(value),
        ) {
            out.append(name, value);
        }
    };
    set(&mut out, "x-remote-user", &user.name);
    if !user.uid.is_empty() {
        set(&mut out, "x-remote-uid", &user.uid);
    }
    for group in &user.groups {
        set(&mut out, "x-remote-group", group);
    }
    for (key, values) in &user.extra {
        let escaped = path_escape(key);
        for value in values {
            set(&mut out, &format!("x-remote-extra-{escaped}"), value);
        }
    }
    out
}

/// Go's `url.PathEscape`, which kube applies to extra keys.
fn path_escape(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' | b':'
            | b'@' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// A backend's response, streamed.
fn response(resp: reqwest::Response) -> ApiResponse {
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut headers = HeaderMap::new();
    for (name, value) in resp.headers() {
        if DROPPED_BACK.contains(&name.as_str()) {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_str().as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) {
            headers.append(name, value);
        }
    }
    let body = resp
        .bytes_stream()
        .filter_map(|chunk| async move { chunk.ok() })
        .map(Bytes::from);
    ApiResponse {
        status,
        headers,
        body: Body::Stream(body.boxed()),
    }
}

#[async_trait::async_trait]
impl Handler for Aggregator {
    async fn handle(&self, req: ApiRequest) -> ApiResponse {
        match self.route(&req.path) {
            Some(route) => {
                let started = std::time::Instant::now();
                let resp = self.proxy(route, req).await;
                generic_server::metrics::global().hop("proxy", started);
                resp
            }
            None => self.chain.handle(req).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_headers_are_replaced() {
        let mut incoming = HeaderMap::new();
        incoming.insert("x-remote-user", HeaderValue::from_static("mallory"));
        incoming.insert("authorization", HeaderValue::from_static("Bearer x"));
        incoming.insert("accept", HeaderValue::from_static("application/json"));
        let mut extra = std::collections::BTreeMap::new();
        extra.insert("example.org/scope key".to_string(), vec!["a".to_string()]);
        let user = UserInfo {
            name: "alice".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra,
            ..Default::default()
        };
        let out = outgoing_headers(&incoming, &user);
        assert_eq!(
            out.get_all("x-remote-user").iter().collect::<Vec<_>>(),
            vec!["alice"]
        );
        assert_eq!(out.get_all("x-remote-group").iter().count(), 2);
        assert!(out.get("authorization").is_none());
        assert_eq!(out.get("accept").unwrap(), "application/json");
        assert_eq!(
            out.get("x-remote-extra-example.org%2Fscope%20key").unwrap(),
            "a"
        );
    }
}
