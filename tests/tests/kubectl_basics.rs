//! The foundation, end to end through the aggregator with the stock kubectl:
//! namespaces, configmaps and secrets; apply, label, annotate, patch; watch;
//! kubectl's error messages; namespace deletion; restart; what etcd holds.

use std::io::Read;
use std::time::Duration;

use serde_json::Value;
use tests::{Cluster, eventually};

const APPLIED_V1: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: applied
  labels: {tier: one}
data: {a: \"1\", b: \"2\"}
";

const APPLIED_V2: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: applied
  labels: {tier: two}
data: {a: \"1\", c: \"3\"}
";

#[test]
fn configmaps_through_every_write_verb() {
    let cluster = Cluster::start();
    // `create configmap` sends a protobuf body.
    assert_eq!(
        cluster
            .kubectl(&["create", "configmap", "pb", "--from-literal=greeting=hello"])
            .ok()
            .trim(),
        "configmap/pb created"
    );
    let pb = cluster
        .kubectl(&["get", "configmap", "pb", "-o", "json"])
        .json();
    assert_eq!(pb["data"]["greeting"], "hello");
    assert_eq!(pb["metadata"]["namespace"], "default");
    assert!(
        pb["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36)
    );
    assert!(pb["metadata"]["creationTimestamp"].is_string());

    // apply twice, changing and removing a key and a label.
    assert!(
        cluster
            .kubectl_stdin(&["apply", "-f", "-"], APPLIED_V1)
            .ok()
            .contains("configmap/applied created")
    );
    assert!(
        cluster
            .kubectl_stdin(&["apply", "-f", "-"], APPLIED_V2)
            .ok()
            .contains("configmap/applied configured")
    );
    let applied = cluster
        .kubectl(&["get", "cm", "applied", "-o", "json"])
        .json();
    assert_eq!(applied["data"], serde_json::json!({"a": "1", "c": "3"}));
    assert_eq!(
        applied["metadata"]["labels"],
        serde_json::json!({"tier": "two"})
    );

    cluster
        .kubectl(&["label", "cm", "applied", "env=prod"])
        .ok();
    cluster
        .kubectl(&["annotate", "cm", "applied", "note=hi"])
        .ok();
    cluster
        .kubectl(&[
            "patch",
            "cm",
            "applied",
            "--type=merge",
            "-p",
            r#"{"data":{"merged":"m"}}"#,
        ])
        .ok();
    cluster
        .kubectl(&[
            "patch",
            "cm",
            "applied",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/data/json","value":"j"},{"op":"remove","path":"/data/a"}]"#,
        ])
        .ok();
    cluster
        .kubectl(&[
            "patch",
            "cm",
            "applied",
            "-p",
            r#"{"data":{"strategic":"s","c":null}}"#,
        ])
        .ok();
    let patched = cluster
        .kubectl(&["get", "cm", "applied", "-o", "json"])
        .json();
    assert_eq!(
        patched["data"],
        serde_json::json!({"merged": "m", "json": "j", "strategic": "s"})
    );
    assert_eq!(patched["metadata"]["labels"]["env"], "prod");
    assert_eq!(patched["metadata"]["annotations"]["note"], "hi");
    let rv_before: i64 = patched["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    // What etcd holds: JSON under kube-apiserver's key, without resourceVersion.
    let stored = cluster.etcdctl(&[
        "get",
        "/registry/configmaps/default/applied",
        "--print-value-only",
    ]);
    let stored: Value = serde_json::from_str(stored.ok().trim()).expect("stored JSON");
    assert_eq!(stored["data"]["strategic"], "s");
    assert!(stored["metadata"].get("resourceVersion").is_none());
    let revision = cluster
        .etcdctl(&["get", "/registry/configmaps/default/applied", "-w", "json"])
        .json();
    assert_eq!(revision["kvs"][0]["mod_revision"].as_i64(), Some(rv_before));

    // dry run changes nothing.
    cluster
        .kubectl(&[
            "patch",
            "cm",
            "applied",
            "--dry-run=server",
            "-p",
            r#"{"data":{"dry":"run"}}"#,
        ])
        .ok();
    let after = cluster
        .kubectl(&["get", "cm", "applied", "-o", "json"])
        .json();
    assert!(after["data"].get("dry").is_none());
    assert_eq!(
        after["metadata"]["resourceVersion"],
        patched["metadata"]["resourceVersion"]
    );

    assert_eq!(
        cluster.kubectl(&["delete", "cm", "applied"]).ok().trim(),
        "configmap \"applied\" deleted"
    );
    assert!(
        cluster
            .etcdctl(&["get", "/registry/configmaps/default/applied"])
            .ok()
            .is_empty()
    );
}

/// Python 3.13's default TLS context verifies strictly (X.509 strict:
/// an Authority Key Identifier on every certificate): the front door's
/// certificate passes it, and so does the admin's it presents. Tokens are
/// read after a bearer scheme in any case.
#[test]
fn the_front_door_passes_a_strict_tls_client_and_reads_tokens_as_kube() {
    let cluster = Cluster::start();
    let pki = cluster.dir.join("pki");
    let script = format!(
        "import ssl, urllib.request\n\
         ctx = ssl.create_default_context(cafile='{ca}')\n\
         ctx.verify_flags |= ssl.VERIFY_X509_STRICT\n\
         ctx.load_cert_chain('{cert}', '{key}')\n\
         print(urllib.request.urlopen('https://127.0.0.1:{port}/api/v1/namespaces/default', context=ctx).status)\n",
        ca = pki.join("ca.crt").display(),
        cert = pki.join("admin.crt").display(),
        key = pki.join("admin.key").display(),
        port = cluster.port,
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "200",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The bearer scheme in any case, as kube reads it.
    let token = cluster.service_account_token("reader");
    for scheme in ["Bearer", "bearer"] {
        let who = cluster.curl(
            tests::As::Anonymous,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &[
                &format!("Authorization: {scheme} {token}"),
                "Content-Type: application/json",
            ],
            Some(br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#),
        );
        assert_eq!(
            who.json["status"]["userInfo"]["username"], "system:serviceaccount:default:reader",
            "{scheme}: {}",
            who.text
        );
    }
}

#[test]
fn kubectl_error_messages() {
    let cluster = Cluster::start();
    cluster.kubectl(&["create", "configmap", "taken"]).ok();
    assert_eq!(
        cluster
            .kubectl(&["create", "configmap", "taken"])
            .err()
            .trim(),
        "error: failed to create configmap: configmaps \"taken\" already exists"
    );
    assert_eq!(
        cluster
            .kubectl_stdin(
                &["create", "-f", "-"],
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: taken}\n"
            )
            .err()
            .trim(),
        "Error from server (AlreadyExists): error when creating \"STDIN\": configmaps \"taken\" already exists"
    );
    assert_eq!(
        cluster.kubectl(&["get", "configmap", "nope"]).err().trim(),
        "Error from server (NotFound): configmaps \"nope\" not found"
    );
    assert_eq!(
        cluster.kubectl(&["delete", "secret", "nope"]).err().trim(),
        "Error from server (NotFound): secrets \"nope\" not found"
    );
    assert_eq!(
        cluster
            .kubectl_stdin(
                &["apply", "-f", "-"],
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_Name}\n"
            )
            .err()
            .trim(),
        "The ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    );
    assert_eq!(
        cluster
            .kubectl(&["create", "configmap", "x", "-n", "missing"])
            .err()
            .trim(),
        "error: failed to create configmap: namespaces \"missing\" not found"
    );
    let strict = cluster.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: strict}\nbogus: 1\n",
    );
    assert!(
        strict.err().contains("unknown field \"bogus\""),
        "{}",
        strict.stderr
    );
}

#[test]
fn namespaces_secrets_and_cascading_deletion() {
    let cluster = Cluster::start();
    let names = cluster.kubectl(&["get", "ns", "-o", "jsonpath={.items[*].metadata.name}"]);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            names.ok().split(' ').any(|n| n == ns),
            "{ns} missing: {}",
            names.stdout
        );
    }
    cluster.kubectl(&["create", "namespace", "team"]).ok();
    let ns = cluster.kubectl(&["get", "ns", "team", "-o", "json"]).json();
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["spec"]["finalizers"], serde_json::json!(["kubernetes"]));
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team"
    );
    assert!(eventually(Duration::from_secs(10), || cluster
        .kubectl(&["get", "sa", "default", "-n", "team"])
        .code
        == 0));

    cluster
        .kubectl(&[
            "create",
            "secret",
            "generic",
            "creds",
            "-n",
            "team",
            "--from-literal=password=hunter2",
        ])
        .ok();
    let secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: mixed, namespace: team}\ndata: {a: YWJj}\nstringData: {b: plain}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], secret).ok();
    let mixed = cluster
        .kubectl(&["get", "secret", "mixed", "-n", "team", "-o", "json"])
        .json();
    assert_eq!(
        mixed["data"],
        serde_json::json!({"a": "YWJj", "b": "cGxhaW4="})
    );
    assert_eq!(mixed["type"], "Opaque");
    assert!(mixed.get("stringData").is_none());
    let table = cluster.kubectl(&["get", "secrets", "-n", "team"]);
    assert!(table.ok().lines().next().is_some_and(
        |h| h.split_whitespace().collect::<Vec<_>>() == ["NAME", "TYPE", "DATA", "AGE"]
    ));
    cluster
        .kubectl(&["create", "configmap", "inside", "-n", "team"])
        .ok();

    assert_eq!(
        cluster
            .kubectl(&["delete", "namespace", "team"])
            .ok()
            .trim(),
        "namespace \"team\" deleted"
    );
    assert_eq!(
        cluster.kubectl(&["get", "ns", "team"]).err().trim(),
        "Error from server (NotFound): namespaces \"team\" not found"
    );
    assert!(
        cluster
            .etcdctl(&[
                "get",
                "--prefix",
                "/registry/configmaps/team/",
                "--keys-only"
            ])
            .ok()
            .trim()
            .is_empty()
    );
    assert!(
        cluster
            .etcdctl(&["get", "--prefix", "/registry/secrets/team/", "--keys-only"])
            .ok()
            .trim()
            .is_empty()
    );
    assert!(
        cluster
            .kubectl(&["delete", "namespace", "default"])
            .err()
            .contains("namespaces \"default\" is forbidden: this namespace may not be deleted")
    );

    // A namespace whose content carries finalizers stays Terminating and
    // says why in its conditions, in kube's words.
    cluster.kubectl(&["create", "namespace", "stuck"]).ok();
    let held = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, namespace: stuck, finalizers: [example.com/hold]}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: held, namespace: stuck, finalizers: [example.com/hold]}\nrules: []\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], held).ok();
    cluster
        .kubectl(&["create", "secret", "generic", "loose", "-n", "stuck"])
        .ok();
    cluster
        .kubectl(&["delete", "namespace", "stuck", "--wait=false"])
        .ok();
    let condition = |ns: &Value, kind: &str| {
        ns["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == kind).cloned())
    };
    let mut ns = Value::Null;
    assert!(
        eventually(Duration::from_secs(20), || {
            ns = cluster
                .kubectl(&["get", "ns", "stuck", "-o", "json"])
                .json();
            condition(&ns, "NamespaceFinalizersRemaining").is_some_and(|c| c["status"] == "True")
        }),
        "no NamespaceFinalizersRemaining condition: {ns}"
    );
    assert_eq!(ns["status"]["phase"], "Terminating");
    let remaining = condition(&ns, "NamespaceContentRemaining").expect("content condition");
    assert_eq!(remaining["status"], "True");
    assert_eq!(remaining["reason"], "SomeResourcesRemain");
    assert_eq!(
        remaining["message"],
        "Some resources are remaining: configmaps. has 1 resource instances, roles.rbac.authorization.k8s.io has 1 resource instances"
    );
    let finalizers = condition(&ns, "NamespaceFinalizersRemaining").expect("finalizer condition");
    assert_eq!(finalizers["reason"], "SomeFinalizersRemain");
    assert_eq!(
        finalizers["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances"
    );
    for (kind, reason) in [
        ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered"),
        (
            "NamespaceDeletionGroupVersionParsingFailure",
            "ParsedGroupVersions",
        ),
        ("NamespaceDeletionContentFailure", "ContentDeleted"),
    ] {
        let c = condition(&ns, kind).unwrap_or_else(|| panic!("no {kind}: {ns}"));
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some(reason))
        );
    }
    // What has no finalizer is gone; what has one is marked for deletion.
    assert!(
        cluster
            .kubectl(&["get", "secret", "loose", "-n", "stuck"])
            .err()
            .contains("NotFound")
    );
    let cm = cluster
        .kubectl(&["get", "cm", "held", "-n", "stuck", "-o", "json"])
        .json();
    assert!(cm["metadata"]["deletionTimestamp"].is_string(), "{cm}");
    let described = cluster.kubectl(&["describe", "namespace", "stuck"]);
    assert!(
        described.ok().contains("SomeFinalizersRemain"),
        "{}",
        described.stdout
    );
    // Once the finalizers are released the namespace goes away.
    for what in ["configmap/held", "role/held"] {
        cluster
            .kubectl(&[
                "patch",
                what,
                "-n",
                "stuck",
                "--type=merge",
                "-p",
                r#"{"metadata":{"finalizers":null}}"#,
            ])
            .ok();
    }
    assert!(eventually(Duration::from_secs(20), || cluster
        .kubectl(&["get", "ns", "stuck"])
        .stderr
        .contains("NotFound")));
}

