//! RBAC through the front door, as the identities it names: kube's default
//! roles, a `kubectl auth can-i` matrix for view, edit, admin and nobody,
//! a ServiceAccount bound to edit doing its work with the Python client,
//! escalation refused (and allowed with `escalate` and `bind`),
//! impersonation allowed and refused, aggregation extending `view`, local
//! access reviews held to their own namespace, and kube's whole bootstrap
//! policy as the cluster holds it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;

use tests::{As, Cluster, eventually};

const NS: &str = "team";

/// A fresh cluster with the namespace [`NS`].
fn with_team() -> Cluster {
    let cluster = Cluster::start();
    cluster.kubectl(&["create", "namespace", NS]).ok();
    cluster
}

/// A ServiceAccount in [`NS`] bound to `role` there (or to nothing), and a
/// kubeconfig that authenticates as it.
fn account(cluster: &Cluster, name: &str, role: Option<&str>) -> std::path::PathBuf {
    cluster
        .kubectl(&["create", "serviceaccount", name, "-n", NS])
        .ok();
    if let Some(role) = role {
        cluster
            .kubectl(&[
                "create",
                "rolebinding",
                &format!("{name}-{role}"),
                &format!("--clusterrole={role}"),
                &format!("--serviceaccount={NS}:{name}"),
                "-n",
                NS,
            ])
            .ok();
    }
    let token = cluster
        .kubectl(&["create", "token", name, "-n", NS])
        .ok()
        .trim()
        .to_string();
    cluster.token_kubeconfig(name, &token, NS)
}

/// Waits until the front door refuses `kubeconfig`'s token as unauthenticated.
fn until_refused(cluster: &Cluster, kubeconfig: &std::path::Path) {
    assert!(
        eventually(Duration::from_secs(5), || cluster
            .kubectl_with(kubeconfig, &["get", "configmaps"])
            .stderr
            .contains("Unauthorized")),
        "the token is still accepted"
    );
}

fn can_i(cluster: &Cluster, kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    cluster
        .kubectl_with(kubeconfig, &all)
        .stdout
        .trim()
        .to_string()
}

/// Waits until the front door lets `kubeconfig`'s user do `args` (the
/// aggregation controller fills `admin`, `edit` and `view` just after start).
fn until_allowed(cluster: &Cluster, kubeconfig: &std::path::Path, args: &[&str]) {
    assert!(
        eventually(Duration::from_secs(10), || can_i(cluster, kubeconfig, args)
            == "yes"),
        "never allowed: {args:?}"
    );
}

