//! Front-proxy authentication ("requestheader"): how an aggregated server
//! trusts the aggregator, as kube's `x509request` and `headerrequest`
//! authenticators do (`k8s.io/apiserver/pkg/authentication/request/headerrequest`).
//!
//! A request whose client certificate chains to the front-proxy CA
//! (`--requestheader-client-ca-file`) and whose common name is allowed
//! (`--requestheader-allowed-names`, empty: any) acts as the user its
//! headers name: `X-Remote-User`, `X-Remote-Uid`, `X-Remote-Group`
//! (repeated), `X-Remote-Extra-<key>` (percent-encoded keys). A certificate
//! signed by the cluster CA authenticates as its own subject, so an admin
//! can call the server directly; bearer tokens are asked about at the front
//! door (a TokenReview, [`DelegatedTokens`]) when it is given, and anonymous
//! requests are decided as by [`Authenticator`]. Identity headers on any other request are
//! never trusted (the front door strips them).

use std::collections::BTreeMap;
use std::path::PathBuf;

use http::HeaderMap;

use super::authentication::{Authenticate, Authenticator, bearer_token, unauthorized};
use super::delegated::DelegatedTokens;
use crate::request::UserInfo;
use crate::tls::{self, ChainVerifier};
use apimachinery::error::Result;

/// An aggregated server's front-proxy options, with kube's names and its
/// defaults for delegated authentication.
#[derive(clap::Args, Debug, Clone)]
pub struct RequestHeaderOptions {
    /// PEM CA that signs the front proxy's (the aggregator's) client certificate.
    #[arg(long, env = "KUBECHAIN_REQUESTHEADER_CLIENT_CA_FILE")]
    pub requestheader_client_ca_file: PathBuf,
    /// Common names the front proxy's certificate may have, comma-separated; empty: any the CA signed.
    #[arg(
        long,
        env = "KUBECHAIN_REQUESTHEADER_ALLOWED_NAMES",
        value_delimiter = ','
    )]
    pub requestheader_allowed_names: Vec<String>,
    /// Headers naming the user (the first one present wins).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-User")]
    pub requestheader_username_headers: Vec<String>,
    /// Headers carrying the user's uid.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Uid")]
    pub requestheader_uid_headers: Vec<String>,
    /// Headers carrying the user's groups (each value one group).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Group")]
    pub requestheader_group_headers: Vec<String>,
    /// Header prefixes of the user's extra attributes (`<prefix><key>: <value>`).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Extra-")]
    pub requestheader_extra_headers_prefix: Vec<String>,
}

impl RequestHeaderOptions {
    /// Reads the front-proxy CA and builds the authenticator; `client_ca`
    /// (PEM, the cluster CA) signs the certificates that authenticate as
    /// their own subject.
    pub fn authenticator(
        &self,
        client_ca: &[u8],
    ) -> std::result::Result<RequestHeaderAuthenticator, crate::Error> {
        let path = &self.requestheader_client_ca_file;
        let ca = std::fs::read(path).map_err(|source| crate::Error::read(path, source))?;
        let lower = |names: &[String]| {
            names
                .iter()
                .map(|n| n.trim().to_ascii_lowercase())
                .filter(|n| !n.is_empty())
                .collect()
        };
        Ok(RequestHeaderAuthenticator {
            front_proxy: ChainVerifier::new(&ca)?,
            front_proxy_ca: ca,
            client_ca: ChainVerifier::new(client_ca)?,
            allowed_names: self
                .requestheader_allowed_names
                .iter()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect(),
            username_headers: lower(&self.requestheader_username_headers),
            uid_headers: lower(&self.requestheader_uid_headers),
            group_headers: lower(&self.requestheader_group_headers),
            extra_prefixes: lower(&self.requestheader_extra_headers_prefix),
            fallback: Authenticator::default(),
            tokens: None,
        })
    }
}

/// Authenticates the front proxy's requests by its certificate and headers,
/// and everyone else as [`Authenticator`] does.
pub struct RequestHeaderAuthenticator {
    front_proxy: ChainVerifier,
    front_proxy_ca: Vec<u8>,
    client_ca: ChainVerifier,
    allowed_names: Vec<String>,
    username_headers: Vec<String>,
    uid_headers: Vec<String>,
    group_headers: Vec<String>,
    extra_prefixes: Vec<String>,
    fallback: Authenticator,
    /// Where bearer tokens are asked about (the front door), if anywhere.
    tokens: Option<DelegatedTokens>,
}

