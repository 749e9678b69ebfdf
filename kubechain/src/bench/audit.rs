//! What the audit log costs a create: the same creates through the
//! cluster's front door and through a second one that audits every request
//! at Metadata level to a file, in alternating slices, so that both share
//! the machine's drift.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::load::Throughput;
use super::report::{CpuTable, Table};
use super::target::AUDITED;
use super::{alternating, create_configmaps};
use crate::client::Api;

/// The least creates through the auditing front door may keep (≥ 0.90×).
const AUDIT_RATIO: f64 = 0.90;

/// Measures creates into `namespace` through `plain` and through `audited`
/// clients, adding the rows to `table` and the failures to `errors`.
pub async fn measure(
    plain: &[Api],
    audited: &[Api],
    namespace: &str,
    phase: Duration,
    cpu: &mut CpuTable,
    table: &mut Table,
    errors: &mut Vec<String>,
) {
    let names = Arc::new(AtomicU64::new(0));
    let creates = |apis: &[Api], slice: Duration| {
        create_configmaps(apis, namespace, "audited", &names, slice)
    };
    let (without, with) = ("creates, no audit", "creates, audit at Metadata");
    let [base, audit] = alternating(
        cpu,
        [without, with],
        phase,
        |slice| creates(plain, slice),
        |slice| creates(audited, slice),
    )
    .await;
    table.versus(
        "creates/s, audit at Metadata level",
        "no audit",
        &base,
        &audit,
        AUDIT_RATIO,
    );
    let per_create = |phase: &str, process: &str, done: &Throughput| {
        cpu.cpu_per_op(phase, process, done.ops)
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    table.cost(
        "front door CPU per create, audit at Metadata",
        "no audit",
        per_create(without, "aggregator", &base),
        per_create(with, AUDITED, &audit),
    );
    for (what, done) in [(without, &base), (with, &audit)] {
        done.report_failures(what, errors);
    }
}
