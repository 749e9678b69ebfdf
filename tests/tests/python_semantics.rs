//! Generic semantics through the official Python `kubernetes` client:
//! server-side apply with two field managers, watch bookmarks, resuming a
//! watch, timeoutSeconds, resourceVersionMatch and sendInitialEvents. The
//! server sends bookmarks every 60 s, so this test takes a little over a
//! minute.

use tests::{Cluster, workspace};

#[test]
fn python_apply_conflicts_bookmarks_resume_and_initial_events() {
    let cluster = Cluster::start();
    let script = workspace().join("tests/python/semantics_test.py");
    let output = cluster
        .command("python3")
        .arg(script)
        .output()
        .expect("python3 on PATH");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "python semantics test failed\nstdout: {stdout}\nstderr: {stderr}"
    );
    assert!(
        stdout.contains("python semantics: all checks passed"),
        "{stdout}"
    );
}
