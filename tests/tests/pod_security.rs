//! PodSecurity admission through the front door, with real kubectl: a
//! namespace's `pod-security.kubernetes.io/*` labels enforce (403 in kube's
//! words), warn (kubectl's `Warning:` lines) and, for workloads, only warn;
//! `baseline` lets through what only `restricted` refuses; tightening a
//! namespace warns about the pods already in it; bad labels are refused; a
//! ServiceAccount allowed to create pods is refused like the admin.

use tests::Cluster;

/// kube's refusal of [`privileged_pod`] by `restricted:latest`.
const RESTRICTED_REFUSAL: &str = r#"pods "priv" is forbidden: violates PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#;

/// The violations [`privileged_pod`] would have, as a warning.
const RESTRICTED_WARNING: &str = r#"Warning: would violate PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true), allowPrivilegeEscalation != false"#;

/// A pod `name` in `namespace` whose one container `c` runs privileged.
fn privileged_pod(namespace: &str, name: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "namespace": "{namespace}"}},
            "spec": {{"containers": [{{"name": "c", "image": "nginx", "securityContext": {{"privileged": true}}}}]}}}}"#
    )
}

/// A pod that meets `restricted`.
fn restricted_pod(namespace: &str, name: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "namespace": "{namespace}"}},
            "spec": {{"securityContext": {{"runAsNonRoot": true, "seccompProfile": {{"type": "RuntimeDefault"}}}},
                     "containers": [{{"name": "c", "image": "nginx", "securityContext": {{
                         "allowPrivilegeEscalation": false, "capabilities": {{"drop": ["ALL"]}}}}}}]}}}}"#
    )
}

/// A pod that meets `baseline` but not `restricted`.
fn baseline_pod(namespace: &str, name: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "namespace": "{namespace}"}},
            "spec": {{"containers": [{{"name": "c", "image": "nginx"}}]}}}}"#
    )
}

/// Creates `namespace` labelled with `labels` (`mode=level` pairs).
fn namespace(cluster: &Cluster, namespace: &str, labels: &[&str]) {
    cluster.kubectl(&["create", "namespace", namespace]).ok();
    if !labels.is_empty() {
        let mut args = vec!["label", "namespace", namespace];
        let full: Vec<String> = labels
            .iter()
            .map(|l| format!("pod-security.kubernetes.io/{l}"))
            .collect();
        args.extend(full.iter().map(String::as_str));
        cluster.kubectl(&args).ok();
    }
}

fn apply(cluster: &Cluster, manifest: &str) -> tests::Run {
    cluster.kubectl_stdin(&["apply", "-f", "-"], manifest)
}

#[test]
fn enforce_refuses_warn_warns_and_workloads_only_warn() {
    let cluster = Cluster::start();
    namespace(&cluster, "strict", &["enforce=restricted"]);

    let refused = apply(&cluster, &privileged_pod("strict", "priv"));
    assert_eq!(
        refused.err().trim(),
        format!(
            r#"Error from server (Forbidden): error when creating "STDIN": {RESTRICTED_REFUSAL}"#
        )
    );
    assert!(
        !refused.stderr.contains("Warning:"),
        "no warning beside a refusal: {}",
        refused.stderr
    );
    cluster
        .kubectl(&["get", "pod", "priv", "-n", "strict"])
        .err();
    // The decision is annotated for the audit event, as kube's plugin does.
    let log = std::fs::read_to_string(cluster.dir.join("logs/core-server.log")).unwrap_or_default();
    assert!(
        log.lines().any(|line| line.contains("admission annotation")
            && line.contains("name=\"priv\"")
            && line
                .contains("key=pod-security.kubernetes.io/enforce-policy value=restricted:latest")),
        "no enforce-policy annotation for priv"
    );
    let admitted = apply(&cluster, &restricted_pod("strict", "fine"));
    admitted.ok();
    assert!(!admitted.stderr.contains("Warning:"), "{}", admitted.stderr);
    // kubectl run --privileged is refused alike (its container is named after the pod).
    let run = cluster.kubectl(&[
        "run",
        "runner",
        "--image=nginx",
        "--privileged",
        "-n",
        "strict",
    ]);
    assert!(
        run.err().contains(
            &RESTRICTED_REFUSAL
                .replace(r#"pods "priv""#, r#"pods "runner""#)
                .replace(r#"container "c""#, r#"container "runner""#)
        ),
        "{}",
        run.stderr
    );

    // A workload's template is warned about (enforce implies warn), never refused.
    let deployment = r#"{"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "strict"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
                 "spec": {"containers": [{"name": "c", "image": "nginx", "securityContext": {"privileged": true}}]}}}}"#;
    let created = apply(&cluster, deployment);
    assert!(created.ok().contains("deployment.apps/web created"));
    assert!(
        created.stderr.contains(RESTRICTED_WARNING),
        "{}",
        created.stderr
    );

    // warn without enforce: created, with kubectl printing kube's warning.
    namespace(&cluster, "loose", &["warn=restricted"]);
    let warned = apply(&cluster, &privileged_pod("loose", "priv"));
    assert!(warned.ok().contains("pod/priv created"));
    let expected_warning = RESTRICTED_REFUSAL.replace(
        r#"pods "priv" is forbidden: violates"#,
        "Warning: would violate",
    );
    assert_eq!(warned.stderr.trim(), expected_warning);

    // Unlabelled namespaces are privileged: nothing is said.
    let quiet = apply(&cluster, &privileged_pod("default", "priv"));
    quiet.ok();
    assert_eq!(quiet.stderr, "");
}

