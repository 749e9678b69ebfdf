//! `spec.conversion` (kube's `validateCustomResourceConversion` and the
//! webhook client config checks of `apiserver/pkg/util/webhook`), reported
//! under the internal names `webhookClientConfig` and
//! `conversionReviewVersions`.

use crate::error::FieldError;
use crate::validation::{dns1035_label, dns1123_subdomain};
use serde_json::Value;

use crate::schema::path::{child, index};

/// ConversionReview versions this server understands.
const ACCEPTED_REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// The internal `webhookClientConfig` and `conversionReviewVersions` of a v1
/// conversion.
fn webhook_parts(conversion: &Value) -> (Option<&Value>, Option<&Vec<Value>>) {
    let webhook = conversion.get("webhook").filter(|w| !w.is_null());
    let client_config = webhook
        .and_then(|w| w.get("clientConfig"))
        .filter(|c| !c.is_null());
    let versions = webhook
        .and_then(|w| w.get("conversionReviewVersions"))
        .and_then(Value::as_array);
    (client_config, versions)
}

/// Whether the stored conversion names an accepted review version (or
/// none), so that a still-unrecognized list is not newly rejected.
pub(super) fn has_valid_review_version_or_none(spec: &Value) -> bool {
    let Some(conversion) = spec.get("conversion").filter(|c| !c.is_null()) else {
        return true;
    };
    match webhook_parts(conversion).1 {
        None => true,
        Some(v) if v.is_empty() => true,
        Some(v) => v.iter().any(|x| {
            x.as_str()
                .is_some_and(|s| ACCEPTED_REVIEW_VERSIONS.contains(&s))
        }),
    }
}

/// Validates a conversion at `path` (`spec.conversion`).
pub(super) fn validate_conversion(
    conversion: &Value,
    require_recognized: bool,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let strategy = conversion
        .get("strategy")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let strategy_path = child(path, "strategy");
    match strategy {
        "" => errs.push(FieldError::required(strategy_path, "")),
        "None" | "Webhook" => {}
        other => errs.push(FieldError::not_supported(
            strategy_path,
            other,
            &["None", "Webhook"],
        )),
    }
    let (client_config, review_versions) = webhook_parts(conversion);
    let config_path = child(path, "webhookClientConfig");
    let versions_path = child(path, "conversionReviewVersions");
    if strategy == "Webhook" {
        match client_config {
            None => errs.push(FieldError::required(
                config_path,
                "required when strategy is set to Webhook",
            )),
            Some(cc) => {
                let url = cc.get("url").filter(|u| !u.is_null());
                let service = cc.get("service").filter(|s| !s.is_null());
                match (url, service) {
                    (Some(url), None) => {
                        errs.extend(validate_webhook_url(
                            &child(&config_path, "url"),
                            url.as_str().unwrap_or_default(),
                        ));
                    }
                    (None, Some(service)) => errs.extend(validate_webhook_service(
                        &child(&config_path, "service"),
                        service,
                    )),
                    _ => errs.push(FieldError::required(
                        config_path,
                        "exactly one of url or service is required",
                    )),
                }
            }
        }
        errs.extend(validate_review_versions(
            review_versions,
            require_recognized,
            &versions_path,
        ));
    } else {
        let forbidden = "should not be set when strategy is not set to Webhook";
        if client_config.is_some() {
            errs.push(FieldError::forbidden(config_path, forbidden));
        }
        if review_versions.is_some_and(|v| !v.is_empty()) {
            errs.push(FieldError::forbidden(versions_path, forbidden));
        }
    }
    errs
}

