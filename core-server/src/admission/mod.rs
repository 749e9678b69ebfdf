//! kube's built-in admission plugins that only core-server needs, one file
//! each, named after kube's plugin; `main.rs` lists them in kube's order
//! (generic-server holds the ones every server shares).

pub mod certificates;
pub mod default_storage_class;
pub mod default_toleration_seconds;
pub mod limit_ranger;
pub mod node_restriction;
pub mod pod_security;
pub mod priority;
pub mod runtime_class;
pub mod service_account;

use std::sync::Arc;

use apimachinery::error::Result;
use generic_server::admission::Attributes;
use generic_server::storage::cacher::{Cacher, ResourceCache, generic_ingest};

/// Whether the write is to the resource `group`/`plural` itself (no subresource).
fn writes(attrs: &Attributes<'_>, group: &str, plural: &str) -> bool {
    attrs.subresource.is_empty() && attrs.resource.group == group && attrs.resource.plural == plural
}

/// The server's watch cache of the resource `group`/`plural`.
async fn watch(
    cacher: &Cacher,
    etcd_root: &str,
    group: &str,
    plural: &str,
) -> Result<Arc<ResourceCache>> {
    let prefix = apimachinery::keys::key_prefix(etcd_root, group, plural);
    Ok(cacher.register(&prefix, generic_ingest()).await?)
}
