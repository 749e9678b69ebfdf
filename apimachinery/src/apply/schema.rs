//! The type information apply walks objects with, read from kube-style OpenAPI v3 schemas.
//!
//! kube converts OpenAPI schemas into structured-merge-diff types
//! (`k8s.io/kube-openapi/pkg/schemaconv`); [`TypeNode::shape`] makes the same
//! reading on the fly:
//!
//! - `type: object` is a map: `properties` are its declared fields,
//!   `additionalProperties` the type of other keys (a schema, or `true` for
//!   deduced values). Without `additionalProperties`, other keys are deduced
//!   when `x-kubernetes-preserve-unknown-fields` is in effect (it carries down
//!   to inline subschemas, not across `$ref`) or when there are no properties,
//!   and undeclared otherwise. `x-kubernetes-map-type: atomic` makes the map
//!   (or struct) one leaf.
//! - `type: array` is a list: `x-kubernetes-list-type` `set` or `map` (keyed by
//!   `x-kubernetes-list-map-keys`) makes it granular; without it, a
//!   `x-kubernetes-patch-strategy: merge` list is granular too (keyed by
//!   `x-kubernetes-patch-merge-key`, else a set); anything else is atomic.
//! - A schema without `type` (int-or-string, preserve-unknown-fields
//!   subtrees) takes its shape from the value.
//! - `Quantity` and `RawExtension` are untyped scalars whatever their schema says.
//! - A missing schema is "deduced": maps are granular, lists atomic, scalars leaves.
//!
//! Extensions are read on the schema as written at the use site (the wrapper
//! around a `$ref`) first, then on the schema it resolves to.

use serde_json::{Map, Value, json};

use super::error::ApplyError;
use super::fieldpath::PathElement;
use crate::patch::strategic::SchemaLookup;

/// Opts a subtree into keeping (and deducing) undeclared fields.
const PRESERVE_UNKNOWN_FIELDS: &str = "x-kubernetes-preserve-unknown-fields";
/// `atomic`, `set` or `map` on arrays.
const LIST_TYPE: &str = "x-kubernetes-list-type";
/// The key fields of a `map` list.
const LIST_MAP_KEYS: &str = "x-kubernetes-list-map-keys";
/// `atomic` or `granular` on objects.
const MAP_TYPE: &str = "x-kubernetes-map-type";
/// The strategic-merge-patch strategy, kube's fallback for lists without a list type.
const PATCH_STRATEGY: &str = "x-kubernetes-patch-strategy";
/// The strategic-merge-patch merge key.
const PATCH_MERGE_KEY: &str = "x-kubernetes-patch-merge-key";
/// Schemas kube's converter hardcodes as untyped scalars.
const UNTYPED_SCALARS: [&str; 2] = [
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
];
/// List-map key defaults kube's OpenAPI declares (`+default`), for schemas that lack them.
const KEY_DEFAULTS: [(&str, &str, &str); 2] = [
    ("io.k8s.api.core.v1.ContainerPort", "protocol", "TCP"),
    ("io.k8s.api.core.v1.ServicePort", "protocol", "TCP"),
];

/// A lookup with no schemas, for deduced types.
struct NoSchemas;

impl SchemaLookup for NoSchemas {
    /// Finds nothing.
    fn lookup(&self, _reference: &str) -> Option<&Value> {
        None
    }
}

/// The lookup behind [`Schema::deduced`].
static NO_SCHEMAS: NoSchemas = NoSchemas;

/// The type of the objects of one endpoint, as apply and managedFields tracking see it.
///
/// ```
/// # use apimachinery::apply::Schema;
/// # use serde_json::{json, Map, Value};
/// let components: Map<String, Value> = Map::new();
/// let root = json!({"$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment"});
/// let main = Schema::new(&root, &components).reset_fields(&["status"]);
/// let status = Schema::new(&root, &components).reset_fields(&["spec", "metadata.labels"]);
/// let custom = Schema::deduced();
/// # let _ = (main, status, custom);
/// ```
#[derive(Clone, Copy)]
pub struct Schema<'a> {
    root: Option<&'a Value>,
    lookup: &'a dyn SchemaLookup,
    reset: &'a [&'a str],
    unstructured: bool,
}

