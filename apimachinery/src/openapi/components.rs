//! `components.schemas`: k8s-openapi's schemars output rewritten into kube's OpenAPI v3 form.
//!
//! schemars (with `SchemaSettings::openapi3()`, its transforms and meta-schema
//! turned off) hands back each type's schema with `{"$ref":
//! "#/components/schemas/<name>"}` for every struct it uses, plus a map of those
//! definitions. kube-apiserver writes a ref that carries a description as
//! `{"allOf":[{"$ref": …}], "description": …}`, puts
//! `x-kubernetes-group-version-kind` on top-level kinds, and annotates lists and
//! maps; [`Components`] does the same to every definition it takes in.

use std::collections::{BTreeSet, VecDeque};

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use super::extensions;
use super::list_meta::{KINDS, KindMeta, REQUIRED_OVERRIDES};

/// Prefix of every schema reference (`#/components/schemas/<name>`).
pub const SCHEMA_PREFIX: &str = "#/components/schemas/";

/// How many `$ref` hops [`Components::resolve`] follows before giving up (a guard against cycles).
const MAX_REF_HOPS: usize = 32;

/// Upstream description of every kind's `apiVersion` property.
const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";

/// Upstream description of every kind's `kind` property.
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// Upstream description of a list's `metadata` property.
const LIST_METADATA_DESCRIPTION: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

use crate::group_version::GroupVersionKind;

/// Every group-version kube-apiserver 1.33's scheme registers, served or
/// not: kube adds `DeleteOptions` and `WatchEvent` to each, and its OpenAPI
/// names them all as those schemas' `x-kubernetes-group-version-kind`.
const SCHEME_GROUP_VERSIONS: &[&str] = &[
    "v1",
    "admission.k8s.io/v1",
    "admission.k8s.io/v1beta1",
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1alpha1",
    "admissionregistration.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1",
    "apiextensions.k8s.io/v1beta1",
    "apiregistration.k8s.io/v1",
    "apiregistration.k8s.io/v1beta1",
    "apps/v1",
    "apps/v1beta1",
    "apps/v1beta2",
    "authentication.k8s.io/v1",
    "authentication.k8s.io/v1alpha1",
    "authentication.k8s.io/v1beta1",
    "authorization.k8s.io/v1",
    "authorization.k8s.io/v1beta1",
    "autoscaling/v1",
    "autoscaling/v2",
    "autoscaling/v2beta1",
    "autoscaling/v2beta2",
    "batch/v1",
    "batch/v1beta1",
    "certificates.k8s.io/v1",
    "certificates.k8s.io/v1alpha1",
    "certificates.k8s.io/v1beta1",
    "coordination.k8s.io/v1",
    "coordination.k8s.io/v1alpha2",
    "coordination.k8s.io/v1beta1",
    "discovery.k8s.io/v1",
    "discovery.k8s.io/v1beta1",
    "events.k8s.io/v1",
    "events.k8s.io/v1beta1",
    "extensions/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1",
    "flowcontrol.apiserver.k8s.io/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1beta2",
    "flowcontrol.apiserver.k8s.io/v1beta3",
    "imagepolicy.k8s.io/v1alpha1",
    "internal.apiserver.k8s.io/v1alpha1",
    "networking.k8s.io/v1",
    "networking.k8s.io/v1alpha1",
    "networking.k8s.io/v1beta1",
    "node.k8s.io/v1",
    "node.k8s.io/v1alpha1",
    "node.k8s.io/v1beta1",
    "policy/v1",
    "policy/v1beta1",
    "rbac.authorization.k8s.io/v1",
    "rbac.authorization.k8s.io/v1alpha1",
    "rbac.authorization.k8s.io/v1beta1",
    "resource.k8s.io/v1alpha3",
    "resource.k8s.io/v1beta1",
    "resource.k8s.io/v1beta2",
    "scheduling.k8s.io/v1",
    "scheduling.k8s.io/v1alpha1",
    "scheduling.k8s.io/v1beta1",
    "storage.k8s.io/v1",
    "storage.k8s.io/v1alpha1",
    "storage.k8s.io/v1beta1",
    "storagemigration.k8s.io/v1alpha1",
];

