//! kube's CertificateApproval admission: approving or denying a request
//! (an update of `certificatesigningrequests/approval`) takes the
//! `approve` verb on the `signers` resource named for its signer.

use apimachinery::error::Result;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation, forbidden};
use serde_json::Value;

use super::{Policy, is_authorized_for_signer_name, is_csr};
use crate::resources::fields::text;

/// kube's CertificateApproval admission plugin.
pub struct CertificateApproval {
    /// The RBAC policy the approver is checked against.
    pub policy: Policy,
}

#[async_trait::async_trait]
impl AdmissionPlugin for CertificateApproval {
    async fn validate(&self, attrs: &Attributes<'_>, _obj: Option<&Value>) -> Result<()> {
        if !is_csr(attrs) || attrs.subresource != "approval" || attrs.operation != Operation::Update
        {
            return Ok(());
        }
        // The stored signer: the one the request was made for.
        let signer = attrs
            .old
            .map(|old| text(old, "/spec/signerName"))
            .unwrap_or_default();
        if is_authorized_for_signer_name(&self.policy, attrs.user, "approve", signer) {
            return Ok(());
        }
        Err(forbidden(
            attrs,
            &format!("user not permitted to approve requests with signerName {signer:?}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{policy, resource, update, user};
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn approving_takes_approve_on_the_signer_or_its_domain() {
        let plugin = CertificateApproval {
            policy: policy(&[
                ("exact", "approve", "kubernetes.io/kube-apiserver-client"),
                ("domain", "approve", "kubernetes.io/*"),
                ("signer", "sign", "kubernetes.io/kube-apiserver-client"),
                ("other", "approve", "example.com/*"),
            ])
            .await,
        };
        let resource = resource();
        let old = json!({"spec": {"signerName": "kubernetes.io/kube-apiserver-client"}});
        // The signer the request names now is not the one asked about.
        let new = json!({"spec": {"signerName": "example.com/mine"}});
        for name in ["exact", "domain"] {
            let user = user(name);
            let attrs = update(&resource, &user, "approval", &old);
            assert!(plugin.validate(&attrs, Some(&new)).await.is_ok(), "{name}");
        }
        for name in ["signer", "other", "nobody"] {
            let user = user(name);
            let attrs = update(&resource, &user, "approval", &old);
            let refused = plugin.validate(&attrs, Some(&new)).await.expect_err(name);
            assert_eq!(refused.code(), 403);
            assert_eq!(
                refused.to_string(),
                "certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: user not permitted to approve requests with signerName \"kubernetes.io/kube-apiserver-client\""
            );
        }
        // Other writes are not this plugin's.
        let nobody = user("nobody");
        for subresource in ["", "status"] {
            let attrs = update(&resource, &nobody, subresource, &old);
            assert!(plugin.validate(&attrs, Some(&new)).await.is_ok());
        }
        let admin = generic_server::request::UserInfo {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        let attrs = update(&resource, &admin, "approval", &old);
        assert!(plugin.validate(&attrs, Some(&new)).await.is_ok());
    }
}
