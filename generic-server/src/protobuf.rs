//! Protobuf answers at the door: a client that prefers
//! `application/vnd.kubernetes.protobuf` (client-go's typed clients,
//! kubectl, controllers, the scheduler) gets kube's protobuf for built-in
//! objects, lists, statuses and watch streams; everything behind the door
//! speaks JSON.
//!
//! The door asks the handlers behind it for JSON (the same `as=` form, so
//! `PartialObjectMetadata` works) and encodes what comes back with the
//! schemas of [`proto::k8s`]. Custom resources have no schema: they are
//! answered in JSON when the client also accepts JSON, as kube answers
//! them, and with 406 when it accepts protobuf only; that 406 comes before
//! the request is handled ([`Negotiated::refusal`]), so a write is refused
//! before anything is written, as kube negotiates the answer's form first.

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, header};
use serde_json::Value;

use crate::codec::{JSON, PROTOBUF};
use crate::request::{ApiResponse, Body};
use crate::request_info::RequestInfo;
use apimachinery::error::{Error, Reason};

/// A request that prefers protobuf answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The client accepts JSON too (after protobuf).
    fallback: bool,
    /// The request is a watch: its answer is a stream of events.
    watch: bool,
    /// The apiVersion a resource request addresses (`v1`, `apps/v1`), if any.
    api_version: Option<String>,
    /// The answer asked for is `PartialObjectMetadata` (`;as=`), whatever
    /// the resource: meta.k8s.io has a protobuf form.
    as_metadata: bool,
}

impl Negotiated {
    /// Whether the request prefers protobuf; if so, its Accept header is
    /// rewritten to ask the handlers for the same answer in JSON.
    pub fn of(path: &str, query: &str, headers: &mut HeaderMap) -> Option<Negotiated> {
        let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
        if !accept.contains("protobuf") {
            return None;
        }
        let (params, fallback) = prefers_protobuf(accept)?;
        let json = HeaderValue::from_str(&format!("{JSON}{params}")).ok()?;
        headers.insert(header::ACCEPT, json);
        Some(Negotiated {
            fallback,
            watch: is_watch(path, query),
            api_version: api_version(path),
            as_metadata: params.contains(";as="),
        })
    }

    /// kube's 406, before the request is handled, for a client that
    /// accepts protobuf only and asks for a resource with no protobuf form
    /// (a custom resource's): every verb negotiates the answer's media type
    /// before it reads, writes or deletes anything (`NegotiateOutputMediaType`
    /// first in kube's handlers). The 406 is JSON, as kube writes it when
    /// negotiation fails.
    pub fn refusal(&self, info: &RequestInfo) -> Option<ApiResponse> {
        let answerable = self.fallback
            || !info.is_resource_request
            || self.as_metadata
            || self.api_version.as_deref().is_some_and(proto::k8s::serves);
        (!answerable).then(not_acceptable)
    }

    /// The handlers' JSON answer, in protobuf where kube answers protobuf.
    pub fn answer(self, mut resp: ApiResponse) -> ApiResponse {
        let is_json = resp
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| crate::codec::essence(v) == JSON);
        if !is_json {
            return resp;
        }
        let body = std::mem::replace(&mut resp.body, Body::Full(Bytes::new()));
        resp.body = match body {
            Body::Stream(stream) if self.watch && resp.status.is_success() => {
                if !self.api_version.as_deref().is_some_and(proto::k8s::serves) {
                    resp.body = Body::Stream(stream);
                    return self.json_or_refuse(resp);
                }
                set_content_type(&mut resp, proto::k8s::WATCH_CONTENT_TYPE);
                Body::Stream(watch_frames(stream))
            }
            Body::Stream(stream) => Body::Stream(stream),
            Body::Full(json) => return self.whole(resp, json),
            Body::Pieces(pieces) => return self.whole(resp, Body::joined(&pieces)),
        };
        resp
    }

    /// A whole JSON answer (object, list, status) in protobuf.
    fn whole(self, mut resp: ApiResponse, json: Bytes) -> ApiResponse {
        let encoded = serde_json::from_slice::<Value>(&json)
            .map_err(|e| proto::k8s::Error::Malformed(e.to_string()))
            .and_then(|object| proto::k8s::encode(&object));
        match encoded {
            Ok(encoded) => {
                set_content_type(&mut resp, PROTOBUF);
                resp.body = Body::Full(encoded.into());
                resp
            }
            Err(proto::k8s::Error::UnknownKind { .. }) => {
                resp.body = Body::Full(json);
                self.json_or_refuse(resp)
            }
            Err(e) => {
                // JSON still decodes: client-go reads the Content-Type.
                tracing::warn!(error = %e, "answering in JSON: the object has no protobuf form");
                resp.body = Body::Full(json);
                resp
            }
        }
    }

    /// A JSON answer for a client that also accepts JSON; 406 for one that does not.
    fn json_or_refuse(&self, resp: ApiResponse) -> ApiResponse {
        if self.fallback {
            return resp;
        }
        not_acceptable()
    }
}

