//! GET of one object, and LIST.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use http::StatusCode;
use serde_json::{Value, json};

use super::{Output, check_verb, list_options, namespace, object_response, output};
use crate::registry::{ListResult, Store};
use crate::request::{ApiRequest, ApiResponse};
use apimachinery::error::Result;
use apimachinery::table;

/// GET one object (or its subresource).
pub async fn get(store: &Arc<Store>, req: &ApiRequest) -> Result<ApiResponse> {
    check_verb(store, req)?;
    let out = output(req)?;
    let rv = req.param("resourceVersion");
    let obj = store
        .get(namespace(store, req), &req.info.name, rv.as_deref())
        .await?;
    if req.info.subresource == "scale" {
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
        Output::Table(_) => Ok(object_response(store, StatusCode::OK, &obj.value(), out)),
    }
}

/// LIST objects.
pub async fn list(store: &Arc<Store>, req: &ApiRequest) -> Result<ApiResponse> {
    check_verb(store, req)?;
    let out = output(req)?;
    let opts = list_options(req)?;
    let result = store.list(namespace(store, req), &opts).await?;
    Ok(match out {
        Output::Json => ApiResponse::bytes(
            StatusCode::OK,
            crate::codec::JSON,
            list_json(store, &result),
        ),
        Output::Table(include) => {
            let strategy = &store.resource.strategy;
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
                &table::table(Some(&columns), rows, &result.revision.to_string(), token),
            )
        }
    })
}

/// Writes a List from the cached JSON of its items, without re-encoding them.
fn list_json(store: &Store, result: &ListResult) -> Bytes {
    let mut metadata = json!({"resourceVersion": result.revision.to_string()});
    if let Some(token) = &result.continue_token {
        metadata["continue"] = Value::String(token.clone());
    }
    if let Some(remaining) = result.remaining {
        metadata["remainingItemCount"] = json!(remaining);
    }
    let head = json!({"kind": store.resource.list_kind, "apiVersion": store.resource.api_version(), "metadata": metadata});
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
