//! One request's W3C trace through every process: a client's sampled
//! `traceparent` is followed, in the JSON logs (`--log-format json`), from
//! the front door to core-server and extension-server for a custom
//! resource, and to metrics-server through the proxy; each span names the
//! one before it as its parent.

use std::time::Duration;

use serde_json::Value;
use tests::{As, Cluster, eventually};

const WIDGETS: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n\
    spec: {group: example.com, scope: Namespaced, names: {plural: widgets, kind: Widget},\n\
    versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]}\n";

/// The span lines of trace `trace_id` in the JSON log of `process`.
fn spans(cluster: &Cluster, process: &str, trace_id: &str) -> Vec<Value> {
    std::fs::read_to_string(cluster.dir.join(format!("logs/{process}.log")))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["target"] == "trace" && line["fields"]["trace_id"] == trace_id)
        .map(|line| line["fields"].clone())
        .collect()
}

#[test]
fn a_sampled_trace_is_followed_through_every_process() {
    let cluster = Cluster::start_with(&["--log-format", "json"]);
    // Every line each server writes is JSON.
    for process in [
        "aggregator",
        "core-server",
        "extension-server",
        "metrics-server",
    ] {
        let log = std::fs::read_to_string(cluster.dir.join(format!("logs/{process}.log")))
            .unwrap_or_default();
        let lines: Vec<&str> = log.lines().filter(|l| l.starts_with('{')).collect();
        assert!(!lines.is_empty(), "{process} logged no JSON");
        assert!(
            lines
                .iter()
                .all(|l| serde_json::from_str::<Value>(l).is_ok()),
            "{process}"
        );
    }
    cluster.kubectl_stdin(&["apply", "-f", "-"], WIDGETS).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
        ])
        .ok();

    // A custom resource: aggregator → core-server → extension-server.
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let traceparent = format!("traceparent: 00-{trace_id}-{client_span}-01");
    let created = cluster.curl(
        As::Admin,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        &["Content-Type: application/json", &traceparent],
        Some(br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"traced"}}"#),
    );
    assert_eq!(created.code, 201, "{}", created.text);
    let one = |process: &str| {
        let mut found = Vec::new();
        assert!(
            eventually(Duration::from_secs(5), || {
                found = spans(&cluster, process, trace_id);
                !found.is_empty()
            }),
            "{process} logged no span of the trace"
        );
        assert_eq!(found.len(), 1, "{process}: {found:?}");
        found.remove(0)
    };
    let front = one("aggregator");
    let core = one("core-server");
    let extension = one("extension-server");
    assert_eq!(front["span"], "front-door");
    assert_eq!(
        front["parent_id"], client_span,
        "the client's span is the parent"
    );
    assert_eq!(core["span"], "core-server");
    assert_eq!(core["parent_id"], front["span_id"]);
    assert_eq!(extension["span"], "extension-server");
    assert_eq!(extension["parent_id"], core["span_id"]);
    assert_eq!(extension["code"], 201);
    // The audit id is the same request's on every hop.
    assert_eq!(core["audit_id"], front["audit_id"]);
    assert_eq!(extension["audit_id"], front["audit_id"]);

    // An aggregated server, through the proxy.
    let proxied_trace = "0af7651916cd43dd8448eb211c80319c";
    assert!(
        eventually(Duration::from_secs(30), || {
            cluster
                .curl(
                    As::Admin,
                    "GET",
                    "/apis/metrics.k8s.io/v1beta1/nodes",
                    &[&format!(
                        "traceparent: 00-{proxied_trace}-b7ad6b7169203331-01"
                    )],
                    None,
                )
                .code
                == 200
        }),
        "the aggregated metrics API never answered"
    );
    let aggregated = spans(&cluster, "metrics-server", proxied_trace);
    let front_doors = spans(&cluster, "aggregator", proxied_trace);
    let last = aggregated.last().expect("metrics-server logged the trace");
    assert_eq!(last["span"], "metrics-server");
    assert!(
        front_doors
            .iter()
            .any(|f| f["span_id"] == last["parent_id"]),
        "metrics-server's parent is a front-door span: {front_doors:?} {last}"
    );

    // Unsampled traces and bad headers are not logged at info.
    let quiet = "11111111111111111111111111111111";
    for header in [
        format!("traceparent: 00-{quiet}-b7ad6b7169203331-00"),
        format!("traceparent: 00-{quiet}-0000000000000000-01"),
    ] {
        let answer = cluster.curl(
            As::Admin,
            "GET",
            "/api/v1/namespaces/default",
            &[&header],
            None,
        );
        assert_eq!(answer.code, 200);
    }
    assert!(spans(&cluster, "aggregator", quiet).is_empty());
    assert!(spans(&cluster, "core-server", quiet).is_empty());
}