#[test]
fn default_roles_and_a_can_i_matrix_for_view_edit_admin_and_nobody() {
    let cluster = Cluster::start();
    let roles = cluster
        .kubectl(&["get", "clusterroles", "-o", "name"])
        .ok()
        .to_string();
    for role in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
        "system:auth-delegator",
        "system:aggregate-to-view",
    ] {
        assert!(
            roles.contains(&format!("clusterrole.rbac.authorization.k8s.io/{role}\n")),
            "{role} in {roles}"
        );
    }
    let binding = cluster
        .kubectl(&["get", "clusterrolebinding", "cluster-admin", "-o", "json"])
        .json();
    assert_eq!(binding["subjects"][0]["name"], "system:masters");
    assert_eq!(
        binding["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
        "true"
    );
    // `view` holds the rules of the roles aggregated into it.
    assert!(eventually(Duration::from_secs(10), || {
        cluster
            .kubectl(&["get", "clusterrole", "view", "-o", "json"])
            .json()["rules"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    }));

    cluster.kubectl(&["create", "namespace", NS]).ok();
    let viewer = account(&cluster, "viewer", Some("view"));
    let editor = account(&cluster, "editor", Some("edit"));
    let admin = account(&cluster, "lead", Some("admin"));
    let nobody = account(&cluster, "nobody", None);
    for kubeconfig in [&viewer, &editor, &admin] {
        until_allowed(&cluster, kubeconfig, &["get", "configmaps"]);
    }
    // kube's answers: (question, view, edit, admin, nobody).
    let matrix: &[(&[&str], [&str; 4])] = &[
        (&["get", "configmaps"], ["yes", "yes", "yes", "no"]),
        (&["watch", "pods"], ["yes", "yes", "yes", "no"]),
        (&["create", "configmaps"], ["no", "yes", "yes", "no"]),
        (&["get", "secrets"], ["no", "yes", "yes", "no"]),
        (&["create", "deployments.apps"], ["no", "yes", "yes", "no"]),
        (
            &["get", "pods", "--subresource=log"],
            ["yes", "yes", "yes", "no"],
        ),
        (
            &["create", "pods", "--subresource=exec"],
            ["no", "yes", "yes", "no"],
        ),
        (&["create", "rolebindings"], ["no", "no", "yes", "no"]),
        (&["update", "resourcequotas"], ["no", "no", "no", "no"]),
        (
            &["list", "configmaps", "-n", "default"],
            ["no", "no", "no", "no"],
        ),
        (&["list", "nodes"], ["no", "no", "no", "no"]),
        (
            &["create", "selfsubjectaccessreviews"],
            ["yes", "yes", "yes", "yes"],
        ),
    ];
    for (question, answers) in matrix {
        for (who, (kubeconfig, want)) in ["view", "edit", "admin", "nobody"]
            .iter()
            .zip([&viewer, &editor, &admin, &nobody].into_iter().zip(answers))
        {
            assert_eq!(
                can_i(&cluster, kubeconfig, question),
                *want,
                "{who}: can-i {question:?}"
            );
        }
    }
    // The same answers by impersonation from the admin.
    assert_eq!(
        cluster
            .kubectl(&[
                "auth",
                "can-i",
                "get",
                "configmaps",
                "-n",
                NS,
                "--as=system:serviceaccount:team:viewer"
            ])
            .stdout
            .trim(),
        "yes"
    );
    assert_eq!(
        cluster
            .kubectl(&[
                "auth",
                "can-i",
                "get",
                "configmaps",
                "--as=system:serviceaccount:sec:bob"
            ])
            .stdout
            .trim(),
        "no"
    );
    let listed = cluster
        .kubectl_with(&viewer, &["auth", "can-i", "--list"])
        .ok()
        .to_string();
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("configmaps ") && l.contains("[get list watch]")),
        "{listed}"
    );
    assert!(
        !listed.lines().any(|l| l.starts_with("secrets ")),
        "{listed}"
    );

    // What kubectl prints for a refusal, word for word.
    let refused = cluster.kubectl_with(&viewer, &["create", "configmap", "x"]);
    assert_eq!(
        refused.err().trim(),
        "error: failed to create configmap: configmaps is forbidden: User \"system:serviceaccount:team:viewer\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );
    let refused = cluster.kubectl_with(&nobody, &["get", "pods"]);
    assert_eq!(
        refused.err().trim(),
        "Error from server (Forbidden): pods is forbidden: User \"system:serviceaccount:team:nobody\" cannot list resource \"pods\" in API group \"\" in the namespace \"team\""
    );
    // A binding to a role that does not exist says so.
    cluster
        .kubectl(&[
            "create",
            "rolebinding",
            "dangling",
            "--clusterrole=missing",
            "--serviceaccount=team:nobody",
            "-n",
            NS,
        ])
        .ok();
    assert!(eventually(Duration::from_secs(5), || {
        cluster
            .kubectl_with(&nobody, &["get", "pods"])
            .stderr
            .contains(": RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found")
    }));
}

#[test]
fn a_service_account_bound_to_edit_does_its_work_with_the_python_client() {
    let cluster = with_team();
    let deployer = account(&cluster, "deployer", Some("edit"));
    until_allowed(
        &cluster,
        &deployer,
        &["patch", "deployments.apps", "--subresource=scale"],
    );
    cluster.python("rbac_test.py", Some(&deployer), "python rbac");
}

