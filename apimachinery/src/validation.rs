//! Validation of names, labels, annotations and object metadata, with
//! kube-apiserver's messages.

use serde_json::Value;

use crate::error::FieldError;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";

/// Largest total size of an object's annotations.
const TOTAL_ANNOTATION_BYTES: usize = 256 * 1024;

/// How object names of a resource are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS-1123 subdomain (most resources).
    Subdomain,
    /// A DNS-1123 label (namespaces).
    Label,
    /// A DNS-1035 label (services).
    Dns1035Label,
    /// Any path segment (RBAC roles and bindings).
    PathSegment,
    /// An IP address in canonical form (networking.k8s.io IPAddresses).
    IpAddress,
}

impl NameRule {
    /// The problems with a name, as kube words them.
    pub fn check(self, name: &str) -> Vec<String> {
        match self {
            NameRule::Subdomain => dns1123_subdomain(name),
            NameRule::Label => dns1123_label(name),
            NameRule::Dns1035Label => dns1035_label(name),
            NameRule::PathSegment => path_segment_name(name),
            NameRule::IpAddress => crate::ip::valid_ip(name),
        }
    }
}

fn is_alnum_lower(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| is_alnum_lower(c) || c == '-')
        && s.starts_with(is_alnum_lower)
        && s.ends_with(is_alnum_lower)
}

/// Problems with a DNS-1123 label (≤63 chars).
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    if !is_label(s) {
        errs.push(format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{DNS1123_LABEL_FMT}')"
        ));
    }
    errs
}

/// Problems with a DNS-1123 subdomain (≤253 chars).
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".into());
    }
    if !s.split('.').all(is_label) {
        errs.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{DNS1123_SUBDOMAIN_FMT}')"
        ));
    }
    errs
}

/// Problems with a DNS-1035 label (starts with a letter).
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    if !is_label(s) || !s.starts_with(|c: char| c.is_ascii_lowercase()) {
        errs.push(format!(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '{DNS1035_LABEL_FMT}')"
        ));
    }
    errs
}

/// Problems with a name used as a path segment.
pub fn path_segment_name(s: &str) -> Vec<String> {
    if s == "." || s == ".." {
        return vec![format!("may not be '{s}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|bad| s.contains(*bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

fn is_qualified_name_part(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.chars().all(|c| ok(c) || c == '-' || c == '_' || c == '.')
        && s.starts_with(ok)
        && s.ends_with(ok)
}

const QUALIFIED_NAME_ERROR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// Problems with a qualified name (label and annotation keys, kube's
/// `IsQualifiedName`): `[prefix/]name`, the prefix a DNS subdomain.
pub fn qualified_name(key: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let mut errs = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".into());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_ERROR} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".into());
    }
    if !is_qualified_name_part(name) {
        errs.push(format!("name part {QUALIFIED_NAME_ERROR}"));
    }
    errs
}

/// Problems with a label value (kube's `IsValidLabelValue`).
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '{LABEL_VALUE_FMT}')"
        ));
    }
    errs
}

/// Validates `metadata.labels`.
pub fn labels(labels: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(Value::Object(map)) = labels else {
        return errs;
    };
    for (key, value) in map {
        for msg in qualified_name(key) {
            errs.push(FieldError::invalid(path, key.as_str(), msg));
        }
        let value = value.as_str().unwrap_or_default();
        for msg in label_value(value) {
            errs.push(FieldError::invalid(format!("{path}[{key}]"), value, msg));
        }
    }
    errs
}

/// Validates `metadata.annotations`.
pub fn annotations(annotations: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(Value::Object(map)) = annotations else {
        return errs;
    };
    let mut total = 0;
    for (key, value) in map {
        for msg in qualified_name(&key.to_lowercase()) {
            errs.push(FieldError::invalid(path, key.as_str(), msg));
        }
        total += key.len() + value.as_str().map_or(0, str::len);
    }
    if total > TOTAL_ANNOTATION_BYTES {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_BYTES));
    }
    errs
}

