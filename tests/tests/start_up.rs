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
//! collector with metadata-only informers). A kubelet, answered by the
//! Node authorizer and NodeRestriction admission as kube answers it, reads
//! and writes only what is its node's: its Node, Lease and CSINode, its
//! pods (by `spec.nodeName`) and what they use, tokens for their accounts.

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
    /// A kubelet: user `system:node:<name>` in group `system:nodes` (its
    /// client certificate's subject), impersonated by the admin.
    Node(&'a str),
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
        self.send_as(method, path, accept, "application/json", body)
    }

    /// [`Replay::send`] with the body's Content-Type.
    fn send_as(
        &self,
        method: &str,
        path: &str,
        accept: &str,
        content_type: &str,
        body: Option<Value>,
    ) -> Raw {
        let (bearer, node);
        let mut headers = vec![("accept", accept)];
        match self.who {
            Who::User(user) => headers.push(("impersonate-user", user)),
            Who::Token(token) => {
                bearer = format!("Bearer {token}");
                headers.push(("authorization", bearer.as_str()));
            }
            Who::Node(name) => {
                node = format!("system:node:{name}");
                headers.push(("impersonate-user", node.as_str()));
                headers.push(("impersonate-group", "system:nodes"));
            }
        }
        let body = body.map(|b| (content_type, b.to_string().into_bytes()));
        match self.who {
            // The admin's certificate must not speak for a token's owner.
            Who::Token(_) => self.bare.raw(method, path, &headers, body),
            Who::User(_) | Who::Node(_) => self.api.raw(method, path, &headers, body),
        }
    }

    /// A request that must be refused with 403 and kube's `message`.
    fn refused(&self, method: &str, path: &str, body: Option<Value>, message: &str) {
        let raw = self.send(method, path, TYPED, body);
        assert_eq!(raw.code, 403, "{method} {path}: {}", raw.text());
        let status = decode(&raw, &format!("{method} {path}"));
        assert_eq!(status["reason"], "Forbidden", "{status}");
        assert_eq!(status["message"], message, "{method} {path}");
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

#[test]
fn a_kubelet_starts_through_the_node_authorizer_and_node_restriction() {
    let cluster = Cluster::start();
    let api = Api::new(&cluster, 2);
    let kubelet = Replay::new(&cluster, Who::Node("node-1"));
    let user = "system:node:node-1";
    // Its secure port's webhook authentication and authorization.
    let review = kubelet.expect(201, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", TYPED,
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "not-a-token"}})));
    assert!(
        !review["status"]["authenticated"].as_bool().unwrap_or(false),
        "{review}"
    );
    kubelet.expect(201, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", TYPED,
        Some(json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "someone", "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})));

    // Registration: its Node, with the labels a kubelet sets, then read back.
    let node = kubelet.expect(201, "POST", "/api/v1/nodes", TYPED, Some(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1", "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "metal"}},
        "spec": {"podCIDR": "10.244.1.0/24"}})));
    let node_uid = node["metadata"]["uid"].as_str().expect("a uid").to_owned();
    kubelet.expect(200, "GET", "/api/v1/nodes/node-1", TYPED, None);
    // NodeRestriction reads Nodes from the server's own cache, selectable fields and all.
    let (code, schedulable) = api.get("/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse");
    assert_eq!(code, 200, "{schedulable}");
    assert_eq!(
        schedulable["items"][0]["metadata"]["name"], "node-1",
        "{schedulable}"
    );
    // Its informers: its Node, its pods, services, CSI drivers, runtime classes.
    kubelet.inform(
        "/api/v1/nodes",
        "fieldSelector=metadata.name%3Dnode-1",
        TYPED,
    );
    kubelet.inform(
        "/api/v1/pods",
        "fieldSelector=spec.nodeName%3Dnode-1",
        TYPED,
    );
    kubelet.inform("/api/v1/services", "", TYPED);
    kubelet.inform("/apis/storage.k8s.io/v1/csidrivers", "", TYPED);
    kubelet.inform("/apis/node.k8s.io/v1/runtimeclasses", "", TYPED);
    // Its status, as a strategic merge patch.
    let patched = kubelet.send_as("PATCH", "/api/v1/nodes/node-1/status", TYPED, "application/strategic-merge-patch+json",
        Some(json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status", "lastHeartbeatTime": "2026-12-06T08:00:00Z",
            "lastTransitionTime": "2026-12-06T08:00:00Z"}]}})));
    assert_eq!(patched.code, 200, "{}", patched.text());
    // Its heartbeat Lease: read, made, renewed.
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let missing = kubelet.send("GET", &format!("{leases}/node-1"), TYPED, None);
    assert_eq!(missing.code, 404, "{}", missing.text());
    let mut lease = kubelet.expect(201, "POST", leases, TYPED, Some(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "node-1", "namespace": "kube-node-lease",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": node_uid}]},
        "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40, "renewTime": "2026-12-06T08:00:00.000000Z"}})));
    lease["spec"]["renewTime"] = json!("2026-12-06T08:00:10.000000Z");
    kubelet.expect(200, "PUT", &format!("{leases}/node-1"), TYPED, Some(lease));
    // Its CSINode.
    let csinodes = "/apis/storage.k8s.io/v1/csinodes";
    assert_eq!(
        kubelet
            .send("GET", &format!("{csinodes}/node-1"), TYPED, None)
            .code,
        404
    );
    kubelet.expect(201, "POST", csinodes, TYPED, Some(json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": "node-1", "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": node_uid}]},
        "spec": {"drivers": []}})));
    // Its start-up event.
    kubelet.expect(201, "POST", "/api/v1/namespaces/default/events", TYPED, Some(json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "node-1.starting"}, "involvedObject": {"kind": "Node", "name": "node-1", "uid": "node-1"},
        "reason": "Starting", "message": "Starting kubelet.", "type": "Normal", "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-12-06T08:00:00Z", "lastTimestamp": "2026-12-06T08:00:00Z", "count": 1})));

    // The scheduler binds a pod to it (and one elsewhere): what they use.
    for object in [
        (
            "/api/v1/namespaces/default/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner"}}),
        ),
        (
            "/api/v1/namespaces/default/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"password": "p"}}),
        ),
        (
            "/api/v1/namespaces/default/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "other"}, "stringData": {"password": "q"}}),
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "b"}}),
        ),
        (
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"nodeName": "node-1", "serviceAccountName": "runner",
                "containers": [{"name": "web", "image": "nginx", "envFrom": [{"configMapRef": {"name": "settings"}}]}],
                "volumes": [{"name": "db", "secret": {"secretName": "db"}}]}}),
        ),
        (
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "elsewhere"},
            "spec": {"nodeName": "node-2", "containers": [{"name": "c", "image": "nginx"}],
                "volumes": [{"name": "other", "secret": {"secretName": "other"}}]}}),
        ),
    ] {
        let (code, body) = api.post(object.0, &object.1);
        assert_eq!(code, 201, "{body}");
    }
    let (_, web) = api.get("/api/v1/namespaces/default/pods/web");
    let web_uid = web["metadata"]["uid"].as_str().expect("a uid").to_owned();
    // What its pod uses: readable once the authorizer's graph has the pod.
    let related = tests::eventually(std::time::Duration::from_secs(10), || {
        kubelet
            .send("GET", "/api/v1/namespaces/default/secrets/db", TYPED, None)
            .code
            == 200
    });
    assert!(
        related,
        "the pod's secret never became readable to its node"
    );
    kubelet.inform(
        "/api/v1/namespaces/default/secrets",
        "fieldSelector=metadata.name%3Ddb",
        TYPED,
    );
    kubelet.inform(
        "/api/v1/namespaces/default/configmaps",
        "fieldSelector=metadata.name%3Dsettings",
        TYPED,
    );
    kubelet.expect(
        200,
        "GET",
        "/api/v1/namespaces/default/pods/web",
        TYPED,
        None,
    );
    let token = kubelet.expect(
        201,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/runner/token",
        TYPED,
        Some(
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
            "audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": web_uid}}}),
        ),
    );
    assert!(token["status"]["token"].is_string(), "{token}");
    let status = kubelet.send_as("PATCH", "/api/v1/namespaces/default/pods/web/status", TYPED, "application/strategic-merge-patch+json",
        Some(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})));
    assert_eq!(status.code, 200, "{}", status.text());
    // A static pod's mirror, owned by its Node; then deleted.
    let mirror = |volumes: Value| {
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "static-node-1", "namespace": "default", "annotations": {"kubernetes.io/config.mirror": "c0ffee"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": node_uid, "controller": true}]},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}], "volumes": volumes}})
    };
    kubelet.expect(
        201,
        "POST",
        "/api/v1/namespaces/default/pods",
        TYPED,
        Some(mirror(json!([]))),
    );
    kubelet.expect(
        200,
        "DELETE",
        "/api/v1/namespaces/default/pods/static-node-1?gracePeriodSeconds=0",
        TYPED,
        None,
    );

    // What is not its own: refused, in kube's words.
    let no_relationship = "no relationship found between node 'node-1' and this object";
    // Access reviews answer as the front door does (kube's Node,RBAC).
    let review = |secret: &str| {
        let (code, body) = api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews",
            &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
                "user": user, "groups": ["system:nodes", "system:authenticated"],
                "resourceAttributes": {"verb": "get", "resource": "secrets", "namespace": "default", "name": secret}}}));
        assert_eq!(code, 201, "{body}");
        body["status"].clone()
    };
    assert_eq!(review("db"), json!({"allowed": true}));
    assert_eq!(
        review("other"),
        json!({"allowed": false, "reason": no_relationship})
    );
    kubelet.refused("GET", "/api/v1/namespaces/default/secrets/other", None, &format!(
        "secrets \"other\" is forbidden: User \"{user}\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": {no_relationship}"));
    kubelet.refused("GET", "/api/v1/namespaces/kube-system/secrets/db", None, &format!(
        "secrets \"db\" is forbidden: User \"{user}\" cannot get resource \"secrets\" in API group \"\" in the namespace \"kube-system\": {no_relationship}"));
    kubelet.refused("GET", "/api/v1/namespaces/default/pods/elsewhere", None, &format!(
        "pods \"elsewhere\" is forbidden: User \"{user}\" cannot get resource \"pods\" in API group \"\" in the namespace \"default\": {no_relationship}"));
    kubelet.refused("GET", "/api/v1/pods", None, &format!(
        "pods is forbidden: User \"{user}\" cannot list resource \"pods\" in API group \"\" at the cluster scope: can only list/watch pods with spec.nodeName field selector"));
    kubelet.refused("GET", "/api/v1/nodes/node-2", None, &format!(
        "nodes \"node-2\" is forbidden: User \"{user}\" cannot get resource \"nodes\" in API group \"\" at the cluster scope: node 'node-1' cannot read 'node-2', only its own Node object"));
    kubelet.refused("GET", &format!("{leases}/node-2"), None, &format!(
        "leases.coordination.k8s.io \"node-2\" is forbidden: User \"{user}\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-node-lease\": can only access node lease with the same name as the requesting node"));
    kubelet.refused("POST", "/api/v1/namespaces/default/serviceaccounts/default/token",
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})), &format!(
        "serviceaccounts \"default\" is forbidden: User \"{user}\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"default\": {no_relationship}"));
    kubelet.refused(
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/runner/token",
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
        "serviceaccounts \"runner\" is forbidden: node requested token not bound to a pod",
    );
    kubelet.refused("POST", "/api/v1/namespaces/default/pods",
        Some(mirror(json!([{"name": "db", "secret": {"secretName": "db"}}]))),
        "pods \"static-node-1\" is forbidden: node \"node-1\" can not create pods that reference secrets");
    kubelet.refused("DELETE", "/api/v1/namespaces/default/pods/elsewhere", None,
        "pods \"elsewhere\" is forbidden: node \"node-1\" can only delete pods with spec.nodeName set to itself");
    kubelet.refused(
        "POST",
        "/api/v1/nodes",
        Some(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-2"}})),
        "nodes \"node-2\" is forbidden: node \"node-1\" is not allowed to modify node \"node-2\"",
    );
    kubelet.refused("POST", leases,
        Some(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "node-2"}})),
        "leases.coordination.k8s.io \"node-2\" is forbidden: can only access node lease with the same name as the requesting node");
    kubelet.refused("DELETE", "/api/v1/namespaces/default", None, &format!(
        "namespaces \"default\" is forbidden: User \"{user}\" cannot delete resource \"namespaces\" in API group \"\" in the namespace \"default\""));
    // The pod goes: so does its node's access to its secret.
    let gone = api.raw(
        "DELETE",
        "/api/v1/namespaces/default/pods/web?gracePeriodSeconds=0",
        &[],
        None,
    );
    assert_eq!(gone.code, 200, "{}", gone.text());
    let revoked = tests::eventually(std::time::Duration::from_secs(10), || {
        kubelet
            .send("GET", "/api/v1/namespaces/default/secrets/db", TYPED, None)
            .code
            == 403
    });
    assert!(revoked, "a deleted pod's secret stays readable to its node");
}
