//! `pods/proxy` and `services/proxy`: a request sent on to a pod's IP, or
//! to one of a service's endpoints, as kube-apiserver's `ResourceLocation`
//! picks them (`pkg/registry/core/pod/strategy.go`,
//! `pkg/registry/core/service/storage/storage.go`).
//!
//! - A pod: `[scheme:]name[:port]`, the port defaulting to the first
//!   declared container port; its IP (`status.podIPs[0]`, else `podIP`) must
//!   be global unicast.
//! - A service: the port by number (mapped to the service port's name) or
//!   by name; an endpoint of the `Endpoints` object with that port name,
//!   whose address points (`targetRef`) at a pod of the same namespace that
//!   holds that IP. kube picks a random subset and address; so does this.
//!   A service with no Endpoints object has no endpoints (kube's endpoints
//!   controller, which kubechain does not run, would have made an empty one).

use std::sync::Arc;

use apimachinery::error::{Error, Reason, Result};
use generic_server::registry::Store;
use generic_server::request::{ApiRequest, ApiResponse};
use generic_server::resource::Resource;
use generic_server::rest::Rest;
use generic_server::upstream::{ProxyId, Upstream, proxyable};
use rand::Rng;
use serde_json::Value;

/// `pods/<id>/proxy`: requests sent on to the pod's IP.
pub struct PodProxy {
    pods: Arc<Store>,
    upstream: Upstream,
}

impl PodProxy {
    /// A pod proxy over the pods store.
    pub fn new(pods: Arc<Store>, upstream: Upstream) -> Self {
        PodProxy { pods, upstream }
    }
}

#[async_trait::async_trait]
impl Rest for PodProxy {
    fn resource(&self) -> &Resource {
        &self.pods.resource
    }

    async fn connect(&self, req: &ApiRequest) -> Result<ApiResponse> {
        let id = ProxyId::parse(&req.info.name).ok_or_else(|| {
            Error::bad_request(format!("invalid pod request {:?}", req.info.name))
        })?;
        let pod = self
            .pods
            .get(&req.info.namespace, &id.name, None)
            .await?
            .value();
        let port = if id.port.is_empty() {
            first_container_port(&pod)
        } else {
            Some(port_number(&id.port)?)
        };
        let ip = proxyable(pod_ip(&pod))?;
        self.upstream.forward(req, &id.scheme, ip, port).await
    }
}

/// `services/<id>/proxy`: requests sent on to one of the service's endpoints.
pub struct ServiceProxy {
    services: Arc<Store>,
    endpoints: Arc<Store>,
    pods: Arc<Store>,
    upstream: Upstream,
}

impl ServiceProxy {
    /// A service proxy over the services, endpoints and pods stores.
    pub fn new(
        services: Arc<Store>,
        endpoints: Arc<Store>,
        pods: Arc<Store>,
        upstream: Upstream,
    ) -> Self {
        ServiceProxy {
            services,
            endpoints,
            pods,
            upstream,
        }
    }

    /// The service port's name a request's port means (a number is looked up).
    fn port_name(service: &Value, id: &ProxyId) -> Result<String> {
        let Ok(number) = id.port.parse::<i64>() else {
            return Ok(id.port.clone());
        };
        service
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p["port"].as_i64() == Some(number))
            .map(|p| p["name"].as_str().unwrap_or_default().to_string())
            .ok_or_else(|| {
                Error::new(
                    Reason::ServiceUnavailable,
                    format!("no service port {number} found for service {:?}", id.name),
                )
            })
    }

    /// Whether an endpoint address is a pod of `namespace` holding its IP.
    async fn names_its_pod(&self, namespace: &str, address: &Value) -> bool {
        let target = &address["targetRef"];
        let Some(name) = target["name"].as_str() else {
            return false;
        };
        if target["namespace"].as_str() != Some(namespace) {
            return false;
        }
        let Ok(pod) = self.pods.get(namespace, name, None).await else {
            return false;
        };
        let pod = pod.value();
        let ip = address["ip"].as_str().unwrap_or_default();
        pod_ips(&pod).any(|held| held == ip)
    }
}

