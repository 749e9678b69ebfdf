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

/// Decides whether a request is allowed. An authorizer gives its
/// [`Opinion`]; whether the request may go on, and kube's 403 when it may
/// not, follow from that.
#[async_trait::async_trait]
pub trait Authorizer: Send + Sync + 'static {
    /// This authorizer's answer (kube's `Authorize`): its opinion, or the
    /// error that kept it from forming one (a SubjectAccessReview that
    /// failed), which fails the request unless another authorizer in a
    /// [`Union`] decides.
    async fn opinion(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<Opinion>;

    /// Ok if allowed, a 403 Status (or the error the authorizer met) otherwise.
    async fn authorize(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<()> {
        self.authorize_with_reason(user, info, path)
            .await
            .map(drop)
            .map_err(|(e, _)| e)
    }

    /// [`Authorizer::authorize`] with the reason the audit log records
    /// (`authorization.k8s.io/reason`): `Ok(reason)` when allowed, else
    /// the refusal and the reason (none for an error).
    async fn authorize_with_reason(
        &self,
        user: &UserInfo,
        info: &RequestInfo,
        path: &str,
    ) -> std::result::Result<String, (Error, String)> {
        match self.opinion(user, info, path).await {
            Ok(Opinion::Allow(reason)) => Ok(reason),
            Ok(Opinion::Deny(reason) | Opinion::NoOpinion(reason)) => {
                Err((forbidden(user, info, path, &reason), reason))
            }
            Err(e) => Err((e, String::new())),
        }
    }
}

/// Authorizers asked in order (kube's `--authorization-mode=Node,RBAC`,
/// its `union` authorizer): the first that allows or denies decides; when
/// none does, the request is refused with every reason given, one a line,
/// or fails with the first error an authorizer met.
pub struct Union(pub Vec<Box<dyn Authorizer>>);

#[async_trait::async_trait]
impl Authorizer for Union {
    async fn opinion(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<Opinion> {
        let mut reasons = Vec::new();
        let mut failed = None;
        for authorizer in &self.0 {
            match authorizer.opinion(user, info, path).await {
                Ok(Opinion::NoOpinion(reason)) => {
                    if !reason.is_empty() {
                        reasons.push(reason);
                    }
                }
                Ok(decided) => return Ok(decided),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(Opinion::NoOpinion(reasons.join("\n"))),
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
        async fn opinion(&self, _: &UserInfo, _: &RequestInfo, _: &str) -> Result<Opinion> {
            Ok(self.0.clone())
        }
    }

    /// Cannot decide: its SubjectAccessReview failed.
    struct Fails;

    #[async_trait::async_trait]
    impl Authorizer for Fails {
        async fn opinion(&self, _: &UserInfo, _: &RequestInfo, _: &str) -> Result<Opinion> {
            Err(Error::internal("authorization: unreachable"))
        }
    }

    #[tokio::test]
    async fn an_authorizer_that_fails_fails_the_request_unless_another_decides() {
        let user = UserInfo {
            name: "bob".into(),
            ..Default::default()
        };
        let path = "/api/v1/namespaces/ns/pods";
        let info = RequestInfo::parse(&Method::GET, path, "");
        let (failed, reason) = Fails
            .authorize_with_reason(&user, &info, path)
            .await
            .unwrap_err();
        assert_eq!(failed.reason(), Reason::InternalError);
        assert_eq!(
            failed.to_string(),
            "Internal error occurred: authorization: unreachable"
        );
        assert_eq!(reason, "");
        let union = Union(vec![
            Box::new(Fails),
            Box::new(Says(Opinion::NoOpinion("not mine".into()))),
        ]);
        let failed = union.authorize(&user, &info, path).await.unwrap_err();
        assert_eq!(failed.reason(), Reason::InternalError);
        let union = Union(vec![
            Box::new(Fails),
            Box::new(Says(Opinion::Allow("RBAC: allowed".into()))),
        ]);
        assert!(union.authorize(&user, &info, path).await.is_ok());
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
            union.opinion(&user, &info, path).await.unwrap(),
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
