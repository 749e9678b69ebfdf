//! The webhook backend: audit events POSTed in batches, as an
//! `audit.k8s.io/v1` EventList, to the server a kubeconfig names
//! (`--audit-webhook-config-file`), as kube's batching webhook does. Events
//! wait in a bounded queue; a full queue drops them, counted in the log.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

use super::Backend;
use crate::service_client::{Clients, Identity};

/// How events are batched.
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// How many events may wait.
    pub buffer: usize,
    /// The most events in one request.
    pub max_size: usize,
    /// The longest an event waits for its batch to fill.
    pub max_wait: Duration,
}

/// Where the webhook is and how to reach it, from its kubeconfig.
#[derive(Clone)]
struct Target {
    url: reqwest::Url,
    /// The base64 CA bundle the server is verified by.
    ca_bundle: String,
    insecure: bool,
    token: Option<String>,
    clients: Arc<Clients>,
}

/// The webhook backend.
pub struct WebhookBackend {
    queue: mpsc::Sender<Bytes>,
    dropped: Arc<AtomicU64>,
}

impl WebhookBackend {
    /// Reads the kubeconfig at `config` and starts the sender (on the current tokio runtime).
    pub fn start(config: &Path, batching: Batching) -> crate::Result<WebhookBackend> {
        let target = read_kubeconfig(config)?;
        let (queue, events) = mpsc::channel(batching.buffer.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        tokio::spawn(send_batches(events, target, batching, dropped.clone()));
        Ok(WebhookBackend { queue, dropped })
    }
}

impl Backend for WebhookBackend {
    fn process(&self, event: Bytes) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.queue.try_send(event) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Reads a kubeconfig's current (or first) cluster and user.
fn read_kubeconfig(path: &Path) -> crate::Result<Target> {
    use base64::Engine;
    let bad = |why: String| crate::Error::Audit(format!("{}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| crate::Error::read(path, e))?;
    let config: Value = apimachinery::yaml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let named = |list: &str, name: Option<&str>, field: &str| -> Value {
        let items = config[list].as_array().cloned().unwrap_or_default();
        let found = match name {
            Some(name) => items.iter().find(|i| i["name"].as_str() == Some(name)),
            None => items.first(),
        };
        found.map(|i| i[field].clone()).unwrap_or(Value::Null)
    };
    let context = named("contexts", config["current-context"].as_str(), "context");
    let cluster = named("clusters", context["cluster"].as_str(), "cluster");
    let user = named("users", context["user"].as_str(), "user");
    let server = cluster["server"]
        .as_str()
        .ok_or_else(|| bad("no cluster with a server".into()))?;
    let url = reqwest::Url::parse(server).map_err(|e| bad(format!("server {server:?}: {e}")))?;
    let base = path.parent().unwrap_or(Path::new("."));
    // `<field>-data` (base64) or `<field>` (a file, relative to the kubeconfig).
    let material = |section: &Value, field: &str| -> crate::Result<Option<Vec<u8>>> {
        if let Some(data) = section[format!("{field}-data")].as_str() {
            return base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map(Some)
                .map_err(|e| bad(format!("{field}-data: {e}")));
        }
        match section[field].as_str() {
            Some(file) => {
                let file = base.join(file);
                std::fs::read(&file)
                    .map(Some)
                    .map_err(|e| crate::Error::read(&file, e))
            }
            None => Ok(None),
        }
    };
    let insecure = cluster["insecure-skip-tls-verify"].as_bool() == Some(true);
    let ca = material(&cluster, "certificate-authority")?;
    if ca.is_none() && !insecure && url.scheme() == "https" {
        return Err(bad("the cluster names no certificate-authority".into()));
    }
    let identity = match (
        material(&user, "client-certificate")?,
        material(&user, "client-key")?,
    ) {
        (Some(cert), Some(key)) => Some(Identity { cert, key }),
        _ => None,
    };
    Ok(Target {
        url,
        ca_bundle: ca
            .map(|pem| base64::engine::general_purpose::STANDARD.encode(pem))
            .unwrap_or_default(),
        insecure,
        token: user["token"].as_str().map(str::to_string),
        clients: Arc::new(Clients::new(identity)),
    })
}

/// The sender: batches of up to `max_size` events, each sent once full or
/// `max_wait` after its first event.
async fn send_batches(
    mut events: mpsc::Receiver<Bytes>,
    target: Target,
    batching: Batching,
    dropped: Arc<AtomicU64>,
) {
    while let Some(first) = events.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + batching.max_wait;
        while batch.len() < batching.max_size.max(1) {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(event)) => batch.push(event),
                Ok(None) | Err(_) => break,
            }
        }
        let body = apimachinery::audit::event_list(&batch);
        let mut sent = post(&target, &body).await;
        if let Err(why) = &sent {
            tracing::debug!(%why, "audit webhook failed; retrying once");
            tokio::time::sleep(Duration::from_secs(1)).await;
            sent = post(&target, &body).await;
        }
        if let Err(why) = sent {
            tracing::error!(
                events = batch.len(),
                %why,
                "Error in audit plugin 'webhook' affecting {} audit events",
                batch.len()
            );
        }
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            tracing::warn!(
                dropped = lost,
                "Error in audit plugin 'webhook' affecting {lost} audit events: audit buffer queue blocked"
            );
        }
    }
}

