//! API errors and their `meta.k8s.io/v1` Status form.
//!
//! Every error a client sees is a [`Status`]. [`Reason`] is the one table that
//! maps a Status reason to its HTTP code; [`Error`] carries the
//! context kube-apiserver puts in the message and details.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::group_version::GroupResource;

/// A Status reason: the machine-readable cause of a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// 400: the request is malformed.
    BadRequest,
    /// 401: no valid credentials.
    Unauthorized,
    /// 403: the user may not do this.
    Forbidden,
    /// 404: the resource or path does not exist.
    NotFound,
    /// 405: the verb is not supported on this path.
    MethodNotAllowed,
    /// 406: none of the accepted media types can be produced.
    NotAcceptable,
    /// 409: the object already exists.
    AlreadyExists,
    /// 409: a write lost a race (stale resourceVersion).
    Conflict,
    /// 410: the resource version is too old (watch).
    Gone,
    /// 410: the continue token or resource version has expired (list).
    Expired,
    /// 413: the body is too large.
    RequestEntityTooLarge,
    /// 415: the body's media type is not supported.
    UnsupportedMediaType,
    /// 422: the object failed validation.
    Invalid,
    /// 429: too many requests.
    TooManyRequests,
    /// 500: an unexpected error.
    InternalError,
    /// 503: a server in the chain cannot serve the request now.
    ServiceUnavailable,
    /// 504: the request timed out.
    Timeout,
}

impl Reason {
    /// The reason as Status spells it, and its HTTP code.
    fn table(self) -> (&'static str, u16) {
        match self {
            Reason::BadRequest => ("BadRequest", 400),
            Reason::Unauthorized => ("Unauthorized", 401),
            Reason::Forbidden => ("Forbidden", 403),
            Reason::NotFound => ("NotFound", 404),
            Reason::MethodNotAllowed => ("MethodNotAllowed", 405),
            Reason::NotAcceptable => ("NotAcceptable", 406),
            Reason::AlreadyExists => ("AlreadyExists", 409),
            Reason::Conflict => ("Conflict", 409),
            Reason::Gone => ("Gone", 410),
            Reason::Expired => ("Expired", 410),
            Reason::RequestEntityTooLarge => ("RequestEntityTooLarge", 413),
            Reason::UnsupportedMediaType => ("UnsupportedMediaType", 415),
            Reason::Invalid => ("Invalid", 422),
            Reason::TooManyRequests => ("TooManyRequests", 429),
            Reason::InternalError => ("InternalError", 500),
            Reason::ServiceUnavailable => ("ServiceUnavailable", 503),
            Reason::Timeout => ("Timeout", 504),
        }
    }

    /// Every reason, for lookups.
    const ALL: [Reason; 17] = [
        Reason::BadRequest,
        Reason::Unauthorized,
        Reason::Forbidden,
        Reason::NotFound,
        Reason::MethodNotAllowed,
        Reason::NotAcceptable,
        Reason::AlreadyExists,
        Reason::Conflict,
        Reason::Gone,
        Reason::Expired,
        Reason::RequestEntityTooLarge,
        Reason::UnsupportedMediaType,
        Reason::Invalid,
        Reason::TooManyRequests,
        Reason::InternalError,
        Reason::ServiceUnavailable,
        Reason::Timeout,
    ];

    /// The reason a Status names, if known.
    pub fn parse(reason: &str) -> Option<Reason> {
        Self::ALL.into_iter().find(|r| r.as_str() == reason)
    }

    /// The reason string of a Status.
    pub fn as_str(self) -> &'static str {
        self.table().0
    }

    /// The HTTP status code.
    pub fn http_code(self) -> u16 {
        self.table().1
    }
}

/// The reason kube uses for an HTTP code (for errors that only carry a code).
pub fn reason_for_code(code: u16) -> Reason {
    match code {
        400 => Reason::BadRequest,
        401 => Reason::Unauthorized,
        403 => Reason::Forbidden,
        404 => Reason::NotFound,
        405 => Reason::MethodNotAllowed,
        406 => Reason::NotAcceptable,
        409 => Reason::Conflict,
        410 => Reason::Gone,
        413 => Reason::RequestEntityTooLarge,
        415 => Reason::UnsupportedMediaType,
        422 => Reason::Invalid,
        429 => Reason::TooManyRequests,
        503 => Reason::ServiceUnavailable,
        504 => Reason::Timeout,
        _ => Reason::InternalError,
    }
}

