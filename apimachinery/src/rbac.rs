//! RBAC's rules without IO, as kube-apiserver reads them: whether a rule
//! allows a request, whether a binding's subject is a user, which rules a
//! user holds from a set of roles and bindings, and whether one set of rules
//! covers another (escalation prevention).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};

/// The group every User and Group subject and every role reference names.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// What a request asks to do, as an authorizer sees it (kube's
/// `authorizer.Attributes`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Attributes<'a> {
    /// The verb: `get`, `list`, `create`, … for resources; the lowercase
    /// HTTP method for other paths.
    pub verb: &'a str,
    /// Whether this is a request for a resource (or a subresource).
    pub resource_request: bool,
    /// The API group (`""` for core).
    pub api_group: &'a str,
    /// The resource, e.g. `pods`.
    pub resource: &'a str,
    /// The subresource, e.g. `log`.
    pub subresource: &'a str,
    /// The object's name (empty for list and create).
    pub name: &'a str,
    /// The namespace (empty for cluster-scoped requests).
    pub namespace: &'a str,
    /// The URL path of a non-resource request.
    pub path: &'a str,
}

/// The user a decision is about.
#[derive(Debug, Clone, Copy)]
pub struct User<'a> {
    /// The user name.
    pub name: &'a str,
    /// The user's groups.
    pub groups: &'a [String],
}

/// The user name of a service account (`system:serviceaccount:<ns>:<name>`).
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

fn items(list: &Option<Vec<String>>) -> &[String] {
    list.as_deref().unwrap_or_default()
}

fn has(set: &[String], wanted: &str) -> bool {
    set.iter().any(|s| s == wanted)
}

/// Whether `rule` allows `attrs` (kube's `RuleAllows`).
pub fn rule_allows(rule: &PolicyRule, attrs: &Attributes<'_>) -> bool {
    let verb_matches = has(&rule.verbs, "*") || has(&rule.verbs, attrs.verb);
    if !verb_matches {
        return false;
    }
    if !attrs.resource_request {
        return items(&rule.non_resource_urls).iter().any(|url| {
            url == "*"
                || url == attrs.path
                || url
                    .strip_suffix('*')
                    .is_some_and(|prefix| attrs.path.starts_with(prefix))
        });
    }
    let groups = items(&rule.api_groups);
    if !(has(groups, "*") || has(groups, attrs.api_group)) {
        return false;
    }
    // `resource` or `resource/subresource`, compared without building it.
    let combined = |r: &str| match attrs.subresource {
        "" => r == attrs.resource,
        sub => {
            r.strip_prefix(attrs.resource)
                .and_then(|rest| rest.strip_prefix('/'))
                == Some(sub)
        }
    };
    let resource_matches = items(&rule.resources).iter().any(|r| {
        r == "*"
            || combined(r)
            || (!attrs.subresource.is_empty() && r.strip_prefix("*/") == Some(attrs.subresource))
    });
    if !resource_matches {
        return false;
    }
    let names = items(&rule.resource_names);
    names.is_empty() || has(names, attrs.name)
}

/// The namespace of a ServiceAccount subject: its own, or (when it names
/// none) its binding's (kube's `appliesToUser`).
fn subject_namespace<'a>(subject: &'a Subject, binding_namespace: &'a str) -> &'a str {
    subject
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(binding_namespace)
}

/// Where a user's rule comes from: a binding, its role and its subject, in
/// kube's words (`ClusterRoleBinding "x" of ClusterRole "y" to User "z"`).
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    binding_kind: &'static str,
    binding: String,
    role_ref: RoleRef,
    subject: String,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} of {} {:?} to {}",
            self.binding_kind, self.binding, self.role_ref.kind, self.role_ref.name, self.subject
        )
    }
}

fn describe_subject(subject: &Subject, binding_namespace: &str) -> String {
    match subject.kind.as_str() {
        "ServiceAccount" => {
            let namespace = subject_namespace(subject, binding_namespace);
            format!(
                "{} {:?}",
                subject.kind,
                format!("{}/{namespace}", subject.name)
            )
        }
        _ => format!("{} {:?}", subject.kind, subject.name),
    }
}

