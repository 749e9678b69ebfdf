//! Discovery against kube-apiserver 1.33's: every resource and subresource
//! of `tests/data/kube-1.33-discovery.json` (kube's own discovery documents,
//! default flags and feature gates) must be served through the front door
//! with the same kind, scope, verbs, short names, categories, singular name
//! and storageVersionHash, in `/api/v1` and `/apis/<group>/<version>` and in
//! aggregated discovery (`apidiscovery.k8s.io/v2`). The test prints the
//! table of both and fails on any difference not in [`KNOWN`]. Then the
//! resources the table added are driven with kubectl: componentstatuses,
//! ephemeral containers, resize, and the proxies.

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
    let mut allowed = Vec::new();
    let mut failures = Vec::new();
    for d in &diffs {
        match KNOWN
            .iter()
            .find(|k| k.0 == d.group_version && k.1 == d.resource && k.2 == d.field)
        {
            Some(known) => allowed.push(format!("{d:?}\n      because {}", known.3)),
            None => failures.push(format!("{d:?}")),
        }
    }
    let stale: Vec<String> = KNOWN
        .iter()
        .filter(|k| {
            !diffs
                .iter()
                .any(|d| k.0 == d.group_version && k.1 == d.resource && k.2 == d.field)
        })
        .map(|k| format!("{k:?}"))
        .collect();
    println!("\nknown differences (allow-listed): {}", allowed.len());
    for a in &allowed {
        println!("  {a}");
    }
    println!("\ndifferences: {}", failures.len());
    for f in &failures {
        println!("  {f}");
    }
    assert!(
        stale.is_empty(),
        "allow-listed differences that no longer show (remove them): {stale:#?}"
    );
    assert!(
        failures.is_empty(),
        "{} differences from kube 1.33 (the table above)",
        failures.len()
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

    // The proxies: no endpoints behind a service, no kubelet behind a pod.
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
