//! Authentication: x509 client certificates, static bearer tokens, and
//! anonymous (health and version only). Identity headers a client sends are
//! never trusted.

use std::collections::HashMap;
use std::path::Path;

use http::HeaderMap;

use crate::request::UserInfo;
use crate::tls;
use apimachinery::error::{Error, Reason, Result};

/// Paths anonymous users may reach.
const ANONYMOUS_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];

/// Decides who a request comes from, given its connection and headers:
/// the front door's first filter. [`Authenticator`] is the cluster's;
/// [`super::requestheader::RequestHeaderAuthenticator`] an aggregated server's.
pub trait Authenticate: Send + Sync + 'static {
    /// The user, given the peer's certificate chain (DER, leaf first), or a 401 Status.
    fn authenticate(
        &self,
        peer_certs: Option<&[Vec<u8>]>,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<UserInfo>;
}

impl Authenticate for Authenticator {
    fn authenticate(
        &self,
        peer_certs: Option<&[Vec<u8>]>,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<UserInfo> {
        Authenticator::authenticate(self, peer_certs, headers, path)
    }
}

/// Who a request comes from, decided from its connection and headers.
#[derive(Default)]
pub struct Authenticator {
    tokens: HashMap<String, UserInfo>,
    service_accounts: Option<crate::jwt::Verifier>,
}

impl Authenticator {
    /// An authenticator accepting client certificates and the given tokens.
    pub fn new(tokens: HashMap<String, UserInfo>) -> Self {
        Authenticator {
            tokens,
            service_accounts: None,
        }
    }

    /// Also accepts service account tokens signed by the matching key.
    pub fn with_service_accounts(mut self, verifier: crate::jwt::Verifier) -> Self {
        self.service_accounts = Some(verifier);
        self
    }

    /// Loads a kube-style static token file: `token,user,uid,"group1,group2"` per line.
    pub fn with_token_file(path: &Path) -> std::io::Result<Self> {
        let text = std::fs::read_to_string(path)?;
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
            service_accounts: None,
        })
    }

    /// Authenticates a request given the peer's certificate chain (DER).
    pub fn authenticate(
        &self,
        peer_certs: Option<&[Vec<u8>]>,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<UserInfo> {
        if let Some(subject) = peer_certs
            .and_then(|c| c.first())
            .and_then(|c| tls::subject(c))
        {
            let mut groups = subject.organizations;
            groups.push("system:authenticated".into());
            return Ok(UserInfo {
                name: subject.common_name,
                groups,
                ..Default::default()
            });
        }
        if let Some(auth) = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        {
            let token = auth
                .strip_prefix("Bearer ")
                .map(str::trim)
                .unwrap_or_default();
            if let Some(user) = self.tokens.get(token) {
                return Ok(user.clone());
            }
            let now = time::OffsetDateTime::now_utc().unix_timestamp();
            return match &self.service_accounts {
                Some(verifier) => verifier.verify(token, now).map_err(|_| unauthorized()),
                None => Err(unauthorized()),
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
}
