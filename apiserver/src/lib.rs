//! Build your own aggregated API server: the API a cluster's front door
//! proxies to behind an APIService, as Kubernetes' `k8s.io/apiserver` lets
//! Go authors do. You bring the group, its kinds and how each is served;
//! [`Server`] brings the rest, the same way kubechain's own metrics-server
//! gets it:
//!
//! - options with kube's names and `KUBECHAIN_*` environment fallbacks
//!   ([`ServerOptions`], flattened into your clap parser);
//! - HTTPS (rustls, HTTP/2 and HTTP/1.1) with the cluster CA's and the
//!   front proxy's client certificates, its own certificate generated
//!   when none is given and read again when its files change;
//! - delegated authentication and authorization: the cluster's client CA
//!   and the front proxy's CA, names and headers read from
//!   `kube-system/extension-apiserver-authentication` (unless given by
//!   flags) and followed while it runs, bearer tokens asked about with
//!   TokenReviews and every request with a SubjectAccessReview (answers
//!   remembered for 10 s), failing closed when the front door is away;
//! - storage in etcd or memory, or objects computed by your function and
//!   watched; versions converted with your `From` impls
//!   ([`Conversion`]);
//! - admission: NamespaceLifecycle, the cluster's ValidatingAdmissionPolicies
//!   and webhooks (followed through the front door), then your plugins;
//! - discovery, OpenAPI, Table output, `/livez`, `/readyz`, `/metrics`,
//!   audit ids and a graceful stop.
//!
//! Register it with `kubechain register` (the APIService with its
//! `caBundle`, its Service and the RBAC it needs).
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use kubechain_apiserver::{ReadOnly, Resource, Server, ServerOptions};
//!
//! /// The server's command line: kube's options and our own.
//! #[derive(clap::Parser)]
//! struct Options {
//!     #[command(flatten)]
//!     server: ServerOptions,
//! }
//!
//! fn main() -> anyhow::Result<()> {
//!     let options: Options = kubechain_apiserver::parse();
//!     kubechain_apiserver::run(options.server.logging, async move {
//!         let server = Server::new("hello-server", options.server)?;
//!         let resources: Vec<(Resource, Arc<dyn ReadOnly>)> = Vec::new();
//!         server.with_read_only(resources).serve().await?;
//!         Ok(())
//!     })
//! }
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use generic_server::admission::policy::Policies;
use generic_server::admission::webhook::Webhooks;
use generic_server::admission::{Admission, NamespaceLifecycle};
use generic_server::config::Logging;
use generic_server::discovery::Discovery;
use generic_server::filters::delegated::{DelegatedAuthorizer, DelegatedTokens};
use generic_server::filters::flowcontrol::PriorityAndFairness;
use generic_server::filters::requestheader::{RequestHeaderAuthenticator, RequestHeaderOptions};
use generic_server::pipeline::{self, Pipeline};
use generic_server::replica::{self, Replica};
use generic_server::request::NotFoundHandler;
use generic_server::server::ApiServer;
use generic_server::storage::Storage;
use generic_server::storage::cacher::Cacher;
use generic_server::storage::etcd::EtcdStorage;
use generic_server::storage::memory::MemoryStorage;
use generic_server::tls::TlsFiles;

mod certificates;
mod conversion;

pub use apimachinery;
pub use conversion::{Conversion, Versioned};
pub use generic_server;
pub use generic_server::admission::{AdmissionPlugin, Attributes, Operation};
pub use generic_server::filters::delegated::FrontDoor;
pub use generic_server::health::HealthCheck;
pub use generic_server::resource::Resource;
pub use generic_server::rest::ReadOnly;
pub use generic_server::strategy::{Converter, Strategy};
pub use k8s_openapi;

/// Seats shared by priority and fairness's levels: kube's defaults of
/// `--max-requests-inflight` (400) and `--max-mutating-requests-inflight`
/// (200).
const SEATS: u32 = 600;

