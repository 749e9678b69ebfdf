//! The official Python `kubernetes` client (pip) against a cluster: CRUD,
//! pagination, label selectors, a 409 on a stale update, and a watch.

use tests::{Cluster, workspace};

#[test]
fn python_client_crud_pagination_selectors_conflict_watch() {
    let cluster = Cluster::start();
    let script = workspace().join("tests/python/client_test.py");
    let output = cluster
        .command("python3")
        .arg(script)
        .output()
        .expect("python3 on PATH");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "python client test failed\nstdout: {stdout}\nstderr: {stderr}"
    );
    assert!(
        stdout.contains("python client: all checks passed"),
        "{stdout}"
    );
}
