//! Authentication: x509 client certificates, static bearer tokens, and
//! anonymous (health and version only). Identity headers a client sends are
//! never trusted.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use http::HeaderMap;

use crate::jwt::{BoundKind, BoundObject, Verified};
use crate::request::UserInfo;
use crate::storage::cacher::{ResourceCache, UID_FIELD};
use crate::tls::ClientCert;
use apimachinery::error::{Error, Reason, Result};

/// Paths anonymous users may reach.
const ANONYMOUS_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];

/// Decides who a request comes from, given its connection and headers:
/// the front door's first filter. [`Authenticator`] is the cluster's;
/// [`super::requestheader::RequestHeaderAuthenticator`] an aggregated server's.
#[async_trait::async_trait]
pub trait Authenticate: Send + Sync + 'static {
    /// The user, given the connection's client certificate, or a 401 Status.
    async fn authenticate(
        &self,
        client_cert: Option<&ClientCert>,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<UserInfo>;
}

#[async_trait::async_trait]
impl<T: Authenticate + ?Sized> Authenticate for Arc<T> {
    async fn authenticate(
        &self,
        client_cert: Option<&ClientCert>,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<UserInfo> {
        (**self).authenticate(client_cert, headers, path).await
    }
}

#[async_trait::async_trait]
impl Authenticate for Authenticator {
    async fn authenticate(
        &self,
        client_cert: Option<&ClientCert>,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<UserInfo> {
        Authenticator::authenticate(self, client_cert, headers, path)
    }
}

/// Who a request comes from, decided from its connection and headers.
#[derive(Default)]
pub struct Authenticator {
    tokens: HashMap<String, UserInfo>,
    service_accounts: Option<crate::jwt::Verifier>,
    accounts: Option<Arc<ResourceCache>>,
    pods: Option<Arc<ResourceCache>>,
    secrets: Option<Arc<ResourceCache>>,
    /// Service account tokens for the API whose signature already passed:
    /// the signature, the costly check, is made once per token (expiry and
    /// the existence of the account and the bound object, every time).
    verified: RwLock<HashMap<String, Verified>>,
}

/// Whether `cache` (none: fail closed) holds `namespace/name` with `uid`;
/// its objects are lean ones ([`crate::storage::cacher::uid_ingest`]'s, or
/// the Node authorizer's) with the uid in the field [`UID_FIELD`].
fn exists_with_uid(cache: Option<&ResourceCache>, namespace: &str, name: &str, uid: &str) -> bool {
    let Some(cache) = cache else {
        return false;
    };
    let key = format!("{}{namespace}/{name}", cache.prefix());
    !uid.is_empty()
        && cache.get(&key).is_some_and(|object| {
            object
                .fields
                .iter()
                .any(|(field, value)| field == UID_FIELD && value == uid)
        })
}

/// Most verified tokens remembered; past it the memory starts afresh.
const VERIFIED_TOKENS: usize = 10_000;

impl Authenticator {
    /// An authenticator accepting client certificates and the given tokens.
    pub fn new(tokens: HashMap<String, UserInfo>) -> Self {
        Authenticator {
            tokens,
            ..Default::default()
        }
    }

    /// Also accepts service account tokens signed by the matching key,
    /// while their ServiceAccount (by uid) is in `accounts`, the watch
    /// cache of ServiceAccounts: deleting or recreating it revokes them.
    pub fn with_service_accounts(
        mut self,
        verifier: crate::jwt::Verifier,
        accounts: Arc<ResourceCache>,
    ) -> Self {
        self.service_accounts = Some(verifier);
        self.accounts = Some(accounts);
        self
    }

    /// Also refuses tokens bound to a Pod or Secret once it is gone from
    /// `pods` or `secrets` (watch caches; their objects need only a uid).
    pub fn with_bound_objects(
        mut self,
        pods: Arc<ResourceCache>,
        secrets: Arc<ResourceCache>,
    ) -> Self {
        self.pods = Some(pods);
        self.secrets = Some(secrets);
        self
    }

    /// Whether the ServiceAccount a token names still exists with its uid,
    /// and so does the object the token is bound to.
    fn token_current(&self, user: &UserInfo, bound: Option<&BoundObject>) -> bool {
        let Some((namespace, name)) = user
            .name
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
        else {
            return false;
        };
        if !exists_with_uid(self.accounts.as_deref(), namespace, name, &user.uid) {
            return false;
        }
        let Some(object) = bound else {
            return true;
        };
        let cache = match object.kind {
            BoundKind::Pod => self.pods.as_deref(),
            BoundKind::Secret => self.secrets.as_deref(),
        };
        exists_with_uid(cache, namespace, &object.name, &object.uid)
    }

