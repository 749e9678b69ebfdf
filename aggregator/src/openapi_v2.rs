//! `/openapi/v2`, built from the `/openapi/v3` documents the whole chain
//! serves (built-ins, custom resources, aggregated APIs), each fetched again
//! only when its ETag changed, and rebuilt only when one of them did.

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::openapi::v2;
use bytes::Bytes;
use generic_server::discovery::Rendered;
use generic_server::request::{ApiRequest, ApiResponse, Handler};
use generic_server::server::cached;
use generic_server::version::KUBERNETES_VERSION;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::{Map, Value};

/// The protobuf media type `/openapi/v2` answers in (kubectl asks for its
/// older spelling, `…spec.v2@v1.0+protobuf`, which Go cannot parse back).
const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Serves `/openapi/v2` (a route of the front door's router), built from
/// the v3 documents `sources` serves.
pub struct OpenApiV2 {
    sources: Arc<dyn Handler>,
    cache: tokio::sync::Mutex<Cache>,
}

/// What the last build used and made.
#[derive(Default)]
struct Cache {
    /// Each group-version document by path: its ETag and its JSON (parsed
    /// only while the document is built, one at a time).
    sources: BTreeMap<String, (String, Bytes)>,
    /// The document as JSON and as protobuf.
    rendered: Option<(Rendered, Rendered)>,
}

impl OpenApiV2 {
    /// Answers `/openapi/v2` from what `sources` serves.
    pub fn new(sources: Arc<dyn Handler>) -> Self {
        OpenApiV2 {
            sources,
            cache: Default::default(),
        }
    }

    async fn get(&self, req: &ApiRequest, path: &str, etag: Option<&str>) -> ApiResponse {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(value) = etag.and_then(|e| HeaderValue::from_str(e).ok()) {
            headers.insert(header::IF_NONE_MATCH, value);
        }
        let sub = ApiRequest::new(
            Method::GET,
            path,
            "",
            headers,
            Bytes::new(),
            req.user.clone(),
        );
        self.sources.handle(sub).await
    }

    async fn serve(&self, req: ApiRequest) -> ApiResponse {
        let index = self.get(&req, "/openapi/v3", None).await;
        if !index.status.is_success() {
            return index;
        }
        let index: Value = serde_json::from_slice(&index.into_bytes().await).unwrap_or_default();
        let paths: Vec<String> = index
            .get("paths")
            .and_then(Value::as_object)
            .map(|paths| paths.keys().cloned().collect())
            .unwrap_or_default();

        let mut cache = self.cache.lock().await;
        let req = &req;
        let fetches = paths.iter().map(|path| {
            let etag = cache.sources.get(path).map(|(etag, _)| etag.as_str());
            let url = format!("/openapi/v3/{path}");
            async move { (path, self.get(req, &url, etag).await) }
        });
        let answers = futures::future::join_all(fetches).await;
        let mut sources = BTreeMap::new();
        let mut changed = cache.rendered.is_none() || cache.sources.len() != paths.len();
        for (path, resp) in answers {
            if resp.status == StatusCode::NOT_MODIFIED
                && let Some(kept) = cache.sources.remove(path)
            {
                sources.insert(path.clone(), kept);
                continue;
            }
            changed = true;
            if !resp.status.is_success() {
                // An aggregated API that is down leaves its schemas out.
                tracing::debug!(%path, status = %resp.status, "openapi v2: document unavailable");
                continue;
            }
            let etag = resp
                .headers
                .get(header::ETAG)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            sources.insert(path.clone(), (etag, resp.into_bytes().await));
        }
        cache.sources = sources;
        if changed {
            let (mut paths, mut definitions) = (Map::new(), Map::new());
            for (_, json) in cache.sources.values() {
                let document: Value = serde_json::from_slice(json).unwrap_or_default();
                v2::add_paths(&mut paths, &document);
                v2::add_definitions(&mut definitions, &document);
            }
            let document = v2::document(paths, definitions, KUBERNETES_VERSION);
            let json = Rendered::new(&document, "application/json");
            let protobuf = Rendered::bytes(proto::openapi_v2::encode(&document).into(), PROTOBUF);
            cache.rendered = Some((json, protobuf));
        }
        let Some((json, protobuf)) = &cache.rendered else {
            return apimachinery::Error::internal("no OpenAPI v2 document").into();
        };
        let wants_protobuf = req
            .header(header::ACCEPT)
            .is_some_and(|accept| accept.contains("protobuf"));
        cached(req, if wants_protobuf { protobuf } else { json })
    }
}

#[async_trait::async_trait]
impl Handler for OpenApiV2 {
    async fn handle(&self, req: ApiRequest) -> ApiResponse {
        self.serve(req).await
    }
}