/// A validation failure on one field: a `StatusCause` of an Invalid Status.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The cause type, e.g. `FieldValueInvalid`.
    pub kind: FieldErrorKind,
    /// The field path, e.g. `metadata.name`.
    pub field: String,
    /// The offending value, if any.
    pub value: Option<Value>,
    /// What is wrong with it.
    pub detail: String,
}

/// The type of a field validation failure, as kube-apiserver names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// The value is malformed or out of range.
    Invalid,
    /// A required value is missing.
    Required,
    /// The value duplicates another.
    Duplicate,
    /// The value is not one of the supported ones.
    NotSupported,
    /// The field may not be set or changed.
    Forbidden,
    /// The value is too long.
    TooLong,
    /// There are too many items.
    TooMany,
    /// The value names something that does not exist.
    NotFound,
}

impl FieldError {
    /// A malformed or out-of-range value.
    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(FieldErrorKind::Invalid, field, Some(value.into()), detail)
    }

    /// A missing required value.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Required, field, None, detail)
    }

    /// A value that duplicates another.
    pub fn duplicate(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::new(FieldErrorKind::Duplicate, field, Some(value.into()), "")
    }

    /// A value outside the supported set.
    pub fn not_supported(
        field: impl Into<String>,
        value: impl Into<Value>,
        supported: &[&str],
    ) -> Self {
        let list = supported
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        Self::new(
            FieldErrorKind::NotSupported,
            field,
            Some(value.into()),
            format!("supported values: {list}"),
        )
    }

    /// A value naming something that does not exist.
    pub fn not_found(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::new(FieldErrorKind::NotFound, field, Some(value.into()), "")
    }

    /// A field that may not be set or changed.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Forbidden, field, None, detail)
    }

    /// A value longer than allowed.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self::new(
            FieldErrorKind::TooLong,
            field,
            None,
            format!("may not be more than {max} bytes"),
        )
    }

    fn new(
        kind: FieldErrorKind,
        field: impl Into<String>,
        value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }

    /// The cause type string.
    pub fn reason(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::NotFound => "FieldValueNotFound",
        }
    }

    /// The message without the field, as in a StatusCause.
    pub fn message(&self) -> String {
        let value = self.value.as_ref().map(render_value).unwrap_or_default();
        let with_detail = |head: String| {
            if self.detail.is_empty() {
                head
            } else {
                format!("{head}: {}", self.detail)
            }
        };
        match self.kind {
            FieldErrorKind::Invalid => with_detail(format!("Invalid value: {value}")),
            FieldErrorKind::Required => with_detail("Required value".into()),
            FieldErrorKind::Duplicate => format!("Duplicate value: {value}"),
            FieldErrorKind::NotSupported => with_detail(format!("Unsupported value: {value}")),
            FieldErrorKind::Forbidden => with_detail("Forbidden".into()),
            FieldErrorKind::TooLong => with_detail("Too long".into()),
            FieldErrorKind::TooMany => with_detail("Too many".into()),
            FieldErrorKind::NotFound => format!("Not found: {value}"),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// Renders a value the way kube's field errors quote it.
fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// An API error: everything that becomes a non-success Status.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The named object does not exist.
    #[error("{} {name:?} not found", .resource)]
    NotFound {
        /// The resource looked up.
        resource: GroupResource,
        /// The object's name.
        name: String,
    },
    /// An object with this name already exists.
    #[error("{} {name:?} already exists", .resource)]
    AlreadyExists {
        /// The resource written.
        resource: GroupResource,
        /// The object's name.
        name: String,
    },
    /// A write lost a race or failed a precondition.
    #[error("Operation cannot be fulfilled on {} {name:?}: {detail}", .resource)]
    Conflict {
        /// The resource written.
        resource: GroupResource,
        /// The object's name.
        name: String,
        /// Why.
        detail: String,
    },
    /// The object failed validation.
    #[error("{}{} {name:?} is invalid: {}", .kind, qualify(.group), render_causes(.causes))]
    Invalid {
        /// The group of the kind.
        group: String,
        /// The kind, e.g. `ConfigMap`.
        kind: String,
        /// The object's name.
        name: String,
        /// One entry per failing field.
        causes: Vec<FieldError>,
    },
    /// A failure with a reason, a message and per-field causes (apply conflicts).
    #[error("{message}")]
    WithCauses {
        /// The Status reason.
        reason: Reason,
        /// The Status message.
        message: String,
        /// The causes in the Status details.
        causes: Vec<StatusCause>,
    },
    /// A write an admission plugin refused (kube's `NewForbidden`), with
    /// the reason and causes the plugin chose.
    #[error("{} {name:?} is forbidden: {why}", .resource)]
    Refused {
        /// The resource written.
        resource: GroupResource,
        /// The object's name.
        name: String,
        /// The Status reason (Forbidden unless the plugin says otherwise).
        reason: Reason,
        /// Why.
        why: String,
        /// The causes in the Status details.
        causes: Vec<StatusCause>,
    },
    /// Another error, with warnings for the client that were given on
    /// the way to it (an admission webhook's, beside its refusal).
    #[error("{error}")]
    Warned {
        /// The error.
        error: Box<Error>,
        /// The `Warning` headers of its response.
        warnings: Vec<String>,
    },
    /// A failure with a fixed reason and a free message.
    #[error("{message}")]
    Other {
        /// The Status reason.
        reason: Reason,
        /// The Status message.
        message: String,
        /// Seconds a client should wait before retrying (429, 503).
        retry_after: Option<u32>,
    },
}

/// `.group` for a named group, nothing for core: kube's qualified kind.
fn qualify(group: &str) -> String {
    if group.is_empty() {
        String::new()
    } else {
        format!(".{group}")
    }
}

/// The causes as kube's aggregate error prints them: each distinct message
/// once, in brackets unless there is only one.
fn render_causes(causes: &[FieldError]) -> String {
    let mut messages: Vec<String> = Vec::new();
    for message in causes.iter().map(ToString::to_string) {
        if !messages.contains(&message) {
            messages.push(message);
        }
    }
    match messages.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The result type of the API layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A failure with a reason and message.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Error::Other {
            reason,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(Reason::BadRequest, message)
    }

    /// 404 NotFound for a path, not an object.
    pub fn path_not_found() -> Self {
        Self::new(
            Reason::NotFound,
            "the server could not find the requested resource",
        )
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        Self::new(
            Reason::MethodNotAllowed,
            "the server does not allow this method on the requested resource",
        )
    }

    /// 500 InternalError.
    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(
            Reason::InternalError,
            format!("Internal error occurred: {message}"),
        )
    }

    /// 429 TooManyRequests with Retry-After, in kube's words.
    pub fn too_many_requests() -> Self {
        Error::Other {
            reason: Reason::TooManyRequests,
            message: "Too many requests, please try again later.".into(),
            retry_after: Some(1),
        }
    }

    /// 503 ServiceUnavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Error::Other {
            reason: Reason::ServiceUnavailable,
            message: message.into(),
            retry_after: Some(1),
        }
    }

    /// 422 Invalid from field errors.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<FieldError>) -> Self {
        Error::Invalid {
            group: group.into(),
            kind: kind.into(),
            name: name.into(),
            causes,
        }
    }

    /// The Status reason.
    pub fn reason(&self) -> Reason {
        match self {
            Error::NotFound { .. } => Reason::NotFound,
            Error::AlreadyExists { .. } => Reason::AlreadyExists,
            Error::Conflict { .. } => Reason::Conflict,
            Error::Invalid { .. } => Reason::Invalid,
            Error::WithCauses { reason, .. }
            | Error::Refused { reason, .. }
            | Error::Other { reason, .. } => *reason,
            Error::Warned { error, .. } => error.reason(),
        }
    }

    /// The error with `warnings` for its response (itself when there are none).
    pub fn with_warnings(self, mut warnings: Vec<String>) -> Error {
        match self {
            _ if warnings.is_empty() => self,
            Error::Warned {
                error,
                warnings: mut earlier,
            } => {
                earlier.append(&mut warnings);
                Error::Warned {
                    error,
                    warnings: earlier,
                }
            }
            error => Error::Warned {
                error: Box::new(error),
                warnings,
            },
        }
    }

    /// The warnings its response carries.
    pub fn warnings(&self) -> &[String] {
        match self {
            Error::Warned { warnings, .. } => warnings,
            _ => &[],
        }
    }

    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        self.reason().http_code()
    }

    /// The Status object a client receives.
    pub fn to_status(&self) -> Status {
        let details = match self {
            Error::Warned { error, .. } => return error.to_status(),
            Error::NotFound { resource, name }
            | Error::AlreadyExists { resource, name }
            | Error::Conflict { resource, name, .. } => Some(StatusDetails {
                name: Some(name.clone()),
                group: non_empty(&resource.group),
                kind: Some(resource.resource.clone()),
                ..Default::default()
            }),
            Error::Invalid {
                group,
                kind,
                name,
                causes,
            } => Some(StatusDetails {
                name: Some(name.clone()),
                group: non_empty(group),
                kind: Some(kind.clone()),
                causes: causes
                    .iter()
                    .map(|c| StatusCause {
                        reason: Some(c.reason().into()),
                        message: Some(c.message()),
                        field: Some(c.field.clone()),
                    })
                    .collect(),
                ..Default::default()
            }),
            Error::Refused {
                resource,
                name,
                causes,
                ..
            } => Some(StatusDetails {
                name: Some(name.clone()),
                group: non_empty(&resource.group),
                kind: Some(resource.resource.clone()),
                causes: causes.clone(),
                ..Default::default()
            }),
            Error::WithCauses { causes, .. } => Some(StatusDetails {
                causes: causes.clone(),
                ..Default::default()
            }),
            Error::Other {
                retry_after: Some(secs),
                ..
            } => Some(StatusDetails {
                retry_after_seconds: Some(*secs),
                ..Default::default()
            }),
            Error::Other { .. } => None,
        };
        Status::failure(self.reason(), self.to_string(), details)
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// The `meta.k8s.io/v1` Status object.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Always `Status`.
    pub kind: String,
    /// Always `v1`.
    pub api_version: String,
    /// Always empty.
    pub metadata: serde_json::Map<String, Value>,
    /// `Success` or `Failure`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Extra data about the failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    #[serde(default)]
    pub code: u16,
}