/// The names `kubectl get` prints with `-o name`, sorted.
fn names(cluster: &Cluster, args: &[&str]) -> Vec<String> {
    let mut args = args.to_vec();
    args.extend(["-o", "name"]);
    let mut names: Vec<String> = cluster
        .kubectl(&args)
        .ok()
        .lines()
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

#[test]
fn namespaces_and_secrets_are_selected_by_kubes_fields() {
    let cluster = Cluster::start();
    let phase = |phase: &str| {
        names(
            &cluster,
            &[
                "get",
                "ns",
                "--field-selector",
                &format!("status.phase={phase}"),
            ],
        )
    };
    let system = ["default", "kube-node-lease", "kube-public", "kube-system"];
    let active = phase("Active");
    for ns in system {
        assert!(
            active.contains(&format!("namespace/{ns}")),
            "{ns} not selected as Active: {active:?}"
        );
    }
    assert_eq!(phase("Terminating"), Vec::<String>::new());

    // A namespace held in Terminating by a finalizer of its own.
    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: held}\nspec: {finalizers: [kubernetes, e2e.example.com/hold]}\n",
        )
        .ok();
    let listed = cluster
        .kubectl(&[
            "get",
            "--raw",
            "/api/v1/namespaces?fieldSelector=status.phase%3DTerminating",
        ])
        .json();
    assert_eq!(listed["items"], serde_json::json!([]));
    let before = listed["metadata"]["resourceVersion"]
        .as_str()
        .expect("list resourceVersion")
        .to_string();
    cluster
        .kubectl(&["delete", "ns", "held", "--wait=false"])
        .ok();
    assert_eq!(phase("Terminating"), ["namespace/held"]);
    assert!(!phase("Active").contains(&"namespace/held".to_string()));
    let not_active = names(
        &cluster,
        &["get", "ns", "--field-selector", "status.phase!=Active"],
    );
    assert_eq!(not_active, ["namespace/held"]);
    // A watch from before the deletion sees it start to match.
    let watched = cluster
        .kubectl(&[
            "get",
            "--raw",
            &format!(
                "/api/v1/namespaces?watch=true&fieldSelector=status.phase%3DTerminating&resourceVersion={before}&timeoutSeconds=1"
            ),
        ])
        .events();
    assert!(
        watched
            .iter()
            .any(|e| e["type"] == "ADDED" && e["object"]["metadata"]["name"] == "held"),
        "{watched:?}"
    );
    assert!(
        watched
            .iter()
            .all(|e| e["object"]["metadata"]["name"] == "held"),
        "{watched:?}"
    );

    // Secrets by type, as kube selects them.
    cluster
        .kubectl(&["create", "secret", "generic", "plain", "--from-literal=a=b"])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "secret",
            "generic",
            "typed",
            "--type=example.com/typed",
            "--from-literal=a=b",
        ])
        .ok();
    let typed = |selector: &str| names(&cluster, &["get", "secrets", "--field-selector", selector]);
    assert_eq!(typed("type=example.com/typed"), ["secret/typed"]);
    assert_eq!(typed("type=Opaque"), ["secret/plain"]);
    // kube's ServiceAccounts select by metadata only.
    assert_eq!(
        names(
            &cluster,
            &["get", "sa", "--field-selector", "metadata.name=default"]
        ),
        ["serviceaccount/default"]
    );
    assert!(
        cluster
            .kubectl(&["get", "sa", "--field-selector", "secrets=x"])
            .err()
            .contains("field label not supported: secrets")
    );

    // Let the held namespace go.
    cluster
        .kubectl_stdin(
            &["replace", "--raw", "/api/v1/namespaces/held/finalize", "-f", "-"],
            "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"held\"},\"spec\":{\"finalizers\":[]}}",
        )
        .ok();
    assert!(eventually(Duration::from_secs(10), || phase("Terminating").is_empty()));
}

