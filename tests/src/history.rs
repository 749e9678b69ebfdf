//! A workload's history, and what a linearizable store's history passes.
//!
//! Every operation on a small set of keys (ConfigMaps, each write a value
//! never written before) is recorded with when it was invoked, when it
//! completed and what came back: done (with the object's resourceVersion
//! and value), refused (a definite no: 409, 404, 422), or indeterminate (a
//! timeout, a 5xx, no answer: it may or may not have happened). Because
//! a resourceVersion is etcd's revision, one total order of every write,
//! the register checks reduce to comparisons of versions in real time:
//!
//! - a value read was written (by a write that was invoked before the read
//!   completed), and a version read is the version its write was given;
//! - a consistent read invoked after a write was acknowledged sees that
//!   write's version or a later one, and a consistent read invoked after
//!   another completed sees at least that one's version;
//! - no acknowledged write is lost: the final state is at least as new as
//!   every acknowledged write, and holds a value that was written;
//! - a read from the cache (`resourceVersion=0`) may be stale, but returns
//!   only a value that was written, with the version it was given;
//! - a delete's own version is not in its answer (kube returns the object
//!   as it was), so deletes order by real time and by the version they
//!   removed: a consistent read finds a key missing only if a delete may
//!   have followed every write acknowledged before the read was sent, and
//!   after an acknowledged delete it finds a later object or none.

use std::collections::HashMap;
use std::time::Instant;

/// What an operation asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A create of the key with `value`.
    Create(String),
    /// An update to `value`, with `precondition` naming the version it read.
    Update {
        /// The value written.
        value: String,
        /// The resourceVersion it must replace, if any.
        precondition: Option<u64>,
    },
    /// A delete of the key.
    Delete,
    /// A read: consistent (`resourceVersion` unset) or from the cache (`0`).
    Get {
        /// Whether the read must be consistent.
        consistent: bool,
    },
}

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done: the object's version and value (a read of a missing key: none).
    Done(Option<(u64, String)>),
    /// Refused: it did not happen.
    Refused,
    /// Unknown: it may have happened.
    Indeterminate,
}

/// One operation of the history.
#[derive(Debug, Clone)]
pub struct Op {
    /// The client that ran it.
    pub client: usize,
    /// The key (the ConfigMap's name).
    pub key: String,
    /// What it asked for.
    pub kind: Kind,
    /// When it was sent.
    pub invoked: Instant,
    /// When its answer came (or the client gave up).
    pub completed: Instant,
    /// What came back.
    pub outcome: Outcome,
}

impl Op {
    /// The value the operation writes, for a write.
    fn written(&self) -> Option<&str> {
        match &self.kind {
            Kind::Create(value) | Kind::Update { value, .. } => Some(value),
            Kind::Get { .. } | Kind::Delete => None,
        }
    }

    /// The version an acknowledged delete removed (the object it answered).
    fn removed(&self) -> Option<u64> {
        match (&self.kind, &self.outcome) {
            (Kind::Delete, Outcome::Done(Some((rv, _)))) => Some(*rv),
            _ => None,
        }
    }

    /// Whether this delete may have come after `write` (an acknowledged
    /// write): it was not refused, not over before the write was sent, and
    /// did not remove an older version.
    fn may_follow(&self, write: &Op) -> bool {
        self.kind == Kind::Delete
            && self.outcome != Outcome::Refused
            && self.completed >= write.invoked
            && match (self.removed(), write.acknowledged()) {
                (Some(removed), Some(written)) => removed >= written,
                _ => true,
            }
    }

    /// The version an acknowledged write was given.
    fn acknowledged(&self) -> Option<u64> {
        match (&self.outcome, self.written()) {
            (Outcome::Done(Some((rv, _))), Some(_)) => Some(*rv),
            _ => None,
        }
    }
}

/// The operations on each key, in the order they were invoked.
fn by_key(history: &[Op]) -> HashMap<&str, Vec<&Op>> {
    let mut keys: HashMap<&str, Vec<&Op>> = HashMap::new();
    for op in history {
        keys.entry(op.key.as_str()).or_default().push(op);
    }
    for ops in keys.values_mut() {
        ops.sort_by_key(|op| op.invoked);
    }
    keys
}

