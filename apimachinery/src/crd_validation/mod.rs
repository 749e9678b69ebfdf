//! Validation of CustomResourceDefinitions (`apiextensions.k8s.io/v1`), as
//! kube's `ValidateCustomResourceDefinition` and `...Update` report it.
//!
//! kube validates the internal form of a CRD: per-version schemas,
//! subresources, printer columns and selectable fields that are identical
//! in every version are hoisted to the spec (see [`hoisting`]), so errors
//! name `spec.validation.openAPIV3Schema...` for a single-version CRD and
//! `spec.versions[i].schema.openAPIV3Schema...` otherwise; conversion
//! errors name the internal `spec.conversion.webhookClientConfig`.

mod columns;
mod conversion;
mod hoisting;
mod names;
mod openapi_schema;
mod prepare;
mod schema_defaults;
mod selectable_fields;
mod subresources;

use crate::error::FieldError;
use crate::validation;
use serde_json::Value;

use crate::schema::path::{child, index};
use hoisting::InternalSpec;

pub use prepare::{default_crd, prepare_for_create, prepare_for_update};

/// Which rules apply: all of them on create; on update some are relaxed
/// when the stored CRD already breaks them (kube's `validationOptions`).
#[derive(Debug, Clone)]
struct Options {
    allow_defaults: bool,
    require_recognized_conversion_review_version: bool,
    require_immutable_names: bool,
    require_open_api_schema: bool,
    require_valid_property_type: bool,
    require_structural_schema: bool,
    require_pruned_defaults: bool,
    require_atomic_set_type: bool,
    require_map_list_keys_map_set_validation: bool,
}

impl Options {
    fn create() -> Self {
        Options {
            allow_defaults: true,
            require_recognized_conversion_review_version: true,
            require_immutable_names: false,
            require_open_api_schema: true,
            require_valid_property_type: true,
            require_structural_schema: true,
            require_pruned_defaults: true,
            require_atomic_set_type: true,
            require_map_list_keys_map_set_validation: true,
        }
    }

    fn update(old: &Value) -> Self {
        let old_spec = &old["spec"];
        let schemas = openapi_schema::all_schemas(old_spec);
        Options {
            allow_defaults: true,
            require_recognized_conversion_review_version:
                conversion::has_valid_review_version_or_none(old_spec),
            require_immutable_names: is_established(old),
            require_open_api_schema: all_versions_have_schema(old_spec),
            require_valid_property_type: !schemas
                .iter()
                .any(|s| openapi_schema::has_invalid_types(s)),
            require_structural_schema: !schemas
                .iter()
                .any(|s| !crate::schema::structural_rules::is_structural(s)),
            require_pruned_defaults: !schemas
                .iter()
                .any(|s| schema_defaults::has_unpruned_defaults(s)),
            require_atomic_set_type: !schemas
                .iter()
                .any(|s| openapi_schema::has_non_atomic_set_type(s)),
            require_map_list_keys_map_set_validation: !schemas
                .iter()
                .any(|s| openapi_schema::has_invalid_map_list_keys(s)),
        }
    }
}

/// Validates a CRD on create (`old` is `None`) or update, with kube's paths
/// and messages. The CRD should be defaulted ([`default_crd`]) and prepared
/// ([`prepare_for_create`] / [`prepare_for_update`]) first, as kube's
/// registry does before validating.
pub fn validate_crd(new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = match old {
        None => {
            let mut errs = metadata_on_create(new);
            errs.extend(validate_spec(&new["spec"], &Options::create()));
            errs
        }
        Some(old) => {
            let opts = Options::update(old);
            let mut errs = validation::object_meta_update(new, old);
            errs.extend(validation::labels(
                new.pointer("/metadata/labels"),
                "metadata.labels",
            ));
            errs.extend(validation::annotations(
                new.pointer("/metadata/annotations"),
                "metadata.annotations",
            ));
            errs.extend(validate_spec(&new["spec"], &opts));
            errs.extend(immutable_spec_fields(&new["spec"], &old["spec"], &opts));
            errs
        }
    };
    errs.extend(names::validate_names(
        &new["status"]["acceptedNames"],
        "status.acceptedNames",
    ));
    errs.extend(stored_versions(new));
    errs.extend(api_approval(new, old));
    errs.extend(preserve_unknown_fields(new, old));
    errs
}

/// Validates an update of the status subresource: metadata may not change
/// and the accepted names must be valid.
pub fn validate_crd_status_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validation::object_meta_update(new, old);
    errs.extend(names::validate_names(
        &new["status"]["acceptedNames"],
        "status.acceptedNames",
    ));
    errs
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn is_established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conds| {
            conds
                .iter()
                .any(|c| str_at(c, "type") == "Established" && str_at(c, "status") == "True")
        })
}

