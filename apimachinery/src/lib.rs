//! apimachinery: what a Kubernetes API server knows that needs no IO.
//!
//! Pure functions and types over `serde_json::Value`, with kube's paths and
//! messages, tested without tokio, etcd or a network: Status errors, the
//! names of API types and the etcd key layout, label and field selectors,
//! JSON, merge and strategic-merge patches, server-side apply, JSONPath,
//! resource quantities, LimitRange and ResourceQuota rules, object
//! validation, the Pod Security Standards, Table output, OpenAPI documents,
//! custom resource schemas, CRD validation and CEL. Every server depends on
//! it; the IO lives in generic-server.

pub mod apply;
pub mod audit;
pub mod cel;
pub mod crd_validation;
pub mod error;
pub mod field_selector;
pub mod flowcontrol;
pub mod group_version;
pub mod ip;
pub mod jsonpath;
pub mod keys;
pub mod kubeconfig;
pub mod label_selector;
pub mod limit_range;
pub mod openapi;
pub mod patch;
pub mod pod_security;
pub mod quantity;
pub mod rbac;
pub mod resource_quota;
pub mod schema;
pub mod table;
pub mod validation;
pub mod yaml;

pub use error::{Error, Result};
