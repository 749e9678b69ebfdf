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

/// Runs kubectl, killed if it has not finished within `seconds` (it must not hang).
fn kubectl_within(cluster: &Cluster, seconds: u64, args: &[&str]) -> tests::Run {
    let mut full = vec!["timeout".to_string(), seconds.to_string(), "kubectl".into()];
    full.extend(args.iter().map(|a| a.to_string()));
    let out = cluster
        .command(&full[0])
        .args(&full[1..])
        .output()
        .expect("timeout and kubectl on PATH");
    assert_ne!(out.status.code(), Some(124), "kubectl {args:?} hung");
    tests::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn what_needs_a_kubelet_answers_at_once_with_kubes_words() {
    let cluster = Cluster::start();
    cluster
        .kubectl(&["run", "p", "--image=busybox", "--", "sleep", "3600"])
        .ok();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: two}\nspec:\n  containers:\n  - {name: a, image: busybox}\n  - {name: b, image: busybox}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], pod).ok();
    // No node: an empty log (204), as kube answers.
    let logs = kubectl_within(&cluster, 20, &["logs", "p"]);
    assert_eq!(logs.code, 0, "{logs:?}");
    assert_eq!(logs.stdout, "");
    // kubectl picks the first container itself; the server asks for one.
    let logs = kubectl_within(&cluster, 20, &["logs", "two"]);
    assert!(
        logs.stderr
            .contains("Defaulted container \"a\" out of: a, b"),
        "{logs:?}"
    );
    let unnamed = cluster.curl(
        As::Admin,
        "GET",
        "/api/v1/namespaces/default/pods/two/log",
        &[],
        None,
    );
    assert_eq!(unnamed.code, 400, "{}", unnamed.text);
    assert_eq!(
        unnamed.json["message"],
        "a container name must be specified for pod two, choose one of: [a b]"
    );
    let logs = kubectl_within(&cluster, 20, &["logs", "p", "-c", "nope"]);
    assert!(
        logs.stderr
            .contains("container nope is not valid for pod p"),
        "{logs:?}"
    );
    // The streams: refused at once, over WebSocket or SPDY alike.
    let forward = kubectl_within(&cluster, 20, &["port-forward", "pod/p", "18080:80"]);
    assert!(forward.stderr.contains("pod is not running"), "{forward:?}");
    let forward = cluster.curl(
        As::Admin,
        "POST",
        "/api/v1/namespaces/default/pods/p/portforward",
        &[],
        None,
    );
    assert_eq!(forward.code, 400, "{}", forward.text);
    assert_eq!(
        forward.json["message"],
        "pod p does not have a host assigned"
    );
    for args in [vec!["exec", "p", "--", "ls"], vec!["attach", "p"]] {
        let out = kubectl_within(&cluster, 20, &args);
        assert_ne!(out.code, 0, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("pod p does not have a host assigned"),
            "{args:?}: {}",
            out.stderr
        );
    }
    let proxied = cluster.curl(
        As::Admin,
        "GET",
        "/api/v1/namespaces/default/pods/p/proxy/",
        &[],
        None,
    );
    assert_eq!(proxied.code, 400, "{}", proxied.text);
    assert_eq!(proxied.json["message"], "address not allowed");
    // A node in the API has no kubelet behind it here.
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], node).ok();
    let proxied = cluster.curl(
        As::Admin,
        "GET",
        "/api/v1/nodes/n1/proxy/metrics",
        &[],
        None,
    );
    assert_eq!(proxied.code, 503, "{}", proxied.text);
    let missing = cluster.curl(
        As::Admin,
        "GET",
        "/api/v1/nodes/n2/proxy/metrics",
        &[],
        None,
    );
    assert_eq!(missing.code, 404, "{}", missing.text);
    // Discovery lists them as kube does.
    let resources = cluster.kubectl(&["get", "--raw", "/api/v1"]).json();
    let names: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .filter(|n| n.starts_with("pods/") || n.starts_with("nodes/"))
        .collect();
    assert_eq!(
        names,
        [
            "nodes/proxy",
            "nodes/status",
            "pods/attach",
            "pods/binding",
            "pods/ephemeralcontainers",
            "pods/eviction",
            "pods/exec",
            "pods/log",
            "pods/portforward",
            "pods/proxy",
            "pods/resize",
            "pods/status"
        ]
    );
}

