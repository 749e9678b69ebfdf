//! Wire details that kubectl's scripts and the official clients depend on,
//! matched to kube-apiserver: response framing, error texts, update
//! preconditions, DELETE answers and discovery fields.

use serde_json::Value;
use tests::{As, Cluster};

#[test]
fn json_bodies_end_with_a_newline_as_kube_encodes_them() {
    let cluster = Cluster::start();
    let missing = cluster.curl(
        As::Admin,
        "GET",
        "/api/v1/namespaces/default/configmaps/none",
        &[],
        None,
    );
    assert_eq!(missing.code, 404);
    assert!(missing.text.ends_with("}\n"), "{:?}", missing.text);
    assert_eq!(missing.json["reason"], "NotFound");
    let created = cluster.curl(
        As::Admin,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &["Content-Type: application/json"],
        Some(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"nl"}}"#),
    );
    assert_eq!(created.code, 201, "{}", created.text);
    assert!(created.text.ends_with("}\n"), "{:?}", created.text);
    for path in [
        "/api/v1/namespaces/default/configmaps/nl",
        "/api/v1/namespaces/default/configmaps",
        "/api/v1",
    ] {
        let read = cluster.curl(As::Admin, "GET", path, &[], None);
        assert_eq!(read.code, 200, "{path}: {}", read.text);
        assert!(read.text.ends_with("}\n"), "{path}: {:?}", read.text);
    }
}

#[test]
fn an_update_with_resource_version_zero_is_unconditional() {
    let cluster = Cluster::start();
    cluster
        .kubectl(&["create", "configmap", "exported", "--from-literal=k=v1"])
        .ok();
    let mut object: Value = cluster
        .kubectl(&["get", "configmap", "exported", "-o", "json"])
        .json();
    object["metadata"]["resourceVersion"] = "0".into();
    object["data"]["k"] = "v2".into();
    cluster
        .kubectl_stdin(&["replace", "-f", "-"], &object.to_string())
        .ok();
    assert_eq!(
        cluster
            .kubectl(&["get", "configmap", "exported", "-o", "jsonpath={.data.k}"])
            .ok(),
        "v2"
    );
    // A stale number is still a conflict.
    object["metadata"]["resourceVersion"] = "1".into();
    let stale = cluster.kubectl_stdin(&["replace", "-f", "-"], &object.to_string());
    assert!(
        stale.err().contains("the object has been modified"),
        "{stale:?}"
    );
}