/// The schemas of an OpenAPI v3 `components.schemas`, keyed by name (`io.k8s.api.core.v1.ConfigMap`).
#[derive(Debug, Clone, PartialEq)]
pub struct Components {
    schemas: Map<String, Value>,
}

impl Default for Components {
    fn default() -> Self {
        Self::new()
    }
}

impl Components {
    /// A collector holding the schemas every group-version document refers to
    /// (`Status`, `DeleteOptions`, `WatchEvent`, `Patch`, `APIResourceList`).
    pub fn new() -> Self {
        let mut components = Self {
            schemas: Map::new(),
        };
        components.add::<meta::Status>();
        components.add::<meta::Patch>();
        components.add::<meta::APIResourceList>();
        let delete_options = components.add::<meta::DeleteOptions>();
        let watch_event = components.add::<meta::WatchEvent<()>>();
        for (name, kind) in [
            (delete_options, "DeleteOptions"),
            (watch_event, "WatchEvent"),
        ] {
            let kinds: Vec<Value> = SCHEME_GROUP_VERSIONS
                .iter()
                .map(|gv| {
                    let (group, version) = gv.rsplit_once('/').unwrap_or(("", gv));
                    GroupVersionKind::new(group, version, kind).to_value()
                })
                .collect();
            if let Some(schema) = components
                .schemas
                .get_mut(&name)
                .and_then(Value::as_object_mut)
            {
                schema.insert(
                    "x-kubernetes-group-version-kind".into(),
                    Value::Array(kinds),
                );
            }
        }
        components
    }

    /// Adds `K`'s schema and every schema it references; returns its name.
    ///
    /// For a listable built-in kind the `<Kind>List` schema is added as well.
    pub fn add<K: JsonSchema>(&mut self) -> String {
        let name = K::schema_name().into_owned();
        if self.schemas.contains_key(&name) {
            self.add_builtin_list(&name);
            return name;
        }
        let mut generator = generator();
        let root = generator.subschema_for::<K>().to_value();
        let mut definitions = generator.take_definitions(false);
        if root.get("$ref").is_none() {
            definitions.insert(name.clone(), root);
        }
        for (definition, schema) in definitions {
            if !self.schemas.contains_key(&definition) {
                self.insert_generated(definition, schema);
            }
        }
        self.add_builtin_list(&name);
        name
    }

    /// Inserts (or replaces) a schema already in kube's form, such as a CRD version's schema.
    pub fn insert(&mut self, name: impl Into<String>, schema: Value) {
        self.schemas.insert(name.into(), schema);
    }

    /// Adds the `<item>List` schema (apiVersion, kind, items, ListMeta metadata) for the item schema `item`; returns its name.
    pub fn add_list(&mut self, item: &str, list: &GroupVersionKind) -> String {
        let list_meta = self.add::<meta::ListMeta>();
        let name = format!("{item}List");
        let item_kind = list.kind.strip_suffix("List").unwrap_or(&list.kind);
        let schema = json!({
            "description": format!("{} is a list of {item_kind} objects.", list.kind),
            "properties": {
                "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
                "items": {
                    "description": format!("Items is the list of {item_kind} objects."),
                    "items": {"$ref": format!("{SCHEMA_PREFIX}{item}")},
                    "type": "array",
                },
                "kind": {"description": KIND_DESCRIPTION, "type": "string"},
                "metadata": {
                    "allOf": [{"$ref": format!("{SCHEMA_PREFIX}{list_meta}")}],
                    "default": {},
                    "description": LIST_METADATA_DESCRIPTION,
                },
            },
            "required": ["items"],
            "type": "object",
            "x-kubernetes-group-version-kind": [list.to_value()],
        });
        self.schemas.insert(name.clone(), schema);
        name
    }

