//! The default ServiceCIDR controller (kube's `defaultservicecidr`, the
//! API server's own): the ServiceCIDR `kubernetes`, created from
//! `--service-cluster-ip-range` before the server serves, and set Ready
//! while its range is the configured one. A range that differs (another
//! replica's flags) is reported, never overwritten.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix::prelude::*;
use apimachinery::error::{Reason, Result};
use generic_server::loopback::Loopback;
use generic_server::registry::now_rfc3339;
use serde_json::{Value, json};

use crate::cluster_ip::{DEFAULT_SERVICE_CIDR, terminating};

/// Where ServiceCIDRs are served.
pub const SERVICE_CIDRS: &str = "/apis/networking.k8s.io/v1/servicecidrs";

/// How often the default ServiceCIDR is checked again.
const INTERVAL: Duration = Duration::from_secs(10);

/// Keeps the default ServiceCIDR.
#[derive(Clone)]
pub struct DefaultServiceCidrController {
    client: Loopback,
    cidrs: Vec<String>,
    reported_mismatch: Arc<AtomicBool>,
}

impl DefaultServiceCidrController {
    /// A controller keeping `kubernetes` over `cidr`, writing through `client`.
    pub fn new(client: Loopback, cidr: &str) -> Self {
        DefaultServiceCidrController {
            client,
            cidrs: vec![cidr.to_string()],
            reported_mismatch: Arc::default(),
        }
    }

    /// The default ServiceCIDR as first created.
    fn object(&self) -> Value {
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
            "metadata": {"name": DEFAULT_SERVICE_CIDR},
            "spec": {"cidrs": self.cidrs},
        })
    }

    /// Creates the default ServiceCIDR if it is missing, then sets it Ready
    /// when its range is this server's and no Ready condition says otherwise.
    pub async fn sync(&self) -> Result<()> {
        let path = format!("{SERVICE_CIDRS}/{DEFAULT_SERVICE_CIDR}");
        let current = match self.client.get(&path).await {
            Ok(current) => current,
            Err(e) if e.reason() == Reason::NotFound => {
                tracing::info!(cidrs = ?self.cidrs, "creating the default ServiceCIDR");
                match self.client.create(SERVICE_CIDRS, &self.object()).await {
                    Ok(created) => created,
                    Err(e) if e.reason() == Reason::AlreadyExists => self.client.get(&path).await?,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        if terminating(&current) {
            // Its deletion is the ServiceCIDR controller's to finish.
            return Ok(());
        }
        if current.pointer("/spec/cidrs") != Some(&json!(self.cidrs)) {
            if !self.reported_mismatch.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    configured = ?self.cidrs,
                    found = %current["spec"]["cidrs"],
                    "the default ServiceCIDR does not match --service-cluster-ip-range; configure the flag to match it or delete it"
                );
            }
            return Ok(());
        }
        if let Some(ready) = set_ready(&current) {
            self.client
                .update(&format!("{path}/status"), &ready)
                .await?;
            tracing::info!("set the default ServiceCIDR Ready");
        }
        Ok(())
    }

    /// Syncs until the default ServiceCIDR exists (the server serves only
    /// then, as kube's start blocks on it), giving up after a while.
    pub async fn ensure(&self) -> Result<()> {
        let mut attempt = 0;
        loop {
            match self.sync().await {
                Ok(()) => return Ok(()),
                Err(e) if attempt >= 50 => return Err(e),
                Err(e) => tracing::info!(error = %e, "creating the default ServiceCIDR, again"),
            }
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The ServiceCIDR with a Ready condition, when it has none yet (or an
/// Unknown one); `None` when its Ready condition is already set.
fn set_ready(cidr: &Value) -> Option<Value> {
    let conditions = cidr
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ready = conditions.iter().find(|c| c["type"] == "Ready");
    if ready.is_some_and(|c| c["status"] != "Unknown") {
        return None;
    }
    let mut conditions: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c["type"] != "Ready")
        .collect();
    conditions.push(json!({
        "type": "Ready", "status": "True", "lastTransitionTime": now_rfc3339(),
        "reason": "", "message": "Kubernetes default Service CIDR is ready",
    }));
    let mut updated = cidr.clone();
    updated["status"] = json!({"conditions": conditions});
    Some(updated)
}

impl Actor for DefaultServiceCidrController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(INTERVAL, |this, ctx| {
            let controller = this.clone();
            ctx.spawn(
                async move {
                    if let Err(error) = controller.sync().await {
                        tracing::info!(%error, "syncing the default ServiceCIDR");
                    }
                }
                .into_actor(this),
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use generic_server::server::ApiServer;

    #[test]
    fn ready_is_set_once_and_only_when_missing_or_unknown() {
        let cidr = json!({"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/12"]}});
        let ready = set_ready(&cidr).expect("set Ready");
        let condition = &ready["status"]["conditions"][0];
        assert_eq!(
            (
                &condition["type"],
                &condition["status"],
                &condition["message"]
            ),
            (
                &json!("Ready"),
                &json!("True"),
                &json!("Kubernetes default Service CIDR is ready")
            )
        );
        assert_eq!(set_ready(&ready), None);
        let mut unknown = ready.clone();
        unknown["status"]["conditions"][0]["status"] = json!("Unknown");
        assert!(set_ready(&unknown).is_some());
        let mut not_ready = ready.clone();
        not_ready["status"]["conditions"][0]["status"] = json!("False");
        assert_eq!(
            set_ready(&not_ready),
            None,
            "a False set elsewhere is left alone"
        );
    }

    #[actix::test]
    async fn the_default_service_cidr_is_created_ready_and_left_alone_when_it_differs() {
        let resources = crate::resources::all()
            .into_iter()
            .filter(|r| r.plural == "servicecidrs")
            .collect();
        let (server, _) = ApiServer::in_memory(resources).await.expect("a server");
        let client = Loopback::new(server.clone(), "system:apiserver");
        let controller = DefaultServiceCidrController::new(client.clone(), "10.96.0.0/12");
        controller.ensure().await.expect("created");
        controller.sync().await.expect("idempotent");
        let path = format!("{SERVICE_CIDRS}/kubernetes");
        let cidr = client.get(&path).await.expect("the default ServiceCIDR");
        assert_eq!(cidr["spec"]["cidrs"], json!(["10.96.0.0/12"]));
        assert_eq!(cidr["status"]["conditions"][0]["status"], "True");
        // Another replica configured with another range reports it and writes nothing.
        let other = DefaultServiceCidrController::new(client.clone(), "10.100.0.0/16");
        other.sync().await.expect("a mismatch is no error");
        let again = client.get(&path).await.expect("the default ServiceCIDR");
        assert_eq!(again, cidr);
    }
}
