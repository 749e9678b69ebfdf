//! JSON request bodies through `generic_server::codec::decode_body`.
#![no_main]

use generic_server::codec::{MediaType, decode_body};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_body(MediaType::Json, data);
});