#[async_trait::async_trait]
impl Rest for ServiceProxy {
    fn resource(&self) -> &Resource {
        &self.services.resource
    }

    async fn connect(&self, req: &ApiRequest) -> Result<ApiResponse> {
        let namespace = req.info.namespace.as_str();
        let id = ProxyId::parse(&req.info.name).ok_or_else(|| {
            Error::bad_request(format!("invalid service request {:?}", req.info.name))
        })?;
        let service = self.services.get(namespace, &id.name, None).await?.value();
        let port_name = Self::port_name(&service, &id)?;
        let none = || {
            Error::new(
                Reason::ServiceUnavailable,
                format!("no endpoints available for service {:?}", id.name),
            )
        };
        // kube's endpoints controller keeps an Endpoints object for every
        // service with a selector; kubechain runs none, so a missing one
        // means what an empty one means there.
        let endpoints = match self.endpoints.get(namespace, &id.name, None).await {
            Ok(endpoints) => endpoints.value(),
            Err(e) if e.reason() == Reason::NotFound => return Err(none()),
            Err(e) => return Err(e),
        };
        let subsets = endpoints["subsets"].as_array().cloned().unwrap_or_default();
        if subsets.is_empty() {
            return Err(none());
        }
        let start = rand::rng().random_range(0..subsets.len());
        for subset in subsets.iter().cycle().skip(start).take(subsets.len()) {
            let addresses = subset["addresses"].as_array().cloned().unwrap_or_default();
            if addresses.is_empty() {
                continue;
            }
            let ports = subset["ports"].as_array().into_iter().flatten();
            for port in ports.filter(|p| p["name"].as_str().unwrap_or_default() == port_name) {
                let first = rand::rng().random_range(0..addresses.len());
                for address in addresses.iter().cycle().skip(first).take(addresses.len()) {
                    if !self.names_its_pod(namespace, address).await {
                        continue;
                    }
                    let ip = proxyable(address["ip"].as_str().unwrap_or_default())?;
                    let number = port["port"].as_u64().and_then(|p| u16::try_from(p).ok());
                    return self.upstream.forward(req, &id.scheme, ip, number).await;
                }
            }
        }
        Err(none())
    }
}

/// A pod's IPs, `status.podIPs` first (kube's `getPodIP` takes the first).
fn pod_ips(pod: &Value) -> impl Iterator<Item = &str> {
    pod.pointer("/status/podIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p["ip"].as_str())
        .chain(pod.pointer("/status/podIP").and_then(Value::as_str))
}

fn pod_ip(pod: &Value) -> &str {
    pod_ips(pod).next().unwrap_or_default()
}

/// The first port any container declares (kube's default for a pod proxy).
fn first_container_port(pod: &Value) -> Option<u16> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find_map(|c| c.pointer("/ports/0/containerPort"))
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
}

/// A pod proxy's port: a number (kube dials whatever it is given; a name dials nothing).
fn port_number(port: &str) -> Result<u16> {
    port.parse::<u16>().map_err(|_| {
        Error::bad_request(format!(
            "invalid port {port:?}: a pod is proxied by port number"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_is_reached_at_its_first_ip_and_first_declared_port() {
        let pod = json!({
            "spec": {"containers": [{"name": "a"}, {"name": "b", "ports": [{"containerPort": 8080}, {"containerPort": 9090}]}]},
            "status": {"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.7"}, {"ip": "fd00::7"}]}
        });
        assert_eq!(pod_ip(&pod), "10.0.0.7");
        assert_eq!(first_container_port(&pod), Some(8080));
        let bare =
            json!({"spec": {"containers": [{"name": "a"}]}, "status": {"podIP": "10.0.0.9"}});
        assert_eq!(
            (pod_ip(&bare), first_container_port(&bare)),
            ("10.0.0.9", None)
        );
        assert_eq!(pod_ip(&json!({})), "");
        assert!(port_number("http").is_err());
        assert_eq!(port_number("8080").ok(), Some(8080));
    }
}
