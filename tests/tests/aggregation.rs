//! The aggregation layer: APIServices, a third-party aggregated server
//! behind the aggregator's proxy (identity headers, front-proxy certificate,
//! streaming), its availability, and what happens when it dies.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;
use tests::{Cluster, eventually};

/// The test server's certificate, signed by its own CA, for `wardle-server.wardle.svc`.
fn server_certificates(dir: &std::path::Path) -> String {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "wardle-ca");
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["wardle-server.wardle.svc".to_string()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("wardle.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("wardle.key"), key.serialize_pem()).unwrap();
    base64::engine::general_purpose::STANDARD.encode(ca_pem)
}

fn start_server(cluster: &Cluster, port: u16) -> tests::Server {
    tests::start_aggregated_server(cluster, port, "wardle")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn available(cluster: &Cluster) -> Option<String> {
    let out = cluster.kubectl(&[
        "get",
        "apiservice",
        "v1.wardle.example.com",
        "-o",
        "jsonpath={.status.conditions[0].status}",
    ]);
    (out.code == 0).then(|| out.stdout.trim().to_string())
}

#[test]
fn a_third_party_aggregated_server_behind_the_proxy() {
    let cluster = Cluster::start();
    let ca_bundle = server_certificates(&cluster.dir);
    let port = free_port();
    let mut server = start_server(&cluster, port);
    let plumbing = tests::local_service("wardle", "wardle-server", port);
    cluster.kubectl_stdin(&["apply", "-f", "-"], &plumbing).ok();
    let apiservice = format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {{name: v1.wardle.example.com}}\n\
         spec: {{group: wardle.example.com, version: v1, groupPriorityMinimum: 1000, versionPriority: 15,\n\
         caBundle: {ca_bundle}, service: {{namespace: wardle, name: wardle-server, port: 443}}}}\n"
    );
    let created = Instant::now();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &apiservice)
        .ok();
    assert!(eventually(Duration::from_secs(20), || available(&cluster)
        .as_deref()
        == Some("True")));
    let to_available = created.elapsed();
    assert!(eventually(Duration::from_secs(10), || {
        cluster
            .kubectl(&[
                "api-resources",
                "--api-group=wardle.example.com",
                "-o",
                "name",
            ])
            .stdout
            .contains("flunders")
    }));
    let to_discovery = created.elapsed();
    eprintln!(
        "APIService created → Available in {to_available:?}, → in discovery in {to_discovery:?}"
    );
    let listing = cluster.kubectl(&["get", "apiservices"]);
    assert!(
        listing
            .ok()
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()[..3]
                == ["v1.wardle.example.com", "wardle/wardle-server", "True"])
    );

    // Identity: set by the aggregator, spoofed headers stripped, front-proxy certificate presented.
    let echo = cluster
        .kubectl(&["get", "flunders", "-n", "team", "-o", "json"])
        .json();
    let seen = &echo["items"][0]["spec"];
    assert_eq!(seen["user"], serde_json::json!(["kubernetes-admin"]));
    assert!(
        seen["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == "system:masters"),
        "{seen}"
    );
    assert_eq!(seen["clientCN"], "front-proxy-client");
    assert!(seen["authorization"].is_null());
    let pki = cluster.dir.join("pki");
    let spoofed = Command::new("curl")
        .args([
            "-sS",
            "-H",
            "X-Remote-User: mallory",
            "-H",
            "X-Remote-Group: system:masters",
            "-H",
            "Authorization: Bearer nope",
        ])
        .arg("--cacert")
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .arg(format!(
            "https://localhost:{}/apis/wardle.example.com/v1/namespaces/team/flunders/echo",
            cluster.port
        ))
        .output()
        .unwrap();
    let spoofed: Value = serde_json::from_slice(&spoofed.stdout).unwrap();
    assert_eq!(
        spoofed["spec"]["user"],
        serde_json::json!(["kubernetes-admin"]),
        "{spoofed}"
    );
    assert!(spoofed["spec"]["authorization"].is_null());

    // A slow watch arrives event by event, not all at the end.
    let mut watch = cluster
        .command("kubectl")
        .args([
            "get",
            "--raw",
            "/apis/wardle.example.com/v1/namespaces/team/flunders?watch=true",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut arrivals = Vec::new();
    for _ in 0..3 {
        let line = lines.next().unwrap().unwrap();
        arrivals.push(Instant::now());
        let event: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(event["type"], "ADDED");
    }
    let _ = watch.wait();
    assert!(
        arrivals[2] - arrivals[0] > Duration::from_millis(1500),
        "events were buffered: {arrivals:?}"
    );

    // Deleting a namespace empties it on the aggregated server too.
    cluster.kubectl(&["create", "namespace", "gadgets"]).ok();
    let gizmo = "apiVersion: wardle.example.com/v1\nkind: Gizmo\nmetadata: {name: g1, namespace: gadgets}\n\
                 ---\napiVersion: wardle.example.com/v1\nkind: Doodad\nmetadata: {name: d1, namespace: gadgets}\n";
    cluster.kubectl_stdin(&["create", "-f", "-"], gizmo).ok();
    assert_eq!(
        cluster
            .kubectl(&["get", "gizmos", "-n", "gadgets", "-o", "name"])
            .ok()
            .trim(),
        "gizmo.wardle.example.com/g1"
    );
    cluster
        .kubectl(&["delete", "namespace", "gadgets", "--timeout=30s"])
        .ok();
    // Gizmos go as a collection, doodads (no deletecollection) one by one.
    assert_eq!(
        cluster
            .kubectl(&["get", "gizmos,doodads", "-n", "gadgets", "-o", "name"])
            .ok()
            .trim(),
        "",
        "the aggregated server still holds the deleted namespace's content"
    );

    // The server dies: unavailable, its paths 503, everything else unaffected.
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(eventually(Duration::from_secs(20), || available(&cluster)
        .as_deref()
        == Some("False")));
    let reason = cluster.kubectl(&[
        "get",
        "apiservice",
        "v1.wardle.example.com",
        "-o",
        "jsonpath={.status.conditions[0].reason}",
    ]);
    assert_eq!(reason.ok().trim(), "FailedDiscoveryCheck");
    let down = cluster.kubectl(&[
        "get",
        "--raw",
        "/apis/wardle.example.com/v1/namespaces/team/flunders",
    ]);
    assert!(down.err().contains("ServiceUnavailable"), "{}", down.stderr);
    assert!(
        cluster
            .kubectl(&["get", "namespaces"])
            .ok()
            .contains("wardle")
    );
    let resources = cluster.kubectl(&["api-resources"]);
    assert!(resources.ok().contains("configmaps"));
    // A namespace deleted now waits for the down server, which last served
    // gizmos there to delete (as kube does), and says so; the rest of its
    // content goes at once.
    cluster.kubectl(&["create", "namespace", "doomed"]).ok();
    cluster
        .kubectl(&["create", "configmap", "x", "-n", "doomed"])
        .ok();
    cluster
        .kubectl(&["delete", "namespace", "doomed", "--wait=false"])
        .ok();
    let mut doomed = Value::Null;
    assert!(
        eventually(Duration::from_secs(20), || {
            doomed = cluster
                .kubectl(&["get", "ns", "doomed", "-o", "json"])
                .json();
            doomed["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "NamespaceDeletionDiscoveryFailure" && c["status"] == "True")
        }),
        "no discovery failure reported: {doomed}"
    );
    let failure = doomed["status"]["conditions"]
        .as_array()
        .and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == "NamespaceDeletionDiscoveryFailure")
        })
        .cloned()
        .unwrap();
    assert_eq!(failure["reason"], "DiscoveryFailed");
    assert_eq!(
        failure["message"],
        "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: \
         wardle.example.com/v1: stale GroupVersion discovery: wardle.example.com/v1"
    );
    assert!(eventually(Duration::from_secs(10), || cluster
        .kubectl(&["get", "configmap", "x", "-n", "doomed"])
        .stderr
        .contains("NotFound")));
    assert_eq!(doomed["status"]["phase"], "Terminating");

    // It comes back: available and serving again within seconds.
    let mut server = start_server(&cluster, port);
    let restarted = Instant::now();
    assert!(eventually(Duration::from_secs(20), || available(&cluster)
        .as_deref()
        == Some("True")));
    // The waiting namespace is emptied and goes.
    assert!(
        eventually(Duration::from_secs(30), || cluster
            .kubectl(&["get", "ns", "doomed"])
            .stderr
            .contains("NotFound")),
        "the namespace stayed once the aggregated server was back"
    );
    assert!(eventually(Duration::from_secs(10), || cluster
        .kubectl(&["get", "flunders", "-n", "team", "-o", "name"])
        .code
        == 0));
    eprintln!(
        "aggregated server restarted → Available again in {:?}",
        restarted.elapsed()
    );
    server.kill().unwrap();
    let mut rest = String::new();
    let _ = server
        .stdout
        .take()
        .map(|mut s| s.read_to_string(&mut rest));
}

