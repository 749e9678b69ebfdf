//! A request as it travels the chain, its response, and the [`Handler`] every
//! server (and every delegate) implements.

use std::collections::BTreeMap;
use std::pin::Pin;

use bytes::Bytes;
use futures::Stream;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde::Serialize;

use crate::request_info::RequestInfo;
use apimachinery::error::Error;

/// The authenticated user a request acts as.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name, e.g. `kubernetes-admin`.
    pub name: String,
    /// A unique id, if the authenticator gives one.
    pub uid: String,
    /// Groups, e.g. `system:masters`, `system:authenticated`.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The anonymous user.
    pub fn anonymous() -> Self {
        UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..Default::default()
        }
    }

    /// Whether the user is in a group.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// An API request: HTTP-shaped, plus what the front door worked out.
#[derive(Debug, Clone)]
pub struct ApiRequest {
    /// The HTTP method.
    pub method: Method,
    /// The path, without query.
    pub path: String,
    /// The raw query string, without `?`.
    pub query: String,
    /// Request headers that matter to the API (Accept, Content-Type, ...).
    pub headers: HeaderMap,
    /// The request body.
    pub body: Bytes,
    /// Parsed request attributes.
    pub info: RequestInfo,
    /// The authenticated user.
    pub user: UserInfo,
    /// An id for audit and tracing.
    pub audit_id: String,
}

impl ApiRequest {
    /// Builds a request, parsing its attributes from method, path and query.
    pub fn new(
        method: Method,
        path: &str,
        query: &str,
        headers: HeaderMap,
        body: Bytes,
        user: UserInfo,
    ) -> Self {
        let info = RequestInfo::parse(&method, path, query);
        ApiRequest {
            method,
            path: path.to_string(),
            query: query.to_string(),
            headers,
            body,
            info,
            user,
            audit_id: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// The decoded query parameters, in order.
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        form_urlencoded::parse(self.query.as_bytes())
            .into_owned()
            .collect()
    }

    /// The first value of a query parameter.
    pub fn param(&self, name: &str) -> Option<String> {
        form_urlencoded::parse(self.query.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }

    /// A header as a string.
    pub fn header(&self, name: impl header::AsHeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A boxed stream of body chunks.
pub type BodyStream = Pin<Box<dyn Stream<Item = Bytes> + Send + 'static>>;

/// The most bytes `coalesce` joins into one chunk.
pub(crate) const COALESCE_BYTES: usize = 256 * 1024;

/// Joins the chunks a stream already has ready into one (up to
/// `COALESCE_BYTES`), so a backlog of watch events leaves as one frame and
/// one write rather than one per event; a lone chunk passes as it is.
pub fn coalesce(mut inner: BodyStream) -> BodyStream {
    use std::task::Poll;
    let mut held: Option<Bytes> = None;
    let mut ended = false;
    Box::pin(futures::stream::poll_fn(move |cx| {
        let first = match held.take() {
            Some(first) => first,
            None if ended => return Poll::Ready(None),
            None => match inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(first)) => first,
                Poll::Ready(None) => {
                    ended = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            },
        };
        let mut joined: Option<bytes::BytesMut> = None;
        let mut len = first.len();
        while !ended && len < COALESCE_BYTES {
            match inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(next)) if len + next.len() > COALESCE_BYTES => {
                    held = Some(next);
                    break;
                }
                Poll::Ready(Some(next)) => {
                    len += next.len();
                    joined
                        .get_or_insert_with(|| {
                            let mut buf =
                                bytes::BytesMut::with_capacity(COALESCE_BYTES.min(len * 4));
                            buf.extend_from_slice(&first);
                            buf
                        })
                        .extend_from_slice(&next);
                }
                Poll::Ready(None) => ended = true,
                Poll::Pending => break,
            }
        }
        Poll::Ready(Some(joined.map_or(first, bytes::BytesMut::freeze)))
    }))
}

/// A response body: whole, whole in pieces, or streamed (watch).
pub enum Body {
    /// The whole body.
    Full(Bytes),
    /// The whole body as pieces written in order, never joined unless a
    /// writer needs them joined: a LIST's items share their bytes with the
    /// watch cache, so a response waiting for its reader holds references,
    /// not a copy.
    Pieces(Vec<Bytes>),
    /// Chunks as they are produced; the stream ends the response.
    Stream(BodyStream),
}

impl Body {
    /// The pieces of a whole body joined into one (a stream is not whole).
    pub fn joined(pieces: &[Bytes]) -> Bytes {
        match pieces {
            [one] => one.clone(),
            _ => pieces.concat().into(),
        }
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Full(b) => write!(f, "Body::Full({} bytes)", b.len()),
            Body::Pieces(p) => write!(f, "Body::Pieces({} pieces)", p.len()),
            Body::Stream(_) => f.write_str("Body::Stream"),
        }
    }
}

