//! Watch delivery latency: many watchers, each on its own connection, watch
//! one namespace's configmaps from the same resourceVersion while a writer
//! creates configmaps at a steady rate, each carrying the wall-clock time it
//! was sent. Every watcher must receive every event; the latency of an event
//! is its receive time minus its send time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};

use crate::client::{Api, Credentials};

/// The data key that carries the send time (Unix nanoseconds, as a string).
const SENT_AT: &[u8] = b"\"sentAt\":\"";
/// How many watchers open their connection at once.
const CONNECTING: usize = 64;
/// How many writes may be in flight (the writer keeps its rate even when
/// one write is slow).
const WRITES_IN_FLIGHT: usize = 64;

/// What a watch phase is asked to do.
pub struct WatchPlan {
    /// Concurrent watchers.
    pub watchers: usize,
    /// Events per second.
    pub rate: u32,
    /// How long the writer writes.
    pub duration: Duration,
    /// How long watchers may take after the last write before missing
    /// events count as lost.
    pub grace: Duration,
    /// A process whose resident memory is read once every watch is open
    /// (the front door's, for its memory per watcher).
    pub sample: Option<u32>,
}

/// What a watch phase measured.
#[derive(Debug, Default)]
pub struct WatchResult {
    /// Watchers that were asked for.
    pub watchers: usize,
    /// Events written successfully.
    pub written: usize,
    /// Events delivered, summed over watchers.
    pub delivered: u64,
    /// Events that some watcher never received (summed over watchers).
    pub lost: u64,
    /// Median delivery latency.
    pub p50: Duration,
    /// 99th percentile delivery latency.
    pub p99: Duration,
    /// Slowest delivery.
    pub max: Duration,
    /// Writes per second actually achieved.
    pub write_rate: f64,
    /// Median time of a write (the POST), part of every delivery latency.
    pub write_p50: Duration,
    /// Failures: writes, watch connections, error events, lost events.
    pub errors: Vec<String>,
    /// How many failures there were.
    pub failed: u64,
    /// The sampled process's resident bytes with every watch open.
    pub sampled_rss: Option<u64>,
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default()
}

/// Runs one watch phase in namespace `ns` (which must exist and hold no
/// configmaps but what kube keeps in every namespace: the watch starts
/// after them).
pub async fn measure(credentials: &Credentials, ns: &str, plan: &WatchPlan) -> Result<WatchResult> {
    let writer = credentials.api()?;
    let list: Value = serde_json::from_slice(
        &writer
            .call(
                Method::GET,
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                None,
                StatusCode::OK,
            )
            .await?,
    )?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .context("list without resourceVersion")?
        .to_string();
    let events = (plan.rate as f64 * plan.duration.as_secs_f64()).round() as usize;
    let path = format!(
        "/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=3600"
    );

    // Open every watch before the first write.
    let connecting = Arc::new(Semaphore::new(CONNECTING));
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<Result<()>>(plan.watchers.max(1));
    let (stop_tx, stop_rx) = watch::channel(false);
    let complete = Arc::new(AtomicUsize::new(0));
    let mut watchers = Vec::with_capacity(plan.watchers);
    for _ in 0..plan.watchers {
        let api = credentials.api()?;
        let (path, connecting, ready, stop, complete) = (
            path.clone(),
            connecting.clone(),
            ready_tx.clone(),
            stop_rx.clone(),
            complete.clone(),
        );
        watchers.push(tokio::spawn(async move {
            watcher(api, path, events, connecting, ready, stop, complete).await
        }));
    }
    let mut result = WatchResult {
        watchers: plan.watchers,
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..plan.watchers {
        match tokio::time::timeout_at(deadline.into(), ready_rx.recv()).await {
            Ok(Some(Ok(()))) => {}
            Ok(Some(Err(e))) => record(&mut result, e),
            Ok(None) => break,
            Err(_) => {
                record(
                    &mut result,
                    anyhow!("watchers were not all connected after 60 s"),
                );
                break;
            }
        }
    }
    // Let the servers settle after the connection storm.
    tokio::time::sleep(Duration::from_millis(500)).await;
    result.sampled_rss = plan
        .sample
        .and_then(super::target::memory)
        .map(|(rss, _)| rss);

    // Write at a steady rate.
    let in_flight = Arc::new(Semaphore::new(WRITES_IN_FLIGHT));
    let start = tokio::time::Instant::now();
    let period = Duration::from_secs_f64(1.0 / plan.rate.max(1) as f64);
    let mut writes = Vec::with_capacity(events);
    for i in 0..events {
        tokio::time::sleep_until(start + period * i as u32).await;
        let permit = in_flight.clone().acquire_owned().await?;
        let (writer, ns) = (writer.clone(), ns.to_string());
        writes.push(tokio::spawn(async move {
            let _permit = permit;
            let body = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("event-{i}")},
                "data": {"sentAt": unix_nanos().to_string()},
            });
            let sent = Instant::now();
            writer
                .call(
                    Method::POST,
                    &format!("/api/v1/namespaces/{ns}/configmaps"),
                    Some(body.to_string().into()),
                    StatusCode::CREATED,
                )
                .await?;
            Ok::<_, anyhow::Error>(sent.elapsed())
        }));
    }
    let mut write_times = Vec::with_capacity(events);
    for write in writes {
        match write.await.map_err(anyhow::Error::from).and_then(|r| r) {
            Ok(took) => {
                result.written += 1;
                write_times.push(took);
            }
            Err(e) => record(&mut result, e.context("write")),
        }
    }
    result.write_rate = result.written as f64 / start.elapsed().as_secs_f64();
    write_times.sort_unstable();
    result.write_p50 = write_times
        .get(write_times.len() / 2)
        .copied()
        .unwrap_or_default();

    // Give the watchers their grace, then stop whoever is still waiting.
    let grace_end = Instant::now() + plan.grace;
    while complete.load(Ordering::Relaxed) < plan.watchers && Instant::now() < grace_end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop_tx.send(true);
    let mut latencies: Vec<u64> = Vec::with_capacity(events * plan.watchers);
    for handle in watchers {
        match handle.await {
            Ok(Ok(mut got)) => {
                result.delivered += got.len() as u64;
                result.lost += result.written.saturating_sub(got.len()) as u64;
                latencies.append(&mut got);
            }
            Ok(Err(e)) => {
                result.lost += result.written as u64;
                record(&mut result, e);
            }
            Err(e) => record(&mut result, e.into()),
        }
    }
    if result.lost > 0 {
        let lost = anyhow!(
            "{} watch events lost ({} watchers × {} events written, {} delivered)",
            result.lost,
            plan.watchers,
            result.written,
            result.delivered
        );
        record(&mut result, lost);
    }
    latencies.sort_unstable();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or_default()
    };
    result.p50 = Duration::from_nanos(at(0.50));
    result.p99 = Duration::from_nanos(at(0.99));
    result.max = Duration::from_nanos(latencies.last().copied().unwrap_or_default());
    Ok(result)
}

