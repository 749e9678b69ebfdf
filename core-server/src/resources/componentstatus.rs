//! v1 ComponentStatuses (`kubectl get cs`): read-only, computed when asked
//! for, as kube computes them: one `etcd-<n>` per etcd server, and the
//! controller manager and scheduler. kubechain's controllers run in this
//! server (so the controller manager is healthy while it answers); it runs
//! no scheduler, and says so as kube does for one it cannot reach.

use std::sync::Arc;

use apimachinery::error::Result;
use apimachinery::table::{self, Column};
use generic_server::request::ApiRequest;
use generic_server::rest::ReadOnly;
use generic_server::storage::Storage;
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

/// The rules of `v1/ComponentStatus`: only its table.
pub struct ComponentStatusStrategy;

impl Strategy for ComponentStatusStrategy {
    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new("Status", "string", "Status of the component conditions"),
            Column::new("Message", "string", "Message of the component conditions"),
            Column::new("Error", "string", "Error of the component conditions"),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let condition = obj
            .pointer("/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Healthy"));
        let field = |name: &str| {
            condition
                .and_then(|c| c[name].as_str())
                .unwrap_or_default()
                .to_string()
        };
        let status = match condition.map(|c| &c["status"]) {
            Some(s) if s == "True" => "Healthy",
            _ => "Unhealthy",
        };
        vec![
            table::name_cell(obj),
            json!(status),
            json!(field("message")),
            json!(field("error")),
        ]
    }
}

/// Computes the statuses from etcd's answer.
pub struct ComponentStatuses {
    /// The cluster's storage, asked for its current revision.
    pub storage: Arc<dyn Storage>,
    /// How many etcd servers the cluster is configured with.
    pub etcd_servers: usize,
}

fn status(name: &str, healthy: Result<(), String>) -> Value {
    let condition = match healthy {
        Ok(()) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
        Err(error) => json!({"type": "Healthy", "status": "False", "error": error}),
    };
    json!({"metadata": {"name": name}, "conditions": [condition]})
}

#[async_trait::async_trait]
impl ReadOnly for ComponentStatuses {
    async fn list(&self, _req: &ApiRequest, _namespace: &str) -> Result<Vec<Value>> {
        let etcd = self
            .storage
            .current_revision()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string());
        let mut statuses = vec![
            status("controller-manager", Ok(())),
            status(
                "scheduler",
                Err("kubechain runs no scheduler: pods are placed through pods/binding".into()),
            ),
        ];
        statuses.extend(
            (0..self.etcd_servers.max(1)).map(|i| status(&format!("etcd-{i}"), etcd.clone())),
        );
        Ok(statuses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_say_healthy_or_not() {
        let ok = status("etcd-0", Ok(()));
        assert_eq!(
            ComponentStatusStrategy.cells(&ok)[1..],
            [json!("Healthy"), json!("ok"), json!("")]
        );
        let down = status("scheduler", Err("refused".into()));
        assert_eq!(
            ComponentStatusStrategy.cells(&down)[1..],
            [json!("Unhealthy"), json!(""), json!("refused")]
        );
    }
}
