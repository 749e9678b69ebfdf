//! TokenRequest: `POST serviceaccounts/<name>/token` signs a short-lived
//! token for an existing service account (`kubectl create token`).

use std::sync::Arc;

use apimachinery::error::{Error, FieldError, Result};
use apimachinery::group_version::GroupResource;
use generic_server::jwt::{Account, BoundKind, BoundObject, Signer};
use generic_server::registry::Store;
use generic_server::request::ApiRequest;
use generic_server::rest::CreateOnly;
use serde_json::{Value, json};

use crate::admission::node_restriction;

/// Shortest token lifetime a client may ask for (kube: 10 minutes).
const MIN_SECONDS: i64 = 600;
/// Longest token lifetime a client may ask for (kube: 2^32 seconds).
const MAX_SECONDS: i64 = 1 << 32;
/// Lifetime when none is asked for.
const DEFAULT_SECONDS: i64 = 3600;

/// Answers token requests for the service accounts in `accounts`.
pub struct TokenRequests {
    signer: Signer,
    accounts: Arc<Store>,
    /// Where the Pods and Secrets a token may be bound to are read.
    pods: Arc<Store>,
    secrets: Arc<Store>,
    audience: String,
    max_seconds: i64,
}

/// The stores a TokenRequest reads: the accounts, and what tokens bind to.
pub struct TokenStores {
    /// ServiceAccounts.
    pub accounts: Arc<Store>,
    /// Pods.
    pub pods: Arc<Store>,
    /// Secrets.
    pub secrets: Arc<Store>,
}

impl TokenRequests {
    /// Signs with `signer`; tokens are for `audience` unless the request
    /// names others, and live at most `max_seconds` (kube's
    /// `--service-account-max-token-expiration`: a longer request is cut to it).
    pub fn new(signer: Signer, stores: TokenStores, audience: &str, max_seconds: i64) -> Self {
        TokenRequests {
            signer,
            accounts: stores.accounts,
            pods: stores.pods,
            secrets: stores.secrets,
            audience: audience.into(),
            max_seconds,
        }
    }

    /// The object `spec.boundObjectRef` names, checked as kube does: a v1
    /// Pod (running as this account) or Secret in the account's namespace,
    /// with the uid given, if one is.
    async fn bound_object(
        &self,
        namespace: &str,
        account: &str,
        reference: &Value,
    ) -> Result<Option<BoundObject>> {
        if reference.is_null() {
            return Ok(None);
        }
        let text = |k: &str| reference[k].as_str().unwrap_or_default();
        let (api_version, kind_name, name) = (text("apiVersion"), text("kind"), text("name"));
        let kind = match (api_version, BoundKind::from_kind(kind_name)) {
            ("v1", Some(kind)) => kind,
            _ => {
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
                return Err(Error::bad_request(format!(
                    "cannot bind token to object of type {}{version}, Kind={kind_name}",
                    if group.is_empty() {
                        String::new()
                    } else {
                        format!("{group}/")
                    }
                )));
            }
        };
        let store = match kind {
            BoundKind::Pod => &self.pods,
            BoundKind::Secret => &self.secrets,
        };
        let object = store.get(namespace, name, None).await?.value();
        if kind == BoundKind::Pod {
            let runs_as = object
                .pointer("/spec/serviceAccountName")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("default");
            if runs_as != account {
                return Err(Error::bad_request(format!(
                    "cannot bind token for serviceaccount \"{account}\" to pod running with serviceaccount \"{runs_as}\""
                )));
            }
        }
        let uid = object
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let wanted = text("uid");
        if !wanted.is_empty() && wanted != uid {
            // kube names the kind where the resource goes: `Pod "web"`.
            return Err(Error::Conflict {
                resource: GroupResource::new("", kind_name),
                name: name.to_string(),
                detail: format!(
                    "the UID in the bound object reference ({wanted}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
                ),
            });
        }
        Ok(Some(BoundObject {
            kind,
            name: name.to_string(),
            uid,
        }))
    }
}

#[async_trait::async_trait]
impl CreateOnly for TokenRequests {
    async fn create(&self, req: &ApiRequest, mut obj: Value) -> Result<Value> {
        let (namespace, name) = (&req.info.namespace, &req.info.name);
        // NodeRestriction: a kubelet's token is bound to a pod on its node.
        let bound_pod = node_restriction::token_pod(&req.user, &obj)
            .map_err(|why| node_restriction::refused("serviceaccounts", name, why))?;
        if let Some(pod) = bound_pod {
            let pod = self.pods.get(namespace, pod, None).await?.value();
            if let Some(why) = node_restriction::token_refusal(&req.user, &obj, &pod) {
                return Err(node_restriction::refused("serviceaccounts", name, why));
            }
        }
        let account = self.accounts.get(namespace, name, None).await?.value();
        let seconds = match obj.pointer("/spec/expirationSeconds") {
            None | Some(Value::Null) => DEFAULT_SECONDS,
            Some(value) => value.as_i64().ok_or_else(|| {
                Error::bad_request(format!(
                    "spec.expirationSeconds: {value} is not a 64-bit integer"
                ))
            })?,
        };
        let too = if seconds < MIN_SECONDS {
            Some("may not specify a duration less than 10 minutes")
        } else if seconds > MAX_SECONDS {
            Some("may not specify a duration larger than 2^32 seconds")
        } else {
            None
        };
        if let Some(detail) = too {
            let cause = FieldError::invalid("spec.expirationSeconds", seconds, detail);
            return Err(Error::invalid(
                "authentication.k8s.io",
                "TokenRequest",
                name,
                vec![cause],
            ));
        }
        let seconds = seconds.min(self.max_seconds);
        let mut audiences: Vec<String> = obj
            .pointer("/spec/audiences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        if audiences.is_empty() {
            audiences.push(self.audience.clone());
        }
        let bound = self
            .bound_object(namespace, name, &obj["spec"]["boundObjectRef"])
            .await?;
        let account = Account {
            namespace: namespace.clone(),
            name: name.clone(),
            uid: account
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            bound,
        };
        let now = time::OffsetDateTime::now_utc();
        let token = self
            .signer
            .token(&account, &audiences, now.unix_timestamp(), seconds)
            .map_err(Error::internal)?;
        let expires = (now + time::Duration::seconds(seconds))
            .replace_nanosecond(0)
            .unwrap_or(now);
        let expires = expires
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        obj["metadata"]["name"] = json!(name);
        obj["metadata"]["namespace"] = json!(namespace);
        obj["metadata"]["creationTimestamp"] = Value::Null;
        obj["spec"]["audiences"] = json!(audiences);
        obj["spec"]["expirationSeconds"] = json!(seconds);
        obj["status"] = json!({"token": token, "expirationTimestamp": expires});
        Ok(obj)
    }
}
