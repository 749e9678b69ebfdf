//! How a server of the chain is built, in kube's stages: [`Config`] (the
//! flags every server shares) → [`Config::complete`] (TLS read, etcd
//! connected, the watch cache started, the link to the next server opened
//! and followed) → [`CompletedConfig::new`] (the named [`GenericServer`]
//! with its delegate) → its resources and post-start hooks →
//! [`GenericServer::run_grpc`] (or the caller's own HTTPS pipeline).
//! kubechain-apiserver's `Server::in_chain` walks these stages for the
//! aggregator, core-server and extension-server, so that their `main.rs`
//! says only which resources and which controllers.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::LocalBoxFuture;

use crate::delegation::{DelegationService, GrpcDelegate};
use crate::discovery::Discovery;
use crate::health::HealthCheck;
use crate::request::{Handler, NotFoundHandler};
use crate::server::ApiServer;
use crate::storage::Storage;
use crate::storage::cacher::Cacher;
use crate::storage::encryption::{EncryptedStorage, Encryption};
use crate::storage::etcd::EtcdStorage;
use crate::tls::TlsFiles;
use crate::{Error, Result};

/// The flags every server shares: where etcd is, this server's
/// certificate, and the one it presents on internal links.
#[derive(clap::Args, Debug, Clone)]
pub struct Config {
    /// Where etcd is.
    #[command(flatten)]
    pub etcd: EtcdOptions,
    /// The listener's certificate, key and client CA.
    #[command(flatten)]
    pub tls: TlsOptions,
    /// The certificate, key and CA of its links to etcd and the next server.
    #[command(flatten)]
    pub internal: InternalTlsOptions,
    /// Where to serve this process's `/livez`, `/readyz` and `/healthz`
    /// over plain HTTP, for kubelet or docker probes (and `/metrics`, with
    /// `--plain-metrics`).
    #[arg(long, env = "KUBECHAIN_METRICS_ADDRESS")]
    pub metrics_address: Option<SocketAddr>,
    /// Also serve `/metrics` on `--metrics-address`, to anyone who reaches
    /// it: only for a Prometheus on a network no one else does. Without it
    /// `/metrics` is read over HTTPS behind RBAC, as kube serves it: at the
    /// front door's `/metrics`, and `/metrics/<server>` for those behind it.
    #[arg(long, env = "KUBECHAIN_PLAIN_METRICS")]
    pub plain_metrics: bool,
    /// How the process logs.
    #[command(flatten)]
    pub logging: Logging,
}

/// How a process writes its log lines (to stderr).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Logging {
    /// `text` for people, `json` (one object per line) for machines.
    #[arg(long, env = "KUBECHAIN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// The formats of [`Logging`].
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, with the span fields (trace ids) in it.
    Json,
}

/// The next server in the chain: its component name (as it registers in
/// etcd), the endpoints used until replicas register, and the name its
/// certificate is verified against.
pub struct Delegate<'a> {
    /// The component, e.g. `extension-server`.
    pub component: &'a str,
    /// Static endpoints (`https://127.0.0.1:7444`).
    pub endpoints: &'a [String],
    /// The name in its serving certificate.
    pub server_name: &'a str,
}

/// A [`Config`] made real: files read, etcd connected, the cache started,
/// the delegate link open and following the delegate's replicas and discovery.
pub struct CompletedConfig {
    /// This server's certificate, key and CA.
    pub tls: TlsFiles,
    /// The etcd client (leases, registrations, leader election).
    pub etcd: etcd_client::Client,
    /// The watch cache over etcd.
    pub cacher: Arc<Cacher>,
    /// The key prefix of every object (`/registry`), without a trailing `/`.
    pub etcd_root: String,
    /// What this server and the servers behind it serve.
    pub discovery: Arc<Discovery>,
    /// The link to the next server, if there is one.
    pub delegate: Option<GrpcDelegate>,
    checks: Vec<(String, HealthCheck)>,
    metrics_address: Option<SocketAddr>,
    plain_metrics: bool,
}

