//! kube's audit log at the front door, end to end: a cluster started with
//! `kubechain up --audit-policy-file … --audit-log-path …` (and the webhook
//! backend through the aggregator's environment), driven with kubectl and
//! curl; each request is then looked up in the log by what it did, and
//! checked for its level, stages, user, impersonated user, source, object,
//! status, bodies and annotations (RBAC's decision, and an admission
//! policy's annotation reported by core-server), and its `Audit-Id`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use tests::{As, Cluster, eventually, openssl_self_signed, spawn_ready, workspace};

const NS: &str = "audited";

/// The policy: one rule per level, an omitStages rule, and one namespace left out.
const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/livez*", "/readyz*"]
- level: None
  resources: [{group: "", resources: [configmaps]}]
  namespaces: [quiet]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
  omitStages: [RequestReceived]
  omitManagedFields: true
- level: Request
  resources: [{group: apps, resources: ["deployments", "deployments/*"]}]
- level: Metadata
"#;

/// Every event the log holds now.
fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

/// The first event (soon) in the log that `matches`; panics naming `what` if none comes.
fn find(log: &Path, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
    let mut found = None;
    eventually(Duration::from_secs(10), || {
        found = events(log).into_iter().find(|e| matches(e));
        found.is_some()
    });
    found.unwrap_or_else(|| panic!("no audit event for {what} in {}", log.display()))
}

/// Whether an event is at `stage` for `verb` on `resource` named `name`.
fn is(event: &Value, stage: &str, verb: &str, resource: &str, name: &str) -> bool {
    event["stage"] == stage
        && event["verb"] == verb
        && event["objectRef"]["resource"] == resource
        && event["objectRef"]["name"] == name
}

/// The events of one request.
fn of_request(log: &Path, audit_id: &Value) -> Vec<Value> {
    events(log)
        .into_iter()
        .filter(|e| e["auditID"] == *audit_id)
        .collect()
}

