//! The generic store: one per resource, doing keys, metadata, conflicts,
//! selectors, pagination and watch for every resource alike. Each resource
//! only supplies a [`Strategy`](crate::strategy::Strategy); the order in
//! which its hooks run is fixed here, so no resource can get it wrong.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::admission::{Admission, Attributes, Operation};
use crate::request::{BodyStream, UserInfo};
use crate::resource::{Resource, ScaleSelector, ScaleSpec};
use crate::storage::cacher::{
    CachedObject, Cacher, Ingest, ResourceCache, WatchEvent, WatchEventType, WatchStart,
    history_event,
};
use crate::storage::{Storage, StorageError, prefix_end};
use apimachinery::apply;
use apimachinery::error::{Error, FieldError, Reason, Result};
use apimachinery::field_selector::FieldSelector;
use apimachinery::label_selector::{LabelSelector, Labels};
use apimachinery::patch::{self, PatchType};
use apimachinery::validation;

/// How unknown fields in a write are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Dropped silently.
    Ignore,
    /// Dropped with a warning (the default).
    #[default]
    Warn,
    /// Rejected with 400.
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter.
    pub fn parse(value: Option<&str>) -> Result<Self> {
        match value {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(Error::bad_request(format!(
                "fieldValidation parameter unsupported: {other}, must be one of: Ignore, Warn, Strict"
            ))),
        }
    }
}

/// Options of a write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Validate and return the result without storing it.
    pub dry_run: bool,
    /// The manager the client named (`fieldManager`).
    pub field_manager: Option<String>,
    /// The manager recorded when the client named none (from its user agent).
    pub default_manager: Option<String>,
    /// Unknown field handling.
    pub field_validation: FieldValidation,
    /// Force ownership on apply conflicts.
    pub force: bool,
    /// Who writes.
    pub user: UserInfo,
}

/// Options of a list or watch.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: Option<LabelSelector>,
    /// `fieldSelector`.
    pub fields: Option<FieldSelector>,
    /// `limit` (0 = no limit).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Only delete if the uid matches.
    pub uid: Option<String>,
    /// Only delete if the resourceVersion matches.
    pub resource_version: Option<String>,
    /// `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// Validate without deleting.
    pub dry_run: bool,
    /// Who deletes.
    pub user: UserInfo,
}

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

/// What a watch produces; the handler encodes it for the client.
pub enum WatchItem<'a> {
    /// An object event.
    Event(WatchEventType, &'a CachedObject, Option<&'a WatchEvent>),
    /// A bookmark at a revision; `initial_end` marks the end of initial events.
    Bookmark {
        /// The revision.
        revision: i64,
        /// Whether this bookmark ends `sendInitialEvents`.
        initial_end: bool,
    },
    /// A terminal error.
    Error(&'a Error),
}

/// Encodes watch items for the client; `None` skips the item.
pub type WatchEncoder = Arc<dyn Fn(WatchItem<'_>) -> Option<Bytes> + Send + Sync>;

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
    /// Field selector labels in the stored resource's terms, when this
    /// store is a view of another resource's storage.
    field_label: Option<fn(&str) -> String>,
}

/// Converts objects between the versions of a resource whose versions share
/// one storage (custom resources).
#[async_trait::async_trait]
pub trait Converter: Send + Sync + 'static {
    /// The apiVersion objects are stored in.
    fn storage_version(&self) -> String;
    /// Converts objects to `api_version`.
    async fn convert(&self, objects: Vec<Value>, api_version: &str) -> Result<Vec<Value>>;
}

/// Ingests any object: parses it, stamps the revision, reads name,
/// namespace and labels.
pub fn generic_ingest() -> Ingest {
    ingest_with(Arc::new(|_: &Value| Vec::new()))
}

fn ingest_with(fields: Arc<dyn Fn(&Value) -> Vec<(String, String)> + Send + Sync>) -> Ingest {
    Arc::new(move |key: &str, value: &[u8], revision: i64| {
        let mut obj: Value = serde_json::from_slice(value).ok()?;
        set_resource_version(&mut obj, revision);
        let meta = obj.get("metadata")?;
        let text = |k: &str| {
            meta.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let labels = meta
            .get("labels")
            .and_then(Value::as_object)
            .map(Labels::from_map)
            .unwrap_or_default();
        Some(CachedObject {
            key: key.into(),
            revision,
            namespace: text("namespace"),
            name: text("name"),
            labels,
            fields: fields(&obj),
            // Exactly as long as the JSON: a cache holds many of these.
            bytes: Bytes::from(serde_json::to_vec(&obj).ok()?.into_boxed_slice()),
        })
    })
}

/// Sets the value at a JSON pointer, creating objects on the way.
pub fn set_pointer(obj: &mut Value, pointer: &str, value: Value) {
    let mut cur = obj;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let map = cur.as_object_mut().expect("just made an object");
        if i == parts.len() - 1 {
            map.insert(part.to_string(), value);
            return;
        }
        cur = map.entry(part.to_string()).or_insert_with(|| json!({}));
    }
}

