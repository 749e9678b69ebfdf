//! Endpoints: addresses and ports of a service, deprecated in 1.33 in favour
//! of EndpointSlices (writes carry kube's deprecation warning).

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, int, items, text};

/// The warning kube 1.33 returns for v1 Endpoints.
const DEPRECATED: &str =
    "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice";

/// How many endpoints the table shows before `+ N more...`.
const SHOWN: usize = 3;

/// The rules of `v1/Endpoints`.
pub struct EndpointsStrategy;

/// kube's `formatEndpoints`: `ip:port` pairs, at most three, `<none>` without subsets.
fn endpoints_cell(obj: &Value) -> String {
    let subsets = items(obj, "/subsets");
    if subsets.is_empty() {
        return "<none>".into();
    }
    let mut list = Vec::new();
    let mut count = 0;
    for subset in subsets {
        let addresses = items(subset, "/addresses");
        let ports = items(subset, "/ports");
        if ports.is_empty() {
            count += addresses.len();
            list.extend(addresses.iter().map(|a| text(a, "/ip").to_string()));
            continue;
        }
        for port in ports {
            count += addresses.len();
            let number = int(port, "/port").unwrap_or(0);
            list.extend(addresses.iter().map(|a| {
                let ip = text(a, "/ip");
                if ip.contains(':') {
                    format!("[{ip}]:{number}")
                } else {
                    format!("{ip}:{number}")
                }
            }));
        }
    }
    if count > SHOWN {
        list.truncate(SHOWN);
        format!("{} + {} more...", list.join(","), count - SHOWN)
    } else {
        list.join(",")
    }
}

impl Strategy for EndpointsStrategy {
    fn defaults(&self, obj: &mut Value) {
        fields::each_mut(obj, "/subsets", |s| {
            fields::each_mut(s, "/ports", |p| default(p, "/protocol", json!("TCP")))
        });
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for (i, subset) in items(obj, "/subsets").iter().enumerate() {
            for list in ["addresses", "notReadyAddresses"] {
                for (j, address) in items(subset, &format!("/{list}")).iter().enumerate() {
                    if text(address, "/ip").is_empty() {
                        errs.push(FieldError::required(
                            format!("subsets[{i}].{list}[{j}].ip"),
                            "",
                        ));
                    }
                }
            }
            let ports = items(subset, "/ports");
            for (j, port) in ports.iter().enumerate() {
                let path = format!("subsets[{i}].ports[{j}]");
                if ports.len() > 1 && text(port, "/name").is_empty() {
                    errs.push(FieldError::required(format!("{path}.name"), ""));
                }
                errs.extend(fields::port_number(
                    int(port, "/port").unwrap_or(0),
                    &format!("{path}.port"),
                ));
                let protocol = text(port, "/protocol");
                if !matches!(protocol, "TCP" | "UDP" | "SCTP") {
                    errs.push(FieldError::not_supported(
                        format!("{path}.protocol"),
                        protocol,
                        &["SCTP", "TCP", "UDP"],
                    ));
                }
            }
        }
        errs
    }

    fn warnings(&self, _obj: &Value) -> Vec<String> {
        vec![DEPRECATED.to_string()]
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Endpoints",
                "string",
                "The set of all endpoints is the union of all subsets.",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            json!(endpoints_cell(obj)),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_and_row() {
        let mut ep = json!({"metadata": {"name": "web"}, "subsets": [{"addresses": [{"ip": "10.1.0.1"}, {"ip": "10.1.0.2"}], "ports": [{"port": 80}, {"port": 443}]}]});
        EndpointsStrategy.defaults(&mut ep);
        assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(
            EndpointsStrategy.validate(&ep)[0].to_string(),
            "subsets[0].ports[0].name: Required value"
        );
        assert_eq!(
            EndpointsStrategy.cells(&ep)[1],
            "10.1.0.1:80,10.1.0.2:80,10.1.0.1:443 + 1 more..."
        );
        assert_eq!(
            EndpointsStrategy.cells(&json!({"metadata": {"name": "x"}}))[1],
            "<none>"
        );
    }
}
