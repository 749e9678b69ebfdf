//! GET of one object, and LIST.

use bytes::{BufMut, Bytes, BytesMut};
use http::StatusCode;
use serde_json::{Value, json};

use super::{Output, check_verb, list_options, namespace, object_response, output};
use crate::registry::ListResult;
use crate::request::{ApiRequest, ApiResponse};
use crate::resource::Resource;
use crate::rest::Rest;
use apimachinery::error::Result;
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
        return Ok(ApiResponse::json(
            StatusCode::OK,
            &rest.scale(&obj.value())?,
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
        Output::Table(_) | Output::Metadata => {
            Ok(object_response(resource, StatusCode::OK, &obj.value(), out))
        }
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
        Output::Json => ApiResponse::pieces(
            StatusCode::OK,
            crate::codec::JSON,
            list_json(resource, &result, revision.as_deref()),
        ),
        Output::Metadata => {
            let items: Vec<Value> = result
                .items
                .iter()
                .map(|o| table::partial_object_metadata(&o.value()))
                .collect();
            ApiResponse::json(
                StatusCode::OK,
                &json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                        "metadata": list_metadata(&result, revision.as_deref()), "items": items}),
            )
        }
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

/// A List from the cached JSON of its items, as pieces that share the
/// items' bytes with the cache: neither re-encoded nor copied.
fn list_json(resource: &Resource, result: &ListResult, revision: Option<&str>) -> Vec<Bytes> {
    let metadata = list_metadata(result, revision);
    let head = json!({"kind": resource.list_kind, "apiVersion": resource.api_version(), "metadata": metadata});
    let mut head = serde_json::to_vec(&head).unwrap_or_default();
    head.pop();
    head.extend_from_slice(b",\"items\":[");
    let mut pieces = Vec::with_capacity(2 * result.items.len() + 2);
    pieces.push(Bytes::from(head));
    for (i, item) in result.items.iter().enumerate() {
        if i > 0 {
            pieces.push(Bytes::from_static(b","));
        }
        pieces.push(item.bytes.clone());
    }
    pieces.push(Bytes::from_static(b"]}\n"));
    pieces
}

/// A list's metadata: its resourceVersion, continue token and remaining count.
fn list_metadata(result: &ListResult, revision: Option<&str>) -> Value {
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
    metadata
}
