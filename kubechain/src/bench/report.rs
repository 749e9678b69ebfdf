//! The bench's table: each metric for raw etcd and through kubechain, the
//! ratio, and the target of the performance issue with PASS or MISS.

use std::fmt::Write;
use std::time::{Duration, Instant};

use super::load::Throughput;
use super::target::{cpu_time, memory};
use super::watch::WatchResult;

const MIB: f64 = 1024.0 * 1024.0;

/// One line of the table.
struct Row {
    metric: String,
    etcd: String,
    chain: String,
    ratio: String,
    target: String,
    result: &'static str,
}

/// A row of kubechain's CPU per operation as a multiple of a floor's, with
/// that multiple; reported unless the caller sets a target.
fn times_row(metric: &str, base_name: &str, base_us: f64, chain_us: f64) -> (Row, f64) {
    let ratio = if base_us > 0.0 {
        chain_us / base_us
    } else {
        0.0
    };
    let row = Row {
        metric: metric.to_string(),
        etcd: format!("{base_name}: {base_us:.0}"),
        chain: format!("{chain_us:.0}"),
        ratio: format!("{ratio:.2}×"),
        target: "reported".to_string(),
        result: "INFO",
    };
    (row, ratio)
}
/// The table, filled phase by phase.
#[derive(Default)]
pub struct Table {
    rows: Vec<Row>,
}

fn verdict(pass: bool, errors: bool) -> &'static str {
    match (errors, pass) {
        (true, _) => "ERROR",
        (false, true) => "PASS",
        (false, false) => "MISS",
    }
}

impl Table {
    /// Operations per second of the same work on both sides; the target is
    /// kubechain ≥ `min_ratio` × etcd.
    pub fn throughput(
        &mut self,
        metric: &str,
        etcd: &Throughput,
        chain: &Throughput,
        min_ratio: f64,
    ) {
        let ratio = if etcd.per_second() > 0.0 {
            chain.per_second() / etcd.per_second()
        } else {
            0.0
        };
        self.rows.push(Row {
            metric: metric.to_string(),
            etcd: format!("{:.0}", etcd.per_second()),
            chain: format!("{:.0}", chain.per_second()),
            ratio: format!("{ratio:.2}×"),
            target: format!("≥ {min_ratio}× etcd"),
            result: verdict(ratio >= min_ratio, etcd.failed + chain.failed > 0),
        });
    }

    /// An aggregated server's GETs through the aggregator's proxy against
    /// the same GETs sent to it directly (no target: the cost of the proxy).
    pub fn proxy(&mut self, metric: &str, direct: &Throughput, proxied: &Throughput) {
        let ratio = if direct.per_second() > 0.0 {
            proxied.per_second() / direct.per_second()
        } else {
            0.0
        };
        self.rows.push(Row {
            metric: metric.to_string(),
            etcd: format!("direct: {:.0}", direct.per_second()),
            chain: format!("{:.0}", proxied.per_second()),
            ratio: format!("{ratio:.2}×"),
            target: "-".into(),
            result: if direct.failed + proxied.failed > 0 {
                "ERROR"
            } else {
                ""
            },
        });
    }

    /// The same work done two ways through kubechain (`base`, e.g. the
    /// admin's, against `other`); the target is other ≥ `min_ratio` × base.
    pub fn versus(
        &mut self,
        metric: &str,
        base_name: &str,
        base: &Throughput,
        other: &Throughput,
        min_ratio: f64,
    ) {
        let ratio = if base.per_second() > 0.0 {
            other.per_second() / base.per_second()
        } else {
            0.0
        };
        self.rows.push(Row {
            metric: metric.to_string(),
            etcd: format!("{base_name}: {:.0}", base.per_second()),
            chain: format!("{:.0}", other.per_second()),
            ratio: format!("{ratio:.2}×"),
            target: format!("≥ {min_ratio}× {base_name}"),
            result: verdict(ratio >= min_ratio, base.failed + other.failed > 0),
        });
    }

