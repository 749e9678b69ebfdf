//! The Kubernetes manifests (`deploy/kubernetes`): a copy of them with a
//! fresh pki from `kubechain certs`, rendered by kubectl's kustomize (the
//! base and the `dev` and `external-etcd` overlays), checked object by
//! object (probes, requests and limits, security settings, a
//! PodDisruptionBudget and a HorizontalPodAutoscaler per Deployment in the
//! base and none in dev, one replica of everything in dev, each Secret
//! holding exactly its component's files and no CA key, who may reach each
//! port under the NetworkPolicies, where the servers find etcd), then
//! applied with `kubectl apply --dry-run=server` to a real kubechain,
//! whose validation (kube's) must accept every object and create none. One
//! cluster; the etcd certificate check needs none.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use base64::Engine;
use serde_json::Value;
use tests::{Cluster, bin_dir, workspace};

/// The namespace the base sets.
const NAMESPACE: &str = "kubechain";

/// The label every component's pods carry, and the policies select by.
const NAME_LABEL: &str = "app.kubernetes.io/name";

/// The kustomizations, relative to the copy of `deploy/kubernetes`.
const BASE: &str = "base";
const DEV: &str = "overlays/dev";
const EXTERNAL_ETCD: &str = "overlays/external-etcd";

/// Each Deployment and the port of its plain-HTTP health and metrics
/// listener (`KUBECHAIN_METRICS_ADDRESS`), which its probes must use.
const DEPLOYMENTS: [(&str, u64); 4] = [
    ("aggregator", 6453),
    ("core-server", 7453),
    ("extension-server", 7454),
    ("metrics-server", 4453),
];

/// The servers that store in etcd, and so read `KUBECHAIN_ETCD_SERVERS`.
const ETCD_CLIENTS: [&str; 3] = ["aggregator", "core-server", "extension-server"];

/// What each workload's Secret must hold: the files the component mounts in
/// `deploy/docker-compose.yml` (the addons Job: the admin's credentials).
fn secret_files() -> Vec<(&'static str, &'static str, &'static [&'static str])> {
    tests::SERVER_FILES
        .iter()
        .map(|(server, files)| ("Deployment", *server, *files))
        .chain([
            (
                "StatefulSet",
                "etcd",
                &["etcd.crt", "etcd.key", "internal-ca.crt"][..],
            ),
            ("Job", "addons", tests::ADDONS_FILES),
        ])
        .collect()
}

/// Who may reach a component's port under the NetworkPolicies: the
/// components (by name label) allowed, `*` for every source; none for a
/// port no rule opens.
const REACHABLE_FROM: [(&str, u64, &[&str]); 13] = [
    ("aggregator", 6443, &["*"]),
    ("aggregator", 6453, &["*"]),
    ("core-server", 7443, &["aggregator"]),
    ("core-server", 7453, &["*"]),
    ("core-server", 8080, &[]),
    ("extension-server", 7444, &["core-server"]),
    ("extension-server", 7454, &["*"]),
    ("metrics-server", 4443, &["aggregator"]),
    ("metrics-server", 4453, &["*"]),
    (
        "etcd",
        2379,
        &["aggregator", "core-server", "extension-server", "etcd"],
    ),
    ("etcd", 2380, &["etcd"]),
    ("etcd", 2381, &["*"]),
    ("etcd", 7443, &[]),
];

/// A copy of `deploy/kubernetes` with its own pki, removed on drop.
struct Manifests {
    dir: PathBuf,
}

