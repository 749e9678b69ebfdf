//! kube's bootstrap RBAC policy: every object of kube's six golden files
//! (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata/`), kept as
//! data beside this file: the default ClusterRoles and their bindings, the
//! roles of kube-controller-manager's controllers and their bindings, and
//! the Roles and RoleBindings of `kube-system` and `kube-public`. They are
//! created at start and reconciled as `rbac/bootstrap-roles` does it: a
//! default object missing permissions, subjects, labels or annotations gets
//! them back, unless it is annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "false"`.

use apimachinery::error::{Reason, Result};
use apimachinery::rbac;
use apimachinery::yaml::YamlError;
use generic_server::loopback::Loopback;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Value, json};

/// The annotation that lets an administrator keep a default as they changed it.
const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// kube's policy files, in the order their objects are written: roles
/// before the bindings that name them.
pub const FILES: [(&str, &str); 6] = [
    (
        "cluster-roles.yaml",
        include_str!("bootstrap_policy/cluster-roles.yaml"),
    ),
    (
        "controller-roles.yaml",
        include_str!("bootstrap_policy/controller-roles.yaml"),
    ),
    (
        "namespace-roles.yaml",
        include_str!("bootstrap_policy/namespace-roles.yaml"),
    ),
    (
        "cluster-role-bindings.yaml",
        include_str!("bootstrap_policy/cluster-role-bindings.yaml"),
    ),
    (
        "controller-role-bindings.yaml",
        include_str!("bootstrap_policy/controller-role-bindings.yaml"),
    ),
    (
        "namespace-role-bindings.yaml",
        include_str!("bootstrap_policy/namespace-role-bindings.yaml"),
    ),
];

/// A policy file that does not read as a kube `List` of RBAC objects.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file is not YAML.
    #[error("{file}: {source}")]
    Yaml {
        /// The file's name.
        file: &'static str,
        /// What the YAML reader said.
        source: YamlError,
    },
    /// An item is not a named RBAC object.
    #[error("{file}: item {index} is not a named Role, ClusterRole or binding")]
    NotRbac {
        /// The file's name.
        file: &'static str,
        /// The item's position in `items`.
        index: usize,
    },
}

/// The objects of one policy file, each with the collection it is written to.
pub fn read(
    file: &'static str,
    text: &str,
) -> std::result::Result<Vec<(String, Value)>, PolicyError> {
    let list = apimachinery::yaml::to_json(text.as_bytes())
        .map_err(|source| PolicyError::Yaml { file, source })?;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .into_iter()
        .enumerate()
        .map(|(index, mut object)| {
            let collection = collection(&object).ok_or(PolicyError::NotRbac { file, index })?;
            let is_role = matches!(object["kind"].as_str(), Some("ClusterRole" | "Role"));
            if is_role && object["rules"].is_null() {
                // kube's file says `rules: null` for the aggregated roles.
                object["rules"] = json!([]);
            }
            Ok((collection, object))
        })
        .collect()
}

/// Every object of kube's bootstrap policy, in the order it is written.
pub fn objects() -> std::result::Result<Vec<(String, Value)>, PolicyError> {
    let mut all = Vec::new();
    for (file, text) in FILES {
        all.extend(read(file, text)?);
    }
    Ok(all)
}

/// The collection an RBAC object is created in, from its kind and namespace.
fn collection(object: &Value) -> Option<String> {
    const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";
    object["metadata"]["name"].as_str()?;
    let namespace = object["metadata"]["namespace"].as_str();
    let resource = match object["kind"].as_str()? {
        "ClusterRole" => return Some(format!("{RBAC}/clusterroles")),
        "ClusterRoleBinding" => return Some(format!("{RBAC}/clusterrolebindings")),
        "Role" => "roles",
        "RoleBinding" => "rolebindings",
        _ => return None,
    };
    Some(format!("{RBAC}/namespaces/{}/{resource}", namespace?))
}