    /// A latency without and with something (`base_name` names its
    /// absence); the target is other ≤ `max_ratio` × base.
    pub fn latency_ratio(
        &mut self,
        metric: &str,
        base_name: &str,
        base: Duration,
        other: Duration,
        max_ratio: f64,
    ) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let ratio = if base.is_zero() {
            0.0
        } else {
            ms(other) / ms(base)
        };
        self.rows.push(Row {
            metric: metric.to_string(),
            etcd: format!("{base_name}: {:.1} ms", ms(base)),
            chain: format!("{:.1} ms", ms(other)),
            ratio: format!("{ratio:.2}×"),
            target: format!("≤ {max_ratio}× {base_name}"),
            result: verdict(ratio <= max_ratio && !base.is_zero(), false),
        });
    }

    /// A figure reported as it is, without a target.
    pub fn note(&mut self, metric: &str, value: &str) {
        self.rows.push(Row {
            metric: metric.to_string(),
            etcd: "-".to_string(),
            chain: value.to_string(),
            ratio: "-".to_string(),
            target: "reported".to_string(),
            result: "INFO",
        });
    }

    /// A cost per operation without and with something (`base_name`
    /// names its absence), reported without a target.
    pub fn cost(&mut self, metric: &str, base_name: &str, base_us: f64, other_us: f64) {
        self.rows.push(Row {
            metric: metric.to_string(),
            etcd: format!("{base_name}: {base_us:.0} µs"),
            chain: format!("{other_us:.0} µs"),
            ratio: format!("{:+.0} µs", other_us - base_us),
            target: "reported".to_string(),
            result: "INFO",
        });
    }

    /// kubechain's CPU per operation as a multiple of another floor's
    /// (`base_name`), reported without a target.
    pub fn multiple(&mut self, metric: &str, base_name: &str, base_us: f64, chain_us: f64) {
        let (row, _) = times_row(metric, base_name, base_us, chain_us);
        self.rows.push(row);
    }

    /// kubechain's CPU per operation against a floor's (`base_name`: the
    /// same request answered by the least the design needs) in the same
    /// run; the target is at most `max_times` × the floor.
    pub fn floor(
        &mut self,
        metric: &str,
        base_name: &str,
        base_us: f64,
        chain_us: f64,
        max_times: f64,
        errors: bool,
    ) {
        let (mut row, ratio) = times_row(metric, base_name, base_us, chain_us);
        row.target = format!("≤ {max_times}× {base_name}");
        row.result = verdict(ratio <= max_times, errors);
        self.rows.push(row);
    }

    /// The spread of a cost per operation over repeated slices of one
    /// sitting, kubechain's against the floor's (reported).
    pub fn spread(&mut self, metric: &str, floor: &[f64], chain: &[f64]) {
        let range = |samples: &[f64]| {
            let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
            let max = samples.iter().copied().fold(0.0, f64::max);
            (min, max, if min > 0.0 { max / min } else { 0.0 })
        };
        let ((floor_min, floor_max, floor_x), (min, max, x)) = (range(floor), range(chain));
        self.rows.push(Row {
            metric: metric.to_string(),
            etcd: format!("floor: {floor_min:.0}–{floor_max:.0} ({floor_x:.2}×)"),
            chain: format!("{min:.0}–{max:.0} ({x:.2}×)"),
            ratio: format!("{:.2}×", if floor_x > 0.0 { x / floor_x } else { 0.0 }),
            target: "reported".to_string(),
            result: "INFO",
        });
    }

    /// Watch delivery latency (kubechain only); the target is p99 < `p99_max`.
    pub fn watch(&mut self, result: &WatchResult, p99_max: Duration) {
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
        let errors = result.failed > 0;
        let metric = |q: &str| format!("watch {q}, {} watchers", result.watchers);
        self.rows.push(Row {
            metric: metric("p50"),
            etcd: "-".into(),
            chain: ms(result.p50),
            ratio: "-".into(),
            target: "-".into(),
            result: if errors { "ERROR" } else { "" },
        });
        self.rows.push(Row {
            metric: metric("p99"),
            etcd: "-".into(),
            chain: format!("{} (max {})", ms(result.p99), ms(result.max)),
            ratio: "-".into(),
            target: format!("< {}", ms(p99_max)),
            result: verdict(result.p99 < p99_max, errors),
        });
    }

    /// Resident memory of a process (now and peak); etcd's goes in the etcd
    /// column. `json` makes it the core-server row: RSS < `max_times` × JSON.
    pub fn memory(
        &mut self,
        name: &str,
        memory: Result<(u64, u64), String>,
        json: Option<(u64, f64)>,
    ) {
        let text = match &memory {
            Ok((rss, peak)) => format!(
                "{:.1} MiB (peak {:.1})",
                *rss as f64 / MIB,
                *peak as f64 / MIB
            ),
            Err(why) => format!("unknown: {why}"),
        };
        let (etcd, chain) = if name == "etcd" {
            (text, "-".to_string())
        } else {
            ("-".to_string(), text)
        };
        let mut row = Row {
            metric: format!("memory {name}"),
            etcd,
            chain,
            ratio: "-".into(),
            target: "-".into(),
            result: "",
        };
        if let Some((json, max_times)) = json {
            row.target = format!("< {max_times}× JSON");
            if let Ok((rss, _)) = memory {
                let times = rss as f64 / json.max(1) as f64;
                row.ratio = format!("{times:.2}× JSON");
                row.result = verdict(times < max_times, false);
            }
        }
        self.rows.push(row);
    }

    /// How much the core server grew while the run stored `json` bytes of
    /// objects (before any watcher), against `max_times` that JSON.
    pub fn cache_growth(&mut self, before: u64, after: u64, json: u64, max_times: f64) {
        let grown = after.saturating_sub(before);
        let times = grown as f64 / json.max(1) as f64;
        self.rows.push(Row {
            metric: "core-server growth for its cache".into(),
            etcd: format!("{:.1} MiB JSON", json as f64 / MIB),
            chain: format!(
                "+{:.1} MiB ({:.1} → {:.1})",
                grown as f64 / MIB,
                before as f64 / MIB,
                after as f64 / MIB
            ),
            ratio: format!("{times:.2}× JSON"),
            target: format!("< {max_times}× JSON"),
            result: verdict(times < max_times, false),
        });
    }

    /// The JSON size of the objects the servers cache (all values under the
    /// cluster's etcd prefix).
    pub fn json_size(&mut self, bytes: u64, objects: u64) {
        self.rows.push(Row {
            metric: "JSON of cached objects".into(),
            etcd: format!("{:.1} MiB", bytes as f64 / MIB),
            chain: format!("{objects} objects"),
            ratio: "-".into(),
            target: "-".into(),
            result: "",
        });
    }

    /// The table as text, columns aligned.
    pub fn render(&self) -> String {
        let header = Row {
            metric: "metric".into(),
            etcd: "raw etcd".into(),
            chain: "through kubechain".into(),
            ratio: "ratio".into(),
            target: "target".into(),
            result: "result",
        };
        let all: Vec<&Row> = std::iter::once(&header).chain(&self.rows).collect();
        let width =
            |f: fn(&Row) -> &str| all.iter().map(|r| f(r).chars().count()).max().unwrap_or(0);
        let widths = [
            width(|r| &r.metric),
            width(|r| &r.etcd),
            width(|r| &r.chain),
            width(|r| &r.ratio),
            width(|r| &r.target),
        ];
        let mut out = String::new();
        for (i, row) in all.iter().enumerate() {
            let cells = [&row.metric, &row.etcd, &row.chain, &row.ratio, &row.target];
            let mut line = String::new();
            for (j, (cell, w)) in cells.iter().zip(widths).enumerate() {
                let pad = w - cell.chars().count();
                // Text left, numbers right.
                if j == 0 || j == 4 {
                    let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
                } else {
                    let _ = write!(line, "{}{cell}  ", " ".repeat(pad));
                }
            }
            line.push_str(row.result);
            out.push_str(line.trim_end());
            out.push('\n');
            if i == 0 {
                let total = widths.iter().sum::<usize>() + 2 * widths.len() + 6;
                out.push_str(&"-".repeat(total));
                out.push('\n');
            }
        }
        out
    }
}

