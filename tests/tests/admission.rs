//! Admission webhooks end to end, through the front door with kubectl and
//! curl: a webhook server written in Python (`tests/python/admission_webhook.py`)
//! behind a Service and with an `openssl req -x509` certificate, called for
//! built-ins (core-server), custom resources (extension-server) and
//! APIServices (aggregator): denials in kube's words, JSONPatch mutations
//! and reinvocation, warnings, selectors, dry run, failurePolicy against a
//! stopped webhook, and a timeout.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tests::{As, Cluster, eventually, webhook_behind_service};

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

/// Whether core-server logged the audit annotation `entry` (`key=… value=…`)
/// for a write of the object `name`.
fn annotated(cluster: &Cluster, name: &str, entry: &str) -> bool {
    std::fs::read_to_string(cluster.dir.join("logs/core-server.log"))
        .unwrap_or_default()
        .lines()
        .any(|line| {
            line.contains("admission annotation")
                && line.contains(&format!("name=\"{name}\""))
                && line.contains(entry)
        })
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
/// matchConditions: objects labelled `skip` are not sent; one named
/// `explode` makes a condition fail to evaluate (failurePolicy Fail).
const CONDITIONS: &str = concat!(
    "  matchConditions:\n",
    "  - {name: not-skipped, expression: \"!has(object.metadata.labels) || !('skip' in object.metadata.labels)\"}\n",
    "  - {name: explodes, expression: \"object.metadata.name != 'explode' || object.data.nope == 'x'\"}\n",
);

#[test]
fn webhooks_deny_mutate_and_warn_for_every_server() {
    let cluster = Cluster::start();
    let (ca, log, mut webhook) = webhook_behind_service(&cluster);
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
        hook(
            "deny.example.com",
            "/validate",
            &ca,
            CONFIGMAPS,
            &format!("{HOOKED}{CONDITIONS}")
        ),
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
    assert!(
        annotated(
            &cluster,
            "bad-one",
            "key=deny.example.com/looked-at value=bad-one"
        ),
        "the webhook's auditAnnotations are kept"
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
    // matchConditions: a false one skips the webhook; one that fails to
    // evaluate refuses the write, as failurePolicy Fail says.
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad-skipped, namespace: hooked, labels: {skip: \"yes\"}}\n",
        )
        .ok();
    assert!(
        !reviews_of(&log, "bad-skipped").iter().any(|r| r["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("/validate"))),
        "the validating webhook was skipped"
    );
    let exploded = cluster.kubectl(&["-n", "hooked", "create", "configmap", "explode"]);
    assert!(
        exploded.err().contains(
            "configmaps \"explode\" is forbidden: expression 'object.metadata.name != 'explode' || object.data.nope == 'x'' resulted in error: no such key: data"
        ),
        "{exploded:?}"
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
    // The webhook is the next hop of the request's trace.
    let traceparent = reviews[0]["traceparent"].as_str().unwrap_or_default();
    assert!(
        traceparent.len() == 55 && traceparent.starts_with("00-"),
        "no traceparent: {:?}",
        reviews[0]["traceparent"]
    );
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
    let down = tests::free_port();
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
    let mut probe = 0;
    assert!(
        eventually(Duration::from_secs(10), || {
            probe += 1;
            let name = format!("s-probe-{probe}");
            cluster
                .kubectl(&["-n", "hooked", "create", "secret", "generic", &name])
                .code
                == 0
                && annotated(
                    &cluster,
                    &name,
                    "key=failed-open.validating.webhook.admission.k8s.io/round_0_index_0 value=down.example.com",
                )
        }),
        "failurePolicy Ignore lets the write through, noting that it failed open"
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
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: slow}}\nwebhooks:\n{}{}",
        hook(
            "slow.example.com",
            "/slow",
            &ca,
            "[{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [serviceaccounts]}]",
            &format!("{HOOKED}  timeoutSeconds: 1\n"),
        ),
        hook(
            "patient.example.com",
            "/slow",
            &ca,
            "[{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [podtemplates]}]",
            &format!("{HOOKED}  timeoutSeconds: 10\n"),
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
    // The request's own deadline (`?timeout=`, 60 s by default): kube's 504
    // when it passes first, kube's 400 when it is not a duration.
    let template = |name: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"PodTemplate","metadata":{{"name":"{name}"}},"template":{{"spec":{{"containers":[{{"name":"c","image":"x"}}]}}}}}}"#
        )
    };
    let post = |query: &str, name: &str| {
        cluster.curl(
            As::Admin,
            "POST",
            &format!("/api/v1/namespaces/hooked/podtemplates{query}"),
            &["Content-Type: application/json"],
            Some(template(name).as_bytes()),
        )
    };
    let late = post("?timeout=1s", "late");
    assert_eq!(late.code, 504, "{}", late.text);
    assert_eq!(late.json["reason"], "Timeout");
    assert_eq!(
        late.json["message"],
        "Timeout: request did not complete within requested timeout - context deadline exceeded"
    );
    let bad = post("?timeout=soon", "soon");
    assert_eq!(bad.code, 400, "{}", bad.text);
    assert_eq!(
        bad.json["message"],
        "invalid timeout specified in the request URL - time: invalid duration \"soon\""
    );
    let in_time = post("", "in-time");
    assert_eq!(
        in_time.code, 201,
        "within the default 60 s: {}",
        in_time.text
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

/// A ValidatingAdmissionPolicy and its binding, as kubectl applies them.
fn policy(name: &str, spec: &str, binding: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {name}}}\nspec:\n{spec}\
         ---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: {name}-binding}}\nspec:\n  policyName: {name}\n{binding}"
    )
}