#[test]
fn watch_sees_added_modified_deleted() {
    let cluster = Cluster::start();
    let mut watch = cluster.kubectl_spawn(&["get", "configmaps", "-w", "--output-watch-events"]);
    // Let the watch start before writing.
    std::thread::sleep(Duration::from_secs(2));
    cluster
        .kubectl(&["create", "configmap", "watched", "--from-literal=a=1"])
        .ok();
    cluster
        .kubectl(&[
            "patch",
            "configmap",
            "watched",
            "-p",
            r#"{"data":{"a":"2"}}"#,
        ])
        .ok();
    cluster.kubectl(&["delete", "configmap", "watched"]).ok();
    // Give the last event time to arrive, then stop the watch and read it.
    std::thread::sleep(Duration::from_secs(2));
    let _ = watch.kill();
    let mut seen = String::new();
    watch
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut seen)
        .expect("watch output");
    let events: Vec<(&str, &str)> = seen
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            Some((fields.next()?, fields.next()?))
        })
        .collect();
    // The list that starts the watch holds kube's root CA ConfigMap.
    assert_eq!(
        events,
        vec![
            ("ADDED", "kube-root-ca.crt"),
            ("ADDED", "watched"),
            ("MODIFIED", "watched"),
            ("DELETED", "watched")
        ],
        "{seen}"
    );
}