/// Whether `version, value` is what a write of `ops` may have left: an
/// acknowledged write's own, or an indeterminate write's value (its version
/// unknown), written by a write invoked before `before`.
fn was_written(ops: &[&Op], version: u64, value: &str, before: Instant) -> Result<(), String> {
    let writer = ops
        .iter()
        .find(|w| w.written() == Some(value))
        .ok_or_else(|| format!("{value:?} (version {version}) was never written"))?;
    if writer.invoked > before {
        return Err(format!(
            "{value:?} was read before the write of it was sent"
        ));
    }
    match (&writer.outcome, writer.acknowledged()) {
        (_, Some(rv)) if rv != version => Err(format!(
            "{value:?} read at version {version}, but its write was given {rv}"
        )),
        (Outcome::Refused, _) => Err(format!("{value:?} was read, but its write was refused")),
        _ => Ok(()),
    }
}

/// Every failure of the read checks: values and versions that were never
/// written, stale consistent reads, consistent reads going back, and a
/// value seen at two versions (a write that happened twice, or an
/// indeterminate one that happened for some readers only).
pub fn check_reads(history: &[Op]) -> Vec<String> {
    let mut failures = Vec::new();
    for (key, ops) in by_key(history) {
        let mut versions: HashMap<&str, u64> = HashMap::new();
        for op in ops.iter().filter(|op| op.kind != Kind::Delete) {
            if let Outcome::Done(Some((version, value))) = &op.outcome {
                match versions.insert(value, *version) {
                    Some(other) if other != *version => failures.push(format!(
                        "{key}: {value:?} seen at versions {other} and {version}"
                    )),
                    _ => {}
                }
            }
        }
        for read in &ops {
            let Kind::Get { consistent } = read.kind else {
                continue;
            };
            let Outcome::Done(found) = &read.outcome else {
                continue;
            };
            let Some((version, value)) = found else {
                // Missing: a delete may have followed every write
                // acknowledged before the read was sent.
                let unexplained = ops.iter().find(|w| {
                    w.acknowledged().is_some()
                        && w.completed < read.invoked
                        && !ops
                            .iter()
                            .any(|d| d.invoked < read.completed && d.may_follow(w))
                });
                if let (true, Some(write)) = (consistent, unexplained) {
                    failures.push(format!(
                        "{key}: a consistent read by client {} found no object, but version {} was acknowledged to client {} before it was sent and no delete could have followed (stale)",
                        read.client,
                        write.acknowledged().unwrap_or_default(),
                        write.client
                    ));
                }
                continue;
            };
            if let Err(why) = was_written(&ops, *version, value, read.completed) {
                failures.push(format!("{key}: read by client {}: {why}", read.client));
            }
            if !consistent {
                continue;
            }
            for earlier in ops.iter().filter(|o| o.completed < read.invoked) {
                let seen = match (&earlier.kind, &earlier.outcome) {
                    (_, Outcome::Done(Some((rv, _)))) if earlier.written().is_some() => *rv,
                    // After a delete, a later object.
                    (Kind::Delete, Outcome::Done(Some((rv, _)))) => rv + 1,
                    (Kind::Get { consistent: true }, Outcome::Done(Some((rv, _)))) => *rv,
                    _ => continue,
                };
                if *version < seen {
                    failures.push(format!(
                        "{key}: a consistent read by client {} returned version {version}, older than {seen} seen by client {} before it was sent (stale)",
                        read.client, earlier.client
                    ));
                }
            }
        }
    }
    failures.sort();
    failures.dedup();
    failures
}

/// Every conditional write that replaced another version than the one it
/// named: an acknowledged update with precondition `p`, given version `v`,
/// while some operation saw the key at a version between them, or a delete
/// removed `p` (a lost update).
pub fn check_conditional_writes(history: &[Op]) -> Vec<String> {
    let mut failures = Vec::new();
    for (key, ops) in by_key(history) {
        for write in &ops {
            let (
                Kind::Update {
                    precondition: Some(p),
                    value,
                },
                Some(v),
            ) = (&write.kind, write.acknowledged())
            else {
                continue;
            };
            for other in &ops {
                let seen = match (&other.kind, &other.outcome) {
                    (Kind::Delete, Outcome::Done(Some((removed, _)))) if removed == p => {
                        failures.push(format!(
                            "{key}: {value:?} replaced version {p}, which client {} deleted (lost update)",
                            other.client
                        ));
                        continue;
                    }
                    (Kind::Delete, _) => continue,
                    (_, Outcome::Done(Some((seen, _)))) => *seen,
                    _ => continue,
                };
                if *p < seen && seen < v {
                    failures.push(format!(
                        "{key}: {value:?} was written over version {p} at {v}, but client {} saw version {seen} between them (lost update)",
                        other.client
                    ));
                }
            }
        }
    }
    failures.sort();
    failures.dedup();
    failures
}

