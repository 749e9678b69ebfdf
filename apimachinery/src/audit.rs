//! kube's audit (`audit.k8s.io/v1`), the part without IO: the [`Policy`]
//! read from `--audit-policy-file` and its rule matching (first matching
//! rule wins, as kube's policy checker), the [`Event`] every stage of a
//! request writes, and the small rules around it (source IPs, the
//! timestamps' format). The backends and the filter live in generic-server.
//!
//! ```
//! use apimachinery::audit::{Level, Policy};
//! use apimachinery::rbac::{Attributes, User};
//! let policy = Policy::parse(
//!     "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  resources: [{group: '', resources: [secrets]}]\n- level: Metadata\n",
//! )
//! .unwrap();
//! let groups = vec!["system:masters".to_string()];
//! let user = User { name: "admin", groups: &groups };
//! let get = |resource| Attributes { verb: "get", resource_request: true, api_group: "", resource, subresource: "", name: "x", namespace: "ns", path: "" };
//! assert_eq!(policy.evaluate(Some(&user), &get("secrets")).level, Level::None);
//! assert_eq!(policy.evaluate(Some(&user), &get("configmaps")).level, Level::Metadata);
//! ```

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::rbac::{Attributes, User};

/// The audit API's group and version.
pub const API_VERSION: &str = "audit.k8s.io/v1";
/// The annotation naming the authorizer's decision (`allow` or `forbid`).
pub const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
/// The annotation giving the authorizer's reason.
pub const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

/// How much of a request is recorded, from nothing to everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    /// Nothing is recorded.
    None,
    /// Who asked for what, and the answer's status: no bodies.
    Metadata,
    /// Metadata and the request's body.
    Request,
    /// Metadata, the request's body and the response's.
    RequestResponse,
}

/// When in a request's life an event is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Stage {
    /// As soon as the request is received, before it is handled.
    RequestReceived,
    /// Once the response's headers are sent, for long-running requests (watches).
    ResponseStarted,
    /// Once the response is complete.
    ResponseComplete,
    /// When the handler panicked.
    Panic,
}

/// An audit policy: rules, the first that matches a request deciding its level.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// `apiVersion`: `audit.k8s.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `kind`: `Policy`.
    #[serde(default)]
    pub kind: String,
    /// The rules, in order.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
    /// Stages no event is written at, for every rule.
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    /// Whether managed fields are left out of recorded objects, unless a rule says otherwise.
    #[serde(default)]
    pub omit_managed_fields: bool,
    /// Each rule's configuration, then the one for requests no rule matches.
    #[serde(skip)]
    configs: Vec<RequestAuditConfig>,
}

/// One rule: what it matches, and the level it gives.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// The level of the requests it matches.
    pub level: Level,
    /// User names it applies to (empty: any).
    #[serde(default)]
    pub users: Vec<String>,
    /// Groups it applies to (empty: any).
    #[serde(default)]
    pub user_groups: Vec<String>,
    /// Verbs it applies to (empty: any).
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Resources it applies to (empty: any).
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    /// Namespaces it applies to (`""` is cluster-scoped; empty: any).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Non-resource paths it applies to (`/healthz*`; empty: any).
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    /// Stages left out for the requests it matches (with the policy's).
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    /// Overrides the policy's `omitManagedFields`.
    #[serde(default)]
    pub omit_managed_fields: Option<bool>,
}

/// Resources of one API group.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupResources {
    /// The group (`""` for core).
    #[serde(default)]
    pub group: String,
    /// Resources (`pods`, `pods/log`, `*`, `*/status`, `pods/*`; empty: every one).
    #[serde(default)]
    pub resources: Vec<String>,
    /// Object names (empty: any).
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// What the policy decided for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestAuditConfig {
    /// The level.
    pub level: Level,
    /// Stages without an event.
    pub omit_stages: Vec<Stage>,
    /// Whether managed fields are left out of recorded objects.
    pub omit_managed_fields: bool,
}

impl RequestAuditConfig {
    /// Whether an event is written at `stage`.
    pub fn records(&self, stage: Stage) -> bool {
        self.level > Level::None && !self.omit_stages.contains(&stage)
    }
}

