//! certificates.k8s.io/v1 CertificateSigningRequests: the spec is fixed at
//! creation, `/approval` changes only `status.conditions`, and `/status`
//! keeps the Approved and Denied conditions it already had.

use apimachinery::error::{FieldError, Result};
use apimachinery::table::{self, Column};
use base64::Engine;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, int, is_set, items, text};

/// The key usages a request may ask for.
const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];
/// The shortest certificate a request may ask for.
const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The condition types only `/approval` may change.
const DECISIONS: [&str; 2] = ["Approved", "Denied"];

/// The rules of `certificates.k8s.io/v1/CertificateSigningRequest`.
pub struct CertificateSigningRequestStrategy;

fn is_decision(condition: &Value) -> bool {
    DECISIONS.contains(&text(condition, "/type"))
}

/// Stamps conditions missing their update and transition times.
fn stamp_conditions(obj: &mut Value) {
    let now = generic_server::registry::now_rfc3339();
    fields::each_mut(obj, "/status/conditions", |c| {
        fields::default(c, "/lastUpdateTime", json!(now));
        fields::default(c, "/lastTransitionTime", json!(now));
    });
}

fn signer_name_errors(name: &str) -> Vec<FieldError> {
    let message = "must be a fully qualified domain and path of the form 'example.com/signer-name'";
    let Some((domain, path)) = name.split_once('/') else {
        return vec![FieldError::invalid("spec.signerName", name, message)];
    };
    let mut errs = Vec::new();
    if path.is_empty()
        || !domain.contains('.')
        || !apimachinery::validation::dns1123_subdomain(domain).is_empty()
    {
        errs.push(FieldError::invalid("spec.signerName", name, message));
    }
    if name == "kubernetes.io/legacy-unknown" {
        errs.push(FieldError::invalid(
            "spec.signerName",
            name,
            "the legacy signerName is not allowed via this API version",
        ));
    }
    errs
}

/// kube's `extractCSRStatus`: Pending, Approved or Denied, then Failed and Issued.
fn condition_cell(obj: &Value) -> String {
    let has = |kind: &str| {
        items(obj, "/status/conditions")
            .iter()
            .any(|c| text(c, "/type") == kind)
    };
    let mut status = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !text(obj, "/status/certificate").is_empty() {
        status.push_str(",Issued");
    }
    status
}

/// Records who asked for a certificate, as kube's CSR strategy does on
/// create: `spec.username`, `uid`, `groups` and `extra` come from the
/// request's user, whatever the body said.
pub struct CsrRequester;

#[async_trait::async_trait]
impl AdmissionPlugin for CsrRequester {
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<()> {
        let is_csr = attrs.resource.group == "certificates.k8s.io"
            && attrs.resource.plural == "certificatesigningrequests";
        if !is_csr
            || attrs.operation != Operation::Create
            || !attrs.subresource.is_empty()
            || !obj["spec"].is_object()
        {
            return Ok(());
        }
        let user = attrs.user;
        let spec = &mut obj["spec"];
        for (field, value) in [
            ("username", json!(user.name)),
            ("uid", json!(user.uid)),
            ("groups", json!(user.groups)),
            ("extra", json!(user.extra)),
        ] {
            let empty = value.as_str().is_some_and(str::is_empty)
                || value.as_array().is_some_and(Vec::is_empty)
                || value.as_object().is_some_and(|m| m.is_empty());
            match spec.as_object_mut() {
                Some(spec) if empty => drop(spec.remove(field)),
                Some(spec) => drop(spec.insert(field.to_string(), value)),
                None => {}
            }
        }
        Ok(())
    }
}

