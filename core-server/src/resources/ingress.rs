//! networking.k8s.io/v1 Ingresses: every path names its pathType, every
//! backend exactly one service port or resource.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use apimachinery::validation;
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, is_set, items, text};
use super::service;

/// How many hosts the table shows.
const SHOWN: usize = 3;

/// The rules of `networking.k8s.io/v1/Ingress`.
pub struct IngressStrategy;

/// A host or TLS host: a DNS subdomain, optionally with a leading `*.`, never an IP.
fn validate_host(host: &str, field: &str) -> Vec<FieldError> {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return vec![FieldError::invalid(
            field,
            host,
            "must be a DNS name, not an IP address",
        )];
    }
    let (name, wildcard) = match host.strip_prefix("*.") {
        Some(rest) => (rest, true),
        None => (host, false),
    };
    validation::dns1123_subdomain(name)
        .into_iter()
        .map(|m| {
            let msg = if wildcard {
                "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string()
            } else {
                m
            };
            FieldError::invalid(field, host, msg)
        })
        .collect()
}

/// Exactly one of a service (with a port name or number) or a resource.
pub fn validate_backend(backend: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (has_service, has_resource) = (is_set(backend, "/service"), is_set(backend, "/resource"));
    match (has_service, has_resource) {
        (true, true) => errs.push(FieldError::invalid(
            path,
            "",
            "cannot set both resource and service backends",
        )),
        (false, false) => errs.push(FieldError::invalid(
            path,
            "",
            "resource or service backend is required",
        )),
        (true, false) => {
            let name = text(backend, "/service/name");
            if name.is_empty() {
                errs.push(FieldError::required(format!("{path}.service.name"), ""));
            } else {
                errs.extend(
                    validation::dns1035_label(name)
                        .into_iter()
                        .map(|m| FieldError::invalid(format!("{path}.service.name"), name, m)),
                );
            }
            let port_path = format!("{path}.service.port");
            let (port_name, number) = (
                text(backend, "/service/port/name"),
                fields::int(backend, "/service/port/number"),
            );
            match (port_name.is_empty(), number.filter(|n| *n != 0)) {
                (false, Some(_)) => errs.push(FieldError::invalid(
                    port_path,
                    "",
                    "cannot set both port name & port number",
                )),
                (true, None) => errs.push(FieldError::invalid(
                    port_path,
                    "",
                    "port name or number is required",
                )),
                (false, None) => errs.extend(
                    fields::port_name(port_name)
                        .into_iter()
                        .map(|m| FieldError::invalid(format!("{port_path}.name"), port_name, m)),
                ),
                (true, Some(n)) => {
                    errs.extend(fields::port_number(n, &format!("{port_path}.number")))
                }
            }
        }
        (false, true) => {
            for field in ["kind", "name"] {
                if text(backend, &format!("/resource/{field}")).is_empty() {
                    errs.push(FieldError::required(format!("{path}.resource.{field}"), ""));
                }
            }
        }
    }
    errs
}

fn validate_rules(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, rule) in items(obj, "/spec/rules").iter().enumerate() {
        let rpath = format!("spec.rules[{i}]");
        let host = text(rule, "/host");
        if !host.is_empty() {
            errs.extend(validate_host(host, &format!("{rpath}.host")));
        }
        if is_set(rule, "/http") && items(rule, "/http/paths").is_empty() {
            errs.push(FieldError::required(format!("{rpath}.http.paths"), ""));
        }
        for (j, path) in items(rule, "/http/paths").iter().enumerate() {
            let ppath = format!("{rpath}.http.paths[{j}]");
            let value = text(path, "/path");
            match text(path, "/pathType") {
                "" => errs.push(FieldError::required(
                    format!("{ppath}.pathType"),
                    "pathType must be specified",
                )),
                "Exact" | "Prefix" => {
                    if !value.starts_with('/') {
                        errs.push(FieldError::invalid(
                            format!("{ppath}.path"),
                            value,
                            "must be an absolute path",
                        ));
                    }
                    if value.contains("//") {
                        errs.push(FieldError::invalid(
                            format!("{ppath}.path"),
                            value,
                            "must not contain '//'",
                        ));
                    }
                }
                "ImplementationSpecific" => {
                    if !value.is_empty() && !value.starts_with('/') {
                        errs.push(FieldError::invalid(
                            format!("{ppath}.path"),
                            value,
                            "must be an absolute path",
                        ));
                    }
                }
                other => errs.push(FieldError::not_supported(
                    format!("{ppath}.pathType"),
                    other,
                    &["Exact", "ImplementationSpecific", "Prefix"],
                )),
            }
            errs.extend(validate_backend(
                &fields::value(path, "/backend"),
                &format!("{ppath}.backend"),
            ));
        }
    }
    errs
}