impl Manifests {
    /// Copies the manifests (not a `base/pki` a user generated there) and
    /// writes a pki with `kubechain certs`, as the README says to.
    fn new(tag: &str) -> Manifests {
        let dir = std::env::temp_dir().join(format!(
            "kubechain-k8s-manifests-{}-{tag}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        copy_tree(&workspace().join("deploy/kubernetes"), &dir);
        let pki = dir.join("base/pki");
        let out = Command::new(bin_dir().join("kubechain"))
            .args(["certs", "--dir"])
            .arg(&pki)
            .args(["--hosts", "aggregator.kubechain.svc"])
            .args(["--etcd-hosts", "*.etcd.kubechain.svc"])
            .output()
            .expect("the kubechain binary (cargo build --workspace --bins)");
        assert!(
            out.status.success(),
            "kubechain certs failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Manifests { dir }
    }

    /// The directory of a kustomization (`base`, `overlays/dev`).
    fn path(&self, kustomization: &str) -> String {
        self.dir.join(kustomization).display().to_string()
    }

    /// A pki file's bytes.
    fn pki_file(&self, name: &str) -> Vec<u8> {
        let path = self.dir.join("base/pki").join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
    }

    /// `kubectl kustomize DIR`: the rendered YAML; panics if it fails.
    fn kustomize(&self, kustomization: &str) -> String {
        let out = Command::new("kubectl")
            .args(["kustomize", &self.path(kustomization)])
            .output()
            .expect("kubectl on PATH");
        assert!(
            out.status.success(),
            "kubectl kustomize {kustomization} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 YAML")
    }
}

impl Drop for Manifests {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Copies a directory tree, leaving out any `pki` directory (a user's
/// certificates and CA keys stay where they are).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("creating the copy");
    for entry in std::fs::read_dir(from).expect("reading deploy/kubernetes") {
        let entry = entry.expect("a directory entry");
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().expect("a file type").is_dir() {
            if entry.file_name() != "pki" {
                copy_tree(&source, &target);
            }
        } else {
            std::fs::copy(&source, &target).expect("copying a manifest");
        }
    }
}

/// The objects of kubectl's JSON output: a stream of objects, or Lists.
fn parse_objects(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map(|v| v.unwrap_or_else(|e| panic!("kubectl's JSON ({e}): {text}")))
        .flat_map(|v| match v["items"].as_array() {
            Some(items) if v["kind"] == "List" => items.clone(),
            _ => vec![v],
        })
        .collect()
}

fn kind(obj: &Value) -> &str {
    obj["kind"].as_str().unwrap_or_default()
}

fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

fn of_kind<'a>(objects: &'a [Value], wanted: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    objects.iter().filter(move |o| kind(o) == wanted)
}

fn find<'a>(objects: &'a [Value], wanted: &str, named: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| kind(o) == wanted && name(o) == named)
}

fn get<'a>(objects: &'a [Value], wanted: &str, named: &str, variant: &str) -> &'a Value {
    find(objects, wanted, named).unwrap_or_else(|| panic!("{variant}: no {wanted} {named}"))
}

fn array(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The pod spec of a Deployment, StatefulSet or Job.
fn pod_spec(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]
}

/// Every container of a pod spec, init containers included.
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    array(&spec["initContainers"])
        .iter()
        .chain(array(&spec["containers"]))
}

/// A container's environment variable set by value.
fn env_value<'a>(container: &'a Value, var: &str) -> Option<&'a str> {
    array(&container["env"])
        .iter()
        .find(|e| e["name"] == var)
        .and_then(|e| e["value"].as_str())
}

/// The value a container gets for `var`: set by value, from a ConfigMap
/// key, or from every key of a ConfigMap (`envFrom`).
fn env_resolved(objects: &[Value], container: &Value, var: &str) -> Option<String> {
    let config_map = |cm: &str, key: &str| {
        find(objects, "ConfigMap", cm)
            .and_then(|cm| cm["data"][key].as_str())
            .map(str::to_string)
    };
    if let Some(e) = array(&container["env"]).iter().find(|e| e["name"] == var) {
        if let Some(value) = e["value"].as_str() {
            return Some(value.to_string());
        }
        let key_ref = &e["valueFrom"]["configMapKeyRef"];
        return config_map(key_ref["name"].as_str()?, key_ref["key"].as_str()?);
    }
    array(&container["envFrom"])
        .iter()
        .filter_map(|from| from["configMapRef"]["name"].as_str())
        .find_map(|cm| config_map(cm, var))
}

/// The number of a container port (`port` is a number or a port's name).
fn port_number(container: &Value, port: &Value) -> Option<u64> {
    match port {
        Value::Number(n) => n.as_u64(),
        Value::String(named) => array(&container["ports"])
            .iter()
            .find(|p| p["name"] == named.as_str())
            .and_then(|p| p["containerPort"].as_u64()),
        _ => None,
    }
}

