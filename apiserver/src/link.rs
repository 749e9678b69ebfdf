//! Where a server sits and how requests reach it: behind the front door's
//! proxy as an aggregated server ([`Aggregated`]: HTTPS, delegated
//! authentication and authorization), or inside kubechain's own chain
//! ([`Chained`]: the cluster's etcd; the front door at its head, or a
//! server behind it reached by delegation over gRPC). The builder is the
//! same; the link decides how admission is assembled and how the server
//! listens.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use generic_server::admission::policy::{ParamKind, Policies};
use generic_server::admission::quota::ResourceQuota;
use generic_server::admission::webhook::Webhooks;
use generic_server::admission::{self, Admission, AdmissionPlugin, NamespaceLifecycle};
use generic_server::config::{Config, Delegate, GenericServer, PostStartHook};
use generic_server::discovery::Discovery;
use generic_server::filters::delegated::{DelegatedAuthorizer, DelegatedTokens, FrontDoor};
use generic_server::filters::flowcontrol::PriorityAndFairness;
use generic_server::filters::requestheader::RequestHeaderAuthenticator;
use generic_server::health::HealthCheck;
use generic_server::pipeline::{self, Pipeline};
use generic_server::replica::{self, Replica};
use generic_server::request::NotFoundHandler;
use generic_server::resource::Resource;
use generic_server::server::ApiServer;
use generic_server::storage::cacher::Cacher;

use crate::{Error, ServerOptions, Storage};

/// Seats shared by priority and fairness's levels: kube's defaults of
/// `--max-requests-inflight` (400) and `--max-mutating-requests-inflight`
/// (200).
const SEATS: u32 = 600;

mod sealed {
    /// Only this crate's links: what they do is the builder's business.
    pub trait Sealed {}
}

/// Where a server sits: [`Aggregated`] or [`Chained`].
pub trait Link: sealed::Sealed + Sized {
    /// The admission chain of a server that stores `stored`, with the
    /// author's `plugins` in the link's order.
    #[doc(hidden)]
    fn admission(
        &mut self,
        stored: &[Resource],
        plugins: Vec<Arc<dyn AdmissionPlugin>>,
    ) -> impl std::future::Future<Output = Result<Admission, Error>>;
}

/// An aggregated server: behind an APIService, reached through the front
/// door's proxy over HTTPS, trusting the front proxy's client certificate
/// and asking the front door about tokens and permissions.
pub struct Aggregated {
    options: ServerOptions,
    front_door: Arc<FrontDoor>,
    authenticator: RequestHeaderAuthenticator,
    flow_control: Option<Arc<PriorityAndFairness>>,
}

impl sealed::Sealed for Aggregated {}

impl Aggregated {
    /// Reads the TLS files and prepares the front door's client and the
    /// authenticator, with a server of its own named `name`.
    pub(crate) fn new(
        name: &'static str,
        options: ServerOptions,
    ) -> Result<(Aggregated, Arc<ApiServer>), Error> {
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
        let link = Aggregated {
            options,
            front_door,
            authenticator,
            flow_control: None,
        };
        Ok((link, api))
    }

    /// The cluster's front door, called as this server.
    pub(crate) fn front_door(&self) -> &Arc<FrontDoor> {
        &self.front_door
    }

    /// k8s.io/apiserver's order: NamespaceLifecycle (namespaces followed
    /// through the front door, one not yet seen asked for there), the
    /// cluster's ValidatingAdmissionPolicies and webhooks (their
    /// configuration followed through the front door), then the author's
    /// plugins.
    async fn chain(
        &self,
        replica: &Replica,
        followed: &Arc<Cacher>,
        plugins: Vec<Arc<dyn AdmissionPlugin>>,
    ) -> Result<Admission, apimachinery::error::Error> {
        let namespaces = || replica::namespaces(followed.clone(), self.front_door.clone());
        let policies = Policies::new(followed.clone(), replica::ROOT, Vec::new())
            .await?
            .with_namespaces(namespaces().await?);
        let webhooks = Webhooks::new(followed.clone(), replica::ROOT)
            .await?
            .with_namespaces(namespaces().await?)
            .resolving_services(self.front_door.clone());
        let mut chain: Vec<Arc<dyn AdmissionPlugin>> = vec![
            Arc::new(NamespaceLifecycle::reading(namespaces().await?)),
            replica.guard(Arc::new(policies)),
            replica.guard(Arc::new(webhooks)),
        ];
        chain.extend(plugins);
        Ok(Admission::new(chain))
    }
}

