//! Authentication and the reviews: client certificates, service account
//! tokens from `kubectl create token`, `kubectl auth whoami` and `can-i`.

use base64::Engine as _;
use tests::{As, Cluster};

#[test]
fn service_account_tokens_authenticate_through_the_front_door() {
    let cluster = Cluster::start();
    let whoami = cluster.kubectl(&["auth", "whoami", "-o", "json"]).json();
    assert_eq!(whoami["status"]["userInfo"]["username"], "kubernetes-admin");
    assert_eq!(
        cluster
            .kubectl(&["auth", "can-i", "create", "configmaps"])
            .ok()
            .trim(),
        "yes"
    );

    cluster
        .kubectl(&["create", "serviceaccount", "builder"])
        .ok();
    let token = cluster
        .kubectl(&["create", "token", "builder", "--duration=15m"])
        .ok()
        .trim()
        .to_string();
    assert_eq!(token.split('.').count(), 3, "{token}");
    let server = format!("https://127.0.0.1:{}", cluster.port);
    let ca = cluster.dir.join("pki/ca.crt").display().to_string();
    let as_builder = |args: &[&str]| {
        let mut all = vec![
            "--kubeconfig=/dev/null",
            "--server",
            &server,
            "--certificate-authority",
            &ca,
            "--token",
            &token,
        ];
        all.extend_from_slice(args);
        cluster.kubectl(&all)
    };
    let me = as_builder(&["auth", "whoami", "-o", "json"]).json();
    assert_eq!(
        me["status"]["userInfo"]["username"],
        "system:serviceaccount:default:builder"
    );
    let groups = me["status"]["userInfo"]["groups"].to_string();
    assert!(
        groups.contains("system:serviceaccounts:default")
            && groups.contains("system:authenticated"),
        "{groups}"
    );
    assert_eq!(
        as_builder(&["auth", "can-i", "create", "configmaps"])
            .stdout
            .trim(),
        "no"
    );
    assert_eq!(
        as_builder(&["get", "configmaps"]).err().trim(),
        "Error from server (Forbidden): configmaps is forbidden: User \"system:serviceaccount:default:builder\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    // A WebSocket from a browser carries its token as a subprotocol
    // (HTTP/1.1 upgrade): the same user, and a token that is none is 401.
    let websocket = |protocols: &str| {
        let output = cluster
            .curl_command(As::Anonymous)
            .args(["--http1.1", "--max-time", "10"])
            .args(["-H", "Connection: Upgrade", "-H", "Upgrade: websocket"])
            .args(["-H", "Sec-WebSocket-Version: 13"])
            .args(["-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="])
            .arg("-H")
            .arg(format!("Sec-WebSocket-Protocol: {protocols}"))
            .arg(format!(
                "https://localhost:{}/api/v1/namespaces/default/configmaps",
                cluster.port
            ))
            .output()
            .expect("curl on PATH");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&token);
    let answer = websocket(&format!(
        "base64url.bearer.authorization.k8s.io.{encoded}, v4.channel.k8s.io"
    ));
    assert!(
        answer.contains(
            r#"User \"system:serviceaccount:default:builder\" cannot list resource \"configmaps\""#
        ),
        "{answer}"
    );
    let answer = websocket("base64url.bearer.authorization.k8s.io.bm90LWEtdG9rZW4");
    assert!(answer.contains(r#""code":401"#), "{answer}");

    let forged = format!("{}x", &token[..token.len() - 1]);
    let bad = cluster.kubectl(&[
        "--kubeconfig=/dev/null",
        "--server",
        &server,
        "--certificate-authority",
        &ca,
        "--token",
        &forged,
        "get",
        "ns",
    ]);
    assert!(bad.err().contains("Unauthorized"), "{}", bad.stderr);

    assert_eq!(
        cluster.kubectl(&["create", "token", "nobody"]).err().trim(),
        "error: failed to create token: serviceaccounts \"nobody\" not found"
    );
    assert!(
        cluster
            .kubectl(&["create", "token", "builder", "--duration=1m"])
            .err()
            .contains("may not specify a duration less than 10 minutes")
    );
}
