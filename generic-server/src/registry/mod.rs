//! The generic store: one per resource, doing keys, metadata, conflicts,
//! selectors, pagination and watch for every resource alike. Each resource
//! only supplies a [`Strategy`](crate::strategy::Strategy); the order in
//! which its hooks run is fixed here, so no resource can get it wrong.
//!
//! This file holds the store and its reads (get, list); the rest is split
//! by concern: [`options`] (what a request asks), `metadata` (the fields
//! the server keeps), `write` (create, update, patch, delete and
//! the order of their hooks), `server_side_apply`, `scale`, `pagination`
//! (continue tokens) and `watch` (the per-client watcher).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::admission::{Admission, Attributes, Operation};
use crate::request::UserInfo;
use crate::resource::{Resource, ScaleSelector, ScaleSpec};
use crate::storage::cacher::{
    CachedObject, Cacher, Ingest, Page, PageRange, ResourceCache, WatchEvent, WatchEventType,
    WatchStart, history_event, ingest_with,
};
use crate::storage::{Storage, prefix_end};
use crate::strategy::Converter;
use apimachinery::apply;
use apimachinery::error::{Error, FieldError, Reason, Result};
use apimachinery::field_selector::FieldSelector;
use apimachinery::label_selector::LabelSelector;
use apimachinery::patch::{self, PatchType};
use apimachinery::validation;

pub(crate) mod metadata;
pub mod options;
mod pagination;
mod scale;
mod server_side_apply;
mod watch;
mod write;

use metadata::*;

/// An object as read from etcd for a write.
struct Stored {
    /// The object, as served.
    object: Value,
    /// Its mod revision.
    revision: i64,
    /// Whether it was encrypted with a key that no longer writes.
    stale: bool,
}
pub use metadata::{now_rfc3339, random_suffix, set_pointer, set_resource_version};
pub use options::{DeleteOptions, FieldValidation, ListOptions, WriteOptions};
pub use pagination::encode_continue;
use pagination::*;
pub use watch::{WatchItem, WatchStream};

/// The result of a write.
#[derive(Debug)]
pub struct Written {
    /// The object as stored (or as it would be, on dry run).
    pub object: Value,
    /// Whether the write created the object.
    pub created: bool,
    /// Warnings for `Warning` headers.
    pub warnings: Vec<String>,
}

/// The result of a delete.
#[derive(Debug)]
pub struct Deleted {
    /// The object's last state.
    pub object: Value,
    /// Whether it is gone (false: marked for deletion, waiting on finalizers).
    pub gone: bool,
    /// Warnings for the client (from admission).
    pub warnings: Vec<String>,
}

/// One page of a list.
pub struct ListResult {
    /// The matching objects.
    pub items: Vec<Arc<CachedObject>>,
    /// The list's resourceVersion.
    pub revision: i64,
    /// The token for the next page, if any.
    pub continue_token: Option<String>,
    /// How many matching items remain after this page.
    pub remaining: Option<i64>,
}

/// The schema used to apply strategic merge patches.
#[derive(Clone)]
pub struct PatchSchema {
    /// The kind's schema reference.
    pub root: Value,
    /// `components.schemas` of the OpenAPI document.
    pub components: Arc<Map<String, Value>>,
}

/// The generic store of one resource.
pub struct Store {
    /// The resource served.
    pub resource: Resource,
    storage: Arc<dyn Storage>,
    cacher: Arc<Cacher>,
    cache: Arc<ResourceCache>,
    prefix: String,
    admission: Admission,
    patch_schema: Option<PatchSchema>,
    converter: Option<Arc<dyn Converter>>,
    /// The resource's other served versions, for admission's matchPolicy
    /// Equivalent.
    equivalents: Option<crate::admission::Equivalents>,
    /// Field selector labels in the stored resource's terms, when this
    /// store is a view of another resource's storage.
    field_label: Option<fn(&str) -> String>,
}

/// The API error a storage failure is about one object of this store (as
/// kube's `storeerr.Interpret*Error`); the rest convert without context.
fn storage_error(store: &Store, name: &str, err: crate::Error) -> Error {
    match err {
        crate::Error::NotFound(_) => store.not_found(name),
        crate::Error::AlreadyExists(_) => Error::AlreadyExists {
            resource: store.resource.group_resource(),
            name: name.into(),
        },
        crate::Error::Conflict { .. } => store.conflict(name),
        other => other.into(),
    }
}