#[test]
fn apiservice_validation_and_local_registration() {
    let cluster = Cluster::start();
    let bad = "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1.wrong.example.com}\n\
               spec: {group: example.com, version: v1, groupPriorityMinimum: 0, versionPriority: 5000, insecureSkipTLSVerify: true,\n\
               caBundle: QUJD, service: {namespace: default, name: x}}\n";
    let err = cluster.kubectl_stdin(&["apply", "-f", "-"], bad);
    let message = err.err();
    for expected in [
        "metadata.name: Invalid value: \"v1.wrong.example.com\": must be `spec.version+\".\"+spec.group`: \"v1.example.com\"",
        "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
        "spec.versionPriority: Invalid value: 5000: must be positive and less than 1000",
        "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
    ] {
        assert!(
            message.contains(expected),
            "missing {expected:?} in {message}"
        );
    }
    // Every built-in group/version has a local APIService, Available.
    let list = cluster
        .kubectl(&["get", "apiservices", "-o", "json"])
        .json();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["metadata"]["name"].as_str())
        .collect();
    for name in [
        "v1.",
        "v1.apps",
        "v1.apiregistration.k8s.io",
        "v1.rbac.authorization.k8s.io",
        "v1.apiextensions.k8s.io",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(eventually(Duration::from_secs(10), || {
        let list = cluster
            .kubectl(&["get", "apiservices", "-o", "json"])
            .json();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"]["conditions"][0]["status"] == "True")
    }));
    // A CRD's version is registered, and unregistered when the CRD goes.
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gizmos.example.com}\n\
               spec: {group: example.com, scope: Namespaced, names: {plural: gizmos, kind: Gizmo},\n\
               versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], crd).ok();
    assert!(eventually(Duration::from_secs(10), || cluster
        .kubectl(&["get", "apiservice", "v1.example.com"])
        .code
        == 0));
    let registered = cluster
        .kubectl(&["get", "apiservice", "v1.example.com", "-o", "json"])
        .json();
    assert_eq!(registered["spec"]["groupPriorityMinimum"], 1000);
    assert_eq!(registered["spec"]["versionPriority"], 100);
    cluster
        .kubectl(&["delete", "crd", "gizmos.example.com"])
        .ok();
    assert!(eventually(Duration::from_secs(10), || cluster
        .kubectl(&["get", "apiservice", "v1.example.com"])
        .code
        != 0));
    // The published front-proxy configuration.
    let auth = cluster
        .kubectl(&[
            "get",
            "cm",
            "-n",
            "kube-system",
            "extension-apiserver-authentication",
            "-o",
            "json",
        ])
        .json();
    assert!(
        auth["data"]["requestheader-client-ca-file"]
            .as_str()
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
    assert_eq!(
        auth["data"]["requestheader-allowed-names"],
        "[\"front-proxy-client\"]"
    );
}

