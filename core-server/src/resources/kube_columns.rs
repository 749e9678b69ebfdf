//! kube-apiserver 1.33's Table columns (`kubectl get`) for every resource
//! the core server serves that answers GET or LIST, as data: name, type,
//! format and priority, in kube's order.
//!
//! Source: kubernetes `pkg/printers/internalversion/printers.go`, function
//! `AddHandlers`, read at yongruilin/kubernetes@144a7980762c245f12c2a7b457c8aaef18496071
//! (a fork of kubernetes/kubernetes on master during the 1.33 cycle: it
//! imports `coordination/v1alpha2` and `resource/v1beta1`, and serves
//! MutatingAdmissionPolicy; the stored kubernetes/kubernetes copies were
//! years older). Kinds without a printer there (LimitRange, Role,
//! ClusterRole), and CSIStorageCapacity whose registry does not use its
//! printer, get `rest.NewDefaultTableConvertor`
//! (`staging/src/k8s.io/apiserver/pkg/registry/rest/table.go`): Name, then
//! Created At of type `date` holding the RFC 3339 timestamp. events.k8s.io
//! Events and autoscaling/v1 HorizontalPodAutoscalers share the storage,
//! and so the printer, of core Events and autoscaling/v2.
//!
//! The test at the bottom compares every strategy's columns with this
//! table, over every resource the server declares.

/// One column as kube's printer defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeColumn {
    /// The header, e.g. `Nominated Node`.
    pub name: &'static str,
    /// `string`, `integer`, `boolean` or `date`.
    pub type_: &'static str,
    /// `name` for the object's name column, otherwise empty.
    pub format: &'static str,
    /// 0 shown always, 1 only with `-o wide`.
    pub priority: i32,
}

/// A column shown always.
const fn col(name: &'static str, type_: &'static str) -> KubeColumn {
    KubeColumn {
        name,
        type_,
        format: "",
        priority: 0,
    }
}

/// A column shown only with `-o wide`.
const fn wide(name: &'static str, type_: &'static str) -> KubeColumn {
    KubeColumn {
        priority: 1,
        ..col(name, type_)
    }
}

const NAME: KubeColumn = KubeColumn {
    format: "name",
    ..col("Name", "string")
};
const AGE: KubeColumn = col("Age", "string");
const S: &str = "string";
const I: &str = "integer";
const B: &str = "boolean";

/// `rest.NewDefaultTableConvertor`'s columns.
const DEFAULT: &[KubeColumn] = &[NAME, col("Created At", "date")];

const EVENT: &[KubeColumn] = &[
    col("Last Seen", S),
    col("Type", S),
    col("Reason", S),
    col("Object", S),
    wide("Subobject", S),
    wide("Source", S),
    col("Message", S),
    wide("First Seen", S),
    wide("Count", S),
    KubeColumn {
        priority: 1,
        ..NAME
    },
];

const HPA: &[KubeColumn] = &[
    NAME,
    col("Reference", S),
    col("Targets", S),
    col("MinPods", S),
    col("MaxPods", S),
    col("Replicas", S),
    AGE,
];

const BINDING: &[KubeColumn] = &[
    NAME,
    col("Role", S),
    AGE,
    wide("Users", S),
    wide("Groups", S),
    wide("ServiceAccounts", S),
];

const REPLICAS: &[KubeColumn] = &[
    NAME,
    col("Desired", I),
    col("Current", I),
    col("Ready", I),
    AGE,
    wide("Containers", S),
    wide("Images", S),
    wide("Selector", S),
];

const WEBHOOKS: &[KubeColumn] = &[NAME, col("Webhooks", I), AGE];

