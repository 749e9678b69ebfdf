//! Protobuf answers through the front door, as client-go's typed clients
//! ask for them (`Accept: application/vnd.kubernetes.protobuf,application/json`):
//! built-in objects from the core and extension servers, lists, discovery,
//! errors, the answers to writes and watch streams are kube's protobuf
//! (`k8s\0` + `runtime.Unknown`; length-prefixed `WatchEvent` frames), and
//! each, decoded with the schemas in `proto/`, holds the same fields as
//! the JSON answer to the same request. Custom resources are JSON, or 406
//! to a client that accepts protobuf only. kubectl's own typed calls (Go's
//! decoder) read the protobuf answers.

use std::time::Duration;

use serde_json::{Value, json};
use tests::informer::{Api, Raw};
use tests::{Answer, As, Cluster, eventually};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What client-go's typed clients send.
const TYPED: &str = "application/vnd.kubernetes.protobuf,application/json";
const NS: &str = "wire";

fn send(api: &Api, method: &str, path: &str, accept: &str, body: Option<(&str, Vec<u8>)>) -> Raw {
    api.raw(method, path, &[("accept", accept)], body)
}

/// The JSON answer to a GET.
fn json_get(api: &Api, path: &str) -> Value {
    let raw = send(api, "GET", path, "application/json", None);
    assert_eq!(
        raw.code,
        200,
        "GET {path}: {}",
        String::from_utf8_lossy(&raw.body)
    );
    serde_json::from_slice(&raw.body).expect("JSON")
}

/// The protobuf answer to a request, decoded (the Content-Type must be protobuf).
fn protobuf(raw: &Raw, what: &str) -> Value {
    assert_eq!(
        raw.content_type,
        PROTOBUF,
        "{what}: {}",
        String::from_utf8_lossy(&raw.body)
    );
    assert!(raw.body.starts_with(b"k8s\0"), "{what}: no magic bytes");
    proto::k8s::decode(&raw.body).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Whether Go writes nothing, or its zero value, for this JSON value.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.values().all(is_zero),
    }
}

