//! Impersonation, kube's: `Impersonate-User`, `-Group`, `-Uid` and
//! `-Extra-<key>` headers make a request run as someone else, once the
//! authorizer allows the requester the `impersonate` verb on each of
//! `users` (or `serviceaccounts`), `groups`, `uids` and `userextras/<key>`.

use std::collections::BTreeMap;

use http::HeaderMap;

use super::authorization::{Authorizer, forbidden};
use crate::request::UserInfo;
use crate::request_info::RequestInfo;
use apimachinery::error::{Error, Result};

/// The header naming the user to act as.
pub const USER: &str = "impersonate-user";
/// The header naming a group to act in (repeated for more).
pub const GROUP: &str = "impersonate-group";
/// The header naming the uid to act with.
pub const UID: &str = "impersonate-uid";
/// The prefix of headers naming extra attributes.
pub const EXTRA_PREFIX: &str = "impersonate-extra-";

/// One thing the requester asks to act as, and what authorizes it.
struct Ask {
    resource: &'static str,
    subresource: String,
    api_group: &'static str,
    namespace: String,
    name: String,
}

fn header_text(name: &str, value: &http::HeaderValue) -> Result<String> {
    value
        .to_str()
        .map(str::to_string)
        .map_err(|_| Error::bad_request(format!("invalid {name} header: not printable ASCII")))
}

/// Decodes `%XX` escapes (kube escapes extra keys that are not header tokens).
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = key
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the request asks to impersonate anyone.
pub fn requested(headers: &HeaderMap) -> bool {
    headers
        .keys()
        .any(|n| n.as_str().starts_with("impersonate-"))
}

