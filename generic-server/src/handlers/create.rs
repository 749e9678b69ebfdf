//! CREATE (POST).

use std::sync::Arc;

use http::StatusCode;

use super::{body, check_verb, namespace, object_response, output, with_warnings, write_options};
use crate::registry::Store;
use crate::request::{ApiRequest, ApiResponse};
use apimachinery::error::{Error, Result};

/// POST a new object.
pub async fn create(store: &Arc<Store>, req: &ApiRequest) -> Result<ApiResponse> {
    // POST goes to a collection; a subresource that accepts creates (such as
    // a token request) is declared by its resource.
    if !req.info.name.is_empty() || !req.info.subresource.is_empty() {
        return Err(Error::method_not_allowed());
    }
    check_verb(store, req)?;
    let out = output(req)?;
    let opts = write_options(req)?;
    let obj = body(store, req)?;
    let written = store.create(namespace(store, req), obj, &opts).await?;
    Ok(with_warnings(
        object_response(store, StatusCode::CREATED, &written.object, out),
        &written.warnings,
    ))
}
