//! kube's bootstrap RBAC policy: the default ClusterRoles (cluster-admin,
//! admin, edit, view, the aggregate-to-* roles, discovery, basic-user,
//! public-info-viewer, auth-delegator, monitoring) and the bindings kube
//! ships, created at start and reconciled as `rbac/bootstrap-roles` does it:
//! a default object missing permissions, subjects, labels or annotations
//! gets them back, unless it is annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "false"`.

use apimachinery::error::{Reason, Result};
use apimachinery::rbac::{self, GROUP};
use generic_server::loopback::Loopback;
use generic_server::resource::ALL_VERBS;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Map, Value, json};

/// The annotation that lets an administrator keep a default as they changed it.
const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The label every default carries.
const BOOTSTRAPPING: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];

/// A resource rule.
fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": [group], "resources": resources})
}

/// A non-resource rule.
fn urls(verbs: &[&str], paths: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": paths})
}

/// The label that aggregates a role into `admin`, `edit` or `view`.
fn aggregate_to(role: &str) -> String {
    format!("{GROUP}/aggregate-to-{role}")
}

/// A default ClusterRole: its name, extra labels, rules and the roles it aggregates.
fn cluster_role(
    name: &str,
    labels: &[String],
    rules: Vec<Value>,
    aggregates: Option<&str>,
) -> Value {
    let mut all = Map::new();
    all.insert(BOOTSTRAPPING.0.into(), BOOTSTRAPPING.1.into());
    for label in labels {
        all.insert(label.clone(), "true".into());
    }
    let mut role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": all, "annotations": {AUTOUPDATE: "true"}},
        "rules": rules,
    });
    if let Some(into) = aggregates {
        role["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {aggregate_to(into): "true"}}]});
    }
    role
}

