//! [`Storage`] on etcd v3: transactions comparing revisions, ranges at a
//! revision, and watches with previous values.

use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions, TxnOp,
    TxnOpResponse, WatchOptions,
};
use futures::StreamExt;

use super::{Event, EventKind, EventStream, KeyValue, Page, Result, Storage};
use crate::Error;

/// Largest etcd message we accept (lists of big objects).
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// How long one etcd call may take before it fails (503): a paused or
/// partitioned etcd fails requests instead of holding them. It bounds a
/// call's answer, not a watch or lease stream once opened.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Storage backed by an etcd cluster.
#[derive(Clone)]
pub struct EtcdStorage {
    client: Client,
}

impl EtcdStorage {
    /// Connects to etcd at the given endpoints (`http://127.0.0.1:2379`).
    pub async fn connect(endpoints: &[String]) -> Result<Self> {
        Self::connect_tls(endpoints, None).await
    }

    /// Connects to etcd, over TLS with `tls` (`https://` endpoints).
    pub async fn connect_tls(
        endpoints: &[String],
        tls: Option<etcd_client::TlsOptions>,
    ) -> Result<Self> {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(std::time::Duration::from_secs(5))
            .with_timeout(REQUEST_TIMEOUT)
            .with_keep_alive(
                std::time::Duration::from_secs(10),
                std::time::Duration::from_secs(5),
            );
        if let Some(tls) = tls {
            options = options.with_tls(tls);
        }
        let client = Client::connect(endpoints, Some(options))
            .await
            .map_err(unavailable)?;
        Ok(EtcdStorage { client })
    }

    /// The underlying client, for leases and other etcd-only features.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    fn kv(&self) -> etcd_client::KvClient {
        self.client
            .kv_client()
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
    }
}

/// [`within`], recording the call's latency as `operation` on `key`
/// (`etcd_request_duration_seconds`).
async fn timed<T>(
    operation: &'static str,
    key: &str,
    call: impl std::future::Future<Output = T>,
) -> Result<T> {
    let started = std::time::Instant::now();
    let result = within(call).await;
    crate::metrics::global().etcd(operation, key, started);
    result
}

/// Awaits one etcd call for at most [`REQUEST_TIMEOUT`]. The client's own
/// timeout bounds a call once it is on a connection, not one queued while
/// the connection is re-established: with TLS that waits on a handshake,
/// which a paused etcd never answers.
async fn within<T>(call: impl std::future::Future<Output = T>) -> Result<T> {
    tokio::time::timeout(REQUEST_TIMEOUT, call)
        .await
        .map_err(|_| {
            Error::Unavailable(format!(
                "etcd did not answer within {}s",
                REQUEST_TIMEOUT.as_secs()
            ))
        })
}

fn unavailable(err: etcd_client::Error) -> Error {
    Error::Unavailable(err.to_string())
}

/// Maps etcd errors, recognising compaction and future revisions.
fn map_err(err: etcd_client::Error, revision: i64) -> Error {
    let text = err.to_string();
    if text.contains("required revision has been compacted") {
        Error::Compacted {
            requested: revision,
            compacted: 0,
        }
    } else if text.contains("required revision is a future revision") {
        Error::FutureRevision(revision)
    } else if text.contains("message length too large") {
        Error::TooLarge(text)
    } else {
        Error::Unavailable(text)
    }
}

fn to_kv(kv: &etcd_client::KeyValue) -> KeyValue {
    KeyValue {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        value: Bytes::copy_from_slice(kv.value()),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
        stale: false,
    }
}

fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> i64 {
    header.map(|h| h.revision()).unwrap_or_default()
}

/// The value of the `Get` in a failed transaction's else branch.
fn current_from(responses: Vec<TxnOpResponse>) -> Option<KeyValue> {
    responses.into_iter().find_map(|r| match r {
        TxnOpResponse::Get(get) => get.kvs().first().map(to_kv),
        _ => None,
    })
}