    /// The schema called `name`, if present.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.schemas.get(name)
    }

    /// Whether a schema called `name` is present.
    pub fn contains(&self, name: &str) -> bool {
        self.schemas.contains_key(name)
    }

    /// All schemas, keyed by name.
    pub fn schemas(&self) -> &Map<String, Value> {
        &self.schemas
    }

    /// Follows `$ref` and single-ref `allOf` wrappers to the schema they point at.
    ///
    /// Returns `schema` itself when it is not a reference or its target is
    /// unknown. The wrapper's own keys (description, `x-kubernetes-patch-*`,
    /// list type) stay on the wrapper: read them before resolving.
    pub fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        let mut current = schema;
        for _ in 0..MAX_REF_HOPS {
            match self.target(current) {
                Some(next) => current = next,
                None => break,
            }
        }
        current
    }

    /// The schema a `$ref` (or a lone `allOf: [{"$ref"}]`) points at.
    fn target(&self, schema: &Value) -> Option<&Value> {
        let reference = reference_of(schema)?;
        self.schemas.get(reference.strip_prefix(SCHEMA_PREFIX)?)
    }

    /// The schemas named in `roots` and every schema they reference, sorted by name.
    pub(crate) fn reachable<'a>(
        &self,
        roots: impl IntoIterator<Item = &'a str>,
    ) -> Map<String, Value> {
        let mut seen = BTreeSet::new();
        let mut queue: VecDeque<String> = roots.into_iter().map(str::to_owned).collect();
        while let Some(name) = queue.pop_front() {
            let Some(schema) = self.schemas.get(&name) else {
                continue;
            };
            if seen.insert(name) {
                collect_refs(schema, &mut |target| queue.push_back(target.to_owned()));
            }
        }
        seen.into_iter()
            .filter_map(|name| {
                self.schemas
                    .get(&name)
                    .map(|schema| (name.clone(), schema.clone()))
            })
            .collect()
    }

    /// Rewrites one schemars definition into kube's form and stores it.
    fn insert_generated(&mut self, name: String, mut schema: Value) {
        drop_null(&mut schema, 0);
        wrap_refs(&mut schema);
        if let Some(kind) = kind_meta(&name) {
            mark_kind(&mut schema, kind);
        }
        fix_required(&name, &mut schema);
        extensions::annotate(&name, &mut schema);
        self.schemas.insert(name, schema);
    }

    /// Adds `<name>List` when `name` is a listable built-in kind.
    fn add_builtin_list(&mut self, name: &str) {
        let Some(kind) = kind_meta(name) else { return };
        let Some(list_kind) = kind.list_kind else {
            return;
        };
        if !self.schemas.contains_key(&format!("{name}List")) {
            self.add_list(
                name,
                &GroupVersionKind::new(kind.group, kind.version, list_kind),
            );
        }
    }
}

/// Drops the `null` schemars adds to an `Option`'s type (`["string",
/// "null"]`, or `anyOf` a `$ref` and `{"type": "null"}`): kube's OpenAPI
/// says an optional field by leaving it out of `required`, and kubectl
/// explain reads `type` as one string.
fn drop_null(schema: &mut Value, depth: usize) {
    if depth > 64 {
        return;
    }
    let Some(object) = schema.as_object_mut() else {
        if let Value::Array(items) = schema {
            items.iter_mut().for_each(|item| drop_null(item, depth + 1));
        }
        return;
    };
    if let Some(Value::Array(types)) = object.get("type") {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if kept.len() == 1 {
            object.insert("type".into(), kept[0].clone());
        }
    }
    let is_null = |s: &Value| s.get("type").is_some_and(|t| t == "null");
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(options)) = object.get(key) else {
            continue;
        };
        if options.len() == 2 && options.iter().any(is_null) {
            let kept = options.iter().find(|s| !is_null(s)).cloned();
            object.remove(key);
            if let Some(Value::Object(kept)) = kept {
                object.extend(kept);
            }
        }
    }
    for value in object.values_mut() {
        drop_null(value, depth + 1);
    }
}