/// The default ClusterRoles.
pub fn cluster_roles() -> Vec<Value> {
    let to = |roles: &[&str]| roles.iter().map(|r| aggregate_to(r)).collect::<Vec<_>>();
    vec![
        cluster_role(
            "cluster-admin",
            &[],
            vec![rule(&["*"], "*", &["*"]), urls(&["*"], &["*"])],
            None,
        ),
        cluster_role("admin", &[], vec![], Some("admin")),
        cluster_role("edit", &to(&["admin"]), vec![], Some("edit")),
        cluster_role("view", &to(&["edit"]), vec![], Some("view")),
        cluster_role(
            "system:aggregate-to-admin",
            &to(&["admin"]),
            vec![
                rule(
                    &["create"],
                    "authorization.k8s.io",
                    &["localsubjectaccessreviews"],
                ),
                rule(ALL_VERBS, GROUP, &["rolebindings", "roles"]),
            ],
            None,
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &to(&["admin", "edit"]),
            vec![
                rule(
                    READ,
                    "",
                    &[
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                        "secrets",
                        "services/proxy",
                    ],
                ),
                rule(&["impersonate"], "", &["serviceaccounts"]),
                rule(
                    WRITE,
                    "",
                    &[
                        "pods",
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                    ],
                ),
                rule(&["create"], "", &["pods/eviction"]),
                rule(
                    WRITE,
                    "",
                    &[
                        "configmaps",
                        "events",
                        "persistentvolumeclaims",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "secrets",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                    ],
                ),
                rule(&["create"], "", &["serviceaccounts/token"]),
                rule(
                    WRITE,
                    "apps",
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/rollback",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/scale",
                        "statefulsets",
                        "statefulsets/scale",
                    ],
                ),
                rule(WRITE, "autoscaling", &["horizontalpodautoscalers"]),
                rule(WRITE, "batch", &["cronjobs", "jobs"]),
                rule(
                    WRITE,
                    "extensions",
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/rollback",
                        "deployments/scale",
                        "ingresses",
                        "networkpolicies",
                        "replicasets",
                        "replicasets/scale",
                        "replicationcontrollers/scale",
                    ],
                ),
                rule(WRITE, "policy", &["poddisruptionbudgets"]),
                rule(
                    WRITE,
                    "networking.k8s.io",
                    &["ingresses", "networkpolicies"],
                ),
                rule(ALL_VERBS, "coordination.k8s.io", &["leases"]),
            ],
            None,
        ),
        cluster_role(
            "system:aggregate-to-view",
            &to(&["admin", "edit", "view"]),
            vec![
                rule(
                    READ,
                    "",
                    &[
                        "configmaps",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                    ],
                ),
                rule(
                    READ,
                    "",
                    &[
                        "bindings",
                        "events",
                        "limitranges",
                        "namespaces/status",
                        "pods/log",
                        "pods/status",
                        "replicationcontrollers/status",
                        "resourcequotas",
                        "resourcequotas/status",
                    ],
                ),
                rule(READ, "", &["namespaces"]),
                rule(READ, "discovery.k8s.io", &["endpointslices"]),
                rule(
                    READ,
                    "apps",
                    &[
                        "controllerrevisions",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "statefulsets",
                        "statefulsets/scale",
                        "statefulsets/status",
                    ],
                ),
                rule(
                    READ,
                    "autoscaling",
                    &[
                        "horizontalpodautoscalers",
                        "horizontalpodautoscalers/status",
                    ],
                ),
                rule(
                    READ,
                    "batch",
                    &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
                ),
                rule(
                    READ,
                    "extensions",
                    &[
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "ingresses",
                        "ingresses/status",
                        "networkpolicies",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "replicationcontrollers/scale",
                    ],
                ),
                rule(
                    READ,
                    "policy",
                    &["poddisruptionbudgets", "poddisruptionbudgets/status"],
                ),
                rule(
                    READ,
                    "networking.k8s.io",
                    &["ingresses", "ingresses/status", "networkpolicies"],
                ),
            ],
            None,
        ),
        cluster_role(
            "system:discovery",
            &[],
            vec![urls(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
            None,
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    "authorization.k8s.io",
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    "authentication.k8s.io",
                    &["selfsubjectreviews"],
                ),
            ],
            None,
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            vec![urls(
                &["get"],
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
            )],
            None,
        ),
        cluster_role(
            "system:auth-delegator",
            &[],
            vec![
                rule(&["create"], "authentication.k8s.io", &["tokenreviews"]),
                rule(
                    &["create"],
                    "authorization.k8s.io",
                    &["subjectaccessreviews"],
                ),
            ],
            None,
        ),
        cluster_role(
            "system:monitoring",
            &[],
            vec![urls(
                &["get"],
                &[
                    "/healthz",
                    "/healthz/*",
                    "/livez",
                    "/livez/*",
                    "/metrics",
                    "/metrics/slis",
                    "/readyz",
                    "/readyz/*",
                ],
            )],
            None,
        ),
        cluster_role(
            "system:aggregated-metrics-reader",
            &to(&["admin", "edit", "view"]),
            vec![rule(READ, "metrics.k8s.io", &["nodes", "pods"])],
            None,
        ),
    ]
}

/// The default ClusterRoleBindings: role name and the groups bound to it.
pub fn cluster_role_bindings() -> Vec<Value> {
    [
        ("cluster-admin", &["system:masters"][..]),
        ("system:basic-user", &["system:authenticated"]),
        ("system:discovery", &["system:authenticated"]),
        (
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
        ("system:monitoring", &["system:monitoring"]),
    ]
    .into_iter()
    .map(|(role, groups)| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g}))
            .collect();
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {
                "name": role,
                "labels": {BOOTSTRAPPING.0: BOOTSTRAPPING.1},
                "annotations": {AUTOUPDATE: "true"},
            },
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
            "subjects": subjects,
        })
    })
    .collect()
}

