//! `openAPIV3Schema` rules of a CRD (kube's
//! `validateCustomResourceDefinitionValidation` and
//! `ValidateCustomResourceDefinitionOpenAPISchema`): what the schema may
//! hold at all, the structural rules, defaults, and the list/map type
//! extensions. CEL rules are checked for shape only, not compiled.

use crate::error::FieldError;
use serde_json::{Map, Value};

use super::{Options, schema_defaults, selectable_fields};
use crate::schema::path::{child, index, key};
use crate::schema::structural::Structural;
use crate::schema::structural_rules::validate_structural;

const OPENAPI_V3_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];
const META_FIELDS: [&str; 3] = ["metadata", "kind", "apiVersion"];
const VALIDATION_REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// The internal `JSONSchemaProps` fields in declaration order with their
/// JSON names, and whether a status-enabled root may set them.
const ROOT_FIELDS: [(&str, &str, bool); 44] = [
    ("ID", "id", false),
    ("Schema", "$schema", false),
    ("Ref", "$ref", false),
    ("Description", "description", true),
    ("Type", "type", true),
    ("Nullable", "nullable", false),
    ("Format", "format", true),
    ("Title", "title", true),
    ("Default", "default", false),
    ("Maximum", "maximum", true),
    ("ExclusiveMaximum", "exclusiveMaximum", true),
    ("Minimum", "minimum", true),
    ("ExclusiveMinimum", "exclusiveMinimum", true),
    ("MaxLength", "maxLength", true),
    ("MinLength", "minLength", true),
    ("Pattern", "pattern", true),
    ("MaxItems", "maxItems", true),
    ("MinItems", "minItems", true),
    ("UniqueItems", "uniqueItems", true),
    ("MultipleOf", "multipleOf", true),
    ("Enum", "enum", false),
    ("MaxProperties", "maxProperties", false),
    ("MinProperties", "minProperties", false),
    ("Required", "required", true),
    ("Items", "items", true),
    ("AllOf", "allOf", false),
    ("OneOf", "oneOf", false),
    ("AnyOf", "anyOf", false),
    ("Not", "not", false),
    ("Properties", "properties", true),
    ("AdditionalProperties", "additionalProperties", false),
    ("PatternProperties", "patternProperties", false),
    ("Dependencies", "dependencies", false),
    ("AdditionalItems", "additionalItems", false),
    ("Definitions", "definitions", false),
    ("ExternalDocs", "externalDocs", true),
    ("Example", "example", true),
    (
        "XPreserveUnknownFields",
        "x-kubernetes-preserve-unknown-fields",
        true,
    ),
    ("XEmbeddedResource", "x-kubernetes-embedded-resource", false),
    ("XIntOrString", "x-kubernetes-int-or-string", false),
    ("XListMapKeys", "x-kubernetes-list-map-keys", false),
    ("XListType", "x-kubernetes-list-type", false),
    ("XMapType", "x-kubernetes-map-type", false),
    ("XValidations", "x-kubernetes-validations", true),
];

/// Every version's `openAPIV3Schema`.
pub(super) fn all_schemas(spec: &Value) -> Vec<&Value> {
    spec.get("versions")
        .and_then(Value::as_array)
        .map(|versions| {
            versions
                .iter()
                .filter_map(|v| v.pointer("/schema/openAPIV3Schema"))
                .filter(|s| !s.is_null())
                .collect()
        })
        .unwrap_or_default()
}

fn str_of<'a>(s: &'a Value, k: &str) -> &'a str {
    s.get(k).and_then(Value::as_str).unwrap_or_default()
}

fn present<'a>(s: &'a Value, k: &str) -> Option<&'a Value> {
    s.get(k).filter(|v| !v.is_null())
}