#[test]
fn escalation_is_refused_unless_the_writer_may_escalate_or_bind() {
    let cluster = with_team();
    let lead = account(&cluster, "lead", Some("admin"));
    until_allowed(&cluster, &lead, &["create", "roles"]);
    // What the lead holds, the lead may grant.
    cluster
        .kubectl_with(
            &lead,
            &[
                "create",
                "role",
                "cm-reader",
                "--verb=get",
                "--resource=configmaps",
            ],
        )
        .ok();
    cluster
        .kubectl_with(
            &lead,
            &[
                "create",
                "rolebinding",
                "cm-reader",
                "--role=cm-reader",
                "--user=eve",
            ],
        )
        .ok();
    // More than that, not.
    let refused = cluster.kubectl_with(
        &lead,
        &[
            "create",
            "role",
            "node-reader",
            "--verb=get",
            "--resource=nodes",
        ],
    );
    let message = refused.err();
    assert!(
        message.contains("roles.rbac.authorization.k8s.io \"node-reader\" is forbidden: user \"system:serviceaccount:team:lead\" (groups=[")
            && message.contains("\"system:serviceaccounts:team\"")
            && message.trim_end().ends_with(") is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\"]}"),
        "{message}"
    );
    let refused = cluster.kubectl_with(
        &lead,
        &[
            "create",
            "rolebinding",
            "root",
            "--clusterrole=cluster-admin",
            "--user=eve",
        ],
    );
    assert!(
        refused.err().contains("rolebindings.rbac.authorization.k8s.io \"root\" is forbidden: user \"system:serviceaccount:team:lead\"")
            && refused.stderr.contains("is attempting to grant RBAC permissions not currently held"),
        "{}",
        refused.stderr
    );
    // With `escalate` on roles and `bind` on cluster-admin, both go through.
    cluster
        .kubectl(&[
            "create",
            "clusterrole",
            "grant-anything",
            "--verb=escalate",
            "--resource=roles.rbac.authorization.k8s.io",
        ])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "clusterrole",
            "bind-root",
            "--verb=bind",
            "--resource=clusterroles.rbac.authorization.k8s.io",
            "--resource-name=cluster-admin",
        ])
        .ok();
    for role in ["grant-anything", "bind-root"] {
        cluster
            .kubectl(&[
                "create",
                "rolebinding",
                role,
                &format!("--clusterrole={role}"),
                "--serviceaccount=team:lead",
                "-n",
                NS,
            ])
            .ok();
    }
    assert!(eventually(Duration::from_secs(5), || {
        cluster
            .kubectl_with(
                &lead,
                &[
                    "create",
                    "role",
                    "node-reader",
                    "--verb=get",
                    "--resource=nodes",
                ],
            )
            .stdout
            .contains("created")
    }));
    assert!(eventually(Duration::from_secs(5), || {
        cluster
            .kubectl_with(
                &lead,
                &[
                    "create",
                    "rolebinding",
                    "root",
                    "--clusterrole=cluster-admin",
                    "--user=eve",
                ],
            )
            .stdout
            .contains("created")
    }));
}

