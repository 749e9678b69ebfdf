//! What stock parts ask beyond the everyday resources, through the front
//! door. A scheduler and `kubectl drain`: `pods/binding` and `bindings` as `system:kube-scheduler` (with only
//! what kube's bootstrap policy grants it), a pod bound once and a second
//! binding refused with kube's 409; `pods/eviction` deleting a pod that
//! does not run, asking the PodDisruptionBudget of one that does (429
//! while the budget allows nothing, spent when it allows one), and
//! `kubectl drain` cordoning a node and evicting its pods. An
//! autoscaling/v1 HorizontalPodAutoscaler (what older charts ship) and the
//! same object read and written as autoscaling/v2, both ways.

use serde_json::{Value, json};
use tests::{As, Cluster};

const NS: &str = "scheduling";

/// A POST of `body` to `path` as `user` (impersonated by the admin).
fn post_as(cluster: &Cluster, user: Option<&str>, path: &str, body: &Value) -> tests::Answer {
    let impersonate = user.map(|u| format!("Impersonate-User: {u}"));
    let mut headers = vec!["Content-Type: application/json"];
    headers.extend(impersonate.as_deref());
    cluster.curl(
        As::Admin,
        "POST",
        path,
        &headers,
        Some(body.to_string().as_bytes()),
    )
}

/// A PUT of `body` to `path` as the admin.
fn put_json(cluster: &Cluster, path: &str, body: &Value) -> tests::Answer {
    cluster.curl(
        As::Admin,
        "PUT",
        path,
        &["Content-Type: application/json"],
        Some(body.to_string().as_bytes()),
    )
}

/// Creates pod `name` with `labels`.
fn create_pod(cluster: &Cluster, name: &str, labels: Value) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}});
    cluster
        .kubectl_stdin(&["create", "-n", NS, "-f", "-"], &pod.to_string())
        .ok();
}

/// Pod `name` as stored.
fn pod(cluster: &Cluster, name: &str) -> Value {
    serde_json::from_str(
        cluster
            .kubectl(&["get", "pod", "-n", NS, name, "-o", "json"])
            .ok(),
    )
    .expect("a pod")
}

fn binding(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "annotations": {"scheduled-by": "test"}},
           "target": {"kind": "Node", "name": node}})
}