/// A binding as the index keeps it: where it points and who it names.
#[derive(Debug)]
struct Grant {
    source: Source,
    namespace: String,
    /// The reason an allowed request records (`RBAC: allowed by <source>`),
    /// formatted once here rather than on every request.
    allowed: String,
}

/// The subjects of some bindings, looked up by user, group or service account.
#[derive(Debug, Default)]
struct Bindings {
    users: HashMap<String, Vec<Arc<Grant>>>,
    groups: HashMap<String, Vec<Arc<Grant>>>,
}

impl Bindings {
    fn add(
        &mut self,
        kind: &'static str,
        name: &str,
        namespace: &str,
        role_ref: &RoleRef,
        subjects: &[Subject],
    ) {
        for subject in subjects {
            let source = Source {
                binding_kind: kind,
                binding: if namespace.is_empty() {
                    name.to_string()
                } else {
                    format!("{name}/{namespace}")
                },
                role_ref: role_ref.clone(),
                subject: describe_subject(subject, namespace),
            };
            let grant = Arc::new(Grant {
                allowed: format!("RBAC: allowed by {source}"),
                source,
                namespace: namespace.to_string(),
            });
            let key = match subject.kind.as_str() {
                "User" => (&mut self.users, subject.name.clone()),
                "Group" => (&mut self.groups, subject.name.clone()),
                "ServiceAccount" => {
                    let sa_namespace = subject_namespace(subject, namespace);
                    if sa_namespace.is_empty() {
                        continue;
                    }
                    (
                        &mut self.users,
                        service_account_user(sa_namespace, &subject.name),
                    )
                }
                _ => continue,
            };
            key.0.entry(key.1).or_default().push(grant);
        }
    }

    /// The grants naming `user` (first match per binding, in binding order).
    fn for_user<'a>(&'a self, user: &User<'_>, out: &mut Vec<&'a Grant>) {
        let start = out.len();
        let by_user = self.users.get(user.name).into_iter().flatten();
        let by_group = user
            .groups
            .iter()
            .filter_map(|g| self.groups.get(g))
            .flatten();
        for grant in by_user.chain(by_group) {
            // One binding naming a user twice (as a User and by a Group) grants once.
            if !out[start..]
                .iter()
                .any(|g| g.source.binding == grant.source.binding)
            {
                out.push(grant);
            }
        }
    }
}

/// Roles and bindings, indexed for deciding: the RBAC policy at one moment.
#[derive(Debug, Default)]
pub struct Policy {
    cluster_roles: HashMap<String, Arc<[PolicyRule]>>,
    roles: HashMap<(String, String), Arc<[PolicyRule]>>,
    cluster_bindings: Bindings,
    namespace_bindings: HashMap<String, Bindings>,
}

/// A decision and kube's reason for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed: `RBAC: allowed by <source>`.
    Allow(String),
    /// No rule allows it; the reason names any roles that could not be
    /// found (empty when there were none).
    Deny(String),
}

/// The rules a user holds in a namespace, and the references that did not resolve.
#[derive(Debug, Default)]
pub struct Rules {
    /// Every rule, in binding order (cluster bindings first).
    pub rules: Vec<PolicyRule>,
    /// Why some rules could not be read (a binding naming a missing role).
    pub errors: Vec<String>,
}

impl Policy {
    /// Adds a ClusterRole.
    pub fn add_cluster_role(&mut self, role: ClusterRole) {
        let name = role.metadata.name.unwrap_or_default();
        self.cluster_roles
            .insert(name, role.rules.unwrap_or_default().into());
    }

    /// Adds a Role.
    pub fn add_role(&mut self, role: Role) {
        let key = (
            role.metadata.namespace.unwrap_or_default(),
            role.metadata.name.unwrap_or_default(),
        );
        self.roles
            .insert(key, role.rules.unwrap_or_default().into());
    }

    /// Adds a ClusterRoleBinding (only ClusterRoles may be its role).
    pub fn add_cluster_binding(&mut self, binding: ClusterRoleBinding) {
        let name = binding.metadata.name.unwrap_or_default();
        let subjects = binding.subjects.unwrap_or_default();
        self.cluster_bindings.add(
            "ClusterRoleBinding",
            &name,
            "",
            &binding.role_ref,
            &subjects,
        );
    }