impl Config {
    /// The files of the internal links (see [`InternalTlsOptions`]).
    pub fn internal_tls(&self) -> Result<TlsFiles> {
        self.internal.load(&self.tls)
    }

    /// Reads the TLS files, connects etcd, starts the watch cache and, for a
    /// server that has one, opens the link to `delegate`.
    pub async fn complete(&self, delegate: Option<Delegate<'_>>) -> Result<CompletedConfig> {
        let tls = self.tls.load()?;
        let internal = self.internal_tls()?;
        let backend = start_storage(&self.etcd, &internal).await?;
        let discovery = Arc::new(Discovery::default());
        let mut checks = vec![("etcd".to_string(), backend.etcd_check)];
        let delegate = match delegate {
            None => None,
            Some(target) => {
                let link = GrpcDelegate::new(
                    target.component,
                    target.endpoints,
                    target.server_name,
                    &internal,
                )?;
                link.follow_endpoints(crate::registration::watch_endpoints(
                    backend.etcd.clone(),
                    target.component,
                ));
                link.follow_discovery(discovery.clone());
                checks.push(("discovery".into(), discovery.readiness()));
                Some(link)
            }
        };
        Ok(CompletedConfig {
            tls,
            etcd: backend.etcd,
            cacher: backend.cacher,
            etcd_root: self.etcd.etcd_prefix.trim_end_matches('/').to_string(),
            discovery,
            delegate,
            checks,
            metrics_address: self.metrics_address,
            plain_metrics: self.plain_metrics,
        })
    }
}

impl CompletedConfig {
    /// A readiness check on the delegate link: the next server answers a ping.
    pub fn delegate_check(&self) -> Option<HealthCheck> {
        let link = self.delegate.clone()?;
        Some(Arc::new(move || {
            let link = link.clone();
            Box::pin(async move { link.ping().await })
        }))
    }

    /// The server named `name` (for logs and registration); what it does not
    /// serve goes to the delegate, or, at the end of the chain, gets a 404.
    /// The metrics address, if any, serves its health (and metrics, if
    /// asked) from now on.
    #[allow(clippy::new_ret_no_self)] // kube's `completedConfig.New(name, delegate)`
    pub fn new(self, name: &str) -> Result<GenericServer> {
        let delegate: Arc<dyn Handler> = match self.delegate {
            Some(link) => Arc::new(link),
            None => Arc::new(NotFoundHandler),
        };
        let server = Arc::new(ApiServer::new(
            name,
            self.discovery.clone(),
            delegate,
            self.checks,
        ));
        if let Some(addr) = self.metrics_address {
            crate::plain_listener::serve(addr, server.clone(), self.plain_metrics)?;
        }
        Ok(GenericServer {
            name: name.to_string(),
            server,
            tls: self.tls,
            etcd: self.etcd,
            cacher: self.cacher,
            etcd_root: self.etcd_root,
            discovery: self.discovery,
            hooks: Vec::new(),
        })
    }
}

/// A post-start hook: started once the server's resources are installed,
/// on the main thread's actix arbiter; done when the future ends.
pub type PostStartHook = LocalBoxFuture<'static, ()>;

/// Starts `hooks` on the current actix arbiter (hooks start actors), each
/// listed by `/readyz` of `server` as `poststarthook/<name>` and failing
/// until it has finished; the future ends when all have finished.
pub fn start_post_start_hooks(
    server: &ApiServer,
    hooks: Vec<(String, PostStartHook)>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let mut running = Vec::new();
    for (name, hook) in hooks {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let check: HealthCheck = Arc::new(move || {
            let finished = flag.load(Ordering::Acquire);
            Box::pin(async move {
                if finished {
                    Ok(())
                } else {
                    Err(Error::NotReady("not finished".into()))
                }
            })
        });
        server.add_health_check(&format!("poststarthook/{name}"), check);
        running.push(actix_rt::spawn(async move {
            hook.await;
            done.store(true, Ordering::Release);
        }));
    }
    async move {
        for hook in running {
            let _ = hook.await;
        }
    }
}

