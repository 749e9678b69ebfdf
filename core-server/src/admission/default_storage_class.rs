//! kube's DefaultStorageClass admission: a PersistentVolumeClaim created
//! without a class (no `spec.storageClassName` at all, and no beta class
//! annotation; `""` is a choice) gets the default StorageClass, the newest
//! when several are marked default (then the first by name).

use std::sync::Arc;

use apimachinery::error::Result;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation};
use generic_server::storage::cacher::{Cacher, ResourceCache};
use serde_json::{Value, json};

use crate::resources::fields::{self, epoch_seconds, is_set, text};

/// The annotations that mark a class the default (kube's and the beta one).
const DEFAULT_CLASS_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];
/// The beta annotation with which a claim names its class.
const BETA_CLAIM_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// kube's DefaultStorageClass admission plugin, reading StorageClasses from the watch cache.
pub struct DefaultStorageClass {
    classes: Arc<ResourceCache>,
}

impl DefaultStorageClass {
    /// Follows StorageClasses through the server's cache.
    pub async fn new(cacher: Arc<Cacher>, etcd_root: &str) -> Result<Self> {
        let classes = super::watch(&cacher, etcd_root, "storage.k8s.io", "storageclasses").await?;
        Ok(DefaultStorageClass { classes })
    }
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    obj.pointer(&format!("/metadata/annotations/{}", fields::escape(key)))
}

/// Whether a claim names its class (`""` included).
fn has_class(claim: &Value) -> bool {
    is_set(claim, "/spec/storageClassName")
        || annotation(claim, BETA_CLAIM_CLASS_ANNOTATION).is_some()
}

/// The name of the default class among `classes`: the newest marked
/// default, the first by name among equally new ones.
fn default_class(classes: impl Iterator<Item = Value>) -> Option<String> {
    classes
        .filter(|c| {
            DEFAULT_CLASS_ANNOTATIONS
                .iter()
                .any(|a| annotation(c, a).and_then(Value::as_str) == Some("true"))
        })
        .map(|c| {
            let created = epoch_seconds(text(&c, "/metadata/creationTimestamp")).unwrap_or(0);
            (
                std::cmp::Reverse(created),
                text(&c, "/metadata/name").to_string(),
            )
        })
        .min()
        .map(|(_, name)| name)
}

#[async_trait::async_trait]
impl AdmissionPlugin for DefaultStorageClass {
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<()> {
        if !super::writes(attrs, "", "persistentvolumeclaims")
            || attrs.operation != Operation::Create
            || has_class(obj)
        {
            return Ok(());
        }
        let snapshot = self.classes.snapshot(self.classes.prefix(), 0);
        let Some(class) = default_class(snapshot.objects.iter().map(|c| c.value())) else {
            return Ok(());
        };
        if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
            spec["storageClassName"] = json!(class);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, created: &str, annotation: Option<&str>) -> Value {
        let annotations = annotation.map_or(json!({}), |a| json!({a: "true"}));
        json!({"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations}})
    }

    #[test]
    fn the_newest_default_class_wins_then_the_first_by_name() {
        let classes = vec![
            class(
                "old",
                "2024-01-01T00:00:00Z",
                Some(DEFAULT_CLASS_ANNOTATIONS[0]),
            ),
            class("plain", "2025-01-01T00:00:00Z", None),
            class(
                "zeta",
                "2024-06-01T00:00:00Z",
                Some(DEFAULT_CLASS_ANNOTATIONS[1]),
            ),
            class(
                "alpha",
                "2024-06-01T00:00:00Z",
                Some(DEFAULT_CLASS_ANNOTATIONS[0]),
            ),
        ];
        assert_eq!(default_class(classes.into_iter()).as_deref(), Some("alpha"));
        assert_eq!(
            default_class(std::iter::once(class(
                "plain",
                "2025-01-01T00:00:00Z",
                None
            ))),
            None
        );
    }

    #[test]
    fn an_empty_class_name_is_a_choice() {
        assert!(has_class(&json!({"spec": {"storageClassName": ""}})));
        assert!(has_class(
            &json!({"metadata": {"annotations": {BETA_CLAIM_CLASS_ANNOTATION: "x"}}, "spec": {}})
        ));
        assert!(!has_class(&json!({"spec": {"storageClassName": null}})));
        assert!(!has_class(&json!({"spec": {}})));
    }
}
