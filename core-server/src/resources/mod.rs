//! The built-in resources this server serves: one small strategy each,
//! with the pieces several share (`pod_spec`, `workload`, `fields`,
//! `quantity`) beside them.

mod admissionregistration;
mod certificatesigningrequest;
mod componentstatus;
mod configmap;
mod controllerrevision;
mod cronjob;
mod csidriver;
mod csinode;
mod csistoragecapacity;
mod daemonset;
mod deployment;
mod endpoints;
mod endpointslice;
mod event;
mod events_v1;
pub(crate) mod fields;
mod flowcontrol;
mod horizontalpodautoscaler;
mod horizontalpodautoscaler_v1;
mod ingress;
mod ingressclass;
mod ipaddress;
mod job;
#[cfg(test)]
mod kube_columns;
mod kubelet;
mod lease;
mod limitrange;
mod namespace;
mod networkpolicy;
mod node;
mod pem;
mod persistentvolume;
mod persistentvolumeclaim;
mod pod;
mod pod_spec;
mod pod_subresources;
mod poddisruptionbudget;
mod podtemplate;
mod priorityclass;
mod rbac;
mod replicaset;
mod replicationcontroller;
mod resourcequota;
mod runtimeclass;
mod secret;
mod service;
mod serviceaccount;
mod servicecidr;
mod statefulset;
mod storageclass;
mod volumeattachment;
mod workload;

#[cfg(test)]
pub use certificatesigningrequest::CertificateSigningRequestStrategy;
pub use certificatesigningrequest::{CsrRequester, KUBE_APISERVER_CLIENT_SIGNER, request_der};
pub use priorityclass::SYSTEM_CLASSES as SYSTEM_PRIORITY_CLASSES;

use apimachinery::group_version::GroupVersionKind;
use generic_server::resource::{Resource, ScaleSelector, ScaleSpec};
use k8s_openapi::api::{
    admissionregistration::v1 as admission_v1, apps::v1 as apps, autoscaling::v1 as autoscaling_v1,
    autoscaling::v2 as autoscaling, batch::v1 as batch, certificates::v1 as certificates,
    coordination::v1 as coordination, core::v1, discovery::v1 as discovery, events::v1 as events,
    flowcontrol::v1 as flowcontrol_v1, networking::v1 as networking, node::v1 as node_v1,
    policy::v1 as policy, rbac::v1 as rbac_v1, scheduling::v1 as scheduling,
    storage::v1 as storage,
};

/// The `componentstatuses` resource: read-only, served computed
/// ([`component_statuses`]).
pub fn component_status() -> Resource {
    Resource::builtin::<v1::ComponentStatus>(componentstatus::ComponentStatusStrategy)
        .short_names(&["cs"])
        .verbs(&["get", "list"])
        .deprecated("v1 ComponentStatus is deprecated in v1.19+")
}

/// `componentstatuses`, computed from `storage`'s health.
pub fn component_statuses(
    storage: std::sync::Arc<dyn generic_server::storage::Storage>,
    etcd_servers: usize,
) -> (Resource, std::sync::Arc<dyn generic_server::rest::ReadOnly>) {
    (
        component_status(),
        std::sync::Arc::new(componentstatus::ComponentStatuses {
            storage,
            etcd_servers,
        }),
    )
}

/// The verbs of resources that cannot be deleted as a collection (namespaces).
const NO_DELETECOLLECTION: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// Every resource of the core server, in discovery order (core v1
/// alphabetically, then each group's resources alphabetically).
pub fn all() -> Vec<Resource> {
    let mut resources = core_v1();
    resources.extend(named_groups());
    resources
}

