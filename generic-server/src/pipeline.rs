//! The HTTPS request pipeline (actix-web on rustls) of every server that
//! serves HTTP: the aggregator's front door and aggregated servers such as
//! metrics-server. Its filters are declared once, in order, in [`CHAIN`]
//! (request info, authentication, audit, impersonation, unread bytes,
//! priority and fairness, authorization, long-running limits, the body);
//! the handler, under panic recovery, is the chain's end.

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
use crate::protobuf::Negotiated;
use crate::request::{self, ApiRequest, ApiResponse, Body, Handler, UserInfo};
use crate::request_info::RequestInfo;
use crate::tls::ClientCert;
use crate::trace::{self, TraceContext};

/// One filter of the chain. A request passes each in [`CHAIN`]'s order or
/// is answered by one; its answer then goes back out through the filters
/// it passed, innermost first (see [`Pipeline::leave`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// The path is cleaned (400 on `..` and the like), the headers' size
    /// checked (413) and the request's attributes parsed from them.
    RequestInfo,
    /// Who is asking: a client certificate, a bearer token or the front
    /// proxy's headers. A caller who cannot be is refused by [`Stage::Audit`],
    /// so that the refusal is audited.
    Authentication,
    /// The audit record the policy asks for, kept until the response ends.
    Audit,
    /// Acting as another user, when the caller may (`Impersonate-*`).
    Impersonation,
    /// A user who leaves many bytes of responses unread gets a 429 until
    /// they read.
    UnreadBytes,
    /// API Priority and Fairness: the request waits for seats at its level.
    PriorityAndFairness,
    /// Whether the user may do what the request asks.
    Authorization,
    /// At most [`MAX_LONG_RUNNING_PER_USER`] watches, logs and execs open
    /// per user.
    LongRunning,
    /// The body, read only for an authorized caller.
    Body,
}

/// The filter chain, outermost first, as kube's `DefaultBuildHandlerChain`
/// orders it; the handler (under panic recovery and the request's deadline)
/// is its end.
const CHAIN: [Stage; 9] = [
    Stage::RequestInfo,
    Stage::Authentication,
    Stage::Audit,
    Stage::Impersonation,
    Stage::UnreadBytes,
    Stage::PriorityAndFairness,
    Stage::Authorization,
    Stage::LongRunning,
    Stage::Body,
];

/// What a filter does with a request: pass it on, or answer it.
type Step = ControlFlow<ApiResponse>;

/// A request on its way through the chain, with what the filters it has
/// passed worked out.
struct Exchange<'a> {
    incoming: Incoming<'a>,
    /// The request as the handler will see it: its path cleaned, its
    /// attributes, user and body filled in by the filters.
    req: ApiRequest,
    /// Why authentication failed, until the audit filter refuses it.
    unauthenticated: Option<apimachinery::Error>,
    record: Option<Record>,
    flow: Option<flowcontrol::Admission>,
    long_running: Option<unread::Share>,
    body: Option<BodyFuture<'a>>,
    /// What the handler's response charged its user while it was gathered.
    charged: Option<unread::Share>,
    /// When a whole response must have been written by.
    deadline: Instant,
}

