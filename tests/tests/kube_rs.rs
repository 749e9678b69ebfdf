//! kube-rs against a running cluster, as a controller written in Rust uses
//! it: `kube::Api<Deployment>` create/get/list, server-side apply with field
//! managers (and a conflict), and `kube::runtime::watcher` (list-then-watch
//! and streaming lists) seeing an object applied, changed and deleted.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Config, ResourceExt};
use serde_json::{Value, json};
use tests::Cluster;

fn deployment(name: &str, replicas: i32, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}
            }
        }
    })
}

async fn client(cluster: &Cluster) -> Client {
    let kubeconfig = Kubeconfig::read_from(cluster.kubeconfig()).expect("kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config from kubeconfig");
    Client::try_from(config).expect("client")
}

/// The Status of an API error.
fn status(err: kube::Error) -> kube::core::Status {
    match err {
        kube::Error::Api(status) => *status,
        other => panic!("not an API error: {other:?}"),
    }
}

/// The managers recorded in an object's managedFields, with their operations.
fn managers(d: &Deployment) -> Vec<(String, String)> {
    d.managed_fields()
        .iter()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// The next event of a watcher, or a panic after `within`.
async fn next_event<S>(events: &mut S, within: Duration) -> Event<Deployment>
where
    S: futures::Stream<Item = Result<Event<Deployment>, watcher::Error>> + Unpin,
{
    match tokio::time::timeout(within, events.next()).await {
        Ok(Some(Ok(event))) => event,
        Ok(Some(Err(e))) => panic!("watcher error: {e}"),
        Ok(None) => panic!("watcher ended"),
        Err(_) => panic!("no watch event within {within:?}"),
    }
}

/// Events until one is an `Apply` or `Delete` of `name` matching `wanted`.
async fn wait_for<S>(
    events: &mut S,
    wanted: impl Fn(&Event<Deployment>) -> bool,
) -> Event<Deployment>
where
    S: futures::Stream<Item = Result<Event<Deployment>, watcher::Error>> + Unpin,
{
    loop {
        let event = next_event(events, Duration::from_secs(20)).await;
        if wanted(&event) {
            return event;
        }
    }
}

fn is_apply_of(name: &str) -> impl Fn(&Event<Deployment>) -> bool + '_ {
    move |e| matches!(e, Event::Apply(d) if d.name_any() == name)
}

