//! TokenReview, answered where tokens are checked: the front door's own
//! authenticator says whether a token is valid, for whom, and for which
//! audiences (what an aggregated server or a webhook asks when it
//! delegates authentication).

use std::sync::Arc;

use apimachinery::error::Result;
use apimachinery::group_version::GroupVersionKind;
use generic_server::filters::authentication::Authenticator;
use generic_server::request::ApiRequest;
use generic_server::resource::Resource;
use generic_server::rest::{CreateOnly, Unstored};
use generic_server::server::ApiServer;
use k8s_openapi::api::authentication::v1::TokenReview;
use serde_json::{Value, json};

/// Answers `tokenreviews.authentication.k8s.io` on `server` with `authenticator`
/// (the resource itself is declared, for discovery, by the core server).
pub fn install(server: &ApiServer, authenticator: Arc<Authenticator>) {
    let resource = Resource::builtin::<TokenReview>(Unstored).verbs(&["create"]);
    let kind = GroupVersionKind::new(&resource.group, &resource.version, &resource.kind);
    server.add_create_only(&resource, "", kind, Arc::new(TokenReviews(authenticator)));
}

/// The TokenReview endpoint.
struct TokenReviews(Arc<Authenticator>);

#[async_trait::async_trait]
impl CreateOnly for TokenReviews {
    async fn create(&self, _req: &ApiRequest, mut obj: Value) -> Result<Value> {
        let token = obj["spec"]["token"].as_str().unwrap_or_default();
        let audiences: Vec<String> = obj["spec"]["audiences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        obj["status"] = match self.0.authenticate_token(token, &audiences) {
            Ok((user, audiences)) => json!({
                "authenticated": true,
                "user": {"username": user.name, "uid": user.uid, "groups": user.groups, "extra": user.extra},
                "audiences": audiences,
            }),
            Err(_) => json!({"authenticated": false, "error": "invalid bearer token"}),
        };
        Ok(obj)
    }
}