/// POSTs one EventList.
async fn post(target: &Target, body: &[u8]) -> Result<(), String> {
    let host = target
        .url
        .host_str()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = target.url.port_or_known_default().unwrap_or(443);
    let addresses: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("dial tcp: lookup {host}: {e}"))?
        .collect();
    let mut last = format!("dial tcp: lookup {host}: no such host");
    // Each address in turn (`localhost` may name ::1 and 127.0.0.1) until one connects.
    for addr in addresses {
        let client = target
            .clients
            .client_for(&target.ca_bundle, target.insecure, &host, addr)
            .map_err(|e| e.to_string())?;
        let mut request = client
            .post(target.url.clone())
            .timeout(Duration::from_secs(30))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if let Some(token) = &target.token {
            request = request.bearer_auth(token);
        }
        match request.send().await {
            Ok(resp) if resp.status().is_success() => return Ok(()),
            Ok(resp) => return Err(format!("the webhook answered {}", resp.status())),
            Err(e) if e.is_connect() => last = crate::service_client::describe(&e),
            Err(e) => return Err(crate::service_client::describe(&e)),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubeconfig_names_the_server_and_how_to_trust_it() {
        let dir = std::env::temp_dir().join(format!("audit-webhook-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.crt"), "PEM").unwrap();
        let config = dir.join("webhook.kubeconfig");
        std::fs::write(
            &config,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster: {server: 'https://other:1'}\n- name: audit\n  cluster:\n    server: https://127.0.0.1:9443/audit\n    certificate-authority: ca.crt\nusers:\n- name: me\n  user: {token: secret}\ncontexts:\n- name: c\n  context: {cluster: audit, user: me}\ncurrent-context: c\n",
        )
        .unwrap();
        let target = read_kubeconfig(&config).unwrap();
        assert_eq!(target.url.as_str(), "https://127.0.0.1:9443/audit");
        assert_eq!(target.ca_bundle, "UEVN");
        assert_eq!(target.token.as_deref(), Some("secret"));
        std::fs::write(
            &config,
            "clusters:\n- name: a\n  cluster: {server: 'https://x:1'}\n",
        )
        .unwrap();
        let err = read_kubeconfig(&config).err().unwrap().to_string();
        assert!(err.contains("certificate-authority"), "{err}");
        std::fs::write(&config, "clusters: []\n").unwrap();
        let err = read_kubeconfig(&config).err().unwrap().to_string();
        assert!(err.contains("server"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
