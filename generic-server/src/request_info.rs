//! Request attributes parsed from method, path and query, as kube-apiserver's
//! `RequestInfoFactory` does.

use http::Method;

/// The Kubernetes attributes of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether the path names a resource (as opposed to `/version`, `/apis`, ...).
    pub is_resource_request: bool,
    /// get, list, watch, create, update, patch, delete, deletecollection; or
    /// the lowercase HTTP method for non-resource requests.
    pub verb: String,
    /// `api` or `apis` (empty for non-resource paths).
    pub api_prefix: String,
    /// The group, `""` for core.
    pub api_group: String,
    /// The version.
    pub api_version: String,
    /// The namespace, if any.
    pub namespace: String,
    /// The plural resource.
    pub resource: String,
    /// The subresource, e.g. `status`.
    pub subresource: String,
    /// The object name.
    pub name: String,
    /// A list or watch's exact `fieldSelector` requirements (`field=value`
    /// or `field==value` terms), kube's `GetFieldSelector()`: what lets the
    /// Node authorizer allow a kubelet's `spec.nodeName=<node>` pod watch.
    pub field_selector: Vec<(String, String)>,
}

/// Subresources of a namespace, which follow `namespaces/<name>/`.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

impl RequestInfo {
    /// Parses the attributes of a request.
    pub fn parse(method: &Method, path: &str, query: &str) -> RequestInfo {
        let mut info = RequestInfo {
            verb: method.as_str().to_lowercase(),
            ..Default::default()
        };
        let mut parts: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|p| !p.is_empty())
            .collect();
        let Some(&prefix) = parts.first() else {
            return info;
        };
        if prefix != "api" && prefix != "apis" {
            return info;
        }
        parts.remove(0);
        if prefix == "apis" {
            if parts.is_empty() {
                return info;
            }
            info.api_group = parts.remove(0).to_string();
        }
        if parts.is_empty() {
            return info;
        }
        info.api_version = parts.remove(0).to_string();
        if parts.is_empty() {
            return info;
        }
        info.api_prefix = prefix.to_string();
        info.is_resource_request = true;
        info.verb = match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        }
        .to_string();
        if parts[0] == "watch" && info.verb == "get" {
            info.verb = "watch".into();
            parts.remove(0);
        }
        if parts.first() == Some(&"namespaces") {
            if parts.len() > 1 {
                info.namespace = parts[1].to_string();
                if parts.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&parts[2]) {
                    parts.drain(..2);
                }
            }
        }
        if let Some(resource) = parts.first() {
            info.resource = resource.to_string();
        }
        if let Some(name) = parts.get(1) {
            info.name = name.to_string();
        }
        // As kube: one segment; what follows (a proxy's path) is not part of it.
        if let Some(subresource) = parts.get(2) {
            info.subresource = subresource.to_string();
        }
        if info.name.is_empty() && info.verb == "get" {
            let watch = form_urlencoded::parse(query.as_bytes())
                .any(|(k, v)| k == "watch" && (v == "true" || v == "1"));
            info.verb = if watch { "watch" } else { "list" }.into();
        }
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".into();
        }
        if info.name.is_empty() && matches!(info.verb.as_str(), "list" | "watch") {
            // As kube: a list or watch of one name (what an informer of one
            // object asks) is authorized as a request for that name, so a
            // role limited to named objects allows it.
            info.name = selected_name(query).unwrap_or_default();
        }
        if matches!(info.verb.as_str(), "list" | "watch") {
            info.field_selector = field_requirements(query);
        }
        info
    }

    /// Whether the path is under a group version but names no resource
    /// (`/api/v1`, `/apis/apps/v1`) or is a group (`/apis/apps`).
    pub fn is_discovery(&self) -> bool {
        !self.is_resource_request && (!self.api_version.is_empty() || !self.api_group.is_empty())
    }
}

/// The name a `fieldSelector` requires exactly (`metadata.name=x` or
/// `metadata.name==x` among its terms), if it is a valid path segment.
fn selected_name(query: &str) -> Option<String> {
    let selector = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "fieldSelector")
        .map(|(_, v)| v.into_owned())?;
    // Escaped selectors (`\,`) are left alone: no name is better than a wrong one.
    if selector.contains('\\') {
        return None;
    }
    selector.split(',').find_map(|term| {
        let (field, value) = term.split_once('=')?;
        if field.trim() != "metadata.name" {
            return None;
        }
        let value = value.strip_prefix('=').unwrap_or(value).trim();
        let valid =
            !value.is_empty() && value != "." && value != ".." && !value.contains(['/', '%']);
        valid.then(|| value.to_string())
    })
}

