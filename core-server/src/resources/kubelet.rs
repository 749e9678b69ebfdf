//! What would reach a kubelet: a pod's `log`, `exec`, `attach` and
//! `portforward`, and a node's `proxy` (a pod's `proxy` goes to its IP,
//! in `crate::proxy`). kubechain runs no nodes, so each answers at once,
//! as kube-apiserver does before it would dial one: the container checked
//! first, then a pod with no node (logs are empty, the streams refused), a
//! container still waiting, and otherwise the node that cannot be reached.

use apimachinery::error::{Error, Reason, Result};
use generic_server::request::{ApiRequest, ApiResponse};
use http::StatusCode;
use serde_json::Value;

/// A connect subresource: its name, its options kind, kube's verbs, and
/// the options kind's fields, its query parameters.
pub type Connect = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);

/// The options of a pod's or node's `proxy`.
const PROXY_OPTIONS: &[&str] = &["path"];

/// The verbs of a proxy.
const PROXY_VERBS: &[&str] = &["create", "delete", "get", "patch", "update"];

/// The connect subresources of a pod, with kube's verbs and options.
pub const POD_CONNECT: &[Connect] = &[
    (
        "attach",
        "PodAttachOptions",
        &["create", "get"],
        &["container", "stderr", "stdin", "stdout", "tty"],
    ),
    (
        "exec",
        "PodExecOptions",
        &["create", "get"],
        &["command", "container", "stderr", "stdin", "stdout", "tty"],
    ),
    (
        "log",
        "Pod",
        &["get"],
        &[
            "container",
            "follow",
            "insecureSkipTLSVerifyBackend",
            "limitBytes",
            "previous",
            "sinceSeconds",
            "stream",
            "tailLines",
            "timestamps",
        ],
    ),
    (
        "portforward",
        "PodPortForwardOptions",
        &["create", "get"],
        &["ports"],
    ),
    ("proxy", "PodProxyOptions", PROXY_VERBS, PROXY_OPTIONS),
];

/// A node's `proxy` subresource, with kube's verbs.
pub const NODE_PROXY: Connect = ("proxy", "NodeProxyOptions", PROXY_VERBS, PROXY_OPTIONS);

/// A service's `proxy` subresource, with kube's verbs.
pub const SERVICE_PROXY: Connect = ("proxy", "ServiceProxyOptions", PROXY_VERBS, PROXY_OPTIONS);

fn names<'a>(pod: &'a Value, list: &str) -> Vec<&'a str> {
    pod.pointer(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect()
}

fn pod_name(pod: &Value) -> &str {
    pod.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The container a request names, or kube's 400 when it names none of the pod's.
fn container<'a>(pod: &'a Value, req: &ApiRequest) -> Result<String> {
    let name = pod_name(pod);
    let containers = names(pod, "/spec/containers");
    let init = names(pod, "/spec/initContainers");
    let ephemeral = names(pod, "/spec/ephemeralContainers");
    match req.param("container").filter(|c| !c.is_empty()) {
        Some(c)
            if containers.contains(&c.as_str())
                || init.contains(&c.as_str())
                || ephemeral.contains(&c.as_str()) =>
        {
            Ok(c)
        }
        Some(c) => Err(Error::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None if containers.len() == 1 => Ok(containers[0].to_string()),
        None => {
            let mut message = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            );
            if !init.is_empty() {
                message.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init.join(" ")
                ));
            }
            Err(Error::bad_request(message))
        }
    }
}

/// kube's 400 for a container that has not started, naming why it waits.
fn waiting(pod: &Value, container: &str) -> Option<Error> {
    let statuses = ["/status/containerStatuses", "/status/initContainerStatuses"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .find(|s| s["name"] == container)?;
    let reason = statuses.pointer("/state/waiting/reason")?.as_str()?;
    let reason = match reason {
        "ErrImagePull" => "image can't be pulled",
        "ImagePullBackOff" => "trying and failing to pull image",
        other => other,
    };
    Some(Error::bad_request(format!(
        "container \"{container}\" in pod \"{}\" is waiting to start: {reason}",
        pod_name(pod)
    )))
}

/// 503: the node exists in the API, but no kubelet serves it here.
fn no_kubelet(node: &str) -> Error {
    Error::new(
        Reason::ServiceUnavailable,
        format!("no kubelet is reachable for node {node:?}: kubechain runs no nodes"),
    )
}

/// Answers a pod's connect subresource.
pub fn pod(subresource: &str, pod: &Value, req: &ApiRequest) -> Result<ApiResponse> {
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    match subresource {
        "log" => {
            let container = container(pod, req)?;
            match node {
                // kube: no node, no log location: 204 and an empty body.
                None => Ok(ApiResponse::bytes(StatusCode::NO_CONTENT, "text/plain", "")),
                Some(node) => Err(waiting(pod, &container).unwrap_or_else(|| no_kubelet(node))),
            }
        }
        "exec" | "attach" | "portforward" => {
            let container = if subresource == "portforward" {
                None
            } else {
                Some(container(pod, req)?)
            };
            match node {
                None => Err(Error::bad_request(format!(
                    "pod {} does not have a host assigned",
                    pod_name(pod)
                ))),
                Some(node) => Err(container
                    .and_then(|c| waiting(pod, &c))
                    .unwrap_or_else(|| no_kubelet(node))),
            }
        }
        _ => Err(Error::method_not_allowed()),
    }
}

/// Answers a node's `proxy`.
pub fn node(subresource: &str, node: &Value) -> Result<ApiResponse> {
    match subresource {
        "proxy" => Err(no_kubelet(
            node.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        )),
        _ => Err(Error::method_not_allowed()),
    }
}
