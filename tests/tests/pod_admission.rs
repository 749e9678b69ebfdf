//! kube's ServiceAccount, Priority, DefaultTolerationSeconds and
//! DefaultStorageClass admission through the front door, with kubectl: the
//! `default` account and its projected token volume mounted in every
//! container, opting out, a missing account refused in kube's words (also
//! for a non-admin), a pod created right after its namespace; priority from
//! a PriorityClass or the global default, unknown classes and mismatched
//! priorities refused, one global default only, the system classes; the
//! not-ready/unreachable tolerations; a claim's default StorageClass.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tests::{Cluster, Run, eventually};

const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A pod `name` with one container, `spec` merged into its spec.
fn pod(name: &str, spec: Value) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}});
    if let (Some(into), Value::Object(extra)) = (pod["spec"].as_object_mut(), spec) {
        into.extend(extra);
    }
    pod
}

/// Where [`create`] takes `object` from with `kubeconfig` (a file), or
/// without (stdin), as kubectl names it in errors.
fn source(cluster: &Cluster, kubeconfig: Option<&Path>, object: &Value) -> String {
    match kubeconfig {
        None => "STDIN".into(),
        Some(_) => {
            let name = object["metadata"]["name"].as_str().unwrap_or("object");
            cluster
                .dir
                .join(format!("{name}.json"))
                .display()
                .to_string()
        }
    }
}

/// `kubectl create -o json` of `object` in `namespace`: from stdin as the
/// cluster admin, or from a file with `kubeconfig`.
fn create(cluster: &Cluster, kubeconfig: Option<&Path>, namespace: &str, object: &Value) -> Run {
    let from = source(cluster, kubeconfig, object);
    let args = ["create", "-n", namespace, "-o", "json", "-f"];
    match kubeconfig {
        None => cluster.kubectl_stdin(&[&args[..], &["-"]].concat(), &object.to_string()),
        Some(config) => {
            std::fs::write(&from, object.to_string()).expect("writing the object");
            cluster.kubectl_with(config, &[&args[..], &[from.as_str()]].concat())
        }
    }
}

/// Creates `object` (a `resource`), as the admin or with `kubeconfig`, and
/// checks kubectl prints kube's refusal `why`, and nothing is stored.
fn assert_refused(
    cluster: &Cluster,
    kubeconfig: Option<&Path>,
    namespace: &str,
    resource: &str,
    object: &Value,
    why: &str,
) {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let run = create(cluster, kubeconfig, namespace, object);
    let from = source(cluster, kubeconfig, object);
    assert_eq!(
        run.err().trim(),
        format!(
            "Error from server (Forbidden): error when creating \"{from}\": {resource} \"{name}\" is forbidden: {why}"
        )
    );
    let names = cluster.kubectl(&["get", resource, "-n", namespace, "-o", "name"]);
    assert!(
        !names.ok().lines().any(|l| l.ends_with(&format!("/{name}"))),
        "{name} was stored"
    );
}

/// Checks the pod carries the token volume, mounted read-only in every
/// container and init container.
fn assert_token_mounted(pod: &Value) {
    let volumes = pod["spec"]["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(volumes.len(), 1, "{pod}");
    let name = volumes[0]["name"].as_str().unwrap_or_default();
    let suffix = name.strip_prefix("kube-api-access-").unwrap_or_default();
    assert!(
        suffix.len() == 5
            && suffix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
        "{name}"
    );
    assert_eq!(
        volumes[0],
        json!({"name": name, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]}})
    );
    let mount = json!({"name": name, "readOnly": true, "mountPath": TOKEN_PATH});
    for list in ["containers", "initContainers"] {
        for container in pod["spec"][list].as_array().into_iter().flatten() {
            assert_eq!(
                container["volumeMounts"],
                json!([mount]),
                "{list}: {container}"
            );
        }
    }
}

const DEFAULT_TOLERATIONS: &str = r#"[
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
]"#;

