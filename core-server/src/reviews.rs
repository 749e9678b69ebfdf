//! Reviews: create-only kinds answered from the request itself, never
//! stored. `kubectl auth whoami` and `kubectl auth can-i` use them.

use std::sync::Arc;

use apimachinery::error::Result;
use apimachinery::group_version::GroupVersionKind;
use generic_server::filters::authorization::{Authorizer, MastersOnly};
use generic_server::request::{ApiRequest, UserInfo};
use generic_server::request_info::RequestInfo;
use generic_server::resource::Resource;
use generic_server::rest::CreateOnly;
use generic_server::server::ApiServer;
use generic_server::strategy::Strategy;
use k8s_openapi::api::{authentication::v1 as authn, authorization::v1 as authz};
use serde_json::{Value, json};

struct Unstored;
impl Strategy for Unstored {}

/// The review resources, for discovery and OpenAPI.
pub fn resources() -> Vec<Resource> {
    vec![
        Resource::builtin::<authn::SelfSubjectReview>(Unstored).verbs(&["create"]),
        Resource::builtin::<authn::TokenReview>(Unstored).verbs(&["create"]),
        Resource::builtin::<authz::LocalSubjectAccessReview>(Unstored).verbs(&["create"]),
        Resource::builtin::<authz::SelfSubjectAccessReview>(Unstored).verbs(&["create"]),
        Resource::builtin::<authz::SelfSubjectRulesReview>(Unstored).verbs(&["create"]),
        Resource::builtin::<authz::SubjectAccessReview>(Unstored).verbs(&["create"]),
    ]
}

/// Serves every review on `server`.
pub fn install(server: &ApiServer) {
    for r in resources() {
        let endpoint: Arc<dyn CreateOnly> = match r.kind.as_str() {
            "SelfSubjectReview" => Arc::new(WhoAmI),
            "TokenReview" => Arc::new(NoTokenReview),
            "SelfSubjectRulesReview" => Arc::new(Rules),
            _ => Arc::new(AccessReview),
        };
        server.add_create_only(
            &r,
            "",
            GroupVersionKind::new(&r.group, &r.version, &r.kind),
            endpoint,
        );
    }
}

fn user_json(user: &UserInfo) -> Value {
    json!({"username": user.name, "uid": user.uid, "groups": user.groups, "extra": user.extra})
}

/// `SelfSubjectReview`: who the request is authenticated as.
struct WhoAmI;

#[async_trait::async_trait]
impl CreateOnly for WhoAmI {
    async fn create(&self, req: &ApiRequest, mut obj: Value) -> Result<Value> {
        obj["status"] = json!({"userInfo": user_json(&req.user)});
        Ok(obj)
    }
}

/// `TokenReview`: tokens are checked by the front door; nothing to review here.
struct NoTokenReview;

#[async_trait::async_trait]
impl CreateOnly for NoTokenReview {
    async fn create(&self, _req: &ApiRequest, mut obj: Value) -> Result<Value> {
        obj["status"] = json!({"authenticated": false, "error": "token review is not supported by this server"});
        Ok(obj)
    }
}

/// The user a review asks about: the requester for self reviews, else the spec's.
fn subject(req: &ApiRequest, obj: &Value) -> UserInfo {
    if obj["kind"].as_str().is_some_and(|k| k.starts_with("Self")) {
        return req.user.clone();
    }
    let spec = &obj["spec"];
    UserInfo {
        name: spec["user"].as_str().unwrap_or_default().into(),
        uid: spec["uid"].as_str().unwrap_or_default().into(),
        groups: spec["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(str::to_string))
            .collect(),
        extra: Default::default(),
    }
}

/// `SubjectAccessReview` and its local and self variants: asks the authorizer.
struct AccessReview;

#[async_trait::async_trait]
impl CreateOnly for AccessReview {
    async fn create(&self, req: &ApiRequest, mut obj: Value) -> Result<Value> {
        let user = subject(req, &obj);
        let text = |v: &Value, k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (info, path) = match (
            obj.pointer("/spec/resourceAttributes"),
            obj.pointer("/spec/nonResourceAttributes"),
        ) {
            (Some(attrs), _) => {
                let info = RequestInfo {
                    is_resource_request: true,
                    verb: text(attrs, "verb"),
                    api_group: text(attrs, "group"),
                    api_version: text(attrs, "version"),
                    namespace: text(attrs, "namespace"),
                    resource: text(attrs, "resource"),
                    subresource: text(attrs, "subresource"),
                    name: text(attrs, "name"),
                    ..Default::default()
                };
                (info, String::new())
            }
            (None, Some(attrs)) => (
                RequestInfo {
                    verb: text(attrs, "verb"),
                    ..Default::default()
                },
                text(attrs, "path"),
            ),
            (None, None) => (RequestInfo::default(), String::new()),
        };
        obj["status"] = match MastersOnly.authorize(&user, &info, &path) {
            Ok(()) => json!({"allowed": true, "reason": "member of system:masters"}),
            Err(_) => json!({"allowed": false}),
        };
        Ok(obj)
    }
}

/// `SelfSubjectRulesReview`: everything for `system:masters`, health and version for everyone.
struct Rules;

#[async_trait::async_trait]
impl CreateOnly for Rules {
    async fn create(&self, req: &ApiRequest, mut obj: Value) -> Result<Value> {
        let public = json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version"]});
        obj["status"] = if req.user.in_group("system:masters") {
            json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}, public],
                "incomplete": false,
            })
        } else {
            json!({"resourceRules": [], "nonResourceRules": [public], "incomplete": false})
        };
        Ok(obj)
    }
}