#[test]
fn deletes_answer_as_kubes_registries_declare_for_the_typed_python_client() {
    let cluster = Cluster::start();
    let script = r#"
from kubernetes import client, config
config.load_kube_config()
core = client.CoreV1Api()
meta = lambda name: client.V1ObjectMeta(name=name)
core.create_namespaced_pod("default", client.V1Pod(metadata=meta("p"),
    spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])))
core.create_namespaced_service("default", client.V1Service(metadata=meta("s"),
    spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)])))
core.create_namespaced_service_account("default", client.V1ServiceAccount(metadata=meta("sa")))
core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=meta("cm")))
pod = core.delete_namespaced_pod("p", "default")
assert isinstance(pod, client.V1Pod) and pod.metadata.name == "p" and pod.spec.containers[0].name == "c", pod
svc = core.delete_namespaced_service("s", "default")
assert isinstance(svc, client.V1Service) and svc.spec.ports[0].port == 80, svc
sa = core.delete_namespaced_service_account("sa", "default")
assert isinstance(sa, client.V1ServiceAccount) and sa.metadata.name == "sa", sa
status = core.delete_namespaced_config_map("cm", "default")
# The client declares no model for this answer: the Status comes as a dict.
assert (status if isinstance(status, dict) else status.to_dict())["status"] == "Success", status
print("deletes parsed")
"#;
    let out = cluster
        .command("python3")
        .args(["-c", script])
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("deletes parsed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The raw answers: the object for a pod, a Status for a ConfigMap.
    cluster.kubectl(&["run", "q", "--image=busybox"]).ok();
    let deleted = cluster.curl(
        As::Admin,
        "DELETE",
        "/api/v1/namespaces/default/pods/q",
        &[],
        None,
    );
    assert_eq!(deleted.code, 200, "{}", deleted.text);
    assert_eq!(deleted.json["kind"], "Pod", "{}", deleted.text);
}

#[test]
fn discovery_publishes_kubes_storage_version_hashes() {
    let cluster = Cluster::start();
    let hash_of = |path: &str, name: &str| -> Value {
        let list = cluster.kubectl(&["get", "--raw", path]).json();
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {path}"))
            .get("storageVersionHash")
            .cloned()
            .unwrap_or(Value::Null)
    };
    // The values kube-apiserver 1.33 publishes.
    assert_eq!(hash_of("/api/v1", "pods"), "xPOwRZ+Yhw8=");
    assert_eq!(hash_of("/api/v1", "configmaps"), "qFsyl6wFWjQ=");
    assert_eq!(hash_of("/apis/apps/v1", "deployments"), "8aSe+NMegvE=");
    // One storage, one hash; subresources and reviews store nothing.
    assert_eq!(
        hash_of("/apis/events.k8s.io/v1", "events"),
        hash_of("/api/v1", "events")
    );
    assert_eq!(hash_of("/api/v1", "pods/status"), Value::Null);
    assert_eq!(
        hash_of("/apis/authentication.k8s.io/v1", "tokenreviews"),
        Value::Null
    );
    // A CRD's versions share its storage version's hash.
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gears.example.com}\n\
               spec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: gears, singular: gear, kind: Gear}\n  versions:\n\
               \x20 - {name: v1, served: true, storage: false, schema: {openAPIV3Schema: {type: object}}}\n\
               \x20 - {name: v2, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], crd).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/gears.example.com",
        ])
        .ok();
    assert!(tests::eventually(
        std::time::Duration::from_secs(10),
        || cluster
            .kubectl(&["get", "--raw", "/apis/example.com/v1"])
            .code
            == 0
    ));
    let v1 = hash_of("/apis/example.com/v1", "gears");
    assert!(v1.is_string(), "{v1}");
    assert_eq!(v1, hash_of("/apis/example.com/v2", "gears"));
    // Aggregated discovery has no such field.
    let aggregated = cluster.curl(
        As::Admin,
        "GET",
        "/api",
        &["Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"],
        None,
    );
    assert!(
        aggregated.text.contains("APIGroupDiscoveryList"),
        "{}",
        aggregated.text
    );
    assert!(
        !aggregated.text.contains("storageVersionHash"),
        "{}",
        aggregated.text
    );
}