/// An API response.
#[derive(Debug)]
pub struct ApiResponse {
    /// The HTTP status.
    pub status: StatusCode,
    /// Response headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Body,
}

impl ApiResponse {
    /// A response with a whole body and a content type.
    pub fn bytes(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Self {
        let mut headers = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(content_type) {
            headers.insert(header::CONTENT_TYPE, v);
        }
        ApiResponse {
            status,
            headers,
            body: Body::Full(body.into()),
        }
    }

    /// A JSON response, ended by a newline as kube's encoder ends it.
    pub fn json(status: StatusCode, value: &impl Serialize) -> Self {
        match json_line(value) {
            Ok(body) => Self::bytes(status, crate::codec::JSON, body),
            Err(e) => Self::error(&Error::internal(e)),
        }
    }

    /// A Status response for an error (JSON and a newline, as kube writes it).
    pub fn error(err: &Error) -> Self {
        let status = err.to_status();
        let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = json_line(&status).unwrap_or_default();
        let mut resp = Self::bytes(code, crate::codec::JSON, body);
        if let Some(secs) = status.details.as_ref().and_then(|d| d.retry_after_seconds) {
            resp.headers
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        for warning in err.warnings() {
            resp.warn(warning);
        }
        resp
    }

    /// A streamed response.
    pub fn stream(status: StatusCode, content_type: &str, body: BodyStream) -> Self {
        let mut resp = Self::bytes(status, content_type, Bytes::new());
        resp.body = Body::Stream(body);
        resp
    }

    /// Adds a `Warning: 299 - "..."` header.
    pub fn warn(&mut self, text: &str) {
        let value = format!("299 - {}", serde_json::Value::String(text.to_string()));
        if let Ok(v) = HeaderValue::from_str(&value) {
            self.headers.append(header::WARNING, v);
        }
    }

    /// A response whose whole body is `pieces`, written in order.
    pub fn pieces(status: StatusCode, content_type: &str, pieces: Vec<Bytes>) -> Self {
        let mut resp = ApiResponse::bytes(status, content_type, Bytes::new());
        resp.body = Body::Pieces(pieces);
        resp
    }

    /// Collects the whole body (streams are drained).
    pub async fn into_bytes(self) -> Bytes {
        match self.body {
            Body::Full(b) => b,
            Body::Pieces(p) => Body::joined(&p),
            Body::Stream(mut s) => {
                use futures::StreamExt;
                let mut all = Vec::new();
                while let Some(chunk) = s.next().await {
                    all.extend_from_slice(&chunk);
                }
                all.into()
            }
        }
    }
}

/// `value` as JSON followed by a newline (Go's `json.Encoder.Encode`).
fn json_line(value: &impl Serialize) -> serde_json::Result<Vec<u8>> {
    let mut body = serde_json::to_vec(value)?;
    body.push(b'\n');
    Ok(body)
}

impl From<Error> for ApiResponse {
    fn from(err: Error) -> Self {
        ApiResponse::error(&err)
    }
}

/// Anything that serves API requests: a server, or a link to the next one.
#[async_trait::async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Serves one request. Errors are responses too (a Status).
    async fn handle(&self, req: ApiRequest) -> ApiResponse;
}

/// The longest a request that is not long-running may take (kube's
/// `--request-timeout`); a client asks for less with `?timeout=`.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Subresources that stream for as long as the client wants (kube's long-running requests).
const LONG_RUNNING_SUBRESOURCES: &[&str] = &["log", "exec", "attach", "portforward", "proxy"];

impl ApiRequest {
    /// Whether the request streams for as long as the client wants: a
    /// watch, logs, exec, attach, port-forward or proxy.
    pub fn is_long_running(&self) -> bool {
        long_running(&self.info)
    }

    /// How long the request may take: `None` for a long-running one, else
    /// its `timeout` parameter (a Go duration, as kubectl's
    /// `--request-timeout` sends it) within [`REQUEST_TIMEOUT`].
    pub fn deadline(&self) -> Option<std::time::Duration> {
        self.timeout().ok().flatten()
    }

