//! storage.k8s.io/v1 CSINodes: the CSI drivers registered on a node, named
//! after it. A driver's entry, once there, never changes (it may go).

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use apimachinery::validation;
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, int, items, text};

/// The longest node ID a new driver entry may carry.
const NODE_ID_MAX: usize = 192;
/// The longest node ID kept when the node already holds one past [`NODE_ID_MAX`].
const NODE_ID_LONGER_MAX: usize = 256;

/// The rules of `storage.k8s.io/v1/CSINode`.
pub struct CSINodeStrategy;

/// Checks `spec.drivers`, node IDs up to `node_id_max` characters.
fn drivers(obj: &Value, node_id_max: usize) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, driver) in items(obj, "/spec/drivers").iter().enumerate() {
        let path = format!("spec.drivers[{i}]");
        let name = text(driver, "/name");
        errs.extend(fields::csi_driver_name(name, &format!("{path}.name")));
        let node_id = text(driver, "/nodeID");
        if node_id.is_empty() {
            errs.push(FieldError::required(format!("{path}.nodeID"), ""));
        }
        if node_id.len() > node_id_max {
            errs.push(FieldError::invalid(
                format!("{path}.nodeID"),
                node_id,
                format!("must be {node_id_max} characters or less"),
            ));
        }
        if let Some(count) = int(driver, "/allocatable/count").filter(|c| *c < 0) {
            errs.push(FieldError::invalid(
                format!("{path}.allocatable.count"),
                count,
                "must be greater than or equal to 0",
            ));
        }
        if names.contains(&name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), name));
        }
        names.push(name);
        let mut keys: Vec<&str> = Vec::new();
        for key in items(driver, "/topologyKeys") {
            let key = key.as_str().unwrap_or_default();
            if key.is_empty() {
                errs.push(FieldError::required(&path, ""));
            }
            if keys.contains(&key) {
                errs.push(FieldError::duplicate(&path, key));
            }
            keys.push(key);
            for msg in validation::qualified_name(key) {
                errs.push(FieldError::invalid(&path, key, msg));
            }
        }
    }
    errs
}

impl Strategy for CSINodeStrategy {
    fn defaults(&self, obj: &mut Value) {
        // `topologyKeys` has no omitempty in kube's CSINodeDriver.
        fields::each_mut(obj, "/spec/drivers", |driver| {
            if let Some(map) = driver.as_object_mut() {
                map.entry("topologyKeys").or_insert(Value::Null);
            }
        });
    }

    /// DELETE answers with the object, as kube's registry declares (`ReturnDeletedObject`).
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        drivers(obj, NODE_ID_MAX)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        // A node that already holds a longer ID may keep longer ones.
        let longer = items(old, "/spec/drivers")
            .iter()
            .any(|d| text(d, "/nodeID").len() > NODE_ID_MAX);
        let mut errs = drivers(
            new,
            if longer {
                NODE_ID_LONGER_MAX
            } else {
                NODE_ID_MAX
            },
        );
        for old_driver in items(old, "/spec/drivers") {
            for new_driver in items(new, "/spec/drivers") {
                if text(old_driver, "/name") == text(new_driver, "/name")
                    && old_driver != new_driver
                {
                    errs.push(FieldError::invalid(
                        "spec.drivers",
                        new_driver.clone(),
                        "field is immutable",
                    ));
                }
            }
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Drivers",
                "integer",
                "Drivers indicates the number of CSI drivers registered on the node",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            json!(items(obj, "/spec/drivers").len()),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn node() -> Value {
        json!({"metadata": {"name": "node-a"}, "spec": {"drivers": [
            {"name": "ebs.csi.aws.com", "nodeID": "i-0abc", "topologyKeys": ["topology.ebs.csi.aws.com/zone"],
             "allocatable": {"count": 25}}]}})
    }

    #[test]
    fn valid_node_and_row() {
        assert!(CSINodeStrategy.validate(&node()).is_empty());
        assert_eq!(CSINodeStrategy.cells(&node())[1], 1);
        assert_eq!(
            CSINodeStrategy.cells(&json!({"metadata": {"name": "n"}, "spec": {}}))[1],
            0
        );
    }

    #[test]
    fn refusals() {
        let bad = json!({"spec": {"drivers": [
            {"name": "a.example.com", "nodeID": "x".repeat(193), "allocatable": {"count": -1}},
            {"name": "a.example.com", "topologyKeys": ["zone", "zone"]},
            {"name": "Not_A_Driver", "nodeID": "n"}]}});
        assert_eq!(
            messages(&CSINodeStrategy.validate(&bad)),
            [
                format!(
                    "spec.drivers[0].nodeID: Invalid value: \"{}\": must be 192 characters or less",
                    "x".repeat(193)
                ),
                "spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0".into(),
                "spec.drivers[1].nodeID: Required value".into(),
                "spec.drivers[1].name: Duplicate value: \"a.example.com\"".into(),
                "spec.drivers[1]: Duplicate value: \"zone\"".into(),
                "spec.drivers[2].name: Invalid value: \"Not_A_Driver\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string(),
            ]
        );
    }

    #[test]
    fn driver_entries_are_immutable() {
        let old = node();
        let mut changed = old.clone();
        changed["spec"]["drivers"][0]["nodeID"] = json!("i-0def");
        let errs = CSINodeStrategy.validate_update(&changed, &old);
        assert_eq!(
            (errs.len(), errs[0].field.as_str(), errs[0].detail.as_str()),
            (1, "spec.drivers", "field is immutable")
        );
        let mut added = old.clone();
        added["spec"]["drivers"]
            .as_array_mut()
            .into_iter()
            .for_each(|d| d.push(json!({"name": "efs.csi.aws.com", "nodeID": "i-0abc"})));
        assert!(CSINodeStrategy.validate_update(&added, &old).is_empty());
        let removed = json!({"metadata": {"name": "node-a"}, "spec": {"drivers": []}});
        assert!(CSINodeStrategy.validate_update(&removed, &old).is_empty());
    }
}
