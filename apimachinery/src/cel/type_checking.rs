//! kube's type checking of ValidatingAdmissionPolicies: each validation's
//! `expression` and `messageExpression` is checked with `object` and
//! `oldObject` typed by the schema of every kind the policy's
//! `matchConstraints` name (up to [`MAX_TYPES_TO_CHECK`]), `params` by the
//! schema of its `paramKind`, `variables` by the types of the policy's
//! variables; what fails becomes the policy's
//! `status.typeChecking.expressionWarnings`.
//!
//! ```ignore
//! let warnings = type_check(&policy["spec"], &schemas);
//! policy["status"]["typeChecking"]["expressionWarnings"] =
//!     warnings.iter().map(ExpressionWarning::to_value).collect();
//! ```
//!
//! Type checking never changes what a policy does: a kind without a
//! schema is skipped. Where kube types `request` and `namespaceObject`,
//! they are `dyn` here (as is `params` when its kind has no schema), so a
//! misspelling under them goes unreported.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::admission::ROOTS;
use super::check::{NoSizes, Ty, check_roots};
use super::schema::{DeclKind, DeclType, MAX_REQUEST_SIZE_BYTES, Schema, decl_type};
use crate::group_version::GroupVersionKind;

/// kube's bound on the kinds a policy is checked against.
pub const MAX_TYPES_TO_CHECK: usize = 10;

/// Where type checking finds the kinds and their schemas.
pub trait KindSchemas {
    /// The kind served as `resource` in `group`/`version`, if any.
    fn kind(&self, group: &str, version: &str, resource: &str) -> Option<String>;
    /// The kind's structural schema (references inlined), if known.
    fn schema(&self, gvk: &GroupVersionKind) -> Option<Value>;
}

/// One entry of `status.typeChecking.expressionWarnings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpressionWarning {
    /// The expression's field (`spec.validations[0].expression`).
    pub field_ref: String,
    /// What failed, kind by kind.
    pub warning: String,
}

impl ExpressionWarning {
    /// The warning as the API writes it.
    pub fn to_value(&self) -> Value {
        json!({"fieldRef": self.field_ref, "warning": self.warning})
    }
}

/// The type-checking warnings of a policy's `spec`, in kube's words.
pub fn type_check(spec: &Value, schemas: &dyn KindSchemas) -> Vec<ExpressionWarning> {
    let params = param_kind(spec)
        .and_then(|gvk| typed(schemas, &gvk))
        .unwrap_or(Ty::Dyn);
    let kinds: Vec<(GroupVersionKind, Vec<(&str, Ty)>)> = kinds_to_check(spec, schemas)
        .into_iter()
        .filter_map(|gvk| {
            let object = typed(schemas, &gvk)?;
            let variables = variables_type(spec, &object, &params);
            Some((gvk, roots(&object, &params, &variables)))
        })
        .collect();
    let mut warnings = Vec::new();
    let validations = spec.get("validations").and_then(Value::as_array);
    for (i, validation) in validations.into_iter().flatten().enumerate() {
        for field in ["expression", "messageExpression"] {
            let source = validation.get(field).and_then(Value::as_str);
            let Some(source) = source.filter(|s| !s.is_empty()) else {
                continue;
            };
            let warning = check_expression(source, &kinds);
            if !warning.is_empty() {
                warnings.push(ExpressionWarning {
                    field_ref: format!("spec.validations[{i}].{field}"),
                    warning,
                });
            }
        }
    }
    warnings
}

/// The CEL type of a kind's objects, if its schema is known (`dyn` for a
/// schema without a type).
fn typed(schemas: &dyn KindSchemas, gvk: &GroupVersionKind) -> Option<Ty> {
    let schema = Schema::parse(&schemas.schema(gvk)?);
    Some(decl_type(&schema, true).map_or(Ty::Dyn, |decl| Ty::from_decl(&decl)))
}

/// The roots of an expression checked against one kind: `object` and
/// `oldObject` of that kind, `params` and `variables` as given, the rest
/// `dyn`.
fn roots<'a>(object: &Ty, params: &Ty, variables: &Ty) -> Vec<(&'a str, Ty)> {
    ROOTS
        .iter()
        .map(|name| match *name {
            "object" | "oldObject" => (*name, object.clone()),
            "params" => (*name, params.clone()),
            "variables" => (*name, variables.clone()),
            _ => (*name, Ty::Dyn),
        })
        .collect()
}

/// The type of `variables` for one kind: an object with a field per
/// variable of `spec`, of the type its expression checks to (`dyn` where
/// it fails), each expression seeing the variables before it.
fn variables_type(spec: &Value, object: &Ty, params: &Ty) -> Ty {
    let mut fields: Vec<(String, Arc<DeclType>)> = Vec::new();
    let variables = spec.get("variables").and_then(Value::as_array);
    for variable in variables.into_iter().flatten() {
        let name = variable
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let source = variable
            .get("expression")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let so_far = Ty::Object(object_of(fields.clone()));
        let ty = match super::compile::parse(source) {
            Ok(program) => {
                let checked =
                    check_roots(&program, source, &roots(object, params, &so_far), &NoSizes);
                match checked.errors.is_empty() {
                    true => checked.ty,
                    false => Ty::Dyn,
                }
            }
            Err(_) => Ty::Dyn,
        };
        fields.retain(|(field, _)| field != name);
        fields.push((name.to_string(), decl_of(&ty)));
    }
    Ty::Object(object_of(fields))
}

