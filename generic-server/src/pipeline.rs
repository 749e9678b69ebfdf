//! The HTTPS request pipeline (actix-web on rustls) of every server that
//! serves HTTP: the aggregator's front door and aggregated servers such as
//! metrics-server. The path's check, authentication, request info, audit
//! (what the policy selects, from here to the response's end), impersonation,
//! priority and fairness (at the front door), authorization, the body (read only for an authorized caller), then the
//! handler under panic recovery (or, for `/metrics`, the pipeline's own
//! metrics). The order is written once, here.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use crate::audit::{self, Auditor, Record};
use crate::codec;
use crate::filters::authentication::{Authenticate, strip_identity_headers};
use crate::filters::authorization::Authorizer;
use crate::filters::flowcontrol::{self, PriorityAndFairness};
use crate::filters::impersonation;
use crate::filters::request_path;
use crate::filters::unread::{self, HELD_SLICE, PerUser};
use crate::metrics::Metrics;
use crate::request::{self, ApiRequest, ApiResponse, Body, Handler, UserInfo};
use crate::request_info::RequestInfo;
use crate::trace::{self, TraceContext};

/// The peer's certificate chain (DER), captured when the connection opens.
#[derive(Clone)]
struct PeerCerts(Vec<Vec<u8>>);

/// The pipeline every front-door request goes through.
pub struct Pipeline {
    authenticator: Box<dyn Authenticate>,
    authorizer: Box<dyn Authorizer>,
    handler: Arc<dyn Handler>,
    metrics: &'static Metrics,
    long_running: Arc<PerUser>,
    audit: Option<Arc<Auditor>>,
    flow_control: Option<Arc<PriorityAndFairness>>,
    /// What its trace spans are called.
    name: &'static str,
}

impl Pipeline {
    /// A front door authenticating and authorizing before `handler`.
    pub fn new(
        authenticator: impl Authenticate,
        authorizer: Box<dyn Authorizer>,
        handler: Arc<dyn Handler>,
    ) -> Self {
        Pipeline {
            authenticator: Box::new(authenticator),
            authorizer,
            handler,
            metrics: crate::metrics::global(),
            long_running: PerUser::new(MAX_LONG_RUNNING_PER_USER, usize::MAX),
            audit: None,
            flow_control: None,
            name: "front-door",
        }
    }

    /// The same, with API Priority and Fairness before authorization.
    pub fn with_flow_control(mut self, filter: Arc<PriorityAndFairness>) -> Self {
        self.flow_control = Some(filter);
        self
    }

    /// Audits what `auditor`'s policy selects (kube's `--audit-policy-file`).
    pub fn with_audit(mut self, auditor: Option<Arc<Auditor>>) -> Self {
        self.audit = auditor;
        self
    }

    /// Names the server's trace spans (an aggregated server's, say);
    /// `front-door` otherwise.
    pub fn named(self, name: &'static str) -> Self {
        Pipeline { name, ..self }
    }

    /// Runs the pipeline for one request: the path is checked and the
    /// caller authenticated and authorized before `body` is read. Every
    /// response carries the request's `Audit-Id`.
    #[allow(clippy::too_many_arguments)]
    pub async fn serve(
        &self,
        peer: Option<SocketAddr>,
        peer_certs: Option<&[Vec<u8>]>,
        method: Method,
        raw_path: &str,
        query: &str,
        headers: HeaderMap,
        body: impl Future<Output = Result<Bytes, apimachinery::Error>>,
    ) -> ApiResponse {
        let audit_id = audit::audit_id(&headers);
        let incoming = Incoming {
            audit_id: &audit_id,
            peer,
            peer_certs,
            method,
            raw_path,
            query,
        };
        let mut resp = self.serve_audited(incoming, headers, body).await;
        audit::set_audit_id(&mut resp, &audit_id);
        resp
    }

    /// Authentication, then (when the policy asks for it) the audit record
    /// around the rest.
    async fn serve_audited(
        &self,
        incoming: Incoming<'_>,
        headers: HeaderMap,
        body: impl Future<Output = Result<Bytes, apimachinery::Error>>,
    ) -> ApiResponse {
        let path = match request_path::clean(incoming.raw_path) {
            Ok(path) => path,
            Err(e) => return e.into(),
        };
        if let Err(e) = check_headers(&headers) {
            return e.into();
        }
        let authenticated = self
            .authenticator
            .authenticate(incoming.peer_certs, &headers, &path)
            .await;
        let info = RequestInfo::parse(&incoming.method, &path, incoming.query);
        let begin = |user: Option<&UserInfo>| {
            let auditor = self.audit.as_ref()?;
            auditor.begin(
                &audit::Incoming {
                    audit_id: incoming.audit_id,
                    method: &incoming.method,
                    raw_path: incoming.raw_path,
                    path: &path,
                    query: incoming.query,
                    info: &info,
                    headers: &headers,
                    peer: incoming.peer,
                },
                user,
            )
        };
        let user = match authenticated {
            Ok(user) => user,
            Err(e) => {
                let resp = ApiResponse::from(e);
                return match begin(None) {
                    Some(record) => record.refused(resp),
                    None => resp,
                };
            }
        };
        let mut record = begin(Some(&user));
        if let Some(record) = record.as_mut() {
            record.received();
        }
        let resp = self
            .serve_authenticated(&incoming, &mut record, user, path, info, headers, body)
            .await;
        match record {
            Some(record) => record.complete(resp),
            None => resp,
        }
    }