impl Strategy for IngressStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"loadBalancer": {}});
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let has_default = is_set(obj, "/spec/defaultBackend");
        if !has_default && items(obj, "/spec/rules").is_empty() {
            errs.push(FieldError::invalid(
                "spec",
                fields::value(obj, "/spec"),
                "either `defaultBackend` or `rules` must be specified",
            ));
        }
        if has_default {
            errs.extend(validate_backend(
                &fields::value(obj, "/spec/defaultBackend"),
                "spec.defaultBackend",
            ));
        }
        errs.extend(validate_rules(obj));
        for (i, tls) in items(obj, "/spec/tls").iter().enumerate() {
            for (j, host) in items(tls, "/hosts").iter().enumerate() {
                errs.extend(validate_host(
                    host.as_str().unwrap_or_default(),
                    &format!("spec.tls[{i}].hosts[{j}]"),
                ));
            }
        }
        let class = text(obj, "/spec/ingressClassName");
        if !class.is_empty() {
            errs.extend(
                validation::dns1123_subdomain(class)
                    .into_iter()
                    .map(|m| FieldError::invalid("spec.ingressClassName", class, m)),
            );
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Class",
                "string",
                "The name of the IngressClass resource that should be used for this Ingress.",
            ),
            Column::new(
                "Hosts",
                "string",
                "Hosts that incoming requests are matched against before the ingress rule",
            ),
            Column::new(
                "Address",
                "string",
                "Address is a list containing ingress points for the load-balancer",
            ),
            Column::new("Ports", "string", "Ports of TLS configurations that open"),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let rules = items(obj, "/spec/rules");
        let hosts: Vec<&str> = rules
            .iter()
            .take(SHOWN)
            .map(|r| text(r, "/host"))
            .filter(|h| !h.is_empty())
            .collect();
        let hosts = match (hosts.is_empty(), rules.len() > SHOWN) {
            (true, _) => "*".to_string(),
            (false, true) => format!("{} + {} more...", hosts.join(","), rules.len() - SHOWN),
            (false, false) => hosts.join(","),
        };
        let class = if is_set(obj, "/spec/ingressClassName") {
            text(obj, "/spec/ingressClassName")
        } else {
            "<none>"
        };
        let ports = if items(obj, "/spec/tls").is_empty() {
            "80"
        } else {
            "80, 443"
        };
        vec![
            table::name_cell(obj),
            json!(class),
            json!(hosts),
            json!(service::load_balancer_cell(obj, false)),
            json!(ports),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_and_row() {
        let ing = json!({"metadata": {"name": "web"}, "spec": {"ingressClassName": "nginx", "rules": [{"host": "example.com", "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}});
        assert!(
            IngressStrategy.validate(&ing).is_empty(),
            "{:?}",
            IngressStrategy.validate(&ing)
        );
        let cells = IngressStrategy.cells(&ing);
        assert_eq!(
            (cells[1].clone(), cells[2].clone(), cells[4].clone()),
            (json!("nginx"), json!("example.com"), json!("80"))
        );
        let mut no_type = ing.clone();
        no_type["spec"]["rules"][0]["http"]["paths"][0]
            .as_object_mut()
            .map(|p| p.remove("pathType"));
        assert_eq!(
            IngressStrategy.validate(&no_type)[0].to_string(),
            "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"
        );
        assert_eq!(
            IngressStrategy.validate(&json!({"spec": {}}))[0].detail,
            "either `defaultBackend` or `rules` must be specified"
        );
    }
}
