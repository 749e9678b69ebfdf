//! kube's CertificateSigning admission: writing a request's
//! `status.certificate` (an update of `certificatesigningrequests/status`
//! that changes it) takes the `sign` verb on the `signers` resource named
//! for its signer.

use apimachinery::error::Result;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation, forbidden};
use serde_json::Value;

use super::{Policy, is_authorized_for_signer_name, is_csr};
use crate::resources::fields::text;

/// kube's CertificateSigning admission plugin.
pub struct CertificateSigning {
    /// The RBAC policy the signer is checked against.
    pub policy: Policy,
}

#[async_trait::async_trait]
impl AdmissionPlugin for CertificateSigning {
    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        if !is_csr(attrs) || attrs.subresource != "status" || attrs.operation != Operation::Update {
            return Ok(());
        }
        let (Some(old), Some(new)) = (attrs.old, obj) else {
            return Ok(());
        };
        let certificate = "/status/certificate";
        if text(old, certificate) == text(new, certificate) {
            return Ok(());
        }
        let signer = text(old, "/spec/signerName");
        if is_authorized_for_signer_name(&self.policy, attrs.user, "sign", signer) {
            return Ok(());
        }
        Err(forbidden(
            attrs,
            &format!("user not permitted to sign requests with signerName {signer:?}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{policy, resource, update, user};
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_certificate_takes_sign_on_the_signer_or_its_domain() {
        let plugin = CertificateSigning {
            policy: policy(&[
                ("exact", "sign", "example.com/issuer"),
                ("domain", "sign", "example.com/*"),
                ("approver", "approve", "example.com/issuer"),
                ("elsewhere", "sign", "kubernetes.io/*"),
            ])
            .await,
        };
        let resource = resource();
        let old = json!({"spec": {"signerName": "example.com/issuer"}, "status": {}});
        let issued = json!({"spec": {"signerName": "example.com/issuer"}, "status": {"certificate": "Y2VydA=="}});
        for name in ["exact", "domain"] {
            let user = user(name);
            let attrs = update(&resource, &user, "status", &old);
            assert!(
                plugin.validate(&attrs, Some(&issued)).await.is_ok(),
                "{name}"
            );
        }
        for name in ["approver", "elsewhere", "nobody"] {
            let user = user(name);
            let attrs = update(&resource, &user, "status", &old);
            let refused = plugin
                .validate(&attrs, Some(&issued))
                .await
                .expect_err(name);
            assert_eq!(refused.code(), 403);
            assert_eq!(
                refused.to_string(),
                "certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: user not permitted to sign requests with signerName \"example.com/issuer\""
            );
            // A status write that leaves the certificate alone needs no signer.
            let failed = json!({"spec": old["spec"], "status": {"conditions": [{"type": "Failed", "status": "True"}]}});
            assert!(plugin.validate(&attrs, Some(&failed)).await.is_ok());
        }
        // Removing a certificate changes it too.
        let nobody = user("nobody");
        let attrs = update(&resource, &nobody, "status", &issued);
        assert!(plugin.validate(&attrs, Some(&old)).await.is_err());
    }
}
