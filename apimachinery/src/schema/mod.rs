//! Custom resource schemas: the half of apiextensions-apiserver that needs
//! no server. Pure functions over `serde_json::Value`, with kube's paths and
//! messages:
//!
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

mod defaulting;
pub(crate) mod embedded;
mod formats;
mod list_type;
mod openapi;
pub(crate) mod path;
pub(crate) mod pruning;
pub(crate) mod structural;
pub(crate) mod structural_rules;
pub(crate) mod validation;

pub use defaulting::apply_defaults;
pub use openapi::to_openapi_resource;
pub use pruning::prune;
pub use structural::Structural;
pub use validation::validate;
