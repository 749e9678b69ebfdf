//! kube's bootstrap configuration of API Priority and Fairness: the
//! mandatory objects (the `exempt` and `catch-all` FlowSchemas and
//! PriorityLevelConfigurations, restored whenever they change) and the
//! suggested ones (`system`, `node-high`, `leader-election`,
//! `workload-high`, `workload-low`, `global-default` and the schemas that
//! lead to them, created when missing), as v1 objects with kube's specs.

use serde_json::{Value, json};

/// The annotation saying whether the server keeps an object's spec as it
/// ships it (`"true"`) or leaves it as changed (`"false"`).
pub const AUTOUPDATE_ANNOTATION: &str = "apf.kubernetes.io/autoupdate-spec";
/// The API version of every object here.
const API_VERSION: &str = "flowcontrol.apiserver.k8s.io/v1";

/// Every verb, group, resource and namespace, cluster scope included.
fn all_resources() -> Value {
    json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}])
}

/// Every non-resource URL, every verb.
fn all_non_resources() -> Value {
    json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}])
}

fn groups(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "Group", "group": {"name": n}}))
        .collect()
}

fn users(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "User", "user": {"name": n}}))
        .collect()
}

fn kube_system_account(name: &str) -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": name}})
}

/// A resource rule, namespaced.
fn rule(verbs: &[&str], group: &str, resources: &[&str], namespaces: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": [group], "resources": resources, "namespaces": namespaces})
}

/// A FlowSchema: name, level, precedence, distinguisher and rules.
fn flow_schema(
    name: &str,
    level: &str,
    precedence: i32,
    distinguisher: Option<&str>,
    rules: Value,
) -> Value {
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": rules,
    });
    if let Some(method) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": method});
    }
    json!({
        "apiVersion": API_VERSION,
        "kind": "FlowSchema",
        "metadata": {"name": name, "annotations": {AUTOUPDATE_ANNOTATION: "true"}},
        "spec": spec,
    })
}

/// A FlowSchema matching everything `subjects` ask.
fn everything(
    name: &str,
    level: &str,
    precedence: i32,
    distinguisher: Option<&str>,
    subjects: Vec<Value>,
) -> Value {
    flow_schema(
        name,
        level,
        precedence,
        distinguisher,
        json!([{"subjects": subjects, "resourceRules": all_resources(), "nonResourceRules": all_non_resources()}]),
    )
}

/// A Limited level queuing with the given shares, lendable percent and queuing.
fn queuing_level(name: &str, shares: i32, lendable: i32, queues: i32, hand: i32) -> Value {
    level(
        name,
        json!({"type": "Limited", "limited": {
            "nominalConcurrencyShares": shares,
            "lendablePercent": lendable,
            "limitResponse": {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": 50}},
        }}),
    )
}

fn level(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name, "annotations": {AUTOUPDATE_ANNOTATION: "true"}},
        "spec": spec,
    })
}

/// The mandatory levels: `exempt` (never limited) and `catch-all` (a
/// small share, rejecting past it).
pub fn mandatory_priority_levels() -> Vec<Value> {
    vec![
        level(
            "exempt",
            json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
        ),
        level(
            "catch-all",
            json!({"type": "Limited", "limited": {
                "nominalConcurrencyShares": 5,
                "lendablePercent": 0,
                "limitResponse": {"type": "Reject"},
            }}),
        ),
    ]
}

/// The mandatory schemas: `exempt` for `system:masters`, `catch-all` for everyone.
pub fn mandatory_flow_schemas() -> Vec<Value> {
    vec![
        everything("exempt", "exempt", 1, None, groups(&["system:masters"])),
        everything(
            "catch-all",
            "catch-all",
            10000,
            Some("ByUser"),
            groups(&["system:unauthenticated", "system:authenticated"]),
        ),
    ]
}

