//! What a server serves: resources, their names, scope, verbs and subresources.
//!
//! A [`Resource`] is a declaration: names and scope (usually taken from the
//! k8s-openapi type), plus the [`Strategy`] holding the resource's own rules.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use schemars::JsonSchema;

use apimachinery::group_version::{GroupResource, GroupVersionKind, api_version};
use apimachinery::keys::key_prefix;
use apimachinery::openapi::Components;

use crate::codec::{Codec, TypedCodec};
use crate::strategy::{Converter, Strategy};

/// The verbs a resource supports, in discovery order (OpenAPI's list).
pub const ALL_VERBS: &[&str] = &apimachinery::openapi::ALL_VERBS;

/// A subresource such as `status` or `scale`.
#[derive(Debug, Clone)]
pub struct Subresource {
    /// Its name, e.g. `status`.
    pub name: String,
    /// The kind it accepts and returns; `None` means the parent kind.
    pub kind: Option<GroupVersionKind>,
    /// Its verbs.
    pub verbs: Vec<String>,
    /// Whether it connects to something beyond the store (kube's
    /// `rest.Connecter`: a pod's `log`, `exec`, `proxy`), answered by the
    /// strategy's [`crate::strategy::Strategy::connect`].
    pub connect: bool,
    /// Adds the schema of `kind` to a collection and names it, when `kind`
    /// is a stored kind other than the parent's (`policy/v1` Eviction).
    pub schema: Option<fn(&mut Components) -> String>,
    /// The query parameters of a connect subresource's options kind
    /// (`pods/exec`: `command`, `container`, …), for its OpenAPI.
    pub options: &'static [&'static str],
}

/// One served resource: its names, scope and strategy.
#[derive(Clone)]
pub struct Resource {
    /// The API group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind, e.g. `ConfigMap`.
    pub kind: String,
    /// The list kind, e.g. `ConfigMapList`.
    pub list_kind: String,
    /// The plural name used in paths.
    pub plural: String,
    /// The singular name.
    pub singular: String,
    /// Short names for kubectl (`cm`).
    pub short_names: Vec<String>,
    /// Categories such as `all`.
    pub categories: Vec<String>,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Supported verbs.
    pub verbs: Vec<String>,
    /// Subresources.
    pub subresources: Vec<Subresource>,
    /// The resource's own rules.
    pub strategy: Arc<dyn Strategy>,
    /// Checks object structure and drops unknown fields.
    pub codec: Arc<dyn Codec>,
    /// Whether strategic merge patches are accepted (built-ins only).
    pub strategic_merge_patch: bool,
    /// Adds the kind's OpenAPI schema to a collection and names it.
    pub schema: Option<fn(&mut Components) -> String>,
    /// Where the `scale` subresource reads and writes, if there is one.
    pub scale: Option<ScaleSpec>,
    /// The group, version and kind its objects are stored as (kube's
    /// storage version), if it stores any.
    pub storage: Option<GroupVersionKind>,
    /// Converts between the versions of one kind that share its storage:
    /// set on each served version ([`Resource::converted_by`]).
    pub converter: Option<Arc<dyn Converter>>,
    /// The warning every answer for a deprecated API carries (kube's
    /// `v1 ComponentStatus is deprecated in v1.19+`), if it is deprecated.
    pub deprecation: Option<String>,
}

/// Where a resource keeps what its `scale` subresource shows (JSON pointers).
#[derive(Debug, Clone)]
pub struct ScaleSpec {
    /// The desired replicas, e.g. `/spec/replicas`.
    pub spec_replicas: String,
    /// The observed replicas, e.g. `/status/replicas`.
    pub status_replicas: String,
    /// Where the label selector is.
    pub selector: ScaleSelector,
}

/// How the scale subresource finds the selector it reports.
#[derive(Debug, Clone)]
pub enum ScaleSelector {
    /// A `metav1.LabelSelector` object at this pointer (built-ins: `/spec/selector`).
    LabelSelector(String),
    /// A selector string at this pointer (custom resources' `labelSelectorPath`).
    String(String),
    /// A `map[string]string` selector (ReplicationController's `/spec/selector`).
    Map(String),
    /// No selector.
    None,
}

