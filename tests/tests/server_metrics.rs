//! Every server's Prometheus metrics, under kube-apiserver's names: the
//! core and extension servers on their own metrics ports (from
//! `ports.json`), the front door at `/metrics` with one latency histogram
//! per hop (front door, delegation, proxy).

use std::time::Duration;

use tests::{Cluster, eventually, sample, scrape};

const WIDGETS: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n\
    spec: {group: example.com, scope: Namespaced, names: {plural: widgets, kind: Widget},\n\
    versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]}\n";

#[test]
fn every_server_exposes_kubes_metrics() {
    let cluster = Cluster::start();
    let ports = cluster.ports();
    let core = ports["core-metrics-0"]
        .as_u64()
        .expect("core-server's metrics port");
    let extension = ports["extension-metrics-0"]
        .as_u64()
        .expect("extension-server's metrics port");

    cluster.kubectl(&["create", "namespace", "counted"]).ok();
    // A watch that sees the creates below.
    let mut watch = cluster.kubectl_spawn(&["get", "configmaps", "-n", "counted", "-w"]);
    std::thread::sleep(Duration::from_secs(1));
    for name in ["a", "b", "c"] {
        cluster
            .kubectl(&["create", "configmap", name, "-n", "counted"])
            .ok();
    }
    cluster.kubectl_stdin(&["apply", "-f", "-"], WIDGETS).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
        ])
        .ok();
    for name in ["w1", "w2"] {
        cluster
            .kubectl_stdin(
                &["apply", "-f", "-"],
                &format!("apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: {name}, namespace: counted}}\n"),
            )
            .ok();
    }

    // core-server: the requests it served, its etcd requests, the objects
    // it caches, the events it sent to watchers, and the process.
    let text = scrape(core);
    let posts = sample(
        &text,
        "apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"POST\",version=\"v1\"}",
    );
    assert!(
        posts.is_some_and(|n| n >= 3.0),
        "{posts:?} configmap creates\n{text}"
    );
    let creates = sample(
        &text,
        "etcd_request_duration_seconds_count{operation=\"create\",type=\"configmaps\"}",
    );
    assert!(
        creates.is_some_and(|n| n >= 3.0),
        "{creates:?} etcd creates\n{text}"
    );
    let stored = |text: &str, resource: &str| {
        sample(
            text,
            &format!("apiserver_storage_objects{{resource=\"{resource}\"}}"),
        )
    };
    let counted = || {
        cluster
            .kubectl(&["get", "configmaps", "-A", "-o", "name"])
            .ok()
            .lines()
            .count() as f64
    };
    assert!(
        eventually(Duration::from_secs(10), || stored(
            &scrape(core),
            "configmaps"
        ) == Some(counted())),
        "apiserver_storage_objects for configmaps is not the number of configmaps"
    );
    assert!(
        eventually(Duration::from_secs(10), || {
            sample(
                &scrape(core),
                "apiserver_watch_events_total{group=\"\",resource=\"configmaps\",version=\"v1\"}",
            )
            .is_some_and(|n| n >= 3.0)
        }),
        "the watch's events were not counted"
    );
    watch.kill().ok();
    watch.wait().ok();
    assert!(sample(&text, "process_resident_memory_bytes").is_some_and(|n| n > 1e6));
    assert!(sample(&text, "process_cpu_seconds_total").is_some_and(|n| n > 0.0));
    assert!(sample(&text, "process_start_time_seconds").is_some_and(|n| n > 1.6e9));

    // extension-server: custom resources, as kube names them.
    let text = scrape(extension);
    assert_eq!(stored(&text, "widgets.example.com"), Some(2.0), "{text}");
    let creates = sample(
        &text,
        "etcd_request_duration_seconds_count{operation=\"create\",type=\"widgets.example.com\"}",
    );
    assert_eq!(creates, Some(2.0), "{text}");

    // The front door: one histogram per hop.
    assert!(
        eventually(Duration::from_secs(30), || {
            cluster
                .kubectl(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"])
                .code
                == 0
        }),
        "the aggregated metrics API never answered"
    );
    let text = cluster
        .kubectl(&["get", "--raw", "/metrics"])
        .ok()
        .to_string();
    for hop in ["front-door", "delegation", "proxy"] {
        let count = sample(
            &text,
            &format!("kubechain_hop_duration_seconds_count{{hop=\"{hop}\"}}"),
        );
        assert!(count.is_some_and(|n| n >= 1.0), "{hop}: {count:?}\n{text}");
    }
    // Not the other way round: core-server saw no front door.
    assert!(!scrape(core).contains("hop=\"front-door\""));
}
