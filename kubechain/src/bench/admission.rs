//! What admission costs a create: creates with 20 webhooks and 20
//! policies registered that match nothing the bench writes, and with one
//! policy that matches every create, each run in alternating slices
//! against plain creates, so that both sides share the machine's drift.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Result;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::load::Throughput;
use super::report::{CpuTable, Table};
use super::{alternating, create_configmaps};
use crate::client::Api;

/// How many webhooks, and how many policies, that match nothing.
const UNMATCHED: usize = 20;
/// The most the unmatched configurations may slow creates (≥ 0.95×).
const UNMATCHED_RATIO: f64 = 0.95;
/// The path of the admission configurations.
const GROUP_PATH: &str = "/apis/admissionregistration.k8s.io/v1";
/// How long the servers' caches are given to see configurations change.
const SETTLE: Duration = Duration::from_millis(500);

/// A set of admission configurations the bench installs and removes:
/// (collection path, object) pairs, and whether they are installed.
struct Configurations(Vec<(&'static str, Value)>, AtomicBool);

impl Configurations {
    /// Webhooks and policies for a group the bench never writes.
    fn unmatched() -> Configurations {
        let rules = json!([{"operations": ["CREATE", "UPDATE"], "apiGroups": ["bench.kubechain.dev"],
                            "apiVersions": ["*"], "resources": ["widgets"]}]);
        let mut objects = Vec::new();
        for i in 0..UNMATCHED {
            objects.push((
                "validatingwebhookconfigurations",
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                       "metadata": {"name": format!("bench-unmatched-{i}")},
                       "webhooks": [{"name": format!("w{i}.bench.kubechain.dev"), "admissionReviewVersions": ["v1"],
                                     "sideEffects": "None", "rules": rules,
                                     "clientConfig": {"url": "https://127.0.0.1:1/never"}}]}),
            ));
        }
        for i in 0..UNMATCHED {
            objects.extend(Self::policy(
                &format!("bench-unmatched-{i}"),
                json!({"resourceRules": rules}),
                "object.spec.size < 10",
            ));
        }
        Configurations(objects, AtomicBool::new(false))
    }

    /// One policy that every configmap create goes through.
    fn matching() -> Configurations {
        let rules = json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                            "resources": ["configmaps"]}]);
        Configurations(
            Self::policy(
                "bench-matching",
                json!({"resourceRules": rules}),
                "object.metadata.name.size() < 64 && !has(object.binaryData)",
            )
            .into(),
            AtomicBool::new(false),
        )
    }

    /// A ValidatingAdmissionPolicy with one validation, and its Deny binding.
    fn policy(name: &str, constraints: Value, expression: &str) -> [(&'static str, Value); 2] {
        [
            (
                "validatingadmissionpolicies",
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                       "metadata": {"name": name},
                       "spec": {"matchConstraints": constraints, "validations": [{"expression": expression}]}}),
            ),
            (
                "validatingadmissionpolicybindings",
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                       "metadata": {"name": name},
                       "spec": {"policyName": name, "validationActions": ["Deny"]}}),
            ),
        ]
    }

    /// Creates them all, then gives the caches time to see them.
    async fn install(&self, admin: &Api) -> Result<()> {
        if self.1.swap(true, Ordering::Relaxed) {
            return Ok(());
        }
        for (collection, object) in &self.0 {
            let body = object.to_string().into();
            admin
                .call(
                    Method::POST,
                    &format!("{GROUP_PATH}/{collection}"),
                    Some(body),
                    StatusCode::CREATED,
                )
                .await?;
        }
        tokio::time::sleep(SETTLE).await;
        Ok(())
    }

    /// Deletes them, then gives the caches time to see it.
    async fn remove(&self, admin: &Api) {
        if !self.1.swap(false, Ordering::Relaxed) {
            return;
        }
        for (collection, object) in &self.0 {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let path = format!("{GROUP_PATH}/{collection}/{name}");
            if let Err(e) = admin
                .call(Method::DELETE, &path, None, StatusCode::OK)
                .await
            {
                eprintln!("bench: removing {path}: {e:#}");
            }
        }
        tokio::time::sleep(SETTLE).await;
    }
}

/// Measures creates into `namespace` with and without each set of
/// configurations, adding the rows to `table` and the failures to `errors`.
pub async fn measure(
    admin: &Api,
    apis: &[Api],
    namespace: &str,
    phase: Duration,
    cpu: &mut CpuTable,
    table: &mut Table,
    errors: &mut Vec<String>,
) -> Result<()> {
    let names = Arc::new(AtomicU64::new(0));
    let creates = |slice: Duration| create_configmaps(apis, namespace, "admitted", &names, slice);
    let unmatched = Configurations::unmatched();
    let plain = format!("creates, none ({UNMATCHED}+{UNMATCHED})");
    let with = format!("creates, {UNMATCHED}+{UNMATCHED} unmatched");
    let [base, configured] =
        toggled(cpu, [&plain, &with], phase, admin, &unmatched, &creates).await?;
    unmatched.remove(admin).await;
    table.versus(
        &format!("creates/s, {UNMATCHED} webhooks and {UNMATCHED} policies matching nothing"),
        "none",
        &base,
        &configured,
        UNMATCHED_RATIO,
    );
    let matching = Configurations::matching();
    let plain_again = "creates, none (1 policy)";
    let one = "creates, 1 policy matching";
    let [base_again, checked] =
        toggled(cpu, [plain_again, one], phase, admin, &matching, &creates).await?;
    matching.remove(admin).await;
    let per_create = |phase: &str, done: &Throughput| {
        cpu.cpu_per_op(phase, "core-server", done.ops)
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    table.cost(
        "core-server CPU per create, one matching policy",
        "none",
        per_create(plain_again, &base_again),
        per_create(one, &checked),
    );
    for (what, done) in [
        (plain, &base),
        (with, &configured),
        (plain_again.to_string(), &base_again),
        (one.to_string(), &checked),
    ] {
        done.report_failures(&what, errors);
    }
    Ok(())
}

/// Creates without and with `configurations`, in alternating slices: the
/// configurations are removed before each slice of the first and installed
/// before each slice of the second.
async fn toggled<F, Fut>(
    cpu: &mut CpuTable,
    names: [&str; 2],
    phase: Duration,
    admin: &Api,
    configurations: &Configurations,
    creates: &F,
) -> Result<[Throughput; 2]>
where
    F: Fn(Duration) -> Fut,
    Fut: std::future::Future<Output = Throughput>,
{
    let failed_install = std::sync::Mutex::new(None);
    let results = alternating(
        cpu,
        names,
        phase,
        |slice| async move {
            configurations.remove(admin).await;
            creates(slice).await
        },
        |slice| {
            let failed_install = &failed_install;
            async move {
                if let Err(e) = configurations.install(admin).await {
                    *failed_install.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                }
                creates(slice).await
            }
        },
    )
    .await;
    match failed_install
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
    {
        Some(e) => Err(e.context("installing admission configurations")),
        None => Ok(results),
    }
}
