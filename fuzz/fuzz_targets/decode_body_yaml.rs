//! YAML request bodies through `generic_server::codec::decode_body`.
#![no_main]

use generic_server::codec::{MediaType, decode_body};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(object) = decode_body(MediaType::Yaml, data) {
        let _ = serde_json::to_vec(&object);
    }
});