/// The suggested levels.
pub fn suggested_priority_levels() -> Vec<Value> {
    vec![
        queuing_level("system", 30, 33, 64, 6),
        queuing_level("node-high", 40, 25, 64, 6),
        queuing_level("leader-election", 10, 0, 16, 4),
        queuing_level("workload-high", 40, 50, 128, 6),
        queuing_level("workload-low", 100, 90, 128, 6),
        queuing_level("global-default", 20, 50, 128, 6),
    ]
}

/// The suggested schemas.
pub fn suggested_flow_schemas() -> Vec<Value> {
    let leader_verbs = ["get", "create", "update"];
    let mut leader_subjects = users(&["system:kube-controller-manager", "system:kube-scheduler"]);
    leader_subjects.push(kube_system_account("*"));
    let mut endpoint_subjects = users(&["system:kube-controller-manager"]);
    endpoint_subjects.push(kube_system_account("endpoint-controller"));
    vec![
        everything(
            "system-nodes",
            "system",
            500,
            Some("ByUser"),
            groups(&["system:nodes"]),
        ),
        flow_schema(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            json!([{"subjects": groups(&["system:nodes"]), "resourceRules": [
                {"verbs": ["*"], "apiGroups": [""], "resources": ["nodes", "nodes/status"], "clusterScope": true, "namespaces": ["*"]},
                rule(&["*"], "coordination.k8s.io", &["leases"], &["*"]),
            ]}]),
        ),
        flow_schema(
            "probes",
            "exempt",
            2,
            None,
            json!([{"subjects": groups(&["system:unauthenticated", "system:authenticated"]),
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}]),
        ),
        flow_schema(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            json!([{"subjects": leader_subjects, "resourceRules": [
                rule(&leader_verbs, "", &["endpoints", "configmaps"], &["kube-system"]),
                rule(&leader_verbs, "coordination.k8s.io", &["leases"], &["*"]),
            ]}]),
        ),
        flow_schema(
            "workload-leader-election",
            "leader-election",
            200,
            Some("ByUser"),
            json!([{"subjects": [kube_system_account("*")], "resourceRules": [
                rule(&leader_verbs, "", &["endpoints", "configmaps"], &["*"]),
                rule(&leader_verbs, "coordination.k8s.io", &["leases"], &["*"]),
            ]}]),
        ),
        flow_schema(
            "endpoint-controller",
            "workload-high",
            150,
            Some("ByUser"),
            json!([{"subjects": endpoint_subjects, "resourceRules": [
                rule(&leader_verbs, "", &["endpoints"], &["*"]),
            ]}]),
        ),
        everything(
            "kube-controller-manager",
            "workload-high",
            800,
            Some("ByNamespace"),
            users(&["system:kube-controller-manager"]),
        ),
        everything(
            "kube-scheduler",
            "workload-high",
            800,
            Some("ByNamespace"),
            users(&["system:kube-scheduler"]),
        ),
        everything(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some("ByNamespace"),
            vec![kube_system_account("*")],
        ),
        everything(
            "service-accounts",
            "workload-low",
            9000,
            Some("ByUser"),
            groups(&["system:serviceaccounts"]),
        ),
        everything(
            "global-default",
            "global-default",
            9900,
            Some("ByUser"),
            groups(&["system:unauthenticated", "system:authenticated"]),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};

    #[test]
    fn every_object_decodes_and_every_schema_names_a_level() {
        let levels: Vec<PriorityLevelConfiguration> = mandatory_priority_levels()
            .into_iter()
            .chain(suggested_priority_levels())
            .map(|v| serde_json::from_value(v).expect("a level"))
            .collect();
        let names: Vec<&str> = levels
            .iter()
            .filter_map(|l| l.metadata.name.as_deref())
            .collect();
        assert_eq!(names.len(), 8);
        for schema in mandatory_flow_schemas()
            .into_iter()
            .chain(suggested_flow_schemas())
        {
            let schema: FlowSchema = serde_json::from_value(schema).expect("a schema");
            let level = schema
                .spec
                .expect("a spec")
                .priority_level_configuration
                .name;
            assert!(names.contains(&level.as_str()), "{level}");
        }
        assert_eq!(suggested_flow_schemas().len(), 11);
    }
}
