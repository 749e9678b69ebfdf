//! The ClusterRole aggregation controller, kube's: a ClusterRole with an
//! `aggregationRule` holds the rules of every ClusterRole its selectors
//! match, in name order, each rule once. A CRD author's role labelled
//! `rbac.authorization.k8s.io/aggregate-to-view: "true"` so extends `view`.

use std::collections::BTreeMap;
use std::time::Duration;

use actix::prelude::*;
use apimachinery::label_selector::LabelSelector;
use generic_server::informer::Change;
use generic_server::loopback::Loopback;
use serde_json::Value;

/// How long changes gather before the aggregated roles are recomputed.
const SETTLE: Duration = Duration::from_millis(50);

/// Keeps aggregated ClusterRoles' rules current.
pub struct AggregationController {
    client: Loopback,
    roles: BTreeMap<String, Value>,
    scheduled: bool,
}

impl AggregationController {
    /// A controller acting through `client`.
    pub fn new(client: Loopback) -> Self {
        AggregationController {
            client,
            roles: BTreeMap::new(),
            scheduled: false,
        }
    }
}

impl Actor for AggregationController {
    type Context = Context<Self>;
}

/// A ClusterRole changed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync(pub Change);

impl Handler<Sync> for AggregationController {
    type Result = ();

    fn handle(&mut self, Sync(change): Sync, ctx: &mut Context<Self>) {
        let (role, present) = match change {
            Change::Present(role) => (role, true),
            Change::Deleted(role) => (role, false),
        };
        let Some(name) = role["metadata"]["name"].as_str().map(str::to_string) else {
            return;
        };
        if present {
            self.roles.insert(name, role);
        } else {
            self.roles.remove(&name);
        }
        if !self.scheduled {
            self.scheduled = true;
            ctx.run_later(SETTLE, |this, _| {
                this.scheduled = false;
                for (name, update) in aggregated(&this.roles) {
                    let client = this.client.clone();
                    tokio::spawn(async move {
                        let path = format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}");
                        // A conflict means a newer state is on its way to us: it recomputes.
                        if let Err(e) = client.update(&path, &update).await {
                            tracing::debug!(role = %name, error = %e, "aggregating a ClusterRole failed; waiting for the next change");
                        }
                    });
                }
            });
        }
    }
}

/// The aggregated roles whose rules are not what their selectors gather,
/// each with its rules replaced.
pub fn aggregated(roles: &BTreeMap<String, Value>) -> Vec<(String, Value)> {
    let mut updates = Vec::new();
    for (name, role) in roles {
        let Some(selectors) = role["aggregationRule"]["clusterRoleSelectors"].as_array() else {
            continue;
        };
        let selectors: Vec<LabelSelector> = selectors
            .iter()
            .filter_map(|s| LabelSelector::from_label_selector_object(s).ok())
            .collect();
        let mut rules: Vec<Value> = Vec::new();
        for (other, candidate) in roles {
            if other == name {
                continue;
            }
            let labels = candidate["metadata"]["labels"].as_object();
            if !selectors.iter().any(|s| s.matches(labels)) {
                continue;
            }
            for rule in candidate["rules"].as_array().into_iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
        let current = role["rules"].as_array().cloned().unwrap_or_default();
        if current != rules {
            let mut update = role.clone();
            update["rules"] = Value::Array(rules);
            updates.push((name.clone(), update));
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roles(list: Vec<Value>) -> BTreeMap<String, Value> {
        list.into_iter()
            .map(|r| (r["metadata"]["name"].as_str().unwrap().to_string(), r))
            .collect()
    }

    #[test]
    fn an_aggregated_role_gathers_the_rules_its_selectors_match() {
        let view = json!({"metadata": {"name": "view"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]}});
        let widgets = json!({"metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]}]});
        let base = json!({"metadata": {"name": "a-base", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                      {"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]}]});
        let unrelated = json!({"metadata": {"name": "other"}, "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]});
        let all = roles(vec![view, widgets, base, unrelated]);
        let updates = aggregated(&all);
        assert_eq!(updates.len(), 1);
        let (name, update) = &updates[0];
        assert_eq!(name, "view");
        assert_eq!(
            update["rules"],
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                   {"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]}]),
            "name order, each rule once"
        );
        let mut current = all.clone();
        current.insert("view".into(), update.clone());
        assert!(
            aggregated(&current).is_empty(),
            "nothing to do once current"
        );
    }
}