fn all_versions_have_schema(spec: &Value) -> bool {
    spec.get("versions")
        .and_then(Value::as_array)
        .is_none_or(|versions| {
            versions.iter().all(|v| {
                v.pointer("/schema/openAPIV3Schema")
                    .is_some_and(|s| !s.is_null())
            })
        })
}

/// ObjectMeta validation with kube's CRD name rule: a DNS subdomain equal
/// to `<spec.names.plural>.<spec.group>`.
fn metadata_on_create(crd: &Value) -> Vec<FieldError> {
    let required = format!(
        "{}.{}",
        str_at(&crd["spec"]["names"], "plural"),
        str_at(&crd["spec"], "group")
    );
    let must_be = "must be spec.names.plural+\".\"+spec.group";
    let mut errs = validation::object_meta(crd, false, validation::NameRule::Subdomain);
    let generate_name = crd
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !generate_name.is_empty() && generate_name != required {
        errs.insert(
            0,
            FieldError::invalid("metadata.generateName", generate_name, must_be),
        );
    }
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !name.is_empty() && name != required {
        let at = errs
            .iter()
            .rposition(|e| e.field == "metadata.name")
            .map_or(0, |p| p + 1);
        errs.insert(at, FieldError::invalid("metadata.name", name, must_be));
    }
    errs
}

/// kube's `validateCustomResourceDefinitionSpec`, in its order.
fn validate_spec(spec: &Value, opts: &Options) -> Vec<FieldError> {
    let mut opts = opts.clone();
    let mut errs = Vec::new();
    let group = str_at(spec, "group");
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else {
        let problems = validation::dns1123_subdomain(group);
        if !problems.is_empty() {
            errs.push(FieldError::invalid("spec.group", group, problems.join(",")));
        } else if !group.contains('.') {
            errs.push(FieldError::invalid(
                "spec.group",
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
    match str_at(spec, "scope") {
        "" => errs.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            other,
            &["Cluster", "Namespaced"],
        )),
    }

    let preserve_unknown = spec
        .get("preserveUnknownFields")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if !preserve_unknown {
        opts.require_structural_schema = true;
    }
    let internal = InternalSpec::new(spec);
    if internal
        .validation
        .and_then(|v| v.get("openAPIV3Schema"))
        .is_none_or(Value::is_null)
    {
        for (i, v) in internal.versions.iter().enumerate() {
            let has_schema = v
                .pointer("/schema/openAPIV3Schema")
                .is_some_and(|s| !s.is_null());
            let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            if opts.require_open_api_schema && !has_schema {
                errs.push(FieldError::required(path, "schemas are required"));
            } else if !opts.require_open_api_schema
                && !preserve_unknown
                && !has_schema
                && v.get("served") == Some(&Value::Bool(true))
            {
                errs.push(FieldError::required(
                    path,
                    "because otherwise all fields are pruned",
                ));
            }
        }
    }
    let schemas = openapi_schema::all_schemas(spec);
    if opts.allow_defaults && schemas.iter().any(|s| openapi_schema::has_defaults(s)) {
        opts.require_structural_schema = true;
        if preserve_unknown {
            errs.push(FieldError::invalid(
                "spec.preserveUnknownFields",
                true,
                "must be false in order to use defaults in the schema",
            ));
        }
    }
    if schemas
        .iter()
        .any(|s| openapi_schema::has_kubernetes_extensions(s))
    {
        opts.require_structural_schema = true;
    }

    let mut storage = 0;
    let mut seen = Vec::new();
    let mut unique = true;
    for (i, version) in internal.versions.iter().enumerate() {
        let vpath = index("spec.versions", i);
        if version.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        let name = str_at(version, "name");
        if seen.contains(&name) {
            unique = false;
        } else {
            seen.push(name);
        }
        let problems = validation::dns1035_label(name);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                child(&vpath, "name"),
                name,
                problems.join(","),
            ));
        }
        let status_enabled = hoisting::has_status(internal.subresources_for(i));
        errs.extend(validate_version(
            &internal,
            i,
            &vpath,
            status_enabled,
            &opts,
        ));
    }
    let versions_value = spec.get("versions").cloned().unwrap_or(Value::Null);
    if !unique {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_value.clone(),
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_value,
            "must have exactly one version marked as storage version",
        ));
    }
    if let Some(first) = internal
        .versions
        .first()
        .map(|v| str_at(v, "name"))
        .filter(|n| !n.is_empty())
    {
        let problems = validation::dns1035_label(first);
        if !problems.is_empty() {
            errs.push(FieldError::invalid(
                "spec.version",
                first,
                problems.join(","),
            ));
        }
    }

    let names = &spec["names"];
    for field in ["plural", "singular", "kind", "listKind"] {
        if str_at(names, field).is_empty() {
            errs.push(FieldError::required(format!("spec.names.{field}"), ""));
        }
    }
    errs.extend(names::validate_names(names, "spec.names"));
    errs.extend(openapi_schema::validate_validation(
        internal.validation,
        internal.any_status_enabled(),
        &opts,
        "spec.validation",
    ));
    errs.extend(subresources::validate_subresources(
        internal.subresources,
        "spec.subresources",
    ));
    for (j, col) in internal.columns.iter().enumerate() {
        errs.extend(columns::validate_column(
            col,
            &index("spec.additionalPrinterColumns", j),
        ));
    }
    if !internal.selectable_fields.is_empty() {
        match internal.validation {
            None => errs.push(FieldError::invalid(
                "spec.selectableFields",
                "",
                "selectableFields may only be set when validations.schema is included",
            )),
            Some(validation) => {
                errs.extend(selectable_fields::validate_with_schema(
                    &internal.selectable_fields,
                    validation,
                    "spec.schema.openAPIV3Schema",
                    "spec.selectableFields",
                ));
            }
        }
    }
    if let Some(conv) = spec.get("conversion").filter(|c| !c.is_null()) {
        let strategy = str_at(conv, "strategy");
        if strategy != "None" && preserve_unknown {
            errs.push(FieldError::invalid(
                "spec.conversion.strategy",
                strategy,
                "must be None if spec.preserveUnknownFields is true",
            ));
        }
        errs.extend(conversion::validate_conversion(
            conv,
            opts.require_recognized_conversion_review_version,
            "spec.conversion",
        ));
    }
    errs
}

