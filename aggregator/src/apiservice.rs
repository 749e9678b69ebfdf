//! APIServices (`apiregistration.k8s.io/v1`): which server serves a group
//! and version, with kube-aggregator's validation and table.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use apimachinery::validation::{self, NameRule};
use generic_server::resource::Resource;
use generic_server::strategy::Strategy;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::{Value, json};

/// The `apiservices` resource.
pub fn resource() -> Resource {
    Resource::builtin::<APIService>(ApiServiceStrategy)
        .categories(&["api-extensions"])
        .status()
}

/// The rules of `apiregistration.k8s.io/v1` APIService.
pub struct ApiServiceStrategy;

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether an APIService is served by the chain itself (no `spec.service`).
pub fn is_local(svc: &Value) -> bool {
    svc.pointer("/spec/service").is_none_or(Value::is_null)
}

/// The `Available` condition, if any.
pub fn available(svc: &Value) -> Option<&Value> {
    svc.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == "Available")
}

impl Strategy for ApiServiceStrategy {
    fn defaults(&self, svc: &mut Value) {
        if let Some(service) = svc.pointer_mut("/spec/service").filter(|s| s.is_object()) {
            if service.get("port").is_none_or(Value::is_null) {
                service["port"] = json!(443);
            }
        }
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn validate(&self, svc: &Value) -> Vec<FieldError> {
        let (group, version) = (text(svc, "/spec/group"), text(svc, "/spec/version"));
        let mut errs = Vec::new();
        let required = format!("{version}.{group}");
        let name = text(svc, "/metadata/name");
        if validation::path_segment_name(name).is_empty() && name != required {
            errs.push(FieldError::invalid(
                "metadata.name",
                name,
                format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
            ));
        }
        if group.is_empty() && version != "v1" {
            errs.push(FieldError::required(
                "spec.group",
                "only v1 may have an empty group and it better be legacy kube",
            ));
        }
        if !group.is_empty() {
            errs.extend(
                validation::dns1123_subdomain(group)
                    .into_iter()
                    .map(|m| FieldError::invalid("spec.group", group, m)),
            );
        }
        errs.extend(
            validation::dns1035_label(version)
                .into_iter()
                .map(|m| FieldError::invalid("spec.version", version, m)),
        );
        let priority = |p: &str| svc.pointer(p).and_then(Value::as_i64).unwrap_or(0);
        let group_priority = priority("/spec/groupPriorityMinimum");
        if group_priority <= 0 || group_priority > 20000 {
            errs.push(FieldError::invalid(
                "spec.groupPriorityMinimum",
                group_priority,
                "must be positive and less than 20000",
            ));
        }
        let version_priority = priority("/spec/versionPriority");
        if version_priority <= 0 || version_priority > 1000 {
            errs.push(FieldError::invalid(
                "spec.versionPriority",
                version_priority,
                "must be positive and less than 1000",
            ));
        }
        let ca_bundle = text(svc, "/spec/caBundle");
        let insecure = svc.pointer("/spec/insecureSkipTLSVerify") == Some(&json!(true));
        if is_local(svc) {
            if !ca_bundle.is_empty() {
                let bytes = format!("{} bytes", ca_bundle.len() * 3 / 4);
                errs.push(FieldError::invalid(
                    "spec.caBundle",
                    bytes,
                    "local APIServices may not have a caBundle",
                ));
            }
            if insecure {
                errs.push(FieldError::invalid(
                    "spec.insecureSkipTLSVerify",
                    true,
                    "local APIServices may not have insecureSkipTLSVerify",
                ));
            }
            return errs;
        }
        if text(svc, "/spec/service/namespace").is_empty() {
            errs.push(FieldError::required("spec.service.namespace", ""));
        }
        if text(svc, "/spec/service/name").is_empty() {
            errs.push(FieldError::required("spec.service.name", ""));
        }
        let port = svc
            .pointer("/spec/service/port")
            .and_then(Value::as_i64)
            .unwrap_or(443);
        if !(1..=65535).contains(&port) {
            errs.push(FieldError::invalid(
                "spec.service.port",
                port,
                "must be a valid port number",
            ));
        }
        if insecure && !ca_bundle.is_empty() {
            errs.push(FieldError::invalid(
                "spec.insecureSkipTLSVerify",
                true,
                "may not be true if caBundle is present",
            ));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Service",
                "string",
                "The reference to the service that hosts this API endpoint.",
            ),
            Column::new("Available", "string", "Whether this service is available."),
            table::age_column(),
        ]
    }

