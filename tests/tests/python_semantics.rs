//! Generic semantics through the official Python `kubernetes` client:
//! server-side apply with two field managers, watch bookmarks, resuming a
//! watch, timeoutSeconds, resourceVersionMatch and sendInitialEvents. The
//! server sends bookmarks every 60 s, so this test takes a little over a
//! minute.

use tests::Cluster;

#[test]
fn python_apply_conflicts_bookmarks_resume_and_initial_events() {
    let cluster = Cluster::start();
    cluster.python("semantics_test.py", None, "python semantics");
}