/// kube's `SchemaHas`: whether `pred` holds anywhere in the schema.
pub(super) fn schema_has(s: &Value, pred: &dyn Fn(&Value) -> bool) -> bool {
    if !s.is_object() {
        return false;
    }
    if pred(s) {
        return true;
    }
    let sub = |k: &str| {
        present(s, k).is_some_and(|v| {
            if v.is_object() {
                schema_has(v, pred)
            } else {
                false
            }
        })
    };
    let list = |k: &str| {
        s.get(k)
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| schema_has(v, pred)))
    };
    let map = |k: &str| {
        s.get(k)
            .and_then(Value::as_object)
            .is_some_and(|m| m.values().any(|v| schema_has(v, pred)))
    };
    sub("items")
        || list("items")
        || list("allOf")
        || list("anyOf")
        || list("oneOf")
        || sub("not")
        || map("properties")
        || sub("additionalProperties")
        || map("patternProperties")
        || sub("additionalItems")
        || map("definitions")
        || map("dependencies")
}

/// Whether any schema node has a `default`.
pub(super) fn has_defaults(s: &Value) -> bool {
    schema_has(s, &|n| present(n, "default").is_some())
}

/// Whether any schema node uses a Kubernetes extension.
pub(super) fn has_kubernetes_extensions(s: &Value) -> bool {
    schema_has(s, &|n| {
        n.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true))
            || present(n, "x-kubernetes-preserve-unknown-fields").is_some()
            || n.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
            || n.get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
            || present(n, "x-kubernetes-list-type").is_some()
            || n.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
    })
}

/// Whether any node has a `type` that OpenAPI v3 does not know.
pub(super) fn has_invalid_types(s: &Value) -> bool {
    schema_has(s, &|n| {
        let t = str_of(n, "type");
        !t.is_empty() && !OPENAPI_V3_TYPES.contains(&t)
    })
}

/// Whether a set list has items that are not atomic.
pub(super) fn has_non_atomic_set_type(s: &Value) -> bool {
    schema_has(s, &|n| {
        if str_of(n, "x-kubernetes-list-type") != "set" {
            return false;
        }
        let Some(items) = present(n, "items").filter(|i| i.is_object()) else {
            return false;
        };
        match str_of(items, "type") {
            "array" => present(items, "x-kubernetes-list-type").is_some_and(|t| t != "atomic"),
            "object" => str_of(items, "x-kubernetes-map-type") != "atomic",
            _ => false,
        }
    })
}

/// Whether a map or set list breaks the key/nullability rules.
pub(super) fn has_invalid_map_list_keys(s: &Value) -> bool {
    schema_has(s, &|n| !map_list_keys_map_set(n, "").is_empty())
}

