//! PATCH: JSON patch, merge patch, strategic merge patch.

use std::sync::Arc;

use http::{StatusCode, header};

use super::{check_verb, namespace, object_response, output, with_warnings, write_options};
use crate::codec;
use crate::registry::Store;
use crate::request::{ApiRequest, ApiResponse};
use apimachinery::error::Result;
use apimachinery::patch::PatchType;

/// PATCH an object (or its subresource).
pub async fn patch(store: &Arc<Store>, req: &ApiRequest) -> Result<ApiResponse> {
    check_verb(&store.resource, req)?;
    let out = output(req)?;
    let content_type = req.header(header::CONTENT_TYPE).unwrap_or("");
    let accepted: &[&str] = if store.resource.strategic_merge_patch {
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
        .filter(|k| *k != PatchType::StrategicMerge || store.resource.strategic_merge_patch)
        .ok_or_else(|| codec::unsupported_media_type(accepted))?;
    if req.body.len() > codec::MAX_BODY_BYTES {
        return Err(codec::too_large());
    }
    let opts = write_options(req)?;
    let written = store
        .patch(
            namespace(&store.resource, req),
            &req.info.name,
            &req.info.subresource,
            kind,
            &req.body,
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
