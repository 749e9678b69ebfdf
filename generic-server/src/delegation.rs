//! Both ends of the delegation protocol: [`DelegationService`] serves a
//! [`Handler`] over gRPC (mutual TLS, callers checked by certificate), and
//! [`GrpcDelegate`] is the [`Handler`] that forwards to the next server.
//! Responses stream as a head frame and body chunks, so a watch flows
//! through; dropping a response cancels the call at every hop.

use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use proto::delegation as pb;
use proto::delegation::delegation_client::DelegationClient;
use proto::delegation::delegation_server::{Delegation, DelegationServer};
use tonic::transport::{Channel, Endpoint};

use crate::discovery::{Discovery, Group};
use crate::request::{ApiRequest, ApiResponse, Body, BodyStream, Handler, UserInfo};
use crate::request_info::RequestInfo;
use crate::tls::TlsFiles;
use crate::watch_hub::WatchHub;
use apimachinery::error::Error;
use apimachinery::keys::UNIX_SCHEME;

/// Largest gRPC message either end accepts.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// Body chunk size on the wire: a body up to this size reaches the server
/// above as one piece, with no copy to join its chunks.
const CHUNK_BYTES: usize = 4 * 1024 * 1024;
/// Largest HTTP/2 frame either side of a delegation link accepts: a
/// megabyte of a body crosses in one write.
const LINK_FRAME_BYTES: u32 = 1024 * 1024 + 64;
/// Flow-control window of each stream of a link: a LIST of a few megabytes
/// is sent without waiting for the receiver's window updates.
const LINK_STREAM_WINDOW: u32 = 8 * 1024 * 1024;
/// Flow-control window of a whole link.
const LINK_CONNECTION_WINDOW: u32 = 32 * 1024 * 1024;

/// The HTTP/2 settings of a delegation link's server side: frames and
/// windows large enough that a LIST of a megabyte crosses in a few writes.
pub(crate) fn link_server() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(10)))
        .max_frame_size(LINK_FRAME_BYTES)
        .initial_stream_window_size(LINK_STREAM_WINDOW)
        .initial_connection_window_size(LINK_CONNECTION_WINDOW)
}

/// Request headers that travel down the chain; identity headers never do.
const FORWARDED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "if-none-match",
    "user-agent",
    "traceparent",
    "tracestate",
];

/// Request headers that never travel down the chain, even to a proxied
/// address: who the caller is was worked out at the front door (kube
/// removes them once authentication has read them).
const IDENTITY_HEADERS: &[&str] = &["authorization", "proxy-authorization"];

/// Whether a header travels down the chain: the few the API reads, or, for a
/// proxy subresource (`pods/proxy`, `services/proxy`), every one but the
/// caller's identity (credentials, impersonation, front-proxy headers).
fn travels(name: &str, proxied: bool) -> bool {
    if !proxied {
        return FORWARDED_HEADERS.contains(&name);
    }
    !(IDENTITY_HEADERS.contains(&name)
        || name.starts_with("impersonate-")
        || name.starts_with("x-remote-"))
}

fn to_pb(req: ApiRequest) -> pb::ApiRequest {
    let proxied = req.info.subresource == "proxy";
    let headers = req
        .headers
        .iter()
        .filter(|(name, _)| travels(name.as_str(), proxied))
        .filter_map(|(name, value)| {
            Some(pb::Header {
                name: name.to_string(),
                value: value.to_str().ok()?.to_string(),
            })
        })
        .collect();
    let info = req.info;
    pb::ApiRequest {
        method: req.method.to_string(),
        path: req.path,
        query: req.query,
        headers,
        body: req.body,
        info: Some(pb::RequestInfo {
            is_resource_request: info.is_resource_request,
            verb: info.verb,
            api_prefix: info.api_prefix,
            api_group: info.api_group,
            api_version: info.api_version,
            namespace: info.namespace,
            resource: info.resource,
            subresource: info.subresource,
            name: info.name,
        }),
        user: Some(pb::UserInfo {
            name: req.user.name,
            uid: req.user.uid,
            groups: req.user.groups,
            extra: req
                .user
                .extra
                .into_iter()
                .map(|(k, values)| (k, pb::ExtraValues { values }))
                .collect(),
        }),
        audit_id: req.audit_id,
    }
}

fn from_pb(req: pb::ApiRequest) -> Result<ApiRequest, tonic::Status> {
    let method = Method::from_bytes(req.method.as_bytes())
        .map_err(|_| tonic::Status::invalid_argument("bad method"))?;
    let mut headers = HeaderMap::new();
    for h in req.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(h.name.as_bytes()),
            HeaderValue::from_str(&h.value),
        ) {
            headers.append(name, value);
        }
    }
    let info = match req.info {
        Some(i) => RequestInfo {
            is_resource_request: i.is_resource_request,
            verb: i.verb,
            api_prefix: i.api_prefix,
            api_group: i.api_group,
            api_version: i.api_version,
            namespace: i.namespace,
            resource: i.resource,
            subresource: i.subresource,
            name: i.name,
            // Read only by authorizers, which ran at the front door.
            field_selector: Vec::new(),
        },
        None => RequestInfo::parse(&method, &req.path, &req.query),
    };
    let user = req
        .user
        .map(|u| UserInfo {
            name: u.name,
            uid: u.uid,
            groups: u.groups,
            extra: u.extra.into_iter().map(|(k, v)| (k, v.values)).collect(),
        })
        .unwrap_or_default();
    Ok(ApiRequest {
        method,
        path: req.path,
        query: req.query,
        headers,
        body: req.body,
        info,
        user,
        audit_id: req.audit_id,
    })
}

