//! wardle's own test, on a real cluster from kubechain-envtest and driven
//! with kube-rs through the front door: two replicas behind one
//! APIService, Flunders in both versions as a user with namespace RBAC
//! only, a watch resumed from a resourceVersion, BanFlunder, and one
//! replica killed under load without losing an acknowledged write.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, PostParams,
    WatchEvent, WatchParams,
};
use kubechain_envtest::{ServerProcess, TestCluster, free_port};
use serde_json::json;

const GROUP: &str = "wardle.example.com";
const NAMESPACE: &str = "team";

/// Flunders of `version` in the test's namespace, as `client`.
fn flunders(client: kube::Client, version: &str) -> Api<DynamicObject> {
    let kind = GroupVersionKind::gvk(GROUP, version, "Flunder");
    let resource = ApiResource::from_gvk_with_plural(&kind, "flunders");
    Api::namespaced_with(client, NAMESPACE, &resource)
}

/// A Flunder of `version` named `name` with `spec`.
fn flunder(version: &str, name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": format!("{GROUP}/{version}"), "kind": "Flunder",
        "metadata": {"name": name}, "spec": spec}),
    )
    .expect("a Flunder")
}

/// Runs a wardle replica on `port` storing in the cluster's etcd, as the
/// ServiceAccount of `identity`, serving the certificate kept in `certs`.
fn replica(
    cluster: &TestCluster,
    address: std::net::SocketAddr,
    identity: &Path,
    certs: &Path,
) -> ServerProcess {
    let mut args = vec![
        "--listen".to_string(),
        address.to_string(),
        "--kubeconfig".into(),
        identity.display().to_string(),
        "--cert-dir".into(),
        certs.display().to_string(),
        "--tls-san".into(),
        "wardle-server.wardle.svc".into(),
    ];
    args.extend(cluster.etcd_flags());
    let program = Path::new(env!("CARGO_BIN_EXE_wardle-server"));
    cluster
        .spawn(&format!("wardle-{}", address.ip()), program, &args)
        .expect("wardle-server runs")
}

