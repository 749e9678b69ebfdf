//! Request attributes from method, path and query
//! (`generic_server::request_info::RequestInfo::parse`).
//!
//! Input: an HTTP request line's start, `METHOD /path?query`.
#![no_main]

use generic_server::request_info::RequestInfo;
use http::Method;
use kubechain_fuzz::text;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let line = text(data);
    let (method, target) = line.split_once(' ').unwrap_or(("GET", &line));
    let Ok(method) = Method::from_bytes(method.as_bytes()) else {
        return;
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let info = RequestInfo::parse(&method, path, query);
    let _ = info.is_discovery();
});
