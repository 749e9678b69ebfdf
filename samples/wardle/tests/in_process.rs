//! wardle served from the test's own process (no binary): started with
//! `kubechain_apiserver::spawn`, registered with a kubechain-envtest
//! cluster, and used through the front door with kube-rs clients typed by
//! wardle's own Rust types. How an author tests their server.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Parser as _;
use kube::api::{Api, ObjectMeta, PostParams};
use kubechain_envtest::{TestCluster, free_port};
use wardle_server::types::{GROUP, v1alpha1, v1beta1};

#[tokio::test(flavor = "multi_thread")]
async fn wardle_in_the_tests_process_serves_typed_clients_and_bans_flunders() {
    let cluster = TestCluster::start().expect("a cluster");
    let identity = cluster
        .service_account_kubeconfig("wardle", "apiserver")
        .await
        .unwrap();
    let certs = cluster.dir().join("wardle-certs");
    let address: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    // No etcd flags: Flunders and Fischers are kept in the process's memory.
    let options = wardle_server::Options::parse_from([
        "wardle-server".to_string(),
        format!("--listen={address}"),
        format!("--kubeconfig={}", identity.display()),
        format!("--cert-dir={}", certs.display()),
        // The name the front door calls it by: its Service's.
        "--tls-san=wardle-server.wardle.svc".to_string(),
    ]);
    let server = kubechain_apiserver::spawn(move || wardle_server::run(options));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !certs.join("ca.crt").exists() {
        assert!(!server.is_finished(), "wardle stopped: {:?}", server.join());
        assert!(
            Instant::now() < deadline,
            "no serving certificate after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster
        .register(
            GROUP,
            &["v1alpha1", "v1beta1"],
            &[address],
            "wardle/wardle-server",
            &certs.join("ca.crt"),
            "serviceaccount:wardle:apiserver",
        )
        .unwrap();
    for version in ["v1alpha1", "v1beta1"] {
        cluster.wait_available(GROUP, version).await.unwrap();
    }

    let admin = cluster.admin().await.unwrap();
    let create = PostParams::default();
    let fischer = v1alpha1::Fischer {
        metadata: ObjectMeta {
            name: Some("fischer".into()),
            ..Default::default()
        },
        disallowed_flunders: vec!["banned".into()],
    };
    Api::<v1alpha1::Fischer>::all(admin.clone())
        .create(&create, &fischer)
        .await
        .unwrap();
    let flunders = Api::<v1alpha1::Flunder>::namespaced(admin.clone(), "default");
    let named = |name: &str| v1alpha1::Flunder {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: v1alpha1::FlunderSpec {
            reference: Some("fischer".into()),
            reference_type: Some("Fischer".into()),
        },
        ..Default::default()
    };
    flunders.create(&create, &named("allowed")).await.unwrap();
    match flunders.create(&create, &named("banned")).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert!(status.message.contains("may not be used"), "{status:?}");
        }
        other => panic!("a banned Flunder was not refused: {other:?}"),
    }
    // The same object, read in the other version.
    let beta = Api::<v1beta1::Flunder>::namespaced(admin, "default")
        .get("allowed")
        .await
        .unwrap();
    assert_eq!(beta.metadata.name.as_deref(), Some("allowed"));
    assert_eq!(beta.spec.fischer_reference, "fischer");
    assert!(!server.is_finished(), "wardle stopped while serving");
}
