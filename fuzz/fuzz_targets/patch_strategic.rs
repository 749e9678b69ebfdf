//! Strategic merge patch (`application/strategic-merge-patch+json`), typed by
//! the real OpenAPI v3 schema of the original's `kind` (Deployment, Pod,
//! Service, ...) when it is one of those, untyped otherwise.
//!
//! Input: the original object as JSON on the first line, the patch body after it.
#![no_main]

use apimachinery::patch::{PatchType, Schema, apply_patch};
use kubechain_fuzz::{json, kind_schemas, split_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (original, patch) = split_line(data);
    let Some(original) = json(original) else {
        return;
    };
    let schemas = kind_schemas();
    let schema = schemas
        .root_of(&original)
        .map(|root| Schema::new(root, &schemas.components));
    let typed = schema.is_some();
    let patched = apply_patch(PatchType::StrategicMerge, &original, patch, schema);
    // Without a schema or directives, a strategic merge patch is a JSON merge patch.
    if !typed
        && original.is_object()
        && json(patch).is_some_and(|p| p.is_object() && !has_directive(&p))
    {
        let merged = apply_patch(PatchType::Merge, &original, patch, None);
        assert_eq!(
            patched.ok(),
            merged.ok(),
            "strategic and merge patches differ"
        );
    }
});

/// Whether any key is a `$` directive.
fn has_directive(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.starts_with('$') || has_directive(v)),
        serde_json::Value::Array(items) => items.iter().any(has_directive),
        _ => false,
    }
}
