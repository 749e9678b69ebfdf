//! Services: defaulting and validation only. ClusterIP and NodePort
//! allocation belongs to an admission plugin; here the cluster IPs, once
//! set, never change, and an update that omits them (or its node ports)
//! keeps the stored ones, as kube's service REST does.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use apimachinery::validation::{self, NameRule};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, has, int, is_set, items, text};

/// The NodePort range kube-apiserver serves by default.
const NODE_PORT_RANGE: std::ops::RangeInclusive<i64> = 30000..=32767;

/// How wide the External-IP column may grow for a load balancer (without `-o wide`).
const LOAD_BALANCER_WIDTH: usize = 16;

/// The rules of `v1/Service`.
pub struct ServiceStrategy;

fn service_type(obj: &Value) -> &str {
    text(obj, "/spec/type")
}

fn is_headless(obj: &Value) -> bool {
    text(obj, "/spec/clusterIP") == "None"
}

fn needs_node_ports(obj: &Value) -> bool {
    matches!(service_type(obj), "NodePort" | "LoadBalancer")
}

/// Keeps `clusterIP` and `clusterIPs` in step, as kube's REST layer does.
fn sync_cluster_ips(spec: &mut Value) {
    let ip = text(spec, "/clusterIP").to_string();
    let first = text(spec, "/clusterIPs/0").to_string();
    if !ip.is_empty() && first.is_empty() {
        spec["clusterIPs"] = json!([ip]);
    } else if ip.is_empty() && !first.is_empty() {
        spec["clusterIP"] = json!(first);
    }
}

fn default_ip_families(obj: &mut Value) {
    if service_type(obj) == "ExternalName" {
        return;
    }
    let policy = if is_headless(obj) && !has(obj, "/spec/selector") {
        "RequireDualStack"
    } else {
        "SingleStack"
    };
    default(obj, "/spec/ipFamilyPolicy", json!(policy));
    if items(obj, "/spec/ipFamilies").is_empty() {
        let families: Vec<&str> = items(obj, "/spec/clusterIPs")
            .iter()
            .filter_map(Value::as_str)
            .filter(|ip| *ip != "None")
            .map(|ip| if ip.contains(':') { "IPv6" } else { "IPv4" })
            .collect();
        obj["spec"]["ipFamilies"] = if families.is_empty() {
            json!(["IPv4"])
        } else {
            json!(families)
        };
    }
}

/// kube's `dropTypeDependentFields`: switching to a type that does not use a
/// field clears it, when the update left it as it was.
fn drop_type_dependent_fields(new: &mut Value, old: &Value) {
    let same = |new: &Value, pointer: &str| new.pointer(pointer) == old.pointer(pointer);
    let node_ports = |svc: &Value| -> Vec<i64> {
        items(svc, "/spec/ports")
            .iter()
            .filter_map(|p| int(p, "/nodePort"))
            .filter(|n| *n != 0)
            .collect()
    };
    let kind = service_type(new).to_string();
    let mut drop: Vec<&str> = Vec::new();
    if kind == "ExternalName" {
        if same(new, "/spec/clusterIP") && same(new, "/spec/clusterIPs") {
            drop.extend(["/spec/clusterIP", "/spec/clusterIPs"]);
            if same(new, "/spec/ipFamilies") && same(new, "/spec/ipFamilyPolicy") {
                drop.extend(["/spec/ipFamilies", "/spec/ipFamilyPolicy"]);
            }
        }
        if same(new, "/spec/internalTrafficPolicy") {
            drop.push("/spec/internalTrafficPolicy");
        }
    }
    if kind != "LoadBalancer" {
        for field in [
            "/spec/healthCheckNodePort",
            "/spec/allocateLoadBalancerNodePorts",
            "/spec/loadBalancerClass",
        ] {
            if same(new, field) {
                drop.push(field);
            }
        }
    }
    let externally_accessible = needs_node_ports(new)
        || (matches!(kind.as_str(), "" | "ClusterIP") && has(new, "/spec/externalIPs"));
    if !externally_accessible && same(new, "/spec/externalTrafficPolicy") {
        drop.push("/spec/externalTrafficPolicy");
    }
    let old_node_ports = node_ports(old);
    let clear_node_ports =
        !needs_node_ports(new) && node_ports(new).iter().all(|p| old_node_ports.contains(p));
    for field in drop {
        fields::remove(new, field);
    }
    if clear_node_ports {
        fields::each_mut(new, "/spec/ports", |p| fields::remove(p, "/nodePort"));
    }
}

