//! Proxying a connect request to an address behind the API, as kube's
//! `pods/proxy` and `services/proxy` do: the request's path after
//! `/proxy`, its query, method, headers and body go to the address; the
//! answer's status, headers and body come back as they are.
//!
//! kube dials pod and endpoint addresses by IP and does not verify their
//! certificates (`https:` ids), and only addresses that are global unicast:
//! a user never reaches the server's own loopback through a proxy.
//!
//! ```
//! use generic_server::upstream::ProxyId;
//! let id = ProxyId::parse("https:web:8443").unwrap();
//! assert_eq!((id.scheme.as_str(), id.name.as_str(), id.port.as_str()), ("https", "web", "8443"));
//! assert!(ProxyId::parse("ftp:web:21").is_none());
//! ```

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::request::{ApiRequest, ApiResponse, Body};
use apimachinery::error::{Error, Reason, Result};

/// How long a dial to an address may take (kube's proxy dialer: 30 s).
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Headers that belong to one connection, never forwarded (RFC 9110 7.6.1),
/// with the ones the next hop computes itself.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

/// A proxy subresource's name, `[scheme:]name[:port]` (kube's `SplitSchemeNamePort`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyId {
    /// `http`, `https` or empty (http).
    pub scheme: String,
    /// The pod's or service's name.
    pub name: String,
    /// A port number or name, or empty.
    pub port: String,
}

impl ProxyId {
    /// Reads an id; `None` where kube answers `invalid ... request`.
    pub fn parse(id: &str) -> Option<ProxyId> {
        let parts: Vec<&str> = id.split(':').collect();
        let (scheme, name, port) = match parts[..] {
            [name] => ("", name, ""),
            [name, port] => ("", name, port),
            [scheme, name, port] => (scheme, name, port),
            _ => return None,
        };
        (!name.is_empty() && matches!(scheme, "" | "http" | "https")).then(|| ProxyId {
            scheme: scheme.to_string(),
            name: name.to_string(),
            port: port.to_string(),
        })
    }
}

/// An address a proxied request may go to: global unicast only (kube's
/// `IsGlobalUnicast` check on a pod's IP), else kube's 400.
pub fn proxyable(ip: &str) -> Result<IpAddr> {
    let refused = || Error::bad_request("address not allowed");
    let ip: IpAddr = ip.parse().map_err(|_| refused())?;
    let global_unicast = match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_unspecified())
        }
        IpAddr::V6(v6) => {
            !(v6.is_loopback()
                || v6.is_multicast()
                || v6.is_unspecified()
                || v6.is_unicast_link_local())
        }
    };
    global_unicast.then_some(ip).ok_or_else(refused)
}

/// Sends connect requests on to addresses and streams their answers back.
#[derive(Clone)]
pub struct Upstream {
    client: reqwest::Client,
}

impl Upstream {
    /// A client for plain and TLS addresses (certificates not verified, as kube's proxy transport).
    pub fn new() -> crate::Result<Upstream> {
        crate::tls::install_crypto_provider();
        let mut tls = rustls::ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(crate::service_client::AcceptAny::default()))
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .connect_timeout(DIAL_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|e| crate::Error::Tls(format!("proxy client: {e}")))?;
        Ok(Upstream { client })
    }

    /// Proxies `req` (a `<name>/proxy[/path]` request) to `scheme://ip:port`
    /// with the path after `/proxy`. A request for the bare `/proxy` is
    /// redirected to `/proxy/`, as kube does.
    pub async fn forward(
        &self,
        req: &ApiRequest,
        scheme: &str,
        ip: IpAddr,
        port: Option<u16>,
    ) -> Result<ApiResponse> {
        let Some(rest) = path_after_proxy(&req.path, &req.info.name) else {
            return Err(Error::path_not_found());
        };
        if rest.is_empty() {
            return Ok(redirect_to_slash(req));
        }
        let scheme = if scheme.is_empty() { "http" } else { scheme };
        let host = match (ip, port) {
            (ip, Some(port)) => SocketAddr::new(ip, port).to_string(),
            (IpAddr::V6(v6), None) => format!("[{v6}]"),
            (IpAddr::V4(v4), None) => v4.to_string(),
        };
        let mut url = format!("{scheme}://{host}{rest}");
        if !req.query.is_empty() {
            url.push('?');
            url.push_str(&req.query);
        }
        let mut headers = forwarded(&req.headers);
        headers.remove(header::ACCEPT_ENCODING);
        let answer = self
            .client
            .request(req.method.clone(), &url)
            .headers(headers)
            .body(req.body.clone())
            .send()
            .await
            .map_err(|e| unreachable_address(&host, &e))?;
        let status = answer.status();
        let headers = forwarded(answer.headers());
        let body = answer
            .bytes_stream()
            .take_while(|piece| std::future::ready(piece.is_ok()))
            .filter_map(|piece| std::future::ready(piece.ok()));
        Ok(ApiResponse {
            status,
            headers,
            body: Body::Stream(Box::pin(body)),
        })
    }
}

