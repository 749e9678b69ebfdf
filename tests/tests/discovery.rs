//! Discovery against kube-apiserver 1.33's: every resource and subresource
//! of `tests/data/kube-1.33-discovery.json` (kube's own discovery documents,
//! default flags and feature gates) must be served through the front door
//! with the same kind, scope, verbs, short names, categories, singular name
//! and storageVersionHash, in `/api/v1` and `/apis/<group>/<version>` and in
//! aggregated discovery (`apidiscovery.k8s.io/v2`). The test prints the
//! table of both and fails on any difference not in [`KNOWN`]. Then the
//! resources the table added are driven with kubectl: componentstatuses,
//! ephemeral containers, resize, and the proxies: `pods/proxy` and
//! `services/proxy` carry requests to an HTTP server on this machine's
//! address, given to a pod as its IP.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use tests::{As, Cluster};

/// The accept header of aggregated discovery.
const AGGREGATED: &str =
    "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Differences from kube 1.33 kubechain keeps, each with its reason:
/// (groupVersion, resource or subresource, field, why). Each is printed;
/// one that no longer shows fails the test, so the list cannot go stale.
const KNOWN: &[(&str, &str, &str, &str)] = &[];

/// Groups kubechain serves beyond kube's defaults, by design.
const EXTRA_GROUPS: &[(&str, &str)] = &[(
    "metrics.k8s.io/v1beta1",
    "kubechain's metrics-server, registered through an APIService",
)];

/// The fields compared, as `/api/v1` and `/apis/<g>/<v>` name them.
const FIELDS: &[&str] = &[
    "kind",
    "namespaced",
    "verbs",
    "shortNames",
    "categories",
    "singularName",
    "storageVersionHash",
    "group",
    "version",
];

/// One field that differs: where, what kube serves, what kubechain serves.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Difference {
    group_version: String,
    resource: String,
    field: String,
    kube: String,
    kubechain: String,
}

fn table() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/kube-1.33-discovery.json");
    serde_json::from_slice(&std::fs::read(path).expect("the kube 1.33 table"))
        .expect("the kube 1.33 table is JSON")
}

/// A field as compared: lists as sorted sets, absent lists as empty, absent
/// strings as empty (kube omits empty `shortNames`, `categories`, …).
fn normalized(entry: &Value, field: &str) -> String {
    match (field, entry.get(field)) {
        ("verbs" | "shortNames" | "categories", v) => {
            let mut items: Vec<String> = v
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect();
            // Short names keep kube's order (kubectl prints them as given);
            // verbs and categories are sets.
            if field != "shortNames" {
                items.sort();
            }
            items.join(",")
        }
        (_, None | Some(Value::Null)) => String::new(),
        (_, Some(Value::String(s))) => s.clone(),
        (_, Some(other)) => other.to_string(),
    }
}

fn path_of(group_version: &str) -> String {
    if group_version == "v1" {
        "/api/v1".into()
    } else {
        format!("/apis/{group_version}")
    }
}

/// Compares one APIResourceList entry by entry.
fn compare_list(group_version: &str, kube: &[Value], ours: &[Value]) -> Vec<Difference> {
    let ours: BTreeMap<&str, &Value> = ours
        .iter()
        .filter_map(|r| Some((r["name"].as_str()?, r)))
        .collect();
    let mut diffs = Vec::new();
    for want in kube {
        let name = want["name"].as_str().unwrap_or_default();
        let Some(got) = ours.get(name) else {
            diffs.push(Difference {
                group_version: group_version.into(),
                resource: name.into(),
                field: "served".into(),
                kube: "yes".into(),
                kubechain: "no".into(),
            });
            continue;
        };
        for field in FIELDS {
            let (k, c) = (normalized(want, field), normalized(got, field));
            if k != c {
                diffs.push(Difference {
                    group_version: group_version.into(),
                    resource: name.into(),
                    field: (*field).into(),
                    kube: k,
                    kubechain: c,
                });
            }
        }
    }
    diffs
}

