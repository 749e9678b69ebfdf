//! What a pod's `ephemeralcontainers` and `resize` subresources change:
//! the first only adds ephemeral containers (`kubectl debug`), the second
//! only the cpu and memory of the containers (in-place resize, on by
//! default in kube 1.33). Everything else a write sends is dropped, as
//! kube's subresource strategies drop it.

use apimachinery::error::FieldError;
use serde_json::{Value, json};

use super::fields::{items, text};

/// The fields an ephemeral container may not set, as kube lists them.
const NOT_FOR_EPHEMERAL: &[&str] = &[
    "lifecycle",
    "livenessProbe",
    "ports",
    "readinessProbe",
    "resources",
    "resizePolicy",
    "startupProbe",
];

/// The stored pod with the request's ephemeral containers and resourceVersion.
pub fn with_ephemeral_containers(new: &Value, old: &Value) -> Value {
    let mut merged = old.clone();
    let list = new
        .pointer("/spec/ephemeralContainers")
        .cloned()
        .unwrap_or(json!([]));
    if let Some(spec) = merged.get_mut("spec").and_then(Value::as_object_mut) {
        if list.as_array().is_some_and(|l| !l.is_empty()) {
            spec.insert("ephemeralContainers".into(), list);
        } else {
            spec.remove("ephemeralContainers");
        }
    }
    keep_resource_version(&mut merged, new);
    merged
}

/// The stored pod with the request's container resources and resize
/// policies (containers matched by name), and its resourceVersion.
pub fn with_resources(new: &Value, old: &Value) -> Value {
    let mut merged = old.clone();
    for list in ["containers", "initContainers"] {
        let sent = items(new, &format!("/spec/{list}"));
        let Some(stored) = merged
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for container in stored.iter_mut() {
            let name = text(container, "/name").to_string();
            let Some(update) = sent.iter().find(|c| text(c, "/name") == name) else {
                continue;
            };
            for field in ["resources", "resizePolicy"] {
                match update.get(field) {
                    Some(v) => container[field] = v.clone(),
                    None => {
                        if let Some(c) = container.as_object_mut() {
                            c.remove(field);
                        }
                    }
                }
            }
        }
    }
    keep_resource_version(&mut merged, new);
    merged
}

/// The request's resourceVersion, so a stale write conflicts.
fn keep_resource_version(merged: &mut Value, new: &Value) {
    if let Some(rv) = new.pointer("/metadata/resourceVersion").cloned()
        && let Some(meta) = merged.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert("resourceVersion".into(), rv);
    }
}

/// kube's rules for an ephemeral containers update: each new one a valid
/// debugging container aimed at a container of the pod, and none already
/// there removed or changed.
pub fn validate_ephemeral_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = "spec.ephemeralContainers";
    let containers: Vec<&str> = items(new, "/spec/containers")
        .iter()
        .chain(items(new, "/spec/initContainers"))
        .map(|c| text(c, "/name"))
        .collect();
    for (i, c) in items(new, "/spec/ephemeralContainers").iter().enumerate() {
        for field in NOT_FOR_EPHEMERAL {
            let set = c
                .get(*field)
                .is_some_and(|v| !v.is_null() && v != &json!({}) && v != &json!([]));
            if set {
                errs.push(FieldError::forbidden(
                    format!("{path}[{i}].{field}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
        let target = text(c, "/targetContainerName");
        if !target.is_empty() && !containers.contains(&target) {
            errs.push(FieldError::not_found(
                format!("{path}[{i}].targetContainerName"),
                target,
            ));
        }
    }
    let sent = items(new, "/spec/ephemeralContainers");
    for existing in items(old, "/spec/ephemeralContainers") {
        let name = text(existing, "/name");
        match sent.iter().find(|c| text(c, "/name") == name) {
            None => errs.push(FieldError::forbidden(
                path,
                format!("existing ephemeral containers {name:?} may not be removed"),
            )),
            Some(c) if c != existing => errs.push(FieldError::forbidden(
                path,
                format!("existing ephemeral containers {name:?} may not be changed"),
            )),
            Some(_) => {}
        }
    }
    errs
}

/// kube's rules for a resize: only cpu and memory change, and the pod's
/// QoS class stays what it was.
pub fn validate_resize(
    new: &Value,
    old: &Value,
    qos: fn(&Value) -> &'static str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let resources = |pod: &Value, list: &str, name: &str| -> Value {
        let mut r = items(pod, &format!("/spec/{list}"))
            .iter()
            .find(|c| text(c, "/name") == name)
            .and_then(|c| c.get("resources").cloned())
            .unwrap_or(json!({}));
        for kind in ["requests", "limits"] {
            if let Some(m) = r.get_mut(kind).and_then(Value::as_object_mut) {
                m.remove("cpu");
                m.remove("memory");
            }
        }
        r
    };
    let other_changed = ["containers", "initContainers"].iter().any(|list| {
        items(old, &format!("/spec/{list}")).iter().any(|c| {
            let name = text(c, "/name");
            let empty = |v: Value| {
                ["requests", "limits"]
                    .iter()
                    .map(|k| v.get(*k).cloned().filter(|m| m != &json!({})))
                    .collect::<Vec<_>>()
            };
            empty(resources(new, list, name)) != empty(resources(old, list, name))
        })
    });
    if other_changed {
        errs.push(FieldError::forbidden(
            "spec",
            "only cpu and memory resources are mutable",
        ));
    }
    let (was, is) = (qos(&old["spec"]), qos(&new["spec"]));
    if was != is {
        errs.push(FieldError::invalid(
            "metadata",
            is,
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "resourceVersion": "5"},
            "spec": {"containers": [{"name": "app", "image": "nginx",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
            "status": {"phase": "Pending"}})
    }

    #[test]
    fn ephemeral_containers_are_added_not_changed() {
        let old = pod();
        let mut new = old.clone();
        new["spec"]["ephemeralContainers"] =
            json!([{"name": "debugger", "image": "busybox", "targetContainerName": "app"}]);
        new["spec"]["containers"][0]["image"] = json!("ignored");
        let merged = with_ephemeral_containers(&new, &old);
        assert_eq!(merged["spec"]["containers"][0]["image"], "nginx");
        assert_eq!(merged["spec"]["ephemeralContainers"][0]["name"], "debugger");
        assert!(validate_ephemeral_update(&merged, &old).is_empty());
        let mut changed = merged.clone();
        changed["spec"]["ephemeralContainers"][0]["image"] = json!("alpine");
        changed["spec"]["ephemeralContainers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "x", "image": "a", "ports": [{"containerPort": 80}], "targetContainerName": "nope"}));
        let messages: Vec<String> = validate_ephemeral_update(&changed, &merged)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            messages,
            [
                "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[1].targetContainerName: Not found: \"nope\"",
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be changed",
            ]
        );
    }

    #[test]
    fn resize_changes_cpu_and_memory_only() {
        let old = pod();
        let mut new = old.clone();
        new["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("200m");
        new["spec"]["containers"][0]["image"] = json!("ignored");
        let merged = with_resources(&new, &old);
        assert_eq!(merged["spec"]["containers"][0]["image"], "nginx");
        assert_eq!(
            merged["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "200m"
        );
        let qos = |_: &Value| "Burstable";
        assert!(validate_resize(&merged, &old, qos).is_empty());
        let mut gpu = merged.clone();
        gpu["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = json!("1");
        assert_eq!(
            validate_resize(&gpu, &old, qos)[0].to_string(),
            "spec: Forbidden: only cpu and memory resources are mutable"
        );
    }
}