#[test]
fn restart_keeps_every_object() {
    let mut cluster = Cluster::start();
    cluster.kubectl(&["create", "namespace", "kept"]).ok();
    cluster
        .kubectl(&[
            "create",
            "configmap",
            "survivor",
            "-n",
            "kept",
            "--from-literal=k=v",
        ])
        .ok();
    let before = cluster
        .kubectl(&["get", "cm", "survivor", "-n", "kept", "-o", "json"])
        .json();
    cluster.restart();
    let after = cluster
        .kubectl(&["get", "cm", "survivor", "-n", "kept", "-o", "json"])
        .json();
    assert_eq!(before, after);
    cluster
        .kubectl(&["create", "configmap", "newer", "-n", "kept"])
        .ok();
    let newer = cluster
        .kubectl(&["get", "cm", "newer", "-n", "kept", "-o", "json"])
        .json();
    let rv = |v: &Value| {
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<i64>()
            .unwrap()
    };
    assert!(rv(&newer) > rv(&after));
}

#[test]
fn discovery_openapi_and_health() {
    let cluster = Cluster::start();
    let resources = cluster.kubectl(&["api-resources", "--api-group="]);
    for line in [
        "configmaps",
        "namespaces",
        "secrets",
        "serviceaccounts",
        "events",
    ] {
        assert!(
            resources.ok().lines().any(|l| l.starts_with(line)),
            "{line} missing:\n{}",
            resources.stdout
        );
    }
    assert!(
        resources
            .ok()
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["configmaps", "cm", "v1", "true", "ConfigMap"])
    );
    let explain = cluster.kubectl(&["explain", "configmap.data"]);
    assert!(
        explain.ok().contains("FIELD: data <map[string]string>"),
        "{}",
        explain.stdout
    );
    let version = cluster.kubectl(&["version", "-o", "json"]).json();
    assert_eq!(version["serverVersion"]["minor"], "33");
    let readyz = cluster.kubectl(&["get", "--raw", "/readyz?verbose"]);
    assert!(
        readyz.ok().contains("[+]etcd ok") && readyz.ok().contains("readyz check passed"),
        "{}",
        readyz.stdout
    );
    // The aggregator's controllers are post-start hooks, listed as kube lists them.
    for hook in [
        "apiservice-status-available-controller",
        "apiservice-registration-controller",
        "start-namespace-controller",
    ] {
        assert!(
            readyz
                .stdout
                .contains(&format!("[+]poststarthook/{hook} ok")),
            "{hook}: {}",
            readyz.stdout
        );
    }
    let group = cluster.kubectl(&["get", "--raw", "/api/v1"]).json();
    assert_eq!(group["kind"], "APIResourceList");
    assert!(
        group["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "namespaces/finalize")
    );
    let unknown = cluster.kubectl(&["get", "--raw", "/apis/nothing.example.com/v1/widgets"]);
    assert!(unknown.err().contains("NotFound"), "{}", unknown.stderr);

    // /metrics: what kube-apiserver's dashboards read, under kube's names.
    for _ in 0..3 {
        cluster
            .kubectl(&["get", "configmaps", "-n", "kube-system"])
            .ok();
    }
    let metrics = cluster.kubectl(&["get", "--raw", "/metrics"]);
    let count = |prefix: &str| {
        metrics
            .ok()
            .lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {prefix}… line in\n{}", metrics.stdout))
    };
    let lists = count(
        "apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"LIST\",version=\"v1\"}",
    );
    assert!(lists >= 3.0, "{lists} LISTs counted");
    // A group nobody serves is no label value of its own.
    assert!(
        count(
            "apiserver_request_total{code=\"404\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"other\""
        ) >= 1.0
    );
    assert!(!metrics.ok().contains("nothing.example.com"));
    assert!(
        count(
            "apiserver_request_duration_seconds_bucket{le=\"+Inf\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"LIST\",version=\"v1\"}"
        ) >= 3.0
    );
    assert!(metrics.ok().contains("# TYPE apiserver_request counter"));
    assert!(
        count("apiserver_current_inflight_requests{request_kind=\"readOnly\"}") >= 1.0,
        "the /metrics GET itself is in flight"
    );
}