/// CPU time each process used in each phase, to see who had the cores (the
/// bench shares them with the servers).
pub struct CpuTable {
    /// The bench itself (`None`) and each server whose process is known.
    processes: Vec<(String, Option<u32>)>,
    rows: Vec<CpuRow>,
}

/// One phase: its wall time and, per process, the CPU it used and the
/// resident memory it ended with.
struct CpuRow {
    phase: String,
    wall: Duration,
    used: Vec<(Option<Duration>, Option<u64>)>,
}

/// CPU times at the start of a phase.
pub struct CpuSnapshot {
    at: Instant,
    times: Vec<Option<Duration>>,
}

impl CpuTable {
    /// A table for the bench and the servers with a known pid.
    pub fn new(servers: &[(&str, Result<u32, String>)]) -> CpuTable {
        let mut processes = vec![("bench".to_string(), None)];
        processes.extend(
            servers
                .iter()
                .filter_map(|(name, pid)| Some((name.to_string(), Some(*pid.as_ref().ok()?)))),
        );
        CpuTable {
            processes,
            rows: Vec::new(),
        }
    }

    /// The CPU times now.
    pub fn snapshot(&self) -> CpuSnapshot {
        CpuSnapshot {
            at: Instant::now(),
            times: self
                .processes
                .iter()
                .map(|(_, pid)| cpu_time(*pid))
                .collect(),
        }
    }

    /// Records what each process used since `before`; a phase recorded
    /// again (run in slices) adds to its row.
    pub fn record(&mut self, phase: &str, before: CpuSnapshot) {
        let used = self
            .snapshot()
            .times
            .into_iter()
            .zip(before.times)
            .map(|(after, before)| Some(after?.saturating_sub(before?)))
            .zip(&self.processes)
            .map(|(cpu, (_, pid))| {
                let rss = memory(pid.unwrap_or_else(std::process::id)).map(|(rss, _)| rss);
                (cpu, rss)
            })
            .collect();
        let wall = before.at.elapsed();
        if let Some(row) = self.rows.iter_mut().find(|row| row.phase == phase) {
            row.wall += wall;
            for ((cpu, rss), (more, now)) in row.used.iter_mut().zip(used) {
                *cpu = cpu.zip(more).map(|(cpu, more)| cpu + more);
                *rss = now;
            }
            return;
        }
        self.rows.push(CpuRow {
            phase: phase.to_string(),
            wall,
            used,
        });
    }