/// kube's `validateCustomResourceDefinitionVersion` for `versions[i]`.
fn validate_version(
    internal: &InternalSpec<'_>,
    i: usize,
    vpath: &str,
    status_enabled: bool,
    opts: &Options,
) -> Vec<FieldError> {
    let version = internal.versions[i];
    let mut errs = Vec::new();
    for msg in deprecation_warning_problems(version) {
        errs.push(FieldError::invalid(
            child(vpath, "deprecationWarning"),
            version["deprecationWarning"].clone(),
            msg,
        ));
    }
    errs.extend(openapi_schema::validate_validation(
        internal.version_schema(i),
        status_enabled,
        opts,
        &child(vpath, "schema"),
    ));
    errs.extend(subresources::validate_subresources(
        internal.version_subresources(i),
        &child(vpath, "subresources"),
    ));
    for (j, col) in internal.version_columns(i).iter().enumerate() {
        errs.extend(columns::validate_column(
            col,
            &index(&child(vpath, "additionalPrinterColumns"), j),
        ));
    }
    let fields = internal.version_selectable_fields(i);
    if !fields.is_empty() {
        match internal.version_schema(i).and_then(|s| s.get("openAPIV3Schema")).filter(|s| !s.is_null()) {
            None => errs.push(FieldError::invalid(
                child(vpath, "selectableFields"),
                "",
                "selectableFields may only be set when version.schema.openAPIV3Schema is not included",
            )),
            Some(_) => {
                let validation = internal.version_schema(i).unwrap_or(&Value::Null);
                errs.extend(selectable_fields::validate_with_schema(
                    &fields,
                    validation,
                    &child(vpath, "schema.openAPIV3Schema"),
                    &child(vpath, "selectableFields"),
                ));
            }
        }
    }
    errs
}

fn deprecation_warning_problems(version: &Value) -> Vec<String> {
    let deprecated = version
        .get("deprecated")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let Some(warning) = version.get("deprecationWarning").filter(|w| !w.is_null()) else {
        return Vec::new();
    };
    if !deprecated {
        return vec!["can only be set for deprecated versions".into()];
    }
    let warning = warning.as_str().unwrap_or_default();
    let mut out = Vec::new();
    if warning.len() > 256 {
        out.push("must be <= 256 characters long".into());
    }
    if warning.is_empty() {
        out.push("must not be an empty string".into());
    }
    for (i, c) in warning.char_indices() {
        if c.is_control() {
            out.push(format!(
                "must only contain printable UTF-8 characters; control character found at index {i}"
            ));
            break;
        }
        if c.is_whitespace() && c != ' ' {
            out.push(format!(
                "must only contain printable UTF-8 characters; non-printable character found at index {i}"
            ));
            break;
        }
    }
    out
}

