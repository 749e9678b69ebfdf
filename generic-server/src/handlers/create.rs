//! CREATE (POST).

use std::sync::Arc;

use http::StatusCode;

use http::header;
use serde_json::{Value, json};

use super::{body, check_verb, namespace, object_response, output, with_warnings, write_options};
use crate::registry::Store;
use crate::request::{ApiRequest, ApiResponse};
use crate::rest::Rest;
use apimachinery::error::{Error, Result};

/// POST a new object.
pub async fn create(store: &Arc<Store>, req: &ApiRequest) -> Result<ApiResponse> {
    // POST goes to a collection; a subresource that accepts creates (such as
    // a token request) is declared by its resource.
    if !req.info.name.is_empty() || !req.info.subresource.is_empty() {
        return Err(Error::method_not_allowed());
    }
    check_verb(&store.resource, req)?;
    let out = output(req)?;
    let opts = write_options(req)?;
    let obj = body(&store.resource, req).await?;
    let written = store
        .create(namespace(&store.resource, req), obj, &opts)
        .await?;
    Ok(with_warnings(
        object_response(&store.resource, StatusCode::CREATED, &written.object, out),
        &written.warnings,
    ))
}

/// POST to a create-only endpoint: the body decoded and its kind checked,
/// then the endpoint's answer (nothing is stored).
pub async fn answer(rest: &dyn Rest, req: &ApiRequest) -> Result<ApiResponse> {
    let kind = rest.create_kind();
    let media = crate::codec::MediaType::from_content_type(req.header(header::CONTENT_TYPE))?;
    let mut obj = crate::codec::decode(media, &req.body).await?;
    let Some(map) = obj.as_object_mut() else {
        return Err(Error::bad_request("the body must be an object"));
    };
    let expected = kind.api_version();
    let other_version = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| v != expected);
    let other_kind = map
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k != kind.kind);
    if other_version || other_kind {
        return Err(Error::bad_request(format!(
            "the body must be a {} of {expected}",
            kind.kind
        )));
    }
    map.insert("apiVersion".into(), json!(expected));
    map.insert("kind".into(), json!(kind.kind));
    crate::registry::metadata::ensure_namespace(
        &mut obj,
        rest.resource().namespaced,
        &req.info.namespace,
    )?;
    let answer = rest.create(req, obj).await?;
    Ok(ApiResponse::json(StatusCode::CREATED, &answer))
}
