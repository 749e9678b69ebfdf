//! The start-up of stock components, replayed through the front door: the
//! requests kube-scheduler, kube-controller-manager (and the controllers it
//! runs under their own service accounts) and an aggregated server built on
//! k8s.io/apiserver make when they start, as those identities, with only the
//! RBAC kube's bootstrap policy (and, for the aggregated server, its chart's
//! two bindings) gives them, asked as client-go asks (protobuf first).
//!
//! What each sends, read from their code: the delegated authentication
//! ConfigMap (`extension-apiserver-authentication` in kube-system, got, then
//! listed and watched by name), TokenReviews and SubjectAccessReviews for
//! their own secure port, a leader-election Lease, their informers (a list
//! from the cache, `limit=500&resourceVersion=0`, then a watch with
//! bookmarks from the list's version), events; the controller manager also
//! reads discovery, creates its controllers' ServiceAccounts and asks tokens
//! for them, and its controllers work with those tokens (the garbage
//! collector with metadata-only informers).

use serde_json::{Value, json};
use tests::Cluster;
use tests::informer::{Api, Raw};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// client-go's typed clients.
const TYPED: &str = "application/vnd.kubernetes.protobuf, */*";
/// client-go's metadata informers.
const METADATA: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const AUTH_CONFIG_MAP: &str =
    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";

/// Who a replayed request is sent as.
#[derive(Clone, Copy)]
enum Who<'a> {
    /// A user impersonated by the admin (a component's client certificate).
    User(&'a str),
    /// A bearer token (a controller's service account).
    Token(&'a str),
}

struct Replay<'a> {
    /// The admin's client (who impersonates users).
    api: Api,
    /// A client without a certificate (for tokens).
    bare: Api,
    who: Who<'a>,
}

impl<'a> Replay<'a> {
    fn new(cluster: &Cluster, who: Who<'a>) -> Replay<'a> {
        Replay {
            api: Api::new(cluster, 2),
            bare: Api::without_certificate(cluster),
            who,
        }
    }

    fn send(&self, method: &str, path: &str, accept: &str, body: Option<Value>) -> Raw {
        let bearer;
        let mut headers = vec![("accept", accept)];
        match self.who {
            Who::User(user) => headers.push(("impersonate-user", user)),
            Who::Token(token) => {
                bearer = format!("Bearer {token}");
                headers.push(("authorization", bearer.as_str()));
            }
        }
        let body = body.map(|b| ("application/json", b.to_string().into_bytes()));
        match self.who {
            // The admin's certificate must not speak for a token's owner.
            Who::Token(_) => self.bare.raw(method, path, &headers, body),
            Who::User(_) => self.api.raw(method, path, &headers, body),
        }
    }

    /// A request that must succeed with `code`; its answer decoded.
    fn expect(
        &self,
        code: u16,
        method: &str,
        path: &str,
        accept: &str,
        body: Option<Value>,
    ) -> Value {
        let raw = self.send(method, path, accept, body);
        assert_eq!(raw.code, code, "{method} {path}: {}", raw.text());
        decode(&raw, &format!("{method} {path}"))
    }

    /// An informer's start: a list from the cache, then a watch from its version.
    fn inform(&self, path: &str, query: &str, accept: &str) -> Value {
        let sep = if query.is_empty() { "" } else { "&" };
        let list = self.expect(
            200,
            "GET",
            &format!("{path}?{query}{sep}limit=500&resourceVersion=0"),
            accept,
            None,
        );
        let version = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            !version.is_empty(),
            "{path}: a list without a version: {list}"
        );
        let watch = self.send(
            "GET",
            &format!("{path}?{query}{sep}allowWatchBookmarks=true&resourceVersion={version}&timeoutSeconds=1&watch=true"),
            accept,
            None,
        );
        assert_eq!(watch.code, 200, "watch {path}: {}", watch.text());
        assert_eq!(
            watch.content_type,
            proto::k8s::WATCH_CONTENT_TYPE,
            "watch {path}"
        );
        list
    }