/// Fields that may not change: group and plural always, scope and kind
/// once the CRD is established.
fn immutable_spec_fields(new: &Value, old: &Value, opts: &Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut immutable = |path: &str, n: &Value, o: &Value| {
        if n != o {
            errs.push(FieldError::invalid(path, n.clone(), "field is immutable"));
        }
    };
    if opts.require_immutable_names {
        immutable("spec.scope", &new["scope"], &old["scope"]);
        immutable(
            "spec.names.kind",
            &new["names"]["kind"],
            &old["names"]["kind"],
        );
    }
    immutable("spec.group", &new["group"], &old["group"]);
    immutable(
        "spec.names.plural",
        &new["names"]["plural"],
        &old["names"]["plural"],
    );
    errs
}

/// `status.storedVersions` must hold the storage version and only versions
/// still listed in the spec.
fn stored_versions(crd: &Value) -> Vec<FieldError> {
    let path = "status.storedVersions";
    let stored: Vec<&str> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let stored_value = Value::from(stored.clone());
    if stored.is_empty() {
        return vec![FieldError::invalid(
            path,
            stored_value,
            "must have at least one stored version",
        )];
    }
    let versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let mut errs = Vec::new();
    for v in &versions {
        let name = str_at(v, "name");
        if v.get("storage").and_then(Value::as_bool) == Some(true) && !stored.contains(&name) {
            errs.push(FieldError::invalid(
                path,
                stored_value.clone(),
                format!("must have the storage version {name}"),
            ));
        }
    }
    let mut reported = Vec::new();
    for (i, s) in stored.iter().enumerate().rev() {
        if reported.contains(s) || versions.iter().any(|v| str_at(v, "name") == *s) {
            continue;
        }
        reported.push(*s);
        errs.push(FieldError::invalid(
            index(path, i),
            *s,
            format!("missing from spec.versions; {s} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {s} and removes {s} from status.storedVersions"),
        ));
    }
    errs
}

const API_APPROVED: &str = "api-approved.kubernetes.io";

fn approval_state(crd: &Value) -> (&'static str, Option<String>) {
    let Some(annotation) = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(API_APPROVED))
        .and_then(Value::as_str)
    else {
        return ("missing", None);
    };
    if annotation.starts_with("unapproved") {
        return ("bypassed", Some(annotation.to_string()));
    }
    let approved = annotation.split_once("://").is_some_and(|(scheme, rest)| {
        !scheme.is_empty()
            && !rest.is_empty()
            && !rest.starts_with('/')
            && !annotation.contains(' ')
    });
    (
        if approved { "approved" } else { "invalid" },
        Some(annotation.to_string()),
    )
}