#[test]
fn kubectl_top_node_through_the_launchers_metrics_server() {
    let cluster = Cluster::start();
    // `kubechain up` registers the host as a Node and metrics-server behind v1beta1.metrics.k8s.io.
    let apiservice = cluster
        .kubectl(&["get", "apiservice", "v1beta1.metrics.k8s.io", "-o", "json"])
        .json();
    assert_eq!(apiservice["spec"]["service"]["name"], "metrics-server");
    assert!(eventually(Duration::from_secs(20), || {
        cluster.apiservice_available("v1beta1.metrics.k8s.io")
    }));
    let node = cluster
        .kubectl(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"])
        .ok()
        .trim()
        .to_string();
    assert!(!node.is_empty());
    let mut top = cluster.kubectl(&["top", "node", "--no-headers"]);
    assert!(
        eventually(Duration::from_secs(20), || {
            top = cluster.kubectl(&["top", "node", "--no-headers"]);
            top.code == 0
        }),
        "{}",
        top.stderr
    );
    let columns: Vec<&str> = top.stdout.split_whitespace().collect();
    assert_eq!(columns.len(), 5, "{}", top.stdout);
    assert_eq!(columns[0], node);
    assert!(
        columns[1].ends_with('m') && columns[2].ends_with('%'),
        "{}",
        top.stdout
    );
    assert!(
        columns[3].ends_with("Mi") && columns[4].ends_with('%'),
        "{}",
        top.stdout
    );
    let used_mib: u64 = columns[3].trim_end_matches("Mi").parse().unwrap();
    assert!(used_mib > 0);
    // A Node this host does not measure has no metrics: NotFound, as from a real metrics-server.
    let missing = cluster.kubectl(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/nodes/not-a-node",
    ]);
    assert!(missing.err().contains("NotFound"), "{}", missing.stderr);
}