    /// Adds a RoleBinding.
    pub fn add_binding(&mut self, binding: RoleBinding) {
        let name = binding.metadata.name.unwrap_or_default();
        let namespace = binding.metadata.namespace.unwrap_or_default();
        let subjects = binding.subjects.unwrap_or_default();
        self.namespace_bindings
            .entry(namespace.clone())
            .or_default()
            .add(
                "RoleBinding",
                &name,
                &namespace,
                &binding.role_ref,
                &subjects,
            );
    }

    fn grants<'a>(&'a self, user: &User<'_>, namespace: &str) -> Vec<&'a Grant> {
        let mut grants = Vec::new();
        self.cluster_bindings.for_user(user, &mut grants);
        if !namespace.is_empty() {
            if let Some(bindings) = self.namespace_bindings.get(namespace) {
                bindings.for_user(user, &mut grants);
            }
        }
        grants
    }

    /// The rules a role reference resolves to from a binding in
    /// `namespace` (`""` for a cluster binding), or kube's not-found text.
    pub fn role_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<Arc<[PolicyRule]>, String> {
        let found = match role_ref.kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(&role_ref.name),
            "Role" if !namespace.is_empty() => self
                .roles
                .get(&(namespace.to_string(), role_ref.name.clone())),
            "Role" => None,
            other => return Err(format!("unsupported role reference kind: {other:?}")),
        };
        found.cloned().ok_or_else(|| {
            format!(
                "{}.{GROUP} {:?} not found",
                role_ref.kind.to_ascii_lowercase(),
                role_ref.name
            )
        })
    }

    /// Whether `user` may do what `attrs` asks (kube's RBAC authorizer).
    pub fn decide(&self, user: &User<'_>, attrs: &Attributes<'_>) -> Decision {
        match self.allowing_grant(user, attrs) {
            Ok(grant) => Decision::Allow(grant.allowed.clone()),
            Err(errors) => Decision::Deny(denial_reason(&errors)),
        }
    }

    /// The first grant whose rules allow the request, or the role
    /// references that did not resolve on the way.
    fn allowing_grant(
        &self,
        user: &User<'_>,
        attrs: &Attributes<'_>,
    ) -> Result<&Grant, Vec<String>> {
        let mut errors = Vec::new();
        for grant in self.grants(user, attrs.namespace) {
            match self.role_rules(&grant.source.role_ref, &grant.namespace) {
                Ok(rules) => {
                    if rules.iter().any(|rule| rule_allows(rule, attrs)) {
                        return Ok(grant);
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        Err(errors)
    }

    /// Every rule `user` holds in `namespace` (cluster-wide ones included).
    pub fn rules_for(&self, user: &User<'_>, namespace: &str) -> Rules {
        let mut out = Rules::default();
        for grant in self.grants(user, namespace) {
            match self.role_rules(&grant.source.role_ref, &grant.namespace) {
                Ok(rules) => out.rules.extend(rules.iter().cloned()),
                Err(e) => out.errors.push(e),
            }
        }
        out
    }
}

/// kube's reason for a denial: the role references that did not resolve.
fn denial_reason(errors: &[String]) -> String {
    match errors {
        [] => String::new(),
        [one] => format!("RBAC: {one}"),
        many => format!("RBAC: [{}]", many.join(", ")),
    }
}

/// Breaks a rule into rules of one group, resource, verb and name each (kube's `BreakdownRule`).
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| Some(vec![s.clone()]);
    let mut out = Vec::new();
    for group in items(&rule.api_groups) {
        for resource in items(&rule.resources) {
            for verb in &rule.verbs {
                let names = items(&rule.resource_names);
                let names: Vec<Option<&String>> = if names.is_empty() {
                    vec![None]
                } else {
                    names.iter().map(Some).collect()
                };
                for name in names {
                    out.push(PolicyRule {
                        api_groups: one(group),
                        resources: one(resource),
                        verbs: vec![verb.clone()],
                        resource_names: name.and_then(one),
                        non_resource_urls: None,
                    });
                }
            }
        }
    }
    for url in items(&rule.non_resource_urls) {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: vec![verb.clone()],
                ..Default::default()
            });
        }
    }
    out
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| has(set, w))
}

