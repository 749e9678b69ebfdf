//! kube's Priority admission: a pod created gets the priority and
//! preemption policy of its PriorityClass (of the `globalDefault` class
//! when it names none, else priority 0), a class that does not exist or a
//! priority that differs from the class's is refused, and an update keeps
//! what create set. Only one PriorityClass may be the global default.

use std::sync::Arc;

use apimachinery::error::{Error, Result};
use generic_server::admission::{AdmissionPlugin, Attributes, Operation, cached, forbidden};
use generic_server::storage::cacher::{Cacher, ResourceCache};
use serde_json::{Value, json};

use crate::resources::fields::{int, is_set, text};

/// The group of PriorityClasses.
const GROUP: &str = "scheduling.k8s.io";
/// The priority of a pod when no class is the global default.
const DEFAULT_PRIORITY: i64 = 0;
/// The preemption policy of a pod when no class is the global default.
const DEFAULT_PREEMPTION_POLICY: &str = "PreemptLowerPriority";

/// kube's Priority admission plugin, reading PriorityClasses from the watch cache.
pub struct Priority {
    cacher: Arc<Cacher>,
    classes: Arc<ResourceCache>,
}

/// What a pod takes from its class.
#[derive(Debug, PartialEq)]
struct Resolved {
    /// The class's name (empty when none is the default).
    class: String,
    value: i64,
    policy: Option<String>,
}

impl Resolved {
    fn of(class: &Value) -> Resolved {
        Resolved {
            class: text(class, "/metadata/name").to_string(),
            value: int(class, "/value").unwrap_or(DEFAULT_PRIORITY),
            policy: class
                .get("preemptionPolicy")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }
}

impl Priority {
    /// Follows PriorityClasses through the server's cache.
    pub async fn new(cacher: Arc<Cacher>, etcd_root: &str) -> Result<Self> {
        let classes = super::watch(&cacher, etcd_root, GROUP, "priorityclasses").await?;
        Ok(Priority { cacher, classes })
    }

    /// The global default class; if a race left several, the lowest, as kube picks.
    fn default_class(&self) -> Option<Value> {
        lowest_default(
            self.classes
                .snapshot(self.classes.prefix(), 0)
                .objects
                .iter()
                .map(|c| c.value()),
        )
    }

    /// The priority a pod created naming `class` (or none) gets.
    async fn resolve(&self, attrs: &Attributes<'_>, class: &str) -> Result<Resolved> {
        if class.is_empty() {
            return Ok(self.default_class().map_or_else(
                || Resolved {
                    class: String::new(),
                    value: DEFAULT_PRIORITY,
                    policy: Some(DEFAULT_PREEMPTION_POLICY.into()),
                },
                |c| Resolved::of(&c),
            ));
        }
        match cached(&self.cacher, &self.classes, class).await {
            Ok(Some(found)) => Ok(Resolved::of(&found.value())),
            Ok(None) => Err(forbidden(
                attrs,
                &format!("no PriorityClass with name {class} was found"),
            )),
            Err(e) => Err(Error::internal(format!(
                "failed to get PriorityClass with name {class}: {e}"
            ))),
        }
    }

    async fn admit_created_pod(&self, attrs: &Attributes<'_>, spec: &mut Value) -> Result<()> {
        let resolved = self
            .resolve(attrs, text(spec, "/priorityClassName"))
            .await?;
        if !resolved.class.is_empty() {
            spec["priorityClassName"] = json!(resolved.class);
        }
        if is_set(spec, "/priority") {
            let given = &spec["priority"];
            if given.as_i64() != Some(resolved.value) {
                return Err(forbidden(
                    attrs,
                    &format!(
                        "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {} from the given PriorityClass name",
                        resolved.value
                    ),
                ));
            }
        }
        spec["priority"] = json!(resolved.value);
        if let Some(policy) = resolved.policy {
            let given = text(spec, "/preemptionPolicy");
            if is_set(spec, "/preemptionPolicy") && given != policy {
                return Err(forbidden(
                    attrs,
                    &format!(
                        "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
                    ),
                ));
            }
            spec["preemptionPolicy"] = json!(policy);
        }
        Ok(())
    }
}

/// The `globalDefault` class of lowest value among `classes`.
fn lowest_default(classes: impl Iterator<Item = Value>) -> Option<Value> {
    classes
        .filter(|c| c.get("globalDefault") == Some(&Value::Bool(true)))
        .min_by_key(|c| int(c, "/value").unwrap_or(DEFAULT_PRIORITY))
}

/// An update keeps the priority and preemption policy create set, unless it names them.
fn keep_created(spec: &mut Value, old: &Value) {
    for field in ["priority", "preemptionPolicy"] {
        if !is_set(spec, &format!("/{field}"))
            && let Some(kept) = old
                .pointer(&format!("/spec/{field}"))
                .filter(|v| !v.is_null())
        {
            spec[field] = kept.clone();
        }
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for Priority {
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<()> {
        if !super::writes(attrs, "", "pods") {
            return Ok(());
        }
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return Ok(());
        };
        match (attrs.operation, attrs.old) {
            (Operation::Create, _) => self.admit_created_pod(attrs, spec).await,
            (Operation::Update, Some(old)) => {
                keep_created(spec, old);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        let Some(class) = obj else { return Ok(()) };
        if !super::writes(attrs, GROUP, "priorityclasses")
            || attrs.operation == Operation::Delete
            || class.get("globalDefault") != Some(&Value::Bool(true))
        {
            return Ok(());
        }
        // Another default written a moment ago counts too.
        self.cacher.wait_fresh().await?;
        match self.default_class() {
            Some(current)
                if attrs.operation == Operation::Create
                    || text(&current, "/metadata/name") != attrs.name =>
            {
                Err(forbidden(
                    attrs,
                    &format!(
                        "PriorityClass {} is already marked as default. Only one default can exist",
                        text(&current, "/metadata/name")
                    ),
                ))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_default_class_wins() {
        let classes = vec![
            json!({"metadata": {"name": "high"}, "value": 1000, "globalDefault": true}),
            json!({"metadata": {"name": "plain"}, "value": 1}),
            json!({"metadata": {"name": "low"}, "value": 10, "globalDefault": true}),
        ];
        let found = lowest_default(classes.into_iter()).map(|c| Resolved::of(&c));
        assert_eq!(
            found,
            Some(Resolved {
                class: "low".into(),
                value: 10,
                policy: None
            })
        );
        assert_eq!(lowest_default(std::iter::empty()), None);
    }

    #[test]
    fn an_update_keeps_what_create_set() {
        let old = json!({"spec": {"priority": 1000, "preemptionPolicy": "Never"}});
        let mut spec = json!({"containers": []});
        keep_created(&mut spec, &old);
        assert_eq!(spec["priority"], 1000);
        assert_eq!(spec["preemptionPolicy"], "Never");
        let mut named = json!({"priority": 5});
        keep_created(&mut named, &old);
        assert_eq!(named["priority"], 5);
    }
}
