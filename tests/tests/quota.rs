//! ResourceQuota and LimitRanger through the front door, with kubectl: an
//! object-count quota refusing the object past it in kube's words (for the
//! admin and for a ServiceAccount alike), its status kept by the quota
//! controller and freed when an object goes; dry runs charge nothing;
//! compute quotas refusing pods over them or without the limits they
//! count, and scopes; node ports charged when a Service's type changes;
//! LimitRange defaults written into pods, and its min and max enforced on
//! pods and claims; a custom resource's object count; and writes racing
//! through two core-server replicas never getting past a quota.

use std::time::Duration;

use serde_json::{Value, json};
use tests::{As, Cluster, Run, eventually};

/// `kubectl create -f -` of an object.
fn create(cluster: &Cluster, object: &Value) -> Run {
    cluster.kubectl_stdin(&["create", "-f", "-"], &object.to_string())
}

/// What kubectl printed when it was refused.
fn refusal(run: Run) -> String {
    run.err().trim().to_string()
}

/// What kubectl prints when kube refuses `create -f -` of `what` (`pods
/// "x"`) with a 403.
fn forbidden(what: &str, why: &str) -> String {
    format!(
        "Error from server (Forbidden): error when creating \"STDIN\": {what} is forbidden: {why}"
    )
}

/// A namespace for one part of the test, holding `object` (a quota or a
/// LimitRange).
fn namespace_with(cluster: &Cluster, ns: &str, object: Value) {
    cluster.kubectl(&["create", "namespace", ns]).ok();
    create(cluster, &object).ok();
}

/// A ResourceQuota manifest.
fn resource_quota(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

/// The quota `name` in `ns`.
fn quota(cluster: &Cluster, ns: &str, name: &str) -> Value {
    cluster
        .kubectl(&["get", "resourcequota", name, "-n", ns, "-o", "json"])
        .json()
}

/// Waits until the quota's `status.used` is `used`; the quota then.
fn until_used(cluster: &Cluster, ns: &str, name: &str, used: &Value) -> Value {
    let mut last = Value::Null;
    let seen = eventually(Duration::from_secs(20), || {
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
    services(&cluster);
    custom_resources(&cluster);
}

/// A `configmaps: N` quota: the object past it is refused, for the admin
/// and for a ServiceAccount; deleting frees quota; dry runs charge nothing.
/// As in kube, the namespace's `kube-root-ca.crt` counts: a quota of 3
/// leaves room for two ConfigMaps of the user's and refuses the third.
fn object_counts(cluster: &Cluster) {
    let ns = "counted";
    cluster.create_namespace(ns);
    let present = cluster
        .kubectl(&["get", "configmaps", "-n", ns, "-o", "json"])
        .json()["items"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(present, 1, "a new namespace holds kube-root-ca.crt only");
    let hard = present + 2;
    create(
        cluster,
        &resource_quota(
            ns,
            "objects",
            json!({"hard": {"configmaps": hard.to_string(), "count/secrets": "5"}}),
        ),
    )
    .ok();
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
    let used =
        |cluster: &Cluster| quota(cluster, ns, "objects")["status"]["used"]["configmaps"].clone();
    assert_eq!(used(cluster), present.to_string());
    for name in ["one", "two"] {
        cluster
            .kubectl(&["create", "configmap", name, "-n", ns])
            .ok();
    }
    assert_eq!(used(cluster), hard.to_string());
    let message = format!(
        "configmaps \"three\" is forbidden: exceeded quota: objects, \
         requested: configmaps=1, used: configmaps={hard}, limited: configmaps={hard}"
    );
    let refused = format!("error: failed to create configmap: {message}");
    assert_eq!(
        refusal(cluster.kubectl(&["create", "configmap", "three", "-n", ns])),
        refused
    );
    // Nor does a dry run get past it.
    assert_eq!(
        refusal(cluster.kubectl(&["create", "configmap", "three", "-n", ns, "--dry-run=server"])),
        refused
    );

    // A ServiceAccount allowed to write configmaps is held to the same quota.
    let token = cluster.service_account_token("writer");
    cluster
        .kubectl(&[
            "create",
            "role",
            "configmaps",
            "--verb=create,get,list,delete",
            "--resource=configmaps",
            "-n",
            ns,
        ])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "rolebinding",
            "writer",
            "--role=configmaps",
            "--serviceaccount=default:writer",
            "-n",
            ns,
        ])
        .ok();
    let kubeconfig = cluster.token_kubeconfig("writer", &token, ns);
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .kubectl_with(&kubeconfig, &["get", "configmaps"])
            .code
            == 0),
        "the role never applied"
    );
    assert_eq!(
        refusal(cluster.kubectl_with(&kubeconfig, &["create", "configmap", "three"])),
        refused
    );
    // A 403 Status with kube's details.
    let answer = cluster.curl(
        As::Token(&token),
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        &["Content-Type: application/json"],
        Some(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "three"}})
                .to_string()
                .as_bytes(),
        ),
    );
    assert_eq!(answer.code, 403, "{}", answer.text);
    assert_eq!(answer.json["reason"], "Forbidden");
    assert_eq!(answer.json["message"], message);
    assert_eq!(
        answer.json["details"],
        json!({"name": "three", "kind": "configmaps"})
    );

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
    assert_eq!(used(cluster), hard.to_string());
    let table = cluster
        .kubectl(&["get", "resourcequota", "objects", "-n", ns])
        .ok()
        .to_string();
    assert!(
        table.contains(&format!("configmaps: {hard}/{hard}, count/secrets: 0/5")),
        "{table}"
    );
}