/// Whether two subjects name the same one (an absent `apiGroup` or
/// `namespace` is the empty one).
fn same_subject(a: &Value, b: &Value) -> bool {
    ["kind", "apiGroup", "name", "namespace"]
        .iter()
        .all(|field| a[field].as_str().unwrap_or_default() == b[field].as_str().unwrap_or_default())
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
                if !subjects.iter().any(|have| same_subject(have, subject)) {
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
    let objects = match objects() {
        Ok(objects) => objects,
        Err(e) => {
            tracing::error!(error = %e, "kube's bootstrap policy does not read");
            return;
        }
    };
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

    fn named<'a>(objects: &'a [(String, Value)], kind: &str, name: &str) -> &'a Value {
        objects
            .iter()
            .map(|(_, o)| o)
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name}"))
    }

    #[test]
    fn every_file_reads_with_kube_s_counts() {
        let counts: Vec<(&str, usize)> = FILES
            .iter()
            .map(|(file, text)| (*file, read(file, text).expect("a policy file").len()))
            .collect();
        assert_eq!(
            counts,
            [
                ("cluster-roles.yaml", 31),
                ("controller-roles.yaml", 35),
                ("namespace-roles.yaml", 7),
                ("cluster-role-bindings.yaml", 12),
                ("controller-role-bindings.yaml", 35),
                ("namespace-role-bindings.yaml", 7),
            ]
        );
        for (collection, object) in objects().expect("kube's policy") {
            let name = object["metadata"]["name"].as_str().expect("kube's policy");
            assert_eq!(
                object["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults",
                "{name}"
            );
            assert_eq!(
                object["metadata"]["annotations"][AUTOUPDATE], "true",
                "{name}"
            );
            match object["kind"].as_str().expect("kube's policy") {
                "ClusterRole" => {
                    let typed: k8s_openapi::api::rbac::v1::ClusterRole =
                        serde_json::from_value(object.clone()).expect("a ClusterRole");
                    assert!(
                        typed.aggregation_rule.is_some()
                            || !typed.rules.expect("kube's policy").is_empty(),
                        "{name}"
                    );
                    assert!(collection.ends_with("/clusterroles"));
                }
                "Role" => {
                    serde_json::from_value::<k8s_openapi::api::rbac::v1::Role>(object.clone())
                        .expect("a Role");
                    let ns = object["metadata"]["namespace"]
                        .as_str()
                        .expect("kube's policy");
                    assert!(["kube-system", "kube-public"].contains(&ns), "{name}");
                    assert!(collection.ends_with(&format!("/namespaces/{ns}/roles")));
                }
                "ClusterRoleBinding" => {
                    serde_json::from_value::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(
                        object.clone(),
                    )
                    .expect("a ClusterRoleBinding");
                }
                "RoleBinding" => {
                    serde_json::from_value::<k8s_openapi::api::rbac::v1::RoleBinding>(
                        object.clone(),
                    )
                    .expect("a RoleBinding");
                }
                kind => panic!("{kind}"),
            }
        }
    }

    #[test]
    fn every_binding_names_a_role_of_the_policy() {
        let all = objects().expect("kube's policy");
        for (_, binding) in all.iter().filter(|(_, o)| {
            matches!(
                o["kind"].as_str(),
                Some("ClusterRoleBinding" | "RoleBinding")
            )
        }) {
            let role = &binding["roleRef"];
            let found = all.iter().any(|(_, o)| {
                o["kind"] == role["kind"]
                    && o["metadata"]["name"] == role["name"]
                    && o["metadata"]["namespace"] == binding["metadata"]["namespace"]
            });
            assert!(found, "{binding}");
        }
    }

    #[test]
    fn the_node_authorizer_holds_the_system_node_roles_rules() {
        let all = objects().expect("kube's policy");
        let role = named(&all, "ClusterRole", "system:node");
        let rules: Vec<PolicyRule> = serde_json::from_value(role["rules"].clone()).expect("rules");
        assert_eq!(rules, generic_server::filters::node::node_rules());
    }

    #[test]
    fn known_objects_read_as_kube_writes_them() {
        let all = objects().expect("kube's policy");
        let view = named(&all, "ClusterRole", "view");
        assert_eq!(view["rules"], json!([]));
        assert_eq!(
            view["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["rbac.authorization.k8s.io/aggregate-to-view"],
            "true"
        );
        assert_eq!(
            view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"],
            "true"
        );
        let scheduler = named(&all, "ClusterRole", "system:kube-scheduler");
        assert!(
            scheduler["rules"]
                .as_array()
                .expect("kube's policy")
                .contains(&json!(
                    {"apiGroups": ["coordination.k8s.io"], "resourceNames": ["kube-scheduler"],
                     "resources": ["leases"], "verbs": ["get", "update"]}
                ))
        );
        let cidrs = named(
            &all,
            "ClusterRole",
            "system:controller:service-cidrs-controller",
        );
        assert_eq!(cidrs["rules"].as_array().expect("kube's policy").len(), 5);
        let binding = named(
            &all,
            "ClusterRoleBinding",
            "system:controller:job-controller",
        );
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "job-controller", "namespace": "kube-system"}])
        );
        let signer = all
            .iter()
            .find(|(c, o)| {
                c.contains("/namespaces/kube-public/")
                    && o["metadata"]["name"] == "system:controller:bootstrap-signer"
                    && o["kind"] == "Role"
            })
            .expect("bootstrap-signer in kube-public");
        assert_eq!(
            signer.1["rules"][1]["resourceNames"],
            json!(["cluster-info"])
        );
        let leader = named(&all, "RoleBinding", "system::leader-locking-kube-scheduler");
        assert_eq!(
            leader["subjects"].as_array().expect("kube's policy").len(),
            2
        );
        assert!(named(&all, "ClusterRoleBinding", "system:node")["subjects"].is_null());
    }

    #[test]
    fn reconciling_adds_what_is_missing_and_respects_autoupdate_false() {
        let all = objects().expect("kube's policy");
        let wanted = named(&all, "ClusterRole", "cluster-admin");
        let mut trimmed = wanted.clone();
        trimmed["rules"] = json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]);
        trimmed["metadata"]["labels"] = json!({"team": "x"});
        let fixed = reconciled(&trimmed, wanted).expect("a change");
        assert_eq!(fixed["rules"].as_array().expect("kube's policy").len(), 2);
        assert_eq!(
            fixed["metadata"]["labels"]["team"], "x",
            "extra labels stay"
        );
        assert_eq!(
            fixed["metadata"]["labels"]["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
        assert!(
            reconciled(&fixed, wanted).is_none(),
            "a current default is left alone"
        );
        let mut kept = trimmed.clone();
        kept["metadata"]["annotations"] = json!({AUTOUPDATE: "false"});
        assert!(reconciled(&kept, wanted).is_none());

        let binding = named(&all, "ClusterRoleBinding", "cluster-admin");
        let mut unbound = binding.clone();
        unbound["subjects"] =
            json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]);
        let fixed = reconciled(&unbound, binding).expect("a change");
        assert_eq!(
            fixed["subjects"].as_array().expect("kube's policy").len(),
            2,
            "{fixed}"
        );

        // A ServiceAccount subject as the server returns it (an empty
        // apiGroup written out) is the same subject.
        let binding = named(&all, "RoleBinding", "system:controller:token-cleaner");
        let mut stored = binding.clone();
        stored["subjects"][0]["apiGroup"] = json!("");
        assert!(reconciled(&stored, binding).is_none(), "{stored}");

        // An aggregated role keeps the rules the controller gave it, and
        // gets its selector back.
        let view = named(&all, "ClusterRole", "view");
        let mut filled = view.clone();
        filled["rules"] = json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]);
        assert!(reconciled(&filled, view).is_none());
        filled["aggregationRule"] = json!({"clusterRoleSelectors": []});
        let fixed = reconciled(&filled, view).expect("a change");
        assert_eq!(fixed["aggregationRule"], view["aggregationRule"]);
        assert_eq!(fixed["rules"], filled["rules"]);
    }
}
