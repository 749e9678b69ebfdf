//! kube's PodSecurity admission plugin: the Pod Security Standards chosen by
//! a namespace's `pod-security.kubernetes.io/*` labels, enforced on pods,
//! warned about (and audited) on pods and on workloads' pod templates, and
//! checked against a namespace's existing pods when its enforce level
//! tightens. The checks themselves are [`apimachinery::pod_security`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use apimachinery::error::{Error, FieldError, Reason, Result};
use apimachinery::keys::key_prefix;
use apimachinery::pod_security::{
    self, Decision, Evaluator, Level, LevelVersion, Policy, check_order, controller_uid,
};
use generic_server::admission::{AdmissionPlugin, Attributes, Operation, cached};
use generic_server::storage::cacher::{Cacher, ResourceCache, generic_ingest};
use serde_json::Value;

/// Pod subresources whose writes cannot change what the checks read.
const IGNORED_POD_SUBRESOURCES: &[&str] = &[
    "attach",
    "binding",
    "eviction",
    "exec",
    "log",
    "portforward",
    "proxy",
    "status",
];

/// How long the existing pods of a namespace are checked for, at most.
const NAMESPACE_CHECK_TIME: Duration = Duration::from_secs(1);

/// Where a workload resource keeps its pod template (kube's default
/// PodSpec extractor's resources).
fn template_pointer(group: &str, plural: &str) -> Option<&'static str> {
    match (group, plural) {
        ("", "podtemplates") => Some("/template"),
        ("", "replicationcontrollers")
        | ("apps", "daemonsets" | "deployments" | "replicasets" | "statefulsets")
        | ("batch", "jobs") => Some("/spec/template"),
        ("batch", "cronjobs") => Some("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

/// The PodSecurity plugin, following namespaces (and, for the existing-pods
/// check, pods) through the server's watch cache.
pub struct PodSecurity {
    cacher: Arc<Cacher>,
    namespaces: Arc<ResourceCache>,
    pods_prefix: String,
    evaluator: Evaluator,
}

impl PodSecurity {
    /// Watches namespaces through the server's cache; `latest` means the
    /// policy of the Kubernetes version the server serves.
    pub async fn new(cacher: Arc<Cacher>, etcd_prefix: &str) -> Result<Self> {
        let namespaces = cacher
            .register(&key_prefix(etcd_prefix, "", "namespaces"), generic_ingest())
            .await?;
        let newest = generic_server::version::KUBERNETES_MINOR
            .parse()
            .map_err(Error::internal)?;
        Ok(PodSecurity {
            cacher,
            namespaces,
            pods_prefix: key_prefix(etcd_prefix, "", "pods"),
            evaluator: Evaluator::new(newest),
        })
    }

    /// The policy of namespace `name` and its label errors; `None` when the
    /// namespace cannot be found.
    async fn policy(&self, name: &str) -> Result<Option<(Policy, Vec<FieldError>)>> {
        let found = cached(&self.cacher, &self.namespaces, name).await?;
        Ok(found.map(|ns| Policy::from_labels(&ns.labels)))
    }

    /// A pod create or update: enforced, warned about.
    async fn validate_pod(&self, attrs: &Attributes<'_>, pod: &Value) -> Result<()> {
        if IGNORED_POD_SUBRESOURCES.contains(&attrs.subresource) {
            return Ok(());
        }
        let Some((policy, errors)) = self.policy(attrs.namespace).await? else {
            return Err(Error::internal(format!(
                "failed to lookup namespace {:?}",
                attrs.namespace
            )));
        };
        if errors.is_empty() && policy.fully_privileged() {
            return Ok(());
        }
        if attrs
            .old
            .is_some_and(|old| !pod_security::significant_update(pod, old))
        {
            return Ok(());
        }
        self.judge(attrs, &policy, &errors, pod, true)
    }

    /// A workload's pod template: warned about and audited, never enforced.
    async fn validate_template(
        &self,
        attrs: &Attributes<'_>,
        workload: &Value,
        template: &str,
    ) -> Result<()> {
        if !attrs.subresource.is_empty() {
            return Ok(());
        }
        // A namespace that cannot be read lets the workload through, as in kube.
        let Some((policy, errors)) = self.policy(attrs.namespace).await? else {
            return Ok(());
        };
        let quiet = |mode: LevelVersion| mode.level == Level::Privileged;
        if errors.is_empty() && quiet(policy.warn) && quiet(policy.audit) {
            return Ok(());
        }
        let Some(template) = workload.pointer(template).filter(|t| t.is_object()) else {
            return Ok(());
        };
        self.judge(attrs, &policy, &errors, template, false)
    }

    /// A namespace create or update: labels must be valid, and tightening
    /// the enforce level warns about the pods already there.
    async fn validate_namespace(&self, attrs: &Attributes<'_>, ns: &Value) -> Result<()> {
        if !attrs.subresource.is_empty() {
            return Ok(());
        }
        let labels = |ns: &Value| match ns.pointer("/metadata/labels").and_then(Value::as_object) {
            Some(labels) => Policy::from_labels(labels),
            None => Policy::from_labels(&serde_json::Map::new()),
        };
        let (new, new_errors) = labels(ns);
        let invalid = || {
            Err(Error::invalid(
                &attrs.resource.group,
                &attrs.resource.kind,
                attrs.name,
                new_errors.clone(),
            ))
        };
        let Some(old_ns) = attrs.old else {
            return if new_errors.is_empty() {
                Ok(())
            } else {
                invalid()
            };
        };
        let (old, old_errors) = labels(old_ns);
        // Bad labels already stored may stay as they are.
        if !new_errors.is_empty() && (old_errors.is_empty() || new_errors != old_errors) {
            return invalid();
        }
        let relaxed =
            new.enforce.version == old.enforce.version && new.enforce.level <= old.enforce.level;
        if new.enforce == old.enforce || new.enforce.level == Level::Privileged || relaxed {
            return Ok(());
        }
        for warning in self.existing_pods_warnings(attrs.name, new.enforce).await {
            attrs.warn(warning);
        }
        Ok(())
    }

    /// Decides about a pod (or pod template) and reports the decision.
    fn judge(
        &self,
        attrs: &Attributes<'_>,
        policy: &Policy,
        errors: &[FieldError],
        pod: &Value,
        enforce: bool,
    ) -> Result<()> {
        let part = |key: &str| pod.get(key).unwrap_or(&Value::Null);
        let decision =
            self.evaluator
                .decide(policy, errors, part("metadata"), part("spec"), enforce);
        report(attrs, decision)
    }

    /// kube's warnings about the pods of `namespace` that `enforce` would refuse.
    async fn existing_pods_warnings(&self, namespace: &str, enforce: LevelVersion) -> Vec<String> {
        let deadline = Instant::now() + NAMESPACE_CHECK_TIME;
        let pods = match self
            .cacher
            .register(&self.pods_prefix, generic_ingest())
            .await
        {
            Ok(pods) if self.cacher.wait_fresh().await.is_ok() => pods,
            _ => {
                return vec![
                    "failed to list pods while checking new PodSecurity enforce level".into(),
                ];
            }
        };
        let snapshot = pods.snapshot(
            &format!("{}{namespace}/", pods.prefix()),
            self.cacher.progress(),
        );
        let controllers: Vec<Option<String>> = snapshot
            .objects
            .iter()
            .map(|pod| controller_uid(&pod.value()).map(str::to_string))
            .collect();
        let order = check_order(&controllers.iter().map(Option::as_deref).collect::<Vec<_>>());
        let total = order.len();
        let in_order = order.into_iter().map(|i| snapshot.objects[i].value());
        self.evaluator
            .existing_pods_warnings(namespace, enforce, total, in_order, || {
                Instant::now() < deadline
            })
    }
}

/// Hands a decision on: its warnings to the client, its annotations
/// (`pod-security.kubernetes.io/enforce-policy`, …) to the audit event, and
/// its refusal as kube's 403.
fn report(attrs: &Attributes<'_>, decision: Decision) -> Result<()> {
    for warning in decision.warnings {
        attrs.warn(warning);
    }
    for (key, value) in decision.audit_annotations {
        attrs.annotate(
            format!("{}{key}", apimachinery::pod_security::LABEL_PREFIX),
            value,
        );
    }
    match decision.denial {
        None => Ok(()),
        Some(why) => Err(Error::new(
            Reason::Forbidden,
            format!(
                "{} {:?} is forbidden: {why}",
                attrs.resource.group_resource(),
                attrs.name
            ),
        )),
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for PodSecurity {
    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        let Some(obj) = obj.filter(|_| attrs.operation != Operation::Delete) else {
            return Ok(());
        };
        match (
            attrs.resource.group.as_str(),
            attrs.resource.plural.as_str(),
        ) {
            ("", "namespaces") => self.validate_namespace(attrs, obj).await,
            ("", "pods") => self.validate_pod(attrs, obj).await,
            (group, plural) => match template_pointer(group, plural) {
                Some(template) => self.validate_template(attrs, obj, template).await,
                None => Ok(()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_with_pod_templates() {
        assert_eq!(
            template_pointer("apps", "deployments"),
            Some("/spec/template")
        );
        assert_eq!(
            template_pointer("batch", "cronjobs"),
            Some("/spec/jobTemplate/spec/template")
        );
        assert_eq!(template_pointer("", "podtemplates"), Some("/template"));
        assert_eq!(template_pointer("", "configmaps"), None);
        assert_eq!(template_pointer("apps", "controllerrevisions"), None);
    }
}
