//! Placeholder until the structural schema module lands: no pruning,
//! defaulting or validation yet.

use generic_server::error::FieldError;
use serde_json::Value;

/// Drops unknown fields; returns their paths.
pub fn prune(_obj: &mut Value, _schema: &Value) -> Vec<String> {
    Vec::new()
}

/// Applies schema defaults.
pub fn apply_defaults(_obj: &mut Value, _schema: &Value) {}

/// Validates an object against its schema.
pub fn validate(_obj: &Value, _schema: &Value, _old: Option<&Value>) -> Vec<FieldError> {
    Vec::new()
}
