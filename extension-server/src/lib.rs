//! extension-server's library half: the CEL validation rules and the custom
//! resource schema code, which need no server. The binary (`main.rs`) serves
//! them; the fuzz targets in `fuzz/` call them directly.

pub mod cel;
pub mod schema;