/// A request body still to be read.
type BodyFuture<'a> = Pin<Box<dyn Future<Output = Result<Bytes, apimachinery::Error>> + 'a>>;

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

    /// Runs one request through the chain: the path is checked and the
    /// caller authenticated and authorized before `body` is read. Every
    /// response carries the request's `Audit-Id`.
    #[allow(clippy::too_many_arguments)]
    pub async fn serve(
        &self,
        peer: Option<SocketAddr>,
        client_cert: Option<&ClientCert>,
        method: Method,
        raw_path: &str,
        query: &str,
        mut headers: HeaderMap,
        body: impl Future<Output = Result<Bytes, apimachinery::Error>>,
    ) -> ApiResponse {
        let audit_id = audit::audit_id(&headers);
        // Behind the door everything is JSON; a protobuf answer is made here.
        let mut protobuf = Negotiated::of(raw_path, query, &mut headers);
        let mut exchange = Exchange {
            req: ApiRequest {
                method: method.clone(),
                path: String::new(),
                query: query.to_string(),
                headers,
                body: Bytes::new(),
                info: RequestInfo::default(),
                user: UserInfo::default(),
                audit_id: audit_id.clone(),
            },
            incoming: Incoming {
                peer,
                client_cert,
                raw_path,
            },
            unauthenticated: None,
            record: None,
            flow: None,
            long_running: None,
            body: Some(Box::pin(body)),
            charged: None,
            deadline: Instant::now() + crate::request::REQUEST_TIMEOUT,
        };
        let mut passed = 0;
        let mut resp = loop {
            let Some(stage) = CHAIN.get(passed) else {
                // An answer the client cannot read is refused before the
                // handler reads, writes or deletes anything, in JSON.
                let refused = protobuf
                    .as_ref()
                    .and_then(|p| p.refusal(&exchange.req.info));
                if let Some(refused) = refused {
                    protobuf = None;
                    break refused;
                }
                break self.handle(&mut exchange).await;
            };
            match self.enter(*stage, &mut exchange).await {
                ControlFlow::Continue(()) => passed += 1,
                ControlFlow::Break(answer) => break answer,
            }
        };
        for stage in CHAIN[..passed].iter().rev() {
            resp = self.leave(*stage, &mut exchange, resp);
        }
        if let Some(protobuf) = protobuf {
            resp = protobuf.answer(resp);
        }
        audit::set_audit_id(&mut resp, &audit_id);
        resp
    }

    /// `stage`'s filter on the way in.
    async fn enter(&self, stage: Stage, x: &mut Exchange<'_>) -> Step {
        match stage {
            Stage::RequestInfo => {
                match request_path::clean(x.incoming.raw_path).and_then(|path| {
                    check_headers(&x.req.headers)?;
                    Ok(path)
                }) {
                    Ok(path) => x.req.path = path,
                    Err(e) => return ControlFlow::Break(e.into()),
                }
                x.req.info = RequestInfo::parse(&x.req.method, &x.req.path, &x.req.query);
            }
            Stage::Authentication => {
                match self
                    .authenticator
                    .authenticate(x.incoming.client_cert, &x.req.headers, &x.req.path)
                    .await
                {
                    Ok(user) => x.req.user = user,
                    Err(e) => x.unauthenticated = Some(e),
                }
            }
            Stage::Audit => {
                let refused = x.unauthenticated.take();
                x.record = self.audit.as_ref().and_then(|auditor| {
                    let user = refused.is_none().then_some(&x.req.user);
                    auditor.begin(&x.audited(), user)
                });
                if let Some(e) = refused {
                    let resp = ApiResponse::from(e);
                    return ControlFlow::Break(match x.record.take() {
                        Some(record) => record.refused(resp),
                        None => resp,
                    });
                }
                if let Some(record) = x.record.as_mut() {
                    record.received();
                }
            }
            Stage::Impersonation => {
                match impersonation::impersonate(
                    self.authorizer.as_ref(),
                    &x.req.user,
                    &x.req.headers,
                )
                .await
                {
                    Ok(Some(acting_as)) => {
                        if let Some(record) = x.record.as_mut() {
                            record.impersonated(&acting_as);
                        }
                        x.req.user = acting_as;
                    }
                    Ok(None) => {}
                    Err(e) => return ControlFlow::Break(e.into()),
                }
                strip_identity_headers(&mut x.req.headers);
                // An aggregated server the request is proxied to names it alike.
                if let Ok(id) = HeaderValue::from_str(&x.req.audit_id) {
                    x.req.headers.insert(audit::AUDIT_ID_HEADER, id);
                }
            }
            Stage::UnreadBytes => {
                if unread::stalled(&x.req.user.name) {
                    tracing::info!(user = %x.req.user.name, "too many bytes of responses unread");
                    return ControlFlow::Break(apimachinery::Error::too_many_requests().into());
                }
            }
            Stage::PriorityAndFairness => {
                match flowcontrol::admit(self.flow_control.as_deref(), &x.req).await {
                    Ok(admitted) => x.flow = Some(admitted),
                    Err(rejected) => return ControlFlow::Break(rejected),
                }
            }
            Stage::Authorization => {
                let req = &x.req;
                let decision = match x.record.as_mut() {
                    Some(record) => {
                        let decided = self
                            .authorizer
                            .authorize_with_reason(&req.user, &req.info, &req.path)
                            .await;
                        let reason = match &decided {
                            Ok(reason) | Err((_, reason)) => reason,
                        };
                        record.authorized(decided.is_ok(), reason);
                        decided.map(drop).map_err(|(e, _)| e)
                    }
                    None => {
                        self.authorizer
                            .authorize(&req.user, &req.info, &req.path)
                            .await
                    }
                };
                if let Err(e) = decision {
                    tracing::debug!(user = %req.user.name, path = %req.path, "forbidden");
                    return ControlFlow::Break(e.into());
                }
            }
            Stage::LongRunning => {
                let req = &x.req;
                if req.is_long_running() && !req.user.in_group(EXEMPT_GROUP) {
                    match self.long_running.acquire(&req.user.name, 1) {
                        Some(slot) => x.long_running = Some(slot),
                        None => {
                            tracing::info!(user = %req.user.name, "too many long-running requests");
                            return ControlFlow::Break(
                                apimachinery::Error::too_many_requests().into(),
                            );
                        }
                    }
                }
            }
            Stage::Body => {
                if let Some(body) = x.body.take() {
                    match body.await {
                        Ok(body) => x.req.body = body,
                        Err(e) => return ControlFlow::Break(e.into()),
                    }
                }
                if let Some(record) = x.record.as_mut() {
                    record.request_body(&x.req.body, &x.req.headers).await;
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// `stage`'s filter on the way out: what it holds is handed to the
    /// response or given back.
    fn leave(&self, stage: Stage, x: &mut Exchange<'_>, resp: ApiResponse) -> ApiResponse {
        match stage {
            Stage::Audit => match x.record.take() {
                Some(record) => record.complete(resp),
                None => resp,
            },
            // A streamed response holds the slot for as long as it streams.
            Stage::LongRunning => match (x.long_running.take(), resp.body) {
                (Some(slot), Body::Stream(stream)) => ApiResponse {
                    body: Body::Stream(Box::pin(stream.map(move |chunk| {
                        let _held = &slot;
                        chunk
                    }))),
                    ..resp
                },
                (_, body) => ApiResponse { body, ..resp },
            },
            // A stream gives the seats back once it has started, as kube
            // gives a watch's back; a whole body holds them while written.
            Stage::PriorityAndFairness => {
                let Some(flow) = x.flow.take() else {
                    return resp;
                };
                let pieces = match resp.body {
                    Body::Stream(stream) => {
                        return flow.respond(ApiResponse {
                            body: Body::Stream(stream),
                            ..resp
                        });
                    }
                    Body::Full(bytes) => vec![bytes],
                    Body::Pieces(pieces) => pieces,
                };
                let head = ApiResponse {
                    body: Body::Full(Bytes::new()),
                    ..resp
                };
                let charged = x.charged.take();
                Self::whole(head, pieces, flow, charged, &x.req.user.name, x.deadline)
            }
            Stage::RequestInfo
            | Stage::Authentication
            | Stage::Impersonation
            | Stage::UnreadBytes
            | Stage::Authorization
            | Stage::Body => resp,
        }
    }

    /// The end of the chain: the handler (or, for `/metrics`, the
    /// pipeline's own metrics) under panic recovery, within the request's
    /// deadline, counted, traced and charged to its user.
    async fn handle(&self, x: &mut Exchange<'_>) -> ApiResponse {
        let mut req = x.hand_over();
        tracing::trace!(audit_id = %req.audit_id, verb = %req.info.verb, path = %req.path, user = %req.user.name, "request");
        let counted = self.metrics.start(&req);
        let (started, trace) = (Instant::now(), TraceContext::of(&req.headers));
        trace.propagate(&mut req.headers);
        x.deadline = started + req.deadline().unwrap_or(crate::request::REQUEST_TIMEOUT);
        let resp = if req.path == "/metrics" && req.method == Method::GET {
            ApiResponse::bytes(
                http::StatusCode::OK,
                Metrics::CONTENT_TYPE,
                self.metrics.render(),
            )
        } else {
            match req.timeout() {
                Err(e) => e.into(),
                Ok(limit) => {
                    // A panic is reported to the audit record, and the
                    // annotations added behind are collected for it.
                    let panicked = x.record.as_ref().map(Record::panic_slot);
                    let served = request::recover_with(self.handler.as_ref(), req, move |why| {
                        if let Some(slot) = panicked {
                            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                        }
                    });
                    let served = unread::ledger(&x.req.user.name, audit::collect(served));
                    let served = trace::scope(trace.clone(), served);
                    let outcome = match limit {
                        None => Some(served.await),
                        // A request past its deadline is dropped, which cancels it
                        // at every hop behind, and answered with kube's 504.
                        Some(limit) => tokio::time::timeout(limit, served).await.ok(),
                    };
                    match outcome {
                        Some(((resp, annotations), charged)) => {
                            if let Some(record) = x.record.as_mut() {
                                record.annotate(annotations);
                            }
                            x.charged = charged;
                            resp
                        }
                        None => request::timed_out().into(),
                    }
                }
            }
        };
        trace.log(self.name, started, resp.status.as_u16(), &x.req.audit_id);
        counted.done(resp.status.as_u16());
        resp
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
        deadline: Instant,
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

/// What the front door knows of a request's connection and its path as sent.
struct Incoming<'a> {
    peer: Option<SocketAddr>,
    client_cert: Option<&'a ClientCert>,
    raw_path: &'a str,
}

impl Exchange<'_> {
    /// The request for the handler; who asked, and how, stay behind for
    /// the way out.
    fn hand_over(&mut self) -> ApiRequest {
        let req = &mut self.req;
        ApiRequest {
            method: req.method.clone(),
            path: std::mem::take(&mut req.path),
            query: std::mem::take(&mut req.query),
            headers: std::mem::take(&mut req.headers),
            body: std::mem::take(&mut req.body),
            info: std::mem::take(&mut req.info),
            user: req.user.clone(),
            audit_id: req.audit_id.clone(),
        }
    }

    /// What the audit record is started from.
    fn audited(&self) -> audit::Incoming<'_> {
        audit::Incoming {
            audit_id: &self.req.audit_id,
            method: &self.req.method,
            raw_path: self.incoming.raw_path,
            path: &self.req.path,
            query: &self.req.query,
            info: &self.req.info,
            headers: &self.req.headers,
            peer: self.incoming.peer,
        }
    }
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
            // Read once here; each request on the connection shares it.
            if let Some(certs) = tls.get_ref().1.peer_certificates() {
                let chain = certs.iter().map(|c| c.to_vec()).collect();
                ext.insert(Arc::new(ClientCert::new(chain)));
            }
        }
    })
    .workers(workers)
    .disable_signals()
    .shutdown_timeout(crate::shutdown::GRACE.as_secs())
    .keep_alive(std::time::Duration::from_secs(75))
    .client_request_timeout(HEADER_TIMEOUT)
    // A client that closes its side (TLS close_notify, a FIN) ends its
    // request, a watch included, as kube's does when its connection reads
    // EOF: nothing is written after the client said it is done.
    .h1_allow_half_closed(false)
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
    let client_cert = req.conn_data::<Arc<ClientCert>>().cloned();
    let peer = req.peer_addr();
    let upgrade = req.headers().contains_key(actix_web::http::header::UPGRADE);
    // The body is read only once the caller may send it; a body left
    // unread (a refusal) stays open until the answer is written.
    let unread = Rc::new(RefCell::new(Some(payload)));
    let reader = unread.clone();
    let resp = door
        .serve(
            peer,
            client_cert.as_deref(),
            method,
            req.path(),
            req.query_string(),
            headers,
            async move {
                // An upgrade (exec, attach, port-forward over SPDY or
                // WebSocket) has no body: what follows is the stream it asks for.
                let payload = reader.borrow_mut().take().filter(|_| !upgrade);
                let Some(mut payload) = payload else {
                    return Ok(Bytes::new());
                };
                let read = read_body(&mut payload).await;
                if read.is_err() {
                    // Too large or too slow: what is left is the answer's to drop.
                    *reader.borrow_mut() = Some(payload);
                }
                read
            },
        )
        .await;
    let resp = into_http(resp);
    let unread = unread.borrow_mut().take();
    match unread {
        Some(unread)
            if req.version() == actix_web::http::Version::HTTP_2
                && matches!(req.method().as_str(), "POST" | "PUT" | "PATCH") =>
        {
            resp.map_body(|_, body| AnswerFirst::new(body, unread))
                .map_into_boxed_body()
        }
        _ => resp,
    }
}

