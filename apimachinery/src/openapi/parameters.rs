//! Inline parameters of the group-version documents' operations.
//!
//! kube-apiserver writes every parameter inline (kubectl's validation probe
//! looks up `fieldValidation` on the PATCH operation by name). Path-level
//! parameters (`name`, `namespace`, `pretty`) sit on the path item, the rest on
//! each operation, as upstream does.

use serde_json::{Value, json};

/// Query parameters of list and watch.
pub(crate) const LIST_PARAMS: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
/// Query parameters of create and update.
pub(crate) const WRITE_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
/// Query parameters of patch.
pub(crate) const PATCH_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
/// Query parameters of delete.
pub(crate) const DELETE_PARAMS: &[&str] = &[
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
];
/// Query parameters of deletecollection.
pub(crate) const DELETE_COLLECTION_PARAMS: &[&str] = &[
    "continue",
    "dryRun",
    "fieldSelector",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "labelSelector",
    "limit",
    "orphanDependents",
    "propagationPolicy",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
];

/// Type and description of every query parameter (upstream's wording, first sentence).
const QUERY_PARAMS: &[(&str, &str, &str)] = &[
    (
        "allowWatchBookmarks",
        "boolean",
        "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion.",
    ),
    (
        "continue",
        "string",
        "The continue option should be set when retrieving more results from the server.",
    ),
    (
        "dryRun",
        "string",
        "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed",
    ),
    (
        "fieldManager",
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    ),
    (
        "fieldSelector",
        "string",
        "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
    ),
    (
        "fieldValidation",
        "string",
        "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict",
    ),
    (
        "force",
        "boolean",
        "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
    ),
    (
        "gracePeriodSeconds",
        "integer",
        "The duration in seconds before the object should be deleted.",
    ),
    (
        "ignoreStoreReadErrorWithClusterBreakingPotential",
        "boolean",
        "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error.",
    ),
    (
        "labelSelector",
        "string",
        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
    ),
    (
        "limit",
        "integer",
        "limit is a maximum number of responses to return for a list call.",
    ),
    (
        "orphanDependents",
        "boolean",
        "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7.",
    ),
    (
        "pretty",
        "string",
        "If 'true', then the output is pretty printed.",
    ),
    (
        "propagationPolicy",
        "string",
        "Whether and how garbage collection will be performed. Acceptable values are: 'Orphan', 'Background', 'Foreground'.",
    ),
    (
        "resourceVersion",
        "string",
        "resourceVersion sets a constraint on what resource versions a request may be served from.",
    ),
    (
        "resourceVersionMatch",
        "string",
        "resourceVersionMatch determines how resourceVersion is applied to list calls.",
    ),
    (
        "sendInitialEvents",
        "boolean",
        "`sendInitialEvents=true` may be set together with `watch=true`: the watch stream begins with synthetic events for the current state of the collection.",
    ),
    (
        "timeoutSeconds",
        "integer",
        "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.",
    ),
    (
        "watch",
        "boolean",
        "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
    ),
];

/// Query parameters of the connect subresources' options kinds (`pods/exec`'s
/// PodExecOptions, `pods/log`'s PodLogOptions, the proxies' `path`).
const CONNECT_PARAMS: &[(&str, &str, &str)] = &[
    (
        "command",
        "string",
        "Command is the remote command to execute.",
    ),
    (
        "container",
        "string",
        "The container to attach to, run in, or read the logs of.",
    ),
    ("follow", "boolean", "Follow the log stream of the pod."),
    (
        "insecureSkipTLSVerifyBackend",
        "boolean",
        "insecureSkipTLSVerifyBackend indicates that the apiserver should not confirm the validity of the serving certificate of the backend it is connecting to.",
    ),
    (
        "limitBytes",
        "integer",
        "If set, the number of bytes to read from the server before terminating the log output.",
    ),
    (
        "path",
        "string",
        "Path is the URL path to use for the current proxy request.",
    ),
    (
        "ports",
        "integer",
        "List of ports to forward Required when using WebSockets.",
    ),
    (
        "previous",
        "boolean",
        "Return previous terminated container logs.",
    ),
    (
        "sinceSeconds",
        "integer",
        "A relative time in seconds before the current time from which to show logs.",
    ),
    (
        "stderr",
        "boolean",
        "Redirect the standard error stream of the pod for this call.",
    ),
    (
        "stdin",
        "boolean",
        "Redirect the standard input stream of the pod for this call.",
    ),
    (
        "stdout",
        "boolean",
        "Redirect the standard output stream of the pod for this call.",
    ),
    (
        "stream",
        "string",
        "Specify which container log stream to return to the client.",
    ),
    (
        "tailLines",
        "integer",
        "If set, the number of lines from the end of the logs to show.",
    ),
    (
        "timestamps",
        "boolean",
        "If true, add an RFC3339 or RFC3339Nano timestamp at the beginning of every line of log output.",
    ),
    (
        "tty",
        "boolean",
        "TTY if true indicates that a tty will be allocated for the exec call.",
    ),
];

/// Path-level parameters: `name` (when `kind` is given), `namespace` (when namespaced), `pretty`.
pub(crate) fn path_params(namespaced: bool, kind: Option<&str>) -> Vec<Value> {
    let mut params = Vec::new();
    if let Some(kind) = kind {
        params.push(path_param("name", &format!("name of the {kind}")));
    }
    if namespaced {
        params.push(path_param(
            "namespace",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    params.push(query_param("pretty"));
    params
}

/// A required path parameter.
pub(crate) fn path_param(name: &str, description: &str) -> Value {
    json!({
        "description": description,
        "in": "path",
        "name": name,
        "required": true,
        "schema": {"type": "string", "uniqueItems": true},
    })
}

/// A query parameter from [`QUERY_PARAMS`] or [`CONNECT_PARAMS`].
pub(crate) fn query_param(name: &str) -> Value {
    let (ty, description) = QUERY_PARAMS
        .iter()
        .chain(CONNECT_PARAMS)
        .find(|(param, _, _)| *param == name)
        .map(|(_, ty, description)| (*ty, *description))
        .unwrap_or(("string", ""));
    json!({
        "description": description,
        "in": "query",
        "name": name,
        "schema": {"type": ty, "uniqueItems": true},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_parameter_has_a_type_and_description() {
        let all = [
            LIST_PARAMS,
            WRITE_PARAMS,
            PATCH_PARAMS,
            DELETE_PARAMS,
            DELETE_COLLECTION_PARAMS,
        ];
        for name in all.into_iter().flatten() {
            let param = query_param(name);
            assert_eq!(param["in"], "query");
            assert_ne!(param["description"], "", "{name} has no description");
        }
        assert_eq!(query_param("force")["schema"]["type"], "boolean");
        assert_eq!(query_param("limit")["schema"]["type"], "integer");
    }

    #[test]
    fn path_parameters_are_name_namespace_pretty() {
        let params = path_params(true, Some("Pod"));
        let names: Vec<_> = params.iter().filter_map(|p| p["name"].as_str()).collect();
        assert_eq!(names, ["name", "namespace", "pretty"]);
        assert_eq!(params[0]["required"], true);
        assert_eq!(params[0]["description"], "name of the Pod");
        assert_eq!(path_params(false, None).len(), 1);
    }
}
