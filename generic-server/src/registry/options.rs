//! The options of a request, as the store reads them: `fieldValidation`, writes, lists and deletes.

use super::*;

/// How unknown fields in a write are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Dropped silently.
    Ignore,
    /// Dropped with a warning (the default).
    #[default]
    Warn,
    /// Rejected with 400.
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter.
    pub fn parse(value: Option<&str>) -> Result<Self> {
        match value {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(Error::bad_request(format!(
                "fieldValidation parameter unsupported: {other}, must be one of: Ignore, Warn, Strict"
            ))),
        }
    }
}

/// Options of a write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Validate and return the result without storing it.
    pub dry_run: bool,
    /// The manager the client named (`fieldManager`).
    pub field_manager: Option<String>,
    /// The manager recorded when the client named none (from its user agent).
    pub default_manager: Option<String>,
    /// Unknown field handling.
    pub field_validation: FieldValidation,
    /// Force ownership on apply conflicts.
    pub force: bool,
    /// Who writes.
    pub user: UserInfo,
}

/// Options of a list or watch.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: Option<LabelSelector>,
    /// `fieldSelector`.
    pub fields: Option<FieldSelector>,
    /// `limit` (0 = no limit).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Only delete if the uid matches.
    pub uid: Option<String>,
    /// Only delete if the resourceVersion matches.
    pub resource_version: Option<String>,
    /// `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// Validate without deleting.
    pub dry_run: bool,
    /// Who deletes.
    pub user: UserInfo,
}