/// An object declaration with `fields`.
fn object_of(fields: Vec<(String, Arc<DeclType>)>) -> Arc<DeclType> {
    declared(DeclKind::Object(fields))
}

/// A declaration of `kind`, with the widest size bounds.
fn declared(kind: DeclKind) -> Arc<DeclType> {
    Arc::new(DeclType {
        kind,
        max_elements: MAX_REQUEST_SIZE_BYTES - 2,
        min_size: 1,
    })
}

/// The declaration of a checked type; what a schema cannot spell is `dyn`.
fn decl_of(ty: &Ty) -> Arc<DeclType> {
    match ty {
        Ty::Object(decl) => decl.clone(),
        Ty::Bool => declared(DeclKind::Bool),
        Ty::Int => declared(DeclKind::Int),
        Ty::Double => declared(DeclKind::Double),
        Ty::String => declared(DeclKind::String),
        Ty::Bytes => declared(DeclKind::Bytes),
        Ty::Duration => declared(DeclKind::Duration),
        Ty::Timestamp => declared(DeclKind::Timestamp),
        Ty::List(item) => declared(DeclKind::List(decl_of(item))),
        Ty::Map(_, value) => declared(DeclKind::Map(decl_of(value))),
        _ => declared(DeclKind::Dyn),
    }
}

/// The errors of `source` against each kind, as kube joins them:
/// `<group>/<version>, Kind=<kind>: <errors>` and a newline per failing
/// kind, joined by newlines; empty when every kind passes.
fn check_expression(source: &str, kinds: &[(GroupVersionKind, Vec<(&str, Ty)>)]) -> String {
    let parsed = super::compile::parse(source);
    let mut failures = Vec::new();
    for (gvk, roots) in kinds {
        let errors = match &parsed {
            Ok(program) => check_roots(program, source, roots, &NoSizes).errors,
            Err(e) => vec![e.to_string()],
        };
        if !errors.is_empty() {
            failures.push(format!(
                "{}/{}, Kind={}: {}\n",
                gvk.group,
                gvk.version,
                gvk.kind,
                errors.join("\n")
            ));
        }
    }
    failures.join("\n")
}

/// The `paramKind`'s group/version/kind, if set and well formed.
fn param_kind(spec: &Value) -> Option<GroupVersionKind> {
    let param_kind = spec.get("paramKind")?;
    let api_version = param_kind.get("apiVersion")?.as_str()?;
    let kind = param_kind.get("kind")?.as_str()?;
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) if !version.contains('/') => (group, version),
        Some(_) => return None,
        None => ("", api_version),
    };
    Some(GroupVersionKind::new(group, version, kind))
}