/// Compares two answers field by field; a field only one side has must be a
/// zero value (Go's protobuf carries no "absent" for value fields).
fn differences(json: &Value, decoded: &Value, at: &str, out: &mut Vec<String>) {
    match (json, decoded) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                let here = format!("{at}.{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => differences(x, y, &here, out),
                    // A list's items carry no kind in protobuf, as in kube's.
                    (Some(_), None)
                        if at.starts_with(".items[")
                            && at.ends_with(']')
                            && matches!(key.as_str(), "apiVersion" | "kind") => {}
                    (Some(only), None) | (None, Some(only)) if is_zero(only) => {}
                    (x, y) => out.push(format!("{here}: JSON {x:?}, protobuf {y:?}")),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(x, y, &format!("{at}[{i}]"), out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{at}: JSON {a}, protobuf {b}")),
    }
}

fn assert_same(json: &Value, decoded: &Value, what: &str) {
    let mut found = Vec::new();
    differences(json, decoded, "", &mut found);
    assert!(found.is_empty(), "{what} differs:\n{}", found.join("\n"));
    // The comparison itself can fail: a changed field is seen.
    let mut changed = decoded.clone();
    changed["metadata"]["uid"] = json!("another");
    let mut found = Vec::new();
    differences(json, &changed, "", &mut found);
    assert!(!found.is_empty() || json["metadata"]["uid"] == "another");
}

/// The frames of a protobuf watch stream, decoded: (type, object).
fn frames(mut body: &[u8]) -> Vec<(String, Value)> {
    let pool =
        prost_reflect::DescriptorPool::decode(proto::K8S_FILE_DESCRIPTOR_SET).expect("schemas");
    let desc = pool
        .get_message_by_name("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent")
        .expect("WatchEvent");
    let mut events = Vec::new();
    while !body.is_empty() {
        assert!(body.len() >= 4, "a truncated frame length");
        let length = u32::from_be_bytes(body[..4].try_into().expect("4 bytes")) as usize;
        let frame = &body[4..4 + length];
        body = &body[4 + length..];
        // WatchEvent {1 type, 2 RawExtension {1 raw}}: read with the schemas.
        let event = watch_event(&desc, frame);
        events.push(event);
    }
    events
}

fn watch_event(desc: &prost_reflect::MessageDescriptor, frame: &[u8]) -> (String, Value) {
    let event = prost_reflect::DynamicMessage::decode(desc.clone(), frame).expect("a WatchEvent");
    let event_type = event
        .get_field_by_name("type")
        .and_then(|v| v.as_str().map(str::to_owned))
        .expect("a type");
    let raw = match event.get_field_by_name("object").as_deref() {
        Some(prost_reflect::Value::Message(object)) => object
            .get_field_by_name("raw")
            .and_then(|v| v.as_bytes().map(|b| b.to_vec()))
            .expect("raw"),
        other => panic!("no object: {other:?}"),
    };
    let object = proto::k8s::decode(&raw).expect("the event's object");
    (event_type, object)
}

fn setup(cluster: &Cluster) -> Api {
    let api = Api::new(cluster, 4);
    api.create_namespace(NS);
    for args in [
        &[
            "create",
            "configmap",
            "plain",
            "-n",
            NS,
            "--from-literal=a=b",
            "--from-file=bin=/bin/true",
        ][..],
        &[
            "create",
            "secret",
            "generic",
            "s",
            "-n",
            NS,
            "--from-literal=k=v",
        ],
        &[
            "create",
            "deployment",
            "web",
            "-n",
            NS,
            "--image=nginx",
            "--replicas=0",
        ],
        &[
            "create",
            "service",
            "clusterip",
            "web",
            "-n",
            NS,
            "--tcp=80:8080",
        ],
        &["create", "serviceaccount", "bot", "-n", NS],
        &["create", "job", "once", "-n", NS, "--image=busybox"],
        &[
            "create",
            "cronjob",
            "often",
            "-n",
            NS,
            "--image=busybox",
            "--schedule=*/5 * * * *",
        ],
        &[
            "create",
            "pdb",
            "budget",
            "-n",
            NS,
            "--selector=app=web",
            "--min-available=50%",
        ],
        &[
            "create",
            "ingress",
            "door",
            "-n",
            NS,
            "--rule=foo.com/bar=web:80",
        ],
        &["create", "priorityclass", "high", "--value=1000"],
    ] {
        cluster.kubectl(args).ok();
    }
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "lock"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                 "renewTime": "2026-12-06T07:31:01.123456Z", "acquireTime": "2026-12-06T07:30:00.000000Z"}});
    let (code, body) = api.post(
        &format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"),
        &lease,
    );
    assert_eq!(code, 201, "{body}");
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
        "eventTime": "2026-12-06T07:31:01.000001Z", "reportingController": "test/ctl", "reportingInstance": "i-1",
        "action": "Tested", "reason": "Because", "type": "Normal", "note": "a note",
        "regarding": {"kind": "ConfigMap", "name": "plain", "namespace": NS}});
    let (code, body) = api.post(
        &format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"),
        &event,
    );
    assert_eq!(code, 201, "{body}");
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}});
    let (code, body) = api.post(
        &format!("/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers"),
        &hpa,
    );
    assert_eq!(code, 201, "{body}");
    api
}