#[test]
fn impersonation_is_authorized_and_then_acts_as_the_impersonated_user() {
    let cluster = with_team();
    let lead = account(&cluster, "lead", Some("admin"));
    let viewer = account(&cluster, "viewer", Some("view"));
    until_allowed(&cluster, &lead, &["impersonate", "serviceaccounts"]);
    until_allowed(&cluster, &viewer, &["get", "configmaps"]);
    // The admin may impersonate anyone; alice herself may do nothing here.
    assert_eq!(
        cluster
            .kubectl(&["--as=alice", "-n", NS, "create", "configmap", "x"])
            .err()
            .trim(),
        "error: failed to create configmap: configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );
    let whoami = cluster
        .kubectl(&[
            "--as=alice",
            "--as-group=devs",
            "auth",
            "whoami",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(whoami["status"]["userInfo"]["username"], "alice");
    assert_eq!(
        whoami["status"]["userInfo"]["groups"],
        serde_json::json!(["devs", "system:authenticated"])
    );
    // A namespace admin may impersonate its service accounts (kube's edit
    // grants it), and then acts with their rights only.
    let as_viewer = ["--as=system:serviceaccount:team:viewer"];
    let mut get = as_viewer.to_vec();
    get.extend(["get", "configmaps"]);
    cluster.kubectl_with(&lead, &get).ok();
    let mut create = as_viewer.to_vec();
    create.extend(["create", "configmap", "y"]);
    assert!(cluster.kubectl_with(&lead, &create).err().contains(
        "User \"system:serviceaccount:team:viewer\" cannot create resource \"configmaps\""
    ),);
    // But not users, nor groups.
    assert_eq!(
        cluster
            .kubectl_with(&lead, &["--as=alice", "get", "configmaps"])
            .err()
            .trim(),
        "Error from server (Forbidden): users \"alice\" is forbidden: User \"system:serviceaccount:team:lead\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    assert!(
        cluster
            .kubectl_with(&lead, &["--as=system:serviceaccount:team:viewer", "--as-group=system:masters", "get", "secrets"])
            .err()
            .contains("groups \"system:masters\" is forbidden: User \"system:serviceaccount:team:lead\" cannot impersonate resource \"groups\""),
    );
    // A header we do not understand never grants anything: an extra needs its own permission.
    let token_free = cluster.kubectl_with(
        &lead,
        &[
            "--as=system:serviceaccount:team:viewer",
            "--as-uid=1234",
            "get",
            "configmaps",
        ],
    );
    assert!(
        token_free
            .err()
            .contains("uids.authentication.k8s.io \"1234\" is forbidden"),
        "{}",
        token_free.stderr
    );
}

#[test]
fn an_aggregated_role_extends_view_with_a_crd_authors_role() {
    let cluster = with_team();
    let viewer = account(&cluster, "viewer", Some("view"));
    until_allowed(&cluster, &viewer, &["list", "configmaps"]);
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced",
                         "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                         "versions": [{"name": "v1", "served": true, "storage": true,
                                       "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}"#,
        )
        .ok();
    // kubectl asks about a resource by the name discovery gives it.
    assert!(eventually(Duration::from_secs(10), || {
        cluster.kubectl(&["get", "widgets", "-n", NS]).code == 0
    }));
    assert_eq!(
        can_i(&cluster, &viewer, &["list", "widgets.example.com"]),
        "no"
    );
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            r#"{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
                "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}]}"#,
        )
        .ok();
    assert!(eventually(Duration::from_secs(5), || {
        can_i(&cluster, &viewer, &["list", "widgets.example.com"]) == "yes"
    }));
    let view = cluster
        .kubectl(&["get", "clusterrole", "view", "-o", "json"])
        .json();
    assert!(view["rules"].to_string().contains("widgets"), "{view}");
    cluster
        .kubectl(&["delete", "clusterrole", "widgets-view"])
        .ok();
    assert!(eventually(Duration::from_secs(5), || {
        can_i(&cluster, &viewer, &["list", "widgets.example.com"]) == "no"
    }));
}

#[test]
fn a_token_is_revoked_by_deleting_its_service_account() {
    let cluster = with_team();
    let token = {
        account(&cluster, "builder", Some("view"));
        cluster
            .kubectl(&["create", "token", "builder", "-n", NS])
            .ok()
            .trim()
            .to_string()
    };
    let kubeconfig = cluster.token_kubeconfig("builder-token", &token, NS);
    until_allowed(&cluster, &kubeconfig, &["get", "configmaps"]);
    cluster
        .kubectl_with(&kubeconfig, &["get", "configmaps"])
        .ok();
    // A TokenReview says who the token is, and for which audience.
    let review = |token: &str| {
        cluster
            .kubectl_stdin(
                &["create", "-o", "json", "-f", "-"],
                &serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
                    .to_string(),
            )
            .json()["status"]
            .clone()
    };
    let status = review(&token);
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(
        status["user"]["username"],
        "system:serviceaccount:team:builder"
    );
    assert_eq!(
        status["audiences"],
        serde_json::json!(["https://kubernetes.default.svc.cluster.local"])
    );
    assert_eq!(review("not-a-token")["authenticated"], false);
    // No token lives longer than the maximum (48h by default), whatever is asked.
    let long = cluster
        .kubectl(&[
            "create",
            "token",
            "builder",
            "-n",
            NS,
            "--duration=100h",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(long["spec"]["expirationSeconds"], 48 * 3600, "{long}");
    cluster
        .kubectl(&["delete", "serviceaccount", "builder", "-n", NS])
        .ok();
    until_refused(&cluster, &kubeconfig);
    assert_eq!(review(&token)["authenticated"], false);
    // A new account of the same name is someone else: the old token stays dead.
    cluster
        .kubectl(&["create", "serviceaccount", "builder", "-n", NS])
        .ok();
    std::thread::sleep(Duration::from_millis(500));
    until_refused(&cluster, &kubeconfig);
    // Only a Bearer token authenticates.
    let basic = cluster.curl(
        tests::As::Anonymous,
        "GET",
        "/api/v1/namespaces/team/configmaps",
        &[&format!("Authorization: Basic {token}")],
        None,
    );
    assert_eq!(basic.code, 401, "{}", basic.text);
    let empty = cluster.curl(
        tests::As::Anonymous,
        "GET",
        "/api/v1/namespaces/team/configmaps",
        &["Authorization: Bearer "],
        None,
    );
    assert_eq!(empty.code, 401, "{}", empty.text);
}

#[test]
fn a_token_bound_to_a_pod_or_secret_dies_with_it() {
    let cluster = with_team();
    account(&cluster, "builder", Some("view"));
    let pod = |name: &str, account: &str| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"serviceAccountName": account, "containers": [{"name": "c", "image": "nginx"}]},
        })
        .to_string()
    };
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &pod("web", "builder"))
        .ok();
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &pod("other", "default"))
        .ok();
    cluster
        .kubectl(&["create", "secret", "generic", "handle", "-n", NS])
        .ok();
    let bound = |kind: &str, name: &str| -> tests::Run {
        cluster.kubectl(&[
            "create",
            "token",
            "builder",
            "-n",
            NS,
            "--bound-object-kind",
            kind,
            "--bound-object-name",
            name,
        ])
    };
    let to_pod = bound("Pod", "web").ok().trim().to_string();
    let to_secret = bound("Secret", "handle").ok().trim().to_string();
    let pod_config = cluster.token_kubeconfig("to-pod", &to_pod, NS);
    let secret_config = cluster.token_kubeconfig("to-secret", &to_secret, NS);
    until_allowed(&cluster, &pod_config, &["get", "configmaps"]);
    cluster
        .kubectl_with(&secret_config, &["get", "configmaps"])
        .ok();
    // The pod's name and uid travel with the user, as kube's extras.
    let whoami = cluster
        .kubectl_with(&pod_config, &["auth", "whoami", "-o", "json"])
        .json();
    let extra = &whoami["status"]["userInfo"]["extra"];
    assert_eq!(
        extra["authentication.kubernetes.io/pod-name"],
        serde_json::json!(["web"]),
        "{whoami}"
    );
    let uid = cluster
        .kubectl(&[
            "get",
            "pod",
            "web",
            "-n",
            NS,
            "-o",
            "jsonpath={.metadata.uid}",
        ])
        .ok()
        .to_string();
    assert_eq!(
        extra["authentication.kubernetes.io/pod-uid"],
        serde_json::json!([uid])
    );

    // What kube refuses to bind, in kube's words.
    assert!(
        bound("Pod", "other")
            .err()
            .contains("cannot bind token for serviceaccount \"builder\" to pod running with serviceaccount \"default\""),
    );
    assert!(
        bound("Pod", "missing")
            .err()
            .contains("pods \"missing\" not found")
    );
    let mismatch = cluster.kubectl(&[
        "create",
        "token",
        "builder",
        "-n",
        NS,
        "--bound-object-kind",
        "Pod",
        "--bound-object-name",
        "web",
        "--bound-object-uid",
        "not-the-uid",
    ]);
    assert!(
        mismatch.err().contains(
            "the UID in the bound object reference (not-the-uid) does not match the UID in record"
        ),
        "{}",
        mismatch.stderr
    );
    let deployment = cluster.kubectl_stdin(
        &[
            "create",
            "--raw",
            &format!("/api/v1/namespaces/{NS}/serviceaccounts/builder/token"),
            "-f",
            "-",
        ],
        &serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"boundObjectRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        })
        .to_string(),
    );
    assert!(
        deployment
            .err()
            .contains("cannot bind token to object of type apps/v1, Kind=Deployment"),
        "{}",
        deployment.stderr
    );

    // Deleting the pod ends its token, not the Secret's.
    cluster
        .kubectl(&[
            "delete",
            "pod",
            "web",
            "-n",
            NS,
            "--grace-period=0",
            "--force",
        ])
        .ok();
    until_refused(&cluster, &pod_config);
    cluster
        .kubectl_with(&secret_config, &["get", "configmaps"])
        .ok();
    // A pod recreated under the same name does not revive it (new uid).
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &pod("web", "builder"))
        .ok();
    std::thread::sleep(Duration::from_millis(500));
    until_refused(&cluster, &pod_config);
    cluster
        .kubectl(&["delete", "secret", "handle", "-n", NS])
        .ok();
    until_refused(&cluster, &secret_config);
}