    /// The delegated authentication every component with a secure port reads at start.
    fn delegated_authentication(&self) {
        let config = self.expect(200, "GET", AUTH_CONFIG_MAP, TYPED, None);
        assert!(
            config["data"]["requestheader-client-ca-file"].is_string(),
            "the front proxy's CA is published: {config}"
        );
        self.inform(
            "/api/v1/namespaces/kube-system/configmaps",
            "fieldSelector=metadata.name%3Dextension-apiserver-authentication",
            TYPED,
        );
        let review = self.expect(201, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", TYPED,
            Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "not-a-token"}})));
        assert_eq!(
            review["status"]["authenticated"].as_bool().unwrap_or(false),
            false,
            "{review}"
        );
        let access = self.expect(201, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", TYPED,
            Some(json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": "someone", "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})));
        assert_eq!(
            access["status"]["allowed"].as_bool().unwrap_or(false),
            false,
            "{access}"
        );
    }

    /// Leader election: the lease is read, made, renewed.
    fn leader_election(&self, name: &str) {
        let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
        let missing = self.send("GET", &format!("{leases}/{name}"), TYPED, None);
        assert_eq!(missing.code, 404, "{}", missing.text());
        assert_eq!(decode(&missing, "a missing lease")["reason"], "NotFound");
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"holderIdentity": format!("{name}-1"), "leaseDurationSeconds": 15,
                     "acquireTime": "2026-12-06T08:00:00.000000Z", "renewTime": "2026-12-06T08:00:00.000000Z",
                     "leaseTransitions": 0}});
        let mut lease = self.expect(201, "POST", leases, TYPED, Some(lease));
        lease["spec"]["renewTime"] = json!("2026-12-06T08:00:02.000000Z");
        self.expect(200, "PUT", &format!("{leases}/{name}"), TYPED, Some(lease));
    }
}

/// An answer decoded: protobuf (which a TYPED client gets for built-in
/// kinds) through the schemas, JSON as JSON.
fn decode(raw: &Raw, what: &str) -> Value {
    if raw.content_type == PROTOBUF {
        return proto::k8s::decode(&raw.body).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    serde_json::from_slice(&raw.body).unwrap_or_else(|e| panic!("{what}: {e}: {}", raw.text()))
}

/// A ServiceAccount in kube-system and a token for it, as the controller
/// manager makes them for its controllers (`--use-service-account-credentials`).
fn controller_token(manager: &Replay, name: &str) -> String {
    let accounts = "/api/v1/namespaces/kube-system/serviceaccounts";
    if manager
        .send("GET", &format!("{accounts}/{name}"), TYPED, None)
        .code
        == 404
    {
        manager.expect(
            201,
            "POST",
            accounts,
            TYPED,
            Some(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})),
        );
    }
    let token = manager.expect(201, "POST", &format!("{accounts}/{name}/token"), TYPED,
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})));
    token["status"]["token"]
        .as_str()
        .expect("a token")
        .to_owned()
}

#[test]
fn the_scheduler_starts_with_its_bootstrap_rbac() {
    let cluster = Cluster::start();
    let scheduler = Replay::new(&cluster, Who::User("system:kube-scheduler"));
    scheduler.delegated_authentication();
    scheduler.leader_election("kube-scheduler");
    for (path, query) in [
        (
            "/api/v1/pods",
            "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed",
        ),
        ("/api/v1/nodes", ""),
        ("/api/v1/namespaces", ""),
        ("/api/v1/persistentvolumes", ""),
        ("/api/v1/persistentvolumeclaims", ""),
        ("/api/v1/replicationcontrollers", ""),
        ("/api/v1/services", ""),
        ("/apis/apps/v1/replicasets", ""),
        ("/apis/apps/v1/statefulsets", ""),
        ("/apis/policy/v1/poddisruptionbudgets", ""),
        ("/apis/storage.k8s.io/v1/csinodes", ""),
        ("/apis/storage.k8s.io/v1/csidrivers", ""),
        ("/apis/storage.k8s.io/v1/csistoragecapacities", ""),
        ("/apis/storage.k8s.io/v1/storageclasses", ""),
    ] {
        scheduler.inform(path, query, TYPED);
    }
    scheduler.expect(201, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", TYPED,
        Some(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "scheduled.1"},
            "eventTime": "2026-12-06T08:00:00.000000Z", "reportingController": "default-scheduler",
            "reportingInstance": "default-scheduler-1", "action": "Scheduling", "reason": "Scheduled",
            "type": "Normal", "note": "replayed", "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}})));
    // What it was not given stays refused, in kube's words.
    let refused = scheduler.send("DELETE", "/api/v1/namespaces/default", TYPED, None);
    assert_eq!(refused.code, 403, "{}", refused.text());
    assert_eq!(
        decode(&refused, "a refusal")["message"],
        "namespaces \"default\" is forbidden: User \"system:kube-scheduler\" cannot delete resource \"namespaces\" in API group \"\" in the namespace \"default\""
    );
}

#[test]
fn the_controller_manager_and_its_controllers_start_with_their_bootstrap_rbac() {
    let cluster = Cluster::start();
    let manager = Replay::new(&cluster, Who::User("system:kube-controller-manager"));
    manager.delegated_authentication();
    manager.leader_election("kube-controller-manager");
    // Discovery, for the garbage collector's and quota's resource lists.
    let versions = manager.expect(200, "GET", "/api", TYPED, None);
    assert_eq!(versions["versions"], json!(["v1"]));
    let groups = manager.expect(200, "GET", "/apis", "application/json", None);
    assert!(
        groups["groups"].as_array().is_some_and(|g| g.len() > 10),
        "{groups}"
    );
    manager.expect(200, "GET", "/api/v1", TYPED, None);

    // The ReplicaSet controller, with its own token.
    let token = controller_token(&manager, "replicaset-controller");
    let replicasets = Replay::new(&cluster, Who::Token(&token));
    replicasets.inform("/apis/apps/v1/replicasets", "", TYPED);
    replicasets.inform("/api/v1/pods", "", TYPED);
    replicasets.expect(
        201,
        "POST",
        "/api/v1/namespaces/default/pods",
        TYPED,
        Some(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"},
            "spec": {"containers": [{"name": "main", "image": "nginx"}]}}),
        ),
    );
    let refused = replicasets.send("GET", "/api/v1/namespaces/kube-system/secrets", TYPED, None);
    assert_eq!(refused.code, 403, "{}", refused.text());

    // The garbage collector: metadata-only informers on whatever discovery lists.
    let token = controller_token(&manager, "generic-garbage-collector");
    let collector = Replay::new(&cluster, Who::Token(&token));
    for path in [
        "/api/v1/configmaps",
        "/apis/apps/v1/deployments",
        "/apis/rbac.authorization.k8s.io/v1/roles",
    ] {
        let list = collector.inform(path, "", METADATA);
        assert_eq!(list["kind"], "PartialObjectMetadataList", "{path}");
    }
    let configmaps = collector.inform("/api/v1/configmaps", "", METADATA);
    let item = &configmaps["items"][0];
    assert!(
        item["metadata"]["name"].is_string() && item.get("data").is_none(),
        "{item}"
    );

    // The namespace controller finds namespaces to finalize.
    let token = controller_token(&manager, "namespace-controller");
    let namespaces = Replay::new(&cluster, Who::Token(&token));
    namespaces.inform("/api/v1/namespaces", "", TYPED);
}