/// Whether a label selector with only `matchLabels` selects these labels.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector["matchExpressions"]
        .as_array()
        .is_none_or(Vec::is_empty)
        && selector["matchLabels"]
            .as_object()
            .is_none_or(|wanted| wanted.iter().all(|(k, v)| &labels[k] == v))
}

/// A quantity (`128Mi`, `1Gi`, `250m`, `2`) in its base unit.
fn quantity(value: &Value) -> f64 {
    let text = match value {
        Value::String(s) => s.as_str(),
        Value::Number(n) => return n.as_f64().unwrap_or(f64::NAN),
        _ => return f64::NAN,
    };
    let units = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("m", 0.001),
    ];
    for (suffix, factor) in units {
        if let Some(n) = text.strip_suffix(suffix) {
            return n.parse::<f64>().map_or(f64::NAN, |n| n * factor);
        }
    }
    text.parse().unwrap_or(f64::NAN)
}

/// Every namespaced object is in `kubechain`; no Namespace is rendered.
fn check_namespace(objects: &[Value], variant: &str) {
    assert!(!objects.is_empty(), "{variant}: nothing rendered");
    for obj in objects {
        assert_ne!(kind(obj), "Namespace", "{variant}: renders a Namespace");
        assert_eq!(
            obj["metadata"]["namespace"],
            NAMESPACE,
            "{variant}: {} {} is not in {NAMESPACE}",
            kind(obj),
            name(obj)
        );
    }
}

/// Every container of every Deployment, StatefulSet and Job: its image,
/// requests and limits of CPU and memory, probes (not for a Job, which runs
/// to completion), and the security settings; Secrets mounted read-only,
/// mode 0400.
fn check_workloads(objects: &[Value], variant: &str) {
    let workloads: Vec<&Value> = objects
        .iter()
        .filter(|o| matches!(kind(o), "Deployment" | "StatefulSet" | "Job"))
        .collect();
    assert_eq!(
        workloads.len(),
        if variant == EXTERNAL_ETCD { 5 } else { 6 },
        "{variant}: the four Deployments, etcd's StatefulSet and the addons Job"
    );
    for workload in workloads {
        let who = format!("{variant}: {} {}", kind(workload), name(workload));
        let spec = pod_spec(workload);
        let pod = &spec["securityContext"];
        assert_eq!(pod["runAsNonRoot"], true, "{who}: runAsNonRoot");
        assert!(
            pod["runAsUser"].as_u64().is_some_and(|uid| uid > 0),
            "{who}: a numeric runAsUser other than root: {pod}"
        );
        assert_eq!(
            spec["automountServiceAccountToken"], false,
            "{who}: a service account token"
        );
        let secret_volumes: Vec<&str> = array(&spec["volumes"])
            .iter()
            .filter(|v| v["secret"].is_object())
            .map(|v| {
                assert_eq!(
                    v["secret"]["defaultMode"], 0o400,
                    "{who}: Secret volume {} not mode 0400",
                    v["name"]
                );
                v["name"].as_str().unwrap_or_default()
            })
            .collect();
        assert!(!secret_volumes.is_empty(), "{who}: mounts no Secret");
        let image = match kind(workload) {
            "Job" => "kubechain-cli:local".to_string(),
            _ => format!("kubechain-{}:local", name(workload)),
        };
        for c in containers(spec) {
            let who = format!("{who} container {}", c["name"]);
            assert_eq!(c["image"], image.as_str(), "{who}: image");
            assert_eq!(
                c["imagePullPolicy"], "IfNotPresent",
                "{who}: imagePullPolicy"
            );
            for section in ["requests", "limits"] {
                for resource in ["cpu", "memory"] {
                    let value = &c["resources"][section][resource];
                    assert!(
                        quantity(value) > 0.0,
                        "{who}: no {section}.{resource}: {}",
                        c["resources"]
                    );
                }
                assert!(
                    quantity(&c["resources"]["requests"]["memory"])
                        <= quantity(&c["resources"]["limits"]["memory"]),
                    "{who}: memory request above its limit"
                );
            }
            if kind(workload) != "Job" {
                for probe in ["readinessProbe", "livenessProbe"] {
                    let handlers = ["httpGet", "tcpSocket", "exec", "grpc"]
                        .iter()
                        .filter(|h| c[probe][**h].is_object())
                        .count();
                    assert_eq!(handlers, 1, "{who}: {probe} {}", c[probe]);
                    if let Some(port) = c[probe]["httpGet"]["port"]
                        .as_str()
                        .or(c[probe]["tcpSocket"]["port"].as_str())
                    {
                        assert!(
                            port_number(c, &Value::from(port)).is_some(),
                            "{who}: {probe} names port {port}, which the container lacks"
                        );
                    }
                }
            }
            let security = &c["securityContext"];
            assert_eq!(
                security["readOnlyRootFilesystem"], true,
                "{who}: readOnlyRootFilesystem"
            );
            assert_eq!(
                security["allowPrivilegeEscalation"], false,
                "{who}: allowPrivilegeEscalation"
            );
            assert!(
                array(&security["capabilities"]["drop"]).contains(&Value::from("ALL")),
                "{who}: capabilities not all dropped: {security}"
            );
            for mount in array(&c["volumeMounts"]) {
                if secret_volumes.contains(&mount["name"].as_str().unwrap_or_default()) {
                    assert_eq!(mount["readOnly"], true, "{who}: Secret mounted writable");
                }
            }
        }
    }
    // The servers' probes ask their health listener: /readyz and /livez on
    // the port of KUBECHAIN_METRICS_ADDRESS.
    for (deployment, port) in DEPLOYMENTS {
        let d = get(objects, "Deployment", deployment, variant);
        let c = &pod_spec(d)["containers"][0];
        let who = format!("{variant}: Deployment {deployment}");
        assert_eq!(
            env_value(c, "KUBECHAIN_METRICS_ADDRESS"),
            Some(format!("0.0.0.0:{port}").as_str()),
            "{who}: KUBECHAIN_METRICS_ADDRESS"
        );
        for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/livez")] {
            let get = &c[probe]["httpGet"];
            assert_eq!(get["path"], path, "{who}: {probe} path");
            assert_eq!(
                port_number(c, &get["port"]),
                Some(port),
                "{who}: {probe} port"
            );
        }
    }
}

