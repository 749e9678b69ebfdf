//! Authentication and the reviews: client certificates, service account
//! tokens from `kubectl create token`, `kubectl auth whoami` and `can-i`.

use tests::Cluster;

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