/// The headers of one hop that go on to the next.
fn forwarded(headers: &HeaderMap) -> HeaderMap {
    let named_by_connection: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let name_str = name.as_str();
        if !HOP_BY_HOP.contains(&name_str) && !named_by_connection.iter().any(|n| n == name_str) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// kube's answer when the address does not answer: its dialer's error, 500
/// (`dial tcp 10.0.0.7:8080: connect: connection refused`).
fn unreachable_address(host: &str, error: &reqwest::Error) -> Error {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut io_kind = None;
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            io_kind = Some(io.kind());
        }
        source = e.source();
    }
    let cause = match io_kind {
        Some(std::io::ErrorKind::ConnectionRefused) => "connect: connection refused".to_string(),
        Some(std::io::ErrorKind::TimedOut) => "i/o timeout".to_string(),
        _ if error.is_timeout() => "i/o timeout".to_string(),
        _ => crate::service_client::describe(error),
    };
    Error::new(Reason::InternalError, format!("dial tcp {host}: {cause}"))
}

/// The 301 kube answers for `/proxy` without a slash.
fn redirect_to_slash(req: &ApiRequest) -> ApiResponse {
    let mut location = format!("{}/", req.path);
    if !req.query.is_empty() {
        location.push('?');
        location.push_str(&req.query);
    }
    let mut resp = ApiResponse::bytes(
        StatusCode::MOVED_PERMANENTLY,
        "text/html; charset=utf-8",
        "",
    );
    if let Ok(value) = HeaderValue::from_str(&location) {
        resp.headers.insert(header::LOCATION, value);
    }
    resp
}

/// The path after `<name>/proxy` ("" for none, kept with its slashes).
fn path_after_proxy<'a>(path: &'a str, name: &str) -> Option<&'a str> {
    let marker = format!("/{name}/proxy");
    let at = path.find(&marker)? + marker.len();
    let rest = &path[at..];
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_as_kube_splits_them() {
        let id = |s: &str| ProxyId::parse(s).map(|i| (i.scheme, i.name, i.port));
        let own = |a: &str, b: &str, c: &str| Some((a.to_string(), b.to_string(), c.to_string()));
        assert_eq!(id("web"), own("", "web", ""));
        assert_eq!(id("web:80"), own("", "web", "80"));
        assert_eq!(id("web:http"), own("", "web", "http"));
        assert_eq!(id("https:web:443"), own("https", "web", "443"));
        assert_eq!(id("https:web:"), own("https", "web", ""));
        assert_eq!(id("gopher:web:70"), None);
        assert_eq!(id(":80"), None);
        assert_eq!(id("a:b:c:d"), None);
    }

    #[test]
    fn only_global_unicast_addresses_are_proxied() {
        for refused in [
            "127.0.0.1",
            "::1",
            "169.254.1.1",
            "fe80::1",
            "224.0.0.1",
            "0.0.0.0",
            "::",
            "255.255.255.255",
            "web",
            "",
        ] {
            let err = proxyable(refused).expect_err(refused);
            assert_eq!(
                (err.code(), err.to_status().message),
                (400, "address not allowed".to_string()),
                "{refused}"
            );
        }
        for allowed in [
            "10.1.2.3",
            "172.17.0.2",
            "192.168.1.5",
            "8.8.8.8",
            "2001:db8::1",
        ] {
            assert!(proxyable(allowed).is_ok(), "{allowed}");
        }
    }

    #[test]
    fn the_path_after_proxy_keeps_its_slashes() {
        let p = "/api/v1/namespaces/ns/services/https:web:443/proxy/a/b/";
        assert_eq!(path_after_proxy(p, "https:web:443"), Some("/a/b/"));
        assert_eq!(
            path_after_proxy("/api/v1/namespaces/ns/pods/web/proxy", "web"),
            Some("")
        );
        assert_eq!(
            path_after_proxy("/api/v1/namespaces/ns/pods/web/proxy/", "web"),
            Some("/")
        );
        assert_eq!(
            path_after_proxy("/api/v1/namespaces/ns/pods/web/proxyx", "web"),
            None
        );
    }

    #[test]
    fn hop_by_hop_headers_stay_behind() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("close, x-private"));
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("x-kept", HeaderValue::from_static("yes"));
        h.insert("content-type", HeaderValue::from_static("text/plain"));
        let out = forwarded(&h);
        let names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, vec!["x-kept", "content-type"]);
    }
}