/// Rewrites the schemas kube publishes without a plain type into its form:
/// IntOrString as `format: int-or-string` with `oneOf` integer or string,
/// Quantity as `oneOf` string or number, and apiextensions' JSON (any
/// value: a CRD's `default` or `example`) with no type at all. Inside, the
/// first two stay `x-kubernetes-int-or-string` (the structural form CEL,
/// apply and validation read, as for custom resources); kubectl's
/// validation reads the published form as kube's.
pub(crate) fn published_form(name: &str, schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let one_of = match name {
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => {
            object.insert("format".into(), "int-or-string".into());
            json!([{"type": "integer"}, {"type": "string"}])
        }
        "io.k8s.apimachinery.pkg.api.resource.Quantity" => {
            json!([{"type": "string"}, {"type": "number"}])
        }
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON" => {
            object.remove("type");
            return;
        }
        _ => return,
    };
    object.remove("x-kubernetes-int-or-string");
    object.insert("oneOf".into(), one_of);
}

/// A schemars generator writing refs as `#/components/schemas/<name>`, with no transforms.
/// The description of `K`'s property `property` (kube's `SwaggerDoc()`
/// text, which its printers give as column descriptions), empty if none.
pub fn property_description<K: JsonSchema>(property: &str) -> String {
    K::json_schema(&mut generator())
        .to_value()
        .pointer(&format!("/properties/{property}/description"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn generator() -> SchemaGenerator {
    SchemaSettings::openapi3()
        .with(|settings| {
            settings.meta_schema = None;
            settings.transforms = Vec::new();
        })
        .into_generator()
}

/// The generated table row of a built-in kind's schema.
pub(crate) fn kind_meta(name: &str) -> Option<&'static KindMeta> {
    KINDS
        .binary_search_by(|kind| kind.schema.cmp(name))
        .ok()
        .map(|index| &KINDS[index])
}

/// The ref string of a `$ref` schema or of an `allOf` holding a single `$ref`.
pub(crate) fn reference_of(schema: &Value) -> Option<&str> {
    if let Some(reference) = schema.get("$ref") {
        return reference.as_str();
    }
    match schema.get("allOf")?.as_array()?.as_slice() {
        [only] if schema.get("properties").is_none() => only.get("$ref")?.as_str(),
        _ => None,
    }
}

/// Adds the GVK extension and drops k8s-openapi's `metadata` from `required` (kube never requires it).
fn mark_kind(schema: &mut Value, kind: &KindMeta) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let gvk = GroupVersionKind::new(kind.group, kind.version, kind.kind);
    object.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([gvk.to_value()]),
    );
    let now_empty = object
        .get_mut("required")
        .and_then(Value::as_array_mut)
        .map(|required| {
            required.retain(|field| field != "metadata");
            required.is_empty()
        })
        .unwrap_or(false);
    if now_empty {
        object.remove("required");
    }
}

/// Replaces k8s-openapi's `required` list with kube's where the generated table says they differ.
fn fix_required(name: &str, schema: &mut Value) {
    let Ok(index) = REQUIRED_OVERRIDES.binary_search_by(|o| o.schema.cmp(name)) else {
        return;
    };
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let required = REQUIRED_OVERRIDES[index].required;
    if required.is_empty() {
        object.remove("required");
    } else {
        object.insert("required".into(), required.iter().copied().collect());
    }
}

