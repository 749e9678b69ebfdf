//! Every server's Prometheus metrics, under kube-apiserver's names, read
//! over HTTPS behind RBAC: the core and extension servers at
//! `/metrics/<server>` through the front door, the front door at `/metrics`
//! with one latency histogram per hop (front door, delegation, proxy). The
//! plain ports serve health only; made-up resource names share one label.

use std::time::Duration;

use tests::{As, Cluster, eventually, sample};

const WIDGETS: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n\
    spec: {group: example.com, scope: Namespaced, names: {plural: widgets, kind: Widget},\n\
    versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]}\n";

#[test]
fn every_server_exposes_kubes_metrics() {
    let cluster = Cluster::start();
    let (core, extension) = ("core-server", "extension-server");
    let scrape = |server: &str| {
        cluster
            .kubectl(&["get", "--raw", &format!("/metrics/{server}")])
            .ok()
            .to_string()
    };

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

#[test]
fn metrics_are_read_behind_rbac_and_made_up_names_share_one_series() {
    let cluster = Cluster::start();
    let ports = cluster.ports();
    // The plain ports serve health, not metrics.
    for port in ["core-metrics-0", "extension-metrics-0"] {
        let port = ports[port].as_u64().expect("a plain port");
        let code = |path: &str| {
            let out = std::process::Command::new("curl")
                .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
                .arg(format!("http://127.0.0.1:{port}{path}"))
                .output()
                .expect("curl");
            String::from_utf8_lossy(&out.stdout).to_string()
        };
        assert_eq!(code("/metrics"), "404", "{port}");
        assert_eq!(code("/readyz"), "200", "{port}");
    }
    // A user without a role for them is refused every server's metrics.
    let token = cluster.service_account_token("viewer");
    cluster
        .kubectl(&[
            "create",
            "clusterrolebinding",
            "viewer",
            "--clusterrole=view",
            "--serviceaccount=default:viewer",
        ])
        .ok();
    for path in [
        "/metrics",
        "/metrics/core-server",
        "/metrics/extension-server",
    ] {
        let refused = cluster.curl(As::Token(&token), "GET", path, &[], None);
        assert_eq!(refused.code, 403, "{path}: {}", refused.text);
        let read = cluster.curl(As::Admin, "GET", path, &[], None);
        assert_eq!(read.code, 200, "{path}: {}", read.text);
        assert!(
            read.text.contains("apiserver_current_inflight_requests"),
            "{path}: {}",
            &read.text[..read.text.len().min(2000)]
        );
    }
    // 300 made-up resources, subresources and groups, read by a user
    // (refused before they are counted) and by the admin (answered 404).
    let base = format!("https://127.0.0.1:{}", cluster.port);
    for who in [As::Token(&token), As::Admin] {
        let mut curl = cluster.curl_command(who);
        curl.args(["-o", "/dev/null"]);
        for i in 0..100 {
            curl.arg(format!("{base}/api/v1/namespaces/default/madeup{i}"));
            curl.arg(format!(
                "{base}/api/v1/namespaces/default/configmaps/x/madeup{i}"
            ));
            curl.arg(format!("{base}/apis/madeup{i}.example.com/v1/things"));
        }
        assert!(curl.output().expect("curl").status.success());
    }
    for path in [
        "/metrics",
        "/metrics/core-server",
        "/metrics/extension-server",
    ] {
        let text = cluster.curl(As::Admin, "GET", path, &[], None).text;
        assert!(!text.contains("madeup"), "{path} labels a made-up name");
        assert!(text.len() < 1 << 20, "{path}: {} bytes", text.len());
    }
    let front = cluster.curl(As::Admin, "GET", "/metrics", &[], None).text;
    let other = front
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains("resource=\"other\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();
    assert!(other >= 300.0, "{other} requests counted as other\n{front}");
}
