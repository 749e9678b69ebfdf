//! One router for the non-resource paths a server serves beside its API:
//! each path added is answered by its handler on GET, and everything else
//! goes to the API. A feature adds its path here instead of wrapping the
//! server's handler in one more layer.

use std::sync::Arc;

use crate::request::{ApiRequest, ApiResponse, Handler};

/// Non-resource paths and their handlers, in front of the API.
pub struct Router {
    routes: Vec<(String, Arc<dyn Handler>)>,
    api: Arc<dyn Handler>,
}

impl Router {
    /// A router sending everything to `api`, until paths are added.
    pub fn new(api: Arc<dyn Handler>) -> Router {
        Router {
            routes: Vec::new(),
            api,
        }
    }

    /// Answers GETs of `path` with `handler`.
    pub fn route(mut self, path: &str, handler: Arc<dyn Handler>) -> Router {
        self.routes
            .push((path.trim_end_matches('/').to_string(), handler));
        self
    }
}

#[async_trait::async_trait]
impl Handler for Router {
    async fn handle(&self, req: ApiRequest) -> ApiResponse {
        let path = req.path.trim_end_matches('/');
        let routed = (req.method == http::Method::GET)
            .then(|| self.routes.iter().find(|(route, _)| route == path))
            .flatten();
        match routed {
            Some((_, handler)) => handler.handle(req).await,
            None => self.api.handle(req).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::UserInfo;
    use bytes::Bytes;
    use http::{Method, StatusCode};

    struct Says(&'static str);

    #[async_trait::async_trait]
    impl Handler for Says {
        async fn handle(&self, _req: ApiRequest) -> ApiResponse {
            ApiResponse::bytes(
                StatusCode::OK,
                "text/plain",
                Bytes::from_static(self.0.as_bytes()),
            )
        }
    }

    async fn answer(router: &Router, method: Method, path: &str) -> Vec<u8> {
        let req = ApiRequest::new(
            method,
            path,
            "",
            http::HeaderMap::new(),
            Bytes::new(),
            UserInfo::anonymous(),
        );
        router.handle(req).await.into_bytes().await.to_vec()
    }

    #[tokio::test]
    async fn a_routed_path_is_its_handlers_on_get_and_the_rest_is_the_apis() {
        let router = Router::new(Arc::new(Says("api"))).route("/openapi/v2", Arc::new(Says("v2")));
        assert_eq!(answer(&router, Method::GET, "/openapi/v2").await, b"v2");
        assert_eq!(answer(&router, Method::GET, "/openapi/v2/").await, b"v2");
        assert_eq!(answer(&router, Method::POST, "/openapi/v2").await, b"api");
        assert_eq!(answer(&router, Method::GET, "/openapi/v3").await, b"api");
        assert_eq!(answer(&router, Method::GET, "/api/v1/pods").await, b"api");
    }
}