    /// Loads a kube-style static token file: `token,user,uid,"group1,group2"`
    /// per line; a line with an empty token or user is refused, as kube does.
    pub fn with_token_file(path: &Path) -> std::io::Result<Self> {
        let text = std::fs::read_to_string(path)?;
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let fields = split_csv(line);
            if fields.len() < 2 || fields[0].trim().is_empty() || fields[1].trim().is_empty() {
                return Err(std::io::Error::other(format!(
                    "{}: line {}: a token line needs a token and a user name",
                    path.display(),
                    number + 1
                )));
            }
        }
        let tokens = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .filter_map(|line| {
                let fields = split_csv(line);
                let (token, name) = (fields.first()?.clone(), fields.get(1)?.clone());
                let uid = fields.get(2).cloned().unwrap_or_default();
                let mut groups: Vec<String> = fields
                    .get(3)
                    .map(|g| g.split(',').map(str::to_string).collect())
                    .unwrap_or_default();
                groups.push("system:authenticated".into());
                Some((
                    token,
                    UserInfo {
                        name,
                        uid,
                        groups,
                        ..Default::default()
                    },
                ))
            })
            .collect();
        Ok(Authenticator {
            tokens,
            ..Default::default()
        })
    }

    /// The audiences the API server's own tokens are for (kube's `--api-audiences`).
    pub fn api_audiences(&self) -> Vec<String> {
        self.service_accounts
            .as_ref()
            .map(|v| vec![v.issuer().to_string()])
            .unwrap_or_default()
    }

    /// The user a bearer token stands for, and which of `audiences` (the
    /// API server's when empty) it is valid for: a TokenReview's answer.
    pub fn authenticate_token(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Result<(UserInfo, Vec<String>)> {
        let for_the_api = audiences.is_empty();
        if token.is_empty() {
            return Err(unauthorized());
        }
        if for_the_api {
            if let Some(remembered) = self.remembered(token) {
                return remembered.map(|user| (user, self.api_audiences()));
            }
        }
        let audiences = match audiences {
            [] => self.api_audiences(),
            some => some.to_vec(),
        };
        if let Some(user) = self.tokens.get(token) {
            // A static token is for whatever audience asks.
            return Ok((user.clone(), audiences));
        }
        let Some(verifier) = &self.service_accounts else {
            return Err(unauthorized());
        };
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        match verifier.verify_for(token, now, &audiences) {
            Ok(verified) if self.token_current(&verified.user, verified.bound.as_ref()) => {
                if for_the_api {
                    let mut known = self.verified.write().unwrap_or_else(|e| e.into_inner());
                    if known.len() >= VERIFIED_TOKENS {
                        known.clear();
                    }
                    known.insert(token.to_string(), verified.clone());
                }
                Ok((verified.user, verified.audiences))
            }
            _ => Err(unauthorized()),
        }
    }

    /// The user of a token for the API: a static one, or a service account
    /// token whose signature was verified before; `None` when it is neither.
    fn remembered(&self, token: &str) -> Option<Result<UserInfo>> {
        if let Some(user) = self.tokens.get(token) {
            return Some(Ok(user.clone()));
        }
        let known = self.verified.read().unwrap_or_else(|e| e.into_inner());
        let known = known.get(token)?;
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        Some(
            if known.expires > now && self.token_current(&known.user, known.bound.as_ref()) {
                Ok(known.user.clone())
            } else {
                Err(unauthorized())
            },
        )
    }

    /// Authenticates a request given the connection's client certificate.
    pub fn authenticate(
        &self,
        client_cert: Option<&ClientCert>,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<UserInfo> {
        if let Some(subject) = client_cert.and_then(|c| c.subject.as_ref()) {
            let mut groups = Vec::with_capacity(subject.organizations.len() + 1);
            groups.extend(subject.organizations.iter().cloned());
            groups.push("system:authenticated".into());
            return Ok(UserInfo {
                name: subject.common_name.clone(),
                groups,
                ..Default::default()
            });
        }
        if let Some(token) = bearer_token(headers) {
            let token = token?;
            return match self.remembered(&token) {
                Some(remembered) => remembered,
                None => self.authenticate_token(&token, &[]).map(|(user, _)| user),
            };
        }
        if ANONYMOUS_PATHS
            .iter()
            .any(|p| path == *p || path.starts_with(&format!("{p}/")))
        {
            return Ok(UserInfo::anonymous());
        }
        Err(unauthorized())
    }
}

/// The prefix of a bearer token sent as a WebSocket subprotocol (what
/// browsers, which cannot set `Authorization` on a WebSocket, send):
/// `base64url.bearer.authorization.k8s.io.<token, unpadded base64url>`.
const WEBSOCKET_TOKEN: &str = "base64url.bearer.authorization.k8s.io.";

/// A request's bearer token: from the `Authorization` header (401 for an
/// empty token or any other scheme, which never matches), else, on an
/// upgrade to a WebSocket, from its subprotocols (401 for one that does
/// not decode, or for two), as kube's authenticators read them; none
/// without either.
pub fn bearer_token(headers: &HeaderMap) -> Option<Result<Cow<'_, str>>> {
    let Some(auth) = headers.get(http::header::AUTHORIZATION) else {
        return websocket_token(headers);
    };
    // The scheme in any case, as kube's bearer token authenticator reads it.
    let token = auth
        .to_str()
        .ok()
        .and_then(|auth| auth.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|t| !t.is_empty());
    Some(token.map(Cow::Borrowed).ok_or_else(unauthorized))
}

/// Whether a request asks to be upgraded to a WebSocket.
fn is_websocket(headers: &HeaderMap) -> bool {
    let has = |name: http::header::HeaderName, want: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|v| v.trim().eq_ignore_ascii_case(want))
    };
    has(http::header::CONNECTION, "upgrade") && has(http::header::UPGRADE, "websocket")
}