#[test]
fn an_aggregated_server_starts_with_its_charts_bindings_and_nothing_more() {
    let cluster = Cluster::start();
    let api = Api::new(&cluster, 2);
    let admin = Replay::new(&cluster, Who::User("system:kube-controller-manager"));
    // What a chart for a k8s.io/apiserver server creates: its account, the
    // reader of the authentication ConfigMap, and auth delegation.
    let token = controller_token(&admin, "wire-metrics");
    let user = "system:serviceaccount:kube-system:wire-metrics";
    let (code, body) = api.post("/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "wire-metrics-auth-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "wire-metrics", "namespace": "kube-system"}]}));
    assert_eq!(code, 201, "{body}");
    let server = Replay::new(&cluster, Who::Token(&token));
    // Without auth delegation its reviews are refused, as kube refuses them.
    let refused = server.send("POST", "/apis/authentication.k8s.io/v1/tokenreviews", TYPED,
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "x"}})));
    assert_eq!(refused.code, 403, "{}", refused.text());
    assert_eq!(
        decode(&refused, "a refused review")["message"],
        format!(
            "tokenreviews.authentication.k8s.io is forbidden: User \"{user}\" cannot create resource \"tokenreviews\" in API group \"authentication.k8s.io\" at the cluster scope"
        )
    );
    let (code, body) = api.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "wire-metrics:system:auth-delegator"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
            "subjects": [{"kind": "ServiceAccount", "name": "wire-metrics", "namespace": "kube-system"}]}));
    assert_eq!(code, 201, "{body}");
    let bound = tests::eventually(std::time::Duration::from_secs(10), || {
        server
            .send(
                "POST",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                TYPED,
                Some(
                    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": "u", "nonResourceAttributes": {"path": "/", "verb": "get"}}}),
                ),
            )
            .code
            == 201
    });
    assert!(bound, "the auth-delegator binding never took effect");
    server.delegated_authentication();
    // Admission configuration it was not granted: refused, in kube's words.
    let refused = server.send("GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?limit=500&resourceVersion=0", TYPED, None);
    assert_eq!(refused.code, 403, "{}", refused.text());
    assert_eq!(
        decode(&refused, "a refused list")["message"],
        format!(
            "validatingwebhookconfigurations.admissionregistration.k8s.io is forbidden: User \"{user}\" cannot list resource \"validatingwebhookconfigurations\" in API group \"admissionregistration.k8s.io\" at the cluster scope"
        )
    );
    // Other ConfigMaps in kube-system are not its to read.
    let refused = server.send(
        "GET",
        "/api/v1/namespaces/kube-system/configmaps",
        TYPED,
        None,
    );
    assert_eq!(refused.code, 403, "{}", refused.text());
}
