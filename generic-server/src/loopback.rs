//! A client for a server's own API, in process: how controllers read and
//! write through the same pipeline as everyone else (stores, delegates,
//! admission), as a privileged internal user.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, header};
use serde_json::Value;

use crate::request::{ApiRequest, Handler, UserInfo};
use apimachinery::error::{Error, Reason, Result, Status};

/// Calls a handler with JSON bodies and turns non-2xx answers into errors.
#[derive(Clone)]
pub struct Loopback {
    handler: Arc<dyn Handler>,
    user: UserInfo,
}

impl Loopback {
    /// A client acting as `user_name` in `system:masters`.
    pub fn new(handler: Arc<dyn Handler>, user_name: &str) -> Self {
        let user = UserInfo {
            name: user_name.into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            ..Default::default()
        };
        Loopback { handler, user }
    }

    /// Sends a request; the JSON answer, or the Status as an error.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        query: &str,
        body: Option<&Value>,
    ) -> Result<Value> {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let body = body
            .map(|b| Bytes::from(serde_json::to_vec(b).unwrap_or_default()))
            .unwrap_or_default();
        let req = ApiRequest::new(method, path, query, headers, body, self.user.clone());
        let resp = self.handler.handle(req).await;
        let status = resp.status;
        let bytes = resp.into_bytes().await;
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(value);
        }
        let body: Status = serde_json::from_value(value).unwrap_or_default();
        let reason = Reason::parse(&body.reason)
            .unwrap_or_else(|| apimachinery::error::reason_for_code(status.as_u16()));
        Err(Error::new(reason, body.message))
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Result<Value> {
        self.call(Method::GET, path, "", None).await
    }

    /// POST.
    pub async fn create(&self, path: &str, body: &Value) -> Result<Value> {
        self.call(Method::POST, path, "", Some(body)).await
    }

    /// PUT.
    pub async fn update(&self, path: &str, body: &Value) -> Result<Value> {
        self.call(Method::PUT, path, "", Some(body)).await
    }

    /// DELETE (of an object or a collection).
    pub async fn delete(&self, path: &str) -> Result<Value> {
        self.call(Method::DELETE, path, "", None).await
    }
}
