//! Front-proxy authentication ("requestheader"): how an aggregated server
//! trusts the aggregator, as kube's `x509request` and `headerrequest`
//! authenticators do (`k8s.io/apiserver/pkg/authentication/request/headerrequest`).
//!
//! A request whose client certificate chains to the front-proxy CA and
//! whose common name is allowed (empty: any) acts as the user its headers
//! name: `X-Remote-User`, `X-Remote-Uid`, `X-Remote-Group` (repeated),
//! `X-Remote-Extra-<key>` (percent-encoded keys). The CA, names and headers
//! come from flags (`--requestheader-client-ca-file`, ...) or, as
//! k8s.io/apiserver does by default, from the ConfigMap the front door
//! publishes, `kube-system/extension-apiserver-authentication`, followed
//! while the server runs ([`RequestHeaderAuthenticator::follow`]). A
//! certificate signed by the cluster CA authenticates as its own subject,
//! so an admin can call the server directly; bearer tokens are asked about
//! at the front door (a TokenReview, [`DelegatedTokens`]) when it is given,
//! and anonymous requests are decided as by [`Authenticator`]. Identity
//! headers on any other request are
//! never trusted (the front door strips them).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http::HeaderMap;
use serde_json::Value;

use super::authentication::{Authenticate, Authenticator, bearer_token, unauthorized};
use super::delegated::{DelegatedTokens, FrontDoor};
use crate::health::HealthCheck;
use crate::request::UserInfo;
use crate::tls::{ChainVerifier, ClientCert, ClientRoots};
use apimachinery::error::Result;

/// Where the front door publishes how it proxies (kube's name and place).
pub const AUTHENTICATION_CONFIG_MAP: &str =
    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";
/// How often the published configuration is read again.
const FOLLOW_PERIOD: Duration = Duration::from_secs(5);
/// How long the front door may be unreachable before `/readyz` fails.
const STALE_AFTER: Duration = Duration::from_secs(30);

/// An aggregated server's front-proxy options, with kube's names and its
/// defaults for delegated authentication.
#[derive(clap::Args, Debug, Clone)]
pub struct RequestHeaderOptions {
    /// PEM CA that signs the front proxy's (the aggregator's) client
    /// certificate. Without it, the CA, the allowed names and the headers
    /// are read from `kube-system/extension-apiserver-authentication` at
    /// the front door, and followed while the server runs.
    #[arg(long, env = "KUBECHAIN_REQUESTHEADER_CLIENT_CA_FILE")]
    pub requestheader_client_ca_file: Option<PathBuf>,
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
    /// Builds the authenticator; `client_ca` (PEM, the cluster CA) signs
    /// the certificates that authenticate as their own subject. Without it
    /// the CA is the one the cluster publishes (`client-ca-file`), and
    /// without a front-proxy CA file the front proxy's trust is too: each
    /// is unknown (refused) until [`RequestHeaderAuthenticator::follow`]
    /// reads it.
    pub fn authenticator(
        &self,
        client_ca: Option<&[u8]>,
    ) -> std::result::Result<RequestHeaderAuthenticator, crate::Error> {
        let mut trusted = Trusted::default();
        if let Some(pem) = client_ca {
            trusted.client_ca = Some(ClientCa::new(pem.to_vec())?);
        }
        if let Some(path) = &self.requestheader_client_ca_file {
            let ca = std::fs::read(path).map_err(|source| crate::Error::read(path, source))?;
            trusted.front_proxy = Some(Arc::new(FrontProxyTrust::new(
                ca,
                &self.requestheader_allowed_names,
                &self.requestheader_username_headers,
                &self.requestheader_uid_headers,
                &self.requestheader_group_headers,
                &self.requestheader_extra_headers_prefix,
            )?));
        }
        Ok(RequestHeaderAuthenticator {
            roots: Arc::new(ClientRoots::new(&trusted.bundles())?),
            fixed: Fixed {
                front_proxy: trusted.front_proxy.is_some(),
                client_ca: trusted.client_ca.is_some(),
            },
            trusted: Arc::new(RwLock::new(trusted)),
            fallback: Authenticator::default(),
            tokens: None,
        })
    }
}

/// What a server trusts now: the front proxy, and the CA whose client
/// certificates authenticate as their subject (kube's `client-ca-file`).
#[derive(Default, Clone)]
struct Trusted {
    front_proxy: Option<Arc<FrontProxyTrust>>,
    client_ca: Option<ClientCa>,
}

impl Trusted {
    /// The CAs the TLS listener accepts client certificates of.
    fn bundles(&self) -> Vec<&[u8]> {
        let front_proxy = self.front_proxy.as_ref().map(|t| t.ca.as_slice());
        let client_ca = self.client_ca.as_ref().map(|c| c.pem.as_slice());
        front_proxy.into_iter().chain(client_ca).collect()
    }

