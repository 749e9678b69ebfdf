//! Delegated authentication and authorization: how an aggregated server
//! leaves its decisions to the front door, as kube's
//! `DelegatingAuthenticationOptions` and `DelegatingAuthorizationOptions`
//! do. A bearer token is asked about with a TokenReview, a request with a
//! SubjectAccessReview, each answer remembered for 10 s; the server's own
//! credential (its client certificate) needs kube's `system:auth-delegator`.
//! The [`FrontDoor`] is also how such a server reads the cluster: an
//! aggregated server talks only to the front door, never to etcd.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::authorization::{Authorizer, Opinion, always_allowed};
use crate::request::UserInfo;
use crate::request_info::RequestInfo;
use crate::tls::TlsFiles;
use apimachinery::error::{Error, Reason, Result};

/// How long an answer of the front door is remembered (kube's
/// `--authentication-token-webhook-cache-ttl` and
/// `--authorization-webhook-cache-{un,}authorized-ttl`, 10 s each).
const ANSWER_TTL: Duration = Duration::from_secs(10);
/// Most answers remembered; past it the memory starts afresh.
const MOST_ANSWERS: usize = 10_000;
/// How long one call to the front door may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The cluster's front door, called as this server: with its client
/// certificate, or a bearer token (a kubeconfig's, or the in-cluster
/// ServiceAccount's, re-read as it rotates).
pub struct FrontDoor {
    client: reqwest::Client,
    base: String,
    token: Option<Token>,
}

/// How often a token file is read again (kubelet rotates bound tokens).
const TOKEN_REREAD: Duration = Duration::from_secs(60);
/// Where a pod's ServiceAccount credentials are mounted.
const IN_CLUSTER: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A bearer token: fixed, or read from a file now and then.
enum Token {
    Fixed(String),
    File {
        path: std::path::PathBuf,
        read: Mutex<(Instant, String)>,
    },
}

impl Token {
    fn file(path: std::path::PathBuf) -> std::result::Result<Token, crate::Error> {
        let token = read_token(&path)?;
        Ok(Token::File {
            path,
            read: Mutex::new((Instant::now(), token)),
        })
    }

    fn current(&self) -> String {
        match self {
            Token::Fixed(token) => token.clone(),
            Token::File { path, read } => {
                let mut read = read.lock().unwrap_or_else(|e| e.into_inner());
                if read.0.elapsed() > TOKEN_REREAD {
                    match read_token(path) {
                        Ok(token) => *read = (Instant::now(), token),
                        Err(error) => {
                            tracing::warn!(%error, "re-reading the token; the last one is kept")
                        }
                    }
                }
                read.1.clone()
            }
        }
    }
}

fn read_token(path: &std::path::Path) -> std::result::Result<String, crate::Error> {
    let text = std::fs::read_to_string(path).map_err(|source| crate::Error::read(path, source))?;
    Ok(text.trim().to_string())
}

impl FrontDoor {
    /// A client of the front door at `base` (`https://host:6443`) that
    /// presents `tls`'s certificate and trusts `tls`'s CA.
    pub fn new(base: &str, tls: &TlsFiles) -> std::result::Result<FrontDoor, crate::Error> {
        Self::with(base, tls.https_client()?, None)
    }

