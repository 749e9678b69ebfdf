//! WATCH: newline-delimited events, as plain objects or one-row Tables.

use bytes::Bytes;
use futures::StreamExt;
use http::StatusCode;
use serde_json::json;

use super::{Output, check_verb, list_options, namespace, output};
use crate::registry::WatchItem;
use crate::request::{ApiRequest, ApiResponse};
use crate::resource::Resource;
use crate::rest::Rest;
use crate::watch_event;
use apimachinery::error::Result;
use apimachinery::table;

/// WATCH a collection (or one object, with a name field selector).
pub async fn watch(rest: &dyn Rest, req: &ApiRequest) -> Result<ApiResponse> {
    let resource = rest.resource().clone();
    check_verb(&resource, req)?;
    let out = output(req)?;
    let opts = list_options(req)?;
    let items = rest.watch(namespace(&resource, req), opts).await?;
    let sent =
        crate::metrics::global().watch_events(&resource.group, &resource.version, &resource.plural);
    let stream = items
        .map(move |item| {
            if matches!(item, WatchItem::Event(..)) {
                sent.inc();
            }
            encode(&resource, out, item)
        })
        .boxed();
    let content_type = match out {
        Output::Json => crate::codec::JSON,
        Output::Table(_) => "application/json;as=Table;v=v1;g=meta.k8s.io",
        Output::Metadata => "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
    };
    Ok(ApiResponse::stream(StatusCode::OK, content_type, stream))
}

/// Encodes one watch item for the negotiated output.
fn encode(resource: &Resource, out: Output, item: WatchItem) -> Bytes {
    match item {
        WatchItem::Event(kind, object, shared) => match (out, shared) {
            // The cache's own encoding, shared by every watcher that sees the event as it is.
            (Output::Json, Some(event)) if event.kind == kind => event.json_line(),
            (Output::Json, _) => watch_event::line(kind.as_str(), &object.bytes),
            (Output::Metadata, _) => watch_event::value_line(
                kind.as_str(),
                &table::partial_object_metadata(&object.value()),
            ),
            (Output::Table(include), _) => {
                let obj = object.value();
                let row = table::row(resource.strategy.cells(&obj), &obj, include);
                let columns = resource.strategy.columns();
                let t = table::table(Some(&columns), vec![row], &object.revision.to_string(), "");
                watch_event::value_line(kind.as_str(), &t)
            }
        },
        WatchItem::Bookmark {
            revision,
            initial_end,
        } => {
            let mut metadata = json!({"resourceVersion": revision.to_string()});
            if initial_end {
                metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            }
            let object = match out {
                Output::Json => {
                    json!({"kind": resource.kind, "apiVersion": resource.api_version(), "metadata": metadata})
                }
                Output::Metadata => {
                    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata})
                }
                Output::Table(_) => {
                    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": null, "rows": null})
                }
            };
            watch_event::value_line(watch_event::BOOKMARK, &object)
        }
        WatchItem::Error(err) => watch_event::value_line(
            watch_event::ERROR,
            &serde_json::to_value(err.to_status()).unwrap_or_default(),
        ),
    }
}