impl<'a> Schema<'a> {
    /// The schema of a kind, e.g. `{"$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment"}`,
    /// with the components it refers to. Objects are taken to be built-in (Go-typed) kinds.
    pub fn new(root: &'a Value, lookup: &'a dyn SchemaLookup) -> Self {
        Schema {
            root: Some(root),
            lookup,
            reset: &[],
            unstructured: false,
        }
    }

    /// No schema at all: everything is deduced from the values (a custom resource without one).
    pub fn deduced() -> Schema<'static> {
        Schema {
            root: None,
            lookup: &NO_SCHEMAS,
            reset: &[],
            unstructured: true,
        }
    }

    /// Fields the endpoint's strategy resets, dotted (`status`, `metadata.labels`): kube's
    /// `ResetFields`. Changes below them are neither owned nor conflicts.
    pub fn reset_fields(self, fields: &'a [&'a str]) -> Self {
        Schema {
            reset: fields,
            ..self
        }
    }

    /// Marks the objects as unstructured (custom resources): a created object is compared
    /// against `{}` rather than against the Go zero value of its type.
    pub fn unstructured(self) -> Self {
        Schema {
            unstructured: true,
            ..self
        }
    }

    /// The reset fields as written.
    pub(crate) fn reset(&self) -> &'a [&'a str] {
        self.reset
    }

    /// Whether the objects are unstructured.
    pub(crate) fn is_unstructured(&self) -> bool {
        self.unstructured
    }

    /// The type of a whole object.
    pub(crate) fn root(&self) -> TypeNode<'a> {
        match self.root {
            Some(root) => TypeNode::written(root, self.lookup, false),
            None => TypeNode::deduced(self.lookup),
        }
    }
}

/// A position in a schema: the subschema as written and as resolved.
#[derive(Clone, Copy)]
pub(crate) struct TypeNode<'a> {
    written: Option<&'a Value>,
    resolved: Option<&'a Value>,
    lookup: &'a dyn SchemaLookup,
    preserve: bool,
}

/// What a value is at a position of the schema.
pub(crate) enum Shape<'a> {
    /// A leaf value.
    Scalar(ScalarKind),
    /// A struct or a map.
    Map(MapType<'a>),
    /// A list.
    List(ListType<'a>),
}

impl Shape<'_> {
    /// Whether two shapes are of the same kind (scalar, map, list).
    pub(crate) fn same_kind(&self, other: &Shape<'_>) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// The scalar type a schema declares, for validation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScalarKind {
    /// `integer` or `number`.
    Numeric,
    /// `string` (plain or `byte`).
    String,
    /// `boolean`.
    Boolean,
    /// Anything else.
    Untyped,
}

/// A struct or map type.
pub(crate) struct MapType<'a> {
    fields: Option<&'a Map<String, Value>>,
    element: Option<TypeNode<'a>>,
    required: Vec<&'a str>,
    /// Whether the whole map is one leaf.
    pub(crate) atomic: bool,
    parent: TypeNode<'a>,
}

impl<'a> MapType<'a> {
    /// Whether `key` is a declared field (`properties`).
    pub(crate) fn declares(&self, key: &str) -> bool {
        self.fields.is_some_and(|fields| fields.contains_key(key))
    }

    /// Whether the schema accepts `key` (declared, or covered by the element type).
    pub(crate) fn accepts(&self, key: &str) -> bool {
        self.declares(key) || self.element.is_some()
    }

    /// The type of the value under `key` (deduced for keys the schema does not accept).
    pub(crate) fn child(&self, key: &str) -> TypeNode<'a> {
        if let Some(property) = self.fields.and_then(|fields| fields.get(key)) {
            return self.parent.descend(property);
        }
        self.element
            .unwrap_or_else(|| TypeNode::deduced(self.parent.lookup))
    }

    /// The declared fields, in schema order.
    fn fields(&self) -> impl Iterator<Item = (&'a String, &'a Value)> + use<'a> {
        self.fields.into_iter().flatten()
    }
}