    /// A client of the server a kubeconfig's current context names, with
    /// its CA and its user's certificate or token.
    pub fn from_kubeconfig(path: &std::path::Path) -> std::result::Result<FrontDoor, crate::Error> {
        use apimachinery::kubeconfig::{self, Material};
        let text =
            std::fs::read_to_string(path).map_err(|source| crate::Error::read(path, source))?;
        let base = path.parent().unwrap_or(std::path::Path::new("."));
        let config = kubeconfig::parse(&text, base)
            .map_err(|e| crate::Error::Tls(format!("{}: {e}", path.display())))?;
        let bytes = |material: &Material| match material {
            Material::Inline(bytes) => Ok(bytes.clone()),
            Material::File(file) => {
                std::fs::read(file).map_err(|source| crate::Error::read(file, source))
            }
        };
        let ca = config.ca.as_ref().map(bytes).transpose()?.ok_or_else(|| {
            crate::Error::Tls(format!("{} names no certificate-authority", path.display()))
        })?;
        let identity = match &config.identity {
            Some((cert, key)) => Some((bytes(cert)?, bytes(key)?)),
            None => None,
        };
        let tls = crate::tls::client_config(
            &ca,
            identity.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice())),
        )?;
        let token = match config.token {
            Some(Material::Inline(token)) => Some(Token::Fixed(
                String::from_utf8_lossy(&token).trim().to_string(),
            )),
            Some(Material::File(file)) => Some(Token::file(file)?),
            None => None,
        };
        Self::with(&config.server, tls, token)
    }

    /// A client of the cluster a pod runs in: `KUBERNETES_SERVICE_HOST`
    /// and `_PORT`, and the pod's ServiceAccount token and CA.
    pub fn in_cluster() -> std::result::Result<FrontDoor, crate::Error> {
        let host = std::env::var("KUBERNETES_SERVICE_HOST").map_err(|_| {
            crate::Error::Tls(
                "no front door: give --kubeconfig or --front-door, or run in a cluster (KUBERNETES_SERVICE_HOST)"
                    .into(),
            )
        })?;
        let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
        let dir = std::path::Path::new(IN_CLUSTER);
        let ca_path = dir.join("ca.crt");
        let ca = std::fs::read(&ca_path).map_err(|source| crate::Error::read(&ca_path, source))?;
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        Self::with(
            &format!("https://{host}:{port}"),
            crate::tls::client_config(&ca, None)?,
            Some(Token::file(dir.join("token"))?),
        )
    }

    fn with(
        base: &str,
        tls: rustls::ClientConfig,
        token: Option<Token>,
    ) -> std::result::Result<FrontDoor, crate::Error> {
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(|e| crate::Error::Tls(format!("front door client: {e}")))?;
        Ok(FrontDoor {
            client,
            base: base.trim_end_matches('/').to_string(),
            token,
        })
    }

    /// GETs `path`; a non-2xx answer is its Status as an error.
    pub async fn get(&self, path: &str) -> Result<Value> {
        self.call(self.client.get(format!("{}{path}", self.base)))
            .await
    }

    /// POSTs `body` to `path` (a review); a non-2xx answer is its Status.
    pub async fn create(&self, path: &str, body: &Value) -> Result<Value> {
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        self.call(request).await
    }

    /// Watches `path` (a collection, with `watch=true` and its other
    /// parameters in the query) for at most `longest`, handing each event
    /// to `each` as it comes; a refusal is its Status as an error.
    pub async fn watch(
        &self,
        path: &str,
        longest: Duration,
        mut each: impl FnMut(crate::watch_event::Event) -> Result<()>,
    ) -> Result<()> {
        let request = self
            .authorized(self.client.get(format!("{}{path}", self.base)))
            .timeout(longest);
        let mut response = request.send().await.map_err(unreachable)?;
        if !response.status().is_success() {
            let status = response.status();
            let body = response.bytes().await.map_err(unreachable)?;
            return Err(refusal(status, &body));
        }
        let mut pending: Vec<u8> = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            pending.extend_from_slice(&chunk);
            for line in crate::watch_event::take_lines(&mut pending) {
                let event = crate::watch_event::parse(&line).map_err(|e| {
                    Error::internal(format!("a watch event from the front door: {e}"))
                })?;
                each(event)?;
            }
        }
        Ok(())
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token.current()),
            None => request,
        }
    }

    async fn call(&self, request: reqwest::RequestBuilder) -> Result<Value> {
        let response = self.authorized(request).send().await.map_err(unreachable)?;
        let status = response.status();
        let body = response.bytes().await.map_err(unreachable)?;
        if status.is_success() {
            return Ok(serde_json::from_slice(&body).unwrap_or(Value::Null));
        }
        Err(refusal(status, &body))
    }
}