fn core_v1() -> Vec<Resource> {
    vec![
        crate::binding::resource(),
        Resource::builtin::<v1::ConfigMap>(configmap::ConfigMapStrategy).short_names(&["cm"]),
        Resource::builtin::<v1::Endpoints>(endpoints::EndpointsStrategy).short_names(&["ep"]),
        Resource::builtin::<v1::Event>(event::EventStrategy).short_names(&["ev"]),
        Resource::builtin::<v1::LimitRange>(limitrange::LimitRangeStrategy)
            .short_names(&["limits"]),
        Resource::builtin::<v1::Namespace>(namespace::NamespaceStrategy)
            .short_names(&["ns"])
            .verbs(NO_DELETECOLLECTION)
            .subresource("finalize", &["update"])
            .subresource("status", &["get", "patch", "update"]),
        Resource::builtin::<v1::Node>(node::NodeStrategy)
            .short_names(&["no"])
            .connect_subresource(
                kubelet::NODE_PROXY.0,
                kubelet::NODE_PROXY.1,
                kubelet::NODE_PROXY.2,
                kubelet::NODE_PROXY.3,
            )
            .status(),
        Resource::builtin::<v1::PersistentVolumeClaim>(
            persistentvolumeclaim::PersistentVolumeClaimStrategy,
        )
        .short_names(&["pvc"])
        .status(),
        Resource::builtin::<v1::PersistentVolume>(persistentvolume::PersistentVolumeStrategy)
            .short_names(&["pv"])
            .status(),
        pod(),
        Resource::builtin::<v1::PodTemplate>(podtemplate::PodTemplateStrategy),
        Resource::builtin::<v1::ReplicationController>(
            replicationcontroller::ReplicationControllerStrategy,
        )
        .short_names(&["rc"])
        .categories(&["all"])
        .status()
        .scale(ScaleSpec {
            selector: ScaleSelector::Map("/spec/selector".into()),
            ..ScaleSpec::standard()
        }),
        Resource::builtin::<v1::ResourceQuota>(resourcequota::ResourceQuotaStrategy)
            .short_names(&["quota"])
            .status(),
        Resource::builtin::<v1::Secret>(secret::SecretStrategy),
        Resource::builtin::<v1::ServiceAccount>(serviceaccount::ServiceAccountStrategy)
            .short_names(&["sa"])
            .subresource_of_kind::<k8s_openapi::api::authentication::v1::TokenRequest>(
                "token",
                &["create"],
            ),
        Resource::builtin::<v1::Service>(service::ServiceStrategy)
            .short_names(&["svc"])
            .categories(&["all"])
            .connect_subresource(
                kubelet::SERVICE_PROXY.0,
                kubelet::SERVICE_PROXY.1,
                kubelet::SERVICE_PROXY.2,
                kubelet::SERVICE_PROXY.3,
            )
            .status(),
    ]
}

/// Pods, with their subresources in kube's (alphabetical) order: the
/// kubelet's, and binding and eviction (`crate::binding`, `crate::eviction`).
fn pod() -> Resource {
    let mut pod = kubelet::POD_CONNECT
        .iter()
        .fold(
            Resource::builtin::<v1::Pod>(pod::PodStrategy)
                .short_names(&["po"])
                .categories(&["all"]),
            |pod, (name, kind, verbs, options)| pod.connect_subresource(name, kind, verbs, options),
        )
        .subresource_of_kind::<v1::Binding>("binding", &["create"])
        .subresource("ephemeralcontainers", &["get", "patch", "update"])
        .subresource_of_kind::<policy::Eviction>("eviction", &["create"])
        .subresource("resize", &["get", "patch", "update"])
        .status();
    pod.subresources.sort_by(|a, b| a.name.cmp(&b.name));
    pod
}