fn resources_cover(owner: &[String], wanted: &[String]) -> bool {
    has(owner, "*")
        || wanted.iter().all(|path| {
            has(owner, path)
                || path
                    .split_once('/')
                    .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
        })
}

fn urls_cover(owner: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|path| {
        owner.iter().any(|o| {
            o == path
                || o.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
        })
    })
}

/// Whether an owner rule covers a rule of one verb, resource and name (kube's `ruleCovers`).
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = items(&owner.api_groups);
    let groups = has(groups, "*") || has_all(groups, items(&sub.api_groups));
    let resources = resources_cover(items(&owner.resources), items(&sub.resources));
    let urls = urls_cover(
        items(&owner.non_resource_urls),
        items(&sub.non_resource_urls),
    );
    let owner_names = items(&owner.resource_names);
    let names = owner_names.is_empty() || {
        let wanted = items(&sub.resource_names);
        !wanted.is_empty() && has_all(owner_names, wanted)
    };
    verbs && groups && resources && urls && names
}

/// The parts of `wanted` that `owner` does not cover, broken down and then
/// compacted by resource; empty when `owner` covers them all (kube's `Covers`).
pub fn uncovered(owner: &[PolicyRule], wanted: &[PolicyRule]) -> Vec<PolicyRule> {
    let missing: Vec<PolicyRule> = wanted
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    compact(missing)
}

/// Merges rules of one group and one resource that differ only by verb (kube's `CompactRules`).
fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::with_capacity(rules.len());
    let simple = |r: &PolicyRule| {
        items(&r.resource_names).is_empty()
            && items(&r.non_resource_urls).is_empty()
            && items(&r.api_groups).len() == 1
            && items(&r.resources).len() == 1
    };
    for rule in rules {
        if simple(&rule) {
            if let Some(existing) = out.iter_mut().find(|e| {
                simple(e) && e.api_groups == rule.api_groups && e.resources == rule.resources
            }) {
                existing.verbs.extend(rule.verbs);
                continue;
            }
        }
        out.push(rule);
    }
    out
}