/// The front door could not be reached, or stopped answering.
fn unreachable(e: reqwest::Error) -> Error {
    Error::unavailable(format!(
        "the front door: {}",
        crate::service_client::describe(&e)
    ))
}

/// A non-2xx answer of the front door as its Status.
fn refusal(status: http::StatusCode, body: &[u8]) -> Error {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let message = value["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("the front door answered {status}"));
    let reason = value["reason"]
        .as_str()
        .and_then(Reason::parse)
        .unwrap_or_else(|| apimachinery::error::reason_for_code(status.as_u16()));
    Error::new(reason, message)
}

/// An aggregated server resolves an admission webhook's Service at the
/// front door (its endpoints, as the chain's own servers read them).
#[async_trait::async_trait]
impl crate::service_client::ObjectReader for FrontDoor {
    async fn get(&self, path: &str) -> Result<Value> {
        FrontDoor::get(self, path).await
    }

    async fn list(&self, path: &str, label_selector: &str) -> Result<Vec<Value>> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("labelSelector", label_selector)
            .finish();
        let list = FrontDoor::get(self, &format!("{path}?{query}")).await?;
        Ok(list["items"].as_array().cloned().unwrap_or_default())
    }
}

/// An aggregated server's NamespaceLifecycle reads namespaces at the front
/// door, live: one created a moment ago is there, one deleted is gone.
#[async_trait::async_trait]
impl crate::admission::NamespaceSource for FrontDoor {
    async fn lookup(&self, name: &str) -> Result<Option<Value>> {
        match self.get(&format!("/api/v1/namespaces/{name}")).await {
            Ok(namespace) => Ok(Some(namespace)),
            Err(error) if error.code() == 404 => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// Answers remembered for [`ANSWER_TTL`].
struct Answers<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> Answers<K, V> {
    fn new() -> Self {
        Answers {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < ANSWER_TTL)
            .map(|(_, v)| v.clone())
    }

    fn put(&self, key: K, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MOST_ANSWERS {
            entries.clear();
        }
        entries.insert(key, (Instant::now(), value));
    }
}

/// The group kube's delegating authorizer always allows.
const ALWAYS_ALLOWED_GROUP: &str = "system:masters";

/// Authorizes each request with a SubjectAccessReview at the front door.
pub struct DelegatedAuthorizer {
    front_door: std::sync::Arc<FrontDoor>,
    /// By the review's spec: allowed, or the denial's reason.
    answers: Answers<String, std::result::Result<(), String>>,
}

impl DelegatedAuthorizer {
    /// Asks `front_door`.
    pub fn new(front_door: std::sync::Arc<FrontDoor>) -> Self {
        DelegatedAuthorizer {
            front_door,
            answers: Answers::new(),
        }
    }
}

/// The SubjectAccessReview spec asking whether `user` may do the request.
fn review_spec(user: &UserInfo, info: &RequestInfo, path: &str) -> Value {
    let mut spec = json!({
        "user": user.name,
        "groups": user.groups,
        "extra": user.extra,
    });
    if !user.uid.is_empty() {
        spec["uid"] = json!(user.uid);
    }
    if info.is_resource_request {
        spec["resourceAttributes"] = json!({
            "namespace": info.namespace,
            "verb": info.verb,
            "group": info.api_group,
            "version": info.api_version,
            "resource": info.resource,
            "subresource": info.subresource,
            "name": info.name,
        });
    } else {
        spec["nonResourceAttributes"] = json!({"path": path, "verb": info.verb});
    }
    spec
}

#[async_trait::async_trait]
impl Authorizer for DelegatedAuthorizer {
    async fn opinion(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<Opinion> {
        if user.in_group(ALWAYS_ALLOWED_GROUP)
            || (!info.is_resource_request && always_allowed(path))
        {
            return Ok(Opinion::Allow(String::new()));
        }
        let spec = review_spec(user, info, path);
        let key = spec.to_string();
        let answer = match self.answers.get(&key) {
            Some(answer) => answer,
            None => {
                let review = json!({
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": spec,
                });
                let status = self
                    .front_door
                    .create(
                        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                        &review,
                    )
                    .await
                    .map_err(|e| {
                        tracing::warn!(error = %e, "SubjectAccessReview failed");
                        Error::internal(format!("authorization: {e}"))
                    })?;
                let status = &status["status"];
                let answer = if status["allowed"] == true && status["denied"] != true {
                    Ok(())
                } else {
                    Err(status["reason"].as_str().unwrap_or_default().to_string())
                };
                self.answers.put(key, answer.clone());
                answer
            }
        };
        Ok(match answer {
            Ok(()) => Opinion::Allow(String::new()),
            Err(reason) => Opinion::NoOpinion(reason),
        })
    }
}

/// Authenticates bearer tokens with a TokenReview at the front door.
pub struct DelegatedTokens {
    front_door: std::sync::Arc<FrontDoor>,
    /// By token: the user, or None for a token the front door refused.
    answers: Answers<String, Option<UserInfo>>,
}

impl DelegatedTokens {
    /// Asks `front_door`.
    pub fn new(front_door: std::sync::Arc<FrontDoor>) -> Self {
        DelegatedTokens {
            front_door,
            answers: Answers::new(),
        }
    }

    /// The user `token` stands for, or kube's 401.
    pub async fn authenticate(&self, token: &str) -> Result<UserInfo> {
        let unauthorized = super::authentication::unauthorized;
        if let Some(known) = self.answers.get(&token.to_string()) {
            return known.ok_or_else(unauthorized);
        }
        let review = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        });
        let answer = self
            .front_door
            .create("/apis/authentication.k8s.io/v1/tokenreviews", &review)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "TokenReview failed");
                unauthorized()
            })?;
        let status = &answer["status"];
        let user = (status["authenticated"] == true)
            .then(|| serde_json::from_value::<ReviewedUser>(status["user"].clone()).ok())
            .flatten()
            .filter(|u| !u.username.is_empty())
            .map(|u| UserInfo {
                name: u.username,
                uid: u.uid,
                groups: u.groups,
                extra: u.extra,
            });
        self.answers.put(token.to_string(), user.clone());
        user.ok_or_else(unauthorized)
    }
}

