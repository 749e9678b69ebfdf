//! PATCH: JSON patch, merge patch, strategic merge patch.

use http::{StatusCode, header};

use super::{check_verb, object_response, output, with_warnings, write_options};
use crate::codec;
use crate::request::{ApiRequest, ApiResponse};
use crate::rest::Rest;
use apimachinery::error::Result;
use apimachinery::patch::PatchType;

/// PATCH an object (or its subresource).
pub async fn patch(rest: &dyn Rest, req: &ApiRequest) -> Result<ApiResponse> {
    let resource = rest.resource();
    check_verb(resource, req)?;
    let out = output(req)?;
    let content_type = req.header(header::CONTENT_TYPE).unwrap_or("");
    let accepted: &[&str] = if resource.strategic_merge_patch {
        &[
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
        ]
    } else {
        &[
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ]
    };
    let kind = PatchType::from_content_type(content_type)
        .filter(|k| *k != PatchType::StrategicMerge || resource.strategic_merge_patch)
        .ok_or_else(|| codec::unsupported_media_type(accepted))?;
    if req.body.len() > codec::MAX_BODY_BYTES {
        return Err(codec::too_large());
    }
    let opts = write_options(req)?;
    let written = rest.patch(req, kind, &opts).await?;
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
