//! kube's RuntimeClass admission: a pod created naming a RuntimeClass gets
//! the class's pod overhead and its scheduling (node selector and
//! tolerations, merged with the pod's); a class that does not exist, an
//! overhead other than the class's, or a node selector that contradicts the
//! class's is refused, as is an overhead without a class.

use std::sync::Arc;

use apimachinery::error::{Error, Result};
use apimachinery::quantity::resource_list;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation, cached, forbidden};
use generic_server::storage::cacher::{Cacher, ResourceCache};
use serde_json::{Value, json};

use crate::resources::fields::{is_set, items, text};

/// The group of RuntimeClasses.
const GROUP: &str = "node.k8s.io";

/// kube's RuntimeClass admission plugin, reading RuntimeClasses from the watch cache.
pub struct RuntimeClass {
    cacher: Arc<Cacher>,
    classes: Arc<ResourceCache>,
}

impl RuntimeClass {
    /// Follows RuntimeClasses through the server's cache.
    pub async fn new(cacher: Arc<Cacher>, etcd_root: &str) -> Result<Self> {
        let classes = super::watch(&cacher, etcd_root, GROUP, "runtimeclasses").await?;
        Ok(RuntimeClass { cacher, classes })
    }

    /// The class a created pod names, if it names one (refused if it does not exist).
    async fn class_of(&self, attrs: &Attributes<'_>, spec: &Value) -> Result<Option<Value>> {
        let name = text(spec, "/runtimeClassName");
        if name.is_empty() {
            return Ok(None);
        }
        match cached(&self.cacher, &self.classes, name).await {
            Ok(Some(found)) => Ok(Some(found.value())),
            Ok(None) => Err(forbidden(
                attrs,
                &format!("pod rejected: RuntimeClass {name:?} not found"),
            )),
            Err(e) => Err(Error::internal(format!(
                "failed to get RuntimeClass {name:?}: {e}"
            ))),
        }
    }
}

/// Whether a created pod is what this plugin looks at.
fn created_pod(attrs: &Attributes<'_>) -> bool {
    super::writes(attrs, "", "pods") && attrs.operation == Operation::Create
}

/// The pod's overhead must be the class's, or absent (then it is set).
fn set_overhead(spec: &mut Value, class: &Value) -> std::result::Result<(), &'static str> {
    let Some(fixed) = class.pointer("/overhead/podFixed").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    if is_set(spec, "/overhead") {
        if resource_list(spec.get("overhead")) != resource_list(Some(fixed)) {
            return Err(
                "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead",
            );
        }
        return Ok(());
    }
    spec["overhead"] = fixed.clone();
    Ok(())
}

/// The class's node selector joins the pod's (a key with another value is a
/// conflict) and its tolerations are added to the pod's (as kube merges them).
fn set_scheduling(spec: &mut Value, class: &Value) -> std::result::Result<(), String> {
    let Some(scheduling) = class.get("scheduling").filter(|v| v.is_object()) else {
        return Ok(());
    };
    if let Some(selector) = scheduling.get("nodeSelector").and_then(Value::as_object) {
        if !spec["nodeSelector"].is_object() {
            spec["nodeSelector"] = json!({});
        }
        for (key, value) in selector {
            match spec["nodeSelector"].get(key) {
                Some(existing) if existing != value => {
                    return Err(format!(
                        "conflict: runtimeClass.scheduling.nodeSelector[{key}] = {}; pod.spec.nodeSelector[{key}] = {}",
                        value.as_str().unwrap_or_default(),
                        existing.as_str().unwrap_or_default()
                    ));
                }
                _ => spec["nodeSelector"][key] = value.clone(),
            }
        }
    }
    let added: Vec<Value> = items(scheduling, "/tolerations")
        .iter()
        .filter(|t| !items(spec, "/tolerations").contains(t))
        .cloned()
        .collect();
    if !added.is_empty() {
        if !spec["tolerations"].is_array() {
            spec["tolerations"] = json!([]);
        }
        if let Some(list) = spec["tolerations"].as_array_mut() {
            list.extend(added);
        }
    }
    Ok(())
}

#[async_trait::async_trait]
impl AdmissionPlugin for RuntimeClass {
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<()> {
        if !created_pod(attrs) {
            return Ok(());
        }
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return Ok(());
        };
        let Some(class) = self.class_of(attrs, spec).await? else {
            return Ok(());
        };
        set_overhead(spec, &class).map_err(|why| forbidden(attrs, why))?;
        set_scheduling(spec, &class).map_err(|why| forbidden(attrs, &why))
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        let Some(spec) = obj
            .and_then(|o| o.get("spec"))
            .filter(|_| created_pod(attrs))
        else {
            return Ok(());
        };
        match self.class_of(attrs, spec).await? {
            None if is_set(spec, "/overhead") => Err(forbidden(
                attrs,
                "pod rejected: Pod Overhead set without corresponding RuntimeClass",
            )),
            // A webhook after admit may have changed the overhead.
            Some(class) => {
                let mut checked = spec.clone();
                set_overhead(&mut checked, &class).map_err(|why| forbidden(attrs, why))
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_is_the_classs() {
        let class = json!({"overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}}});
        let mut spec = json!({});
        set_overhead(&mut spec, &class).unwrap();
        assert_eq!(spec["overhead"], json!({"cpu": "250m", "memory": "120Mi"}));
        // The same quantities written otherwise are the same.
        let mut same = json!({"overhead": {"cpu": "0.25", "memory": "120Mi"}});
        assert!(set_overhead(&mut same, &class).is_ok());
        let mut other = json!({"overhead": {"cpu": "1"}});
        assert!(set_overhead(&mut other, &class).is_err());
        let mut without = json!({});
        assert!(set_overhead(&mut without, &json!({})).is_ok());
        assert!(without.get("overhead").is_none());
    }

    #[test]
    fn scheduling_merges_or_conflicts() {
        let class = json!({"scheduling": {"nodeSelector": {"sandbox": "gvisor"},
            "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]}});
        let mut spec = json!({"nodeSelector": {"zone": "a"},
            "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]});
        set_scheduling(&mut spec, &class).unwrap();
        assert_eq!(
            spec["nodeSelector"],
            json!({"zone": "a", "sandbox": "gvisor"})
        );
        assert_eq!(
            spec["tolerations"].as_array().unwrap().len(),
            1,
            "not added twice"
        );
        let mut conflicting = json!({"nodeSelector": {"sandbox": "kata"}});
        assert_eq!(
            set_scheduling(&mut conflicting, &class).unwrap_err(),
            "conflict: runtimeClass.scheduling.nodeSelector[sandbox] = gvisor; pod.spec.nodeSelector[sandbox] = kata"
        );
    }
}
