//! kube's root CA certificate publisher through the front door, with
//! kubectl: every namespace, the system ones and a new one, holds the
//! ConfigMap `kube-root-ca.crt` whose `ca.crt` is the CA the kubeconfig
//! trusts, with kube's description; deleted, it comes back; its data or
//! description edited, it is reset (other edits kept); a terminating
//! namespace does not get it back; and a non-admin reads it only when RBAC
//! allows it.

use std::time::Duration;

use base64::Engine;
use serde_json::Value;
use tests::{Cluster, ROOT_CA_CONFIG_MAP, eventually};

/// kube's description of the ConfigMap, word for word.
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// The CA the kubeconfig trusts (its certificate-authority-data), as PEM.
fn kubeconfig_ca(cluster: &Cluster) -> String {
    let data = cluster
        .kubectl(&[
            "config",
            "view",
            "--raw",
            "-o",
            "jsonpath={.clusters[0].cluster.certificate-authority-data}",
        ])
        .ok()
        .trim()
        .to_string();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64 certificate-authority-data");
    String::from_utf8(pem).expect("a PEM certificate")
}

/// The namespace's `kube-root-ca.crt`, if it has one.
fn root_ca(cluster: &Cluster, ns: &str) -> Option<Value> {
    let run = cluster.kubectl(&[
        "get",
        "configmap",
        ROOT_CA_CONFIG_MAP,
        "-n",
        ns,
        "-o",
        "json",
    ]);
    (run.code == 0).then(|| run.json())
}

/// Whether `cm` is what the publisher writes for `ca`.
fn published(cm: &Value, ca: &str) -> bool {
    cm["data"] == serde_json::json!({"ca.crt": ca})
        && cm["metadata"]["annotations"]["kubernetes.io/description"] == DESCRIPTION
}

/// Waits until the namespace's `kube-root-ca.crt` is published and
/// `accept` takes it; the ConfigMap then.
fn until_published(
    cluster: &Cluster,
    ns: &str,
    ca: &str,
    accept: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            last = root_ca(cluster, ns);
            last.as_ref()
                .is_some_and(|cm| published(cm, ca) && accept(cm))
        }),
        "{ROOT_CA_CONFIG_MAP} in {ns} not as published: {last:?}"
    );
    last.unwrap_or_default()
}

#[test]
fn every_namespace_holds_the_cluster_ca_and_it_is_kept_so() {
    let cluster = Cluster::start();
    let ca = kubeconfig_ca(&cluster);
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    assert!(!ca.contains("PRIVATE KEY"));
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        until_published(&cluster, ns, &ca, |_| true);
    }

    // A new namespace gets it at once.
    cluster.create_namespace("team");
    let first = until_published(&cluster, "team", &ca, |_| true);
    assert_eq!(first["metadata"]["namespace"], "team");

    // Deleted, it comes back (a new object).
    cluster
        .kubectl(&["delete", "configmap", ROOT_CA_CONFIG_MAP, "-n", "team"])
        .ok();
    let again = until_published(&cluster, "team", &ca, |cm| {
        cm["metadata"]["uid"] != first["metadata"]["uid"]
    });

    // Its data edited, the data is reset; a label added alongside stays.
    cluster
        .kubectl(&[
            "patch",
            "configmap",
            ROOT_CA_CONFIG_MAP,
            "-n",
            "team",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"team":"a"}},"data":{"ca.crt":"forged","extra":"x"}}"#,
        ])
        .ok();
    let reset = until_published(&cluster, "team", &ca, |cm| {
        cm["metadata"]["labels"]["team"] == "a"
    });
    assert_eq!(
        reset["metadata"]["uid"], again["metadata"]["uid"],
        "updated, not replaced"
    );

    // Its description removed, it is put back.
    cluster
        .kubectl(&[
            "annotate",
            "configmap",
            ROOT_CA_CONFIG_MAP,
            "-n",
            "team",
            "kubernetes.io/description-",
        ])
        .ok();
    until_published(&cluster, "team", &ca, |cm| {
        cm["metadata"]["resourceVersion"] != reset["metadata"]["resourceVersion"]
    });

    // A terminating namespace loses it with the rest of its content and
    // does not get it back.
    cluster.create_namespace("leaving");
    let held = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, namespace: leaving, finalizers: [example.com/hold]}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], held).ok();
    cluster
        .kubectl(&["delete", "namespace", "leaving", "--wait=false"])
        .ok();
    assert!(
        eventually(Duration::from_secs(20), || root_ca(&cluster, "leaving")
            .is_none()),
        "{ROOT_CA_CONFIG_MAP} stayed in a terminating namespace"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        root_ca(&cluster, "leaving").is_none(),
        "recreated while terminating"
    );
    assert_eq!(
        cluster
            .kubectl(&[
                "get",
                "namespace",
                "leaving",
                "-o",
                "jsonpath={.status.phase}"
            ])
            .ok(),
        "Terminating"
    );
    cluster
        .kubectl(&[
            "patch",
            "configmap",
            "held",
            "-n",
            "leaving",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ])
        .ok();
    assert!(eventually(Duration::from_secs(20), || cluster
        .kubectl(&["get", "namespace", "leaving"])
        .stderr
        .contains("NotFound")));
}

#[test]
fn a_non_admin_reads_it_only_when_rbac_allows() {
    let cluster = Cluster::start();
    let ca = kubeconfig_ca(&cluster);
    cluster.create_namespace("team");
    let token = cluster.service_account_token("reader");
    let reader = cluster.token_kubeconfig("reader", &token, "team");
    let get = ["get", "configmap", ROOT_CA_CONFIG_MAP, "-o", "json"];

    // kube grants nobody but the admin a read of it.
    assert_eq!(
        cluster.kubectl_with(&reader, &get).err().trim(),
        "Error from server (Forbidden): configmaps \"kube-root-ca.crt\" is forbidden: User \
         \"system:serviceaccount:default:reader\" cannot get resource \"configmaps\" in API group \"\" \
         in the namespace \"team\""
    );

    // A Role naming it lets the reader get it, and nothing else.
    cluster
        .kubectl(&[
            "create",
            "role",
            "root-ca-reader",
            "-n",
            "team",
            "--verb=get",
            "--resource=configmaps",
            &format!("--resource-name={ROOT_CA_CONFIG_MAP}"),
        ])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "rolebinding",
            "root-ca-reader",
            "-n",
            "team",
            "--role=root-ca-reader",
            "--serviceaccount=default:reader",
        ])
        .ok();
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .kubectl_with(&reader, &get)
            .code
            == 0),
        "the Role never applied"
    );
    let cm = cluster.kubectl_with(&reader, &get).json();
    assert!(published(&cm, &ca), "{cm}");
    assert!(
        cluster
            .kubectl_with(&reader, &["get", "configmaps"])
            .err()
            .contains("cannot list resource \"configmaps\"")
    );
    assert!(
        cluster
            .kubectl_with(
                &reader,
                &["get", "configmap", ROOT_CA_CONFIG_MAP, "-n", "default"]
            )
            .err()
            .contains("forbidden")
    );
}
