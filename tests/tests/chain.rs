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

/// Identical watches through the aggregator ride one watch on the core
/// server; each must still see exactly the events after its own
/// resourceVersion: those from the shared start, one joining late (replayed
/// from the aggregator's recent events), and one from further back than the
/// shared watch reaches (a watch of its own).
#[test]
fn identical_watches_each_see_the_events_after_their_own_version() {
    let cluster = Cluster::start();
    cluster.kubectl(&["create", "namespace", "shared"]).ok();
    let create = |name: &str| {
        cluster
            .kubectl(&[
                "create",
                "configmap",
                name,
                "-n",
                "shared",
                "-o",
                "jsonpath={.metadata.resourceVersion}",
            ])
            .ok()
            .to_string()
    };
    let watch = |from: &str| {
        cluster.kubectl_spawn(&[
            "get",
            "--raw",
            &format!(
                "/api/v1/namespaces/shared/configmaps?watch=true&resourceVersion={from}&timeoutSeconds=8"
            ),
        ])
    };
    let oldest = create("first");
    let start = create("second");
    let early: Vec<_> = (0..8).map(|_| watch(&start)).collect();
    std::thread::sleep(Duration::from_secs(1));
    let versions: Vec<String> = (0..4).map(|i| create(&format!("cm-{i}"))).collect();
    let late = watch(&versions[1]);
    let older = watch(&oldest);
    std::thread::sleep(Duration::from_millis(500));
    create("cm-4");

    let names = |child: std::process::Child| -> Vec<String> {
        let out = child.wait_with_output().expect("kubectl output");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "watch failed: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let event: serde_json::Value =
                    serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                assert_eq!(event["type"], "ADDED", "{l}");
                event["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let all: Vec<String> = (0..5).map(|i| format!("cm-{i}")).collect();
    for watcher in early {
        assert_eq!(names(watcher), all);
    }
    assert_eq!(names(late), all[2..]);
    let mut from_oldest = vec!["second".to_string()];
    from_oldest.extend(all.iter().cloned());
    assert_eq!(names(older), from_oldest);
}