/// The aggregated-discovery form kube serves for one APIResourceList:
/// resource name → (field → value), subresources as `parent/sub`.
fn aggregated_expected(resources: &[Value]) -> BTreeMap<String, BTreeMap<&'static str, String>> {
    let mut out = BTreeMap::new();
    for r in resources {
        let name = r["name"].as_str().unwrap_or_default().to_string();
        let mut fields = BTreeMap::new();
        let kind_group = normalized(r, "group");
        let kind_version = normalized(r, "version");
        fields.insert(
            "responseKind",
            format!("{kind_group}/{kind_version}/{}", normalized(r, "kind")),
        );
        fields.insert("verbs", normalized(r, "verbs"));
        if !name.contains('/') {
            let scope = if r["namespaced"] == true {
                "Namespaced"
            } else {
                "Cluster"
            };
            fields.insert("scope", scope.into());
            fields.insert("shortNames", normalized(r, "shortNames"));
            fields.insert("categories", normalized(r, "categories"));
            fields.insert("singularResource", normalized(r, "singularName"));
        }
        out.insert(name, fields);
    }
    out
}

/// What aggregated discovery serves for one group/version, in the same form.
fn aggregated_served(version: &Value) -> BTreeMap<String, BTreeMap<&'static str, String>> {
    let mut out = BTreeMap::new();
    let kind = |k: &Value| {
        format!(
            "{}/{}/{}",
            k["group"].as_str().unwrap_or_default(),
            k["version"].as_str().unwrap_or_default(),
            k["kind"].as_str().unwrap_or_default()
        )
    };
    for r in version["resources"].as_array().into_iter().flatten() {
        let name = r["resource"].as_str().unwrap_or_default().to_string();
        let mut fields = BTreeMap::new();
        fields.insert("responseKind", kind(&r["responseKind"]));
        fields.insert("verbs", normalized(r, "verbs"));
        fields.insert("scope", normalized(r, "scope"));
        fields.insert("shortNames", normalized(r, "shortNames"));
        fields.insert("categories", normalized(r, "categories"));
        fields.insert("singularResource", normalized(r, "singularResource"));
        for sub in r["subresources"].as_array().into_iter().flatten() {
            let mut s = BTreeMap::new();
            s.insert("responseKind", kind(&sub["responseKind"]));
            s.insert("verbs", normalized(sub, "verbs"));
            out.insert(
                format!("{name}/{}", sub["subresource"].as_str().unwrap_or_default()),
                s,
            );
        }
        out.insert(name, fields);
    }
    out
}

fn compare_aggregated(
    group_version: &str,
    kube: &[Value],
    version: Option<&Value>,
) -> Vec<Difference> {
    let want = aggregated_expected(kube);
    let got = version.map(aggregated_served).unwrap_or_default();
    let mut diffs = Vec::new();
    for (name, fields) in &want {
        let Some(served) = got.get(name) else {
            diffs.push(Difference {
                group_version: group_version.into(),
                resource: name.clone(),
                field: "aggregated: served".into(),
                kube: "yes".into(),
                kubechain: "no".into(),
            });
            continue;
        };
        for (field, value) in fields {
            let ours = served.get(field).cloned().unwrap_or_default();
            if &ours != value {
                diffs.push(Difference {
                    group_version: group_version.into(),
                    resource: name.clone(),
                    field: format!("aggregated: {field}"),
                    kube: value.clone(),
                    kubechain: ours,
                });
            }
        }
    }
    diffs
}

/// The version entry of aggregated discovery for a group/version.
fn aggregated_version<'a>(lists: &'a [Value], group_version: &str) -> Option<&'a Value> {
    let (group, version) = group_version
        .rsplit_once('/')
        .unwrap_or(("", group_version));
    lists
        .iter()
        .flat_map(|l| l["items"].as_array().into_iter().flatten())
        .filter(|g| g["metadata"]["name"].as_str().unwrap_or_default() == group)
        .flat_map(|g| g["versions"].as_array().into_iter().flatten())
        .find(|v| v["version"] == version)
}

