//! metrics-server, called directly with curl the way the aggregator's proxy
//! calls it (front-proxy client certificate plus `X-Remote-*` headers), by
//! an admin, and with bearer tokens it asks the front door about; and
//! `kubectl top node` through the front door, allowed and refused.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use serde_json::{Value, json};
use tests::{Cluster, eventually};

/// A CA writing its certificate to `dir/<name>.crt`.
fn ca(dir: &Path, name: &str) -> Issuer<'static, KeyPair> {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    std::fs::write(
        dir.join(format!("{name}.crt")),
        params.self_signed(&key).expect("ca").pem(),
    )
    .expect("writing CA");
    Issuer::new(params, key)
}

/// Writes `dir/<file>.crt` and `.key`, signed by `issuer`.
fn issue(
    dir: &Path,
    issuer: &Issuer<'static, KeyPair>,
    file: &str,
    cn: &str,
    orgs: &[&str],
    server: bool,
) {
    let key = KeyPair::generate().expect("key");
    let sans = if server {
        vec!["localhost".to_string(), "127.0.0.1".to_string()]
    } else {
        Vec::new()
    };
    let mut params = CertificateParams::new(sans).expect("params");
    params.distinguished_name.push(DnType::CommonName, cn);
    for org in orgs {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *org);
    }
    params.extended_key_usages = vec![if server {
        ExtendedKeyUsagePurpose::ServerAuth
    } else {
        ExtendedKeyUsagePurpose::ClientAuth
    }];
    std::fs::write(
        dir.join(format!("{file}.crt")),
        params.signed_by(&key, issuer).expect("cert").pem(),
    )
    .expect("writing cert");
    std::fs::write(dir.join(format!("{file}.key")), key.serialize_pem()).expect("writing key");
}

struct Setup {
    /// The cluster's PKI directory, with the test's own certificates beside it.
    dir: PathBuf,
    port: u16,
    cluster: Cluster,
}

impl Setup {
    /// GET `path` as `client` (a certificate file stem, or none) with extra
    /// headers; the status code (0 if TLS failed) and the body.
    fn get(&self, client: Option<&str>, headers: &[&str], path: &str) -> (u16, String) {
        let (code, body) = self.get_bytes(client, headers, path);
        (code, String::from_utf8_lossy(&body).into_owned())
    }

    /// [`Setup::get`], the body as bytes.
    fn get_bytes(&self, client: Option<&str>, headers: &[&str], path: &str) -> (u16, Vec<u8>) {
        let mut curl = Command::new("curl");
        curl.args(["-sS", "-w", "\n%{http_code}", "--cacert"])
            .arg(self.dir.join("ca.crt"));
        if let Some(client) = client {
            curl.arg("--cert")
                .arg(self.dir.join(format!("{client}.crt")))
                .arg("--key")
                .arg(self.dir.join(format!("{client}.key")));
        }
        for header in headers {
            curl.args(["-H", header]);
        }
        let output = curl
            .arg(format!("https://localhost:{}{path}", self.port))
            .output()
            .expect("curl on PATH");
        let out = output.stdout;
        let split = out.iter().rposition(|b| *b == b'\n').unwrap_or(0);
        let code = String::from_utf8_lossy(&out[split..])
            .trim()
            .parse()
            .unwrap_or(0);
        (code, out[..split].to_vec())
    }

    /// GET through the "aggregator": front-proxy certificate, the admin's identity in headers.
    fn proxied(&self, path: &str, accept: &str) -> Value {
        let headers = [
            "X-Remote-User: kubernetes-admin",
            "X-Remote-Group: system:masters",
            &format!("Accept: {accept}"),
        ];
        let (code, body) = self.get_bytes(Some("front-proxy-client"), &headers, path);
        let text = String::from_utf8_lossy(&body);
        assert_eq!(code, 200, "{path}: {text}");
        if accept.starts_with("application/vnd.kubernetes.protobuf") {
            // As kube's metrics-server answers `kubectl top`: protobuf.
            assert!(body.starts_with(b"k8s\0"), "{path}: not protobuf: {text}");
            return proto::k8s::decode(&body).unwrap_or_else(|e| panic!("{path}: {e}"));
        }
        serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {text}"))
    }
}

/// An issuer from a CA's files in `dir`.
fn existing_ca(dir: &Path, name: &str) -> Issuer<'static, KeyPair> {
    let read =
        |ext: &str| std::fs::read_to_string(dir.join(format!("{name}.{ext}"))).expect("CA file");
    Issuer::from_ca_cert_pem(
        &read("crt"),
        KeyPair::from_pem(&read("key")).expect("CA key"),
    )
    .expect("CA")
}