type FrameStream = Pin<Box<dyn Stream<Item = Result<pb::ApiResponseFrame, tonic::Status>> + Send>>;
type SnapshotStream =
    Pin<Box<dyn Stream<Item = Result<pb::DiscoverySnapshot, tonic::Status>> + Send>>;

/// Serves a handler, and its discovery, to the server above it in the chain.
#[derive(Clone)]
pub struct DelegationService {
    name: String,
    handler: Arc<dyn Handler>,
    discovery: Arc<Discovery>,
    allowed_callers: Vec<String>,
}

impl DelegationService {
    /// Serves `handler` (the server `name`, as its trace spans are named)
    /// to callers whose certificate CN is in `allowed_callers`.
    pub fn new(
        name: &str,
        handler: Arc<dyn Handler>,
        discovery: Arc<Discovery>,
        allowed_callers: Vec<String>,
    ) -> Self {
        DelegationService {
            name: name.to_string(),
            handler,
            discovery,
            allowed_callers,
        }
    }

    /// The tonic service, with message limits set.
    pub fn into_server(self) -> DelegationServer<Self> {
        DelegationServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    fn check_caller<T>(&self, request: &tonic::Request<T>) -> Result<(), tonic::Status> {
        // On the Unix socket, the kernel names the calling process's user.
        if let Some(local) = request
            .extensions()
            .get::<tonic::transport::server::UdsConnectInfo>()
        {
            let own = nix::unistd::geteuid().as_raw();
            return match local.peer_cred {
                Some(caller) if caller.uid() == own => Ok(()),
                Some(caller) => Err(tonic::Status::permission_denied(format!(
                    "user {} may not delegate to this server",
                    caller.uid()
                ))),
                None => Err(tonic::Status::unauthenticated(
                    "the caller's credentials are unknown",
                )),
            };
        }
        let certs = request
            .peer_certs()
            .ok_or_else(|| tonic::Status::unauthenticated("a client certificate is required"))?;
        let subject = certs.first().and_then(|c| crate::tls::subject(c.as_ref()));
        match subject {
            Some(s) if self.allowed_callers.contains(&s.common_name) => Ok(()),
            Some(s) => Err(tonic::Status::permission_denied(format!(
                "{} may not delegate to this server",
                s.common_name
            ))),
            None => Err(tonic::Status::unauthenticated(
                "unreadable client certificate",
            )),
        }
    }
}

/// The response as frames: the head (with the audit annotations added while
/// serving it), then the body's chunks.
fn frames(resp: ApiResponse, annotations: Vec<(String, String)>) -> FrameStream {
    let headers = resp
        .headers
        .iter()
        .filter_map(|(n, v)| {
            Some(pb::Header {
                name: n.to_string(),
                value: v.to_str().ok()?.to_string(),
            })
        })
        .collect();
    let streaming = matches!(resp.body, Body::Stream(_));
    let head = pb::ApiResponseFrame {
        frame: Some(pb::api_response_frame::Frame::Head(pb::ResponseHead {
            status: u32::from(resp.status.as_u16()),
            headers,
            streaming,
            audit_annotations: annotations
                .into_iter()
                .map(|(name, value)| pb::Header { name, value })
                .collect(),
        })),
    };
    let chunk = |b: Bytes| {
        Ok(pb::ApiResponseFrame {
            frame: Some(pb::api_response_frame::Frame::Chunk(b)),
        })
    };
    let large = match &resp.body {
        Body::Full(bytes) => bytes.len() > CHUNK_BYTES,
        Body::Pieces(pieces) => pieces.iter().map(Bytes::len).sum::<usize>() > CHUNK_BYTES,
        Body::Stream(_) => false,
    };
    let body: FrameStream = match resp.body {
        Body::Full(bytes) => {
            let chunks: Vec<Bytes> = (0..bytes.len())
                .step_by(CHUNK_BYTES)
                .map(|i| bytes.slice(i..(i + CHUNK_BYTES).min(bytes.len())))
                .collect();
            futures::stream::iter(chunks.into_iter().map(chunk)).boxed()
        }
        // Chunks are joined as the link takes them: a response waiting
        // on a slow link holds its pieces, not a copy.
        Body::Pieces(pieces) => {
            futures::stream::unfold(pieces.into_iter().peekable(), |mut pieces| async move {
                let first = pieces.next()?;
                if first.len() >= CHUNK_BYTES || pieces.peek().is_none() {
                    return Some((first, pieces));
                }
                let mut joined = bytes::BytesMut::with_capacity(CHUNK_BYTES);
                joined.extend_from_slice(&first);
                while let Some(next) = pieces.next_if(|p| joined.len() + p.len() <= CHUNK_BYTES) {
                    joined.extend_from_slice(&next);
                }
                Some((joined.freeze(), pieces))
            })
            .map(chunk)
            .boxed()
        }
        Body::Stream(stream) => {
            // A draining server breaks its streams, so that the server
            // above resumes them on another replica.
            let live = crate::request::coalesce(stream)
                .map(chunk)
                .take_until(crate::shutdown::draining());
            let cut =
                futures::stream::once(async { crate::shutdown::is_draining() }).filter_map(
                    |draining| {
                        futures::future::ready(draining.then(|| {
                            Err(tonic::Status::unavailable("the server is shutting down"))
                        }))
                    },
                );
            live.chain(cut).boxed()
        }
    };
    let body = match large {
        true => one_large_body_of_a_few(body),
        false => body,
    };
    futures::stream::once(async { Ok(head) })
        .chain(body)
        .boxed()
}

/// Bodies of more than one chunk that cross this server's links at once.
/// Each holds about two chunks while it crosses (the joined one and
/// gRPC's encoding of it), so clients that ask for many large LISTs at
/// once (readers that never read, whose front door gathers the bodies and
/// refuses them one by one) cost at most this many; the rest wait, holding
/// only their pieces (shared with the watch cache). The front door gathers
/// a body as fast as the link brings it, so a turn lasts one transfer.
const LARGE_BODIES_AT_ONCE: usize = 8;

/// `body`, sent once it has a turn among the [`LARGE_BODIES_AT_ONCE`],
/// which it holds until it ends or is dropped (a stream reset).
fn one_large_body_of_a_few(body: FrameStream) -> FrameStream {
    static TURNS: std::sync::LazyLock<Arc<tokio::sync::Semaphore>> =
        std::sync::LazyLock::new(|| Arc::new(tokio::sync::Semaphore::new(LARGE_BODIES_AT_ONCE)));
    futures::stream::once(async move {
        let turn = TURNS.clone().acquire_owned().await.ok();
        body.map(move |frame| {
            let _held = &turn;
            frame
        })
    })
    .flatten()
    .boxed()
}

#[tonic::async_trait]
impl Delegation for DelegationService {
    type HandleStream = FrameStream;
    type WatchDiscoveryStream = SnapshotStream;