    fn cells(&self, svc: &Value) -> Vec<Value> {
        let service = if is_local(svc) {
            "Local".to_string()
        } else {
            format!(
                "{}/{}",
                text(svc, "/spec/service/namespace"),
                text(svc, "/spec/service/name")
            )
        };
        let available = match available(svc) {
            Some(c) if c["status"] == "True" => "True".to_string(),
            Some(c) => format!(
                "{} ({})",
                c["status"].as_str().unwrap_or("Unknown"),
                c["reason"].as_str().unwrap_or_default()
            ),
            None => "Unknown".to_string(),
        };
        vec![
            table::name_cell(svc),
            json!(service),
            json!(available),
            table::age_cell(svc),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: Value) -> Value {
        let name = format!(
            "{}.{}",
            spec["version"].as_str().unwrap_or(""),
            spec["group"].as_str().unwrap_or("")
        );
        json!({"metadata": {"name": name}, "spec": spec})
    }

    #[test]
    fn validation_matches_kube_aggregator() {
        let ok = svc(
            json!({"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
            "insecureSkipTLSVerify": true, "service": {"namespace": "kube-system", "name": "metrics-server", "port": 443}}),
        );
        assert!(ApiServiceStrategy.validate(&ok).is_empty());
        let mut wrong_name = ok.clone();
        wrong_name["metadata"]["name"] = json!("v1.metrics.k8s.io");
        assert_eq!(
            ApiServiceStrategy.validate(&wrong_name)[0].to_string(),
            "metadata.name: Invalid value: \"v1.metrics.k8s.io\": must be `spec.version+\".\"+spec.group`: \"v1beta1.metrics.k8s.io\""
        );
        let both = svc(
            json!({"group": "a.io", "version": "v1", "groupPriorityMinimum": 0, "versionPriority": 2000,
            "insecureSkipTLSVerify": true, "caBundle": "AAAA", "service": {"namespace": "", "name": "x"}}),
        );
        let messages: Vec<String> = ApiServiceStrategy
            .validate(&both)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            messages,
            vec![
                "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
                "spec.versionPriority: Invalid value: 2000: must be positive and less than 1000",
                "spec.service.namespace: Required value",
                "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
            ]
        );
        let local = svc(
            json!({"group": "a.io", "version": "v1", "groupPriorityMinimum": 10, "versionPriority": 10, "caBundle": "AAAA"}),
        );
        assert_eq!(ApiServiceStrategy.validate(&local).len(), 1);
        let core = svc(
            json!({"group": "", "version": "v2", "groupPriorityMinimum": 10, "versionPriority": 10}),
        );
        assert!(
            ApiServiceStrategy
                .validate(&core)
                .iter()
                .any(|e| e.field == "spec.group")
        );
    }

    #[test]
    fn table_shows_service_and_availability() {
        let mut remote = svc(
            json!({"group": "m.io", "version": "v1", "service": {"namespace": "kube-system", "name": "m"}}),
        );
        remote["status"] = json!({"conditions": [{"type": "Available", "status": "False", "reason": "FailedDiscoveryCheck"}]});
        let cells = ApiServiceStrategy.cells(&remote);
        assert_eq!(
            (cells[1].as_str(), cells[2].as_str()),
            (Some("kube-system/m"), Some("False (FailedDiscoveryCheck)"))
        );
    }
}