/// A Deployment of `replicas` nginx pods running `image`, with `labels`.
fn deployment(name: &str, namespace: &str, replicas: u32, image: &str, labels: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: {namespace}, labels: {{{labels}}}}}\n\
         spec: {{replicas: {replicas}, selector: {{matchLabels: {{app: {name}}}}},\n\
         template: {{metadata: {{labels: {{app: {name}}}}}, spec: {{containers: [{{name: web, image: \"{image}\"}}]}}}}}}\n"
    )
}

const REPLICAS: &str = concat!(
    "  paramKind: {apiVersion: v1, kind: ConfigMap}\n",
    "  matchConstraints:\n    resourceRules: [{operations: [CREATE, UPDATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]\n",
    "  matchConditions:\n  - {name: not-exempt, expression: \"!has(object.metadata.labels) || !('exempt' in object.metadata.labels)\"}\n",
    "  variables:\n  - {name: replicas, expression: object.spec.replicas}\n",
    "  validations:\n  - expression: variables.replicas <= int(params.data.maxReplicas)\n",
    "    messageExpression: \"'replicas ' + string(variables.replicas) + ' exceed ' + params.data.maxReplicas + ' in ' + namespaceObject.metadata.name\"\n",
);

#[test]
fn policies_deny_warn_and_audit_with_params() {
    let cluster = Cluster::start();
    cluster.kubectl(&["create", "namespace", "policed"]).ok();
    cluster
        .kubectl(&["label", "namespace", "policed", "env=prod"])
        .ok();
    cluster.kubectl(&["create", "namespace", "free"]).ok();
    cluster
        .kubectl(&[
            "create",
            "configmap",
            "replica-limit",
            "-n",
            "policed",
            "--from-literal=maxReplicas=3",
        ])
        .ok();
    let binding = "  paramRef: {name: replica-limit, parameterNotFoundAction: Deny}\n  validationActions: [Deny]\n\
                   \x20 matchResources: {namespaceSelector: {matchLabels: {env: prod}}}\n";
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &policy("replicas.example.com", REPLICAS, binding),
        )
        .ok();

    // Deny, with the messageExpression's words, params, variables and namespaceObject.
    let cause = "ValidatingAdmissionPolicy 'replicas.example.com' with binding 'replicas.example.com-binding' \
                 denied request: replicas 5 exceed 3 in policed";
    // kubectl apply prints a 422's causes as kube's Status carries them.
    let wanted = format!("The deployments \"big\" is invalid: : {cause}");
    let big = deployment("big", "policed", 5, "nginx:1.27", "");
    // Dry runs go through the policy too, and create nothing while we wait.
    assert!(
        eventually(Duration::from_secs(10), || {
            let run = cluster.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &big);
            run.code != 0 && run.stderr.contains(&wanted)
        }),
        "the policy never refused the deployment"
    );
    let run = cluster.kubectl_stdin(&["apply", "-f", "-"], &big);
    assert!(
        run.code != 0 && run.stderr.contains(&wanted),
        "{}",
        run.stderr
    );
    let answer = cluster.curl(
        As::Admin,
        "POST",
        "/apis/apps/v1/namespaces/policed/deployments",
        &["Content-Type: application/yaml"],
        Some(big.as_bytes()),
    );
    assert_eq!(answer.code, 422, "{}", answer.text);
    assert_eq!(answer.json["reason"], "Invalid");
    assert_eq!(
        answer.json["message"],
        format!("deployments.apps \"big\" is forbidden: {cause}")
    );
    assert_eq!(answer.json["details"]["causes"][0]["message"], cause);
    assert_eq!(answer.json["details"]["name"], "big");
    // Within the limit, outside the binding's namespaces, or excluded by a matchCondition.
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &deployment("small", "policed", 2, "nginx:1.27", ""),
        )
        .ok();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &deployment("big", "free", 5, "nginx:1.27", ""),
        )
        .ok();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &deployment("spared", "policed", 5, "nginx:1.27", "exempt: \"yes\""),
        )
        .ok();
    // An update is checked too (the scale subresource is not: the rule names `deployments` only).
    let scaled = cluster.kubectl(&[
        "patch",
        "deployment/small",
        "-n",
        "policed",
        "-p",
        "{\"spec\":{\"replicas\":4}}",
    ]);
    assert!(
        scaled.stderr.contains("replicas 4 exceed 3 in policed"),
        "{}",
        scaled.stderr
    );

    // A ServiceAccount allowed to create deployments is refused alike.
    let token = cluster.service_account_token("deployer");
    cluster
        .kubectl(&[
            "create",
            "role",
            "deployer",
            "-n",
            "policed",
            "--verb=create,get,patch",
            "--resource=deployments",
        ])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "rolebinding",
            "deployer",
            "-n",
            "policed",
            "--role=deployer",
            "--serviceaccount=default:deployer",
        ])
        .ok();
    let config = cluster.token_kubeconfig("deployer", &token, "policed");
    let refused = cluster.kubectl_with(
        &config,
        &[
            "create",
            "deployment",
            "sa-big",
            "--image=nginx:1.27",
            "--replicas=9",
        ],
    );
    assert!(
        refused.stderr.contains("replicas 9 exceed 3 in policed"),
        "{}",
        refused.stderr
    );
    cluster
        .kubectl_with(
            &config,
            &[
                "create",
                "deployment",
                "sa-small",
                "--image=nginx:1.27",
                "--replicas=1",
            ],
        )
        .ok();

    // Params are read live.
    cluster
        .kubectl(&[
            "patch",
            "configmap",
            "replica-limit",
            "-n",
            "policed",
            "-p",
            "{\"data\":{\"maxReplicas\":\"10\"}}",
        ])
        .ok();
    assert!(eventually(Duration::from_secs(10), || {
        cluster.kubectl_stdin(&["apply", "-f", "-"], &big).code == 0
    }));
    // A missing param with parameterNotFoundAction Deny refuses every write.
    cluster
        .kubectl(&["delete", "configmap", "replica-limit", "-n", "policed"])
        .ok();
    let missing = "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction";
    assert!(eventually(Duration::from_secs(10), || {
        let run = cluster.kubectl_stdin(
            &["apply", "-f", "-"],
            &deployment("other", "policed", 1, "nginx:1.27", ""),
        );
        run.stderr.contains(missing)
    }));

    // Warn and Audit: the write goes on, kubectl shows the warning, the log has the annotation.
    let latest = "  matchConstraints:\n    resourceRules: [{operations: [CREATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]\n\
                  \x20 validations:\n  - expression: \"!object.spec.template.spec.containers.exists(c, c.image.endsWith(':latest'))\"\n\
                  \x20   message: images must not use the latest tag\n";
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &policy(
                "no-latest.example.com",
                latest,
                "  validationActions: [Warn, Audit]\n",
            ),
        )
        .ok();
    let warning = "Warning: Validation failed for ValidatingAdmissionPolicy 'no-latest.example.com' with binding \
                   'no-latest.example.com-binding': images must not use the latest tag";
    let mut attempt = 0;
    assert!(
        eventually(Duration::from_secs(10), || {
            attempt += 1;
            let run = cluster.kubectl_stdin(
                &["apply", "-f", "-"],
                &deployment(&format!("latest-{attempt}"), "free", 1, "nginx:latest", ""),
            );
            run.code == 0 && run.stderr.contains(warning)
        }),
        "no warning"
    );
    assert!(
        annotated(
            &cluster,
            &format!("latest-{attempt}"),
            "key=validation.policy.admission.k8s.io/validation_failure value=[{\"message\":\"images must not use the latest tag\",\
             \"policy\":\"no-latest.example.com\",\"binding\":\"no-latest.example.com-binding\",\"expressionIndex\":0,\
             \"validationActions\":[\"Warn\",\"Audit\"]}]"
        ),
        "no audit annotation in core-server's log"
    );

    // Deletes are validated too, and their warnings reach kubectl.
    let keep = "  matchConstraints:\n    resourceRules: [{operations: [DELETE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}]\n\
                \x20 validations:\n  - expression: \"!has(oldObject.metadata.labels) || !('keep' in oldObject.metadata.labels)\"\n\
                \x20   message: this configmap was marked keep\n";
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &policy("keep.example.com", keep, "  validationActions: [Warn]\n"),
        )
        .ok();
    let mut kept = 0;
    assert!(
        eventually(Duration::from_secs(10), || {
            kept += 1;
            let name = format!("kept-{kept}");
            cluster
                .kubectl(&["create", "configmap", &name, "-n", "free"])
                .ok();
            cluster
                .kubectl(&["label", "configmap", &name, "-n", "free", "keep=yes"])
                .ok();
            let run = cluster.kubectl(&["delete", "configmap", &name, "-n", "free"]);
            run.code == 0
                && run.stderr.contains(
                    "Warning: Validation failed for ValidatingAdmissionPolicy 'keep.example.com' with binding 'keep.example.com-binding': this configmap was marked keep",
                )
        }),
        "no warning on delete"
    );

    // The authorizer: a ConfigMap that names a Secret needs the right to read it.
    let secrets = "  matchConstraints:\n    resourceRules: [{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}]\n\
                   \x20 validations:\n  - expression: \"!has(object.data) || !('secret' in object.data) || \
                   authorizer.group('').resource('secrets').namespace(request.namespace).name(object.data.secret).check('get').allowed()\"\n\
                   \x20   message: you may not name a secret you cannot read\n\x20   reason: Forbidden\n";
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &policy(
                "secret-refs.example.com",
                secrets,
                "  validationActions: [Deny]\n",
            ),
        )
        .ok();
    cluster
        .kubectl(&[
            "create",
            "role",
            "configmaps",
            "-n",
            "policed",
            "--verb=create",
            "--resource=configmaps",
        ])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "rolebinding",
            "configmaps",
            "-n",
            "policed",
            "--role=configmaps",
            "--serviceaccount=default:deployer",
        ])
        .ok();
    assert!(eventually(Duration::from_secs(10), || {
        let run = cluster.kubectl_with(
            &config,
            &[
                "create",
                "configmap",
                "names-secret",
                "--from-literal=secret=db",
            ],
        );
        run.code != 0
            && run.stderr.contains("configmaps \"names-secret\" is forbidden: ValidatingAdmissionPolicy 'secret-refs.example.com' with binding 'secret-refs.example.com-binding' denied request: you may not name a secret you cannot read")
    }));
    cluster
        .kubectl_with(
            &config,
            &["create", "configmap", "plain", "--from-literal=key=value"],
        )
        .ok();
    cluster
        .kubectl(&[
            "create",
            "configmap",
            "names-secret",
            "-n",
            "policed",
            "--from-literal=secret=db",
        ])
        .ok();

    // failurePolicy: an expression that fails is ignored with Ignore, refuses with Fail.
    let broken = |failure: &str| {
        format!(
            "  failurePolicy: {failure}\n  matchConstraints:\n    resourceRules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [secrets]}}]\n\
             \x20 validations:\n  - expression: object.data.missing == 'x'\n"
        )
    };
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &policy(
                "broken.example.com",
                &broken("Ignore"),
                "  validationActions: [Deny]\n",
            ),
        )
        .ok();
    std::thread::sleep(Duration::from_secs(1));
    cluster
        .kubectl(&[
            "create",
            "secret",
            "generic",
            "ignored",
            "-n",
            "free",
            "--from-literal=a=b",
        ])
        .ok();
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &policy(
                "broken.example.com",
                &broken("Fail"),
                "  validationActions: [Deny]\n",
            ),
        )
        .ok();
    assert!(eventually(Duration::from_secs(10), || {
        let run = cluster.kubectl(&[
            "create",
            "secret",
            "generic",
            "failed",
            "-n",
            "free",
            "--from-literal=a=b",
        ]);
        run.stderr.contains("denied request: expression 'object.data.missing == 'x'' resulted in error: no such key: missing")
    }));

    // Custom resources are admitted by extension-server's own policy plugin.
    let gadgets = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.example.com}\n\
                   spec: {group: example.com, scope: Namespaced, names: {plural: gadgets, kind: Gadget},\n\
                   versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], gadgets).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/gadgets.example.com",
        ])
        .ok();
    let small = "  matchConstraints:\n    resourceRules: [{operations: [CREATE], apiGroups: [example.com], apiVersions: [\"*\"], resources: [gadgets]}]\n\
                 \x20 validations:\n  - {expression: object.spec.size < 10, message: gadgets must be small, reason: Forbidden}\n";
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &policy(
                "small-gadgets.example.com",
                small,
                "  validationActions: [Deny]\n",
            ),
        )
        .ok();
    let gadget = |name: &str, size: u32| {
        format!(
            "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {{name: {name}, namespace: free}}\nspec: {{size: {size}}}\n"
        )
    };
    assert!(eventually(Duration::from_secs(10), || {
        let run = cluster.kubectl_stdin(
            &["create", "--dry-run=server", "-f", "-"],
            &gadget("huge", 20),
        );
        run.stderr.contains(
            "gadgets.example.com \"huge\" is forbidden: ValidatingAdmissionPolicy 'small-gadgets.example.com' \
             with binding 'small-gadgets.example.com-binding' denied request: gadgets must be small",
        )
    }));
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &gadget("tiny", 2))
        .ok();

    // An expression that does not compile is refused when the policy is written.
    let bad = policy(
        "bad.example.com",
        "  matchConstraints:\n    resourceRules: [{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}]\n\
         \x20 validations:\n  - expression: nothing.here == 1\n",
        "  validationActions: [Deny]\n",
    );
    let refused = cluster.kubectl_stdin(&["apply", "-f", "-"], &bad);
    assert!(
        refused.stderr.contains("spec.validations[0].expression: Invalid value: \"nothing.here == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'nothing'"),
        "{}",
        refused.stderr
    );
}