/// Wraps every `$ref` that has sibling keys as `{"allOf": [{"$ref"}], siblings…}`, recursively.
fn wrap_refs(schema: &mut Value) {
    for_each_subschema_mut(schema, &mut wrap_refs);
    let Some(object) = schema.as_object_mut().filter(|object| object.len() > 1) else {
        return;
    };
    if let Some(reference) = object.shift_remove("$ref") {
        let mut wrapped = Map::new();
        wrapped.insert("allOf".into(), json!([{"$ref": reference}]));
        wrapped.extend(std::mem::take(object));
        *object = wrapped;
    }
}

/// How many `$ref`s deep [`inline_refs`] follows; past it (a recursive type)
/// a reference becomes a schema for any value.
const MAX_INLINE_DEPTH: usize = 16;

/// `schema` with every `#/components/schemas/…` reference (and single-ref
/// `allOf` wrapper) replaced by the schema it names from `schemas`, the
/// wrapper's own keys kept beside the target's: the self-contained
/// structural schema CEL type checking reads. An unknown name inlines as an
/// empty schema; past [`MAX_INLINE_DEPTH`] references, as
/// `x-kubernetes-int-or-string` (any value, CEL's `dyn`).
pub fn inline_refs(schema: &Value, schemas: &Map<String, Value>) -> Value {
    inline_at(schema, schemas, 0)
}

/// [`inline_refs`] at `depth` references below the root.
fn inline_at(schema: &Value, schemas: &Map<String, Value>, depth: usize) -> Value {
    if let Some(reference) = reference_of(schema) {
        if depth >= MAX_INLINE_DEPTH {
            return json!({"x-kubernetes-int-or-string": true});
        }
        let target = reference
            .strip_prefix(SCHEMA_PREFIX)
            .and_then(|name| schemas.get(name));
        let mut inlined = target.map_or_else(|| json!({}), |t| inline_at(t, schemas, depth + 1));
        if let (Some(into), Some(own)) = (inlined.as_object_mut(), schema.as_object()) {
            for (key, value) in own {
                if key != "$ref" && key != "allOf" {
                    into.insert(key.clone(), value.clone());
                }
            }
        }
        return inlined;
    }
    let mut inlined = schema.clone();
    for_each_subschema_mut(&mut inlined, &mut |sub| {
        *sub = inline_at(sub, schemas, depth)
    });
    inlined
}

/// Calls `f` on each direct subschema (properties, additionalProperties, items, allOf/anyOf/oneOf, not).
pub(crate) fn for_each_subschema_mut(schema: &mut Value, f: &mut dyn FnMut(&mut Value)) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) {
        properties.values_mut().for_each(&mut *f);
    }
    for key in ["additionalProperties", "items", "not"] {
        if let Some(sub) = object.get_mut(key).filter(|sub| sub.is_object()) {
            f(sub);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(list) = object.get_mut(key).and_then(Value::as_array_mut) {
            list.iter_mut().for_each(&mut *f);
        }
    }
}

