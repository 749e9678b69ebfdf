//! OpenAPI v3 the way kube-apiserver serves it, built from k8s-openapi's schemas.
//!
//! - [`Components`] collects `components.schemas` from any `schemars::JsonSchema`
//!   type (all of k8s-openapi's), rewritten into kube's form: refs as
//!   `#/components/schemas/<name>`, refs with siblings wrapped in `allOf`,
//!   `x-kubernetes-group-version-kind` on kinds, list/map/patch extensions from
//!   the generated [`list_meta`] table, and a `<Kind>List` schema per listable kind.
//! - [`group_version_document`] renders `/openapi/v3/api/v1` or
//!   `/openapi/v3/apis/<group>/<version>` for a set of [`ResourceSpec`]s: paths
//!   (kube's: collections, items, the deprecated `/watch/` paths, subresources,
//!   connect subresources with their options, the group-version's resource
//!   list), operations with inline parameters (kubectl's `--validate=strict`
//!   probe looks for an inline `fieldValidation` on PATCH) and the reachable
//!   schemas. `tests/tests/openapi.rs` compares them with kube 1.33's.
//! - [`index_document`] renders `/openapi/v3`; [`content_hash`] gives the
//!   `?hash=` of a serialized document.
//! - [`unknown_fields`] walks an object against a schema and returns the paths
//!   kube-apiserver reports as `strict decoding error: unknown field "<path>"`.
//!
//! ```
//! use apimachinery::openapi::*;
//! let mut components = Components::new();
//! let spec = ResourceSpec::builtin::<k8s_openapi::api::core::v1::ConfigMap>(&mut components);
//! let document = group_version_document("", "v1", &[spec], &components);
//! let bytes = serde_json::to_vec(&document).unwrap_or_default();
//! let index = index_document([("api/v1".to_string(), content_hash(&bytes))]);
//! assert!(index["paths"]["api/v1"]["serverRelativeURL"].is_string());
//! ```
//!
//! Build the components once at start-up and cache the serialized documents:
//! generating every built-in kind takes a noticeable fraction of a second.

mod components;
mod document;
mod extensions;
mod field_validation;
mod index;
mod parameters;
#[rustfmt::skip]
pub mod list_meta;
pub mod v2;

pub use components::{Components, SCHEMA_PREFIX, inline_refs, property_description};
pub use document::{
    ALL_VERBS, OPENAPI_VERSION, ResourceSpec, SubresourceSpec, group_version_document,
    group_version_path,
};
pub use field_validation::unknown_fields;
pub use index::{content_hash, index_document};
