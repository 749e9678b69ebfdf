//! JSONPath as kubectl and CRD printer columns use it
//! (`{.items[*].metadata.name}`), parsed and evaluated.
//!
//! Input: line 1 the path, then the JSON document it is evaluated on.
#![no_main]

use apimachinery::jsonpath::JsonPath;
use kubechain_fuzz::{json, split_line, text};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let (path, document) = split_line(data);
    let Ok(path) = JsonPath::parse(&text(path)) else {
        return;
    };
    let document = json(document).unwrap_or(Value::Null);
    let found = path.find(&document);
    assert_eq!(path.first(&document), found.first().copied());
});