fn named_groups() -> Vec<Resource> {
    let workload = |r: Resource, short: &str| r.short_names(&[short]).categories(&["all"]).status();
    vec![
        Resource::builtin::<apps::ControllerRevision>(
            controllerrevision::ControllerRevisionStrategy,
        ),
        workload(
            Resource::builtin::<apps::DaemonSet>(daemonset::DaemonSetStrategy),
            "ds",
        ),
        workload(
            Resource::builtin::<apps::Deployment>(deployment::DeploymentStrategy),
            "deploy",
        )
        .scale(ScaleSpec::standard()),
        workload(
            Resource::builtin::<apps::ReplicaSet>(replicaset::ReplicaSetStrategy),
            "rs",
        )
        .scale(ScaleSpec::standard()),
        workload(
            Resource::builtin::<apps::StatefulSet>(statefulset::StatefulSetStrategy),
            "sts",
        )
        .scale(ScaleSpec::standard()),
        Resource::builtin::<events::Event>(events_v1::EventsV1Strategy)
            .short_names(&["ev"])
            .stored_as(GroupVersionKind::new("", "v1", "Event")),
        workload(
            Resource::builtin::<autoscaling::HorizontalPodAutoscaler>(
                horizontalpodautoscaler::HorizontalPodAutoscalerStrategy,
            ),
            "hpa",
        ),
        workload(
            Resource::builtin::<autoscaling_v1::HorizontalPodAutoscaler>(
                horizontalpodautoscaler_v1::HorizontalPodAutoscalerV1Strategy,
            ),
            "hpa",
        )
        .stored_as(GroupVersionKind::new(
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
        )),
        workload(
            Resource::builtin::<batch::CronJob>(cronjob::CronJobStrategy),
            "cj",
        ),
        Resource::builtin::<batch::Job>(job::JobStrategy)
            .categories(&["all"])
            .status(),
        Resource::builtin::<certificates::CertificateSigningRequest>(
            certificatesigningrequest::CertificateSigningRequestStrategy,
        )
        .short_names(&["csr"])
        .subresource("approval", &["get", "patch", "update"])
        .status(),
        Resource::builtin::<networking::IngressClass>(ingressclass::IngressClassStrategy),
        Resource::builtin::<networking::Ingress>(ingress::IngressStrategy)
            .short_names(&["ing"])
            .status(),
        Resource::builtin::<networking::IPAddress>(ipaddress::IPAddressStrategy)
            .short_names(&["ip"]),
        Resource::builtin::<networking::NetworkPolicy>(networkpolicy::NetworkPolicyStrategy)
            .short_names(&["netpol"]),
        Resource::builtin::<networking::ServiceCIDR>(servicecidr::ServiceCIDRStrategy).status(),
        Resource::builtin::<policy::PodDisruptionBudget>(
            poddisruptionbudget::PodDisruptionBudgetStrategy,
        )
        .short_names(&["pdb"])
        .status(),
        Resource::builtin::<rbac_v1::ClusterRoleBinding>(rbac::RoleBindingStrategy {
            namespaced: false,
        }),
        Resource::builtin::<rbac_v1::ClusterRole>(rbac::RoleStrategy { namespaced: false }),
        Resource::builtin::<rbac_v1::RoleBinding>(rbac::RoleBindingStrategy { namespaced: true }),
        Resource::builtin::<rbac_v1::Role>(rbac::RoleStrategy { namespaced: true }),
        Resource::builtin::<storage::CSIDriver>(csidriver::CSIDriverStrategy),
        Resource::builtin::<storage::CSINode>(csinode::CSINodeStrategy),
        Resource::builtin::<storage::CSIStorageCapacity>(
            csistoragecapacity::CSIStorageCapacityStrategy,
        ),
        Resource::builtin::<storage::StorageClass>(storageclass::StorageClassStrategy)
            .short_names(&["sc"]),
        Resource::builtin::<storage::VolumeAttachment>(volumeattachment::VolumeAttachmentStrategy)
            .status(),
        Resource::builtin::<admission_v1::MutatingWebhookConfiguration>(
            admissionregistration::WebhookConfigurationStrategy { mutating: true },
        )
        .categories(&["api-extensions"]),
        Resource::builtin::<admission_v1::ValidatingAdmissionPolicy>(
            admissionregistration::ValidatingAdmissionPolicyStrategy,
        )
        .categories(&["api-extensions"])
        .status(),
        Resource::builtin::<admission_v1::ValidatingAdmissionPolicyBinding>(
            admissionregistration::ValidatingAdmissionPolicyBindingStrategy,
        )
        .categories(&["api-extensions"]),
        Resource::builtin::<admission_v1::ValidatingWebhookConfiguration>(
            admissionregistration::WebhookConfigurationStrategy { mutating: false },
        )
        .categories(&["api-extensions"]),
        Resource::builtin::<scheduling::PriorityClass>(priorityclass::PriorityClassStrategy)
            .short_names(&["pc"]),
        Resource::builtin::<coordination::Lease>(lease::LeaseStrategy),
        Resource::builtin::<node_v1::RuntimeClass>(runtimeclass::RuntimeClassStrategy),
        Resource::builtin::<discovery::EndpointSlice>(endpointslice::EndpointSliceStrategy),
        Resource::builtin::<flowcontrol_v1::FlowSchema>(flowcontrol::FlowSchemaStrategy).status(),
        Resource::builtin::<flowcontrol_v1::PriorityLevelConfiguration>(
            flowcontrol::PriorityLevelConfigurationStrategy,
        )
        .status(),
    ]
}