impl Link for Aggregated {
    async fn admission(
        &mut self,
        stored: &[Resource],
        plugins: Vec<Arc<dyn AdmissionPlugin>>,
    ) -> Result<Admission, Error> {
        // What the server follows of the cluster: priority and fairness,
        // and for what it stores (and so admits), admission configuration.
        let followed: Vec<replica::Followed> = match stored.is_empty() {
            true => replica::FLOW_CONTROL.to_vec(),
            false => [replica::FLOW_CONTROL, replica::ADMISSION].concat(),
        };
        let replica = Replica::start(self.front_door.clone(), &followed);
        let failed = |source: apimachinery::error::Error| Error::Storage {
            what: "the cluster's configuration".into(),
            source,
        };
        let cache = Cacher::start(replica.storage())
            .await
            .map_err(|e| failed(e.into()))?;
        self.flow_control = Some(
            PriorityAndFairness::new(&cache, replica::ROOT, None, SEATS)
                .await
                .map_err(|e| failed(e.into()))?,
        );
        if stored.is_empty() {
            return Ok(Admission::default());
        }
        self.chain(&replica, &cache, plugins).await.map_err(failed)
    }
}

impl Aggregated {
    /// Serves `api` over HTTPS behind delegated authentication and
    /// authorization, with its post-start hooks started.
    pub(crate) async fn serve(
        self,
        name: &'static str,
        api: Arc<ApiServer>,
        hooks: Vec<(String, PostStartHook)>,
    ) -> Result<(), Error> {
        let link = self;
        let options = &link.options;
        if !link.authenticator.is_fixed() {
            let check = link.authenticator.follow(link.front_door.clone());
            api.add_health_check("front-proxy-trust", check);
        }
        let (cert, key) = options.tls.files();
        let https = generic_server::tls::https_server_reloading(
            link.authenticator.client_roots(),
            &cert,
            &key,
        )
        .map_err(|source| Error::Setup {
            what: "the HTTPS listener",
            source,
        })?;
        if let Some(addr) = options.metrics_address {
            generic_server::plain_listener::serve(addr, api.clone(), options.plain_metrics)
                .map_err(|source| Error::Setup {
                    what: "the health listener",
                    source,
                })?;
        }
        tokio::spawn(generic_server::config::start_post_start_hooks(&api, hooks));
        let authorizer = DelegatedAuthorizer::new(link.front_door.clone());
        let mut door = Pipeline::new(link.authenticator, Box::new(authorizer), api).named(name);
        if let Some(flow_control) = link.flow_control {
            door = door.with_flow_control(flow_control);
        }
        tracing::info!(listen = %options.listen, name, "serving");
        pipeline::serve_https(
            options.listen,
            https,
            Arc::new(door),
            options.workers,
            std::time::Duration::ZERO,
        )
        .await?;
        Ok(())
    }
}

/// Where a server in the chain listens for delegation, and who may call.
pub struct ChainEndpoint {
    /// The gRPC endpoint (mutual TLS).
    pub listen: SocketAddr,
    /// A Unix socket served as well, for callers on this host: no TLS,
    /// and only this user's processes may call.
    pub socket: Option<PathBuf>,
    /// The certificate CNs allowed to call over `listen`.
    pub allowed_callers: Vec<String>,
}

/// Where the chain's head (the front door) listens for clients.
pub struct FrontDoorEndpoint {
    /// The HTTPS address.
    pub listen: SocketAddr,
    /// HTTP worker threads.
    pub workers: usize,
    /// How long a stopping front door serves on while `/readyz` fails.
    pub shutdown_delay: Duration,
}

/// A server in kubechain's own chain: the front door at its head, reached
/// by clients over HTTPS, or a server behind it, reached by delegation
/// over gRPC; each hands what it does not serve to the next and stores
/// in the cluster's etcd.
pub struct Chained {
    generic: GenericServer,
    delegate_check: Option<HealthCheck>,
}

impl sealed::Sealed for Chained {}

