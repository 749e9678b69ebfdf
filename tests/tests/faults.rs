//! The fault suite: what a stopping or failing part of the chain does to
//! everyone else. Real processes, real signals, through the front door.
//!
//! To see the measured times: `cargo test -p tests --test faults -- --nocapture`.

use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tests::{Cluster, eventually};

/// The value of one etcd key, empty if there is none.
fn etcd_value(cluster: &Cluster, key: &str) -> String {
    cluster
        .etcdctl(&["get", key, "--print-value-only"])
        .stdout
        .trim()
        .to_string()
}

/// Whether a process runs (a zombie awaiting its parent does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[test]
fn a_sigtermed_core_replica_leaves_at_once_and_its_watches_resume_without_a_gap() {
    let cluster = Cluster::start_with(&["--core-replicas", "2"]);
    assert!(eventually(Duration::from_secs(20), || cluster
        .registrations("core-server")
        .len()
        == 2));
    // A watch through the front door, on whichever replica it lands.
    let mut watch = cluster.kubectl_spawn(&[
        "get",
        "configmaps",
        "-w",
        "--output-watch-events",
        "-o",
        "jsonpath={.type} {.object.metadata.name}{\"\\n\"}",
    ]);
    let (tx, rx) = mpsc::channel();
    let out = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    cluster
        .kubectl(&["create", "configmap", "before", "--from-literal=k=v"])
        .ok();
    let seen = |name: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(line) if line.ends_with(&format!(" {name}")) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    };
    assert!(seen("before"));

    // SIGTERM both replicas in turn: whichever served the watch is among them.
    for victim in cluster.child_pids("core-server") {
        let stopped = Instant::now();
        Cluster::signal(victim, Signal::SIGTERM);
        // Its registration goes at once, not after the 5 s lease expiry.
        assert!(
            eventually(Duration::from_secs(2), || !cluster
                .registrations("core-server")
                .iter()
                .any(|(_, pid)| *pid == victim)),
            "replica {victim} still registered"
        );
        let unregistered = stopped.elapsed();
        // It exits within 10 s.
        assert!(
            eventually(Duration::from_secs(10), || !alive(victim)),
            "replica {victim} still running 10 s after SIGTERM"
        );
        eprintln!(
            "core-server {victim}: unregistered {unregistered:?} after SIGTERM, exited within {:?}",
            stopped.elapsed()
        );
        // Writes go on being served, and the watch sees them.
        let name = format!("after-{victim}");
        assert!(eventually(Duration::from_secs(20), || cluster
            .kubectl(&["create", "configmap", &name, "--from-literal=k=v"])
            .code
            == 0));
        assert!(seen(&name), "the watch missed {name}");
        assert!(eventually(Duration::from_secs(20), || cluster
            .registrations("core-server")
            .len()
            == 2));
    }
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn a_stopping_leader_releases_its_lease() {
    let cluster = Cluster::start();
    let key = "/kubechain/leases/aggregator-controllers";
    assert!(eventually(Duration::from_secs(20), || !etcd_value(
        &cluster, key
    )
    .is_empty()));
    let holder = etcd_value(&cluster, key);
    let aggregator = cluster.child_pid("aggregator").expect("an aggregator");
    assert!(holder.ends_with(&format!("-{aggregator}")), "{holder}");
    let stopped = Instant::now();
    Cluster::signal(aggregator, Signal::SIGTERM);
    // Released, not left to expire (the lease lasts 6 s).
    assert!(
        eventually(Duration::from_secs(3), || etcd_value(&cluster, key)
            != holder),
        "the old leader still holds {key}"
    );
    eprintln!(
        "leader lease released {:?} after SIGTERM",
        stopped.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(10), || !alive(aggregator)),
        "the aggregator still runs 10 s after SIGTERM"
    );
    eprintln!("aggregator exited within {:?}", stopped.elapsed());
    // The restarted aggregator leads at once: a namespace deletion completes.
    assert!(eventually(Duration::from_secs(30), || cluster
        .child_pid("aggregator")
        .is_some_and(|pid| pid != aggregator)
        && cluster.kubectl(&["get", "--raw", "/readyz"]).code == 0));
    cluster.kubectl(&["create", "namespace", "brief"]).ok();
    let deleting = Instant::now();
    cluster
        .kubectl(&["delete", "namespace", "brief", "--timeout=20s"])
        .ok();
    eprintln!(
        "namespace deleted {:?} after the request",
        deleting.elapsed()
    );
    // The same after the whole cluster is stopped and started again.
    let mut cluster = cluster;
    cluster.restart();
    cluster.kubectl(&["create", "namespace", "again"]).ok();
    let deleting = Instant::now();
    cluster
        .kubectl(&["delete", "namespace", "again", "--timeout=20s"])
        .ok();
    eprintln!(
        "after a restart, namespace deleted {:?} after the request",
        deleting.elapsed()
    );
}
