//! certificates.k8s.io/v1 CertificateSigningRequests: the spec is fixed at
//! creation, `/approval` changes only `status.conditions`, `/status` may
//! not add or drop the Approved and Denied conditions, and
//! `status.certificate` holds PEM certificates and is set once.

use apimachinery::error::{FieldError, Result};
use apimachinery::table::{self, Column};
use base64::Engine;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, int, is_set, items, text};
use super::pem;

/// The signer of client certificates that kube-apiserver trusts.
pub const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// The signer name of requests made through v1beta1 without one.
const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";
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
/// The condition types only `/approval` may add or change.
const DECISIONS: [&str; 2] = ["Approved", "Denied"];
/// The condition types no update may remove.
const PERMANENT: [&str; 3] = ["Approved", "Denied", "Failed"];
/// The statuses a condition of a [`PERMANENT`] type may have.
const TRUE_ONLY: &[&str] = &["True"];
/// The statuses any other condition may have.
const ANY_STATUS: &[&str] = &["False", "True", "Unknown"];
/// How kube shows a certificate in a field error.
const CERTIFICATE_DATA: &str = "<certificate data>";

/// The rules of `certificates.k8s.io/v1/CertificateSigningRequest`.
pub struct CertificateSigningRequestStrategy;

/// What a write may do beyond a create, and the bad data already stored
/// that it may keep (kube's `certificateValidationOptions`).
#[derive(Debug, Default)]
struct Allowances {
    /// Add or change Approved and Denied conditions (`/approval`).
    approval_conditions: bool,
    /// Set `status.certificate` (`/status`).
    certificate: bool,
    /// Both an Approved and a Denied condition.
    approved_and_denied: bool,
    /// The legacy-unknown signer.
    legacy_signer: bool,
    /// Two conditions of one type.
    duplicate_condition_types: bool,
    /// A condition without a type.
    empty_condition_type: bool,
    /// A `status.certificate` that is not PEM certificates.
    arbitrary_certificate: bool,
    /// Usages outside [`USAGES`].
    unknown_usages: bool,
    /// A usage listed twice.
    duplicate_usages: bool,
}

impl Allowances {
    /// What kube tolerates in `new` given the stored `old` (none on create).
    fn new(new: &Value, old: Option<&Value>) -> Self {
        let Some(old) = old else {
            return Allowances::default();
        };
        let types: Vec<&str> = items(old, "/status/conditions")
            .iter()
            .map(|c| text(c, "/type"))
            .collect();
        let usages: Vec<&str> = items(old, "/spec/usages")
            .iter()
            .map(|u| u.as_str().unwrap_or_default())
            .collect();
        Allowances {
            approval_conditions: false,
            certificate: false,
            approved_and_denied: DECISIONS.iter().all(|d| types.contains(d)),
            legacy_signer: text(old, "/spec/signerName") == LEGACY_UNKNOWN_SIGNER,
            duplicate_condition_types: has_duplicates(&types),
            empty_condition_type: types.contains(&""),
            arbitrary_certificate: certificate_text(new) == certificate_text(old)
                || certificate_problem(old).is_some(),
            unknown_usages: usages.iter().any(|u| !USAGES.contains(u)),
            duplicate_usages: has_duplicates(&usages),
        }
    }
}

fn has_duplicates(values: &[&str]) -> bool {
    values
        .iter()
        .enumerate()
        .any(|(i, v)| values[..i].contains(v))
}

/// The conditions of type `kind`.
fn conditions_of<'a>(obj: &'a Value, kind: &str) -> Vec<&'a Value> {
    items(obj, "/status/conditions")
        .iter()
        .filter(|c| text(c, "/type") == kind)
        .collect()
}

/// The DER of the request in `spec.request`, as kube's `ParseCSR` finds
/// it: the first PEM block, which must be a CERTIFICATE REQUEST.
pub fn request_der(obj: &Value) -> Result<Vec<u8>, &'static str> {
    let pem = base64::engine::general_purpose::STANDARD
        .decode(text(obj, "/spec/request"))
        .unwrap_or_default();
    match pem::decode(&pem) {
        Some((block, _)) if block.label == "CERTIFICATE REQUEST" => Ok(block.der),
        _ => Err("PEM block type must be CERTIFICATE REQUEST"),
    }
}

/// `status.certificate` as sent: base64 of PEM text, `""` when unset.
fn certificate_text(obj: &Value) -> &str {
    text(obj, "/status/certificate")
}

