//! Authorization: decides whether a user may perform a request.

use crate::error::{Error, Reason, Result};
use crate::request::UserInfo;
use crate::request_info::RequestInfo;

/// Decides whether a request is allowed.
pub trait Authorizer: Send + Sync + 'static {
    /// Ok if allowed, a 403 Status otherwise.
    fn authorize(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<()>;
}

/// Paths everyone, anonymous included, may read.
const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];

/// Allows `system:masters` everything, and everyone the public paths.
pub struct MastersOnly;

impl Authorizer for MastersOnly {
    fn authorize(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<()> {
        if user.in_group("system:masters") {
            return Ok(());
        }
        if !info.is_resource_request && PUBLIC_PATHS.iter().any(|p| path == *p || path.starts_with(&format!("{p}/"))) {
            return Ok(());
        }
        Err(forbidden(user, info, path))
    }
}

/// kube's 403 message for a denied request.
pub fn forbidden(user: &UserInfo, info: &RequestInfo, path: &str) -> Error {
    let message = if info.is_resource_request {
        let resource = if info.subresource.is_empty() { info.resource.clone() } else { format!("{}/{}", info.resource, info.subresource) };
        let group_resource = if info.api_group.is_empty() { info.resource.clone() } else { format!("{}.{}", info.resource, info.api_group) };
        let scope = if info.namespace.is_empty() { "at the cluster scope".to_string() } else { format!("in the namespace {:?}", info.namespace) };
        let name = if info.name.is_empty() { String::new() } else { format!(" {:?}", info.name) };
        format!(
            "{group_resource}{name} is forbidden: User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
            user.name, info.verb, info.api_group
        )
    } else {
        format!("forbidden: User {:?} cannot {} path {path:?}", user.name, info.verb)
    };
    Error::new(Reason::Forbidden, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn masters_and_public_paths() {
        let admin = UserInfo { name: "admin".into(), groups: vec!["system:masters".into()], ..Default::default() };
        let info = RequestInfo::parse(&Method::GET, "/api/v1/namespaces/default/configmaps", "");
        assert!(MastersOnly.authorize(&admin, &info, "/api/v1/namespaces/default/configmaps").is_ok());
        let err = MastersOnly.authorize(&UserInfo::anonymous(), &info, "/api/v1/namespaces/default/configmaps").unwrap_err();
        assert_eq!(
            err.to_string(),
            "configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        );
        let health = RequestInfo::parse(&Method::GET, "/readyz", "");
        assert!(MastersOnly.authorize(&UserInfo::anonymous(), &health, "/readyz").is_ok());
    }
}