#[test]
fn kube_rs_api_server_side_apply_and_watcher() {
    let cluster = Cluster::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = client(&cluster).await;
        let api: Api<Deployment> = Api::namespaced(client.clone(), "default");

        // create, get, list.
        let sent: Deployment = serde_json::from_value(deployment("typed", 2, json!({"team": "kube-rs"}))).expect("a Deployment");
        let created = api.create(&PostParams::default(), &sent).await.expect("create");
        assert!(created.uid().is_some_and(|u| u.len() == 36));
        assert_eq!(created.metadata.generation, Some(1));
        let spec = created.spec.as_ref().expect("spec");
        assert_eq!(spec.replicas, Some(2));
        assert_eq!(spec.revision_history_limit, Some(10), "kube's default");
        assert_eq!(spec.strategy.as_ref().and_then(|s| s.type_.as_deref()), Some("RollingUpdate"));
        let got = api.get("typed").await.expect("get");
        assert_eq!(got.resource_version(), created.resource_version());
        assert_eq!(got.spec, created.spec);
        let again = api.create(&PostParams::default(), &sent).await.expect_err("a second create");
        let again = status(again);
        assert_eq!((again.code, again.reason.as_str()), (409, "AlreadyExists"));
        assert_eq!(again.message, "deployments.apps \"typed\" already exists");
        api.create(
            &PostParams::default(),
            &serde_json::from_value(deployment("other", 1, json!({"team": "other"}))).expect("a Deployment"),
        )
        .await
        .expect("create");
        let listed = api.list(&ListParams::default().labels("team=kube-rs")).await.expect("list");
        assert_eq!(listed.items.iter().map(|d| d.name_any()).collect::<Vec<_>>(), ["typed"]);
        assert!(listed.metadata.resource_version.is_some_and(|rv| !rv.is_empty()));
        let all = api.list(&ListParams::default()).await.expect("list");
        assert_eq!(all.items.len(), 2);
        let missing = status(api.get("missing").await.expect_err("get of a missing object"));
        assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));

        // Server-side apply: creates, then another manager conflicts, then forces.
        let alice = PatchParams::apply("alice");
        let applied =
            api.patch("applied", &alice, &Patch::Apply(deployment("applied", 2, json!({"team": "kube-rs"})))).await.expect("apply");
        assert_eq!(applied.spec.as_ref().and_then(|s| s.replicas), Some(2));
        assert_eq!(managers(&applied), [("alice".to_string(), "Apply".to_string())]);
        let replicas_only =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "applied"}, "spec": {"replicas": 5}});
        let conflict = api.patch("applied", &PatchParams::apply("bob"), &Patch::Apply(&replicas_only)).await.expect_err("a conflict");
        let conflict = status(conflict);
        assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
        assert_eq!(conflict.message, "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas");
        let causes = conflict.details.map(|d| d.causes).unwrap_or_default();
        assert_eq!(causes.len(), 1);
        assert_eq!((causes[0].reason.as_str(), causes[0].field.as_str()), ("FieldManagerConflict", ".spec.replicas"));
        assert_eq!(api.get("applied").await.expect("get").spec.and_then(|s| s.replicas), Some(2));
        let forced = api.patch("applied", &PatchParams::apply("bob").force(), &Patch::Apply(&replicas_only)).await.expect("forced apply");
        assert_eq!(forced.spec.as_ref().and_then(|s| s.replicas), Some(5));
        let mut owners = managers(&forced);
        owners.sort();
        assert_eq!(owners, [("alice".to_string(), "Apply".to_string()), ("bob".to_string(), "Apply".to_string())]);
        // A dry-run apply answers with the result and changes nothing.
        let dry = PatchParams::apply("bob").dry_run();
        let replicas_seven =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "applied"}, "spec": {"replicas": 7}});
        let shown = api.patch("applied", &dry, &Patch::Apply(&replicas_seven)).await.expect("dry-run apply");
        assert_eq!(shown.spec.as_ref().and_then(|s| s.replicas), Some(7));
        let stored = api.get("applied").await.expect("get");
        assert_eq!(stored.spec.as_ref().and_then(|s| s.replicas), Some(5));
        assert_eq!(stored.resource_version(), forced.resource_version());
        // A merge patch (an Update manager) next to the appliers.
        let merged = api
            .patch("applied", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"patched": "yes"}}})))
            .await
            .expect("merge patch");
        assert_eq!(merged.labels().get("patched").map(String::as_str), Some("yes"));
        assert_eq!(merged.labels().get("team").map(String::as_str), Some("kube-rs"));

        // The watcher: list then watch (Init, InitApply, InitDone), then live events.
        let watched = api.clone();
        let mut events = watcher::watcher(watched, watcher::Config::default().labels("team=kube-rs")).boxed();
        let mut initial = Vec::new();
        loop {
            match next_event(&mut events, Duration::from_secs(20)).await {
                Event::Init => {}
                Event::InitApply(d) => initial.push(d.name_any()),
                Event::InitDone => break,
                other => panic!("unexpected event before InitDone: {other:?}"),
            }
        }
        initial.sort();
        assert_eq!(initial, ["applied", "typed"]);
        let watchme = PatchParams::apply("watcher-test");
        api.patch("live", &watchme, &Patch::Apply(deployment("live", 1, json!({"team": "kube-rs"})))).await.expect("apply");
        let Event::Apply(seen) = wait_for(&mut events, is_apply_of("live")).await else { unreachable!() };
        assert_eq!(seen.spec.as_ref().and_then(|s| s.replicas), Some(1));
        api.patch("live", &watchme, &Patch::Apply(deployment("live", 3, json!({"team": "kube-rs"})))).await.expect("apply");
        let Event::Apply(changed) = wait_for(&mut events, is_apply_of("live")).await else { unreachable!() };
        assert_eq!(changed.spec.as_ref().and_then(|s| s.replicas), Some(3));
        let rv = |d: &Deployment| d.resource_version().and_then(|r| r.parse::<i64>().ok()).expect("a numeric resourceVersion");
        assert!(rv(&changed) > rv(&seen));
        api.delete("live", &DeleteParams::default()).await.expect("delete");
        let deleted = wait_for(&mut events, |e| matches!(e, Event::Delete(d) if d.name_any() == "live")).await;
        let Event::Delete(deleted) = deleted else { unreachable!() };
        assert_eq!(deleted.uid(), changed.uid());
        // A label change out of the selector reads as a delete.
        api.patch("typed", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"team": "elsewhere"}}})))
            .await
            .expect("relabel");
        let left = wait_for(&mut events, |e| matches!(e, Event::Delete(d) if d.name_any() == "typed")).await;
        let Event::Delete(left) = left else { unreachable!() };
        assert_eq!(left.labels().get("team").map(String::as_str), Some("kube-rs"), "the last state that matched");
        drop(events);

        // Streaming lists (sendInitialEvents and the initial-events-end bookmark).
        let mut streaming = watcher::watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
        let mut initial = Vec::new();
        loop {
            match next_event(&mut streaming, Duration::from_secs(20)).await {
                Event::Init => {}
                Event::InitApply(d) => initial.push(d.name_any()),
                Event::InitDone => break,
                other => panic!("unexpected event before InitDone: {other:?}"),
            }
        }
        initial.sort();
        assert_eq!(initial, ["applied", "other", "typed"]);
        api.patch("streamed", &watchme, &Patch::Apply(deployment("streamed", 1, json!({})))).await.expect("apply");
        wait_for(&mut streaming, is_apply_of("streamed")).await;
        api.delete("streamed", &DeleteParams::default()).await.expect("delete");
        wait_for(&mut streaming, |e| matches!(e, Event::Delete(d) if d.name_any() == "streamed")).await;

        // The whole store as a controller would build it.
        let names: Vec<String> = watcher::watcher(api.clone(), watcher::Config::default())
            .try_take_while(|e| futures::future::ready(Ok(!matches!(e, Event::InitDone))))
            .try_filter_map(|e| futures::future::ready(Ok(if let Event::InitApply(d) = e { Some(d.name_any()) } else { None })))
            .try_collect()
            .await
            .expect("initial list");
        assert_eq!(names.len(), 3, "{names:?}");
    });
}
