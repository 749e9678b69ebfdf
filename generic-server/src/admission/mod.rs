//! Admission: plugins that may mutate, then validate, every write before it
//! is stored. Plugins run in a fixed order set when the server is built;
//! [`webhook::Webhooks`], kube's admission webhooks, then
//! [`quota::ResourceQuota`], which charges what is left, come last.

pub mod matching;
pub mod policy;
pub mod quota;
pub mod webhook;

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::request::UserInfo;
use crate::resource::Resource;
use crate::storage::cacher::{Cacher, ResourceCache};
use apimachinery::error::{Error, Reason, Result};

/// The kind of write being admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A create (POST, or apply creating).
    Create,
    /// An update (PUT or PATCH).
    Update,
    /// A delete.
    Delete,
}

impl Operation {
    /// kube's name of it in an AdmissionReview (`CREATE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// What admission plugins see of a write.
pub struct Attributes<'a> {
    /// The operation.
    pub operation: Operation,
    /// The resource written.
    pub resource: &'a Resource,
    /// The subresource, if any.
    pub subresource: &'a str,
    /// The namespace (empty for cluster-scoped objects).
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The stored object, on update and delete.
    pub old: Option<&'a Value>,
    /// The user writing.
    pub user: &'a UserInfo,
    /// Whether the write is a dry run (nothing may be persisted).
    pub dry_run: bool,
    /// The resource's other served versions, for rules with matchPolicy
    /// Equivalent (custom resources served in several versions).
    pub equivalents: Option<&'a Equivalents>,
    /// Warnings for the client, added by plugins.
    pub warnings: Mutex<Notes>,
}

/// The other versions a resource is served in, and the converter between
/// them: a rule naming one of them matches the write under matchPolicy
/// Equivalent, and its webhook or policy sees the object in that version.
#[derive(Clone)]
pub struct Equivalents {
    /// The other served versions, in the order they are tried.
    pub versions: Vec<String>,
    /// Converts objects between the versions.
    pub converter: Arc<dyn crate::strategy::Converter>,
}

impl Equivalents {
    /// `object` (of `resource`'s group) converted to `version`.
    pub async fn convert(
        &self,
        resource: &Resource,
        object: &Value,
        version: &str,
    ) -> Result<Value> {
        let api_version = apimachinery::group_version::api_version(&resource.group, version);
        self.converter
            .convert(vec![object.clone()], &api_version)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| Error::internal("conversion returned no object"))
    }
}

/// What plugins note about a write on the way for the client (its audit
/// annotations go to the request's audit record, [`crate::audit::annotate`]).
#[derive(Debug, Default)]
pub struct Notes {
    warnings: Vec<String>,
}

impl Attributes<'_> {
    fn notes(&self) -> std::sync::MutexGuard<'_, Notes> {
        self.warnings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a warning the client will see as a `Warning` header.
    pub fn warn(&self, warning: impl Into<String>) {
        self.notes().warnings.push(warning.into());
    }

    /// The warnings added so far, taken out.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut self.notes().warnings)
    }

    /// Adds an annotation to the write's audit event (kube's
    /// `AddAnnotation`): it travels with the response to the front door,
    /// whose audit log records it; the server's log names it too.
    pub fn annotate(&self, key: impl Into<String>, value: impl Into<String>) {
        let (key, value) = (key.into(), value.into());
        tracing::info!(
            target: "audit",
            resource = %self.resource.group_resource(),
            namespace = self.namespace,
            name = self.name,
            user = %self.user.name,
            %key,
            %value,
            "admission annotation"
        );
        crate::audit::annotate(key, value);
    }
}

/// One admission plugin.
#[async_trait::async_trait]
pub trait AdmissionPlugin: Send + Sync + 'static {
    /// May change the object (mutating admission).
    async fn admit(&self, _attrs: &Attributes<'_>, _obj: &mut Value) -> Result<()> {
        Ok(())
    }

    /// May reject the write (validating admission).
    async fn validate(&self, _attrs: &Attributes<'_>, _obj: Option<&Value>) -> Result<()> {
        Ok(())
    }
}

/// The admission chain of a server.
#[derive(Clone, Default)]
pub struct Admission {
    plugins: Vec<Arc<dyn AdmissionPlugin>>,
}

impl Admission {
    /// An admission chain running these plugins in order.
    pub fn new(plugins: Vec<Arc<dyn AdmissionPlugin>>) -> Self {
        Admission { plugins }
    }

    /// Runs every plugin's mutating step; a refusal carries the warnings
    /// given so far.
    pub async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<()> {
        for plugin in &self.plugins {
            plugin
                .admit(attrs, obj)
                .await
                .map_err(|e| e.with_warnings(attrs.take_warnings()))?;
        }
        Ok(())
    }

    /// Runs every plugin's validating step; a refusal carries the
    /// warnings given so far.
    pub async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        for plugin in &self.plugins {
            plugin
                .validate(attrs, obj)
                .await
                .map_err(|e| e.with_warnings(attrs.take_warnings()))?;
        }
        Ok(())
    }
}

/// The plugins administrators configure through the API, in kube's
/// order: ValidatingAdmissionPolicy, then the admission webhooks (whose
/// mutating half runs in the mutating stage). `kinds` are the built-in
/// kinds the server can read policy params of.
pub async fn dynamic(
    cacher: &Arc<Cacher>,
    etcd_root: &str,
    kinds: Vec<policy::ParamKind>,
) -> Result<[Arc<dyn AdmissionPlugin>; 2]> {
    Ok([
        Arc::new(policy::Policies::new(cacher.clone(), etcd_root, kinds).await?),
        Arc::new(webhook::Webhooks::new(cacher.clone(), etcd_root).await?),
    ])
}

