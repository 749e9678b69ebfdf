//! Conversion between the versions of a custom resource: strategy `None`
//! rewrites `apiVersion`; strategy `Webhook` sends a `ConversionReview`
//! (apiextensions.k8s.io/v1) to the CRD's webhook over TLS.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::error::{Error, Result};
use apimachinery::group_version::api_version;
use generic_server::service_client::{self, Clients, ObjectReader};
use generic_server::strategy::Converter;
use serde_json::{Value, json};

/// Conversion with strategy `None`: only `apiVersion` changes.
pub struct NoneConverter {
    /// The group.
    pub group: String,
    /// The storage version.
    pub storage: String,
}

#[async_trait::async_trait]
impl Converter for NoneConverter {
    fn storage_version(&self) -> String {
        api_version(&self.group, &self.storage)
    }

    async fn convert(&self, mut objects: Vec<Value>, to: &str) -> Result<Vec<Value>> {
        for obj in &mut objects {
            obj["apiVersion"] = json!(to);
        }
        Ok(objects)
    }
}

/// Conversion by a webhook.
pub struct WebhookConverter {
    group: String,
    kind: String,
    storage: String,
    config: Value,
    reader: Arc<dyn ObjectReader>,
    clients: Arc<Clients>,
}

impl WebhookConverter {
    /// A converter for a CRD whose `spec.conversion.webhook.clientConfig` is `config`.
    pub fn new(crd: &Value, reader: Arc<dyn ObjectReader>, clients: Arc<Clients>) -> Self {
        let text = |p: &str| {
            crd.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        WebhookConverter {
            group: text("/spec/group"),
            kind: text("/spec/names/kind"),
            storage: crate::crd::storage_version(crd)
                .unwrap_or_default()
                .to_string(),
            config: crd
                .pointer("/spec/conversion/webhook/clientConfig")
                .cloned()
                .unwrap_or_default(),
            reader,
            clients,
        }
    }

    fn failed(&self, to: &str, why: impl std::fmt::Display) -> Error {
        Error::internal(format!(
            "conversion webhook for {to}, Kind={} failed: {why}",
            self.kind
        ))
    }

    /// Sends one review; the converted objects.
    async fn review(&self, objects: &[Value], to: &str) -> std::result::Result<Vec<Value>, String> {
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": to, "objects": objects},
        });
        let body = service_client::post_review(
            self.reader.as_ref(),
            &self.clients,
            &self.config,
            "",
            &review,
            Duration::from_secs(10),
        )
        .await?;
        let response = &body["response"];
        if response["uid"] != uid.as_str() {
            return Err(format!(
                "expected response.uid={uid:?}, got {}",
                response["uid"]
            ));
        }
        if response.pointer("/result/status").and_then(Value::as_str) != Some("Success") {
            let message = response
                .pointer("/result/message")
                .and_then(Value::as_str)
                .unwrap_or("conversion failed");
            return Err(message.to_string());
        }
        let converted = response["convertedObjects"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if converted.len() != objects.len() {
            return Err(format!(
                "expected {} converted objects, got {}",
                objects.len(),
                converted.len()
            ));
        }
        Ok(converted)
    }
}

#[async_trait::async_trait]
impl Converter for WebhookConverter {
    fn storage_version(&self) -> String {
        api_version(&self.group, &self.storage)
    }

    async fn convert(&self, objects: Vec<Value>, to: &str) -> Result<Vec<Value>> {
        // Objects already in the wanted version are not sent.
        let pending: Vec<(usize, Value)> = objects
            .iter()
            .enumerate()
            .filter(|(_, o)| o["apiVersion"] != to)
            .map(|(i, o)| (i, o.clone()))
            .collect();
        if pending.is_empty() {
            return Ok(objects);
        }
        let sent: Vec<Value> = pending.iter().map(|(_, o)| o.clone()).collect();
        let converted = self
            .review(&sent, to)
            .await
            .map_err(|why| self.failed(to, why))?;
        let mut out = objects;
        for ((index, original), mut new) in pending.into_iter().zip(converted) {
            if new["apiVersion"] != to {
                return Err(self.failed(
                    to,
                    format!(
                        "converted object has apiVersion {}, want {to}",
                        new["apiVersion"]
                    ),
                ));
            }
            // A webhook may only change labels and annotations of metadata.
            let mut metadata = original["metadata"].clone();
            for field in ["labels", "annotations"] {
                match new.pointer(&format!("/metadata/{field}")) {
                    Some(v) => metadata[field] = v.clone(),
                    None => {
                        if let Some(m) = metadata.as_object_mut() {
                            m.remove(field);
                        }
                    }
                }
            }
            new["metadata"] = metadata;
            out[index] = new;
        }
        Ok(out)
    }
}
