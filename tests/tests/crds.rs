//! CustomResourceDefinitions and custom resources, end to end through the
//! aggregator with kubectl: the life cycle, schemas and CEL, subresources,
//! printer columns and categories, versions (None and webhook conversion),
//! discovery timing, and deletion.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tests::{Cluster, eventually, workspace};

const WIDGETS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    selectableFields: [{jsonPath: .spec.color}]
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            x-kubernetes-validations:
            - {rule: "self.replicas <= self.maxReplicas", message: "replicas must not exceed maxReplicas"}
            properties:
              color: {type: string, enum: [red, blue, green]}
              replicas: {type: integer, minimum: 0, default: 1}
              maxReplicas: {type: integer, default: 10}
              size: {type: string, default: medium}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
"#;

fn widget(name: &str, spec: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: {name}}}\nspec: {spec}\n")
}

#[test]
fn custom_resources_behave_like_built_ins() {
    let cluster = Cluster::start();
    // Discovery timing: from the CRD's creation to the group in /apis.
    cluster.kubectl_stdin(&["apply", "-f", "-"], WIDGETS).ok();
    let started = Instant::now();
    let pki = cluster.dir.join("pki");
    let apis = |path: &str| {
        let out = Command::new("curl")
            .args(["-sS", "--cacert"])
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(pki.join("admin.crt"))
            .arg("--key")
            .arg(pki.join("admin.key"))
            .arg(format!("https://localhost:{}{path}", cluster.port))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(eventually(Duration::from_secs(5), || apis("/apis")
        .contains("example.com")));
    let visible = started.elapsed();
    eprintln!("CRD created → group visible in /apis after {visible:?}");
    assert!(
        visible < Duration::from_secs(1),
        "discovery took {visible:?}"
    );
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=10s",
        ])
        .ok();
    let crd = cluster
        .kubectl(&["get", "crd", "widgets.example.com", "-o", "json"])
        .json();
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
    assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]));
    // kube's CRDs have no printer: its default table.
    let crds = cluster.kubectl(&["get", "crd", "widgets.example.com"]);
    let rows: Vec<Vec<&str>> = crds
        .ok()
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["NAME", "CREATED", "AT"],
            vec![
                "widgets.example.com",
                crd["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or("none")
            ]
        ]
    );
    assert!(
        crd["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "NamesAccepted" && c["status"] == "True")
    );

    // Create with defaults; read through short name, category, printer columns.
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &widget("w1", "{color: red, replicas: 2}"),
        )
        .ok();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &widget("w2", "{color: blue}"))
        .ok();
    let w1 = cluster.kubectl(&["get", "wd", "w1", "-o", "json"]).json();
    assert_eq!(
        (
            w1["spec"]["size"].as_str(),
            w1["spec"]["maxReplicas"].as_i64()
        ),
        (Some("medium"), Some(10))
    );
    let table = cluster.kubectl(&["get", "widgets"]);
    let header: Vec<&str> = table
        .ok()
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "COLOR", "REPLICAS", "AGE"]);
    assert!(
        table
            .ok()
            .lines()
            .any(|l| l.split_whitespace().take(3).collect::<Vec<_>>() == ["w2", "blue", "1"])
    );
    assert!(
        cluster
            .kubectl(&["get", "all"])
            .ok()
            .contains("widget.example.com/w1")
    );
    let selected = cluster.kubectl(&[
        "get",
        "widgets",
        "--field-selector",
        "spec.color=blue",
        "-o",
        "name",
    ]);
    assert_eq!(selected.ok().trim(), "widget.example.com/w2");

    // Schema, CEL, pruning, strict field validation, strategic merge refused.
    let bad = cluster.kubectl_stdin(&["apply", "-f", "-"], &widget("w3", "{color: pink}"));
    assert!(bad.err().contains("spec.color: Unsupported value: \"pink\": supported values: \"red\", \"blue\", \"green\""), "{}", bad.stderr);
    let over = cluster.kubectl_stdin(
        &["apply", "-f", "-"],
        &widget("w4", "{color: red, replicas: 20, maxReplicas: 5}"),
    );
    assert!(
        over.err().contains("replicas must not exceed maxReplicas"),
        "{}",
        over.stderr
    );
    let strict = cluster.kubectl_stdin(
        &["apply", "-f", "-"],
        &widget("w5", "{color: red, bogus: 1}"),
    );
    assert!(
        strict.err().contains("unknown field \"spec.bogus\""),
        "{}",
        strict.stderr
    );
    cluster
        .kubectl_stdin(
            &["apply", "--validate=false", "-f", "-"],
            &widget("w6", "{color: red, bogus: 1}"),
        )
        .ok();
    assert!(
        cluster.kubectl(&["get", "wd", "w6", "-o", "json"]).json()["spec"]
            .get("bogus")
            .is_none()
    );
    let smp = cluster.kubectl(&["patch", "wd", "w1", "-p", r#"{"spec":{"color":"green"}}"#]);
    assert!(
        smp.err()
            .contains("application/strategic-merge-patch+json is not supported"),
        "{}",
        smp.stderr
    );
    cluster
        .kubectl(&[
            "patch",
            "wd",
            "w1",
            "--type=merge",
            "-p",
            r#"{"spec":{"color":"green"}}"#,
        ])
        .ok();

    // Status and scale subresources; generation tracks spec only.
    let before = cluster.kubectl(&["get", "wd", "w1", "-o", "json"]).json();
    cluster
        .kubectl(&[
            "patch",
            "wd",
            "w1",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"replicas":2,"selector":"app=w1"}}"#,
        ])
        .ok();
    let after = cluster.kubectl(&["get", "wd", "w1", "-o", "json"]).json();
    assert_eq!(after["status"]["replicas"], 2);
    assert_eq!(
        after["metadata"]["generation"],
        before["metadata"]["generation"]
    );
    cluster
        .kubectl(&["scale", "widget", "w1", "--replicas=4"])
        .ok();
    let scale = cluster
        .kubectl(&[
            "get",
            "--raw",
            "/apis/example.com/v1/namespaces/default/widgets/w1/scale",
        ])
        .json();
    assert_eq!(
        (scale["kind"].as_str(), scale["spec"]["replicas"].as_i64()),
        (Some("Scale"), Some(4))
    );
    assert_eq!(scale["status"]["selector"], "app=w1");
    let scaled = cluster.kubectl(&["get", "wd", "w1", "-o", "json"]).json();
    assert!(scaled["metadata"]["generation"].as_i64() > after["metadata"]["generation"].as_i64());
    let main_write = cluster.kubectl(&[
        "patch",
        "wd",
        "w1",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":9}}"#,
    ]);
    main_write.ok();
    assert_eq!(
        cluster.kubectl(&["get", "wd", "w1", "-o", "json"]).json()["status"]["replicas"],
        2
    );

    // Server-side apply with managed fields; explain from the published schema.
    let applied = cluster.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=ops", "-f", "-"],
        &widget("w7", "{color: green}"),
    );
    applied.ok();
    let managed = cluster
        .kubectl(&["get", "wd", "w7", "-o", "json", "--show-managed-fields"])
        .json();
    assert_eq!(managed["metadata"]["managedFields"][0]["manager"], "ops");
    assert!(
        cluster
            .kubectl(&["explain", "widget.spec.color"])
            .ok()
            .contains("FIELD: color <string>")
    );

    // Deleting the CRD: watchers see DELETED, finalizers are honoured, then it is gone.
    cluster
        .kubectl(&[
            "patch",
            "wd",
            "w2",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
        ])
        .ok();
    let mut watch = cluster.kubectl_spawn(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets?watch=true",
    ]);
    std::thread::sleep(Duration::from_secs(1));
    cluster
        .kubectl(&["delete", "crd", "widgets.example.com", "--wait=false"])
        .ok();
    assert!(eventually(Duration::from_secs(15), || cluster
        .kubectl(&["get", "wd", "-o", "name"])
        .stdout
        .trim()
        == "widget.example.com/w2"));
    let terminating = cluster
        .kubectl(&["get", "crd", "widgets.example.com", "-o", "json"])
        .json();
    assert!(
        terminating["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Terminating" && c["status"] == "True")
    );
    cluster
        .kubectl(&[
            "patch",
            "wd",
            "w2",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":[]}}"#,
        ])
        .ok();
    assert!(eventually(Duration::from_secs(15), || cluster
        .kubectl(&["get", "crd", "widgets.example.com"])
        .code
        != 0));
    assert!(eventually(Duration::from_secs(5), || !apis("/apis")
        .contains("example.com")));
    let _ = watch.kill();
    let mut seen = String::new();
    watch
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut seen)
        .unwrap();
    let deleted: Vec<String> = seen
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "DELETED")
        .filter_map(|e| e["object"]["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    for name in ["w1", "w2", "w6", "w7"] {
        assert!(
            deleted.iter().any(|d| d == name),
            "{name} not deleted: {seen}"
        );
    }
}