#[test]
fn built_in_objects_lists_discovery_and_errors_answer_in_protobuf() {
    let cluster = Cluster::start();
    let api = setup(&cluster);
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.wire.example.com"},
        "spec": {"group": "wire.example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"size": {"type": "integer", "minimum": 1, "default": 2},
                                   "tags": {"type": "array", "items": {"type": "string"}},
                                   "any": {"x-kubernetes-preserve-unknown-fields": true}}}}}}}]}});
    let (code, body) = api.post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    );
    assert_eq!(code, 201, "{body}");

    let paths = [
        format!("/api/v1/namespaces/{NS}"),
        format!("/api/v1/namespaces/{NS}/configmaps/plain"),
        format!("/api/v1/namespaces/{NS}/secrets/s"),
        format!("/apis/apps/v1/namespaces/{NS}/deployments/web"),
        format!("/apis/apps/v1/namespaces/{NS}/deployments/web/scale"),
        format!("/api/v1/namespaces/{NS}/services/web"),
        format!("/api/v1/namespaces/{NS}/serviceaccounts/bot"),
        format!("/apis/batch/v1/namespaces/{NS}/jobs/once"),
        format!("/apis/batch/v1/namespaces/{NS}/cronjobs/often"),
        format!("/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/budget"),
        format!("/apis/networking.k8s.io/v1/namespaces/{NS}/ingresses/door"),
        format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/lock"),
        format!("/apis/events.k8s.io/v1/namespaces/{NS}/events/e1"),
        format!("/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers/web"),
        format!("/apis/autoscaling/v1/namespaces/{NS}/horizontalpodautoscalers/web"),
        "/apis/scheduling.k8s.io/v1/priorityclasses/high".to_owned(),
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:controller:job-controller"
            .to_owned(),
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:basic-user".to_owned(),
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.wire.example.com"
            .to_owned(),
        "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps".to_owned(),
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/exempt".to_owned(),
        // Lists, from the watch cache and from etcd.
        format!("/api/v1/namespaces/{NS}/configmaps"),
        "/api/v1/namespaces/kube-system/configmaps?resourceVersion=0".to_owned(),
        "/apis/rbac.authorization.k8s.io/v1/clusterroles?limit=5".to_owned(),
        // Discovery.
        "/api".to_owned(),
        "/api/v1".to_owned(),
        "/apis/apps/v1".to_owned(),
    ];
    let mut kinds = Vec::new();
    for path in &paths {
        let json = json_get(&api, path);
        let raw = send(&api, "GET", path, TYPED, None);
        assert_eq!(raw.code, 200, "{path}");
        let decoded = protobuf(&raw, path);
        assert_same(&json, &decoded, path);
        kinds.push(decoded["kind"].as_str().unwrap_or_default().to_owned());
    }
    assert!(
        kinds.contains(&"APIResourceList".to_owned())
            && kinds.contains(&"ConfigMapList".to_owned())
    );

    // Errors are Statuses in protobuf.
    let missing = send(
        &api,
        "GET",
        &format!("/api/v1/namespaces/{NS}/configmaps/none"),
        TYPED,
        None,
    );
    assert_eq!(missing.code, 404);
    let status = protobuf(&missing, "a 404");
    assert_eq!(
        (
            status["kind"].as_str(),
            status["reason"].as_str(),
            status["code"].as_i64()
        ),
        (Some("Status"), Some("NotFound"), Some(404))
    );
    assert_eq!(status["message"], "configmaps \"none\" not found");

    // Metadata only, as the garbage collector's informers ask.
    let metadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let raw = send(
        &api,
        "GET",
        &format!("/api/v1/namespaces/{NS}/secrets"),
        metadata,
        None,
    );
    let list = protobuf(&raw, "metadata list");
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["s"]);
    assert!(list["items"][0].get("data").is_none());
    let one = send(
        &api,
        "GET",
        &format!("/api/v1/namespaces/{NS}/secrets/s"),
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        None,
    );
    let one: Value = serde_json::from_slice(&one.body).expect("JSON");
    assert_eq!(
        (one["kind"].as_str(), one["metadata"]["name"].as_str()),
        (Some("PartialObjectMetadata"), Some("s"))
    );
    assert!(one.get("data").is_none(), "{one}");

    // Custom resources: JSON when JSON is accepted too, 406 when it is not.
    let gadgets = format!("/apis/wire.example.com/v1/namespaces/{NS}/gadgets");
    let mut created = (0, Value::Null);
    for _ in 0..50 {
        created = api.post(
            &gadgets,
            &json!({"apiVersion": "wire.example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g"}, "spec": {"tags": ["x"]}}),
        );
        if created.0 == 201 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(created.0, 201, "{}", created.1);
    let raw = send(&api, "GET", &format!("{gadgets}/g"), TYPED, None);
    assert_eq!(
        (raw.code, raw.content_type.as_str()),
        (200, "application/json")
    );
    let gadget: Value = serde_json::from_slice(&raw.body).expect("JSON");
    assert_eq!(gadget["spec"]["size"], 2);
    let refused = send(&api, "GET", &format!("{gadgets}/g"), PROTOBUF, None);
    assert_eq!(
        refused.code,
        406,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    // A client that prefers JSON gets JSON, as before.
    let raw = send(
        &api,
        "GET",
        &format!("/api/v1/namespaces/{NS}/configmaps/plain"),
        "application/json, application/vnd.kubernetes.protobuf",
        None,
    );
    assert_eq!(raw.content_type, "application/json");
}

