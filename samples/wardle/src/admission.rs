//! BanFlunder, kube's sample admission plugin: a Flunder may not take a
//! name that any Fischer disallows.

use std::sync::Arc;

use kubechain_apiserver::apimachinery::error::{Error, Reason, Result};
use kubechain_apiserver::generic_server::registry::options::ListOptions;
use kubechain_apiserver::generic_server::server::ApiServer;
use kubechain_apiserver::{AdmissionPlugin, Attributes, Operation};
use serde_json::Value;

use crate::types::GROUP;
use crate::types::v1alpha1::VERSION;

/// Refuses a Flunder created with a name a Fischer disallows.
pub struct BanFlunder {
    /// The server whose Fischers are read.
    pub server: Arc<ApiServer>,
}

#[async_trait::async_trait]
impl AdmissionPlugin for BanFlunder {
    async fn validate(&self, attrs: &Attributes<'_>, _obj: Option<&Value>) -> Result<()> {
        if attrs.operation != Operation::Create
            || attrs.resource.group != GROUP
            || attrs.resource.plural != "flunders"
        {
            return Ok(());
        }
        let fischers = self
            .server
            .store(GROUP, VERSION, "fischers")
            .ok_or_else(|| Error::internal("fischers are not served"))?;
        let listed = fischers.list("", &ListOptions::default()).await?;
        let banned = listed.items.iter().any(|fischer| {
            fischer.value()["disallowedFlunders"]
                .as_array()
                .is_some_and(|names| names.iter().any(|n| n.as_str() == Some(attrs.name)))
        });
        if banned {
            return Err(Error::new(
                Reason::Forbidden,
                format!(
                    "flunders.{GROUP} \"{}\" is forbidden: this name may not be used, please change the resource name",
                    attrs.name
                ),
            ));
        }
        Ok(())
    }
}