#[test]
fn every_write_verb_on_namespaces_and_secrets() {
    let cluster = Cluster::start();
    let manifests = [
        (
            "namespace",
            "verbs",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: verbs, labels: {step: one}}\n",
            "step: one",
            "step: two",
        ),
        (
            "secret",
            "token",
            "apiVersion: v1\nkind: Secret\nmetadata: {name: token, labels: {step: one}}\nstringData: {user: admin}\n",
            "step: one",
            "step: two",
        ),
    ];
    for (kind, name, manifest, from, to) in manifests {
        assert!(
            cluster
                .kubectl_stdin(&["apply", "-f", "-"], manifest)
                .ok()
                .contains("created")
        );
        let changed = manifest.replace(from, to);
        assert!(
            cluster
                .kubectl_stdin(&["apply", "-f", "-"], &changed)
                .ok()
                .contains("configured"),
            "{kind}"
        );
        cluster.kubectl(&["label", kind, name, "labelled=yes"]).ok();
        cluster
            .kubectl(&["annotate", kind, name, "annotated=yes"])
            .ok();
        cluster
            .kubectl(&[
                "patch",
                kind,
                name,
                "--type=merge",
                "-p",
                r#"{"metadata":{"labels":{"merge":"yes"}}}"#,
            ])
            .ok();
        cluster
            .kubectl(&[
                "patch",
                kind,
                name,
                "--type=json",
                "-p",
                r#"[{"op":"add","path":"/metadata/labels/json","value":"yes"}]"#,
            ])
            .ok();
        cluster
            .kubectl(&[
                "patch",
                kind,
                name,
                "-p",
                r#"{"metadata":{"labels":{"strategic":"yes"}}}"#,
            ])
            .ok();
        let obj = cluster.kubectl(&["get", kind, name, "-o", "json"]).json();
        let labels = &obj["metadata"]["labels"];
        for key in ["labelled", "merge", "json", "strategic"] {
            assert_eq!(labels[key], "yes", "{kind} label {key}: {labels}");
        }
        assert_eq!(labels["step"], "two");
        assert_eq!(obj["metadata"]["annotations"]["annotated"], "yes");
        assert!(
            cluster
                .kubectl(&["delete", kind, name])
                .ok()
                .contains("deleted")
        );
        assert!(
            cluster
                .kubectl(&["get", kind, name])
                .err()
                .contains("NotFound")
        );
    }
}

