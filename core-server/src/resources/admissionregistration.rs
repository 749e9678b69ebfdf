//! admissionregistration.k8s.io/v1 webhook configurations and validating
//! admission policies (with their bindings): stored with kube's defaults
//! and light validation; nothing here calls webhooks or evaluates CEL.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, int, is_set, items, text};

/// The rules of Validating- (`mutating: false`) and MutatingWebhookConfigurations.
pub struct WebhookConfigurationStrategy {
    /// Whether these are mutating webhooks (which have a reinvocation policy).
    pub mutating: bool,
}

/// The rules of ValidatingAdmissionPolicies.
pub struct ValidatingAdmissionPolicyStrategy;

/// The rules of ValidatingAdmissionPolicyBindings.
pub struct ValidatingAdmissionPolicyBindingStrategy;

fn default_rules(obj: &mut Value, pointer: &str) {
    fields::each_mut(obj, pointer, |rule| default(rule, "/scope", json!("*")));
}

/// `MatchResources` defaults shared by policies and bindings.
fn default_match_resources(obj: &mut Value, pointer: &str) {
    if !is_set(obj, pointer) {
        return;
    }
    default(obj, &format!("{pointer}/matchPolicy"), json!("Equivalent"));
    default(obj, &format!("{pointer}/namespaceSelector"), json!({}));
    default(obj, &format!("{pointer}/objectSelector"), json!({}));
    default_rules(obj, &format!("{pointer}/resourceRules"));
    default_rules(obj, &format!("{pointer}/excludeResourceRules"));
}

fn not_supported_if_set(
    obj: &Value,
    pointer: &str,
    field: &str,
    allowed: &[&str],
    errs: &mut Vec<FieldError>,
) {
    let value = text(obj, pointer);
    if is_set(obj, pointer) && !allowed.contains(&value) {
        errs.push(FieldError::not_supported(field, value, allowed));
    }
}

/// kube's compile errors for the CEL expressions in the list at `list`
/// (field `field` of each item), reported at `path[i].field`.
fn compile_each(obj: &Value, list: &str, field: &str, path: &str, errs: &mut Vec<FieldError>) {
    for (i, item) in items(obj, list).iter().enumerate() {
        let source = text(item, &format!("/{field}"));
        if source.trim().is_empty() {
            continue;
        }
        if let Err(why) = apimachinery::cel::admission::Expression::compile(source) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}].{field}"),
                source,
                why,
            ));
        }
    }
}