    async fn handle(
        &self,
        request: tonic::Request<pb::ApiRequest>,
    ) -> Result<tonic::Response<FrameStream>, tonic::Status> {
        self.check_caller(&request)?;
        let mut req = from_pb(request.into_inner())?;
        let counted = crate::metrics::global().start_behind(&req);
        let (started, audit_id) = (std::time::Instant::now(), req.audit_id.clone());
        let trace = crate::trace::TraceContext::of(&req.headers);
        trace.propagate(&mut req.headers);
        // The audit annotations added while serving it go up with the head.
        let served = crate::audit::collect(crate::request::recover(self.handler.as_ref(), req));
        let (resp, annotations) = crate::trace::scope(trace.clone(), served).await;
        let code = resp.status.as_u16();
        trace.log(&self.name, started, code, &audit_id);
        counted.done(code);
        Ok(tonic::Response::new(frames(resp, annotations)))
    }

    async fn watch_discovery(
        &self,
        request: tonic::Request<pb::WatchDiscoveryRequest>,
    ) -> Result<tonic::Response<SnapshotStream>, tonic::Status> {
        self.check_caller(&request)?;
        let updates = tokio_stream::wrappers::WatchStream::new(self.discovery.subscribe());
        let snapshots = updates.map(|docs| {
            Ok(pb::DiscoverySnapshot {
                groups: docs.snapshot(),
            })
        });
        // A draining server ends the stream, so the caller follows another replica.
        Ok(tonic::Response::new(
            snapshots.take_until(crate::shutdown::draining()).boxed(),
        ))
    }
}

/// The groups of a discovery snapshot, each with its JSON; a group whose
/// JSON is in `known` (the previous snapshot's) is taken from there, not parsed.
fn parse_snapshot(
    snapshot: pb::DiscoverySnapshot,
    known: &HashMap<Bytes, Group>,
) -> serde_json::Result<Vec<(Bytes, Group)>> {
    snapshot
        .groups
        .into_iter()
        .map(|json| match known.get(&json) {
            Some(group) => Ok((json, group.clone())),
            None => Ok((json.clone(), Group::new(serde_json::from_slice(&json)?))),
        })
        .collect()
}

/// One replica of the next server.
#[derive(Clone)]
struct Replica {
    address: String,
    client: DelegationClient<Channel>,
    failed_at: Option<Instant>,
}

/// How long a replica that failed is skipped.
const EJECTION: Duration = Duration::from_secs(5);

/// The next server in the chain, reached over gRPC: any number of replicas,
/// balanced round robin; a request that never reached a replica is retried
/// on the next one.
#[derive(Clone)]
pub struct GrpcDelegate {
    /// Tells this link's thread-local connections from other links'.
    id: usize,
    name: String,
    server_name: String,
    tls: TlsFiles,
    replicas: Arc<RwLock<Vec<Replica>>>,
    next: Arc<AtomicUsize>,
    /// Identical watches ride one watch on the next server.
    hub: Arc<WatchHub>,
}

impl GrpcDelegate {
    /// A link to the replicas at `endpoints` (`https://127.0.0.1:7443`),
    /// verifying each as `server_name` and presenting our certificate.
    pub fn new(
        name: &str,
        endpoints: &[String],
        server_name: &str,
        tls: &TlsFiles,
    ) -> Result<Self, tonic::transport::Error> {
        static IDS: AtomicUsize = AtomicUsize::new(0);
        let delegate = GrpcDelegate {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            server_name: server_name.into(),
            tls: tls.clone(),
            replicas: Arc::default(),
            next: Arc::default(),
            hub: Arc::default(),
        };
        delegate.set_endpoints(endpoints)?;
        Ok(delegate)
    }