/// The most of a refused request's body read (and dropped) after its answer.
const DISCARD_BYTES: usize = codec::MAX_BODY_BYTES;
/// How long a refused request's body is read after its answer.
const DISCARD_TIME: Duration = Duration::from_secs(5);

/// An HTTP/2 answer to a request whose body was left unread (a refusal
/// before the body is read). Dropping the body ends the request with
/// RST_STREAM: CANCEL before the answer is sent, and the client sees a
/// reset, not the answer; NO_ERROR after it (RFC 9113 8.1), which clients
/// like curl before 8.x still take for an error while they send. So the
/// answer goes out first, and the rest of the body (up to [`DISCARD_BYTES`]
/// within [`DISCARD_TIME`]) is read and dropped before the answer's end, so
/// the request ends as any other; past those bounds, the reset.
struct AnswerFirst {
    body: actix_web::body::BoxBody,
    unread: Option<web::Payload>,
    discarded: usize,
    /// Set when the answer has been written.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl AnswerFirst {
    fn new(body: actix_web::body::BoxBody, unread: web::Payload) -> Self {
        AnswerFirst {
            body,
            unread: Some(unread),
            discarded: 0,
            deadline: None,
        }
    }
}

impl actix_web::body::MessageBody for AnswerFirst {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> actix_web::body::BodySize {
        // Streamed: the end waits for the discarded body.
        match self.body.size() {
            actix_web::body::BodySize::None => actix_web::body::BodySize::Stream,
            size => size,
        }
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Bytes, Self::Error>>> {
        use std::task::Poll;
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_next(cx) {
            Poll::Ready(None) => {}
            other => return other,
        }
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(DISCARD_TIME)));
        while let Some(unread) = this.unread.as_mut() {
            if deadline.as_mut().poll(cx).is_ready() {
                this.unread = None;
                break;
            }
            match unread.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) if this.discarded + chunk.len() <= DISCARD_BYTES => {
                    this.discarded += chunk.len();
                }
                // Ended, broken or too long: stop reading.
                Poll::Ready(_) => this.unread = None,
            }
        }
        Poll::Ready(None)
    }
}