    /// The CPU `processes` used together since `before`.
    pub fn used_since(&self, before: &CpuSnapshot, processes: &[&str]) -> Option<Duration> {
        let now = self.snapshot();
        let mut used = Duration::ZERO;
        for process in processes {
            let index = self
                .processes
                .iter()
                .position(|(name, _)| name == process)?;
            let (after, before) = (now.times.get(index)?, before.times.get(index)?);
            used += after.as_ref()?.saturating_sub(*before.as_ref()?);
        }
        Some(used)
    }

    /// The CPU `process` used per operation in `phase`, `ops` operations.
    pub fn cpu_per_op(&self, phase: &str, process: &str, ops: u64) -> Option<Duration> {
        let index = self
            .processes
            .iter()
            .position(|(name, _)| name == process)?;
        let row = self.rows.iter().find(|row| row.phase == phase)?;
        let (cpu, _) = row.used.get(index)?;
        cpu.map(|cpu| cpu / u32::try_from(ops.max(1)).unwrap_or(u32::MAX))
    }

    /// CPU µs per operation of each process in each phase given with its
    /// operation count, and the front door and core-server together against
    /// `target` µs where one is given.
    pub fn per_op(&self, phases: &[(&str, u64, Option<f64>)]) -> String {
        let mut out =
            "CPU µs per operation, per process (CPU used in the phase ÷ operations done)\n"
                .to_string();
        let mut header = format!("{:<32}", "phase");
        for (name, _) in &self.processes {
            let _ = write!(header, " {:>18}", name);
        }
        let _ = write!(header, " {:>26}", "aggregator + core-server");
        out.push_str(&header);
        out.push('\n');
        for (phase, ops, target) in phases {
            let Some(row) = self.rows.iter().find(|row| row.phase == *phase) else {
                continue;
            };
            let mut line = format!("{phase:<32}");
            for (cpu, _) in &row.used {
                let us = cpu.map_or("-".to_string(), |c| {
                    format!("{:.0}", c.as_secs_f64() * 1e6 / (*ops).max(1) as f64)
                });
                let _ = write!(line, " {us:>18}");
            }
            let us = |process: &str| {
                self.cpu_per_op(phase, process, *ops)
                    .map(|c| c.as_secs_f64() * 1e6)
            };
            let both = us("aggregator").zip(us("core-server")).map(|(a, c)| a + c);
            let judged = match (both, target) {
                (Some(both), Some(target)) => format!(
                    "{both:.0} (≤ {target:.0}: {})",
                    if both <= *target { "PASS" } else { "MISS" }
                ),
                (Some(both), None) => format!("{both:.0}"),
                _ => "-".to_string(),
            };
            let _ = write!(line, " {judged:>26}");
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    /// The table as text.
    pub fn render(&self, cores: usize) -> String {
        let mut out = format!(
            "CPU seconds used per phase ({cores} cores: at most {cores} s per second of wall time), \
             and resident MiB at its end\n"
        );
        let mut header = format!("{:<32}{:>6}", "phase", "wall");
        for (name, _) in &self.processes {
            let _ = write!(header, " {:>18}", name);
        }
        out.push_str(&header);
        out.push('\n');
        for row in &self.rows {
            let mut line = format!("{:<32}{:>6.1}", row.phase, row.wall.as_secs_f64());
            for (cpu, rss) in &row.used {
                let cpu = cpu.map_or("-".to_string(), |c| format!("{:.1}", c.as_secs_f64()));
                let rss = rss.map_or("-".to_string(), |r| format!("{:.1}", r as f64 / MIB));
                let _ = write!(line, " {:>18}", format!("{cpu} / {rss}"));
            }
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_aligned_and_judged() {
        let mut table = Table::default();
        let etcd = Throughput {
            ops: 1000,
            elapsed: Duration::from_secs(1),
            ..Default::default()
        };
        let chain = Throughput {
            ops: 800,
            elapsed: Duration::from_secs(1),
            ..Default::default()
        };
        table.throughput("creates/s", &etcd, &chain, 0.7);
        table.memory(
            "core-server",
            Ok((30 << 20, 40 << 20)),
            Some((20 << 20, 3.0)),
        );
        let text = table.render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("metric"));
        assert!(
            lines[2].contains("0.80×") && lines[2].ends_with("PASS"),
            "{text}"
        );
        assert!(
            lines[3].contains("1.50× JSON") && lines[3].ends_with("PASS"),
            "{text}"
        );
    }
}
