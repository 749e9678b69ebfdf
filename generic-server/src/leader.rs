//! Leader election on an etcd lease: of all replicas running a controller
//! that writes (availability, autoregistration), one at a time holds the
//! key and writes; the others wait to take over.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};
use tokio::sync::watch;

/// Seconds a leader's lease outlives its last renewal.
const LEASE_SECONDS: i64 = 6;

/// Campaigns for `key` as `identity` until the process is asked to stop;
/// the receiver says whether this replica currently leads. A leader that
/// stops cleanly gives up its lease at once (as kube's leader election
/// does on cancel), so a successor acts without waiting for it to expire;
/// await the handle before exiting so the release is sent.
pub fn elect(
    client: Client,
    key: &str,
    identity: &str,
) -> (watch::Receiver<bool>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(false);
    let (key, identity) = (key.to_string(), identity.to_string());
    let campaigning = tokio::spawn(async move {
        let mut client = client;
        while !crate::shutdown::is_draining() {
            match campaign(&mut client, &key, &identity).await {
                Ok(Some((lease, mut keeper, mut responses))) => {
                    tracing::info!(%key, %identity, "became leader");
                    tx.send_replace(true);
                    loop {
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_secs(2)) => {}
                            () = crate::shutdown::draining() => {
                                tx.send_replace(false);
                                match client.lease_revoke(lease).await {
                                    Ok(_) => tracing::info!(%key, %identity, "stopping: released the leader lease"),
                                    Err(e) => tracing::warn!(%key, %identity, error = %e, "stopping: could not release the leader lease"),
                                }
                                return;
                            }
                        }
                        let renewed = keeper.keep_alive().await.is_ok()
                            && matches!(futures::StreamExt::next(&mut responses).await, Some(Ok(r)) if r.ttl() > 0);
                        if !renewed {
                            break;
                        }
                    }
                    tracing::warn!(%key, %identity, "lost leadership");
                    tx.send_replace(false);
                }
                Ok(None) => {
                    tx.send_replace(false);
                }
                Err(e) => {
                    tracing::debug!(%key, error = %e, "leader election attempt failed");
                    tx.send_replace(false);
                }
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(2)) => {}
                () = crate::shutdown::draining() => {}
            }
        }
    });
    (rx, campaigning)
}

/// The lease a leader holds, and what keeps it alive.
type Held = (
    i64,
    etcd_client::LeaseKeeper,
    etcd_client::LeaseKeepAliveStream,
);

/// One attempt: the key is ours (with the lease kept alive) or someone else's.
async fn campaign(
    client: &mut Client,
    key: &str,
    identity: &str,
) -> Result<Option<Held>, etcd_client::Error> {
    let lease = client.lease_grant(LEASE_SECONDS, None).await?.id();
    let txn = Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then([TxnOp::put(
            key,
            identity,
            Some(PutOptions::new().with_lease(lease)),
        )]);
    if !client.txn(txn).await?.succeeded() {
        let _ = client.lease_revoke(lease).await;
        return Ok(None);
    }
    let (keeper, responses) = client.lease_keep_alive(lease).await?;
    Ok(Some((lease, keeper, responses)))
}