/// A cluster (whose `kubechain up` runs metrics-server) with Node objects
/// for `extra_nodes` besides the host's, and certificates to call
/// metrics-server directly: an intruder from the front-proxy CA with
/// another name, and a forged front proxy from a CA nobody trusts.
fn start(extra_nodes: &[&str]) -> Setup {
    let cluster = Cluster::start();
    let dir = cluster.dir.join("pki");
    let front_proxy = existing_ca(&dir, "front-proxy-ca");
    let stranger = ca(&dir, "stranger-ca");
    issue(&dir, &front_proxy, "intruder", "intruder", &[], false);
    issue(&dir, &stranger, "forged", "front-proxy-client", &[], false);
    for node in extra_nodes {
        let object = json!({
            "kind": "Node", "apiVersion": "v1",
            "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux"}},
            "status": {"capacity": {"cpu": "2", "memory": "4Gi"}, "allocatable": {"cpu": "2", "memory": "4Gi"}},
        });
        cluster
            .kubectl_stdin(&["create", "-f", "-"], &object.to_string())
            .ok();
    }
    let port = cluster.ports()["metrics"].as_u64().expect("metrics port") as u16;
    let setup = Setup { dir, port, cluster };
    // Ready once the first measurement (a one-second window) exists.
    let ready = eventually(Duration::from_secs(20), || {
        setup.get(None, &[], "/readyz") == (200, "ok".to_string())
    });
    assert!(
        ready,
        "metrics-server not ready: {:?}; logs in {}",
        setup.get(None, &[], "/readyz?verbose"),
        setup.cluster.dir.display()
    );
    // And behind its APIService once the aggregator has seen it answer.
    let available = eventually(Duration::from_secs(20), || {
        setup.cluster.apiservice_available("v1beta1.metrics.k8s.io")
    });
    assert!(available, "v1beta1.metrics.k8s.io is not Available");
    setup
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .expect("host name")
        .to_string_lossy()
        .into_owned()
}

/// Parses a CPU quantity into nanocores (`187654321n`, `250m`, `2`).
fn nanocores(quantity: &str) -> Option<u64> {
    if let Some(n) = quantity.strip_suffix('n') {
        return n.parse().ok();
    }
    if let Some(m) = quantity.strip_suffix('m') {
        return m.parse::<u64>().ok().map(|m| m * 1_000_000);
    }
    quantity.parse::<u64>().ok().map(|c| c * 1_000_000_000)
}

#[test]
fn node_metrics_report_the_hosts_real_usage() {
    let host = hostname();
    let setup = start(&["other-node"]);

    let metrics = setup.proxied(
        &format!("/apis/metrics.k8s.io/v1beta1/nodes/{host}"),
        "application/vnd.kubernetes.protobuf, */*",
    );
    assert_eq!(
        (metrics["kind"].as_str(), metrics["apiVersion"].as_str()),
        (Some("NodeMetrics"), Some("metrics.k8s.io/v1beta1"))
    );
    assert_eq!(metrics["metadata"]["name"], host.as_str());
    assert_eq!(
        metrics["metadata"]["labels"]["kubernetes.io/hostname"],
        host.as_str(),
        "labels are the Node's"
    );
    let memory = metrics["usage"]["memory"].as_str().expect("memory");
    let kib: u64 = memory
        .strip_suffix("Ki")
        .and_then(|k| k.parse().ok())
        .unwrap_or_else(|| panic!("memory {memory}"));
    assert!(kib > 0, "{metrics}");
    let cpu = metrics["usage"]["cpu"].as_str().expect("cpu");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    assert!(
        nanocores(cpu).is_some_and(|n| n <= cores * 1_000_000_000),
        "cpu {cpu}"
    );
    assert!(
        metrics["window"].as_str().is_some_and(|w| w.ends_with('s')),
        "{metrics}"
    );
    assert!(
        metrics["timestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{metrics}"
    );

    // Only Nodes that exist and that this host measures: the other Node has no metrics.
    let list = setup.proxied("/apis/metrics.k8s.io/v1beta1/nodes", "application/json");
    assert_eq!(list["kind"], "NodeMetricsList");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, [host.as_str()]);
    let (code, body) = setup.get(
        Some("front-proxy-client"),
        &["X-Remote-User: admin", "X-Remote-Group: system:masters"],
        "/apis/metrics.k8s.io/v1beta1/nodes/other-node",
    );
    assert_eq!(code, 404, "{body}");
    let selected = setup.proxied(
        &format!(
            "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=kubernetes.io/hostname%3D{host}"
        ),
        "application/json",
    );
    assert_eq!(selected["items"].as_array().map(Vec::len), Some(1));
    let none = setup.proxied(
        "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=kubernetes.io/os%3Dwindows",
        "application/json",
    );
    assert_eq!(none["items"], json!([]));

    // No kubelet runs containers, so no pod has usage: empty lists, honestly.
    let pods = setup.proxied(
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
        "application/json",
    );
    assert_eq!(
        (pods["kind"].as_str(), &pods["items"]),
        (Some("PodMetricsList"), &json!([]))
    );
    assert_eq!(
        setup.proxied("/apis/metrics.k8s.io/v1beta1/pods", "application/json")["items"],
        json!([])
    );

    // kubectl get nodes.metrics.k8s.io asks for a Table.
    let table = setup.proxied(
        "/apis/metrics.k8s.io/v1beta1/nodes",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    );
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(columns, ["Name", "CPU", "Memory", "Window"]);
    assert_eq!(table["rows"][0]["cells"][2], memory);
}

