//! JSON merge patch (RFC 7386, `application/merge-patch+json`).
//!
//! Input: the original object as JSON on the first line, the patch body after it.
//! Applying the patch a second time must change nothing.
#![no_main]

use apimachinery::patch::{PatchType, apply_patch};
use kubechain_fuzz::{json, split_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (original, patch) = split_line(data);
    let Some(original) = json(original) else {
        return;
    };
    let Ok(patched) = apply_patch(PatchType::Merge, &original, patch, None) else {
        return;
    };
    // RFC 7386 merge patches are idempotent.
    let twice = apply_patch(PatchType::Merge, &patched, patch, None);
    assert_eq!(
        twice.as_ref().ok(),
        Some(&patched),
        "patching twice differs"
    );
});
