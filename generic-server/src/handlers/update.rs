//! UPDATE (PUT) of an object or its subresource.

use http::StatusCode;

use super::{check_verb, object_response, output, with_warnings, write_options};
use crate::request::{ApiRequest, ApiResponse};
use crate::rest::Rest;
use apimachinery::error::Result;

/// PUT a replacement object.
pub async fn update(rest: &dyn Rest, req: &ApiRequest) -> Result<ApiResponse> {
    let resource = rest.resource();
    check_verb(resource, req)?;
    let out = output(req)?;
    let opts = write_options(req)?;
    let obj = rest.decode(req).await?;
    let written = rest.update(req, obj, &opts).await?;
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
        object_response(resource, status, &written.object, out),
        &written.warnings,
    ))
}
