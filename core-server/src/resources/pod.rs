//! Pods: PodSpec defaults, status Pending with its QoS class, updates
//! limited to what kube allows, and the READY/STATUS/RESTARTS printer. The
//! service account, priority and default tolerations come from admission
//! (`crate::admission`), as in kube.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, int, is_set, items, text};
use super::pod_spec;
use super::pod_subresources;
use apimachinery::quantity;

/// The fields a pod update may change, as kube's message lists them.
const UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// The rules of `v1/Pod`.
pub struct PodStrategy;

/// kube's `GetPodQOS`: BestEffort, Guaranteed or Burstable from cpu and memory.
fn qos_class(spec: &Value) -> &'static str {
    let mut requests = [0.0f64; 2];
    let mut limits = [0.0f64; 2];
    let mut seen_limits = [true; 2];
    let mut any = false;
    let containers = items(spec, "/containers")
        .iter()
        .chain(items(spec, "/initContainers"));
    for c in containers {
        for (i, resource) in ["cpu", "memory"].iter().enumerate() {
            let request = c
                .pointer(&format!("/resources/requests/{resource}"))
                .and_then(quantity::of)
                .unwrap_or(0.0);
            let limit = c
                .pointer(&format!("/resources/limits/{resource}"))
                .and_then(quantity::of)
                .unwrap_or(0.0);
            any |= request > 0.0 || limit > 0.0;
            requests[i] += request;
            limits[i] += limit;
            seen_limits[i] &= limit > 0.0;
        }
    }
    if !any {
        "BestEffort"
    } else if seen_limits.iter().all(|s| *s)
        && requests
            .iter()
            .zip(limits)
            .all(|(r, l)| (*r - l).abs() < f64::EPSILON * l.max(1.0))
    {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Requests default to limits, for pods only (not templates).
fn default_requests_from_limits(c: &mut Value) {
    let Some(limits) = c
        .pointer("/resources/limits")
        .and_then(Value::as_object)
        .cloned()
    else {
        return;
    };
    for (name, limit) in limits {
        default(
            c,
            &format!("/resources/requests/{}", fields::escape(&name)),
            limit,
        );
    }
}

fn host_ports_from_container_ports(c: &mut Value) {
    fields::each_mut(c, "/ports", |p| {
        if int(p, "/hostPort").unwrap_or(0) == 0
            && let Some(port) = p.get("containerPort").cloned()
        {
            p["hostPort"] = port;
        }
    });
}

/// The spec with what an update may change blanked out, for comparison.
fn munged(spec: &Value) -> Value {
    let mut spec = spec.clone();
    for list in ["/containers", "/initContainers"] {
        fields::each_mut(&mut spec, list, |c| c["image"] = json!(""));
    }
    for field in ["/activeDeadlineSeconds", "/tolerations", "/schedulingGates"] {
        fields::remove(&mut spec, field);
    }
    spec
}

fn validate_spec_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match (
        int(new, "/activeDeadlineSeconds"),
        int(old, "/activeDeadlineSeconds"),
    ) {
        (Some(n), Some(o)) if n > o => errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            n,
            "must be less than or equal to previous value",
        )),
        (None, Some(_)) => errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            Value::Null,
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    let new_tolerations = items(new, "/tolerations");
    let kept = items(old, "/tolerations").iter().all(|o| {
        new_tolerations.iter().any(|n| {
            let mut o = o.clone();
            fields::remove(&mut o, "/tolerationSeconds");
            let mut n = n.clone();
            fields::remove(&mut n, "/tolerationSeconds");
            o == n
        })
    });
    if !kept {
        errs.push(FieldError::forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }
    let old_gates = items(old, "/schedulingGates");
    for (i, gate) in items(new, "/schedulingGates").iter().enumerate() {
        if !old_gates.contains(gate) {
            errs.push(FieldError::forbidden(
                format!("spec.schedulingGates[{i}]"),
                format!(
                    "only deletion is allowed, but found new scheduling gate '{}'",
                    text(gate, "/name")
                ),
            ));
        }
    }
    let mut new_munged = munged(new);
    let old_munged = munged(old);
    let old_grace = int(old, "/terminationGracePeriodSeconds").unwrap_or(0);
    if old_grace < 0 && int(new, "/terminationGracePeriodSeconds") == Some(1) {
        new_munged["terminationGracePeriodSeconds"] = json!(old_grace);
    }
    if new_munged != old_munged {
        errs.push(FieldError::forbidden(
            "spec",
            format!("pod updates may not change fields other than {UPDATABLE}"),
        ));
    }
    errs
}