impl Strategy for CertificateSigningRequestStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        new["spec"] = fields::value(old, "/spec");
    }

    fn update_subresource(&self, subresource: &str, new: &Value, old: &Value) -> Option<Value> {
        let mut merged = old.clone();
        match subresource {
            "approval" => {
                fields::set(
                    &mut merged,
                    "/status/conditions",
                    fields::value(new, "/status/conditions"),
                );
            }
            "status" => {
                let mut status = fields::value(new, "/status");
                let kept: Vec<Value> = items(old, "/status/conditions")
                    .iter()
                    .filter(|c| is_decision(c))
                    .cloned()
                    .collect();
                let mut conditions: Vec<Value> = items(&status, "/conditions")
                    .iter()
                    .filter(|c| !is_decision(c))
                    .cloned()
                    .collect();
                conditions.extend(kept);
                if !status.is_object() {
                    status = json!({});
                }
                status["conditions"] = json!(conditions);
                merged["status"] = status;
            }
            _ => return None,
        }
        fields::set(
            &mut merged,
            "/metadata/resourceVersion",
            fields::value(new, "/metadata/resourceVersion"),
        );
        stamp_conditions(&mut merged);
        Some(merged)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let request = text(obj, "/spec/request");
        let pem = base64::engine::general_purpose::STANDARD
            .decode(request)
            .unwrap_or_default();
        if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE REQUEST-----") {
            errs.push(FieldError::invalid(
                "spec.request",
                request,
                "PEM block type must be CERTIFICATE REQUEST",
            ));
        }
        let signer = text(obj, "/spec/signerName");
        if signer.is_empty() {
            errs.push(FieldError::required("spec.signerName", ""));
        } else {
            errs.extend(signer_name_errors(signer));
        }
        for (i, usage) in items(obj, "/spec/usages").iter().enumerate() {
            let usage = usage.as_str().unwrap_or_default();
            if !USAGES.contains(&usage) {
                errs.push(FieldError::not_supported(
                    format!("spec.usages[{i}]"),
                    usage,
                    USAGES,
                ));
            }
        }
        if let Some(seconds) =
            int(obj, "/spec/expirationSeconds").filter(|s| *s < MIN_EXPIRATION_SECONDS)
        {
            errs.push(FieldError::invalid(
                "spec.expirationSeconds",
                seconds,
                "may not specify a duration less than 600 seconds (10 minutes)",
            ));
        }
        for (i, c) in items(obj, "/status/conditions").iter().enumerate() {
            if text(c, "/type").is_empty() {
                errs.push(FieldError::required(
                    format!("status.conditions[{i}].type"),
                    "",
                ));
            }
        }
        let decided = |kind: &str| {
            items(obj, "/status/conditions")
                .iter()
                .any(|c| text(c, "/type") == kind && text(c, "/status") != "False")
        };
        if decided("Approved") && decided("Denied") {
            errs.push(FieldError::invalid(
                "status.conditions",
                "",
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            table::age_column(),
            Column::new(
                "SignerName",
                "string",
                "Only one signer may sign a given certificate.",
            ),
            Column::new(
                "Requestor",
                "string",
                "Name of the user that requested the certificate.",
            ),
            Column::new(
                "RequestedDuration",
                "string",
                "The requested validity of the issued certificate.",
            ),
            Column::new(
                "Condition",
                "string",
                "The current approval state of the request.",
            ),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let duration = int(obj, "/spec/expirationSeconds")
            .map(table::human_duration)
            .unwrap_or_else(|| "<none>".into());
        let signer = if is_set(obj, "/spec/signerName") {
            text(obj, "/spec/signerName")
        } else {
            "<none>"
        };
        vec![
            table::name_cell(obj),
            table::age_cell(obj),
            json!(signer),
            fields::text_cell(obj, "/spec/username"),
            json!(duration),
            json!(condition_cell(obj)),
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.signerName"]
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        Some(fields::field_string(obj, field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csr() -> Value {
        let pem = "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n";
        let request = base64::engine::general_purpose::STANDARD.encode(pem);
        let mut c = json!({"metadata": {"name": "alice", "resourceVersion": "5"}, "spec": {"request": request, "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"], "expirationSeconds": 86400}});
        CertificateSigningRequestStrategy.prepare_for_create(&mut c);
        c
    }

    #[test]
    fn validation_and_row() {
        let c = csr();
        assert!(
            CertificateSigningRequestStrategy.validate(&c).is_empty(),
            "{:?}",
            CertificateSigningRequestStrategy.validate(&c)
        );
        let cells = CertificateSigningRequestStrategy.cells(&c);
        assert_eq!(
            (cells[2].clone(), cells[4].clone(), cells[5].clone()),
            (
                json!("kubernetes.io/kube-apiserver-client"),
                json!("24h"),
                json!("Pending")
            )
        );
        let bad = json!({"spec": {"request": "eA==", "signerName": "nodomain"}});
        let errs: Vec<String> = CertificateSigningRequestStrategy
            .validate(&bad)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs[0],
            "spec.request: Invalid value: \"eA==\": PEM block type must be CERTIFICATE REQUEST"
        );
        assert_eq!(
            errs[1],
            "spec.signerName: Invalid value: \"nodomain\": must be a fully qualified domain and path of the form 'example.com/signer-name'"
        );
    }

    #[test]
    fn approval_changes_only_conditions() {
        let old = csr();
        let mut request = old.clone();
        request["spec"]["signerName"] = json!("example.com/other");
        request["status"] = json!({"conditions": [{"type": "Approved", "status": "True", "reason": "OK"}], "certificate": "eA=="});
        let merged = CertificateSigningRequestStrategy
            .update_subresource("approval", &request, &old)
            .expect("approval is handled");
        assert_eq!(merged["spec"], old["spec"]);
        assert_eq!(merged["status"]["conditions"][0]["type"], "Approved");
        assert!(merged["status"].get("certificate").is_none());
        assert!(
            merged["status"]["conditions"][0]
                .get("lastUpdateTime")
                .is_some()
        );
        assert_eq!(
            CertificateSigningRequestStrategy.cells(&merged)[5],
            "Approved"
        );
        let through_status = CertificateSigningRequestStrategy
            .update_subresource("status", &request, &old)
            .expect("status is handled");
        assert_eq!(through_status["status"]["conditions"], json!([]));
        assert_eq!(through_status["status"]["certificate"], "eA==");
    }
}