/// A compute quota: pods over it are refused, and pods that leave out what
/// it counts must specify it; a BestEffort quota covers only such pods.
fn compute(cluster: &Cluster) {
    let ns = "compute";
    namespace_with(
        cluster,
        ns,
        resource_quota(
            ns,
            "compute",
            json!({"hard": {"requests.cpu": "1", "limits.memory": "1Gi", "pods": "5"}}),
        ),
    );
    until_used(
        cluster,
        ns,
        "compute",
        &json!({"requests.cpu": "0", "limits.memory": "0", "pods": "0"}),
    );
    create(
        cluster,
        &pod(
            ns,
            "small",
            json!({"requests": {"cpu": "600m"}, "limits": {"memory": "512Mi"}}),
        ),
    )
    .ok();
    until_used(
        cluster,
        ns,
        "compute",
        &json!({"requests.cpu": "600m", "limits.memory": "512Mi", "pods": "1"}),
    );
    let big = pod(
        ns,
        "big",
        json!({"requests": {"cpu": "500m"}, "limits": {"memory": "256Mi"}}),
    );
    assert_eq!(
        refusal(create(cluster, &big)),
        forbidden(
            "pods \"big\"",
            "exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1"
        )
    );
    let unlimited = pod(ns, "unlimited", json!({"requests": {"cpu": "100m"}}));
    assert_eq!(
        refusal(create(cluster, &unlimited)),
        forbidden(
            "pods \"unlimited\"",
            "failed quota: compute: must specify limits.memory for: c"
        )
    );
    assert_eq!(
        refusal(create(cluster, &pod(ns, "bare", json!({})))),
        forbidden(
            "pods \"bare\"",
            "failed quota: compute: must specify limits.memory for: c; requests.cpu for: c"
        )
    );

    let ns = "scoped";
    namespace_with(
        cluster,
        ns,
        resource_quota(
            ns,
            "besteffort",
            json!({"hard": {"pods": "0"}, "scopes": ["BestEffort"]}),
        ),
    );
    until_used(cluster, ns, "besteffort", &json!({"pods": "0"}));
    create(
        cluster,
        &pod(
            ns,
            "guaranteed",
            json!({"limits": {"cpu": "100m", "memory": "64Mi"}}),
        ),
    )
    .ok();
    assert_eq!(
        refusal(create(cluster, &pod(ns, "bare", json!({})))),
        forbidden(
            "pods \"bare\"",
            "exceeded quota: besteffort, requested: pods=1, used: pods=0, limited: pods=0"
        )
    );
}

/// A LimitRange's defaults fill a bare pod (with kube's annotation), and
/// its min and max refuse pods and claims in kube's words.
fn limit_ranges(cluster: &Cluster) {
    let ns = "limited";
    namespace_with(
        cluster,
        ns,
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits", "namespace": ns},
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
    let greedy = pod(
        ns,
        "greedy",
        json!({"requests": {"cpu": "10m"}, "limits": {"memory": "2Gi"}}),
    );
    assert_eq!(
        refusal(create(cluster, &greedy)),
        forbidden(
            "pods \"greedy\"",
            "[minimum cpu usage per Container is 50m, but request is 10m, \
             maximum memory usage per Container is 1Gi, but limit is 2Gi]"
        )
    );
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "big", "namespace": ns},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}}});
    assert_eq!(
        refusal(create(cluster, &claim)),
        forbidden(
            "persistentvolumeclaims \"big\"",
            "maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"
        )
    );
}

