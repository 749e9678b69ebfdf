//! kube's CertificateSubjectRestriction admission: a request to the
//! kube-apiserver client signer may not ask for the `system:masters`
//! group (an organization of its subject), which no authorizer can limit.

use apimachinery::error::Result;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation, forbidden};
use generic_server::filters::rbac::SUPERUSERS;
use serde_json::Value;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::der_parser::asn1_rs::Tag;
use x509_parser::oid_registry;
use x509_parser::prelude::FromDer;
use x509_parser::x509::AttributeTypeAndValue;

use super::is_csr;
use crate::resources::fields::text;
use crate::resources::{KUBE_APISERVER_CLIENT_SIGNER, request_der};

/// kube's CertificateSubjectRestriction admission plugin.
pub struct CertificateSubjectRestriction;

/// An attribute's text, read as Go's x509 parser reads the string types
/// it knows (T61 as raw bytes, BMP as UTF-16); any other type fails the
/// whole request there, and here.
fn attribute_text(attr: &AttributeTypeAndValue<'_>) -> std::result::Result<String, String> {
    let bytes = attr.as_slice();
    match attr.attr_value().tag() {
        Tag::PrintableString
        | Tag::Utf8String
        | Tag::Ia5String
        | Tag::NumericString
        | Tag::T61String => Ok(String::from_utf8_lossy(bytes).into_owned()),
        Tag::BmpString => {
            let bytes = bytes.strip_suffix(&[0, 0]).unwrap_or(bytes);
            if bytes.len() % 2 != 0 {
                return Err(
                    "x509: invalid RDNSequence: invalid attribute value: invalid BMPString".into(),
                );
            }
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            Ok(String::from_utf16_lossy(&units))
        }
        Tag(other) => Err(format!(
            "x509: invalid RDNSequence: invalid attribute value: unsupported string type: {other}"
        )),
    }
}

/// The organizations of the subject of the request `der`.
fn organizations(der: &[u8]) -> std::result::Result<Vec<String>, String> {
    let (_, request) = X509CertificationRequest::from_der(der).map_err(|e| e.to_string())?;
    let subject = &request.certification_request_info.subject;
    let mut found = Vec::new();
    for attr in subject.iter_attributes() {
        let text = attribute_text(attr)?;
        if attr.attr_type() == &oid_registry::OID_X509_ORGANIZATION_NAME {
            found.push(text);
        }
    }
    Ok(found)
}

#[async_trait::async_trait]
impl AdmissionPlugin for CertificateSubjectRestriction {
    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        if !is_csr(attrs) || !attrs.subresource.is_empty() || attrs.operation != Operation::Create {
            return Ok(());
        }
        let Some(obj) = obj else { return Ok(()) };
        if text(obj, "/spec/signerName") != KUBE_APISERVER_CLIENT_SIGNER {
            return Ok(());
        }
        let parsed = request_der(obj)
            .map_err(str::to_string)
            .and_then(|der| organizations(&der));
        match parsed {
            Err(e) => Err(forbidden(attrs, &format!("failed to parse CSR: {e}"))),
            Ok(groups) if groups.iter().any(|g| g == SUPERUSERS) => Err(forbidden(
                attrs,
                &format!(
                    "use of {KUBE_APISERVER_CLIENT_SIGNER} signer with {SUPERUSERS} group is not allowed"
                ),
            )),
            Ok(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{resource, user};
    use super::*;
    use base64::Engine;
    use generic_server::admission::Attributes;
    use rcgen::{CertificateParams, DnType, DnValue, KeyPair};
    use serde_json::json;

    /// A request whose subject has these organizations, for `signer`.
    fn csr(organizations: Vec<DnValue>, signer: &str) -> Value {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "mallory");
        for org in organizations {
            params
                .distinguished_name
                .push(DnType::OrganizationName, org);
        }
        let key = KeyPair::generate().expect("a key");
        let pem = params
            .serialize_request(&key)
            .expect("a request")
            .pem()
            .expect("PEM");
        let request = base64::engine::general_purpose::STANDARD.encode(pem);
        json!({"spec": {"request": request, "signerName": signer, "usages": ["client auth"]}})
    }

    async fn check(obj: &Value) -> Result<()> {
        let resource = resource();
        let user = user("mallory");
        let attrs = Attributes {
            operation: Operation::Create,
            resource: &resource,
            subresource: "",
            namespace: "",
            name: "req",
            old: None,
            user: &user,
            dry_run: false,
            equivalents: None,
            warnings: Default::default(),
        };
        CertificateSubjectRestriction
            .validate(&attrs, Some(obj))
            .await
    }

    #[tokio::test]
    async fn no_system_masters_from_the_client_signer() {
        let masters = "system:masters";
        let message = "certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed";
        for organizations in [
            vec![DnValue::Utf8String(masters.into())],
            vec![
                DnValue::PrintableString("dev".try_into().expect("printable")),
                DnValue::PrintableString(masters.try_into().expect("printable")),
            ],
            vec![DnValue::BmpString(masters.try_into().expect("bmp"))],
            vec![DnValue::TeletexString(masters.try_into().expect("teletex"))],
        ] {
            let refused = check(&csr(organizations.clone(), KUBE_APISERVER_CLIENT_SIGNER))
                .await
                .expect_err("system:masters");
            assert_eq!(refused.code(), 403, "{organizations:?}");
            assert_eq!(refused.to_string(), message, "{organizations:?}");
        }
        let dev = vec![DnValue::Utf8String("dev".into())];
        assert!(check(&csr(dev, KUBE_APISERVER_CLIENT_SIGNER)).await.is_ok());
        // Another signer decides for itself.
        let mine = vec![DnValue::Utf8String(masters.into())];
        assert!(check(&csr(mine, "example.com/issuer")).await.is_ok());
        // A string type Go's parser does not read fails the request, as there.
        let universal = vec![DnValue::UniversalString(
            masters.try_into().expect("universal"),
        )];
        assert_eq!(
            check(&csr(universal, KUBE_APISERVER_CLIENT_SIGNER))
                .await
                .expect_err("unsupported")
                .to_string(),
            "certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: failed to parse CSR: x509: invalid RDNSequence: invalid attribute value: unsupported string type: 28"
        );
        let garbage =
            json!({"spec": {"request": "eA==", "signerName": KUBE_APISERVER_CLIENT_SIGNER}});
        assert_eq!(
            check(&garbage).await.expect_err("no request").to_string(),
            "certificatesigningrequests.certificates.k8s.io \"req\" is forbidden: failed to parse CSR: PEM block type must be CERTIFICATE REQUEST"
        );
    }
}