    /// Whether both trust the same CAs, names and headers.
    fn same(&self, other: &Trusted) -> bool {
        let proxies = match (&self.front_proxy, &other.front_proxy) {
            (Some(a), Some(b)) => a.same(b),
            (None, None) => true,
            _ => false,
        };
        let pem = |t: &Trusted| t.client_ca.as_ref().map(|c| c.pem.clone());
        proxies && pem(self) == pem(other)
    }
}

/// The CA whose client certificates authenticate as their subject.
#[derive(Clone)]
struct ClientCa {
    pem: Vec<u8>,
    verifier: ChainVerifier,
}

impl ClientCa {
    fn new(pem: Vec<u8>) -> std::result::Result<Self, crate::Error> {
        Ok(ClientCa {
            verifier: ChainVerifier::new(&pem)?,
            pem,
        })
    }
}

/// Which trust came from flags, and so is not followed.
#[derive(Debug, Clone, Copy)]
struct Fixed {
    front_proxy: bool,
    client_ca: bool,
}

/// What makes a request the front proxy's: the CA of its certificate, the
/// names it may have, and the headers it names the user in (the
/// `requestheader-*` keys of kube's published ConfigMap).
#[derive(Debug)]
pub struct FrontProxyTrust {
    ca: Vec<u8>,
    verifier: ChainVerifier,
    allowed_names: Vec<String>,
    username_headers: Vec<String>,
    uid_headers: Vec<String>,
    group_headers: Vec<String>,
    extra_prefixes: Vec<String>,
}

impl FrontProxyTrust {
    /// Trust in the front proxy from its CA (PEM), allowed names and headers.
    pub fn new(
        ca: Vec<u8>,
        allowed_names: &[String],
        username_headers: &[String],
        uid_headers: &[String],
        group_headers: &[String],
        extra_prefixes: &[String],
    ) -> std::result::Result<Self, crate::Error> {
        let lower = |names: &[String]| {
            names
                .iter()
                .map(|n| n.trim().to_ascii_lowercase())
                .filter(|n| !n.is_empty())
                .collect()
        };
        Ok(FrontProxyTrust {
            verifier: ChainVerifier::new(&ca)?,
            ca,
            allowed_names: allowed_names
                .iter()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect(),
            username_headers: lower(username_headers),
            uid_headers: lower(uid_headers),
            group_headers: lower(group_headers),
            extra_prefixes: lower(extra_prefixes),
        })
    }

    /// Trust as `kube-system/extension-apiserver-authentication` publishes
    /// it (its `data`); `None` when it names no front-proxy CA.
    pub fn from_published(data: &Value) -> std::result::Result<Option<Self>, crate::Error> {
        let Some(ca) = data["requestheader-client-ca-file"]
            .as_str()
            .filter(|ca| !ca.trim().is_empty())
        else {
            return Ok(None);
        };
        // Each list is a JSON array in a string, as kube writes them.
        let list = |key: &str| -> std::result::Result<Vec<String>, crate::Error> {
            match data[key].as_str() {
                None | Some("") => Ok(Vec::new()),
                Some(text) => serde_json::from_str(text)
                    .map_err(|e| crate::Error::Tls(format!("{key} is not a JSON list: {e}"))),
            }
        };
        let headers =
            |key: &str, default: &str| -> std::result::Result<Vec<String>, crate::Error> {
                let found = list(key)?;
                Ok(if found.is_empty() {
                    vec![default.to_string()]
                } else {
                    found
                })
            };
        Self::new(
            ca.as_bytes().to_vec(),
            &list("requestheader-allowed-names")?,
            &headers("requestheader-username-headers", "X-Remote-User")?,
            &headers("requestheader-uid-headers", "X-Remote-Uid")?,
            &headers("requestheader-group-headers", "X-Remote-Group")?,
            &headers("requestheader-extra-headers-prefix", "X-Remote-Extra-")?,
        )
        .map(Some)
    }

    /// Whether the leaf's common name may act as the front proxy.
    fn allowed(&self, cert: &ClientCert) -> bool {
        let Some(subject) = &cert.subject else {
            return false;
        };
        self.allowed_names.is_empty() || self.allowed_names.contains(&subject.common_name)
    }