/// A ValidatingAdmissionPolicy (no binding) checking `resources` of
/// `group`/v1 with one validation.
fn checked_policy(name: &str, group: &str, resources: &str, expression: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {name}}}\nspec:\n\
         \x20 matchConstraints:\n    resourceRules: [{{operations: [CREATE], apiGroups: [\"{group}\"], apiVersions: [v1], resources: [{resources}]}}]\n\
         \x20 validations:\n  - {{expression: \"{expression}\"}}\n"
    )
}

#[test]
fn policies_are_type_checked_against_the_kinds_they_match() {
    let cluster = Cluster::start();
    let sprockets = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: sprockets.example.com}\n\
                     spec: {group: example.com, scope: Namespaced, names: {plural: sprockets, kind: Sprocket},\n\
                     versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: integer}}}}}}}]}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], sprockets).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/sprockets.example.com",
        ])
        .ok();
    for (name, group, resources, expression) in [
        (
            "misspelt",
            "apps",
            "deployments",
            "object.spec.replicass > 1",
        ),
        (
            "right",
            "apps",
            "deployments, deployments/scale",
            "object.spec.replicas > 1",
        ),
        (
            "sprockets",
            "example.com",
            "sprockets",
            "object.spec.sise < 10",
        ),
        ("anything", "*", "deployments", "object.spec.replicass > 1"),
    ] {
        cluster
            .kubectl_stdin(
                &["apply", "-f", "-"],
                &checked_policy(name, group, resources, expression),
            )
            .ok();
    }
    let status = |name: &str| {
        let policy = cluster
            .kubectl(&["get", "validatingadmissionpolicy", name, "-o", "json"])
            .json();
        let checked = policy["status"]["observedGeneration"] == policy["metadata"]["generation"];
        checked.then(|| policy["status"].clone())
    };
    let warned = |name: &str, kind: &str, source: &str, column: usize, field: &str| {
        let warning = format!(
            "{kind}: ERROR: <input>:1:{column}: undefined field '{field}'\n | {source}\n | {}^\n",
            ".".repeat(column - 1)
        );
        let wanted =
            serde_json::json!([{"fieldRef": "spec.validations[0].expression", "warning": warning}]);
        let mut seen = Value::Null;
        let found = eventually(Duration::from_secs(20), || {
            seen = status(name).unwrap_or_default();
            seen["typeChecking"]["expressionWarnings"] == wanted
        });
        assert!(found, "{name}: {seen}");
    };
    let clean = |name: &str| {
        let mut seen = Value::Null;
        let found = eventually(Duration::from_secs(20), || {
            seen = status(name).unwrap_or_default();
            seen["typeChecking"].is_object()
                && seen["typeChecking"].get("expressionWarnings").is_none()
        });
        assert!(found, "{name}: {seen}");
    };
    warned(
        "misspelt",
        "apps/v1, Kind=Deployment",
        "object.spec.replicass > 1",
        12,
        "replicass",
    );
    warned(
        "sprockets",
        "example.com/v1, Kind=Sprocket",
        "object.spec.sise < 10",
        12,
        "sise",
    );
    clean("right");
    // Params typed as ConfigMaps, variables by their expressions.
    let binding =
        "  paramRef: {name: limits, parameterNotFoundAction: Deny}\n  validationActions: [Deny]\n";
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &policy("replicas.example.com", REPLICAS, binding),
        )
        .ok();
    clean("replicas.example.com");
    // Wildcard groups are not checked.
    clean("anything");

    // Fixed, the policy's next generation is checked again.
    cluster
        .kubectl(&[
            "patch",
            "validatingadmissionpolicy",
            "misspelt",
            "--type=json",
            "-p",
            r#"[{"op": "replace", "path": "/spec/validations/0/expression", "value": "object.spec.replicas > 1"}]"#,
        ])
        .ok();
    clean("misspelt");
    assert_eq!(
        status("misspelt").unwrap_or_default()["observedGeneration"],
        2
    );
}