    fn connect(&self, address: &str) -> Result<Replica, tonic::transport::Error> {
        let socket = address.strip_prefix(UNIX_SCHEME).map(PathBuf::from);
        let endpoint = match socket {
            // The URI only names the link: the connector dials the socket.
            Some(_) => Endpoint::from_static("http://localhost"),
            None => Endpoint::from_shared(address.to_string())?
                .tls_config(self.tls.grpc_client(&self.server_name))?,
        }
        .connect_timeout(Duration::from_secs(2))
        .max_frame_size(LINK_FRAME_BYTES)
        .initial_stream_window_size(LINK_STREAM_WINDOW)
        .initial_connection_window_size(LINK_CONNECTION_WINDOW)
        .http2_keep_alive_interval(Duration::from_secs(5))
        .keep_alive_timeout(Duration::from_secs(3))
        .keep_alive_while_idle(true);
        let channel = match socket {
            Some(path) => endpoint.connect_with_connector_lazy(tower::service_fn(move |_| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                }
            })),
            None => endpoint.connect_lazy(),
        };
        let client = DelegationClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Replica {
            address: address.into(),
            client,
            failed_at: None,
        })
    }

    /// Replaces the replica set, keeping the connections of replicas that
    /// stay; an address registered twice (a restarted replica whose old
    /// lease has not expired yet) counts once.
    pub fn set_endpoints(&self, endpoints: &[String]) -> Result<(), tonic::transport::Error> {
        let current = self
            .replicas
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut next: Vec<Replica> = Vec::new();
        for address in endpoints {
            if next.iter().any(|r| r.address == *address) {
                continue;
            }
            match current.iter().find(|r| r.address == *address) {
                Some(existing) => next.push(existing.clone()),
                None => next.push(self.connect(address)?),
            }
        }
        *self.replicas.write().unwrap_or_else(|e| e.into_inner()) = next;
        Ok(())
    }

    /// Follows the replicas registered in etcd; while none is registered the
    /// static endpoints stay in use.
    pub fn follow_endpoints(
        &self,
        mut registered: tokio::sync::watch::Receiver<Vec<crate::registration::Endpoint>>,
    ) {
        let this = self.clone();
        let fallback: Vec<String> = self
            .replicas
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|r| r.address.clone())
            .collect();
        tokio::spawn(async move {
            let mut seen: Vec<String> = Vec::new();
            loop {
                let endpoints = registered.borrow_and_update().clone();
                let set: Vec<String> = endpoints.iter().map(|e| e.address.clone()).collect();
                let chosen = if set.is_empty() { &fallback } else { &set };
                if let Err(e) = this.set_endpoints(chosen) {
                    tracing::warn!(delegate = %this.name, error = %e, "bad endpoint");
                }
                // A new registration is a replica (re)started: it takes
                // traffic at once, whatever its address's predecessor did.
                for fresh in endpoints.iter().filter(|e| !seen.contains(&e.id)) {
                    this.revive(&fresh.address);
                }
                seen = endpoints.into_iter().map(|e| e.id).collect();
                tracing::debug!(delegate = %this.name, replicas = ?chosen, "replica set");
                if registered.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// The addresses currently in use.
    pub fn addresses(&self) -> Vec<String> {
        self.replicas
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|r| r.address.clone())
            .collect()
    }

    /// The next replica to try: round robin over those not tried yet,
    /// preferring ones that have not failed recently.
    fn pick(&self, tried: &[String]) -> Option<Replica> {
        let replicas = self.replicas.read().unwrap_or_else(|e| e.into_inner());
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let order = (0..replicas.len()).map(|i| &replicas[(start + i) % replicas.len()]);
        let fresh = |r: &&&Replica| r.failed_at.is_none_or(|t| t.elapsed() > EJECTION);
        let untried: Vec<&Replica> = order.filter(|r| !tried.contains(&r.address)).collect();
        untried
            .iter()
            .find(fresh)
            .or(untried.first())
            .map(|r| (*r).clone())
    }

    /// Whether a replica not in `tried` is left.
    fn any_untried(&self, tried: &[String]) -> bool {
        let replicas = self.replicas.read().unwrap_or_else(|e| e.into_inner());
        replicas.iter().any(|r| !tried.contains(&r.address))
    }

    /// Forgets that the replica at `address` failed.
    fn revive(&self, address: &str) {
        self.set_failed_at(address, None);
    }

    fn mark_failed(&self, address: &str) {
        self.set_failed_at(address, Some(Instant::now()));
    }

    fn set_failed_at(&self, address: &str, failed_at: Option<Instant>) {
        let mut replicas = self.replicas.write().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = replicas.iter_mut().find(|r| r.address == address) {
            r.failed_at = failed_at;
        }
    }

    /// Keeps `discovery`'s delegate groups in step with the delegate's
    /// discovery stream (from any replica), reconnecting as needed; the last
    /// known groups stay while no replica answers.
    pub fn follow_discovery(&self, discovery: Arc<Discovery>) {
        let this = self.clone();
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                if let Some(mut replica) = this.pick(&[]) {
                    match replica
                        .client
                        .watch_discovery(pb::WatchDiscoveryRequest {})
                        .await
                    {
                        Ok(resp) => {
                            let mut stream = resp.into_inner();
                            let mut known = HashMap::new();
                            while let Some(Ok(snapshot)) = stream.next().await {
                                backoff = Duration::from_millis(100);
                                match parse_snapshot(snapshot, &known) {
                                    Ok(groups) => {
                                        discovery
                                            .set_delegates(groups.iter().map(|(_, g)| g.clone()));
                                        known = groups.into_iter().collect();
                                    }
                                    Err(e) => {
                                        tracing::warn!(delegate = %this.name, error = %e, "bad discovery snapshot")
                                    }
                                }
                            }
                        }
                        Err(status) => {
                            tracing::debug!(delegate = %this.name, %status, "discovery stream unavailable");
                            this.mark_failed(&replica.address);
                        }
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        });
    }

    /// Whether the delegate answers (a health check).
    pub async fn ping(&self) -> crate::Result<()> {
        let req = ApiRequest::new(
            Method::GET,
            "/readyz",
            "",
            HeaderMap::new(),
            Bytes::new(),
            UserInfo::default(),
        );
        let resp = self.handle(req).await;
        if resp.status.is_success() {
            Ok(())
        } else {
            Err(crate::Error::Delegate(format!(
                "{} answered {}",
                self.name, resp.status
            )))
        }
    }

    fn unavailable(&self, why: &str) -> ApiResponse {
        tracing::warn!(delegate = %self.name, %why, "delegate unavailable");
        Error::unavailable("the server is currently unable to handle the request").into()
    }

    /// Opens a request on one replica: its head and the frames that follow;
    /// `Err` when it never got there.
    async fn open(
        &self,
        replica: &mut Replica,
        req: pb::ApiRequest,
    ) -> crate::Result<(pb::ResponseHead, Frames)> {
        let mut client = self.local_client(replica);
        let mut frames = client
            .handle(req)
            .await
            .map_err(|s| crate::Error::Delegate(s.to_string()))?
            .into_inner();
        match frames.next().await {
            Some(Ok(pb::ApiResponseFrame {
                frame: Some(pb::api_response_frame::Frame::Head(head)),
            })) => Ok((head, frames)),
            Some(Err(status)) => Err(crate::Error::Delegate(status.to_string())),
            _ => Err(crate::Error::Delegate(
                "response without a head frame".into(),
            )),
        }
    }

    /// This thread's connection to `replica`, made on first use: a request
    /// and the connection carrying it then run on one thread (an HTTP
    /// worker's), without waking other threads.
    fn local_client(&self, replica: &Replica) -> DelegationClient<Channel> {
        thread_local! {
            static CONNECTIONS: std::cell::RefCell<std::collections::HashMap<(usize, String), DelegationClient<Channel>>> =
                std::cell::RefCell::default();
        }
        let key = (self.id, replica.address.clone());
        CONNECTIONS.with(|connections| {
            if let Some(client) = connections.borrow().get(&key) {
                return client.clone();
            }
            let client = self
                .connect(&replica.address)
                .map_or_else(|_| replica.client.clone(), |r| r.client);
            connections.borrow_mut().insert(key, client.clone());
            client
        })
    }

    /// Sends a request to one replica; `Err` when it never got there. A
    /// watch it answers is resumed elsewhere if the replica dies.
    async fn send(&self, replica: &mut Replica, req: pb::ApiRequest) -> crate::Result<ApiResponse> {
        let watch = req.info.as_ref().is_some_and(|i| i.verb == "watch");
        let user = req
            .user
            .as_ref()
            .map(|u| u.name.clone())
            .unwrap_or_default();
        let resume = watch.then(|| req.clone());
        let (head, frames) = self.open(replica, req).await?;
        // What the servers behind added to the request's audit event.
        crate::audit::add_annotations(
            head.audit_annotations
                .into_iter()
                .map(|h| (h.name, h.value)),
        );
        let status = StatusCode::from_u16(head.status as u16).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut resp = ApiResponse::bytes(status, "", Bytes::new());
        resp.headers.clear();
        for h in head.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(h.name.as_bytes()),
                HeaderValue::from_str(&h.value),
            ) {
                resp.headers.append(name, value);
            }
        }
        resp.body = match (head.streaming, resume) {
            (true, Some(request)) if status == StatusCode::OK => {
                let watch = ResumingWatch {
                    delegate: self.clone(),
                    request,
                    replica: replica.address.clone(),
                    frames: Some(frames),
                    last: None,
                    started: Instant::now(),
                };
                Body::Stream(watch.into_stream())
            }
            (true, _) => Body::Stream(chunks(frames).boxed()),
            (false, _) => {
                // Gathered whole, so the link never waits on a slow client,
                // and charged to the user as it comes: past what the user
                // may leave unread the rest is not fetched.
                let (mut first, mut joined) = (None::<Bytes>, None::<bytes::BytesMut>);
                let mut frames = std::pin::pin!(chunks(frames));
                while let Some(part) = frames.next().await {
                    if !crate::filters::unread::charge(part.len()) {
                        tracing::info!(user = %user, "too many bytes of responses unread");
                        return Ok(apimachinery::Error::too_many_requests().into());
                    }
                    match (&mut joined, first.take()) {
                        (Some(joined), _) => joined.extend_from_slice(&part),
                        (None, Some(head)) => {
                            let mut buf =
                                bytes::BytesMut::with_capacity(head.len() * 2 + part.len());
                            buf.extend_from_slice(&head);
                            buf.extend_from_slice(&part);
                            joined = Some(buf);
                        }
                        (None, None) => first = Some(part),
                    }
                }
                Body::Full(match joined {
                    Some(joined) => joined.freeze(),
                    None => first.unwrap_or_default(),
                })
            }
        };
        Ok(resp)
    }
}

