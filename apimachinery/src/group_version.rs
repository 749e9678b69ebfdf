//! The names that identify API types: group/resource and group/version/kind,
//! and the strings built from them (`apiVersion`, URL prefixes).

use std::fmt;

/// A resource within a group, e.g. `deployments.apps`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupResource {
    /// The API group, `""` for core.
    pub group: String,
    /// The plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// A group resource from its parts.
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// A kind within a group and version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionKind {
    /// The API group, `""` for core.
    pub group: String,
    /// The version, e.g. `v1`.
    pub version: String,
    /// The kind, e.g. `ConfigMap`.
    pub kind: String,
}

impl GroupVersionKind {
    /// A group/version/kind from its parts.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        GroupVersionKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// The `{"group", "kind", "version"}` object of `x-kubernetes-group-version-kind`.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::json!({"group": self.group, "kind": self.kind, "version": self.version})
    }

    /// The `apiVersion` string: `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        api_version(&self.group, &self.version)
    }
}

/// The `apiVersion` string of a group and version.
pub fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// The URL prefix of a group and version: `/api/v1` or `/apis/apps/v1`.
pub fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}
