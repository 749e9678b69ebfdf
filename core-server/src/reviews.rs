//! Reviews: create-only kinds answered from the request itself and the
//! authorizers (the Node authorizer, then the RBAC policy), never stored. `kubectl auth whoami` and `kubectl auth can-i
//! [--list]` use them.

use std::sync::Arc;

use apimachinery::error::{Error, FieldError, Result};
use apimachinery::group_version::GroupVersionKind;
use apimachinery::rbac::Decision;
use generic_server::filters::authorization::Opinion;
use generic_server::filters::node::NodeAuthorizer;
use generic_server::filters::rbac::{Rbac, SUPERUSERS};
use generic_server::request::{ApiRequest, UserInfo};
use generic_server::request_info::RequestInfo;
use generic_server::resource::Resource;
use generic_server::rest::{CreateOnly, Unstored};
use generic_server::server::ApiServer;
use k8s_openapi::api::{authentication::v1 as authn, authorization::v1 as authz};
use serde_json::{Value, json};

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

/// Serves every review on `server`, answering access reviews as the front
/// door authorizes: by `node`, then `rbac` (kube's `Node,RBAC`).
pub fn install(server: &ApiServer, node: Arc<NodeAuthorizer>, rbac: Arc<Rbac>) {
    for r in resources() {
        let endpoint: Arc<dyn CreateOnly> = match r.kind.as_str() {
            "SelfSubjectReview" => Arc::new(WhoAmI),
            // The front door, which checks tokens, answers TokenReviews.
            "TokenReview" => continue,
            "SelfSubjectRulesReview" => Arc::new(Rules(rbac.clone())),
            _ => Arc::new(AccessReview {
                node: node.clone(),
                rbac: rbac.clone(),
            }),
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

/// `SubjectAccessReview` and its local and self variants: asks the authorizers.
struct AccessReview {
    node: Arc<NodeAuthorizer>,
    rbac: Arc<Rbac>,
}

impl AccessReview {
    /// The union's decision: the Node authorizer's, unless it has no
    /// opinion, then RBAC's; a denial gives both reasons.
    fn decide(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Decision {
        let not_node = match self.node.decide(user, info, path) {
            Opinion::Allow(reason) => return Decision::Allow(reason),
            Opinion::Deny(reason) => return Decision::Deny(reason),
            Opinion::NoOpinion(reason) => reason,
        };
        match self.rbac.decide(user, info, path) {
            Decision::Deny(reason) => {
                let reasons: Vec<&str> = [not_node.as_str(), reason.as_str()]
                    .into_iter()
                    .filter(|r| !r.is_empty())
                    .collect();
                Decision::Deny(reasons.join("\n"))
            }
            allowed => allowed,
        }
    }
}

#[async_trait::async_trait]
impl CreateOnly for AccessReview {
    async fn create(&self, req: &ApiRequest, mut obj: Value) -> Result<Value> {
        let causes = invalid_access_review(&obj);
        if !causes.is_empty() {
            let kind = obj["kind"].as_str().unwrap_or_default().to_string();
            return Err(Error::invalid("authorization.k8s.io", &kind, "", causes));
        }
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
                let namespace = text(attrs, "namespace");
                let info = RequestInfo {
                    is_resource_request: true,
                    verb: text(attrs, "verb"),
                    api_group: text(attrs, "group"),
                    api_version: text(attrs, "version"),
                    namespace,
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
        obj["status"] = match self.decide(&user, &info, &path) {
            Decision::Allow(reason) if reason.is_empty() => json!({"allowed": true}),
            Decision::Allow(reason) => json!({"allowed": true, "reason": reason}),
            Decision::Deny(reason) if reason.is_empty() => json!({"allowed": false}),
            Decision::Deny(reason) => json!({"allowed": false, "reason": reason}),
        };
        Ok(obj)
    }
}

/// What is wrong with an access review, as kube's validation says it: one
/// of resource or non-resource attributes, someone to ask about, no
/// metadata but a local review's namespace, which is the only namespace
/// the local review may ask about.
fn invalid_access_review(obj: &Value) -> Vec<FieldError> {
    let kind = obj["kind"].as_str().unwrap_or_default();
    let local = kind == "LocalSubjectAccessReview";
    let spec = &obj["spec"];
    let present = |key: &str| spec.get(key).is_some_and(|v| !v.is_null());
    let (resource, non_resource) = (
        present("resourceAttributes"),
        present("nonResourceAttributes"),
    );
    let mut causes = Vec::new();
    if resource && non_resource {
        causes.push(FieldError::invalid(
            "spec.nonResourceAttributes",
            spec["nonResourceAttributes"].clone(),
            "cannot be specified in combination with resourceAttributes",
        ));
    }
    if !resource && !non_resource {
        causes.push(FieldError::invalid(
            "spec.resourceAttributes",
            Value::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    let unnamed = |key: &str| spec[key].as_str().unwrap_or_default().is_empty();
    let no_groups = spec["groups"].as_array().is_none_or(Vec::is_empty);
    if !kind.starts_with("Self") && unnamed("user") && no_groups {
        causes.push(FieldError::invalid(
            "spec.user",
            spec["user"].as_str().unwrap_or_default(),
            "at least one of user or group must be specified",
        ));
    }
    let namespace = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let set_metadata = obj["metadata"].as_object().is_some_and(|meta| {
        meta.iter().any(|(key, value)| {
            key != "managedFields" && !(local && key == "namespace") && !is_zero(value)
        })
    });
    if set_metadata {
        let detail = if local {
            "must be empty except for namespace"
        } else {
            "must be empty"
        };
        causes.push(FieldError::invalid(
            "metadata",
            obj["metadata"].clone(),
            detail,
        ));
    }
    if local && resource {
        let asked = spec["resourceAttributes"]["namespace"]
            .as_str()
            .unwrap_or_default();
        if asked != namespace {
            causes.push(FieldError::invalid(
                "spec.resourceAttributes.namespace",
                asked,
                "must match metadata.namespace",
            ));
        }
    }
    if local && non_resource {
        causes.push(FieldError::invalid(
            "spec.nonResourceAttributes",
            spec["nonResourceAttributes"].clone(),
            "disallowed on this kind of request",
        ));
    }
    causes
}

/// Whether a JSON value is its Go field's zero value (null, "", 0, false,
/// or empty), which kube's semantic equality does not tell from unset.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// `SelfSubjectRulesReview`: the rules the requester holds in the
/// namespace asked about (everything for `system:masters`).
struct Rules(Arc<Rbac>);

#[async_trait::async_trait]
impl CreateOnly for Rules {
    async fn create(&self, req: &ApiRequest, mut obj: Value) -> Result<Value> {
        let namespace = obj["spec"]["namespace"].as_str().unwrap_or_default();
        let held = self.0.rules_for(&req.user, namespace);
        let mut resource_rules = Vec::new();
        let mut non_resource_rules = Vec::new();
        if req.user.in_group(SUPERUSERS) {
            resource_rules.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
            non_resource_rules.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
        }
        for rule in held.rules {
            match rule.non_resource_urls.filter(|u| !u.is_empty()) {
                Some(urls) => {
                    non_resource_rules.push(json!({"verbs": rule.verbs, "nonResourceURLs": urls}))
                }
                None => {
                    let mut r = json!({
                        "verbs": rule.verbs,
                        "apiGroups": rule.api_groups.unwrap_or_default(),
                        "resources": rule.resources.unwrap_or_default(),
                    });
                    if let Some(names) = rule.resource_names.filter(|n| !n.is_empty()) {
                        r["resourceNames"] = json!(names);
                    }
                    resource_rules.push(r);
                }
            }
        }
        let mut status = json!({
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": !held.errors.is_empty(),
        });
        if !held.errors.is_empty() {
            status["evaluationError"] = json!(held.errors.join(", "));
        }
        obj["status"] = status;
        Ok(obj)
    }
}
