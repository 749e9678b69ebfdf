//! Command-line options every server shares, and the start-up steps they
//! drive: connect etcd, start the watch cache, serve gRPC.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::server::HealthCheck;
use crate::storage::Storage;
use crate::storage::cacher::Cacher;
use crate::storage::etcd::EtcdStorage;
use crate::tls::{TlsError, TlsFiles};

/// Where the cluster's state lives.
#[derive(clap::Args, Debug, Clone)]
pub struct EtcdOptions {
    /// etcd client URLs, comma-separated.
    #[arg(
        long,
        env = "KUBECHAIN_ETCD_SERVERS",
        value_delimiter = ',',
        default_value = "http://127.0.0.1:2379"
    )]
    pub etcd_servers: Vec<String>,
    /// The key prefix of every object.
    #[arg(long, env = "KUBECHAIN_ETCD_PREFIX", default_value = "/registry")]
    pub etcd_prefix: String,
}

/// A server's certificate, key and the cluster CA.
#[derive(clap::Args, Debug, Clone)]
pub struct TlsOptions {
    /// PEM certificate this server presents (and uses as a gRPC client).
    #[arg(long, env = "KUBECHAIN_TLS_CERT_FILE")]
    pub tls_cert_file: PathBuf,
    /// PEM private key of the certificate.
    #[arg(long, env = "KUBECHAIN_TLS_PRIVATE_KEY_FILE")]
    pub tls_private_key_file: PathBuf,
    /// PEM cluster CA: verifies clients and the servers we call.
    #[arg(long, env = "KUBECHAIN_CLIENT_CA_FILE")]
    pub client_ca_file: PathBuf,
}

impl TlsOptions {
    /// Reads the files.
    pub fn load(&self) -> Result<TlsFiles, TlsError> {
        TlsFiles::load(
            &self.tls_cert_file,
            &self.tls_private_key_file,
            &self.client_ca_file,
        )
    }
}

/// Stack of each runtime worker: room for the bounded recursions over user
/// data (decoders, patches, schemas) even in a debug build; only what is
/// touched is ever committed.
const WORKER_STACK_BYTES: usize = 8 * 1024 * 1024;

/// Runs a server's main future on an actix system (actors on the main
/// thread, tasks on a multi-threaded tokio runtime), with logging to stderr
/// filtered by `RUST_LOG` (default `info`).
pub fn run<E>(main: impl std::future::Future<Output = Result<(), E>>) -> Result<(), E> {
    use std::io::IsTerminal;
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_stack_size(WORKER_STACK_BYTES)
            .build()
            .expect("a tokio runtime")
    };
    actix_rt::System::with_tokio_rt(runtime).block_on(main)
}

/// What every server gets from etcd: the watch cache, a health check, and
/// the client for leases and registrations.
pub struct Backend {
    /// The watch cache.
    pub cacher: Arc<Cacher>,
    /// A health check reading etcd's revision.
    pub etcd_check: HealthCheck,
    /// The etcd client.
    pub etcd: etcd_client::Client,
}

/// Connects etcd and starts the watch cache.
pub async fn start_storage(etcd: &EtcdOptions) -> Result<Backend, crate::storage::StorageError> {
    let etcd_storage = EtcdStorage::connect(&etcd.etcd_servers).await?;
    let client = etcd_storage.client();
    let storage: Arc<dyn Storage> = Arc::new(etcd_storage);
    let cacher = Cacher::start(storage.clone()).await?;
    let etcd_check: HealthCheck = Arc::new(move || {
        let storage = storage.clone();
        Box::pin(async move {
            storage
                .current_revision()
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    });
    Ok(Backend {
        cacher,
        etcd_check,
        etcd: client,
    })
}

/// Serves the delegation service over mutual TLS, registered in etcd as a
/// replica of `component`, until SIGTERM or SIGINT; then drains (see
/// [`crate::shutdown`]): unregisters at once, ends its watches so that they
/// resume on another replica, and lets requests in flight finish.
pub async fn serve_grpc(
    addr: SocketAddr,
    tls: &TlsFiles,
    service: crate::delegation::DelegationService,
    etcd: etcd_client::Client,
    component: &str,
) -> Result<(), ServeError> {
    crate::shutdown::listen();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| ServeError::Listen(addr, e))?;
    let advertised = crate::endpoints::advertised(listener.local_addr().unwrap_or(addr));
    let incoming = nodelay(tokio_stream::wrappers::TcpListenerStream::new(listener));
    let registration = crate::endpoints::Registration::start(etcd, component, &advertised).await;
    if let Err(e) = &registration {
        tracing::warn!(error = %e, "cannot register in etcd; callers must use static endpoints");
    }
    let stop = async move {
        crate::shutdown::draining().await;
        if let Ok(registration) = registration {
            registration.revoke().await;
        }
    };
    let server = tonic::transport::Server::builder()
        .tls_config(tls.grpc_server())?
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(10)))
        .add_service(service.into_server())
        .serve_with_incoming_shutdown(incoming, stop);
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => return Ok(result?),
        () = crate::shutdown::draining() => {}
    }
    match tokio::time::timeout(crate::shutdown::GRACE, server).await {
        Ok(result) => Ok(result?),
        Err(_) => {
            tracing::warn!("requests still in flight after the grace period; stopping anyway");
            Ok(())
        }
    }
}

/// Accepted connections with Nagle's algorithm off (tonic leaves it on for
/// connections it does not accept itself), so small frames go out at once.
pub fn nodelay(
    incoming: impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>>,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use futures::StreamExt;
    incoming.map(|stream| {
        let stream = stream?;
        stream.set_nodelay(true)?;
        Ok(stream)
    })
}

/// Why a server could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
}