/// The replicas a Deployment or StatefulSet asks for (kube's default 1).
fn replicas(workload: &Value) -> i64 {
    workload["spec"]["replicas"].as_i64().unwrap_or(1)
}

/// How many pods a drain may evict from `pods` under a PodDisruptionBudget.
fn disruptions_allowed(pdb: &Value, pods: i64) -> i64 {
    let spec = &pdb["spec"];
    match (
        spec["maxUnavailable"].as_i64(),
        spec["minAvailable"].as_i64(),
    ) {
        (Some(max), None) => max,
        (None, Some(min)) => pods - min,
        _ => panic!(
            "PodDisruptionBudget {}: one integer maxUnavailable or minAvailable: {spec}",
            name(pdb)
        ),
    }
}

/// The base: each Deployment runs 2 replicas, has one PodDisruptionBudget
/// that lets a drain take one pod, and one CPU HorizontalPodAutoscaler.
fn check_base_availability(objects: &[Value]) {
    for (deployment, _) in DEPLOYMENTS {
        let d = get(objects, "Deployment", deployment, BASE);
        assert!(
            replicas(d) >= 2,
            "base: Deployment {deployment} has one replica"
        );
        let labels = &d["spec"]["template"]["metadata"]["labels"];
        let budgets: Vec<&Value> = of_kind(objects, "PodDisruptionBudget")
            .filter(|p| selects(&p["spec"]["selector"], labels))
            .collect();
        assert_eq!(
            budgets.len(),
            1,
            "base: PodDisruptionBudgets of {deployment}"
        );
        assert!(
            disruptions_allowed(budgets[0], 2) >= 1,
            "base: {deployment}'s budget blocks draining one of 2 pods"
        );
        let autoscalers: Vec<&Value> = of_kind(objects, "HorizontalPodAutoscaler")
            .filter(|h| {
                let target = &h["spec"]["scaleTargetRef"];
                target["kind"] == "Deployment"
                    && target["apiVersion"] == "apps/v1"
                    && target["name"] == deployment
            })
            .collect();
        assert_eq!(
            autoscalers.len(),
            1,
            "base: HorizontalPodAutoscalers of {deployment}"
        );
        let hpa = autoscalers[0];
        assert_eq!(
            hpa["apiVersion"], "autoscaling/v2",
            "base: {deployment}'s autoscaler"
        );
        assert!(
            array(&hpa["spec"]["metrics"])
                .iter()
                .any(|m| m["type"] == "Resource"
                    && m["resource"]["name"] == "cpu"
                    && m["resource"]["target"]["type"] == "Utilization"),
            "base: {deployment}'s autoscaler does not scale on CPU utilization"
        );
        assert!(
            hpa["spec"]["minReplicas"].as_i64().unwrap_or(1) >= 2,
            "base: {deployment}'s autoscaler goes down to one replica"
        );
    }
    assert_eq!(
        of_kind(objects, "HorizontalPodAutoscaler").count(),
        DEPLOYMENTS.len(),
        "base: an autoscaler for something else"
    );
}