#[test]
fn decoder_and_patcher_errors_are_kubes_words() {
    let cluster = Cluster::start();
    cluster
        .kubectl(&["create", "configmap", "x", "--from-literal=a=b"])
        .ok();
    // A strategic patch that gives a map a string: kube's converter speaks.
    let patched = cluster.kubectl(&[
        "patch",
        "configmap",
        "x",
        "--type=strategic",
        "-p",
        r#"{"data":"x"}"#,
    ]);
    assert_eq!(
        patched.err().trim(),
        r#"The request is invalid: patch: Invalid value: "map[data:x]": cannot restore map from string"#
    );
    let raw = cluster.curl(
        As::Admin,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        &["Content-Type: application/strategic-merge-patch+json"],
        Some(br#"{"data":"x"}"#),
    );
    assert_eq!(raw.code, 422, "{}", raw.text);
    assert_eq!(
        raw.json["message"],
        r#" "" is invalid: patch: Invalid value: "map[data:x]": cannot restore map from string"#
    );
    let patched = cluster.kubectl(&[
        "patch",
        "configmap",
        "x",
        "--type=strategic",
        "-p",
        r#""invalid""#,
    ]);
    assert!(
        patched.err().contains(
            "json: cannot unmarshal string into Go value of type map[string]interface {}"
        ),
        "{patched:?}"
    );
    // A body of another kind, and a body with no kind at all.
    let namespaces = "/api/v1/namespaces";
    let json = ["Content-Type: application/json"];
    let other = cluster.curl(
        As::Admin,
        "POST",
        namespaces,
        &json,
        Some(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y"}}"#),
    );
    assert_eq!(other.code, 400, "{}", other.text);
    assert_eq!(
        other.json["message"],
        "ConfigMap in version \"v1\" cannot be handled as a Namespace: converting (v1.ConfigMap) to (core.Namespace): unknown conversion"
    );
    let unrecognized = cluster.curl(As::Admin, "POST", namespaces, &json, Some(br#""invalid""#));
    assert_eq!(unrecognized.code, 400, "{}", unrecognized.text);
    assert_eq!(
        unrecognized.json["message"],
        "the object provided is unrecognized (must be of type Namespace): couldn't get version/kind; json parse error: \
         json: cannot unmarshal string into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; \
         Kind string \"json:\\\"kind,omitempty\\\"\" } (22696e76616c696422)"
    );
    // A patch or an apply whose object names another namespace, or name,
    // than its URL: kube's checkName, 400 (nothing is written elsewhere).
    let x = "/api/v1/namespaces/default/configmaps/x";
    let apply = cluster.curl(
        As::Admin,
        "PATCH",
        &format!("{x}?fieldManager=tester"),
        &["Content-Type: application/apply-patch+yaml"],
        Some(b"{apiVersion: v1, kind: ConfigMap, metadata: {name: x, namespace: kube-system}}"),
    );
    assert_eq!(apply.code, 400, "{}", apply.text);
    assert_eq!(
        apply.json["message"],
        "the namespace of the object (kube-system) does not match the namespace on the request (default)"
    );
    let merge = ["Content-Type: application/merge-patch+json"];
    let moved = cluster.curl(
        As::Admin,
        "PATCH",
        x,
        &merge,
        Some(br#"{"metadata":{"namespace":"kube-system"}}"#),
    );
    assert_eq!(moved.code, 400, "{}", moved.text);
    assert_eq!(
        moved.json["message"],
        "the namespace of the object (kube-system) does not match the namespace on the request (default)"
    );
    let renamed = cluster.curl(
        As::Admin,
        "PATCH",
        x,
        &merge,
        Some(br#"{"metadata":{"name":"z"}}"#),
    );
    assert_eq!(renamed.code, 400, "{}", renamed.text);
    assert_eq!(
        renamed.json["message"],
        "the name of the object (z) does not match the name on the URL (x)"
    );
    assert!(
        cluster
            .kubectl(&["-n", "kube-system", "get", "configmap", "x"])
            .code
            != 0
    );
}

/// A watch through the front door with curl, HTTP/1.1 or HTTP/2; returns
/// curl's exit code (18 or 92 when the body ended without its terminating
/// chunk or END_STREAM) and the events received.
fn curl_watch(cluster: &Cluster, protocol: &str, query: &str) -> std::process::Child {
    cluster
        .curl_command(As::Admin)
        .args(["-N", "--max-time", "30", protocol])
        .arg(format!(
            "https://localhost:{}/api/v1/namespaces/default/configmaps?watch=1&{query}",
            cluster.port
        ))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("curl")
}

#[test]
fn watches_end_cleanly_on_http1_and_http2() {
    let cluster = Cluster::start();
    cluster
        .kubectl(&["create", "configmap", "w", "--from-literal=k=v"])
        .ok();
    let rv = cluster
        .kubectl(&[
            "get",
            "configmaps",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
        .ok()
        .to_string();
    // Ended by timeoutSeconds: a watch of its own, and one sharing another's stream.
    for protocol in ["--http1.1", "--http2"] {
        for query in [
            "timeoutSeconds=2".to_string(),
            format!("resourceVersion={rv}&timeoutSeconds=2"),
            format!("resourceVersion={rv}&timeoutSeconds=2&allowWatchBookmarks=true"),
        ] {
            let out = curl_watch(&cluster, protocol, &query)
                .wait_with_output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{protocol} {query}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // A strict HTTP/1.1 reader: http.client raises IncompleteRead on a cut body.
    let script = r#"
import http.client, ssl, sys
port, pki = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
conn = http.client.HTTPSConnection("localhost", port, context=ctx)
conn.request("GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=2")
body = conn.getresponse().read()
print("clean", len(body))
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script, &cluster.port.to_string()])
        .arg(cluster.dir.join("pki"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("clean"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Ended by the front door stopping: both protocols end cleanly too.
    let watches: Vec<_> = ["--http1.1", "--http2"]
        .iter()
        .map(|p| curl_watch(&cluster, p, "timeoutSeconds=25"))
        .collect();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let aggregator = cluster.child_pid("aggregator").expect("an aggregator");
    Cluster::signal(aggregator, nix::sys::signal::Signal::SIGTERM);
    for watch in watches {
        let out = watch.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_watch_ends_when_its_client_closes_the_tls_session() {
    let cluster = Cluster::start();
    // As Python's asyncio transport stops: close_notify on an open
    // HTTP/1.1 watch, then wait for the server's own. kube ends the
    // request when its connection reads EOF; the watch (60 s) must not
    // run on, nor write after the client's close_notify.
    let script = r#"
import socket, ssl, sys, time
port, pki = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
ctx.set_alpn_protocols(["http/1.1"])
tls = ctx.wrap_socket(socket.create_connection(("localhost", port)), server_hostname="localhost")
tls.sendall(b"GET /api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=60 HTTP/1.1\r\nHost: localhost\r\n\r\n")
head = tls.recv(65536)
assert head.startswith(b"HTTP/1.1 200"), head
tls.settimeout(20)
started = time.monotonic()
try:
    tls.unwrap()
    print("ended after %.2f s" % (time.monotonic() - started))
except TimeoutError:
    print("still open 20 s after close_notify")
except (ssl.SSLError, OSError) as e:
    print("failed:", e)
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script, &cluster.port.to_string()])
        .arg(cluster.dir.join("pki"))
        .output()
        .expect("python3");
    let said = String::from_utf8_lossy(&out.stdout);
    eprintln!("{said}");
    assert!(
        said.starts_with("ended"),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