/// How a list's items are identified.
pub(crate) enum ListKind<'a> {
    /// The list is one leaf.
    Atomic,
    /// Scalar items identified by value.
    Set,
    /// Object items identified by these key fields.
    Map(Vec<&'a str>),
}

/// A list type.
pub(crate) struct ListType<'a> {
    /// The type of the items.
    pub(crate) element: TypeNode<'a>,
    /// How the items are identified.
    pub(crate) kind: ListKind<'a>,
}

impl ListType<'_> {
    /// Whether the list is one leaf.
    pub(crate) fn is_atomic(&self) -> bool {
        matches!(self.kind, ListKind::Atomic)
    }

    /// The path element naming an item of a granular list (kube's error text on failure).
    pub(crate) fn item_element(&self, item: &Value) -> Result<PathElement, ApplyError> {
        match &self.kind {
            ListKind::Atomic => Err(ApplyError::Invalid(
                "invalid indexing of non-associative list".to_owned(),
            )),
            ListKind::Set => match item {
                Value::Object(_) => Err(ApplyError::Invalid(
                    "associative list without keys has an element that's a map type".to_owned(),
                )),
                Value::Array(_) => Err(ApplyError::Invalid(
                    "not supported: associative list with lists as elements".to_owned(),
                )),
                Value::Null => Err(ApplyError::Invalid(
                    "associative list without keys has an element that's an explicit null"
                        .to_owned(),
                )),
                scalar => Ok(PathElement::Value(scalar.clone())),
            },
            ListKind::Map(keys) => {
                let object = match item {
                    Value::Object(object) => object,
                    Value::Null => {
                        return Err(ApplyError::Invalid(
                            "associative list with keys may not have a null element".to_owned(),
                        ));
                    }
                    _ => {
                        return Err(ApplyError::Invalid(
                            "associative list with keys may not have non-map elements".to_owned(),
                        ));
                    }
                };
                let mut fields = Vec::with_capacity(keys.len());
                for key in keys {
                    let value = match object.get(*key) {
                        Some(value) => value.clone(),
                        None => self.element.key_default(key).ok_or_else(|| {
                            ApplyError::Invalid(format!(
                                "associative list with keys has an element that omits key field {} (and doesn't have default value)",
                                super::fieldpath::go_quote(key)
                            ))
                        })?,
                    };
                    fields.push(((*key).to_owned(), value));
                }
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(PathElement::Key(fields))
            }
        }
    }
}

impl<'a> TypeNode<'a> {
    /// The node for a subschema as written, resolving its `$ref`.
    fn written(written: &'a Value, lookup: &'a dyn SchemaLookup, inherited: bool) -> Self {
        let resolved = lookup.resolve(written);
        let preserve = (inherited && reference_name(written).is_none())
            || flag(written, PRESERVE_UNKNOWN_FIELDS)
            || flag(resolved, PRESERVE_UNKNOWN_FIELDS);
        TypeNode {
            written: Some(written),
            resolved: Some(resolved),
            lookup,
            preserve,
        }
    }

    /// A deduced node: no schema.
    pub(crate) fn deduced(lookup: &'a dyn SchemaLookup) -> Self {
        TypeNode {
            written: None,
            resolved: None,
            lookup,
            preserve: true,
        }
    }

