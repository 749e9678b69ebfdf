//! The chain itself: requests cross aggregator → core-server →
//! extension-server; an unreachable delegate means 503, not 404; describe
//! finds events by field selector; and the footprint of a cluster.

use std::time::Duration;

use nix::sys::signal::Signal;
use tests::{Cluster, eventually};

#[test]
fn an_unreachable_delegate_answers_503_not_404() {
    let cluster = Cluster::start();
    let unknown = "/apis/widgets.example.com/v1/widgets";
    assert!(
        cluster
            .kubectl(&["get", "--raw", unknown])
            .err()
            .contains("NotFound")
    );

    // Freeze the launcher so it cannot restart the extension server, then kill it.
    let launcher = cluster.launcher_pid().expect("launcher");
    let extension = cluster
        .child_pid("extension-server")
        .expect("extension-server pid");
    Cluster::signal(launcher, Signal::SIGSTOP);
    Cluster::signal(extension, Signal::SIGKILL);
    let unavailable = eventually(Duration::from_secs(10), || {
        cluster
            .kubectl(&["get", "--raw", unknown])
            .stderr
            .contains("ServiceUnavailable")
    });
    // The core server's own resources keep working meanwhile.
    let namespaces = cluster.kubectl(&["get", "namespaces", "-o", "name"]);
    Cluster::signal(launcher, Signal::SIGCONT);
    assert!(
        unavailable,
        "requests for the extension server's paths did not get 503"
    );
    assert!(namespaces.ok().contains("namespace/default"));

    // The launcher restarts the extension server; the chain is whole again.
    assert!(eventually(Duration::from_secs(15), || cluster
        .kubectl(&["get", "--raw", unknown])
        .stderr
        .contains("NotFound")));
    assert_ne!(cluster.child_pid("extension-server"), Some(extension));
}

#[test]
fn events_are_selected_by_involved_object() {
    let cluster = Cluster::start();
    cluster.kubectl(&["create", "configmap", "subject"]).ok();
    let uid = cluster
        .kubectl(&["get", "cm", "subject", "-o", "jsonpath={.metadata.uid}"])
        .ok()
        .to_string();
    let event = |name: &str, about: &str, uid: &str, reason: &str| {
        format!(
            "apiVersion: v1\nkind: Event\nmetadata: {{name: {name}}}\ninvolvedObject: {{kind: ConfigMap, name: {about}, namespace: default, uid: \"{uid}\"}}\nreason: {reason}\nmessage: about {about}\ntype: Normal\nsource: {{component: e2e}}\nfirstTimestamp: \"2024-01-01T00:00:00Z\"\nlastTimestamp: \"2024-01-01T00:00:00Z\"\ncount: 1\n"
        )
    };
    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            &event("ev-subject", "subject", &uid, "Tested"),
        )
        .ok();
    cluster
        .kubectl_stdin(
            &["create", "-f", "-"],
            &event("ev-other", "other", "0000", "Ignored"),
        )
        .ok();
    let selected = cluster.kubectl(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=subject",
        "-o",
        "name",
    ]);
    assert_eq!(selected.ok().trim(), "event/ev-subject");
    let by_reason = cluster.kubectl(&[
        "get",
        "events",
        "--field-selector",
        "reason!=Tested",
        "-o",
        "name",
    ]);
    assert_eq!(by_reason.ok().trim(), "event/ev-other");
    let described = cluster.kubectl(&["describe", "configmap", "subject"]);
    assert!(
        described.ok().contains("Tested") && !described.ok().contains("Ignored"),
        "{}",
        described.stdout
    );
    let table = cluster.kubectl(&["get", "events"]);
    let header: Vec<&str> = table
        .ok()
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    assert!(table.ok().contains("configmap/subject"));
}

#[test]
fn footprint_of_a_cluster() {
    let cluster = Cluster::start();
    eprintln!(
        "kubechain up: ready in {:.2}s",
        cluster.startup.as_secs_f64()
    );
    assert!(cluster.startup < Duration::from_secs(30));
    let manifest: String = (0..200)
        .map(|i| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: load-{i}}}\ndata: {{value: \"{}\"}}\n---\n", "x".repeat(1000)))
        .collect();
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &manifest)
        .ok();
    assert_eq!(
        cluster
            .kubectl(&["get", "cm", "-o", "name"])
            .ok()
            .lines()
            .filter(|l| l.contains("load-"))
            .count(),
        200
    );
    let memory = cluster.memory_kib();
    for (name, kib) in &memory {
        eprintln!(
            "resident memory after 200 configmaps of 1 KiB: {name} {:.1} MiB",
            *kib as f64 / 1024.0
        );
    }
    for server in ["aggregator", "core-server", "extension-server"] {
        let kib = memory
            .iter()
            .find(|(n, _)| n == server)
            .map(|(_, k)| *k)
            .expect(server);
        assert!(kib < 200 * 1024, "{server} uses {kib} KiB");
    }
}