/// A server being assembled: its resources, then its post-start hooks, then run.
pub struct GenericServer {
    name: String,
    /// The API server that answers requests.
    pub server: Arc<ApiServer>,
    /// This server's certificate, key and CA.
    pub tls: TlsFiles,
    /// The etcd client.
    pub etcd: etcd_client::Client,
    /// The watch cache.
    pub cacher: Arc<Cacher>,
    /// The key prefix of every object, without a trailing `/`.
    pub etcd_root: String,
    /// What this server and the servers behind it serve.
    pub discovery: Arc<Discovery>,
    hooks: Vec<(String, PostStartHook)>,
}

impl GenericServer {
    /// Adds a named post-start hook (a controller's start): `/readyz` lists it
    /// as `poststarthook/<name>`, failing until `hook` has finished.
    pub fn add_post_start_hook(
        &mut self,
        name: &str,
        hook: impl std::future::Future<Output = ()> + 'static,
    ) {
        self.hooks.push((name.to_string(), Box::pin(hook)));
    }

    /// Starts every post-start hook; the future ends when all have finished.
    pub fn start_post_start_hooks(
        &mut self,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        start_post_start_hooks(&self.server, std::mem::take(&mut self.hooks))
    }

    /// Starts the post-start hooks and serves the delegation service on
    /// `listen` to the `allowed_callers`, and on `socket` (when given) to
    /// this user's processes; registers in etcd once every hook has
    /// finished, so callers find a replica only when it is ready (at its
    /// socket, when it has one).
    pub async fn run_grpc(
        mut self,
        listen: SocketAddr,
        socket: Option<PathBuf>,
        allowed_callers: Vec<String>,
    ) -> Result<()> {
        let hooks = self.start_post_start_hooks();
        tracing::info!(%listen, ?socket, "{} serving", self.name);
        let service =
            DelegationService::new(&self.name, self.server, self.discovery, allowed_callers);
        serve_grpc(
            listen,
            socket.as_deref(),
            &self.tls,
            service,
            self.etcd,
            &self.name,
            hooks,
        )
        .await
    }
}

/// Where the cluster's state lives.
#[derive(clap::Args, Debug, Clone)]
pub struct EtcdOptions {
    /// etcd client URLs, comma-separated; `https://` ones are reached with
    /// the internal certificate.
    #[arg(
        long,
        env = "KUBECHAIN_ETCD_SERVERS",
        value_delimiter = ',',
        default_value = "https://127.0.0.1:2379"
    )]
    pub etcd_servers: Vec<String>,
    /// The key prefix of every object.
    #[arg(long, env = "KUBECHAIN_ETCD_PREFIX", default_value = "/registry")]
    pub etcd_prefix: String,
    /// kube's EncryptionConfiguration: which resources are encrypted in
    /// etcd, and with which keys (every server reading them needs it).
    #[arg(long, env = "KUBECHAIN_ENCRYPTION_PROVIDER_CONFIG")]
    pub encryption_provider_config: Option<PathBuf>,
}

/// The listener's certificate, key and the CA that verifies its clients.
#[derive(clap::Args, Debug, Clone)]
pub struct TlsOptions {
    /// PEM certificate this server serves with.
    #[arg(long, env = "KUBECHAIN_TLS_CERT_FILE")]
    pub tls_cert_file: PathBuf,
    /// PEM private key of the certificate.
    #[arg(long, env = "KUBECHAIN_TLS_PRIVATE_KEY_FILE")]
    pub tls_private_key_file: PathBuf,
    /// PEM CA that verifies client certificates.
    #[arg(long, env = "KUBECHAIN_CLIENT_CA_FILE")]
    pub client_ca_file: PathBuf,
}