/// Every group/version the front door lists in `/api` and `/apis`.
fn served_group_versions(cluster: &Cluster) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = BTreeSet::from(["v1".to_string()]);
    let apis = cluster.curl(As::Admin, "GET", "/apis", &[], None);
    assert_eq!(apis.code, 200, "{}", apis.text);
    for group in apis.json["groups"].as_array().into_iter().flatten() {
        for version in group["versions"].as_array().into_iter().flatten() {
            if let Some(gv) = version["groupVersion"].as_str() {
                out.insert(gv.to_string());
            }
        }
    }
    out
}

#[test]
fn discovery_matches_kube_1_33() {
    let cluster = Cluster::start();
    let table = table();
    let kube: Vec<(String, Vec<Value>)> = table["groupVersions"]
        .as_array()
        .expect("groupVersions")
        .iter()
        .map(|gv| {
            (
                gv["groupVersion"].as_str().unwrap_or_default().to_string(),
                gv["resources"].as_array().cloned().unwrap_or_default(),
            )
        })
        .collect();
    // metrics.k8s.io is proxied: wait for it so the extras are listed whole.
    tests::eventually(std::time::Duration::from_secs(20), || {
        cluster.apiservice_available("v1beta1.metrics.k8s.io")
    });
    let aggregated: Vec<Value> = ["/api", "/apis"]
        .iter()
        .map(|path| {
            let answer = cluster.curl(As::Admin, "GET", path, &[AGGREGATED], None);
            assert_eq!(answer.code, 200, "{path}: {}", answer.text);
            assert_eq!(answer.json["kind"], "APIGroupDiscoveryList", "{path}");
            answer.json
        })
        .collect();

    let mut diffs = Vec::new();
    let mut rows = Vec::new();
    for (group_version, resources) in &kube {
        let answer = cluster.curl(As::Admin, "GET", &path_of(group_version), &[], None);
        let ours: Vec<Value> = if answer.code == 200 {
            answer.json["resources"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut here = compare_list(group_version, resources, &ours);
        here.extend(compare_aggregated(
            group_version,
            resources,
            aggregated_version(&aggregated, group_version),
        ));
        let ours_names: BTreeSet<&str> = ours.iter().filter_map(|r| r["name"].as_str()).collect();
        for r in resources {
            let name = r["name"].as_str().unwrap_or_default();
            let mine: Vec<&Difference> = here.iter().filter(|d| d.resource == name).collect();
            let state = if !ours_names.contains(name) {
                "MISSING".to_string()
            } else if mine.is_empty() {
                "same".to_string()
            } else {
                let fields: Vec<&str> = mine.iter().map(|d| d.field.as_str()).collect();
                format!("differs: {}", fields.join(", "))
            };
            rows.push(format!(
                "| {group_version} | {name} | {} | {} | {state} |",
                normalized(r, "kind"),
                normalized(r, "storageVersionHash"),
            ));
        }
        // What kubechain serves in a kube group/version that kube does not.
        let kube_names: BTreeSet<&str> = resources
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        for extra in ours_names.difference(&kube_names) {
            rows.push(format!(
                "| {group_version} | {extra} | | | EXTRA (not in kube 1.33) |"
            ));
            diffs.push(Difference {
                group_version: group_version.clone(),
                resource: (*extra).to_string(),
                field: "served".into(),
                kube: "no".into(),
                kubechain: "yes".into(),
            });
        }
        diffs.extend(here);
    }
    // Whole group/versions kubechain serves that kube 1.33 does not by default.
    let kube_gvs: BTreeSet<String> = kube.iter().map(|(gv, _)| gv.clone()).collect();
    let served = served_group_versions(&cluster);
    let mut extras = Vec::new();
    for gv in served.difference(&kube_gvs) {
        match EXTRA_GROUPS.iter().find(|(g, _)| g == gv) {
            Some((_, why)) => extras.push(format!("{gv}: {why}")),
            None => diffs.push(Difference {
                group_version: gv.clone(),
                resource: "*".into(),
                field: "served".into(),
                kube: "no".into(),
                kubechain: "yes".into(),
            }),
        }
    }

    println!("kube 1.33 default resources against kubechain's:\n");
    println!("| groupVersion | resource | kind | storageVersionHash | kubechain |");
    println!("| --- | --- | --- | --- | --- |");
    for row in &rows {
        println!("{row}");
    }
    println!("\nextra group/versions (allowed):");
    for extra in &extras {
        println!("  {extra}");
    }
    diffs.sort();
    tests::judge_differences(
        &diffs,
        KNOWN,
        |k, d| k.0 == d.group_version && k.1 == d.resource && k.2 == d.field,
        |k| k.3,
    );
    assert!(
        extras.iter().any(|e| e.starts_with("metrics.k8s.io/")),
        "metrics.k8s.io is served: {served:?}"
    );
}

/// The table itself: every storageVersionHash is the hash of the
/// `<group>/<version>/<kind>` kube stores the resource as (`storedAs`), so
/// a mistyped one cannot pass unnoticed.
#[test]
fn table_is_well_formed() {
    let table = table();
    let mut seen = BTreeSet::new();
    for gv in table["groupVersions"].as_array().expect("groupVersions") {
        let group_version = gv["groupVersion"].as_str().expect("groupVersion");
        assert!(gv["source"].is_string(), "{group_version}: a source");
        for r in gv["resources"].as_array().expect("resources") {
            let name = r["name"].as_str().expect("name");
            assert!(
                seen.insert(format!("{group_version} {name}")),
                "{group_version} {name} twice"
            );
            let verbs = normalized(r, "verbs");
            assert!(!verbs.is_empty(), "{group_version} {name}: verbs");
            if let Some(hash) = r["storageVersionHash"].as_str() {
                use base64::Engine as _;
                let stored = r["storedAs"].as_str().expect("storedAs beside a hash");
                let digest = ring::digest::digest(&ring::digest::SHA256, stored.as_bytes());
                let want = base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8]);
                assert_eq!(hash, want, "{group_version} {name}: the hash of {stored}");
                assert!(verbs.contains("watch"), "{group_version} {name}: stored");
            }
            if name.contains('/') {
                assert_eq!(r["singularName"], "", "{group_version} {name}");
            }
        }
    }
    assert_eq!(seen.len(), 105, "entries in the table");
}