/// What is wrong with `status.certificate`, in kube's words: it must be
/// one or more CERTIFICATE blocks without headers, each holding
/// certificates that parse (text around the blocks is allowed).
fn certificate_problem(obj: &Value) -> Option<String> {
    let encoded = certificate_text(obj);
    if encoded.is_empty() {
        return None;
    }
    let Ok(data) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
        return Some("illegal base64 data".into());
    };
    let blocks = pem::blocks(&data);
    for block in &blocks {
        if block.label != "CERTIFICATE" {
            return Some(format!(
                "only CERTIFICATE PEM blocks are allowed, found {:?}",
                block.label
            ));
        }
        if block.has_headers {
            return Some("no PEM block headers are permitted".into());
        }
        let mut der = block.der.as_slice();
        if der.is_empty() {
            return Some("found CERTIFICATE PEM block containing 0 certificates".into());
        }
        while !der.is_empty() {
            match x509_parser::parse_x509_certificate(der) {
                Ok((rest, _)) => der = rest,
                Err(_) => return Some("x509: malformed certificate".into()),
            }
        }
    }
    if blocks.is_empty() {
        return Some("must contain at least one CERTIFICATE PEM block".into());
    }
    None
}

/// Stamps conditions missing their update and transition times, as kube's
/// `populateConditionTimestamps`: a condition whose type and status the
/// stored object already had keeps that one's transition time.
fn populate_condition_timestamps(conditions: &mut [Value], old: &Value) {
    let now = generic_server::registry::now_rfc3339();
    for condition in conditions.iter_mut() {
        fields::default(condition, "/lastUpdateTime", json!(now));
        let transition = items(old, "/status/conditions")
            .iter()
            .find(|o| {
                text(o, "/type") == text(condition, "/type")
                    && text(o, "/status") == text(condition, "/status")
                    && !text(o, "/lastTransitionTime").is_empty()
            })
            .map_or_else(|| json!(now), |o| o["lastTransitionTime"].clone());
        fields::default(condition, "/lastTransitionTime", transition);
    }
}

/// Puts `conditions` into `status`, leaving the field out when there are none.
fn set_conditions(status: &mut Value, conditions: Vec<Value>) {
    if !status.is_object() {
        *status = json!({});
    }
    if conditions.is_empty() {
        fields::remove(status, "/conditions");
    } else {
        status["conditions"] = json!(conditions);
    }
}

fn signer_name_errors(name: &str) -> Vec<FieldError> {
    let message = "must be a fully qualified domain and path of the form 'example.com/signer-name'";
    let Some((domain, path)) = name.split_once('/') else {
        return vec![FieldError::invalid("spec.signerName", name, message)];
    };
    if path.is_empty()
        || !domain.contains('.')
        || !apimachinery::validation::dns1123_subdomain(domain).is_empty()
    {
        return vec![FieldError::invalid("spec.signerName", name, message)];
    }
    Vec::new()
}