/// The internal links' certificate (presented to etcd and to the next
/// server in the chain), its key, and the internal CA that verifies them.
/// Each defaults to the listener's file: a core or extension server's
/// listener is already internal; the aggregator and metrics-server, whose
/// listeners face users, set them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct InternalTlsOptions {
    /// PEM client certificate of the internal links (default: --tls-cert-file).
    #[arg(
        long,
        env = "KUBECHAIN_INTERNAL_CERT_FILE",
        requires = "internal_key_file"
    )]
    pub internal_cert_file: Option<PathBuf>,
    /// Its private key (default: --tls-private-key-file).
    #[arg(
        long,
        env = "KUBECHAIN_INTERNAL_KEY_FILE",
        requires = "internal_cert_file"
    )]
    pub internal_key_file: Option<PathBuf>,
    /// PEM internal CA: verifies etcd and the next server (default: --client-ca-file).
    #[arg(long, env = "KUBECHAIN_INTERNAL_CA_FILE")]
    pub internal_ca_file: Option<PathBuf>,
}

impl InternalTlsOptions {
    /// Reads the files, each defaulting to the listener's in `listener`.
    pub fn load(&self, listener: &TlsOptions) -> Result<TlsFiles> {
        TlsFiles::load(
            self.internal_cert_file
                .as_ref()
                .unwrap_or(&listener.tls_cert_file),
            self.internal_key_file
                .as_ref()
                .unwrap_or(&listener.tls_private_key_file),
            self.internal_ca_file
                .as_ref()
                .unwrap_or(&listener.client_ca_file),
        )
    }
}

impl TlsOptions {
    /// Reads the files.
    pub fn load(&self) -> Result<TlsFiles> {
        TlsFiles::load(
            &self.tls_cert_file,
            &self.tls_private_key_file,
            &self.client_ca_file,
        )
    }
}

/// Runs a server's main future on an actix system (actors on the main
/// thread, tasks on a multi-threaded tokio runtime), with logging to stderr
/// in `logging`'s format, filtered by `RUST_LOG` (default `info`).
pub fn run<E>(
    logging: Logging,
    main: impl std::future::Future<Output = std::result::Result<(), E>>,
) -> std::result::Result<(), E> {
    use std::io::IsTerminal;
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match logging.log_format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().init(),
    }
    // Boxed: a server's main future is large, and the main thread's stack is not.
    block_on(Box::pin(async {
        crate::shutdown::listen();
        main.await
    }))
}

/// Runs `main` to its end on kubechain's runtime: an actix system (actors
/// on the calling thread) whose tasks run on a multi-threaded tokio runtime
/// with [`crate::runtime::STACK_BYTES`] stacks. [`run`] runs a process's
/// main on it; a server run inside a test's process runs on it alone, with
/// no logging set up and no signals taken.
pub fn block_on<T>(main: impl std::future::Future<Output = T>) -> T {
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_stack_size(crate::runtime::STACK_BYTES)
            .build()
            .expect("a tokio runtime")
    };
    let main = Box::pin(main);
    actix_rt::System::with_tokio_rt(runtime).block_on(async {
        crate::runtime::remember_current();
        main.await
    })
}

/// Parses a flag's duration in whole seconds (`5s` or `5`).
pub fn seconds(text: &str) -> std::result::Result<std::time::Duration, String> {
    text.trim_end_matches('s')
        .parse()
        .map(std::time::Duration::from_secs)
        .map_err(|_| format!("{text:?} is not a number of seconds"))
}

/// What every server gets from etcd: the watch cache, a health check, and
/// the client for leases and registrations.
struct Backend {
    cacher: Arc<Cacher>,
    etcd_check: HealthCheck,
    etcd: etcd_client::Client,
}

/// Connects etcd and starts the watch cache.
async fn start_storage(etcd: &EtcdOptions, tls: &TlsFiles) -> Result<Backend> {
    crate::metrics::global().set_etcd_root(&etcd.etcd_prefix);
    let etcd_storage = etcd.storage(tls).await?;
    let client = etcd_storage.client();
    let storage = etcd.encrypted(Arc::new(etcd_storage))?;
    let cacher = Cacher::start(storage.clone()).await?;
    Ok(Backend {
        cacher,
        etcd_check: etcd_check(storage),
        etcd: client,
    })
}

