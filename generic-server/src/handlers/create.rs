//! CREATE (POST).

use http::StatusCode;

use super::{check_verb, object_response, output, with_warnings, write_options};
use crate::request::{ApiRequest, ApiResponse};
use crate::rest::Rest;
use apimachinery::error::Result;

/// POST a new object.
pub async fn create(rest: &dyn Rest, req: &ApiRequest) -> Result<ApiResponse> {
    let resource = rest.resource();
    check_verb(resource, req)?;
    let out = output(req)?;
    let opts = write_options(req)?;
    let obj = rest.decode(req).await?;
    let written = rest.create(req, obj, &opts).await?;
    Ok(with_warnings(
        object_response(resource, StatusCode::CREATED, &written.object, out),
        &written.warnings,
    ))
}
