//! Bad input gets a Status with the right code; nothing stored changes and
//! the servers keep serving. Requests are sent raw with curl, through the
//! front door, authenticated by the admin client certificate.

use std::process::Command;

use serde_json::Value;
use tests::Cluster;

/// Sends a request with curl; returns the status code and parsed body.
fn request(
    cluster: &Cluster,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    let pki = cluster.dir.join("pki");
    let body_file = cluster.dir.join(format!("body-{}", std::process::id()));
    std::fs::write(&body_file, body).expect("writing body");
    let output = Command::new("curl")
        .args([
            "-sS",
            "-X",
            method,
            "-H",
            &format!("Content-Type: {content_type}"),
        ])
        .arg("--cacert")
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .arg("--data-binary")
        .arg(format!("@{}", body_file.display()))
        .args(["-w", "\n%{http_code}"])
        .arg(format!("https://localhost:{}{path}", cluster.port))
        .output()
        .expect("curl on PATH");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').expect("status code line");
    (
        code.trim().parse().expect("status code"),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

fn assert_status(answer: &(u16, Value), code: u16, reason: &str) {
    assert_eq!(answer.0, code, "{}", answer.1);
    assert_eq!(answer.1["kind"], "Status", "{}", answer.1);
    assert_eq!(answer.1["code"], code);
    assert_eq!(answer.1["reason"], reason, "{}", answer.1);
}

#[test]
fn bad_requests_get_statuses_and_change_nothing() {
    let cluster = Cluster::start();
    cluster
        .kubectl(&["create", "configmap", "precious", "--from-literal=k=v"])
        .ok();
    let before = cluster
        .kubectl(&["get", "cm", "precious", "-o", "json"])
        .json();
    let collection = "/api/v1/namespaces/default/configmaps";
    let item = "/api/v1/namespaces/default/configmaps/precious";

    assert_status(
        &request(
            &cluster,
            "POST",
            collection,
            "application/json",
            b"{\"metadata\": {",
        ),
        400,
        "BadRequest",
    );
    assert_status(
        &request(&cluster, "PUT", item, "application/json", b"not json"),
        400,
        "BadRequest",
    );
    assert_status(
        &request(
            &cluster,
            "POST",
            collection,
            "application/yaml",
            b"metadata: [\n  name",
        ),
        400,
        "BadRequest",
    );
    assert_status(
        &request(&cluster, "POST", collection, "text/plain", b"name=x"),
        415,
        "UnsupportedMediaType",
    );
    assert_status(
        &request(
            &cluster,
            "PATCH",
            item,
            "application/x-unknown-patch",
            b"{}",
        ),
        415,
        "UnsupportedMediaType",
    );
    assert_status(
        &request(
            &cluster,
            "PATCH",
            item,
            "application/merge-patch+json",
            b"{\"data\": ",
        ),
        400,
        "BadRequest",
    );

    let huge = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"precious\"}},\"data\":{{\"k\":\"{}\"}}}}",
        "x".repeat(3 * 1024 * 1024 + 10)
    );
    assert_status(
        &request(&cluster, "PUT", item, "application/json", huge.as_bytes()),
        413,
        "RequestEntityTooLarge",
    );

    let selector = request(
        &cluster,
        "GET",
        &format!("{collection}?labelSelector=a%20in%20(b"),
        "application/json",
        b"",
    );
    assert_status(&selector, 400, "BadRequest");

    // Paths no resource has: a subresource it lacks, a namespace in the
    // path of a cluster-scoped one.
    for path in [
        format!("{item}/bogus"),
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/clusterroles/admin".to_string(),
    ] {
        assert_status(
            &request(&cluster, "GET", &path, "application/json", b""),
            404,
            "NotFound",
        );
    }
    let fields = request(
        &cluster,
        "GET",
        &format!("{collection}?fieldSelector=spec.nothing%3Dx"),
        "application/json",
        b"",
    );
    assert_status(&fields, 400, "BadRequest");

    let invalid = request(
        &cluster,
        "POST",
        collection,
        "application/json",
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not_Valid","labels":{"bad key":"v"}},"data":{"bad key!":"v"}}"#,
    );
    assert_status(&invalid, 422, "Invalid");
    let causes = invalid.1["details"]["causes"].as_array().expect("causes");
    let fields: Vec<&str> = causes.iter().filter_map(|c| c["field"].as_str()).collect();
    assert_eq!(
        fields,
        vec!["metadata.name", "metadata.labels", "data[bad key!]"],
        "{}",
        invalid.1
    );
    assert!(causes.iter().all(|c| c["reason"] == "FieldValueInvalid"));

    let strict = request(
        &cluster,
        "POST",
        &format!("{collection}?fieldValidation=Strict"),
        "application/json",
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"strict"},"data":{},"bogus":true}"#,
    );
    assert_status(&strict, 400, "BadRequest");
    assert_eq!(
        strict.1["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\""
    );
    let wrong_kind = request(
        &cluster,
        "POST",
        collection,
        "application/json",
        br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#,
    );
    assert_status(&wrong_kind, 400, "BadRequest");
    let wrong_type = request(
        &cluster,
        "POST",
        collection,
        "application/json",
        br#"{"metadata":{"name":"x"},"data":{"k":1}}"#,
    );
    assert_status(&wrong_type, 400, "BadRequest");
    let stale = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"precious","resourceVersion":"1"},"data":{"k":"overwritten"}}"#;
    assert_status(
        &request(&cluster, "PUT", item, "application/json", stale),
        409,
        "Conflict",
    );
    assert_status(
        &request(
            &cluster,
            "DELETE",
            "/api/v1/namespaces/default/configmaps/absent",
            "application/json",
            b"",
        ),
        404,
        "NotFound",
    );
    assert_status(
        &request(
            &cluster,
            "POST",
            "/api/v1/namespaces/default/configmaps/precious",
            "application/json",
            b"{}",
        ),
        405,
        "MethodNotAllowed",
    );

    // A read "not older than" a resourceVersion the cluster has not reached
    // waits for it, then answers 504 as kube does; one it has reached is served.
    let rv = before["metadata"]["resourceVersion"].as_str().unwrap();
    let read = |path: &str| request(&cluster, "GET", path, "application/json", b"");
    let too_large = read(&format!("{item}?resourceVersion=999999999"));
    assert_status(&too_large, 504, "Timeout");
    assert!(
        too_large.1["message"]
            .as_str()
            .unwrap()
            .starts_with("Too large resource version: 999999999"),
        "{}",
        too_large.1
    );
    assert_status(
        &read(&format!("{collection}?resourceVersion=999999999")),
        504,
        "Timeout",
    );
    assert_status(
        &read(&format!("{item}?resourceVersion=abc")),
        400,
        "BadRequest",
    );
    let current = read(&format!("{item}?resourceVersion={rv}"));
    assert_eq!(current.0, 200, "{}", current.1);
    assert_eq!(current.1["metadata"]["resourceVersion"], rv);

    // YAML sent as JSON (`kubectl create --raw -f file.yaml`): kube's words,
    // with the kind expected and the body's start in hex.
    let yaml = cluster.dir.join("namespace.yaml");
    std::fs::write(
        &yaml,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: raw}\n",
    )
    .unwrap();
    let raw = cluster.kubectl(&[
        "create",
        "--raw",
        "/api/v1/namespaces",
        "-f",
        yaml.to_str().unwrap(),
    ]);
    let said = raw.err();
    assert!(
        said.contains("the object provided is unrecognized (must be of type Namespace): couldn't get version/kind; json parse error: "),
        "{said}"
    );
    assert!(
        said.contains("(61706956657273696f6e3a2076310a6b696e643a204e616d657370616365 ...)"),
        "{said}"
    );

    let after = cluster
        .kubectl(&["get", "cm", "precious", "-o", "json"])
        .json();
    assert_eq!(before, after, "a bad request changed stored data");
    assert!(
        cluster
            .kubectl(&["get", "--raw", "/readyz"])
            .ok()
            .contains("ok")
    );
    for name in ["strict", "x", "Not_Valid"] {
        assert!(
            cluster
                .etcdctl(&["get", &format!("/registry/configmaps/default/{name}")])
                .ok()
                .is_empty()
        );
    }
}