    /// Impersonation, authorization, the body and the handler.
    #[allow(clippy::too_many_arguments)]
    async fn serve_authenticated(
        &self,
        incoming: &Incoming<'_>,
        record: &mut Option<Record>,
        user: UserInfo,
        path: String,
        info: RequestInfo,
        mut headers: HeaderMap,
        body: impl Future<Output = Result<Bytes, apimachinery::Error>>,
    ) -> ApiResponse {
        let user = match impersonation::impersonate(self.authorizer.as_ref(), &user, &headers).await
        {
            Ok(Some(acting_as)) => {
                if let Some(record) = record.as_mut() {
                    record.impersonated(&acting_as);
                }
                acting_as
            }
            Ok(None) => user,
            Err(e) => return e.into(),
        };
        strip_identity_headers(&mut headers);
        // An aggregated server the request is proxied to names it alike.
        if let Ok(id) = HeaderValue::from_str(incoming.audit_id) {
            headers.insert(audit::AUDIT_ID_HEADER, id);
        }
        let mut req = ApiRequest {
            method: incoming.method.clone(),
            path,
            query: incoming.query.to_string(),
            headers,
            body: Bytes::new(),
            info,
            user,
            audit_id: incoming.audit_id.to_string(),
        };
        // A user who leaves many bytes unread gets no more until they read.
        if unread::stalled(&req.user.name) {
            tracing::info!(user = %req.user.name, "too many bytes of responses unread");
            return apimachinery::Error::too_many_requests().into();
        }
        let flow = match flowcontrol::admit(self.flow_control.as_deref(), &req).await {
            Ok(admitted) => admitted,
            Err(rejected) => return rejected,
        };
        let decision = match record.as_mut() {
            Some(record) => match self
                .authorizer
                .authorize_with_reason(&req.user, &req.info, &req.path)
                .await
            {
                Ok(reason) => {
                    record.authorized(true, &reason);
                    Ok(())
                }
                Err((e, reason)) => {
                    record.authorized(false, &reason);
                    Err(e)
                }
            },
            None => {
                self.authorizer
                    .authorize(&req.user, &req.info, &req.path)
                    .await
            }
        };
        if let Err(e) = decision {
            tracing::debug!(user = %req.user.name, path = %req.path, "forbidden");
            return flow.respond(e.into());
        }
        let slot = if req.is_long_running() && !req.user.in_group(EXEMPT_GROUP) {
            match self.long_running.acquire(&req.user.name, 1) {
                Some(slot) => Some(slot),
                None => {
                    tracing::info!(user = %req.user.name, "too many long-running requests");
                    return flow.respond(apimachinery::Error::too_many_requests().into());
                }
            }
        } else {
            None
        };
        req.body = match body.await {
            Ok(body) => body,
            Err(e) => return flow.respond(e.into()),
        };
        if let Some(record) = record.as_mut() {
            record.request_body(&req.body, &req.headers).await;
        }
        tracing::trace!(audit_id = %req.audit_id, verb = %req.info.verb, path = %req.path, user = %req.user.name, "request");
        let counted = self.metrics.start(&req);
        let (started, trace) = (std::time::Instant::now(), TraceContext::of(&req.headers));
        trace.propagate(&mut req.headers);
        let audit_id = req.audit_id.clone();
        let (user, deadline) = (req.user.name.clone(), req.deadline());
        let (resp, charged) = if req.path == "/metrics" && req.method == Method::GET {
            let metrics = ApiResponse::bytes(
                http::StatusCode::OK,
                Metrics::CONTENT_TYPE,
                self.metrics.render(),
            );
            (metrics, None)
        } else {
            match req.timeout() {
                Err(e) => (e.into(), None),
                Ok(limit) => {
                    // A panic is reported to the audit record, and the
                    // annotations added behind are collected for it.
                    let panicked = record.as_ref().map(Record::panic_slot);
                    let served = request::recover_with(self.handler.as_ref(), req, move |why| {
                        if let Some(slot) = panicked {
                            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                        }
                    });
                    // What the response charges its user while it is gathered.
                    let served = unread::ledger(&user, audit::collect(served));
                    let served = trace::scope(trace.clone(), served);
                    let outcome = match limit {
                        None => Some(served.await),
                        // A request past its deadline is dropped, which cancels it
                        // at every hop behind, and answered with kube's 504.
                        Some(limit) => tokio::time::timeout(limit, served).await.ok(),
                    };
                    match outcome {
                        Some(((resp, annotations), charged)) => {
                            if let Some(record) = record.as_mut() {
                                record.annotate(annotations);
                            }
                            (resp, charged)
                        }
                        None => (request::timed_out().into(), None),
                    }
                }
            }
        };
        trace.log(self.name, started, resp.status.as_u16(), &audit_id);
        counted.done(resp.status.as_u16());
        match (slot, resp.body) {
            // The slot is held for as long as the stream is; the seats are
            // given back once it has started, as kube gives a watch's back.
            (Some(slot), Body::Stream(stream)) => flow.respond(ApiResponse {
                body: Body::Stream(Box::pin(stream.map(move |chunk| {
                    let _held = &slot;
                    chunk
                }))),
                ..resp
            }),
            (_, Body::Stream(stream)) => flow.respond(ApiResponse {
                body: Body::Stream(stream),
                ..resp
            }),
            (_, Body::Full(bytes)) => {
                let deadline = started + deadline.unwrap_or(crate::request::REQUEST_TIMEOUT);
                let head = ApiResponse {
                    body: Body::Full(Bytes::new()),
                    ..resp
                };
                Self::whole(head, vec![bytes], flow, charged, &user, deadline)
            }
            (_, Body::Pieces(pieces)) => {
                let deadline = started + deadline.unwrap_or(crate::request::REQUEST_TIMEOUT);
                let head = ApiResponse {
                    body: Body::Full(Bytes::new()),
                    ..resp
                };
                Self::whole(head, pieces, flow, charged, &user, deadline)
            }
        }
    }