/// Runs `kubechain register` against the cluster with `args`.
fn register(cluster: &Cluster, args: &[&str]) -> tests::Run {
    let out = Command::new(tests::bin_dir().join("kubechain"))
        .arg("register")
        .args(args)
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .expect("kubechain runs");
    tests::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn kubechain_register_adds_an_aggregated_server_with_one_command() {
    let cluster = Cluster::start();
    // The launcher registers metrics-server the way `kubechain register`
    // does: registering it again by hand changes nothing.
    let metrics_port = cluster
        .kubectl(&[
            "get",
            "endpointslice",
            "metrics-server",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.ports[0].port}",
        ])
        .ok()
        .trim()
        .to_string();
    let ca = cluster.dir.join("pki/ca.crt");
    let ca = ca.to_str().unwrap();
    let metrics_address = format!("127.0.0.1:{metrics_port}");
    let again = register(
        &cluster,
        &[
            "--group=metrics.k8s.io",
            "--version=v1beta1",
            "--service=kube-system/metrics-server",
            "--address",
            &metrics_address,
            "--ca-file",
            ca,
            "--identity=user:kubechain-metrics-server",
            "--group-priority-minimum=100",
            "--version-priority=100",
        ],
    );
    let lines: Vec<&str> = again.ok().lines().collect();
    assert!(lines.len() >= 8, "{}", again.stdout);
    assert!(
        lines.iter().all(|l| l.ends_with(" unchanged")),
        "{}",
        again.stdout
    );
    assert!(lines.contains(&"apiservice.apiregistration.k8s.io/v1beta1.metrics.k8s.io unchanged"));
    // What it granted: the authentication ConfigMap every aggregated server
    // reads at start-up, to its identity and nobody else.
    let can_read = |user: &str| {
        cluster
            .kubectl(&[
                "auth",
                "can-i",
                "get",
                "configmap/extension-apiserver-authentication",
                "-n",
                "kube-system",
                "--as",
                user,
            ])
            .stdout
            .trim()
            .to_string()
    };
    assert_eq!(can_read("kubechain-metrics-server"), "yes");
    assert_eq!(can_read("someone-else"), "no");

    // A third party's server, known only by its address and CA.
    let ca_bundle = server_certificates(&cluster.dir);
    let wardle_ca = cluster.dir.join("wardle-ca.crt");
    std::fs::write(
        &wardle_ca,
        base64::engine::general_purpose::STANDARD
            .decode(ca_bundle)
            .unwrap(),
    )
    .unwrap();
    let port = free_port();
    let mut server = start_server(&cluster, port);
    let address = format!("127.0.0.1:{port}");
    let wardle = |extra: &[&str]| {
        let mut args = vec![
            "--group=wardle.example.com",
            "--version=v1",
            "--service=wardle/wardle-server",
            "--address",
            &address,
            "--ca-file",
            wardle_ca.to_str().unwrap(),
            "--identity=serviceaccount:wardle:apiserver",
        ];
        args.extend_from_slice(extra);
        register(&cluster, &args)
    };
    // --dry-run=client prints what it would write, and writes nothing.
    let dry = wardle(&["--dry-run=client", "-o", "yaml"]);
    let text = dry.ok();
    for kind in [
        "kind: Namespace",
        "kind: Service",
        "kind: EndpointSlice",
        "kind: ClusterRoleBinding",
        "kind: RoleBinding",
        "kind: APIService",
        "caBundle:",
    ] {
        assert!(text.contains(kind), "{kind} missing from\n{text}");
    }
    assert!(!text.contains("insecureSkipTLSVerify"));
    let listed = wardle(&["--dry-run=client", "-o", "json"]).json();
    assert_eq!(listed["kind"], "List");
    assert_eq!(listed["items"].as_array().unwrap().len(), 8, "{listed}");
    cluster
        .kubectl(&["get", "apiservice", "v1.wardle.example.com"])
        .err();

    let first = wardle(&[]);
    assert!(
        first.ok().lines().all(|l| l.ends_with(" created")),
        "{}",
        first.stdout
    );
    assert!(eventually(Duration::from_secs(20), || available(&cluster)
        .as_deref()
        == Some("True")));
    let echo = cluster
        .kubectl(&["get", "flunders", "-n", "team", "-o", "json"])
        .json();
    assert_eq!(
        echo["items"][0]["spec"]["user"],
        serde_json::json!(["kubernetes-admin"])
    );
    let stored_version =
        || cluster.apiservice_field("v1.wardle.example.com", "{.metadata.resourceVersion}");
    let before = stored_version();
    let second = wardle(&[]);
    assert!(
        second.ok().lines().all(|l| l.ends_with(" unchanged")),
        "{}",
        second.stdout
    );
    assert_eq!(stored_version(), before);
    let moved = wardle(&["--version-priority=20"]);
    assert!(
        moved
            .ok()
            .contains("apiservice.apiregistration.k8s.io/v1.wardle.example.com configured"),
        "{}",
        moved.stdout
    );
    assert_eq!(
        cluster.apiservice_field("v1.wardle.example.com", "{.spec.versionPriority}"),
        "20"
    );
    // The server's identity may delegate (TokenReview, SubjectAccessReview).
    let delegate = cluster.kubectl(&[
        "auth",
        "can-i",
        "create",
        "subjectaccessreviews",
        "--as=system:serviceaccount:wardle:apiserver",
    ]);
    assert_eq!(delegate.stdout.trim(), "yes");
    // Refused input says what is wrong and writes nothing.
    let bad = register(
        &cluster,
        &[
            "--group=x.example.com",
            "--version=v1",
            "--ca-file",
            ca,
            "--identity=wardle",
        ],
    );
    assert!(
        bad.err().contains("--identity is user:<name>"),
        "{}",
        bad.stderr
    );
    server.kill().ok();
    server.wait().ok();
}