/// kube's 406 for an answer it can give in JSON or YAML only.
fn not_acceptable() -> ApiResponse {
    Error::new(
        Reason::NotAcceptable,
        "only the following media types are accepted: application/json, application/yaml",
    )
    .into()
}

fn set_content_type(resp: &mut ApiResponse, content_type: &'static str) {
    resp.headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
}

/// The `;as=...;g=...;v=...` of the preferred protobuf clause and whether
/// JSON is accepted after it; `None` when the client prefers another form.
fn prefers_protobuf(accept: &str) -> Option<(String, bool)> {
    let mut clauses: Vec<(&str, Vec<(&str, &str)>, f32)> = accept
        .split(',')
        .map(|clause| {
            let mut parts = clause.split(';').map(str::trim);
            let essence = parts.next().unwrap_or_default();
            let params: Vec<(&str, &str)> = parts
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.trim(), v.trim()))
                .collect();
            let q = params
                .iter()
                .find(|(k, _)| *k == "q")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(1.0);
            (essence, params, q)
        })
        .filter(|(essence, _, q)| !essence.is_empty() && *q > 0.0)
        .collect();
    // Most wanted first; among equals, the client's order.
    clauses.sort_by(|a, b| b.2.total_cmp(&a.2));
    let json_like = |essence: &str| {
        matches!(
            essence.to_ascii_lowercase().as_str(),
            "application/json" | "application/yaml" | "*/*" | "application/*"
        )
    };
    for (i, (essence, params, _)) in clauses.iter().enumerate() {
        if json_like(essence) {
            return None;
        }
        if !essence.eq_ignore_ascii_case(PROTOBUF) {
            continue;
        }
        let as_kind = params.iter().find(|(k, _)| *k == "as").map(|(_, v)| *v);
        if as_kind.is_some_and(|kind| !kind.starts_with("PartialObjectMetadata")) {
            // Tables and discovery documents: a JSON clause after it serves.
            continue;
        }
        let forwarded: String = params
            .iter()
            .filter(|(k, _)| matches!(*k, "as" | "g" | "v"))
            .map(|(k, v)| format!(";{k}={v}"))
            .collect();
        let fallback = clauses[i + 1..].iter().any(|(e, _, _)| json_like(e));
        return Some((forwarded, fallback));
    }
    None
}

/// Whether a request is a watch (`?watch=true`, or the old `/watch/` paths).
fn is_watch(path: &str, query: &str) -> bool {
    form_urlencoded::parse(query.as_bytes())
        .any(|(k, v)| k == "watch" && matches!(&*v, "true" | "1"))
        || path.contains("/watch/")
}

/// The apiVersion of a resource path: `/api/v1/...` is `v1`, `/apis/g/v/...` is `g/v`.
fn api_version(path: &str) -> Option<String> {
    let mut segments = path.trim_start_matches('/').split('/');
    match (segments.next(), segments.next(), segments.next()) {
        (Some("api"), Some(version), _) => Some(version.to_owned()),
        (Some("apis"), Some(group), Some(version)) => Some(format!("{group}/{version}")),
        _ => None,
    }
}