/// The `etcd` readiness check: etcd answers a revision read.
fn etcd_check(storage: Arc<dyn Storage>) -> HealthCheck {
    Arc::new(move || {
        let storage = storage.clone();
        Box::pin(async move { storage.current_revision().await.map(|_| ()) })
    })
}

impl EtcdOptions {
    /// `storage`, encrypting what the encryption configuration names.
    fn encrypted(&self, storage: Arc<dyn Storage>) -> Result<Arc<dyn Storage>> {
        let Some(path) = &self.encryption_provider_config else {
            return Ok(storage);
        };
        let encryption = Encryption::load(path, &self.etcd_prefix)?;
        Ok(Arc::new(EncryptedStorage::new(storage, encryption)))
    }

    /// The etcd storage at the servers' URLs: `https://` ones (or bare
    /// `host:port`) over TLS presenting `tls`, `http://` ones (a test's bare
    /// etcd) in the clear; a mix of both is refused.
    async fn storage(&self, tls: &TlsFiles) -> Result<EtcdStorage> {
        let plain = |url: &String| url.starts_with("http://");
        let tls = if self.etcd_servers.iter().all(plain) {
            None
        } else if self.etcd_servers.iter().any(plain) {
            return Err(Error::Tls(format!(
                "--etcd-servers mixes http:// and https:// URLs: {}",
                self.etcd_servers.join(",")
            )));
        } else {
            Some(tls.etcd_client())
        };
        EtcdStorage::connect_tls(&self.etcd_servers, tls).await
    }
}

/// Binds a Unix socket only its owner may open, replacing a stale one.
fn bind_socket(path: &Path) -> Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let failed = |e: std::io::Error| Error::ListenSocket {
        path: path.to_path_buf(),
        source: Arc::new(e),
    };
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(failed)?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
        _ => {}
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(failed)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(failed)?;
    Ok(listener)
}

/// Serves the delegation service over mutual TLS on `address`, and on the
/// Unix `socket` when given, registered in etcd (at the socket, if any) as a
/// replica of `component` once `ready` ends, until SIGTERM or SIGINT; then
/// drains (see [`crate::shutdown`]): unregisters at once, ends its watches so
/// that they resume on another replica, and lets requests in flight finish.
async fn serve_grpc(
    address: SocketAddr,
    socket: Option<&Path>,
    tls: &TlsFiles,
    service: DelegationService,
    etcd: etcd_client::Client,
    component: &str,
    ready: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| Error::Listen(address, Arc::new(e)))?;
    let unix = socket.map(bind_socket).transpose()?;
    let advertised = match socket {
        Some(path) => format!("{}{}", apimachinery::keys::UNIX_SCHEME, path.display()),
        None => crate::registration::advertised(listener.local_addr().unwrap_or(address)),
    };
    let incoming = nodelay(tokio_stream::wrappers::TcpListenerStream::new(listener));
    let component = component.to_string();
    let registration = tokio::spawn(async move {
        ready.await;
        let registration =
            crate::registration::Registration::start(etcd, &component, &advertised).await;
        if let Err(e) = &registration {
            tracing::warn!(error = %e, "cannot register in etcd; callers must use static endpoints");
        }
        registration.ok()
    });
    let stop = async move {
        crate::shutdown::draining().await;
        registration.abort();
        if let Ok(Some(registration)) = registration.await {
            registration.revoke().await;
        }
    };
    let local = unix.map(|listener| {
        crate::delegation::link_server()
            .add_service(service.clone().into_server())
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::UnixListenerStream::new(listener),
                crate::shutdown::draining(),
            )
    });
    let remote = crate::delegation::link_server()
        .tls_config(tls.grpc_server())?
        .add_service(service.into_server())
        .serve_with_incoming_shutdown(incoming, stop);
    let server = async move {
        match local {
            Some(local) => futures::future::try_join(remote, local).await.map(drop),
            None => remote.await,
        }
    };
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
