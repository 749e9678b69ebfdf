//! Computed resources with every read verb, watch included: each
//! endpoint's objects are listed every period and mirrored into memory, and
//! the generic store serves the mirror. An object whose content did not
//! change keeps its resourceVersion; one that changed is MODIFIED, one that
//! appeared ADDED, one that went DELETED, so a client can watch metrics
//! from a resourceVersion, with bookmarks, as it watches stored objects.
//! What a mirrored endpoint lists is the same for every caller (it is
//! listed as the server itself); authorization still decides who reads it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::request::{ApiRequest, UserInfo};
use crate::resource::Resource;
use crate::rest::ReadOnly;
use crate::storage::Storage;
use apimachinery::error::Result;

/// The key root of mirrored objects (in the mirror's own memory storage).
pub const ROOT: &str = "/registry";

/// One endpoint and where its objects are mirrored.
pub struct Mirror {
    resource: Resource,
    endpoint: Arc<dyn ReadOnly>,
    storage: Arc<dyn Storage>,
    /// The server listing, as the system.
    request: ApiRequest,
}

impl Mirror {
    /// Mirrors `endpoint`'s objects, as `resource`, into `storage`.
    pub fn new(resource: Resource, endpoint: Arc<dyn ReadOnly>, storage: Arc<dyn Storage>) -> Self {
        let path = format!(
            "/apis/{}/{}/{}",
            resource.group, resource.version, resource.plural
        );
        let user = UserInfo {
            name: "system:apiserver".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            ..UserInfo::default()
        };
        let request = ApiRequest::new(
            http::Method::GET,
            &path,
            "",
            http::HeaderMap::new(),
            Bytes::new(),
            user,
        );
        Mirror {
            resource,
            endpoint,
            storage,
            request,
        }
    }

    /// Lists the endpoint now and writes what changed; returns how many
    /// objects were written or removed.
    pub async fn sync(&self) -> Result<usize> {
        let prefix = self.resource.key_prefix(ROOT);
        let mut wanted: BTreeMap<String, Bytes> = BTreeMap::new();
        for object in self.endpoint.list(&self.request, "").await? {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            if name.is_empty() {
                continue;
            }
            let key = match object["metadata"]["namespace"].as_str() {
                Some(namespace) if self.resource.namespaced => {
                    format!("{prefix}{namespace}/{name}")
                }
                _ => format!("{prefix}{name}"),
            };
            wanted.insert(key, crate::rest::typed_bytes(&self.resource, object));
        }
        let changed =
            crate::storage::replace_prefix(self.storage.as_ref(), &prefix, wanted).await?;
        Ok(changed)
    }

    /// Syncs every `period` until the process ends; a failed listing keeps
    /// the last mirror.
    pub fn follow(self, period: Duration) {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                if let Err(error) = self.sync().await {
                    tracing::warn!(resource = %self.resource.plural, %error, "listing a computed resource");
                }
            }
        });
    }
}