#[test]
fn only_the_front_proxy_may_name_the_user() {
    let host = hostname();
    let setup = start(&[]);
    let path = format!("/apis/metrics.k8s.io/v1beta1/nodes/{host}");
    let admin_headers = [
        "X-Remote-User: kubernetes-admin",
        "X-Remote-Group: system:masters",
    ];

    // Without the front-proxy certificate, identity headers are not trusted.
    let (code, body) = setup.get(None, &admin_headers, &path);
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("\"reason\":\"Unauthorized\""), "{body}");
    // A certificate from the front-proxy CA whose CN is not an allowed name.
    assert_eq!(setup.get(Some("intruder"), &admin_headers, &path).0, 401);
    // A certificate with the right CN from a CA nobody trusts fails the handshake (or is refused).
    assert!(matches!(
        setup.get(Some("forged"), &admin_headers, &path).0,
        0 | 401
    ));
    // The front proxy without a user name authenticates nobody.
    assert_eq!(
        setup
            .get(
                Some("front-proxy-client"),
                &["X-Remote-Group: system:masters"],
                &path
            )
            .0,
        401
    );
    // The front proxy's user is authorized as that user: not an admin, no metrics.
    let (code, body) = setup.get(
        Some("front-proxy-client"),
        &["X-Remote-User: jane", "X-Remote-Group: developers"],
        &path,
    );
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("User \\\"jane\\\" cannot get resource \\\"nodes\\\" in API group \\\"metrics.k8s.io\\\""), "{body}");
    // An admin certificate from the cluster CA works directly; its headers are ignored.
    assert_eq!(
        setup.get(Some("admin"), &["X-Remote-User: jane"], &path).0,
        200
    );
    assert_eq!(setup.get(Some("admin"), &[], "/version").0, 200);
}

#[test]
fn discovery_and_openapi_describe_the_metrics_group() {
    let setup = start(&[]);
    let aggregated =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let apis = setup.proxied("/apis", aggregated);
    assert_eq!(apis["kind"], "APIGroupDiscoveryList", "{apis}");
    let group = &apis["items"][0];
    assert_eq!(group["metadata"]["name"], "metrics.k8s.io");
    let resources: Vec<&str> = group["versions"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["resource"].as_str())
        .collect();
    assert_eq!(
        (group["versions"][0]["version"].as_str(), resources),
        (Some("v1beta1"), vec!["nodes", "pods"])
    );

    let legacy = setup.proxied("/apis", "application/json");
    assert_eq!(
        legacy["groups"][0]["preferredVersion"]["groupVersion"], "metrics.k8s.io/v1beta1",
        "{legacy}"
    );
    assert_eq!(
        setup.proxied("/apis/metrics.k8s.io", "application/json")["kind"],
        "APIGroup"
    );
    let list = setup.proxied("/apis/metrics.k8s.io/v1beta1", "application/json");
    let entries: Vec<(String, bool, Value)> = list["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_string(),
                r["namespaced"] == true,
                r["verbs"].clone(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("nodes".into(), false, json!(["get", "list", "watch"])),
            ("pods".into(), true, json!(["get", "list", "watch"]))
        ]
    );

    let index = setup.proxied("/openapi/v3", "application/json");
    let url = index["paths"]["apis/metrics.k8s.io/v1beta1"]["serverRelativeURL"]
        .as_str()
        .expect("metrics document")
        .to_string();
    let doc = setup.proxied(&url, "application/json");
    let schema =
        &doc["components"]["schemas"]["io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics"];
    assert_eq!(
        schema["x-kubernetes-group-version-kind"],
        json!([{"group": "metrics.k8s.io", "kind": "NodeMetrics", "version": "v1beta1"}])
    );
    assert!(
        doc["components"]["schemas"]["io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetricsList"]
            .is_object()
    );
    assert!(
        doc["paths"]["/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/{name}"]["get"]
            .is_object(),
        "{}",
        doc["paths"]
    );

    for path in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(setup.get(None, &[], path), (200, "ok".to_string()));
    }
    assert!(setup.get(None, &[], "/version").1.contains("gitVersion"));
}