impl RequestHeaderAuthenticator {
    /// Also authenticates bearer tokens, by asking the front door.
    pub fn with_token_reviews(mut self, tokens: DelegatedTokens) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// The front-proxy CA (PEM), which the TLS configuration must also trust
    /// ([`crate::tls::TlsFiles::https_server_trusting`]).
    pub fn front_proxy_ca(&self) -> &[u8] {
        &self.front_proxy_ca
    }

    /// Whether the leaf's common name may act as the front proxy.
    fn allowed(&self, chain: &[Vec<u8>]) -> bool {
        let Some(subject) = chain.first().and_then(|c| tls::subject(c)) else {
            return false;
        };
        self.allowed_names.is_empty() || self.allowed_names.contains(&subject.common_name)
    }

    /// The user the headers name; `None` without a user name.
    fn user_from_headers(&self, headers: &HeaderMap) -> Option<UserInfo> {
        let values = |names: &[String]| -> Vec<String> {
            names
                .iter()
                .flat_map(|n| headers.get_all(n.as_str()))
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .filter(|v| !v.trim().is_empty())
                .collect()
        };
        let name = values(&self.username_headers).into_iter().next()?;
        let uid = values(&self.uid_headers)
            .into_iter()
            .next()
            .unwrap_or_default();
        let mut groups = values(&self.group_headers);
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (header, value) in headers {
            if let Some(key) = self
                .extra_prefixes
                .iter()
                .find_map(|p| header.as_str().strip_prefix(p.as_str()))
            {
                extra
                    .entry(unescape(key))
                    .or_default()
                    .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
            }
        }
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        Some(UserInfo {
            name,
            uid,
            groups,
            extra,
        })
    }
}