    /// A whole body (`head` carries its status and headers): a small one is
    /// answered as it is; a large one holds
    /// its seats until it is written, as kube's handler holds them while it
    /// writes, and counts against what its user may leave unread.
    fn whole(
        head: ApiResponse,
        pieces: Vec<Bytes>,
        flow: flowcontrol::Admission,
        charged: Option<unread::Share>,
        user: &str,
        deadline: std::time::Instant,
    ) -> ApiResponse {
        let len: usize = pieces.iter().map(Bytes::len).sum();
        if len <= HELD_SLICE {
            return flow.respond(ApiResponse {
                body: Body::Full(Body::joined(&pieces)),
                ..head
            });
        }
        let Some(share) = unread::cover(charged, user, len) else {
            tracing::info!(%user, bytes = len, "too many bytes of responses unread");
            return flow.respond(apimachinery::Error::too_many_requests().into());
        };
        let mut resp = flow.name(head);
        resp.headers
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from(len));
        resp.body = Body::Stream(unread::held_body(pieces, deadline, (flow, share)));
        resp
    }
}

/// What the front door knows of a request before reading it.
struct Incoming<'a> {
    audit_id: &'a str,
    peer: Option<SocketAddr>,
    peer_certs: Option<&'a [Vec<u8>]>,
    method: Method,
    raw_path: &'a str,
    query: &'a str,
}

/// Most long-running requests (watches, logs, exec) one user may have open
/// at once; the next gets 429. `system:masters` is exempt, as kube's
/// priority and fairness exempts it.
pub const MAX_LONG_RUNNING_PER_USER: usize = 250;
/// The group no per-user limit applies to.
const EXEMPT_GROUP: &str = "system:masters";

/// How long the kernel waits for a client to acknowledge what was sent to
/// it before it drops the connection (`TCP_USER_TIMEOUT`): a client that
/// stops reading gives back what its response holds.
const UNACKNOWLEDGED_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest total size of a request's headers (Go's `http.DefaultMaxHeaderBytes`, as kube-apiserver).
pub const MAX_HEADER_BYTES: usize = 1024 * 1024;
/// How long a client may take to send its request body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a client may take to send its request's headers (kube's `ReadHeaderTimeout`).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(32);

/// 413 when the headers are larger than [`MAX_HEADER_BYTES`].
fn check_headers(headers: &HeaderMap) -> Result<(), apimachinery::Error> {
    let size: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if size > MAX_HEADER_BYTES {
        return Err(apimachinery::Error::new(
            apimachinery::error::Reason::RequestEntityTooLarge,
            format!("request headers are {size} bytes; the limit is {MAX_HEADER_BYTES}"),
        ));
    }
    Ok(())
}

