//! UPDATE (PUT) of an object or its subresource.

use std::sync::Arc;

use http::StatusCode;

use super::{body, check_verb, namespace, object_response, output, with_warnings, write_options};
use crate::registry::Store;
use crate::request::{ApiRequest, ApiResponse};
use apimachinery::error::Result;

/// PUT a replacement object.
pub async fn update(store: &Arc<Store>, req: &ApiRequest) -> Result<ApiResponse> {
    check_verb(&store.resource, req)?;
    let out = output(req)?;
    let opts = write_options(req)?;
    let obj = body(&store.resource, req).await?;
    let written = store
        .update(
            namespace(&store.resource, req),
            &req.info.name,
            &req.info.subresource,
            obj,
            &opts,
        )
        .await?;
    let status = if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    if req.info.subresource == "scale" {
        return Ok(with_warnings(
            ApiResponse::json(status, &written.object),
            &written.warnings,
        ));
    }
    Ok(with_warnings(
        object_response(&store.resource, status, &written.object, out),
        &written.warnings,
    ))
}
