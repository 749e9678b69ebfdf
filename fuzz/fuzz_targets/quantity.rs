//! Resource quantities (`500m`, `1Gi`, `2e3`).
//!
//! Through `apimachinery::quantity`.
//!
//! Input: the quantity string; it is also checked as a one-entry resource list.
#![no_main]

use apimachinery::quantity;
use kubechain_fuzz::text;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let s = text(data);
    let parsed = quantity::parse(&s);
    let bits = |n: Option<f64>| n.map(f64::to_bits);
    assert_eq!(bits(quantity::of(&Value::String(s.clone()))), bits(parsed));
    let errors = quantity::validate_list(Some(&json!({ "cpu": s })), "spec.hard");
    if parsed.is_some_and(|n| n >= 0.0) {
        assert!(
            errors.is_empty(),
            "{s:?} parses as {parsed:?} but is rejected"
        );
    } else if parsed.is_none() {
        assert_eq!(errors.len(), 1);
    }
});
