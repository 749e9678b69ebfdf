//! Nodes: cluster-scoped, created with their status by the kubelet;
//! `spec.unschedulable` is selectable, podCIDR and providerID are set once.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use apimachinery::validation;
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, items, text};

/// The label prefix that names a node's roles.
const ROLE_PREFIX: &str = "node-role.kubernetes.io/";
/// The older label that names a node's role.
const ROLE_LABEL: &str = "kubernetes.io/role";

/// The taint a node is created with until it is ready.
const NOT_READY: &str = "node.kubernetes.io/not-ready";

/// The fields of a node's `status.nodeInfo` (kube's NodeSystemInfo), all
/// answered, empty until the kubelet reports them.
const NODE_INFO: &[&str] = &[
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
];

/// The rules of `v1/Node`.
pub struct NodeStrategy;

fn roles(obj: &Value) -> String {
    let mut roles: Vec<String> = fields::object(obj, "/metadata/labels")
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix(ROLE_PREFIX) {
            Some(role) if !role.is_empty() => Some(role.to_string()),
            _ if k == ROLE_LABEL => v.as_str().filter(|r| !r.is_empty()).map(str::to_string),
            _ => None,
        })
        .collect();
    roles.sort();
    roles.dedup();
    fields::none_if_empty(roles.join(","))
}

