//! networking.k8s.io/v1 NetworkPolicies: ports default to TCP and
//! policyTypes to Ingress (plus Egress when egress rules are given).

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, int, is_set, items, text};

/// The rules of `networking.k8s.io/v1/NetworkPolicy`.
pub struct NetworkPolicyStrategy;

fn validate_ports(ports: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    for (i, port) in ports.iter().enumerate() {
        let ppath = format!("{path}.ports[{i}]");
        let protocol = text(port, "/protocol");
        if !matches!(protocol, "TCP" | "UDP" | "SCTP") {
            errs.push(FieldError::not_supported(
                format!("{ppath}.protocol"),
                protocol,
                &["SCTP", "TCP", "UDP"],
            ));
        }
        match port.get("port") {
            Some(Value::Number(n)) => {
                let start = n.as_i64().unwrap_or(0);
                errs.extend(fields::port_number(start, &format!("{ppath}.port")));
                if let Some(end) = int(port, "/endPort")
                    && end < start
                {
                    errs.push(FieldError::invalid(
                        format!("{ppath}.endPort"),
                        end,
                        "must be greater than or equal to `port`",
                    ));
                }
            }
            Some(Value::String(name)) => {
                errs.extend(
                    fields::port_name(name)
                        .into_iter()
                        .map(|m| FieldError::invalid(format!("{ppath}.port"), name.as_str(), m)),
                );
                if is_set(port, "/endPort") {
                    errs.push(FieldError::invalid(
                        format!("{ppath}.endPort"),
                        int(port, "/endPort").unwrap_or(0),
                        "may not be used when `port` is non-numeric",
                    ));
                }
            }
            _ if is_set(port, "/endPort") => errs.push(FieldError::required(
                format!("{ppath}.port"),
                "must be specified when `endPort` is specified",
            )),
            _ => {}
        }
    }
}

fn validate_peers(peers: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    for (i, peer) in peers.iter().enumerate() {
        let ppath = format!("{path}[{i}]");
        let selectors = ["podSelector", "namespaceSelector"]
            .iter()
            .filter(|s| is_set(peer, &format!("/{s}")))
            .count();
        if is_set(peer, "/ipBlock") {
            if selectors > 0 {
                errs.push(FieldError::forbidden(
                    ppath.clone(),
                    "may not specify both ipBlock and another peer",
                ));
            }
            if text(peer, "/ipBlock/cidr").is_empty() {
                errs.push(FieldError::required(format!("{ppath}.ipBlock.cidr"), ""));
            }
        } else if selectors == 0 {
            errs.push(FieldError::required(ppath.clone(), "must specify a peer"));
        }
        for selector in ["podSelector", "namespaceSelector"] {
            if let Some(s) = peer.get(selector).filter(|s| !s.is_null()) {
                errs.extend(fields::label_selector(s, &format!("{ppath}.{selector}")));
            }
        }
    }
}

impl Strategy for NetworkPolicyStrategy {
    fn defaults(&self, obj: &mut Value) {
        for rules in ["/spec/ingress", "/spec/egress"] {
            fields::each_mut(obj, rules, |rule| {
                fields::each_mut(rule, "/ports", |p| default(p, "/protocol", json!("TCP")))
            });
        }
        if items(obj, "/spec/policyTypes").is_empty() {
            let types = if items(obj, "/spec/egress").is_empty() {
                json!(["Ingress"])
            } else {
                json!(["Ingress", "Egress"])
            };
            fields::set(obj, "/spec/policyTypes", types);
        }
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs =
            fields::label_selector(&fields::value(obj, "/spec/podSelector"), "spec.podSelector");
        for (i, rule) in items(obj, "/spec/ingress").iter().enumerate() {
            let path = format!("spec.ingress[{i}]");
            validate_ports(items(rule, "/ports"), &path, &mut errs);
            validate_peers(items(rule, "/from"), &format!("{path}.from"), &mut errs);
        }
        for (i, rule) in items(obj, "/spec/egress").iter().enumerate() {
            let path = format!("spec.egress[{i}]");
            validate_ports(items(rule, "/ports"), &path, &mut errs);
            validate_peers(items(rule, "/to"), &format!("{path}.to"), &mut errs);
        }
        let types = items(obj, "/spec/policyTypes");
        for (i, kind) in types.iter().enumerate() {
            let kind = kind.as_str().unwrap_or_default();
            if kind != "Ingress" && kind != "Egress" {
                errs.push(FieldError::not_supported(
                    format!("spec.policyTypes[{i}]"),
                    kind,
                    &["Ingress", "Egress"],
                ));
            }
        }
        if types.len() > 2 {
            errs.push(FieldError::invalid(
                "spec.policyTypes",
                json!(types),
                "may not specify more than two policyTypes",
            ));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Pod-Selector",
                "string",
                "podSelector selects the pods to which this NetworkPolicy object applies.",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            json!(fields::format_selector(obj.pointer("/spec/podSelector"))),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_and_row() {
        let mut np = json!({"metadata": {"name": "deny"}, "spec": {"podSelector": {"matchLabels": {"app": "db"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "api"}}}], "ports": [{"port": 5432}]}]}});
        NetworkPolicyStrategy.defaults(&mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
        assert_eq!(np["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
        assert!(
            NetworkPolicyStrategy.validate(&np).is_empty(),
            "{:?}",
            NetworkPolicyStrategy.validate(&np)
        );
        assert_eq!(NetworkPolicyStrategy.cells(&np)[1], "app=db");
        np["spec"]["ingress"][0]["ports"][0]["port"] = json!(70000);
        assert_eq!(
            NetworkPolicyStrategy.validate(&np)[0].field,
            "spec.ingress[0].ports[0].port"
        );
        let all = json!({"spec": {"podSelector": {}}});
        assert_eq!(NetworkPolicyStrategy.cells(&all)[1], "<none>");
    }
}