#[test]
fn metrics_server_follows_the_published_front_proxy_trust_without_a_restart() {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let cluster = Cluster::start();
    let metrics = || cluster.kubectl(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"]);
    assert!(
        eventually(Duration::from_secs(30), || metrics().code == 0),
        "{}",
        metrics().stderr
    );
    let pid = cluster
        .child_pid("metrics-server")
        .expect("metrics-server runs");
    let published = cluster
        .kubectl(&[
            "get",
            "configmap",
            "extension-apiserver-authentication",
            "-n",
            "kube-system",
            "-o",
            "json",
        ])
        .json();
    let publish = |change: &dyn Fn(&mut Value)| {
        let mut config_map = published.clone();
        config_map["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        change(&mut config_map["data"]);
        cluster
            .kubectl_stdin(&["replace", "-f", "-"], &config_map.to_string())
            .ok();
    };
    // Another allowed name: the aggregator's proxy is nobody to it now.
    publish(&|data| data["requestheader-allowed-names"] = "[\"someone-else\"]".into());
    assert!(eventually(Duration::from_secs(30), || metrics().code != 0));
    // The CA rotated to one that did not sign the aggregator's certificate.
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "front-proxy-ca-next");
    let next_ca = params.self_signed(&key).unwrap().pem();
    let followed = || {
        std::fs::read_to_string(cluster.dir.join("logs/metrics-server.log"))
            .unwrap_or_default()
            .matches("following the cluster's published trust")
            .count()
    };
    let before = followed();
    publish(&|data| data["requestheader-client-ca-file"] = next_ca.clone().into());
    assert!(eventually(Duration::from_secs(30), || followed() > before));
    assert_ne!(
        metrics().code,
        0,
        "a CA that did not sign the proxy's certificate"
    );
    // Both CAs while the proxy's certificate is renewed: accepted again.
    let old_ca = published["data"]["requestheader-client-ca-file"]
        .as_str()
        .unwrap()
        .to_string();
    publish(&|data| data["requestheader-client-ca-file"] = format!("{next_ca}{old_ca}").into());
    assert!(
        eventually(Duration::from_secs(30), || metrics().code == 0),
        "{}",
        metrics().stderr
    );
    assert_eq!(cluster.child_pid("metrics-server"), Some(pid), "no restart");
}
