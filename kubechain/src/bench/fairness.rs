//! What priority and fairness buys: one ServiceAccount floods the front
//! door with LISTs from 64 clients, held by a FlowSchema to a priority
//! level of its own, while another account GETs one object at a time; the
//! bystander's p99 latency during the flood is set against its p99 alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::report::Table;
use crate::client::{Api, Credentials};

/// How many clients flood.
const FLOODERS: usize = 64;
/// The most the flood may stretch the bystander's p99 (≤ 3×).
const P99_RATIO: f64 = 3.0;
/// The flooding account.
const FLOODER: &str = "bench-flooder";
/// How long a refused flooder waits before asking again (kube's
/// `Retry-After: 1`, as client-go honours it).
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The GET latencies of `api` reading `path` one at a time for `duration`.
async fn timed_gets(api: &Api, path: &str, duration: Duration) -> Result<Vec<Duration>> {
    let mut latencies = Vec::new();
    let end = Instant::now() + duration;
    while Instant::now() < end {
        let started = Instant::now();
        api.call(Method::GET, path, None, StatusCode::OK).await?;
        latencies.push(started.elapsed());
    }
    Ok(latencies)
}

/// The 99th percentile of `latencies`.
fn p99(latencies: &mut [Duration]) -> Duration {
    latencies.sort();
    let at = (latencies.len() * 99 / 100).min(latencies.len().saturating_sub(1));
    latencies.get(at).copied().unwrap_or_default()
}

/// Creates the flooding account, its FlowSchema and priority level; the
/// account's token.
async fn flooder(admin: &Api, namespace: &str) -> Result<String> {
    let post = |path: String, body: Value| async move {
        admin
            .call(
                Method::POST,
                &path,
                Some(body.to_string().into()),
                StatusCode::CREATED,
            )
            .await
    };
    let accounts = format!("/api/v1/namespaces/{namespace}/serviceaccounts");
    post(
        accounts.clone(),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": FLOODER}}),
    )
    .await?;
    post(
        format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings"),
        serde_json::from_str(&super::view_binding(namespace, FLOODER))?,
    )
    .await?;
    let group = "/apis/flowcontrol.apiserver.k8s.io/v1";
    post(
        format!("{group}/prioritylevelconfigurations"),
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
               "metadata": {"name": FLOODER},
               "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                        "limitResponse": {"type": "Queue",
                                          "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 8}}}}}),
    )
    .await?;
    post(
        format!("{group}/flowschemas"),
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
               "metadata": {"name": FLOODER},
               "spec": {"matchingPrecedence": 500, "priorityLevelConfiguration": {"name": FLOODER},
                        "distinguisherMethod": {"type": "ByUser"},
                        "rules": [{"subjects": [{"kind": "ServiceAccount",
                                                 "serviceAccount": {"name": FLOODER, "namespace": namespace}}],
                                   "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                      "namespaces": ["*"], "clusterScope": true}]}]}}),
    )
    .await?;
    let request =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let answer: Value =
        serde_json::from_slice(&post(format!("{accounts}/{FLOODER}/token"), request).await?)?;
    Ok(answer["status"]["token"]
        .as_str()
        .context("the flooder's token")?
        .to_string())
}

/// Measures the bystander (`reader`, reading `get_path`) alone and during
/// a flood of LISTs of `list_path`, adding the rows to `table`.
#[allow(clippy::too_many_arguments)] // the bench's clients and paths, as its other rows take them
pub async fn measure(
    admin: &Api,
    credentials: &Credentials,
    reader: &Api,
    namespace: &str,
    list_path: &str,
    get_path: &str,
    phase: Duration,
    table: &mut Table,
    errors: &mut Vec<String>,
) -> Result<()> {
    let token = flooder(admin, namespace).await?;
    let flooders = (0..FLOODERS)
        .map(|_| credentials.bearer(&token))
        .collect::<Result<Vec<_>>>()?;
    // The caches see the new schema and level; the flooder can read.
    tokio::time::sleep(Duration::from_millis(500)).await;
    flooders[0]
        .call(Method::GET, list_path, None, StatusCode::OK)
        .await
        .context("the flooder's first LIST")?;
    eprintln!(
        "bench: a bystander's GETs alone, then during a flood of LISTs from {FLOODERS} clients"
    );
    let mut alone = timed_gets(reader, get_path, phase).await?;
    let (served, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let end = Instant::now() + phase;
    let flood: Vec<_> = flooders
        .into_iter()
        .map(|api| {
            let (served, refused, path) = (served.clone(), refused.clone(), list_path.to_string());
            tokio::spawn(async move {
                while Instant::now() < end {
                    match api.call(Method::GET, &path, None, StatusCode::OK).await {
                        Ok(_) => served.fetch_add(1, Ordering::Relaxed),
                        Err(e) if e.to_string().contains("429") => {
                            refused.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(RETRY_AFTER).await;
                            0
                        }
                        Err(e) => return Err(e),
                    };
                }
                Ok(())
            })
        })
        .collect();
    let during = timed_gets(reader, get_path, phase).await;
    for task in flood {
        if let Err(e) = task.await.map_err(anyhow::Error::from).and_then(|r| r) {
            errors.push(format!("flooding LISTs: {e:#}"));
        }
    }
    let mut during = during?;
    let (quiet, busy) = (p99(&mut alone), p99(&mut during));
    table.latency_ratio(
        &format!("bystander GET p99, {FLOODERS}-client LIST flood held by APF"),
        "alone",
        quiet,
        busy,
        P99_RATIO,
    );
    table.note(
        "flood LISTs served / refused (429)",
        &format!(
            "{} / {}",
            served.load(Ordering::Relaxed),
            refused.load(Ordering::Relaxed)
        ),
    );
    if refused.load(Ordering::Relaxed) == 0 {
        errors
            .push("the LIST flood was never refused: priority and fairness did not hold it".into());
    }
    Ok(())
}
