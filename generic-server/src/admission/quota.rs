//! kube's ResourceQuota admission: the last plugin of a chain. A write that
//! a namespace's quotas cover is charged to them before it is stored, each
//! quota's `status.used` raised with a compare-and-swap on its revision, so
//! that replicas racing for the last unit cannot both have it.

use std::sync::Arc;

use apimachinery::error::{Error, Result};
use apimachinery::group_version::GroupResource;
use apimachinery::quantity::{ResourceList, to_json};
use apimachinery::resource_quota::{Request, charge};
use bytes::Bytes;
use serde_json::Value;

use super::{AdmissionPlugin, Attributes, Operation, forbidden};
use crate::storage::Storage;
use crate::storage::cacher::{Cacher, ResourceCache, generic_ingest};

/// How many times a charge is tried against quotas that changed under it.
const ATTEMPTS: usize = 10;

/// Charges writes to the ResourceQuotas of their namespace.
pub struct ResourceQuota {
    quotas: Arc<ResourceCache>,
    storage: Arc<dyn Storage>,
}

/// One quota as read, with the revision its charge must compare against.
struct Read {
    key: String,
    revision: i64,
    object: Value,
}

impl ResourceQuota {
    /// Follows ResourceQuotas through the server's cache (they may be
    /// served by another server of the chain: only etcd is shared).
    pub async fn new(cacher: Arc<Cacher>, etcd_prefix: &str) -> Result<Self> {
        let prefix = apimachinery::keys::key_prefix(etcd_prefix, "", "resourcequotas");
        let quotas = cacher.register(&prefix, generic_ingest()).await?;
        Ok(ResourceQuota {
            quotas,
            storage: cacher.storage().clone(),
        })
    }

    /// The namespace's quotas from the cache.
    fn cached(&self, namespace: &str) -> Vec<Read> {
        let prefix = format!("{}{namespace}/", self.quotas.prefix());
        self.quotas
            .snapshot(&prefix, 0)
            .objects
            .iter()
            .map(|o| Read {
                key: o.key.to_string(),
                revision: o.revision,
                object: o.value(),
            })
            .collect()
    }

    /// The current state of quotas from etcd (gone ones left out).
    async fn fresh(&self, keys: &[String]) -> Result<Vec<Read>> {
        let mut out = Vec::new();
        for key in keys {
            if let Some(kv) = self.storage.get(key).await? {
                let object = serde_json::from_slice(&kv.value)
                    .map_err(|e| Error::internal(format!("stored quota {key} is not JSON: {e}")))?;
                out.push(Read {
                    key: key.clone(),
                    revision: kv.mod_revision,
                    object,
                });
            }
        }
        Ok(out)
    }

