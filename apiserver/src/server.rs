//! The builder, in kube's stages: a [`Server`] gathers its resources,
//! admission plugins and checks; [`Server::install`] assembles admission
//! and installs the resources; the [`Installed`] server takes its
//! post-start hooks and serves, as its link says: HTTPS behind the front
//! door, delegation in the chain, or the chain's front door itself.

use std::sync::Arc;
use std::time::Duration;

use generic_server::admission::{Admission, AdmissionPlugin};
use generic_server::config::{Config, Delegate, PostStartHook};
use generic_server::discovery::Discovery;
use generic_server::filters::delegated::FrontDoor;
use generic_server::health::HealthCheck;
use generic_server::pipeline::Pipeline;
use generic_server::resource::Resource;
use generic_server::rest::ReadOnly;
use generic_server::server::ApiServer;

use crate::link::{Aggregated, ChainEndpoint, Chained, FrontDoorEndpoint, Link};
use crate::{Error, ServerOptions, Storage};

/// Resources computed by their endpoints.
type Computed = Vec<(Resource, Arc<dyn ReadOnly>)>;

/// A server being built: add resources, admission plugins and health
/// checks, then [`Server::install`] (or straight to [`Server::serve`]).
/// `L` is where it sits: an aggregated server ([`Server::new`]) or one of
/// kubechain's own chain ([`Server::in_chain`]).
pub struct Server<L: Link = Aggregated> {
    name: &'static str,
    link: L,
    api: Arc<ApiServer>,
    stored: Vec<(Vec<Resource>, Storage)>,
    computed: Vec<(Computed, Duration)>,
    admission: Vec<Arc<dyn AdmissionPlugin>>,
}

impl Server<Aggregated> {
    /// An aggregated server named `name`: reads the TLS files and prepares
    /// the front door's client and the authenticator; nothing listens yet.
    pub fn new(name: &'static str, options: ServerOptions) -> Result<Self, Error> {
        let (link, api) = Aggregated::new(name, options)?;
        Ok(Server::with_link(name, link, api))
    }

    /// The cluster's front door, called as this server: where it reads
    /// what it follows (its identity needs the RBAC `kubechain register` grants).
    pub fn front_door(&self) -> Arc<FrontDoor> {
        self.link.front_door().clone()
    }
}

impl Server<Chained> {
    /// A server of kubechain's chain named `name`: connects the cluster's
    /// etcd (`config`), starts its watch cache and opens the link to
    /// `delegate` (none: the end of the chain, where what is not served
    /// is a 404).
    pub async fn in_chain(
        name: &'static str,
        config: &Config,
        delegate: Option<Delegate<'_>>,
    ) -> Result<Self, Error> {
        let (link, api) = Chained::new(name, config, delegate).await?;
        Ok(Server::with_link(name, link, api))
    }

    /// The cluster's storage: install resources on it with
    /// [`Server::with_stored`]; plugins and controllers read its cache.
    pub fn storage(&self) -> Storage {
        self.link.storage()
    }

    /// The cluster's etcd client (leases, leader election).
    pub fn etcd(&self) -> &etcd_client::Client {
        self.link.etcd()
    }

    /// A readiness check that the next server answers (none at the end).
    pub fn delegate_check(&self) -> Option<HealthCheck> {
        self.link.delegate_check()
    }
}

impl<L: Link> Server<L> {
    fn with_link(name: &'static str, link: L, api: Arc<ApiServer>) -> Self {
        Server {
            name,
            link,
            api,
            stored: Vec::new(),
            computed: Vec::new(),
            admission: Vec::new(),
        }
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
        period: Duration,
    ) -> Self {
        self.computed.push((resources, period));
        self
    }

    /// Stores resources in `storage` (every verb: get, list, watch with
    /// bookmarks, create, update, patch of each type, server-side apply,
    /// delete and deletecollection), admitted by the server's chain.
    pub fn with_stored(mut self, resources: Vec<Resource>, storage: &Storage) -> Self {
        self.stored.push((resources, storage.clone()));
        self
    }

