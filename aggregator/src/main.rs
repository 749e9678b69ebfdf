//! aggregator: the front door. It terminates TLS, authenticates and
//! authorizes every request (under API Priority and Fairness), serves APIServices, proxies the groups of
//! aggregated servers to them, answers discovery from its own cache, and
//! delegates the rest down the chain over gRPC.

mod apiservice;
mod controllers;
mod openapi_v2;
mod proxy;
mod token_review;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use generic_server::audit::{AuditOptions, Auditor};
use generic_server::config::{self, Config, Delegate};
use generic_server::filters::authentication::Authenticator;
use generic_server::filters::authorization::Union;
use generic_server::filters::flowcontrol::{self, PriorityAndFairness, PriorityLevelsDump};
use generic_server::filters::node::NodeAuthorizer;
use generic_server::filters::rbac::Rbac;
use generic_server::loopback::Loopback;
use generic_server::pipeline::Pipeline;
use generic_server::router::Router;
use generic_server::service_client as backend;
use kubechain_apiserver::{FrontDoorEndpoint, Server};
use serde_json::json;

/// The aggregator's options.
#[derive(Parser, Debug)]
#[command(version, about = "kubechain aggregator: the cluster's front door")]
struct Options {
    /// Address of the HTTPS front door.
    #[arg(long, env = "KUBECHAIN_LISTEN", default_value = "0.0.0.0:6443")]
    listen: SocketAddr,
    /// The core server's gRPC endpoints, used until replicas register in etcd.
    #[arg(
        long,
        env = "KUBECHAIN_CORE_ENDPOINT",
        value_delimiter = ',',
        default_value = "https://127.0.0.1:7443"
    )]
    core_endpoint: Vec<String>,
    /// The name the core server's certificate is verified against.
    #[arg(
        long,
        env = "KUBECHAIN_CORE_SERVER_NAME",
        default_value = "core-server"
    )]
    core_server_name: String,
    /// A static token file (`token,user,uid,"group1,group2"` per line).
    #[arg(long, env = "KUBECHAIN_TOKEN_AUTH_FILE")]
    token_auth_file: Option<PathBuf>,
    /// Public key (PEM) that verifies service account tokens.
    #[arg(long, env = "KUBECHAIN_SERVICE_ACCOUNT_KEY_FILE")]
    service_account_key_file: Option<PathBuf>,
    /// The issuer (and audience) service account tokens must name.
    #[arg(
        long,
        env = "KUBECHAIN_SERVICE_ACCOUNT_ISSUER",
        default_value = "https://kubernetes.default.svc.cluster.local"
    )]
    service_account_issuer: String,
    /// The front-proxy client certificate presented to aggregated servers.
    #[arg(long, env = "KUBECHAIN_PROXY_CLIENT_CERT_FILE")]
    proxy_client_cert_file: Option<PathBuf>,
    /// Its key.
    #[arg(long, env = "KUBECHAIN_PROXY_CLIENT_KEY_FILE")]
    proxy_client_key_file: Option<PathBuf>,
    /// The front-proxy CA, published for aggregated servers to verify us.
    #[arg(long, env = "KUBECHAIN_REQUESTHEADER_CLIENT_CA_FILE")]
    requestheader_client_ca_file: Option<PathBuf>,
    /// The front-proxy client certificate CNs aggregated servers should accept.
    #[arg(
        long,
        env = "KUBECHAIN_REQUESTHEADER_ALLOWED_NAMES",
        value_delimiter = ',',
        default_value = "front-proxy-client"
    )]
    requestheader_allowed_names: Vec<String>,
    /// Whether API Priority and Fairness classifies and limits requests
    /// (kube's flag; `false` leaves every request unlimited).
    #[arg(
        long,
        env = "KUBECHAIN_ENABLE_PRIORITY_AND_FAIRNESS",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    enable_priority_and_fairness: bool,
    /// kube's limit on read-only requests in flight; with
    /// `--max-mutating-requests-inflight`, the seats priority and fairness
    /// shares among its levels.
    #[arg(long, env = "KUBECHAIN_MAX_REQUESTS_INFLIGHT", default_value_t = 400)]
    max_requests_inflight: u32,
    /// kube's limit on mutating requests in flight (see `--max-requests-inflight`).
    #[arg(
        long,
        env = "KUBECHAIN_MAX_MUTATING_REQUESTS_INFLIGHT",
        default_value_t = 200
    )]
    max_mutating_requests_inflight: u32,
    /// HTTP worker threads.
    #[arg(long, env = "KUBECHAIN_WORKERS", default_value_t = 2)]
    workers: usize,
    /// How long a stopping front door serves on while `/readyz` fails, so
    /// that load balancers (swarm's routing mesh, a Service) stop sending
    /// it connections before it stops accepting them.
    #[arg(long, env = "KUBECHAIN_SHUTDOWN_DELAY_DURATION", default_value = "0s", value_parser = config::seconds)]
    shutdown_delay_duration: Duration,
    #[command(flatten)]
    audit: AuditOptions,
    #[command(flatten)]
    config: Config,
}