#[test]
fn writes_answer_in_protobuf_and_watches_stream_frames() {
    let cluster = Cluster::start();
    let api = Api::new(&cluster, 4);
    api.create_namespace(NS);
    let collection = format!("/api/v1/namespaces/{NS}/configmaps");
    let start = json_get(&api, &collection)["metadata"]["resourceVersion"]
        .as_str()
        .expect("a list version")
        .to_owned();

    // A protobuf watch and a JSON one from the same version, open while we
    // write, of the one object written (the namespace's kube-root-ca.crt may
    // arrive after the list's version).
    let watch = |accept: &'static str| {
        let api = api.clone();
        let path = format!(
            "{collection}?watch=true&resourceVersion={start}&timeoutSeconds=4&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dw"
        );
        std::thread::spawn(move || send(&api, "GET", &path, accept, None))
    };
    let (pb_watch, json_watch) = (watch(TYPED), watch("application/json"));
    std::thread::sleep(Duration::from_millis(500));

    // Create, with a protobuf body as kubectl sends it: the answer is protobuf.
    let body = proto::k8s::encode(&json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "w", "labels": {"tier": "one"}}, "data": {"k": "1"}}))
    .expect("an encoded body");
    let created = send(&api, "POST", &collection, TYPED, Some((PROTOBUF, body)));
    assert_eq!(created.code, 201);
    let created = protobuf(&created, "create");
    assert_same(
        &json_get(&api, &format!("{collection}/w")),
        &created,
        "the created object",
    );

    // Update, patch and delete answer in protobuf too.
    let mut changed = created.clone();
    changed["data"]["k"] = json!("2");
    let updated = send(
        &api,
        "PUT",
        &format!("{collection}/w"),
        TYPED,
        Some(("application/json", changed.to_string().into_bytes())),
    );
    assert_eq!(updated.code, 200);
    assert_eq!(protobuf(&updated, "update")["data"]["k"], "2");
    let patched = send(
        &api,
        "PATCH",
        &format!("{collection}/w"),
        TYPED,
        Some((
            "application/merge-patch+json",
            br#"{"data":{"k":"3"}}"#.to_vec(),
        )),
    );
    assert_eq!(patched.code, 200);
    let patched = protobuf(&patched, "patch");
    assert_eq!(patched["data"]["k"], "3");
    assert_same(
        &json_get(&api, &format!("{collection}/w")),
        &patched,
        "the patched object",
    );
    let conflict = send(
        &api,
        "POST",
        &collection,
        TYPED,
        Some((
            "application/json",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}})
                .to_string()
                .into_bytes(),
        )),
    );
    assert_eq!(conflict.code, 409);
    assert_eq!(protobuf(&conflict, "conflict")["reason"], "AlreadyExists");
    let deleted = send(&api, "DELETE", &format!("{collection}/w"), TYPED, None);
    assert_eq!(deleted.code, 200);
    let deleted = protobuf(&deleted, "delete");
    assert_eq!(
        (
            deleted["kind"].as_str(),
            deleted["status"].as_str(),
            deleted["details"]["name"].as_str()
        ),
        (Some("Status"), Some("Success"), Some("w")),
        "{deleted}"
    );

    let pb = pb_watch.join().expect("the protobuf watch");
    let json = json_watch.join().expect("the JSON watch");
    assert_eq!(pb.code, 200);
    assert_eq!(
        pb.content_type,
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let pb_events = frames(&pb.body);
    let json_events: Vec<(String, Value)> = String::from_utf8_lossy(&json.body)
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).expect("a JSON event");
            (
                event["type"].as_str().unwrap_or_default().to_owned(),
                event["object"].clone(),
            )
        })
        .collect();
    let without_bookmarks = |events: &[(String, Value)]| -> Vec<(String, Value)> {
        events
            .iter()
            .filter(|(t, _)| t != "BOOKMARK")
            .cloned()
            .collect()
    };
    let (pb_events, json_events) = (
        without_bookmarks(&pb_events),
        without_bookmarks(&json_events),
    );
    let types: Vec<&str> = pb_events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]);
    assert_eq!(pb_events.len(), json_events.len());
    for ((pb_type, pb_object), (json_type, json_object)) in pb_events.iter().zip(&json_events) {
        assert_eq!(pb_type, json_type);
        assert_same(json_object, pb_object, &format!("a {pb_type} event"));
    }
}