/// The subprotocols a WebSocket upgrade offers.
fn subprotocols(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
}

/// The bearer token among a WebSocket upgrade's subprotocols.
fn websocket_token(headers: &HeaderMap) -> Option<Result<Cow<'_, str>>> {
    use base64::Engine as _;
    if !is_websocket(headers) {
        return None;
    }
    let mut tokens = subprotocols(headers).filter_map(|p| p.strip_prefix(WEBSOCKET_TOKEN));
    let encoded = tokens.next()?;
    if tokens.next().is_some() {
        return Some(Err(unauthorized()));
    }
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .filter(|token| !token.is_empty());
    Some(token.map(Cow::Owned).ok_or_else(unauthorized))
}

/// 401 Unauthorized.
pub fn unauthorized() -> Error {
    Error::new(Reason::Unauthorized, "Unauthorized")
}

/// Removes identity headers a client may not set.
pub fn strip_identity_headers(headers: &mut HeaderMap) {
    let names: Vec<_> = headers
        .keys()
        .filter(|n| {
            let n = n.as_str();
            n.starts_with("x-remote-") || n.starts_with("impersonate-")
        })
        .cloned()
        .collect();
    for name in names {
        headers.remove(name);
    }
    headers.remove(http::header::AUTHORIZATION);
    // A token offered as a WebSocket subprotocol goes too; the others stay.
    if subprotocols(headers).any(|p| p.starts_with(WEBSOCKET_TOKEN)) {
        let kept: Vec<String> = subprotocols(headers)
            .filter(|p| !p.starts_with(WEBSOCKET_TOKEN))
            .map(str::to_string)
            .collect();
        headers.remove(http::header::SEC_WEBSOCKET_PROTOCOL);
        if let Ok(value) = kept.join(", ").parse()
            && !kept.is_empty()
        {
            headers.insert(http::header::SEC_WEBSOCKET_PROTOCOL, value);
        }
    }
}

