//! kube's admission plugins for CertificateSigningRequests: who may
//! approve ([`approval`]) and sign ([`signing`]) requests for a signer, and
//! which subjects a request may name ([`subject_restriction`]).

pub mod approval;
pub mod signing;
pub mod subject_restriction;

use std::sync::{Arc, OnceLock};

use apimachinery::rbac::Decision;
use generic_server::admission::Attributes;
use generic_server::filters::rbac::Rbac;
use generic_server::request::UserInfo;
use generic_server::request_info::RequestInfo;

/// The group of CertificateSigningRequests and of the `signers` they name.
const GROUP: &str = "certificates.k8s.io";

/// The RBAC policy, set once the RBAC stores exist.
pub type Policy = Arc<OnceLock<Arc<Rbac>>>;

/// Whether the write is to a CertificateSigningRequest (through any subresource).
fn is_csr(attrs: &Attributes<'_>) -> bool {
    attrs.resource.group == GROUP && attrs.resource.plural == "certificatesigningrequests"
}

/// Whether `user` may `verb` the signer `signer_name`, as kube's
/// `IsAuthorizedForSignerName` asks: the `signers` resource named either
/// the signer or `<domain>/*`. No policy loaded yet allows nothing.
fn is_authorized_for_signer_name(
    policy: &Policy,
    user: &UserInfo,
    verb: &str,
    signer_name: &str,
) -> bool {
    let Some(rbac) = policy.get() else {
        return false;
    };
    let domain = signer_name.split('/').next().unwrap_or_default();
    [signer_name.to_string(), format!("{domain}/*")]
        .into_iter()
        .any(|name| {
            let info = RequestInfo {
                is_resource_request: true,
                verb: verb.into(),
                api_group: GROUP.into(),
                api_version: "*".into(),
                resource: "signers".into(),
                name,
                ..Default::default()
            };
            matches!(rbac.decide(user, &info, ""), Decision::Allow(_))
        })
}

/// What the plugins' tests share: an RBAC policy in memory and writes to
/// CertificateSigningRequests.
#[cfg(test)]
pub(crate) mod test_support {
    use std::sync::Arc;

    use generic_server::admission::{Attributes, Operation};
    use generic_server::request::UserInfo;
    use generic_server::resource::Resource;
    use generic_server::storage::Storage;
    use generic_server::storage::cacher::Cacher;
    use generic_server::storage::memory::MemoryStorage;
    use serde_json::{Value, json};

    use super::Policy;

    /// The CertificateSigningRequest resource.
    pub(crate) fn resource() -> Resource {
        Resource::builtin::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>(
            crate::resources::CertificateSigningRequestStrategy,
        )
    }

    /// A user in no group but the authenticated one.
    pub(crate) fn user(name: &str) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        }
    }

    /// A policy granting each `(user, verb, signer name)` by a ClusterRole and binding of its own.
    pub(crate) async fn policy(grants: &[(&str, &str, &str)]) -> Policy {
        let storage = Arc::new(MemoryStorage::default());
        let put = |key: String, value: Value| {
            let storage = storage.clone();
            async move {
                storage
                    .create(&key, serde_json::to_vec(&value).expect("json").into())
                    .await
                    .expect("stored");
            }
        };
        let root = "/registry/rbac.authorization.k8s.io";
        for (i, (user, verb, signer)) in grants.iter().enumerate() {
            put(format!("{root}/clusterroles/r{i}"), json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": format!("r{i}")},
                "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "resourceNames": [signer], "verbs": [verb]}]
            })).await;
            put(format!("{root}/clusterrolebindings/b{i}"), json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": format!("b{i}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("r{i}")},
                "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]
            })).await;
        }
        let cacher = Cacher::start(storage).await.expect("a cacher");
        let rbac = generic_server::filters::rbac::Rbac::new(&cacher, "/registry")
            .await
            .expect("the policy");
        cacher.wait_fresh().await.expect("fresh");
        let policy = Policy::default();
        let _ = policy.set(Arc::new(rbac));
        policy
    }

    /// An update through `subresource` of `old` by `user`.
    pub(crate) fn update<'a>(
        resource: &'a Resource,
        user: &'a UserInfo,
        subresource: &'a str,
        old: &'a Value,
    ) -> Attributes<'a> {
        Attributes {
            operation: Operation::Update,
            resource,
            subresource,
            namespace: "",
            name: "req",
            old: Some(old),
            user,
            dry_run: false,
            equivalents: None,
            warnings: Default::default(),
        }
    }
}