/// Validation shared by configmaps and secrets: data keys and total size.
pub(crate) mod data {
    use apimachinery::error::FieldError;
    use serde_json::Value;

    /// Largest total size of a ConfigMap's or Secret's data.
    pub const MAX_BYTES: usize = 1024 * 1024;

    fn valid_key(key: &str) -> bool {
        !key.is_empty()
            && key.len() <= 253
            && key != "."
            && key != ".."
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
    }

    /// Problems with the keys of the given maps, and keys present in two of them.
    pub fn validate_keys(obj: &Value, fields: &[&str]) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for field in fields {
            for key in obj
                .get(*field)
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|m| m.keys())
            {
                if !valid_key(key) {
                    errs.push(FieldError::invalid(
                        format!("{field}[{key}]"),
                        key.as_str(),
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                    ));
                }
                if seen.contains(&key.as_str()) {
                    errs.push(FieldError::invalid(
                        format!("{field}[{key}]"),
                        key.as_str(),
                        "duplicate of key present in another map",
                    ));
                }
                seen.push(key);
            }
        }
        errs
    }

    /// The total size of the values of the given maps (strings as stored).
    pub fn total_size(obj: &Value, fields: &[&str]) -> usize {
        fields
            .iter()
            .filter_map(|f| obj.get(*f).and_then(Value::as_object))
            .flat_map(|m| m.iter())
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum()
    }

    /// The number of entries in the given maps.
    pub fn count(obj: &Value, fields: &[&str]) -> usize {
        fields
            .iter()
            .filter_map(|f| obj.get(*f).and_then(Value::as_object))
            .map(|m| m.len())
            .sum()
    }

    /// Errors for changing data of an object marked `immutable`.
    pub fn validate_immutable(new: &Value, old: &Value, fields: &[&str]) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if old.get("immutable") != Some(&Value::Bool(true)) {
            return errs;
        }
        if new.get("immutable") != Some(&Value::Bool(true)) {
            errs.push(FieldError::forbidden(
                "immutable",
                "field is immutable when `immutable` is set",
            ));
        }
        for field in fields {
            if new.get(*field) != old.get(*field) {
                errs.push(FieldError::forbidden(
                    *field,
                    "field is immutable when `immutable` is set",
                ));
            }
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// group, plural, kind, namespaced, short names, categories, subresources.
    type Expected = (
        &'static str,
        &'static str,
        &'static str,
        bool,
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    );

    const EXPECTED: &[Expected] = &[
        ("", "bindings", "Binding", true, &[], &[], &[]),
        ("", "configmaps", "ConfigMap", true, &["cm"], &[], &[]),
        ("", "endpoints", "Endpoints", true, &["ep"], &[], &[]),
        ("", "events", "Event", true, &["ev"], &[], &[]),
        ("", "limitranges", "LimitRange", true, &["limits"], &[], &[]),
        (
            "",
            "namespaces",
            "Namespace",
            false,
            &["ns"],
            &[],
            &["finalize", "status"],
        ),
        (
            "",
            "nodes",
            "Node",
            false,
            &["no"],
            &[],
            &["proxy", "status"],
        ),
        (
            "",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            true,
            &["pvc"],
            &[],
            &["status"],
        ),
        (
            "",
            "persistentvolumes",
            "PersistentVolume",
            false,
            &["pv"],
            &[],
            &["status"],
        ),
        (
            "",
            "pods",
            "Pod",
            true,
            &["po"],
            &["all"],
            &[
                "attach",
                "binding",
                "ephemeralcontainers",
                "eviction",
                "exec",
                "log",
                "portforward",
                "proxy",
                "resize",
                "status",
            ],
        ),
        ("", "podtemplates", "PodTemplate", true, &[], &[], &[]),
        (
            "",
            "replicationcontrollers",
            "ReplicationController",
            true,
            &["rc"],
            &["all"],
            &["status", "scale"],
        ),
        (
            "",
            "resourcequotas",
            "ResourceQuota",
            true,
            &["quota"],
            &[],
            &["status"],
        ),
        ("", "secrets", "Secret", true, &[], &[], &[]),
        (
            "",
            "serviceaccounts",
            "ServiceAccount",
            true,
            &["sa"],
            &[],
            &["token"],
        ),
        (
            "",
            "services",
            "Service",
            true,
            &["svc"],
            &["all"],
            &["proxy", "status"],
        ),
        (
            "apps",
            "controllerrevisions",
            "ControllerRevision",
            true,
            &[],
            &[],
            &[],
        ),
        (
            "apps",
            "daemonsets",
            "DaemonSet",
            true,
            &["ds"],
            &["all"],
            &["status"],
        ),
        (
            "apps",
            "deployments",
            "Deployment",
            true,
            &["deploy"],
            &["all"],
            &["status", "scale"],
        ),
        (
            "apps",
            "replicasets",
            "ReplicaSet",
            true,
            &["rs"],
            &["all"],
            &["status", "scale"],
        ),
        (
            "apps",
            "statefulsets",
            "StatefulSet",
            true,
            &["sts"],
            &["all"],
            &["status", "scale"],
        ),
        ("events.k8s.io", "events", "Event", true, &["ev"], &[], &[]),
        (
            "autoscaling",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            true,
            &["hpa"],
            &["all"],
            &["status"],
        ),
        (
            "autoscaling",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            true,
            &["hpa"],
            &["all"],
            &["status"],
        ),
        (
            "batch",
            "cronjobs",
            "CronJob",
            true,
            &["cj"],
            &["all"],
            &["status"],
        ),
        ("batch", "jobs", "Job", true, &[], &["all"], &["status"]),
        (
            "certificates.k8s.io",
            "certificatesigningrequests",
            "CertificateSigningRequest",
            false,
            &["csr"],
            &[],
            &["approval", "status"],
        ),
        (
            "networking.k8s.io",
            "ingressclasses",
            "IngressClass",
            false,
            &[],
            &[],
            &[],
        ),
        (
            "networking.k8s.io",
            "ingresses",
            "Ingress",
            true,
            &["ing"],
            &[],
            &["status"],
        ),
        (
            "networking.k8s.io",
            "ipaddresses",
            "IPAddress",
            false,
            &["ip"],
            &[],
            &[],
        ),
        (
            "networking.k8s.io",
            "networkpolicies",
            "NetworkPolicy",
            true,
            &["netpol"],
            &[],
            &[],
        ),
        (
            "networking.k8s.io",
            "servicecidrs",
            "ServiceCIDR",
            false,
            &[],
            &[],
            &["status"],
        ),
        (
            "policy",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
            &["pdb"],
            &[],
            &["status"],
        ),
        (
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
            &[],
            &[],
            &[],
        ),
        (
            "rbac.authorization.k8s.io",
            "clusterroles",
            "ClusterRole",
            false,
            &[],
            &[],
            &[],
        ),
        (
            "rbac.authorization.k8s.io",
            "rolebindings",
            "RoleBinding",
            true,
            &[],
            &[],
            &[],
        ),
        (
            "rbac.authorization.k8s.io",
            "roles",
            "Role",
            true,
            &[],
            &[],
            &[],
        ),
        (
            "storage.k8s.io",
            "csidrivers",
            "CSIDriver",
            false,
            &[],
            &[],
            &[],
        ),
        (
            "storage.k8s.io",
            "csinodes",
            "CSINode",
            false,
            &[],
            &[],
            &[],
        ),
        (
            "storage.k8s.io",
            "csistoragecapacities",
            "CSIStorageCapacity",
            true,
            &[],
            &[],
            &[],
        ),
        (
            "storage.k8s.io",
            "storageclasses",
            "StorageClass",
            false,
            &["sc"],
            &[],
            &[],
        ),
        (
            "storage.k8s.io",
            "volumeattachments",
            "VolumeAttachment",
            false,
            &[],
            &[],
            &["status"],
        ),
        (
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
            false,
            &[],
            &["api-extensions"],
            &[],
        ),
        (
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies",
            "ValidatingAdmissionPolicy",
            false,
            &[],
            &["api-extensions"],
            &["status"],
        ),
        (
            "admissionregistration.k8s.io",
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
            false,
            &[],
            &["api-extensions"],
            &[],
        ),
        (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            false,
            &[],
            &["api-extensions"],
            &[],
        ),
        (
            "scheduling.k8s.io",
            "priorityclasses",
            "PriorityClass",
            false,
            &["pc"],
            &[],
            &[],
        ),
        (
            "coordination.k8s.io",
            "leases",
            "Lease",
            true,
            &[],
            &[],
            &[],
        ),
        (
            "node.k8s.io",
            "runtimeclasses",
            "RuntimeClass",
            false,
            &[],
            &[],
            &[],
        ),
        (
            "discovery.k8s.io",
            "endpointslices",
            "EndpointSlice",
            true,
            &[],
            &[],
            &[],
        ),
        (
            "flowcontrol.apiserver.k8s.io",
            "flowschemas",
            "FlowSchema",
            false,
            &[],
            &[],
            &["status"],
        ),
        (
            "flowcontrol.apiserver.k8s.io",
            "prioritylevelconfigurations",
            "PriorityLevelConfiguration",
            false,
            &[],
            &[],
            &["status"],
        ),
    ];

    #[test]
    fn every_resource_is_declared_as_kube_has_it() {
        let resources = all();
        let got: Vec<(String, String)> = resources
            .iter()
            .map(|r| (r.group.clone(), r.plural.clone()))
            .collect();
        let want: Vec<(String, String)> = EXPECTED
            .iter()
            .map(|e| (e.0.to_string(), e.1.to_string()))
            .collect();
        assert_eq!(got, want);
        for (r, (group, plural, kind, namespaced, short, categories, subresources)) in
            resources.iter().zip(EXPECTED)
        {
            let what = format!("{group}/{plural}");
            assert_eq!(r.kind, *kind, "{what}");
            assert_eq!(r.namespaced, *namespaced, "{what}");
            assert_eq!(r.short_names, *short, "{what}");
            assert_eq!(r.categories, *categories, "{what}");
            let subs: Vec<&str> = r.subresources.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(subs, *subresources, "{what}");
            let verbs: &[&str] = match *plural {
                "namespaces" => NO_DELETECOLLECTION,
                "bindings" => &["create"],
                _ => generic_server::resource::ALL_VERBS,
            };
            assert_eq!(r.verbs, verbs, "{what}");
            assert_eq!(r.scale.is_some(), subresources.contains(&"scale"), "{what}");
            let columns = r.strategy.columns();
            // kube's IPAddress printer fills an age cell it declares no column for.
            let extra = usize::from(*plural == "ipaddresses");
            assert_eq!(
                r.strategy
                    .cells(&serde_json::json!({"metadata": {"name": "x"}}))
                    .len(),
                columns.len() + extra,
                "{what}: one cell per column"
            );
        }
    }

    #[test]
    fn rbac_names_are_path_segments() {
        for r in all()
            .iter()
            .filter(|r| r.group == "rbac.authorization.k8s.io")
        {
            assert_eq!(
                r.strategy.name_rule(),
                apimachinery::validation::NameRule::PathSegment,
                "{}",
                r.plural
            );
        }
    }
}