    /// Whether both hold the same CA, names and headers.
    fn same(&self, other: &FrontProxyTrust) -> bool {
        self.ca == other.ca
            && self.allowed_names == other.allowed_names
            && self.username_headers == other.username_headers
            && self.uid_headers == other.uid_headers
            && self.group_headers == other.group_headers
            && self.extra_prefixes == other.extra_prefixes
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

/// Authenticates the front proxy's requests by its certificate and headers,
/// and everyone else as [`Authenticator`] does.
pub struct RequestHeaderAuthenticator {
    /// The trust in force: the front proxy's (`None` until known: its
    /// requests refused) and the client CA's.
    trusted: Arc<RwLock<Trusted>>,
    /// What came from flags.
    fixed: Fixed,
    /// The TLS listener's client CAs: the cluster's and the front proxy's.
    roots: Arc<ClientRoots>,
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

    /// The client CAs the HTTPS listener must check certificates with
    /// ([`crate::tls::TlsFiles::https_server_with`]): they follow the trust.
    pub fn client_roots(&self) -> Arc<ClientRoots> {
        self.roots.clone()
    }

    /// Whether everything trusted came from flags: nothing to follow.
    pub fn is_fixed(&self) -> bool {
        self.fixed.front_proxy && self.fixed.client_ca
    }

    /// The trust in force now.
    fn current(&self) -> Trusted {
        self.trusted
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads the trust the front door publishes now and every few seconds
    /// from then on, in a task, as kube's delegated authentication follows
    /// `kube-system/extension-apiserver-authentication`: a rotated CA or
    /// changed names take effect without a restart. Until it is first
    /// read, front-proxy requests are refused; when it cannot be read, the
    /// last trust read stays. The check it returns passes while it is known
    /// and the front door answered within the last 30 s.
    pub fn follow(&self, front_door: Arc<FrontDoor>) -> HealthCheck {
        let (trusted, roots, fixed) = (self.trusted.clone(), self.roots.clone(), self.fixed);
        let last_read = Arc::new(std::sync::Mutex::new(None::<std::time::Instant>));
        let read_at = last_read.clone();
        tokio::spawn(async move {
            let mut complained = false;
            loop {
                let known = trusted.read().unwrap_or_else(|e| e.into_inner()).clone();
                match read_published(&front_door, &known, fixed).await {
                    Ok(found) => {
                        complained = false;
                        *read_at.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some(std::time::Instant::now());
                        if !known.same(&found) {
                            match roots.trust(&found.bundles()) {
                                Ok(()) => {
                                    tracing::info!(
                                        front_proxy = found.front_proxy.is_some(),
                                        client_ca = found.client_ca.is_some(),
                                        "following the cluster's published trust"
                                    );
                                    *trusted.write().unwrap_or_else(|e| e.into_inner()) = found;
                                }
                                Err(error) => {
                                    tracing::warn!(%error, "the published CAs")
                                }
                            }
                        }
                    }
                    Err(error) if !complained => {
                        complained = true;
                        tracing::warn!(%error, "reading {AUTHENTICATION_CONFIG_MAP} (kubechain register binds extension-apiserver-authentication-reader)");
                    }
                    Err(_) => {}
                }
                // Until the front proxy's trust is known, ask again soon.
                let known = trusted
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .front_proxy
                    .is_some();
                let wait = if known {
                    FOLLOW_PERIOD
                } else {
                    Duration::from_secs(1)
                };
                tokio::time::sleep(wait).await;
            }
        });
        let trusted = self.trusted.clone();
        Arc::new(move || {
            let known = trusted
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .front_proxy
                .is_some();
            let age = last_read
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .map(|at| at.elapsed());
            Box::pin(async move {
                match age {
                    _ if !known => Err(crate::Error::NotReady(format!(
                        "the front proxy's trust ({AUTHENTICATION_CONFIG_MAP}) is not known yet"
                    ))),
                    Some(age) if age <= STALE_AFTER => Ok(()),
                    _ => Err(crate::Error::NotReady(format!(
                        "the front door has not answered for {STALE_AFTER:?}"
                    ))),
                }
            })
        })
    }
}

/// The trust published at the front door now, with what came from flags
/// kept as `known` holds it.
async fn read_published(
    front_door: &FrontDoor,
    known: &Trusted,
    fixed: Fixed,
) -> std::result::Result<Trusted, String> {
    let config_map = front_door
        .get(AUTHENTICATION_CONFIG_MAP)
        .await
        .map_err(|e| e.to_string())?;
    let data = &config_map["data"];
    let mut found = known.clone();
    if !fixed.front_proxy {
        found.front_proxy = FrontProxyTrust::from_published(data)
            .map_err(|e| e.to_string())?
            .map(Arc::new);
    }
    if !fixed.client_ca {
        found.client_ca = match data["client-ca-file"].as_str() {
            Some(pem) if !pem.trim().is_empty() => {
                Some(ClientCa::new(pem.as_bytes().to_vec()).map_err(|e| e.to_string())?)
            }
            _ => None,
        };
    }
    Ok(found)
}

#[async_trait::async_trait]
impl Authenticate for RequestHeaderAuthenticator {
    async fn authenticate(
        &self,
        client_cert: Option<&ClientCert>,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<UserInfo> {
        if let Some(cert) = client_cert.filter(|c| !c.chain.is_empty()) {
            let chain = &cert.chain;
            let trusted = self.current();
            if let Some(trust) = &trusted.front_proxy
                && trust.verifier.verifies(chain)
                && trust.allowed(cert)
                && let Some(user) = trust.user_from_headers(headers)
            {
                return Ok(user);
            }
            if !trusted
                .client_ca
                .is_some_and(|ca| ca.verifier.verifies(chain))
            {
                tracing::debug!(
                    path,
                    "client certificate is neither an allowed front proxy nor signed by the client CA"
                );
                return Err(unauthorized());
            }
        }
        if let (Some(tokens), Some(token)) = (&self.tokens, bearer_token(headers)) {
            return tokens.authenticate(&token?).await;
        }
        self.fallback.authenticate(client_cert, headers, path)
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
    fn client(issuer: &Issuer<'static, KeyPair>, cn: &str, orgs: &[&str]) -> ClientCert {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        ClientCert::new(vec![params.signed_by(&key, issuer).unwrap().der().to_vec()])
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
            .authenticator(Some(cluster_pem.as_bytes()))
            .unwrap();
        std::fs::remove_file(file).unwrap();
        Fixture {
            front_proxy,
            cluster,
            auth,
        }
    }

    #[tokio::test]
    async fn published_trust_is_followed_and_unknown_trust_refuses_the_front_proxy() {
        let (front_pem, front_proxy) = ca("front-proxy-ca");
        let (cluster_pem, _) = ca("cluster-ca");
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Args {
            #[command(flatten)]
            requestheader: RequestHeaderOptions,
        }
        let auth = Args::parse_from(["test"])
            .requestheader
            .authenticator(Some(cluster_pem.as_bytes()))
            .unwrap();
        let cert = client(&front_proxy, "front-proxy-client", &[]);
        let h = headers(&[("X-Remote-User", "alice")]);
        // Not known yet: the front proxy is nobody.
        assert!(auth.authenticate(Some(&cert), &h, "/apis").await.is_err());
        let published = serde_json::json!({
            "requestheader-client-ca-file": front_pem,
            "requestheader-allowed-names": "[\"front-proxy-client\"]",
            "requestheader-username-headers": "[\"X-Remote-User\"]",
            "requestheader-group-headers": "[\"X-Remote-Group\"]",
            "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
        });
        let trust = FrontProxyTrust::from_published(&published)
            .unwrap()
            .unwrap();
        assert_eq!(trust.uid_headers, ["x-remote-uid"]);
        auth.trusted.write().unwrap().front_proxy = Some(Arc::new(trust));
        let user = auth.authenticate(Some(&cert), &h, "/apis").await.unwrap();
        assert_eq!(user.name, "alice");
        // Another name than the allowed one is refused.
        let other = client(&front_proxy, "someone", &[]);
        assert!(auth.authenticate(Some(&other), &h, "/apis").await.is_err());
        // Nothing published, or a list that is not JSON: no trust, or an error.
        assert!(
            FrontProxyTrust::from_published(&serde_json::json!({}))
                .unwrap()
                .is_none()
        );
        let mut broken = published.clone();
        broken["requestheader-allowed-names"] = "front-proxy-client".into();
        assert!(FrontProxyTrust::from_published(&broken).is_err());
    }

    #[tokio::test]
    async fn a_client_ca_not_given_is_nobody_until_published() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Args {
            #[command(flatten)]
            requestheader: RequestHeaderOptions,
        }
        let (cluster_pem, cluster) = ca("cluster-ca");
        let auth = Args::parse_from(["test"])
            .requestheader
            .authenticator(None)
            .unwrap();
        assert!(!auth.is_fixed());
        let admin = client(&cluster, "admin", &["system:masters"]);
        let none = HeaderMap::new();
        assert!(
            auth.authenticate(Some(&admin), &none, "/apis")
                .await
                .is_err()
        );
        let published = serde_json::json!({"client-ca-file": cluster_pem});
        let known = auth.current();
        let found = Trusted {
            client_ca: Some(
                ClientCa::new(published["client-ca-file"].as_str().unwrap().into()).unwrap(),
            ),
            ..known.clone()
        };
        assert!(!known.same(&found));
        *auth.trusted.write().unwrap() = found;
        let user = auth
            .authenticate(Some(&admin), &none, "/apis")
            .await
            .unwrap();
        assert_eq!(user.name, "admin");
        assert!(user.groups.contains(&"system:masters".to_string()));
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
