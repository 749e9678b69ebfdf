//! The official Python `kubernetes` client (pip) against a cluster: CRUD,
//! pagination, label selectors, a 409 on a stale update, and a watch.

use tests::Cluster;

#[test]
fn python_client_crud_pagination_selectors_conflict_watch() {
    let cluster = Cluster::start();
    cluster.python("client_test.py", None, "python client");
}
