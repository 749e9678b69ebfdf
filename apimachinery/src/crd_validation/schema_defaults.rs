//! Defaults in a CRD schema must validate against their own schema and hold
//! no field pruning would drop (kube's `structuraldefaulting.ValidateDefaults`).

use crate::error::FieldError;
use serde_json::Value;

use crate::schema::embedded::validate_embedded;
use crate::schema::path::{child, key};
use crate::schema::pruning::prune;
use crate::schema::structural::Structural;
use crate::schema::structural_rules::validate_structural;
use crate::schema::validation::validate_values;

/// Checks every `default` reachable through `properties` and `items`
/// (kube does not follow `additionalProperties` here). `path` is the
/// schema's own path.
pub(super) fn validate_defaults(
    path: &str,
    s: &Structural,
    require_pruned: bool,
) -> Vec<FieldError> {
    let mut root = s.clone();
    root.x_embedded_resource = true;
    let mut errs = Vec::new();
    walk(path, &root, false, require_pruned, &mut errs);
    errs
}

fn walk(
    path: &str,
    s: &Structural,
    inside_meta: bool,
    require_pruned: bool,
    errs: &mut Vec<FieldError>,
) {
    let inside_meta = inside_meta && !s.x_embedded_resource;
    if let Some(default) = &s.default {
        let default_path = child(path, "default");
        if inside_meta {
            errs.extend(validate_values(Some(&default_path), default, s));
        } else {
            if require_pruned && !is_pruned(default, s) {
                errs.push(FieldError::invalid(
                    &default_path,
                    default.clone(),
                    "must not have unknown fields",
                ));
            }
            let embedded = validate_embedded(&default_path, default, s, s.x_embedded_resource);
            if embedded.is_empty() {
                errs.extend(validate_values(Some(&default_path), default, s));
            } else {
                errs.extend(embedded);
            }
        }
    }
    if let Some(items) = &s.items {
        walk(
            &child(path, "items"),
            items,
            inside_meta,
            require_pruned,
            errs,
        );
    }
    for (k, prop) in s.properties.iter().flatten() {
        let sub_inside = inside_meta
            || (s.x_embedded_resource && matches!(k.as_str(), "metadata" | "apiVersion" | "kind"));
        walk(
            &key(&child(path, "properties"), k),
            prop,
            sub_inside,
            require_pruned,
            errs,
        );
    }
}

fn is_pruned(default: &Value, s: &Structural) -> bool {
    let mut pruned = default.clone();
    prune(&mut pruned, s, s.x_embedded_resource).is_empty() && pruned == *default
}

/// Whether a stored schema has defaults that pruning would change (so the
/// rule is not newly enforced on update).
pub(super) fn has_unpruned_defaults(schema: &Value) -> bool {
    let Ok(s) = Structural::new(schema) else {
        return false;
    };
    if !validate_structural("", &s).is_empty() {
        return false;
    }
    let mut found = false;
    visit(&s, &mut |n| {
        if let Some(d) = &n.default {
            found |= !is_pruned(d, n);
        }
    });
    found
}

fn visit(s: &Structural, f: &mut dyn FnMut(&Structural)) {
    f(s);
    if let Some(items) = &s.items {
        visit(items, f);
    }
    for (_, p) in s.properties.iter().flatten() {
        visit(p, f);
    }
}