/// A custom resource served as v1 (stored) and v2: rules naming only v2.
const GADGETS: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.example.com}\n\
    spec: {group: example.com, scope: Namespaced, names: {plural: gadgets, kind: Gadget},\n\
    versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}},\n\
    {name: v2, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]}\n";
const GADGETS_V2: &str =
    "[{operations: [CREATE], apiGroups: [example.com], apiVersions: [v2], resources: [gadgets]}]";

/// A Gadget named `name`, written in `version`.
fn gadget(name: &str, version: &str) -> String {
    format!(
        "apiVersion: example.com/{version}\nkind: Gadget\nmetadata: {{name: {name}, namespace: default}}\n"
    )
}

#[test]
fn equivalent_rules_see_other_versions_converted() {
    let cluster = Cluster::start();
    let (ca, log, mut webhook) = webhook_behind_service(&cluster);
    cluster.kubectl_stdin(&["apply", "-f", "-"], GADGETS).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/gadgets.example.com",
        ])
        .ok();
    let mutating = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {{name: versions}}\nwebhooks:\n{}{}",
        hook(
            "equivalent.example.com",
            "/mutate",
            &ca,
            GADGETS_V2,
            "  matchPolicy: Equivalent\n"
        ),
        hook(
            "exact.example.com",
            "/label",
            &ca,
            GADGETS_V2,
            "  matchPolicy: Exact\n"
        ),
    );
    // The policy's matchPolicy defaults to Equivalent, as kube's does.
    let spec = format!(
        "  matchConstraints:\n    resourceRules: {GADGETS_V2}\n  validations:\n\
         \x20 - expression: \"!object.metadata.name.startsWith('bad-')\"\n\
         \x20   messageExpression: \"'seen as ' + object.apiVersion + ', kind ' + request.kind.version + ', asked in ' + request.requestKind.version\"\n"
    );
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &format!(
                "{mutating}\n---\n{}",
                policy(
                    "versions.example.com",
                    &spec,
                    "  validationActions: [Deny]\n"
                )
            ),
        )
        .ok();

    // Written in v1: the Equivalent webhook and policy see it as v2, the
    // Exact webhook does not see it at all.
    let wanted = "seen as example.com/v2, kind v2, asked in v1";
    assert!(
        eventually(Duration::from_secs(10), || {
            let run = cluster.kubectl_stdin(&["create", "-f", "-"], &gadget("bad-probe", "v1"));
            run.code != 0 && run.stderr.contains(wanted)
        }),
        "the policy never saw a v1 gadget as v2"
    );
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &gadget("one", "v1"))
        .ok();
    let reviews = reviews_of(&log, "one");
    assert_eq!(reviews.len(), 1, "only the Equivalent webhook: {reviews:?}");
    let request = &reviews[0]["request"];
    assert_eq!(request["kind"]["version"], "v2", "{request}");
    assert_eq!(request["resource"]["version"], "v2");
    assert_eq!(request["requestKind"]["version"], "v1");
    assert_eq!(request["requestResource"]["version"], "v1");
    assert_eq!(request["object"]["apiVersion"], "example.com/v2");
    // Its patch, made to the v2 object, is stored through v1.
    let stored = cluster
        .kubectl(&["get", "gadgets.v1.example.com", "one", "-o", "json"])
        .json();
    assert_eq!(stored["apiVersion"], "example.com/v1");
    assert_eq!(stored["metadata"]["labels"]["mutated-by"], "webhook");
    assert!(
        stored["metadata"]["labels"].get("second").is_none(),
        "{stored}"
    );

    // Written in v2: both webhooks, each seeing v2 as asked.
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &gadget("two", "v2"))
        .ok();
    let reviews = reviews_of(&log, "two");
    assert_eq!(reviews.len(), 2, "{reviews:?}");
    assert!(
        reviews
            .iter()
            .all(|r| r["request"]["requestKind"]["version"] == "v2")
    );
    let stored = cluster
        .kubectl(&["get", "gadgets.v2.example.com", "two", "-o", "json"])
        .json();
    assert_eq!(stored["metadata"]["labels"]["second"], "yes");
    let bad = cluster.kubectl_stdin(&["create", "-f", "-"], &gadget("bad-two", "v2"));
    assert!(
        bad.err()
            .contains("seen as example.com/v2, kind v2, asked in v2"),
        "{bad:?}"
    );
    webhook.kill().ok();
}
