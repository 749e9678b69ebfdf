//! One REST interface for everything a server serves at a resource path,
//! kube's `rest.Storage` with its optional verbs: the generic [`Store`], a
//! create-only endpoint (reviews, token requests) and a read-only one
//! (an aggregated server's metrics) all implement [`Rest`], and the same
//! handlers serve them. A verb a resource lacks answers 405.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::registry::{ListOptions, ListResult, Store};
use crate::request::ApiRequest;
use crate::resource::Resource;
use crate::storage::cacher::{CachedObject, Ingest};
use apimachinery::error::{Error, Result};
use apimachinery::group_version::GroupVersionKind;

/// What serves one resource path: its verbs, each optional.
#[async_trait::async_trait]
pub trait Rest: Send + Sync + 'static {
    /// The resource served (names, scope, verbs, strategy).
    fn resource(&self) -> &Resource;

    /// One object (`get`).
    async fn get(
        &self,
        _req: &ApiRequest,
        _namespace: &str,
        _name: &str,
    ) -> Result<Arc<CachedObject>> {
        Err(Error::method_not_allowed())
    }

    /// The objects of `namespace` (`""`: every one) that `opts` selects (`list`).
    async fn list(
        &self,
        _req: &ApiRequest,
        _namespace: &str,
        _opts: &ListOptions,
    ) -> Result<ListResult> {
        Err(Error::method_not_allowed())
    }

    /// Answers a create: the object decoded, its kind checked; what to return.
    async fn create(&self, _req: &ApiRequest, _obj: Value) -> Result<Value> {
        Err(Error::method_not_allowed())
    }

    /// The kind a create takes, when it is not the resource's own (a
    /// subresource's, such as `TokenRequest` at `serviceaccounts/token`).
    fn create_kind(&self) -> GroupVersionKind {
        self.resource().gvk()
    }

    /// The generic store behind this path, for the verbs only it has:
    /// update, patch, delete, watch, scale and connect.
    fn store(&self) -> Option<&Arc<Store>> {
        None
    }
}

/// The generic store, as a [`Rest`].
pub struct Stored(pub Arc<Store>);

#[async_trait::async_trait]
impl Rest for Stored {
    fn resource(&self) -> &Resource {
        &self.0.resource
    }

    async fn get(
        &self,
        req: &ApiRequest,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<CachedObject>> {
        let rv = req.param("resourceVersion");
        self.0.get(namespace, name, rv.as_deref()).await
    }

    async fn list(
        &self,
        _req: &ApiRequest,
        namespace: &str,
        opts: &ListOptions,
    ) -> Result<ListResult> {
        self.0.list(namespace, opts).await
    }

    fn store(&self) -> Option<&Arc<Store>> {
        Some(&self.0)
    }
}

/// The strategy of a create-only resource: nothing is stored, so nothing to check.
pub struct Unstored;

impl crate::strategy::Strategy for Unstored {}

/// A create-only endpoint whose objects are not stored: reviews and token
/// requests. The handler decodes the body; the endpoint answers it.
#[async_trait::async_trait]
pub trait CreateOnly: Send + Sync + 'static {
    /// Answers a create with the object completed (usually its status).
    async fn create(&self, req: &ApiRequest, obj: Value) -> Result<Value>;
}

/// A create-only endpoint of `kind` at a resource (or its subresource).
pub struct Answered {
    /// The resource it lives at.
    pub resource: Resource,
    /// The kind it takes.
    pub kind: GroupVersionKind,
    /// What answers.
    pub endpoint: Arc<dyn CreateOnly>,
}

#[async_trait::async_trait]
impl Rest for Answered {
    fn resource(&self) -> &Resource {
        &self.resource
    }

    async fn create(&self, req: &ApiRequest, obj: Value) -> Result<Value> {
        self.endpoint.create(req, obj).await
    }

    fn create_kind(&self) -> GroupVersionKind {
        self.kind.clone()
    }
}

/// A read-only resource whose objects are computed when asked for, never
/// stored: an aggregated server's metrics. The endpoint only produces
/// objects; the handlers answer `get` and `list` (label and field
/// selectors, JSON or Table) with `kind` and `apiVersion` filled in.
#[async_trait::async_trait]
pub trait ReadOnly: Send + Sync + 'static {
    /// The objects in `namespace`: `""` for every namespace, or for a
    /// cluster-scoped resource.
    async fn list(&self, req: &ApiRequest, namespace: &str) -> Result<Vec<Value>>;

    /// One object, `None` if there is none; by default found in [`ReadOnly::list`].
    async fn get(&self, req: &ApiRequest, namespace: &str, name: &str) -> Result<Option<Value>> {
        let items = self.list(req, namespace).await?;
        Ok(items
            .into_iter()
            .find(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)))
    }
}

/// A read-only endpoint, as a [`Rest`]: its objects ingested as the cache
/// ingests stored ones, so one selector and list code serves both.
pub struct Computed {
    resource: Resource,
    endpoint: Arc<dyn ReadOnly>,
    ingest: Ingest,
}

impl Computed {
    /// Serves `endpoint`'s objects as `resource`.
    pub fn new(resource: Resource, endpoint: Arc<dyn ReadOnly>) -> Self {
        let ingest = crate::registry::strategy_ingest(&resource);
        Computed {
            resource,
            endpoint,
            ingest,
        }
    }

    /// An object with this resource's `kind` and `apiVersion` first, ingested.
    fn typed(&self, obj: Value) -> Option<Arc<CachedObject>> {
        let typed = typed_bytes(&self.resource, obj);
        (self.ingest)("", &typed, 0).map(Arc::new)
    }
}

/// A computed object as bytes, with `resource`'s `kind` and `apiVersion` first.
pub(crate) fn typed_bytes(resource: &Resource, obj: Value) -> bytes::Bytes {
    let mut typed = Map::from_iter([
        ("kind".to_string(), json!(resource.kind)),
        ("apiVersion".to_string(), json!(resource.api_version())),
    ]);
    if let Value::Object(fields) = obj {
        typed.extend(
            fields
                .into_iter()
                .filter(|(k, _)| k != "kind" && k != "apiVersion"),
        );
    }
    bytes::Bytes::from(serde_json::to_vec(&Value::Object(typed)).unwrap_or_default())
}

#[async_trait::async_trait]
impl Rest for Computed {
    fn resource(&self) -> &Resource {
        &self.resource
    }

    async fn get(
        &self,
        req: &ApiRequest,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<CachedObject>> {
        let not_found = || Error::NotFound {
            resource: self.resource.group_resource(),
            name: name.to_string(),
        };
        let obj = self
            .endpoint
            .get(req, namespace, name)
            .await?
            .ok_or_else(not_found)?;
        self.typed(obj).ok_or_else(not_found)
    }

    async fn list(
        &self,
        req: &ApiRequest,
        namespace: &str,
        opts: &ListOptions,
    ) -> Result<ListResult> {
        crate::registry::check_selectors(&self.resource, opts)?;
        let items = self
            .endpoint
            .list(req, namespace)
            .await?
            .into_iter()
            .filter_map(|obj| self.typed(obj))
            .filter(|obj| crate::registry::selects(obj, opts))
            .collect();
        Ok(ListResult {
            items,
            revision: 0,
            continue_token: None,
            remaining: None,
        })
    }
}