/// A JSON watch stream (one event a line, lines possibly split or joined
/// across chunks) as a protobuf one (one length-prefixed frame an event).
fn watch_frames(stream: crate::request::BodyStream) -> crate::request::BodyStream {
    let mut pending = BytesMut::new();
    let mut failed = false;
    let frames = stream
        .map(Some)
        .chain(futures::stream::once(async { None }))
        .filter_map(move |chunk| {
            let mut out = Vec::new();
            if failed {
                return futures::future::ready(None);
            }
            let at_end = chunk.is_none();
            if let Some(chunk) = chunk {
                pending.extend_from_slice(&chunk);
            }
            loop {
                let line = match pending.iter().position(|b| *b == b'\n') {
                    Some(end) => pending.split_to(end + 1),
                    None if at_end && !pending.is_empty() => pending.split(),
                    None => break,
                };
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let frame = serde_json::from_slice::<Value>(&line)
                    .map_err(|e| proto::k8s::Error::Malformed(e.to_string()))
                    .and_then(|event| proto::k8s::encode_watch_event(&event));
                match frame {
                    Ok(frame) => out.extend_from_slice(&frame),
                    Err(e) => {
                        // kube ends a watch it cannot encode with an ERROR event.
                        tracing::warn!(error = %e, "ending a protobuf watch: an event has no protobuf form");
                        let status = Error::internal(format!("unable to encode watch event: {e}"));
                        let event = serde_json::json!({"type": "ERROR", "object": status.to_status()});
                        if let Ok(frame) = proto::k8s::encode_watch_event(&event) {
                            out.extend_from_slice(&frame);
                        }
                        failed = true;
                        break;
                    }
                }
            }
            futures::future::ready((!out.is_empty()).then(|| Bytes::from(out)))
        });
    Box::pin(frames)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use http::{Method, StatusCode};

    fn negotiate(accept: &str, path: &str, query: &str) -> (Option<Negotiated>, String) {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
        let negotiated = Negotiated::of(path, query, &mut headers);
        let passed_on = headers[header::ACCEPT].to_str().unwrap().to_owned();
        (negotiated, passed_on)
    }

    #[test]
    fn the_clients_preference_decides() {
        let typed = "application/vnd.kubernetes.protobuf,application/json";
        let (negotiated, passed_on) = negotiate(typed, "/api/v1/namespaces/a/pods", "");
        assert_eq!(passed_on, "application/json");
        let negotiated = negotiated.unwrap();
        assert!(negotiated.fallback && !negotiated.watch);
        assert_eq!(negotiated.api_version.as_deref(), Some("v1"));
        // JSON first, or protobuf weighed lower: nothing changes.
        for accept in [
            "application/json, application/vnd.kubernetes.protobuf",
            "application/vnd.kubernetes.protobuf;q=0.5, */*",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json",
        ] {
            let (negotiated, passed_on) = negotiate(accept, "/api/v1/pods", "");
            assert_eq!((negotiated, passed_on.as_str()), (None, accept), "{accept}");
        }
        let (negotiated, _) = negotiate(PROTOBUF, "/apis/apps/v1/deployments", "watch=1");
        let negotiated = negotiated.unwrap();
        assert!(!negotiated.fallback && negotiated.watch);
        assert_eq!(negotiated.api_version.as_deref(), Some("apps/v1"));
        let metadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        let (_, passed_on) = negotiate(metadata, "/api/v1/secrets", "");
        assert_eq!(
            passed_on,
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        );
    }

    #[test]
    fn objects_become_protobuf_and_custom_resources_stay_json_or_are_refused() {
        let object = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#;
        let negotiated = negotiate(PROTOBUF, "/api/v1/namespaces/x/configmaps/a", "")
            .0
            .unwrap();
        let resp = negotiated.answer(ApiResponse::bytes(StatusCode::OK, JSON, &object[..]));
        assert_eq!(resp.headers[header::CONTENT_TYPE], PROTOBUF);
        let Body::Full(body) = &resp.body else {
            panic!()
        };
        assert_eq!(
            proto::k8s::decode(body).unwrap(),
            serde_json::from_slice::<Value>(object).unwrap()
        );
        let custom = br#"{"apiVersion":"example.com/v1","kind":"Foo","metadata":{"name":"a"}}"#;
        let both = "application/vnd.kubernetes.protobuf, application/json";
        let negotiated = negotiate(both, "/apis/example.com/v1/foos/a", "")
            .0
            .unwrap();
        let resp = negotiated.answer(ApiResponse::bytes(StatusCode::OK, JSON, &custom[..]));
        assert_eq!(resp.headers[header::CONTENT_TYPE], JSON);
        let negotiated = negotiate(PROTOBUF, "/apis/example.com/v1/foos/a", "")
            .0
            .unwrap();
        let resp = negotiated.answer(ApiResponse::bytes(StatusCode::OK, JSON, &custom[..]));
        assert_eq!(resp.status, StatusCode::NOT_ACCEPTABLE);
    }

    #[test]
    fn a_custom_resource_for_a_client_of_protobuf_only_is_refused_before_it_is_handled() {
        let refusal = |accept: &str, method: Method, path: &str| {
            let negotiated = negotiate(accept, path, "").0?;
            negotiated.refusal(&RequestInfo::parse(&method, path, ""))
        };
        let foos = "/apis/example.com/v1/namespaces/x/foos";
        for method in [Method::POST, Method::GET] {
            let refused = refusal(PROTOBUF, method.clone(), foos).expect("a 406");
            assert_eq!(refused.status, StatusCode::NOT_ACCEPTABLE, "{method}");
            assert_eq!(refused.headers[header::CONTENT_TYPE], JSON);
        }
        for method in [Method::PUT, Method::PATCH, Method::DELETE] {
            let refused = refusal(PROTOBUF, method.clone(), &format!("{foos}/a"));
            assert!(refused.is_some(), "{method}");
        }
        // JSON accepted too, a built-in, metadata only, discovery: handled.
        let both = "application/vnd.kubernetes.protobuf,application/json";
        assert!(refusal(both, Method::POST, foos).is_none());
        assert!(refusal(PROTOBUF, Method::POST, "/api/v1/namespaces/x/configmaps").is_none());
        let metadata =
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert!(refusal(metadata, Method::GET, foos).is_none());
        assert!(refusal(PROTOBUF, Method::GET, "/apis/example.com/v1").is_none());
    }

    #[tokio::test]
    async fn watch_lines_become_frames_whatever_the_chunking() {
        let events = concat!(
            r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"5"}}}"#,
            "\n",
            r#"{"type":"BOOKMARK","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"resourceVersion":"6"}}}"#,
            "\n"
        );
        // Split mid-line, and two lines in one chunk.
        let chunks: Vec<Bytes> = vec![
            Bytes::copy_from_slice(&events.as_bytes()[..40]),
            Bytes::copy_from_slice(&events.as_bytes()[40..]),
        ];
        let stream: crate::request::BodyStream = Box::pin(futures::stream::iter(chunks));
        let negotiated = negotiate(PROTOBUF, "/api/v1/configmaps", "watch=true")
            .0
            .unwrap();
        let resp = negotiated.answer(ApiResponse::stream(StatusCode::OK, JSON, stream));
        assert_eq!(
            resp.headers[header::CONTENT_TYPE],
            proto::k8s::WATCH_CONTENT_TYPE
        );
        let body = resp.into_bytes().await;
        let expected: Vec<u8> = events
            .lines()
            .flat_map(|line| {
                proto::k8s::encode_watch_event(&serde_json::from_str(line).unwrap()).unwrap()
            })
            .collect();
        assert_eq!(body.to_vec(), expected);
    }
}