/// Namespaces that may never be deleted.
const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// Where NamespaceLifecycle reads a namespace: the server's own watch
/// cache, or the front door (an aggregated server's).
#[async_trait::async_trait]
pub trait NamespaceSource: Send + Sync + 'static {
    /// The Namespace `name`, `None` when there is none.
    async fn lookup(&self, name: &str) -> Result<Option<Value>>;
}

#[async_trait::async_trait]
impl<S: NamespaceSource + ?Sized> NamespaceSource for Arc<S> {
    async fn lookup(&self, name: &str) -> Result<Option<Value>> {
        (**self).lookup(name).await
    }
}

#[async_trait::async_trait]
impl NamespaceSource for matching::Namespaces {
    async fn lookup(&self, name: &str) -> Result<Option<Value>> {
        self.get(name).await
    }
}

/// kube's NamespaceLifecycle: no objects in missing or terminating
/// namespaces, and the system namespaces cannot be deleted.
pub struct NamespaceLifecycle {
    namespaces: Box<dyn NamespaceSource>,
}

impl NamespaceLifecycle {
    /// Watches namespaces through the server's cache.
    pub async fn new(cacher: Arc<Cacher>, etcd_prefix: &str) -> Result<Self> {
        Ok(Self::reading(
            matching::Namespaces::new(cacher, etcd_prefix).await?,
        ))
    }

    /// Reads namespaces from `source`.
    pub fn reading(source: impl NamespaceSource) -> Self {
        NamespaceLifecycle {
            namespaces: Box::new(source),
        }
    }

    /// Refuses a create in a missing or terminating namespace, and the
    /// deletion of a system namespace.
    async fn check(&self, attrs: &Attributes<'_>) -> Result<()> {
        let is_namespace = attrs.resource.group.is_empty() && attrs.resource.plural == "namespaces";
        if is_namespace
            && attrs.operation == Operation::Delete
            && IMMORTAL_NAMESPACES.contains(&attrs.name)
        {
            return Err(forbidden(attrs, "this namespace may not be deleted"));
        }
        if !attrs.resource.namespaced
            || attrs.operation != Operation::Create
            || attrs.namespace.is_empty()
        {
            return Ok(());
        }
        match self.namespaces.lookup(attrs.namespace).await? {
            None => Err(Error::NotFound {
                resource: apimachinery::group_version::GroupResource::new("", "namespaces"),
                name: attrs.namespace.into(),
            }),
            Some(ns)
                if ns
                    .pointer("/metadata/deletionTimestamp")
                    .is_some_and(|t| !t.is_null()) =>
            {
                Err(forbidden(
                    attrs,
                    &format!(
                        "unable to create new content in namespace {} because it is being terminated",
                        attrs.namespace
                    ),
                ))
            }
            Some(_) => Ok(()),
        }
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for NamespaceLifecycle {
    /// Refuses creates in missing or terminating namespaces first, before
    /// any other plugin looks at the object, as kube's mutating step does.
    async fn admit(&self, attrs: &Attributes<'_>, _obj: &mut Value) -> Result<()> {
        self.check(attrs).await
    }

    /// Refuses deleting a system namespace (deletes have no mutating step).
    async fn validate(&self, attrs: &Attributes<'_>, _obj: Option<&Value>) -> Result<()> {
        if attrs.operation == Operation::Delete {
            self.check(attrs).await
        } else {
            Ok(())
        }
    }
}

/// The object `name` (`<namespace>/<name>` for a namespaced one) from
/// `cache`; one written a moment ago is waited for (the cache catches up
/// with etcd first).
pub async fn cached(
    cacher: &Cacher,
    cache: &ResourceCache,
    name: &str,
) -> Result<Option<Arc<crate::storage::cacher::CachedObject>>> {
    let key = format!("{}{name}", cache.prefix());
    if let Some(found) = cache.get(&key) {
        return Ok(Some(found));
    }
    cacher.wait_fresh().await?;
    Ok(cache.get(&key))
}

/// 403 Forbidden naming the object, as kube's admission errors do
/// (`pods "x" is forbidden: <why>`, with the object in the details).
pub fn forbidden(attrs: &Attributes<'_>, why: &str) -> Error {
    Error::Refused {
        resource: attrs.resource.group_resource(),
        name: attrs.name.into(),
        reason: Reason::Forbidden,
        why: why.into(),
        causes: Vec::new(),
    }
}

/// What the plugins' unit tests share: a resource and a write to it.
#[cfg(test)]
pub(crate) mod test_support {
    use super::{Attributes, Operation};
    use crate::request::UserInfo;
    use crate::resource::Resource;

    struct Plain;
    impl crate::strategy::Strategy for Plain {}

    /// A built-in resource with no rules of its own.
    pub(crate) fn resource<K>() -> Resource
    where
        K: k8s_openapi::Resource
            + schemars::JsonSchema
            + serde::Serialize
            + serde::de::DeserializeOwned
            + 'static,
    {
        Resource::builtin::<K>(Plain)
    }

    /// ConfigMaps.
    pub(crate) fn configmaps() -> Resource {
        resource::<k8s_openapi::api::core::v1::ConfigMap>()
    }

    /// `operation` on the object `name` of `resource` in namespace `ns`, by
    /// `user`: no subresource, no old object, not a dry run.
    pub(crate) fn attributes<'a>(
        resource: &'a Resource,
        user: &'a UserInfo,
        operation: Operation,
        name: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            operation,
            resource,
            subresource: "",
            namespace: "ns",
            name,
            old: None,
            user,
            dry_run: false,
            equivalents: None,
            warnings: Default::default(),
        }
    }
}