/// What can stop a server from starting or serving.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Its TLS files, or the front door's client, could not be set up.
    #[error("setting up {what}: {source}")]
    Setup {
        /// What was being set up.
        what: &'static str,
        /// Why it failed.
        source: generic_server::Error,
    },
    /// Its storage could not be reached, or its resources not installed.
    #[error("storing {what}: {source}")]
    Storage {
        /// What was being stored or reached.
        what: String,
        /// Why it failed.
        source: apimachinery::error::Error,
    },
    /// A serving certificate could not be generated or kept.
    #[error("generating a serving certificate in {dir}: {source}")]
    Certificates {
        /// The certificate directory.
        dir: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// Its listeners could not be opened or failed.
    #[error("serving: {0}")]
    Serve(#[from] std::io::Error),
}

/// The options every aggregated server takes, with kube's names; flatten
/// them into your own clap parser.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerOptions {
    /// Address of the HTTPS server.
    #[arg(long, env = "KUBECHAIN_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// HTTP worker threads.
    #[arg(long, env = "KUBECHAIN_WORKERS", default_value_t = 2)]
    pub workers: usize,
    /// Where to serve `/livez`, `/readyz` and `/healthz` over plain HTTP,
    /// for kubelet or docker probes (and `/metrics`, with `--plain-metrics`).
    #[arg(long, env = "KUBECHAIN_METRICS_ADDRESS")]
    pub metrics_address: Option<SocketAddr>,
    /// Also serve `/metrics` on `--metrics-address`, to anyone who reaches
    /// it; without it `/metrics` is served over HTTPS, behind RBAC.
    #[arg(long, env = "KUBECHAIN_PLAIN_METRICS")]
    pub plain_metrics: bool,
    /// The cluster's front door (the aggregator), called with the serving
    /// certificate as this server's identity and verified with
    /// `--client-ca-file`; see `--kubeconfig` for others.
    #[arg(
        long,
        env = "KUBECHAIN_FRONT_DOOR",
        conflicts_with = "kubeconfig",
        requires = "client_ca_file"
    )]
    pub front_door: Option<String>,
    /// A kubeconfig naming the front door and this server's identity (a
    /// client certificate or a token). Without it or `--front-door`, the
    /// in-cluster ServiceAccount is used.
    #[arg(long, env = "KUBECHAIN_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The serving certificate (given or generated) and the cluster CA.
    #[command(flatten)]
    pub tls: ServingOptions,
    /// How the front proxy is trusted (default: as the cluster publishes it).
    #[command(flatten)]
    pub requestheader: RequestHeaderOptions,
    /// How the process logs.
    #[command(flatten)]
    pub logging: Logging,
}

/// How the server serves HTTPS: its certificate, given or generated.
#[derive(clap::Args, Debug, Clone)]
pub struct ServingOptions {
    /// PEM certificate to serve with; without it one is generated in `--cert-dir`.
    #[arg(
        long,
        env = "KUBECHAIN_TLS_CERT_FILE",
        requires = "tls_private_key_file"
    )]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of `--tls-cert-file`.
    #[arg(
        long,
        env = "KUBECHAIN_TLS_PRIVATE_KEY_FILE",
        requires = "tls_cert_file"
    )]
    pub tls_private_key_file: Option<PathBuf>,
    /// Where a generated certificate (`tls.crt`, `tls.key`) and the CA that
    /// signed it (`ca.crt`: what `kubechain register --ca-file` reads) are
    /// kept, and reused while they name the same hosts.
    #[arg(
        long,
        env = "KUBECHAIN_CERT_DIR",
        default_value = "apiserver.local.config/certificates"
    )]
    pub cert_dir: PathBuf,
    /// Host names or IPs the generated certificate is for, besides
    /// `localhost` and `127.0.0.1` (the Service's `<name>.<namespace>.svc`).
    #[arg(long = "tls-san", value_delimiter = ',')]
    pub tls_sans: Vec<String>,
    /// PEM CA whose client certificates authenticate as their subject (the
    /// cluster CA). Without it, the one the cluster publishes in
    /// `kube-system/extension-apiserver-authentication` is followed.
    #[arg(long, env = "KUBECHAIN_CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,
}