/// etcd: the headless Service that publishes members before they are ready,
/// and an initial cluster naming exactly the members `replicas` starts.
fn check_etcd(objects: &[Value], variant: &str) {
    let sts = get(objects, "StatefulSet", "etcd", variant);
    let service = get(objects, "Service", "etcd", variant);
    assert_eq!(
        service["spec"]["clusterIP"], "None",
        "{variant}: etcd's Service is not headless"
    );
    assert_eq!(
        service["spec"]["publishNotReadyAddresses"], true,
        "{variant}: etcd's Service hides members that are not ready yet"
    );
    assert_eq!(
        sts["spec"]["serviceName"], "etcd",
        "{variant}: etcd's serviceName"
    );
    assert!(
        !array(&sts["spec"]["volumeClaimTemplates"]).is_empty(),
        "{variant}: etcd keeps its data in no volume claim"
    );
    let c = &pod_spec(sts)["containers"][0];
    let args: Vec<&str> = array(&c["args"]).iter().filter_map(Value::as_str).collect();
    for flag in ["--client-cert-auth", "--peer-client-cert-auth"] {
        assert!(args.contains(&flag), "{variant}: etcd without {flag}");
    }
    let arg = |flag: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(flag))
            .unwrap_or_else(|| panic!("{variant}: etcd without {flag}"))
    };
    assert_eq!(
        arg("--trusted-ca-file="),
        "/pki/internal-ca.crt",
        "{variant}: etcd's client CA"
    );
    assert_eq!(
        arg("--peer-trusted-ca-file="),
        "/pki/internal-ca.crt",
        "{variant}: etcd's peer CA"
    );
    let mut initial = arg("--initial-cluster=").to_string();
    if let Some(var) = initial.strip_prefix("$(").and_then(|v| v.strip_suffix(')')) {
        initial = env_value(c, var)
            .unwrap_or_else(|| panic!("{variant}: etcd's --initial-cluster names ${var}, unset"))
            .to_string();
    }
    let members: Vec<String> = (0..replicas(sts))
        .map(|i| format!("etcd-{i}=https://etcd-{i}.etcd.kubechain.svc:2380"))
        .collect();
    assert_eq!(
        initial,
        members.join(","),
        "{variant}: etcd's initial cluster is not its {} members",
        replicas(sts)
    );
}

