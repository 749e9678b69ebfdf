//! storage.k8s.io/v1 CSIStorageCapacities: the capacity a CSI driver
//! reports for a storage class in a topology segment. The class and the
//! topology, the inputs of the driver's GetCapacity call, never change.

use apimachinery::error::FieldError;
use apimachinery::quantity::{self, Quantity};
use apimachinery::validation;
use generic_server::strategy::Strategy;
use serde_json::Value;

use super::fields::{self, text};

/// The rules of `storage.k8s.io/v1/CSIStorageCapacity`.
pub struct CSIStorageCapacityStrategy;

impl Strategy for CSIStorageCapacityStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = match obj.get("nodeTopology") {
            Some(selector) if !selector.is_null() => {
                fields::label_selector(selector, "nodeTopology")
            }
            _ => Vec::new(),
        };
        let class = text(obj, "/storageClassName");
        for msg in validation::dns1123_subdomain(class) {
            errs.push(FieldError::invalid("storageClassName", class, msg));
        }
        if let Some(capacity) = obj.get("capacity").filter(|c| !c.is_null()) {
            match Quantity::of(capacity) {
                Some(q) if q.is_negative() => errs.push(FieldError::invalid(
                    "capacity",
                    q.to_string(),
                    "must be greater than or equal to 0",
                )),
                Some(_) => {}
                None => {
                    let one =
                        serde_json::Map::from_iter([("capacity".to_string(), capacity.clone())]);
                    errs.extend(
                        quantity::validate_list(Some(&Value::Object(one)), "")
                            .into_iter()
                            .map(|e| FieldError {
                                field: "capacity".into(),
                                ..e
                            }),
                    );
                }
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(fields::immutable(new, old, "/nodeTopology", "nodeTopology"));
        errs.extend(fields::immutable(
            new,
            old,
            "/storageClassName",
            "storageClassName",
        ));
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn capacity() -> Value {
        json!({"metadata": {"name": "csisc-abc", "namespace": "kube-system"}, "storageClassName": "fast",
            "nodeTopology": {"matchLabels": {"topology.hostpath.csi/node": "node-a"}},
            "capacity": "1073741824", "maximumVolumeSize": "10Gi"})
    }

    #[test]
    fn valid_capacity_and_default_table() {
        assert!(CSIStorageCapacityStrategy.validate(&capacity()).is_empty());
        let mut created = capacity();
        created["metadata"]["creationTimestamp"] = json!("2025-05-01T10:00:00Z");
        assert_eq!(
            CSIStorageCapacityStrategy.cells(&created),
            [json!("csisc-abc"), json!("2025-05-01T10:00:00Z")]
        );
        let columns = CSIStorageCapacityStrategy.columns();
        assert_eq!(
            (columns[1].name.as_str(), columns[1].type_.as_str()),
            ("Created At", "date")
        );
    }

    #[test]
    fn refusals() {
        let bad = json!({"nodeTopology": {"matchExpressions": [{"key": "zone", "operator": "In"}]},
            "capacity": "-1Gi"});
        assert_eq!(
            messages(&CSIStorageCapacityStrategy.validate(&bad)),
            [
                "nodeTopology.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "storageClassName: Invalid value: \"\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "capacity: Invalid value: \"-1Gi\": must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn class_and_topology_are_immutable() {
        let old = capacity();
        let mut new = old.clone();
        new["storageClassName"] = json!("slow");
        new["capacity"] = json!("2Gi");
        assert_eq!(
            messages(&CSIStorageCapacityStrategy.validate_update(&new, &old)),
            ["storageClassName: Invalid value: \"slow\": field is immutable"]
        );
        new["storageClassName"] = json!("fast");
        new["nodeTopology"] = json!({});
        assert_eq!(
            CSIStorageCapacityStrategy.validate_update(&new, &old)[0].field,
            "nodeTopology"
        );
    }
}