    /// [`ApiRequest::deadline`], refusing a `timeout` that is not a Go
    /// duration as kube does (400); zero or less means the default.
    pub fn timeout(&self) -> Result<Option<std::time::Duration>, apimachinery::Error> {
        if self.is_long_running() {
            return Ok(None);
        }
        let Some(text) = self.param("timeout") else {
            return Ok(Some(REQUEST_TIMEOUT));
        };
        if let Some(asked) = go_duration(&text) {
            return Ok(Some(asked.min(REQUEST_TIMEOUT)));
        }
        let unsigned = text.strip_prefix(['-', '+']).unwrap_or(&text);
        if unsigned == "0" || go_seconds(unsigned).is_some() {
            return Ok(Some(REQUEST_TIMEOUT));
        }
        Err(apimachinery::Error::bad_request(format!(
            "invalid timeout specified in the request URL - time: invalid duration {text:?}"
        )))
    }
}

/// kube's 504 for a request that outlived its deadline.
pub fn timed_out() -> apimachinery::Error {
    apimachinery::Error::new(
        apimachinery::error::Reason::Timeout,
        "Timeout: request did not complete within requested timeout - context deadline exceeded",
    )
}

/// Whether a request with these attributes streams for as long as the
/// client wants: a watch, logs, exec, attach, port-forward or proxy.
pub fn long_running(info: &RequestInfo) -> bool {
    info.verb == "watch" || LONG_RUNNING_SUBRESOURCES.contains(&info.subresource.as_str())
}

/// Parses a Go duration (`32s`, `1m30s`, `500ms`, `1.5h`); `None` if it is not one or is not positive.
pub fn go_duration(text: &str) -> Option<std::time::Duration> {
    let total = go_seconds(text)?;
    (total > 0.0).then(|| std::time::Duration::from_secs_f64(total.min(1e9)))
}

/// The seconds of an unsigned Go duration, zero included.
fn go_seconds(text: &str) -> Option<f64> {
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += number * seconds;
    }
    total.is_finite().then_some(total)
}

/// kube-apiserver's words for a request that made it panic.
pub const PANIC_MESSAGE: &str =
    "This request caused apiserver to panic. Look in the logs for details.";

/// Serves `req` with `handler` under panic recovery, as kube's
/// `WithPanicRecovery`: a panic while answering, or while streaming the
/// answer, fails this request alone (a 500 Status, or the end of its
/// stream), logged with its audit id; the process and every other request
/// carry on.
pub async fn recover(handler: &dyn Handler, req: ApiRequest) -> ApiResponse {
    recover_with(handler, req, |_| {}).await
}

/// [`recover`], telling `on_panic` why the handler panicked (the audit
/// log's Panic stage).
pub async fn recover_with(
    handler: &dyn Handler,
    req: ApiRequest,
    on_panic: impl FnOnce(String) + Send + 'static,
) -> ApiResponse {
    use futures::{FutureExt as _, StreamExt as _};
    use std::panic::AssertUnwindSafe;
    let (audit_id, method, path) = (req.audit_id.clone(), req.method.clone(), req.path.clone());
    let logged = move |panic: Box<dyn std::any::Any + Send>| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(%audit_id, %method, %path, panic = %why, "apiserver panic'd");
        on_panic(why);
    };
    let mut resp = match AssertUnwindSafe(handler.handle(req)).catch_unwind().await {
        Ok(resp) => resp,
        Err(panic) => {
            logged(panic);
            return Error::new(apimachinery::error::Reason::InternalError, PANIC_MESSAGE).into();
        }
    };
    if let Body::Stream(stream) = resp.body {
        let guarded = AssertUnwindSafe(stream)
            .catch_unwind()
            .scan(Some(logged), |logged, item| {
                futures::future::ready(match item {
                    Ok(chunk) => Some(chunk),
                    Err(panic) => {
                        if let Some(log) = logged.take() {
                            log(panic);
                        }
                        None
                    }
                })
            });
        resp.body = Body::Stream(Box::pin(guarded));
    }
    resp
}

/// The end of the chain: every request gets a 404 Status.
pub struct NotFoundHandler;

#[async_trait::async_trait]
impl Handler for NotFoundHandler {
    async fn handle(&self, _req: ApiRequest) -> ApiResponse {
        Error::path_not_found().into()
    }
}

/// The longest `timeoutSeconds` honoured: a year (larger values are cut
/// down to it, so no deadline computed from one can overflow).
pub const MAX_TIMEOUT_SECONDS: u64 = 365 * 24 * 3600;

