//! GET of one object, and LIST.

use bytes::{BufMut, Bytes, BytesMut};
use http::StatusCode;
use serde_json::{Value, json};

use super::{Output, check_verb, list_options, namespace, object_response, output};
use crate::registry::ListResult;
use crate::request::{ApiRequest, ApiResponse};
use crate::resource::Resource;
use crate::rest::Rest;
use apimachinery::error::{Error, Result};
use apimachinery::table;

/// GET one object (or its subresource).
pub async fn get(rest: &dyn Rest, req: &ApiRequest) -> Result<ApiResponse> {
    let resource = rest.resource();
    check_verb(resource, req)?;
    let out = output(req)?;
    let obj = rest
        .get(req, namespace(resource, req), &req.info.name)
        .await?;
    if req.info.subresource == "scale" {
        let store = rest.store().ok_or_else(Error::method_not_allowed)?;
        return Ok(ApiResponse::json(
            StatusCode::OK,
            &store.to_scale(&obj.value())?,
        ));
    }
    match out {
        Output::Json => {
            // The cached JSON and the newline kube's encoder ends it with.
            let mut body = BytesMut::with_capacity(obj.bytes.len() + 1);
            body.put_slice(&obj.bytes);
            body.put_u8(b'\n');
            Ok(ApiResponse::bytes(
                StatusCode::OK,
                crate::codec::JSON,
                body.freeze(),
            ))
        }
        Output::Table(_) => Ok(object_response(resource, StatusCode::OK, &obj.value(), out)),
    }
}

/// LIST objects.
pub async fn list(rest: &dyn Rest, req: &ApiRequest) -> Result<ApiResponse> {
    let resource = rest.resource();
    check_verb(resource, req)?;
    let out = output(req)?;
    let opts = list_options(req)?;
    let result = rest.list(req, namespace(resource, req), &opts).await?;
    // Computed objects have no resourceVersion.
    let revision = Some(result.revision)
        .filter(|r| *r > 0)
        .map(|r| r.to_string());
    Ok(match out {
        Output::Json => ApiResponse::bytes(
            StatusCode::OK,
            crate::codec::JSON,
            list_json(resource, &result, revision.as_deref()),
        ),
        Output::Table(include) => {
            let strategy = &resource.strategy;
            let rows = result
                .items
                .iter()
                .map(|o| {
                    let obj = o.value();
                    table::row(strategy.cells(&obj), &obj, include)
                })
                .collect();
            let columns = strategy.columns();
            let token = result.continue_token.as_deref().unwrap_or_default();
            ApiResponse::json(
                StatusCode::OK,
                &table::table(
                    Some(&columns),
                    rows,
                    revision.as_deref().unwrap_or_default(),
                    token,
                ),
            )
        }
    })
}

/// Writes a List from the cached JSON of its items, without re-encoding them.
fn list_json(resource: &Resource, result: &ListResult, revision: Option<&str>) -> Bytes {
    let mut metadata = json!({});
    if let Some(revision) = revision {
        metadata["resourceVersion"] = json!(revision);
    }
    if let Some(token) = &result.continue_token {
        metadata["continue"] = Value::String(token.clone());
    }
    if let Some(remaining) = result.remaining {
        metadata["remainingItemCount"] = json!(remaining);
    }
    let head = json!({"kind": resource.list_kind, "apiVersion": resource.api_version(), "metadata": metadata});
    let head = serde_json::to_vec(&head).unwrap_or_default();
    let size: usize = result.items.iter().map(|o| o.bytes.len() + 1).sum();
    let mut out = BytesMut::with_capacity(head.len() + size + 16);
    out.put_slice(&head[..head.len() - 1]);
    out.put_slice(b",\"items\":[");
    for (i, item) in result.items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        out.put_slice(&item.bytes);
    }
    out.put_slice(b"]}\n");
    out.freeze()
}
