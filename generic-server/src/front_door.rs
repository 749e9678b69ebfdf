//! The HTTPS front door (actix-web on rustls) and its request pipeline:
//! request info, authentication, authorization, then the handler (or, for
//! `/metrics`, the front door's own metrics). The order is written once,
//! here.

use std::net::SocketAddr;
use std::sync::Arc;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use crate::codec;
use crate::filters::authentication::{Authenticate, strip_identity_headers};
use crate::filters::authorization::Authorizer;
use crate::metrics::Metrics;
use crate::request::{self, ApiRequest, ApiResponse, Body, Handler};

/// The peer's certificate chain (DER), captured when the connection opens.
#[derive(Clone)]
struct PeerCerts(Vec<Vec<u8>>);

/// The pipeline every front-door request goes through.
pub struct FrontDoor {
    authenticator: Box<dyn Authenticate>,
    authorizer: Box<dyn Authorizer>,
    handler: Arc<dyn Handler>,
    metrics: Metrics,
}

impl FrontDoor {
    /// A front door authenticating and authorizing before `handler`.
    pub fn new(
        authenticator: impl Authenticate,
        authorizer: Box<dyn Authorizer>,
        handler: Arc<dyn Handler>,
    ) -> Self {
        FrontDoor {
            authenticator: Box::new(authenticator),
            authorizer,
            handler,
            metrics: Metrics::default(),
        }
    }

    /// Runs the pipeline for one request.
    pub async fn serve(
        &self,
        peer_certs: Option<&[Vec<u8>]>,
        method: Method,
        path: &str,
        query: &str,
        mut headers: HeaderMap,
        body: Bytes,
    ) -> ApiResponse {
        let user = match self.authenticator.authenticate(peer_certs, &headers, path) {
            Ok(user) => user,
            Err(e) => return e.into(),
        };
        strip_identity_headers(&mut headers);
        let req = ApiRequest::new(method, path, query, headers, body, user);
        if let Err(e) = self.authorizer.authorize(&req.user, &req.info, &req.path) {
            tracing::debug!(user = %req.user.name, path = %req.path, "forbidden");
            return e.into();
        }
        tracing::trace!(audit_id = %req.audit_id, verb = %req.info.verb, path = %req.path, user = %req.user.name, "request");
        let counted = self.metrics.start(&req);
        let resp = if req.path == "/metrics" && req.method == Method::GET {
            ApiResponse::bytes(
                http::StatusCode::OK,
                Metrics::CONTENT_TYPE,
                self.metrics.render(),
            )
        } else {
            self.handler.handle(req).await
        };
        counted.done(resp.status.as_u16());
        resp
    }
}

/// Serves the front door on `addr` over TLS until the process stops.
pub async fn serve_https(
    addr: SocketAddr,
    tls: rustls::ServerConfig,
    door: Arc<FrontDoor>,
    workers: usize,
) -> std::io::Result<()> {
    HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(door.clone()))
            .default_service(web::to(entry))
    })
    .on_connect(|conn, ext| {
        type Tls = actix_tls::accept::rustls_0_23::TlsStream<actix_web::rt::net::TcpStream>;
        if let Some(tls) = conn.downcast_ref::<Tls>() {
            // Responses are written whole: never hold them back for an ACK.
            let _ = tls.get_ref().0.set_nodelay(true);
            if let Some(certs) = tls.get_ref().1.peer_certificates() {
                ext.insert(PeerCerts(certs.iter().map(|c| c.to_vec()).collect()));
            }
        }
    })
    .workers(workers)
    .shutdown_timeout(1)
    .keep_alive(std::time::Duration::from_secs(75))
    .client_request_timeout(std::time::Duration::from_secs(60))
    .bind_rustls_0_23(addr, tls)?
    .run()
    .await
}

async fn entry(
    req: HttpRequest,
    payload: web::Payload,
    door: web::Data<Arc<FrontDoor>>,
) -> HttpResponse {
    let body = match read_body(payload).await {
        Ok(body) => body,
        Err(resp) => return into_http(resp),
    };
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
    let resp = door
        .serve(
            certs.as_deref(),
            method,
            req.path(),
            req.query_string(),
            headers,
            body,
        )
        .await;
    into_http(resp)
}

/// Reads a body up to the API's limit; a larger one is a 413 Status.
async fn read_body(mut payload: web::Payload) -> Result<Bytes, ApiResponse> {
    let mut body = BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| {
            ApiResponse::from(crate::Error::bad_request(format!("reading body: {e}")))
        })?;
        if body.len() + chunk.len() > codec::MAX_BODY_BYTES {
            return Err(codec::too_large().into());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

fn into_http(resp: ApiResponse) -> HttpResponse {
    let status = actix_web::http::StatusCode::from_u16(resp.status.as_u16())
        .unwrap_or(actix_web::http::StatusCode::BAD_GATEWAY);
    let mut builder = HttpResponse::build(status);
    for (name, value) in &resp.headers {
        builder.append_header((name.as_str(), value.as_bytes()));
    }
    match resp.body {
        Body::Full(bytes) => builder.body(bytes),
        Body::Stream(stream) => {
            builder.streaming(request::coalesce(stream).map(Ok::<_, std::convert::Infallible>))
        }
    }
}