#[test]
fn kubectls_typed_calls_read_protobuf_answers() {
    let cluster = Cluster::start();
    // Go's own decoder: kubectl's typed client asks for protobuf first.
    let run = cluster.kubectl(&["create", "namespace", "typed", "-v=8"]);
    assert!(
        run.ok().contains("namespace/typed created"),
        "{}",
        run.stdout
    );
    let out = &run.stderr;
    assert!(
        out.contains("Content-Type: application/vnd.kubernetes.protobuf\n")
            || out.contains("Content-Type: application/vnd.kubernetes.protobuf\r"),
        "the answer was not protobuf:\n{out}"
    );
    let again = cluster.kubectl(&["create", "namespace", "typed"]);
    assert!(
        again
            .err()
            .contains("Error from server (AlreadyExists): namespaces \"typed\" already exists"),
        "{}",
        again.stderr
    );
    for args in [
        &[
            "create",
            "configmap",
            "c",
            "-n",
            "typed",
            "--from-literal=a=b",
        ][..],
        &["create", "deployment", "d", "-n", "typed", "--image=nginx"],
        &["scale", "deployment", "d", "-n", "typed", "--replicas=3"],
        &["create", "token", "default", "-n", "typed"],
        &["auth", "can-i", "create", "pods"],
    ] {
        cluster.kubectl(args).ok();
    }
    let replicas = cluster.kubectl(&[
        "get",
        "deployment",
        "d",
        "-n",
        "typed",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(replicas.ok(), "3");
}

/// kube negotiates the answer's media type before a handler does anything:
/// a client that accepts protobuf only is refused a custom resource (which
/// has no protobuf form) with 406 before the write, for every verb.
#[test]
fn a_custom_resource_write_for_a_client_of_protobuf_only_is_refused_before_it_is_written() {
    let cluster = Cluster::start();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.wire.example.com"},
        "spec": {"group": "wire.example.com", "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"size": {"type": "integer"}}}}}}}]}});
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &crd.to_string())
        .ok();
    let gizmos = "/apis/wire.example.com/v1/namespaces/default/gizmos";
    let json_accept = "Accept: application/json";
    assert!(
        eventually(Duration::from_secs(20), || cluster
            .curl(As::Admin, "GET", gizmos, &[json_accept], None)
            .code
            == 200),
        "the gizmos are never served"
    );
    let protobuf_only = ["Accept: application/vnd.kubernetes.protobuf"];
    let with_body =
        |content_type: &'static str| ["Accept: application/vnd.kubernetes.protobuf", content_type];
    let refused = |answer: &Answer, what: &str| {
        assert_eq!(answer.code, 406, "{what}: {}", answer.text);
        assert_eq!(answer.json["kind"], "Status", "{what}: {}", answer.text);
        assert_eq!(answer.json["reason"], "NotAcceptable", "{what}");
        assert_eq!(
            answer.json["message"],
            "only the following media types are accepted: application/json, application/yaml",
            "{what}"
        );
    };
    let gizmo = |size: i64| {
        json!({"apiVersion": "wire.example.com/v1", "kind": "Gizmo",
            "metadata": {"name": "g", "namespace": "default"}, "spec": {"size": size}})
        .to_string()
    };
    let one = format!("{gizmos}/g");
    let get = || cluster.curl(As::Admin, "GET", &one, &[json_accept], None);

    // A create is refused and nothing is stored.
    let created = cluster.curl(
        As::Admin,
        "POST",
        gizmos,
        &with_body("Content-Type: application/json"),
        Some(gizmo(1).as_bytes()),
    );
    refused(&created, "create");
    let stored = get();
    assert_eq!(
        stored.code, 404,
        "the refused create was stored: {}",
        stored.text
    );

    // An update, a patch and a delete leave the stored object as it was.
    let created = cluster.curl(
        As::Admin,
        "POST",
        gizmos,
        &[json_accept, "Content-Type: application/json"],
        Some(gizmo(1).as_bytes()),
    );
    assert_eq!(created.code, 201, "{}", created.text);
    let before = get().json;
    let mut changed: Value = serde_json::from_str(&gizmo(2)).expect("JSON");
    changed["metadata"]["resourceVersion"] = before["metadata"]["resourceVersion"].clone();
    let updated = cluster.curl(
        As::Admin,
        "PUT",
        &one,
        &with_body("Content-Type: application/json"),
        Some(changed.to_string().as_bytes()),
    );
    refused(&updated, "update");
    let patched = cluster.curl(
        As::Admin,
        "PATCH",
        &one,
        &with_body("Content-Type: application/merge-patch+json"),
        Some(br#"{"spec":{"size":3}}"#),
    );
    refused(&patched, "patch");
    let deleted = cluster.curl(As::Admin, "DELETE", &one, &protobuf_only, None);
    refused(&deleted, "delete");
    let after = get();
    assert_eq!(after.code, 200, "{}", after.text);
    assert_eq!(after.json["spec"]["size"], 1, "{}", after.text);
    assert_eq!(
        after.json["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "the refused writes changed the object"
    );
    // The same writes with JSON accepted too go through.
    let updated = cluster.curl(
        As::Admin,
        "PUT",
        &one,
        &[
            "Accept: application/vnd.kubernetes.protobuf, application/json",
            "Content-Type: application/json",
        ],
        Some(changed.to_string().as_bytes()),
    );
    assert_eq!(updated.code, 200, "{}", updated.text);
    assert_eq!(get().json["spec"]["size"], 2);
}