#[test]
fn names_conflict_and_invalid_crds_are_rejected() {
    let cluster = Cluster::start();
    cluster.kubectl_stdin(&["apply", "-f", "-"], WIDGETS).ok();
    let clash = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.example.com}\n\
                 spec: {group: example.com, scope: Namespaced, names: {plural: gadgets, singular: gadget, kind: Widget},\n\
                 versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], clash).ok();
    assert!(eventually(Duration::from_secs(10), || {
        let crd = cluster
            .kubectl(&["get", "crd", "gadgets.example.com", "-o", "json"])
            .json();
        crd["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                c["type"] == "NamesAccepted"
                    && c["status"] == "False"
                    && c["reason"] == "KindConflict"
            })
    }));
    let invalid = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: things.example.com}\n\
                   spec: {group: example.com, scope: Namespaced, names: {plural: things, kind: Thing},\n\
                   versions: [{name: v1, served: true, storage: false, schema: {openAPIV3Schema: {type: object, properties: {spec: {properties: {a: {type: string}}}}}}}]}\n";
    let err = cluster.kubectl_stdin(&["apply", "-f", "-"], invalid);
    assert!(
        err.err()
            .contains("must have exactly one version marked as storage version"),
        "{}",
        err.stderr
    );
    assert!(
        err.stderr
            .contains("Required value: must not be empty for specified object fields"),
        "{}",
        err.stderr
    );
    let cel = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: costly.example.com}\n\
               spec: {group: example.com, scope: Namespaced, names: {plural: costly, kind: Costly},\n\
               versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object,\n\
               x-kubernetes-validations: [{rule: \"self.a.all(x, self.a.all(y, x.startsWith(y)))\"}],\n\
               properties: {a: {type: array, items: {type: string}}}}}}}}]}\n";
    let costly = cluster.kubectl_stdin(&["apply", "-f", "-"], cel);
    assert!(
        costly.err().contains("estimated rule cost exceeds budget"),
        "{}",
        costly.stderr
    );
    assert!(cluster.kubectl(&["get", "crd", "costly.example.com"]).code != 0);
}

/// The webhook's serving certificate as the tutorials make it (openssl,
/// self-signed, `CA:TRUE`), which is also its caBundle.
fn webhook_certificates(dir: &std::path::Path) -> String {
    tests::openssl_self_signed(dir, "webhook", "converter.webhooks.svc")
}

#[test]
fn versions_convert_with_none_and_with_a_webhook() {
    let cluster = Cluster::start();
    // Two versions, strategy None: the same object through both.
    let pets = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: pets.example.com}\n\
                spec: {group: example.com, scope: Namespaced, names: {plural: pets, kind: Pet},\n\
                versions: [{name: v1, served: true, storage: true, deprecated: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}},\n\
                           {name: v2, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], pets).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/pets.example.com",
        ])
        .ok();
    assert!(eventually(Duration::from_secs(5), || cluster
        .kubectl(&["get", "pets.v2.example.com"])
        .code
        == 0));
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: example.com/v2\nkind: Pet\nmetadata: {name: rex}\nspec: {sound: woof}\n",
        )
        .ok();
    let v1 = cluster
        .kubectl(&[
            "get",
            "--raw",
            "/apis/example.com/v1/namespaces/default/pets/rex",
        ])
        .json();
    let v2 = cluster
        .kubectl(&[
            "get",
            "--raw",
            "/apis/example.com/v2/namespaces/default/pets/rex",
        ])
        .json();
    assert_eq!(
        (v1["apiVersion"].as_str(), v2["apiVersion"].as_str()),
        (Some("example.com/v1"), Some("example.com/v2"))
    );
    // The deprecated version warns on every answer, in kube's default words; v2 does not.
    let old = cluster.kubectl(&["get", "pets.v1.example.com", "rex"]);
    old.ok();
    assert!(
        old.stderr
            .contains("Warning: example.com/v1 Pet is deprecated"),
        "{}",
        old.stderr
    );
    let new = cluster.kubectl(&["get", "pets.v2.example.com", "rex"]);
    new.ok();
    assert!(!new.stderr.contains("deprecated"), "{}", new.stderr);
    assert_eq!(v1["spec"], v2["spec"]);
    let stored = cluster.etcdctl(&[
        "get",
        "/registry/example.com/pets/default/rex",
        "--print-value-only",
    ]);
    assert_eq!(
        serde_json::from_str::<Value>(stored.ok().trim()).unwrap()["apiVersion"],
        "example.com/v1"
    );

    // A conversion webhook behind a Service, verified by its caBundle.
    let ca_bundle = webhook_certificates(&cluster.dir);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut webhook = Command::new("python3")
        .arg(workspace().join("tests/python/conversion_webhook.py"))
        .arg(port.to_string())
        .arg(cluster.dir.join("webhook.crt"))
        .arg(cluster.dir.join("webhook.key"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(webhook.stdout.as_mut().unwrap())
        .read_line(&mut ready)
        .unwrap();
    let plumbing = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: webhooks}}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: converter, namespace: webhooks}}\nspec: {{ports: [{{name: https, port: 443, targetPort: {port}}}]}}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: converter-1, namespace: webhooks, labels: {{kubernetes.io/service-name: converter}}}}\n\
         addressType: IPv4\nendpoints: [{{addresses: [127.0.0.1]}}]\nports: [{{name: https, port: {port}}}]\n"
    );
    cluster.kubectl_stdin(&["apply", "-f", "-"], &plumbing).ok();
    let tokens = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: tokens.example.com}}\n\
         spec:\n  group: example.com\n  scope: Namespaced\n  names: {{plural: tokens, kind: Token}}\n\
         \x20 conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1]\n\
         \x20     clientConfig: {{caBundle: {ca_bundle}, service: {{namespace: webhooks, name: converter, path: /convert, port: 443}}}}\n\
         \x20 versions:\n\
         \x20 - {{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, properties: {{spec: {{type: object, properties: {{value: {{type: string}}}}}}}}}}}}}}\n\
         \x20 - {{name: v2, served: true, storage: false, schema: {{openAPIV3Schema: {{type: object, properties: {{spec: {{type: object, properties: {{data: {{type: string}}}}}}}}}}}}}}\n"
    );
    cluster.kubectl_stdin(&["apply", "-f", "-"], &tokens).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/tokens.example.com",
        ])
        .ok();
    assert!(eventually(Duration::from_secs(5), || cluster
        .kubectl(&["get", "tokens.v1.example.com"])
        .code
        == 0));
    cluster.kubectl_stdin(&["apply", "-f", "-"], "apiVersion: example.com/v1\nkind: Token\nmetadata: {name: t1}\nspec: {value: secret}\n").ok();
    let as_v2 = cluster
        .kubectl(&[
            "get",
            "--raw",
            "/apis/example.com/v2/namespaces/default/tokens/t1",
        ])
        .json();
    assert_eq!(
        as_v2["spec"],
        serde_json::json!({"data": "secret"}),
        "{as_v2}"
    );
    assert_eq!(as_v2["metadata"]["annotations"]["converted-by"], "webhook");
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: example.com/v2\nkind: Token\nmetadata: {name: t2}\nspec: {data: other}\n",
        )
        .ok();
    let stored = cluster.etcdctl(&[
        "get",
        "/registry/example.com/tokens/default/t2",
        "--print-value-only",
    ]);
    let stored: Value = serde_json::from_str(stored.ok().trim()).unwrap();
    assert_eq!(
        (stored["apiVersion"].as_str(), &stored["spec"]),
        (
            Some("example.com/v1"),
            &serde_json::json!({"value": "other"})
        )
    );
    let listed = cluster
        .kubectl(&[
            "get",
            "--raw",
            "/apis/example.com/v2/namespaces/default/tokens",
        ])
        .json();
    assert_eq!(listed["items"].as_array().unwrap().len(), 2);
    assert!(
        listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["apiVersion"] == "example.com/v2" && t["spec"].get("data").is_some())
    );
    webhook.kill().unwrap();
}