/// kube's `validateCustomResourceDefinitionValidation` for one
/// `{openAPIV3Schema}` at `path` (`spec.validation` or
/// `spec.versions[i].schema`).
pub(super) fn validate_validation(
    validation: Option<&Value>,
    status_enabled: bool,
    opts: &Options,
    path: &str,
) -> Vec<FieldError> {
    let Some(schema) = validation.and_then(|v| present(v, "openAPIV3Schema")) else {
        return Vec::new();
    };
    let schema_path = child(path, "openAPIV3Schema");
    let mut errs = Vec::new();
    if status_enabled && let Some(e) = status_root_rule(schema, &schema_path) {
        errs.push(e);
    }
    if schema.get("nullable") == Some(&Value::Bool(true)) {
        errs.push(FieldError::forbidden(
            child(&schema_path, "nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut init_errs = Vec::new();
    if opts.require_structural_schema {
        match Structural::new(schema) {
            Err(e) => init_errs.push(FieldError::invalid(&schema_path, "", e.to_string())),
            Ok(ss) => {
                let structural = validate_structural(&schema_path, &ss);
                if structural.is_empty() {
                    errs.extend(schema_defaults::validate_defaults(
                        &schema_path,
                        &ss,
                        opts.require_pruned_defaults,
                    ));
                } else {
                    errs.extend(structural);
                }
            }
        }
    }
    let ssv = Ssv {
        allow_defaults: opts.allow_defaults,
        disallow_reason: String::new(),
        inside_resource_meta: false,
        require_valid_property_type: opts.require_valid_property_type,
    };
    validate_schema(schema, &schema_path, &ssv, true, opts, &mut errs);
    if errs.is_empty() {
        errs.extend(init_errs);
    }
    errs
}

/// With the status subresource, the root may only hold fields that keep
/// their meaning when `properties.status` is validated on its own.
fn status_root_rule(schema: &Value, path: &str) -> Option<FieldError> {
    let allowed: Vec<&str> = ROOT_FIELDS.iter().filter(|f| f.2).map(|f| f.0).collect();
    for (go_name, json_name, ok) in ROOT_FIELDS {
        let non_zero = match schema.get(json_name) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::String(s)) => !s.is_empty(),
            Some(_) => true,
        };
        if !non_zero {
            continue;
        }
        if go_name == "Type" {
            let t = str_of(schema, "type");
            if t != "object" {
                return Some(FieldError::invalid(
                    child(path, "type"),
                    t,
                    "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                ));
            }
            continue;
        }
        if !ok {
            return Some(FieldError::invalid(
                path,
                schema.clone(),
                format!(
                    "only [{}] fields are allowed at the root of the schema if the status subresource is enabled",
                    allowed.join(" ")
                ),
            ));
        }
    }
    None
}

/// The spec-standard validator's context (kube's `specStandardValidatorV3`).
#[derive(Clone)]
struct Ssv {
    allow_defaults: bool,
    disallow_reason: String,
    inside_resource_meta: bool,
    require_valid_property_type: bool,
}

impl Ssv {
    fn without_defaults(&self, reason: &str) -> Ssv {
        Ssv {
            allow_defaults: false,
            disallow_reason: reason.to_string(),
            ..self.clone()
        }
    }

    /// The per-node checks of `specStandardValidatorV3.validate`.
    fn check(&self, s: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
        let get = |k: &str| s.get(k).filter(|v| !v.is_null());
        let type_ = get("type").and_then(Value::as_str).unwrap_or_default();
        if self.require_valid_property_type
            && !type_.is_empty()
            && !OPENAPI_V3_TYPES.contains(&type_)
        {
            errs.push(FieldError::not_supported(
                child(path, "type"),
                type_,
                &OPENAPI_V3_TYPES,
            ));
        }
        if get("default").is_some() && !self.allow_defaults {
            let detail = if self.disallow_reason.is_empty() {
                "must not be set".to_string()
            } else {
                format!("must not be set {}", self.disallow_reason)
            };
            errs.push(FieldError::forbidden(child(path, "default"), detail));
        }
        if get("id")
            .and_then(Value::as_str)
            .is_some_and(|id| !id.is_empty())
        {
            errs.push(FieldError::forbidden(
                child(path, "id"),
                "id is not supported",
            ));
        }
        if get("additionalItems").is_some() {
            errs.push(FieldError::forbidden(
                child(path, "additionalItems"),
                "additionalItems is not supported",
            ));
        }
        if get("patternProperties")
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
        {
            errs.push(FieldError::forbidden(
                child(path, "patternProperties"),
                "patternProperties is not supported",
            ));
        }
        if get("definitions")
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
        {
            errs.push(FieldError::forbidden(
                child(path, "definitions"),
                "definitions is not supported",
            ));
        }
        if get("dependencies").is_some() {
            errs.push(FieldError::forbidden(
                child(path, "dependencies"),
                "dependencies is not supported",
            ));
        }
        if get("$ref").is_some() {
            errs.push(FieldError::forbidden(
                child(path, "$ref"),
                "$ref is not supported",
            ));
        }
        if type_ == "null" {
            errs.push(FieldError::forbidden(
                child(path, "type"),
                "type cannot be set to null, use nullable as an alternative",
            ));
        }
        if get("items")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            errs.push(FieldError::forbidden(
                child(path, "items"),
                "items must be a schema object and not an array",
            ));
        }
        if self.inside_resource_meta
            && s.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true))
        {
            errs.push(FieldError::forbidden(
                child(path, "x-kubernetes-embedded-resource"),
                "must not be used inside of resource meta",
            ));
        }
    }
}

/// kube's `ValidateCustomResourceDefinitionOpenAPISchema`, recursively.
fn validate_schema(
    schema: &Value,
    path: &str,
    ssv: &Ssv,
    is_root: bool,
    opts: &Options,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = schema.as_object() else { return };
    let get = |k: &str| s.get(k).filter(|v| !v.is_null());
    ssv.check(s, path, errs);
    if get("uniqueItems") == Some(&Value::Bool(true)) {
        errs.push(FieldError::forbidden(
            child(path, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let properties = get("properties").and_then(Value::as_object);
    if let Some(extra) = get("additionalProperties") {
        if properties.is_some_and(|p| !p.is_empty())
            && (extra == &Value::Bool(false) || extra.is_object())
        {
            errs.push(FieldError::forbidden(
                child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        let sub = if ssv.inside_resource_meta {
            ssv.without_defaults("inside additionalProperties applying to object metadata")
        } else {
            ssv.clone()
        };
        validate_schema(
            extra,
            &child(path, "additionalProperties"),
            &sub,
            false,
            opts,
            errs,
        );
    }
    let embedded = s.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
    for (name, prop) in properties.into_iter().flatten() {
        let mut sub = ssv.clone();
        if (is_root || embedded) && META_FIELDS.contains(&name.as_str()) {
            sub.inside_resource_meta = true;
            if is_root {
                sub = sub.without_defaults(&format!("in top-level {name}"));
            }
        }
        validate_schema(
            prop,
            &key(&child(path, "properties"), name),
            &sub,
            false,
            opts,
            errs,
        );
    }
    if let Some(not) = get("not") {
        validate_schema(not, &child(path, "not"), ssv, false, opts, errs);
    }
    for list in ["allOf", "oneOf", "anyOf"] {
        for (i, n) in get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            validate_schema(n, &index(&child(path, list), i), ssv, false, opts, errs);
        }
    }
    for (name, d) in get("definitions")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        validate_schema(
            d,
            &key(&child(path, "definitions"), name),
            ssv,
            false,
            opts,
            errs,
        );
    }
    match get("items") {
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                validate_schema(
                    item,
                    &index(&child(path, "items"), i),
                    ssv,
                    false,
                    opts,
                    errs,
                );
            }
        }
        Some(items) => validate_schema(items, &child(path, "items"), ssv, false, opts, errs),
        None => {}
    }
    for (name, d) in get("dependencies")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        validate_schema(
            d,
            &key(&child(path, "dependencies"), name),
            ssv,
            false,
            opts,
            errs,
        );
    }
    list_and_map_types(s, path, opts, errs);
    if opts.require_map_list_keys_map_set_validation {
        errs.extend(map_list_keys_map_set(schema, path));
    }
    validation_rules(schema, s, path, errs);
}

/// `x-kubernetes-preserve-unknown-fields`, `-map-type`, `-list-type` and
/// `-list-map-keys` rules.
fn list_and_map_types(
    s: &Map<String, Value>,
    path: &str,
    opts: &Options,
    errs: &mut Vec<FieldError>,
) {
    let get = |k: &str| s.get(k).filter(|v| !v.is_null());
    let type_ = get("type").and_then(Value::as_str).unwrap_or_default();
    if get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            false,
            "must be true or undefined",
        ));
    }
    let type_rule = |errs: &mut Vec<FieldError>, want: &str, ext: &str| {
        let msg = format!("must be {want} if {ext} is specified");
        if type_.is_empty() {
            errs.push(FieldError::required(child(path, "type"), msg));
        } else {
            errs.push(FieldError::invalid(child(path, "type"), type_, msg));
        }
    };
    if let Some(map_type) = get("x-kubernetes-map-type") {
        if type_ != "object" {
            type_rule(errs, "object", "x-kubernetes-map-type");
        }
        let map_type = map_type.as_str().unwrap_or_default();
        if map_type != "atomic" && map_type != "granular" {
            errs.push(FieldError::not_supported(
                child(path, "x-kubernetes-map-type"),
                map_type,
                &["atomic", "granular"],
            ));
        }
    }
    let list_type = get("x-kubernetes-list-type").map(|v| v.as_str().unwrap_or_default());
    let items = get("items").filter(|i| i.is_object());
    if list_type.is_some() && type_ != "array" {
        type_rule(errs, "array", "x-kubernetes-list-type");
    } else if opts.require_atomic_set_type
        && list_type == Some("set")
        && let Some(items) = items
    {
        match str_of(items, "type") {
            "array" => {
                if let Some(inner) =
                    present(items, "x-kubernetes-list-type").filter(|t| *t != "atomic")
                {
                    errs.push(FieldError::invalid(
                        child(&child(path, "items"), "x-kubernetes-list-type"),
                        inner.clone(),
                        "must be atomic as item of a list with x-kubernetes-list-type=set",
                    ));
                }
            }
            "object" if str_of(items, "x-kubernetes-map-type") != "atomic" => {
                errs.push(FieldError::invalid(
                    child(&child(path, "items"), "x-kubernetes-map-type"),
                    items
                        .get("x-kubernetes-list-type")
                        .cloned()
                        .unwrap_or(Value::Null),
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                ));
            }
            _ => {}
        }
    }
    if let Some(lt) = list_type
        && !["atomic", "set", "map"].contains(&lt)
    {
        errs.push(FieldError::not_supported(
            child(path, "x-kubernetes-list-type"),
            lt,
            &["atomic", "set", "map"],
        ));
    }
    let keys: Vec<&str> = get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|k| k.as_str().unwrap_or_default()).collect())
        .unwrap_or_default();
    if !keys.is_empty() {
        let msg = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errs.push(FieldError::required(
                child(path, "x-kubernetes-list-type"),
                msg,
            )),
            Some(lt) if lt != "map" => errs.push(FieldError::invalid(
                child(path, "x-kubernetes-list-type"),
                lt,
                msg,
            )),
            _ => {}
        }
    }
    if list_type == Some("map") {
        let keys_value = s
            .get("x-kubernetes-list-map-keys")
            .cloned()
            .unwrap_or(Value::Null);
        if keys.is_empty() {
            errs.push(FieldError::required(
                child(path, "x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match get("items") {
            None => errs.push(FieldError::required(
                child(path, "items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(arr @ Value::Array(_)) => errs.push(FieldError::invalid(
                child(path, "items"),
                arr.clone(),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(items) => {
                let items_type = str_of(items, "type");
                if items_type != "object" {
                    errs.push(FieldError::invalid(
                        child(&child(path, "items"), "type"),
                        items_type,
                        "must be object if parent array's x-kubernetes-list-type is map",
                    ));
                } else {
                    let mut seen: Vec<&str> = Vec::new();
                    for k in &keys {
                        match items.get("properties").and_then(|p| p.get(*k)) {
                            Some(prop) => {
                                if matches!(str_of(prop, "type"), "array" | "object") {
                                    errs.push(FieldError::invalid(
                                        child(&key(&child(&child(path, "items"), "properties"), k), "type"),
                                        items_type,
                                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                    ));
                                }
                            }
                            None => errs.push(FieldError::invalid(
                                child(path, "x-kubernetes-list-map-keys"),
                                keys_value.clone(),
                                "entries must all be names of item properties",
                            )),
                        }
                        if seen.contains(k) {
                            errs.push(FieldError::invalid(
                                child(path, "x-kubernetes-list-map-keys"),
                                keys_value.clone(),
                                "must not contain duplicate entries",
                            ));
                        }
                        seen.push(k);
                    }
                }
            }
        }
    }
}

/// kube's `validateMapListKeysMapSet`: set/map items are not nullable; map
/// keys are required or defaulted, and not nullable.
fn map_list_keys_map_set(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(items) = present(schema, "items").filter(|i| i.is_object()) else {
        return errs;
    };
    let list_type = str_of(schema, "x-kubernetes-list-type");
    if list_type != "set" && list_type != "map" {
        return errs;
    }
    let items_path = child(path, "items");
    if items.get("nullable") == Some(&Value::Bool(true)) {
        errs.push(FieldError::forbidden(
            child(&items_path, "nullable"),
            format!("cannot be nullable when x-kubernetes-list-type is {list_type}"),
        ));
    }
    if list_type == "map" {
        let required: Vec<&str> = items
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let keys = schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str);
        for k in keys {
            let Some(prop) = items.get("properties").and_then(|p| p.get(k)) else {
                continue;
            };
            let prop_path = key(&child(&items_path, "properties"), k);
            if !required.contains(&k) && present(prop, "default").is_none() {
                errs.push(FieldError::required(
                    child(&prop_path, "default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                ));
            }
            if prop.get("nullable") == Some(&Value::Bool(true)) {
                errs.push(FieldError::forbidden(
                    child(&prop_path, "nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
    }
    errs
}

fn has_newlines(s: &str) -> bool {
    s.contains('\n') || s.contains('\r')
}

/// The shape of `x-kubernetes-validations` rules (the CEL itself is not
/// compiled here).
fn validation_rules(
    schema: &Value,
    s: &Map<String, Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(rules) = s.get("x-kubernetes-validations").and_then(Value::as_array) else {
        return;
    };
    for (i, rule) in rules.iter().enumerate() {
        let rpath = index(&child(path, "x-kubernetes-validations"), i);
        let text = |k: &str| rule.get(k).and_then(Value::as_str).unwrap_or_default();
        let (rule_text, message, message_expr) =
            (text("rule"), text("message"), text("messageExpression"));
        let (trimmed_rule, trimmed_msg) = (rule_text.trim(), message.trim());
        if trimmed_rule.is_empty() {
            errs.push(FieldError::required(
                child(&rpath, "rule"),
                "rule is not specified",
            ));
        } else if !message.is_empty() && trimmed_msg.is_empty() {
            errs.push(FieldError::invalid(
                child(&rpath, "message"),
                message,
                "message must be non-empty if specified",
            ));
        } else if has_newlines(trimmed_msg) {
            errs.push(FieldError::invalid(
                child(&rpath, "message"),
                message,
                "message must not contain line breaks",
            ));
        } else if has_newlines(trimmed_rule) && trimmed_msg.is_empty() {
            errs.push(FieldError::required(
                child(&rpath, "message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if !message_expr.is_empty() && message_expr.trim().is_empty() {
            errs.push(FieldError::required(
                child(&rpath, "messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str)
            && !VALIDATION_REASONS.contains(&reason)
        {
            errs.push(FieldError::not_supported(
                child(&rpath, "reason"),
                reason,
                &VALIDATION_REASONS,
            ));
        }
        let field_path = text("fieldPath");
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errs.push(FieldError::invalid(
                child(&rpath, "fieldPath"),
                field_path,
                "fieldPath must be non-empty if specified",
            ));
        }
        if has_newlines(field_path) {
            errs.push(FieldError::invalid(
                child(&rpath, "fieldPath"),
                field_path,
                "fieldPath must not contain line breaks",
            ));
        }
        if !field_path.is_empty()
            && let Ok(ss) = Structural::new(schema)
            && selectable_fields::valid_field_path(field_path, &ss, true).is_err()
        {
            errs.push(FieldError::invalid(
                child(&rpath, "fieldPath"),
                field_path,
                "fieldPath must be a valid path",
            ));
        }
    }
}