fn status(obj: &Value) -> String {
    let mut parts = vec![match fields::condition(obj, "Ready") {
        Some(c) if text(c, "/status") == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        parts.push("SchedulingDisabled");
    }
    parts.join(",")
}

fn address(obj: &Value, kind: &str) -> String {
    let found = items(obj, "/status/addresses")
        .iter()
        .find(|a| text(a, "/type") == kind)
        .map(|a| text(a, "/address"));
    found.unwrap_or("<none>").to_string()
}

fn set_once(
    new: &Value,
    old: &Value,
    pointer: &str,
    name: &str,
    field: &str,
) -> Option<FieldError> {
    let before = fields::value(old, pointer);
    let empty = before.is_null() || before == json!("") || before == json!([]);
    (!empty && fields::value(new, pointer) != before).then(|| {
        FieldError::forbidden(
            field,
            format!("node updates may not change {name} except from \"\" to valid"),
        )
    })
}

impl Strategy for NodeStrategy {
    fn connect(
        &self,
        subresource: &str,
        obj: &Value,
        _req: &generic_server::request::ApiRequest,
    ) -> apimachinery::error::Result<generic_server::request::ApiResponse> {
        super::kubelet::node(subresource, obj)
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // kube's TaintNodesByCondition admission (on by default): a new
        // node is not ready until its kubelet says otherwise.
        let tainted = items(obj, "/spec/taints")
            .iter()
            .any(|t| text(t, "/key") == NOT_READY && text(t, "/effect") == "NoSchedule");
        if !tainted {
            let mut taints = items(obj, "/spec/taints").to_vec();
            taints.push(json!({"key": NOT_READY, "effect": "NoSchedule"}));
            fields::set(obj, "/spec/taints", json!(taints));
        }
    }

    fn defaults(&self, obj: &mut Value) {
        // Structs of kube's Node whose fields have no omitempty: answered
        // even when nothing set them.
        if !fields::is_set(obj, "/spec") {
            obj["spec"] = json!({});
        }
        fields::default(
            obj,
            "/status/daemonEndpoints/kubeletEndpoint/Port",
            json!(0),
        );
        for field in NODE_INFO {
            fields::default(obj, &format!("/status/nodeInfo/{field}"), json!(""));
        }
        if !fields::is_set(obj, "/status/allocatable")
            && let Some(capacity) = obj.pointer("/status/capacity").cloned()
        {
            fields::set(obj, "/status/allocatable", capacity);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for (i, taint) in items(obj, "/spec/taints").iter().enumerate() {
            let path = format!("spec.taints[{i}]");
            let (key, effect) = (text(taint, "/key"), text(taint, "/effect"));
            errs.extend(
                validation::qualified_name(key)
                    .into_iter()
                    .map(|m| FieldError::invalid(format!("{path}.key"), key, m)),
            );
            match effect {
                "NoSchedule" | "PreferNoSchedule" | "NoExecute" => {}
                "" => errs.push(FieldError::required(format!("{path}.effect"), "")),
                other => errs.push(FieldError::not_supported(
                    format!("{path}.effect"),
                    other,
                    &["NoSchedule", "PreferNoSchedule", "NoExecute"],
                )),
            }
            if seen.contains(&(key, effect)) {
                errs.push(FieldError::duplicate(path, taint.clone()));
            }
            seen.push((key, effect));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(set_once(
            new,
            old,
            "/spec/podCIDR",
            "podCIDR",
            "spec.podCIDR",
        ));
        errs.extend(set_once(
            new,
            old,
            "/spec/podCIDRs",
            "podCIDRs",
            "spec.podCIDRs",
        ));
        errs.extend(set_once(
            new,
            old,
            "/spec/providerID",
            "providerID",
            "spec.providerID",
        ));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new("Status", "string", "The status of the node"),
            Column::new("Roles", "string", "The roles of the node"),
            table::age_column(),
            Column::new("Version", "string", "Kubelet Version reported by the node."),
            Column::new("Internal-IP", "string", "List of addresses reachable to the node.").wide(),
            Column::new("External-IP", "string", "List of addresses reachable to the node.").wide(),
            Column::new("OS-Image", "string", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).")
                .wide(),
            Column::new("Kernel-Version", "string", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).")
                .wide(),
            Column::new(
                "Container-Runtime",
                "string",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            )
            .wide(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let info = |field: &str| {
            let v = text(obj, &format!("/status/nodeInfo/{field}"));
            json!(if v.is_empty() { "<unknown>" } else { v })
        };
        vec![
            table::name_cell(obj),
            json!(status(obj)),
            json!(roles(obj)),
            table::age_cell(obj),
            fields::text_cell(obj, "/status/nodeInfo/kubeletVersion"),
            json!(address(obj, "InternalIP")),
            json!(address(obj, "ExternalIP")),
            info("osImage"),
            info("kernelVersion"),
            info("containerRuntimeVersion"),
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.unschedulable"]
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        Some(match field {
            "spec.unschedulable" => {
                (obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true))).to_string()
            }
            other => fields::field_string(obj, other),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_not_ready_with_kubes_unset_fields() {
        let mut node = json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}});
        NodeStrategy.prepare_for_create(&mut node);
        NodeStrategy.defaults(&mut node);
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "a", "effect": "NoSchedule"}, {"key": NOT_READY, "effect": "NoSchedule"}])
        );
        NodeStrategy.prepare_for_create(&mut node);
        assert_eq!(items(&node, "/spec/taints").len(), 2, "added once");
        assert_eq!(
            node["status"]["daemonEndpoints"],
            json!({"kubeletEndpoint": {"Port": 0}})
        );
        assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "");
        let mut bare = json!({"metadata": {"name": "n2"}});
        NodeStrategy.defaults(&mut bare);
        assert_eq!(bare["spec"], json!({}));
    }

    #[test]
    fn status_roles_and_fields() {
        let mut node = json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24"},
            "status": {"capacity": {"cpu": "2"}, "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "192.168.1.2"}], "nodeInfo": {"kubeletVersion": "v1.33.0"}}});
        NodeStrategy.defaults(&mut node);
        assert_eq!(node["status"]["allocatable"], json!({"cpu": "2"}));
        let cells = NodeStrategy.cells(&node);
        assert_eq!(cells[1], "Ready,SchedulingDisabled");
        assert_eq!(cells[2], "control-plane");
        assert_eq!(cells[4], "v1.33.0");
        assert_eq!(cells[5], "192.168.1.2");
        assert_eq!(cells[6], "<none>");
        assert_eq!(
            NodeStrategy
                .field_value(&node, "spec.unschedulable")
                .as_deref(),
            Some("true")
        );
        let mut moved = node.clone();
        moved["spec"]["podCIDR"] = json!("10.0.1.0/24");
        assert_eq!(
            NodeStrategy.validate_update(&moved, &node)[0].to_string(),
            "spec.podCIDR: Forbidden: node updates may not change podCIDR except from \"\" to valid"
        );
        let tainted = json!({"spec": {"taints": [{"key": "a", "effect": "Sometimes"}]}});
        assert_eq!(
            NodeStrategy.validate(&tainted)[0].field,
            "spec.taints[0].effect"
        );
    }
}