/// Every acknowledged write lost: `last` is each key's final state (read
/// consistently once every fault has healed).
pub fn check_writes(history: &[Op], last: &HashMap<String, Option<(u64, String)>>) -> Vec<String> {
    let mut failures = Vec::new();
    // The final reads come after every operation was sent.
    let Some(end) = history.iter().map(|op| op.invoked).max() else {
        return failures;
    };
    for (key, ops) in by_key(history) {
        let newest = ops
            .iter()
            .filter(|o| o.acknowledged().is_some())
            .max_by_key(|o| o.acknowledged());
        let newest_deleted = ops.iter().filter_map(|o| o.removed()).max();
        match (last.get(key).cloned().flatten(), newest.and_then(|o| o.acknowledged())) {
            (None, Some(rv)) => {
                let write = newest.expect("an acknowledged write");
                if !ops.iter().any(|d| d.may_follow(write)) {
                    failures.push(format!(
                        "{key}: acknowledged at version {rv}, now gone, and no delete followed"
                    ))
                }
            }
            (Some((version, _)), _) if newest_deleted.is_some_and(|d| version <= d) => {
                failures.push(format!(
                    "{key}: version {version} was acknowledged as deleted, but is still there (lost delete)"
                ))
            }
            (Some((version, _)), Some(rv)) if version < rv => failures.push(format!(
                "{key}: acknowledged at version {rv}, now at the older {version} (lost)"
            )),
            (Some((version, value)), _) => {
                if let Err(why) = was_written(&ops, version, &value, end) {
                    failures.push(format!("{key}: final state: {why}"));
                }
            }
            (None, None) => {}
        }
    }
    failures.sort();
    failures
}

/// What one watcher saw, in order, across its watches (each resumed from
/// the last resourceVersion it saw, or relisted after a 410).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A watch started from this resourceVersion (a list's, or the last seen).
    Started(u64),
    /// An ADDED or MODIFIED event: the key, its version and value.
    Event(String, u64, String),
    /// A DELETED event: the key and the version of its deletion.
    Deleted(String, u64),
    /// A BOOKMARK at this resourceVersion.
    Bookmark(u64),
    /// 410 Gone: the watcher lists again (its next start is the list's).
    Gone,
}