    /// A deduced node sharing this node's lookup.
    pub(crate) fn untyped(&self) -> TypeNode<'a> {
        TypeNode::deduced(self.lookup)
    }

    /// The node of a subschema of this one.
    fn descend(&self, written: &'a Value) -> TypeNode<'a> {
        TypeNode::written(written, self.lookup, self.preserve)
    }

    /// An extension, read on the schema as written first, then on the resolved one.
    fn extension(&self, name: &str) -> Option<&'a Value> {
        self.written
            .and_then(|written| written.get(name))
            .or_else(|| self.resolved.and_then(|resolved| resolved.get(name)))
    }

    /// The shape of `value` at this position (`None`: the value is absent).
    pub(crate) fn shape(&self, value: Option<&Value>) -> Shape<'a> {
        let Some(resolved) = self.resolved else {
            return self.deduced_shape(value);
        };
        let untyped = self
            .written
            .and_then(reference_name)
            .is_some_and(|name| UNTYPED_SCALARS.contains(&name));
        if untyped {
            return Shape::Scalar(ScalarKind::Untyped);
        }
        match resolved.get("type").and_then(Value::as_str).unwrap_or("") {
            "object" => Shape::Map(self.map_type(resolved)),
            "array" => Shape::List(self.list_type(resolved)),
            "integer" | "number" => Shape::Scalar(ScalarKind::Numeric),
            "boolean" => Shape::Scalar(ScalarKind::Boolean),
            "string" => match resolved.get("format").and_then(Value::as_str).unwrap_or("") {
                "" | "byte" => Shape::Scalar(ScalarKind::String),
                _ => Shape::Scalar(ScalarKind::Untyped),
            },
            "" => match value {
                Some(Value::Array(_)) => Shape::List(self.list_type(resolved)),
                Some(Value::Object(_) | Value::Null) | None => Shape::Map(self.map_type(resolved)),
                Some(_) => Shape::Scalar(ScalarKind::Untyped),
            },
            _ => Shape::Scalar(ScalarKind::Untyped),
        }
    }

    /// The shape of a value without schema.
    fn deduced_shape(&self, value: Option<&Value>) -> Shape<'a> {
        match value {
            Some(Value::Array(_)) => Shape::List(ListType {
                element: *self,
                kind: ListKind::Atomic,
            }),
            Some(Value::Object(_) | Value::Null) | None => Shape::Map(MapType {
                fields: None,
                element: Some(*self),
                required: Vec::new(),
                atomic: false,
                parent: *self,
            }),
            Some(_) => Shape::Scalar(ScalarKind::Untyped),
        }
    }

    /// The map type of an object schema.
    fn map_type(&self, resolved: &'a Value) -> MapType<'a> {
        let fields = resolved.get("properties").and_then(Value::as_object);
        let element = match resolved.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(TypeNode::deduced(self.lookup)),
            Some(Value::Bool(false)) => None,
            Some(schema @ Value::Object(_)) => Some(self.descend(schema)),
            _ if self.preserve || fields.is_none_or(Map::is_empty) => {
                Some(TypeNode::deduced(self.lookup))
            }
            _ => None,
        };
        let required = resolved
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        MapType {
            fields,
            element,
            required,
            atomic: self.extension(MAP_TYPE).and_then(Value::as_str) == Some("atomic"),
            parent: *self,
        }
    }

    /// The list type of an array schema.
    fn list_type(&self, resolved: &'a Value) -> ListType<'a> {
        let element = match resolved.get("items") {
            Some(items @ Value::Object(_)) => self.descend(items),
            _ => TypeNode::deduced(self.lookup),
        };
        ListType {
            element,
            kind: self.list_kind(),
        }
    }

    /// How the list's items are identified, from its extensions.
    fn list_kind(&self) -> ListKind<'a> {
        if let Some(list_type) = self.extension(LIST_TYPE) {
            return match list_type.as_str() {
                Some("set") => ListKind::Set,
                Some("map") => {
                    let keys: Vec<&'a str> = self
                        .extension(LIST_MAP_KEYS)
                        .and_then(Value::as_array)
                        .map(|keys| keys.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    if keys.is_empty() {
                        ListKind::Atomic
                    } else {
                        ListKind::Map(keys)
                    }
                }
                _ => ListKind::Atomic,
            };
        }
        match self.extension(PATCH_STRATEGY).and_then(Value::as_str) {
            Some("merge" | "merge,retainKeys") => {
                match self.extension(PATCH_MERGE_KEY).and_then(Value::as_str) {
                    Some(key) => ListKind::Map(vec![key]),
                    None => ListKind::Set,
                }
            }
            _ => ListKind::Atomic,
        }
    }

    /// The default of a key field of this (item) type, if the schema or kube declares one.
    fn key_default(&self, key: &str) -> Option<Value> {
        let declared = self
            .resolved
            .and_then(|resolved| resolved.get("properties"))
            .and_then(|properties| properties.get(key))
            .and_then(|property| property.get("default"));
        if let Some(default) = declared {
            return Some(default.clone());
        }
        let name = self.written.and_then(reference_name)?;
        KEY_DEFAULTS
            .iter()
            .find(|(schema, field, _)| *schema == name && *field == key)
            .map(|(_, _, default)| json!(default))
    }
}

