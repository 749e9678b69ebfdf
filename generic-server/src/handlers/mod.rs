//! REST handlers: one file per verb. They parse options, negotiate media
//! types, call the [`Store`](crate::registry::Store) and encode its answer;
//! every failure is a Status.

mod create;
mod delete;
mod get;
mod patch;
mod update;
mod watch;

use http::{StatusCode, header};
use serde_json::Value;

use crate::codec::{self, MediaType};
use crate::registry::{FieldValidation, ListOptions, WriteOptions};
use crate::request::{ApiRequest, ApiResponse};
use crate::resource::Resource;
use crate::rest::Rest;
use apimachinery::error::{Error, FieldError, Reason, Result};
use apimachinery::field_selector::FieldSelector;
use apimachinery::label_selector::LabelSelector;
use apimachinery::table::{self, IncludeObject};

/// Serves a resource request, by verb, through the path's [`Rest`]: a
/// verb it lacks answers 405, a subresource it does not have or a
/// namespace on a cluster-scoped resource 404.
pub async fn serve(rest: &dyn Rest, req: ApiRequest) -> ApiResponse {
    let mut resp = verb(rest, &req).await.unwrap_or_else(ApiResponse::from);
    if let Some(warning) = &rest.resource().deprecation {
        resp.warn(warning);
    }
    resp
}

async fn verb(rest: &dyn Rest, req: &ApiRequest) -> Result<ApiResponse> {
    let (r, info) = (rest.resource(), &req.info);
    let subresource = r.find_subresource(&info.subresource);
    let unknown_subresource = !info.subresource.is_empty() && subresource.is_none();
    // A Namespace's name is its request's namespace, as in kube's RequestInfo.
    let is_namespace = r.group.is_empty() && r.plural == "namespaces";
    let namespaced_path = !info.namespace.is_empty() && !is_namespace;
    if unknown_subresource || (!r.namespaced && namespaced_path) {
        return Err(Error::path_not_found());
    }
    if subresource.is_some_and(|s| s.connect) {
        check_verb(r, req)?;
        return rest.connect(req).await;
    }
    match info.verb.as_str() {
        "get" => get::get(rest, req).await,
        "list" => get::list(rest, req).await,
        "watch" => watch::watch(rest, req).await,
        "create" => create::create(rest, req).await,
        "update" => update::update(rest, req).await,
        "patch" => patch::patch(rest, req).await,
        "delete" => delete::delete(rest, req).await,
        "deletecollection" => delete::delete_collection(rest, req).await,
        _ => Err(Error::method_not_allowed()),
    }
}

/// Checks that a verb (on the resource or its subresource) is supported.
fn check_verb(resource: &Resource, req: &ApiRequest) -> Result<()> {
    let info = &req.info;
    let supported = if info.subresource.is_empty() {
        resource.supports(&info.verb)
    } else {
        resource
            .find_subresource(&info.subresource)
            .is_some_and(|s| s.verbs.iter().any(|v| *v == info.verb))
    };
    if supported {
        Ok(())
    } else {
        Err(Error::method_not_allowed())
    }
}

/// The namespace a request addresses (empty for cluster-scoped resources).
pub(crate) fn namespace<'a>(resource: &Resource, req: &'a ApiRequest) -> &'a str {
    if resource.namespaced {
        &req.info.namespace
    } else {
        ""
    }
}

/// How the client wants objects back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// Plain JSON.
    Json,
    /// A meta.k8s.io/v1 Table.
    Table(IncludeObject),
    /// meta.k8s.io/v1 PartialObjectMetadata: the metadata only.
    Metadata,
}

/// Negotiates the response form from Accept.
pub(crate) fn output(req: &ApiRequest) -> Result<Output> {
    let accept = req.header(header::ACCEPT).unwrap_or("");
    if table::wants_table(accept) {
        return Ok(Output::Table(IncludeObject::parse(
            req.param("includeObject").as_deref(),
        )));
    }
    if table::wants_metadata(accept) {
        return Ok(Output::Metadata);
    }
    let acceptable = accept.is_empty()
        || accept
            .split(',')
            .map(|p| codec::essence(p.trim()))
            .any(|m| {
                matches!(
                    m,
                    "application/json" | "*/*" | "application/*" | "application/yaml" | ""
                )
            });
    if acceptable {
        Ok(Output::Json)
    } else {
        Err(Error::new(
            Reason::NotAcceptable,
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        ))
    }
}