/// Serves the front door on `addr` over TLS until the process stops. Asked
/// to stop, it goes on serving for `delay` while `/readyz` fails (kube's
/// `--shutdown-delay-duration`: load balancers see it leave before it stops
/// accepting), then lets requests in flight finish within [`crate::shutdown::GRACE`].
pub async fn serve_https(
    addr: SocketAddr,
    tls: rustls::ServerConfig,
    door: Arc<Pipeline>,
    workers: usize,
    delay: std::time::Duration,
) -> std::io::Result<()> {
    crate::shutdown::listen();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(door.clone()))
            .default_service(web::to(entry))
    })
    .on_connect(|conn, ext| {
        type Tls = actix_tls::accept::rustls_0_23::TlsStream<actix_web::rt::net::TcpStream>;
        if let Some(tls) = conn.downcast_ref::<Tls>() {
            // Responses are written whole: never hold them back for an ACK.
            let socket = &tls.get_ref().0;
            let _ = socket.set_nodelay(true);
            let millis = UNACKNOWLEDGED_TIMEOUT.as_millis() as u32;
            let _ = nix::sys::socket::setsockopt(
                socket,
                nix::sys::socket::sockopt::TcpUserTimeout,
                &millis,
            );
            if let Some(certs) = tls.get_ref().1.peer_certificates() {
                ext.insert(PeerCerts(certs.iter().map(|c| c.to_vec()).collect()));
            }
        }
    })
    .workers(workers)
    .disable_signals()
    .shutdown_timeout(crate::shutdown::GRACE.as_secs())
    .keep_alive(std::time::Duration::from_secs(75))
    .client_request_timeout(HEADER_TIMEOUT)
    .bind_rustls_0_23(addr, tls)?
    .run();
    let handle = server.handle();
    actix_rt::spawn(async move {
        crate::shutdown::draining().await;
        if !delay.is_zero() {
            tracing::info!(
                ?delay,
                "not ready; serving on until load balancers have moved on"
            );
            tokio::time::sleep(delay).await;
        }
        handle.stop(true).await;
    });
    server.await
}

async fn entry(
    req: HttpRequest,
    payload: web::Payload,
    door: web::Data<Arc<Pipeline>>,
) -> HttpResponse {
    let mut headers = HeaderMap::new();
    for (name, value) in req.headers() {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_str().as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) {
            headers.append(n, v);
        }
    }
    let method = Method::from_bytes(req.method().as_str().as_bytes()).unwrap_or(Method::GET);
    let certs = req.conn_data::<PeerCerts>().map(|c| c.0.clone());
    let peer = req.peer_addr();
    let upgrade = req.headers().contains_key(actix_web::http::header::UPGRADE);
    let resp = door
        .serve(
            peer,
            certs.as_deref(),
            method,
            req.path(),
            req.query_string(),
            headers,
            async move {
                // An upgrade (exec, attach, port-forward over SPDY or
                // WebSocket) has no body: what follows is the stream it asks for.
                if upgrade {
                    Ok(Bytes::new())
                } else {
                    read_body(payload).await
                }
            },
        )
        .await;
    into_http(resp)
}

/// Reads a body up to the API's limit (413 past it) within [`BODY_TIMEOUT`]
/// (a 504 Status past it: a slow sender is cut off).
async fn read_body(mut payload: web::Payload) -> Result<Bytes, apimachinery::Error> {
    let read = async {
        let mut body = BytesMut::new();
        while let Some(chunk) = payload.next().await {
            let chunk = chunk
                .map_err(|e| apimachinery::Error::bad_request(format!("reading body: {e}")))?;
            if body.len() + chunk.len() > codec::MAX_BODY_BYTES {
                return Err(codec::too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    };
    tokio::time::timeout(BODY_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| {
            Err(apimachinery::Error::new(
                apimachinery::error::Reason::Timeout,
                format!(
                    "the request body was not received within {}s",
                    BODY_TIMEOUT.as_secs()
                ),
            ))
        })
}

/// The actix response of an [`ApiResponse`].
pub(crate) fn into_http(resp: ApiResponse) -> HttpResponse {
    let status = actix_web::http::StatusCode::from_u16(resp.status.as_u16())
        .unwrap_or(actix_web::http::StatusCode::BAD_GATEWAY);
    let mut builder = HttpResponse::build(status);
    for (name, value) in &resp.headers {
        builder.append_header((name.as_str(), value.as_bytes()));
    }
    match resp.body {
        Body::Full(bytes) => builder.body(bytes),
        Body::Pieces(pieces) => builder.body(Body::joined(&pieces)),
        // A stopping front door ends its watches cleanly (the terminating
        // chunk, END_STREAM), and clients watch again from their last event.
        Body::Stream(stream) => builder.streaming(
            request::coalesce(stream)
                .take_until(crate::shutdown::draining())
                .map(Ok::<_, std::convert::Infallible>),
        ),
    }
}