fn main() -> anyhow::Result<()> {
    let options: Options = kubechain_apiserver::parse();
    kubechain_apiserver::run(options.config.logging, run(options))
}

async fn run(options: Options) -> anyhow::Result<()> {
    // A policy that does not parse stops the server before anything starts.
    let auditor = Auditor::from_options(&options.audit).context("audit")?;
    let core = Delegate {
        component: "core-server",
        endpoints: &options.core_endpoint,
        server_name: &options.core_server_name,
    };
    let server = Server::in_chain("aggregator", &options.config, Some(core)).await?;
    let core_check = server.delegate_check().context("the core server link")?;
    let storage = server.storage();
    let (cacher, prefix) = (storage.cacher().clone(), storage.prefix());
    let etcd = server.etcd().clone();
    let mut server = server
        .with_check("core-server", core_check)
        .with_stored(vec![apiservice::resource()], &storage)
        .install()
        .await
        .context("installing APIServices")?;
    let api = server.api().clone();

    let client = Loopback::new(api.clone(), "system:kube-aggregator");
    let identity = front_proxy_identity(&options)?;
    let clients = Arc::new(backend::Clients::new(Some(identity)));
    let routes = proxy::Routes::default();
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    let (leader, campaigning) = generic_server::leader::elect(
        etcd.clone(),
        &apimachinery::keys::lease("aggregator-controllers"),
        &format!("{host}-{}", std::process::id()),
    );
    let flow_control = PriorityAndFairness::new(
        &cacher,
        prefix,
        Some(etcd),
        options.max_requests_inflight + options.max_mutating_requests_inflight,
    )
    .await
    .context("following the flow control configuration")?;
    let proxy: Arc<dyn generic_server::request::Handler> = Arc::new(proxy::Aggregator::new(
        api.clone(),
        routes.clone(),
        clients.clone(),
    ));
    let mut router = Router::new(proxy.clone())
        .route("/openapi/v2", Arc::new(openapi_v2::OpenApiV2::new(proxy)));
    if options.enable_priority_and_fairness {
        router = router.route(
            flowcontrol::DUMP_PRIORITY_LEVELS,
            Arc::new(PriorityLevelsDump(flow_control.clone())),
        );
    }
    let handler = Arc::new(router);
    controllers::add_post_start_hooks(
        &mut server,
        controllers::Shared {
            client: client.clone(),
            front_door: handler.clone(),
            clients,
            routes,
            leader,
        },
    )?;
    // kube's hook of the same name: ready once aggregated servers can read
    // how to verify the front door.
    server.add_post_start_hook(
        "start-cluster-authentication-info-controller",
        publish_authentication_config(client, options_authentication(&options)?),
    );

    // kube's `--authorization-mode=Node,RBAC`: kubelets first, by what
    // their pods use; its pods cache also says which pods exist, for tokens.
    let node = NodeAuthorizer::new(&cacher, prefix)
        .await
        .context("following pods for the Node authorizer")?;
    let mut authenticator = match &options.token_auth_file {
        Some(path) => Authenticator::with_token_file(path)
            .with_context(|| format!("reading {}", path.display()))?,
        None => Authenticator::default(),
    };
    if let Some(path) = &options.service_account_key_file {
        let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        // Tokens die with their ServiceAccount and with the Pod or Secret
        // they are bound to: the front door follows who exists, by uid.
        let follow = |resource: &'static str| {
            let prefix = apimachinery::keys::key_prefix(storage.prefix(), "", resource);
            let cacher = cacher.clone();
            async move {
                cacher
                    .register(&prefix, generic_server::storage::cacher::uid_ingest())
                    .await
                    .with_context(|| format!("following {resource}"))
            }
        };
        authenticator = authenticator
            .with_service_accounts(
                generic_server::jwt::Verifier::new(&pem, &options.service_account_issuer)?,
                follow("serviceaccounts").await?,
            )
            .with_bound_objects(node.pods(), follow("secrets").await?);
    }
    let authenticator = Arc::new(authenticator);
    token_review::install(&api, authenticator.clone());
    let rbac = Rbac::new(&cacher, prefix)
        .await
        .context("following the RBAC policy")?;
    // kube's hook of the same name: ready once the configuration in etcd is in effect.
    let consumer = flow_control.clone();
    server.add_post_start_hook("priority-and-fairness-config-consumer", async move {
        if let Err(e) = cacher.wait_fresh().await {
            tracing::warn!(error = %e, "reading the flow control configuration");
        }
        tracing::info!(levels = ?consumer.nominal_limits(), "priority and fairness: nominal seats");
    });
    let authorizer = Union(vec![Box::new(node), Box::new(rbac)]);
    let door = Pipeline::new(authenticator, Box::new(authorizer), handler);
    let door = match options.enable_priority_and_fairness {
        true => door.with_flow_control(flow_control),
        false => door,
    };
    let door = door.with_audit(auditor);
    tracing::info!(listen = %options.listen, "aggregator serving");
    let endpoint = FrontDoorEndpoint {
        listen: options.listen,
        workers: options.workers,
        shutdown_delay: options.shutdown_delay_duration,
    };
    server
        .serve_front_door(door, endpoint)
        .await
        .context("serving HTTPS")?;
    // Stopped: wait (briefly) for the leader lease to be given up.
    let _ = tokio::time::timeout(Duration::from_secs(2), campaigning).await;
    Ok(())
}