/// Each workload mounts one Secret, holding exactly its files (the bytes
/// of the pki's), and no Secret holds a CA key.
fn check_secrets(objects: &[Value], variant: &str, manifests: &Manifests) {
    for secret in of_kind(objects, "Secret") {
        for key in secret["data"]
            .as_object()
            .into_iter()
            .flat_map(|d| d.keys())
        {
            assert!(
                !key.ends_with("ca.key"),
                "{variant}: Secret {} holds the CA key {key}",
                name(secret)
            );
        }
    }
    for (workload_kind, workload, files) in secret_files() {
        if variant == EXTERNAL_ETCD && workload == "etcd" {
            continue;
        }
        let w = get(objects, workload_kind, workload, variant);
        let mounted: Vec<&str> = array(&pod_spec(w)["volumes"])
            .iter()
            .filter_map(|v| v["secret"]["secretName"].as_str())
            .collect();
        assert_eq!(
            mounted.len(),
            1,
            "{variant}: {workload}'s Secrets: {mounted:?}"
        );
        let secret = get(objects, "Secret", mounted[0], variant);
        let data = secret["data"]
            .as_object()
            .unwrap_or_else(|| panic!("{variant}: Secret {} has no data", mounted[0]));
        let keys: BTreeSet<&str> = data.keys().map(String::as_str).collect();
        let own_keys: BTreeSet<&str> = files
            .iter()
            .copied()
            .filter(|f| f.ends_with(".key"))
            .collect();
        let keys_held: BTreeSet<&str> = keys
            .iter()
            .copied()
            .filter(|k| k.ends_with(".key"))
            .collect();
        assert_eq!(
            keys_held, own_keys,
            "{variant}: private keys in {workload}'s Secret"
        );
        assert_eq!(
            keys,
            files.iter().copied().collect::<BTreeSet<_>>(),
            "{variant}: files in {workload}'s Secret"
        );
        for (file, encoded) in data {
            // kustomize wraps base64 at 70 columns; kube's decoder skips the newlines.
            let text: String = encoded
                .as_str()
                .unwrap_or_default()
                .chars()
                .filter(|c| !c.is_ascii_whitespace())
                .collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .unwrap_or_else(|e| panic!("{variant}: {workload}'s {file}: base64: {e}"));
            assert!(
                bytes == manifests.pki_file(file),
                "{variant}: {workload}'s {file} is not the pki's {file}"
            );
        }
    }
}

/// Who may reach `port` on the pods of `component` under the
/// NetworkPolicies selecting them: components by name label, `*` for any
/// source; every source when no policy selects the pods.
fn allowed_sources(objects: &[Value], component: &str, port: u64) -> BTreeSet<String> {
    let labels = serde_json::json!({ NAME_LABEL: component });
    let policies: Vec<&Value> = of_kind(objects, "NetworkPolicy")
        .filter(|p| selects(&p["spec"]["podSelector"], &labels))
        .filter(|p| {
            p["spec"]["policyTypes"]
                .as_array()
                .is_none_or(|types| types.contains(&Value::from("Ingress")))
        })
        .collect();
    if policies.is_empty() {
        return BTreeSet::from(["*".to_string()]);
    }
    let mut sources = BTreeSet::new();
    for rule in policies.iter().flat_map(|p| array(&p["spec"]["ingress"])) {
        let ports = array(&rule["ports"]);
        if !ports.is_empty() && !ports.iter().any(|p| p["port"].as_u64() == Some(port)) {
            continue;
        }
        let from = array(&rule["from"]);
        if from.is_empty() {
            sources.insert("*".to_string());
        }
        for peer in from {
            let only_pods = peer.as_object().is_some_and(|p| p.len() == 1)
                && peer["podSelector"]["matchExpressions"].is_null();
            match peer["podSelector"]["matchLabels"][NAME_LABEL].as_str() {
                Some(source) if only_pods => sources.insert(source.to_string()),
                _ => sources.insert(format!("other: {peer}")),
            };
        }
    }
    sources
}

fn check_network_policies(objects: &[Value], variant: &str) {
    for component in ["core-server", "extension-server", "metrics-server", "etcd"] {
        if variant == EXTERNAL_ETCD && component == "etcd" {
            continue;
        }
        assert!(
            find(objects, "NetworkPolicy", component).is_some(),
            "{variant}: no NetworkPolicy {component}"
        );
    }
    for (component, port, expected) in REACHABLE_FROM {
        if variant == EXTERNAL_ETCD && component == "etcd" {
            continue;
        }
        let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            allowed_sources(objects, component, port),
            expected,
            "{variant}: who may reach {component}:{port}"
        );
    }
}