/// kube's `validateConditions`.
fn condition_errors(obj: &Value, allow: &Allowances) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in items(obj, "/status/conditions").iter().enumerate() {
        let (kind, status) = (text(c, "/type"), text(c, "/status"));
        let at = |field: &str| format!("status.conditions[{i}].{field}");
        if !allow.empty_condition_type && kind.is_empty() {
            errs.push(FieldError::required(at("type"), ""));
        }
        let allowed = if PERMANENT.contains(&kind) {
            TRUE_ONLY
        } else {
            ANY_STATUS
        };
        if status.is_empty() {
            errs.push(FieldError::required(at("status"), ""));
        } else if !allowed.contains(&status) {
            errs.push(FieldError::not_supported(at("status"), status, allowed));
        }
        if !allow.approved_and_denied {
            approved |= kind == "Approved";
            denied |= kind == "Denied";
            if DECISIONS.contains(&kind) && approved && denied {
                errs.push(FieldError::invalid(
                    at("type"),
                    kind,
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if !allow.duplicate_condition_types {
            if seen.contains(&kind) {
                errs.push(FieldError::duplicate(at("type"), kind));
            }
            seen.push(kind);
        }
    }
    errs
}

/// kube's `validateCertificateSigningRequest`.
fn validate_request(obj: &Value, allow: &Allowances) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Err(why) = request_der(obj) {
        errs.push(FieldError::invalid(
            "spec.request",
            text(obj, "/spec/request"),
            why,
        ));
    }
    let usages = items(obj, "/spec/usages");
    if usages.is_empty() {
        errs.push(FieldError::required("spec.usages", ""));
    }
    let usages: Vec<&str> = usages
        .iter()
        .map(|u| u.as_str().unwrap_or_default())
        .collect();
    if !allow.unknown_usages {
        for (i, usage) in usages.iter().enumerate() {
            if !USAGES.contains(usage) {
                errs.push(FieldError::not_supported(
                    format!("spec.usages[{i}]"),
                    *usage,
                    USAGES,
                ));
            }
        }
    }
    if !allow.duplicate_usages {
        for (i, usage) in usages.iter().enumerate() {
            if usages[..i].contains(usage) {
                errs.push(FieldError::duplicate(format!("spec.usages[{i}]"), *usage));
            }
        }
    }
    let signer = text(obj, "/spec/signerName");
    if !allow.legacy_signer && signer == LEGACY_UNKNOWN_SIGNER {
        errs.push(FieldError::invalid(
            "spec.signerName",
            signer,
            "the legacy signerName is not allowed via this API version",
        ));
    } else if signer.is_empty() {
        errs.push(FieldError::required("spec.signerName", ""));
    } else {
        errs.extend(signer_name_errors(signer));
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
    errs.extend(condition_errors(obj, allow));
    if !allow.arbitrary_certificate
        && let Some(why) = certificate_problem(obj)
    {
        errs.push(FieldError::invalid(
            "status.certificate",
            CERTIFICATE_DATA,
            why,
        ));
    }
    errs
}

/// kube's `validateCertificateSigningRequestUpdate`: what no update may do
/// to conditions and the certificate, beyond what `allow` lets it.
fn validate_update_with(new: &Value, old: &Value, allow: &Allowances) -> Vec<FieldError> {
    let mut errs = validate_request(new, allow);
    for kind in PERMANENT {
        if conditions_of(new, kind).len() < conditions_of(old, kind).len() {
            errs.push(FieldError::forbidden(
                "status.conditions",
                format!("updates may not remove a condition of type {kind:?}"),
            ));
        }
    }
    if !allow.approval_conditions {
        for kind in DECISIONS {
            let (before, after) = (conditions_of(old, kind), conditions_of(new, kind));
            if after.len() > before.len() {
                errs.push(FieldError::forbidden(
                    "status.conditions",
                    format!("updates may not add a condition of type {kind:?}"),
                ));
            } else if after.len() == before.len() && after != before {
                errs.push(FieldError::forbidden(
                    "status.conditions",
                    format!("updates may not modify a condition of type {kind:?}"),
                ));
            }
        }
    }
    if certificate_text(new) != certificate_text(old) {
        if !allow.certificate {
            errs.push(FieldError::forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        } else if !certificate_text(old).is_empty() {
            errs.push(FieldError::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
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
        let mut conditions = items(new, "/status/conditions").to_vec();
        match subresource {
            // Only the conditions change.
            "approval" => {}
            // The status changes, but Approved and Denied conditions are
            // those stored while there are as many of each (otherwise
            // validation refuses the write).
            "status" => {
                merged["status"] = fields::value(new, "/status");
                for kind in DECISIONS {
                    let kept = conditions_of(old, kind);
                    let at: Vec<usize> = (0..conditions.len())
                        .filter(|i| text(&conditions[*i], "/type") == kind)
                        .collect();
                    if at.len() == kept.len() {
                        for (i, condition) in at.into_iter().zip(kept) {
                            conditions[i] = condition.clone();
                        }
                    }
                }
            }
            _ => return None,
        }
        populate_condition_timestamps(&mut conditions, old);
        set_conditions(&mut merged["status"], conditions);
        fields::set(
            &mut merged,
            "/metadata/resourceVersion",
            fields::value(new, "/metadata/resourceVersion"),
        );
        Some(merged)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_request(obj, &Allowances::new(obj, None))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.validate_subresource_update("", new, old)
    }

    fn validate_subresource_update(
        &self,
        subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Vec<FieldError> {
        let allow = Allowances {
            approval_conditions: subresource == "approval",
            certificate: subresource == "status",
            ..Allowances::new(new, Some(old))
        };
        validate_update_with(new, old, &allow)
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

    fn b64(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    fn csr() -> Value {
        let pem = "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n";
        let mut c = json!({"metadata": {"name": "alice", "resourceVersion": "5"}, "spec": {"request": b64(pem), "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"], "expirationSeconds": 86400}});
        CertificateSigningRequestStrategy.prepare_for_create(&mut c);
        c
    }

    /// A self-signed certificate in PEM.
    fn certificate() -> String {
        rcgen::generate_simple_self_signed(vec!["signed.example.com".to_string()])
            .expect("a certificate")
            .cert
            .pem()
    }

    /// The errors of a write through `subresource` of `request` over `old`, as text.
    fn update_errors(subresource: &str, request: &Value, old: &Value) -> Vec<String> {
        let strategy = CertificateSigningRequestStrategy;
        let merged = strategy
            .update_subresource(subresource, request, old)
            .expect("a CSR subresource");
        strategy
            .validate_subresource_update(subresource, &merged, old)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn errors(obj: &Value) -> Vec<String> {
        CertificateSigningRequestStrategy
            .validate(obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn validation_and_row() {
        let c = csr();
        assert_eq!(errors(&c), Vec::<String>::new());
        let cells = CertificateSigningRequestStrategy.cells(&c);
        assert_eq!(
            (cells[2].clone(), cells[4].clone(), cells[5].clone()),
            (
                json!("kubernetes.io/kube-apiserver-client"),
                json!("24h"),
                json!("Pending")
            )
        );
        let bad = json!({"spec": {"request": "eA==", "signerName": "nodomain", "usages": ["client auth", "magic", "client auth"]}});
        assert_eq!(
            errors(&bad),
            [
                "spec.request: Invalid value: \"eA==\": PEM block type must be CERTIFICATE REQUEST",
                &format!(
                    "spec.usages[1]: Unsupported value: \"magic\": supported values: {}",
                    USAGES
                        .iter()
                        .map(|u| format!("{u:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "spec.usages[2]: Duplicate value: \"client auth\"",
                "spec.signerName: Invalid value: \"nodomain\": must be a fully qualified domain and path of the form 'example.com/signer-name'",
            ]
        );
        let mut no_usages = csr();
        no_usages["spec"]["usages"] = json!([]);
        assert_eq!(errors(&no_usages), ["spec.usages: Required value"]);
        // The first PEM block is the one read: a request after a key is not.
        let mut key_first = csr();
        key_first["spec"]["request"] = json!(b64(
            "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n-----BEGIN CERTIFICATE REQUEST-----\nAA==\n-----END CERTIFICATE REQUEST-----\n"
        ));
        assert_eq!(
            request_der(&key_first),
            Err("PEM block type must be CERTIFICATE REQUEST")
        );
    }

    #[test]
    fn conditions_follow_kubes_rules() {
        let mut c = csr();
        c["status"] = json!({"conditions": [
            {"type": "Approved", "status": "False"},
            {"type": "Failed"},
            {"type": "Custom", "status": "Maybe"},
            {"type": "Denied", "status": "True"},
            {"type": "Custom", "status": "True"},
            {"status": "True"},
        ]});
        assert_eq!(
            errors(&c),
            [
                "status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\"",
                "status.conditions[1].status: Required value",
                "status.conditions[2].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
                "status.conditions[3].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive",
                "status.conditions[4].type: Duplicate value: \"Custom\"",
                "status.conditions[5].type: Required value",
            ]
        );
        // What the stored object already has is tolerated on update.
        let mut old = c.clone();
        old["status"]["conditions"][0]["status"] = json!("True");
        old["status"]["conditions"][1]["status"] = json!("True");
        old["status"]["conditions"][2]["status"] = json!("True");
        let mut new = old.clone();
        new["metadata"]["labels"] = json!({"a": "b"});
        assert_eq!(
            CertificateSigningRequestStrategy.validate_update(&new, &old),
            Vec::new()
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
        assert_eq!(
            update_errors("approval", &request, &old),
            Vec::<String>::new()
        );
        // Approval may not take a decision back.
        let mut undo = merged.clone();
        undo["status"]["conditions"] = json!([]);
        assert_eq!(
            update_errors("approval", &undo, &merged),
            [
                "status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""
            ]
        );
    }

    #[test]
    fn status_may_not_decide_and_keeps_decisions() {
        let old = csr();
        let mut request = old.clone();
        request["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
        assert_eq!(
            update_errors("status", &request, &old),
            ["status.conditions: Forbidden: updates may not add a condition of type \"Approved\""]
        );
        let mut approved = old.clone();
        approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True", "reason": "Mine",
            "lastUpdateTime": "2025-01-01T00:00:00Z", "lastTransitionTime": "2025-01-01T00:00:00Z"}]});
        // The same number of Approved conditions: the stored ones are kept.
        let mut rewritten = approved.clone();
        rewritten["status"]["conditions"][0]["reason"] = json!("Changed");
        rewritten["status"]["conditions"]
            .as_array_mut()
            .expect("conditions")
            .push(json!({"type": "Failed", "status": "True"}));
        let merged = CertificateSigningRequestStrategy
            .update_subresource("status", &rewritten, &approved)
            .expect("status is handled");
        assert_eq!(
            merged["status"]["conditions"][0],
            approved["status"]["conditions"][0]
        );
        assert_eq!(merged["status"]["conditions"][1]["type"], "Failed");
        assert!(merged["status"]["conditions"][1]["lastTransitionTime"].is_string());
        assert_eq!(
            update_errors("status", &rewritten, &approved),
            Vec::<String>::new()
        );
        // The main resource changes neither conditions nor certificate.
        let mut main = approved.clone();
        main["status"]["certificate"] = json!(b64(&certificate()));
        assert_eq!(
            CertificateSigningRequestStrategy
                .validate_update(&main, &approved)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["status.certificate: Forbidden: updates may not set certificate content"]
        );
    }

    #[test]
    fn the_certificate_is_pem_certificates_set_once() {
        let old = csr();
        let cert = certificate();
        let with = |content: &str| {
            let mut request = old.clone();
            request["status"]["certificate"] = json!(b64(content));
            request
        };
        let invalid = |why: &str| {
            vec![format!(
                "status.certificate: Invalid value: \"<certificate data>\": {why}"
            )]
        };
        assert_eq!(
            update_errors("status", &with("notacert"), &old),
            invalid("must contain at least one CERTIFICATE PEM block")
        );
        let mut raw = old.clone();
        raw["status"]["certificate"] = json!("notacert");
        assert_eq!(
            update_errors("status", &raw, &old),
            invalid("must contain at least one CERTIFICATE PEM block")
        );
        assert_eq!(
            update_errors(
                "status",
                &with("-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n"),
                &old
            ),
            invalid("only CERTIFICATE PEM blocks are allowed, found \"PRIVATE KEY\"")
        );
        assert_eq!(
            update_errors(
                "status",
                &with("-----BEGIN CERTIFICATE-----\nA: b\n\nAA==\n-----END CERTIFICATE-----\n"),
                &old
            ),
            invalid("no PEM block headers are permitted")
        );
        assert_eq!(
            update_errors(
                "status",
                &with("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
                &old
            ),
            invalid("x509: malformed certificate")
        );
        assert_eq!(
            update_errors(
                "status",
                &with("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"),
                &old
            ),
            invalid("found CERTIFICATE PEM block containing 0 certificates")
        );
        // A chain, with text around it, is a certificate.
        let chain = format!("issued by a test\n{cert}{}", certificate());
        assert_eq!(
            update_errors("status", &with(&chain), &old),
            Vec::<String>::new()
        );
        // Once set it stays: a new certificate or garbage is refused.
        let issued = CertificateSigningRequestStrategy
            .update_subresource("status", &with(&cert), &old)
            .expect("status is handled");
        assert_eq!(
            CertificateSigningRequestStrategy.cells(&issued)[5],
            "Pending,Issued"
        );
        assert_eq!(
            update_errors("status", &with(&certificate()), &issued),
            ["status.certificate: Forbidden: updates may not modify existing certificate content"]
        );
        assert_eq!(
            update_errors("status", &with("notacert"), &issued),
            [
                invalid("must contain at least one CERTIFICATE PEM block")[0].as_str(),
                "status.certificate: Forbidden: updates may not modify existing certificate content",
            ]
        );
        // An update leaving it alone passes.
        assert_eq!(
            update_errors("status", &issued, &issued),
            Vec::<String>::new()
        );
        // Approval cannot touch it.
        let cleared = CertificateSigningRequestStrategy
            .update_subresource("approval", &old, &issued)
            .expect("approval is handled");
        assert_eq!(
            cleared["status"]["certificate"],
            issued["status"]["certificate"]
        );
    }
}