/// The schema name a `$ref` (or a single-ref `allOf` wrapper) points at.
fn reference_name(schema: &Value) -> Option<&str> {
    let reference = match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => reference,
        None => match schema.get("allOf").and_then(Value::as_array)?.as_slice() {
            [only] => only.get("$ref").and_then(Value::as_str)?,
            _ => return None,
        },
    };
    reference.rsplit('/').next()
}

/// Whether a boolean extension is set to `true`.
fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool) == Some(true)
}

/// What a created object is compared against: the Go zero value of its type, as kube does.
///
/// Go's zero value holds the fields without `omitempty` (kube marks them
/// `required`, as `null` here: they are leaves either way) and the non-pointer
/// structs (kube's OpenAPI writes `default: {}` on those). When the schema has
/// no such markers (the root's `metadata` has no `default`), a struct that is
/// non-empty in the new object is taken to be a non-pointer struct. Unstructured
/// objects (custom resources) are compared against `{}`.
pub(crate) fn zero_object(schema: &Schema<'_>, object: &Value) -> Value {
    if schema.is_unstructured() {
        return Value::Object(Map::new());
    }
    let root = schema.root();
    let markers = match root.shape(Some(object)) {
        Shape::Map(map) => map
            .fields()
            .any(|(name, property)| name == "metadata" && property.get("default").is_some()),
        _ => false,
    };
    zero_struct(root, Some(object), markers)
}