/// The stages of one request's events, in order.
fn stages(log: &Path, audit_id: &Value) -> Vec<String> {
    of_request(log, audit_id)
        .iter()
        .map(|e| e["stage"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A MicroTime: `2026-12-02T20:21:40.123456Z`.
fn is_micro_time(value: &Value) -> bool {
    let text = value.as_str().unwrap_or_default();
    text.len() == 27
        && text.ends_with('Z')
        && text.as_bytes()[19] == b'.'
        && text.as_bytes()[10] == b'T'
}

/// The `Audit-Id` header of a GET as the admin (the body thrown away).
fn audit_id_header(cluster: &Cluster, path: &str, extra: &[&str]) -> Option<String> {
    let mut cmd = cluster.curl_command(As::Admin);
    cmd.args(["-D", "-", "-o", "/dev/null"]);
    for header in extra {
        cmd.args(["-H", header]);
    }
    let out = cmd
        .arg(format!("https://127.0.0.1:{}{path}", cluster.port))
        .output()
        .expect("curl on PATH");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("audit-id")
                .then(|| value.trim().to_string())
        })
}

/// A directory of its own for the policy, the log and the webhook's files.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "kubechain-audit-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// A port nothing listens on yet.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn the_audit_log_records_what_the_policy_asks_for() {
    let dir = scratch();
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let log = dir.join("audit.log");
    // The webhook backend: a Python HTTPS server, named by a kubeconfig.
    let hook_port = free_port();
    let ca = openssl_self_signed(&dir, "hook", "localhost");
    let hook_log = dir.join("webhook.jsonl");
    let mut hook = spawn_ready(
        Command::new("python3")
            .arg(workspace().join("tests/python/audit_webhook.py"))
            .arg(hook_port.to_string())
            .arg(dir.join("hook.crt"))
            .arg(dir.join("hook.key"))
            .arg(&hook_log),
    );
    let hook_config = dir.join("webhook.kubeconfig");
    std::fs::write(
        &hook_config,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: audit\n  cluster: {{server: 'https://localhost:{hook_port}/events', certificate-authority-data: {ca}}}\n\
             users:\n- name: audit\n  user: {{}}\ncontexts:\n- name: audit\n  context: {{cluster: audit, user: audit}}\ncurrent-context: audit\n"
        ),
    )
    .unwrap();
    let cluster = Cluster::start_with_env(
        &[
            "--audit-policy-file",
            policy.to_str().unwrap(),
            "--audit-log-path",
            log.to_str().unwrap(),
        ],
        &[
            (
                "KUBECHAIN_AUDIT_WEBHOOK_CONFIG_FILE",
                hook_config.to_str().unwrap(),
            ),
            ("KUBECHAIN_AUDIT_WEBHOOK_BATCH_MAX_WAIT", "1s"),
        ],
    );
    cluster.kubectl(&["create", "namespace", NS]).ok();
    cluster.kubectl(&["create", "namespace", "quiet"]).ok();

    // A create at RequestResponse, without its RequestReceived stage.
    cluster
        .kubectl(&[
            "-n",
            NS,
            "create",
            "configmap",
            "first",
            "--from-literal=a=b",
        ])
        .ok();
    let created = find(&log, "the configmap's create", |e| {
        is(e, "ResponseComplete", "create", "configmaps", "first")
    });
    assert_eq!(created["kind"], "Event");
    assert_eq!(created["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(created["level"], "RequestResponse");
    assert_eq!(
        created["requestURI"].as_str().unwrap().split('?').next(),
        Some("/api/v1/namespaces/audited/configmaps")
    );
    assert_eq!(created["user"]["username"], "kubernetes-admin");
    assert!(
        created["user"]["groups"]
            .as_array()
            .unwrap()
            .contains(&Value::from("system:masters")),
        "{created}"
    );
    assert!(created.get("impersonatedUser").is_none());
    assert_eq!(created["sourceIPs"], serde_json::json!(["127.0.0.1"]));
    assert!(
        created["userAgent"]
            .as_str()
            .unwrap()
            .starts_with("kubectl/"),
        "{created}"
    );
    assert_eq!(
        created["objectRef"],
        serde_json::json!({"resource": "configmaps", "namespace": NS, "name": "first", "apiVersion": "v1"})
    );
    assert_eq!(created["responseStatus"]["code"], 201);
    assert_eq!(created["requestObject"]["data"]["a"], "b");
    assert_eq!(created["responseObject"]["metadata"]["name"], "first");
    assert!(created["responseObject"]["metadata"]["uid"].is_string());
    // omitManagedFields: kubectl does see them.
    assert!(
        created["responseObject"]["metadata"]
            .get("managedFields")
            .is_none(),
        "{created}"
    );
    let stored = cluster
        .kubectl(&[
            "-n",
            NS,
            "get",
            "configmap",
            "first",
            "-o",
            "json",
            "--show-managed-fields",
        ])
        .json();
    assert!(stored["metadata"]["managedFields"].is_array(), "{stored}");
    assert_eq!(
        created["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    assert!(
        is_micro_time(&created["requestReceivedTimestamp"]),
        "{created}"
    );
    assert!(is_micro_time(&created["stageTimestamp"]), "{created}");
    assert!(created["stageTimestamp"].as_str() >= created["requestReceivedTimestamp"].as_str());
    assert_eq!(stages(&log, &created["auditID"]), ["ResponseComplete"]);

    // A get, with the object it answered.
    cluster
        .kubectl(&["-n", NS, "get", "configmap", "first"])
        .ok();
    let got = find(&log, "the configmap's get", |e| {
        is(e, "ResponseComplete", "get", "configmaps", "first")
    });
    assert_eq!(got["responseStatus"]["code"], 200);
    assert!(got.get("requestObject").is_none());
    assert!(got["responseObject"].is_object(), "{got}");

    // Nothing for the quiet namespace.
    cluster
        .kubectl(&["-n", "quiet", "create", "configmap", "hidden"])
        .ok();
    cluster
        .kubectl(&["-n", NS, "create", "configmap", "after-hidden"])
        .ok();
    find(&log, "the create after the quiet one", |e| {
        is(
            e,
            "ResponseComplete",
            "create",
            "configmaps",
            "after-hidden",
        )
    });
    assert!(
        !events(&log)
            .iter()
            .any(|e| e["objectRef"]["namespace"] == "quiet"),
        "the quiet namespace was audited"
    );

    // A Deployment at Request level: its body, not the answer's; every stage.
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {NS}}}\n\
         spec: {{replicas: 1, selector: {{matchLabels: {{app: web}}}}, template: {{metadata: {{labels: {{app: web}}}}, spec: {{containers: [{{name: web, image: nginx}}]}}}}}}\n"
    );
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &deployment)
        .ok();
    let web = find(&log, "the deployment's create", |e| {
        is(e, "ResponseComplete", "create", "deployments", "web")
    });
    assert_eq!(web["level"], "Request");
    assert_eq!(web["objectRef"]["apiGroup"], "apps");
    assert_eq!(web["requestObject"]["spec"]["replicas"], 1);
    assert!(web.get("responseObject").is_none(), "{web}");
    assert_eq!(
        stages(&log, &web["auditID"]),
        ["RequestReceived", "ResponseComplete"]
    );
    let received = &of_request(&log, &web["auditID"])[0];
    assert!(received.get("responseStatus").is_none(), "{received}");

    // A subresource by the `resource/*` rule: the scale of the deployment.
    cluster
        .kubectl(&["-n", NS, "scale", "deployment", "web", "--replicas=2"])
        .ok();
    let scaled = find(&log, "the scale", |e| {
        e["stage"] == "ResponseComplete" && e["objectRef"]["subresource"] == "scale"
    });
    assert_eq!(scaled["level"], "Request");
    assert_eq!(scaled["verb"], "patch");

    // A watch: ResponseStarted when it begins, ResponseComplete when it ends.
    cluster
        .kubectl(&[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/{NS}/configmaps?watch=true&timeoutSeconds=2"),
        ])
        .ok();
    let watch = find(&log, "the watch's end", |e| {
        e["stage"] == "ResponseComplete" && e["verb"] == "watch"
    });
    assert_eq!(
        stages(&log, &watch["auditID"]),
        ["ResponseStarted", "ResponseComplete"]
    );
    let started = &of_request(&log, &watch["auditID"])[0];
    assert_eq!(started["responseStatus"]["code"], 200);
    assert!(
        watch.get("responseObject").is_none(),
        "a watch's events are not recorded"
    );

    // A request proxied to metrics-server: audited once, here.
    let proxied_path = "/apis/metrics.k8s.io/v1beta1/nodes";
    assert!(
        eventually(Duration::from_secs(20), || cluster
            .kubectl(&["get", "--raw", proxied_path])
            .code
            == 0),
        "metrics-server did not answer"
    );
    let proxied = find(&log, "the proxied list", |e| {
        e["stage"] == "ResponseComplete"
            && e["requestURI"] == proxied_path
            && e["responseStatus"]["code"] == 200
    });
    assert_eq!(proxied["level"], "Metadata");
    assert_eq!(proxied["verb"], "list");
    assert_eq!(proxied["objectRef"]["apiGroup"], "metrics.k8s.io");
    assert_eq!(proxied["objectRef"]["resource"], "nodes");
    assert!(proxied.get("responseObject").is_none());
    assert_eq!(
        stages(&log, &proxied["auditID"]),
        ["RequestReceived", "ResponseComplete"]
    );

    // Impersonation: the user is the admin, acting as alice in system:masters.
    cluster
        .kubectl(&[
            "--as=alice",
            "--as-group=system:masters",
            "-n",
            NS,
            "get",
            "configmap",
            "first",
        ])
        .ok();
    let impersonated = find(&log, "the impersonated get", |e| {
        e["stage"] == "ResponseComplete" && e["impersonatedUser"]["username"] == "alice"
    });
    assert_eq!(impersonated["user"]["username"], "kubernetes-admin");
    assert_eq!(
        impersonated["impersonatedUser"]["groups"],
        serde_json::json!(["system:masters", "system:authenticated"])
    );
    assert_eq!(
        impersonated["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    assert_eq!(impersonated["responseStatus"]["code"], 200);

    // A non-admin refused: forbid, and the 403 Status.
    let token = cluster.service_account_token("nobody");
    let refused = cluster.curl(
        As::Token(&token),
        "GET",
        &format!("/api/v1/namespaces/{NS}/secrets"),
        &[],
        None,
    );
    assert_eq!(refused.code, 403);
    let forbidden = find(&log, "the refused list", |e| {
        e["stage"] == "ResponseComplete"
            && e["user"]["username"] == "system:serviceaccount:default:nobody"
    });
    assert_eq!(
        forbidden["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    assert!(forbidden["annotations"]["authorization.k8s.io/reason"].is_string());
    assert_eq!(forbidden["responseStatus"]["code"], 403);
    assert_eq!(forbidden["responseStatus"]["reason"], "Forbidden");
    assert_eq!(forbidden["responseStatus"]["status"], "Failure");
    assert_eq!(
        forbidden["responseStatus"]["message"],
        refused.json["message"]
    );
    assert_eq!(forbidden["objectRef"]["resource"], "secrets");

    // An admission policy's Audit action: its annotation, added in
    // core-server, is in the front door's event.
    let vap = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: flagged.example.com}\nspec:\n\
               \x20 matchConstraints:\n    resourceRules: [{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}]\n\
               \x20 validations:\n  - expression: \"!object.metadata.name.startsWith('flagged')\"\n    message: flagged names are noted\n\
               ---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: flagged.example.com-binding}\n\
               spec:\n  policyName: flagged.example.com\n  validationActions: [Audit]\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], vap).ok();
    let mut attempt = 0;
    let annotated = |name: &str| {
        events(&log)
            .into_iter()
            .find(|e| is(e, "ResponseComplete", "create", "configmaps", name))
    };
    let mut flagged = None;
    assert!(
        eventually(Duration::from_secs(15), || {
            attempt += 1;
            let name = format!("flagged-{attempt}");
            cluster
                .kubectl(&["-n", NS, "create", "configmap", &name])
                .ok();
            let mut event = None;
            eventually(Duration::from_secs(3), || {
                event = annotated(&name);
                event.is_some()
            });
            flagged = event.filter(|e| {
                e["annotations"]
                    .get("validation.policy.admission.k8s.io/validation_failure")
                    .is_some()
            });
            flagged.is_some()
        }),
        "no validation_failure annotation in the front door's events"
    );
    let flagged = flagged.unwrap();
    let failure: Value = serde_json::from_str(
        flagged["annotations"]["validation.policy.admission.k8s.io/validation_failure"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(failure[0]["message"], "flagged names are noted");
    assert_eq!(failure[0]["policy"], "flagged.example.com");
    assert_eq!(
        failure[0]["validationActions"],
        serde_json::json!(["Audit"])
    );
    assert_eq!(
        flagged["responseStatus"]["code"], 201,
        "Audit does not refuse"
    );
    // Annotations are for the log, never for the client.
    let answer = cluster.kubectl(&["-n", NS, "create", "configmap", "flagged-x", "-v=8"]);
    assert!(
        !answer.stderr.to_lowercase().contains("validation_failure"),
        "{}",
        answer.stderr
    );

    // Pod Security's annotations, from core-server: the enforced policy and,
    // for the `audit` label, what the pod would violate.
    cluster
        .kubectl(&[
            "label",
            "namespace",
            NS,
            "pod-security.kubernetes.io/enforce=baseline",
            "pod-security.kubernetes.io/audit=restricted",
        ])
        .ok();
    cluster
        .kubectl(&["-n", NS, "run", "plain", "--image=nginx"])
        .ok();
    let pod = find(&log, "the pod's create", |e| {
        is(e, "ResponseComplete", "create", "pods", "plain")
    });
    assert_eq!(
        pod["annotations"]["pod-security.kubernetes.io/enforce-policy"], "baseline:latest",
        "{pod}"
    );
    let violations = pod["annotations"]["pod-security.kubernetes.io/audit-violations"]
        .as_str()
        .unwrap_or_default();
    assert!(
        violations.starts_with("would violate PodSecurity \"restricted:latest\""),
        "{pod}"
    );
    let refused = cluster.kubectl_stdin(
        &["create", "-f", "-"],
        &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: privileged, namespace: {NS}}}\nspec: {{containers: [{{name: c, image: nginx, securityContext: {{privileged: true}}}}]}}\n"),
    );
    assert!(
        refused.err().contains("violates PodSecurity"),
        "{}",
        refused.stderr
    );
    let denied = find(&log, "the refused pod", |e| {
        is(e, "ResponseComplete", "create", "pods", "privileged")
    });
    assert_eq!(denied["responseStatus"]["code"], 403);
    assert_eq!(
        denied["annotations"]["pod-security.kubernetes.io/enforce-policy"],
        "baseline:latest"
    );
    assert_eq!(
        denied["annotations"]["authorization.k8s.io/decision"], "allow",
        "RBAC allowed it; admission refused it"
    );

    // Audit-Id: the response header is the event's auditID, and a client's own id is kept.
    let id = audit_id_header(
        &cluster,
        &format!("/api/v1/namespaces/{NS}/configmaps/first"),
        &[],
    )
    .expect("an Audit-Id header");
    let by_id = find(&log, "the curl get", |e| {
        e["auditID"] == id.as_str() && e["stage"] == "ResponseComplete"
    });
    assert!(
        is(&by_id, "ResponseComplete", "get", "configmaps", "first"),
        "{by_id}"
    );
    let mine = audit_id_header(
        &cluster,
        &format!("/api/v1/namespaces/{NS}/configmaps/first"),
        &["Audit-ID: my-own-id-1", "X-Forwarded-For: 192.0.2.10"],
    );
    assert_eq!(mine.as_deref(), Some("my-own-id-1"));
    let forwarded = find(&log, "the forwarded get", |e| {
        e["auditID"] == "my-own-id-1" && e["stage"] == "ResponseComplete"
    });
    assert_eq!(
        forwarded["sourceIPs"],
        serde_json::json!(["192.0.2.10", "127.0.0.1"])
    );
    // core-server's log names the request by the front door's audit id
    // (its span of a sampled trace).
    let traced = audit_id_header(
        &cluster,
        &format!("/api/v1/namespaces/{NS}/configmaps/first"),
        &[
            "Audit-ID: traced-id-1",
            "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ],
    );
    assert_eq!(traced.as_deref(), Some("traced-id-1"));
    assert!(
        eventually(Duration::from_secs(5), || {
            std::fs::read_to_string(cluster.dir.join("logs/core-server.log"))
                .unwrap_or_default()
                .contains("audit_id=traced-id-1")
        }),
        "core-server's log does not name the audit id"
    );
    // Every response carries one, errors and proxied answers included.
    assert!(audit_id_header(&cluster, "/api/v1/namespaces/nowhere/configmaps/none", &[]).is_some());
    assert!(audit_id_header(&cluster, proxied_path, &[]).is_some());

    // The webhook got the same events, in EventList batches.
    let mut delivered = Vec::new();
    assert!(
        eventually(Duration::from_secs(20), || {
            delivered = std::fs::read_to_string(&hook_log)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .collect();
            delivered
                .iter()
                .any(|d| d["event"]["auditID"] == id.as_str())
        }),
        "the webhook never got the curl get's events ({} delivered)",
        delivered.len()
    );
    assert!(
        delivered
            .iter()
            .any(|d| d["event"]["auditID"] == created["auditID"])
    );
    assert!(
        delivered.iter().any(|d| d["batch"].as_u64() > Some(1)),
        "no batching"
    );

    let _ = hook.kill();
    let _ = hook.wait();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn without_a_policy_every_response_still_has_an_audit_id_and_a_bad_policy_stops_up() {
    let cluster = Cluster::start();
    let first = audit_id_header(&cluster, "/api/v1/namespaces/default/configmaps", &[])
        .expect("an Audit-Id");
    let second = audit_id_header(&cluster, "/api/v1/namespaces/default/configmaps", &[])
        .expect("an Audit-Id");
    assert_eq!(first.len(), 36, "{first}");
    assert_ne!(first, second);
    let anonymous = cluster
        .curl_command(As::Anonymous)
        .args(["-D", "-", "-o", "/dev/null"])
        .arg(format!(
            "https://127.0.0.1:{}/api/v1/namespaces",
            cluster.port
        ))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&anonymous.stdout).to_lowercase();
    assert!(head.contains("audit-id: "), "{head}");

    // A policy that does not parse: `kubechain up` refuses to start, saying why.
    let dir = scratch();
    let policy = dir.join("bad.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n",
    )
    .unwrap();
    let out = Command::new(tests::bin_dir().join("kubechain"))
        .args(["up", "--port", &free_port().to_string(), "--data-dir"])
        .arg(dir.join("cluster"))
        .arg("--audit-policy-file")
        .arg(&policy)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("Loud"),
        "{stderr}"
    );
    // And the aggregator itself refuses it too.
    let out = Command::new(tests::bin_dir().join("aggregator"))
        .arg("--audit-policy-file")
        .arg(&policy)
        .args([
            "--tls-cert-file",
            "x",
            "--tls-private-key-file",
            "x",
            "--client-ca-file",
            "x",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Loud"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_audit_log_and_the_clusters_secrets_are_readable_only_by_their_owner() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .permissions()
            .mode()
            & 0o777
    };
    let dir = scratch();
    // The shipped example policy, and a log in a directory that is not there yet.
    let log = dir.join("logs/audit.log");
    let policy = workspace().join("deploy/audit-policy.yaml");
    let cluster = Cluster::start_with(&[
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-log-path",
        log.to_str().unwrap(),
    ]);
    // A TokenReview names a live token in its request.
    let token = cluster.service_account_token("reviewed");
    let review = serde_json::json!({"apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview", "spec": {"token": token}});
    let reviewed = cluster.curl(
        As::Admin,
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        &["Content-Type: application/json"],
        Some(review.to_string().as_bytes()),
    );
    assert_eq!(reviewed.code, 201, "{}", reviewed.text);
    assert!(
        reviewed.text.contains("\"authenticated\":true"),
        "{}",
        reviewed.text
    );
    let event = find(&log, "the token review", |e| {
        e["verb"] == "create" && e["objectRef"]["resource"] == "tokenreviews"
    });
    assert_eq!(event["level"], "Metadata", "{event}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(&token), "the audit log holds the token");
    // The log and the directory made for it are the server's alone.
    assert_eq!(mode(&log), 0o600);
    assert_eq!(mode(log.parent().unwrap()), 0o700);
    // So are the cluster's keys, kubeconfig and encryption config.
    assert_eq!(mode(&cluster.dir), 0o700);
    assert_eq!(mode(&cluster.dir.join("pki")), 0o700);
    assert_eq!(mode(&cluster.dir.join("kubeconfig")), 0o600);
    let mut keys = 0;
    for entry in std::fs::read_dir(cluster.dir.join("pki")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".key") || name.contains("encryption") {
            assert_eq!(mode(&path), 0o600, "{name}");
            keys += 1;
        }
    }
    assert!(keys > 5, "only {keys} secret files");
    drop(cluster);
    let _ = std::fs::remove_dir_all(dir);
}