/// The default Roles and RoleBindings of `kube-system` that aggregated
/// servers need (kube's `namespace-roles.yaml`): every server built on
/// k8s.io/apiserver reads the front-proxy trust it is given from the
/// `extension-apiserver-authentication` ConfigMap, bound to this Role.
pub fn namespace_policy() -> Vec<Value> {
    let metadata = |name: &str| {
        json!({"name": name, "namespace": "kube-system",
               "labels": {BOOTSTRAPPING.0: BOOTSTRAPPING.1},
               "annotations": {AUTOUPDATE: "true"}})
    };
    let reader = "extension-apiserver-authentication-reader";
    let users = ["system:kube-controller-manager", "system:kube-scheduler"];
    vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": metadata(reader),
               "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                          "resourceNames": ["extension-apiserver-authentication"], "verbs": READ}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": metadata(&format!("system::{reader}")),
               "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": reader},
               "subjects": users.iter().map(|u| json!({"apiGroup": GROUP, "kind": "User", "name": u})).collect::<Vec<_>>()}),
    ]
}

fn rules_of(object: &Value) -> Vec<PolicyRule> {
    serde_json::from_value(object["rules"].clone()).unwrap_or_default()
}

/// What an existing default needs to become the default again, or `None`
/// when it is current (or kept as is by `autoupdate: "false"`).
fn reconciled(existing: &Value, wanted: &Value) -> Option<Value> {
    if existing.pointer(&format!(
        "/metadata/annotations/{}",
        AUTOUPDATE.replace('/', "~1")
    )) == Some(&json!("false"))
    {
        return None;
    }
    let mut result = existing.clone();
    let mut changed = false;
    for field in ["labels", "annotations"] {
        if let Some(want) = wanted["metadata"][field].as_object() {
            let have = result["metadata"][field]
                .as_object_mut()
                .map(std::mem::take)
                .unwrap_or_default();
            let mut merged = have.clone();
            for (k, v) in want {
                merged.entry(k.clone()).or_insert_with(|| v.clone());
            }
            changed |= merged != have;
            result["metadata"][field] = Value::Object(merged);
        }
    }
    match wanted["kind"].as_str() {
        Some("ClusterRole" | "Role") => {
            let missing = rbac::uncovered(&rules_of(existing), &rules_of(wanted));
            if !missing.is_empty() {
                let mut rules = rules_of(existing);
                rules.extend(missing);
                result["rules"] = serde_json::to_value(rules).unwrap_or_default();
                changed = true;
            }
            if let Some(rule) = wanted.get("aggregationRule") {
                let have = existing["aggregationRule"]["clusterRoleSelectors"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let mut selectors = have.clone();
                for selector in rule["clusterRoleSelectors"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    if !selectors.contains(selector) {
                        selectors.push(selector.clone());
                    }
                }
                if selectors != have {
                    result["aggregationRule"] = json!({"clusterRoleSelectors": selectors});
                    changed = true;
                }
            }
        }
        _ => {
            let have = existing["subjects"].as_array().cloned().unwrap_or_default();
            let mut subjects = have.clone();
            for subject in wanted["subjects"].as_array().into_iter().flatten() {
                if !subjects.contains(subject) {
                    subjects.push(subject.clone());
                }
            }
            if subjects != have {
                result["subjects"] = Value::Array(subjects);
                changed = true;
            }
        }
    }
    changed.then_some(result)
}

/// Creates or reconciles one default object at `collection`.
async fn ensure(client: &Loopback, collection: &str, wanted: &Value) -> Result<()> {
    let name = wanted["metadata"]["name"].as_str().unwrap_or_default();
    let path = format!("{collection}/{name}");
    match client.get(&path).await {
        Ok(existing) => {
            if let Some(update) = reconciled(&existing, wanted) {
                tracing::info!(%name, "reconciling a default RBAC object");
                client.update(&path, &update).await?;
            }
            Ok(())
        }
        Err(e) if e.reason() == Reason::NotFound => match client.create(collection, wanted).await {
            Err(e) if e.reason() != Reason::AlreadyExists => Err(e),
            _ => Ok(()),
        },
        Err(e) => Err(e),
    }
}

/// kube's `rbac/bootstrap-roles` hook: writes the defaults, retrying until
/// every one is in place (a replica racing another converges the same way).
pub async fn bootstrap(client: Loopback) {
    const ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    const BINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    const KUBE_SYSTEM: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system";
    let objects: Vec<(String, Value)> = cluster_roles()
        .into_iter()
        .map(|r| (ROLES.to_string(), r))
        .chain(
            cluster_role_bindings()
                .into_iter()
                .map(|b| (BINDINGS.to_string(), b)),
        )
        .chain(namespace_policy().into_iter().map(|object| {
            let collection = match object["kind"].as_str() {
                Some("Role") => "roles",
                _ => "rolebindings",
            };
            (format!("{KUBE_SYSTEM}/{collection}"), object)
        }))
        .collect();
    for (collection, wanted) in &objects {
        let mut delay = std::time::Duration::from_millis(100);
        while let Err(e) = ensure(&client, collection, wanted).await {
            tracing::warn!(error = %e, name = %wanted["metadata"]["name"], "cannot write a default RBAC object yet; retrying");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(std::time::Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_a_valid_kube_object() {
        for role in cluster_roles() {
            let typed: k8s_openapi::api::rbac::v1::ClusterRole =
                serde_json::from_value(role.clone()).expect("a ClusterRole");
            let aggregated = typed.aggregation_rule.is_some();
            assert!(
                aggregated || !typed.rules.unwrap_or_default().is_empty(),
                "{role}"
            );
        }
        let names: Vec<String> = cluster_roles()
            .iter()
            .map(|r| r["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        for binding in cluster_role_bindings() {
            let typed: k8s_openapi::api::rbac::v1::ClusterRoleBinding =
                serde_json::from_value(binding).expect("a ClusterRoleBinding");
            assert!(
                names.contains(&typed.role_ref.name),
                "{}",
                typed.role_ref.name
            );
        }
        let [role, binding] = &namespace_policy()[..] else {
            panic!("a Role and its RoleBinding");
        };
        let role: k8s_openapi::api::rbac::v1::Role =
            serde_json::from_value(role.clone()).expect("a Role");
        let binding: k8s_openapi::api::rbac::v1::RoleBinding =
            serde_json::from_value(binding.clone()).expect("a RoleBinding");
        assert_eq!(
            binding.role_ref.name,
            role.metadata.name.unwrap_or_default()
        );
    }

    #[test]
    fn reconciling_adds_what_is_missing_and_respects_autoupdate_false() {
        let wanted = &cluster_roles()[0];
        let mut trimmed = wanted.clone();
        trimmed["rules"] = json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]);
        trimmed["metadata"]["labels"] = json!({"team": "x"});
        let fixed = reconciled(&trimmed, wanted).expect("a change");
        assert_eq!(fixed["rules"].as_array().unwrap().len(), 2);
        assert_eq!(
            fixed["metadata"]["labels"]["team"], "x",
            "extra labels stay"
        );
        assert_eq!(
            fixed["metadata"]["labels"][BOOTSTRAPPING.0],
            BOOTSTRAPPING.1
        );
        assert!(
            reconciled(&fixed, wanted).is_none(),
            "a current default is left alone"
        );
        let mut kept = trimmed.clone();
        kept["metadata"]["annotations"] = json!({AUTOUPDATE: "false"});
        assert!(reconciled(&kept, wanted).is_none());
        let binding = &cluster_role_bindings()[0];
        let mut unbound = binding.clone();
        unbound["subjects"] = json!([{"kind": "User", "apiGroup": GROUP, "name": "alice"}]);
        let fixed = reconciled(&unbound, binding).expect("a change");
        assert_eq!(fixed["subjects"].as_array().unwrap().len(), 2, "{fixed}");
    }
}
