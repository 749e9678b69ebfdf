//! `kubechain bench --size small`, the CI smoke run: it starts its own
//! cluster, measures raw etcd and kubechain, and must exit 0 (no failed
//! request, no lost watch event) with every row of its table printed. The
//! numbers are not judged here.

use std::process::Command;

use tests::bin_dir;

/// Runs `kubechain bench` with `args`; its standard output, once it exited 0.
fn bench(args: &[&str]) -> String {
    let output = Command::new(bin_dir().join("kubechain"))
        .arg("bench")
        .args(args)
        .output()
        .expect("kubechain binary (cargo build --workspace first)");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}");
    assert!(
        output.status.success(),
        "kubechain bench {} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        args.join(" "),
        output.status
    );
    stdout
}

#[test]
fn the_small_bench_runs_clean_and_prints_every_row() {
    let stdout = bench(&["--size", "small"]);
    let rows = [
        "creates/s",
        "GET/s (one object)",
        "CPU µs per cached GET, front door + core (HTTP/2)",
        "CPU µs per cached GET, front door + core (HTTP/1.1)",
        "CPU µs per create, front door + core (HTTP/2)",
        "CPU µs per LIST, front door + core (HTTP/2)",
        "GET/s as a ServiceAccount (1000 RoleBindings)",
        "LIST/s (200 objects)",
        "aggregated API GET/s (metrics-server)",
        "aggregated API creates/s (wardle Flunder, etcd)",
        "aggregated API GET/s (wardle Flunder)",
        "requests per SubjectAccessReview (wardle, one ServiceAccount)",
        "memory wardle-server",
        "core-server growth for its cache",
        "watch p50, 5 watchers",
        "watch p99, 5 watchers",
        "watch p50, 10 watchers",
        "watch p99, 10 watchers",
        "memory aggregator",
        "memory core-server",
        "memory extension-server",
        "memory etcd",
        "JSON of cached objects",
        "creates/s, 20 webhooks and 20 policies matching nothing",
        "core-server CPU per create, one matching policy",
        "creates/s, audit at Metadata level",
        "front door CPU per create, audit at Metadata",
        "memory aggregator-audited",
        "bystander GET p99, 64-client LIST flood held by APF",
        "flood LISTs served / refused (429)",
        "CPU µs per cached GET vs the 2-hop floor, front door + core (HTTP/2)",
    ];
    for row in rows {
        assert!(
            stdout.lines().any(|l| l.starts_with(row)),
            "no row {row:?} in:\n{stdout}"
        );
    }
    assert!(stdout.contains("errors: none"), "{stdout}");
    // The spread of a GET's cost over slices, kubechain's and the floor's.
    for version in ["HTTP/2", "HTTP/1.1"] {
        let row = format!("spread of CPU µs per cached GET over 10 slices ({version})");
        let line = stdout.lines().find(|l| l.starts_with(&row));
        assert!(
            line.is_some_and(|l| l.contains("floor: ") && l.matches('–').count() == 2),
            "no spread row for {version} in:\n{stdout}"
        );
    }
    // An aggregated server asks once for many requests of one user.
    let shared = stdout
        .lines()
        .find(|l| l.starts_with("requests per SubjectAccessReview"))
        .unwrap();
    let numbers: Vec<u64> = shared
        .split_whitespace()
        .filter_map(|w| w.trim_end_matches(':').parse().ok())
        .collect();
    let [gets, reviews] = numbers[..] else {
        panic!("{shared}")
    };
    assert!(reviews >= 1 && reviews * 10 <= gets, "{shared}");
    // The CPU per operation table judges the two hops against their targets.
    assert!(
        stdout.contains("CPU µs per operation, per process")
            && stdout.lines().any(|l| l.starts_with("kubechain GETs")
                && (l.ends_with("PASS)") || l.ends_with("MISS)"))),
        "no CPU per operation table in:\n{stdout}"
    );
    // Every throughput row has a number on both sides and a verdict.
    for line in stdout
        .lines()
        .filter(|l| rows[..8].iter().any(|r| l.starts_with(r)))
    {
        assert!(
            line.ends_with("PASS") || line.ends_with("MISS"),
            "no verdict: {line}"
        );
    }
}

/// `kubechain bench --size small --curve …`: each cost curve runs on its own
/// cluster against real kubectl and prints its table with its verdicts.
#[test]
fn the_small_cost_curves_run_clean() {
    let stdout = bench(&[
        "--size", "small", "--curve", "crds", "--curve", "watchers", "--curve", "objects",
    ]);
    for row in [
        "CRD curve: 40 CRDs",
        "  every CRD Established",
        "  in discovery after its creation",
        "  RSS growth per CRD",
        "  CPU per CRD (ms)",
        "  kubectl api-resources",
        "  kubectl explain widget0s.spec",
        "  OpenAPI v3 of one group",
        "watcher curve: one namespace, 50 events/s",
        "object curve: configmaps of about 1 KiB",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(row)),
            "no row {row:?} in:\n{stdout}"
        );
    }
    // Every step of the watcher and object curves has its line.
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("LIST page p99") && l.contains("CPU µs/GET")),
        "no CPU per GET in the object curve:\n{stdout}"
    );
    for step in ["5", "20", "50", "1", "500", "2000"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().next() == Some(step)),
            "no line for {step} in:\n{stdout}"
        );
    }
    assert!(stdout.contains("errors: none"), "{stdout}");
}
