//! The plain-HTTP listener of a server: its health for kubelet or docker
//! probes and, when asked, its metrics for a Prometheus on a private
//! network. It sits beside the pipeline, not in it, and is its only way in
//! without TLS.

use std::sync::Arc;

use crate::metrics::{Metrics, global};
use crate::request::{ApiRequest, Handler, UserInfo};

/// Serves the process's health (`/livez`, `/readyz`, `/healthz` and their
/// single checks, answered by `health` as for an anonymous GET) over plain
/// HTTP, for kubelet or docker probes, and with `plain_metrics` its
/// metrics at `/metrics`, for a Prometheus on a private network. Nothing
/// else is served there. Returns once listening.
pub fn serve(
    addr: std::net::SocketAddr,
    health: Arc<dyn Handler>,
    plain_metrics: bool,
) -> crate::Result<std::net::SocketAddr> {
    use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
    let server = HttpServer::new(move || {
        let health = health.clone();
        let metrics = web::get().to(|| async {
            HttpResponse::Ok()
                .content_type(Metrics::CONTENT_TYPE)
                .body(global().render())
        });
        App::new()
            .service(
                web::resource("/metrics")
                    .guard(actix_web::guard::fn_guard(move |_| plain_metrics))
                    .route(metrics),
            )
            .default_service(web::get().to(move |req: HttpRequest| {
                let health = health.clone();
                async move { probe(&*health, req.path(), req.query_string()).await }
            }))
    })
    .workers(1)
    .disable_signals()
    .bind(addr)
    .map_err(|e| crate::Error::Listen(addr, Arc::new(e)))?;
    let bound = server.addrs().first().copied().unwrap_or(addr);
    actix_rt::spawn(server.run());
    tracing::info!(listen = %bound, plain_metrics, "serving health over plain HTTP");
    Ok(bound)
}

/// Whether `path` is a health endpoint (`/readyz`, `/livez/etcd`, ...).
fn is_health(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz"].iter().any(|endpoint| {
        path.strip_prefix(endpoint)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// A health endpoint's answer from `health`; anything else is 404.
async fn probe(health: &dyn Handler, path: &str, query: &str) -> actix_web::HttpResponse {
    if !is_health(path) {
        return actix_web::HttpResponse::NotFound().body("404 page not found\n");
    }
    let req = ApiRequest::new(
        http::Method::GET,
        path,
        query,
        http::HeaderMap::new(),
        bytes::Bytes::new(),
        UserInfo::anonymous(),
    );
    crate::pipeline::into_http(health.handle(req).await)
}
