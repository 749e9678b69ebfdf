//! Kubernetes protobuf request bodies (`k8s\0` + `runtime.Unknown`), as
//! kubectl sends them: `proto::k8s::decode` must return an error, not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(object) = proto::k8s::decode(data) {
        // Whatever decodes must serialize (the handlers write it back out).
        let _ = serde_json::to_vec(&object);
    }
});