/// Reads a body up to the API's limit (413 past it) within [`BODY_TIMEOUT`]
/// (a 504 Status past it: a slow sender is cut off).
async fn read_body(payload: &mut web::Payload) -> Result<Bytes, apimachinery::Error> {
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::filters::authorization::Opinion;

    /// Knows one token, `Bearer good`, as `alice`.
    struct OneToken;

    #[async_trait::async_trait]
    impl Authenticate for OneToken {
        async fn authenticate(
            &self,
            _: Option<&ClientCert>,
            headers: &HeaderMap,
            _: &str,
        ) -> apimachinery::Result<UserInfo> {
            match headers.get("authorization").map(|v| v.as_bytes()) {
                Some(b"Bearer good") => Ok(UserInfo {
                    name: "alice".into(),
                    ..UserInfo::default()
                }),
                _ => Err(apimachinery::Error::new(
                    apimachinery::error::Reason::Unauthorized,
                    "bad token",
                )),
            }
        }
    }

    /// Allows reads only.
    struct ReadsOnly;

    #[async_trait::async_trait]
    impl Authorizer for ReadsOnly {
        async fn opinion(
            &self,
            _: &UserInfo,
            info: &RequestInfo,
            _: &str,
        ) -> apimachinery::Result<Opinion> {
            Ok(match info.verb.as_str() {
                "get" | "list" => Opinion::Allow(String::new()),
                verb => Opinion::NoOpinion(format!("may not {verb}")),
            })
        }
    }

    /// Echoes who asked and the body it was given.
    struct Echo;

    #[async_trait::async_trait]
    impl Handler for Echo {
        async fn handle(&self, req: ApiRequest) -> ApiResponse {
            let text = format!("{} {}", req.user.name, String::from_utf8_lossy(&req.body));
            ApiResponse::bytes(http::StatusCode::OK, "text/plain", text)
        }
    }

    /// Serves one request; `read` tells whether its body was read.
    async fn serve(method: Method, path: &str, token: &str, read: &AtomicBool) -> ApiResponse {
        let pipeline = Pipeline::new(OneToken, Box::new(ReadsOnly), Arc::new(Echo));
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_str(token).unwrap());
        let body = async {
            read.store(true, Ordering::SeqCst);
            Ok(Bytes::from_static(b"{}"))
        };
        pipeline
            .serve(None, None, method, path, "", headers, body)
            .await
    }

    #[tokio::test]
    async fn a_bad_path_is_refused_before_anyone_is_asked_who_calls() {
        let read = AtomicBool::new(false);
        let resp = serve(Method::GET, "/api/../secrets", "Bearer bad", &read).await;
        assert_eq!(resp.status, http::StatusCode::BAD_REQUEST);
        assert!(!read.load(Ordering::SeqCst));
        assert!(resp.headers.contains_key(audit::AUDIT_ID_HEADER));
    }

    #[tokio::test]
    async fn an_unknown_caller_is_refused_and_its_body_left_unread() {
        let read = AtomicBool::new(false);
        let resp = serve(Method::POST, "/api/v1/namespaces", "Bearer bad", &read).await;
        assert_eq!(resp.status, http::StatusCode::UNAUTHORIZED);
        assert!(!read.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_forbidden_write_is_refused_before_its_body_is_read() {
        let read = AtomicBool::new(false);
        let resp = serve(Method::POST, "/api/v1/namespaces", "Bearer good", &read).await;
        assert_eq!(resp.status, http::StatusCode::FORBIDDEN);
        assert!(!read.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn an_allowed_request_reaches_the_handler_as_its_caller_with_its_body() {
        let read = AtomicBool::new(false);
        let resp = serve(Method::GET, "/api/v1/namespaces", "Bearer good", &read).await;
        assert_eq!(resp.status, http::StatusCode::OK);
        assert!(read.load(Ordering::SeqCst));
        assert_eq!(resp.into_bytes().await, Bytes::from_static(b"alice {}"));
        assert!(CHAIN.ends_with(&[Stage::Authorization, Stage::LongRunning, Stage::Body]));
    }
}
