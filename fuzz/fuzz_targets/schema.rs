//! Custom resource schemas (`apimachinery::schema`, with
//! `apimachinery::crd_validation`): a CRD carrying the
//! schema is defaulted and validated (structural schema rules included), and
//! an object goes through what a custom resource goes through: pruning,
//! defaulting and validation against the structural schema.
//!
//! Input: line 1 the `openAPIV3Schema` as JSON, then the object as JSON.
//! Pruning a pruned object must remove nothing.
#![no_main]

use apimachinery::crd_validation::{default_crd, prepare_for_create, validate_crd};
use apimachinery::schema::{Structural, apply_defaults, prune, to_openapi_resource, validate};
use kubechain_fuzz::{json, split_line};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let (schema, object) = split_line(data);
    let Some(schema) = json(schema) else {
        return;
    };
    let mut crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                      "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": schema.clone()}}]
        }
    });
    default_crd(&mut crd);
    prepare_for_create(&mut crd);
    let _ = validate_crd(&crd, None);
    let _ = validate_crd(&crd, Some(&crd));

    let Ok(structural) = Structural::new(&schema) else {
        return;
    };
    let _ = to_openapi_resource(Some(&structural), "example.com", "v1", "Widget");
    let Some(mut object) = json(object) else {
        return;
    };
    if let Value::Object(map) = &mut object {
        map.insert("apiVersion".into(), json!("example.com/v1"));
        map.insert("kind".into(), json!("Widget"));
    }
    let _ = prune(&mut object, &structural, true);
    let pruned = object.clone();
    let again = prune(&mut object, &structural, true);
    assert!(
        again.is_empty() && object == pruned,
        "pruning twice removes {again:?}"
    );
    apply_defaults(&mut object, &structural);
    let _ = validate(&object, &structural);
});