    /// Writes a quota's new usage; false if it changed since it was read.
    async fn store_usage(&self, quota: &Read, used: &ResourceList) -> Result<bool> {
        let mut object = quota.object.clone();
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        if !object.get("status").is_some_and(Value::is_object) {
            object["status"] = Value::Object(Default::default());
        }
        object["status"]["used"] = to_json(used);
        let bytes =
            Bytes::from(serde_json::to_vec(&object).map_err(|e| Error::internal(e.to_string()))?);
        match self.storage.update(&quota.key, bytes, quota.revision).await {
            Ok(_) => Ok(true),
            Err(crate::Error::Conflict { .. }) | Err(crate::Error::NotFound(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// Whether the quota evaluator of a resource handles this write: pods on
/// create, services and claims on create and update (their usage can
/// change), any other resource's object count on create.
fn handles(attrs: &Attributes<'_>) -> bool {
    let resource = attrs.resource;
    let ignored = resource.plural == "events"
        && (resource.group.is_empty() || resource.group == "events.k8s.io");
    if ignored || !attrs.subresource.is_empty() || attrs.namespace.is_empty() {
        return false;
    }
    match attrs.operation {
        Operation::Create => true,
        Operation::Update => {
            resource.group.is_empty()
                && matches!(
                    resource.plural.as_str(),
                    "services" | "persistentvolumeclaims"
                )
        }
        Operation::Delete => false,
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for ResourceQuota {
    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        let Some(object) = obj else { return Ok(()) };
        if !handles(attrs) {
            return Ok(());
        }
        let mut quotas = self.cached(attrs.namespace);
        let request = Request {
            group: &attrs.resource.group,
            plural: &attrs.resource.plural,
            object,
            old: attrs.old,
        };
        for _ in 0..ATTEMPTS {
            if quotas.is_empty() {
                return Ok(());
            }
            let objects: Vec<Value> = quotas.iter().map(|q| q.object.clone()).collect();
            let charges = charge(&objects, &request).map_err(|why| forbidden(attrs, &why))?;
            if attrs.dry_run {
                return Ok(());
            }
            let mut lost = Vec::new();
            for (i, used) in charges {
                if !self.store_usage(&quotas[i], &used).await? {
                    lost.push(quotas[i].key.clone());
                }
            }
            if lost.is_empty() {
                return Ok(());
            }
            // Only the quotas whose charge lost a race are charged again.
            quotas = self.fresh(&lost).await?;
        }
        let name = quotas
            .first()
            .and_then(|q| q.object.pointer("/metadata/name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        Err(Error::Conflict {
            resource: GroupResource::new("", "resourcequotas"),
            name: name.into(),
            detail: "the object has been modified; please apply your changes to the latest version and try again".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::UserInfo;
    use crate::storage::memory::MemoryStorage;
    use serde_json::json;

    async fn plugin() -> (ResourceQuota, Arc<dyn Storage>, Arc<Cacher>) {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::default());
        let cacher = Cacher::start(storage.clone()).await.expect("cacher");
        let plugin = ResourceQuota::new(cacher.clone(), "/registry")
            .await
            .expect("plugin");
        (plugin, storage, cacher)
    }

    use crate::admission::test_support::{attributes, configmaps};

    fn attrs<'a>(
        resource: &'a crate::resource::Resource,
        user: &'a UserInfo,
        name: &'a str,
        dry_run: bool,
    ) -> Attributes<'a> {
        Attributes {
            dry_run,
            ..attributes(resource, user, Operation::Create, name)
        }
    }

    const KEY: &str = "/registry/resourcequotas/ns/q";

    /// Stores a quota on configmaps and waits until `cacher` has it.
    async fn quota(storage: &Arc<dyn Storage>, cacher: &Cacher, hard: &str, used: &str) {
        let quota = json!({"metadata": {"name": "q", "namespace": "ns"},
            "status": {"hard": {"configmaps": hard}, "used": {"configmaps": used}}});
        storage
            .create(KEY, Bytes::from(quota.to_string()))
            .await
            .expect("quota");
        cacher.wait_fresh().await.expect("the cache sees the quota");
    }

    async fn used(storage: &Arc<dyn Storage>) -> Value {
        let kv = storage.get(KEY).await.unwrap().unwrap();
        serde_json::from_slice::<Value>(&kv.value).unwrap()["status"]["used"].clone()
    }

    #[tokio::test]
    async fn charges_with_a_compare_and_swap_and_refuses_past_the_limit() {
        let (plugin, storage, cacher) = plugin().await;
        quota(&storage, &cacher, "2", "1").await;
        let (resource, user) = (configmaps(), UserInfo::default());
        let cm = json!({"metadata": {"name": "c"}});
        plugin
            .validate(&attrs(&resource, &user, "c", true), Some(&cm))
            .await
            .expect("dry run fits");
        plugin
            .validate(&attrs(&resource, &user, "c", false), Some(&cm))
            .await
            .expect("fits");
        assert_eq!(
            used(&storage).await,
            json!({"configmaps": "2"}),
            "charged once, not by the dry run"
        );
        // Whether or not the cache has seen that charge yet (a stale read
        // loses its swap and is charged again on what etcd holds), the
        // next one counts it.
        let err = plugin
            .validate(&attrs(&resource, &user, "c", false), Some(&cm))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "configmaps \"c\" is forbidden: exceeded quota: q, requested: configmaps=1, used: configmaps=2, limited: configmaps=2"
        );
        assert_eq!(used(&storage).await, json!({"configmaps": "2"}));
    }

    #[tokio::test]
    async fn replicas_racing_for_the_last_unit_cannot_both_have_it() {
        let (first, storage, cacher) = plugin().await;
        // A second server: its own cache over the same storage.
        let other = Cacher::start(storage.clone()).await.expect("cacher");
        let second = ResourceQuota::new(other.clone(), "/registry")
            .await
            .expect("plugin");
        quota(&storage, &cacher, "3", "0").await;
        other.wait_fresh().await.expect("fresh");
        let (resource, user) = (configmaps(), UserInfo::default());
        let cm = json!({"metadata": {"name": "c"}});
        let tries = (0..8).map(|i| {
            let plugin = if i % 2 == 0 { &first } else { &second };
            let (resource, user, cm) = (&resource, &user, &cm);
            async move {
                plugin
                    .validate(&attrs(resource, user, "c", false), Some(cm))
                    .await
            }
        });
        let results = futures::future::join_all(tries).await;
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            3,
            "{results:?}"
        );
        assert_eq!(used(&storage).await, json!({"configmaps": "3"}));
    }
}