impl ScaleSpec {
    /// The usual built-in layout: `spec.replicas`, `status.replicas`, `spec.selector`.
    pub fn standard() -> Self {
        ScaleSpec {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: ScaleSelector::LabelSelector("/spec/selector".into()),
        }
    }
}

fn add_schema<K: JsonSchema>(components: &mut Components) -> String {
    components.add::<K>()
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Resource({}/{}, {})",
            self.group, self.version, self.plural
        )
    }
}

impl Resource {
    /// A resource whose names and scope come from a k8s-openapi type.
    pub fn builtin<K>(strategy: impl Strategy) -> Self
    where
        K: k8s_openapi::Resource + JsonSchema + Serialize + DeserializeOwned + 'static,
    {
        let namespaced = std::any::TypeId::of::<K::Scope>()
            == std::any::TypeId::of::<k8s_openapi::NamespaceResourceScope>();
        Resource {
            group: K::GROUP.into(),
            version: K::VERSION.into(),
            kind: K::KIND.into(),
            list_kind: format!("{}List", K::KIND),
            plural: K::URL_PATH_SEGMENT.into(),
            singular: K::KIND.to_lowercase(),
            short_names: Vec::new(),
            categories: Vec::new(),
            namespaced,
            verbs: ALL_VERBS.iter().map(|v| v.to_string()).collect(),
            subresources: Vec::new(),
            strategy: Arc::new(strategy),
            codec: Arc::new(TypedCodec::<K>::default()),
            strategic_merge_patch: true,
            schema: Some(add_schema::<K>),
            scale: None,
            storage: Some(GroupVersionKind::new(K::GROUP, K::VERSION, K::KIND)),
            converter: None,
            deprecation: None,
        }
    }

    /// Serves this version of a kind whose versions share one storage:
    /// objects are stored in `converter`'s storage version and converted
    /// on the way in and out (kube's conversion between a group's versions).
    /// Give every served version of the kind the same converter.
    pub fn converted_by(mut self, converter: Arc<dyn Converter>) -> Self {
        let stored = converter.storage_version();
        let version = stored.rsplit('/').next().unwrap_or(&stored);
        self.storage = Some(GroupVersionKind::new(&self.group, version, &self.kind));
        self.converter = Some(converter);
        self
    }

    /// Declares the group, version and kind its objects are stored as,
    /// when that is another resource's (events.k8s.io Events are core v1
    /// Events in storage).
    pub fn stored_as(mut self, storage: GroupVersionKind) -> Self {
        self.storage = Some(storage);
        self
    }