impl Store {
    /// Builds the store of a resource and loads its cache.
    pub async fn new(
        resource: Resource,
        cacher: Arc<Cacher>,
        admission: Admission,
        etcd_root: &str,
        patch_schema: Option<PatchSchema>,
    ) -> Result<Store> {
        let prefix = resource.key_prefix(etcd_root);
        let shared = resource.strategy.shared_storage();
        let cache = cacher.serve(&prefix, strategy_ingest(&resource)).await?;
        let store = Store {
            storage: cacher.storage().clone(),
            resource,
            cacher,
            cache,
            prefix,
            admission,
            patch_schema,
            converter: None,
            equivalents: None,
            field_label: None,
        };
        let own = store.resource.converter.clone();
        Ok(match (shared, own) {
            (Some(shared), _) => Store {
                field_label: Some(shared.field_label),
                ..store.with_converter(shared.converter)
            },
            (None, Some(converter)) => store.with_converter(converter),
            (None, None) => store,
        })
    }

    /// The kind's OpenAPI schema, as served (a reference into the components).
    pub fn schema(&self) -> Option<&PatchSchema> {
        self.patch_schema.as_ref()
    }

    /// List options in the stored resource's terms (its field labels).
    fn storage_options<'a>(&self, opts: &'a ListOptions) -> std::borrow::Cow<'a, ListOptions> {
        let (Some(label), Some(_)) = (self.field_label, &opts.fields) else {
            return std::borrow::Cow::Borrowed(opts);
        };
        let mut opts = opts.clone();
        for requirement in opts
            .fields
            .iter_mut()
            .flat_map(|f| f.requirements.iter_mut())
        {
            requirement.field = label(&requirement.field);
        }
        std::borrow::Cow::Owned(opts)
    }

    /// Serves a version other than the stored one through a converter.
    pub fn with_converter(mut self, converter: Arc<dyn Converter>) -> Self {
        if converter.storage_version() != self.resource.api_version() {
            self.converter = Some(converter);
        }
        self
    }

    /// Names the resource's other served versions, which admission rules
    /// with matchPolicy Equivalent may name instead of this one.
    pub fn with_equivalents(mut self, equivalents: crate::admission::Equivalents) -> Self {
        self.equivalents = Some(equivalents).filter(|e| !e.versions.is_empty());
        self
    }

    /// An object as stored, in this store's version.
    async fn served(&self, obj: Value) -> Result<Value> {
        match &self.converter {
            None => Ok(obj),
            Some(c) => one(c.convert(vec![obj], &self.resource.api_version()).await?),
        }
    }

    /// An object of this store's version, as it is stored.
    async fn stored(&self, obj: &Value) -> Result<Bytes> {
        match &self.converter {
            None => encode(obj),
            Some(c) => encode(&one(c
                .convert(vec![obj.clone()], &c.storage_version())
                .await?)?),
        }
    }

    /// Cached objects in this store's version.
    async fn present(&self, objects: Vec<Arc<CachedObject>>) -> Result<Vec<Arc<CachedObject>>> {
        let Some(converter) = &self.converter else {
            return Ok(objects);
        };
        present_with(
            converter.as_ref(),
            &self.cache,
            objects,
            &self.resource.api_version(),
        )
        .await
    }

    fn key(&self, namespace: &str, name: &str) -> String {
        if self.resource.namespaced {
            format!("{}{namespace}/{name}", self.prefix)
        } else {
            format!("{}{name}", self.prefix)
        }
    }

    fn list_prefix(&self, namespace: &str) -> String {
        if self.resource.namespaced && !namespace.is_empty() {
            format!("{}{namespace}/", self.prefix)
        } else {
            self.prefix.clone()
        }
    }

    /// 404 for an object of this resource.
    pub fn not_found(&self, name: &str) -> Error {
        Error::NotFound {
            resource: self.resource.group_resource(),
            name: name.into(),
        }
    }

    fn conflict(&self, name: &str) -> Error {
        Error::Conflict {
            resource: self.resource.group_resource(),
            name: name.into(),
            detail: "the object has been modified; please apply your changes to the latest version and try again".into(),
        }
    }

    fn invalid(&self, name: &str, causes: Vec<FieldError>) -> Error {
        Error::invalid(&self.resource.group, &self.resource.kind, name, causes)
    }

    /// Reads one object. Without a resourceVersion the read is consistent.
    pub async fn get(
        &self,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<Arc<CachedObject>> {
        let key = self.key(namespace, name);
        let obj = match resource_version.filter(|rv| !rv.is_empty()) {
            None if !self.cache_is_fresh().await? => {
                // The cache lags behind etcd: read the object from etcd itself.
                let kv = self
                    .storage
                    .get(&key)
                    .await
                    .map_err(|e| storage_error(self, name, e))?;
                match kv {
                    Some(kv) => Some(Arc::new(
                        self.cache
                            .ingest(&kv.key, &kv.value, kv.mod_revision)
                            .ok_or_else(|| undecodable(&[key.clone()]))?,
                    )),
                    None => None,
                }
            }
            None | Some("0") => self.cache.get(&key),
            Some(rv) => {
                // Not older than `rv`: once the cache has reached it.
                self.caught_up(parse_rv(rv)?).await?;
                self.cache.get(&key)
            }
        };
        let obj = match obj {
            Some(obj) => obj,
            None => match self.cache.undecodable(&key).contains(&key) {
                true => return Err(undecodable(&[key])),
                false => return Err(self.not_found(name)),
            },
        };
        one(self.present(vec![obj]).await?)
    }

    /// Waits until the cache has reached `revision`; a 504 "Too large
    /// resource version" when it does not in time, as kube answers.
    async fn caught_up(&self, revision: i64) -> Result<()> {
        self.cacher.wait_for(revision).await.map_err(|_| {
            Error::new(
                Reason::Timeout,
                format!(
                    "Too large resource version: {revision}, current: {}",
                    self.cacher.progress()
                ),
            )
        })
    }

    /// Whether a consistent read can be served from memory: the cache is
    /// current and caught up with etcd's current revision in time. When it
    /// is stale or lags, the caller reads etcd, as kube-apiserver falls back
    /// when its cache is not ready or lags; when etcd does not answer the
    /// revision read, that is the answer (kube's cacher returns it too), so
    /// the request fails after one timeout, not two.
    async fn cache_is_fresh(&self) -> Result<bool> {
        let fresh = match self.cacher.check_current() {
            Ok(()) => {
                let revision = self.cacher.current_revision().await?;
                self.cacher.wait_for(revision).await
            }
            Err(stale) => Err(stale),
        };
        if let Err(e) = fresh {
            tracing::warn!(resource = %self.resource.plural, error = %e, "consistent read falls back to etcd");
            return Ok(false);
        }
        Ok(true)
    }

    /// Waits until the cache is current with etcd (a consistent read).
    async fn fresh(&self) -> Result<i64> {
        Ok(self.cacher.wait_fresh().await?)
    }

    /// Reads the stored object straight from etcd (for writes).
    async fn read_stored(&self, namespace: &str, name: &str) -> Result<Option<Stored>> {
        let key = self.key(namespace, name);
        let kv = self
            .storage
            .get(&key)
            .await
            .map_err(|e| storage_error(self, name, e))?;
        match kv {
            None => Ok(None),
            Some(kv) => {
                let mut obj: Value = serde_json::from_slice(&kv.value).map_err(|e| {
                    Error::internal(format!("stored object {key} is not JSON: {e}"))
                })?;
                set_resource_version(&mut obj, kv.mod_revision);
                Ok(Some(Stored {
                    object: self.served(obj).await?,
                    revision: kv.mod_revision,
                    stale: kv.stale,
                }))
            }
        }
    }

    fn check_selectors(&self, opts: &ListOptions) -> Result<()> {
        check_selectors(&self.resource, opts)
    }

    fn matches(&self, obj: &CachedObject, opts: &ListOptions) -> bool {
        selects(obj, opts)
    }

    /// Lists objects, from the cache unless an exact or paged read needs etcd.
    pub async fn list(&self, namespace: &str, opts: &ListOptions) -> Result<ListResult> {
        self.check_selectors(opts)?;
        let opts = &*self.storage_options(opts);
        let prefix = self.list_prefix(namespace);
        if let Some(token) = &opts.continue_token {
            let (revision, start) = decode_continue(token)?;
            let start = format!("{}{start}", self.prefix);
            // The cache shows the list's revision while nothing changed since.
            if let Some(page) = self.cached_page(&prefix, &start, Some(revision), opts) {
                return self.from_page(page).await;
            }
            return self
                .list_from_storage(&prefix, &start, revision, opts)
                .await;
        }
        let rv = opts.resource_version.as_deref().unwrap_or("");
        let exact = opts.resource_version_match.as_deref() == Some("Exact");
        match rv {
            "" => {
                if exact {
                    return Err(Error::bad_request(
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if !self.cache_is_fresh().await? {
                    return self.list_from_storage(&prefix, &prefix, 0, opts).await;
                }
            }
            "0" => {}
            _ => {
                let revision = parse_rv(rv)?;
                if exact {
                    return self
                        .list_from_storage(&prefix, &prefix, revision, opts)
                        .await;
                }
                self.caught_up(revision).await?;
            }
        }
        let page = self
            .cached_page(&prefix, &prefix, None, opts)
            .ok_or_else(|| Error::internal("the cache has no latest page"))?;
        let unreadable = self.cache.undecodable(&prefix);
        if !unreadable.is_empty() {
            return Err(undecodable(&unreadable));
        }
        self.from_page(page).await
    }

    /// A page of the list from the cache (at a continued list's revision,
    /// `None` when the cache cannot show it).
    fn cached_page(
        &self,
        prefix: &str,
        start: &str,
        at: Option<i64>,
        opts: &ListOptions,
    ) -> Option<Page> {
        let range = PageRange {
            prefix,
            start,
            limit: opts.limit,
            at,
            progress: self.cacher.progress(),
            count_rest: opts.labels.is_none() && opts.fields.is_none(),
        };
        self.cache.page(range, |o| self.matches(o, opts))
    }

    async fn list_from_storage(
        &self,
        prefix: &str,
        start: &str,
        mut revision: i64,
        opts: &ListOptions,
    ) -> Result<ListResult> {
        let end = prefix_end(prefix);
        let mut start = start.to_string();
        let mut items = Vec::new();
        loop {
            let want = if opts.limit == 0 {
                0
            } else {
                (opts.limit + 1 - items.len().min(opts.limit)) as i64
            };
            let page = self.storage.range(&start, &end, want.max(0), revision).await.map_err(|e| match e {
                crate::Error::Compacted { .. } => Error::new(
                    Reason::Expired,
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                ),
                other => storage_error(self, "", other),
            })?;
            // Revision 0 reads the latest; later pages read at the first's.
            if revision == 0 {
                revision = page.revision;
            }
            for kv in &page.kvs {
                let obj = self
                    .cache
                    .ingest(&kv.key, &kv.value, kv.mod_revision)
                    .ok_or_else(|| undecodable(std::slice::from_ref(&kv.key)))?;
                if self.matches(&obj, opts) {
                    items.push(Arc::new(obj));
                }
            }
            let full = opts.limit > 0 && items.len() > opts.limit;
            match page.kvs.last() {
                Some(last) if page.more && !full => start = format!("{}\0", last.key),
                _ => break,
            }
        }
        let mut result = self.paginate(items, revision, opts.limit);
        if result.continue_token.is_some() {
            result.remaining = None;
        }
        result.items = self.present(result.items).await?;
        Ok(result)
    }

    /// The current revision of the cache (for bookmarks and empty lists).
    pub fn progress(&self) -> i64 {
        self.cacher.progress()
    }
}

/// A 500 naming the keys whose stored values do not decode (kube's
/// StorageReadError): the request fails, the process and the other
/// objects do not.
fn undecodable(keys: &[String]) -> Error {
    const NAMED: usize = 10;
    let mut named = keys
        .iter()
        .take(NAMED)
        .map(|key| format!("{key:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    if keys.len() > NAMED {
        named.push_str(&format!(" and {} more", keys.len() - NAMED));
    }
    Error::internal(format!(
        "the data stored at {named} cannot be decoded (corrupt objects in storage)"
    ))
}

/// The only element of a one-element vector.
fn one<T>(items: Vec<T>) -> Result<T> {
    items
        .into_iter()
        .next()
        .ok_or_else(|| Error::internal("conversion returned no object"))
}

/// Converts cached objects to `api_version`, re-ingesting them.
async fn present_with(
    converter: &dyn Converter,
    cache: &ResourceCache,
    objects: Vec<Arc<CachedObject>>,
    api_version: &str,
) -> Result<Vec<Arc<CachedObject>>> {
    let values = objects.iter().map(|o| o.value()).collect();
    let converted = converter.convert(values, api_version).await?;
    objects
        .iter()
        .zip(converted)
        .map(|(old, new)| {
            let bytes = serde_json::to_vec(&new).map_err(Error::internal)?;
            cache
                .ingest(&old.key, &bytes, old.revision)
                .map(Arc::new)
                .ok_or_else(|| Error::internal("converted object is invalid"))
        })
        .collect()
}

/// The ingest of a resource's objects: metadata, labels, and the fields its
/// strategy declares selectable.
pub fn strategy_ingest(resource: &Resource) -> Ingest {
    let strategy = resource.strategy.clone();
    ingest_with(Arc::new(move |obj: &Value| {
        strategy
            .declared_fields()
            .into_iter()
            .filter_map(|f| strategy.field_value(obj, &f).map(|v| (f, v)))
            .collect()
    }))
}

/// Refuses a field selector on a field the resource does not declare, in kube's words.
pub fn check_selectors(resource: &Resource, opts: &ListOptions) -> Result<()> {
    let Some(fields) = &opts.fields else {
        return Ok(());
    };
    let allowed = resource.strategy.declared_fields();
    for field in fields.fields() {
        if field != "metadata.name"
            && field != "metadata.namespace"
            && !allowed.iter().any(|a| a == field)
        {
            return Err(Error::bad_request(format!(
                "field label not supported: {field}"
            )));
        }
    }
    Ok(())
}

/// Whether the list options' label and field selectors select an object.
pub fn selects(obj: &CachedObject, opts: &ListOptions) -> bool {
    if let Some(labels) = &opts.labels {
        if !labels.matches_labels(Some(&obj.labels)) {
            return false;
        }
    }
    if let Some(fields) = &opts.fields {
        let value = |field: &str| match field {
            "metadata.name" => Some(obj.name.clone()),
            "metadata.namespace" => Some(obj.namespace.clone()),
            other => obj
                .fields
                .iter()
                .find(|(f, _)| f == other)
                .map(|(_, v)| v.clone()),
        };
        if !fields.matches(value) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn consistent_reads_fall_back_to_etcd_when_the_cache_lags() {
        // Etcd whose revision the watch cache never reaches: a cache that lags.
        let ahead = Arc::new(crate::storage::memory::Faulty::default());
        let storage: Arc<dyn Storage> = ahead.clone();
        let store = configmap_store(storage.clone()).await;
        ahead.lag.store(1_000, std::sync::atomic::Ordering::Relaxed);
        let revision = create_configmap_a(&storage).await;

        let got = store.get("ns", "a", None).await.expect("a consistent get");
        assert_eq!(got.name, "a");
        assert_eq!(got.revision, revision);
        assert_eq!(store.get("ns", "b", None).await.unwrap_err().code(), 404);
        let listed = store
            .list("ns", &ListOptions::default())
            .await
            .expect("a consistent list");
        assert_eq!(listed.items.len(), 1);
        assert_eq!(listed.revision, revision);
    }

    #[tokio::test]
    async fn a_consistent_read_fails_with_etcd_s_revision_read_and_reads_nothing_else() {
        use std::sync::atomic::Ordering::Relaxed;
        let faulty = Arc::new(crate::storage::memory::Faulty::default());
        let storage: Arc<dyn Storage> = faulty.clone();
        let store = configmap_store(storage.clone()).await;
        create_configmap_a(&storage).await;
        let ranges = faulty.limits.lock().unwrap().len();
        faulty.revision_down.store(true, Relaxed);
        faulty.revision_release.notify_one();
        let Err(err) = store.list("ns", &ListOptions::default()).await else {
            panic!("listed while etcd did not answer");
        };
        assert_eq!(err.code(), 503, "{err}");
        assert_eq!(
            faulty.limits.lock().unwrap().len(),
            ranges,
            "no second read of etcd"
        );
    }

    /// Stores configmap `ns/a` straight into `storage`; its revision.
    async fn create_configmap_a(storage: &Arc<dyn Storage>) -> i64 {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
        storage
            .create(
                "/registry/configmaps/ns/a",
                serde_json::to_vec(&object).unwrap().into(),
            )
            .await
            .unwrap()
    }

    /// A configmap store over `storage`, its cache started.
    async fn configmap_store(storage: Arc<dyn Storage>) -> Store {
        struct Plain;
        impl crate::strategy::Strategy for Plain {}
        let cacher = Cacher::start(storage).await.unwrap();
        let resource = Resource::builtin::<k8s_openapi::api::core::v1::ConfigMap>(Plain);
        Store::new(resource, cacher, Admission::default(), "/registry", None)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_get_from_a_resource_version_waits_for_the_cache_to_reach_it() {
        let storage: Arc<dyn Storage> = Arc::new(crate::storage::memory::MemoryStorage::default());
        let store = configmap_store(storage.clone()).await;
        let revision = create_configmap_a(&storage).await;
        let rv = revision.to_string();
        let got = store
            .get("ns", "a", Some(&rv))
            .await
            .expect("a get not older than the create");
        assert_eq!(got.revision, revision);
        assert_eq!(
            store.get("ns", "a", Some("0")).await.unwrap().revision,
            revision
        );
        let ahead = (revision + 100).to_string();
        let err = store.get("ns", "a", Some(&ahead)).await.unwrap_err();
        assert_eq!(err.code(), 504);
        assert!(
            err.to_string().contains("Too large resource version"),
            "{err}"
        );
        assert_eq!(
            store.get("ns", "a", Some("x")).await.unwrap_err().code(),
            400
        );
    }

    #[tokio::test]
    async fn a_generated_name_that_is_taken_is_generated_again() {
        use std::sync::atomic::Ordering::Relaxed;
        let faulty = Arc::new(crate::storage::memory::Faulty::default());
        let store = configmap_store(faulty.clone()).await;
        let opts = WriteOptions::default();
        let generated =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "cm-"}});

        // Seven names taken: the eighth and last attempt is created.
        faulty.collisions.store(7, Relaxed);
        let written = store
            .create("ns", generated.clone(), &opts)
            .await
            .expect("created under an eighth name");
        let name = written.object["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("cm-") && name.len() == 8, "{name}");
        assert_eq!(faulty.collisions.load(Relaxed), 0);

        // Eight taken: kube's 409 after its eight attempts.
        faulty.collisions.store(8, Relaxed);
        let err = store.create("ns", generated, &opts).await.unwrap_err();
        assert_eq!(err.code(), 409, "{err}");
        assert_eq!(faulty.collisions.load(Relaxed), 0);

        // A name the client chose is never changed: its collision is a 409.
        faulty.collisions.store(1, Relaxed);
        let named = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine", "generateName": "cm-"}});
        let err = store.create("ns", named, &opts).await.unwrap_err();
        assert_eq!(err.code(), 409, "{err}");
    }

    #[test]
    fn continue_tokens_round_trip() {
        let token = encode_continue(42, "default/cm-9\0");
        assert_eq!(
            decode_continue(&token).unwrap(),
            (42, "default/cm-9\0".to_string())
        );
        assert!(decode_continue("garbage!").is_err());
    }

    #[test]
    fn field_validation_values() {
        assert_eq!(
            FieldValidation::parse(Some("Strict")).unwrap(),
            FieldValidation::Strict
        );
        assert_eq!(FieldValidation::parse(None).unwrap(), FieldValidation::Warn);
        assert_eq!(FieldValidation::parse(Some("x")).unwrap_err().code(), 400);
    }

    #[test]
    fn a_new_owner_is_a_change_a_new_time_is_not() {
        let entry = |manager: &str, time: &str| json!({"manager": manager, "operation": "Apply", "time": time});
        let old = json!({"metadata": {"name": "a", "resourceVersion": "5", "managedFields": [entry("alice", "t1")]}, "spec": {"x": 1}});
        let retimed = json!({"metadata": {"name": "a", "managedFields": [entry("alice", "t2")]}, "spec": {"x": 1}});
        assert!(unchanged(&retimed, &old));
        let shared = json!({"metadata": {"name": "a", "managedFields": [entry("alice", "t1"), entry("carol", "t2")]}, "spec": {"x": 1}});
        assert!(!unchanged(&shared, &old));
    }
}
