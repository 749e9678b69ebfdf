//! The per-resource rules the generic store calls, in a fixed order.
//!
//! A resource supplies a [`Strategy`]: defaulting, what a create or update
//! may not set, validation, table columns and selectable fields. Everything
//! else (keys, conflicts, metadata, watch, selectors) is the store's job.

use std::sync::Arc;

use serde_json::Value;

use apimachinery::error::{FieldError, Result};
use apimachinery::table::{self, Column};
use apimachinery::validation::NameRule;

/// Another resource's storage that a resource serves in its own shape, as
/// events.k8s.io/v1 Events are the core v1 Events read and written through
/// a conversion: one set of etcd keys, one cache.
#[derive(Clone)]
pub struct SharedStorage {
    /// The group of the resource whose keys are used.
    pub group: &'static str,
    /// That resource's plural.
    pub plural: &'static str,
    /// Converts objects between the stored shape and this resource's.
    pub converter: Arc<dyn Converter>,
    /// A field selector label of this resource, as the stored resource names it.
    pub field_label: fn(&str) -> String,
}

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

    /// Whether validation may take long (it runs expressions under a cost
    /// budget): the store then runs it on the blocking pool.
    fn validation_is_costly(&self) -> bool {
        false
    }

    /// Validates an update through `subresource` (`""` for the object
    /// itself), for a resource whose subresources may each change different
    /// fields (a CertificateSigningRequest's `approval` and `status`); by
    /// default as [`Strategy::validate_update`].
    fn validate_subresource_update(
        &self,
        _subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Vec<FieldError> {
        self.validate_update(new, old)
    }

    /// Non-fatal warnings returned to the client in `Warning` headers.
    fn warnings(&self, _obj: &Value) -> Vec<String> {
        Vec::new()
    }

    /// A write through a subresource other than `status` (e.g. a namespace's
    /// `finalize`): the object to store, or `None` to store the request as is.
    fn update_subresource(&self, _subresource: &str, _new: &Value, _old: &Value) -> Option<Value> {
        None
    }

    /// Whether `metadata.generation` tracks changes outside metadata and status.
    fn tracks_generation(&self) -> bool {
        false
    }

    /// How object names are validated.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// Whether a PUT may create an absent object.
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Answers a connect subresource (`pods/log`, `pods/exec`,
    /// `nodes/proxy`) of the stored object `obj`: what would reach a
    /// kubelet answers here, at once, with kube's Status.
    fn connect(
        &self,
        _subresource: &str,
        _obj: &Value,
        _req: &crate::request::ApiRequest,
    ) -> Result<crate::request::ApiResponse> {
        Err(apimachinery::error::Error::method_not_allowed())
    }

    /// Whether DELETE answers with the deleted object rather than a Status.
    fn return_deleted_object(&self) -> bool {
        false
    }

    /// Whether the OpenAPI of DELETE names the object rather than a Status:
    /// as [`Strategy::return_deleted_object`], except where kube's own
    /// storage wraps its store and publishes Status (namespaces).
    fn openapi_delete_returns_object(&self) -> bool {
        self.return_deleted_object()
    }

    /// Called when deletion is requested. Returning true keeps the object,
    /// marked for deletion, until [`Strategy::may_remove`] holds (for
    /// example a namespace turning `Terminating`); an error refuses the delete.
    fn begin_delete(&self, _obj: &mut Value) -> Result<bool> {
        Ok(false)
    }

    /// Whether an object marked for deletion, with no finalizers left, may go.
    fn may_remove(&self, _obj: &Value) -> bool {
        true
    }

    /// Table columns; by default kube's for a resource without a printer
    /// (`rest.NewDefaultTableConvertor`): Name and Created At.
    fn columns(&self) -> Vec<Column> {
        table::default_columns()
    }

    /// One table row's cells, matching [`Strategy::columns`].
    fn cells(&self, obj: &Value) -> Vec<Value> {
        table::default_cells(obj)
    }

    /// Field paths selectable beyond `metadata.name` and `metadata.namespace`.
    fn selectable_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// Every selectable field, including ones declared at run time (custom
    /// resources' `selectableFields`).
    fn declared_fields(&self) -> Vec<String> {
        self.selectable_fields()
            .iter()
            .map(|f| f.to_string())
            .collect()
    }

    /// The value of a selectable field; by default the string at its path.
    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        string_at(obj, field)
    }

    /// The storage of another resource this one is a view of; by default
    /// its own keys.
    fn shared_storage(&self) -> Option<SharedStorage> {
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

/// Converts objects between the versions of a resource whose versions share
/// one storage (custom resources).
#[async_trait::async_trait]
pub trait Converter: Send + Sync + 'static {
    /// The apiVersion objects are stored in.
    fn storage_version(&self) -> String;
    /// Converts objects to `api_version`.
    async fn convert(&self, objects: Vec<Value>, api_version: &str) -> Result<Vec<Value>>;
}