/// Decodes a request body per its Content-Type.
pub(crate) async fn body(resource: &Resource, req: &ApiRequest) -> Result<Value> {
    let media = MediaType::from_content_type(req.header(header::CONTENT_TYPE))?;
    // kube's transformDecodeError: a body whose kind could not be read
    // (YAML sent as JSON, say) names the kind expected and the body's start.
    let unrecognized = |why: &str| {
        Error::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {why} ({})",
            resource.kind,
            summarize(&req.body)
        ))
    };
    let obj = match codec::decode(media, &req.body).await {
        Ok(obj) => obj,
        Err(error) if media == MediaType::Json && error.code() == 400 => {
            return Err(unrecognized(&error.to_string()));
        }
        Err(error) => return Err(error),
    };
    if !obj.is_object() && media != MediaType::Protobuf {
        // kube could read no apiVersion and kind from it.
        return Err(unrecognized(&apimachinery::patch::no_version_kind(&obj)));
    }
    Ok(obj)
}

/// kube's `summarizeData`: the body's first 30 bytes, as text if it looks
/// like JSON, in hex otherwise.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let cut = &body[..body.len().min(MAX)];
    let more = if body.len() > MAX { " ..." } else { "" };
    match body.first() {
        None => "<empty>".into(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(cut)),
        Some(_) => {
            let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

/// Parses the options of a write.
fn write_options(req: &ApiRequest) -> Result<WriteOptions> {
    let pairs = req.query_pairs();
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let mut dry_run = false;
    for (_, value) in pairs.iter().filter(|(k, _)| k == "dryRun") {
        match value.as_str() {
            "All" => dry_run = true,
            "" => {}
            other => {
                return Err(Error::bad_request(format!(
                    "Invalid dry run value: dryRun: Unsupported value: {other:?}: supported values: \"All\""
                )));
            }
        }
    }
    // Without a fieldManager, kube names the manager after the user agent.
    let user_agent = req
        .header(header::USER_AGENT)
        .and_then(|ua| ua.split('/').next())
        .filter(|ua| !ua.is_empty());
    let field_manager = get("fieldManager")
        .filter(|m| !m.is_empty())
        .map(str::to_string);
    let default_manager = user_agent.map(str::to_string);
    if let Some(manager) = &field_manager {
        if manager.len() > 128 {
            return Err(Error::bad_request(format!(
                "fieldManager: Too long: may not be more than 128 bytes (got {})",
                manager.len()
            )));
        }
        if manager.chars().any(char::is_control) {
            return Err(Error::bad_request(
                "fieldManager: Invalid value: must only contain printable characters",
            ));
        }
    }
    Ok(WriteOptions {
        dry_run,
        field_manager,
        default_manager,
        field_validation: FieldValidation::parse(get("fieldValidation"))?,
        force: get("force") == Some("true"),
        user: req.user.clone(),
    })
}

/// Parses the options of a list or watch.
pub(crate) fn list_options(req: &ApiRequest) -> Result<ListOptions> {
    let pairs = req.query_pairs();
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let flag = |k: &str| get(k).is_some_and(|v| v == "true" || v == "1");
    let labels = get("labelSelector")
        .map(|s| LabelSelector::parse(&s))
        .transpose()
        .map_err(|e| Error::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = get("fieldSelector")
        .map(|s| FieldSelector::parse(&s))
        .transpose()
        .map_err(|e| Error::bad_request(format!("invalid field selector: {e}")))?;
    let limit = match get("limit") {
        Some(l) => l
            .parse::<i64>()
            .map_err(|_| Error::bad_request(format!("invalid limit {l:?}")))?
            .max(0) as usize,
        None => 0,
    };
    let resource_version_match = get("resourceVersionMatch");
    let timeout = get("timeoutSeconds")
        .map(|t| crate::request::timeout_seconds(&t))
        .transpose()?
        .flatten();
    let continue_token = get("continue");
    let resource_version = get("resourceVersion");
    if continue_token.is_some()
        && resource_version.as_deref().is_some_and(|rv| rv != "0")
        && req.info.verb == "list"
    {
        return Err(Error::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    let send_initial_events = get("sendInitialEvents").map(|v| v == "true");
    let watch = req.info.verb == "watch" || flag("watch");
    validate_list_options(
        watch,
        resource_version.as_deref(),
        resource_version_match.as_deref(),
        continue_token.is_some(),
        send_initial_events,
    )?;
    Ok(ListOptions {
        labels,
        fields,
        limit,
        continue_token,
        resource_version,
        resource_version_match,
        allow_bookmarks: flag("allowWatchBookmarks"),
        send_initial_events,
        timeout,
    })
}

/// kube's `ValidateListOptions`: a 422 on `ListOptions.meta.k8s.io ""`.
fn validate_list_options(
    watch: bool,
    rv: Option<&str>,
    rv_match: Option<&str>,
    cont: bool,
    send_initial: Option<bool>,
) -> Result<()> {
    let forbidden = |detail: &str| FieldError::forbidden("resourceVersionMatch", detail);
    let mut errs = Vec::new();
    if watch && send_initial.is_some() && rv_match != Some("NotOlderThan") {
        errs.push(forbidden(
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if let Some(m) = rv_match {
        if watch && send_initial.is_none() {
            errs.push(forbidden(
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if !watch && rv.is_none() {
            errs.push(forbidden(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if cont {
            errs.push(forbidden(
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        let supported: &[&str] = if watch {
            &["NotOlderThan"]
        } else {
            &["Exact", "NotOlderThan", ""]
        };
        if !supported.contains(&m) {
            errs.push(FieldError::not_supported(
                "resourceVersionMatch",
                m,
                supported,
            ));
        }
        if !watch && m == "Exact" && rv == Some("0") {
            errs.push(forbidden(
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if !watch && send_initial.is_some() {
        errs.push(FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(Error::invalid("meta.k8s.io", "ListOptions", "", errs))
    }
}

/// An object response: JSON, or a one-row Table.
fn object_response(
    resource: &Resource,
    status: StatusCode,
    obj: &Value,
    out: Output,
) -> ApiResponse {
    match out {
        Output::Json => ApiResponse::json(status, obj),
        Output::Metadata => ApiResponse::json(status, &table::partial_object_metadata(obj)),
        Output::Table(include) => {
            let strategy = &resource.strategy;
            let row = table::row(strategy.cells(obj), obj, include);
            let rv = obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let columns = strategy.columns();
            ApiResponse::json(status, &table::table(Some(&columns), vec![row], rv, ""))
        }
    }
}

/// Adds warnings to a response.
fn with_warnings(mut resp: ApiResponse, warnings: &[String]) -> ApiResponse {
    for w in warnings {
        resp.warn(w);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(
        watch: bool,
        rv: Option<&str>,
        rv_match: Option<&str>,
        send_initial: Option<bool>,
    ) -> String {
        validate_list_options(watch, rv, rv_match, false, send_initial)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn list_options_as_kube_validates_them() {
        assert_eq!(errors(false, Some("5"), Some("Exact"), None), "");
        assert_eq!(errors(true, None, Some("NotOlderThan"), Some(true)), "");
        assert_eq!(
            errors(false, None, Some("Exact"), None),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert!(errors(false, Some("0"), Some("Bogus"), None).ends_with(
            "resourceVersionMatch: Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\""
        ));
        assert!(
            errors(true, None, None, Some(true)).ends_with(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            )
        );
        assert!(errors(true, None, Some("NotOlderThan"), None).ends_with(
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
        ));
        assert!(
            errors(false, None, None, Some(true))
                .ends_with("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")
        );
    }
}