#[test]
fn pods_run_as_a_service_account_with_its_token_mounted_and_default_tolerations() {
    let cluster = Cluster::start();

    // A pod created right after its namespace waits for the `default` account.
    cluster.kubectl(&["create", "namespace", "apps"]).ok();
    let first = pod(
        "first",
        json!({"containers": [{"name": "a", "image": "nginx:1.27"}, {"name": "b", "image": "nginx:1.27"}],
            "initContainers": [{"name": "init", "image": "busybox:1.36"}]}),
    );
    let created = create(&cluster, None, "apps", &first).json();
    assert_eq!(created["spec"]["serviceAccountName"], "default");
    assert_eq!(created["spec"]["serviceAccount"], "default");
    assert_token_mounted(&created);
    // What is stored is what was answered.
    let stored = cluster
        .kubectl(&["get", "pod", "first", "-n", "apps", "-o", "json"])
        .json();
    assert_eq!(stored["spec"], created["spec"]);
    let tolerations: Value = serde_json::from_str(DEFAULT_TOLERATIONS).unwrap_or_default();
    assert_eq!(stored["spec"]["tolerations"], tolerations);

    // A toleration of its own is kept; only the missing one is added.
    let tolerant = pod(
        "tolerant",
        json!({"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]}),
    );
    let tolerant = create(&cluster, None, "apps", &tolerant).json();
    assert_eq!(
        tolerant["spec"]["tolerations"],
        json!([
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ])
    );

    // The pod, or its account, may opt out of the token.
    let opted_out = create(
        &cluster,
        None,
        "apps",
        &pod("opted-out", json!({"automountServiceAccountToken": false})),
    )
    .json();
    assert_eq!(opted_out["spec"]["serviceAccountName"], "default");
    assert!(opted_out["spec"].get("volumes").is_none(), "{opted_out}");
    assert!(
        opted_out["spec"]["containers"][0]
            .get("volumeMounts")
            .is_none(),
        "{opted_out}"
    );
    let robot = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"},
        "automountServiceAccountToken": false, "imagePullSecrets": [{"name": "registry"}]});
    create(&cluster, None, "apps", &robot).ok();
    let by_robot = create(
        &cluster,
        None,
        "apps",
        &pod("by-robot", json!({"serviceAccountName": "robot"})),
    )
    .json();
    assert_eq!(by_robot["spec"]["serviceAccount"], "robot");
    assert!(by_robot["spec"].get("volumes").is_none(), "{by_robot}");
    assert_eq!(
        by_robot["spec"]["imagePullSecrets"],
        json!([{"name": "registry"}])
    );
    // ... and the pod's choice wins over the account's.
    let opted_in = create(
        &cluster,
        None,
        "apps",
        &pod(
            "opted-in",
            json!({"serviceAccountName": "robot", "automountServiceAccountToken": true}),
        ),
    )
    .json();
    assert_token_mounted(&opted_in);

    // A pod in a namespace that does not exist is refused for that, first.
    let nowhere = create(&cluster, None, "nowhere", &pod("lost", json!({})));
    assert_eq!(
        nowhere.err().trim(),
        "Error from server (NotFound): error when creating \"STDIN\": namespaces \"nowhere\" not found"
    );

    // An account that does not exist is refused, in kube's words.
    assert_refused(
        &cluster,
        None,
        "apps",
        "pods",
        &pod("haunted", json!({"serviceAccountName": "ghost"})),
        "error looking up service account apps/ghost: serviceaccount \"ghost\" not found",
    );
}