/// Where each etcd client finds etcd; metrics-server never does.
fn etcd_servers(objects: &[Value], variant: &str) -> String {
    let mut found = BTreeSet::new();
    for deployment in ETCD_CLIENTS {
        let c = &pod_spec(get(objects, "Deployment", deployment, variant))["containers"][0];
        let servers = env_resolved(objects, c, "KUBECHAIN_ETCD_SERVERS")
            .unwrap_or_else(|| panic!("{variant}: {deployment} has no KUBECHAIN_ETCD_SERVERS"));
        found.insert(servers);
    }
    let metrics = &pod_spec(get(objects, "Deployment", "metrics-server", variant))["containers"][0];
    assert!(
        env_resolved(objects, metrics, "KUBECHAIN_ETCD_SERVERS").is_none(),
        "{variant}: metrics-server is told where etcd is"
    );
    assert_eq!(
        found.len(),
        1,
        "{variant}: the etcd clients disagree: {found:?}"
    );
    found.into_iter().next().unwrap_or_default()
}

#[test]
fn manifests_render_and_kubechain_accepts_them_in_a_server_side_dry_run() {
    let manifests = Manifests::new("dry-run");
    let variants = [BASE, DEV, EXTERNAL_ETCD];
    for variant in variants {
        manifests.kustomize(variant);
    }

    let cluster = Cluster::start();
    cluster.create_namespace(NAMESPACE);
    // The objects as rendered: a client-side dry run prints them as JSON.
    let rendered: BTreeMap<&str, Vec<Value>> = variants
        .iter()
        .map(|variant| {
            let path = manifests.path(variant);
            let run = cluster.kubectl(&["create", "--dry-run=client", "-o", "json", "-k", &path]);
            (*variant, parse_objects(run.ok()))
        })
        .collect();
    let (base, dev, external) = (&rendered[BASE], &rendered[DEV], &rendered[EXTERNAL_ETCD]);

    for (variant, objects) in &rendered {
        check_namespace(objects, variant);
        check_workloads(objects, variant);
        check_secrets(objects, variant, &manifests);
        check_network_policies(objects, variant);
        assert!(
            find(objects, "Service", "aggregator")
                .is_some_and(|s| array(&s["spec"]["ports"]).iter().any(|p| p["port"] == 6443)),
            "{variant}: no Service aggregator on 6443"
        );
    }

    // The base: highly available, etcd over its own members.
    check_base_availability(base);
    check_etcd(base, BASE);
    assert_eq!(
        replicas(get(base, "StatefulSet", "etcd", BASE)),
        3,
        "base: etcd members"
    );
    assert_eq!(
        etcd_servers(base, BASE),
        "https://etcd-0.etcd.kubechain.svc:2379,https://etcd-1.etcd.kubechain.svc:2379,https://etcd-2.etcd.kubechain.svc:2379",
        "base: the etcd URLs"
    );
    assert!(
        find(base, "PodDisruptionBudget", "etcd")
            .is_some_and(|pdb| disruptions_allowed(pdb, 3) == 1),
        "base: etcd's budget must let exactly one of three members go (the quorum stays)"
    );

    // dev: one of everything, no budgets or autoscalers, smaller requests.
    for workload in of_kind(dev, "Deployment").chain(of_kind(dev, "StatefulSet")) {
        assert_eq!(
            replicas(workload),
            1,
            "dev: {} {}",
            kind(workload),
            name(workload)
        );
        let base_workload = get(base, kind(workload), name(workload), BASE);
        for (c, base_c) in containers(pod_spec(workload)).zip(containers(pod_spec(base_workload))) {
            assert!(
                quantity(&c["resources"]["requests"]["memory"])
                    < quantity(&base_c["resources"]["requests"]["memory"]),
                "dev: {}'s memory request is not smaller than the base's",
                name(workload)
            );
        }
    }
    assert_eq!(
        of_kind(dev, "Deployment").count(),
        DEPLOYMENTS.len(),
        "dev: Deployments"
    );
    assert_eq!(
        of_kind(dev, "PodDisruptionBudget").count(),
        0,
        "dev: PodDisruptionBudgets"
    );
    assert_eq!(
        of_kind(dev, "HorizontalPodAutoscaler").count(),
        0,
        "dev: autoscalers"
    );
    check_etcd(dev, DEV);
    assert_eq!(
        etcd_servers(dev, DEV),
        etcd_servers(base, BASE),
        "dev: the etcd URLs"
    );

    // external-etcd: no etcd of its own; the URL changed in one place.
    for (wanted, named) in [
        ("StatefulSet", "etcd"),
        ("Service", "etcd"),
        ("PodDisruptionBudget", "etcd"),
        ("NetworkPolicy", "etcd"),
    ] {
        assert!(
            find(external, wanted, named).is_none(),
            "external-etcd: still has {wanted} {named}"
        );
    }
    assert!(
        !of_kind(external, "Secret").any(|s| s["data"]["etcd.key"].is_string()),
        "external-etcd: still holds etcd's key"
    );
    let external_servers = etcd_servers(external, EXTERNAL_ETCD);
    assert!(
        external_servers != etcd_servers(base, BASE) && !external_servers.contains(".etcd:"),
        "external-etcd: the servers still use the StatefulSet: {external_servers}"
    );
    assert_eq!(
        of_kind(external, "Deployment").count(),
        DEPLOYMENTS.len(),
        "external-etcd: Deployments"
    );

    // kubechain's validation (kube's) accepts every object, and a dry run
    // stores none of them.
    let mut refused = Vec::new();
    for variant in variants {
        let path = manifests.path(variant);
        let run = cluster.kubectl(&["apply", "--dry-run=server", "-o", "json", "-k", &path]);
        if run.code != 0 {
            refused.push(format!("{variant}:\n{}", run.stderr.trim()));
            continue;
        }
        let answered = parse_objects(&run.stdout);
        assert_eq!(
            answered.len(),
            rendered[variant].len(),
            "{variant}: the dry run answered for some objects only"
        );
        for obj in &answered {
            assert!(
                obj["metadata"]["uid"].is_string(),
                "{variant}: {} {} was not through the server",
                kind(obj),
                name(obj)
            );
        }
    }
    let stored = cluster.kubectl(&[
        "get",
        "deployments,statefulsets,services,secrets,configmaps,jobs,poddisruptionbudgets,\
         horizontalpodautoscalers,networkpolicies,persistentvolumeclaims",
        "-n",
        NAMESPACE,
        "-o",
        "name",
    ]);
    let stored: Vec<&str> = stored
        .ok()
        .lines()
        .filter(|l| *l != "configmap/kube-root-ca.crt")
        .collect();
    assert!(stored.is_empty(), "the dry runs stored objects: {stored:?}");
    assert!(
        refused.is_empty(),
        "kubechain refused the manifests in a server-side dry run:\n{}",
        refused.join("\n")
    );
}