/// Waits until `done` holds, for at most 30 s.
async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(Instant::now() < deadline, "waited 30 s for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_serve_flunders_and_a_killed_one_loses_no_acknowledged_write() {
    let started = Instant::now();
    let cluster = TestCluster::start().expect("a cluster");
    eprintln!("cluster ready in {:?}", started.elapsed());
    let admin = cluster.admin().await.unwrap();
    let identity = cluster
        .service_account_kubeconfig("wardle", "apiserver")
        .await
        .unwrap();
    // Two replicas with one serving certificate: the first makes it.
    let certs = cluster.dir().join("wardle-certs");
    // One port on two loopback addresses: an EndpointSlice has one port.
    let port = free_port();
    let addresses: Vec<std::net::SocketAddr> =
        vec![([127, 0, 0, 1], port).into(), ([127, 0, 0, 2], port).into()];
    let mut first = replica(&cluster, addresses[0], &identity, &certs);
    eventually("the serving certificate", async || {
        certs.join("tls.crt").exists()
    })
    .await;
    let _second = replica(&cluster, addresses[1], &identity, &certs);
    cluster
        .register(
            GROUP,
            &["v1alpha1", "v1beta1"],
            &addresses,
            "wardle/wardle-server",
            &certs.join("ca.crt"),
            "serviceaccount:wardle:apiserver",
        )
        .unwrap();
    for version in ["v1alpha1", "v1beta1"] {
        cluster.wait_available(GROUP, version).await.unwrap();
    }

    // Wendy may do anything with flunders in her namespace, nothing else.
    cluster
        .service_account_kubeconfig(NAMESPACE, "default")
        .await
        .unwrap();
    let role = Role {
        metadata: ObjectMeta {
            name: Some("flunders".into()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![GROUP.into()]),
            resources: Some(vec!["flunders".into()]),
            verbs: vec!["*".into()],
            ..Default::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some("wendy".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "flunders".into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: "wendy".into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            ..Default::default()
        }]),
    };
    let create = PostParams::default();
    Api::<Role>::namespaced(admin.clone(), NAMESPACE)
        .create(&create, &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), NAMESPACE)
        .create(&create, &binding)
        .await
        .unwrap();
    let wendy = cluster.impersonating("wendy", &[]).await.unwrap();
    let alpha = flunders(wendy.clone(), "v1alpha1");
    let beta = flunders(wendy.clone(), "v1beta1");

    // Written in one version, read in the other.
    let listed = beta.list(&ListParams::default()).await.unwrap();
    let from = listed.metadata.resource_version.clone().unwrap();
    alpha
        .create(
            &create,
            &flunder("v1alpha1", "first", json!({"reference": "other"})),
        )
        .await
        .unwrap();
    let read = beta.get("first").await.unwrap();
    assert_eq!(
        read.data["spec"],
        json!({"flunderReference": "other", "referenceType": "Flunder"})
    );
    beta.create(
        &create,
        &flunder(
            "v1beta1",
            "second",
            json!({"fischerReference": "f", "referenceType": "Fischer"}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        alpha.get("second").await.unwrap().data["spec"],
        json!({"reference": "f", "referenceType": "Fischer"})
    );

    // A watch from the recorded resourceVersion sees both, in order; one
    // resumed from the first's resourceVersion sees only the second.
    let added = |from: String| {
        let beta = beta.clone();
        async move {
            let params = WatchParams::default().timeout(3);
            let events: Vec<WatchEvent<DynamicObject>> = beta
                .watch(&params, &from)
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            events
                .into_iter()
                .filter_map(|event| match event {
                    WatchEvent::Added(object) => Some(object),
                    _ => None,
                })
                .collect::<Vec<_>>()
        }
    };
    let seen = added(from).await;
    let names: Vec<_> = seen
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, ["first", "second"]);
    let resumed = added(seen[0].metadata.resource_version.clone().unwrap()).await;
    let names: Vec<_> = resumed
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, ["second"]);

    // BanFlunder: a Fischer the admin writes bans a name.
    let fischers: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(GROUP, "v1alpha1", "Fischer"),
            "fischers",
        ),
    );
    let fischer: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Fischer",
        "metadata": {"name": "strict"}, "disallowedFlunders": ["banned"]}))
    .unwrap();
    fischers.create(&create, &fischer).await.unwrap();
    let banned = beta
        .create(&create, &flunder("v1beta1", "banned", json!({})))
        .await;
    match banned {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403);
            assert!(
                status.message.contains("this name may not be used"),
                "{status:?}"
            );
        }
        other => panic!("BanFlunder let it through: {other:?}"),
    }

    // Writers through the front door; one replica is killed meanwhile.
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let refused = Arc::new(Mutex::new(Vec::new()));
    let until = Instant::now() + Duration::from_secs(6);
    let mut writers = Vec::new();
    for writer in 0..4 {
        let (beta, acknowledged, refused) = (beta.clone(), acknowledged.clone(), refused.clone());
        writers.push(tokio::spawn(async move {
            let mut i = 0;
            while Instant::now() < until {
                let name = format!("load-{writer}-{i}");
                i += 1;
                let object = flunder("v1beta1", &name, json!({}));
                match beta.create(&PostParams::default(), &object).await {
                    Ok(_) => {
                        acknowledged.lock().unwrap().insert((name, Instant::now()));
                    }
                    Err(error) => refused.lock().unwrap().push(error.to_string()),
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed_at = Instant::now();
    first.kill();
    futures::future::join_all(writers).await;
    let acknowledged = acknowledged.lock().unwrap().clone();
    let after_kill = acknowledged
        .iter()
        .filter(|(_, at)| *at > killed_at)
        .count();
    assert!(
        after_kill > 0,
        "no write was acknowledged after the kill; refusals: {:?}",
        refused.lock().unwrap()
    );
    let stored: BTreeSet<String> = beta
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    let lost: Vec<_> = acknowledged
        .iter()
        .filter(|(name, _)| !stored.contains(name))
        .collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    eprintln!(
        "{} creates acknowledged ({after_kill} after the kill), {} refused, none lost",
        acknowledged.len(),
        refused.lock().unwrap().len()
    );

    // The surviving replica still answers the group's watch.
    let stream = beta
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap();
    let events: Vec<_> = stream.collect().await;
    assert!(events.iter().all(|e| e.is_ok()), "{events:?}");
}
