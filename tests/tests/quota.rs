//! ResourceQuota and LimitRanger through the front door, with kubectl: an
//! object-count quota refusing the object past it in kube's words (for the
//! admin and for a ServiceAccount alike), its status kept by the quota
//! controller and freed when an object goes; dry runs charge nothing;
//! compute quotas refusing pods over them or without the limits they
//! count; LimitRange defaults written into pods, and its max enforced.

use std::time::Duration;

use serde_json::{Value, json};
use tests::{As, Cluster, eventually};

/// Creates a namespace for one part of the test.
fn namespace(cluster: &Cluster, name: &str) {
    cluster.kubectl(&["create", "namespace", name]).ok();
}

/// Applies a manifest from JSON.
fn apply(cluster: &Cluster, object: &Value) {
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &object.to_string())
        .ok();
}

/// The quota `name` in `ns`.
fn quota(cluster: &Cluster, ns: &str, name: &str) -> Value {
    cluster
        .kubectl(&["get", "resourcequota", name, "-n", ns, "-o", "json"])
        .json()
}

/// Waits until the quota controller has filled in the quota's status with
/// `used`.
fn until_used(cluster: &Cluster, ns: &str, name: &str, used: &Value) -> Value {
    let mut last = Value::Null;
    let seen = eventually(Duration::from_secs(10), || {
        last = quota(cluster, ns, name);
        &last["status"]["used"] == used
    });
    assert!(seen, "quota status never reached {used}: {last}");
    last
}

/// A pod with one container `c` with these resources.
fn pod(ns: &str, name: &str, resources: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "resources": resources}]}})
}

#[test]
fn quotas_and_limit_ranges_as_kube_enforces_them() {
    let cluster = Cluster::start();
    object_counts(&cluster);
    compute(&cluster);
    limit_ranges(&cluster);
}

/// A `configmaps: N` quota: the object past it is refused, for the admin
/// and for a ServiceAccount; deleting frees quota; dry runs charge nothing.
fn object_counts(cluster: &Cluster) {
    let ns = "counted";
    namespace(cluster, ns);
    let present = cluster
        .kubectl(&["get", "configmaps", "-n", ns, "-o", "json"])
        .json()["items"]
        .as_array()
        .map_or(0, Vec::len);
    let hard = present + 2;
    apply(
        cluster,
        &json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "objects", "namespace": ns},
            "spec": {"hard": {"configmaps": hard.to_string(), "count/secrets": "5"}}}),
    );
    let status = until_used(
        cluster,
        ns,
        "objects",
        &json!({"configmaps": present.to_string(), "count/secrets": "0"}),
    );
    assert_eq!(
        status["status"]["hard"],
        json!({"configmaps": hard.to_string(), "count/secrets": "5"})
    );

    // A dry run fits, and charges nothing.
    cluster
        .kubectl(&["create", "configmap", "dry", "-n", ns, "--dry-run=server"])
        .ok();
    assert_eq!(
        quota(cluster, ns, "objects")["status"]["used"]["configmaps"],
        present.to_string()
    );
    for name in ["one", "two"] {
        cluster
            .kubectl(&["create", "configmap", name, "-n", ns])
            .ok();
    }
    let used = quota(cluster, ns, "objects");
    assert_eq!(used["status"]["used"]["configmaps"], hard.to_string());
    let message = format!(
        "configmaps \"three\" is forbidden: exceeded quota: objects, \
         requested: configmaps=1, used: configmaps={hard}, limited: configmaps={hard}"
    );
    let refusal = format!("error: failed to create configmap: {message}");
    let err = cluster
        .kubectl(&["create", "configmap", "three", "-n", ns])
        .err()
        .trim()
        .to_string();
    assert_eq!(err, refusal);
    // Nor does a dry run get past it.
    let err = cluster
        .kubectl(&["create", "configmap", "three", "-n", ns, "--dry-run=server"])
        .err()
        .trim()
        .to_string();
    assert_eq!(err, refusal);

    // A ServiceAccount allowed to write configmaps is held to the same quota.
    let token = cluster.service_account_token("writer");
    cluster
        .kubectl(&["create", "role", "configmaps", "--verb=create,get,list,delete", "--resource=configmaps", "-n", ns])
        .ok();
    cluster
        .kubectl(&["create", "rolebinding", "writer", "--role=configmaps", "--serviceaccount=default:writer", "-n", ns])
        .ok();
    let kubeconfig = cluster.token_kubeconfig("writer", &token, ns);
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .kubectl_with(&kubeconfig, &["get", "configmaps"])
            .code
            == 0),
        "the role never applied"
    );
    let err = cluster
        .kubectl_with(&kubeconfig, &["create", "configmap", "three"])
        .err()
        .trim()
        .to_string();
    assert_eq!(err, refusal);
    // A 403 Status, as kube answers.
    let answer = cluster.curl(
        As::Token(&token),
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        &["Content-Type: application/json"],
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "three"}}).to_string().as_bytes()),
    );
    assert_eq!(answer.code, 403, "{}", answer.text);
    assert_eq!(answer.json["reason"], "Forbidden");
    assert_eq!(answer.json["message"], message);
    assert_eq!(answer.json["details"], json!({"name": "three", "kind": "configmaps"}));

    // Deleting one frees its place (the controller recounts), for the
    // ServiceAccount's next create.
    cluster
        .kubectl(&["delete", "configmap", "one", "-n", ns])
        .ok();
    until_used(
        cluster,
        ns,
        "objects",
        &json!({"configmaps": (hard - 1).to_string(), "count/secrets": "0"}),
    );
    cluster
        .kubectl_with(&kubeconfig, &["create", "configmap", "three"])
        .ok();
    assert_eq!(
        quota(cluster, ns, "objects")["status"]["used"]["configmaps"],
        hard.to_string()
    );
    let table = cluster
        .kubectl(&["get", "resourcequota", "objects", "-n", ns])
        .ok()
        .to_string();
    assert!(
        table.contains(&format!("configmaps: {hard}/{hard}, count/secrets: 0/5")),
        "{table}"
    );
}

