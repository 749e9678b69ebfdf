//! Where a server keeps what it stores: the options that choose it, and
//! the connected storage its resources are installed on.

use std::path::PathBuf;
use std::sync::Arc;

use generic_server::storage::cacher::Cacher;
use generic_server::storage::etcd::EtcdStorage;
use generic_server::storage::memory::MemoryStorage;
use generic_server::tls::TlsFiles;

use crate::Error;

/// Where a server keeps the objects it stores, with kube's flag names:
/// etcd, or, with no `--etcd-servers`, memory (lost when it stops: for
/// trying things and tests).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct StorageOptions {
    /// etcd client URLs, comma-separated (`https://` ones with the
    /// `--etcd-*file` certificate); none: objects are kept in memory.
    #[arg(long, env = "KUBECHAIN_ETCD_SERVERS", value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// The key prefix of every object (`<prefix>/<group>/<resource>/...`).
    #[arg(long, env = "KUBECHAIN_ETCD_PREFIX", default_value = "/registry")]
    pub etcd_prefix: String,
    /// PEM client certificate presented to etcd.
    #[arg(long, env = "KUBECHAIN_ETCD_CERTFILE", requires_all = ["etcd_keyfile", "etcd_cafile"])]
    pub etcd_certfile: Option<PathBuf>,
    /// Its private key.
    #[arg(long, env = "KUBECHAIN_ETCD_KEYFILE")]
    pub etcd_keyfile: Option<PathBuf>,
    /// PEM CA that verifies etcd.
    #[arg(long, env = "KUBECHAIN_ETCD_CAFILE")]
    pub etcd_cafile: Option<PathBuf>,
}

impl StorageOptions {
    /// Connects the storage the options name and starts its watch cache.
    pub async fn connect(&self) -> Result<Storage, Error> {
        let objects = self.objects().await?;
        let cacher = Cacher::start(objects)
            .await
            .map_err(|source| Error::Storage {
                what: "the watch cache".into(),
                source: source.into(),
            })?;
        Ok(Storage {
            cacher,
            prefix: self.etcd_prefix.trim_end_matches('/').to_string(),
        })
    }

    /// The objects' store the options name: etcd, or memory.
    async fn objects(&self) -> Result<Arc<dyn generic_server::storage::Storage>, Error> {
        if self.etcd_servers.is_empty() {
            tracing::warn!(
                "no --etcd-servers: objects are kept in memory and lost when the server stops"
            );
            return Ok(Arc::new(MemoryStorage::default()));
        }
        let tls = match (&self.etcd_certfile, &self.etcd_keyfile, &self.etcd_cafile) {
            (Some(cert), Some(key), Some(ca)) => Some(
                TlsFiles::load(cert, key, ca)
                    .map_err(|source| Error::Setup {
                        what: "etcd's TLS files",
                        source,
                    })?
                    .etcd_client(),
            ),
            _ => None,
        };
        let storage = EtcdStorage::connect_tls(&self.etcd_servers, tls)
            .await
            .map_err(|source| Error::Storage {
                what: self.etcd_servers.join(","),
                source: source.into(),
            })?;
        Ok(Arc::new(storage))
    }
}

/// Connected storage, with its watch cache: resources installed on it
/// ([`crate::Server::with_stored`]) keep their objects there under its
/// key prefix. Clones share the connection and the cache.
#[derive(Clone)]
pub struct Storage {
    pub(crate) cacher: Arc<Cacher>,
    pub(crate) prefix: String,
}

impl Storage {
    /// Storage over a watch cache already started, with its key prefix
    /// (`/registry`; a trailing `/` is dropped).
    pub fn new(cacher: Arc<Cacher>, prefix: &str) -> Storage {
        Storage {
            cacher,
            prefix: prefix.trim_end_matches('/').to_string(),
        }
    }

    /// The watch cache: what informers and admission plugins read.
    pub fn cacher(&self) -> &Arc<Cacher> {
        &self.cacher
    }

    /// The key prefix of every object, without a trailing `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}