impl ServingOptions {
    /// The files of the serving certificate and key: given, or generated.
    fn files(&self) -> (PathBuf, PathBuf) {
        match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => (cert.clone(), key.clone()),
            _ => (self.cert_dir.join("tls.crt"), self.cert_dir.join("tls.key")),
        }
    }

    /// The serving certificate, key and client CA: read, or generated.
    fn load(&self) -> Result<TlsFiles, Error> {
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|source| Error::Setup {
                what: "the TLS files",
                source: generic_server::Error::read(path, source),
            })
        };
        let ca = match &self.client_ca_file {
            Some(path) => read(path)?,
            None => Vec::new(),
        };
        let (cert, key) = match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => (read(cert)?, read(key)?),
            _ => certificates::generated(&self.cert_dir, &self.tls_sans).map_err(|source| {
                Error::Certificates {
                    dir: self.cert_dir.clone(),
                    source,
                }
            })?,
        };
        Ok(TlsFiles { cert, key, ca })
    }
}

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
    /// Connects the storage the options name.
    async fn connect(&self) -> Result<Arc<dyn Storage>, Error> {
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

/// Declares a Rust type as a Kubernetes kind of an API group: the names
/// and scope the builder serves it under, as k8s-openapi's types carry
/// them. The type has a `metadata: ObjectMeta` field and derives serde's
/// traits and schemars' `JsonSchema`.
///
/// ```
/// use kubechain_apiserver::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
///
/// #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
/// pub struct Flunder {
///     #[serde(default)]
///     pub metadata: ObjectMeta,
/// }
/// kubechain_apiserver::kind!(Flunder, "wardle.example.com", "v1alpha1", "flunders", Namespaced);
/// ```
#[macro_export]
macro_rules! kind {
    ($kind:ident, $group:literal, $version:literal, $plural:literal, Namespaced) => {
        $crate::kind!(@impl $kind, $group, $version, $plural, $crate::k8s_openapi::NamespaceResourceScope);
    };
    ($kind:ident, $group:literal, $version:literal, $plural:literal, Cluster) => {
        $crate::kind!(@impl $kind, $group, $version, $plural, $crate::k8s_openapi::ClusterResourceScope);
    };
    (@impl $kind:ident, $group:literal, $version:literal, $plural:literal, $scope:ty) => {
        impl $crate::k8s_openapi::Resource for $kind {
            const API_VERSION: &'static str = concat!($group, "/", $version);
            const GROUP: &'static str = $group;
            const KIND: &'static str = stringify!($kind);
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }
        impl $crate::k8s_openapi::Metadata for $kind {
            type Ty = $crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
}

/// Parses the command line into `O`, after answering `probe <url>` (a
/// container's health probe: images built `FROM scratch` have no curl) if
/// that is what was asked.
pub fn parse<O: clap::Parser>() -> O {
    generic_server::health::probe_if_asked();
    O::parse()
}

/// Runs a server's `main` future with logging set up and kubechain's
/// runtime (actix on tokio), as every kubechain server runs.
pub fn run<E>(logging: Logging, main: impl Future<Output = Result<(), E>>) -> Result<(), E> {
    generic_server::config::run(logging, main)
}

/// Runs a server inside this program (a test's) on a thread of its own:
/// `main` is started there on kubechain's runtime, with no logging set up
/// and the program's signals left to it. The server serves until the
/// program exits; the handle tells why it stopped sooner.
pub fn spawn<E, F>(
    main: impl FnOnce() -> F + Send + 'static,
) -> std::thread::JoinHandle<Result<(), E>>
where
    E: Send + 'static,
    F: Future<Output = Result<(), E>>,
{
    std::thread::Builder::new()
        .name("apiserver".into())
        .stack_size(generic_server::runtime::STACK_BYTES)
        .spawn(move || generic_server::config::block_on(Box::pin(main())))
        .expect("a thread for the server")
}

/// An aggregated API server being built: add resources and health checks,
/// then [`Server::serve`].
pub struct Server {
    name: &'static str,
    options: ServerOptions,
    front_door: Arc<FrontDoor>,
    authenticator: RequestHeaderAuthenticator,
    api: Arc<ApiServer>,
    stored: Vec<(Vec<Resource>, StorageOptions)>,
    computed: Vec<(Vec<(Resource, Arc<dyn ReadOnly>)>, std::time::Duration)>,
    admission: Vec<Arc<dyn AdmissionPlugin>>,
}

impl Server {
    /// Reads the TLS files and prepares the front door's client and the
    /// authenticator; nothing listens yet.
    pub fn new(name: &'static str, options: ServerOptions) -> Result<Server, Error> {
        let setup = |what| move |source| Error::Setup { what, source };
        let tls = options.tls.load()?;
        let front_door = match (&options.kubeconfig, &options.front_door) {
            (Some(kubeconfig), _) => FrontDoor::from_kubeconfig(kubeconfig),
            (None, Some(url)) => FrontDoor::new(url, &tls),
            (None, None) => FrontDoor::in_cluster(),
        };
        let front_door = Arc::new(front_door.map_err(setup("the front door's client"))?);
        let authenticator = options
            .requestheader
            .authenticator(Some(tls.ca.as_slice()).filter(|ca| !ca.is_empty()))
            .map_err(setup("the front proxy's trust"))?
            .with_token_reviews(DelegatedTokens::new(front_door.clone()));
        let api = Arc::new(ApiServer::new(
            name,
            Arc::new(Discovery::default()),
            Arc::new(NotFoundHandler),
            Vec::new(),
        ));
        Ok(Server {
            name,
            options,
            front_door,
            authenticator,
            api,
            stored: Vec::new(),
            computed: Vec::new(),
            admission: Vec::new(),
        })
    }

    /// The cluster's front door, called as this server: where it reads
    /// what it follows (its identity needs the RBAC `kubechain register` grants).
    pub fn front_door(&self) -> Arc<FrontDoor> {
        self.front_door.clone()
    }

    /// The server's resources, for admission plugins that read them.
    pub fn api(&self) -> Arc<ApiServer> {
        self.api.clone()
    }

    /// Adds a check `/readyz` runs (and lists, by `name`, with `?verbose`).
    pub fn with_check(self, name: &str, check: HealthCheck) -> Self {
        self.api.add_health_check(name, check);
        self
    }

    /// Serves resources computed on each request, for that caller (get
    /// and list, no watch), with discovery and OpenAPI for each.
    pub fn with_read_only(self, resources: Vec<(Resource, Arc<dyn ReadOnly>)>) -> Self {
        self.api.install_read_only(resources);
        self
    }

    /// Serves resources computed by their endpoints with get, list and
    /// watch: each endpoint is listed every `period` (as the server itself,
    /// so its answer is the same for every caller) and what changed is
    /// served as MODIFIED, ADDED and DELETED events with resourceVersions.
    pub fn with_computed(
        mut self,
        resources: Vec<(Resource, Arc<dyn ReadOnly>)>,
        period: std::time::Duration,
    ) -> Self {
        self.computed.push((resources, period));
        self
    }

    /// Stores resources (every verb: get, list, watch with bookmarks,
    /// create, update, patch of each type, server-side apply, delete and
    /// deletecollection), in etcd or memory as `storage` says.
    pub fn with_stored(mut self, resources: Vec<Resource>, storage: &StorageOptions) -> Self {
        self.stored.push((resources, storage.clone()));
        self
    }

    /// Adds an admission plugin: its `admit` (mutating) and `validate`
    /// run on every write to the stored resources, in the order added,
    /// after kube's NamespaceLifecycle (namespaces read at the front door).
    pub fn with_admission(mut self, plugin: Arc<dyn AdmissionPlugin>) -> Self {
        self.admission.push(plugin);
        self
    }

    /// kube's order: NamespaceLifecycle (namespaces followed through the
    /// front door, one not yet seen asked for there), the cluster's
    /// ValidatingAdmissionPolicies and webhooks (their configuration
    /// followed through the front door), then the author's plugins.
    async fn admission_chain(
        &self,
        replica: &Replica,
        cacher: &Arc<Cacher>,
    ) -> Result<Admission, apimachinery::error::Error> {
        let namespaces = || replica::namespaces(cacher.clone(), self.front_door.clone());
        let policies = Policies::new(cacher.clone(), replica::ROOT, Vec::new())
            .await?
            .with_namespaces(namespaces().await?);
        let webhooks = Webhooks::new(cacher.clone(), replica::ROOT)
            .await?
            .with_namespaces(namespaces().await?)
            .resolving_services(self.front_door.clone());
        let mut plugins: Vec<Arc<dyn AdmissionPlugin>> = vec![
            Arc::new(NamespaceLifecycle::reading(namespaces().await?)),
            replica.guard(Arc::new(policies)),
            replica.guard(Arc::new(webhooks)),
        ];
        plugins.extend(self.admission.iter().cloned());
        Ok(Admission::new(plugins))
    }

    /// Listens and serves until the process is asked to stop.
    pub async fn serve(self) -> Result<(), Error> {
        // What the server follows of the cluster: priority and fairness,
        // and for what it stores (and so admits), admission configuration.
        let followed: Vec<replica::Followed> = match self.stored.is_empty() {
            true => replica::FLOW_CONTROL.to_vec(),
            false => [replica::FLOW_CONTROL, replica::ADMISSION].concat(),
        };
        let replica = Replica::start(self.front_door.clone(), &followed);
        if !self.stored.is_empty() {
            // Writes wait for the admission configuration; reads need none.
            self.api
                .add_health_check("cluster-configuration", replica.check());
        }
        let failed = |source: apimachinery::error::Error| Error::Storage {
            what: "the cluster's configuration".into(),
            source,
        };
        let followed = Cacher::start(replica.storage())
            .await
            .map_err(|e| failed(e.into()))?;
        let admission = match self.stored.is_empty() {
            true => Admission::default(),
            false => self
                .admission_chain(&replica, &followed)
                .await
                .map_err(failed)?,
        };
        let flow_control = PriorityAndFairness::new(&followed, replica::ROOT, None, SEATS)
            .await
            .map_err(|e| failed(e.into()))?;
        for (resources, storage) in &self.stored {
            let cacher = Cacher::start(storage.connect().await?)
                .await
                .map_err(|source| Error::Storage {
                    what: "the watch cache".into(),
                    source: source.into(),
                })?;
            self.api
                .install(
                    resources.clone(),
                    &cacher,
                    &admission,
                    storage.etcd_prefix.trim_end_matches('/'),
                )
                .await
                .map_err(|source| Error::Storage {
                    what: "the resources".into(),
                    source: source.into(),
                })?;
        }
        for (resources, period) in self.computed.iter() {
            self.api
                .install_computed(resources.clone(), *period)
                .await
                .map_err(|source| Error::Storage {
                    what: "the computed resources".into(),
                    source,
                })?;
        }
        let options = &self.options;
        if !self.authenticator.is_fixed() {
            let check = self.authenticator.follow(self.front_door.clone());
            self.api.add_health_check("front-proxy-trust", check);
        }
        let (cert, key) = options.tls.files();
        let https = generic_server::tls::https_server_reloading(
            self.authenticator.client_roots(),
            &cert,
            &key,
        )
        .map_err(|source| Error::Setup {
            what: "the HTTPS listener",
            source,
        })?;
        if let Some(addr) = options.metrics_address {
            generic_server::plain_listener::serve(addr, self.api.clone(), options.plain_metrics)
                .map_err(|source| Error::Setup {
                    what: "the health listener",
                    source,
                })?;
        }
        let authorizer = DelegatedAuthorizer::new(self.front_door.clone());
        let door = Arc::new(
            Pipeline::new(self.authenticator, Box::new(authorizer), self.api)
                .with_flow_control(flow_control)
                .named(self.name),
        );
        tracing::info!(listen = %options.listen, name = self.name, "serving");
        pipeline::serve_https(
            options.listen,
            https,
            door,
            options.workers,
            std::time::Duration::ZERO,
        )
        .await?;
        Ok(())
    }
}