/// A compute quota: pods over it are refused, and pods that leave out a
/// limit it counts must specify it.
fn compute(cluster: &Cluster) {
    let ns = "compute";
    namespace(cluster, ns);
    apply(
        cluster,
        &json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute", "namespace": ns},
            "spec": {"hard": {"requests.cpu": "1", "limits.memory": "1Gi", "pods": "5"}}}),
    );
    until_used(
        cluster,
        ns,
        "compute",
        &json!({"requests.cpu": "0", "limits.memory": "0", "pods": "0"}),
    );
    let create = |pod: Value| cluster.kubectl_stdin(&["create", "-f", "-"], &pod.to_string());
    create(pod(ns, "small", json!({"requests": {"cpu": "600m"}, "limits": {"memory": "512Mi"}}))).ok();
    until_used(
        cluster,
        ns,
        "compute",
        &json!({"requests.cpu": "600m", "limits.memory": "512Mi", "pods": "1"}),
    );
    let err = create(pod(ns, "big", json!({"requests": {"cpu": "500m"}, "limits": {"memory": "256Mi"}})))
        .err()
        .trim()
        .to_string();
    assert_eq!(
        err,
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"big\" is forbidden: \
         exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1"
    );
    let err = create(pod(ns, "unlimited", json!({"requests": {"cpu": "100m"}})))
        .err()
        .trim()
        .to_string();
    assert_eq!(
        err,
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"unlimited\" is forbidden: \
         failed quota: compute: must specify limits.memory for: c"
    );
    let err = create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}))
        .err()
        .trim()
        .to_string();
    assert_eq!(
        err,
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"bare\" is forbidden: \
         failed quota: compute: must specify limits.memory for: c; requests.cpu for: c"
    );

    // A BestEffort quota covers only pods without requests or limits.
    let ns = "scoped";
    namespace(cluster, ns);
    apply(
        cluster,
        &json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "besteffort", "namespace": ns},
            "spec": {"hard": {"pods": "0"}, "scopes": ["BestEffort"]}}),
    );
    until_used(cluster, ns, "besteffort", &json!({"pods": "0"}));
    create(pod(ns, "guaranteed", json!({"limits": {"cpu": "100m", "memory": "64Mi"}}))).ok();
    let err = create(pod(ns, "bare", json!({})))
        .err()
        .trim()
        .to_string();
    assert_eq!(
        err,
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"bare\" is forbidden: \
         exceeded quota: besteffort, requested: pods=1, used: pods=0, limited: pods=0"
    );
}

/// A LimitRange's defaults fill a bare pod (with kube's annotation), and
/// its max refuses a pod over it in kube's words.
fn limit_ranges(cluster: &Cluster) {
    let ns = "limited";
    namespace(cluster, ns);
    apply(
        cluster,
        &json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits", "namespace": ns},
            "spec": {"limits": [
                {"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                 "defaultRequest": {"cpu": "100m", "memory": "128Mi"}, "max": {"memory": "1Gi"}, "min": {"cpu": "50m"}},
                {"type": "PersistentVolumeClaim", "max": {"storage": "2Gi"}}]}}),
    );
    cluster
        .kubectl(&["run", "bare", "--image=nginx:1.27", "-n", ns])
        .ok();
    let stored = cluster
        .kubectl(&["get", "pod", "bare", "-n", ns, "-o", "json"])
        .json();
    assert_eq!(
        stored["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}})
    );
    assert_eq!(
        stored["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container bare; cpu, memory limit for container bare"
    );
    let err = cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            &pod(ns, "greedy", json!({"requests": {"cpu": "10m"}, "limits": {"memory": "2Gi"}})).to_string(),
        )
        .err()
        .trim()
        .to_string();
    assert_eq!(
        err,
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"greedy\" is forbidden: \
         [minimum cpu usage per Container is 50m, but request is 10m, maximum memory usage per Container is 1Gi, but limit is 2Gi]"
    );
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "big", "namespace": ns},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}}});
    let err = cluster
        .kubectl_stdin(&["create", "-f", "-"], &claim.to_string())
        .err()
        .trim()
        .to_string();
    assert_eq!(
        err,
        "Error from server (Forbidden): error when creating \"STDIN\": persistentvolumeclaims \"big\" is forbidden: \
         maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"
    );
}
