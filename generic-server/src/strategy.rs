//! The per-resource rules the generic store calls, in a fixed order.
//!
//! A resource supplies a [`Strategy`]: defaulting, what a create or update
//! may not set, validation, table columns and selectable fields. Everything
//! else (keys, conflicts, metadata, watch, selectors) is the store's job.

use serde_json::Value;

use crate::error::FieldError;
use crate::table::{self, Column};

/// A resource's own rules. Every method has a neutral default.
pub trait Strategy: Send + Sync + 'static {
    /// Fills in defaults, as the API's defaulting functions do.
    fn defaults(&self, _obj: &mut Value) {}

    /// Resets what a create may not set (status, usually).
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// Resets what an update may not change, given the stored object.
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    /// Validates an object about to be created.
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Validates an update; by default the new object is validated as on create.
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }

    /// Non-fatal warnings returned to the client in `Warning` headers.
    fn warnings(&self, _obj: &Value) -> Vec<String> {
        Vec::new()
    }

    /// Whether `metadata.generation` tracks changes outside metadata and status.
    fn tracks_generation(&self) -> bool {
        false
    }

    /// Table columns; by default Name and Age.
    fn columns(&self) -> Vec<Column> {
        vec![table::name_column(), table::age_column()]
    }

    /// One table row's cells, matching [`Strategy::columns`].
    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![table::name_cell(obj), table::age_cell(obj)]
    }

    /// The value of a selectable field beyond `metadata.name` and
    /// `metadata.namespace`, or `None` if the field is not selectable.
    fn field_value(&self, _obj: &Value, _field: &str) -> Option<String> {
        None
    }
}

/// Reads a string at a dotted path, e.g. `involvedObject.name`.
pub fn string_at(obj: &Value, path: &str) -> Option<String> {
    let mut cur = obj;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}