/// The configuration of requests no rule matches: nothing recorded.
static NOTHING: RequestAuditConfig = RequestAuditConfig {
    level: Level::None,
    omit_stages: Vec::new(),
    omit_managed_fields: false,
};

impl Policy {
    /// Reads a policy from YAML or JSON, and checks it as kube does.
    pub fn parse(text: &str) -> Result<Policy> {
        let value: Value = crate::yaml::from_str(text)
            .map_err(|e| Error::bad_request(format!("audit policy: {e}")))?;
        Self::from_value(value)
    }

    /// Reads a policy from its JSON form, and checks it as kube does.
    pub fn from_value(value: Value) -> Result<Policy> {
        let mut policy: Policy = serde_json::from_value(value)
            .map_err(|e| Error::bad_request(format!("audit policy: {e}")))?;
        if policy.api_version != API_VERSION {
            return Err(Error::bad_request(format!(
                "audit policy: unknown group version field {:?} in policy (want {API_VERSION:?})",
                policy.api_version
            )));
        }
        if policy.kind != "Policy" {
            return Err(Error::bad_request(format!(
                "audit policy: kind {:?} is not Policy",
                policy.kind
            )));
        }
        policy.validate()?;
        let mut configs: Vec<RequestAuditConfig> = policy
            .rules
            .iter()
            .map(|rule| {
                let mut omit_stages = policy.omit_stages.clone();
                for stage in &rule.omit_stages {
                    if !omit_stages.contains(stage) {
                        omit_stages.push(*stage);
                    }
                }
                RequestAuditConfig {
                    level: rule.level,
                    omit_stages,
                    omit_managed_fields: rule
                        .omit_managed_fields
                        .unwrap_or(policy.omit_managed_fields),
                }
            })
            .collect();
        configs.push(RequestAuditConfig {
            level: Level::None,
            omit_stages: policy.omit_stages.clone(),
            omit_managed_fields: policy.omit_managed_fields,
        });
        policy.configs = configs;
        Ok(policy)
    }

