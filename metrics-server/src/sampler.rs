//! The host's real usage, sampled from `/proc`: CPU from `/proc/stat`
//! deltas between two samples, memory working set from `/proc/meminfo`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use generic_server::Error;
use generic_server::health::HealthCheck;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::sync::watch;

/// The time counters of `/proc/stat`'s aggregate `cpu` line (USER_HZ ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// Ticks spent neither idle nor waiting for I/O.
    pub busy: u64,
    /// All ticks (user, nice, system, idle, iowait, irq, softirq, steal).
    pub total: u64,
    /// Online CPUs (`cpuN` lines).
    pub cores: u64,
}

/// Parses `/proc/stat`.
pub fn parse_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find_map(|l| l.strip_prefix("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = ticks.iter().sum();
    let idle = ticks.get(3)? + ticks.get(4).unwrap_or(&0);
    let cores = text
        .lines()
        .filter(|l| {
            l.strip_prefix("cpu")
                .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count();
    Some(CpuTimes {
        busy: total - idle,
        total,
        cores: cores.max(1) as u64,
    })
}

/// CPU usage between two samples, in nanocores: the busy share of all
/// ticks, times the number of CPUs.
pub fn nanocores(before: CpuTimes, after: CpuTimes) -> u64 {
    let total = after.total.saturating_sub(before.total);
    let busy = after.busy.saturating_sub(before.busy).min(total);
    if total == 0 {
        0
    } else {
        (busy as u128 * after.cores as u128 * 1_000_000_000 / total as u128) as u64
    }
}

/// The memory working set in KiB, `MemTotal - MemAvailable`, from `/proc/meminfo`.
pub fn working_set_kib(meminfo: &str) -> Option<u64> {
    let field = |name: &str| {
        meminfo.lines().find_map(|l| {
            l.strip_prefix(name)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    Some(field("MemTotal:")?.saturating_sub(field("MemAvailable:")?))
}

/// One measurement of the host over a window.
#[derive(Debug, Clone)]
pub struct Usage {
    /// The end of the window.
    pub timestamp: Time,
    /// The window's length.
    pub window: Duration,
    /// CPU used over the window, in nanocores.
    pub cpu_nanocores: u64,
    /// Memory working set at the end of the window, in KiB.
    pub memory_kib: u64,
    taken: Instant,
}

/// The current time, as metadata carries it.
pub fn now() -> Time {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap_or_default())
}

/// The latest measurement (none until two samples have been taken).
pub type Latest = watch::Receiver<Option<Usage>>;

fn read_cpu() -> std::io::Result<(Instant, CpuTimes)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    Ok((
        Instant::now(),
        parse_stat(&stat).ok_or_else(|| std::io::Error::other("unexpected /proc/stat"))?,
    ))
}

fn read_memory() -> std::io::Result<u64> {
    working_set_kib(&std::fs::read_to_string("/proc/meminfo")?)
        .ok_or_else(|| std::io::Error::other("unexpected /proc/meminfo"))
}

/// Samples the host every `resolution` (the first window is one second, so
/// figures exist soon after start).
pub fn start(resolution: Duration) -> Latest {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        let mut before = read_cpu()
            .inspect_err(|e| tracing::warn!(error = %e, "cannot read CPU usage"))
            .ok();
        let mut wait = resolution.min(Duration::from_secs(1));
        loop {
            tokio::time::sleep(wait).await;
            wait = resolution;
            let after = read_cpu().and_then(|cpu| Ok((cpu, read_memory()?)));
            match (before, &after) {
                (Some((t0, c0)), Ok(((t1, c1), memory_kib))) => {
                    let usage = Usage {
                        timestamp: now(),
                        window: t1.duration_since(t0),
                        cpu_nanocores: nanocores(c0, *c1),
                        memory_kib: *memory_kib,
                        taken: *t1,
                    };
                    tx.send_replace(Some(usage));
                }
                (_, Err(e)) => tracing::warn!(error = %e, "cannot read the host's usage"),
                (None, Ok(_)) => {}
            }
            before = after.ok().map(|(cpu, _)| cpu);
        }
    });
    rx
}

/// Healthy while measurements are timely.
pub fn check(latest: Latest, resolution: Duration) -> HealthCheck {
    Arc::new(move || {
        let age = latest.borrow().as_ref().map(|u| u.taken.elapsed());
        Box::pin(async move {
            match age {
                Some(age) if age <= resolution * 3 + Duration::from_secs(1) => Ok(()),
                Some(age) => Err(Error::NotReady(format!(
                    "the last measurement is {}s old",
                    age.as_secs()
                ))),
                None => Err(Error::NotReady("no measurement yet".into())),
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_1: &str = "cpu  100 5 50 1000 20 3 2 0 0 0
cpu0 50 2 25 500 10 2 1 0 0 0
cpu1 50 3 25 500 10 1 1 0 0 0
intr 12345 0 0
ctxt 5678
btime 1700000000
processes 42
";
    // 2 CPUs, 200 more ticks: 50 busy (user 30, system 15, irq 5), 150 idle or iowait.
    const STAT_2: &str = "cpu  130 5 65 1140 30 8 2 0 0 0
cpu0 65 2 32 570 15 5 1 0 0 0
cpu1 65 3 33 570 15 3 1 0 0 0
intr 23456 0 0
";

    const MEMINFO: &str = "MemTotal:       16314660 kB
MemFree:         1134484 kB
MemAvailable:   10751568 kB
Buffers:          476524 kB
Cached:          8705228 kB
";

    #[test]
    fn stat_counters() {
        assert_eq!(
            parse_stat(STAT_1),
            Some(CpuTimes {
                busy: 160,
                total: 1180,
                cores: 2
            })
        );
        assert_eq!(parse_stat("intr 1 2 3\n"), None);
        assert_eq!(parse_stat("cpu  1 2 x 4\n"), None);
    }

    #[test]
    fn cpu_usage_in_nanocores() {
        let (a, b) = (parse_stat(STAT_1).unwrap(), parse_stat(STAT_2).unwrap());
        // 50 of 200 ticks busy on 2 CPUs: half a core.
        assert_eq!(nanocores(a, b), 500_000_000);
        assert_eq!(nanocores(a, a), 0);
    }

    #[test]
    fn memory_working_set() {
        assert_eq!(working_set_kib(MEMINFO), Some(16314660 - 10751568));
        assert_eq!(working_set_kib("MemTotal: 10 kB\n"), None);
    }

    #[test]
    fn this_host_reads() {
        let (_, cpu) = read_cpu().unwrap();
        assert!(cpu.total > cpu.busy && cpu.cores >= 1);
        assert!(read_memory().unwrap() > 0);
    }
}