#[test]
fn field_validation_warn_answers_with_a_warning_header() {
    let cluster = Cluster::start();
    let pki = cluster.dir.join("pki");
    let output = Command::new("curl")
        .args([
            "-sS",
            "-i",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
        ])
        .arg("--cacert")
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .args([
            "--data-binary",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"warned"},"extra":1}"#,
        ])
        .arg(format!(
            "https://localhost:{}/api/v1/namespaces/default/configmaps?fieldValidation=Warn",
            cluster.port
        ))
        .output()
        .expect("curl on PATH");
    let text = String::from_utf8_lossy(&output.stdout).to_lowercase();
    assert!(
        text.lines()
            .next()
            .is_some_and(|status| status.contains(" 201")),
        "{text}"
    );
    assert!(
        text.contains("warning: 299 - \"unknown field \\\"extra\\\"\""),
        "{text}"
    );
    let stored = cluster
        .kubectl(&["get", "cm", "warned", "-o", "json"])
        .json();
    assert!(stored.get("extra").is_none());
}

#[test]
fn anonymous_users_only_reach_health_and_version() {
    let cluster = Cluster::start();
    let anonymous = |path: &str| {
        let output = Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}"])
            .arg("--cacert")
            .arg(cluster.dir.join("pki/ca.crt"))
            .arg(format!("https://localhost:{}{path}", cluster.port))
            .output()
            .expect("curl on PATH");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        assert_eq!(anonymous(path), "200", "{path}");
    }
    for path in [
        "/api",
        "/apis",
        "/api/v1/namespaces",
        "/openapi/v3",
        "/metrics",
    ] {
        assert_eq!(anonymous(path), "401", "{path}");
    }
}