/// The exact-equality terms of a `fieldSelector` (none when it has an
/// escaped term: no requirement is better than a wrong one).
fn field_requirements(query: &str) -> Vec<(String, String)> {
    let Some(selector) = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "fieldSelector")
        .map(|(_, v)| v.into_owned())
    else {
        return Vec::new();
    };
    if selector.contains('\\') {
        return Vec::new();
    }
    selector
        .split(',')
        .filter_map(|term| {
            let (field, value) = term.split_once('=')?;
            if field.ends_with('!') {
                return None;
            }
            let value = value.strip_prefix('=').unwrap_or(value);
            Some((field.trim().to_string(), value.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: Method, path: &str, query: &str) -> RequestInfo {
        RequestInfo::parse(&method, path, query)
    }

    #[test]
    fn namespaced_object() {
        let i = parse(Method::GET, "/api/v1/namespaces/default/configmaps/foo", "");
        assert!(i.is_resource_request);
        assert_eq!(
            (
                i.verb.as_str(),
                i.api_group.as_str(),
                i.namespace.as_str(),
                i.resource.as_str(),
                i.name.as_str()
            ),
            ("get", "", "default", "configmaps", "foo")
        );
    }

    #[test]
    fn lists_and_watches() {
        assert_eq!(
            parse(Method::GET, "/apis/apps/v1/deployments", "").verb,
            "list"
        );
        let w = parse(
            Method::GET,
            "/api/v1/namespaces/x/pods",
            "watch=true&resourceVersion=5",
        );
        assert_eq!((w.verb.as_str(), w.namespace.as_str()), ("watch", "x"));
        assert_eq!(
            parse(Method::GET, "/api/v1/watch/namespaces/x/pods", "").verb,
            "watch"
        );
        assert_eq!(
            parse(Method::DELETE, "/api/v1/namespaces/x/pods", "").verb,
            "deletecollection"
        );
    }

    #[test]
    fn a_list_of_one_name_is_a_request_for_that_name() {
        let one = |query: &str| {
            let info = parse(
                Method::GET,
                "/api/v1/namespaces/kube-system/configmaps",
                query,
            );
            (info.verb, info.name)
        };
        let named = "fieldSelector=metadata.name%3Dextension-apiserver-authentication";
        assert_eq!(
            one(named),
            ("list".into(), "extension-apiserver-authentication".into())
        );
        assert_eq!(
            one("watch=true&fieldSelector=status.phase%3DRunning%2Cmetadata.name%3D%3Dx"),
            ("watch".into(), "x".into())
        );
        for other in [
            "",
            "fieldSelector=metadata.name%21%3Dx",
            "fieldSelector=metadata.namespace%3Dx",
            "fieldSelector=metadata.name%3D..",
            "fieldSelector=metadata.name%3Da%2Fb",
            "labelSelector=metadata.name%3Dx",
        ] {
            assert_eq!(one(other).1, "", "{other}");
        }
        // A name in the path stays the name.
        let get = parse(
            Method::GET,
            "/api/v1/namespaces/a/configmaps/b",
            "fieldSelector=metadata.name%3Dc",
        );
        assert_eq!((get.verb.as_str(), get.name.as_str()), ("get", "b"));
    }

    #[test]
    fn a_list_carries_its_field_selectors_exact_terms() {
        let pods = parse(
            Method::GET,
            "/api/v1/pods",
            "watch=1&fieldSelector=spec.nodeName%3Dn1%2Cstatus.phase%21%3DFailed%2Cmetadata.namespace%3D%3Dns",
        );
        assert_eq!(
            pods.field_selector,
            [
                ("spec.nodeName".to_string(), "n1".to_string()),
                ("metadata.namespace".to_string(), "ns".to_string())
            ]
        );
        let get = parse(
            Method::GET,
            "/api/v1/namespaces/a/pods/b",
            "fieldSelector=spec.nodeName%3Dn1",
        );
        assert!(get.field_selector.is_empty());
    }

    #[test]
    fn namespaces_and_their_subresources() {
        let ns = parse(Method::GET, "/api/v1/namespaces/foo", "");
        assert_eq!(
            (ns.resource.as_str(), ns.name.as_str()),
            ("namespaces", "foo")
        );
        let fin = parse(Method::PUT, "/api/v1/namespaces/foo/finalize", "");
        assert_eq!(
            (
                fin.resource.as_str(),
                fin.name.as_str(),
                fin.subresource.as_str()
            ),
            ("namespaces", "foo", "finalize")
        );
        let status = parse(
            Method::PATCH,
            "/apis/apps/v1/namespaces/a/deployments/web/scale",
            "",
        );
        assert_eq!(
            (
                status.name.as_str(),
                status.subresource.as_str(),
                status.verb.as_str()
            ),
            ("web", "scale", "patch")
        );
    }

    #[test]
    fn non_resource_paths() {
        for path in [
            "/version",
            "/apis",
            "/api",
            "/api/v1",
            "/apis/apps",
            "/apis/apps/v1",
            "/healthz",
        ] {
            let i = parse(Method::GET, path, "");
            assert!(!i.is_resource_request, "{path}");
            assert_eq!(i.verb, "get");
        }
        assert!(parse(Method::GET, "/apis/apps/v1", "").is_discovery());
        assert!(!parse(Method::GET, "/apis", "").is_discovery());
    }
}