    /// Adds an admission plugin: its `admit` (mutating) and `validate`
    /// run on every write to the stored resources, in the order added.
    /// An aggregated server runs them after kube's NamespaceLifecycle and
    /// the cluster's policies and webhooks (k8s.io/apiserver's order); a
    /// server of the chain between NamespaceLifecycle and the policies,
    /// with ResourceQuota last (kube-apiserver's).
    pub fn with_admission(mut self, plugin: Arc<dyn AdmissionPlugin>) -> Self {
        self.admission.push(plugin);
        self
    }

    /// Assembles the admission chain and installs every resource; the
    /// server does not listen yet.
    pub async fn install(self) -> Result<Installed<L>, Error> {
        let Server {
            name,
            mut link,
            api,
            stored,
            computed,
            admission,
        } = self;
        let all: Vec<Resource> = stored.iter().flat_map(|(r, _)| r.clone()).collect();
        let admission = link.admission(&all, admission).await?;
        for (resources, storage) in stored {
            api.install(resources, &storage.cacher, &admission, &storage.prefix)
                .await
                .map_err(|source| Error::Storage {
                    what: "the resources".into(),
                    source,
                })?;
        }
        for (resources, period) in computed {
            api.install_computed(resources, period)
                .await
                .map_err(|source| Error::Storage {
                    what: "the computed resources".into(),
                    source,
                })?;
        }
        Ok(Installed {
            name,
            link,
            api,
            admission,
            hooks: Vec::new(),
        })
    }
}

impl Server<Aggregated> {
    /// Installs the server and serves it until the process is asked to stop.
    pub async fn serve(self) -> Result<(), Error> {
        self.install().await?.serve().await
    }
}

/// A server with its resources installed: add post-start hooks (a
/// controller's start), then [`Installed::serve`].
pub struct Installed<L: Link = Aggregated> {
    name: &'static str,
    link: L,
    api: Arc<ApiServer>,
    admission: Admission,
    hooks: Vec<(String, PostStartHook)>,
}

impl<L: Link> Installed<L> {
    /// The server's resources and their stores.
    pub fn api(&self) -> &Arc<ApiServer> {
        &self.api
    }

    /// The admission chain the stored resources were installed with (for
    /// controllers that install more, as the CRD controller does).
    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    /// Adds a post-start hook (kube's `AddPostStartHook`), started once
    /// the server serves: `/readyz` lists it as `poststarthook/<name>`,
    /// failing until `hook` ends (a server of the chain registers for
    /// callers only then).
    pub fn add_post_start_hook(
        &mut self,
        name: &str,
        hook: impl std::future::Future<Output = ()> + 'static,
    ) {
        self.hooks.push((name.to_string(), Box::pin(hook)));
    }
}

impl Installed<Aggregated> {
    /// Serves over HTTPS until the process is asked to stop.
    pub async fn serve(self) -> Result<(), Error> {
        self.link.serve(self.name, self.api, self.hooks).await
    }
}

impl Installed<Chained> {
    /// Serves delegation at `endpoint` (a server behind the front door)
    /// until the process is asked to stop.
    pub async fn serve_delegation(self, endpoint: ChainEndpoint) -> Result<(), Error> {
        self.link.serve_delegation(self.hooks, endpoint).await
    }

    /// Serves clients through `door` (the chain's head: its own
    /// authentication, authorization and handler) over HTTPS at
    /// `endpoint` until the process is asked to stop.
    pub async fn serve_front_door(
        self,
        door: Pipeline,
        endpoint: FrontDoorEndpoint,
    ) -> Result<(), Error> {
        self.link.serve_front_door(self.hooks, door, endpoint).await
    }

    /// The cluster's etcd client (leases, leader election).
    pub fn etcd(&self) -> &etcd_client::Client {
        self.link.etcd()
    }

    /// The cluster's storage.
    pub fn storage(&self) -> Storage {
        self.link.storage()
    }

    /// What this server and the servers behind it serve.
    pub fn discovery(&self) -> &Arc<Discovery> {
        self.link.discovery()
    }
}