/// (group, resource) → kube 1.33's columns.
pub const KUBE_COLUMNS: &[(&str, &str, &[KubeColumn])] = &[
    // core v1
    ("", "configmaps", &[NAME, col("Data", S), AGE]),
    ("", "endpoints", &[NAME, col("Endpoints", S), AGE]),
    ("", "events", EVENT),
    ("", "limitranges", DEFAULT),
    ("", "namespaces", &[NAME, col("Status", S), AGE]),
    (
        "",
        "nodes",
        &[
            NAME,
            col("Status", S),
            col("Roles", S),
            AGE,
            col("Version", S),
            wide("Internal-IP", S),
            wide("External-IP", S),
            wide("OS-Image", S),
            wide("Kernel-Version", S),
            wide("Container-Runtime", S),
        ],
    ),
    (
        "",
        "persistentvolumeclaims",
        &[
            NAME,
            col("Status", S),
            col("Volume", S),
            col("Capacity", S),
            col("Access Modes", S),
            col("StorageClass", S),
            col("VolumeAttributesClass", S),
            AGE,
            wide("VolumeMode", S),
        ],
    ),
    (
        "",
        "persistentvolumes",
        &[
            NAME,
            col("Capacity", S),
            col("Access Modes", S),
            col("Reclaim Policy", S),
            col("Status", S),
            col("Claim", S),
            col("StorageClass", S),
            col("VolumeAttributesClass", S),
            col("Reason", S),
            AGE,
            wide("VolumeMode", S),
        ],
    ),
    (
        "",
        "pods",
        &[
            NAME,
            col("Ready", S),
            col("Status", S),
            col("Restarts", S),
            AGE,
            wide("IP", S),
            wide("Node", S),
            wide("Nominated Node", S),
            wide("Readiness Gates", S),
        ],
    ),
    (
        "",
        "podtemplates",
        &[
            NAME,
            col("Containers", S),
            col("Images", S),
            col("Pod Labels", S),
        ],
    ),
    ("", "replicationcontrollers", REPLICAS),
    (
        "",
        "resourcequotas",
        &[NAME, col("Request", S), col("Limit", S), AGE],
    ),
    ("", "secrets", &[NAME, col("Type", S), col("Data", S), AGE]),
    ("", "serviceaccounts", &[NAME, col("Secrets", S), AGE]),
    (
        "",
        "services",
        &[
            NAME,
            col("Type", S),
            col("Cluster-IP", S),
            col("External-IP", S),
            col("Port(s)", S),
            AGE,
            wide("Selector", S),
        ],
    ),
    (
        "",
        "componentstatuses",
        &[NAME, col("Status", S), col("Message", S), col("Error", S)],
    ),
    // apps
    (
        "apps",
        "controllerrevisions",
        &[NAME, col("Controller", S), col("Revision", S), AGE],
    ),
    (
        "apps",
        "daemonsets",
        &[
            NAME,
            col("Desired", I),
            col("Current", I),
            col("Ready", I),
            col("Up-to-date", I),
            col("Available", I),
            col("Node Selector", S),
            AGE,
            wide("Containers", S),
            wide("Images", S),
            wide("Selector", S),
        ],
    ),
    (
        "apps",
        "deployments",
        &[
            NAME,
            col("Ready", S),
            col("Up-to-date", S),
            col("Available", S),
            AGE,
            wide("Containers", S),
            wide("Images", S),
            wide("Selector", S),
        ],
    ),
    ("apps", "replicasets", REPLICAS),
    (
        "apps",
        "statefulsets",
        &[
            NAME,
            col("Ready", S),
            AGE,
            wide("Containers", S),
            wide("Images", S),
        ],
    ),
    // events.k8s.io: core Events' storage and printer
    ("events.k8s.io", "events", EVENT),
    // autoscaling v1 and v2: one storage, one printer
    ("autoscaling", "horizontalpodautoscalers", HPA),
    // batch
    (
        "batch",
        "cronjobs",
        &[
            NAME,
            col("Schedule", S),
            col("Timezone", S),
            col("Suspend", B),
            col("Active", I),
            col("Last Schedule", S),
            AGE,
            wide("Containers", S),
            wide("Images", S),
            wide("Selector", S),
        ],
    ),
    (
        "batch",
        "jobs",
        &[
            NAME,
            col("Status", S),
            col("Completions", S),
            col("Duration", S),
            AGE,
            wide("Containers", S),
            wide("Images", S),
            wide("Selector", S),
        ],
    ),
    // certificates.k8s.io
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        &[
            NAME,
            AGE,
            col("SignerName", S),
            col("Requestor", S),
            col("RequestedDuration", S),
            col("Condition", S),
        ],
    ),
    // networking.k8s.io
    (
        "networking.k8s.io",
        "ingressclasses",
        &[NAME, col("Controller", S), col("Parameters", S), AGE],
    ),
    (
        "networking.k8s.io",
        "ingresses",
        &[
            NAME,
            col("Class", S),
            col("Hosts", S),
            col("Address", S),
            col("Ports", S),
            AGE,
        ],
    ),
    (
        "networking.k8s.io",
        "ipaddresses",
        &[NAME, col("ParentRef", S)],
    ),
    (
        "networking.k8s.io",
        "networkpolicies",
        &[NAME, col("Pod-Selector", S), AGE],
    ),
    (
        "networking.k8s.io",
        "servicecidrs",
        &[NAME, col("CIDRs", S), AGE],
    ),
    // policy
    (
        "policy",
        "poddisruptionbudgets",
        &[
            NAME,
            col("Min Available", S),
            col("Max Unavailable", S),
            col("Allowed Disruptions", I),
            AGE,
        ],
    ),
    // rbac.authorization.k8s.io: roles have no printer
    ("rbac.authorization.k8s.io", "clusterrolebindings", BINDING),
    ("rbac.authorization.k8s.io", "clusterroles", DEFAULT),
    ("rbac.authorization.k8s.io", "rolebindings", BINDING),
    ("rbac.authorization.k8s.io", "roles", DEFAULT),
    // storage.k8s.io
    (
        "storage.k8s.io",
        "csidrivers",
        &[
            NAME,
            col("AttachRequired", B),
            col("PodInfoOnMount", B),
            col("StorageCapacity", B),
            col("TokenRequests", S),
            col("RequiresRepublish", B),
            col("Modes", S),
            AGE,
        ],
    ),
    (
        "storage.k8s.io",
        "csinodes",
        &[NAME, col("Drivers", I), AGE],
    ),
    // printers.go has a printer (Name, StorageClassName, Capacity), but
    // `pkg/registry/storage/csistoragecapacity/storage/storage.go` wires
    // `rest.NewDefaultTableConvertor`.
    ("storage.k8s.io", "csistoragecapacities", DEFAULT),
    (
        "storage.k8s.io",
        "storageclasses",
        &[
            NAME,
            col("Provisioner", S),
            col("ReclaimPolicy", S),
            col("VolumeBindingMode", S),
            col("AllowVolumeExpansion", S),
            AGE,
        ],
    ),
    (
        "storage.k8s.io",
        "volumeattachments",
        &[
            NAME,
            KubeColumn {
                format: "name",
                ..col("Attacher", S)
            },
            col("PV", S),
            col("Node", S),
            col("Attached", B),
            AGE,
        ],
    ),
    // admissionregistration.k8s.io
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        WEBHOOKS,
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        &[NAME, col("Validations", I), col("ParamKind", S), AGE],
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        &[NAME, col("PolicyName", S), col("ParamRef", S), AGE],
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        WEBHOOKS,
    ),
    // scheduling, coordination, node, discovery
    (
        "scheduling.k8s.io",
        "priorityclasses",
        &[
            NAME,
            col("Value", I),
            col("Global-Default", B),
            AGE,
            col("PreemptionPolicy", S),
        ],
    ),
    (
        "coordination.k8s.io",
        "leases",
        &[NAME, col("Holder", S), AGE],
    ),
    (
        "node.k8s.io",
        "runtimeclasses",
        &[NAME, col("Handler", S), AGE],
    ),
    (
        "discovery.k8s.io",
        "endpointslices",
        &[
            NAME,
            col("AddressType", S),
            col("Ports", S),
            col("Endpoints", S),
            AGE,
        ],
    ),
    // flowcontrol.apiserver.k8s.io
    (
        "flowcontrol.apiserver.k8s.io",
        "flowschemas",
        &[
            NAME,
            col("PriorityLevel", S),
            col("MatchingPrecedence", S),
            col("DistinguisherMethod", S),
            AGE,
            col("MissingPL", S),
        ],
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
        &[
            NAME,
            col("Type", S),
            col("NominalConcurrencyShares", S),
            col("Queues", S),
            col("HandSize", S),
            col("QueueLengthLimit", S),
            AGE,
        ],
    ),
];