/// Sets `metadata.resourceVersion`.
pub fn set_resource_version(obj: &mut Value, revision: i64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert(
            "resourceVersion".into(),
            Value::String(revision.to_string()),
        );
    }
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// The current time as kube serializes it (RFC3339, seconds).
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Maps a storage error to an API error about one object.
fn storage_error(store: &Store, name: &str, err: StorageError) -> Error {
    match err {
        StorageError::NotFound(_) => store.not_found(name),
        StorageError::AlreadyExists(_) => Error::AlreadyExists {
            resource: store.resource.group_resource(),
            name: name.into(),
        },
        StorageError::Conflict { .. } => store.conflict(name),
        StorageError::Compacted {
            requested,
            compacted,
        } => Error::new(
            Reason::Expired,
            format!("too old resource version: {requested} ({compacted})"),
        ),
        StorageError::FutureRevision(rev) => Error::new(
            Reason::Timeout,
            format!("Too large resource version: {rev}"),
        ),
        StorageError::Unavailable(msg) => {
            Error::unavailable(format!("storage is unavailable: {msg}"))
        }
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
        let strategy = resource.strategy.clone();
        let fields = Arc::new(move |obj: &Value| {
            strategy
                .declared_fields()
                .into_iter()
                .filter_map(|f| strategy.field_value(obj, &f).map(|v| (f, v)))
                .collect()
        });
        let cache = cacher
            .register(&prefix, ingest_with(fields))
            .await
            .map_err(|e| Error::unavailable(e.to_string()))?;
        let store = Store {
            storage: cacher.storage().clone(),
            resource,
            cacher,
            cache,
            prefix,
            admission,
            patch_schema,
            converter: None,
            field_label: None,
        };
        Ok(match shared {
            Some(shared) => Store {
                field_label: Some(shared.field_label),
                ..store.with_converter(shared.converter)
            },
            None => store,
        })
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
            None if !self.cache_is_fresh().await => {
                // The cache lags behind etcd: read the object from etcd itself.
                let kv = self
                    .storage
                    .get(&key)
                    .await
                    .map_err(|e| storage_error(self, name, e))?;
                kv.and_then(|kv| self.cache.ingest(&kv.key, &kv.value, kv.mod_revision))
                    .map(Arc::new)
            }
            None | Some("0") => self.cache.get(&key),
            Some(rv) => {
                // Not older than `rv`: once the cache has reached it.
                self.caught_up(parse_rv(rv)?).await?;
                self.cache.get(&key)
            }
        };
        one(self
            .present(vec![obj.ok_or_else(|| self.not_found(name))?])
            .await?)
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

    /// Whether the cache caught up with etcd's current revision in time (a
    /// consistent read from memory); when it did not, the caller reads etcd,
    /// as kube-apiserver falls back when its cache lags.
    async fn cache_is_fresh(&self) -> bool {
        match self.fresh().await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(resource = %self.resource.plural, error = %e, "consistent read falls back to etcd");
                false
            }
        }
    }

    /// Waits until the cache is current with etcd (a consistent read).
    async fn fresh(&self) -> Result<i64> {
        self.cacher
            .wait_fresh()
            .await
            .map_err(|e| Error::unavailable(e.to_string()))
    }

    /// Reads the stored object straight from etcd (for writes).
    async fn read_stored(&self, namespace: &str, name: &str) -> Result<Option<(Value, i64)>> {
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
                Ok(Some((self.served(obj).await?, kv.mod_revision)))
            }
        }
    }

    fn check_selectors(&self, opts: &ListOptions) -> Result<()> {
        let Some(fields) = &opts.fields else {
            return Ok(());
        };
        let allowed = self.resource.strategy.declared_fields();
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

    fn matches(&self, obj: &CachedObject, opts: &ListOptions) -> bool {
        store_matches(obj, opts)
    }

    /// Lists objects, from the cache unless an exact or paged read needs etcd.
    pub async fn list(&self, namespace: &str, opts: &ListOptions) -> Result<ListResult> {
        self.check_selectors(opts)?;
        let opts = &*self.storage_options(opts);
        let prefix = self.list_prefix(namespace);
        if let Some(token) = &opts.continue_token {
            let (revision, start) = decode_continue(token)?;
            return self
                .list_from_storage(&prefix, &format!("{}{start}", self.prefix), revision, opts)
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
                if !self.cache_is_fresh().await {
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
        let snapshot = self.cache.snapshot(&prefix, self.cacher.progress());
        let matching: Vec<Arc<CachedObject>> = snapshot
            .objects
            .into_iter()
            .filter(|o| self.matches(o, opts))
            .collect();
        let mut page = self.paginate(matching, snapshot.revision, opts.limit);
        page.items = self.present(page.items).await?;
        Ok(page)
    }

    fn paginate(
        &self,
        mut items: Vec<Arc<CachedObject>>,
        revision: i64,
        limit: usize,
    ) -> ListResult {
        if limit == 0 || items.len() <= limit {
            return ListResult {
                items,
                revision,
                continue_token: None,
                remaining: None,
            };
        }
        let remaining = (items.len() - limit) as i64;
        items.truncate(limit);
        let last = items.last().map(|o| o.key.to_string()).unwrap_or_default();
        let token = encode_continue(revision, &format!("{}\0", &last[self.prefix.len()..]));
        ListResult {
            items,
            revision,
            continue_token: Some(token),
            remaining: Some(remaining),
        }
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
                StorageError::Compacted { .. } => Error::new(
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
                if let Some(obj) = self.cache.ingest(&kv.key, &kv.value, kv.mod_revision) {
                    if self.matches(&obj, opts) {
                        items.push(Arc::new(obj));
                    }
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

    /// Watches objects; the returned stream ends when the client goes away,
    /// on timeout, or after an error event.
    pub async fn watch(
        &self,
        namespace: &str,
        opts: ListOptions,
        encode: WatchEncoder,
    ) -> Result<BodyStream> {
        self.check_selectors(&opts)?;
        let opts = self.storage_options(&opts).into_owned();
        let prefix = self.list_prefix(namespace);
        let rv = opts.resource_version.clone().unwrap_or_default();
        let initial = opts
            .send_initial_events
            .unwrap_or(rv.is_empty() || rv == "0");
        let (tx, rx) = mpsc::channel::<Bytes>(256);
        let (replay, live, history, initial_revision) = if initial {
            if rv.is_empty() {
                self.fresh().await?;
            }
            let (snapshot, live) = self
                .cache
                .snapshot_and_subscribe(&prefix, self.cacher.progress());
            let replay = snapshot
                .objects
                .into_iter()
                .filter(|o| self.matches(o, &opts))
                .map(|o| Arc::new(WatchEvent::new(WatchEventType::Added, o, None)))
                .collect();
            (replay, Some(live), None, Some(snapshot.revision))
        } else {
            let revision = parse_rv(&rv)?;
            match self.cache.watch_from(self.storage.as_ref(), revision).await {
                Ok(WatchStart::Cached { replay, live }) => (replay, Some(live), None, None),
                Ok(WatchStart::History(stream)) => (Vec::new(), None, Some(stream), None),
                Err(StorageError::Compacted { .. }) => {
                    return Err(Error::new(
                        Reason::Gone,
                        format!("too old resource version: {revision}"),
                    ));
                }
                Err(e) => return Err(storage_error(self, "", e)),
            }
        };
        let watcher = Watcher {
            opts,
            prefix,
            encode,
            tx,
            cache: self.cache.clone(),
            cacher: self.cacher.clone(),
            send_initial_end: initial_revision,
            converter: self
                .converter
                .clone()
                .map(|c| (c, self.resource.api_version())),
            stored_terms: self.field_label.is_some(),
        };
        tokio::spawn(watcher.run(replay, live, history));
        Ok(tokio_stream::wrappers::ReceiverStream::new(rx).boxed())
    }

    /// Creates an object.
    pub async fn create(
        &self,
        namespace: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Written> {
        self.create_inner(namespace, obj, opts, false).await
    }

    /// Creates an object; `tracked` when an apply already set its managedFields.
    async fn create_inner(
        &self,
        namespace: &str,
        mut obj: Value,
        opts: &WriteOptions,
        tracked: bool,
    ) -> Result<Written> {
        let mut warnings = Vec::new();
        obj = self.decode_object(obj, opts, &mut warnings)?;
        self.set_namespace(&mut obj, namespace)?;
        let meta = meta_mut(&mut obj);
        if meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| !rv.is_empty())
        {
            return Err(Error::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let generate_name = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
            && !generate_name.is_empty()
        {
            meta.insert(
                "name".into(),
                Value::String(format!("{generate_name}{}", random_suffix())),
            );
        }
        meta.insert(
            "uid".into(),
            Value::String(uuid::Uuid::new_v4().to_string()),
        );
        meta.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
        for field in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(field);
        }
        if self.resource.strategy.tracks_generation() {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
        let strategy = &self.resource.strategy;
        strategy.prepare_for_create(&mut obj);
        strategy.defaults(&mut obj);
        let name = meta_str(&obj, "name").to_string();
        let attrs = self.attributes(
            Operation::Create,
            "",
            namespace,
            &name,
            None,
            &opts.user,
            opts.dry_run,
        );
        self.admission.admit(&attrs, &mut obj).await?;
        let mut errs =
            validation::object_meta(&obj, self.resource.namespaced, strategy.name_rule());
        errs.extend(strategy.validate(&obj));
        if !errs.is_empty() {
            return Err(self.invalid(&name, errs));
        }
        self.admission.validate(&attrs, Some(&obj)).await?;
        warnings.extend(strategy.warnings(&obj));
        if !tracked {
            self.track(None, &mut obj, "", opts);
        }
        if opts.dry_run {
            return Ok(Written {
                object: obj,
                created: true,
                warnings,
            });
        }
        let bytes = self.stored(&obj).await?;
        let revision = self
            .storage
            .create(&self.key(namespace, &name), bytes)
            .await
            .map_err(|e| storage_error(self, &name, e))?;
        set_resource_version(&mut obj, revision);
        Ok(Written {
            object: obj,
            created: true,
            warnings,
        })
    }

    /// Replaces an object (PUT), or its status (`subresource = "status"`).
    pub async fn update(
        &self,
        namespace: &str,
        name: &str,
        subresource: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Written> {
        if subresource == "scale" {
            return self.update_scale(namespace, name, obj, opts).await;
        }
        let mut warnings = Vec::new();
        let mut obj = self.decode_object(obj, opts, &mut warnings)?;
        let body_name = meta_str(&obj, "name");
        if body_name != name {
            return Err(Error::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        self.set_namespace(&mut obj, namespace)?;
        let mut written = self
            .guaranteed_update(namespace, name, subresource, opts, false, |_| {
                Ok(obj.clone())
            })
            .await;
        if let Err(Error::NotFound { .. }) = &written {
            if subresource.is_empty() && self.resource.strategy.allow_create_on_update() {
                let mut fresh = obj.clone();
                meta_mut(&mut fresh).remove("resourceVersion");
                written = self.create(namespace, fresh, opts).await;
            }
        }
        let mut written = written?;
        warnings.append(&mut written.warnings);
        written.warnings = warnings;
        Ok(written)
    }

    /// The schema server-side apply merges with, and the top-level fields a
    /// write through `subresource` may not touch.
    fn apply_schema<'a>(&'a self, subresource: &str, root: &'a Option<Value>) -> apply::Schema<'a> {
        let schema = match (&self.patch_schema, root) {
            (Some(s), Some(root)) => apply::Schema::new(root, s.components.as_ref()),
            _ => apply::Schema::deduced(),
        };
        let schema = if self.resource.strategic_merge_patch {
            schema
        } else {
            schema.unstructured()
        };
        let has_status = self.resource.find_subresource("status").is_some();
        match subresource {
            "status" => schema.reset_fields(&["spec"]),
            "" if has_status => schema.reset_fields(&["status"]),
            _ => schema,
        }
    }

    /// Records a write's field ownership in `metadata.managedFields`.
    fn track(&self, old: Option<&Value>, new: &mut Value, subresource: &str, opts: &WriteOptions) {
        let Some(manager) = opts
            .field_manager
            .as_ref()
            .or(opts.default_manager.as_ref())
        else {
            return;
        };
        let root = self.patch_schema.as_ref().map(|s| s.root.clone());
        let schema = self.apply_schema(subresource, &root);
        let _ = apply::update(
            old,
            new,
            manager,
            &self.resource.api_version(),
            subresource,
            &now_rfc3339(),
            schema,
        );
    }

    /// Server-side apply: creates the object if absent, otherwise merges the
    /// applied configuration, with conflicts between field managers.
    async fn apply(
        &self,
        namespace: &str,
        name: &str,
        subresource: &str,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Written> {
        let Some(manager) = opts.field_manager.clone().filter(|m| !m.is_empty()) else {
            let cause = FieldError::required("fieldManager", "is required for apply patch");
            return Err(Error::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![cause],
            ));
        };
        let mut config = crate::codec::decode_yaml(body)?;
        if !config.is_object() {
            return Err(Error::bad_request(
                "the applied configuration must be an object",
            ));
        }
        let (api_version, kind) = (self.resource.api_version(), self.resource.kind.clone());
        for (field, want) in [("apiVersion", &api_version), ("kind", &kind)] {
            match config.get(field).and_then(Value::as_str) {
                Some(got) if got == want => {}
                Some(got) => {
                    return Err(Error::bad_request(format!(
                        "the {field} in the data ({got}) does not match the expected {field} ({want})"
                    )));
                }
                None => return Err(Error::bad_request(format!("{field} must be set"))),
            }
        }
        let body_name = meta_str(&config, "name").to_string();
        if body_name != name {
            return Err(Error::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if self.resource.namespaced {
            meta_mut(&mut config).insert("namespace".into(), json!(namespace));
        }
        let root = self.patch_schema.as_ref().map(|s| s.root.clone());
        let run = |live: Option<&Value>| {
            let schema = self.apply_schema(subresource, &root);
            apply::apply(
                live,
                &config,
                &manager,
                &api_version,
                subresource,
                opts.force,
                &now_rfc3339(),
                schema,
            )
            .map_err(apply_error)
        };
        if self.read_stored(namespace, name).await?.is_none() {
            if !subresource.is_empty() {
                return Err(self.not_found(name));
            }
            let created = run(None)?;
            match self.create_inner(namespace, created, opts, true).await {
                Err(Error::AlreadyExists { .. }) => {}
                other => return other,
            }
        }
        self.guaranteed_update(namespace, name, subresource, opts, true, |current| {
            run(Some(current))
        })
        .await
    }

    fn scale_spec(&self) -> Result<&ScaleSpec> {
        self.resource
            .scale
            .as_ref()
            .ok_or_else(Error::path_not_found)
    }

    /// The autoscaling/v1 Scale of an object.
    pub fn to_scale(&self, obj: &Value) -> Result<Value> {
        let spec = self.scale_spec()?;
        let replicas = |pointer: &str| obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0);
        let selector = match &spec.selector {
            ScaleSelector::LabelSelector(pointer) => match obj.pointer(pointer) {
                Some(sel) => LabelSelector::from_label_selector_object(sel)
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
                None => String::new(),
            },
            ScaleSelector::Map(pointer) => obj
                .pointer(pointer)
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default(),
            ScaleSelector::String(pointer) => obj
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            ScaleSelector::None => String::new(),
        };
        let meta = obj.get("metadata").cloned().unwrap_or_default();
        let mut metadata = Map::new();
        for field in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            if let Some(v) = meta.get(field) {
                metadata.insert(field.into(), v.clone());
            }
        }
        let mut status = json!({"replicas": replicas(&spec.status_replicas)});
        if !selector.is_empty() {
            status["selector"] = json!(selector);
        }
        Ok(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": metadata,
            "spec": {"replicas": replicas(&spec.spec_replicas)},
            "status": status,
        }))
    }

    /// Sets the parent's replicas from a Scale, checking the Scale.
    fn from_scale(&self, current: &Value, scale: &Value) -> Result<Value> {
        let spec = self.scale_spec()?;
        let name = meta_str(current, "name");
        let rv = meta_str(scale, "resourceVersion");
        if !rv.is_empty() && rv != meta_str(current, "resourceVersion") {
            return Err(self.conflict(name));
        }
        let replicas = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if replicas < 0 {
            let cause = FieldError::invalid(
                "spec.replicas",
                replicas,
                "must be greater than or equal to 0",
            );
            return Err(Error::invalid("autoscaling", "Scale", name, vec![cause]));
        }
        let mut parent = current.clone();
        set_pointer(&mut parent, &spec.spec_replicas, json!(replicas));
        Ok(parent)
    }

    fn decode_scale(&self, scale: Value) -> Result<Value> {
        use crate::codec::Codec;
        let got = (
            scale.get("apiVersion").and_then(Value::as_str),
            scale.get("kind").and_then(Value::as_str),
        );
        if !matches!(got, (None | Some("autoscaling/v1"), None | Some("Scale"))) {
            return Err(Error::bad_request(
                "the body of a scale request must be an autoscaling/v1 Scale",
            ));
        }
        crate::codec::TypedCodec::<k8s_openapi::api::autoscaling::v1::Scale>::default()
            .normalize(scale)
            .map(|n| n.object)
            .map_err(|e| {
                Error::bad_request(format!(
                    "Scale in version \"v1\" cannot be handled as a Scale: {e}"
                ))
            })
    }

    /// Replaces an object's replicas through its Scale.
    async fn update_scale(
        &self,
        namespace: &str,
        name: &str,
        scale: Value,
        opts: &WriteOptions,
    ) -> Result<Written> {
        let scale = self.decode_scale(scale)?;
        let mut written = self
            .guaranteed_update(namespace, name, "scale", opts, false, |current| {
                self.from_scale(current, &scale)
            })
            .await?;
        written.object = self.to_scale(&written.object)?;
        Ok(written)
    }

    /// Patches an object's Scale.
    async fn patch_scale(
        &self,
        namespace: &str,
        name: &str,
        kind: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Written> {
        let schema = self.patch_schema.clone();
        let mut written = self
            .guaranteed_update(namespace, name, "scale", opts, false, |current| {
                let scale = self.to_scale(current)?;
                let scale_schema = json!({"$ref": format!("{}io.k8s.api.autoscaling.v1.Scale", apimachinery::openapi::SCHEMA_PREFIX)});
                let lookup = schema.as_ref().map(|s| patch::strategic::Schema::new(&scale_schema, s.components.as_ref()));
                let patched = patch::apply_patch(kind, &scale, body, lookup)
                    .map_err(|e| Error::new(apimachinery::error::reason_for_code(e.code()), e.status_message()))?;
                self.from_scale(current, &self.decode_scale(patched)?)
            })
            .await?;
        written.object = self.to_scale(&written.object)?;
        Ok(written)
    }

    /// Patches an object (or its status).
    pub async fn patch(
        &self,
        namespace: &str,
        name: &str,
        subresource: &str,
        kind: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Written> {
        if subresource == "scale" {
            return self.patch_scale(namespace, name, kind, body, opts).await;
        }
        if kind == PatchType::StrategicMerge && !self.resource.strategic_merge_patch {
            return Err(crate::codec::unsupported_media_type(&[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]));
        }
        if kind == PatchType::Apply {
            return self.apply(namespace, name, subresource, body, opts).await;
        }
        let schema = self.patch_schema.clone();
        self.guaranteed_update(namespace, name, subresource, opts, false, |current| {
            let patch_schema = schema
                .as_ref()
                .map(|s| patch::strategic::Schema::new(&s.root, s.components.as_ref()));
            let patched = patch::apply_patch(kind, current, body, patch_schema).map_err(|e| {
                Error::new(
                    apimachinery::error::reason_for_code(e.code()),
                    e.status_message(),
                )
            })?;
            // A strategic patch that gives a field a value of the wrong
            // type: kube's 422 on the patch, in its converter's words.
            if kind == PatchType::StrategicMerge
                && let Err(e) = self.resource.codec.normalize(patched.clone())
                && let Some(why) = crate::codec::cannot_restore(&e)
            {
                let quoted = serde_json::from_slice::<Value>(body)
                    .map(|p| patch::go_format(&p))
                    .unwrap_or_default();
                return Err(Error::invalid(
                    "",
                    "",
                    "",
                    vec![FieldError::invalid("patch", quoted, why)],
                ));
            }
            Ok(patched)
        })
        .await
    }

    /// The update loop: read, compute the new object, check, write with a
    /// revision comparison, and retry on a lost race unless the caller
    /// named a resourceVersion.
    async fn guaranteed_update(
        &self,
        namespace: &str,
        name: &str,
        subresource: &str,
        opts: &WriteOptions,
        tracked: bool,
        compute: impl Fn(&Value) -> Result<Value>,
    ) -> Result<Written> {
        let strategy = &self.resource.strategy;
        for _attempt in 0..16 {
            let stored = self.read_stored(namespace, name).await?;
            let Some((old, revision)) = stored else {
                return Err(self.not_found(name));
            };
            let mut warnings = Vec::new();
            let computed = compute(&old)?;
            let mut new = self.decode_object(computed, opts, &mut warnings)?;
            self.set_namespace(&mut new, namespace)?;
            let requested_rv = meta_str(&new, "resourceVersion").to_string();
            // "0" reads as 0, which kube takes as no precondition at all.
            let precondition = !requested_rv.is_empty() && requested_rv != "0";
            if precondition && requested_rv != revision.to_string() {
                return Err(self.conflict(name));
            }
            let mut new = self.merge_subresource(subresource, new, &old);
            self.carry_system_metadata(&mut new, &old);
            if subresource.is_empty() {
                strategy.prepare_for_update(&mut new, &old);
            }
            strategy.defaults(&mut new);
            let attrs = self.attributes(
                Operation::Update,
                subresource,
                namespace,
                name,
                Some(&old),
                &opts.user,
                opts.dry_run,
            );
            self.admission.admit(&attrs, &mut new).await?;
            let mut errs =
                validation::object_meta(&new, self.resource.namespaced, strategy.name_rule());
            errs.extend(validation::object_meta_update(&new, &old));
            errs.extend(strategy.validate_update(&new, &old));
            if !errs.is_empty() {
                return Err(self.invalid(name, errs));
            }
            self.admission.validate(&attrs, Some(&new)).await?;
            warnings.extend(strategy.warnings(&new));
            self.bump_generation(&mut new, &old);
            let key = self.key(namespace, name);
            if is_being_deleted(&new) && finalizers(&new).is_empty() && strategy.may_remove(&new) {
                if opts.dry_run {
                    return Ok(Written {
                        object: new,
                        created: false,
                        warnings,
                    });
                }
                match self.storage.delete(&key, Some(revision)).await {
                    Ok(_) => {
                        return Ok(Written {
                            object: new,
                            created: false,
                            warnings,
                        });
                    }
                    Err(StorageError::Conflict { .. }) if !precondition => continue,
                    Err(e) => return Err(storage_error(self, name, e)),
                }
            }
            if !tracked {
                self.track(Some(&old), &mut new, subresource, opts);
            }
            if unchanged(&new, &old) {
                return Ok(Written {
                    object: old,
                    created: false,
                    warnings,
                });
            }
            if opts.dry_run {
                return Ok(Written {
                    object: new,
                    created: false,
                    warnings,
                });
            }
            match self
                .storage
                .update(&key, self.stored(&new).await?, revision)
                .await
            {
                Ok(rev) => {
                    set_resource_version(&mut new, rev);
                    return Ok(Written {
                        object: new,
                        created: false,
                        warnings,
                    });
                }
                Err(StorageError::Conflict { .. }) if !precondition => continue,
                Err(e) => return Err(storage_error(self, name, e)),
            }
        }
        Err(self.conflict(name))
    }

    /// Deletes an object, or marks it for deletion while finalizers remain.
    pub async fn delete(
        &self,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted> {
        let key = self.key(namespace, name);
        for _attempt in 0..16 {
            let Some((mut obj, revision)) = self.read_stored(namespace, name).await? else {
                return Err(self.not_found(name));
            };
            if let Some(uid) = &opts.uid {
                let actual = meta_str(&obj, "uid");
                if uid != actual {
                    return Err(self.precondition_failed(
                        name,
                        &format!("UID in precondition: {uid}, UID in object meta: {actual}"),
                    ));
                }
            }
            if let Some(rv) = &opts.resource_version {
                if rv != &revision.to_string() {
                    return Err(self.precondition_failed(
                        name,
                        &format!("ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {revision}"),
                    ));
                }
            }
            let attrs = self.attributes(
                Operation::Delete,
                "",
                namespace,
                name,
                Some(&obj),
                &opts.user,
                opts.dry_run,
            );
            self.admission.validate(&attrs, None).await?;
            let mut keep =
                self.resource.strategy.begin_delete(&mut obj)? || !finalizers(&obj).is_empty();
            if is_being_deleted(&obj) {
                return Ok(Deleted {
                    object: obj,
                    gone: false,
                });
            }
            // Orphan and Foreground deletion wait for the garbage collector.
            let finalizer = match opts.propagation_policy.as_deref() {
                Some("Orphan") => Some("orphan"),
                Some("Foreground") => Some("foregroundDeletion"),
                _ => None,
            };
            if let Some(finalizer) = finalizer {
                let list = meta_mut(&mut obj)
                    .entry("finalizers")
                    .or_insert_with(|| json!([]));
                if let Some(list) = list.as_array_mut() {
                    if !list.iter().any(|f| f == finalizer) {
                        list.push(json!(finalizer));
                    }
                }
                keep = true;
            }
            if keep {
                let meta = meta_mut(&mut obj);
                meta.entry("deletionTimestamp")
                    .or_insert_with(|| Value::String(now_rfc3339()));
                meta.entry("deletionGracePeriodSeconds").or_insert(json!(0));
                if opts.dry_run {
                    return Ok(Deleted {
                        object: obj,
                        gone: false,
                    });
                }
                match self
                    .storage
                    .update(&key, self.stored(&obj).await?, revision)
                    .await
                {
                    Ok(rev) => {
                        set_resource_version(&mut obj, rev);
                        return Ok(Deleted {
                            object: obj,
                            gone: false,
                        });
                    }
                    Err(StorageError::Conflict { .. }) => continue,
                    Err(e) => return Err(storage_error(self, name, e)),
                }
            }
            if opts.dry_run {
                return Ok(Deleted {
                    object: obj,
                    gone: true,
                });
            }
            match self.storage.delete(&key, Some(revision)).await {
                Ok(_) => {
                    return Ok(Deleted {
                        object: obj,
                        gone: true,
                    });
                }
                Err(StorageError::Conflict { .. }) => continue,
                Err(e) => return Err(storage_error(self, name, e)),
            }
        }
        Err(self.conflict(name))
    }

    /// Deletes every object matching the list options.
    pub async fn delete_collection(
        &self,
        namespace: &str,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Vec<Value>> {
        let mut all = list.clone();
        all.limit = 0;
        all.continue_token = None;
        let matching = self.list(namespace, &all).await?;
        let mut deleted = Vec::new();
        for obj in matching.items {
            match self.delete(&obj.namespace, &obj.name, opts).await {
                Ok(d) => deleted.push(d.object),
                Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    fn precondition_failed(&self, name: &str, detail: &str) -> Error {
        Error::Conflict {
            resource: self.resource.group_resource(),
            name: name.into(),
            detail: format!("Precondition failed: {detail}"),
        }
    }

    fn attributes<'a>(
        &'a self,
        operation: Operation,
        subresource: &'a str,
        namespace: &'a str,
        name: &'a str,
        old: Option<&'a Value>,
        user: &'a UserInfo,
        dry_run: bool,
    ) -> Attributes<'a> {
        Attributes {
            operation,
            resource: &self.resource,
            subresource,
            namespace,
            name,
            old,
            user,
            dry_run,
        }
    }

    /// Checks apiVersion and kind (defaulting them), then the structure,
    /// honouring `fieldValidation`.
    fn decode_object(
        &self,
        mut obj: Value,
        opts: &WriteOptions,
        warnings: &mut Vec<String>,
    ) -> Result<Value> {
        let Value::Object(map) = &mut obj else {
            return Err(Error::bad_request(format!(
                "the object provided is unrecognized (must be of type {})",
                self.resource.kind
            )));
        };
        let (api_version, kind) = (self.resource.api_version(), self.resource.kind.clone());
        let got_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let got_kind = map
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !got_version.is_empty() && got_version != api_version {
            return Err(Error::bad_request(format!(
                "the API version in the data ({got_version}) does not match the expected API version ({api_version})"
            )));
        }
        if !got_kind.is_empty() && got_kind != kind {
            // A built-in kind's decoder (kube's scheme) names the conversion it lacks.
            if self.resource.strategic_merge_patch {
                let version = &self.resource.version;
                let group = &self.resource.group;
                let internal = if group.is_empty() {
                    "core"
                } else {
                    group.split('.').next().unwrap_or(group)
                };
                return Err(Error::bad_request(format!(
                    "{got_kind} in version {version:?} cannot be handled as a {kind}: \
                     converting ({version}.{got_kind}) to ({internal}.{kind}): unknown conversion"
                )));
            }
            return Err(Error::bad_request(format!(
                "the kind in the data ({got_kind}) does not match the expected kind ({kind})"
            )));
        }
        map.insert("apiVersion".into(), Value::String(api_version.clone()));
        map.insert("kind".into(), Value::String(kind.clone()));
        let normalized = self.resource.codec.normalize(obj).map_err(|e| {
            Error::bad_request(format!(
                "{kind} in version {:?} cannot be handled as a {kind}: {e}",
                self.resource.version
            ))
        })?;
        if !normalized.unknown_fields.is_empty() {
            match opts.field_validation {
                FieldValidation::Strict => {
                    let list = normalized
                        .unknown_fields
                        .iter()
                        .map(|f| format!("unknown field {f:?}"))
                        .collect::<Vec<_>>();
                    return Err(Error::bad_request(format!(
                        "{kind} in version {:?} cannot be handled as a {kind}: strict decoding error: {}",
                        self.resource.version,
                        list.join(", ")
                    )));
                }
                FieldValidation::Warn => {
                    warnings.extend(
                        normalized
                            .unknown_fields
                            .iter()
                            .map(|f| format!("unknown field {f:?}")),
                    );
                }
                FieldValidation::Ignore => {}
            }
        }
        Ok(normalized.object)
    }

    fn set_namespace(&self, obj: &mut Value, namespace: &str) -> Result<()> {
        let meta = meta_mut(obj);
        if !self.resource.namespaced {
            meta.remove("namespace");
            return Ok(());
        }
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != namespace => Err(Error::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )),
            _ => {
                meta.insert("namespace".into(), Value::String(namespace.into()));
                Ok(())
            }
        }
    }

    /// What a write through a subresource may change: `status` changes only
    /// the status; the main resource leaves a status subresource's status alone.
    fn merge_subresource(&self, subresource: &str, mut new: Value, old: &Value) -> Value {
        if let Some(merged) = self
            .resource
            .strategy
            .update_subresource(subresource, &new, old)
        {
            return merged;
        }
        let has_status = self.resource.find_subresource("status").is_some();
        match subresource {
            "status" => {
                let mut merged = old.clone();
                match new.get_mut("status").map(Value::take) {
                    Some(status) => merged["status"] = status,
                    None => {
                        if let Some(m) = merged.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                let rv = meta_str(&new, "resourceVersion").to_string();
                meta_mut(&mut merged).insert("resourceVersion".into(), Value::String(rv));
                merged
            }
            "" if has_status => {
                match old.get("status") {
                    Some(status) => new["status"] = status.clone(),
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                new
            }
            _ => new,
        }
    }

    /// Fields the server owns are copied from the stored object.
    fn carry_system_metadata(&self, new: &mut Value, old: &Value) {
        let old_meta = old.get("metadata").cloned().unwrap_or_default();
        let meta = meta_mut(new);
        for field in [
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old_meta.get(field) {
                Some(v) => meta.insert(field.into(), v.clone()),
                None => meta.remove(field),
            };
        }
        if meta
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
        {
            if let Some(uid) = old_meta.get("uid") {
                meta.insert("uid".into(), uid.clone());
            }
        }
        meta.remove("selfLink");
    }

    fn bump_generation(&self, new: &mut Value, old: &Value) {
        if !self.resource.strategy.tracks_generation() {
            return;
        }
        let spec = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("metadata");
                m.remove("status");
            }
            v
        };
        let old_generation = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let deletion_started = is_being_deleted(new) && !is_being_deleted(old);
        let generation = if spec(new) != spec(old) || deletion_started {
            old_generation + 1
        } else {
            old_generation
        };
        meta_mut(new).insert("generation".into(), json!(generation));
    }

    /// A Status for a completed delete, as kube returns when it does not return the object.
    pub fn deleted_status(&self, obj: &Value) -> apimachinery::error::Status {
        apimachinery::error::Status::success(apimachinery::error::StatusDetails {
            name: Some(meta_str(obj, "name").to_string()),
            group: (!self.resource.group.is_empty()).then(|| self.resource.group.clone()),
            kind: Some(self.resource.plural.clone()),
            uid: Some(meta_str(obj, "uid").to_string()).filter(|u| !u.is_empty()),
            ..Default::default()
        })
    }

    /// A consistent snapshot of every object, and the events that follow it:
    /// how controllers in the same process follow a resource.
    pub async fn subscribe(
        &self,
    ) -> Result<(
        crate::storage::cacher::Snapshot,
        tokio::sync::broadcast::Receiver<Arc<WatchEvent>>,
    )> {
        self.fresh().await?;
        Ok(self
            .cache
            .snapshot_and_subscribe(&self.prefix, self.cacher.progress()))
    }

    /// The current revision of the cache (for bookmarks and empty lists).
    pub fn progress(&self) -> i64 {
        self.cacher.progress()
    }
}

fn is_being_deleted(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

fn finalizers(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
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

/// Whether an update changes nothing but server-kept bookkeeping. A change
/// of field ownership alone (an apply of the values already there by
/// another manager) is a change, as in kube; the time of an entry is not.
fn unchanged(new: &Value, old: &Value) -> bool {
    let strip = |obj: &Value| {
        let mut v = without_rv(obj);
        for entry in v
            .pointer_mut("/metadata/managedFields")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(entry) = entry.as_object_mut() {
                entry.remove("time");
            }
        }
        v
    };
    strip(new) == strip(old)
}

/// An apply failure as a Status.
fn apply_error(err: apply::ApplyError) -> Error {
    let causes = err
        .causes()
        .into_iter()
        .map(|c| apimachinery::error::StatusCause {
            reason: c["reason"].as_str().map(str::to_string),
            message: c["message"].as_str().map(str::to_string),
            field: c["field"].as_str().map(str::to_string),
        })
        .collect();
    Error::WithCauses {
        reason: apimachinery::error::reason_for_code(err.code()),
        message: err.message(),
        causes,
    }
}

fn without_rv(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    v
}

/// The stored form: JSON without `metadata.resourceVersion`.
fn encode(obj: &Value) -> Result<Bytes> {
    serde_json::to_vec(&without_rv(obj))
        .map(Bytes::from)
        .map_err(Error::internal)
}

fn parse_rv(rv: &str) -> Result<i64> {
    rv.parse::<i64>().ok().filter(|r| *r >= 0).ok_or_else(|| {
        Error::bad_request(format!(
            "Invalid value: {rv:?}: resourceVersion must be a non-negative integer"
        ))
    })
}

/// Five random characters from kube's alphabet (no vowels, no confusables).
fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Encodes a continue token as kube does: base64 of `{"v","rv","start"}`.
pub fn encode_continue(revision: i64, start: &str) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": revision, "start": start});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(i64, String)> {
    let bad = || {
        Error::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let revision = value
        .get("rv")
        .and_then(Value::as_i64)
        .filter(|r| *r > 0)
        .ok_or_else(bad)?;
    let start = value.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    if start.contains("..") || start.starts_with('/') {
        return Err(bad());
    }
    Ok((revision, start.to_string()))
}

/// One running watch: replays, then forwards live events, with bookmarks
/// and a deadline, until the client goes away.
struct Watcher {
    opts: ListOptions,
    prefix: String,
    encode: WatchEncoder,
    tx: mpsc::Sender<Bytes>,
    cache: Arc<ResourceCache>,
    cacher: Arc<Cacher>,
    send_initial_end: Option<i64>,
    converter: Option<(Arc<dyn Converter>, String)>,
    /// Selectors are in the stored resource's terms (a view of its storage).
    stored_terms: bool,
}

/// How often bookmarks are sent to watchers that allow them.
const BOOKMARK_PERIOD: Duration = Duration::from_secs(60);

impl Watcher {
    async fn send(&self, bytes: Option<Bytes>) -> bool {
        match bytes {
            Some(b) => self.tx.send(b).await.is_ok(),
            None => true,
        }
    }

    /// Whether the event's previous and new states match the selectors.
    fn selects(&self, event: &WatchEvent) -> (bool, bool) {
        let before = event.prev.as_ref().is_some_and(|p| self.matches(p));
        (before, self.matches(&event.object))
    }

    /// Sends an event if it concerns this watcher; false when the client is gone.
    async fn forward(&self, event: &WatchEvent) -> bool {
        let Some((converter, version)) = &self.converter else {
            return self.forward_served(event, None).await;
        };
        // A view of another resource's storage selects in the stored terms.
        let matched = self.stored_terms.then(|| self.selects(event));
        if matched == Some((false, false)) {
            return true;
        }
        let mut objects = vec![event.object.clone()];
        objects.extend(event.prev.clone());
        let Ok(mut converted) =
            present_with(converter.as_ref(), &self.cache, objects, version).await
        else {
            return true;
        };
        let object = converted.remove(0);
        let prev = converted.pop();
        self.forward_served(&WatchEvent::new(event.kind, object, prev), matched)
            .await
    }

    /// Sends an event already in the watcher's version; `matched` tells
    /// whether its previous and new states match, when already known.
    async fn forward_served(&self, event: &WatchEvent, matched: Option<(bool, bool)>) -> bool {
        let (before, now) = matched.unwrap_or_else(|| self.selects(event));
        let object = &event.object;
        let item = match (event.kind, before, now) {
            (WatchEventType::Deleted, false, false) | (_, false, false) => return true,
            (WatchEventType::Deleted, _, _) => {
                WatchItem::Event(WatchEventType::Deleted, object, Some(event))
            }
            (WatchEventType::Added, _, true) => {
                WatchItem::Event(WatchEventType::Added, object, Some(event))
            }
            (_, false, true) => WatchItem::Event(WatchEventType::Added, object, None),
            (_, true, true) => WatchItem::Event(WatchEventType::Modified, object, Some(event)),
            (_, true, false) => {
                // Stopped matching: a DELETED with the old content at the new revision.
                let Some(prev) = &event.prev else { return true };
                let Some(restamped) = self.cache.ingest(&prev.key, &prev.bytes, event.revision())
                else {
                    return true;
                };
                return self
                    .send((self.encode)(WatchItem::Event(
                        WatchEventType::Deleted,
                        &restamped,
                        None,
                    )))
                    .await;
            }
        };
        self.send((self.encode)(item)).await
    }

    fn matches(&self, obj: &CachedObject) -> bool {
        obj.key.starts_with(&self.prefix) && store_matches(obj, &self.opts)
    }

    async fn run(
        self,
        replay: Vec<Arc<WatchEvent>>,
        live: Option<tokio::sync::broadcast::Receiver<Arc<WatchEvent>>>,
        history: Option<crate::storage::EventStream>,
    ) {
        let timeout = self.opts.timeout.unwrap_or_else(default_watch_timeout);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        for event in &replay {
            if !self.forward(event).await {
                return;
            }
        }
        if let Some(revision) = self.send_initial_end {
            if self.opts.allow_bookmarks && self.opts.send_initial_events == Some(true) {
                let item = WatchItem::Bookmark {
                    revision,
                    initial_end: true,
                };
                if !self.send((self.encode)(item)).await {
                    return;
                }
            }
        }
        let mut bookmarks = tokio::time::interval_at(
            tokio::time::Instant::now() + BOOKMARK_PERIOD,
            BOOKMARK_PERIOD,
        );
        let mut live = live;
        let mut history = history;
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = self.tx.closed() => return,
                _ = bookmarks.tick(), if self.opts.allow_bookmarks => {
                    let item = WatchItem::Bookmark { revision: self.cacher.progress(), initial_end: false };
                    if !self.send((self.encode)(item)).await { return; }
                }
                event = next_live(&mut live), if live.is_some() => match event {
                    Some(event) => if !self.forward(&event).await { return },
                    None => return,
                },
                batch = next_history(&mut history), if history.is_some() => match batch {
                    Some(Ok(events)) => {
                        for raw in &events {
                            if let Some(event) = history_event(&self.cache, raw) {
                                if !self.forward(&event).await { return; }
                            }
                        }
                    }
                    Some(Err(StorageError::Compacted { requested, compacted })) => {
                        let err = Error::new(Reason::Gone, format!("too old resource version: {} ({compacted})", requested - 1));
                        let _ = self.send((self.encode)(WatchItem::Error(&err))).await;
                        return;
                    }
                    _ => return,
                },
            }
        }
    }
}

async fn next_live(
    live: &mut Option<tokio::sync::broadcast::Receiver<Arc<WatchEvent>>>,
) -> Option<Arc<WatchEvent>> {
    match live.as_mut()?.recv().await {
        Ok(event) => Some(event),
        Err(_) => None,
    }
}

async fn next_history(
    history: &mut Option<crate::storage::EventStream>,
) -> Option<std::result::Result<Vec<crate::storage::Event>, StorageError>> {
    history.as_mut()?.next().await
}

/// kube's default watch timeout: a random time between 30 and 60 minutes.
fn default_watch_timeout() -> Duration {
    use rand::Rng;
    Duration::from_secs(rand::rng().random_range(1800..3600))
}

fn store_matches(obj: &CachedObject, opts: &ListOptions) -> bool {
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

    /// Etcd whose revision, once `lag` is set, the watch cache never
    /// reaches: a cache that lags.
    #[derive(Default)]
    struct Ahead(
        crate::storage::memory::MemoryStorage,
        std::sync::atomic::AtomicI64,
    );

    #[async_trait::async_trait]
    impl Storage for Ahead {
        async fn get(&self, key: &str) -> Result<Option<crate::storage::KeyValue>, StorageError> {
            self.0.get(key).await
        }
        async fn range(
            &self,
            start: &str,
            end: &str,
            limit: i64,
            revision: i64,
        ) -> Result<crate::storage::Page, StorageError> {
            self.0.range(start, end, limit, revision).await
        }
        async fn create(&self, key: &str, value: Bytes) -> Result<i64, StorageError> {
            self.0.create(key, value).await
        }
        async fn update(
            &self,
            key: &str,
            value: Bytes,
            expected: i64,
        ) -> Result<i64, StorageError> {
            self.0.update(key, value, expected).await
        }
        async fn delete(
            &self,
            key: &str,
            expected: Option<i64>,
        ) -> Result<(crate::storage::KeyValue, i64), StorageError> {
            self.0.delete(key, expected).await
        }
        async fn watch(
            &self,
            start: &str,
            end: &str,
            from: i64,
        ) -> Result<crate::storage::EventStream, StorageError> {
            self.0.watch(start, end, from).await
        }
        async fn current_revision(&self) -> Result<i64, StorageError> {
            let lag = self.1.load(std::sync::atomic::Ordering::Relaxed);
            Ok(self.0.current_revision().await? + lag)
        }
    }

    #[tokio::test]
    async fn consistent_reads_fall_back_to_etcd_when_the_cache_lags() {
        let ahead = Arc::new(Ahead::default());
        let storage: Arc<dyn Storage> = ahead.clone();
        let store = configmap_store(storage.clone()).await;
        ahead.1.store(1_000, std::sync::atomic::Ordering::Relaxed);
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