/// The front-proxy client certificate (or, without one, our serving
/// certificate, which aggregated servers will not accept as a front proxy).
fn front_proxy_identity(options: &Options) -> anyhow::Result<backend::Identity> {
    let (cert, key) = match (
        &options.proxy_client_cert_file,
        &options.proxy_client_key_file,
    ) {
        (Some(c), Some(k)) => (c, k),
        _ => (
            &options.config.tls.tls_cert_file,
            &options.config.tls.tls_private_key_file,
        ),
    };
    Ok(backend::Identity {
        cert: std::fs::read(cert).with_context(|| format!("reading {}", cert.display()))?,
        key: std::fs::read(key).with_context(|| format!("reading {}", key.display()))?,
    })
}

/// The `kube-system/extension-apiserver-authentication` data.
fn options_authentication(options: &Options) -> anyhow::Result<serde_json::Value> {
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))
    };
    let mut data = json!({"client-ca-file": read(&options.config.tls.client_ca_file)?});
    if let Some(ca) = &options.requestheader_client_ca_file {
        data["requestheader-client-ca-file"] = json!(read(ca)?);
        data["requestheader-allowed-names"] =
            json!(serde_json::to_string(&options.requestheader_allowed_names)?);
        data["requestheader-username-headers"] = json!("[\"X-Remote-User\"]");
        data["requestheader-uid-headers"] = json!("[\"X-Remote-Uid\"]");
        data["requestheader-group-headers"] = json!("[\"X-Remote-Group\"]");
        data["requestheader-extra-headers-prefix"] = json!("[\"X-Remote-Extra-\"]");
    }
    Ok(data)
}

/// Publishes how aggregated servers can verify the aggregator, as
/// kube-apiserver does, retrying until the core server takes it.
async fn publish_authentication_config(client: Loopback, data: serde_json::Value) {
    let path = "/api/v1/namespaces/kube-system/configmaps";
    let name = "extension-apiserver-authentication";
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "kube-system"}, "data": data});
    for _ in 0..60 {
        let done = match client.get(&format!("{path}/{name}")).await {
            Ok(current) if current["data"] == object["data"] => true,
            Ok(mut current) => {
                current["data"] = object["data"].clone();
                client
                    .update(&format!("{path}/{name}"), &current)
                    .await
                    .is_ok()
            }
            Err(_) => client.create(path, &object).await.is_ok(),
        };
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tracing::warn!("could not publish {name}");
}
