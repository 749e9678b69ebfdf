//! discovery.k8s.io/v1 EndpointSlices: ports default to TCP; the address
//! type never changes.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use apimachinery::validation;
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, int, is_set, items, text};

/// Most endpoints or ports a slice may hold.
const MAX_ITEMS: usize = 1000;
/// Most addresses an endpoint may hold.
const MAX_ADDRESSES: usize = 100;
/// How many entries the Ports and Endpoints columns show.
const SHOWN: usize = 3;

/// The rules of `discovery.k8s.io/v1/EndpointSlice`.
pub struct EndpointSliceStrategy;

/// kube's `listWithMoreString`: at most three, then `+ N more...`; `<unset>` when empty.
fn list_cell(list: Vec<String>) -> String {
    let count = list.len();
    let shown = list.into_iter().take(SHOWN).collect::<Vec<_>>().join(",");
    if count > SHOWN {
        format!("{shown} + {} more...", count - SHOWN)
    } else if shown.is_empty() {
        "<unset>".into()
    } else {
        shown
    }
}

impl Strategy for EndpointSliceStrategy {
    fn defaults(&self, obj: &mut Value) {
        // An endpoint's conditions are a struct in kube's types: `{}` when unset.
        fields::each_mut(obj, "/endpoints", |e| {
            if !is_set(e, "/conditions") {
                e["conditions"] = json!({});
            }
        });
        fields::each_mut(obj, "/ports", |p| {
            default(p, "/protocol", json!("TCP"));
            if !is_set(p, "/name") {
                p["name"] = json!("");
            }
        });
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let address_type = text(obj, "/addressType");
        match address_type {
            "IPv4" | "IPv6" | "FQDN" => {}
            "" => errs.push(FieldError::required("addressType", "")),
            other => errs.push(FieldError::not_supported(
                "addressType",
                other,
                &["FQDN", "IPv4", "IPv6"],
            )),
        }
        let endpoints = items(obj, "/endpoints");
        if endpoints.len() > MAX_ITEMS {
            errs.push(fields::too_many("endpoints", MAX_ITEMS));
        }
        for (i, endpoint) in endpoints.iter().enumerate() {
            let addresses = items(endpoint, "/addresses");
            if addresses.is_empty() {
                errs.push(FieldError::required(
                    format!("endpoints[{i}].addresses"),
                    "must contain at least 1 address",
                ));
            } else if addresses.len() > MAX_ADDRESSES {
                errs.push(fields::too_many(
                    format!("endpoints[{i}].addresses"),
                    MAX_ADDRESSES,
                ));
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for (i, port) in items(obj, "/ports").iter().enumerate() {
            let path = format!("ports[{i}]");
            let name = text(port, "/name");
            if !name.is_empty() {
                errs.extend(
                    validation::dns1123_label(name)
                        .into_iter()
                        .map(|m| FieldError::invalid(format!("{path}.name"), name, m)),
                );
            }
            if names.contains(&name) {
                errs.push(FieldError::duplicate(format!("{path}.name"), name));
            }
            names.push(name);
            if let Some(number) = int(port, "/port") {
                errs.extend(fields::port_number(number, &format!("{path}.port")));
            }
            let protocol = text(port, "/protocol");
            if !matches!(protocol, "TCP" | "UDP" | "SCTP") {
                errs.push(FieldError::not_supported(
                    format!("{path}.protocol"),
                    protocol,
                    &["SCTP", "TCP", "UDP"],
                ));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(fields::immutable(new, old, "/addressType", "addressType"));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new("AddressType", "string", "The IP protocol for this slice"),
            Column::new("Ports", "string", "The ports for this slice"),
            Column::new("Endpoints", "string", "The endpoints for this slice"),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let ports = items(obj, "/ports")
            .iter()
            .map(|p| match int(p, "/port") {
                Some(n) => n.to_string(),
                None if !text(p, "/name").is_empty() => text(p, "/name").to_string(),
                None => "*".into(),
            })
            .collect();
        let addresses = items(obj, "/endpoints")
            .iter()
            .flat_map(|e| {
                items(e, "/addresses")
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
            })
            .collect();
        vec![
            table::name_cell(obj),
            fields::text_cell(obj, "/addressType"),
            json!(list_cell(ports)),
            json!(list_cell(addresses)),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validation_and_row() {
        let mut slice = json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4", "ports": [{"port": 80}],
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}, {"addresses": ["10.0.0.3"]}, {"addresses": ["10.0.0.4"]}]});
        EndpointSliceStrategy.defaults(&mut slice);
        assert_eq!(
            slice["ports"][0],
            json!({"port": 80, "protocol": "TCP", "name": ""})
        );
        assert!(EndpointSliceStrategy.validate(&slice).is_empty());
        let cells = EndpointSliceStrategy.cells(&slice);
        assert_eq!(cells[2], "80");
        assert_eq!(cells[3], "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...");
        let mut changed = slice.clone();
        changed["addressType"] = json!("IPv6");
        assert_eq!(
            EndpointSliceStrategy.validate_update(&changed, &slice)[0].to_string(),
            "addressType: Invalid value: \"IPv6\": field is immutable"
        );
    }
}
