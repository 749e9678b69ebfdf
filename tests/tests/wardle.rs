//! The wardle sample (kube's sample-apiserver on kubechain-apiserver):
//! started as its own process on the cluster's etcd, as a ServiceAccount,
//! with a serving certificate it makes itself, registered with `kubechain
//! register`, and driven with kubectl through the front door as a user
//! with only the RBAC an admin would give.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use tests::{Cluster, bin_dir, eventually};

const GROUP: &str = "wardle.example.com";

/// Starts wardle-server on `port` as a ServiceAccount (the kubeconfig
/// `identity`), with a certificate it makes itself in `cert_dir`, storing
/// in the cluster's etcd; the CAs it trusts are the ones the cluster
/// publishes.
fn start_wardle(cluster: &Cluster, port: u16, identity: &Path, cert_dir: &Path) -> Child {
    let pki = cluster.dir.join("pki");
    let log = std::fs::File::create(cluster.dir.join("logs/wardle-server.log")).unwrap();
    Command::new(bin_dir().join("wardle-server"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--kubeconfig")
        .arg(identity)
        .arg("--cert-dir")
        .arg(cert_dir)
        .args(["--tls-san", "wardle-server.wardle.svc"])
        .args(["--etcd-servers", &cluster.etcd_endpoint()])
        .arg("--etcd-certfile")
        .arg(pki.join("etcd.crt"))
        .arg("--etcd-keyfile")
        .arg(pki.join("etcd.key"))
        .arg("--etcd-cafile")
        .arg(pki.join("internal-ca.crt"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("wardle-server starts")
}

/// Writes a new serving certificate and key into `cert_dir`, under the
/// CA kept there, as a renewal would.
fn renew(cert_dir: &Path) {
    use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, Issuer, KeyPair};
    let read = |name: &str| std::fs::read_to_string(cert_dir.join(name)).expect("the server's CA");
    let issuer = Issuer::from_ca_cert_pem(
        &read("ca.crt"),
        KeyPair::from_pem(&read("ca.key")).expect("the CA key"),
    )
    .expect("the CA");
    let key = KeyPair::generate().expect("a key");
    let names = vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "wardle-server.wardle.svc".to_string(),
    ];
    let mut params = CertificateParams::new(names).expect("names");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer).expect("a certificate");
    // The key first: a handshake between the two writes keeps the old pair.
    std::fs::write(cert_dir.join("tls.key.new"), key.serialize_pem()).unwrap();
    std::fs::write(cert_dir.join("tls.crt.new"), cert.pem()).unwrap();
    std::fs::rename(cert_dir.join("tls.key.new"), cert_dir.join("tls.key")).unwrap();
    std::fs::rename(cert_dir.join("tls.crt.new"), cert_dir.join("tls.crt")).unwrap();
}

/// Stops the server when the test ends, passed or not.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

#[test]
fn the_wardle_sample_serves_flunders_and_fischers_through_the_front_door() {
    let cluster = Cluster::start();
    // The server's identity: a ServiceAccount's token in a kubeconfig.
    cluster.create_namespace("wardle");
    cluster
        .kubectl(&["create", "serviceaccount", "apiserver", "-n", "wardle"])
        .ok();
    let token = cluster
        .kubectl(&[
            "create",
            "token",
            "apiserver",
            "-n",
            "wardle",
            "--duration=1h",
        ])
        .ok()
        .trim()
        .to_string();
    let identity = cluster.token_kubeconfig("wardle-apiserver", &token, "wardle");
    let cert_dir = cluster.dir.join("wardle-certs");
    let port = tests::free_port();
    let mut server = Stopped(start_wardle(&cluster, port, &identity, &cert_dir));
    // It made its serving certificate under a CA of its own, for the registration.
    assert!(eventually(Duration::from_secs(10), || cert_dir
        .join("ca.crt")
        .exists()));
    let registered = Command::new(bin_dir().join("kubechain"))
        .args(["register", "--group", GROUP])
        .args(["--version", "v1alpha1", "--version", "v1beta1"])
        .args(["--address", &format!("127.0.0.1:{port}")])
        .args(["--service", "wardle/wardle-server"])
        .arg("--ca-file")
        .arg(cert_dir.join("ca.crt"))
        .args(["--identity", "serviceaccount:wardle:apiserver"])
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .expect("kubechain register");
    assert!(
        registered.status.success(),
        "{}",
        String::from_utf8_lossy(&registered.stderr)
    );
    let available = || {
        cluster.apiservice_available("v1alpha1.wardle.example.com")
            && cluster.apiservice_available("v1beta1.wardle.example.com")
    };
    assert!(
        eventually(Duration::from_secs(30), available),
        "not Available; logs in {}",
        cluster.dir.join("logs").display()
    );
    assert!(eventually(Duration::from_secs(10), || {
        cluster
            .kubectl(&["api-resources", "--api-group", GROUP, "-o", "name"])
            .stdout
            .contains("flunders.wardle.example.com")
    }));

    // Wendy may write flunders in her namespace and read fischers; nothing more.
    cluster.create_namespace("team");
    cluster
        .kubectl(&[
            "create",
            "role",
            "flunders",
            "-n",
            "team",
            "--verb=*",
            "--resource=flunders.wardle.example.com",
        ])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "rolebinding",
            "wendy",
            "-n",
            "team",
            "--role=flunders",
            "--user=wendy",
        ])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "clusterrole",
            "fischer-reader",
            "--verb=get,list,watch",
            "--resource=fischers.wardle.example.com",
        ])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "clusterrolebinding",
            "wendy-fischers",
            "--clusterrole=fischer-reader",
            "--user=wendy",
        ])
        .ok();
    let wendy = |args: &[&str]| {
        let mut all = vec!["--as=wendy", "-n", "team"];
        all.extend_from_slice(args);
        cluster.kubectl(&all)
    };
    let wendy_stdin = |args: &[&str], input: &str| {
        let mut all = vec!["--as=wendy", "-n", "team"];
        all.extend_from_slice(args);
        cluster.kubectl_stdin(&all, input)
    };

    // Create in v1alpha1: defaulted, converted, and stored as v1beta1 (the
    // preferred version, kubectl's default) under kube's key.
    let flunder = json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
        "metadata": {"name": "first", "labels": {"app": "one"}}, "spec": {"reference": "other"}});
    wendy_stdin(&["create", "-f", "-"], &flunder.to_string()).ok();
    let stored = wendy(&["get", "flunder", "first", "-o", "json"]).json();
    assert_eq!(stored["apiVersion"], "wardle.example.com/v1beta1");
    assert_eq!(stored["kind"], "Flunder");
    assert_eq!(
        stored["spec"],
        json!({"flunderReference": "other", "referenceType": "Flunder"})
    );
    assert_eq!(stored["status"], json!({}));
    let alpha = wendy(&[
        "get",
        "flunders.v1alpha1.wardle.example.com",
        "first",
        "-o",
        "json",
    ])
    .json();
    assert_eq!(alpha["apiVersion"], "wardle.example.com/v1alpha1");
    assert_eq!(
        alpha["spec"],
        json!({"reference": "other", "referenceType": "Flunder"})
    );
    assert_eq!(
        alpha["metadata"]["resourceVersion"],
        stored["metadata"]["resourceVersion"]
    );
    let in_etcd = cluster.etcdctl(&[
        "get",
        "/registry/wardle.example.com/flunders/team/first",
        "--print-value-only",
    ]);
    let in_etcd = in_etcd.ok();
    assert!(
        in_etcd.contains("\"flunderReference\":\"other\"")
            && in_etcd.contains("wardle.example.com/v1beta1"),
        "{in_etcd}"
    );
    // Created in v1beta1, read in v1alpha1; v1beta1's own rules refuse a
    // reference its type does not name.
    let beta = json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
        "metadata": {"name": "fishy"},
        "spec": {"fischerReference": "strict", "referenceType": "Fischer"}});
    wendy_stdin(&["create", "-f", "-"], &beta.to_string()).ok();
    let alpha = wendy(&[
        "get",
        "flunders.v1alpha1.wardle.example.com",
        "fishy",
        "-o",
        "json",
    ])
    .json();
    assert_eq!(
        alpha["spec"],
        json!({"reference": "strict", "referenceType": "Fischer"})
    );
    let untyped = json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
        "metadata": {"name": "untyped"}, "spec": {"flunderReference": "x"}});
    let refused = wendy_stdin(&["create", "-f", "-"], &untyped.to_string());
    assert!(
        refused
            .err()
            .contains("cannot be set if referenceType is not Flunder"),
        "{}",
        refused.stderr
    );
    wendy(&["delete", "flunder", "fishy"]).ok();
    let rv = stored["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    // Table output, selectors, explain.
    // A k8s.io/apiserver server without a printer: kube's default table.
    let table = wendy(&["get", "flunders", "first"]);
    let rows: Vec<Vec<&str>> = table
        .ok()
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let created = stored["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or("none");
    assert_eq!(
        rows,
        [vec!["NAME", "CREATED", "AT"], vec!["first", created]],
        "{}",
        table.stdout
    );
    assert!(
        wendy(&["get", "flunders", "-l", "app=two", "-o", "name"])
            .ok()
            .trim()
            .is_empty()
    );
    let explained = cluster.kubectl(&["explain", "flunders.spec"]);
    assert!(explained.ok().contains("reference"), "{}", explained.stdout);

    // Every patch type, and server-side apply.
    wendy(&[
        "patch",
        "flunder",
        "first",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"merge":"yes"}}}"#,
    ])
    .ok();
    wendy(&[
        "patch",
        "flunder",
        "first",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels/json","value":"yes"}]"#,
    ])
    .ok();
    wendy(&[
        "patch",
        "flunder",
        "first",
        "-p",
        r#"{"spec":{"referenceType":"Fischer","flunderReference":null,"fischerReference":"other"}}"#,
    ])
    .ok();
    let applied = json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
        "metadata": {"name": "first", "labels": {"applied": "yes"}}});
    wendy_stdin(
        &["apply", "--server-side", "--field-manager=wendy", "-f", "-"],
        &applied.to_string(),
    )
    .ok();
    let patched = wendy(&[
        "get",
        "flunder",
        "first",
        "-o",
        "json",
        "--show-managed-fields",
    ])
    .json();
    let labels = &patched["metadata"]["labels"];
    for key in ["merge", "json", "applied"] {
        assert_eq!(labels[key], "yes", "{labels}");
    }
    assert_eq!(
        patched["spec"],
        json!({"fischerReference": "other", "referenceType": "Fischer"})
    );
    assert!(
        patched["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["manager"] == "wendy" && m["operation"] == "Apply"),
        "{patched}"
    );

    // A watch from the recorded resourceVersion sees what happened since, in order.
    wendy_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
                "metadata": {"name": "second"}})
        .to_string(),
    )
    .ok();
    let events = wendy(&[
        "get",
        "--raw",
        &format!(
            "/apis/wardle.example.com/v1alpha1/namespaces/team/flunders?watch=true&resourceVersion={rv}&timeoutSeconds=2"
        ),
    ]);
    let events = events.events();
    let seen: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        seen.last(),
        Some(&("ADDED".to_string(), "second".to_string())),
        "{seen:?}"
    );
    assert_eq!(
        seen.iter().filter(|(t, _)| t == "MODIFIED").count(),
        4,
        "{seen:?}"
    );

    // NamespaceLifecycle: no flunder in a namespace that does not exist.
    let nowhere = cluster.kubectl_stdin(
        &["create", "-n", "nowhere", "-f", "-"],
        &json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
                "metadata": {"name": "lost"}})
        .to_string(),
    );
    assert!(
        nowhere.err().contains("namespaces \"nowhere\" not found"),
        "{}",
        nowhere.stderr
    );

    // Validation answers kube's 422.
    let odd = json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
        "metadata": {"name": "odd"}, "spec": {"reference": "x", "referenceType": "Fish"}});
    let refused = wendy_stdin(&["create", "-f", "-"], &odd.to_string());
    assert!(
        refused.err().contains("Unsupported value: \"Fish\""),
        "{}",
        refused.stderr
    );

    // BanFlunder: a name a Fischer disallows is refused.
    let fischer = json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Fischer",
        "metadata": {"name": "strict"}, "disallowedFlunders": ["banned"]});
    let not_hers =
        cluster.kubectl_stdin(&["--as=wendy", "create", "-f", "-"], &fischer.to_string());
    assert!(not_hers.err().contains("forbidden"), "{}", not_hers.stderr);
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &fischer.to_string())
        .ok();
    assert_eq!(
        cluster
            .kubectl(&["--as=wendy", "get", "fischers", "-o", "name"])
            .ok()
            .trim(),
        "fischer.wardle.example.com/strict"
    );
    let banned = json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
        "metadata": {"name": "banned"}});
    let refused = wendy_stdin(&["create", "-f", "-"], &banned.to_string());
    assert!(
        refused
            .err()
            .contains("this name may not be used, please change the resource name"),
        "{}",
        refused.stderr
    );
    wendy(&["get", "flunder", "banned"]).err();

    // The cluster's admission applies to flunders too: a webhook behind a
    // Service (mutating, then validating) and a ValidatingAdmissionPolicy,
    // their configuration followed through the front door.
    let (ca, log, _webhook) = tests::webhook_behind_service(&cluster);
    let hook = |name: &str, path: &str| {
        format!(
            "- name: {name}\n  admissionReviewVersions: [v1]\n  sideEffects: None\n  failurePolicy: Fail\n\
             \x20 clientConfig:\n    caBundle: {ca}\n    service: {{namespace: webhooks, name: hook, path: {path}}}\n\
             \x20 rules: [{{operations: [CREATE], apiGroups: [{GROUP}], apiVersions: [\"*\"], resources: [flunders]}}]\n"
        )
    };
    let configurations = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\n\
         metadata: {{name: flunder-mutator}}\nwebhooks:\n{}---\n\
         apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
         metadata: {{name: flunder-validator}}\nwebhooks:\n{}---\n\
         apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
         metadata: {{name: no-vetoed-flunders}}\nspec:\n  failurePolicy: Fail\n\
         \x20 matchConstraints: {{resourceRules: [{{apiGroups: [{GROUP}], apiVersions: [\"*\"], operations: [CREATE, UPDATE], resources: [flunders]}}]}}\n\
         \x20 validations: [{{expression: \"!object.metadata.name.startsWith('vetoed')\", message: flunders may not be vetoed}}]\n---\n\
         apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
         metadata: {{name: no-vetoed-flunders}}\nspec: {{policyName: no-vetoed-flunders, validationActions: [Deny]}}\n",
        hook("mutate.flunders.example.com", "/mutate"),
        hook("validate.flunders.example.com", "/validate"),
    );
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &configurations)
        .ok();
    let flunder_named = |name: &str| {
        json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
               "metadata": {"name": name}})
        .to_string()
    };
    // Each try has its own name: one admitted before the policy applied stays.
    let tries = std::cell::Cell::new(0);
    let vetoed = || {
        tries.set(tries.get() + 1);
        let name = format!("vetoed-{}", tries.get());
        wendy_stdin(&["create", "-f", "-"], &flunder_named(&name))
            .stderr
            .contains("flunders may not be vetoed")
    };
    assert!(
        eventually(Duration::from_secs(20), vetoed),
        "the policy never applied; logs in {}",
        cluster.dir.join("logs").display()
    );
    let bad = wendy_stdin(&["create", "-f", "-"], &flunder_named("bad-flunder"));
    assert!(
        bad.err().contains("names with bad- are not allowed"),
        "{}",
        bad.stderr
    );
    wendy_stdin(&["create", "-f", "-"], &flunder_named("hooked")).ok();
    let hooked = wendy(&["get", "flunder", "hooked", "-o", "json"]).json();
    assert_eq!(hooked["metadata"]["labels"]["mutated-by"], "webhook");
    let reviews: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|r: &serde_json::Value| r["request"]["name"] == "hooked")
        .collect();
    assert_eq!(reviews.len(), 2, "one mutating and one validating call");
    for review in &reviews {
        let request = &review["request"];
        assert_eq!(request["resource"]["group"], GROUP);
        assert_eq!(request["resource"]["resource"], "flunders");
        assert_eq!(request["userInfo"]["username"], "wendy");
        assert_eq!(request["namespace"], "team");
    }
    cluster
        .kubectl_stdin(&["delete", "-f", "-"], &configurations)
        .ok();
    assert!(
        eventually(Duration::from_secs(20), || wendy_stdin(
            &["create", "-f", "-"],
            &flunder_named("vetoed-after")
        )
        .code
            == 0),
        "the policy's deletion was not followed"
    );

    // The cluster's client CA, read from the published ConfigMap: the
    // admin's certificate reaches the server directly, a stranger's not.
    let direct = |who: tests::As<'_>| {
        let out = cluster
            .curl_command(who)
            .args(["-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(cert_dir.join("ca.crt"))
            .arg(format!(
                "https://127.0.0.1:{port}/apis/{GROUP}/v1beta1/namespaces/team/flunders"
            ))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert_eq!(direct(tests::As::Admin), "200");
    assert_eq!(direct(tests::As::Anonymous), "401");
    // Priority and fairness classifies its requests by the cluster's
    // FlowSchemas, followed through the front door (kube's headers).
    let classified = || {
        let out = cluster
            .curl_command(tests::As::Admin)
            .args(["-D", "-", "-o", "/dev/null", "--cacert"])
            .arg(cert_dir.join("ca.crt"))
            .arg(format!("https://127.0.0.1:{port}/apis/{GROUP}/v1beta1"))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout)
            .to_ascii_lowercase()
            .contains("x-kubernetes-pf-flowschema-uid")
    };
    assert!(classified(), "no priority and fairness on the server");

    // Someone with no binding is refused by the front door's decision.
    let stranger = cluster.kubectl(&["--as=stranger", "-n", "team", "get", "flunders"]);
    assert!(stranger.err().contains("forbidden"), "{}", stranger.stderr);
    // Outside her namespace Wendy is nobody.
    let elsewhere = cluster.kubectl(&["--as=wendy", "-n", "default", "get", "flunders"]);
    assert!(
        elsewhere.err().contains("forbidden"),
        "{}",
        elsewhere.stderr
    );

    // A renewed certificate is served without a restart (same CA, new key).
    let served = || {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "openssl s_client -connect 127.0.0.1:{port} -servername localhost </dev/null 2>/dev/null \
                 | openssl x509 -noout -fingerprint -sha256"
            ))
            .output()
            .expect("openssl");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let before = served();
    assert!(before.contains("Fingerprint"), "{before:?}");
    renew(&cert_dir);
    let renewed = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(cert_dir.join("tls.crt"))
        .output()
        .expect("openssl");
    let renewed = String::from_utf8_lossy(&renewed.stdout).trim().to_string();
    assert_ne!(renewed, before);
    assert!(
        eventually(Duration::from_secs(30), || served() == renewed),
        "still serving {}",
        served()
    );
    assert!(wendy(&["get", "flunders"]).ok().contains("first"));

    // Delete, and it is gone from etcd.
    wendy(&["delete", "flunder", "first"]).ok();
    wendy(&["get", "flunder", "first"]).err();
    assert!(
        cluster
            .etcdctl(&[
                "get",
                "/registry/wardle.example.com/flunders/team/first",
                "--print-value-only"
            ])
            .ok()
            .trim()
            .is_empty()
    );

    // Bad input and faults. An object in storage that does not decode is
    // a 500 naming its key, for a read of it and for a list; the others
    // and the process are fine.
    let garbage = "/registry/wardle.example.com/flunders/team/garbage";
    cluster.etcdctl(&["put", garbage, "{not json"]).ok();
    let pid = server.0.id();
    for read in [
        wendy(&["get", "flunder", "garbage"]),
        wendy(&["get", "flunders"]),
    ] {
        let said = read.err();
        assert!(
            said.contains("InternalError") && said.contains(garbage),
            "{said}"
        );
    }
    assert_eq!(
        wendy(&["get", "flunder", "hooked", "-o", "name"])
            .ok()
            .trim(),
        "flunder.wardle.example.com/hooked"
    );
    cluster.etcdctl(&["del", garbage]).ok();
    assert!(wendy(&["get", "flunders"]).ok().contains("hooked"));
    assert_eq!(server.0.id(), pid);
    // A version the server does not serve is a 404.
    let unserved = wendy(&[
        "get",
        "--raw",
        &format!("/apis/{GROUP}/v1/namespaces/team/flunders"),
    ]);
    assert!(unserved.err().contains("NotFound"), "{}", unserved.stderr);
    // A body over the limit is a 413, from the server itself too.
    let big = json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
        "metadata": {"name": "big", "annotations": {"a": "x".repeat((3 << 20) + 100)}}})
    .to_string();
    let body = cluster.dir.join("big-flunder.json");
    std::fs::write(&body, big).unwrap();
    let posted = cluster
        .curl_command(tests::As::Admin)
        .args(["-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(cert_dir.join("ca.crt"))
        .args(["-H", "Content-Type: application/json", "--data-binary"])
        .arg(format!("@{}", body.display()))
        .arg(format!(
            "https://127.0.0.1:{port}/apis/{GROUP}/v1beta1/namespaces/team/flunders"
        ))
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&posted.stdout), "413");
    let through = cluster.kubectl(&["create", "-n", "team", "-f", &body.display().to_string()]);
    assert!(
        through.err().contains("Request entity too large"),
        "{}",
        through.stderr
    );

    // Killed, only its group is unavailable; restarted, it is back.
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let unavailable = || !cluster.apiservice_available("v1beta1.wardle.example.com");
    assert!(eventually(Duration::from_secs(30), unavailable));
    let down = wendy(&["get", "flunders"]);
    assert!(down.err().contains("ServiceUnavailable"), "{}", down.stderr);
    cluster.kubectl(&["get", "configmaps", "-A"]).ok();
    cluster
        .kubectl(&["get", "apiservices", "v1.apps", "-o", "name"])
        .ok();
    let _restarted = Stopped(start_wardle(&cluster, port, &identity, &cert_dir));
    assert!(
        eventually(Duration::from_secs(30), available),
        "not Available again"
    );
    assert!(wendy(&["get", "flunders"]).ok().contains("hooked"));
}