/// Resources whose kube printer fills one cell more than it declares
/// columns (kubectl shows only the declared ones).
pub const EXTRA_CELL: &[(&str, &str)] = &[("networking.k8s.io", "ipaddresses")];

/// kube's columns for a resource, if it serves a Table for it.
pub fn kube_columns(group: &str, resource: &str) -> Option<&'static [KubeColumn]> {
    KUBE_COLUMNS
        .iter()
        .find(|(g, r, _)| *g == group && *r == resource)
        .map(|(_, _, columns)| *columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A column as kubechain's strategy defines it, in the table's terms.
    fn ours(c: &apimachinery::table::Column) -> (String, String, String, i32) {
        (
            c.name.clone(),
            c.type_.clone(),
            c.format.clone(),
            c.priority,
        )
    }

    fn kube(c: &KubeColumn) -> (String, String, String, i32) {
        (c.name.into(), c.type_.into(), c.format.into(), c.priority)
    }

    #[test]
    fn every_resource_prints_kubes_columns() {
        let declared = crate::declared_resources();
        let mut differences = Vec::new();
        for resource in &declared {
            let id = format!(
                "{}/{} {}",
                resource.group, resource.version, resource.plural
            );
            let tabled = resource.supports("get") || resource.supports("list");
            let Some(want) = kube_columns(&resource.group, &resource.plural) else {
                if tabled {
                    differences.push(format!("{id}: no entry in KUBE_COLUMNS"));
                }
                continue;
            };
            assert!(
                tabled,
                "{id}: an entry, but no GET or LIST to serve a Table"
            );
            let got: Vec<_> = resource.strategy.columns().iter().map(ours).collect();
            let want: Vec<_> = want.iter().map(kube).collect();
            if got != want {
                differences.push(format!("{id}:\n  ours {got:?}\n  kube {want:?}"));
            }
            // Rows line up with the columns, even for a bare object.
            let bare =
                json!({"metadata": {"name": "x", "creationTimestamp": "2025-01-01T00:00:00Z"}});
            let cells = resource.strategy.cells(&bare);
            let extra = EXTRA_CELL.contains(&(resource.group.as_str(), resource.plural.as_str()));
            if cells.len() != got.len() + usize::from(extra) {
                differences.push(format!(
                    "{id}: {} cells for {} columns",
                    cells.len(),
                    got.len()
                ));
            }
        }
        assert!(differences.is_empty(), "{}", differences.join("\n"));
    }

    #[test]
    fn every_entry_names_a_declared_resource() {
        let declared = crate::declared_resources();
        for (group, plural, _) in KUBE_COLUMNS {
            assert!(
                declared
                    .iter()
                    .any(|r| r.group == *group && r.plural == *plural),
                "{group}/{plural} is in KUBE_COLUMNS but not served"
            );
        }
    }
}