#[async_trait::async_trait]
impl Authenticate for RequestHeaderAuthenticator {
    async fn authenticate(
        &self,
        peer_certs: Option<&[Vec<u8>]>,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<UserInfo> {
        if let Some(chain) = peer_certs.filter(|c| !c.is_empty()) {
            if self.front_proxy.verifies(chain)
                && self.allowed(chain)
                && let Some(user) = self.user_from_headers(headers)
            {
                return Ok(user);
            }
            if !self.client_ca.verifies(chain) {
                tracing::debug!(
                    path,
                    "client certificate is neither an allowed front proxy nor signed by the client CA"
                );
                return Err(unauthorized());
            }
        }
        if let (Some(tokens), Some(token)) = (&self.tokens, bearer_token(headers)) {
            return tokens.authenticate(token?).await;
        }
        self.fallback.authenticate(peer_certs, headers, path)
    }
}

/// Decodes a percent-encoded extra key (kube's `url.PathUnescape`); a
/// malformed key is kept as sent.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit));
            let Some(byte) =
                hex.and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok())
            else {
                return key.to_string();
            };
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };

    /// A CA: its PEM and an issuer of client certificates.
    fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let pem = params.self_signed(&key).unwrap().pem();
        (pem, Issuer::new(params, key))
    }

    /// A client certificate chain (DER) for a CN and organizations.
    fn client(issuer: &Issuer<'static, KeyPair>, cn: &str, orgs: &[&str]) -> Vec<Vec<u8>> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        vec![params.signed_by(&key, issuer).unwrap().der().to_vec()]
    }

    struct Fixture {
        front_proxy: Issuer<'static, KeyPair>,
        cluster: Issuer<'static, KeyPair>,
        auth: RequestHeaderAuthenticator,
    }

    fn fixture(extra_args: &[&str]) -> Fixture {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Args {
            #[command(flatten)]
            requestheader: RequestHeaderOptions,
        }
        let (front_pem, front_proxy) = ca("front-proxy-ca");
        let (cluster_pem, cluster) = ca("cluster-ca");
        let file =
            std::env::temp_dir().join(format!("front-proxy-ca-{}.crt", uuid::Uuid::new_v4()));
        std::fs::write(&file, front_pem).unwrap();
        let mut argv = vec![
            "test".to_string(),
            format!("--requestheader-client-ca-file={}", file.display()),
        ];
        argv.extend(extra_args.iter().map(|a| a.to_string()));
        let auth = Args::parse_from(argv)
            .requestheader
            .authenticator(cluster_pem.as_bytes())
            .unwrap();
        std::fs::remove_file(file).unwrap();
        Fixture {
            front_proxy,
            cluster,
            auth,
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        map
    }

    #[tokio::test]
    async fn front_proxy_headers_name_the_user() {
        let f = fixture(&["--requestheader-allowed-names=front-proxy-client,aggregator"]);
        let cert = client(&f.front_proxy, "front-proxy-client", &[]);
        let h = headers(&[
            ("X-Remote-User", "alice"),
            ("X-Remote-Uid", "42"),
            ("X-Remote-Group", "devs"),
            ("X-Remote-Group", "system:masters"),
            ("X-Remote-Extra-Acme.com%2Fproject", "a"),
            ("X-Remote-Extra-Acme.com%2Fproject", "b"),
            ("X-Remote-Extra-Scopes", "view"),
            ("X-Remote-Extra-Bad%zz", "kept"),
        ]);
        let user = f.auth.authenticate(Some(&cert), &h, "/apis").await.unwrap();
        assert_eq!((user.name.as_str(), user.uid.as_str()), ("alice", "42"));
        assert_eq!(
            user.groups,
            ["devs", "system:masters", "system:authenticated"]
        );
        assert_eq!(user.extra["acme.com/project"], ["a", "b"]);
        assert_eq!(user.extra["scopes"], ["view"]);
        assert_eq!(user.extra["bad%zz"], ["kept"]);
        // Without a user name the front proxy's request is not authenticated.
        let err = f
            .auth
            .authenticate(Some(&cert), &headers(&[("X-Remote-Group", "g")]), "/apis")
            .await
            .unwrap_err();
        assert_eq!(err.code(), 401);
    }

    #[tokio::test]
    async fn allowed_names_restrict_the_front_proxy() {
        let f = fixture(&["--requestheader-allowed-names=front-proxy-client"]);
        let h = headers(&[("X-Remote-User", "alice")]);
        let other = client(&f.front_proxy, "someone-else", &[]);
        assert_eq!(
            f.auth
                .authenticate(Some(&other), &h, "/apis")
                .await
                .unwrap_err()
                .code(),
            401
        );
        let any = fixture(&[]);
        let other = client(&any.front_proxy, "someone-else", &[]);
        assert_eq!(
            any.auth
                .authenticate(Some(&other), &h, "/apis")
                .await
                .unwrap()
                .name,
            "alice"
        );
    }

    #[tokio::test]
    async fn cluster_certificates_are_their_subject_and_headers_are_ignored() {
        let f = fixture(&[]);
        let admin = client(&f.cluster, "kubernetes-admin", &["system:masters"]);
        let user = f
            .auth
            .authenticate(
                Some(&admin),
                &headers(&[("X-Remote-User", "mallory")]),
                "/apis",
            )
            .await
            .unwrap();
        assert_eq!(user.name, "kubernetes-admin");
        assert_eq!(user.groups, ["system:masters", "system:authenticated"]);
    }

    #[tokio::test]
    async fn other_certificates_and_anonymous_requests() {
        let f = fixture(&[]);
        let (_, stranger) = ca("front-proxy-ca");
        let forged = client(&stranger, "front-proxy-client", &[]);
        let h = headers(&[("X-Remote-User", "alice")]);
        assert_eq!(
            f.auth
                .authenticate(Some(&forged), &h, "/apis")
                .await
                .unwrap_err()
                .code(),
            401
        );
        assert_eq!(
            f.auth
                .authenticate(None, &h, "/apis")
                .await
                .unwrap_err()
                .code(),
            401
        );
        assert_eq!(
            f.auth
                .authenticate(None, &HeaderMap::new(), "/healthz")
                .await
                .unwrap()
                .name,
            "system:anonymous"
        );
    }

    #[tokio::test]
    async fn header_names_are_configurable() {
        let f = fixture(&[
            "--requestheader-username-headers=X-User,X-Login",
            "--requestheader-group-headers=X-Groups",
            "--requestheader-extra-headers-prefix=X-Extra-",
        ]);
        let cert = client(&f.front_proxy, "front-proxy-client", &[]);
        let h = headers(&[
            ("X-Remote-User", "ignored"),
            ("X-Login", "bob"),
            ("X-Groups", "ops"),
            ("X-Extra-Team", "blue"),
        ]);
        let user = f.auth.authenticate(Some(&cert), &h, "/apis").await.unwrap();
        assert_eq!(
            (
                user.name.as_str(),
                user.groups[0].as_str(),
                user.extra["team"][0].as_str()
            ),
            ("bob", "ops", "blue")
        );
    }

    #[tokio::test]
    async fn extra_keys_are_path_unescaped() {
        assert_eq!(unescape("example.org%2Ffoo%20bar"), "example.org/foo bar");
        assert_eq!(unescape("plain+key"), "plain+key");
        assert_eq!(unescape("trailing%2"), "trailing%2");
    }
}