impl Chained {
    /// Connects the cluster's etcd, starts its watch cache and opens the
    /// link to `delegate`, for a server named `name`.
    pub(crate) async fn new(
        name: &'static str,
        config: &Config,
        delegate: Option<Delegate<'_>>,
    ) -> Result<(Chained, Arc<ApiServer>), Error> {
        let setup = |what| move |source| Error::Setup { what, source };
        let completed = config
            .complete(delegate)
            .await
            .map_err(setup("the cluster's storage and the next server's link"))?;
        let delegate_check = completed.delegate_check();
        let generic = completed.new(name).map_err(setup("the server"))?;
        let api = generic.server.clone();
        let link = Chained {
            generic,
            delegate_check,
        };
        Ok((link, api))
    }

    /// The cluster's storage, shared by every resource of the server.
    pub(crate) fn storage(&self) -> Storage {
        Storage::new(self.generic.cacher.clone(), &self.generic.etcd_root)
    }

    /// What this server and the servers behind it serve.
    pub(crate) fn discovery(&self) -> &Arc<Discovery> {
        &self.generic.discovery
    }

    /// The cluster's etcd client.
    pub(crate) fn etcd(&self) -> &etcd_client::Client {
        &self.generic.etcd
    }

    /// A readiness check on the link to the next server.
    pub(crate) fn delegate_check(&self) -> Option<HealthCheck> {
        self.delegate_check.clone()
    }

    /// Serves delegation at `endpoint`, registering in etcd once the
    /// post-start hooks have finished.
    pub(crate) async fn serve_delegation(
        mut self,
        hooks: Vec<(String, PostStartHook)>,
        endpoint: ChainEndpoint,
    ) -> Result<(), Error> {
        for (name, hook) in hooks {
            self.generic.add_post_start_hook(&name, hook);
        }
        self.generic
            .run_grpc(endpoint.listen, endpoint.socket, endpoint.allowed_callers)
            .await
            .map_err(Error::Delegation)
    }

    /// Serves `door` over HTTPS at `endpoint`, with the post-start hooks
    /// started.
    pub(crate) async fn serve_front_door(
        mut self,
        hooks: Vec<(String, PostStartHook)>,
        door: Pipeline,
        endpoint: FrontDoorEndpoint,
    ) -> Result<(), Error> {
        for (name, hook) in hooks {
            self.generic.add_post_start_hook(&name, hook);
        }
        tokio::spawn(self.generic.start_post_start_hooks());
        let https = self
            .generic
            .tls
            .https_server()
            .map_err(|source| Error::Setup {
                what: "the HTTPS listener",
                source,
            })?;
        pipeline::serve_https(
            endpoint.listen,
            https,
            Arc::new(door),
            endpoint.workers,
            endpoint.shutdown_delay,
        )
        .await?;
        Ok(())
    }
}

impl Link for Chained {
    /// kube-apiserver's order: NamespaceLifecycle, the server's own
    /// plugins, the cluster's ValidatingAdmissionPolicies (params of the
    /// kinds it stores) and webhooks, then ResourceQuota.
    async fn admission(
        &mut self,
        stored: &[Resource],
        plugins: Vec<Arc<dyn AdmissionPlugin>>,
    ) -> Result<Admission, Error> {
        if stored.is_empty() && plugins.is_empty() {
            return Ok(Admission::default());
        }
        let (cacher, prefix) = (&self.generic.cacher, self.generic.etcd_root.as_str());
        let failed = |what: &str| {
            let what = what.to_string();
            move |source: apimachinery::error::Error| Error::Storage { what, source }
        };
        let lifecycle = NamespaceLifecycle::new(cacher.clone(), prefix)
            .await
            .map_err(failed("namespaces, for their lifecycle"))?;
        let mut chain: Vec<Arc<dyn AdmissionPlugin>> = vec![Arc::new(lifecycle)];
        chain.extend(plugins);
        let kinds = stored.iter().map(ParamKind::of).collect();
        chain.extend(
            admission::dynamic(cacher, prefix, kinds)
                .await
                .map_err(failed("admission policies and webhooks"))?,
        );
        chain.push(Arc::new(
            ResourceQuota::new(cacher.clone(), prefix)
                .await
                .map_err(failed("resource quotas"))?,
        ));
        Ok(Admission::new(chain))
    }
}