fn validate_review_versions(
    versions: Option<&Vec<Value>>,
    require_recognized: bool,
    path: &str,
) -> Vec<FieldError> {
    let Some(versions) = versions.filter(|v| !v.is_empty()) else {
        return vec![FieldError::required(path, "")];
    };
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let mut accepted = false;
    for (i, v) in versions.iter().enumerate() {
        let v = v.as_str().unwrap_or_default();
        if seen.contains(&v) {
            errs.push(FieldError::invalid(index(path, i), v, "duplicate version"));
            continue;
        }
        seen.push(v);
        for problem in dns1035_label(v) {
            errs.push(FieldError::invalid(index(path, i), v, problem));
        }
        accepted |= ACCEPTED_REVIEW_VERSIONS.contains(&v);
    }
    if require_recognized && !accepted {
        errs.push(FieldError::invalid(
            path,
            Value::Array(versions.clone()),
            format!(
                "must include at least one of {}",
                ACCEPTED_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
    errs
}

/// The parts of a URL the webhook rules look at (Go's `url.Parse`, roughly).
struct UrlParts<'a> {
    scheme: &'a str,
    user: Option<&'a str>,
    host: &'a str,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
}

fn parse_url(raw: &str) -> UrlParts<'_> {
    let (rest, fragment) = match raw.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (raw, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (scheme, rest) = match rest.split_once("://") {
        Some((s, r))
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (s, Some(r))
        }
        _ => ("", None),
    };
    let (user, host) = match rest {
        None => (None, ""),
        Some(r) => {
            let authority = r.split('/').next().unwrap_or_default();
            match authority.rsplit_once('@') {
                Some((u, h)) => (Some(u), h),
                None => (None, authority),
            }
        }
    };
    UrlParts {
        scheme,
        user,
        host,
        query: query.filter(|q| !q.is_empty()),
        fragment: fragment.filter(|f| !f.is_empty()),
    }
}

/// kube's `ValidateWebhookURL` with https required.
fn validate_webhook_url(path: &str, raw: &str) -> Vec<FieldError> {
    const FORM: &str = "; desired format: https://host[/path]";
    let u = parse_url(raw);
    let mut errs = Vec::new();
    if u.scheme != "https" {
        errs.push(FieldError::invalid(
            path,
            u.scheme,
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if u.host.is_empty() {
        errs.push(FieldError::invalid(
            path,
            u.host,
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = u.user {
        errs.push(FieldError::invalid(
            path,
            user,
            "user information is not permitted in the URL",
        ));
    }
    if let Some(fragment) = u.fragment {
        errs.push(FieldError::invalid(
            path,
            fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if let Some(query) = u.query {
        errs.push(FieldError::invalid(
            path,
            query,
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}

/// kube's `ValidateWebhookService` (the port defaults to 443).
fn validate_webhook_service(path: &str, service: &Value) -> Vec<FieldError> {
    let get = |k: &str| service.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut errs = Vec::new();
    if get("name").is_empty() {
        errs.push(FieldError::required(
            child(path, "name"),
            "service name is required",
        ));
    }
    if get("namespace").is_empty() {
        errs.push(FieldError::required(
            child(path, "namespace"),
            "service namespace is required",
        ));
    }
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid(
            child(path, "port"),
            port,
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(url_path) = service.get("path").and_then(Value::as_str) else {
        return errs;
    };
    let ppath = child(path, "path");
    if url_path == "/" || url_path.is_empty() {
        return errs;
    }
    if url_path == "//" {
        errs.push(FieldError::invalid(
            ppath,
            url_path,
            "segment[0] may not be empty",
        ));
        return errs;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(
            &ppath,
            url_path,
            "must start with a '/'",
        ));
    }
    let trimmed = url_path.get(1..).unwrap_or_default();
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    for (i, step) in trimmed.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                &ppath,
                url_path,
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for problem in dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                &ppath,
                url_path,
                format!("segment[{i}]: {problem}"),
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(conversion: Value) -> Vec<String> {
        validate_conversion(&conversion, true, "spec.conversion")
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn webhook_urls() {
        assert!(messages(json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://conv.example.com/convert"}}})).is_empty());
        assert_eq!(
            messages(
                json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "http://u@h/x?q=1#f"}}})
            ),
            vec![
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#,
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "u": user information is not permitted in the URL"#,
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "f": fragments are not permitted in the URL"#,
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "q=1": query parameters are not permitted in the URL"#,
            ]
        );
    }

    #[test]
    fn webhook_services() {
        assert_eq!(
            messages(
                json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"service": {"name": "", "namespace": "ns", "port": 0, "path": "/Bad"}}}})
            ),
            vec![
                "spec.conversion.webhookClientConfig.service.name: Required value: service name is required",
                "spec.conversion.webhookClientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                "spec.conversion.webhookClientConfig.service.path: Invalid value: \"/Bad\": segment[0]: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ]
        );
    }

    #[test]
    fn review_versions() {
        assert_eq!(
            messages(
                json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v2", "v2"], "clientConfig": {"url": "https://h"}}})
            ),
            vec![
                r#"spec.conversion.conversionReviewVersions[1]: Invalid value: "v2": duplicate version"#,
                r#"spec.conversion.conversionReviewVersions: Invalid value: ["v2","v2"]: must include at least one of v1, v1beta1"#,
            ]
        );
        assert!(has_valid_review_version_or_none(&json!({})));
        assert!(!has_valid_review_version_or_none(
            &json!({"conversion": {"webhook": {"conversionReviewVersions": ["v9"]}}})
        ));
    }
}