/// `StatusDetails`: which object, and why.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// The object's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The group of the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The resource or kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The object's uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The failing fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds to wait before retrying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

/// `StatusCause`: one failing field.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusCause {
    /// The cause type, e.g. `FieldValueInvalid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What is wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The field path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl Status {
    /// A Failure status.
    pub fn failure(reason: Reason, message: String, details: Option<StatusDetails>) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            status: "Failure".into(),
            message,
            reason: reason.as_str().into(),
            details,
            code: reason.http_code(),
            ..Default::default()
        }
    }

    /// A Success status (e.g. a delete that returns no object).
    pub fn success(details: StatusDetails) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            status: "Success".into(),
            details: Some(details),
            code: 200,
            ..Default::default()
        }
    }
}

/// A selector or path that does not parse: 400 BadRequest with its message.
macro_rules! bad_request_from {
    ($($parse_error:ty),*) => {$(
        impl From<$parse_error> for Error {
            fn from(e: $parse_error) -> Self {
                Error::bad_request(e.to_string())
            }
        }
    )*};
}

bad_request_from!(
    crate::label_selector::SelectorError,
    crate::field_selector::FieldSelectorError,
    crate::jsonpath::JsonPathError
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_matches_kube() {
        let err = Error::NotFound {
            resource: GroupResource::new("", "configmaps"),
            name: "nope".into(),
        };
        let status = serde_json::to_value(err.to_status()).unwrap();
        assert_eq!(
            status,
            serde_json::json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                "message":"configmaps \"nope\" not found","reason":"NotFound",
                "details":{"name":"nope","kind":"configmaps"},"code":404})
        );
    }

    #[test]
    fn grouped_resource_names_its_group() {
        let err = Error::AlreadyExists {
            resource: GroupResource::new("apps", "deployments"),
            name: "web".into(),
        };
        assert_eq!(err.to_string(), "deployments.apps \"web\" already exists");
        assert_eq!(err.code(), 409);
    }

    #[test]
    fn invalid_lists_causes() {
        let one = Error::invalid(
            "",
            "ConfigMap",
            "Bad",
            vec![FieldError::invalid(
                "metadata.name",
                "Bad",
                "must be lowercase",
            )],
        );
        assert_eq!(
            one.to_string(),
            "ConfigMap \"Bad\" is invalid: metadata.name: Invalid value: \"Bad\": must be lowercase"
        );
        let two = Error::invalid(
            "",
            "ConfigMap",
            "x",
            vec![
                FieldError::required("metadata.name", "name or generateName is required"),
                FieldError::too_long("data", 5),
            ],
        );
        assert_eq!(
            two.to_string(),
            "ConfigMap \"x\" is invalid: [metadata.name: Required value: name or generateName is required, data: Too long: may not be more than 5 bytes]"
        );
        let twice = Error::invalid(
            "storage.k8s.io",
            "VolumeAttachment",
            "va",
            vec![
                FieldError::required("spec.attacher", ""),
                FieldError::required("spec.attacher", ""),
            ],
        );
        assert_eq!(
            twice.to_string(),
            "VolumeAttachment.storage.k8s.io \"va\" is invalid: spec.attacher: Required value"
        );
        let status = two.to_status();
        assert_eq!(status.code, 422);
        assert_eq!(
            status.details.unwrap().causes[0].reason.as_deref(),
            Some("FieldValueRequired")
        );
    }
}