/// Calls `f` with the component name of every `#/components/schemas/…` ref inside `value`.
pub(crate) fn collect_refs(value: &Value, f: &mut dyn FnMut(&str)) {
    match value {
        Value::Object(object) => {
            for (key, child) in object {
                match (key.as_str(), child.as_str()) {
                    ("$ref", Some(reference)) => {
                        if let Some(name) = reference.strip_prefix(SCHEMA_PREFIX) {
                            f(name);
                        }
                    }
                    _ => collect_refs(child, f),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_refs(item, f)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_option_is_an_optional_field_not_a_null_type() {
        let mut schema = serde_json::json!({"properties": {
            "reference": {"type": ["string", "null"]},
            "spec": {"anyOf": [{"$ref": "#/components/schemas/Spec"}, {"type": "null"}]},
            "both": {"type": ["string", "integer"]},
        }});
        drop_null(&mut schema, 0);
        assert_eq!(
            schema["properties"]["reference"],
            serde_json::json!({"type": "string"})
        );
        assert_eq!(
            schema["properties"]["spec"],
            serde_json::json!({"$ref": "#/components/schemas/Spec"})
        );
        assert_eq!(
            schema["properties"]["both"]["type"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }
    use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap, core::v1::Pod};

    fn components_with<K: JsonSchema>() -> (Components, String) {
        let mut components = Components::new();
        let name = components.add::<K>();
        (components, name)
    }

    fn property<'a>(components: &'a Components, schema: &str, prop: &str) -> &'a Value {
        &components.get(schema).expect("schema present")["properties"][prop]
    }

    #[test]
    fn config_map_is_a_kind_with_wrapped_metadata_ref() {
        let (components, name) = components_with::<ConfigMap>();
        assert_eq!(name, "io.k8s.api.core.v1.ConfigMap");
        let schema = components.get(&name).expect("ConfigMap");
        assert_eq!(
            schema["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "ConfigMap", "version": "v1"}])
        );
        assert!(
            schema.get("required").is_none(),
            "metadata is not required upstream"
        );
        assert_eq!(
            schema["properties"]["metadata"]["allOf"],
            json!([{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}])
        );
        assert!(schema["properties"]["metadata"]["description"].is_string());
        assert!(components.contains("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(components.get("$schema").is_none() && components.get("definitions").is_none());
    }

    #[test]
    fn listable_kind_gets_a_list_schema() {
        let (components, _) = components_with::<ConfigMap>();
        let list = components
            .get("io.k8s.api.core.v1.ConfigMapList")
            .expect("list schema");
        assert_eq!(
            list["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "ConfigMapList", "version": "v1"}])
        );
        assert_eq!(
            list["properties"]["items"]["items"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.ConfigMap"
        );
        assert!(components.contains("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"));
    }

    #[test]
    fn deployment_refs_reach_pod_spec_with_list_metadata() {
        let (components, _) = components_with::<Deployment>();
        let template = property(&components, "io.k8s.api.apps.v1.DeploymentSpec", "template");
        assert_eq!(
            template["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec"
        );
        let containers = property(&components, "io.k8s.api.core.v1.PodSpec", "containers");
        assert_eq!(
            containers["items"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.Container"
        );
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        let strategy = property(&components, "io.k8s.api.apps.v1.DeploymentSpec", "strategy");
        assert_eq!(strategy["x-kubernetes-patch-strategy"], "retainKeys");
    }

    #[test]
    fn pod_components_carry_upstream_patch_tags() {
        let (components, _) = components_with::<Pod>();
        let ports = property(&components, "io.k8s.api.core.v1.Container", "ports");
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "containerPort");
        assert_eq!(
            ports["x-kubernetes-list-map-keys"],
            json!(["containerPort", "protocol"])
        );
        let volumes = property(&components, "io.k8s.api.core.v1.PodSpec", "volumes");
        assert_eq!(volumes["x-kubernetes-patch-strategy"], "merge,retainKeys");
        let finalizers = property(
            &components,
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "finalizers",
        );
        assert_eq!(finalizers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(finalizers["x-kubernetes-list-type"], "set");
        assert!(finalizers.get("x-kubernetes-patch-merge-key").is_none());
        let owners = property(
            &components,
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "ownerReferences",
        );
        assert_eq!(owners["x-kubernetes-patch-merge-key"], "uid");
        let host_ips = property(&components, "io.k8s.api.core.v1.PodStatus", "hostIPs");
        assert_eq!(host_ips["x-kubernetes-list-type"], "atomic");
        assert_eq!(host_ips["x-kubernetes-patch-merge-key"], "ip");
        let tolerations = property(&components, "io.k8s.api.core.v1.PodSpec", "tolerations");
        assert!(tolerations.get("x-kubernetes-patch-strategy").is_none());
        let owner = components
            .get("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference")
            .expect("OwnerReference");
        assert_eq!(owner["x-kubernetes-map-type"], "atomic");
    }

    #[test]
    fn inline_refs_makes_a_self_contained_schema() {
        let (components, name) = components_with::<Deployment>();
        let root = json!({"$ref": format!("{SCHEMA_PREFIX}{name}")});
        let inlined = inline_refs(&root, components.schemas());
        let mut refs = 0;
        collect_refs(&inlined, &mut |_| refs += 1);
        assert_eq!(refs, 0, "no reference is left");
        let containers = &inlined["properties"]["spec"]["properties"]["template"]["properties"]["spec"]
            ["properties"]["containers"];
        assert_eq!(containers["type"], "array");
        assert_eq!(containers["items"]["properties"]["image"]["type"], "string");
        let looped = json!({"a": {"properties": {"next": {"$ref": format!("{SCHEMA_PREFIX}a")}}}});
        let deep = inline_refs(
            &json!({"$ref": format!("{SCHEMA_PREFIX}a")}),
            looped.as_object().expect("map"),
        );
        let mut node = &deep;
        for _ in 0..MAX_INLINE_DEPTH - 1 {
            node = &node["properties"]["next"];
        }
        assert_eq!(
            node["properties"]["next"],
            json!({"x-kubernetes-int-or-string": true})
        );
    }

    #[test]
    fn resolve_follows_refs_and_all_of_wrappers() {
        let (components, _) = components_with::<Deployment>();
        let template = property(&components, "io.k8s.api.apps.v1.DeploymentSpec", "template");
        let resolved = components.resolve(template);
        assert!(resolved["properties"]["spec"].is_object());
        let plain = json!({"type": "string"});
        assert_eq!(components.resolve(&plain), &plain);
        let dangling = json!({"$ref": "#/components/schemas/nope"});
        assert_eq!(components.resolve(&dangling), &dangling);
    }

    #[test]
    fn json_schema_props_keeps_its_dollar_ref_property() {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let (components, _) = components_with::<CustomResourceDefinition>();
        let name = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";
        let dollar_ref = property(&components, name, "$ref");
        assert_eq!(dollar_ref["type"], "string");
    }

    #[test]
    fn reachable_is_the_closure_of_refs() {
        let (components, _) = components_with::<Deployment>();
        let reachable = components.reachable(["io.k8s.api.apps.v1.Deployment"]);
        assert!(reachable.contains_key("io.k8s.api.core.v1.Container"));
        assert!(!reachable.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.Status"));
        let names: Vec<_> = reachable.keys().cloned().collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }

    #[test]
    fn required_lists_follow_kube() {
        let (components, _) = components_with::<Pod>();
        let reference = components
            .get("io.k8s.api.core.v1.LocalObjectReference")
            .expect("LocalObjectReference");
        assert!(reference.get("required").is_none());
        let selector = components
            .get("io.k8s.api.core.v1.SecretKeySelector")
            .expect("SecretKeySelector");
        assert_eq!(selector["required"], json!(["key"]));
        let mut components = components;
        components.add::<k8s_openapi::api::core::v1::Event>();
        let event = components.get("io.k8s.api.core.v1.Event").expect("Event");
        assert_eq!(event["required"], json!(["metadata", "involvedObject"]));
    }

    #[test]
    fn nested_kind_added_later_still_gets_its_list() {
        use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::PersistentVolumeClaim};
        let (mut components, _) = components_with::<StatefulSet>();
        assert!(components.contains("io.k8s.api.core.v1.PersistentVolumeClaim"));
        components.add::<PersistentVolumeClaim>();
        assert!(components.contains("io.k8s.api.core.v1.PersistentVolumeClaimList"));
    }

    #[test]
    fn kinds_table_is_sorted_for_binary_search() {
        assert!(KINDS.windows(2).all(|pair| pair[0].schema < pair[1].schema));
        assert!(
            REQUIRED_OVERRIDES
                .windows(2)
                .all(|pair| pair[0].schema < pair[1].schema)
        );
        assert_eq!(
            kind_meta("io.k8s.api.autoscaling.v1.Scale").map(|k| k.group),
            Some("autoscaling")
        );
    }
}