    /// kube's `storageVersionHash` for discovery: the first 8 bytes of the
    /// SHA-256 of `<group>/<version>/<kind>` of the storage version, in
    /// base64. `None` for what stores nothing (reviews, computed metrics).
    pub fn storage_version_hash(&self) -> Option<String> {
        use base64::Engine as _;
        let storage = self.storage.as_ref().filter(|_| self.supports("watch"))?;
        let input = format!("{}/{}/{}", storage.group, storage.version, storage.kind);
        let digest = ring::digest::digest(&ring::digest::SHA256, input.as_bytes());
        Some(base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8]))
    }

    /// Adds a `status` subresource: the main resource then ignores status
    /// changes, and `/status` changes only the status.
    pub fn status(self) -> Self {
        self.subresource("status", &["get", "patch", "update"])
    }

    /// Adds a `scale` subresource answering `autoscaling/v1` Scale.
    pub fn scale(mut self, scale: ScaleSpec) -> Self {
        self = self.subresource_of_kind::<k8s_openapi::api::autoscaling::v1::Scale>(
            "scale",
            &["get", "patch", "update"],
        );
        self.scale = Some(scale);
        self
    }

    /// Adds kubectl short names.
    pub fn short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Marks the API deprecated: every answer for it carries `warning`.
    pub fn deprecated(mut self, warning: &str) -> Self {
        self.deprecation = Some(warning.to_string());
        self
    }

    /// Adds categories.
    pub fn categories(mut self, names: &[&str]) -> Self {
        self.categories = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Replaces the verbs.
    pub fn verbs(mut self, verbs: &[&str]) -> Self {
        self.verbs = verbs.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Adds a subresource that accepts and returns another kind, `K` (a
    /// service account's `token`, a TokenRequest; a `scale`, a Scale).
    pub fn subresource_of_kind<K: k8s_openapi::Resource + JsonSchema>(
        mut self,
        name: &str,
        verbs: &[&str],
    ) -> Self {
        self.subresources.push(Subresource {
            name: name.into(),
            kind: Some(GroupVersionKind::new(K::GROUP, K::VERSION, K::KIND)),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            connect: false,
            schema: Some(add_schema::<K>),
            options: &[],
        });
        self
    }

    /// Adds a connect subresource (`pods/exec`): its options kind in the
    /// resource's group/version, its verbs, and the options' query parameters.
    pub fn connect_subresource(
        mut self,
        name: &str,
        kind: &str,
        verbs: &[&str],
        options: &'static [&'static str],
    ) -> Self {
        let kind = GroupVersionKind::new(&self.group, &self.version, kind);
        self.subresources.push(Subresource {
            name: name.into(),
            kind: Some(kind),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            connect: true,
            schema: None,
            options,
        });
        self
    }

    /// Adds a subresource that reads and writes the parent kind (e.g. `status`).
    pub fn subresource(mut self, name: &str, verbs: &[&str]) -> Self {
        self.subresources.push(Subresource {
            name: name.into(),
            kind: None,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            connect: false,
            schema: None,
            options: &[],
        });
        self
    }

    /// The group and resource.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }

    /// The kind with group and version.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
        }
    }

    /// The `apiVersion` of its objects.
    pub fn api_version(&self) -> String {
        api_version(&self.group, &self.version)
    }

    /// Whether it supports a verb.
    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// Finds a subresource by name.
    pub fn find_subresource(&self, name: &str) -> Option<&Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// A Status for a completed delete of `obj`, as kube returns when it
    /// does not return the object.
    pub fn deleted_status(&self, obj: &serde_json::Value) -> apimachinery::error::Status {
        let meta = |field: &str| {
            obj["metadata"][field]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        apimachinery::error::Status::success(apimachinery::error::StatusDetails {
            name: Some(meta("name")),
            group: (!self.group.is_empty()).then(|| self.group.clone()),
            kind: Some(self.plural.clone()),
            uid: Some(meta("uid")).filter(|u| !u.is_empty()),
            ..Default::default()
        })
    }

    /// The etcd key prefix of its objects, ending in `/`:
    /// `/registry/<resource>/` for core, `/registry/<group>/<resource>/` otherwise.
    pub fn key_prefix(&self, root: &str) -> String {
        match self.strategy.shared_storage() {
            Some(shared) => key_prefix(root, shared.group, shared.plural),
            None => key_prefix(root, &self.group, &self.plural),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    struct Plain;
    impl Strategy for Plain {}

    #[test]
    fn storage_version_hashes_are_kubes() {
        use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
        let hash = |r: Resource| r.storage_version_hash().unwrap();
        // The values kube-apiserver publishes.
        assert_eq!(hash(Resource::builtin::<Pod>(Plain)), "xPOwRZ+Yhw8=");
        assert_eq!(hash(Resource::builtin::<ConfigMap>(Plain)), "qFsyl6wFWjQ=");
        assert_eq!(hash(Resource::builtin::<Deployment>(Plain)), "8aSe+NMegvE=");
        let review = Resource::builtin::<ConfigMap>(Plain).verbs(&["create"]);
        assert_eq!(review.storage_version_hash(), None);
    }

    #[test]
    fn builtin_takes_names_from_k8s_openapi() {
        let cm = Resource::builtin::<ConfigMap>(Plain);
        assert_eq!(
            (cm.kind.as_str(), cm.plural.as_str(), cm.list_kind.as_str()),
            ("ConfigMap", "configmaps", "ConfigMapList")
        );
        assert!(cm.namespaced);
        assert!(!Resource::builtin::<Namespace>(Plain).namespaced);
        assert_eq!(cm.key_prefix("/registry"), "/registry/configmaps/");
    }

    #[test]
    fn group_resource_display() {
        assert_eq!(
            GroupResource::new("apps", "deployments").to_string(),
            "deployments.apps"
        );
        assert_eq!(GroupResource::new("", "pods").to_string(), "pods");
    }
}
