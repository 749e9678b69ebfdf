//! Server-side apply and managedFields tracking (`apimachinery::apply`),
//! typed by the real OpenAPI v3 schema of the configuration's `kind`
//! (Deployment, Pod, ...) when it is one of those, deduced otherwise.
//!
//! Input: line 1 the live object as JSON (`null`: the apply creates it; a
//! leading `!` forces the apply), then the applied configuration as JSON.
//! The result of the apply is then updated by another manager with the
//! configuration, so both entry points run. Re-applying the same
//! configuration by the same manager must not conflict.
#![no_main]

use apimachinery::apply::{ApplyError, Schema, apply, update};
use kubechain_fuzz::{json, kind_schemas, split_line};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const T1: &str = "2024-05-01T10:00:00Z";
const T2: &str = "2024-05-01T10:05:00Z";

fuzz_target!(|data: &[u8]| {
    let (live, config) = split_line(data);
    let (force, live) = match live.strip_prefix(b"!") {
        Some(live) => (true, live),
        None => (false, live),
    };
    let (Some(live), Some(config)) = (json(live), json(config)) else {
        return;
    };
    let live = Some(live).filter(|live| !live.is_null());
    let schemas = kind_schemas();
    let root = schemas.root_of(&config);
    let schema = || match root {
        Some(root) => Schema::new(root, &schemas.components).reset_fields(&["status"]),
        None => Schema::deduced(),
    };
    let api_version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("v1")
        .to_owned();
    let Ok(applied) = apply(
        live.as_ref(),
        &config,
        "kubectl",
        &api_version,
        "",
        force,
        T1,
        schema(),
    ) else {
        return;
    };
    // Applying the same configuration again changes no value, so it cannot conflict.
    let again = apply(
        Some(&applied),
        &config,
        "kubectl",
        &api_version,
        "",
        false,
        T2,
        schema(),
    );
    if let Err(error @ ApplyError::Conflicts(_)) = again {
        panic!("re-applying {config} to {applied} conflicts: {error}");
    }
    let mut updated = config.clone();
    let _ = update(
        Some(&applied),
        &mut updated,
        "controller",
        &api_version,
        "",
        T2,
        schema(),
    );
    // And applied again by the first manager over the other's update.
    let _ = apply(
        Some(&updated),
        &config,
        "kubectl",
        &api_version,
        "",
        force,
        T2,
        schema(),
    );
});
