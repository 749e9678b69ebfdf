//! ResourceQuota's pure part: what a write costs (kube's quota evaluators
//! for pods, services, PersistentVolumeClaims and object counts), which
//! quotas cover an object (hard resources and scopes), and whether a charge
//! fits, refused in kube's words.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::limit_range::pod_totals;
use crate::quantity::{Quantity, ResourceList, add_lists, resource_list};

/// The resources a pod's compute usage is charged as.
const POD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];
/// Quota resources every pod must request (or limit) explicitly if a
/// covering quota names them (kube's backward-compatible mistake).
const MUST_SPECIFY: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];
/// Core resources also counted under their bare plural (`configmaps`).
const LEGACY_COUNTS: &[&str] = &[
    "configmaps",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "services",
];
/// The suffix of per-StorageClass claim resources.
const STORAGE_CLASS: &str = ".storageclass.storage.k8s.io/";

/// `count/<resource>` (core) or `count/<resource>.<group>`.
pub fn object_count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// Whether the evaluator of `group`/`plural` tracks the quota resource `name`.
pub fn tracks(group: &str, plural: &str, name: &str) -> bool {
    if name == object_count_name(group, plural) {
        return true;
    }
    if !group.is_empty() {
        return false;
    }
    match plural {
        "pods" => {
            POD_RESOURCES.contains(&name)
                || name.starts_with("hugepages-")
                || name.starts_with("requests.hugepages-")
                || name.strip_prefix("requests.").is_some_and(is_extended)
        }
        "services" => matches!(
            name,
            "services" | "services.loadbalancers" | "services.nodeports"
        ),
        "persistentvolumeclaims" => {
            matches!(name, "persistentvolumeclaims" | "requests.storage")
                || name.split_once(STORAGE_CLASS).is_some_and(|(class, what)| {
                    !class.is_empty()
                        && matches!(what, "requests.storage" | "persistentvolumeclaims")
                })
        }
        other => LEGACY_COUNTS.contains(&other) && name == other,
    }
}

/// An extended resource: a domain-qualified name outside kubernetes.io.
fn is_extended(name: &str) -> bool {
    name.split_once('/').is_some_and(|(domain, _)| {
        domain != "kubernetes.io"
            && !domain.ends_with(".kubernetes.io")
            && !name.starts_with("requests.")
    })
}

/// The names of `hard` that the evaluator of `group`/`plural` tracks.
fn matching<'a>(group: &str, plural: &str, hard: &'a ResourceList) -> Vec<&'a str> {
    hard.keys()
        .map(String::as_str)
        .filter(|n| tracks(group, plural, n))
        .collect()
}

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether a pod no longer counts for compute quota (a terminal phase).
pub fn finished(pod: &Value) -> bool {
    matches!(text(pod, "/status/phase"), "Succeeded" | "Failed")
}

/// The quota usage of one object of `group`/`plural` (kube's evaluators'
/// `Usage`).
pub fn usage(group: &str, plural: &str, obj: &Value) -> ResourceList {
    let one = Quantity::from_units(1);
    let mut used = ResourceList::from([(object_count_name(group, plural), one)]);
    if !group.is_empty() {
        return used;
    }
    match plural {
        "pods" => {
            if !finished(obj) {
                used = add_lists(
                    &used,
                    &pod_compute(&pod_totals(obj, "requests"), &pod_totals(obj, "limits")),
                );
            }
        }
        "services" => {
            let ports = obj
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            let (mut balancers, mut node_ports) = (0, 0);
            match text(obj, "/spec/type") {
                "NodePort" => node_ports = ports.len(),
                "LoadBalancer" => {
                    balancers = 1;
                    node_ports = if obj.pointer("/spec/allocateLoadBalancerNodePorts")
                        == Some(&Value::Bool(false))
                    {
                        ports
                            .iter()
                            .filter(|p| p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0)
                            .count()
                    } else {
                        ports.len()
                    };
                }
                _ => {}
            }
            used.insert("services".into(), one);
            used.insert(
                "services.loadbalancers".into(),
                Quantity::from_units(balancers),
            );
            used.insert(
                "services.nodeports".into(),
                Quantity::from_units(node_ports as i64),
            );
        }
        "persistentvolumeclaims" => {
            used.insert(plural.into(), one);
            let storage = obj
                .pointer("/spec/resources/requests/storage")
                .and_then(Quantity::of);
            let class = match text(obj, "/spec/storageClassName") {
                "" => text(
                    obj,
                    "/metadata/annotations/volume.beta.kubernetes.io~1storage-class",
                ),
                class => class,
            };
            if !class.is_empty() {
                used.insert(format!("{class}{STORAGE_CLASS}persistentvolumeclaims"), one);
            }
            if let Some(storage) = storage {
                used.insert("requests.storage".into(), storage);
                if !class.is_empty() {
                    used.insert(format!("{class}{STORAGE_CLASS}requests.storage"), storage);
                }
            }
        }
        other if LEGACY_COUNTS.contains(&other) => {
            used.insert(other.into(), one);
        }
        _ => {}
    }
    used
}