/// Every failure of a watcher's guarantees: events in order and unique,
/// bookmarks never ahead of the events delivered, a resumed watch going
/// on where the last one ended, values that were written with the
/// versions they were given, and no gap: every acknowledged write between
/// a watch's start and the last version it delivered was delivered.
pub fn check_watch(history: &[Op], watcher: usize, seen: &[Seen]) -> Vec<String> {
    let mut failures = Vec::new();
    let keys = by_key(history);
    // Events are not timed: any write of the history may be one.
    let end = history
        .iter()
        .map(|op| op.invoked)
        .max()
        .unwrap_or_else(Instant::now);
    let acknowledged: Vec<(u64, &str)> = history
        .iter()
        .filter_map(|op| Some((op.acknowledged()?, op.key.as_str())))
        .collect();
    // What the current segment (from a list or the first start) covers.
    let mut from: Option<u64> = None;
    let mut last = 0u64;
    let mut delivered: Vec<u64> = Vec::new();
    let close = |from: Option<u64>,
                 last: u64,
                 delivered: &mut Vec<u64>,
                 failures: &mut Vec<String>| {
        if let Some(from) = from {
            for (rv, key) in &acknowledged {
                if *rv > from && *rv <= last && !delivered.contains(rv) {
                    failures.push(format!(
                        "watcher {watcher}: the write of {key} at version {rv} was never delivered (watched from {from} to {last})"
                    ));
                }
            }
        }
        delivered.clear();
    };
    for item in seen {
        match item {
            Seen::Started(rv) => match from {
                None => {
                    from = Some(*rv);
                    last = *rv;
                }
                Some(_) if *rv != last => failures.push(format!(
                    "watcher {watcher}: resumed from {rv}, but the last version seen was {last}"
                )),
                Some(_) => {}
            },
            Seen::Event(key, rv, value) => {
                if *rv <= last {
                    failures.push(format!(
                        "watcher {watcher}: {key} at version {rv} came after version {last} (out of order or repeated)"
                    ));
                }
                let ops = keys
                    .get(key.as_str())
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                if let Err(why) = was_written(ops, *rv, value, end) {
                    failures.push(format!("watcher {watcher}: {key}: {why}"));
                }
                last = last.max(*rv);
                delivered.push(*rv);
            }
            Seen::Deleted(key, rv) => {
                if *rv <= last {
                    failures.push(format!(
                        "watcher {watcher}: the delete of {key} at version {rv} came after version {last} (out of order or repeated)"
                    ));
                }
                let deletes = keys
                    .get(key.as_str())
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                if !deletes
                    .iter()
                    .any(|d| d.kind == Kind::Delete && d.outcome != Outcome::Refused)
                {
                    failures.push(format!(
                        "watcher {watcher}: {key} was deleted at version {rv}, but no delete of it was sent"
                    ));
                }
                last = last.max(*rv);
            }
            Seen::Bookmark(rv) => {
                if *rv < last {
                    failures.push(format!(
                        "watcher {watcher}: a bookmark at {rv} after version {last} was delivered"
                    ));
                }
                last = last.max(*rv);
            }
            Seen::Gone => {
                close(from, last, &mut delivered, &mut failures);
                from = None;
            }
        }
    }
    close(from, last, &mut delivered, &mut failures);
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A history built by hand: each op at `(start, end)` ticks.
    struct Clock(Instant);

    impl Clock {
        fn op(&self, client: usize, kind: Kind, at: (u64, u64), outcome: Outcome) -> Op {
            let tick = |t| self.0 + Duration::from_millis(t);
            Op {
                client,
                key: "k".into(),
                kind,
                invoked: tick(at.0),
                completed: tick(at.1),
                outcome,
            }
        }
    }

    fn put(value: &str) -> Kind {
        Kind::Update {
            value: value.into(),
            precondition: None,
        }
    }

    fn done(rv: u64, value: &str) -> Outcome {
        Outcome::Done(Some((rv, value.into())))
    }

    const CONSISTENT: Kind = Kind::Get { consistent: true };
    const CACHED: Kind = Kind::Get { consistent: false };

    #[test]
    fn a_linearizable_history_passes() {
        let c = Clock(Instant::now());
        let history = vec![
            c.op(0, Kind::Create("a".into()), (0, 1), done(10, "a")),
            c.op(1, put("b"), (2, 5), done(12, "b")),
            // Concurrent with the write: either version will do.
            c.op(2, CONSISTENT, (3, 4), done(10, "a")),
            c.op(2, CONSISTENT, (6, 7), done(12, "b")),
            // From the cache: stale is allowed.
            c.op(0, CACHED, (8, 9), done(10, "a")),
            // Lost in a partition: it may have happened.
            c.op(1, put("c"), (10, 20), Outcome::Indeterminate),
            c.op(0, CONSISTENT, (21, 22), done(15, "c")),
            c.op(1, put("d"), (23, 24), Outcome::Refused),
        ];
        assert_eq!(check_reads(&history), Vec::<String>::new());
        let last = HashMap::from([("k".to_string(), Some((15, "c".to_string())))]);
        assert_eq!(check_writes(&history, &last), Vec::<String>::new());
    }

    #[test]
    fn stale_reads_invented_values_and_lost_writes_fail() {
        let c = Clock(Instant::now());
        let history = vec![
            c.op(0, Kind::Create("a".into()), (0, 1), done(10, "a")),
            c.op(1, put("b"), (2, 3), done(12, "b")),
            // After the write was acknowledged, a consistent read of the old.
            c.op(2, CONSISTENT, (4, 5), done(10, "a")),
            // A value nobody wrote, and a version that is not its write's.
            c.op(2, CACHED, (6, 7), done(11, "z")),
            c.op(2, CACHED, (8, 9), done(11, "b")),
            // A refused write's value.
            c.op(1, put("r"), (10, 11), Outcome::Refused),
            c.op(0, CACHED, (12, 13), done(13, "r")),
        ];
        let failures = check_reads(&history);
        assert_eq!(failures.len(), 5, "{failures:#?}");
        assert!(
            failures
                .iter()
                .any(|f| f.contains("seen at versions 12 and 11"))
        );
        assert!(failures.iter().any(|f| f.contains("(stale)")));
        assert!(failures.iter().any(|f| f.contains("never written")));
        assert!(
            failures
                .iter()
                .any(|f| f.contains("its write was given 12"))
        );
        assert!(failures.iter().any(|f| f.contains("was refused")));

        let older = HashMap::from([("k".to_string(), Some((10, "a".to_string())))]);
        assert_eq!(check_writes(&history, &older).len(), 1);
        let gone = HashMap::from([("k".to_string(), None)]);
        assert!(check_writes(&history, &gone)[0].contains("now gone"));
    }

    #[test]
    fn a_watch_delivers_every_acknowledged_write_in_order() {
        let c = Clock(Instant::now());
        let history = vec![
            c.op(0, Kind::Create("a".into()), (0, 1), done(10, "a")),
            c.op(1, put("b"), (2, 3), done(12, "b")),
            c.op(1, put("c"), (4, 5), done(14, "c")),
            c.op(1, put("d"), (6, 7), done(16, "d")),
        ];
        let event = |rv, value: &str| Seen::Event("k".into(), rv, value.into());
        let good = [
            Seen::Started(10),
            event(12, "b"),
            Seen::Bookmark(13),
            Seen::Started(13),
            event(14, "c"),
            Seen::Gone,
            Seen::Started(15),
            event(16, "d"),
        ];
        assert_eq!(check_watch(&history, 0, &good), Vec::<String>::new());

        // A gap, a repeat, a bookmark behind, a resume elsewhere.
        let gap = [Seen::Started(10), event(14, "c")];
        assert!(check_watch(&history, 0, &gap)[0].contains("version 12 was never delivered"));
        let repeated = [
            Seen::Started(10),
            event(12, "b"),
            event(12, "b"),
            event(14, "c"),
        ];
        assert!(check_watch(&history, 0, &repeated)[0].contains("out of order or repeated"));
        let behind = [Seen::Started(10), event(12, "b"), Seen::Bookmark(11)];
        assert!(check_watch(&history, 0, &behind)[0].contains("a bookmark at 11"));
        let elsewhere = [
            Seen::Started(10),
            event(12, "b"),
            Seen::Started(13),
            event(14, "c"),
        ];
        assert!(check_watch(&history, 0, &elsewhere)[0].contains("resumed from 13"));
        let invented = [Seen::Started(10), event(12, "z")];
        assert!(!check_watch(&history, 0, &invented).is_empty());
    }

    #[test]
    fn a_consistent_read_never_goes_back() {
        let c = Clock(Instant::now());
        let history = vec![
            c.op(0, Kind::Create("a".into()), (0, 1), done(10, "a")),
            c.op(1, put("b"), (2, 30), Outcome::Indeterminate),
            c.op(2, CONSISTENT, (3, 4), done(12, "b")),
            c.op(3, CONSISTENT, (5, 6), done(10, "a")),
        ];
        let failures = check_reads(&history);
        assert_eq!(failures.len(), 1, "{failures:#?}");
        assert!(failures[0].contains("client 3"), "{failures:#?}");
    }

    #[test]
    fn a_missing_key_needs_a_delete_and_a_deleted_key_stays_gone() {
        let c = Clock(Instant::now());
        let create = |v: &str| Kind::Create(v.into());
        let history = vec![
            c.op(0, create("a"), (0, 1), done(10, "a")),
            c.op(1, put("b"), (2, 3), done(12, "b")),
            // The delete answers the object it removed.
            c.op(2, Kind::Delete, (4, 5), done(12, "b")),
            c.op(3, CONSISTENT, (6, 7), Outcome::Done(None)),
            c.op(0, create("c"), (8, 9), done(15, "c")),
            c.op(3, CONSISTENT, (10, 11), done(15, "c")),
        ];
        assert_eq!(check_reads(&history), Vec::<String>::new());
        let last = HashMap::from([("k".to_string(), Some((15, "c".to_string())))]);
        assert_eq!(check_writes(&history, &last), Vec::<String>::new());
        let event = |rv, value: &str| Seen::Event("k".into(), rv, value.into());
        let seen = [
            Seen::Started(10),
            event(12, "b"),
            Seen::Deleted("k".into(), 13),
            Seen::Bookmark(14),
            event(15, "c"),
        ];
        assert_eq!(check_watch(&history, 0, &seen), Vec::<String>::new());

        // Missing after a write no delete could follow: stale.
        let mut stale = history.clone();
        stale.push(c.op(3, CONSISTENT, (12, 13), Outcome::Done(None)));
        let failures = check_reads(&stale);
        assert_eq!(failures.len(), 1, "{failures:#?}");
        assert!(failures[0].contains("found no object"), "{failures:#?}");
        // The deleted version read after the delete was acknowledged.
        let mut undead = history[..3].to_vec();
        undead.push(c.op(3, CONSISTENT, (6, 7), done(12, "b")));
        assert!(check_reads(&undead)[0].contains("(stale)"));
        // Still there at the end: a lost delete; gone without one: a lost write.
        let kept = HashMap::from([("k".to_string(), Some((12, "b".to_string())))]);
        assert!(check_writes(&history[..3], &kept)[0].contains("lost delete"));
        let gone = HashMap::from([("k".to_string(), None)]);
        assert!(check_writes(&history[..2], &gone)[0].contains("no delete followed"));
        // A delete out of order, and one nobody sent.
        let late = [
            Seen::Started(10),
            event(12, "b"),
            Seen::Deleted("k".into(), 11),
        ];
        assert!(check_watch(&history, 0, &late)[0].contains("out of order"));
        let invented = [Seen::Started(10), Seen::Deleted("k".into(), 11)];
        assert!(check_watch(&history[..2], 0, &invented)[0].contains("no delete of it"));
    }

    #[test]
    fn a_conditional_write_replaces_exactly_the_version_it_names() {
        let c = Clock(Instant::now());
        let conditional = |value: &str, rv| Kind::Update {
            value: value.into(),
            precondition: Some(rv),
        };
        let history = vec![
            c.op(0, Kind::Create("a".into()), (0, 1), done(10, "a")),
            c.op(1, conditional("b", 10), (2, 3), done(12, "b")),
            c.op(2, conditional("c", 10), (4, 5), Outcome::Refused),
            c.op(2, conditional("d", 12), (6, 7), done(14, "d")),
        ];
        assert_eq!(check_conditional_writes(&history), Vec::<String>::new());
        // Version 12 came between 10 and the write given 13: lost.
        let mut lost = history.clone();
        lost.push(c.op(3, conditional("e", 10), (8, 9), done(16, "e")));
        let failures = check_conditional_writes(&lost);
        assert!(
            failures.iter().any(|f| f.contains("saw version 12")),
            "{failures:#?}"
        );
        // Over a deleted version.
        let mut deleted = history[..2].to_vec();
        deleted.push(c.op(3, Kind::Delete, (4, 5), done(12, "b")));
        deleted.push(c.op(2, conditional("f", 12), (6, 7), done(14, "f")));
        assert!(check_conditional_writes(&deleted)[0].contains("deleted (lost update)"));
    }

    #[test]
    fn an_indeterminate_write_happens_once_for_everyone() {
        let c = Clock(Instant::now());
        let history = vec![
            c.op(0, Kind::Create("a".into()), (0, 1), done(10, "a")),
            c.op(1, put("b"), (2, 30), Outcome::Indeterminate),
            c.op(2, CACHED, (3, 4), done(12, "b")),
            c.op(3, CACHED, (5, 6), done(12, "b")),
        ];
        assert_eq!(check_reads(&history), Vec::<String>::new());
        let mut twice = history.clone();
        twice.push(c.op(3, CACHED, (7, 8), done(15, "b")));
        let failures = check_reads(&twice);
        assert!(
            failures
                .iter()
                .any(|f| f.contains("seen at versions 12 and 15")),
            "{failures:#?}"
        );
    }
}
