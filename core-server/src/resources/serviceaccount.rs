//! ServiceAccounts.

use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

/// The rules of `v1/ServiceAccount`.
pub struct ServiceAccountStrategy;

impl Strategy for ServiceAccountStrategy {
    /// DELETE answers with the object, as kube's registry declares (`ReturnDeletedObject`).
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Secrets",
                "string",
                "Secrets is a list of the secrets in the same namespace",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let secrets = obj
            .get("secrets")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        vec![table::name_cell(obj), json!(secrets), table::age_cell(obj)]
    }
}