/// A webhook's rules, in the order kube's `validateValidatingWebhook` and
/// `validateMutatingWebhook` check them; the review versions come last, as
/// kube checks them after the rest of each webhook.
fn validate_webhook(hook: &Value, path: &str, mutating: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = text(hook, "/name");
    let subdomain = apimachinery::validation::dns1123_subdomain(name);
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else if !subdomain.is_empty() {
        errs.push(FieldError::invalid(
            format!("{path}.name"),
            name,
            subdomain.join(","),
        ));
    } else if name.split('.').count() < 3 {
        errs.push(FieldError::invalid(
            format!("{path}.name"),
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
    not_supported_if_set(
        hook,
        "/failurePolicy",
        &format!("{path}.failurePolicy"),
        &["Fail", "Ignore"],
        &mut errs,
    );
    not_supported_if_set(
        hook,
        "/matchPolicy",
        &format!("{path}.matchPolicy"),
        &["Equivalent", "Exact"],
        &mut errs,
    );
    match text(hook, "/sideEffects") {
        "None" | "NoneOnDryRun" => {}
        "" => errs.push(FieldError::required(
            format!("{path}.sideEffects"),
            "must specify one of None, NoneOnDryRun",
        )),
        other => errs.push(FieldError::not_supported(
            format!("{path}.sideEffects"),
            other,
            &["None", "NoneOnDryRun"],
        )),
    }
    if let Some(timeout) = int(hook, "/timeoutSeconds").filter(|t| !(1..=30).contains(t)) {
        errs.push(FieldError::invalid(
            format!("{path}.timeoutSeconds"),
            timeout,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    if mutating {
        not_supported_if_set(
            hook,
            "/reinvocationPolicy",
            &format!("{path}.reinvocationPolicy"),
            &["IfNeeded", "Never"],
            &mut errs,
        );
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        if let Some(s) = hook.get(selector).filter(|s| !s.is_null()) {
            errs.extend(fields::label_selector(s, &format!("{path}.{selector}")));
        }
    }
    if is_set(hook, "/clientConfig/url") == is_set(hook, "/clientConfig/service") {
        errs.push(FieldError::required(
            format!("{path}.clientConfig"),
            "exactly one of url or service is required",
        ));
    }
    compile_each(
        hook,
        "/matchConditions",
        "expression",
        &format!("{path}.matchConditions"),
        &mut errs,
    );
    if items(hook, "/admissionReviewVersions").is_empty() {
        errs.push(FieldError::required(
            format!("{path}.admissionReviewVersions"),
            "must specify one of v1, v1beta1",
        ));
    }
    errs
}

fn webhook_count_columns(what: &str) -> Vec<Column> {
    vec![
        table::name_column(),
        Column::new(
            what,
            "integer",
            "Webhooks indicates the number of webhooks registered in this configuration",
        ),
        table::age_column(),
    ]
}

impl Strategy for WebhookConfigurationStrategy {
    fn defaults(&self, obj: &mut Value) {
        let mutating = self.mutating;
        fields::each_mut(obj, "/webhooks", |hook| {
            default(hook, "/failurePolicy", json!("Fail"));
            default(hook, "/matchPolicy", json!("Equivalent"));
            default(hook, "/namespaceSelector", json!({}));
            default(hook, "/objectSelector", json!({}));
            default(hook, "/timeoutSeconds", json!(10));
            if mutating {
                default(hook, "/reinvocationPolicy", json!("Never"));
            }
            if is_set(hook, "/clientConfig/service") {
                default(hook, "/clientConfig/service/port", json!(443));
            }
            default_rules(hook, "/rules");
        });
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        for (i, hook) in items(obj, "/webhooks").iter().enumerate() {
            let path = format!("webhooks[{i}]");
            errs.extend(validate_webhook(hook, &path, self.mutating));
            let name = text(hook, "/name");
            if names.contains(&name) {
                errs.push(FieldError::duplicate(format!("{path}.name"), name));
            }
            names.push(name);
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        webhook_count_columns("Webhooks")
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            json!(items(obj, "/webhooks").len()),
            table::age_cell(obj),
        ]
    }
}

impl Strategy for ValidatingAdmissionPolicyStrategy {
    fn defaults(&self, obj: &mut Value) {
        default(obj, "/spec/failurePolicy", json!("Fail"));
        default_match_resources(obj, "/spec/matchConstraints");
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let validations = items(obj, "/spec/validations");
        if validations.is_empty() && items(obj, "/spec/auditAnnotations").is_empty() {
            errs.push(FieldError::required(
                "spec.validations",
                "validations or auditAnnotations must contain at least one item",
            ));
        }
        for (i, v) in validations.iter().enumerate() {
            if text(v, "/expression").trim().is_empty() {
                errs.push(FieldError::required(
                    format!("spec.validations[{i}].expression"),
                    "",
                ));
            }
        }
        for (list, field) in [
            ("validations", "expression"),
            ("validations", "messageExpression"),
            ("matchConditions", "expression"),
            ("variables", "expression"),
            ("auditAnnotations", "valueExpression"),
        ] {
            compile_each(
                obj,
                &format!("/spec/{list}"),
                field,
                &format!("spec.{list}"),
                &mut errs,
            );
        }
        if !is_set(obj, "/spec/matchConstraints") {
            errs.push(FieldError::required("spec.matchConstraints", ""));
        } else if items(obj, "/spec/matchConstraints/resourceRules").is_empty() {
            errs.push(FieldError::required(
                "spec.matchConstraints.resourceRules",
                "",
            ));
        }
        not_supported_if_set(
            obj,
            "/spec/failurePolicy",
            "spec.failurePolicy",
            &["Fail", "Ignore"],
            &mut errs,
        );
        if is_set(obj, "/spec/paramKind") {
            for field in ["apiVersion", "kind"] {
                if text(obj, &format!("/spec/paramKind/{field}")).is_empty() {
                    errs.push(FieldError::required(format!("spec.paramKind.{field}"), ""));
                }
            }
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Validations",
                "integer",
                "Validations indicates the number of validation rules defined in this configuration",
            ),
            Column::new(
                "ParamKind",
                "string",
                "ParamKind specifies the kind of resources used to parameterize this policy",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let param_kind = if is_set(obj, "/spec/paramKind") {
            format!(
                "{}/{}",
                text(obj, "/spec/paramKind/apiVersion"),
                text(obj, "/spec/paramKind/kind")
            )
        } else {
            "<unset>".into()
        };
        vec![
            table::name_cell(obj),
            json!(items(obj, "/spec/validations").len()),
            json!(param_kind),
            table::age_cell(obj),
        ]
    }
}

impl Strategy for ValidatingAdmissionPolicyBindingStrategy {
    fn defaults(&self, obj: &mut Value) {
        default_match_resources(obj, "/spec/matchResources");
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if text(obj, "/spec/policyName").is_empty() {
            errs.push(FieldError::required("spec.policyName", ""));
        }
        let actions = items(obj, "/spec/validationActions");
        if actions.is_empty() {
            errs.push(FieldError::required(
                "spec.validationActions",
                "at least one validation action is required",
            ));
        }
        for (i, action) in actions.iter().enumerate() {
            let action = action.as_str().unwrap_or_default();
            if !["Audit", "Deny", "Warn"].contains(&action) {
                errs.push(FieldError::not_supported(
                    format!("spec.validationActions[{i}]"),
                    action,
                    &["Audit", "Deny", "Warn"],
                ));
            }
        }
        if is_set(obj, "/spec/paramRef") {
            not_supported_if_set(
                obj,
                "/spec/paramRef/parameterNotFoundAction",
                "spec.paramRef.parameterNotFoundAction",
                &["Allow", "Deny"],
                &mut errs,
            );
            if !is_set(obj, "/spec/paramRef/parameterNotFoundAction") {
                errs.push(FieldError::required(
                    "spec.paramRef.parameterNotFoundAction",
                    "",
                ));
            }
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "PolicyName",
                "string",
                "PolicyName indicates the policy definition which the policy binding binded to",
            ),
            Column::new(
                "ParamRef",
                "string",
                "ParamRef indicates the param resource which sets the configration param",
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let param_ref = if is_set(obj, "/spec/paramRef") {
            let (namespace, name) = (
                text(obj, "/spec/paramRef/namespace"),
                text(obj, "/spec/paramRef/name"),
            );
            let name = if name.is_empty() { "*" } else { name };
            if namespace.is_empty() {
                name.to_string()
            } else {
                format!("{namespace}/{name}")
            }
        } else {
            "<unset>".into()
        };
        vec![
            table::name_cell(obj),
            fields::text_cell(obj, "/spec/policyName"),
            json!(param_ref),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_defaults_and_validation() {
        let strategy = WebhookConfigurationStrategy { mutating: true };
        let mut config = json!({"metadata": {"name": "hooks"}, "webhooks": [{"name": "pods.example.com", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "clientConfig": {"service": {"name": "hook", "namespace": "default"}}, "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}]});
        strategy.defaults(&mut config);
        let hook = &config["webhooks"][0];
        assert_eq!(
            (
                hook["failurePolicy"].clone(),
                hook["timeoutSeconds"].clone()
            ),
            (json!("Fail"), json!(10))
        );
        assert_eq!(hook["reinvocationPolicy"], "Never");
        assert_eq!(hook["clientConfig"]["service"]["port"], 443);
        assert_eq!(hook["rules"][0]["scope"], "*");
        assert!(
            strategy.validate(&config).is_empty(),
            "{:?}",
            strategy.validate(&config)
        );
        assert_eq!(strategy.cells(&config)[1], 1);
        let bad = json!({"webhooks": [{"name": "short"}]});
        let errs: Vec<String> = strategy
            .validate(&bad)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs[0],
            "webhooks[0].name: Invalid value: \"short\": should be a domain with at least three segments separated by dots"
        );
    }

    #[test]
    fn policies_and_bindings() {
        let mut policy = json!({"metadata": {"name": "p"}, "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5"}]}});
        ValidatingAdmissionPolicyStrategy.defaults(&mut policy);
        assert_eq!(policy["spec"]["failurePolicy"], "Fail");
        assert_eq!(
            policy["spec"]["matchConstraints"]["matchPolicy"],
            "Equivalent"
        );
        assert!(
            ValidatingAdmissionPolicyStrategy
                .validate(&policy)
                .is_empty()
        );
        assert_eq!(
            ValidatingAdmissionPolicyStrategy.cells(&policy)[2],
            "<unset>"
        );
        let binding = json!({"metadata": {"name": "b"}, "spec": {"policyName": "p"}});
        assert_eq!(
            ValidatingAdmissionPolicyBindingStrategy.validate(&binding)[0].to_string(),
            "spec.validationActions: Required value: at least one validation action is required"
        );
    }
}
