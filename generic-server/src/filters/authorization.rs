//! Authorization: decides whether a user may perform a request.

use crate::request::UserInfo;
use crate::request_info::RequestInfo;
use apimachinery::error::{Error, Reason, Result};

/// Decides whether a request is allowed.
pub trait Authorizer: Send + Sync + 'static {
    /// Ok if allowed, a 403 Status otherwise.
    fn authorize(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<()>;
}

/// Paths everyone, anonymous included, may read whatever the policy says
/// (kube's `--authorization-always-allow-paths`), so that probes work
/// before the bootstrap policy exists.
const ALWAYS_ALLOWED: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];
/// Paths every authenticated user may read (kube's `system:discovery`).
const DISCOVERY_PATHS: &[&str] = &["/api", "/apis", "/openapi"];
/// Reviews every authenticated user may create (kube's `system:basic-user`).
const SELF_REVIEWS: &[&str] = &[
    "selfsubjectreviews",
    "selfsubjectaccessreviews",
    "selfsubjectrulesreviews",
];

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

/// The policy of a server that keeps no RBAC objects (an aggregated
/// server's, until it delegates): `system:masters` may do everything;
/// authenticated users may read discovery and review themselves; everyone
/// may read health and version.
pub struct MastersOnly;

fn under(path: &str, prefixes: &[&str]) -> bool {
    prefixes
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")))
}

impl Authorizer for MastersOnly {
    fn authorize(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<()> {
        if user.in_group(super::rbac::SUPERUSERS) {
            return Ok(());
        }
        if !info.is_resource_request && always_allowed(path) {
            return Ok(());
        }
        if user.in_group("system:authenticated") {
            if !info.is_resource_request && under(path, DISCOVERY_PATHS) {
                return Ok(());
            }
            if info.verb == "create" && SELF_REVIEWS.contains(&info.resource.as_str()) {
                return Ok(());
            }
        }
        Err(forbidden(user, info, path, ""))
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn masters_and_public_paths() {
        let admin = UserInfo {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        let info = RequestInfo::parse(&Method::GET, "/api/v1/namespaces/default/configmaps", "");
        assert!(
            MastersOnly
                .authorize(&admin, &info, "/api/v1/namespaces/default/configmaps")
                .is_ok()
        );
        let err = MastersOnly
            .authorize(
                &UserInfo::anonymous(),
                &info,
                "/api/v1/namespaces/default/configmaps",
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        );
        let health = RequestInfo::parse(&Method::GET, "/readyz", "");
        assert!(
            MastersOnly
                .authorize(&UserInfo::anonymous(), &health, "/readyz")
                .is_ok()
        );
    }
}
