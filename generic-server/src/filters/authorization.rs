//! Authorization: decides whether a user may perform a request.

use crate::request::UserInfo;
use crate::request_info::RequestInfo;
use apimachinery::error::{Error, Reason, Result};

/// Decides whether a request is allowed.
#[async_trait::async_trait]
pub trait Authorizer: Send + Sync + 'static {
    /// Ok if allowed, a 403 Status otherwise.
    async fn authorize(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<()>;

    /// [`Authorizer::authorize`] with the reason the audit log records
    /// (`authorization.k8s.io/reason`): `Ok(reason)` when allowed, else
    /// the 403 and the reason.
    async fn authorize_with_reason(
        &self,
        user: &UserInfo,
        info: &RequestInfo,
        path: &str,
    ) -> std::result::Result<String, (Error, String)> {
        self.authorize(user, info, path)
            .await
            .map(|()| String::new())
            .map_err(|e| (e, String::new()))
    }
}

/// Paths everyone, anonymous included, may read whatever the policy says
/// (kube's `--authorization-always-allow-paths`), so that probes work
/// before the bootstrap policy exists.
const ALWAYS_ALLOWED: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];
/// Whether `path` is one of `prefixes` or under one.
fn under(path: &str, prefixes: &[&str]) -> bool {
    prefixes
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")))
}

/// Whether `path` (of a non-resource request) is always allowed.
pub fn always_allowed(path: &str) -> bool {
    under(path, ALWAYS_ALLOWED)
}

/// The request as RBAC reads it.
pub fn attributes<'a>(info: &'a RequestInfo, path: &'a str) -> apimachinery::rbac::Attributes<'a> {
    apimachinery::rbac::Attributes {
        verb: &info.verb,
        resource_request: info.is_resource_request,
        api_group: &info.api_group,
        resource: &info.resource,
        subresource: &info.subresource,
        name: &info.name,
        namespace: &info.namespace,
        path,
    }
}

/// kube's 403 for a denied request, with the authorizer's reason (if any) after it.
pub fn forbidden(user: &UserInfo, info: &RequestInfo, path: &str, reason: &str) -> Error {
    let message = if info.is_resource_request {
        let resource = if info.subresource.is_empty() {
            info.resource.clone()
        } else {
            format!("{}/{}", info.resource, info.subresource)
        };
        let group_resource = if info.api_group.is_empty() {
            info.resource.clone()
        } else {
            format!("{}.{}", info.resource, info.api_group)
        };
        let scope = if info.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {:?}", info.namespace)
        };
        let name = if info.name.is_empty() {
            String::new()
        } else {
            format!(" {:?}", info.name)
        };
        format!(
            "{group_resource}{name} is forbidden: User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
            user.name, info.verb, info.api_group
        )
    } else {
        format!(
            "forbidden: User {:?} cannot {} path {path:?}",
            user.name, info.verb
        )
    };
    if reason.is_empty() {
        Error::new(Reason::Forbidden, message)
    } else {
        Error::new(Reason::Forbidden, format!("{message}: {reason}"))
    }
}
