//! Admission webhooks end to end, through the front door with kubectl and
//! curl: a webhook server written in Python (`tests/python/admission_webhook.py`)
//! behind a Service and with an `openssl req -x509` certificate, called for
//! built-ins (core-server), custom resources (extension-server) and
//! APIServices (aggregator): denials in kube's words, JSONPatch mutations
//! and reinvocation, warnings, selectors, dry run, failurePolicy against a
//! stopped webhook, and a timeout.

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::Value;
use tests::{As, Cluster, eventually, local_service, openssl_self_signed, spawn_ready, workspace};

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts the test webhook on `port`, logging the reviews it gets to `log`.
fn start_webhook(dir: &Path, port: u16, log: &Path) -> Child {
    spawn_ready(
        Command::new("python3")
            .arg(workspace().join("tests/python/admission_webhook.py"))
            .arg(port.to_string())
            .arg(dir.join("hook.crt"))
            .arg(dir.join("hook.key"))
            .arg(log),
    )
}

/// The reviews the webhook logged for objects named `name`.
fn reviews_of(log: &Path, name: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| {
            let request = &entry["request"];
            request["name"] == name
                || request.pointer("/object/metadata/name") == Some(&Value::from(name))
        })
        .collect()
}

/// A webhook entry calling the Service `webhooks/hook` at `path`.
fn hook(name: &str, path: &str, ca: &str, rules: &str, extra: &str) -> String {
    format!(
        "- name: {name}\n  admissionReviewVersions: [v1]\n  sideEffects: None\n  failurePolicy: Fail\n\
         \x20 clientConfig:\n    caBundle: {ca}\n    service: {{namespace: webhooks, name: hook, path: {path}}}\n\
         \x20 rules: {rules}\n{extra}"
    )
}

const CONFIGMAPS: &str = "[{operations: [CREATE, UPDATE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}]";
const WIDGETS: &str = "[{operations: [CREATE], apiGroups: [example.com], apiVersions: [\"*\"], resources: [widgets]}]";
const APISERVICES: &str = "[{operations: [CREATE], apiGroups: [apiregistration.k8s.io], apiVersions: [v1], resources: [apiservices]}]";
const HOOKED: &str = "  namespaceSelector: {matchLabels: {webhooks: \"on\"}}\n";

