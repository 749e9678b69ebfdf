//! The core server's controllers, each an actor fed by an informer, started
//! as named post-start hooks (`/readyz?verbose` lists them); a hook ends
//! once its informers have synced.

pub mod clusterrole_aggregation;
pub mod default_service_cidr;
pub mod flowcontrol_bootstrap;
pub mod garbage_collector;
pub mod per_namespace;
pub mod resource_quota;
pub mod root_ca_publisher;
pub mod service_cidrs;
pub mod serviceaccount;
pub mod validating_admission_policy_status;

use std::sync::Arc;
use std::time::Duration;

use actix::Actor;
use generic_server::informer::{self, Change};
use generic_server::loopback::Loopback;
use generic_server::registry::Store;
use kubechain_apiserver::{Chained, Installed};
use serde_json::Value;

use crate::allocation::AllocationRepair;
use crate::cluster_ip::ClusterIps;

/// Adds the core server's controllers: kube's bootstrap RBAC policy and the
/// ClusterRole aggregation controller, the garbage collector (over this
/// server's objects and its delegates'), the service account controller and
/// the root CA publisher (given the CA bundle it publishes), each keeping
/// one object in every namespace, the resource quota controller, the repair
/// of service IP and node port allocations, the default ServiceCIDR and
/// ServiceCIDR controllers (given the service IP range), the
/// ValidatingAdmissionPolicy status controller, and API Priority and
/// Fairness's bootstrap configuration.
pub fn add_post_start_hooks(
    server: &mut Installed<Chained>,
    client: Loopback,
    root_ca_bundle: Option<String>,
    service_cidr: &str,
    cluster_ips: ClusterIps,
) {
    let bootstrap_client = client.clone();
    server.add_post_start_hook("rbac/bootstrap-roles", async move {
        crate::bootstrap_policy::bootstrap(bootstrap_client).await;
    });
    if let Some(roles) = server
        .api()
        .store(apimachinery::rbac::GROUP, "v1", "clusterroles")
    {
        let aggregation_client = client.clone();
        server.add_post_start_hook("start-clusterrole-aggregation-controller", async move {
            let controller =
                clusterrole_aggregation::AggregationController::new(aggregation_client).start();
            informer::follow(roles, Duration::from_secs(30), move |change| {
                controller.do_send(clusterrole_aggregation::Sync(change));
                true
            })
            .wait()
            .await;
        });
    }
    let api = server.api().clone();
    let (discovery, cacher, root) = (
        server.discovery().clone(),
        server.storage().cacher().clone(),
        server.storage().prefix().to_string(),
    );
    let gc_client = client.clone();
    server.add_post_start_hook("start-garbage-collector-controller", async move {
        let (collector, synced) =
            garbage_collector::GarbageCollector::start(api.stores(), gc_client, discovery.clone());
        garbage_collector::follow_delegates(&collector, cacher, discovery, &root);
        informer::Synced::all(synced).await;
    });
    if let Some(quotas) = server.api().store("", "v1", "resourcequotas") {
        let (quota_client, stores) = (client.clone(), server.api().stores());
        let (cacher, root) = (
            server.storage().cacher().clone(),
            server.storage().prefix().to_string(),
        );
        server.add_post_start_hook("start-resource-quota-controller", async move {
            resource_quota::ResourceQuotaController::start(
                quota_client,
                quotas,
                stores,
                cacher,
                root,
            )
            .wait()
            .await;
        });
    }
    if let Some(policies) = server.api().store(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
    ) {
        let (status_client, stores) = (client.clone(), server.api().stores());
        server.add_post_start_hook(
            "start-validating-admission-policy-status-controller",
            async move {
                let controller = validating_admission_policy_status::PolicyStatusController::new(
                    status_client,
                    stores,
                )
                .start();
                follow_present(policies, move |policy| {
                    controller.do_send(validating_admission_policy_status::Sync(policy))
                })
                .wait()
                .await;
            },
        );
    }
    if let (Some(schemas), Some(levels)) = (
        server
            .api()
            .store(apimachinery::flowcontrol::GROUP, "v1", "flowschemas"),
        server.api().store(
            apimachinery::flowcontrol::GROUP,
            "v1",
            "prioritylevelconfigurations",
        ),
    ) {
        let producer_client = client.clone();
        server.add_post_start_hook("priority-and-fairness-config-producer", async move {
            let producer =
                flowcontrol_bootstrap::ConfigurationController::new(producer_client).start();
            let synced = [schemas, levels].map(|store| {
                let producer = producer.clone();
                informer::follow(store, Duration::from_secs(30), move |_| {
                    producer.do_send(flowcontrol_bootstrap::Sync);
                    true
                })
            });
            informer::Synced::all(synced.into_iter().collect()).await;
            producer.do_send(flowcontrol_bootstrap::Sync);
        });
    }
    keep_in_every_namespace(
        server,
        "start-service-account-controller",
        serviceaccount::ServiceAccountController::new(
            client.clone(),
            serviceaccount::DefaultServiceAccount,
        ),
    );
    let default_cidr =
        default_service_cidr::DefaultServiceCidrController::new(client.clone(), service_cidr);
    server.add_post_start_hook("start-kubernetes-service-cidr-controller", async move {
        default_cidr.start();
    });
    if let (Some(cidrs), Some(addresses)) = (
        server
            .api()
            .store("networking.k8s.io", "v1", "servicecidrs"),
        server.api().store("networking.k8s.io", "v1", "ipaddresses"),
    ) {
        let (cidr_client, ips) = (client.clone(), cluster_ips.clone());
        server.add_post_start_hook("start-service-cidr-controller", async move {
            let controller = service_cidrs::ServiceCidrController::new(cidr_client, ips).start();
            let on_cidr = controller.clone();
            let cidrs_synced = follow_present(cidrs, move |cidr| {
                let name = cidr["metadata"]["name"].as_str().unwrap_or_default();
                on_cidr.do_send(service_cidrs::Sync(name.to_string()));
            });
            let addresses_synced =
                informer::follow(addresses, Duration::from_secs(30), move |change| {
                    if service_cidrs::unblocks(&change) {
                        controller.do_send(service_cidrs::SyncTerminating);
                    }
                    true
                });
            informer::Synced::all(vec![cidrs_synced, addresses_synced]).await;
        });
    }
    if let Some(bundle) = root_ca_bundle {
        keep_in_every_namespace(
            server,
            "start-root-ca-certificate-publisher-controller",
            root_ca_publisher::RootCaPublisher::new(
                client,
                root_ca_publisher::RootCaConfigMap::new(bundle),
            ),
        );
    }
    if let Some(services) = server.api().store("", "v1", "services") {
        let storage = server.storage().cacher().storage().clone();
        server.add_post_start_hook("start-service-ip-repair-controllers", async move {
            AllocationRepair::start(storage, services, cluster_ips)
                .wait()
                .await;
        });
    }
}

/// Starts `controller` as the hook `name`, when this server holds
/// namespaces and the kept object's resource.
fn keep_in_every_namespace<K: per_namespace::KeptObject>(
    server: &mut Installed<Chained>,
    name: &str,
    controller: per_namespace::PerNamespaceController<K>,
) {
    let (Some(namespaces), Some(objects)) = (
        server.api().store("", "v1", "namespaces"),
        server.api().store("", "v1", K::RESOURCE),
    ) else {
        return;
    };
    server.add_post_start_hook(name, async move {
        informer::Synced::all(controller.follow(namespaces, objects)).await;
    });
}

/// Follows `store` (resynced every 30 s), handing `each` every object
/// present in it.
fn follow_present(store: Arc<Store>, each: impl Fn(Value) + Send + 'static) -> informer::Synced {
    informer::follow(store, Duration::from_secs(30), move |change| {
        if let Change::Present(object) = change {
            each(object);
        }
        true
    })
}