/// The zero value of a struct, given its value in the new object.
fn zero_struct(node: TypeNode<'_>, value: Option<&Value>, markers: bool) -> Value {
    let mut out = Map::new();
    let Shape::Map(map) = node.shape(value) else {
        return Value::Object(out);
    };
    for (name, property) in map.fields() {
        let child = map.child(name);
        let child_value = value.and_then(|value| value.get(name.as_str()));
        let is_struct = matches!(
            child.shape(child_value),
            Shape::Map(ref inner) if !inner.atomic && inner.fields.is_some_and(|f| !f.is_empty())
        );
        let non_pointer = is_struct
            && if markers {
                property.get("default") == Some(&Value::Object(Map::new()))
            } else {
                child_value
                    .and_then(Value::as_object)
                    .is_some_and(|o| !o.is_empty())
            };
        if non_pointer {
            out.insert(name.clone(), zero_struct(child, child_value, markers));
        } else if map.required.contains(&name.as_str()) {
            out.insert(name.clone(), Value::Null);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn components() -> Map<String, Value> {
        serde_json::from_value(json!({
            "Pod": {"type": "object", "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/Meta"}], "description": "m"},
                "spec": {"allOf": [{"$ref": "#/components/schemas/PodSpec"}]},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                          "properties": {"inner": {"type": "object", "properties": {"a": {"type": "string"}}}}}
            }},
            "Meta": {"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
            }},
            "PodSpec": {"type": "object", "required": ["containers"], "properties": {
                "containers": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/Container"}]},
                               "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
                "ports": {"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.api.core.v1.ContainerPort"},
                          "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["containerPort", "protocol"]},
                "volumes": {"type": "array", "items": {"type": "object"},
                            "x-kubernetes-patch-strategy": "merge,retainKeys", "x-kubernetes-patch-merge-key": "name"},
                "selector": {"allOf": [{"$ref": "#/components/schemas/Selector"}], "x-kubernetes-map-type": "atomic"},
                "size": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"},
                "security": {"type": "object", "properties": {"user": {"type": "integer"}}}
            }},
            "Container": {"type": "object", "properties": {"name": {"type": "string"}}},
            "Selector": {"type": "object", "properties": {"a": {"type": "string"}}},
            "io.k8s.api.core.v1.ContainerPort": {"type": "object", "properties": {
                "containerPort": {"type": "integer"}, "protocol": {"type": "string"}}},
            "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"}
        }))
        .unwrap()
    }

    fn field<'a>(node: TypeNode<'a>, name: &str) -> TypeNode<'a> {
        match node.shape(None) {
            Shape::Map(map) => map.child(name),
            _ => panic!("not a map"),
        }
    }

    #[test]
    fn reads_list_and_map_types() {
        let components = components();
        let root = json!({"$ref": "#/components/schemas/Pod"});
        let schema = Schema::new(&root, &components);
        let spec = field(schema.root(), "spec");
        let Shape::List(containers) = field(spec, "containers").shape(None) else {
            panic!()
        };
        assert!(matches!(containers.kind, ListKind::Map(ref keys) if keys == &["name"]));
        let Shape::List(ports) = field(spec, "ports").shape(None) else {
            panic!()
        };
        let port = ports.item_element(&json!({"containerPort": 80})).unwrap();
        assert_eq!(port.to_string(), r#"[containerPort=80,protocol="TCP"]"#);
        let Shape::List(volumes) = field(spec, "volumes").shape(None) else {
            panic!()
        };
        assert!(matches!(volumes.kind, ListKind::Map(ref keys) if keys == &["name"]));
        let Shape::Map(selector) = field(spec, "selector").shape(None) else {
            panic!()
        };
        assert!(selector.atomic);
        assert!(matches!(
            field(spec, "size").shape(None),
            Shape::Scalar(ScalarKind::Untyped)
        ));
        let meta = field(schema.root(), "metadata");
        let Shape::List(finalizers) = field(meta, "finalizers").shape(None) else {
            panic!()
        };
        assert!(matches!(finalizers.kind, ListKind::Set));
        let Shape::Map(labels) = field(meta, "labels").shape(None) else {
            panic!()
        };
        assert!(!labels.declares("app") && labels.accepts("app"));
    }

    #[test]
    fn preserve_unknown_fields_carries_to_inline_schemas() {
        let components = components();
        let root = json!({"$ref": "#/components/schemas/Pod"});
        let schema = Schema::new(&root, &components);
        let Shape::Map(inner) = field(field(schema.root(), "extra"), "inner").shape(None) else {
            panic!()
        };
        assert!(inner.accepts("anything"));
        let Shape::Map(spec) = field(schema.root(), "spec").shape(None) else {
            panic!()
        };
        assert!(!spec.accepts("anything"));
    }

    #[test]
    fn missing_keys_are_reported_like_kube() {
        let components = components();
        let root = json!({"$ref": "#/components/schemas/Pod"});
        let schema = Schema::new(&root, &components);
        let Shape::List(containers) = field(field(schema.root(), "spec"), "containers").shape(None)
        else {
            panic!()
        };
        assert_eq!(
            containers
                .item_element(&json!({"image": "x"}))
                .unwrap_err()
                .to_string(),
            "associative list with keys has an element that omits key field \"name\" (and doesn't have default value)"
        );
    }

    #[test]
    fn zero_object_holds_required_fields_and_non_pointer_structs() {
        let components = components();
        let root = json!({"$ref": "#/components/schemas/Pod"});
        let schema = Schema::new(&root, &components);
        let object = json!({"metadata": {"name": "p"}, "spec": {"containers": [], "security": {}}});
        assert_eq!(
            zero_object(&schema, &object),
            json!({"metadata": {}, "spec": {"containers": null}})
        );
        assert_eq!(zero_object(&schema.unstructured(), &object), json!({}));
    }
}
