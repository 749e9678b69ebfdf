//! Why an apply failed, with the Status kube-apiserver answers.

use serde_json::{Value, json};
use thiserror::Error;

use super::fieldpath::go_quote;

/// The two kinds of managedFields entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// Server-side apply (`application/apply-patch+yaml`).
    Apply,
    /// Any other write: create, update, non-apply patch.
    Update,
}

impl Operation {
    /// The name kube writes in `operation`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }

    /// Parses kube's `operation` value.
    pub fn parse(text: &str) -> Option<Operation> {
        match text {
            "Apply" => Some(Operation::Apply),
            "Update" => Some(Operation::Update),
            _ => None,
        }
    }
}

/// One field another manager owns that an apply wanted to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager owning the field.
    pub manager: String,
    /// How that manager got the field.
    pub operation: Operation,
    /// The API version of that manager's entry.
    pub api_version: String,
    /// The subresource of that manager's entry (`""` for the main resource).
    pub subresource: String,
    /// The field, as kube prints it (`.spec.containers[name="web"].image`).
    pub field: String,
}

impl Conflict {
    /// The manager as kube prints it: `"m"`, `"m" with subresource "status"`, `"m" using apps/v1`.
    pub fn manager_description(&self) -> String {
        let mut text = go_quote(&self.manager);
        if !self.subresource.is_empty() {
            text.push_str(&format!(
                " with subresource {}",
                go_quote(&self.subresource)
            ));
        }
        if self.operation == Operation::Update {
            text.push_str(&format!(" using {}", self.api_version));
        }
        text
    }
}

/// Why server-side apply or managedFields tracking failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ApplyError {
    /// Fields of the applied configuration are owned by other managers (409 Conflict).
    #[error("{}", conflicts_message(.0))]
    Conflicts(Vec<Conflict>),
    /// The request is malformed, e.g. it sets `metadata.managedFields` (400 BadRequest).
    #[error("{0}")]
    BadRequest(String),
    /// The configuration or object does not fit its schema: a list-map item without a key,
    /// duplicate keys, an undeclared field. kube answers these with a bare 500.
    #[error("{0}")]
    Invalid(String),
}

impl ApplyError {
    /// kube's Status message.
    pub fn message(&self) -> String {
        self.to_string()
    }

    /// The HTTP status code kube-apiserver answers with.
    pub fn code(&self) -> u16 {
        match self {
            ApplyError::Conflicts(_) => 409,
            ApplyError::BadRequest(_) => 400,
            ApplyError::Invalid(_) => 500,
        }
    }

    /// The Status `reason` (`""` where kube leaves it unset).
    pub fn reason(&self) -> &'static str {
        match self {
            ApplyError::Conflicts(_) => "Conflict",
            ApplyError::BadRequest(_) => "BadRequest",
            ApplyError::Invalid(_) => "",
        }
    }

    /// The Status `details.causes`: one `FieldManagerConflict` per conflicting field.
    pub fn causes(&self) -> Vec<Value> {
        let ApplyError::Conflicts(conflicts) = self else {
            return Vec::new();
        };
        conflicts
            .iter()
            .map(|conflict| {
                json!({
                    "reason": "FieldManagerConflict",
                    "message": format!("conflict with {}", conflict.manager_description()),
                    "field": conflict.field,
                })
            })
            .collect()
    }

    /// The whole `meta.k8s.io/v1` Status kube-apiserver returns for this error.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message(),
        });
        if !self.reason().is_empty() {
            status["reason"] = json!(self.reason());
        }
        if let ApplyError::Conflicts(_) = self {
            status["details"] = json!({ "causes": self.causes() });
        }
        status["code"] = json!(self.code());
        status
    }
}

/// kube's conflict message: one line for one conflict, else grouped by manager.
fn conflicts_message(conflicts: &[Conflict]) -> String {
    if let [conflict] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            conflict.manager_description(),
            conflict.field
        );
    }
    let mut lines = Vec::new();
    let mut current: Option<String> = None;
    for conflict in conflicts {
        let manager = conflict.manager_description();
        if current.as_ref() != Some(&manager) {
            lines.push(format!("conflicts with {manager}:"));
            current = Some(manager);
        }
        lines.push(format!("- {}", conflict.field));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflict(manager: &str, operation: Operation, api_version: &str, field: &str) -> Conflict {
        Conflict {
            manager: manager.to_owned(),
            operation,
            api_version: api_version.to_owned(),
            subresource: String::new(),
            field: field.to_owned(),
        }
    }

    #[test]
    fn one_conflict_reads_like_kube() {
        let error = ApplyError::Conflicts(vec![conflict(
            "kubectl-client-side-apply",
            Operation::Update,
            "v1",
            ".data.key",
        )]);
        assert_eq!(
            error.message(),
            r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.key"#
        );
        let status = error.status();
        assert_eq!(status["code"], 409);
        assert_eq!(status["reason"], "Conflict");
        assert_eq!(
            status["details"]["causes"][0],
            json!({
                "reason": "FieldManagerConflict",
                "message": "conflict with \"kubectl-client-side-apply\" using v1",
                "field": ".data.key"
            })
        );
    }

    #[test]
    fn several_conflicts_are_grouped_by_manager() {
        let error = ApplyError::Conflicts(vec![
            conflict("m1", Operation::Apply, "apps/v1", ".spec.replicas"),
            conflict("m1", Operation::Apply, "apps/v1", ".spec.paused"),
            conflict("m2", Operation::Update, "apps/v1", ".spec.x"),
        ]);
        assert_eq!(
            error.message(),
            "Apply failed with 3 conflicts: conflicts with \"m1\":\n- .spec.replicas\n- .spec.paused\nconflicts with \"m2\" using apps/v1:\n- .spec.x"
        );
    }

    #[test]
    fn subresource_managers_say_so() {
        let mut status = conflict("ctrl", Operation::Update, "v1", ".status.phase");
        status.subresource = "status".to_owned();
        assert_eq!(
            status.manager_description(),
            r#""ctrl" with subresource "status" using v1"#
        );
        let invalid = ApplyError::Invalid("boom".to_owned()).status();
        assert_eq!(invalid["code"], 500);
        assert!(invalid.get("reason").is_none());
    }
}

/// The Status kube-apiserver answers a failed apply with, conflicts as causes.
impl From<ApplyError> for crate::error::Error {
    fn from(err: ApplyError) -> Self {
        let causes = err
            .causes()
            .into_iter()
            .map(|c| crate::error::StatusCause {
                reason: c["reason"].as_str().map(str::to_string),
                message: c["message"].as_str().map(str::to_string),
                field: c["field"].as_str().map(str::to_string),
            })
            .collect();
        crate::error::Error::WithCauses {
            reason: crate::error::reason_for_code(err.code()),
            message: err.message(),
            causes,
        }
    }
}