#[test]
fn webhooks_deny_mutate_and_warn_for_every_server() {
    let cluster = Cluster::start();
    let dir = &cluster.dir;
    let ca = openssl_self_signed(dir, "hook", "hook.webhooks.svc");
    let port = closed_port();
    let log = dir.join("webhook-reviews.jsonl");
    let mut webhook = start_webhook(dir, port, &log);
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &local_service("webhooks", "hook", port),
        )
        .ok();
    cluster.kubectl(&["create", "namespace", "hooked"]).ok();
    cluster
        .kubectl(&["label", "namespace", "hooked", "webhooks=on"])
        .ok();
    let widgets = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n\
                   spec: {group: example.com, scope: Namespaced, names: {plural: widgets, kind: Widget},\n\
                   versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], widgets).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
        ])
        .ok();

    let validating = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: deny}}\nwebhooks:\n{}{}{}",
        hook("deny.example.com", "/validate", &ca, CONFIGMAPS, HOOKED),
        hook("deny-widgets.example.com", "/validate", &ca, WIDGETS, ""),
        hook(
            "deny-apiservices.example.com",
            "/validate",
            &ca,
            APISERVICES,
            ""
        ),
    );
    let mutating = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {{name: mutate}}\nwebhooks:\n{}{}{}",
        hook(
            "first.example.com",
            "/mutate",
            &ca,
            CONFIGMAPS,
            &format!("{HOOKED}  reinvocationPolicy: IfNeeded\n")
        ),
        hook("second.example.com", "/label", &ca, CONFIGMAPS, HOOKED),
        hook("mutate-widgets.example.com", "/mutate", &ca, WIDGETS, ""),
    );
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &format!("{validating}\n---\n{mutating}"),
        )
        .ok();

    // A denial, in kube's words and with the webhook's code and warning.
    assert!(
        eventually(Duration::from_secs(10), || {
            cluster
                .kubectl(&["-n", "hooked", "create", "configmap", "bad-probe"])
                .code
                != 0
        }),
        "the webhook configuration took effect"
    );
    let denied = cluster.kubectl(&["-n", "hooked", "create", "configmap", "bad-one"]);
    assert!(
        denied.err().contains(
            "admission webhook \"deny.example.com\" denied the request: names with bad- are not allowed"
        ),
        "{denied:?}"
    );
    assert!(
        denied
            .err()
            .contains("Warning: the webhook looked at bad-one"),
        "{denied:?}"
    );
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad-curl"}}"#;
    let answer = cluster.curl(
        As::Admin,
        "POST",
        "/api/v1/namespaces/hooked/configmaps",
        &["Content-Type: application/json"],
        Some(body),
    );
    assert_eq!(answer.code, 403, "{}", answer.text);
    assert_eq!(answer.json["kind"], "Status");
    assert_eq!(answer.json["reason"], "Forbidden");
    let dry = cluster.kubectl(&[
        "-n",
        "hooked",
        "create",
        "configmap",
        "bad-dry",
        "--dry-run=server",
    ]);
    assert!(dry.err().contains("denied the request"), "{dry:?}");
    assert!(
        reviews_of(&log, "bad-dry")
            .iter()
            .any(|r| r["request"]["dryRun"] == true),
        "the webhook was told it is a dry run"
    );
    // Outside the selected namespace, the webhook is not called.
    cluster
        .kubectl(&["-n", "default", "create", "configmap", "bad-but-elsewhere"])
        .ok();
    assert!(reviews_of(&log, "bad-but-elsewhere").is_empty());

    // Mutation: both webhooks' patches, the first called again after the
    // second changed the object (IfNeeded), and its warning.
    let made = cluster.kubectl(&["-n", "hooked", "create", "configmap", "good"]);
    made.ok();
    assert!(made.stderr.contains("Warning: mutated good"), "{made:?}");
    let good = cluster
        .kubectl(&["-n", "hooked", "get", "configmap", "good", "-o", "json"])
        .json();
    assert_eq!(good["metadata"]["labels"]["mutated-by"], "webhook");
    assert_eq!(good["metadata"]["labels"]["second"], "yes");
    assert_eq!(good["metadata"]["annotations"]["first-saw"], "second");
    let reviews = reviews_of(&log, "good");
    let first_calls = reviews
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .unwrap_or_default()
                .starts_with("/mutate")
        })
        .count();
    assert_eq!(first_calls, 2, "reinvoked once: {reviews:?}");
    let request = &reviews[0]["request"];
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(request["namespace"], "hooked");
    assert_eq!(request["kind"]["kind"], "ConfigMap");
    assert_eq!(request["resource"]["resource"], "configmaps");
    assert_eq!(request["userInfo"]["username"], "kubernetes-admin");
    assert!(
        reviews[0]["path"]
            .as_str()
            .unwrap_or_default()
            .ends_with("?timeout=10s"),
        "kube passes the timeout: {}",
        reviews[0]["path"]
    );

    // Server-side apply goes through the same chain, creating and updating.
    let applied = |name: &str, value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: hooked}}\ndata: {{k: {value}}}\n"
        )
    };
    let bad_apply = cluster.kubectl_stdin(
        &["apply", "--server-side", "-f", "-"],
        &applied("bad-applied", "a"),
    );
    assert!(
        bad_apply
            .err()
            .contains("admission webhook \"deny.example.com\" denied the request"),
        "{bad_apply:?}"
    );
    for value in ["a", "b"] {
        cluster
            .kubectl_stdin(
                &["apply", "--server-side", "-f", "-"],
                &applied("applied", value),
            )
            .ok();
    }
    let applied = cluster
        .kubectl(&["-n", "hooked", "get", "configmap", "applied", "-o", "json"])
        .json();
    assert_eq!(applied["data"]["k"], "b");
    assert_eq!(applied["metadata"]["labels"]["mutated-by"], "webhook");
    let operations: Vec<String> = reviews_of(&log, "applied")
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .unwrap_or_default()
                .starts_with("/validate")
        })
        .map(|r| {
            r["request"]["operation"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        operations,
        ["CREATE", "UPDATE"],
        "apply created, then updated"
    );

    // The webhook sees who asked: a ServiceAccount with edit rights.
    cluster
        .kubectl(&["-n", "hooked", "create", "serviceaccount", "writer"])
        .ok();
    cluster
        .kubectl(&[
            "-n",
            "hooked",
            "create",
            "rolebinding",
            "writer-edit",
            "--clusterrole=edit",
            "--serviceaccount=hooked:writer",
        ])
        .ok();
    let token = cluster
        .kubectl(&["-n", "hooked", "create", "token", "writer"])
        .ok()
        .trim()
        .to_string();
    let writer = cluster.token_kubeconfig("writer", &token, "hooked");
    let refused = cluster.kubectl_with(&writer, &["create", "configmap", "bad-by-writer"]);
    assert!(refused.err().contains("denied the request"), "{refused:?}");
    cluster
        .kubectl_with(&writer, &["create", "configmap", "by-writer"])
        .ok();
    let by_writer = reviews_of(&log, "by-writer");
    assert_eq!(
        by_writer[0]["request"]["userInfo"]["username"],
        "system:serviceaccount:hooked:writer"
    );
    assert!(
        by_writer[0]["request"]["userInfo"]["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g == "system:serviceaccounts:hooked")),
        "{by_writer:?}"
    );

    // Custom resources (extension-server) and APIServices (aggregator).
    let widget = |name: &str| {
        format!(
            "apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: {name}, namespace: hooked}}\nspec: {{}}\n"
        )
    };
    let bad_widget = cluster.kubectl_stdin(&["create", "-f", "-"], &widget("bad-widget"));
    assert!(
        bad_widget.err().contains(
            "admission webhook \"deny-widgets.example.com\" denied the request: names with bad- are not allowed"
        ),
        "{bad_widget:?}"
    );
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &widget("good-widget"))
        .ok();
    let good_widget = cluster
        .kubectl(&[
            "-n",
            "hooked",
            "get",
            "widgets",
            "good-widget",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(good_widget["metadata"]["labels"]["mutated-by"], "webhook");
    let apiservice = "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1.bad-group.example.com}\n\
                      spec: {group: bad-group.example.com, version: v1, groupPriorityMinimum: 100, versionPriority: 10,\n\
                      service: {namespace: webhooks, name: hook, port: 443}, insecureSkipTLSVerify: true}\n";
    let bad_apiservice = cluster.kubectl_stdin(&["create", "-f", "-"], apiservice);
    assert!(
        bad_apiservice
            .err()
            .contains("admission webhook \"deny-apiservices.example.com\" denied the request"),
        "{bad_apiservice:?}"
    );

    // A webhook that is down: Ignore lets the write through, Fail refuses
    // it with kube's 500; a slow one times out.
    let down = closed_port();
    let secrets =
        "[{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [secrets]}]";
    let broken = |policy: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: down}}\n\
             webhooks:\n- name: down.example.com\n  admissionReviewVersions: [v1]\n  sideEffects: None\n  failurePolicy: {policy}\n\
             \x20 clientConfig: {{url: \"https://127.0.0.1:{down}/check\", caBundle: {ca}}}\n  rules: {secrets}\n{HOOKED}"
        )
    };
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &broken("Ignore"))
        .ok();
    assert!(
        eventually(Duration::from_secs(10), || {
            cluster
                .kubectl(&["-n", "hooked", "create", "secret", "generic", "s-probe"])
                .code
                == 0
        }),
        "failurePolicy Ignore lets the write through"
    );
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &broken("Fail"))
        .ok();
    let mut refused = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            let answer = cluster.curl(
                As::Admin,
                "POST",
                "/api/v1/namespaces/hooked/secrets",
                &["Content-Type: application/json"],
                Some(br#"{"apiVersion":"v1","kind":"Secret","metadata":{"generateName":"s-"}}"#),
            );
            let failed = answer.code == 500;
            refused = Some(answer);
            failed
        }),
        "failurePolicy Fail refuses: {refused:?}"
    );
    let refused = refused.expect("an answer");
    assert_eq!(refused.json["reason"], "InternalError");
    assert_eq!(
        refused.json["message"],
        format!(
            "Internal error occurred: failed calling webhook \"down.example.com\": failed to call webhook: \
             Post \"https://127.0.0.1:{down}/check?timeout=10s\": connect: connection refused"
        )
    );

    let slow = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: slow}}\nwebhooks:\n{}",
        hook(
            "slow.example.com",
            "/slow",
            &ca,
            "[{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [serviceaccounts]}]",
            &format!("{HOOKED}  timeoutSeconds: 1\n"),
        )
    );
    cluster.kubectl_stdin(&["apply", "-f", "-"], &slow).ok();
    assert!(
        eventually(Duration::from_secs(10), || {
            let timed_out = cluster.kubectl(&["-n", "hooked", "create", "serviceaccount", "late"]);
            timed_out.code != 0
                && timed_out.stderr.contains(
                    "failed calling webhook \"slow.example.com\": failed to call webhook: Post \"https://hook.webhooks.svc:",
                )
                && timed_out.stderr.contains("?timeout=1s\": context deadline exceeded")
        }),
        "a webhook slower than its timeout fails the write"
    );

    // Removing the configurations (never themselves sent to webhooks)
    // lets every write through again.
    cluster
        .kubectl(&[
            "delete",
            "validatingwebhookconfiguration,mutatingwebhookconfiguration",
            "--all",
        ])
        .ok();
    assert!(eventually(Duration::from_secs(10), || {
        cluster
            .kubectl(&["-n", "hooked", "create", "configmap", "bad-after"])
            .code
            == 0
    }));
    let _ = webhook.kill();
    let _ = webhook.wait();
}