/// The servers reach etcd at the URLs in `KUBECHAIN_ETCD_SERVERS` and verify
/// its certificate as rustls does (webpki: the internal CA, the host the
/// URL names), so the one certificate the members share must be valid for
/// every member's host.
#[test]
fn the_shared_etcd_certificate_is_valid_for_every_url_the_servers_dial() {
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

    let manifests = Manifests::new("etcd-certificate");
    let yaml = manifests.kustomize(BASE);
    let urls = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("KUBECHAIN_ETCD_SERVERS:"))
        .expect("KUBECHAIN_ETCD_SERVERS in the rendered base")
        .trim()
        .to_string();
    let pem = |file: &str| -> Vec<CertificateDer<'static>> {
        rustls_pemfile::certs(&mut manifests.pki_file(file).as_slice())
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let mut roots = rustls::RootCertStore::empty();
    for ca in pem("internal-ca.crt") {
        roots.add(ca).expect("the internal CA");
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .expect("a verifier");
    let chain = pem("etcd.crt");
    let mut invalid = Vec::new();
    for url in urls.split(',') {
        let host = url
            .strip_prefix("https://")
            .and_then(|rest| rest.rsplit_once(':'))
            .map(|(host, _)| host)
            .unwrap_or_else(|| panic!("not an https://host:port URL: {url}"));
        let server = ServerName::try_from(host.to_string()).expect("a DNS name");
        if let Err(e) =
            verifier.verify_server_cert(&chain[0], &chain[1..], &server, &[], UnixTime::now())
        {
            invalid.push(format!("{host}: {e}"));
        }
    }
    assert!(
        invalid.is_empty(),
        "etcd.crt (the certificate every member serves) is refused by the servers' TLS for: {}",
        invalid.join("; ")
    );
}