#[test]
fn the_added_resources_work_with_kubectl() {
    let cluster = Cluster::start();
    // componentstatuses: read-only, computed; etcd answers.
    let listed = cluster.kubectl(&["get", "componentstatuses"]);
    let out = listed.ok().to_string();
    // Every answer for the deprecated API says so, as kube's does.
    assert!(
        listed
            .stderr
            .contains("Warning: v1 ComponentStatus is deprecated in v1.19+"),
        "{}",
        listed.stderr
    );
    let etcd = out
        .lines()
        .find(|l| l.starts_with("etcd-0"))
        .unwrap_or_default();
    assert!(etcd.contains("Healthy") && etcd.contains("ok"), "{out}");
    let cs = cluster
        .kubectl(&["get", "cs", "etcd-0", "-o", "json"])
        .json();
    assert_eq!(cs["kind"], "ComponentStatus");
    assert_eq!(
        cs["conditions"][0],
        json!({"type": "Healthy", "status": "True", "message": "ok"})
    );
    // In core v1's OpenAPI beside the stored kinds, which stay there.
    for what in [
        "componentstatuses.conditions",
        "pods.spec.ephemeralContainers",
    ] {
        assert!(
            cluster.kubectl(&["explain", what]).ok().contains("FIELD"),
            "{what}"
        );
    }
    let refused = cluster.kubectl(&["delete", "cs", "etcd-0"]);
    assert!(
        refused
            .err()
            .contains("the server does not allow this method"),
        "{}",
        refused.stderr
    );

    let pod = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "app", "image": "nginx",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}"#;
    cluster.kubectl_stdin(&["create", "-f", "-"], pod).ok();

    // kubectl debug: a patch of pods/ephemeralcontainers.
    cluster
        .kubectl(&[
            "debug",
            "web",
            "--image=busybox",
            "--container=debugger",
            "--target=app",
        ])
        .ok();
    let got = cluster.kubectl(&["get", "pod", "web", "-o", "json"]).json();
    assert_eq!(got["spec"]["ephemeralContainers"][0]["name"], "debugger");
    assert_eq!(
        got["spec"]["ephemeralContainers"][0]["targetContainerName"],
        "app"
    );
    assert_eq!(
        got["spec"]["ephemeralContainers"][0]["terminationMessagePolicy"], "File",
        "defaulted"
    );
    // The main resource may not add them; the subresource may not change them.
    let direct = cluster.kubectl(&["patch", "pod", "web", "--type=json", "-p",
        r#"[{"op": "add", "path": "/spec/ephemeralContainers/-", "value": {"name": "x", "image": "busybox"}}]"#]);
    assert!(
        direct
            .err()
            .contains("Forbidden: pod updates may not change fields"),
        "{}",
        direct.stderr
    );
    let changed = cluster.kubectl(&[
        "patch",
        "pod",
        "web",
        "--subresource=ephemeralcontainers",
        "--type=json",
        "-p",
        r#"[{"op": "replace", "path": "/spec/ephemeralContainers/0/image", "value": "alpine"}]"#,
    ]);
    assert!(
        changed.err().contains(r#"spec.ephemeralContainers: Forbidden: existing ephemeral containers "debugger" may not be changed"#),
        "{}",
        changed.stderr
    );
    let sub = cluster
        .kubectl(&[
            "get",
            "pod",
            "web",
            "--subresource=ephemeralcontainers",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(sub["kind"], "Pod");

    // In-place resize through pods/resize: cpu changes, nothing else does.
    cluster
        .kubectl(&["patch", "pod", "web", "--subresource=resize", "-p",
            r#"{"spec": {"containers": [{"name": "app", "image": "ignored", "resources": {"requests": {"cpu": "200m"}}}]}}"#])
        .ok();
    let got = cluster.kubectl(&["get", "pod", "web", "-o", "json"]).json();
    assert_eq!(
        got["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "200m"
    );
    assert_eq!(got["spec"]["containers"][0]["image"], "nginx");
    let other = cluster.kubectl(&["patch", "pod", "web", "--subresource=resize", "-p",
        r#"{"spec": {"containers": [{"name": "app", "resources": {"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}}]}}"#]);
    assert!(
        other
            .err()
            .contains("only cpu and memory resources are mutable"),
        "{}",
        other.stderr
    );
    let plain = cluster.kubectl(&["patch", "pod", "web", "-p",
        r#"{"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "300m"}}}]}}"#]);
    assert!(
        plain
            .err()
            .contains("Forbidden: pod updates may not change fields"),
        "{}",
        plain.stderr
    );

    // The proxies: no endpoints behind a service, no IP for a pod.
    cluster
        .kubectl(&["create", "service", "clusterip", "web", "--tcp=80:80"])
        .ok();
    let answer = cluster.curl(
        As::Admin,
        "GET",
        "/api/v1/namespaces/default/services/web/proxy/",
        &[],
        None,
    );
    assert_eq!(answer.code, 503, "{}", answer.text);
    assert_eq!(answer.json["reason"], "ServiceUnavailable");
    assert_eq!(
        answer.json["message"],
        r#"no endpoints available for service "web""#
    );
    let missing = cluster.curl(
        As::Admin,
        "GET",
        "/api/v1/namespaces/default/services/nope/proxy/",
        &[],
        None,
    );
    assert_eq!(missing.code, 404, "{}", missing.text);
    assert_eq!(missing.json["message"], r#"services "nope" not found"#);
    let pod_proxy = cluster.curl(
        As::Admin,
        "GET",
        "/api/v1/namespaces/default/pods/web/proxy/",
        &[],
        None,
    );
    assert_eq!(pod_proxy.code, 400, "no pod IP: {}", pod_proxy.text);
}

/// This machine's first global unicast IPv4 address (what a pod IP would
/// be; kube proxies to no loopback address).
fn host_ip() -> String {
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .expect("hostname on PATH");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|ip| {
            ip.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| !ip.is_loopback() && !ip.is_link_local())
        })
        .expect("a non-loopback IPv4 address on this machine")
        .to_string()
}

/// A raw request through the front door with curl `-i`: status, headers (lowercase names) and body.
fn curl_head(
    cluster: &Cluster,
    who: As<'_>,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, String, Value) {
    let mut cmd = cluster.curl_command(who);
    cmd.args([
        "-i",
        "--path-as-is",
        "--max-time",
        "30",
        "-X",
        method,
        "-H",
        "X-Custom: custom-value",
    ]);
    if let Some(body) = body {
        cmd.args(["-H", "Content-Type: text/plain", "--data-binary", body]);
    }
    let out = cmd
        .arg(format!("https://localhost:{}{path}", cluster.port))
        .output()
        .expect("curl on PATH");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (
        code,
        head.to_ascii_lowercase(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// `pods/proxy` and `services/proxy` send a request on to the pod's IP,
/// or to the address of the service's Endpoints that names a pod holding
/// it, and bring its answer back (status, headers, body); the caller's
/// credentials stay at the front door; only who may use the proxy
/// subresource reaches it; kube's refusals for everything else.
#[test]
fn pods_and_services_proxy_to_their_addresses() {
    let cluster = Cluster::start();
    let ip = host_ip();
    let port = tests::free_port();
    let _echo = tests::spawn_ready(
        std::process::Command::new("python3")
            .arg(tests::workspace().join("tests/python/echo_server.py"))
            .arg(port.to_string()),
    );
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: web, namespace: default}}\n\
         spec: {{containers: [{{name: app, image: echo, ports: [{{containerPort: {port}}}]}}]}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {{name: local, namespace: default}}\n\
         spec: {{containers: [{{name: app, image: echo}}]}}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: echo, namespace: default}}\n\
         spec: {{ports: [{{name: http, port: 80, targetPort: {port}}}]}}\n---\n\
         apiVersion: v1\nkind: Endpoints\nmetadata: {{name: echo, namespace: default}}\n\
         subsets: [{{addresses: [{{ip: {ip}, targetRef: {{kind: Pod, namespace: default, name: web}}}}], ports: [{{name: http, port: {port}}}]}}]\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: stray, namespace: default}}\n\
         spec: {{ports: [{{name: http, port: 80, targetPort: {port}}}]}}\n---\n\
         apiVersion: v1\nkind: Endpoints\nmetadata: {{name: stray, namespace: default}}\n\
         subsets: [{{addresses: [{{ip: {ip}, targetRef: {{kind: Pod, namespace: default, name: nobody}}}}], ports: [{{name: http, port: {port}}}]}}]\n"
    );
    cluster.kubectl_stdin(&["apply", "-f", "-"], &manifest).ok();
    for (pod, pod_ip) in [("web", ip.as_str()), ("local", "127.0.0.1")] {
        let status =
            format!(r#"{{"status": {{"podIP": "{pod_ip}", "podIPs": [{{"ip": "{pod_ip}"}}]}}}}"#);
        cluster
            .kubectl(&[
                "patch",
                "pod",
                pod,
                "--subresource=status",
                "--type=merge",
                "-p",
                &status,
            ])
            .ok();
    }

    // A pod, at its first declared port, by kubectl.
    let seen = cluster
        .kubectl(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods/web/proxy/hello/there?x=1&y=two",
        ])
        .json();
    assert_eq!(seen["method"], "GET", "{seen}");
    assert_eq!(seen["path"], "/hello/there");
    assert_eq!(seen["query"], "x=1&y=two");

    // A write with a body, at an explicit scheme and port: status, headers and body come back.
    let (code, head, seen) = curl_head(
        &cluster,
        As::Admin,
        "POST",
        &format!("/api/v1/namespaces/default/pods/http:web:{port}/proxy/submit/"),
        Some("posted text"),
    );
    assert_eq!(code, 201, "{head}");
    assert!(head.contains("x-echo: yes"), "{head}");
    assert_eq!(
        (&seen["method"], &seen["path"], &seen["body"]),
        (&json!("POST"), &json!("/submit/"), &json!("posted text"))
    );
    assert_eq!(seen["headers"]["x-custom"], "custom-value", "{seen}");
    // The address's redirect is the caller's to follow, not the proxy's.
    let (code, head, _) = curl_head(
        &cluster,
        As::Admin,
        "GET",
        "/api/v1/namespaces/default/pods/web/proxy/redirect",
        None,
    );
    assert_eq!(code, 302, "{head}");
    assert!(head.contains("location: /elsewhere"), "{head}");
    // The bare subresource is sent to its slash, as kube does.
    let (code, head, _) = curl_head(
        &cluster,
        As::Admin,
        "GET",
        "/api/v1/namespaces/default/pods/web/proxy?a=b",
        None,
    );
    assert_eq!(code, 301, "{head}");
    assert!(
        head.contains("location: /api/v1/namespaces/default/pods/web/proxy/?a=b"),
        "{head}"
    );

    // A service, by port name and by port number, to the endpoint naming its pod.
    for id in ["echo:http", "echo:80", "http:echo:http"] {
        let seen = cluster
            .kubectl(&[
                "get",
                "--raw",
                &format!("/api/v1/namespaces/default/services/{id}/proxy/svc"),
            ])
            .json();
        assert_eq!(
            (&seen["method"], &seen["path"]),
            (&json!("GET"), &json!("/svc")),
            "{id}: {seen}"
        );
    }

    // Who may proxy: a ServiceAccount is refused until a Role lets it, and
    // its token never reaches the address.
    let token = cluster.service_account_token("prober");
    let path = "/api/v1/namespaces/default/services/echo:http/proxy/as-prober";
    let refused = cluster.curl(As::Token(&token), "GET", path, &[], None);
    assert_eq!(refused.code, 403, "{}", refused.text);
    assert!(
        refused.json["message"].as_str().is_some_and(|m| m.contains(
            r#"cannot get resource "services/proxy" in API group "" in the namespace "default""#
        )),
        "{}",
        refused.text
    );
    cluster
        .kubectl(&[
            "create",
            "role",
            "prober",
            "--verb=get",
            "--resource=services/proxy,pods/proxy",
        ])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "rolebinding",
            "prober",
            "--role=prober",
            "--serviceaccount=default:prober",
        ])
        .ok();
    assert!(
        tests::eventually(std::time::Duration::from_secs(10), || cluster
            .curl(As::Token(&token), "GET", path, &[], None)
            .code
            == 200),
        "the Role did not let the ServiceAccount proxy"
    );
    let seen = cluster.curl(As::Token(&token), "GET", path, &[], None).json;
    assert_eq!(seen["path"], "/as-prober", "{seen}");
    assert!(
        seen["headers"].get("authorization").is_none(),
        "the token reached the address: {seen}"
    );
    let write = cluster.curl(As::Token(&token), "POST", path, &[], Some(b"x"));
    assert_eq!(write.code, 403, "get does not allow create: {}", write.text);

    // kube's refusals.
    let refusal = |path: &str| {
        let answer = cluster.curl(As::Admin, "GET", path, &[], None);
        (
            answer.code,
            answer.json["message"]
                .as_str()
                .unwrap_or(&answer.text)
                .to_string(),
        )
    };
    assert_eq!(
        refusal("/api/v1/namespaces/default/pods/local/proxy/"),
        (400, "address not allowed".to_string()),
        "a loopback pod IP"
    );
    assert_eq!(
        refusal("/api/v1/namespaces/default/pods/gopher:web:70/proxy/"),
        (400, r#"invalid pod request "gopher:web:70""#.to_string())
    );
    assert_eq!(
        refusal("/api/v1/namespaces/default/services/echo:81/proxy/"),
        (
            503,
            r#"no service port 81 found for service "echo""#.to_string()
        )
    );
    assert_eq!(
        refusal("/api/v1/namespaces/default/services/stray/proxy/"),
        (
            503,
            r#"no endpoints available for service "stray""#.to_string()
        ),
        "an endpoint whose pod does not hold its IP"
    );
    let closed = tests::free_port();
    let (code, message) = refusal(&format!(
        "/api/v1/namespaces/default/pods/web:{closed}/proxy/"
    ));
    assert_eq!(
        (code, message),
        (
            500,
            format!("dial tcp {ip}:{closed}: connect: connection refused")
        )
    );
}