    /// kube's checks of a policy's rules.
    fn validate(&self) -> Result<()> {
        for (i, rule) in self.rules.iter().enumerate() {
            let at = format!("audit policy: rules[{i}]");
            if !rule.non_resource_urls.is_empty()
                && (!rule.resources.is_empty() || !rule.namespaces.is_empty())
            {
                return Err(Error::bad_request(format!(
                    "{at}: rules cannot apply to both regular resources and non-resource URLs"
                )));
            }
            for url in &rule.non_resource_urls {
                let starred = url.find('*');
                if url.is_empty()
                    || (!url.starts_with('/') && url != "*")
                    || starred.is_some_and(|at| at != url.len() - 1)
                {
                    return Err(Error::bad_request(format!(
                        "{at}.nonResourceURLs: Invalid value: {url:?}: must start with '/' and may end with '*'"
                    )));
                }
            }
            for (j, group) in rule.resources.iter().enumerate() {
                if !group.resource_names.is_empty() && group.resources.is_empty() {
                    return Err(Error::bad_request(format!(
                        "{at}.resources[{j}].resourceNames: Invalid value: using resourceNames requires at least one resource"
                    )));
                }
                for resource in &group.resources {
                    if resource.is_empty() || resource.matches('/').count() > 1 {
                        return Err(Error::bad_request(format!(
                            "{at}.resources[{j}].resources: Invalid value: {resource:?}"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// The configuration of the first rule matching the request (`None`
    /// level when none does). `user` is `None` when authentication failed.
    pub fn evaluate(&self, user: Option<&User<'_>>, attrs: &Attributes<'_>) -> &RequestAuditConfig {
        self.rules
            .iter()
            .position(|rule| rule.matches(user, attrs))
            .and_then(|i| self.configs.get(i))
            .or(self.configs.last())
            .unwrap_or(&NOTHING)
    }
}

impl PolicyRule {
    /// Whether the rule applies to the request (kube's `ruleMatches`).
    pub fn matches(&self, user: Option<&User<'_>>, attrs: &Attributes<'_>) -> bool {
        if !self.users.is_empty() && !user.is_some_and(|u| self.users.iter().any(|n| n == u.name)) {
            return false;
        }
        if !self.user_groups.is_empty()
            && !user.is_some_and(|u| u.groups.iter().any(|g| self.user_groups.contains(g)))
        {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.iter().any(|v| v == attrs.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(attrs);
        }
        if !self.non_resource_urls.is_empty() {
            return !attrs.resource_request
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(attrs.path, spec));
        }
        true
    }

    fn matches_resource(&self, attrs: &Attributes<'_>) -> bool {
        if !attrs.resource_request {
            return false;
        }
        if !self.namespaces.is_empty() && !self.namespaces.iter().any(|n| n == attrs.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let (resource, subresource) = (attrs.resource, attrs.subresource);
        let combined = if subresource.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}/{subresource}")
        };
        self.resources
            .iter()
            .filter(|gr| gr.group == attrs.api_group)
            .any(|gr| {
                if gr.resources.is_empty() {
                    return true;
                }
                if !gr.resource_names.is_empty()
                    && !gr.resource_names.iter().any(|n| n == attrs.name)
                {
                    return false;
                }
                gr.resources.iter().any(|res| {
                    res == "*"
                        || *res == combined
                        || (!subresource.is_empty() && res.strip_prefix("*/") == Some(subresource))
                        || res.strip_suffix("/*") == Some(resource)
                })
            })
    }
}

/// Whether a non-resource path matches a rule's `nonResourceURLs` entry
/// (`*`, the path itself, or a prefix ending in `*`).
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix))
}

/// The user an event names (`authentication.k8s.io/v1` UserInfo).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UserInfo {
    /// The user name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// The uid.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Extra attributes.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What a request was about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// The resource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// The namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The object's name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The API group (empty for core).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The API version.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The subresource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// One audit event (`audit.k8s.io/v1` Event), fields in kube's order.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// `Event`.
    pub kind: &'static str,
    /// `audit.k8s.io/v1`.
    pub api_version: &'static str,
    /// The level the policy gave the request.
    pub level: Level,
    /// The request's id, also its `Audit-Id` response header.
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// The stage this event was written at.
    pub stage: Stage,
    /// The path and query the client sent.
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// kube's verb (`get`, `list`, `watch`, `create`, …; a lowercase HTTP method elsewhere).
    pub verb: String,
    /// The authenticated user.
    pub user: UserInfo,
    /// The user impersonated, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<UserInfo>,
    /// Where the request came from (`X-Forwarded-For`, `X-Real-Ip`, then the peer).
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    /// The client's `User-Agent`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// What the request was about, for resource requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    /// The response's code, and for a Status its status, message, reason and details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<Value>,
    /// The request's body, at Request level and above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    /// The response's body, at RequestResponse level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    /// When the request arrived.
    pub request_received_timestamp: String,
    /// When this stage was reached.
    pub stage_timestamp: String,
    /// Annotations from authorization and admission.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Event {
    /// An event at RequestReceived, at `level`, received at `now`.
    pub fn new(level: Level, audit_id: String, now: &str) -> Event {
        Event {
            kind: "Event",
            api_version: API_VERSION,
            level,
            audit_id,
            stage: Stage::RequestReceived,
            request_uri: String::new(),
            verb: String::new(),
            user: UserInfo::default(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: now.to_string(),
            stage_timestamp: now.to_string(),
            annotations: BTreeMap::new(),
        }
    }

    /// Records the response's code, and for a Status body its status,
    /// message, reason and details (as kube copies them, at every level).
    pub fn set_response_status(&mut self, code: u16, status: Option<&Value>) {
        let mut recorded = serde_json::json!({"metadata": {}});
        if let Some(status) =
            status.filter(|s| s.get("kind").and_then(Value::as_str) == Some("Status"))
        {
            for field in ["status", "message", "reason", "details"] {
                if let Some(value) = status.get(field).filter(|v| !v.is_null()) {
                    recorded[field] = value.clone();
                }
            }
        }
        recorded["code"] = Value::from(code);
        self.response_status = Some(recorded);
    }

    /// Sets an annotation, keeping the first value given for a key (kube's rule).
    pub fn annotate(&mut self, key: &str, value: &str) {
        self.annotations
            .entry(key.to_string())
            .or_insert_with(|| value.to_string());
    }
}

/// A batch of events, each already JSON, as the webhook backend sends it: an EventList.
pub fn event_list(events: &[impl AsRef<[u8]>]) -> Vec<u8> {
    const HEAD: &[u8] =
        br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":["#;
    let size = events.iter().map(|e| e.as_ref().len() + 1).sum::<usize>();
    let mut list = Vec::with_capacity(HEAD.len() + size + 2);
    list.extend_from_slice(HEAD);
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            list.push(b',');
        }
        list.extend_from_slice(event.as_ref());
    }
    list.extend_from_slice(b"]}");
    list
}

/// `object` as an audit event records it: without `metadata.managedFields` when asked.
pub fn recorded_object(mut object: Value, omit_managed_fields: bool) -> Value {
    if omit_managed_fields {
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        if let Some(items) = object.get_mut("items").and_then(Value::as_array_mut) {
            for item in items {
                if let Some(meta) = item.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("managedFields");
                }
            }
        }
    }
    object
}

/// A request's source IPs, as kube works them out: every valid address of
/// `X-Forwarded-For`, then `X-Real-Ip` if not already there, then the
/// peer unless it is the last one already.
pub fn source_ips(
    forwarded_for: Option<&str>,
    real_ip: Option<&str>,
    peer: Option<IpAddr>,
) -> Vec<String> {
    let mut ips: Vec<IpAddr> = forwarded_for
        .into_iter()
        .flat_map(|h| h.split(','))
        .filter_map(|part| part.trim().parse().ok())
        .collect();
    if let Some(ip) = real_ip.and_then(|h| h.trim().parse::<IpAddr>().ok())
        && !ips.contains(&ip)
    {
        ips.push(ip);
    }
    if let Some(peer) = peer
        && ips.last() != Some(&peer)
    {
        ips.push(peer);
    }
    ips.iter().map(IpAddr::to_string).collect()
}

/// A time as audit events write it: RFC 3339 in UTC with microseconds (kube's MicroTime).
pub fn micro_time(at: time::OffsetDateTime) -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
    );
    at.to_offset(time::UtcOffset::UTC)
        .format(&format)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs<'a>(verb: &'a str, resource: &'a str, subresource: &'a str) -> Attributes<'a> {
        Attributes {
            verb,
            resource_request: true,
            api_group: "",
            resource,
            subresource,
            name: "web",
            namespace: "team",
            path: "",
        }
    }

    fn path(verb: &str, path: &str) -> Attributes<'static> {
        let (verb, path) = (verb.to_string().leak(), path.to_string().leak());
        Attributes {
            verb,
            resource_request: false,
            api_group: "",
            resource: "",
            subresource: "",
            name: "",
            namespace: "",
            path,
        }
    }

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
  verbs: ["watch"]