/// Groups under `k8s.io` and `kubernetes.io` need the API approval annotation.
fn api_approval(new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let group = str_at(&new["spec"], "group");
    let protected = ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|g| group == *g || group.ends_with(&format!(".{g}")));
    if !protected {
        return Vec::new();
    }
    let (state, value) = approval_state(new);
    if old.is_some_and(|o| approval_state(o).0 == state) {
        return Vec::new();
    }
    let path = format!("metadata.annotations[{API_APPROVED}]");
    match state {
        "missing" => vec![FieldError::required(
            path,
            format!(
                "protected groups must have approval annotation {API_APPROVED:?}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )],
        "invalid" => vec![FieldError::invalid(
            path,
            value.unwrap_or_default(),
            format!(
                "protected groups must have approval annotation {API_APPROVED:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )],
        _ => Vec::new(),
    }
}

/// `spec.preserveUnknownFields: true` is only kept for CRDs that had it.
fn preserve_unknown_fields(new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let set = |crd: &Value| {
        crd.pointer("/spec/preserveUnknownFields")
            .and_then(Value::as_bool)
            == Some(true)
    };
    if old.is_some_and(set) || !set(new) {
        return Vec::new();
    }
    vec![FieldError::invalid(
        "spec.preserveUnknownFields",
        true,
        "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SCHEMA: &str = "spec.validation.openAPIV3Schema";

    fn base() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": {
                        "replicas": {"type": "integer"},
                        "tags": {"type": "array", "items": {"type": "string"}}
                    }}}
                }}}],
                "conversion": {"strategy": "None"}
            }
        })
    }

    /// The schema of the first version's `spec` property.
    fn spec_schema(crd: &mut Value) -> &mut Value {
        &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    }

    fn create(crd: &Value) -> Vec<String> {
        let mut crd = crd.clone();
        default_crd(&mut crd);
        prepare_for_create(&mut crd);
        validate_crd(&crd, None)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn dns1035(value: &str) -> String {
        validation::dns1035_label(value).join(",")
    }

    #[test]
    fn create_table() {
        type Mutate = fn(&mut Value);
        let cases: Vec<(&str, Mutate, Vec<String>)> = vec![
            ("valid", |_| {}, vec![]),
            (
                "name must be plural.group",
                |c| c["metadata"]["name"] = json!("gadgets.example.com"),
                vec![r#"metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group"#.into()],
            ),
            (
                "group needs a dot",
                |c| {
                    c["spec"]["group"] = json!("example");
                    c["metadata"]["name"] = json!("widgets.example");
                },
                vec![r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#.into()],
            ),
            (
                "group required",
                |c| c["spec"]["group"] = json!(""),
                vec![
                    r#"metadata.name: Invalid value: "widgets.example.com": must be spec.names.plural+"."+spec.group"#.into(),
                    "spec.group: Required value".into(),
                ],
            ),
            (
                "scope supported",
                |c| c["spec"]["scope"] = json!("Global"),
                vec![r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#.into()],
            ),
            ("scope required", |c| c["spec"]["scope"] = json!(""), vec!["spec.scope: Required value".into()]),
            (
                "kind and listKind differ",
                |c| c["spec"]["names"]["listKind"] = json!("Widget"),
                vec![r#"spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same"#.into()],
            ),
            (
                "kind may have mixed case only",
                |c| {
                    c["spec"]["names"]["kind"] = json!("Wid_get");
                    c["spec"]["names"]["listKind"] = json!("WidgetList");
                },
                vec![format!(r#"spec.names.kind: Invalid value: "Wid_get": may have mixed case, but should otherwise match: {}"#, dns1035("wid_get"))],
            ),
            (
                "short names and categories are DNS-1035 labels",
                |c| {
                    c["spec"]["names"]["shortNames"] = json!(["w", "W1"]);
                    c["spec"]["names"]["categories"] = json!(["all", "my_cat"]);
                },
                vec![
                    format!(r#"spec.names.shortNames[1]: Invalid value: "W1": {}"#, dns1035("W1")),
                    format!(r#"spec.names.categories[1]: Invalid value: "my_cat": {}"#, dns1035("my_cat")),
                ],
            ),
            (
                "version names are DNS-1035 labels",
                |c| c["spec"]["versions"][0]["name"] = json!("V1"),
                vec![
                    format!(r#"spec.versions[0].name: Invalid value: "V1": {}"#, dns1035("V1")),
                    format!(r#"spec.version: Invalid value: "V1": {}"#, dns1035("V1")),
                ],
            ),
            (
                "versions required",
                |c| c["spec"]["versions"] = json!([]),
                vec![
                    "spec.versions: Invalid value: []: must have exactly one version marked as storage version".into(),
                    "status.storedVersions: Invalid value: []: must have at least one stored version".into(),
                ],
            ),
            (
                "version names unique",
                |c| {
                    let mut second = c["spec"]["versions"][0].clone();
                    second["storage"] = json!(false);
                    c["spec"]["versions"].as_array_mut().unwrap().push(second);
                },
                vec!["spec.versions: Invalid value: VERSIONS: must contain unique version names".into()],
            ),
            (
                "exactly one storage version",
                |c| {
                    let mut second = c["spec"]["versions"][0].clone();
                    second["name"] = json!("v2");
                    c["spec"]["versions"].as_array_mut().unwrap().push(second);
                },
                vec![
                    "spec.versions: Invalid value: VERSIONS: must have exactly one version marked as storage version".into(),
                    r#"status.storedVersions: Invalid value: ["v1"]: must have the storage version v2"#.into(),
                ],
            ),
            (
                "schemas are required in v1",
                |c| {
                    c["spec"]["versions"][0].as_object_mut().unwrap().remove("schema");
                },
                vec!["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required".into()],
            ),
            (
                "root type required",
                |c| {
                    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"].as_object_mut().unwrap().remove("type");
                },
                vec![format!("{SCHEMA}.type: Required value: must not be empty at the root")],
            ),
            (
                "per-version schemas are reported per version",
                |c| {
                    let mut second = c["spec"]["versions"][0].clone();
                    second["name"] = json!("v2");
                    second["storage"] = json!(false);
                    second["schema"]["openAPIV3Schema"]["properties"]["spec"].as_object_mut().unwrap().remove("type");
                    c["spec"]["versions"].as_array_mut().unwrap().push(second);
                },
                vec!["spec.versions[1].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields".into()],
            ),
            (
                "field types required",
                |c| {
                    spec_schema(c)["properties"]["replicas"].as_object_mut().unwrap().remove("type");
                },
                vec![format!("{SCHEMA}.properties[spec].properties[replicas].type: Required value: must not be empty for specified object fields")],
            ),
            (
                "$ref forbidden",
                |c| spec_schema(c)["properties"]["ref"] = json!({"$ref": "#/definitions/x"}),
                vec![format!("{SCHEMA}.properties[spec].properties[ref].$ref: Forbidden: $ref is not supported")],
            ),
            (
                "uniqueItems forbidden",
                |c| spec_schema(c)["properties"]["tags"]["uniqueItems"] = json!(true),
                vec![format!("{SCHEMA}.properties[spec].properties[tags].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic")],
            ),
            (
                "properties and additionalProperties exclusive",
                |c| spec_schema(c)["additionalProperties"] = json!({"type": "string"}),
                vec![format!("{SCHEMA}.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive")],
            ),
            (
                "type null",
                |c| spec_schema(c)["properties"]["nothing"] = json!({"type": "null"}),
                vec![
                    format!(r#"{SCHEMA}.properties[spec].properties[nothing].type: Unsupported value: "null": supported values: "array", "boolean", "integer", "number", "object", "string""#),
                    format!("{SCHEMA}.properties[spec].properties[nothing].type: Forbidden: type cannot be set to null, use nullable as an alternative"),
                ],
            ),
            (
                "nullable root",
                |c| c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["nullable"] = json!(true),
                vec![format!("{SCHEMA}.nullable: Forbidden: nullable cannot be true at the root")],
            ),
            (
                "metadata only name and generateName",
                |c| {
                    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"] =
                        json!({"type": "object", "properties": {"labels": {"type": "object"}}});
                },
                vec![format!("{SCHEMA}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified")],
            ),
            (
                "no defaults in top-level metadata",
                |c| {
                    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"] = json!({"type": "object", "default": {}});
                },
                vec![format!("{SCHEMA}.properties[metadata].default: Forbidden: must not be set in top-level metadata")],
            ),
            (
                "embedded resource must be an object",
                |c| spec_schema(c)["properties"]["template"] = json!({"type": "string", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}),
                vec![format!(r#"{SCHEMA}.properties[spec].properties[template].type: Invalid value: "string": must be object if x-kubernetes-embedded-resource is true"#)],
            ),
            (
                "defaults validate against their schema",
                |c| spec_schema(c)["properties"]["replicas"]["default"] = json!("three"),
                vec![format!(r#"{SCHEMA}.properties[spec].properties[replicas].default: Invalid value: "string":  in body must be of type integer: "string""#)],
            ),
            (
                "defaults must be pruned",
                |c| spec_schema(c)["default"] = json!({"replicas": 1, "foo": 1}),
                vec![format!(r#"{SCHEMA}.properties[spec].default: Invalid value: {{"replicas":1,"foo":1}}: must not have unknown fields"#)],
            ),
            (
                "list type on an object",
                |c| spec_schema(c)["x-kubernetes-list-type"] = json!("set"),
                vec![format!(r#"{SCHEMA}.properties[spec].type: Invalid value: "object": must be array if x-kubernetes-list-type is specified"#)],
            ),
            (
                "list type supported",
                |c| spec_schema(c)["properties"]["tags"]["x-kubernetes-list-type"] = json!("bag"),
                vec![format!(r#"{SCHEMA}.properties[spec].properties[tags].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#)],
            ),
            (
                "map lists need keys",
                |c| {
                    spec_schema(c)["properties"]["ports"] = json!({"type": "array", "x-kubernetes-list-type": "map",
                        "items": {"type": "object", "properties": {"name": {"type": "string"}}}});
                },
                vec![format!("{SCHEMA}.properties[spec].properties[ports].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map")],
            ),
            (
                "map keys are required or defaulted",
                |c| {
                    spec_schema(c)["properties"]["ports"] = json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {"name": {"type": "string"}}}});
                },
                vec![format!("{SCHEMA}.properties[spec].properties[ports].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property")],
            ),
            (
                "map keys are item properties",
                |c| {
                    spec_schema(c)["properties"]["ports"] = json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                        "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}});
                },
                vec![format!(r#"{SCHEMA}.properties[spec].properties[ports].x-kubernetes-list-map-keys: Invalid value: ["port"]: entries must all be names of item properties"#)],
            ),
            (
                "set items must be atomic",
                |c| {
                    spec_schema(c)["properties"]["tags"] = json!({"type": "array", "x-kubernetes-list-type": "set",
                        "items": {"type": "object", "properties": {"a": {"type": "string"}}}});
                },
                vec![format!("{SCHEMA}.properties[spec].properties[tags].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set")],
            ),
            (
                "map type only on objects",
                |c| spec_schema(c)["properties"]["tags"]["x-kubernetes-map-type"] = json!("atomic"),
                vec![format!(r#"{SCHEMA}.properties[spec].properties[tags].type: Invalid value: "array": must be object if x-kubernetes-map-type is specified"#)],
            ),
            (
                "status subresource restricts the root",
                |c| {
                    c["spec"]["versions"][0]["subresources"] = json!({"status": {}});
                    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["maxProperties"] = json!(5);
                },
                vec!["ROOT_FIELDS".into()],
            ),
            (
                "scale paths",
                |c| {
                    c["spec"]["versions"][0]["subresources"] = json!({"scale": {
                        "specReplicasPath": "spec.replicas", "statusReplicasPath": ".spec.replicas", "labelSelectorPath": ".metadata.labels"}});
                },
                vec![
                    r#"spec.subresources.scale.specReplicasPath: Invalid value: "spec.replicas": must be a simple json path starting with ."#.into(),
                    r#"spec.subresources.scale.statusReplicasPath: Invalid value: ".spec.replicas": should be a json path under .status"#.into(),
                    r#"spec.subresources.scale.labelSelectorPath: Invalid value: ".metadata.labels": should be a json path under either .spec or .status"#.into(),
                ],
            ),
            (
                "scale replica paths required",
                |c| c["spec"]["versions"][0]["subresources"] = json!({"scale": {"statusReplicasPath": ".status.replicas"}}),
                vec!["spec.subresources.scale.specReplicasPath: Required value".into()],
            ),
            (
                "printer columns",
                |c| {
                    c["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
                        {"name": "Replicas", "type": "float", "jsonPath": ".spec.replicas"},
                        {"name": "Age", "type": "date", "format": "time"},
                        {"type": "string", "jsonPath": "spec.x"}
                    ]);
                },
                vec![
                    r#"spec.additionalPrinterColumns[0].type: Invalid value: "float": must be one of boolean,date,integer,number,string"#.into(),
                    r#"spec.additionalPrinterColumns[1].format: Invalid value: "time": must be one of byte,date,date-time,double,float,int32,int64,password"#.into(),
                    "spec.additionalPrinterColumns[1].JSONPath: Required value".into(),
                    "spec.additionalPrinterColumns[2].name: Required value".into(),
                    r#"spec.additionalPrinterColumns[2].JSONPath: Invalid value: "spec.x": must be a simple json path starting with ."#.into(),
                ],
            ),
            (
                "selectable fields",
                |c| c["spec"]["versions"][0]["selectableFields"] = json!([{"jsonPath": ".spec"}, {"jsonPath": ".spec.replicas"}, {"jsonPath": ".spec.replicas"}]),
                vec![
                    r#"spec.selectableFields[0].jsonPath: Invalid value: ".spec": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."#.into(),
                    r#"spec.selectableFields[2].jsonPath: Duplicate value: ".spec.replicas""#.into(),
                ],
            ),
            (
                "conversion webhook config required",
                |c| c["spec"]["conversion"] = json!({"strategy": "Webhook"}),
                vec![
                    "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook".into(),
                    "spec.conversion.conversionReviewVersions: Required value".into(),
                ],
            ),
            (
                "conversion url xor service",
                |c| {
                    c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                        "clientConfig": {"url": "https://a", "service": {"name": "s", "namespace": "n"}}}});
                },
                vec!["spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required".into()],
            ),
            (
                "no webhook without the Webhook strategy",
                |c| c["spec"]["conversion"] = json!({"strategy": "None", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://a"}}}),
                vec![
                    "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook".into(),
                    "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook".into(),
                ],
            ),
            (
                "conversion strategy supported",
                |c| c["spec"]["conversion"] = json!({"strategy": "Magic"}),
                vec![r#"spec.conversion.strategy: Unsupported value: "Magic": supported values: "None", "Webhook""#.into()],
            ),
            (
                "preserveUnknownFields cannot be set",
                |c| c["spec"]["preserveUnknownFields"] = json!(true),
                vec!["spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead".into()],
            ),
            (
                "protected groups need approval",
                |c| {
                    c["spec"]["group"] = json!("widgets.k8s.io");
                    c["metadata"]["name"] = json!("widgets.widgets.k8s.io");
                },
                vec![r#"metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111"#.into()],
            ),
            (
                "approved protected group",
                |c| {
                    c["spec"]["group"] = json!("widgets.k8s.io");
                    c["metadata"]["name"] = json!("widgets.widgets.k8s.io");
                    c["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "https://github.com/kubernetes/kubernetes/pull/1"});
                },
                vec![],
            ),
            (
                "deprecation warning only when deprecated",
                |c| c["spec"]["versions"][0]["deprecationWarning"] = json!("old"),
                vec![r#"spec.versions[0].deprecationWarning: Invalid value: "old": can only be set for deprecated versions"#.into()],
            ),
            (
                "validation rule shape",
                |c| spec_schema(c)["x-kubernetes-validations"] = json!([{"rule": " "}, {"rule": "self.replicas > 0", "reason": "Nope"}]),
                vec![
                    format!("{SCHEMA}.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified"),
                    format!(r#"{SCHEMA}.properties[spec].x-kubernetes-validations[1].reason: Unsupported value: "Nope": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#),
                ],
            ),
        ];
        assert!(cases.len() >= 25);
        for (name, mutate, want) in cases {
            let mut crd = base();
            mutate(&mut crd);
            let versions = crd["spec"]["versions"].to_string();
            let schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].to_string();
            let want: Vec<String> = want
                .into_iter()
                .map(|w| match w.as_str() {
                    "ROOT_FIELDS" => format!("{SCHEMA}: Invalid value: {schema}: only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled"),
                    _ => w.replace("VERSIONS", &versions),
                })
                .collect();
            assert_eq!(create(&crd), want, "case {name:?}");
        }
    }

    fn established(mut crd: Value) -> Value {
        default_crd(&mut crd);
        prepare_for_create(&mut crd);
        crd["status"]["conditions"] = json!([{"type": "Established", "status": "True"}]);
        crd
    }

    fn update(old: &Value, mutate: fn(&mut Value)) -> Vec<String> {
        let mut new = old.clone();
        mutate(&mut new);
        default_crd(&mut new);
        prepare_for_update(&mut new, old);
        validate_crd(&new, Some(old))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn update_table() {
        type Mutate = fn(&mut Value);
        let old = established(base());
        let cases: Vec<(&str, Mutate, Vec<&str>)> = vec![
            ("no change", |_| {}, vec![]),
            (
                "group immutable",
                |c| c["spec"]["group"] = json!("other.com"),
                vec![r#"spec.group: Invalid value: "other.com": field is immutable"#],
            ),
            (
                "plural immutable",
                |c| c["spec"]["names"]["plural"] = json!("gadgets"),
                vec![r#"spec.names.plural: Invalid value: "gadgets": field is immutable"#],
            ),
            (
                "scope immutable once established",
                |c| c["spec"]["scope"] = json!("Cluster"),
                vec![r#"spec.scope: Invalid value: "Cluster": field is immutable"#],
            ),
            (
                "kind immutable once established",
                |c| {
                    c["spec"]["names"]["kind"] = json!("Gadget");
                    c["spec"]["names"]["listKind"] = json!("GadgetList");
                },
                vec![r#"spec.names.kind: Invalid value: "Gadget": field is immutable"#],
            ),
            (
                "adding a version keeps the old storage version stored",
                |c| {
                    c["spec"]["versions"][0]["storage"] = json!(false);
                    let mut v2 = c["spec"]["versions"][0].clone();
                    v2["name"] = json!("v2");
                    v2["storage"] = json!(true);
                    c["spec"]["versions"].as_array_mut().unwrap().push(v2);
                },
                vec![],
            ),
            (
                "a stored version cannot be dropped",
                |c| c["spec"]["versions"][0]["name"] = json!("v2"),
                vec![
                    r#"status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1 and removes v1 from status.storedVersions"#,
                ],
            ),
            (
                "metadata name immutable",
                |c| c["metadata"]["name"] = json!("x.example.com"),
                vec![r#"metadata.name: Invalid value: "x.example.com": field is immutable"#],
            ),
        ];
        for (name, mutate, want) in cases {
            assert_eq!(update(&old, mutate), want, "case {name:?}");
        }

        let mut not_established = base();
        default_crd(&mut not_established);
        prepare_for_create(&mut not_established);
        assert!(update(&not_established, |c| c["spec"]["scope"] = json!("Cluster")).is_empty());
    }

    #[test]
    fn updates_keep_accepting_what_was_stored() {
        // A set of non-atomic objects is refused on create but kept on update.
        let mut crd = base();
        spec_schema(&mut crd)["properties"]["tags"] = json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "properties": {"a": {"type": "string"}}}});
        assert_eq!(create(&crd).len(), 1);
        let old = established(crd);
        assert!(update(&old, |c| c["spec"]["versions"][0]["served"] = json!(false)).is_empty());
    }

    #[test]
    fn status_updates_check_accepted_names() {
        let mut old = base();
        prepare_for_create(&mut old);
        let mut new = old.clone();
        new["status"]["acceptedNames"] = json!({"plural": "Widgets", "kind": "Widget"});
        let errs: Vec<String> = validate_crd_status_update(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            vec![format!(
                r#"status.acceptedNames.plural: Invalid value: "Widgets": {}"#,
                dns1035("Widgets")
            )]
        );
    }
}
