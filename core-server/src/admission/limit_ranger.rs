//! kube's LimitRanger: pods get the container defaults of their namespace's
//! LimitRanges, then pods and PersistentVolumeClaims are held to their min,
//! max and limit/request ratios (the rules are in
//! `apimachinery::limit_range`).

use std::sync::Arc;

use apimachinery::error::Result;
use apimachinery::limit_range;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation, forbidden};
use generic_server::storage::cacher::{Cacher, ResourceCache, generic_ingest};
use serde_json::Value;

/// Applies and enforces LimitRanges.
pub struct LimitRanger {
    cacher: Arc<Cacher>,
    ranges: Arc<ResourceCache>,
}

/// What LimitRanger acts on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Pod,
    Claim,
}

impl LimitRanger {
    /// Follows LimitRanges through the server's cache.
    pub async fn new(cacher: Arc<Cacher>, etcd_prefix: &str) -> Result<Self> {
        let prefix = apimachinery::keys::key_prefix(etcd_prefix, "", "limitranges");
        let ranges = cacher.register(&prefix, generic_ingest()).await?;
        Ok(LimitRanger { cacher, ranges })
    }

    /// The namespace's LimitRanges; when the cache has none and
    /// `catch_up`, it first catches up with etcd (one created a moment ago
    /// counts).
    async fn ranges(&self, namespace: &str, catch_up: bool) -> Result<Vec<Value>> {
        let prefix = format!("{}{namespace}/", self.ranges.prefix());
        let mut found = self.ranges.snapshot(&prefix, 0).objects;
        if found.is_empty() && catch_up {
            self.cacher.wait_fresh().await?;
            found = self.ranges.snapshot(&prefix, 0).objects;
        }
        Ok(found.iter().map(|o| o.value()).collect())
    }
}

/// Pods on create (their containers cannot change later) and claims on
/// create and update, never a subresource nor an object being deleted.
fn target(attrs: &Attributes<'_>) -> Option<Target> {
    let resource = attrs.resource;
    if !resource.group.is_empty() || !attrs.subresource.is_empty() {
        return None;
    }
    let deleting = attrs
        .old
        .and_then(|o| o.pointer("/metadata/deletionTimestamp"))
        .is_some_and(|t| !t.is_null());
    match (resource.plural.as_str(), attrs.operation) {
        _ if deleting => None,
        ("pods", Operation::Create) => Some(Target::Pod),
        ("persistentvolumeclaims", Operation::Create | Operation::Update) => Some(Target::Claim),
        _ => None,
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for LimitRanger {
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<()> {
        if target(attrs) != Some(Target::Pod) {
            return Ok(());
        }
        for range in self.ranges(attrs.namespace, true).await? {
            limit_range::apply_defaults(&range, obj);
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        let (Some(target), Some(obj)) = (target(attrs), obj) else {
            return Ok(());
        };
        // A pod's mutating step has caught the cache up already.
        let catch_up = target == Target::Claim;
        for range in self.ranges(attrs.namespace, catch_up).await? {
            let errs = match target {
                Target::Pod => limit_range::validate_pod(&range, obj),
                Target::Claim => limit_range::validate_claim(&range, obj),
            };
            if !errs.is_empty() {
                return Err(forbidden(attrs, &limit_range::aggregate(&errs)));
            }
        }
        Ok(())
    }
}