#[test]
fn python_client_drives_custom_resources() {
    let cluster = Cluster::start();
    let output = cluster
        .command("python3")
        .arg(workspace().join("tests/python/crd_test.py"))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        output.status.success(),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(stdout.contains("python crd: all checks passed"));
}

/// The operator pattern: built-ins owned by a custom resource are garbage
/// collected once it is deleted, and the other way round; orphaning and
/// foreground deletion reach dependents served by the other server (one
/// collector, in the core server, sees the whole graph).
#[test]
fn built_ins_owned_by_a_custom_resource_are_collected_with_it() {
    let cluster = Cluster::start();
    cluster.kubectl_stdin(&["apply", "-f", "-"], WIDGETS).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=20s",
        ])
        .ok();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &widget("owner", "{color: red}"))
        .ok();
    let uid = cluster
        .kubectl(&["get", "widget", "owner", "-o", "jsonpath={.metadata.uid}"])
        .ok()
        .to_string();
    let owned = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  ownerReferences: \
             [{{apiVersion: example.com/v1, kind: Widget, name: owner, uid: {uid}}}]\ndata: {{a: b}}\n"
        )
    };
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &owned("owned-a"))
        .ok();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &owned("owned-b"))
        .ok();
    // The owner exists: past the collector's first look, they stay.
    std::thread::sleep(Duration::from_secs(3));
    cluster
        .kubectl(&["get", "configmap", "owned-a", "owned-b"])
        .ok();

    cluster.kubectl(&["delete", "widget", "owner"]).ok();
    let deleted = Instant::now();
    assert!(
        eventually(Duration::from_secs(20), || {
            cluster
                .kubectl(&["get", "configmaps", "-o", "name"])
                .ok()
                .lines()
                .all(|l| !l.contains("owned-"))
        }),
        "dependents of a deleted custom resource were not collected"
    );
    eprintln!(
        "custom resource deleted → its ConfigMaps collected after {:?}",
        deleted.elapsed()
    );

    let uid_of = |what: &str| {
        cluster
            .kubectl(&["get", what, "-o", "jsonpath={.metadata.uid}"])
            .ok()
            .to_string()
    };
    let owned_by = |kind: &str,
                    name: &str,
                    owner_api: &str,
                    owner_kind: &str,
                    owner: &str,
                    extra: &str| {
        let uid = uid_of(&format!("{owner_kind}/{owner}"));
        let body = format!(
            "apiVersion: {}\nkind: {kind}\nmetadata:\n  name: {name}\n{extra}  ownerReferences: \
             [{{apiVersion: {owner_api}, kind: {owner_kind}, name: {owner}, uid: {uid}, blockOwnerDeletion: true}}]\n{}",
            if kind == "Widget" {
                "example.com/v1"
            } else {
                "v1"
            },
            if kind == "Widget" {
                "spec: {color: blue}\n"
            } else {
                "data: {a: b}\n"
            },
        );
        cluster.kubectl_stdin(&["apply", "-f", "-"], &body).ok();
    };

    // Orphaning a custom resource keeps its ConfigMap, without the reference.
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &widget("parent", "{color: red}"))
        .ok();
    owned_by(
        "ConfigMap",
        "kept",
        "example.com/v1",
        "Widget",
        "parent",
        "",
    );
    cluster
        .kubectl(&["delete", "widget", "parent", "--cascade=orphan"])
        .ok();
    assert!(eventually(Duration::from_secs(10), || cluster
        .kubectl(&["get", "widget", "parent"])
        .stderr
        .contains("NotFound")));
    std::thread::sleep(Duration::from_secs(6));
    let kept = cluster
        .kubectl(&["get", "configmap", "kept", "-o", "json"])
        .json();
    assert!(
        kept["metadata"].get("ownerReferences").is_none(),
        "an orphaned ConfigMap still names its owner: {kept}"
    );

    // A custom resource owned by a ConfigMap, and one owned by it, go with it.
    cluster.kubectl(&["create", "configmap", "boss"]).ok();
    owned_by("Widget", "minion", "v1", "ConfigMap", "boss", "");
    owned_by(
        "Widget",
        "grandchild",
        "example.com/v1",
        "Widget",
        "minion",
        "",
    );
    std::thread::sleep(Duration::from_secs(3));
    cluster
        .kubectl(&["get", "widget", "minion", "grandchild"])
        .ok();
    cluster.kubectl(&["delete", "configmap", "boss"]).ok();
    assert!(
        eventually(Duration::from_secs(20), || cluster
            .kubectl(&["get", "widgets", "-o", "name"])
            .ok()
            .trim()
            .is_empty()),
        "custom resources owned by a deleted ConfigMap were not collected"
    );

    // Foreground: the owner waits for a dependent on the other server.
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &widget("front", "{color: green}"))
        .ok();
    owned_by(
        "ConfigMap",
        "held",
        "example.com/v1",
        "Widget",
        "front",
        "  finalizers: [example.com/hold]\n",
    );
    cluster
        .kubectl(&[
            "delete",
            "widget",
            "front",
            "--cascade=foreground",
            "--wait=false",
        ])
        .ok();
    assert!(
        eventually(Duration::from_secs(10), || cluster
            .kubectl(&[
                "get",
                "configmap",
                "held",
                "-o",
                "jsonpath={.metadata.deletionTimestamp}"
            ])
            .ok()
            .trim()
            .len()
            > 0),
        "the foreground owner's dependent was not deleted"
    );
    let front = cluster
        .kubectl(&["get", "widget", "front", "-o", "json"])
        .json();
    assert_eq!(
        front["metadata"]["finalizers"],
        serde_json::json!(["foregroundDeletion"])
    );
    cluster
        .kubectl(&[
            "patch",
            "configmap",
            "held",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ])
        .ok();
    assert!(eventually(Duration::from_secs(20), || cluster
        .kubectl(&["get", "widget", "front"])
        .stderr
        .contains("NotFound")));
}
