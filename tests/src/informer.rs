//! An HTTPS client of a cluster's front door, and a watcher that behaves
//! like client-go's reflector: what the failover and fault tests use to
//! check that no event is lost.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::Cluster;

/// An HTTPS client of a cluster's front door, as the admin.
#[derive(Clone)]
pub struct Api {
    /// The client, with the admin's certificate.
    pub http: reqwest::blocking::Client,
    /// `https://127.0.0.1:<port>`.
    pub base: String,
}

/// The admin's TLS client configuration for a cluster's PKI.
pub fn tls_config(pki: &Path) -> rustls::ClientConfig {
    tls_config_as(pki, true)
}

/// A TLS client configuration trusting a cluster's CA, with the admin's
/// certificate or with none (a client that brings a token).
fn tls_config_as(pki: &Path, admin: bool) -> rustls::ClientConfig {
    let read = |name: &str| {
        std::fs::read(pki.join(name)).unwrap_or_else(|e| panic!("reading {name}: {e}"))
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &read("ca.crt")[..]) {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots);
    if !admin {
        return config.with_no_client_auth();
    }
    let certs = rustls_pemfile::certs(&mut &read("admin.crt")[..])
        .collect::<Result<Vec<_>, _>>()
        .expect("admin certificate");
    let key = rustls_pemfile::private_key(&mut &read("admin.key")[..])
        .expect("admin key PEM")
        .expect("an admin key");
    config
        .with_client_auth_cert(certs, key)
        .expect("the admin client certificate")
}

impl Api {
    /// A client of `cluster`'s front door, at most `connections` kept open.
    pub fn new(cluster: &Cluster, connections: usize) -> Api {
        let base = format!("https://127.0.0.1:{}", cluster.port);
        Api::at(
            &cluster.dir.join("pki"),
            &base,
            connections,
            Duration::from_secs(60),
        )
    }

    /// A client of the front door at `base`, as the admin of `pki`, giving
    /// up on a request after `timeout`.
    pub fn at(pki: &Path, base: &str, connections: usize, timeout: Duration) -> Api {
        let http = reqwest::blocking::Client::builder()
            .tls_backend_preconfigured(tls_config(pki))
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_max_idle_per_host(connections)
            .no_proxy()
            .build()
            .expect("an HTTPS client");
        Api {
            http,
            base: base.to_string(),
        }
    }

    /// A client of `cluster`'s front door without a client certificate: its
    /// requests are anonymous unless they bring a token.
    pub fn without_certificate(cluster: &Cluster) -> Api {
        let http = reqwest::blocking::Client::builder()
            .tls_backend_preconfigured(tls_config_as(&cluster.dir.join("pki"), false))
            .timeout(Duration::from_secs(60))
            .no_proxy()
            .build()
            .expect("an HTTPS client");
        Api {
            http,
            base: format!("https://127.0.0.1:{}", cluster.port),
        }
    }

    /// Sends a request; status 0 when no HTTP response came back.
    pub fn send(&self, request: reqwest::blocking::RequestBuilder) -> (u16, Value) {
        match request.send() {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let body = resp
                    .bytes()
                    .map(|b| serde_json::from_slice(&b).unwrap_or(Value::Null))
                    .unwrap_or(Value::Null);
                (status, body)
            }
            Err(e) => (0, Value::String(e.to_string())),
        }
    }

    /// POSTs a JSON object.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(
            self.http
                .post(format!("{}{path}", self.base))
                .header("content-type", "application/json")
                .body(body.to_string()),
        )
    }

    /// GETs a path.
    pub fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.http.get(format!("{}{path}", self.base)))
    }

    /// Sends a request with headers (and a body with its Content-Type);
    /// the answer as it came, bytes and all (panics if none came).
    pub fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<(&str, Vec<u8>)>,
    ) -> Raw {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some((content_type, body)) = body {
            request = request.header("content-type", content_type).body(body);
        }
        let resp = request.send().unwrap_or_else(|e| panic!("{path}: {e}"));
        let code = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = resp.bytes().expect("a body").to_vec();
        Raw {
            code,
            content_type,
            body,
        }
    }

    /// Creates a namespace (201 or the test fails).
    pub fn create_namespace(&self, name: &str) {
        let (status, body) = self.post(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        );
        assert_eq!(status, 201, "creating namespace {name}: {body}");
    }
}

/// An answer as it came: status, Content-Type and bytes.
#[derive(Debug)]
pub struct Raw {
    /// The HTTP status.
    pub code: u16,
    /// The Content-Type header.
    pub content_type: String,
    /// The body.
    pub body: Vec<u8>,
}

impl Raw {
    /// The body as text (lossy), for messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON, or `Null`.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// What an informer-style watcher saw.
#[derive(Default, Debug)]
pub struct Informed {
    /// Names of ADDED events, in order.
    pub added: Vec<String>,
    /// Watches that ended (or failed) and were resumed from the last resourceVersion.
    pub resumes: usize,
    /// Relists after 410 Gone.
    pub relists: usize,
    /// Why each watch ended.
    pub ends: Vec<String>,
}

/// Watches `path` like client-go's reflector: list, watch from the list's
/// resourceVersion, and when a watch ends or fails, watch again from the
/// last resourceVersion seen (relist only on 410 Gone). Runs until `stop`
/// and the current watch ends (the cluster stopping ends it).
pub fn informer(api: Api, path: String, seen: Arc<Mutex<Informed>>, stop: Arc<AtomicBool>) {
    let mut resource_version = None;
    while !stop.load(Ordering::Relaxed) {
        let rv = match resource_version.clone() {
            Some(rv) => rv,
            None => {
                let (status, list) = api.get(&path);
                if status != 200 {
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
                let mut informed = seen.lock().unwrap_or_else(|e| e.into_inner());
                // A relist replaces the state: only names not seen yet count as added.
                for item in list["items"].as_array().into_iter().flatten() {
                    let name = item["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    if !informed.added.contains(&name) {
                        informed.added.push(name);
                    }
                }
                list["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            }
        };
        let url = format!(
            "{}{path}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}",
            api.base
        );
        let end = match api.http.get(url).timeout(Duration::from_secs(600)).send() {
            Err(e) => format!("watch request failed: {e}"),
            Ok(resp) if resp.status() == 410 => {
                resource_version = None;
                seen.lock().unwrap_or_else(|e| e.into_inner()).relists += 1;
                "410 Gone".into()
            }
            Ok(resp) if resp.status() != 200 => format!("watch answered {}", resp.status()),
            Ok(resp) => {
                resource_version = Some(rv);
                let mut why = String::from("stream ended");
                for line in BufReader::new(resp).lines() {
                    let Ok(line) = line else {
                        why = "stream broke".into();
                        break;
                    };
                    let Ok(event) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    let object = &event["object"];
                    if event["type"] == "ERROR" {
                        why = format!("ERROR event: {object}");
                        if object["code"] == 410 {
                            resource_version = None;
                            seen.lock().unwrap_or_else(|e| e.into_inner()).relists += 1;
                        }
                        break;
                    }
                    resource_version = object["metadata"]["resourceVersion"]
                        .as_str()
                        .map(str::to_string)
                        .or(resource_version);
                    if event["type"] == "ADDED" {
                        let name = object["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string();
                        seen.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .added
                            .push(name);
                    }
                }
                why
            }
        };
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut informed = seen.lock().unwrap_or_else(|e| e.into_inner());
        informed.resumes += 1;
        informed.ends.push(end);
        drop(informed);
        std::thread::sleep(Duration::from_millis(100));
    }
}