/// The compute resources a pod's (or container's) requests and limits are
/// charged as.
fn pod_compute(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut used = ResourceList::from([("pods".to_string(), Quantity::from_units(1))]);
    for name in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(name) {
            used.insert(name.into(), *q);
            used.insert(format!("requests.{name}"), *q);
        }
        if let Some(q) = limits.get(name) {
            used.insert(format!("limits.{name}"), *q);
        }
    }
    for (name, q) in requests {
        if name.starts_with("hugepages-") {
            used.insert(name.clone(), *q);
            used.insert(format!("requests.{name}"), *q);
        } else if is_extended(name) {
            used.insert(format!("requests.{name}"), *q);
        }
    }
    used
}

/// One scope requirement of a quota: `spec.scopes` entries (as `Exists`)
/// and `spec.scopeSelector.matchExpressions`.
#[derive(Debug, Clone)]
struct ScopeRequirement {
    scope: String,
    operator: String,
    values: Vec<String>,
}

fn scope_requirements(quota: &Value) -> Vec<ScopeRequirement> {
    let mut out: Vec<ScopeRequirement> = quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| ScopeRequirement {
            scope: s.into(),
            operator: "Exists".into(),
            values: Vec::new(),
        })
        .collect();
    for expr in quota
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push(ScopeRequirement {
            scope: text(expr, "/scopeName").into(),
            operator: text(expr, "/operator").into(),
            values: expr
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        });
    }
    out
}

/// Whether a pod is BestEffort: no container asks for or limits cpu or memory.
fn best_effort(pod: &Value) -> bool {
    ["containers", "initContainers"].iter().all(|list| {
        pod.pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .all(|c| {
                ["requests", "limits"].iter().all(|which| {
                    let l = resource_list(c.pointer(&format!("/resources/{which}")));
                    ["cpu", "memory"]
                        .iter()
                        .all(|n| l.get(*n).is_none_or(Quantity::is_zero))
                })
            })
    })
}

/// Whether a pod's affinity names other namespaces (`namespaces` or a
/// `namespaceSelector` in any pod (anti-)affinity term).
fn cross_namespace_affinity(pod: &Value) -> bool {
    let crosses = |term: &Value| {
        term.get("namespaces")
            .and_then(Value::as_array)
            .is_some_and(|n| !n.is_empty())
            || term.get("namespaceSelector").is_some_and(|s| !s.is_null())
    };
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let Some(affinity) = pod.pointer(&format!("/spec/affinity/{kind}")) else {
            return false;
        };
        let required = affinity
            .get("requiredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let preferred = affinity
            .get("preferredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|w| w.get("podAffinityTerm"));
        required.chain(preferred).any(crosses)
    })
}

