//! JSON patch (RFC 6902, `application/json-patch+json`).
//!
//! Input: the original object as JSON on the first line, the patch body after it.
#![no_main]

use apimachinery::patch::{PatchType, apply_patch};
use kubechain_fuzz::{json, split_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (original, patch) = split_line(data);
    let Some(original) = json(original) else {
        return;
    };
    let _ = apply_patch(PatchType::Json, &original, patch, None);
});