#[test]
fn a_namespace_admin_asks_local_access_reviews_about_its_own_namespace_only() {
    let cluster = with_team();
    account(&cluster, "boss", Some("admin"));
    let token = cluster
        .kubectl(&["create", "token", "boss", "-n", NS])
        .ok()
        .trim()
        .to_string();
    let path = format!("/apis/authorization.k8s.io/v1/namespaces/{NS}/localsubjectaccessreviews");
    let review = |spec: serde_json::Value, metadata: serde_json::Value| {
        let body = serde_json::json!({"apiVersion": "authorization.k8s.io/v1",
            "kind": "LocalSubjectAccessReview", "metadata": metadata, "spec": spec});
        cluster.curl(
            As::Token(&token),
            "POST",
            &path,
            &["Content-Type: application/json"],
            Some(body.to_string().as_bytes()),
        )
    };
    let user = "system:serviceaccount:team:boss";
    let about = |namespace: &str| {
        serde_json::json!({"user": user, "resourceAttributes":
            {"namespace": namespace, "verb": "get", "resource": "secrets"}})
    };
    // Its own namespace: answered.
    let own = review(about(NS), serde_json::json!({}));
    assert_eq!(own.code, 201, "{}", own.text);
    assert_eq!(own.json["status"]["allowed"], true, "{}", own.text);
    assert_eq!(own.json["metadata"]["namespace"], NS, "{}", own.text);
    // Another namespace, the cluster scope, or non-resource attributes: refused.
    for (spec, field, detail) in [
        (
            about("kube-system"),
            "spec.resourceAttributes.namespace",
            "must match metadata.namespace",
        ),
        (
            about(""),
            "spec.resourceAttributes.namespace",
            "must match metadata.namespace",
        ),
        (
            serde_json::json!({"user": user, "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}),
            "spec.nonResourceAttributes",
            "disallowed on this kind of request",
        ),
    ] {
        let refused = review(spec.clone(), serde_json::json!({}));
        assert_eq!(refused.code, 422, "{spec}: {}", refused.text);
        assert_eq!(refused.json["reason"], "Invalid", "{}", refused.text);
        let causes = refused.json["details"]["causes"]
            .as_array()
            .expect("causes");
        assert!(
            causes.iter().any(|c| c["field"] == field
                && c["message"].as_str().unwrap_or_default().contains(detail)),
            "{}",
            refused.text
        );
        assert!(
            refused
                .json
                .get("status")
                .is_none_or(|s| s["allowed"].is_null())
        );
    }
    // A body that names another namespace than its path.
    let elsewhere = review(
        about("kube-system"),
        serde_json::json!({"namespace": "kube-system"}),
    );
    assert_eq!(elsewhere.code, 400, "{}", elsewhere.text);
    assert!(
        elsewhere
            .text
            .contains("does not match the namespace sent on the request"),
        "{}",
        elsewhere.text
    );
    // Nobody to ask about, and metadata that is not allowed.
    let nobody = review(
        serde_json::json!({"resourceAttributes": {"namespace": NS, "verb": "get", "resource": "pods"}}),
        serde_json::json!({"name": "named"}),
    );
    assert_eq!(nobody.code, 422, "{}", nobody.text);
    for detail in [
        "at least one of user or group must be specified",
        "must be empty except for namespace",
    ] {
        assert!(nobody.text.contains(detail), "{detail}: {}", nobody.text);
    }
    // kubectl's own self review still works with a null creationTimestamp.
    let me = cluster.token_kubeconfig("boss", &token, NS);
    assert_eq!(can_i(&cluster, &me, &["get", "secrets"]), "yes");
    assert_eq!(
        can_i(&cluster, &me, &["get", "secrets", "-n", "kube-system"]),
        "no"
    );
}

/// kube's bootstrap policy files, the ones the core server writes at start.
const POLICY: [&str; 6] = [
    include_str!("../../core-server/src/bootstrap_policy/cluster-roles.yaml"),
    include_str!("../../core-server/src/bootstrap_policy/controller-roles.yaml"),
    include_str!("../../core-server/src/bootstrap_policy/namespace-roles.yaml"),
    include_str!("../../core-server/src/bootstrap_policy/cluster-role-bindings.yaml"),
    include_str!("../../core-server/src/bootstrap_policy/controller-role-bindings.yaml"),
    include_str!("../../core-server/src/bootstrap_policy/namespace-role-bindings.yaml"),
];

/// An object's kind, namespace and name.
type Key = (String, String, String);

fn key(object: &Value) -> Key {
    let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        field(&object["kind"]),
        field(&object["metadata"]["namespace"]),
        field(&object["metadata"]["name"]),
    )
}

/// What a set of rules allows, one (groups or URL, resource, name, verb) at a
/// time, so that rules split or merged differently compare equal.
fn grants(rules: &Value) -> BTreeSet<String> {
    let list = |rule: &Value, field: &str| -> Vec<String> {
        match rule[field].as_array() {
            Some(values) if !values.is_empty() => values
                .iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect(),
            _ => vec![String::new()],
        }
    };
    let mut all = BTreeSet::new();
    for rule in rules.as_array().into_iter().flatten() {
        for verb in list(rule, "verbs") {
            if rule["nonResourceURLs"].is_array() {
                for url in list(rule, "nonResourceURLs") {
                    all.insert(format!("{verb} {url}"));
                }
                continue;
            }
            for group in list(rule, "apiGroups") {
                for resource in list(rule, "resources") {
                    for name in list(rule, "resourceNames") {
                        all.insert(format!("{verb} {group}/{resource}/{name}"));
                    }
                }
            }
        }
    }
    all
}

/// Subjects as a set, an absent `apiGroup` or `namespace` being the empty one.
fn subjects(object: &Value) -> BTreeSet<String> {
    object["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            ["kind", "apiGroup", "namespace", "name"]
                .map(|f| s[f].as_str().unwrap_or_default())
                .join("/")
        })
        .collect()
}