#[async_trait::async_trait]
impl Storage for EtcdStorage {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let resp = timed("get", key, self.kv().get(key, None))
            .await?
            .map_err(unavailable)?;
        Ok(resp.kvs().first().map(to_kv))
    }

    async fn range(&self, start: &str, end: &str, limit: i64, revision: i64) -> Result<Page> {
        let mut options = GetOptions::new().with_range(end).with_limit(limit);
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let resp = timed("list", start, self.kv().get(start, Some(options)))
            .await?
            .map_err(|e| map_err(e, revision))?;
        Ok(Page {
            kvs: resp.kvs().iter().map(to_kv).collect(),
            revision: header_revision(resp.header()),
            more: resp.more(),
            count: resp.count(),
        })
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<i64> {
        let txn = etcd_client::Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value.to_vec(), None)]);
        let resp = timed("create", key, self.kv().txn(txn))
            .await?
            .map_err(unavailable)?;
        if !resp.succeeded() {
            return Err(Error::AlreadyExists(key.into()));
        }
        Ok(header_revision(resp.header()))
    }

    async fn update(&self, key: &str, value: Bytes, expected: i64) -> Result<i64> {
        let txn = etcd_client::Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
            .and_then([TxnOp::put(key, value.to_vec(), None)])
            .or_else([TxnOp::get(key, None)]);
        let resp = timed("update", key, self.kv().txn(txn))
            .await?
            .map_err(unavailable)?;
        if resp.succeeded() {
            return Ok(header_revision(resp.header()));
        }
        match current_from(resp.op_responses()) {
            None => Err(Error::NotFound(key.into())),
            current => Err(Error::Conflict {
                key: key.into(),
                expected,
                current,
            }),
        }
    }

    async fn delete(&self, key: &str, expected: Option<i64>) -> Result<(KeyValue, i64)> {
        let compare = match expected {
            Some(rev) => Compare::mod_revision(key, CompareOp::Equal, rev),
            None => Compare::create_revision(key, CompareOp::Greater, 0),
        };
        let txn = etcd_client::Txn::new()
            .when([compare])
            .and_then([TxnOp::delete(
                key,
                Some(DeleteOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key, None)]);
        let resp = timed("delete", key, self.kv().txn(txn))
            .await?
            .map_err(unavailable)?;
        let revision = header_revision(resp.header());
        if !resp.succeeded() {
            return match current_from(resp.op_responses()) {
                None => Err(Error::NotFound(key.into())),
                current => Err(Error::Conflict {
                    key: key.into(),
                    expected: expected.unwrap_or(0),
                    current,
                }),
            };
        }
        let prev = resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Delete(d) => d.prev_kvs().first().map(to_kv),
            _ => None,
        });
        prev.map(|kv| (kv, revision))
            .ok_or_else(|| Error::NotFound(key.into()))
    }

    async fn watch(&self, start: &str, end: &str, from_revision: i64) -> Result<EventStream> {
        let options = WatchOptions::new()
            .with_range(end)
            .with_start_revision(from_revision)
            .with_prev_key();
        let mut client = self
            .client
            .watch_client()
            .max_decoding_message_size(MAX_MESSAGE_BYTES);
        let stream = within(client.watch(start, Some(options)))
            .await?
            .map_err(unavailable)?;
        let events = futures::stream::unfold(Some(stream), move |state| async move {
            let mut stream = state?;
            loop {
                match stream.message().await {
                    Ok(Some(resp)) => {
                        if resp.compact_revision() > 0 {
                            let err = Error::Compacted {
                                requested: from_revision,
                                compacted: resp.compact_revision(),
                            };
                            return Some((Err(err), None));
                        }
                        if resp.canceled() {
                            let err = Error::Unavailable(format!(
                                "watch canceled: {}",
                                resp.cancel_reason()
                            ));
                            return Some((Err(err), None));
                        }
                        if resp.events().is_empty() {
                            continue;
                        }
                        let batch = resp.events().iter().filter_map(convert_event).collect();
                        return Some((Ok(batch), Some(stream)));
                    }
                    Ok(None) => {
                        return Some((Err(Error::Unavailable("watch closed".into())), None));
                    }
                    Err(e) => return Some((Err(unavailable(e)), None)),
                }
            }
        });
        Ok(events.boxed())
    }

    async fn current_revision(&self) -> Result<i64> {
        // A count-only read of one key: the cheapest linearizable read.
        let resp = timed(
            "revision",
            apimachinery::keys::REVISION,
            self.kv().get(
                apimachinery::keys::REVISION,
                Some(GetOptions::new().with_count_only()),
            ),
        )
        .await?
        .map_err(unavailable)?;
        Ok(header_revision(resp.header()))
    }
}

fn convert_event(event: &etcd_client::Event) -> Option<Event> {
    let kv = to_kv(event.kv()?);
    let prev = event.prev_kv().map(to_kv);
    let kind = match event.event_type() {
        EventType::Put => EventKind::Put,
        EventType::Delete => EventKind::Delete,
    };
    Some(Event { kind, kv, prev })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn conformance_against_etcd() {
        let etcd = crate::testing::TestEtcd::start();
        let store = EtcdStorage::connect(&[etcd.endpoint()]).await.unwrap();
        super::super::conformance::run(&store, "/conformance").await;
    }

    #[tokio::test]
    async fn compacted_revisions_are_reported() {
        let etcd = crate::testing::TestEtcd::start();
        let store = EtcdStorage::connect(&[etcd.endpoint()]).await.unwrap();
        let first = store
            .create("/c/a", Bytes::from_static(b"1"))
            .await
            .unwrap();
        let second = store
            .update("/c/a", Bytes::from_static(b"2"), first)
            .await
            .unwrap();
        store.client().compact(second, None).await.unwrap();
        assert!(matches!(
            store.range("/c/", "/c0", 0, first).await,
            Err(Error::Compacted { .. })
        ));
        let mut watch = store.watch("/c/", "/c0", first).await.unwrap();
        assert!(matches!(
            watch.next().await,
            Some(Err(Error::Compacted { .. }))
        ));
    }
}