/// The frames of a response after its head.
type Frames = tonic::Streaming<pb::ApiResponseFrame>;

/// The body chunks among `frames`, ending at the first error.
fn chunks(frames: Frames) -> impl Stream<Item = Bytes> {
    frames
        .take_while(|frame| futures::future::ready(frame.is_ok()))
        .filter_map(|frame| async move {
            match frame {
                Ok(pb::ApiResponseFrame {
                    frame: Some(pb::api_response_frame::Frame::Chunk(bytes)),
                }) => Some(bytes),
                _ => None,
            }
        })
}

/// How long a broken watch keeps looking for a replica to resume on.
const RESUME_WITHIN: Duration = Duration::from_secs(30);

/// A watch that outlives the replica serving it: when its stream breaks
/// (rather than ends), it is reopened on another replica from the last
/// event passed through, so the client sees one unbroken watch.
struct ResumingWatch {
    delegate: GrpcDelegate,
    request: pb::ApiRequest,
    replica: String,
    frames: Option<Frames>,
    /// The last chunk passed through: its last line is the last event.
    last: Option<Bytes>,
    started: Instant,
}

impl ResumingWatch {
    fn into_stream(self) -> BodyStream {
        futures::stream::unfold(self, |mut watch| async move {
            loop {
                let frame = watch.frames.as_mut()?.next().await;
                match frame {
                    Some(Ok(pb::ApiResponseFrame { frame: Some(pb::api_response_frame::Frame::Chunk(bytes)) })) => {
                        if !bytes.is_empty() {
                            watch.last = Some(bytes.clone());
                        }
                        return Some((bytes, watch));
                    }
                    Some(Ok(_)) => {}
                    None => return None,
                    Some(Err(status)) => {
                        tracing::info!(delegate = %watch.delegate.name, replica = %watch.replica, %status, "watch broken; resuming on another replica");
                        watch.frames = None;
                        if let Some(error) = watch.reopen().await {
                            return Some((error, watch));
                        }
                    }
                }
            }
        })
        .boxed()
    }