#[test]
fn a_service_account_creating_pods_gets_the_same_admission() {
    let cluster = Cluster::start();
    let token = cluster.service_account_token("deployer");
    cluster
        .kubectl(&[
            "create",
            "role",
            "pod-maker",
            "--verb=create,get,list",
            "--resource=pods",
        ])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "rolebinding",
            "deployer-pods",
            "--role=pod-maker",
            "--serviceaccount=default:deployer",
        ])
        .ok();
    let kubeconfig = cluster.token_kubeconfig("deployer", &token, "default");

    // RBAC lets it in once the binding is seen; admission still applies.
    let mut made = None;
    assert!(eventually(Duration::from_secs(10), || {
        let run = create(
            &cluster,
            Some(&kubeconfig),
            "default",
            &pod("by-deployer", json!({})),
        );
        made = (run.code == 0).then(|| run.json());
        made.is_some() || !run.stderr.contains("cannot create resource")
    }));
    let made = made.expect("the service account may create pods");
    assert_eq!(made["spec"]["serviceAccountName"], "default");
    assert_token_mounted(&made);
    assert_eq!(made["spec"]["priority"], 0);

    // It is refused a missing account and an unknown class as the admin is.
    assert_refused(
        &cluster,
        Some(&kubeconfig),
        "default",
        "pods",
        &pod("haunted", json!({"serviceAccountName": "ghost"})),
        "error looking up service account default/ghost: serviceaccount \"ghost\" not found",
    );
    assert_refused(
        &cluster,
        Some(&kubeconfig),
        "default",
        "pods",
        &pod("classless", json!({"priorityClassName": "nope"})),
        "no PriorityClass with name nope was found",
    );
    // It may not make PriorityClasses to get around that.
    let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "nope"}, "value": 1});
    let denied = create(&cluster, Some(&kubeconfig), "default", &class);
    let from = source(&cluster, Some(&kubeconfig), &class);
    assert_eq!(
        denied.err().trim(),
        format!(
            "Error from server (Forbidden): error when creating \"{from}\": priorityclasses.scheduling.k8s.io is forbidden: User \"system:serviceaccount:default:deployer\" cannot create resource \"priorityclasses\" in API group \"scheduling.k8s.io\" at the cluster scope"
        )
    );
}

#[test]
fn priority_classes_and_default_storage_classes_are_applied() {
    let cluster = Cluster::start();

    // The system classes exist from the start, as kube creates them.
    let node_critical = cluster
        .kubectl(&["get", "priorityclass", "system-node-critical", "-o", "json"])
        .json();
    assert_eq!(node_critical["value"], 2_000_001_000);
    assert_eq!(
        node_critical["description"],
        "Used for system critical pods that must not be moved from their current node."
    );
    assert_eq!(node_critical["preemptionPolicy"], "PreemptLowerPriority");
    let critical = create(
        &cluster,
        None,
        "kube-system",
        &pod(
            "critical",
            json!({"priorityClassName": "system-cluster-critical"}),
        ),
    )
    .json();
    assert_eq!(critical["spec"]["priority"], 2_000_000_000);

    // Without a default class a pod has priority 0 and no class.
    let plain = create(&cluster, None, "default", &pod("plain", json!({}))).json();
    assert_eq!(plain["spec"]["priority"], 0);
    assert_eq!(plain["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    assert!(plain["spec"].get("priorityClassName").is_none(), "{plain}");

    cluster
        .kubectl(&[
            "create",
            "priorityclass",
            "high",
            "--value=1000",
            "--preemption-policy=Never",
        ])
        .ok();
    let high = create(
        &cluster,
        None,
        "default",
        &pod("important", json!({"priorityClassName": "high"})),
    )
    .json();
    assert_eq!(high["spec"]["priority"], 1000);
    assert_eq!(high["spec"]["preemptionPolicy"], "Never");
    assert_eq!(
        cluster
            .kubectl(&["get", "pod", "important", "-o", "jsonpath={.spec.priority}"])
            .ok(),
        "1000"
    );

    assert_refused(
        &cluster,
        None,
        "default",
        "pods",
        &pod("unknown", json!({"priorityClassName": "nope"})),
        "no PriorityClass with name nope was found",
    );
    assert_refused(
        &cluster,
        None,
        "default",
        "pods",
        &pod("lying", json!({"priorityClassName": "high", "priority": 5})),
        "the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name",
    );
    assert_refused(
        &cluster,
        None,
        "default",
        "pods",
        &pod(
            "policy",
            json!({"priorityClassName": "high", "preemptionPolicy": "PreemptLowerPriority"}),
        ),
        "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name",
    );

    // A global default applies to pods without a class; only one may exist.
    cluster
        .kubectl(&[
            "create",
            "priorityclass",
            "everyone",
            "--value=7",
            "--global-default",
        ])
        .ok();
    let dry = [
        "create",
        "--dry-run=server",
        "-o",
        "jsonpath={.spec.priority}",
        "-f",
        "-",
    ];
    let defaulted = pod("defaulted", json!({}));
    assert!(eventually(Duration::from_secs(5), || {
        cluster.kubectl_stdin(&dry, &defaulted.to_string()).stdout == "7"
    }));
    let defaulted = create(&cluster, None, "default", &defaulted).json();
    assert_eq!(defaulted["spec"]["priorityClassName"], "everyone");
    assert_eq!(defaulted["spec"]["priority"], 7);
    let second = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "second"},
        "value": 3, "globalDefault": true});
    assert_refused(
        &cluster,
        None,
        "default",
        "priorityclasses.scheduling.k8s.io",
        &second,
        "PriorityClass everyone is already marked as default. Only one default can exist",
    );
    // The default itself may be updated.
    cluster
        .kubectl(&["label", "priorityclass", "everyone", "tier=base"])
        .ok();

    // A claim without a class gets the default StorageClass; "" is a choice.
    let claim = |name: &str, class: Option<&str>| {
        let mut claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        if let Some(class) = class {
            claim["spec"]["storageClassName"] = json!(class);
        }
        claim
    };
    let before = create(&cluster, None, "default", &claim("before", None)).json();
    assert!(before["spec"].get("storageClassName").is_none(), "{before}");
    let fast = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "example.com/fast"});
    create(&cluster, None, "default", &fast).ok();
    let unnamed = claim("unnamed", None);
    let dry = [
        "create",
        "--dry-run=server",
        "-o",
        "jsonpath={.spec.storageClassName}",
        "-f",
        "-",
    ];
    assert!(eventually(Duration::from_secs(5), || {
        cluster.kubectl_stdin(&dry, &unnamed.to_string()).stdout == "fast"
    }));
    let unnamed = create(&cluster, None, "default", &unnamed).json();
    assert_eq!(unnamed["spec"]["storageClassName"], "fast");
    let empty = create(&cluster, None, "default", &claim("empty", Some(""))).json();
    assert_eq!(empty["spec"]["storageClassName"], "");
    let named = create(&cluster, None, "default", &claim("named", Some("slow"))).json();
    assert_eq!(named["spec"]["storageClassName"], "slow");
    assert_eq!(
        cluster
            .kubectl(&[
                "get",
                "pvc",
                "unnamed",
                "-o",
                "jsonpath={.spec.storageClassName}"
            ])
            .ok(),
        "fast"
    );
}