- level: None
  userGroups: ["system:nodes"]
- level: Metadata
  resources:
  - group: ""
    resources: ["pods/log", "*/status"]
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["configmaps"]
    resourceNames: ["controller-leader"]
  omitStages: [ResponseStarted]
  omitManagedFields: true
- level: Request
  resources:
  - group: "apps"
    resources: ["deployments/*"]
  - group: ""
    resources: ["configmaps"]
  namespaces: ["team"]
- level: Metadata
"#;

    #[test]
    fn the_first_matching_rule_decides() {
        let policy = Policy::parse(POLICY).unwrap();
        let groups = vec!["system:authenticated".to_string()];
        let alice = User {
            name: "alice",
            groups: &groups,
        };
        let node_groups = vec!["system:nodes".to_string()];
        let node = User {
            name: "node-1",
            groups: &node_groups,
        };
        let proxy = User {
            name: "system:kube-proxy",
            groups: &groups,
        };
        let level = |user: &User<'_>, a: &Attributes<'_>| policy.evaluate(Some(user), a).level;
        // users and verbs together
        assert_eq!(level(&proxy, &attrs("watch", "pods", "")), Level::None);
        assert_eq!(level(&proxy, &attrs("get", "pods", "")), Level::Metadata);
        // groups
        assert_eq!(level(&node, &attrs("get", "pods", "")), Level::None);
        // subresources: named, and */status
        assert_eq!(level(&alice, &attrs("get", "pods", "log")), Level::Metadata);
        assert_eq!(
            level(&alice, &attrs("update", "deployments", "status")),
            Level::Metadata
        );
        // non-resource URLs with a trailing *
        assert_eq!(level(&alice, &path("get", "/healthz/etcd")), Level::None);
        assert_eq!(level(&alice, &path("get", "/version")), Level::None);
        assert_eq!(level(&alice, &path("get", "/versions")), Level::Metadata);
        // resourceNames
        let mut leader = attrs("update", "configmaps", "");
        leader.name = "controller-leader";
        assert_eq!(level(&alice, &leader), Level::RequestResponse);
        // group resources with namespaces; resource/* (as in kube) matches the resource and its subresources
        assert_eq!(
            level(&alice, &attrs("create", "configmaps", "")),
            Level::Request
        );
        let mut other = attrs("create", "configmaps", "");
        other.namespace = "elsewhere";
        assert_eq!(level(&alice, &other), Level::Metadata);
        let mut scale = attrs("update", "deployments", "scale");
        scale.api_group = "apps";
        assert_eq!(level(&alice, &scale), Level::Request);
        scale.subresource = "";
        assert_eq!(level(&alice, &scale), Level::Request);
        scale.resource = "replicasets";
        assert_eq!(level(&alice, &scale), Level::Metadata);
        // resource rules never match non-resource requests
        assert_eq!(level(&alice, &path("get", "/apis")), Level::Metadata);
        // an unauthenticated request matches no rule naming users or groups
        assert_eq!(
            policy.evaluate(None, &attrs("watch", "pods", "")).level,
            Level::Metadata
        );
    }

    #[test]
    fn omit_stages_and_managed_fields_combine_policy_and_rule() {
        let policy = Policy::parse(POLICY).unwrap();
        let groups = Vec::new();
        let alice = User {
            name: "alice",
            groups: &groups,
        };
        let mut leader = attrs("update", "configmaps", "");
        leader.name = "controller-leader";
        let config = policy.evaluate(Some(&alice), &leader);
        assert_eq!(
            config.omit_stages,
            vec![Stage::RequestReceived, Stage::ResponseStarted]
        );
        assert!(config.omit_managed_fields);
        assert!(!config.records(Stage::RequestReceived));
        assert!(!config.records(Stage::ResponseStarted));
        assert!(config.records(Stage::ResponseComplete));
        let config = policy.evaluate(Some(&alice), &attrs("get", "secrets", ""));
        assert_eq!(config.omit_stages, vec![Stage::RequestReceived]);
        assert!(!config.omit_managed_fields);
        assert!(config.records(Stage::ResponseStarted));
        // No rule: nothing recorded at any stage.
        let empty = Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\n").unwrap();
        let config = empty.evaluate(Some(&alice), &attrs("get", "secrets", ""));
        assert_eq!(config.level, Level::None);
        assert!(!config.records(Stage::ResponseComplete));
    }

    #[test]
    fn the_example_policy_parses() {
        let policy = Policy::parse(include_str!("../../deploy/audit-policy.yaml")).unwrap();
        let groups = Vec::new();
        let alice = User {
            name: "alice",
            groups: &groups,
        };
        assert_eq!(
            policy.evaluate(Some(&alice), &path("get", "/readyz")).level,
            Level::None
        );
        assert_eq!(
            policy
                .evaluate(Some(&alice), &attrs("create", "configmaps", ""))
                .level,
            Level::Request
        );
        assert_eq!(
            policy
                .evaluate(Some(&alice), &attrs("get", "secrets", ""))
                .level,
            Level::Metadata
        );
    }

    #[test]
    fn json_policies_parse_and_bad_ones_are_refused() {
        let json = r#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[{"level":"RequestResponse"}]}"#;
        let policy = Policy::parse(json).unwrap();
        assert_eq!(policy.rules[0].level, Level::RequestResponse);
        for (bad, why) in [
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Verbose\n",
                "Verbose",
            ),
            (
                "apiVersion: audit.k8s.io/v2\nkind: Policy\n",
                "unknown group version",
            ),
            ("apiVersion: audit.k8s.io/v1\nkind: Pod\n", "not Policy"),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- {}\n",
                "level",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Sometimes]\n",
                "Sometimes",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: ['/a*b']\n",
                "nonResourceURLs",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: ['/a']\n  namespaces: [x]\n",
                "both",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  resources: [{resourceNames: [x]}]\n",
                "resourceNames",
            ),
            ("rules: [", "audit policy"),
        ] {
            let err = Policy::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn events_serialize_as_kube_writes_them() {
        let mut event = Event::new(
            Level::Metadata,
            "id-1".into(),
            "2026-01-02T03:04:05.000006Z",
        );
        event.verb = "create".into();
        event.user.username = "alice".into();
        event.object_ref = Some(ObjectReference {
            resource: "configmaps".into(),
            namespace: "team".into(),
            api_version: "v1".into(),
            ..Default::default()
        });
        event.set_response_status(
            403,
            Some(&serde_json::json!({"kind": "Status", "status": "Failure", "message": "no", "reason": "Forbidden", "code": 403})),
        );
        event.annotate(DECISION_ANNOTATION, "forbid");
        event.annotate(DECISION_ANNOTATION, "allow");
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["kind"], "Event");
        assert_eq!(json["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(json["auditID"], "id-1");
        assert_eq!(json["stage"], "RequestReceived");
        assert_eq!(json["level"], "Metadata");
        assert_eq!(json["user"], serde_json::json!({"username": "alice"}));
        assert_eq!(
            json["objectRef"],
            serde_json::json!({"resource": "configmaps", "namespace": "team", "apiVersion": "v1"})
        );
        assert_eq!(
            json["responseStatus"],
            serde_json::json!({"metadata": {}, "status": "Failure", "message": "no", "reason": "Forbidden", "code": 403})
        );
        assert_eq!(json["annotations"][DECISION_ANNOTATION], "forbid");
        assert!(json.get("impersonatedUser").is_none());
        assert!(json.get("requestObject").is_none());
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(keys[..4], ["kind", "apiVersion", "level", "auditID"]);
        event.set_response_status(200, None);
        assert_eq!(
            serde_json::to_value(&event).unwrap()["responseStatus"],
            serde_json::json!({"metadata": {}, "code": 200})
        );
    }

    #[test]
    fn event_lists_join_events() {
        let one = serde_json::to_vec(&Event::new(Level::Metadata, "a".into(), "t")).unwrap();
        let two = serde_json::to_vec(&Event::new(Level::Request, "b".into(), "t")).unwrap();
        let list: Value = serde_json::from_slice(&event_list(&[one, two])).unwrap();
        assert_eq!(list["kind"], "EventList");
        assert_eq!(list["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(list["items"][1]["auditID"], "b");
        let empty: Value = serde_json::from_slice(&event_list(&[] as &[Vec<u8>])).unwrap();
        assert_eq!(empty["items"], serde_json::json!([]));
    }

    #[test]
    fn source_ips_as_kube_works_them_out() {
        let peer: IpAddr = "10.0.0.9".parse().unwrap();
        assert_eq!(source_ips(None, None, Some(peer)), ["10.0.0.9"]);
        assert_eq!(
            source_ips(Some("1.2.3.4, junk, 5.6.7.8"), Some("5.6.7.8"), Some(peer)),
            ["1.2.3.4", "5.6.7.8", "10.0.0.9"]
        );
        assert_eq!(
            source_ips(
                Some("1.2.3.4"),
                Some("9.9.9.9"),
                Some("9.9.9.9".parse().unwrap())
            ),
            ["1.2.3.4", "9.9.9.9"]
        );
        assert_eq!(source_ips(Some("::1"), None, None), ["::1"]);
    }

    #[test]
    fn micro_times_and_managed_fields() {
        let at = time::macros::datetime!(2026-12-02 20:21:40.123456789 UTC);
        assert_eq!(micro_time(at), "2026-12-02T20:21:40.123456Z");
        let object =
            serde_json::json!({"metadata": {"name": "x", "managedFields": [{}]}, "data": {}});
        assert!(
            recorded_object(object.clone(), false)["metadata"]
                .get("managedFields")
                .is_some()
        );
        assert!(
            recorded_object(object, true)["metadata"]
                .get("managedFields")
                .is_none()
        );
    }
}
