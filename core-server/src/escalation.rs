//! RBAC escalation prevention, kube's: a Role or ClusterRole may only grant
//! what its writer holds, unless they may `escalate` it; a binding may only
//! bind a role whose permissions its writer holds, unless they may `bind` it.
//! `system:masters` may always.

use std::sync::{Arc, OnceLock};

use apimachinery::error::{Error, Reason, Result};
use apimachinery::rbac::{self, Decision, GROUP, User};
use generic_server::admission::{AdmissionPlugin, Attributes, Operation};
use generic_server::filters::rbac::{Rbac, SUPERUSERS};
use generic_server::request::UserInfo;
use generic_server::request_info::RequestInfo;
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use serde_json::Value;

/// Checks writes of the four RBAC resources against their writer's rights.
pub struct Escalation {
    /// The policy, set once the RBAC stores exist (writes before then are refused).
    pub rbac: Arc<OnceLock<Arc<Rbac>>>,
}

/// Whether `user` may `verb` the RBAC `resource` named `name` in `namespace`.
fn may(
    rbac: &Rbac,
    user: &UserInfo,
    verb: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    let info = RequestInfo {
        is_resource_request: true,
        verb: verb.into(),
        api_group: GROUP.into(),
        api_version: "v1".into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..Default::default()
    };
    matches!(rbac.decide(user, &info, ""), Decision::Allow(_))
}

fn forbidden(attrs: &Attributes<'_>, why: impl std::fmt::Display) -> Error {
    Error::new(
        Reason::Forbidden,
        format!(
            "{}.{GROUP} {:?} is forbidden: {why}",
            attrs.resource.plural, attrs.name
        ),
    )
}

/// Refuses rules beyond what `user` holds in `namespace`.
fn confirm_no_escalation(
    rbac: &Rbac,
    attrs: &Attributes<'_>,
    namespace: &str,
    wanted: &[PolicyRule],
) -> Result<()> {
    let held = rbac.rules_for(attrs.user, namespace);
    let missing = rbac::uncovered(&held.rules, wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let user = User {
        name: &attrs.user.name,
        groups: &attrs.user.groups,
    };
    Err(forbidden(
        attrs,
        rbac::escalation_message(&user, &missing, &held.errors),
    ))
}

fn rules(obj: &Value) -> Vec<PolicyRule> {
    serde_json::from_value(obj["rules"].clone()).unwrap_or_default()
}

#[async_trait::async_trait]
impl AdmissionPlugin for Escalation {
    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        if attrs.resource.group != GROUP || attrs.operation == Operation::Delete {
            return Ok(());
        }
        let Some(obj) = obj else { return Ok(()) };
        if attrs.user.in_group(SUPERUSERS) {
            return Ok(());
        }
        let Some(rbac) = self.rbac.get() else {
            return Err(forbidden(attrs, "the RBAC policy is not loaded yet"));
        };
        let plural = attrs.resource.plural.as_str();
        match plural {
            "roles" | "clusterroles" => {
                let wanted = rules(obj);
                if attrs.old.is_some_and(|old| rules(old) == wanted) {
                    return Ok(());
                }
                if may(
                    rbac,
                    attrs.user,
                    "escalate",
                    plural,
                    attrs.namespace,
                    attrs.name,
                ) {
                    return Ok(());
                }
                confirm_no_escalation(rbac, attrs, attrs.namespace, &wanted)
            }
            "rolebindings" | "clusterrolebindings" => {
                let role_ref: RoleRef =
                    serde_json::from_value(obj["roleRef"].clone()).unwrap_or_default();
                let role_resource = match role_ref.kind.as_str() {
                    "Role" => "roles",
                    _ => "clusterroles",
                };
                // A ClusterRole bound in a namespace is asked about there, as kube does.
                if may(
                    rbac,
                    attrs.user,
                    "bind",
                    role_resource,
                    attrs.namespace,
                    &role_ref.name,
                ) {
                    return Ok(());
                }
                let wanted = rbac
                    .policy()
                    .role_rules(&role_ref, attrs.namespace)
                    .map_err(|e| forbidden(attrs, e))?;
                confirm_no_escalation(rbac, attrs, attrs.namespace, &wanted)
            }
            _ => Ok(()),
        }
    }
}