fn record(result: &mut WatchResult, error: anyhow::Error) {
    result.failed += 1;
    if result.errors.len() < 5 {
        result.errors.push(format!("{error:#}"));
    }
}

/// One watcher: opens the watch, reports ready, then reads events until it
/// has `expected` of them or is told to stop. Returns each event's latency
/// in nanoseconds.
async fn watcher(
    api: Api,
    path: String,
    expected: usize,
    connecting: Arc<Semaphore>,
    ready: tokio::sync::mpsc::Sender<Result<()>>,
    mut stop: watch::Receiver<bool>,
    complete: Arc<AtomicUsize>,
) -> Result<Vec<u64>> {
    let opened = async {
        let _permit = connecting.acquire().await?;
        let response = api.send(Method::GET, &path, None).await?;
        if response.status() != StatusCode::OK {
            bail!("watch: {}", response.status());
        }
        Ok(response)
    }
    .await;
    let response = match opened {
        Ok(r) => {
            let _ = ready.send(Ok(())).await;
            r
        }
        Err(e) => {
            let _ = ready.send(Err(anyhow!("opening a watch: {e:#}"))).await;
            return Err(e);
        }
    };
    drop(ready);
    let mut body = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::with_capacity(64 << 10);
    let mut latencies = Vec::with_capacity(expected);
    while latencies.len() < expected {
        let chunk = tokio::select! {
            chunk = body.next() => chunk,
            _ = stop.wait_for(|s| *s) => break,
        };
        let chunk = match chunk {
            Some(Ok(chunk)) => chunk,
            Some(Err(e)) => bail!("watch stream failed after {} events: {e}", latencies.len()),
            None => bail!("watch stream ended after {} events", latencies.len()),
        };
        let now = unix_nanos();
        buffer.extend_from_slice(&chunk);
        let mut consumed = 0;
        while let Some(end) = buffer[consumed..].iter().position(|b| *b == b'\n') {
            let line = &buffer[consumed..consumed + end];
            consumed += end + 1;
            if line.starts_with(b"{\"type\":\"ERROR\"") {
                bail!("watch error event: {}", String::from_utf8_lossy(line));
            }
            if let Some(sent) = sent_at(line) {
                latencies.push(now.saturating_sub(sent));
            }
        }
        buffer.drain(..consumed);
    }
    if latencies.len() >= expected {
        complete.fetch_add(1, Ordering::Relaxed);
    }
    Ok(latencies)
}

/// The `sentAt` value of an event line, found without parsing the JSON.
fn sent_at(line: &[u8]) -> Option<u64> {
    let at = line.windows(SENT_AT.len()).position(|w| w == SENT_AT)? + SENT_AT.len();
    let digits = &line[at..];
    let len = digits.iter().position(|b| !b.is_ascii_digit())?;
    std::str::from_utf8(&digits[..len]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sent_at_is_found_in_an_event_line() {
        let line = br#"{"type":"ADDED","object":{"data":{"sentAt":"1700000000123456789"},"metadata":{"name":"event-1"}}}"#;
        assert_eq!(sent_at(line), Some(1_700_000_000_123_456_789));
        assert_eq!(sent_at(br#"{"type":"BOOKMARK","object":{}}"#), None);
    }
}