/// Whether one object matches one scope requirement (only pods match any).
fn matches_scope(group: &str, plural: &str, obj: &Value, req: &ScopeRequirement) -> bool {
    if !group.is_empty() || plural != "pods" {
        return false;
    }
    let terminating = obj
        .pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|s| s >= 0);
    match req.scope.as_str() {
        "Terminating" => terminating,
        "NotTerminating" => !terminating,
        "BestEffort" => best_effort(obj),
        "NotBestEffort" => !best_effort(obj),
        "CrossNamespacePodAffinity" => cross_namespace_affinity(obj),
        "PriorityClass" => {
            let class = text(obj, "/spec/priorityClassName");
            let listed = req.values.iter().any(|v| v == class);
            match req.operator.as_str() {
                "Exists" => !class.is_empty(),
                "DoesNotExist" => class.is_empty(),
                "In" => !class.is_empty() && listed,
                "NotIn" => class.is_empty() || !listed,
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether `obj` falls within a quota's scopes.
pub fn in_scope(quota: &Value, group: &str, plural: &str, obj: &Value) -> bool {
    scope_requirements(quota)
        .iter()
        .all(|r| matches_scope(group, plural, obj, r))
}

/// A quota's `status.hard`.
pub fn hard(quota: &Value) -> ResourceList {
    resource_list(quota.pointer("/status/hard"))
}

/// A quota's `status.used`.
pub fn used(quota: &Value) -> ResourceList {
    resource_list(quota.pointer("/status/used"))
}

/// Whether a quota covers `obj`: it limits something the evaluator tracks,
/// and the object is within its scopes (kube's `generic.Matches`).
pub fn covers(quota: &Value, group: &str, plural: &str, obj: &Value) -> bool {
    !matching(group, plural, &hard(quota)).is_empty() && in_scope(quota, group, plural, obj)
}

/// The resources of `required` (of `MUST_SPECIFY`) that a pod's containers
/// leave unset, in kube's `must specify ...` words.
fn pod_constraints(required: &[&str], pod: &Value) -> Option<String> {
    let required: BTreeSet<&str> = required
        .iter()
        .copied()
        .filter(|n| MUST_SPECIFY.contains(n))
        .collect();
    let mut missing: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for list in ["containers", "initContainers"] {
        for c in pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let charged = pod_compute(
                &resource_list(c.pointer("/resources/requests")),
                &resource_list(c.pointer("/resources/limits")),
            );
            for name in &required {
                if !charged.contains_key(*name) {
                    missing.entry(name).or_default().insert(text(c, "/name"));
                }
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(name, containers)| {
            format!(
                "{name} for: {}",
                containers.iter().copied().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Some(format!("must specify {}", parts.join("; ")))
}

/// What the objects of `group`/`plural` in a quota's namespace use of the
/// quota's `spec.hard` (the quota controller's count): every tracked
/// resource, zero if nothing uses it; objects outside the scopes skipped.
pub fn total<'a>(
    quota: &Value,
    group: &str,
    plural: &str,
    objects: impl IntoIterator<Item = &'a Value>,
) -> ResourceList {
    let hard = resource_list(quota.pointer("/spec/hard"));
    let names = matching(group, plural, &hard);
    let mut sum: ResourceList = names
        .iter()
        .map(|n| (n.to_string(), Quantity::default()))
        .collect();
    for obj in objects {
        if !in_scope(quota, group, plural, obj) {
            continue;
        }
        let used = usage(group, plural, obj);
        for name in &names {
            if let (Some(have), Some(more)) = (sum.get_mut(*name), used.get(*name)) {
                *have = have.add(*more);
            }
        }
    }
    sum
}

/// A resource list as kube prints it in errors: `a=1,b=2`, in name order.
pub fn pretty(list: &ResourceList) -> String {
    list.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// What a write asks of quotas.
pub struct Request<'a> {
    /// The resource's group.
    pub group: &'a str,
    /// The resource's plural.
    pub plural: &'a str,
    /// The object as it would be stored.
    pub object: &'a Value,
    /// The stored object, on update.
    pub old: Option<&'a Value>,
}

/// The new `status.used` of each quota (by its index in `quotas`) that a
/// write changes, or kube's refusal (`exceeded quota: ...`, `status
/// unknown for quota: ...`, `failed quota: ...: must specify ...`).
pub fn charge(quotas: &[Value], req: &Request<'_>) -> Result<Vec<(usize, ResourceList)>, String> {
    let (group, plural, obj) = (req.group, req.plural, req.object);
    let mut interesting = Vec::new();
    for (i, quota) in quotas.iter().enumerate() {
        if !covers(quota, group, plural, obj) {
            continue;
        }
        let name = text(quota, "/metadata/name");
        let hard = hard(quota);
        let restricted = matching(group, plural, &hard);
        if group.is_empty()
            && plural == "pods"
            && let Some(why) = pod_constraints(&restricted, obj)
        {
            return Err(format!("failed quota: {name}: {why}"));
        }
        let used = used(quota);
        if restricted.iter().any(|n| !used.contains_key(*n)) {
            return Err(format!(
                "status unknown for quota: {name}, resources: {}",
                restricted.join(",")
            ));
        }
        interesting.push(i);
    }
    if interesting.is_empty() {
        return Ok(Vec::new());
    }
    let input = usage(group, plural, obj);
    let negative: Vec<&str> = input
        .iter()
        .filter(|(_, q)| q.is_negative())
        .map(|(k, _)| k.as_str())
        .collect();
    if !negative.is_empty() {
        return Err(format!(
            "quota usage is negative for resource(s): {}",
            negative.join(",")
        ));
    }
    // An update is charged what it adds (never less than nothing), to the
    // quotas that already covered the old object.
    let old = req
        .old
        .filter(|o| !text(o, "/metadata/resourceVersion").is_empty());
    let delta = old.map(|old| {
        let before = usage(group, plural, old);
        input
            .iter()
            .map(|(k, v)| {
                let d = before.get(k).map_or(*v, |b| v.sub(*b));
                (
                    k.clone(),
                    if d.is_negative() {
                        Quantity::default()
                    } else {
                        d
                    },
                )
            })
            .collect::<ResourceList>()
    });
    let mut charges = Vec::new();
    for i in interesting {
        let quota = &quotas[i];
        let delta = match (&delta, old) {
            (Some(delta), Some(old)) if covers(quota, group, plural, old) => delta,
            _ => &input,
        };
        let hard = hard(quota);
        let requested: ResourceList = delta
            .iter()
            .filter(|(k, v)| hard.contains_key(*k) && !v.is_zero())
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        if requested.is_empty() {
            continue;
        }
        let used = used(quota);
        let new_used = add_lists(&used, &requested);
        let exceeded: Vec<&String> = requested
            .keys()
            .filter(|k| {
                new_used
                    .get(*k)
                    .zip(hard.get(*k))
                    .is_some_and(|(n, h)| n > h)
            })
            .collect();
        if !exceeded.is_empty() {
            let mask = |list: &ResourceList| -> ResourceList {
                exceeded
                    .iter()
                    .filter_map(|k| Some(((*k).clone(), *list.get(*k)?)))
                    .collect()
            };
            return Err(format!(
                "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                text(quota, "/metadata/name"),
                pretty(&mask(&requested)),
                pretty(&mask(&used)),
                pretty(&mask(&hard)),
            ));
        }
        charges.push((i, new_used));
    }
    Ok(charges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn quota(name: &str, hard: Value, used: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": {"hard": hard}, "status": {"hard": hard, "used": used}})
    }

    fn pod(requests: Value, limits: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": requests, "limits": limits}}]}})
    }

    fn create<'a>(plural: &'a str, object: &'a Value) -> Request<'a> {
        Request {
            group: "",
            plural,
            object,
            old: None,
        }
    }

    #[test]
    fn usage_of_kube_evaluators() {
        let p = pod(
            json!({"cpu": "250m", "memory": "64Mi"}),
            json!({"memory": "128Mi"}),
        );
        let u = usage("", "pods", &p);
        assert_eq!(
            pretty(&u),
            "count/pods=1,cpu=250m,limits.memory=128Mi,memory=64Mi,pods=1,requests.cpu=250m,requests.memory=64Mi"
        );
        let mut done = p.clone();
        done["status"] = json!({"phase": "Succeeded"});
        assert_eq!(pretty(&usage("", "pods", &done)), "count/pods=1");
        let svc = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 81}]}});
        assert_eq!(
            pretty(&usage("", "services", &svc)),
            "count/services=1,services=1,services.loadbalancers=0,services.nodeports=2"
        );
        let claim = json!({"spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1Gi"}}}});
        assert_eq!(
            pretty(&usage("", "persistentvolumeclaims", &claim)),
            "count/persistentvolumeclaims=1,fast.storageclass.storage.k8s.io/persistentvolumeclaims=1,fast.storageclass.storage.k8s.io/requests.storage=1Gi,persistentvolumeclaims=1,requests.storage=1Gi"
        );
        assert_eq!(
            pretty(&usage("", "configmaps", &json!({}))),
            "configmaps=1,count/configmaps=1"
        );
        assert_eq!(
            pretty(&usage("apps", "deployments", &json!({}))),
            "count/deployments.apps=1"
        );
        assert!(tracks("", "pods", "requests.example.com/gpu"));
        assert!(!tracks("", "pods", "requests.storage"));
        assert!(tracks(
            "",
            "persistentvolumeclaims",
            "gold.storageclass.storage.k8s.io/requests.storage"
        ));
    }

    #[test]
    fn refusals_in_kube_words() {
        let cm = json!({"metadata": {"name": "c"}});
        let full = quota(
            "objects",
            json!({"configmaps": "2"}),
            json!({"configmaps": "2"}),
        );
        assert_eq!(
            charge(&[full], &create("configmaps", &cm)).unwrap_err(),
            "exceeded quota: objects, requested: configmaps=1, used: configmaps=2, limited: configmaps=2"
        );
        let room = quota(
            "objects",
            json!({"count/configmaps": "3", "pods": "1"}),
            json!({"count/configmaps": "1", "pods": "0"}),
        );
        let charges = charge(&[room], &create("configmaps", &cm)).unwrap();
        assert_eq!(pretty(&charges[0].1), "count/configmaps=2,pods=0");
        let unknown = quota("fresh", json!({"configmaps": "2"}), json!({}));
        assert_eq!(
            charge(&[unknown], &create("configmaps", &cm)).unwrap_err(),
            "status unknown for quota: fresh, resources: configmaps"
        );
        let no_status = json!({"metadata": {"name": "new"}, "spec": {"hard": {"configmaps": "0"}}});
        assert!(
            charge(&[no_status], &create("configmaps", &cm))
                .unwrap()
                .is_empty(),
            "not covering before its status is known"
        );

        let compute = quota(
            "compute",
            json!({"requests.cpu": "1", "limits.memory": "1Gi"}),
            json!({"requests.cpu": "500m", "limits.memory": "0"}),
        );
        let bare = pod(json!({"cpu": "100m"}), json!({}));
        assert_eq!(
            charge(std::slice::from_ref(&compute), &create("pods", &bare)).unwrap_err(),
            "failed quota: compute: must specify limits.memory for: c"
        );
        let big = pod(json!({"cpu": "600m"}), json!({"memory": "512Mi"}));
        assert_eq!(
            charge(std::slice::from_ref(&compute), &create("pods", &big)).unwrap_err(),
            "exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=500m, limited: requests.cpu=1"
        );
        let fits = pod(json!({"cpu": "500m"}), json!({"memory": "512Mi"}));
        let charges = charge(&[compute], &create("pods", &fits)).unwrap();
        assert_eq!(pretty(&charges[0].1), "limits.memory=512Mi,requests.cpu=1");
    }

    #[test]
    fn totals_count_what_a_namespace_holds_within_scopes() {
        let mut q =
            json!({"spec": {"hard": {"pods": "5", "requests.cpu": "2", "count/configmaps": "9"}}});
        let pods = [
            pod(json!({"cpu": "300m"}), json!({})),
            pod(json!({"cpu": "1"}), json!({})),
            json!({"spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Failed"}}),
        ];
        assert_eq!(
            pretty(&total(&q, "", "pods", &pods)),
            "pods=2,requests.cpu=1300m"
        );
        assert_eq!(
            pretty(&total(&q, "", "configmaps", &[json!({}), json!({})])),
            "count/configmaps=2"
        );
        assert_eq!(pretty(&total(&q, "", "secrets", &[json!({})])), "");
        q["spec"]["scopes"] = json!(["BestEffort"]);
        assert_eq!(
            pretty(&total(&q, "", "pods", &pods)),
            "pods=0,requests.cpu=0"
        );
    }

    #[test]
    fn scopes_and_update_deltas() {
        let best = quota("be", json!({"pods": "0"}), json!({"pods": "0"}));
        let mut scoped = best.clone();
        scoped["spec"]["scopes"] = json!(["BestEffort"]);
        let bare = json!({"spec": {"containers": [{"name": "c"}]}});
        let guaranteed = pod(json!({"cpu": "1"}), json!({"cpu": "1"}));
        assert!(charge(std::slice::from_ref(&scoped), &create("pods", &bare)).is_err());
        assert!(
            charge(std::slice::from_ref(&scoped), &create("pods", &guaranteed))
                .unwrap()
                .is_empty()
        );
        let mut by_class = best.clone();
        by_class["spec"]["scopeSelector"] = json!({"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]});
        let mut high = bare.clone();
        high["spec"]["priorityClassName"] = json!("high");
        assert!(charge(std::slice::from_ref(&by_class), &create("pods", &high)).is_err());
        assert!(
            charge(std::slice::from_ref(&by_class), &create("pods", &bare))
                .unwrap()
                .is_empty()
        );
        assert!(
            !in_scope(&scoped, "", "configmaps", &json!({})),
            "only pods have scopes"
        );

        let storage = quota(
            "storage",
            json!({"requests.storage": "5Gi"}),
            json!({"requests.storage": "3Gi"}),
        );
        let claim = |size: &str| json!({"metadata": {"resourceVersion": "7"}, "spec": {"resources": {"requests": {"storage": size}}}});
        let (old, grown) = (claim("3Gi"), claim("4Gi"));
        let update = Request {
            group: "",
            plural: "persistentvolumeclaims",
            object: &grown,
            old: Some(&old),
        };
        assert_eq!(
            pretty(&charge(std::slice::from_ref(&storage), &update).unwrap()[0].1),
            "requests.storage=4Gi"
        );
        let too_big = claim("6Gi");
        let update = Request {
            group: "",
            plural: "persistentvolumeclaims",
            object: &too_big,
            old: Some(&old),
        };
        assert_eq!(
            charge(&[storage], &update).unwrap_err(),
            "exceeded quota: storage, requested: requests.storage=3Gi, used: requests.storage=3Gi, limited: requests.storage=5Gi"
        );
    }
}
