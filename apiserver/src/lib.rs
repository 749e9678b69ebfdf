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
//! The builder is staged as kube's: [`Server`] (resources, admission
//! plugins, checks) → [`Server::install`] → [`Installed`] (post-start
//! hooks) → serve. Where the server sits is its [`Link`]: an aggregated
//! server ([`Aggregated`], what you build) or one of kubechain's own
//! chain ([`Chained`]: the aggregator, core-server and extension-server
//! are built with this same builder, serving delegation over gRPC or, at
//! the chain's head, the front door).
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
use std::path::PathBuf;

use generic_server::config::Logging;

mod certificates;
mod conversion;
mod link;
mod options;
mod server;
mod storage;

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
pub use link::{Aggregated, ChainEndpoint, Chained, FrontDoorEndpoint, Link};
pub use options::{ServerOptions, ServingOptions};
pub use server::{Installed, Server};
pub use storage::{Storage, StorageOptions};

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
    /// A server of the chain could not serve delegation.
    #[error("serving delegation: {0}")]
    Delegation(generic_server::Error),
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
