//! rbac.authorization.k8s.io/v1 Roles, ClusterRoles and their bindings:
//! names are path segments, rules need verbs (and groups and resources, or
//! non-resource URLs), subjects are Users, Groups or ServiceAccounts, and a
//! binding's roleRef never changes.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use apimachinery::validation::{self, NameRule};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, has, is_set, items, text};

/// The RBAC API group, which User and Group subjects and role refs name.
const GROUP: &str = "rbac.authorization.k8s.io";

/// The rules of Roles (`namespaced`) and ClusterRoles.
pub struct RoleStrategy {
    /// Whether these are namespaced Roles (no non-resource URLs).
    pub namespaced: bool,
}

/// The rules of RoleBindings (`namespaced`) and ClusterRoleBindings.
pub struct RoleBindingStrategy {
    /// Whether these are namespaced RoleBindings (which may refer to Roles).
    pub namespaced: bool,
}

fn validate_rule(rule: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if items(rule, "/verbs").is_empty() {
        errs.push(FieldError::required(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = items(rule, "/nonResourceURLs");
    if !urls.is_empty() {
        if namespaced {
            errs.push(FieldError::invalid(
                format!("{path}.nonResourceURLs"),
                json!(urls),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if has(rule, "/apiGroups") || has(rule, "/resources") || has(rule, "/resourceNames") {
            errs.push(FieldError::invalid(
                format!("{path}.nonResourceURLs"),
                json!(urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if items(rule, "/apiGroups").is_empty() {
        errs.push(FieldError::required(
            format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if items(rule, "/resources").is_empty() {
        errs.push(FieldError::required(
            format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errs
}

fn validate_subject(subject: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (name, group) = (text(subject, "/name"), text(subject, "/apiGroup"));
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    match text(subject, "/kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                errs.extend(
                    validation::dns1123_subdomain(name)
                        .into_iter()
                        .map(|m| FieldError::invalid(format!("{path}.name"), name, m)),
                );
            }
            if !group.is_empty() {
                errs.push(FieldError::not_supported(
                    format!("{path}.apiGroup"),
                    group,
                    &[""],
                ));
            }
            if !namespaced && text(subject, "/namespace").is_empty() {
                errs.push(FieldError::required(format!("{path}.namespace"), ""));
            }
        }
        "User" | "Group" if group != GROUP => errs.push(FieldError::not_supported(
            format!("{path}.apiGroup"),
            group,
            &[GROUP],
        )),
        "User" | "Group" => {}
        other => errs.push(FieldError::not_supported(
            format!("{path}.kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
    errs
}

impl Strategy for RoleStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs: Vec<FieldError> = items(obj, "/rules")
            .iter()
            .enumerate()
            .flat_map(|(i, r)| validate_rule(r, self.namespaced, &format!("rules[{i}]")))
            .collect();
        if !self.namespaced && is_set(obj, "/aggregationRule") {
            let selectors = items(obj, "/aggregationRule/clusterRoleSelectors");
            if selectors.is_empty() {
                errs.push(FieldError::required(
                    "aggregationRule.clusterRoleSelectors",
                    "at least one clusterRoleSelector required if aggregationRule is non-nil",
                ));
            }
            for (i, selector) in selectors.iter().enumerate() {
                errs.extend(fields::label_selector(
                    selector,
                    &format!("aggregationRule.clusterRoleSelectors[{i}]"),
                ));
            }
        }
        errs
    }
}

impl Strategy for RoleBindingStrategy {
    fn defaults(&self, obj: &mut Value) {
        default(obj, "/roleRef/apiGroup", json!(GROUP));
        fields::each_mut(obj, "/subjects", |s| {
            if matches!(text(s, "/kind"), "User" | "Group") {
                default(s, "/apiGroup", json!(GROUP));
            }
        });
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let group = text(obj, "/roleRef/apiGroup");
        if group != GROUP {
            errs.push(FieldError::not_supported(
                "roleRef.apiGroup",
                group,
                &[GROUP],
            ));
        }
        let kind = text(obj, "/roleRef/kind");
        let kinds: &[&str] = if self.namespaced {
            &["Role", "ClusterRole"]
        } else {
            &["ClusterRole"]
        };
        if !kinds.contains(&kind) {
            errs.push(FieldError::not_supported("roleRef.kind", kind, kinds));
        }
        let name = text(obj, "/roleRef/name");
        if name.is_empty() {
            errs.push(FieldError::required("roleRef.name", ""));
        } else {
            errs.extend(
                validation::path_segment_name(name)
                    .into_iter()
                    .map(|m| FieldError::invalid("roleRef.name", name, m)),
            );
        }
        for (i, subject) in items(obj, "/subjects").iter().enumerate() {
            errs.extend(validate_subject(
                subject,
                self.namespaced,
                &format!("subjects[{i}]"),
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("roleRef") != old.get("roleRef") {
            errs.push(FieldError::invalid(
                "roleRef",
                fields::value(new, "/roleRef"),
                "cannot change roleRef",
            ));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new("Role", "string", "Role references the Role being bound to."),
            table::age_column(),
            Column::new("Users", "string", "Users in the roleBinding").wide(),
            Column::new("Groups", "string", "Groups in the roleBinding").wide(),
            Column::new(
                "ServiceAccounts",
                "string",
                "ServiceAccounts in the roleBinding",
            )
            .wide(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let subjects = items(obj, "/subjects");
        let of_kind = |kind: &str| {
            subjects
                .iter()
                .filter(|s| text(s, "/kind") == kind)
                .map(|s| {
                    if kind == "ServiceAccount" {
                        format!("{}/{}", text(s, "/namespace"), text(s, "/name"))
                    } else {
                        text(s, "/name").to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        vec![
            table::name_cell(obj),
            json!(format!(
                "{}/{}",
                text(obj, "/roleRef/kind"),
                text(obj, "/roleRef/name")
            )),
            table::age_cell(obj),
            json!(of_kind("User")),
            json!(of_kind("Group")),
            json!(of_kind("ServiceAccount")),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_need_verbs_and_roles_print_creation() {
        let role = RoleStrategy { namespaced: true };
        let errs: Vec<String> = role
            .validate(&json!({"rules": [{"apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs[0],
            "rules[0].verbs: Required value: verbs must contain at least one value"
        );
        assert_eq!(
            errs[1],
            "rules[1].nonResourceURLs: Invalid value: [\"/healthz\"]: namespaced rules cannot apply to non-resource URLs"
        );
        assert!(
            RoleStrategy { namespaced: false }
                .validate(&json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}))
                .is_empty()
        );
        let cells = role.cells(
            &json!({"metadata": {"name": "r", "creationTimestamp": "2024-01-01T00:00:00Z"}}),
        );
        assert_eq!(cells[1], "2024-01-01T00:00:00Z");
        assert_eq!(role.name_rule(), NameRule::PathSegment);
    }

    #[test]
    fn bindings_default_groups_and_keep_role_ref() {
        let binding = RoleBindingStrategy { namespaced: false };
        let mut crb = json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "robot", "namespace": "ci"}]});
        binding.defaults(&mut crb);
        assert_eq!(crb["roleRef"]["apiGroup"], GROUP);
        assert_eq!(crb["subjects"][0]["apiGroup"], GROUP);
        assert!(crb["subjects"][1].get("apiGroup").is_none());
        assert!(
            binding.validate(&crb).is_empty(),
            "{:?}",
            binding.validate(&crb)
        );
        let mut changed = crb.clone();
        changed["roleRef"]["name"] = json!("edit");
        assert_eq!(
            binding.validate_update(&changed, &crb)[0].to_string(),
            "roleRef: Invalid value: {\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"edit\"}: cannot change roleRef"
        );
        let bad = json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"}, "subjects": [{"kind": "Robot", "name": "x"}]});
        let errs: Vec<String> = binding
            .validate(&bad)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs[0],
            "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\""
        );
        assert_eq!(
            errs[1],
            "subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\""
        );
        let cells = binding.cells(&crb);
        assert_eq!(cells[1], "ClusterRole/view");
        assert_eq!(cells[3], "alice");
        assert_eq!(cells[5], "ci/robot");
    }
}