/// A ServiceAccount in `default`, bound cluster-wide to `role` (if any);
/// its token.
fn service_account(setup: &Setup, name: &str, role: Option<&str>) -> String {
    let cluster = &setup.cluster;
    cluster.kubectl(&["create", "serviceaccount", name]).ok();
    if let Some(role) = role {
        cluster
            .kubectl(&[
                "create",
                "clusterrolebinding",
                name,
                &format!("--clusterrole={role}"),
                &format!("--serviceaccount=default:{name}"),
            ])
            .ok();
    }
    cluster
        .kubectl(&["create", "token", name])
        .ok()
        .trim()
        .to_string()
}

#[test]
fn metrics_server_leaves_its_decisions_to_the_front_door() {
    let host = hostname();
    let setup = start(&[]);
    let cluster = &setup.cluster;
    cluster
        .kubectl(&[
            "create",
            "clusterrole",
            "node-metrics",
            "--verb=get,list",
            "--resource=nodes.metrics.k8s.io,nodes",
        ])
        .ok();
    let reader = service_account(&setup, "reader", Some("node-metrics"));
    let stranger = service_account(&setup, "stranger", None);
    let path = format!("/apis/metrics.k8s.io/v1beta1/nodes/{host}");

    // Bearer tokens straight to metrics-server: it asks the front door who
    // they are (TokenReview) and what they may do (SubjectAccessReview).
    let bearer = |token: &str| format!("Authorization: Bearer {token}");
    let (code, body) = setup.get(None, &[&bearer(&reader)], &path);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"kind\":\"NodeMetrics\""), "{body}");
    let (code, body) = setup.get(None, &[&bearer(&stranger)], &path);
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("User \\\"system:serviceaccount:default:stranger\\\" cannot get resource \\\"nodes\\\" in API group \\\"metrics.k8s.io\\\""),
        "{body}"
    );
    assert_eq!(setup.get(None, &[&bearer("not-a-token")], &path).0, 401);
    // The front proxy's user is decided the same way.
    let (code, body) = setup.get(
        Some("front-proxy-client"),
        &[
            "X-Remote-User: system:serviceaccount:default:reader",
            "X-Remote-Group: system:serviceaccounts",
        ],
        &path,
    );
    assert_eq!(code, 200, "{body}");

    // kubectl top node through the front door, as each account.
    let reader_config = cluster.token_kubeconfig("reader", &reader, "default");
    let top = cluster.kubectl_with(&reader_config, &["top", "node"]);
    assert!(top.ok().contains(&host), "{}", top.stdout);
    assert!(top.stdout.contains("CPU(cores)"), "{}", top.stdout);
    let stranger_config = cluster.token_kubeconfig("stranger", &stranger, "default");
    let refused = cluster.kubectl_with(&stranger_config, &["top", "node"]);
    assert!(
        refused.err().contains("nodes.metrics.k8s.io is forbidden: User \"system:serviceaccount:default:stranger\" cannot list resource \"nodes\" in API group \"metrics.k8s.io\" at the cluster scope"),
        "{}",
        refused.stderr
    );
}

#[test]
fn a_watch_on_node_metrics_sees_each_new_measurement() {
    let host = hostname();
    let setup = start(&[]);
    let cluster = &setup.cluster;
    let list = cluster
        .kubectl(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"])
        .json();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("a list resourceVersion")
        .to_string();
    let first = list["items"][0]["timestamp"].as_str().unwrap().to_string();
    // The next measurement (every 10 s) arrives as a MODIFIED event.
    let watched = cluster.kubectl(&[
        "get",
        "--raw",
        &format!(
            "/apis/metrics.k8s.io/v1beta1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=30"
        ),
    ]);
    let events = watched.events();
    let modified = events
        .iter()
        .find(|e| e["type"] == "MODIFIED")
        .unwrap_or_else(|| panic!("no MODIFIED event in {events:?}"));
    assert_eq!(modified["object"]["kind"], "NodeMetrics");
    assert_eq!(modified["object"]["metadata"]["name"], host.as_str());
    assert_ne!(modified["object"]["timestamp"].as_str().unwrap(), first);
    let event_rv: u64 = modified["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(event_rv > rv.parse::<u64>().unwrap());
    // Writes are not served: the metrics are the server's.
    let refused = cluster.kubectl(&[
        "delete",
        "--raw",
        &format!("/apis/metrics.k8s.io/v1beta1/nodes/{host}"),
    ]);
    assert!(
        refused.err().contains("MethodNotAllowed") || refused.stderr.contains("not allowed"),
        "{}",
        refused.stderr
    );
}
