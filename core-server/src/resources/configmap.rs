//! ConfigMaps.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::data;

const FIELDS: &[&str] = &["data", "binaryData"];

/// The rules of `v1/ConfigMap`.
pub struct ConfigMapStrategy;

impl Strategy for ConfigMapStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = data::validate_keys(obj, FIELDS);
        let size = data::total_size(obj, FIELDS);
        if size > data::MAX_BYTES {
            errs.push(FieldError::too_long("[]", data::MAX_BYTES));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(data::validate_immutable(new, old, FIELDS));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new("Data", "string", "Data contains the configuration data"),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            json!(data::count(obj, FIELDS)),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_size_and_immutability() {
        assert!(
            ConfigMapStrategy
                .validate(&json!({"data": {"ok.key": "v"}}))
                .is_empty()
        );
        let bad = ConfigMapStrategy
            .validate(&json!({"data": {"bad key": "v"}, "binaryData": {"x": "eA=="}}));
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].field, "data[bad key]");
        let dup =
            ConfigMapStrategy.validate(&json!({"data": {"x": "v"}, "binaryData": {"x": "eA=="}}));
        assert_eq!(dup.len(), 1);
        let old = json!({"immutable": true, "data": {"a": "1"}});
        assert_eq!(
            ConfigMapStrategy
                .validate_update(&json!({"immutable": true, "data": {"a": "2"}}), &old)
                .len(),
            1
        );
        assert_eq!(
            ConfigMapStrategy.cells(&json!({"metadata":{"name":"c"},"data":{"a":"1","b":"2"}}))[1],
            2
        );
    }
}