/// What kube's pod printer shows in STATUS and RESTARTS, and the ready containers.
fn status_and_restarts(pod: &Value) -> (String, String, i64) {
    let mut last_restart: Option<(i64, String)> = None;
    let mut note_restart = |status: &Value| {
        let finished = text(status, "/lastState/terminated/finishedAt");
        if let Some(at) = fields::epoch_seconds(finished)
            && last_restart.as_ref().is_none_or(|(t, _)| *t < at)
        {
            last_restart = Some((at, finished.to_string()));
        }
    };
    let mut reason = text(pod, "/status/phase").to_string();
    if !text(pod, "/status/reason").is_empty() {
        reason = text(pod, "/status/reason").to_string();
    }
    let init_specs = items(pod, "/spec/initContainers");
    let mut restarts = 0;
    let mut ready = 0;
    let mut initializing = false;
    let mut sidecar_restarts = 0;
    for (i, status) in items(pod, "/status/initContainerStatuses")
        .iter()
        .enumerate()
    {
        restarts += int(status, "/restartCount").unwrap_or(0);
        note_restart(status);
        let name = text(status, "/name");
        let sidecar = init_specs
            .iter()
            .any(|c| text(c, "/name") == name && text(c, "/restartPolicy") == "Always");
        if sidecar {
            sidecar_restarts += int(status, "/restartCount").unwrap_or(0);
            if status.get("started") == Some(&Value::Bool(true)) {
                if status.get("ready") == Some(&Value::Bool(true)) {
                    ready += 1;
                }
                continue;
            }
        }
        let terminated = status.pointer("/state/terminated");
        let waiting_reason = text(status, "/state/waiting/reason");
        if terminated.is_some_and(|t| int(t, "/exitCode") == Some(0)) {
            continue;
        }
        initializing = true;
        reason = match terminated {
            Some(t) if !text(t, "/reason").is_empty() => format!("Init:{}", text(t, "/reason")),
            Some(t) if int(t, "/signal").unwrap_or(0) != 0 => {
                format!("Init:Signal:{}", int(t, "/signal").unwrap_or(0))
            }
            Some(t) => format!("Init:ExitCode:{}", int(t, "/exitCode").unwrap_or(0)),
            None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                format!("Init:{waiting_reason}")
            }
            None => format!("Init:{i}/{}", init_specs.len()),
        };
        break;
    }
    if !initializing || fields::condition_true(pod, "Initialized") {
        restarts = sidecar_restarts;
        let mut has_running = false;
        for status in items(pod, "/status/containerStatuses").iter().rev() {
            restarts += int(status, "/restartCount").unwrap_or(0);
            note_restart(status);
            let waiting = text(status, "/state/waiting/reason");
            let terminated = status.pointer("/state/terminated");
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(t) = terminated {
                reason = match (text(t, "/reason"), int(t, "/signal").unwrap_or(0)) {
                    ("", 0) => format!("ExitCode:{}", int(t, "/exitCode").unwrap_or(0)),
                    ("", signal) => format!("Signal:{signal}"),
                    (r, _) => r.to_string(),
                };
            } else if status.get("ready") == Some(&Value::Bool(true))
                && is_set(status, "/state/running")
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if fields::condition_true(pod, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    if is_set(pod, "/metadata/deletionTimestamp") {
        if text(pod, "/status/reason") == "NodeLost" {
            reason = "Unknown".into();
        } else if !matches!(text(pod, "/status/phase"), "Succeeded" | "Failed") {
            reason = "Terminating".into();
        }
    }
    let restarts = match last_restart {
        Some((_, at)) => format!("{restarts} ({} ago)", table::age_of(Some(&at))),
        None => restarts.to_string(),
    };
    (reason, restarts, ready)
}

impl Strategy for PodStrategy {
    /// Pods have a generation since kube 1.33 (kubernetes#130181): 1 at
    /// creation, one more for each change of the spec.
    fn tracks_generation(&self) -> bool {
        true
    }

    fn connect(
        &self,
        subresource: &str,
        obj: &Value,
        req: &generic_server::request::ApiRequest,
    ) -> apimachinery::error::Result<generic_server::request::ApiResponse> {
        super::kubelet::pod(subresource, obj, req)
    }

    /// DELETE answers with the object, as kube's registry declares (`ReturnDeletedObject`).
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn defaults(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        pod_spec::default_spec(spec);
        default(spec, "/enableServiceLinks", json!(true));
        let host_network = spec.get("hostNetwork") == Some(&Value::Bool(true));
        for list in ["/containers", "/initContainers"] {
            fields::each_mut(spec, list, default_requests_from_limits);
            if host_network {
                fields::each_mut(spec, list, host_ports_from_container_ports);
            }
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.defaults(obj);
        let mut status = json!({"phase": "Pending", "qosClass": qos_class(&obj["spec"])});
        if !items(obj, "/spec/schedulingGates").is_empty() {
            status["conditions"] = json!([{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates", "lastProbeTime": null, "lastTransitionTime": generic_server::registry::now_rfc3339()}]);
        }
        obj["status"] = status;
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // A PUT without `enableServiceLinks` keeps the stored choice.
        let pointer = "/spec/enableServiceLinks";
        if !is_set(new, pointer)
            && let Some(v) = old.pointer(pointer)
        {
            fields::set(new, pointer, v.clone());
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        let mut errs = pod_spec::validate_spec(&spec, "spec");
        if !items(&spec, "/ephemeralContainers").is_empty() {
            errs.push(FieldError::forbidden(
                "spec.ephemeralContainers",
                "cannot be set on create",
            ));
        }
        if !text(&spec, "/nodeName").is_empty() && !items(&spec, "/schedulingGates").is_empty() {
            errs.push(FieldError::forbidden(
                "spec.nodeName",
                "cannot be set until all schedulingGates have been cleared",
            ));
        }
        errs
    }

    /// A binding (`pods/binding`) writes what it computed: the node, the
    /// scheduled condition and its annotations (`crate::binding`);
    /// `ephemeralcontainers` and `resize` change only their own fields.
    fn update_subresource(&self, subresource: &str, new: &Value, old: &Value) -> Option<Value> {
        let mut merged = match subresource {
            "binding" => return Some(new.clone()),
            "ephemeralcontainers" => pod_subresources::with_ephemeral_containers(new, old),
            "resize" => pod_subresources::with_resources(new, old),
            _ => return None,
        };
        if let Some(spec) = merged.get_mut("spec").filter(|s| s.is_object()) {
            pod_spec::default_spec(spec);
        }
        Some(merged)
    }

    fn validate_subresource_update(
        &self,
        subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Vec<FieldError> {
        match subresource {
            // What a binding changes, the binding checked.
            "binding" => Vec::new(),
            "ephemeralcontainers" => {
                let mut errs = pod_spec::validate_spec(&new["spec"], "spec");
                errs.extend(pod_subresources::validate_ephemeral_update(new, old));
                errs
            }
            "resize" => {
                let mut errs = pod_spec::validate_spec(&new["spec"], "spec");
                errs.extend(pod_subresources::validate_resize(new, old, qos_class));
                errs
            }
            _ => self.validate_update(new, old),
        }
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let (new_spec, old_spec) = (
            new.get("spec").cloned().unwrap_or_default(),
            old.get("spec").cloned().unwrap_or_default(),
        );
        let mut errs: Vec<FieldError> = pod_spec::validate_spec(&new_spec, "spec");
        errs.extend(validate_spec_update(&new_spec, &old_spec));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
            Column::new("Status", "string", "The aggregate status of the containers in this pod."),
            Column::new("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
            table::age_column(),
            Column::new("IP", "string", "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.").wide(),
            Column::new("Node", "string", "NodeName indicates in which node this pod is scheduled.").wide(),
            Column::new("Nominated Node", "string", "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods.").wide(),
            Column::new("Readiness Gates", "string", "If specified, all readiness gates will be evaluated for pod readiness.").wide(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let (status, restarts, ready) = status_and_restarts(obj);
        let sidecars = items(obj, "/spec/initContainers")
            .iter()
            .filter(|c| text(c, "/restartPolicy") == "Always")
            .count();
        let total = items(obj, "/spec/containers").len() + sidecars;
        let gates = items(obj, "/spec/readinessGates");
        let gates_cell = if gates.is_empty() {
            "<none>".to_string()
        } else {
            let met = gates
                .iter()
                .filter(|g| fields::condition_true(obj, text(g, "/conditionType")))
                .count();
            format!("{met}/{}", gates.len())
        };
        let or_none = |p: &str| fields::none_if_empty(text(obj, p).to_string());
        vec![
            table::name_cell(obj),
            json!(format!("{ready}/{total}")),
            json!(status),
            json!(restarts),
            table::age_cell(obj),
            json!(or_none("/status/podIP")),
            json!(or_none("/spec/nodeName")),
            json!(or_none("/status/nominatedNodeName")),
            json!(gates_cell),
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        Some(match field {
            "spec.hostNetwork" => {
                (obj.pointer("/spec/hostNetwork") == Some(&Value::Bool(true))).to_string()
            }
            "status.podIP" => text(obj, "/status/podIPs/0/ip").to_string(),
            other => fields::field_string(obj, other),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(spec: Value) -> Value {
        let mut pod = json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec});
        PodStrategy.prepare_for_create(&mut pod);
        PodStrategy.defaults(&mut pod);
        pod
    }

    #[test]
    fn create_defaults_and_status() {
        let pod = created(
            json!({"containers": [{"name": "c", "image": "nginx:1.27", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}),
        );
        let spec = &pod["spec"];
        // The account, priority and tolerations are admission's, not the strategy's.
        for field in [
            "serviceAccountName",
            "priority",
            "preemptionPolicy",
            "tolerations",
        ] {
            assert!(spec.get(field).is_none(), "{field}: {spec}");
        }
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(spec["containers"][0]["resources"]["requests"]["cpu"], "1");
        assert_eq!(
            pod["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
        assert!(
            PodStrategy.validate(&pod).is_empty(),
            "{:?}",
            PodStrategy.validate(&pod)
        );
        let best_effort = created(json!({"containers": [{"name": "c", "image": "nginx"}]}));
        assert_eq!(best_effort["status"]["qosClass"], "BestEffort");
        let burstable = created(
            json!({"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]}),
        );
        assert_eq!(burstable["status"]["qosClass"], "Burstable");
    }

    #[test]
    fn updates_may_change_only_images() {
        let old = created(json!({"containers": [{"name": "c", "image": "nginx:1"}]}));
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("nginx:2");
        assert!(PodStrategy.validate_update(&new, &old).is_empty());
        new["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "protocol": "TCP"}]);
        let errs = PodStrategy.validate_update(&new, &old);
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].to_string().starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`")
        );
        // A PUT without the defaulted fields is the same pod.
        let mut bare = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}});
        PodStrategy.prepare_for_update(&mut bare, &old);
        PodStrategy.defaults(&mut bare);
        assert!(
            PodStrategy.validate_update(&bare, &old).is_empty(),
            "{:?}",
            PodStrategy.validate_update(&bare, &old)
        );
    }

    #[test]
    fn table_row() {
        let mut pod = created(
            json!({"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}], "nodeName": "n1"}),
        );
        pod["status"]["containerStatuses"] = json!([
            {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}}},
            {"name": "b", "ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
        ]);
        let cells = PodStrategy.cells(&pod);
        assert_eq!(cells[1], "1/2");
        assert_eq!(cells[2], "CrashLoopBackOff");
        assert_eq!(cells[3], "3");
        assert_eq!(cells[5], "<none>");
        assert_eq!(cells[6], "n1");
        assert_eq!(cells.len(), PodStrategy.columns().len());
        assert_eq!(
            PodStrategy.field_value(&pod, "spec.hostNetwork").as_deref(),
            Some("false")
        );
        assert_eq!(
            PodStrategy
                .field_value(&pod, "status.nominatedNodeName")
                .as_deref(),
            Some("")
        );
    }
}
