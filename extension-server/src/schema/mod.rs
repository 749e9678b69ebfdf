//! Custom resource schemas: the half of apiextensions-apiserver that needs
//! no server. Pure functions over `serde_json::Value`, with kube's paths and
//! messages:
//!
//! - [`validate_crd`]: a CustomResourceDefinition (`apiextensions.k8s.io/v1`)
//!   on create and update, structural schema rules included;
//! - [`Structural`]: an `openAPIV3Schema` resolved into a typed tree;
//! - [`validate`], [`apply_defaults`], [`prune`]: what a custom resource
//!   goes through against its schema;
//! - [`to_openapi`] / [`to_openapi_resource`]: the schema as `/openapi/v3`
//!   publishes it.
//!
//! ```ignore
//! let schema = Structural::new(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])?;
//! let unknown = prune(&mut obj, &schema, true);   // ["spec.foo"]
//! apply_defaults(&mut obj, &schema);
//! let errors = validate(&obj, &schema);
//! ```

// The CRD server wiring that calls into this module lands separately.

pub mod crd;
mod defaulting;
mod embedded;
mod formats;
mod list_type;
mod openapi;
mod path;
mod pruning;
mod structural;
mod structural_rules;
mod validation;

pub use crd::{
    default_crd, prepare_for_create, prepare_for_update, validate_crd, validate_crd_status_update,
};
pub use defaulting::apply_defaults;
pub use openapi::to_openapi_resource;
pub use pruning::prune;
pub use structural::Structural;
pub use validation::validate;