/// A rule as kube prints it in escalation errors:
/// `{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let quoted = |list: &[String]| {
        let parts: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
        format!("[{}]", parts.join(" "))
    };
    let mut parts = Vec::new();
    for (label, list) in [
        ("APIGroups", items(&rule.api_groups)),
        ("Resources", items(&rule.resources)),
        ("NonResourceURLs", items(&rule.non_resource_urls)),
        ("ResourceNames", items(&rule.resource_names)),
        ("Verbs", rule.verbs.as_slice()),
    ] {
        if !list.is_empty() {
            parts.push(format!("{label}:{}", quoted(list)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// kube's escalation refusal: what `user` tried to grant and does not hold.
pub fn escalation_message(user: &User<'_>, missing: &[PolicyRule], errors: &[String]) -> String {
    let groups: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
    let mut lines: Vec<String> = missing.iter().map(compact_string).collect();
    lines.sort();
    lines.dedup();
    let mut message = format!(
        "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        groups.join(" "),
        lines.join("\n")
    );
    if !errors.is_empty() {
        message.push_str(&format!("; resolution errors: [{}]", errors.join(", ")));
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(value: serde_json::Value) -> PolicyRule {
        serde_json::from_value(value).unwrap()
    }

    fn get(
        resource: &'static str,
        subresource: &'static str,
        name: &'static str,
    ) -> Attributes<'static> {
        Attributes {
            verb: "get",
            resource_request: true,
            resource,
            subresource,
            name,
            namespace: "ns",
            ..Default::default()
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let pods = rule(json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}));
        assert!(rule_allows(&pods, &get("pods", "", "a")));
        assert!(
            !rule_allows(&pods, &get("pods", "log", "a")),
            "a subresource is its own resource"
        );
        assert!(!rule_allows(
            &pods,
            &Attributes {
                verb: "list",
                ..get("pods", "", "")
            }
        ));
        let logs = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*/log"]}));
        assert!(rule_allows(&logs, &get("pods", "log", "a")));
        assert!(!rule_allows(&logs, &get("pods", "", "a")));
        let named = rule(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]}),
        );
        assert!(rule_allows(&named, &get("pods", "", "a")));
        assert!(!rule_allows(&named, &get("pods", "", "b")));
        assert!(
            !rule_allows(&named, &get("pods", "", "")),
            "a list has no name to match"
        );
        let apps = rule(json!({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]}));
        assert!(!rule_allows(&apps, &get("pods", "", "a")));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_prefix() {
        let urls = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}));
        let at = |path| Attributes {
            verb: "get",
            path,
            ..Default::default()
        };
        assert!(rule_allows(&urls, &at("/healthz")));
        assert!(rule_allows(&urls, &at("/apis/apps/v1")));
        assert!(!rule_allows(&urls, &at("/healthz/etcd")));
        assert!(
            !rule_allows(&urls, &get("pods", "", "")),
            "a URL rule grants no resource"
        );
    }

    fn policy() -> Policy {
        let mut policy = Policy::default();
        policy.add_cluster_role(serde_json::from_value(json!({
            "metadata": {"name": "view"},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]
        })).unwrap());
        policy.add_role(
            serde_json::from_value(json!({
                "metadata": {"name": "secrets", "namespace": "ns"},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]
            }))
            .unwrap(),
        );
        policy.add_binding(
            serde_json::from_value(json!({
                "metadata": {"name": "bob-view", "namespace": "ns"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "ServiceAccount", "name": "bob"}]
            }))
            .unwrap(),
        );
        policy.add_binding(
            serde_json::from_value(json!({
                "metadata": {"name": "team-secrets", "namespace": "ns"},
                "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "secrets"},
                "subjects": [{"kind": "Group", "apiGroup": GROUP, "name": "team"}]
            }))
            .unwrap(),
        );
        policy.add_cluster_binding(
            serde_json::from_value(json!({
                "metadata": {"name": "dangling"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "gone"},
                "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "carol"}]
            }))
            .unwrap(),
        );
        policy
    }

    #[test]
    fn bindings_grant_their_roles_to_their_subjects_in_their_namespace() {
        let policy = policy();
        let bob = User {
            name: "system:serviceaccount:ns:bob",
            groups: &[],
        };
        let cm = Attributes {
            verb: "list",
            resource_request: true,
            resource: "configmaps",
            namespace: "ns",
            ..Default::default()
        };
        assert_eq!(
            policy.decide(&bob, &cm),
            Decision::Allow(
                "RBAC: allowed by RoleBinding \"bob-view/ns\" of ClusterRole \"view\" to ServiceAccount \"bob/ns\"".into()
            )
        );
        let elsewhere = Attributes {
            namespace: "other",
            ..cm
        };
        assert_eq!(
            policy.decide(&bob, &elsewhere),
            Decision::Deny(String::new())
        );
        let team = ["team".to_string()];
        let member = User {
            name: "dave",
            groups: &team,
        };
        assert!(matches!(
            policy.decide(&member, &get("secrets", "", "x")),
            Decision::Allow(_)
        ));
        assert!(matches!(policy.decide(&member, &cm), Decision::Deny(_)));
        let carol = User {
            name: "carol",
            groups: &[],
        };
        assert_eq!(
            policy.decide(&carol, &cm),
            Decision::Deny("RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found".into())
        );
    }

    #[test]
    fn coverage_finds_what_an_owner_lacks_and_prints_it_like_kube() {
        let owner = [rule(
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps", "pods/*"]}),
        )];
        let wanted = [rule(
            json!({"verbs": ["get", "list", "delete"], "apiGroups": [""], "resources": ["configmaps", "secrets"]}),
        )];
        let missing = uncovered(&owner, &wanted);
        let printed: Vec<String> = missing.iter().map(compact_string).collect();
        assert_eq!(
            printed,
            [
                "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}",
                "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\" \"delete\"]}",
            ]
        );
        let star = [rule(
            json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
        )];
        assert!(uncovered(&star, &wanted).is_empty());
        let named = [rule(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]}),
        )];
        let all_pods = [rule(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}),
        )];
        assert_eq!(
            uncovered(&named, &all_pods).len(),
            1,
            "a name does not cover every name"
        );
        let user = User {
            name: "bob",
            groups: &["system:authenticated".to_string()],
        };
        assert_eq!(
            escalation_message(&user, &missing[..1], &[]),
            "user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}"
        );
    }
}