/// A `timeoutSeconds` parameter, as kube reads it: an int64 (400 if it is
/// not one); zero or less means none was given.
pub fn timeout_seconds(value: &str) -> apimachinery::Result<Option<std::time::Duration>> {
    let seconds = value.parse::<i64>().map_err(|_| {
        Error::bad_request(format!(
            "invalid value for timeoutSeconds: {value:?} is not a 64-bit integer"
        ))
    })?;
    Ok(u64::try_from(seconds)
        .ok()
        .filter(|s| *s > 0)
        .map(|s| std::time::Duration::from_secs(s.min(MAX_TIMEOUT_SECONDS))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    /// Panics on `/boom`, and in the middle of its stream on `/boom-later`.
    struct Panicky;

    #[async_trait::async_trait]
    impl Handler for Panicky {
        async fn handle(&self, req: ApiRequest) -> ApiResponse {
            match req.path.as_str() {
                "/boom" => panic!("boom"),
                "/boom-later" => {
                    let chunks = futures::stream::iter([1, 2, 3]).map(|i| {
                        assert!(i < 2, "boom at chunk {i}");
                        Bytes::from(format!("{i}\n"))
                    });
                    ApiResponse {
                        status: StatusCode::OK,
                        headers: HeaderMap::new(),
                        body: Body::Stream(Box::pin(chunks)),
                    }
                }
                _ => Error::path_not_found().into(),
            }
        }
    }

    fn get(path: &str) -> ApiRequest {
        ApiRequest::new(
            Method::GET,
            path,
            "",
            HeaderMap::new(),
            Bytes::new(),
            UserInfo::default(),
        )
    }

    #[test]
    fn go_durations_and_deadlines() {
        use std::time::Duration;
        assert_eq!(go_duration("32s"), Some(Duration::from_secs(32)));
        assert_eq!(go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(go_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(go_duration("1.5h"), Some(Duration::from_secs(5400)));
        for bad in ["", "5", "s", "-1s", "0s", "1x", "9".repeat(400).as_str()] {
            assert_eq!(go_duration(bad), None, "{bad}");
        }
        let mut req = get("/apis/g/v1/things");
        assert_eq!(req.deadline(), Some(REQUEST_TIMEOUT));
        req.query = "timeout=3s".into();
        assert_eq!(req.deadline(), Some(Duration::from_secs(3)));
        req.query = "timeout=3h".into();
        assert_eq!(req.deadline(), Some(REQUEST_TIMEOUT));
        for default in ["0", "0s", "-1s", "-2h"] {
            req.query = format!("timeout={default}");
            assert_eq!(req.timeout().ok(), Some(Some(REQUEST_TIMEOUT)), "{default}");
        }
        req.query = "timeout=soon".into();
        let refused = req.timeout().expect_err("not a duration");
        assert_eq!(
            refused.to_status().message,
            "invalid timeout specified in the request URL - time: invalid duration \"soon\""
        );
        req.info.verb = "watch".into();
        assert_eq!(req.deadline(), None);
    }

    #[tokio::test]
    async fn a_panic_fails_only_its_own_request() {
        let resp = recover(&Panicky, get("/boom")).await;
        assert_eq!(resp.status, StatusCode::INTERNAL_SERVER_ERROR);
        let Body::Full(body) = resp.body else {
            panic!("a whole Status")
        };
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "InternalError");
        assert_eq!(status["message"], PANIC_MESSAGE);
        // The stream ends where it panicked; what came before is delivered.
        let resp = recover(&Panicky, get("/boom-later")).await;
        let Body::Stream(stream) = resp.body else {
            panic!("a stream")
        };
        let chunks: Vec<Bytes> = stream.collect().await;
        assert_eq!(chunks, vec![Bytes::from("1\n")]);
        // And the handler goes on serving.
        assert_eq!(
            recover(&Panicky, get("/x")).await.status,
            StatusCode::NOT_FOUND
        );
    }

    #[tokio::test]
    async fn coalesce_joins_what_is_ready_and_nothing_more() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
        let mut body = coalesce(tokio_stream::wrappers::UnboundedReceiverStream::new(rx).boxed());
        tx.send(Bytes::from_static(b"a\n")).unwrap();
        assert_eq!(body.next().await.unwrap(), "a\n");
        for line in ["b\n", "c\n", "d\n"] {
            tx.send(Bytes::from(line)).unwrap();
        }
        assert_eq!(body.next().await.unwrap(), "b\nc\nd\n");
        let big = Bytes::from(vec![b'x'; COALESCE_BYTES]);
        tx.send(Bytes::from_static(b"e\n")).unwrap();
        tx.send(big.clone()).unwrap();
        drop(tx);
        // Over the limit: the big chunk waits for the next turn, then the end.
        assert_eq!(body.next().await.unwrap(), "e\n");
        assert_eq!(body.next().await.unwrap().len(), big.len());
        assert!(body.next().await.is_none());
        assert!(body.next().await.is_none());
    }
}