#[test]
fn baseline_tightening_and_bad_labels() {
    let cluster = Cluster::start();
    namespace(&cluster, "base", &["enforce=baseline"]);
    let only_restricted = apply(&cluster, &baseline_pod("base", "plain"));
    only_restricted.ok();
    assert!(
        !only_restricted.stderr.contains("Warning:"),
        "{}",
        only_restricted.stderr
    );
    let host_path = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "host", "namespace": "base"},
        "spec": {"volumes": [{"name": "root", "hostPath": {"path": "/"}}],
                 "containers": [{"name": "c", "image": "nginx", "volumeMounts": [{"name": "root", "mountPath": "/host"}]}]}}"#;
    assert_eq!(
        apply(&cluster, host_path).err().trim(),
        r#"Error from server (Forbidden): error when creating "STDIN": pods "host" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "root")"#
    );
    assert!(
        apply(&cluster, &privileged_pod("base", "priv"))
            .err()
            .contains(r#"pods "priv" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#)
    );

    // Tightening a namespace warns about the pods already there (and still tightens it).
    namespace(&cluster, "later", &[]);
    apply(&cluster, &privileged_pod("later", "priv")).ok();
    apply(&cluster, &restricted_pod("later", "fine")).ok();
    let labelled = cluster.kubectl(&[
        "label",
        "namespace",
        "later",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    labelled.ok();
    assert_eq!(
        labelled.stderr.trim(),
        "Warning: existing pods in namespace \"later\" violate the new PodSecurity enforce level \"restricted:latest\"\n\
         Warning: priv: privileged, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"
    );
    assert!(
        apply(&cluster, &privileged_pod("later", "again"))
            .err()
            .contains("is forbidden: violates PodSecurity")
    );
    // The pod already there stays; an update that changes no image is not
    // judged, one that changes an image is.
    cluster
        .kubectl(&["label", "pod", "priv", "-n", "later", "touched=yes"])
        .ok();
    let image = cluster.kubectl(&["set", "image", "pod/priv", "c=nginx:2", "-n", "later"]);
    assert!(
        image.err().contains(
            r#"pods "priv" is forbidden: violates PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true)"#
        ),
        "{}",
        image.stderr
    );
    // Relaxing it again checks nothing.
    let relaxed = cluster.kubectl(&[
        "label",
        "--overwrite",
        "namespace",
        "later",
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    relaxed.ok();
    assert_eq!(relaxed.stderr, "");

    // Bad label values are refused as kube refuses them.
    let bad = cluster.kubectl(&[
        "label",
        "namespace",
        "later",
        "pod-security.kubernetes.io/warn=loud",
    ]);
    assert!(
        bad.err().contains(r#"Namespace "later" is invalid: metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "loud": must be one of privileged, baseline, restricted"#),
        "{}",
        bad.stderr
    );
    let odd = r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "odd",
        "labels": {"pod-security.kubernetes.io/enforce-version": "1.30"}}}"#;
    assert!(
        apply(&cluster, odd).err().contains(r#"metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "1.30": must be "latest" or "v1.x""#)
    );
    cluster.kubectl(&["get", "namespace", "odd"]).err();
}

#[test]
fn a_service_account_that_may_create_pods_is_refused_the_same_way() {
    let cluster = Cluster::start();
    namespace(&cluster, "strict", &["enforce=restricted"]);
    cluster
        .kubectl(&[
            "create",
            "role",
            "pod-maker",
            "--verb=create,get",
            "--resource=pods",
            "-n",
            "strict",
        ])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "rolebinding",
            "pod-maker",
            "--role=pod-maker",
            "--serviceaccount=default:maker",
            "-n",
            "strict",
        ])
        .ok();
    let token = cluster.service_account_token("maker");
    let kubeconfig = cluster.token_kubeconfig("maker", &token, "strict");
    let as_maker =
        |manifest: &str| cluster.kubectl_stdin_with(&kubeconfig, &["create", "-f", "-"], manifest);
    assert_eq!(
        as_maker(&privileged_pod("strict", "priv")).err().trim(),
        format!(
            r#"Error from server (Forbidden): error when creating "STDIN": {RESTRICTED_REFUSAL}"#
        )
    );
    as_maker(&restricted_pod("strict", "fine")).ok();
    // The pod was created by the service account, and only that one.
    assert_eq!(
        cluster
            .kubectl(&["get", "pods", "-n", "strict", "-o", "name"])
            .ok()
            .trim(),
        "pod/fine"
    );
}