    /// The request that continues the watch after what was passed through,
    /// or `None` when its time is up.
    fn continuation(&self) -> Option<pb::ApiRequest> {
        let mut request = self.request.clone();
        let Some(version) = self
            .last
            .as_deref()
            .and_then(crate::watch_event::last_resource_version)
        else {
            // Nothing passed through yet: the original request starts afresh.
            return Some(request);
        };
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (key, value) in form_urlencoded::parse(self.request.query.as_bytes()) {
            match &*key {
                "resourceVersion" | "resourceVersionMatch" | "sendInitialEvents" => {}
                "timeoutSeconds" => {
                    let total: u64 = value.parse().unwrap_or(0);
                    let left = total
                        .checked_sub(self.started.elapsed().as_secs())
                        .filter(|left| *left > 0)?;
                    query.append_pair("timeoutSeconds", &left.to_string());
                }
                _ => {
                    query.append_pair(&key, &value);
                }
            }
        }
        query.append_pair("resourceVersion", &version);
        request.query = query.finish();
        Some(request)
    }

    /// Reopens the watch on a live replica; `None` when it continues (or
    /// cannot, ending quietly), or the ERROR event to end it with.
    async fn reopen(&mut self) -> Option<Bytes> {
        self.delegate.mark_failed(&self.replica);
        let request = self.continuation()?;
        let deadline = Instant::now() + RESUME_WITHIN;
        let mut tried = vec![self.replica.clone()];
        while Instant::now() < deadline {
            let Some(mut replica) = self.delegate.pick(&tried) else {
                tried.clear();
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            match self.delegate.open(&mut replica, request.clone()).await {
                Ok((head, frames)) if head.status == 200 => {
                    tracing::info!(delegate = %self.delegate.name, replica = %replica.address, "watch resumed");
                    self.replica = replica.address;
                    self.frames = Some(frames);
                    return None;
                }
                Ok((_, frames)) => {
                    // Refused (most likely 410 Gone): the client gets the Status as an ERROR event.
                    let body: Vec<Bytes> = chunks(frames).collect().await;
                    let status: serde_json::Value =
                        serde_json::from_slice(&body.concat()).unwrap_or_default();
                    return Some(crate::watch_event::value_line(
                        crate::watch_event::ERROR,
                        &status,
                    ));
                }
                Err(why) => {
                    tracing::debug!(delegate = %self.delegate.name, replica = %replica.address, %why, "cannot resume the watch here");
                    self.delegate.mark_failed(&replica.address);
                    tried.push(replica.address);
                }
            }
        }
        tracing::warn!(delegate = %self.delegate.name, "no replica to resume a broken watch on; ending it");
        None
    }
}

/// The resourceVersion of the last watch event in `chunk` (one or more

#[async_trait::async_trait]
impl Handler for GrpcDelegate {
    async fn handle(&self, req: ApiRequest) -> ApiResponse {
        if req.info.verb == "watch" {
            return self.hub.watch(req, Arc::new(Direct(self.clone()))).await;
        }
        self.direct(req).await
    }
}

/// A link that opens every watch on the next server (the hub's way there).
struct Direct(GrpcDelegate);

#[async_trait::async_trait]
impl Handler for Direct {
    async fn handle(&self, req: ApiRequest) -> ApiResponse {
        self.0.direct(req).await
    }
}

impl GrpcDelegate {
    /// Sends a request to a replica, trying the next one while it never got there.
    async fn direct(&self, req: ApiRequest) -> ApiResponse {
        let started = std::time::Instant::now();
        let resp = self.send_to_any(req).await;
        crate::metrics::global().hop("delegation", started);
        resp
    }