#[test]
fn the_scheduler_binds_a_pod_once() {
    let cluster = Cluster::start();
    cluster.kubectl(&["create", "namespace", NS]).ok();
    create_pod(&cluster, "web", json!({}));
    let path = format!("/api/v1/namespaces/{NS}/pods/web/binding");
    // Anyone else is refused.
    let refused = post_as(&cluster, Some("mallory"), &path, &binding("web", "node-1"));
    assert_eq!(refused.code, 403, "{}", refused.text);
    assert_eq!(
        refused.json["message"],
        "pods \"web\" is forbidden: User \"mallory\" cannot create resource \"pods/binding\" in API group \"\" in the namespace \"scheduling\""
    );
    let scheduler = Some("system:kube-scheduler");
    let bound = post_as(&cluster, scheduler, &path, &binding("web", "node-1"));
    assert_eq!(bound.code, 201, "{}", bound.text);
    assert_eq!(bound.json["kind"], "Status");
    assert_eq!(bound.json["status"], "Success");
    let web = pod(&cluster, "web");
    assert_eq!(web["spec"]["nodeName"], "node-1");
    assert_eq!(web["metadata"]["annotations"]["scheduled-by"], "test");
    let scheduled = web["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(scheduled["status"], "True", "{web}");
    // Once only.
    let again = post_as(&cluster, scheduler, &path, &binding("web", "node-2"));
    assert_eq!(again.code, 409, "{}", again.text);
    assert_eq!(
        again.json["message"],
        "Operation cannot be fulfilled on pods/binding \"web\": pod web is already assigned to node \"node-1\""
    );
    assert_eq!(pod(&cluster, "web")["spec"]["nodeName"], "node-1");
    // The name must match the path's; the target must be a node.
    let other = post_as(&cluster, scheduler, &path, &binding("db", "node-1"));
    assert_eq!(other.code, 400, "{}", other.text);
    let mut to_pod = binding("web", "node-1");
    to_pod["target"]["kind"] = json!("Pod");
    let invalid = post_as(&cluster, scheduler, &path, &to_pod);
    assert_eq!(invalid.code, 422, "{}", invalid.text);
    assert!(
        invalid.json["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Binding \"web\" is invalid: target.kind: Unsupported value: \"Pod\""),
        "{}",
        invalid.text
    );
    // The older endpoint: the pod named by the Binding.
    create_pod(&cluster, "db", json!({}));
    let bindings = format!("/api/v1/namespaces/{NS}/bindings");
    let bound = post_as(&cluster, scheduler, &bindings, &binding("db", "node-2"));
    assert_eq!(bound.code, 201, "{}", bound.text);
    assert_eq!(pod(&cluster, "db")["spec"]["nodeName"], "node-2");
    // Discovery lists them as kube does.
    let resources = cluster.curl(As::Admin, "GET", "/api/v1", &[], None);
    let find = |name: &str| {
        resources.json["resources"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["name"] == name))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(find("bindings")["verbs"], json!(["create"]));
    assert_eq!(find("pods/binding")["kind"], "Binding");
    assert_eq!(find("pods/eviction")["kind"], "Eviction");
    assert_eq!(find("pods/eviction")["group"], "policy");
}

#[test]
fn eviction_asks_the_disruption_budget_and_drain_evicts() {
    let cluster = Cluster::start();
    cluster.kubectl(&["create", "namespace", NS]).ok();
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}});
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &node.to_string())
        .ok();
    for name in ["a", "b", "loose"] {
        let labels = match name {
            "loose" => json!({}),
            _ => json!({"app": "web"}),
        };
        create_pod(&cluster, name, labels);
        let bound = post_as(
            &cluster,
            None,
            &format!("/api/v1/namespaces/{NS}/pods/{name}/binding"),
            &binding(name, "node-1"),
        );
        assert_eq!(bound.code, 201, "{}", bound.text);
    }
    // a and b run (as a kubelet would report), guarded by a budget.
    for name in ["a", "b"] {
        let mut running = pod(&cluster, name);
        running["status"]["phase"] = json!("Running");
        let put = put_json(
            &cluster,
            &format!("/api/v1/namespaces/{NS}/pods/{name}/status"),
            &running,
        );
        assert_eq!(put.code, 200, "{}", put.text);
    }
    cluster
        .kubectl(&[
            "create",
            "pdb",
            "-n",
            NS,
            "web",
            "--selector=app=web",
            "--min-available=1",
        ])
        .ok();
    let evict = |name: &str| {
        post_as(
            &cluster,
            None,
            &format!("/api/v1/namespaces/{NS}/pods/{name}/eviction"),
            &json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}),
        )
    };
    // Not yet computed by a disruption controller: kube's 429.
    // A ServiceAccount of the namespace, without a grant, is refused.
    cluster
        .kubectl(&["create", "serviceaccount", "-n", NS, "app"])
        .ok();
    let token = cluster.kubectl(&["create", "token", "-n", NS, "app"]);
    let token = token.ok().trim().to_string();
    let refused = cluster.curl(
        As::Token(&token),
        "POST",
        &format!("/api/v1/namespaces/{NS}/pods/a/eviction"),
        &["Content-Type: application/json"],
        Some(json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": NS}}).to_string().as_bytes()),
    );
    assert_eq!(refused.code, 403, "{}", refused.text);
    assert_eq!(
        refused.json["message"],
        "pods \"a\" is forbidden: User \"system:serviceaccount:scheduling:app\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"scheduling\""
    );
    cluster.kubectl(&["get", "pod", "-n", NS, "a"]).ok();
    let early = evict("a");
    assert_eq!(early.code, 429, "{}", early.text);
    assert_eq!(
        early.json["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(
        early.json["details"]["causes"][0]["message"],
        "The disruption budget web is still being processed by the server."
    );
    // The budget allows one disruption (as its controller would compute).
    let mut budget: Value = serde_json::from_str(
        cluster
            .kubectl(&["get", "pdb", "-n", NS, "web", "-o", "json"])
            .ok(),
    )
    .expect("the budget");
    budget["status"] = json!({"observedGeneration": budget["metadata"]["generation"], "disruptionsAllowed": 1,
        "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2});
    let put = put_json(
        &cluster,
        &format!("/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/web/status"),
        &budget,
    );
    assert_eq!(put.code, 200, "{}", put.text);
    let first = evict("a");
    assert_eq!(first.code, 201, "{}", first.text);
    assert_eq!(first.json["status"], "Success");
    assert!(
        !cluster
            .kubectl(&["get", "pod", "-n", NS, "a"])
            .stderr
            .is_empty()
    );
    let spent: Value = serde_json::from_str(
        cluster
            .kubectl(&["get", "pdb", "-n", NS, "web", "-o", "json"])
            .ok(),
    )
    .expect("the budget");
    assert_eq!(spent["status"]["disruptionsAllowed"], 0, "{spent}");
    assert!(spent["status"]["disruptedPods"]["a"].is_string(), "{spent}");
    let second = evict("b");
    assert_eq!(second.code, 429, "{}", second.text);
    assert_eq!(
        second.json["details"]["causes"][0]["message"],
        "The disruption budget web needs 1 healthy pods and has 2 currently"
    );
    // kubectl drain: cordons the node, evicts the pod without a budget and
    // stops at the one its budget keeps.
    let drained = cluster.kubectl(&["drain", "node-1", "--force", "--timeout=5s"]);
    assert!(drained.stdout.contains("cordoned"), "{drained:?}");
    assert!(
        drained.stdout.contains("evicting pod scheduling/loose")
            || drained.stderr.contains("evicting pod scheduling/loose"),
        "{drained:?}"
    );
    assert!(
        drained
            .stderr
            .contains("Cannot evict pod as it would violate the pod's disruption budget"),
        "{drained:?}"
    );
    assert!(
        !cluster
            .kubectl(&["get", "pod", "-n", NS, "loose"])
            .stderr
            .is_empty()
    );
    cluster.kubectl(&["get", "pod", "-n", NS, "b"]).ok();
    let unschedulable = cluster.kubectl(&[
        "get",
        "node",
        "node-1",
        "-o",
        "jsonpath={.spec.unschedulable}",
    ]);
    assert_eq!(unschedulable.ok(), "true");
}

#[test]
fn an_autoscaler_reads_and_writes_in_both_autoscaling_versions() {
    let cluster = Cluster::start();
    cluster.kubectl(&["create", "namespace", NS]).ok();
    let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}});
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &v1.to_string())
        .ok();
    let get = |version: &str| -> Value {
        let answer = cluster.curl(
            As::Admin,
            "GET",
            &format!("/apis/autoscaling/{version}/namespaces/{NS}/horizontalpodautoscalers/web"),
            &[],
            None,
        );
        assert_eq!(answer.code, 200, "{}", answer.text);
        answer.json
    };
    let as_v2 = get("v2");
    assert_eq!(as_v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        as_v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}])
    );
    // v2 defaults apply to what v1 wrote.
    assert_eq!(as_v2["spec"]["minReplicas"], 2);
    // A v2 write of what v1 cannot say reads back whole through v1.
    let mut more = as_v2.clone();
    more["spec"]["metrics"]
        .as_array_mut()
        .expect("metrics")
        .push(json!({"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}}));
    more["spec"]["behavior"] = json!({"scaleDown": {"stabilizationWindowSeconds": 60}});
    let put = put_json(
        &cluster,
        &format!("/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers/web"),
        &more,
    );
    assert_eq!(put.code, 200, "{}", put.text);
    let as_v1 = get("v1");
    assert_eq!(as_v1["apiVersion"], "autoscaling/v1");
    assert_eq!(as_v1["spec"]["targetCPUUtilizationPercentage"], 60);
    let kept = as_v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"]
        .as_str()
        .unwrap_or_default();
    assert!(kept.contains("memory"), "{as_v1}");
    // Written back through v1 unchanged, v2 still has both metrics and the behavior.
    let put = put_json(
        &cluster,
        &format!("/apis/autoscaling/v1/namespaces/{NS}/horizontalpodautoscalers/web"),
        &as_v1,
    );
    assert_eq!(put.code, 200, "{}", put.text);
    let again = get("v2");
    assert_eq!(
        again["spec"]["metrics"].as_array().map(Vec::len),
        Some(2),
        "{again}"
    );
    assert_eq!(
        again["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        60
    );
    assert!(
        again["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"].is_null(),
        "{again}"
    );
    // kubectl reads it through either version; v1 refuses in kube's words.
    let table = cluster.kubectl(&["get", "hpa.v1.autoscaling", "-n", NS]);
    assert!(table.ok().contains("Deployment/web"), "{table:?}");
    let bad = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "bad", "namespace": NS},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 0}});
    let refused = cluster.kubectl_stdin(&["create", "-f", "-"], &bad.to_string());
    assert_ne!(refused.code, 0);
    assert!(
        refused
            .stderr
            .contains("The HorizontalPodAutoscaler \"bad\" is invalid")
            && refused
                .stderr
                .contains("spec.maxReplicas: Invalid value: 0: must be greater than 0"),
        "{refused:?}"
    );
    // Discovery serves both versions, v2 preferred.
    let group = cluster.curl(As::Admin, "GET", "/apis/autoscaling", &[], None);
    assert_eq!(
        group.json["preferredVersion"]["version"], "v2",
        "{}",
        group.text
    );
    let versions: Vec<&str> = group.json["versions"]
        .as_array()
        .map(|v| v.iter().filter_map(|v| v["version"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(versions, ["v2", "v1"]);
}