fn split_csv(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let (mut field, mut quoted) = (String::new(), false);
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    fields.push(field);
    fields.into_iter().map(|f| f.trim().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_anonymous() {
        let mut tokens = HashMap::new();
        tokens.insert(
            "t0k".to_string(),
            UserInfo {
                name: "bob".into(),
                ..Default::default()
            },
        );
        let auth = Authenticator::new(tokens);
        let mut headers = HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, "Bearer t0k".parse().unwrap());
        assert_eq!(
            auth.authenticate(None, &headers, "/api").unwrap().name,
            "bob"
        );
        headers.insert(http::header::AUTHORIZATION, "Bearer nope".parse().unwrap());
        assert_eq!(
            auth.authenticate(None, &headers, "/api")
                .unwrap_err()
                .code(),
            401
        );
        assert_eq!(
            auth.authenticate(None, &HeaderMap::new(), "/readyz")
                .unwrap()
                .name,
            "system:anonymous"
        );
        assert_eq!(
            auth.authenticate(None, &HeaderMap::new(), "/api/v1/pods")
                .unwrap_err()
                .code(),
            401
        );
    }

    #[test]
    fn a_certificate_names_its_subject_and_an_unreadable_one_nobody() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "team");
        let der = params.self_signed(&key).unwrap().der().to_vec();
        let auth = Authenticator::new(HashMap::new());
        let cert = ClientCert::new(vec![der]);
        let user = auth
            .authenticate(Some(&cert), &HeaderMap::new(), "/api")
            .unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["team", "system:authenticated"]);
        let unreadable = ClientCert::new(vec![b"not a certificate".to_vec()]);
        assert_eq!(unreadable.subject, None);
        assert_eq!(
            auth.authenticate(Some(&unreadable), &HeaderMap::new(), "/api")
                .unwrap_err()
                .code(),
            401
        );
    }

    #[test]
    fn identity_headers_are_stripped() {
        let mut headers = HeaderMap::new();
        headers.insert("x-remote-user", "admin".parse().unwrap());
        headers.insert("x-remote-group", "system:masters".parse().unwrap());
        headers.insert("impersonate-user", "x".parse().unwrap());
        headers.insert("accept", "application/json".parse().unwrap());
        strip_identity_headers(&mut headers);
        assert_eq!(headers.len(), 1);
    }

    #[test]
    fn token_file_lines() {
        assert_eq!(
            split_csv(r#"abc,alice,1,"a,b""#),
            vec!["abc", "alice", "1", "a,b"]
        );
    }

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(http::header::AUTHORIZATION, value.parse().unwrap());
            bearer_token(&headers).map(|t| t.map(Cow::into_owned).map_err(|e| e.code()))
        };
        for scheme in ["Bearer", "bearer", "BEARER"] {
            assert_eq!(with(&format!("{scheme} t0k")), Some(Ok("t0k".to_string())));
        }
        assert_eq!(with("Basic dXNlcg=="), Some(Err(401)));
        assert_eq!(with("Bearer "), Some(Err(401)));
        assert!(bearer_token(&HeaderMap::new()).is_none());
    }

    #[test]
    fn a_websocket_upgrade_may_carry_its_token_as_a_subprotocol() {
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("t0k?>");
        let upgrade = |protocols: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(
                http::header::CONNECTION,
                "keep-alive, Upgrade".parse().unwrap(),
            );
            headers.insert(http::header::UPGRADE, "websocket".parse().unwrap());
            headers.insert(
                http::header::SEC_WEBSOCKET_PROTOCOL,
                protocols.parse().unwrap(),
            );
            headers
        };
        let token = |headers: &HeaderMap| {
            bearer_token(headers).map(|t| t.map(Cow::into_owned).map_err(|e| e.code()))
        };
        let mut offered = upgrade(&format!(
            "v5.channel.k8s.io, {WEBSOCKET_TOKEN}{encoded}, v4.channel.k8s.io"
        ));
        assert_eq!(token(&offered), Some(Ok("t0k?>".to_string())));
        // Not passed on: the other subprotocols are.
        strip_identity_headers(&mut offered);
        assert_eq!(
            offered[http::header::SEC_WEBSOCKET_PROTOCOL],
            "v5.channel.k8s.io, v4.channel.k8s.io"
        );
        assert_eq!(token(&offered), None);
        // Two tokens, one that does not decode, an empty one: refused.
        let two = format!("{WEBSOCKET_TOKEN}{encoded},{WEBSOCKET_TOKEN}{encoded}");
        assert_eq!(token(&upgrade(&two)), Some(Err(401)));
        assert_eq!(
            token(&upgrade(&format!("{WEBSOCKET_TOKEN}!!"))),
            Some(Err(401))
        );
        assert_eq!(token(&upgrade(WEBSOCKET_TOKEN)), Some(Err(401)));
        // Only on an upgrade to a WebSocket; a header token comes first.
        let mut plain = upgrade(&format!("{WEBSOCKET_TOKEN}{encoded}"));
        plain.remove(http::header::UPGRADE);
        assert_eq!(token(&plain), None);
        let mut both = upgrade(&format!("{WEBSOCKET_TOKEN}{encoded}"));
        both.insert(http::header::AUTHORIZATION, "Bearer other".parse().unwrap());
        assert_eq!(token(&both), Some(Ok("other".to_string())));
    }
}
