//! DELETE of one object, and DELETECOLLECTION.

use http::{StatusCode, header};
use serde_json::{Value, json};

use super::{check_verb, list_options, object_response, output, with_warnings};
use crate::codec::{self, MediaType};
use crate::registry::DeleteOptions;
use crate::request::{ApiRequest, ApiResponse};
use crate::rest::Rest;
use apimachinery::error::{Error, Result};

/// DELETE one object.
pub async fn delete(rest: &dyn Rest, req: &ApiRequest) -> Result<ApiResponse> {
    let resource = rest.resource();
    check_verb(resource, req)?;
    let out = output(req)?;
    let opts = delete_options(req).await?;
    let deleted = rest.delete(req, &opts).await?;
    let response = if !deleted.gone {
        object_response(resource, StatusCode::ACCEPTED, &deleted.object, out)
    } else if resource.strategy.return_deleted_object() {
        object_response(resource, StatusCode::OK, &deleted.object, out)
    } else {
        ApiResponse::json(StatusCode::OK, &resource.deleted_status(&deleted.object))
    };
    Ok(with_warnings(response, &deleted.warnings))
}

/// DELETE every object matching the selectors.
pub async fn delete_collection(rest: &dyn Rest, req: &ApiRequest) -> Result<ApiResponse> {
    let resource = rest.resource();
    check_verb(resource, req)?;
    let list = list_options(req)?;
    let opts = delete_options(req).await?;
    let (items, revision) = rest.delete_collection(req, &list, &opts).await?;
    let body = json!({
        "kind": resource.list_kind,
        "apiVersion": resource.api_version(),
        "metadata": {"resourceVersion": revision.to_string()},
        "items": items,
    });
    Ok(ApiResponse::json(StatusCode::OK, &body))
}

/// DeleteOptions from the body (JSON or protobuf) and the query.
async fn delete_options(req: &ApiRequest) -> Result<DeleteOptions> {
    let body: Value = if req.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        let media = MediaType::from_content_type(req.header(header::CONTENT_TYPE))?;
        codec::decode(media, &req.body).await?
    };
    if !body.is_object() {
        return Err(Error::bad_request(
            "the body of a delete must be a DeleteOptions object",
        ));
    }
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let mut dry_run = body
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|v| v == "All"));
    let mut propagation = text(body.get("propagationPolicy"));
    if propagation.is_none() && body.get("orphanDependents") == Some(&Value::Bool(true)) {
        propagation = Some("Orphan".into());
    }
    for (key, value) in req.query_pairs() {
        match key.as_str() {
            "dryRun" if value == "All" => dry_run = true,
            "dryRun" if !value.is_empty() => {
                return Err(Error::bad_request(format!(
                    "Invalid dry run value: dryRun: Unsupported value: {value:?}: supported values: \"All\""
                )));
            }
            "propagationPolicy" if !value.is_empty() => propagation = Some(value),
            _ => {}
        }
    }
    if let Some(policy) = &propagation {
        if !["Orphan", "Background", "Foreground"].contains(&policy.as_str()) {
            return Err(Error::bad_request(format!(
                "propagationPolicy: Unsupported value: {policy:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    }
    Ok(DeleteOptions {
        uid: text(body.pointer("/preconditions/uid")),
        resource_version: text(body.pointer("/preconditions/resourceVersion")),
        propagation_policy: propagation,
        dry_run,
        user: req.user.clone(),
    })
}