/// The user a request acts as: the requester's impersonation, if it asks
/// for one and every part of it is authorized; `None` when it asks for none.
pub async fn impersonate(
    authorizer: &dyn Authorizer,
    requester: &UserInfo,
    headers: &HeaderMap,
) -> Result<Option<UserInfo>> {
    if !requested(headers) {
        return Ok(None);
    }
    let mut asks = Vec::new();
    let mut user = UserInfo::default();
    let requested_user = match headers.get(USER) {
        Some(v) => header_text(USER, v)?,
        None => String::new(),
    };
    let mut service_account_groups = Vec::new();
    if !requested_user.is_empty() {
        match requested_user
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains(':'))
        {
            Some((namespace, name)) => {
                asks.push(Ask {
                    resource: "serviceaccounts",
                    subresource: String::new(),
                    api_group: "",
                    namespace: namespace.into(),
                    name: name.into(),
                });
                service_account_groups = vec![
                    "system:serviceaccounts".to_string(),
                    format!("system:serviceaccounts:{namespace}"),
                ];
            }
            None => asks.push(Ask {
                resource: "users",
                subresource: String::new(),
                api_group: "",
                namespace: String::new(),
                name: requested_user.clone(),
            }),
        }
        user.name = requested_user.clone();
    }
    for value in headers.get_all(GROUP) {
        let group = header_text(GROUP, value)?;
        asks.push(Ask {
            resource: "groups",
            subresource: String::new(),
            api_group: "",
            namespace: String::new(),
            name: group.clone(),
        });
        user.groups.push(group);
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) else {
            continue;
        };
        let key = unescape(key);
        let value = header_text(name.as_str(), value)?;
        asks.push(Ask {
            resource: "userextras",
            subresource: key.clone(),
            api_group: "authentication.k8s.io",
            namespace: String::new(),
            name: value.clone(),
        });
        extra.entry(key).or_default().push(value);
    }
    if let Some(v) = headers.get(UID) {
        let uid = header_text(UID, v)?;
        if !uid.is_empty() {
            asks.push(Ask {
                resource: "uids",
                subresource: String::new(),
                api_group: "authentication.k8s.io",
                namespace: String::new(),
                name: uid.clone(),
            });
            user.uid = uid;
        }
    }
    if requested_user.is_empty() {
        let what: Vec<String> = asks
            .iter()
            .map(|a| format!("{} {:?}", a.resource, a.name))
            .collect();
        return Err(Error::internal(format!(
            "requested [{}] without impersonating a user",
            what.join(" ")
        )));
    }
    for ask in &asks {
        let info = RequestInfo {
            is_resource_request: true,
            verb: "impersonate".into(),
            api_group: ask.api_group.into(),
            api_version: "v1".into(),
            resource: ask.resource.into(),
            subresource: ask.subresource.clone(),
            namespace: ask.namespace.clone(),
            name: ask.name.clone(),
            ..Default::default()
        };
        if let Err(denied) = authorizer.authorize(requester, &info, "").await {
            tracing::debug!(user = %requester.name, impersonating = %ask.name, "impersonation refused");
            return Err(
                if denied.reason() == apimachinery::error::Reason::Forbidden {
                    denied
                } else {
                    forbidden(requester, &info, "", "")
                },
            );
        }
    }
    if user.groups.is_empty() {
        user.groups = service_account_groups;
    }
    let marker = if user.name == "system:anonymous" {
        "system:unauthenticated"
    } else {
        "system:authenticated"
    };
    if !user
        .groups
        .iter()
        .any(|g| g == "system:authenticated" || g == "system:unauthenticated")
    {
        user.groups.push(marker.into());
    }
    user.extra = extra;
    Ok(Some(user))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::authorization::Opinion;

    /// Allows impersonating users named `alice` and groups named `team`.
    struct AliceAndTeam;
    #[async_trait::async_trait]
    impl Authorizer for AliceAndTeam {
        async fn opinion(&self, _: &UserInfo, info: &RequestInfo, _: &str) -> Result<Opinion> {
            Ok(match (info.resource.as_str(), info.name.as_str()) {
                ("users", "alice") | ("groups", "team") => Opinion::Allow(String::new()),
                _ => Opinion::NoOpinion(String::new()),
            })
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    #[tokio::test]
    async fn authorized_impersonation_runs_as_the_impersonated_user() {
        let bob = UserInfo {
            name: "bob".into(),
            ..Default::default()
        };
        assert_eq!(
            impersonate(&AliceAndTeam, &bob, &headers(&[]))
                .await
                .unwrap(),
            None
        );
        let alice = impersonate(
            &AliceAndTeam,
            &bob,
            &headers(&[("Impersonate-User", "alice"), ("Impersonate-Group", "team")]),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.groups, ["team", "system:authenticated"]);
    }

    #[tokio::test]
    async fn each_part_must_be_authorized() {
        let bob = UserInfo {
            name: "bob".into(),
            ..Default::default()
        };
        let err = impersonate(
            &AliceAndTeam,
            &bob,
            &headers(&[("Impersonate-User", "carol")]),
        )
        .await
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "users \"carol\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        );
        let err = impersonate(
            &AliceAndTeam,
            &bob,
            &headers(&[
                ("Impersonate-User", "alice"),
                ("Impersonate-Group", "system:masters"),
            ]),
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("groups \"system:masters\" is forbidden"),
            "{err}"
        );
        let err = impersonate(
            &AliceAndTeam,
            &bob,
            &headers(&[("Impersonate-User", "system:serviceaccount:sec:bob")]),
        )
        .await
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "serviceaccounts \"bob\" is forbidden: User \"bob\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"sec\""
        );
        let err = impersonate(
            &AliceAndTeam,
            &bob,
            &headers(&[
                ("Impersonate-Extra-Scopes", "x"),
                ("Impersonate-User", "alice"),
            ]),
        )
        .await
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "userextras.authentication.k8s.io \"x\" is forbidden: User \"bob\" cannot impersonate resource \"userextras/scopes\" in API group \"authentication.k8s.io\" at the cluster scope"
        );
        let err = impersonate(
            &AliceAndTeam,
            &bob,
            &headers(&[("Impersonate-Group", "team")]),
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), 500, "{err}");
    }
}
