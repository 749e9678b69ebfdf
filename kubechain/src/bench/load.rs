//! Closed-loop load: a fixed number of workers, each on its own connection,
//! repeating one operation for a fixed time. Raw etcd and the front door go
//! through the same driver, so they are measured the same way.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;

/// How many error messages a phase keeps (it counts them all).
const KEPT_ERRORS: usize = 5;

/// What one phase did.
#[derive(Debug, Default, Clone)]
pub struct Throughput {
    /// Operations that succeeded inside the timed window.
    pub ops: u64,
    /// The timed window, from start to the last worker's last answer.
    pub elapsed: Duration,
    /// Operations that failed (warm-up included).
    pub failed: u64,
    /// The first few failures.
    pub errors: Vec<String>,
}

impl Throughput {
    /// Successful operations per second.
    pub fn per_second(&self) -> f64 {
        if self.elapsed.is_zero() {
            0.0
        } else {
            self.ops as f64 / self.elapsed.as_secs_f64()
        }
    }

    /// Notes in `errors` what failed in the phase `what`, if anything did.
    pub fn report_failures(&self, what: &str, errors: &mut Vec<String>) {
        if self.failed > 0 {
            errors.push(format!(
                "{what}: {} failed; first: {}",
                self.failed,
                self.errors.join(" | ")
            ));
        }
    }

    /// Adds a later run of the same load: its operations and its time.
    pub fn follow(&mut self, later: Throughput) {
        let elapsed = self.elapsed + later.elapsed;
        self.absorb(later);
        self.elapsed = elapsed;
    }

    fn absorb(&mut self, other: Throughput) {
        self.ops += other.ops;
        self.elapsed = self.elapsed.max(other.elapsed);
        self.failed += other.failed;
        for e in other.errors {
            if self.errors.len() < KEPT_ERRORS {
                self.errors.push(e);
            }
        }
    }

    fn fail(&mut self, error: anyhow::Error) {
        self.failed += 1;
        if self.errors.len() < KEPT_ERRORS {
            self.errors.push(format!("{error:#}"));
        }
    }
}

/// Runs `op` on every client for `duration`, after one untimed call per
/// client (which opens its connection). `op` gets a client and a number
/// unique across the phase (for object names).
pub async fn closed_loop<C, F, Fut>(clients: Vec<C>, duration: Duration, op: F) -> Throughput
where
    C: Clone + Send + Sync + 'static,
    F: Fn(C, u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    let seq = Arc::new(AtomicU64::new(0));
    let mut total = Throughput::default();
    for client in &clients {
        if let Err(e) = op(client.clone(), seq.fetch_add(1, Ordering::Relaxed)).await {
            total.fail(e.context("warm-up"));
        }
    }
    let start = Instant::now();
    let deadline = start + duration;
    let workers: Vec<_> = clients
        .into_iter()
        .map(|client| {
            let (op, seq) = (op.clone(), seq.clone());
            tokio::spawn(async move {
                let mut mine = Throughput::default();
                while Instant::now() < deadline {
                    match op(client.clone(), seq.fetch_add(1, Ordering::Relaxed)).await {
                        Ok(()) => mine.ops += 1,
                        Err(e) => mine.fail(e),
                    }
                }
                mine.elapsed = start.elapsed();
                mine
            })
        })
        .collect();
    for worker in workers {
        match worker.await {
            Ok(done) => total.absorb(done),
            Err(e) => total.fail(e.into()),
        }
    }
    total
}

/// Runs `op` once for each of `count` items, `concurrency` at a time (setup
/// work, not timed); the first failure is returned.
pub async fn for_each<C, F, Fut>(clients: &[C], count: usize, op: F) -> Result<()>
where
    C: Clone + Send + Sync + 'static,
    F: Fn(C, u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    let next = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = clients
        .iter()
        .cloned()
        .map(|client| {
            let (op, next) = (op.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count as u64 {
                        return Ok::<(), anyhow::Error>(());
                    }
                    op(client.clone(), i).await?;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await??;
    }
    Ok(())
}