/// The rules an aggregated role holds: those of every role its selectors
/// match, an aggregated one's own aggregated rules included (`admin` takes
/// `edit`'s, which takes `view`'s; kube's golden files list no rules for
/// them). `depth` bounds a cycle of selectors.
fn aggregated(role: &Value, roles: &[&Value], depth: usize) -> BTreeSet<String> {
    let selectors = role["aggregationRule"]["clusterRoleSelectors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    roles
        .iter()
        .filter(|r| {
            selectors.iter().any(|s| {
                s["matchLabels"].as_object().is_some_and(|labels| {
                    labels.iter().all(|(k, v)| &r["metadata"]["labels"][k] == v)
                })
            })
        })
        .flat_map(|r| {
            if r["aggregationRule"].is_object() && depth > 0 {
                aggregated(r, roles, depth - 1)
            } else {
                grants(&r["rules"])
            }
        })
        .collect()
}

/// How the live objects differ from kube's policy, one line a difference
/// (empty when the cluster holds the policy).
fn policy_diff(golden: &[Value], live: &BTreeMap<Key, Value>) -> Vec<String> {
    let mut diff = Vec::new();
    let live_roles: Vec<&Value> = live
        .values()
        .filter(|o| o["kind"] == "ClusterRole")
        .collect();
    let golden_keys: BTreeSet<Key> = golden.iter().map(key).collect();
    // Roles aggregated into admin/edit/view that kube does not ship (e.g. a
    // CRD author's) count with kube's own.
    let mut aggregated_from: Vec<&Value> = golden
        .iter()
        .filter(|o| o["kind"] == "ClusterRole")
        .collect();
    aggregated_from.extend(
        live_roles
            .iter()
            .filter(|r| !golden_keys.contains(&key(r)))
            .copied(),
    );
    for want in golden {
        let (kind, namespace, name) = key(want);
        let what = format!("{kind} {namespace}/{name}");
        let Some(have) = live.get(&key(want)) else {
            diff.push(format!("{what}: missing"));
            continue;
        };
        for field in ["labels", "annotations"] {
            let (w, h) = (&want["metadata"][field], &have["metadata"][field]);
            if w != h {
                diff.push(format!("{what}: {field} {h} != {w}"));
            }
        }
        if kind.ends_with("Binding") {
            if want["roleRef"] != have["roleRef"] {
                diff.push(format!(
                    "{what}: roleRef {} != {}",
                    have["roleRef"], want["roleRef"]
                ));
            }
            let (w, h) = (subjects(want), subjects(have));
            if w != h {
                diff.push(format!("{what}: subjects {h:?} != {w:?}"));
            }
            continue;
        }
        if want["aggregationRule"] != have["aggregationRule"] {
            diff.push(format!(
                "{what}: aggregationRule {} != {}",
                have["aggregationRule"], want["aggregationRule"]
            ));
        }
        let w = if want["aggregationRule"].is_object() {
            aggregated(want, &aggregated_from, 4)
        } else {
            grants(&want["rules"])
        };
        let h = grants(&have["rules"]);
        let (missing, extra): (Vec<_>, Vec<_>) =
            (w.difference(&h).collect(), h.difference(&w).collect());
        if !missing.is_empty() || !extra.is_empty() {
            let first = |v: &[&String]| v.iter().take(8).map(|s| s.to_string()).collect::<Vec<_>>();
            diff.push(format!(
                "{what}: {} rules missing {:?}..., {} extra {:?}...",
                missing.len(),
                first(&missing),
                extra.len(),
                first(&extra)
            ));
        }
    }
    diff
}

#[test]
fn the_cluster_holds_kube_s_whole_bootstrap_policy() {
    let cluster = Cluster::start();
    let golden: Vec<Value> = POLICY
        .iter()
        .flat_map(|text| {
            let list = apimachinery::yaml::to_json(text.as_bytes()).expect("a policy file");
            list["items"].as_array().cloned().unwrap_or_default()
        })
        .collect();
    let count = |kind: &str| golden.iter().filter(|o| o["kind"] == kind).count();
    println!(
        "kube's files: {} ClusterRoles, {} ClusterRoleBindings, {} Roles, {} RoleBindings",
        count("ClusterRole"),
        count("ClusterRoleBinding"),
        count("Role"),
        count("RoleBinding")
    );
    let live = || {
        let mut all = BTreeMap::new();
        for args in [
            &["get", "clusterroles,clusterrolebindings", "-o", "json"][..],
            &[
                "get",
                "roles,rolebindings",
                "-n",
                "kube-system",
                "-o",
                "json",
            ],
            &[
                "get",
                "roles,rolebindings",
                "-n",
                "kube-public",
                "-o",
                "json",
            ],
        ] {
            for item in cluster.kubectl(args).json()["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                all.insert(key(&item), item);
            }
        }
        all
    };
    // The hook writes the policy just after start, and the aggregation
    // controller fills admin, edit and view after that.
    let mut diff = Vec::new();
    let settled = eventually(Duration::from_secs(30), || {
        diff = policy_diff(&golden, &live());
        diff.is_empty()
    });
    let held = live();
    let held_count = |kind: &str| held.keys().filter(|k| k.0 == kind).count();
    println!(
        "the cluster: {} ClusterRoles, {} ClusterRoleBindings, {} Roles, {} RoleBindings",
        held_count("ClusterRole"),
        held_count("ClusterRoleBinding"),
        held_count("Role"),
        held_count("RoleBinding")
    );
    println!("diff ({} lines):", diff.len());
    for line in &diff {
        println!("  {line}");
    }
    assert!(settled && diff.is_empty(), "{diff:#?}");

    // kube-scheduler's identity, by impersonation: its bootstrap roles let it
    // read its lease in kube-system, and nothing lets it delete a namespace.
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            r#"{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
                "spec": {"holderIdentity": "someone"}}"#,
        )
        .ok();
    cluster.kubectl(&["create", "namespace", NS]).ok();
    let scheduler = ["Impersonate-User: system:kube-scheduler"];
    let lease = cluster.curl(
        As::Admin,
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler",
        &scheduler,
        None,
    );
    assert_eq!(lease.code, 200, "{}", lease.text);
    assert_eq!(lease.json["spec"]["holderIdentity"], "someone");
    let refused = cluster.curl(
        As::Admin,
        "DELETE",
        &format!("/api/v1/namespaces/{NS}"),
        &scheduler,
        None,
    );
    assert_eq!(refused.code, 403, "{}", refused.text);
    assert_eq!(refused.json["kind"], "Status");
    assert_eq!(refused.json["reason"], "Forbidden");
    assert_eq!(refused.json["code"], 403);
    assert_eq!(
        refused.json["message"],
        format!(
            "namespaces \"{NS}\" is forbidden: User \"system:kube-scheduler\" cannot delete resource \"namespaces\" in API group \"\" in the namespace \"{NS}\""
        )
    );
    assert!(
        cluster.kubectl(&["get", "namespace", NS]).code == 0,
        "the namespace is still there"
    );
}
