//! Where the replicas of a component are: each server registers its gRPC
//! address in etcd under a lease (`/kubechain/endpoints/<component>/<id>`),
//! renewed while it lives and revoked when it stops; callers watch the
//! prefix and balance across what is there.

use std::time::Duration;

use apimachinery::keys::ENDPOINTS;
use etcd_client::{Client, EventType, GetOptions, PutOptions, WatchOptions};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::watch;

/// How long a registration outlives its server's last renewal.
const LEASE_SECONDS: i64 = 5;

/// One live replica.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    /// The registration key's last segment.
    pub id: String,
    /// The gRPC URL, e.g. `https://10.0.0.5:7443`.
    pub address: String,
}

/// A server's registration, held while it runs.
pub struct Registration {
    client: Client,
    lease: i64,
    key: String,
}

impl Registration {
    /// Registers `address` for `component` and keeps the lease alive in the background.
    pub async fn start(
        mut client: Client,
        component: &str,
        address: &str,
    ) -> Result<Registration, etcd_client::Error> {
        let lease = client.lease_grant(LEASE_SECONDS, None).await?.id();
        let id = uuid::Uuid::new_v4().to_string();
        let key = format!("{ENDPOINTS}{component}/{id}");
        let value = json!({"address": address, "pid": std::process::id()}).to_string();
        client
            .put(
                key.clone(),
                value,
                Some(PutOptions::new().with_lease(lease)),
            )
            .await?;
        let (mut keeper, mut responses) = client.lease_keep_alive(lease).await?;
        let mut renewer = client.clone();
        let (renew_key, renew_address) = (key.clone(), address.to_string());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let alive = keeper.keep_alive().await.is_ok()
                    && matches!(responses.next().await, Some(Ok(r)) if r.ttl() > 0);
                if !alive {
                    // The lease is gone (etcd restarted, or we were paused too long): register again.
                    tracing::warn!(key = %renew_key, "registration lease lost; registering again");
                    match Box::pin(Registration::renew(
                        &mut renewer,
                        &renew_key,
                        &renew_address,
                    ))
                    .await
                    {
                        Some((k, r)) => (keeper, responses) = (k, r),
                        None => tokio::time::sleep(Duration::from_secs(1)).await,
                    }
                }
            }
        });
        tracing::info!(%key, %address, "registered");
        Ok(Registration { client, lease, key })
    }

    async fn renew(
        client: &mut Client,
        key: &str,
        address: &str,
    ) -> Option<(etcd_client::LeaseKeeper, etcd_client::LeaseKeepAliveStream)> {
        let lease = client.lease_grant(LEASE_SECONDS, None).await.ok()?.id();
        let value = json!({"address": address, "pid": std::process::id()}).to_string();
        client
            .put(key, value, Some(PutOptions::new().with_lease(lease)))
            .await
            .ok()?;
        client.lease_keep_alive(lease).await.ok()
    }

    /// Removes the registration at once (a clean shutdown).
    pub async fn revoke(mut self) {
        let _ = self.client.lease_revoke(self.lease).await;
        tracing::info!(key = %self.key, "unregistered");
    }
}

fn parse(key: &[u8], value: &[u8]) -> Option<Endpoint> {
    let key = std::str::from_utf8(key).ok()?;
    let value: Value = serde_json::from_slice(value).ok()?;
    Some(Endpoint {
        id: key.rsplit('/').next()?.to_string(),
        address: value["address"].as_str()?.to_string(),
    })
}

/// Follows the live replicas of a component; the receiver always holds the
/// current set (sorted by id).
pub fn watch_endpoints(client: Client, component: &str) -> watch::Receiver<Vec<Endpoint>> {
    let (tx, rx) = watch::channel(Vec::new());
    let prefix = format!("{ENDPOINTS}{component}/");
    tokio::spawn(async move {
        let mut client = client;
        loop {
            let Ok(resp) = client
                .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
                .await
            else {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            let mut set: Vec<Endpoint> = resp
                .kvs()
                .iter()
                .filter_map(|kv| parse(kv.key(), kv.value()))
                .collect();
            set.sort();
            tx.send_replace(set.clone());
            let revision = resp.header().map(|h| h.revision()).unwrap_or(0) + 1;
            let options = WatchOptions::new()
                .with_prefix()
                .with_start_revision(revision);
            let Ok(mut stream) = client.watch(prefix.as_str(), Some(options)).await else {
                continue;
            };
            while let Ok(Some(batch)) = stream.message().await {
                if batch.canceled() {
                    break;
                }
                for event in batch.events() {
                    let Some(kv) = event.kv() else { continue };
                    let id = String::from_utf8_lossy(kv.key())
                        .rsplit('/')
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    set.retain(|e| e.id != id);
                    if event.event_type() == EventType::Put {
                        set.extend(parse(kv.key(), kv.value()));
                    }
                }
                set.sort();
                tx.send_replace(set.clone());
            }
        }
    });
    rx
}

/// The address other servers reach this one at: the listen address, or,
/// when it listens on every interface, this host's own address.
pub fn advertised(listen: std::net::SocketAddr) -> String {
    if !listen.ip().is_unspecified() {
        return format!("https://{listen}");
    }
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    let ip = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), listen.port()))
        .ok()
        .and_then(|mut addrs| addrs.find(|a| a.is_ipv4() && !a.ip().is_loopback()))
        .map(|a| a.ip().to_string())
        .unwrap_or(host);
    format!("https://{ip}:{}", listen.port())
}
