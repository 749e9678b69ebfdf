//! `metrics.k8s.io/v1beta1`: the kinds (`k8s.io/metrics/pkg/apis/metrics/v1beta1/types.go`)
//! and the read-only endpoints that compute them.

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::error::{Error, Result};
use apimachinery::table::{self, Column};
use generic_server::filters::delegated::FrontDoor;
use generic_server::request::ApiRequest;
use generic_server::resource::Resource;
use generic_server::rest::ReadOnly;
use generic_server::strategy::Strategy;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::sampler::Latest;

/// NodeMetrics sets resource usage metrics of a node.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics")]
pub struct NodeMetrics {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The end of the interval [Timestamp-Window, Timestamp] the metrics were collected from.
    pub timestamp: Time,
    /// The length of the collection interval.
    pub window: String,
    /// The memory usage is the memory working set.
    pub usage: BTreeMap<String, Quantity>,
}

/// PodMetrics sets resource usage metrics of a pod.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics")]
pub struct PodMetrics {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The end of the interval [Timestamp-Window, Timestamp] the metrics were collected from.
    pub timestamp: Time,
    /// The length of the collection interval.
    pub window: String,
    /// Metrics for all containers are collected within the same time window.
    pub containers: Vec<ContainerMetrics>,
}

/// ContainerMetrics sets resource usage metrics of a container.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "io.k8s.metrics.pkg.apis.metrics.v1beta1.ContainerMetrics")]
pub struct ContainerMetrics {
    /// Container name corresponding to the one from pod.spec.containers.
    pub name: String,
    /// The memory usage is the memory working set.
    pub usage: BTreeMap<String, Quantity>,
}

macro_rules! metrics_kind {
    ($kind:ty, $name:literal, $plural:literal, $scope:ty) => {
        impl k8s_openapi::Resource for $kind {
            const API_VERSION: &'static str = "metrics.k8s.io/v1beta1";
            const GROUP: &'static str = "metrics.k8s.io";
            const KIND: &'static str = $name;
            const VERSION: &'static str = "v1beta1";
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }
    };
}
metrics_kind!(
    NodeMetrics,
    "NodeMetrics",
    "nodes",
    k8s_openapi::ClusterResourceScope
);
metrics_kind!(
    PodMetrics,
    "PodMetrics",
    "pods",
    k8s_openapi::NamespaceResourceScope
);

/// The resources and their endpoints.
pub fn resources(nodes: Nodes) -> Vec<(Resource, Arc<dyn ReadOnly>)> {
    vec![
        (
            Resource::builtin::<NodeMetrics>(Metrics).verbs(&["get", "list"]),
            Arc::new(nodes),
        ),
        (
            Resource::builtin::<PodMetrics>(Metrics).verbs(&["get", "list"]),
            Arc::new(Pods),
        ),
    ]
}

/// NodeMetrics: the host's usage, for the Node named after the host, while
/// that Node exists and a measurement does.
pub struct Nodes {
    /// Where the Node is read.
    pub front_door: Arc<FrontDoor>,
    /// The host's Node's name.
    pub name: String,
    /// The host's measurements.
    pub usage: Latest,
}

/// The part of a stored Node that metrics copy.
#[derive(Deserialize)]
struct Node {
    metadata: ObjectMeta,
}

#[async_trait::async_trait]
impl ReadOnly for Nodes {
    async fn list(&self, _req: &ApiRequest, _namespace: &str) -> Result<Vec<Value>> {
        let Some(usage) = self.usage.borrow().clone() else {
            return Ok(Vec::new());
        };
        let node = match self
            .front_door
            .get(&format!("/api/v1/nodes/{}", self.name))
            .await
        {
            Ok(node) => node,
            Err(e) if e.code() == 404 => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let node: Node = serde_json::from_value(node).map_err(Error::internal)?;
        let metrics = NodeMetrics {
            metadata: ObjectMeta {
                name: node.metadata.name,
                labels: node.metadata.labels,
                // Of the measurement: an object changes only when it is measured again.
                creation_timestamp: Some(usage.timestamp.clone()),
                ..Default::default()
            },
            timestamp: usage.timestamp,
            window: format!("{}s", usage.window.as_millis() as f64 / 1000.0),
            usage: BTreeMap::from([
                (
                    "cpu".to_string(),
                    Quantity(format!("{}n", usage.cpu_nanocores)),
                ),
                (
                    "memory".to_string(),
                    Quantity(format!("{}Ki", usage.memory_kib)),
                ),
            ]),
        };
        Ok(vec![
            serde_json::to_value(metrics).map_err(Error::internal)?,
        ])
    }
}

/// PodMetrics: there is no kubelet, so no container runs and no pod has
/// usage to report; an empty list is the honest answer.
pub struct Pods;

#[async_trait::async_trait]
impl ReadOnly for Pods {
    async fn list(&self, _req: &ApiRequest, _namespace: &str) -> Result<Vec<Value>> {
        Ok(Vec::new())
    }
}

/// metrics-server's table: Name, CPU, Memory, Window.
struct Metrics;

impl Strategy for Metrics {
    fn columns(&self) -> Vec<Column> {
        let usage = |name: &str| Column::new(name, "string", &format!("{name} usage"));
        vec![
            table::name_column(),
            usage("CPU"),
            usage("Memory"),
            Column::new("Window", "string", "Window of the measurement"),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let cell = |pointer: &str| obj.pointer(pointer).cloned().unwrap_or_default();
        vec![
            table::name_cell(obj),
            cell("/usage/cpu"),
            cell("/usage/memory"),
            cell("/window"),
        ]
    }
}