/// kube's kinds to check: of each resource rule without wildcard groups
/// or versions, the kinds of its resources (wildcards and subresources
/// left out), sorted by group, version and kind; the first
/// [`MAX_TYPES_TO_CHECK`] found.
fn kinds_to_check(spec: &Value, schemas: &dyn KindSchemas) -> Vec<GroupVersionKind> {
    let rules = spec
        .pointer("/matchConstraints/resourceRules")
        .and_then(Value::as_array);
    let mut kinds = BTreeSet::new();
    let mut found = 0;
    for rule in rules.into_iter().flatten() {
        let strings = |key: &str| -> Vec<&str> {
            let mut list: Vec<&str> = rule
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            list.sort_unstable();
            list
        };
        let (groups, versions) = (strings("apiGroups"), strings("apiVersions"));
        if [&groups, &versions]
            .iter()
            .any(|list| list.is_empty() || list.iter().any(|s| s.contains('*')))
        {
            continue;
        }
        let mut resources = strings("resources");
        resources.retain(|r| !r.contains(['*', '/']));
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    let Some(kind) = schemas.kind(group, version, resource) else {
                        continue;
                    };
                    kinds.insert(GroupVersionKind::new(*group, *version, kind));
                    found += 1;
                    if found == MAX_TYPES_TO_CHECK {
                        return kinds.into_iter().collect();
                    }
                }
            }
        }
    }
    kinds.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::{Components, SCHEMA_PREFIX, inline_refs};
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

    /// Deployments and ReplicaSets from k8s-openapi, and a `widgets`
    /// custom resource.
    struct Schemas(Components);

    impl Schemas {
        fn new() -> Schemas {
            let mut components = Components::new();
            components.add::<Deployment>();
            components.add::<ReplicaSet>();
            Schemas(components)
        }
    }

    impl KindSchemas for Schemas {
        fn kind(&self, group: &str, version: &str, resource: &str) -> Option<String> {
            let kind = match (group, version, resource) {
                ("apps", "v1", "deployments") => "Deployment",
                ("apps", "v1", "replicasets") => "ReplicaSet",
                ("example.com", "v1", "widgets") => "Widget",
                ("", "v1", "pods") => "Pod",
                _ => return None,
            };
            Some(kind.into())
        }

        fn schema(&self, gvk: &GroupVersionKind) -> Option<Value> {
            let name = match gvk.kind.as_str() {
                "Widget" => {
                    return Some(json!({"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}));
                }
                "Deployment" => "io.k8s.api.apps.v1.Deployment",
                "ReplicaSet" => "io.k8s.api.apps.v1.ReplicaSet",
                _ => return None,
            };
            let root = json!({"$ref": format!("{SCHEMA_PREFIX}{name}")});
            Some(inline_refs(&root, self.0.schemas()))
        }
    }

    fn policy(resources: &[&str], groups: &[&str], expression: &str) -> Value {
        json!({
            "matchConstraints": {"resourceRules": [{
                "apiGroups": groups, "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": resources,
            }]},
            "validations": [{"expression": expression}],
        })
    }

    #[test]
    fn a_misspelt_field_gets_kubes_warning() {
        let spec = policy(&["deployments"], &["apps"], "object.spec.replicass > 1");
        assert_eq!(
            type_check(&spec, &Schemas::new()),
            vec![ExpressionWarning {
                field_ref: "spec.validations[0].expression".into(),
                warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicass'\n | object.spec.replicass > 1\n | ...........^\n".into(),
            }]
        );
    }

    #[test]
    fn correct_expressions_get_no_warning() {
        let schemas = Schemas::new();
        for expression in [
            "object.spec.replicas > 1",
            "object.spec.template.spec.containers.all(c, c.image.startsWith('r/'))",
            "object.metadata.name == 'x' && has(object.metadata.labels)",
            "oldObject == null || params.anything == 1",
        ] {
            let spec = policy(&["deployments"], &["apps"], expression);
            assert_eq!(type_check(&spec, &schemas), vec![], "{expression}");
        }
        let spec = policy(&["widgets"], &["example.com"], "object.spec.size < 3");
        assert_eq!(type_check(&spec, &schemas), vec![]);
    }

    #[test]
    fn every_matched_kind_is_checked_and_reported() {
        let mut spec = policy(
            &["replicasets", "deployments", "deployments/status"],
            &["apps"],
            "object.spec.nope",
        );
        spec["validations"][0]["messageExpression"] = json!("'n=' + string(object.spec.size)");
        let warnings = type_check(&spec, &Schemas::new());
        let line = |kind: &str, column: usize, field: &str, source: &str| {
            format!(
                "apps/v1, Kind={kind}: ERROR: <input>:1:{column}: undefined field '{field}'\n | {source}\n | {}^\n",
                ".".repeat(column - 1)
            )
        };
        let source = "object.spec.nope";
        assert_eq!(
            warnings[0].warning,
            format!(
                "{}\n{}",
                line("Deployment", 12, "nope", source),
                line("ReplicaSet", 12, "nope", source)
            )
        );
        assert_eq!(
            warnings[1].field_ref,
            "spec.validations[0].messageExpression"
        );
        assert_eq!(warnings.len(), 2);
    }

    #[test]
    fn wildcards_and_unknown_kinds_are_skipped() {
        let schemas = Schemas::new();
        for spec in [
            policy(&["deployments"], &["*"], "object.spec.replicass > 1"),
            policy(&["*"], &["apps"], "object.spec.replicass > 1"),
            policy(&["pods"], &[""], "object.spec.replicass > 1"),
            policy(&["gadgets"], &["apps"], "object.spec.replicass > 1"),
        ] {
            assert_eq!(type_check(&spec, &schemas), vec![], "{spec}");
        }
    }

    #[test]
    fn variables_are_typed_by_their_expressions() {
        let schemas = Schemas::new();
        let mut spec = policy(&["deployments"], &["apps"], "variables.nope");
        spec["variables"] = json!([
            {"name": "replicas", "expression": "object.spec.replicas"},
            {"name": "spec", "expression": "object.spec"},
            {"name": "many", "expression": "variables.replicas > 3"},
        ]);
        let warnings = type_check(&spec, &schemas);
        assert!(
            warnings[0].warning.contains("undefined field 'nope'"),
            "{warnings:?}"
        );
        spec["validations"][0]["expression"] = json!("variables.spec.replicass > 1");
        let warnings = type_check(&spec, &schemas);
        assert!(
            warnings[0].warning.contains("undefined field 'replicass'"),
            "{warnings:?}"
        );
        for fine in [
            "variables.many || variables.replicas < variables.spec.replicas",
            "variables.spec.template.spec.containers.all(c, c.name != '')",
        ] {
            spec["validations"][0]["expression"] = json!(fine);
            assert_eq!(type_check(&spec, &schemas), vec![], "{fine}");
        }
    }

    #[test]
    fn params_are_typed_by_their_kind() {
        let mut spec = policy(&["deployments"], &["apps"], "params.spec.sise > 1");
        spec["paramKind"] = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
        let warnings = type_check(&spec, &Schemas::new());
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].warning.contains("undefined field 'sise'"),
            "{}",
            warnings[0].warning
        );
    }
}