/// Node ports are charged when a Service's type changes (an update charged
/// by what it adds), and refused past the quota.
fn services(cluster: &Cluster) {
    let ns = "served";
    namespace_with(
        cluster,
        ns,
        resource_quota(
            ns,
            "ports",
            json!({"hard": {"services": "3", "services.nodeports": "1"}}),
        ),
    );
    until_used(
        cluster,
        ns,
        "ports",
        &json!({"services": "0", "services.nodeports": "0"}),
    );
    let service = |name: &str, kind: &str| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"type": kind, "ports": [{"port": 80}]}})
    };
    create(cluster, &service("a", "ClusterIP")).ok();
    cluster
        .kubectl(&[
            "patch",
            "service",
            "a",
            "-n",
            ns,
            "-p",
            r#"{"spec":{"type":"NodePort"}}"#,
        ])
        .ok();
    assert_eq!(
        quota(cluster, ns, "ports")["status"]["used"],
        json!({"services": "1", "services.nodeports": "1"})
    );
    assert_eq!(
        refusal(create(cluster, &service("b", "NodePort"))),
        forbidden(
            "services \"b\"",
            "exceeded quota: ports, requested: services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1"
        )
    );
    create(cluster, &service("c", "ClusterIP")).ok();
}

/// A quota on a custom resource's object count: charged by the extension
/// server, counted (and freed on deletion) by the core server's controller.
fn custom_resources(cluster: &Cluster) {
    create(
        cluster,
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.quota.example.com"},
            "spec": {"group": "quota.example.com", "scope": "Namespaced",
                "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}),
    )
    .ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/gadgets.quota.example.com",
            "--timeout=10s",
        ])
        .ok();
    let ns = "custom";
    let counted = "count/gadgets.quota.example.com";
    namespace_with(
        cluster,
        ns,
        resource_quota(ns, "crs", json!({"hard": {counted: "1"}})),
    );
    until_used(cluster, ns, "crs", &json!({counted: "0"}));
    let gadget = |name: &str| json!({"apiVersion": "quota.example.com/v1", "kind": "Gadget", "metadata": {"name": name, "namespace": ns}});
    create(cluster, &gadget("g1")).ok();
    assert_eq!(
        refusal(create(cluster, &gadget("g2"))),
        forbidden(
            "gadgets.quota.example.com \"g2\"",
            &format!(
                "exceeded quota: crs, requested: {counted}=1, used: {counted}=1, limited: {counted}=1"
            )
        )
    );
    cluster.kubectl(&["delete", "gadget", "g1", "-n", ns]).ok();
    until_used(cluster, ns, "crs", &json!({counted: "0"}));
    create(cluster, &gadget("g2")).ok();
}

/// Writes racing through two core-server replicas for a quota's last
/// places: no more objects are stored than the quota allows, and its
/// `status.used` counts exactly those stored.
#[test]
fn replicas_racing_never_exceed_a_quota() {
    let cluster = Cluster::start_with(&["--core-replicas", "2"]);
    let ns = "raced";
    let hard = 4;
    // kube-root-ca.crt, there before the quota, takes one of its places.
    cluster.create_namespace(ns);
    create(
        &cluster,
        &resource_quota(
            ns,
            "objects",
            json!({"hard": {"configmaps": hard.to_string()}}),
        ),
    )
    .ok();
    until_used(&cluster, ns, "objects", &json!({"configmaps": "1"}));
    let runs: Vec<Run> = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..10)
            .map(|i| {
                let cluster = &cluster;
                scope.spawn(move || {
                    cluster.kubectl(&["create", "configmap", &format!("cm-{i}"), "-n", ns])
                })
            })
            .collect();
        writers
            .into_iter()
            .map(|w| w.join().expect("a writer"))
            .collect()
    });
    let created = runs.iter().filter(|r| r.code == 0).count();
    eprintln!("{created} of {} created", runs.len());
    for run in runs.iter().filter(|r| r.code != 0) {
        assert!(
            run.stderr.contains("exceeded quota: objects")
                || run.stderr.contains("Operation cannot be fulfilled"),
            "{}",
            run.stderr
        );
    }
    assert!((1..hard).contains(&created), "{created} created: {runs:?}");
    let stored = cluster
        .kubectl(&["get", "configmaps", "-n", ns, "-o", "json"])
        .json()["items"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(stored, created + 1, "the writers' and kube-root-ca.crt");
    assert_eq!(
        quota(&cluster, ns, "objects")["status"]["used"]["configmaps"],
        stored.to_string()
    );
}