/// `status.user` of a TokenReview.
#[derive(serde::Deserialize)]
struct ReviewedUser {
    #[serde(default)]
    username: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    extra: std::collections::BTreeMap<String, Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn a_review_asks_about_exactly_the_request() {
        let user = UserInfo {
            name: "alice".into(),
            groups: vec!["team".into(), "system:authenticated".into()],
            ..Default::default()
        };
        let path = "/apis/metrics.k8s.io/v1beta1/nodes/n1";
        let info = RequestInfo::parse(&Method::GET, path, "");
        assert_eq!(
            review_spec(&user, &info, path),
            json!({"user": "alice", "groups": ["team", "system:authenticated"], "extra": {},
                   "resourceAttributes": {"namespace": "", "verb": "get", "group": "metrics.k8s.io",
                   "version": "v1beta1", "resource": "nodes", "subresource": "", "name": "n1"}})
        );
        let info = RequestInfo::parse(&Method::GET, "/metrics", "");
        assert_eq!(
            review_spec(&user, &info, "/metrics")["nonResourceAttributes"],
            json!({"path": "/metrics", "verb": "get"})
        );
    }

    #[test]
    fn answers_expire_and_are_bounded() {
        let answers: Answers<u32, u32> = Answers::new();
        answers.put(1, 10);
        assert_eq!(answers.get(&1), Some(10));
        answers.entries.lock().unwrap().get_mut(&1).unwrap().0 -= ANSWER_TTL;
        assert_eq!(answers.get(&1), None);
        for i in 0..(MOST_ANSWERS as u32 + 1) {
            answers.put(i, i);
        }
        assert!(answers.entries.lock().unwrap().len() <= MOST_ANSWERS);
    }
}