/// Validates the metadata of an object being created or updated.
pub fn object_meta(obj: &Value, namespaced: bool, rule: NameRule) -> Vec<FieldError> {
    let meta = obj.get("metadata");
    let get = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let mut errs = Vec::new();
    let (name, generate_name) = (get("name"), get("generateName"));
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for msg in rule.check(name) {
            errs.push(FieldError::invalid("metadata.name", name, msg));
        }
    }
    if !generate_name.is_empty() && name.is_empty() {
        for msg in rule.check(&format!("{generate_name}a")) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                generate_name,
                msg,
            ));
        }
    }
    let namespace = get("namespace");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in dns1123_label(namespace) {
                errs.push(FieldError::invalid("metadata.namespace", namespace, msg));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    errs.extend(labels(
        meta.and_then(|m| m.get("labels")),
        "metadata.labels",
    ));
    errs.extend(annotations(
        meta.and_then(|m| m.get("annotations")),
        "metadata.annotations",
    ));
    errs
}

/// Validates metadata changes on update: name, namespace, uid and
/// creationTimestamp are immutable.
pub fn object_meta_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for field in ["name", "namespace", "uid", "creationTimestamp"] {
        let (n, o) = (
            new.pointer(&format!("/metadata/{field}")),
            old.pointer(&format!("/metadata/{field}")),
        );
        if n != o {
            errs.push(FieldError::invalid(
                format!("metadata.{field}"),
                n.cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
    }
    // An object being deleted may lose finalizers but gain none.
    if old
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        let names = |obj: &Value| -> Vec<String> {
            let list = obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array);
            list.into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        let before = names(old);
        let mut added: Vec<String> = names(new)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        added.sort();
        added.dedup();
        if !added.is_empty() {
            let quoted: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                format!("no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}", quoted.join(", ")),
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_new_finalizers_while_deleting() {
        let old = json!({"metadata": {"name": "a", "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["x/a", "x/b"]}});
        let fewer = json!({"metadata": {"name": "a", "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["x/a"]}});
        assert!(object_meta_update(&fewer, &old).is_empty());
        let more = json!({"metadata": {"name": "a", "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["x/a", "x/c"]}});
        let errs: Vec<String> = object_meta_update(&more, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                r#"metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"x/c"}"#
            ]
        );
    }

    #[test]
    fn names() {
        assert!(dns1123_subdomain("a.b-c").is_empty());
        assert_eq!(dns1123_subdomain("Bad_Name").len(), 1);
        assert!(
            dns1123_subdomain(&"a".repeat(254))
                .iter()
                .any(|m| m.contains("253"))
        );
        assert!(dns1123_label("kube-system").is_empty());
        assert!(!dns1123_label("a.b").is_empty());
        assert!(!dns1035_label("1abc").is_empty());
        assert!(path_segment_name("system:admin").is_empty());
        assert_eq!(path_segment_name("a/b"), vec!["may not contain '/'"]);
    }

    #[test]
    fn label_keys_and_values() {
        assert!(qualified_name("app.kubernetes.io/name").is_empty());
        assert!(!qualified_name("-bad").is_empty());
        assert!(!qualified_name("Bad.Prefix/x").is_empty());
        assert!(label_value("").is_empty());
        assert!(!label_value("a b").is_empty());
        let errs = labels(Some(&json!({"ok":"v","bad key":"x"})), "metadata.labels");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.labels");
    }

    #[test]
    fn metadata_rules() {
        let errs = object_meta(
            &json!({"metadata":{"name":"Bad_Name","namespace":"default"}}),
            true,
            NameRule::Subdomain,
        );
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        let missing = object_meta(&json!({"metadata":{}}), false, NameRule::Label);
        assert_eq!(
            missing[0].to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
        let update = object_meta_update(
            &json!({"metadata":{"name":"a","uid":"2"}}),
            &json!({"metadata":{"name":"a","uid":"1"}}),
        );
        assert_eq!(update.len(), 1);
    }
}
