//! Secrets encrypted at rest, as `kubechain up` sets it up by default: etcd
//! holds kube's `k8s:enc:` ciphertext, kubectl reads the Secret in clear,
//! and a key rotates the way kube documents (a new key in front, then
//! every object rewritten).

use std::time::Duration;

use tests::{Cluster, eventually};

const NS: &str = "vault";

/// The value etcd holds for a Secret, as etcdctl prints it.
fn stored(cluster: &Cluster, kind: &str, name: &str) -> String {
    cluster
        .etcdctl(&[
            "get",
            &format!("/registry/{kind}/{NS}/{name}"),
            "--print-value-only",
        ])
        .ok()
        .to_string()
}

/// The Secret's `data.token`, read back through the front door.
fn token(cluster: &Cluster, name: &str) -> String {
    cluster
        .kubectl(&[
            "-n",
            NS,
            "get",
            "secret",
            name,
            "-o",
            "jsonpath={.data.token}",
        ])
        .ok()
        .to_string()
}

#[test]
fn secrets_are_ciphertext_in_etcd_and_clear_through_the_front_door() {
    let cluster = Cluster::start();
    cluster.kubectl(&["create", "namespace", NS]).ok();
    cluster
        .kubectl(&[
            "-n",
            NS,
            "create",
            "secret",
            "generic",
            "db",
            "--from-literal=token=hunter2-plaintext",
        ])
        .ok();
    cluster
        .kubectl(&[
            "-n",
            NS,
            "create",
            "configmap",
            "plain",
            "--from-literal=k=visible-value",
        ])
        .ok();

    // etcd holds ciphertext under kube's prefix, and nothing of the value.
    let raw = stored(&cluster, "secrets", "db");
    assert!(raw.starts_with("k8s:enc:secretbox:v1:key1:"), "{raw:?}");
    assert!(!raw.contains("aHVudGVyMi1wbGFpbnRleHQ"), "{raw:?}");
    assert!(!raw.contains("\"metadata\""), "{raw:?}");
    // What the configuration does not name stays JSON.
    let configmap = stored(&cluster, "configmaps", "plain");
    assert!(configmap.contains("visible-value"), "{configmap:?}");
    // Through the front door, in clear: get, list and watch.
    assert_eq!(token(&cluster, "db"), "aHVudGVyMi1wbGFpbnRleHQ=");
    let list = cluster
        .kubectl(&["-n", NS, "get", "secrets", "-o", "json"])
        .json();
    assert_eq!(
        list["items"][0]["data"]["token"],
        "aHVudGVyMi1wbGFpbnRleHQ="
    );

    // A no-op update writes nothing: the value is current.
    let before = stored(&cluster, "secrets", "db");
    let json = cluster
        .kubectl(&["-n", NS, "get", "secret", "db", "-o", "json"])
        .ok()
        .to_string();
    cluster.kubectl_stdin(&["replace", "-f", "-"], &json).ok();
    assert_eq!(stored(&cluster, "secrets", "db"), before);

    // Rotation, step 1: a new key in front of the old one, then a restart.
    let config_path = cluster.dir.join("pki/encryption-config.yaml");
    let config = std::fs::read_to_string(&config_path).unwrap();
    let rotated = config.replace(
        "          keys:\n",
        "          keys:\n            - name: key2\n              \
         secret: MTIzNDU2Nzg5MGFiY2RlZjEyMzQ1Njc4OTBhYmNkZWY=\n",
    );
    assert_ne!(rotated, config);
    std::fs::write(&config_path, rotated).unwrap();
    let old_pid = cluster.child_pid("core-server").expect("core-server runs");
    Cluster::signal(old_pid, nix::sys::signal::Signal::SIGKILL);
    assert!(
        eventually(Duration::from_secs(30), || {
            cluster
                .child_pid("core-server")
                .is_some_and(|p| p != old_pid)
                && cluster
                    .kubectl(&["-n", NS, "get", "secret", "db", "-o", "name"])
                    .code
                    == 0
        }),
        "core-server restarted with the new key"
    );
    // Old values still read; new writes take the new key.
    assert_eq!(token(&cluster, "db"), "aHVudGVyMi1wbGFpbnRleHQ=");
    cluster
        .kubectl(&[
            "-n",
            NS,
            "create",
            "secret",
            "generic",
            "new",
            "--from-literal=token=x",
        ])
        .ok();
    let fresh = stored(&cluster, "secrets", "new");
    assert!(fresh.starts_with("k8s:enc:secretbox:v1:key2:"), "{fresh:?}");
    assert!(stored(&cluster, "secrets", "db").starts_with("k8s:enc:secretbox:v1:key1:"));

    // Step 2: rewrite every Secret unchanged; each now uses the new key.
    let all = cluster
        .kubectl(&["get", "secrets", "-A", "-o", "json"])
        .ok()
        .to_string();
    cluster.kubectl_stdin(&["replace", "-f", "-"], &all).ok();
    let rewritten = stored(&cluster, "secrets", "db");
    assert!(
        rewritten.starts_with("k8s:enc:secretbox:v1:key2:"),
        "{rewritten:?}"
    );
    assert_eq!(token(&cluster, "db"), "aHVudGVyMi1wbGFpbnRleHQ=");
}