fn validate_ports(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ports = items(obj, "/spec/ports");
    let mut names: Vec<&str> = Vec::new();
    let mut seen: Vec<(&str, i64)> = Vec::new();
    let mut node_ports: Vec<(&str, i64)> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        let name = text(p, "/name");
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        } else if !name.is_empty() {
            errs.extend(
                validation::dns1123_label(name)
                    .into_iter()
                    .map(|m| FieldError::invalid(format!("{path}.name"), name, m)),
            );
            if names.contains(&name) {
                errs.push(FieldError::duplicate(format!("{path}.name"), name));
            } else {
                names.push(name);
            }
        }
        let port = int(p, "/port").unwrap_or(0);
        errs.extend(fields::port_number(port, &format!("{path}.port")));
        let protocol = text(p, "/protocol");
        match protocol {
            "TCP" | "UDP" | "SCTP" => {}
            "" => errs.push(FieldError::required(format!("{path}.protocol"), "")),
            other => errs.push(FieldError::not_supported(
                format!("{path}.protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
        match p.get("targetPort") {
            Some(Value::Number(n)) => errs.extend(fields::port_number(
                n.as_i64().unwrap_or(0),
                &format!("{path}.targetPort"),
            )),
            Some(Value::String(s)) if s.is_empty() => {
                errs.push(FieldError::required(format!("{path}.targetPort"), ""))
            }
            Some(Value::String(s)) => errs.extend(
                fields::port_name(s)
                    .into_iter()
                    .map(|m| FieldError::invalid(format!("{path}.targetPort"), s.as_str(), m)),
            ),
            _ => {}
        }
        let node_port = int(p, "/nodePort").unwrap_or(0);
        if node_port != 0 {
            if service_type(obj) == "ClusterIP" {
                errs.push(FieldError::forbidden(
                    format!("{path}.nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            } else if !NODE_PORT_RANGE.contains(&node_port) {
                errs.push(FieldError::invalid(
                    format!("{path}.nodePort"),
                    node_port,
                    "provided port is not in the valid range. The range of valid ports is 30000-32767",
                ));
            }
            if node_ports.contains(&(protocol, node_port)) {
                errs.push(FieldError::duplicate(format!("{path}.nodePort"), node_port));
            }
            node_ports.push((protocol, node_port));
        }
        if seen.contains(&(protocol, port)) {
            errs.push(FieldError::duplicate(
                path,
                json!({"port": port, "protocol": protocol}),
            ));
        }
        seen.push((protocol, port));
    }
    errs
}

fn validate_cluster_ips_update(new: &Value, old: &Value) -> Vec<FieldError> {
    if service_type(new) == "ExternalName"
        || service_type(old) == "ExternalName"
        || (is_headless(new) && is_headless(old))
    {
        return Vec::new();
    }
    let (new_ips, old_ips) = (
        items(new, "/spec/clusterIPs"),
        items(old, "/spec/clusterIPs"),
    );
    let shown = || json!(new_ips);
    let mut errs = Vec::new();
    if new_ips.len() == old_ips.len() {
        for (i, ip) in old_ips.iter().enumerate() {
            if new_ips.get(i) != Some(ip) {
                errs.push(FieldError::invalid(
                    format!("spec.clusterIPs[{i}]"),
                    shown(),
                    "may not change once set",
                ));
            }
        }
    } else if new_ips.is_empty() {
        errs.push(FieldError::invalid(
            "spec.clusterIPs[0]",
            shown(),
            "primary clusterIP can not be unset",
        ));
    } else if !old_ips.is_empty() && new_ips[0] != old_ips[0] {
        errs.push(FieldError::invalid(
            "spec.clusterIPs[0]",
            shown(),
            "may not change once set",
        ));
    }
    errs
}

/// kube's `makePortString`: `80/TCP`, `80:30080/TCP`, joined by commas.
fn ports_cell(obj: &Value) -> String {
    let ports: Vec<String> = items(obj, "/spec/ports")
        .iter()
        .map(|p| {
            let (port, protocol) = (int(p, "/port").unwrap_or(0), text(p, "/protocol"));
            match int(p, "/nodePort").unwrap_or(0) {
                0 => format!("{port}/{protocol}"),
                node => format!("{port}:{node}/{protocol}"),
            }
        })
        .collect();
    fields::none_if_empty(ports.join(","))
}

/// The load balancer ingress points, truncated as kube prints them unless wide.
pub fn load_balancer_cell(obj: &Value, wide: bool) -> String {
    let points: Vec<&str> = items(obj, "/status/loadBalancer/ingress")
        .iter()
        .map(|i| {
            if text(i, "/ip").is_empty() {
                text(i, "/hostname")
            } else {
                text(i, "/ip")
            }
        })
        .filter(|s| !s.is_empty())
        .collect();
    let joined = points.join(",");
    if !wide && joined.len() > LOAD_BALANCER_WIDTH {
        format!("{}...", &joined[..LOAD_BALANCER_WIDTH - 3])
    } else {
        joined
    }
}

fn external_ip_cell(obj: &Value) -> String {
    let external: Vec<&str> = items(obj, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match service_type(obj) {
        "ClusterIP" | "NodePort" => fields::none_if_empty(external.join(",")),
        "LoadBalancer" => {
            let lb = load_balancer_cell(obj, false);
            let all: Vec<&str> = lb
                .split(',')
                .filter(|s| !s.is_empty())
                .chain(external)
                .collect();
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => text(obj, "/spec/externalName").to_string(),
        _ => "<unknown>".into(),
    }
}

impl Strategy for ServiceStrategy {
    /// DELETE answers with the object, as kube's registry declares (`ReturnDeletedObject`).
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn defaults(&self, obj: &mut Value) {
        if !obj.get("spec").is_some_and(Value::is_object) {
            obj["spec"] = json!({});
        }
        default(obj, "/spec/sessionAffinity", json!("None"));
        match text(obj, "/spec/sessionAffinity") {
            "None" => fields::remove(obj, "/spec/sessionAffinityConfig"),
            "ClientIP" => default(
                obj,
                "/spec/sessionAffinityConfig/clientIP/timeoutSeconds",
                json!(10800),
            ),
            _ => {}
        }
        default(obj, "/spec/type", json!("ClusterIP"));
        fields::each_mut(obj, "/spec/ports", |p| {
            default(p, "/protocol", json!("TCP"));
            if matches!(p.get("targetPort"), None | Some(Value::Null))
                || p["targetPort"] == json!(0)
                || p["targetPort"] == json!("")
            {
                p["targetPort"] = p.get("port").cloned().unwrap_or(json!(0));
            }
        });
        let kind = service_type(obj).to_string();
        let externally_accessible =
            needs_node_ports(obj) || (kind == "ClusterIP" && has(obj, "/spec/externalIPs"));
        if externally_accessible {
            default(obj, "/spec/externalTrafficPolicy", json!("Cluster"));
        }
        if matches!(kind.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
            default(obj, "/spec/internalTrafficPolicy", json!("Cluster"));
        }
        if kind == "LoadBalancer" {
            default(obj, "/spec/allocateLoadBalancerNodePorts", json!(true));
        }
        sync_cluster_ips(&mut obj["spec"]);
        default_ip_families(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"loadBalancer": {}});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        drop_type_dependent_fields(new, old);
        if service_type(new) != "ExternalName"
            && !is_set(new, "/spec/clusterIP")
            && !is_set(new, "/spec/clusterIPs")
        {
            for field in ["/spec/clusterIP", "/spec/clusterIPs"] {
                if let Some(v) = old.pointer(field) {
                    fields::set(new, field, v.clone());
                }
            }
        }
        if service_type(new) != "ExternalName" {
            for field in ["/spec/ipFamilyPolicy", "/spec/ipFamilies"] {
                if !is_set(new, field)
                    && let Some(v) = old.pointer(field)
                {
                    fields::set(new, field, v.clone());
                }
            }
        }
        if needs_node_ports(new) && matches!(text(old, "/spec/type"), "NodePort" | "LoadBalancer") {
            let old_ports = items(old, "/spec/ports").to_vec();
            let in_use: Vec<i64> = items(new, "/spec/ports")
                .iter()
                .filter_map(|p| int(p, "/nodePort"))
                .filter(|n| *n != 0)
                .collect();
            fields::each_mut(new, "/spec/ports", |p| {
                if int(p, "/nodePort").unwrap_or(0) != 0 {
                    return;
                }
                let known = old_ports
                    .iter()
                    .find(|o| text(o, "/name") == text(p, "/name"))
                    .and_then(|o| int(o, "/nodePort"));
                if let Some(port) = known.filter(|n| *n != 0 && !in_use.contains(n)) {
                    p["nodePort"] = json!(port);
                }
            });
            if int(new, "/spec/healthCheckNodePort").unwrap_or(0) == 0
                && let Some(port) = old.pointer("/spec/healthCheckNodePort")
            {
                fields::set(new, "/spec/healthCheckNodePort", port.clone());
            }
        }
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035Label
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let kind = service_type(obj);
        if items(obj, "/spec/ports").is_empty() && !is_headless(obj) && kind != "ExternalName" {
            errs.push(FieldError::required("spec.ports", ""));
        }
        if kind == "ExternalName" {
            if !items(obj, "/spec/clusterIPs").is_empty() {
                errs.push(FieldError::forbidden(
                    "spec.clusterIPs",
                    "may not be set for ExternalName services",
                ));
            }
            let cname = text(obj, "/spec/externalName").trim_end_matches('.');
            if cname.is_empty() {
                errs.push(FieldError::required("spec.externalName", ""));
            } else {
                errs.extend(
                    validation::dns1123_subdomain(cname)
                        .into_iter()
                        .map(|m| FieldError::invalid("spec.externalName", cname, m)),
                );
            }
        }
        errs.extend(validate_ports(obj));
        errs.extend(validation::labels(
            obj.pointer("/spec/selector"),
            "spec.selector",
        ));
        match text(obj, "/spec/sessionAffinity") {
            "None" | "ClientIP" => {}
            "" => errs.push(FieldError::required("spec.sessionAffinity", "")),
            other => errs.push(FieldError::not_supported(
                "spec.sessionAffinity",
                other,
                &["ClientIP", "None"],
            )),
        }
        if let Some(timeout) = int(obj, "/spec/sessionAffinityConfig/clientIP/timeoutSeconds")
            && !(1..=86400).contains(&timeout)
        {
            errs.push(FieldError::invalid(
                "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                timeout,
                "must be greater than 0 and less than 86400",
            ));
        }
        match kind {
            "ClusterIP" | "ExternalName" | "LoadBalancer" | "NodePort" => {}
            "" => errs.push(FieldError::required("spec.type", "")),
            other => errs.push(FieldError::not_supported(
                "spec.type",
                other,
                &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
            )),
        }
        for (field, allowed) in [
            ("externalTrafficPolicy", ["Cluster", "Local"]),
            ("internalTrafficPolicy", ["Cluster", "Local"]),
        ] {
            let policy = text(obj, &format!("/spec/{field}"));
            if !policy.is_empty() && !allowed.contains(&policy) {
                errs.push(FieldError::not_supported(
                    format!("spec.{field}"),
                    policy,
                    &allowed,
                ));
            }
        }
        let policy = text(obj, "/spec/ipFamilyPolicy");
        if !policy.is_empty()
            && !["SingleStack", "PreferDualStack", "RequireDualStack"].contains(&policy)
        {
            errs.push(FieldError::not_supported(
                "spec.ipFamilyPolicy",
                policy,
                &["SingleStack", "PreferDualStack", "RequireDualStack"],
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(validate_cluster_ips_update(new, old));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Type",
                "string",
                "type determines how the Service is exposed.",
            ),
            Column::new(
                "Cluster-IP",
                "string",
                "clusterIP is the IP address of the service and is usually assigned randomly.",
            ),
            Column::new(
                "External-IP",
                "string",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            ),
            Column::new(
                "Port(s)",
                "string",
                "The list of ports that are exposed by this service.",
            ),
            table::age_column(),
            Column::new(
                "Selector",
                "string",
                "Route service traffic to pods with label keys and values matching this selector.",
            )
            .wide(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            json!(service_type(obj)),
            json!(fields::none_if_empty(
                text(obj, "/spec/clusterIP").to_string()
            )),
            json!(external_ip_cell(obj)),
            json!(ports_cell(obj)),
            table::age_cell(obj),
            json!(fields::format_labels(obj.pointer("/spec/selector"))),
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.clusterIP", "spec.type"]
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        Some(fields::field_string(obj, field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(spec: Value) -> Value {
        let mut svc = json!({"metadata": {"name": "web"}, "spec": spec});
        ServiceStrategy.prepare_for_create(&mut svc);
        ServiceStrategy.defaults(&mut svc);
        svc
    }

    #[test]
    fn defaults() {
        let svc = created(json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}));
        let spec = &svc["spec"];
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        assert_eq!(spec["internalTrafficPolicy"], "Cluster");
        assert_eq!(
            spec["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert!(spec.get("externalTrafficPolicy").is_none());
        assert!(ServiceStrategy.validate(&svc).is_empty());
        let node_port =
            created(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}));
        assert_eq!(node_port["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(
            ServiceStrategy.validate(&node_port)[0].to_string(),
            "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"
        );
    }

    #[test]
    fn validation_messages() {
        let errs: Vec<String> = ServiceStrategy
            .validate(&created(
                json!({"ports": [{"name": "a", "port": 0}, {"name": "a", "port": 81}]}),
            ))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            errs.contains(
                &"spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"
                    .to_string()
            ),
            "{errs:?}"
        );
        assert!(errs.contains(&"spec.ports[1].name: Duplicate value: \"a\"".to_string()));
        assert_eq!(
            ServiceStrategy.validate(&created(json!({})))[0].to_string(),
            "spec.ports: Required value"
        );
        assert!(
            ServiceStrategy
                .validate(&created(json!({"clusterIP": "None"})))
                .is_empty()
        );
        let ext = created(json!({"type": "ExternalName"}));
        assert_eq!(
            ServiceStrategy.validate(&ext)[0].to_string(),
            "spec.externalName: Required value"
        );
    }

    #[test]
    fn cluster_ips_are_kept_and_immutable() {
        let old = created(json!({"clusterIP": "10.0.0.10", "ports": [{"port": 80}]}));
        assert_eq!(old["spec"]["clusterIPs"], json!(["10.0.0.10"]));
        let mut omitted = json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}});
        ServiceStrategy.prepare_for_update(&mut omitted, &old);
        ServiceStrategy.defaults(&mut omitted);
        assert_eq!(omitted["spec"]["clusterIP"], "10.0.0.10");
        assert!(ServiceStrategy.validate_update(&omitted, &old).is_empty());
        let mut changed = old.clone();
        changed["spec"]["clusterIP"] = json!("10.0.0.11");
        changed["spec"]["clusterIPs"] = json!(["10.0.0.11"]);
        let errs = ServiceStrategy.validate_update(&changed, &old);
        assert_eq!(
            errs[0].to_string(),
            "spec.clusterIPs[0]: Invalid value: [\"10.0.0.11\"]: may not change once set"
        );
    }

    #[test]
    fn changing_type_drops_what_the_new_type_does_not_use() {
        let old = created(
            json!({"type": "NodePort", "clusterIP": "10.0.0.1", "ports": [{"port": 80, "nodePort": 30080}]}),
        );
        let mut to_cluster_ip = old.clone();
        to_cluster_ip["spec"]["type"] = json!("ClusterIP");
        ServiceStrategy.prepare_for_update(&mut to_cluster_ip, &old);
        ServiceStrategy.defaults(&mut to_cluster_ip);
        assert!(to_cluster_ip["spec"]["ports"][0].get("nodePort").is_none());
        assert!(to_cluster_ip["spec"].get("externalTrafficPolicy").is_none());
        assert!(
            ServiceStrategy
                .validate_update(&to_cluster_ip, &old)
                .is_empty()
        );
        let mut to_external = old.clone();
        to_external["spec"]["type"] = json!("ExternalName");
        to_external["spec"]["externalName"] = json!("example.com");
        ServiceStrategy.prepare_for_update(&mut to_external, &old);
        ServiceStrategy.defaults(&mut to_external);
        assert!(to_external["spec"].get("clusterIP").is_none());
        assert!(
            ServiceStrategy
                .validate_update(&to_external, &old)
                .is_empty(),
            "{:?}",
            ServiceStrategy.validate_update(&to_external, &old)
        );
    }

    #[test]
    fn table_row() {
        let svc = created(
            json!({"type": "NodePort", "clusterIP": "10.0.0.1", "selector": {"app": "web"}, "ports": [{"port": 80, "nodePort": 30080}]}),
        );
        let cells = ServiceStrategy.cells(&svc);
        assert_eq!(cells[1], "NodePort");
        assert_eq!(cells[2], "10.0.0.1");
        assert_eq!(cells[3], "<none>");
        assert_eq!(cells[4], "80:30080/TCP");
        assert_eq!(cells[6], "app=web");
        let lb = created(json!({"type": "LoadBalancer", "ports": [{"port": 80}]}));
        assert_eq!(ServiceStrategy.cells(&lb)[3], "<pending>");
    }
}