const LIST: &str = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed}
  data: {a: b}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: listed}
  spec:
    selector: {matchLabels: {app: listed}}
    template:
      metadata: {labels: {app: listed}}
      spec:
        containers: [{name: c, image: nginx BOGUS}]
- apiVersion: example.com/v1
  kind: Gadget
  metadata: {name: listed}
  spec: {size: 3, extra: {known: k, anything: [1, two]}, note: null}
";

const GADGETS: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {known: {type: string}}}
              note: {type: string, nullable: true}
";

/// `kubectl apply -f` of a `kind: List` (what `kubectl get -o yaml` prints)
/// validates on the client against `/openapi/v2`, as with kube-apiserver.
#[test]
fn apply_of_a_list_validates_against_openapi_v2() {
    let cluster = Cluster::start();
    cluster.kubectl_stdin(&["apply", "-f", "-"], GADGETS).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/gadgets.example.com",
            "--timeout=20s",
        ])
        .ok();

    let bad = LIST.replace(" BOGUS}", ", bogus: 1}");
    let refused = cluster.kubectl_stdin(&["apply", "-f", "-"], &bad);
    assert!(
        refused.err().contains(
            "ValidationError(Deployment.spec.template.spec.containers[0]): unknown field \"bogus\" in io.k8s.api.core.v1.Container"
        ),
        "{}",
        refused.stderr
    );
    assert!(
        cluster
            .kubectl(&["get", "configmap", "listed"])
            .err()
            .contains("NotFound"),
        "a refused List must create nothing"
    );

    let good = LIST.replace(" BOGUS}", "}");
    let applied = cluster.kubectl_stdin(&["apply", "-f", "-"], &good);
    for line in [
        "configmap/listed created",
        "deployment.apps/listed created",
        "gadget.example.com/listed created",
    ] {
        assert!(applied.ok().contains(line), "{line}: {}", applied.stdout);
    }
    // Fields under x-kubernetes-preserve-unknown-fields, and a nullable
    // field set to null, pass kubectl's check, as they do against kube.
    let gadget = cluster
        .kubectl(&["get", "gadget", "listed", "-o", "json"])
        .json();
    assert_eq!(
        gadget["spec"]["extra"],
        serde_json::json!({"known": "k", "anything": [1, "two"]})
    );

    // What `kubectl get -o yaml` prints is a List that applies back.
    let listed = cluster.kubectl(&["get", "configmap,deployment,gadget", "-o", "yaml"]);
    let again = cluster.kubectl_stdin(&["apply", "-f", "-"], listed.ok());
    assert!(
        again.ok().contains("gadget.example.com/listed"),
        "{}",
        again.stdout
    );

    // The document itself: every built-in and custom kind, refs resolved.
    let v2 = cluster.kubectl(&["get", "--raw", "/openapi/v2"]).json();
    assert_eq!(v2["swagger"], "2.0");
    let definitions = v2["definitions"].as_object().expect("definitions");
    let config_map = &definitions["io.k8s.api.core.v1.ConfigMap"];
    assert_eq!(
        config_map["x-kubernetes-group-version-kind"][0]["kind"],
        "ConfigMap"
    );
    assert!(
        definitions
            .values()
            .any(|d| d["x-kubernetes-group-version-kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k["kind"] == "Gadget"))),
        "the CRD's kind is missing from /openapi/v2"
    );
    let text = v2.to_string();
    assert!(!text.contains("#/components/"), "a v3 ref was left in v2");
}