    /// Sends a request to the first replica that takes it. The request is
    /// copied for a try only while another replica is left to retry on (a
    /// try consumes what it sends); the last try, the only one with a single
    /// replica, sends it without a copy.
    async fn send_to_any(&self, req: ApiRequest) -> ApiResponse {
        let mut request = Some(to_pb(req));
        let mut tried = Vec::new();
        let mut last_error = crate::Error::Delegate("no replica".into());
        while let Some(mut replica) = self.pick(&tried) {
            tried.push(replica.address.clone());
            let attempt = if self.any_untried(&tried) {
                request.clone()
            } else {
                request.take()
            };
            // A replica that joined after the last try was made: nothing left to send.
            let Some(attempt) = attempt else { break };
            match self.send(&mut replica, attempt).await {
                Ok(resp) => return resp,
                Err(why) => {
                    tracing::debug!(delegate = %self.name, replica = %replica.address, %why, "request failed before a response; trying another replica");
                    self.mark_failed(&replica.address);
                    last_error = why;
                }
            }
        }
        self.unavailable(&last_error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[tokio::test]
    async fn large_bodies_cross_a_few_at_a_time_and_small_ones_never_wait() {
        use futures::FutureExt;
        let body = |len: usize| {
            let resp = ApiResponse::bytes(StatusCode::OK, "application/json", vec![b'x'; len]);
            frames(resp, Vec::new())
        };
        let mut crossing = Vec::new();
        for _ in 0..LARGE_BODIES_AT_ONCE {
            let mut large = body(CHUNK_BYTES + 1);
            assert!(large.next().await.is_some(), "the head");
            assert!(large.next().await.is_some(), "a first chunk");
            crossing.push(large);
        }
        let mut waiting = body(CHUNK_BYTES + 1);
        assert!(waiting.next().await.is_some(), "the head goes at once");
        assert!(waiting.next().now_or_never().is_none(), "no turn is free");
        let mut small = body(CHUNK_BYTES);
        assert!(small.next().await.is_some() && small.next().await.is_some());
        // A body that ends or is reset (dropped) hands its turn on.
        crossing.pop();
        let chunk = waiting.next().await.expect("a chunk").expect("a frame");
        assert!(
            matches!(chunk.frame, Some(pb::api_response_frame::Frame::Chunk(c)) if c.len() == CHUNK_BYTES)
        );
    }

    /// Streams one chunk, then nothing; records when it is dropped.
    struct Endless(Arc<AtomicBool>);

    struct DropFlag(Arc<AtomicBool>);

    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[async_trait::async_trait]
    impl Handler for Endless {
        async fn handle(&self, req: ApiRequest) -> ApiResponse {
            let flag = DropFlag(self.0.clone());
            let first =
                futures::stream::once(
                    async move { Bytes::from(format!("user={}\n", req.user.name)) },
                );
            let forever = futures::stream::pending::<Bytes>().map(move |b| {
                let _keep = &flag;
                b
            });
            ApiResponse::stream(
                StatusCode::OK,
                "application/json",
                first.chain(forever).boxed(),
            )
        }
    }

    async fn serve(handler: Arc<dyn Handler>, tls: &TlsFiles, callers: &[&str]) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let service = DelegationService::new(
            "test-server",
            handler,
            Arc::new(Discovery::default()),
            callers.iter().map(|c| c.to_string()).collect(),
        );
        let server = link_server()
            .tls_config(tls.grpc_server())
            .unwrap()
            .add_service(service.into_server());
        tokio::spawn(
            server.serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        format!("https://127.0.0.1:{}", addr.port())
    }

    /// Answers with its request's body, five times over.
    struct Echo;

    #[async_trait::async_trait]
    impl Handler for Echo {
        async fn handle(&self, req: ApiRequest) -> ApiResponse {
            ApiResponse::bytes(StatusCode::OK, "application/json", req.body.repeat(5))
        }
    }

    fn request() -> ApiRequest {
        let user = UserInfo {
            name: "alice".into(),
            ..Default::default()
        };
        ApiRequest::new(
            Method::GET,
            "/api/v1/configmaps",
            "watch=true",
            HeaderMap::new(),
            Bytes::new(),
            user,
        )
    }

    #[tokio::test]
    async fn a_dropped_response_cancels_the_stream_on_the_server() {
        crate::tls::install_crypto_provider();
        let files = crate::testing::tls_files(&["kubechain-core-server", "kubechain-aggregator"]);
        let dropped = Arc::new(AtomicBool::new(false));
        let endpoint = serve(
            Arc::new(Endless(dropped.clone())),
            &files[0],
            &["kubechain-aggregator"],
        )
        .await;
        let delegate =
            GrpcDelegate::new("core-server", &[endpoint], "core-server", &files[1]).unwrap();
        let resp = delegate.handle(request()).await;
        assert_eq!(resp.status, StatusCode::OK);
        let Body::Stream(mut body) = resp.body else {
            panic!("expected a streamed body")
        };
        assert_eq!(body.next().await.unwrap(), Bytes::from("user=alice\n"));
        assert!(!dropped.load(Ordering::SeqCst));
        drop(body);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        while !dropped.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            dropped.load(Ordering::SeqCst),
            "the server kept streaming after the client went away"
        );
    }

    #[tokio::test]
    async fn bodies_larger_than_a_frame_and_a_chunk_cross_whole() {
        crate::tls::install_crypto_provider();
        let files = crate::testing::tls_files(&["kubechain-core-server", "kubechain-aggregator"]);
        let endpoint = serve(Arc::new(Echo), &files[0], &["kubechain-aggregator"]).await;
        let delegate =
            GrpcDelegate::new("core-server", &[endpoint], "core-server", &files[1]).unwrap();
        // Three frames up; three chunks, and many frames, down.
        let sent: Vec<u8> = (0..LINK_FRAME_BYTES as usize + CHUNK_BYTES / 3)
            .map(|i| (i % 251) as u8)
            .collect();
        let req = ApiRequest::new(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            "",
            HeaderMap::new(),
            Bytes::from(sent.clone()),
            UserInfo::default(),
        );
        let resp = delegate.handle(req).await;
        assert_eq!(resp.status, StatusCode::OK);
        let got = resp.into_bytes().await;
        assert!(got.len() > 2 * CHUNK_BYTES);
        assert_eq!(got, sent.repeat(5));
    }

    #[tokio::test]
    async fn a_request_a_dead_replica_never_got_goes_whole_to_a_live_one() {
        crate::tls::install_crypto_provider();
        let files = crate::testing::tls_files(&["kubechain-core-server", "kubechain-aggregator"]);
        let live = serve(Arc::new(Echo), &files[0], &["kubechain-aggregator"]).await;
        let dead = "https://127.0.0.1:1".to_string();
        let delegate =
            GrpcDelegate::new("core-server", &[dead, live], "core-server", &files[1]).unwrap();
        // Round robin: one request tries the dead replica first, the other the live one.
        for body in ["first", "second"] {
            let req = ApiRequest::new(
                Method::POST,
                "/api/v1/namespaces/default/configmaps",
                "",
                HeaderMap::new(),
                Bytes::from(body),
                UserInfo::default(),
            );
            let resp = delegate.handle(req).await;
            assert_eq!(resp.status, StatusCode::OK, "{body}");
            assert_eq!(resp.into_bytes().await, body.repeat(5).as_bytes());
        }
    }

    #[tokio::test]
    async fn callers_are_checked_and_unreachable_delegates_are_503() {
        crate::tls::install_crypto_provider();
        let files = crate::testing::tls_files(&["kubechain-core-server", "kubechain-intruder"]);
        let endpoint = serve(
            Arc::new(Endless(Arc::default())),
            &files[0],
            &["kubechain-aggregator"],
        )
        .await;
        let intruder =
            GrpcDelegate::new("core-server", &[endpoint], "core-server", &files[1]).unwrap();
        assert_eq!(
            intruder.handle(request()).await.status,
            StatusCode::SERVICE_UNAVAILABLE
        );
        let nowhere = GrpcDelegate::new(
            "core-server",
            &["https://127.0.0.1:1".to_string()],
            "core-server",
            &files[1],
        )
        .unwrap();
        let resp = nowhere.handle(request()).await;
        assert_eq!(resp.status, StatusCode::SERVICE_UNAVAILABLE);
        let status: serde_json::Value = serde_json::from_slice(&resp.into_bytes().await).unwrap();
        assert_eq!(status["reason"], "ServiceUnavailable");
    }

    #[test]
    fn the_last_event_of_a_chunk_gives_the_resume_point() {
        let plain = b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"7\"}}}\n\
                      {\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n";
        assert_eq!(
            crate::watch_event::last_resource_version(plain).as_deref(),
            Some("9")
        );
        let table = br#"{"type":"ADDED","object":{"kind":"Table","metadata":{"resourceVersion":"12"},"rows":[]}}"#;
        assert_eq!(
            crate::watch_event::last_resource_version(table).as_deref(),
            Some("12")
        );
        assert_eq!(
            crate::watch_event::last_resource_version(
                b"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\"}}\n"
            ),
            None
        );
    }

    #[tokio::test]
    async fn a_broken_watch_continues_after_its_last_event_within_its_timeout() {
        crate::tls::install_crypto_provider();
        let files = crate::testing::tls_files(&["kubechain-aggregator"]);
        let delegate = GrpcDelegate::new("core-server", &[], "core-server", &files[0]).unwrap();
        let mut request = to_pb(request());
        request.query = "watch=true&resourceVersion=3&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=600&labelSelector=a%3Db".into();
        let mut watch = ResumingWatch {
            delegate,
            request,
            replica: String::new(),
            frames: None,
            last: None,
            started: Instant::now(),
        };
        assert_eq!(
            watch.continuation().unwrap().query,
            watch.request.query,
            "nothing passed through: start afresh"
        );
        watch.last = Some(Bytes::from_static(
            b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"41\"}}}\n",
        ));
        let query = watch.continuation().unwrap().query;
        assert_eq!(
            query,
            "watch=true&timeoutSeconds=600&labelSelector=a%3Db&resourceVersion=41"
        );
        watch.started -= Duration::from_secs(600);
        assert!(watch.continuation().is_none(), "its time is up");
    }
}
