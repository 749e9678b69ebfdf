//! The one error of generic-server: what its storage, TLS, token, delegation
//! and start-up code fail with. Requests fail with the API's
//! [`apimachinery::Error`] instead, which this converts into.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use apimachinery::error::Reason;

use crate::storage::KeyValue;

/// Why an operation of the server's machinery failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The key does not exist.
    #[error("key {0:?} not found")]
    NotFound(String),
    /// The key already exists.
    #[error("key {0:?} already exists")]
    AlreadyExists(String),
    /// The key changed since the expected revision.
    #[error("key {key:?} was modified (expected revision {expected})")]
    Conflict {
        /// The key.
        key: String,
        /// The revision the caller expected.
        expected: i64,
        /// The current value, if the key still exists.
        current: Option<KeyValue>,
    },
    /// The requested revision has been compacted away.
    #[error("required revision {requested} has been compacted (compacted revision {compacted})")]
    Compacted {
        /// The revision asked for.
        requested: i64,
        /// The compaction revision.
        compacted: i64,
    },
    /// The requested revision is in the future.
    #[error("required revision {0} is a future revision")]
    FutureRevision(i64),
    /// etcd could not be reached or failed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// etcd's answer was larger than the largest message accepted from it.
    #[error("storage answer too large: {0}")]
    TooLarge(String),
    /// The server behind this one could not be reached or failed.
    #[error("delegate unavailable: {0}")]
    Delegate(String),
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Arc<std::io::Error>,
    },
    /// A certificate, key or CA bundle is not usable.
    #[error("{0}")]
    Tls(String),
    /// rustls rejected a configuration.
    #[error("tls configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The service account signing key is not usable.
    #[error("service account key: {0}")]
    SigningKey(String),
    /// A bearer token is malformed, badly signed, expired or for someone else.
    #[error("invalid bearer token: {0}")]
    InvalidToken(&'static str),
    /// A health check fails, and why (logged, never shown).
    #[error("not ready: {0}")]
    NotReady(String),
    /// An object does not decode into its type (a string where a number belongs).
    #[error("{0}")]
    Decode(String),
    /// The encryption configuration is not usable, or a value does not
    /// encrypt or decrypt with it.
    #[error("encryption at rest: {0}")]
    Encryption(String),
    /// The audit policy or an audit backend is not usable.
    #[error("audit: {0}")]
    Audit(String),
    /// A gRPC endpoint is not valid, or the gRPC server failed.
    #[error("gRPC transport: {0}")]
    Transport(Arc<tonic::transport::Error>),
    /// The address could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, Arc<std::io::Error>),
    /// The Unix socket could not be made.
    #[error("cannot listen on {}: {source}", path.display())]
    ListenSocket {
        /// The socket's path.
        path: std::path::PathBuf,
        /// Why.
        source: Arc<std::io::Error>,
    },
}

/// The result of the server's machinery.
pub type Result<T> = std::result::Result<T, Error>;

impl From<tonic::transport::Error> for Error {
    fn from(e: tonic::transport::Error) -> Self {
        Error::Transport(Arc::new(e))
    }
}

impl Error {
    /// Reading `path` failed.
    pub fn read(path: &std::path::Path, source: std::io::Error) -> Self {
        Error::Read {
            path: path.to_path_buf(),
            source: Arc::new(source),
        }
    }
}

/// The Status a request gets when the machinery fails under it and nothing
/// more is known (a store says which object; see `registry`).
impl From<Error> for apimachinery::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Compacted {
                requested,
                compacted,
            } => apimachinery::Error::new(
                Reason::Expired,
                format!("too old resource version: {requested} ({compacted})"),
            ),
            Error::FutureRevision(rev) => apimachinery::Error::new(
                Reason::Timeout,
                format!("Too large resource version: {rev}"),
            ),
            Error::Unavailable(why) => {
                apimachinery::Error::unavailable(format!("storage is unavailable: {why}"))
            }
            Error::InvalidToken(_) => {
                apimachinery::Error::new(Reason::Unauthorized, "Unauthorized")
            }
            Error::Decode(why) => apimachinery::Error::bad_request(why),
            other => apimachinery::Error::internal(other.to_string()),
        }
    }
}
