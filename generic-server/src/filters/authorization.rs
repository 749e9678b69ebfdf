//! Authorization: decides whether a user may perform a request.

use crate::request::UserInfo;
use crate::request_info::RequestInfo;
use apimachinery::error::{Error, Reason, Result};

/// One authorizer's answer in a chain (kube's `authorizer.Decision` with
/// its reason): the first Allow or Deny ends the chain, a NoOpinion passes
/// the request on to the next authorizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opinion {
    /// Allowed, with the reason the audit log records.
    Allow(String),
    /// Refused outright, with why.
    Deny(String),
    /// Neither: the next authorizer decides; why this one did not allow it.
    NoOpinion(String),
}

/// Decides whether a request is allowed.
#[async_trait::async_trait]
pub trait Authorizer: Send + Sync + 'static {
    /// This authorizer's answer in a chain ([`Union`]). By default:
    /// allowed, or no opinion with the reason [`Authorizer::authorize_with_reason`] gives.
    async fn opinion(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Opinion {
        match self.authorize_with_reason(user, info, path).await {
            Ok(reason) => Opinion::Allow(reason),
            Err((_, reason)) => Opinion::NoOpinion(reason),
        }
    }

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

/// Authorizers asked in order (kube's `--authorization-mode=Node,RBAC`,
/// its `union` authorizer): the first that allows or denies decides; when
/// none does, the request is refused with every reason given, one a line.
pub struct Union(pub Vec<Box<dyn Authorizer>>);

impl Union {
    /// The chain's decision with its reason.
    async fn decide(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Opinion {
        let mut reasons = Vec::new();
        for authorizer in &self.0 {
            match authorizer.opinion(user, info, path).await {
                Opinion::NoOpinion(reason) => {
                    if !reason.is_empty() {
                        reasons.push(reason);
                    }
                }
                decided => return decided,
            }
        }
        Opinion::NoOpinion(reasons.join("\n"))
    }
}

#[async_trait::async_trait]
impl Authorizer for Union {
    async fn opinion(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Opinion {
        self.decide(user, info, path).await
    }

    async fn authorize(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<()> {
        self.authorize_with_reason(user, info, path)
            .await
            .map(drop)
            .map_err(|(e, _)| e)
    }

    async fn authorize_with_reason(
        &self,
        user: &UserInfo,
        info: &RequestInfo,
        path: &str,
    ) -> std::result::Result<String, (Error, String)> {
        match self.decide(user, info, path).await {
            Opinion::Allow(reason) => Ok(reason),
            Opinion::Deny(reason) | Opinion::NoOpinion(reason) => {
                Err((forbidden(user, info, path, &reason), reason))
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    /// Always gives one opinion.
    struct Says(Opinion);

    #[async_trait::async_trait]
    impl Authorizer for Says {
        async fn opinion(&self, _: &UserInfo, _: &RequestInfo, _: &str) -> Opinion {
            self.0.clone()
        }

        async fn authorize(&self, _: &UserInfo, _: &RequestInfo, _: &str) -> Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_first_decision_wins_and_a_refusal_gives_every_reason() {
        let user = UserInfo {
            name: "system:node:n1".into(),
            ..Default::default()
        };
        let path = "/api/v1/namespaces/ns/secrets/db";
        let info = RequestInfo::parse(&Method::GET, path, "");
        let no = |r: &str| Box::new(Says(Opinion::NoOpinion(r.into()))) as Box<dyn Authorizer>;
        let union = Union(vec![
            no("no relationship found between node 'n1' and this object"),
            no(""),
        ]);
        let (denied, reason) = union
            .authorize_with_reason(&user, &info, path)
            .await
            .unwrap_err();
        assert_eq!(
            reason,
            "no relationship found between node 'n1' and this object"
        );
        assert_eq!(
            denied.to_string(),
            "secrets \"db\" is forbidden: User \"system:node:n1\" cannot get resource \"secrets\" in API group \"\" in the namespace \"ns\": no relationship found between node 'n1' and this object"
        );
        let union = Union(vec![no("first"), no("second")]);
        assert_eq!(
            union.opinion(&user, &info, path).await,
            Opinion::NoOpinion("first\nsecond".into())
        );
        let union = Union(vec![
            no("not mine"),
            Box::new(Says(Opinion::Allow("RBAC: allowed".into()))),
            Box::new(Says(Opinion::Deny("never asked".into()))),
        ]);
        assert_eq!(
            union
                .authorize_with_reason(&user, &info, path)
                .await
                .unwrap(),
            "RBAC: allowed"
        );
    }
}