#[test]
fn the_writer_owns_what_it_sent_not_what_admission_added() {
    let cluster = Cluster::start();
    let file = cluster.dir.join("web.json");
    std::fs::write(&file, pod("web", json!({})).to_string()).expect("writing the pod");
    let file = file.display().to_string();
    cluster.kubectl(&["apply", "-f", &file]).ok();
    let created = cluster
        .kubectl(&["get", "pod", "web", "--show-managed-fields", "-o", "json"])
        .json();
    // Admission added the account, its token volume, tolerations and priority...
    assert_eq!(created["spec"]["serviceAccountName"], "default");
    assert_token_mounted(&created);
    assert!(created["spec"]["tolerations"].is_array());
    assert_eq!(created["spec"]["priority"], 0);
    // ...which the writer does not own: kube records what was sent first.
    let entries = created["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields");
    let applier = entries
        .iter()
        .find(|e| e["manager"] == "kubectl-client-side-apply")
        .expect("the client-side applier's entry");
    let spec = &applier["fieldsV1"]["f:spec"];
    assert!(spec["f:containers"].is_object(), "{applier}");
    for added in [
        "f:serviceAccountName",
        "f:serviceAccount",
        "f:volumes",
        "f:tolerations",
        "f:priority",
        "f:preemptionPolicy",
    ] {
        assert!(
            spec.get(added).is_none(),
            "{added} owned by the applier: {applier}"
        );
    }
    // So moving to server-side apply changes nothing (kube's 200).
    let moved = cluster.kubectl(&["apply", "--server-side", "-f", &file]);
    assert_eq!(moved.ok().trim(), "pod/web serverside-applied");
    let after = cluster.kubectl(&["get", "pod", "web", "-o", "json"]).json();
    assert_eq!(after["spec"], created["spec"]);
}
