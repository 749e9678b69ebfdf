//! One REST interface for everything a server serves at a resource path,
//! kube's `rest.Storage` with its optional verbs: the generic [`Store`], a
//! create-only endpoint (reviews, token requests) and a read-only one
//! (an aggregated server's metrics) all implement [`Rest`], and the same
//! handlers serve them. A verb a resource lacks answers 405.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::handlers::namespace;
use crate::registry::{
    DeleteOptions, Deleted, ListOptions, ListResult, Store, WatchStream, WriteOptions, Written,
};
use crate::request::ApiRequest;
use crate::resource::Resource;
use crate::storage::cacher::{CachedObject, Ingest};
use apimachinery::error::{Error, Result};
use apimachinery::patch::PatchType;

/// What serves one resource path: its verbs, each optional (kube's
/// `rest.Getter`, `rest.Lister`, `rest.Watcher`, `rest.Creater`, ...). A
/// verb a path lacks answers 405; the handlers call nothing else.
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

    /// The changes to the objects `opts` selects (`watch`).
    async fn watch(&self, _namespace: &str, _opts: ListOptions) -> Result<WatchStream> {
        Err(Error::method_not_allowed())
    }

    /// The body of a create, decoded and checked as this path takes it.
    async fn decode(&self, req: &ApiRequest) -> Result<Value> {
        crate::handlers::body(self.resource(), req).await
    }

    /// A create (`create`) of `obj`, decoded by [`Rest::decode`].
    async fn create(
        &self,
        _req: &ApiRequest,
        _obj: Value,
        _opts: &WriteOptions,
    ) -> Result<Written> {
        Err(Error::method_not_allowed())
    }

    /// A replacement (`update`) of an object or its subresource.
    async fn update(
        &self,
        _req: &ApiRequest,
        _obj: Value,
        _opts: &WriteOptions,
    ) -> Result<Written> {
        Err(Error::method_not_allowed())
    }

    /// A patch (`patch`) of an object or its subresource.
    async fn patch(
        &self,
        _req: &ApiRequest,
        _kind: PatchType,
        _opts: &WriteOptions,
    ) -> Result<Written> {
        Err(Error::method_not_allowed())
    }

    /// A delete (`delete`) of one object.
    async fn delete(&self, _req: &ApiRequest, _opts: &DeleteOptions) -> Result<Deleted> {
        Err(Error::method_not_allowed())
    }

    /// A delete of every object `list` selects (`deletecollection`): what
    /// was deleted, and the revision the answer is current at.
    async fn delete_collection(
        &self,
        _req: &ApiRequest,
        _list: &ListOptions,
        _opts: &DeleteOptions,
    ) -> Result<(Vec<Value>, i64)> {
        Err(Error::method_not_allowed())
    }

    /// A connect subresource (`pods/log`, `pods/exec`).
    async fn connect(&self, _req: &ApiRequest) -> Result<crate::request::ApiResponse> {
        Err(Error::method_not_allowed())
    }

    /// An object seen through its `scale` subresource.
    fn scale(&self, _obj: &Value) -> Result<Value> {
        Err(Error::method_not_allowed())
    }

    /// The generic store behind this path, for the server's own readers
    /// (admission plugins, garbage collection); requests use the verbs.
    fn store(&self) -> Option<&Arc<Store>> {
        None
    }
}

/// The generic store, as a [`Rest`]: every verb.
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

    async fn watch(&self, namespace: &str, opts: ListOptions) -> Result<WatchStream> {
        self.0.watch(namespace, opts).await
    }

    async fn create(&self, req: &ApiRequest, obj: Value, opts: &WriteOptions) -> Result<Written> {
        // Objects are created in their collection.
        if !req.info.name.is_empty() || !req.info.subresource.is_empty() {
            return Err(Error::method_not_allowed());
        }
        self.0
            .create(namespace(self.resource(), req), obj, opts)
            .await
    }

    async fn update(&self, req: &ApiRequest, obj: Value, opts: &WriteOptions) -> Result<Written> {
        let info = &req.info;
        self.0
            .update(
                namespace(self.resource(), req),
                &info.name,
                &info.subresource,
                obj,
                opts,
            )
            .await
    }

    async fn patch(
        &self,
        req: &ApiRequest,
        kind: PatchType,
        opts: &WriteOptions,
    ) -> Result<Written> {
        let info = &req.info;
        self.0
            .patch(
                namespace(self.resource(), req),
                &info.name,
                &info.subresource,
                kind,
                &req.body,
                opts,
            )
            .await
    }

    async fn delete(&self, req: &ApiRequest, opts: &DeleteOptions) -> Result<Deleted> {
        self.0
            .delete(namespace(self.resource(), req), &req.info.name, opts)
            .await
    }

    async fn delete_collection(
        &self,
        req: &ApiRequest,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<(Vec<Value>, i64)> {
        let items = self
            .0
            .delete_collection(namespace(self.resource(), req), list, opts)
            .await?;
        Ok((items, self.0.progress()))
    }

    async fn connect(&self, req: &ApiRequest) -> Result<crate::request::ApiResponse> {
        let obj = self
            .0
            .get(namespace(self.resource(), req), &req.info.name, None)
            .await?;
        self.resource()
            .strategy
            .connect(&req.info.subresource, &obj.value(), req)
    }

    fn scale(&self, obj: &Value) -> Result<Value> {
        self.0.to_scale(obj)
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
    pub kind: apimachinery::group_version::GroupVersionKind,
    /// What answers.
    pub endpoint: Arc<dyn CreateOnly>,
}

#[async_trait::async_trait]
impl Rest for Answered {
    fn resource(&self) -> &Resource {
        &self.resource
    }

    /// The body must be this endpoint's kind; it is completed with its
    /// apiVersion, kind and the path's namespace.
    async fn decode(&self, req: &ApiRequest) -> Result<Value> {
        let kind = &self.kind;
        let media =
            crate::codec::MediaType::from_content_type(req.header(http::header::CONTENT_TYPE))?;
        let mut obj = crate::codec::decode(media, &req.body).await?;
        let Some(map) = obj.as_object_mut() else {
            return Err(Error::bad_request("the body must be an object"));
        };
        let expected = kind.api_version();
        let other_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v != expected);
        let other_kind = map
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k != kind.kind);
        if other_version || other_kind {
            return Err(Error::bad_request(format!(
                "the body must be a {} of {expected}",
                kind.kind
            )));
        }
        map.insert("apiVersion".into(), json!(expected));
        map.insert("kind".into(), json!(kind.kind));
        crate::registry::metadata::ensure_namespace(
            &mut obj,
            self.resource.namespaced,
            &req.info.namespace,
        )?;
        Ok(obj)
    }

    async fn create(&self, req: &ApiRequest, obj: Value, _opts: &WriteOptions) -> Result<Written> {
        Ok(Written {
            object: self.endpoint.create(req, obj).await?,
            created: true,
            warnings: Vec::new(),
        })
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
