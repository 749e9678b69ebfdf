//! LimitRanger's pure part: the defaults a namespace's LimitRanges give
//! containers, and the min, max and ratio checks on containers, pods and
//! PersistentVolumeClaims, in kube's words.

use serde_json::{Map, Value};

use crate::quantity::{Quantity, ResourceList, add_lists, resource_list};

/// The pod annotation naming what LimitRanger set.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// The `spec.limits` items of a LimitRange.
fn items(limit_range: &Value) -> &[Value] {
    limit_range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn kind(item: &Value) -> &str {
    item.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// The container lists of a pod spec, with the word kube's annotation uses.
const CONTAINER_LISTS: [(&str, &str); 2] = [
    ("containers", "container"),
    ("initContainers", "init container"),
];

/// Fills what a pod's containers leave unset from the `Container` defaults
/// of one LimitRange (`default` → limits, `defaultRequest` → requests), and
/// records it in the `kubernetes.io/limit-ranger` annotation.
pub fn apply_defaults(limit_range: &Value, pod: &mut Value) {
    let (mut limits, mut requests) = (Map::new(), Map::new());
    for item in items(limit_range).iter().filter(|i| kind(i) == "Container") {
        for (list, into) in [("default", &mut limits), ("defaultRequest", &mut requests)] {
            for (k, v) in item
                .get(list)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                into.insert(k.clone(), v.clone());
            }
        }
    }
    let mut notes = Vec::new();
    for (list, word) in CONTAINER_LISTS {
        let Some(containers) = pod
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for container in containers.iter_mut().filter(|c| c.is_object()) {
            let name = container["name"].as_str().unwrap_or_default().to_string();
            let set_requests = fill(container, "requests", &requests);
            let set_limits = fill(container, "limits", &limits);
            if !set_requests.is_empty() {
                notes.push(format!(
                    "{} request for {word} {name}",
                    set_requests.join(", ")
                ));
            }
            if !set_limits.is_empty() {
                notes.push(format!("{} limit for {word} {name}", set_limits.join(", ")));
            }
        }
    }
    if notes.is_empty() {
        return;
    }
    let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    annotations[ANNOTATION] =
        Value::String(format!("LimitRanger plugin set: {}", notes.join("; ")));
}

/// Sets the entries of `defaults` a container's `resources.<list>` lacks;
/// the names set, sorted.
fn fill(container: &mut Value, list: &str, defaults: &Map<String, Value>) -> Vec<String> {
    if defaults.is_empty() {
        return Vec::new();
    }
    let resources = &mut container["resources"];
    if !resources.is_object() {
        *resources = Value::Object(Map::new());
    }
    let target = &mut resources[list];
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut set = Vec::new();
    if let Some(target) = target.as_object_mut() {
        for (k, v) in defaults {
            if !target.contains_key(k) {
                target.insert(k.clone(), v.clone());
                set.push(k.clone());
            }
        }
    }
    set.sort();
    set
}

/// A container's requests and limits.
fn container_lists(container: &Value) -> (ResourceList, ResourceList) {
    (
        resource_list(container.pointer("/resources/requests")),
        resource_list(container.pointer("/resources/limits")),
    )
}

/// A pod's effective `requests` or `limits` (kube's `PodRequests` /
/// `PodLimits`): containers summed, restartable init containers (sidecars)
/// added, and the largest init container if it needs more.
pub fn pod_totals(pod: &Value, list: &str) -> ResourceList {
    let of = |c: &Value| resource_list(c.pointer(&format!("/resources/{list}")));
    let containers = |name: &str| {
        pod.pointer(&format!("/spec/{name}"))
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
    };
    let mut total = ResourceList::new();
    for c in containers("containers") {
        total = add_lists(&total, &of(c));
    }
    let (mut sidecars, mut init_max) = (ResourceList::new(), ResourceList::new());
    for c in containers("initContainers") {
        let own = of(c);
        let needs = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            total = add_lists(&total, &own);
            sidecars = add_lists(&sidecars, &own);
            sidecars.clone()
        } else {
            add_lists(&own, &sidecars)
        };
        max_into(&mut init_max, &needs);
    }
    max_into(&mut total, &init_max);
    total
}

/// Raises each entry of `list` to the one in `other`, if larger.
fn max_into(list: &mut ResourceList, other: &ResourceList) {
    for (k, v) in other {
        if list.get(k).is_none_or(|have| v > have) {
            list.insert(k.clone(), *v);
        }
    }
}

/// Request, limit and enforced values at a common precision, as kube
/// compares them: thousandths unless that would overflow kube's int64.
fn comparable(values: [Option<&Quantity>; 3]) -> [i128; 3] {
    const MAX_MILLI: i128 = i64::MAX as i128 / 1000;
    let units = values.map(|q| q.map_or(0, Quantity::value));
    if units.iter().all(|u| *u <= MAX_MILLI) {
        values.map(|q| q.map_or(0, Quantity::milli_value))
    } else {
        units
    }
}

/// One min, max, maxRequest or ratio check.
#[derive(Clone, Copy)]
enum Check {
    Min,
    Max,
    /// A max enforced on requests alone (claims have no limits).
    MaxRequest,
    Ratio,
}

/// One observed value held to a min or max: a request or a limit.
struct Observed<'a> {
    what: &'a str,
    quantity: Option<&'a Quantity>,
    value: i128,
}

/// A min (`above` false) or max violated by the first of `observed` that
/// crosses `enforced` (the first must be present), in kube's words.
fn bound(
    above: bool,
    (kind, name, enforced): (&str, &str, &Quantity),
    enforced_value: i128,
    observed: &[Observed<'_>],
) -> Option<String> {
    let word = if above { "maximum" } else { "minimum" };
    let first = observed.first()?;
    if first.quantity.is_none() {
        return Some(format!(
            "{word} {name} usage per {kind} is {enforced}.  No {} is specified",
            first.what
        ));
    }
    let crosses = |o: &&Observed<'_>| {
        o.quantity.is_some()
            && if above {
                o.value > enforced_value
            } else {
                o.value < enforced_value
            }
    };
    let found = observed.iter().find(crosses)?;
    let shown = found.quantity.map(Quantity::to_string).unwrap_or_default();
    Some(format!(
        "{word} {name} usage per {kind} is {enforced}, but {} is {shown}",
        found.what
    ))
}

/// The violation of one check of `name` (per `kind`), if any.
fn check(
    check: Check,
    kind: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let (req, lim) = (requests.get(name), limits.get(name));
    let [req_v, lim_v, enf_v] = comparable([req, lim, Some(enforced)]);
    let request = Observed {
        what: "request",
        quantity: req,
        value: req_v,
    };
    let limit = Observed {
        what: "limit",
        quantity: lim,
        value: lim_v,
    };
    let what = (kind, name, enforced);
    match check {
        Check::Min => bound(false, what, enf_v, &[request, limit]),
        Check::Max => bound(true, what, enf_v, &[limit, request]),
        Check::MaxRequest => bound(true, what, enf_v, &[request]),
        Check::Ratio => {
            let ratio = format!("{name} max limit to request ratio per {kind} is {enforced}");
            if req.is_none() || req_v == 0 {
                return Some(format!(
                    "{ratio}, but no request is specified or request is 0"
                ));
            }
            if lim.is_none() || lim_v == 0 {
                return Some(format!("{ratio}, but no limit is specified or limit is 0"));
            }
            let observed = lim_v as f64 / req_v as f64;
            let (scaled, max) = if enforced.value() <= i64::MAX as i128 / 1000 {
                (observed * 1000.0, enforced.milli_value() as f64)
            } else {
                (observed, enforced.value() as f64)
            };
            (scaled > max).then(|| format!("{ratio}, but provided ratio is {observed:.6}"))
        }
    }
}

/// Runs the checks an item's `min`, `max` and `maxLimitRequestRatio` ask for.
fn checks(
    item: &Value,
    max_check: Check,
    requests: &ResourceList,
    limits: &ResourceList,
    errs: &mut Vec<String>,
) {
    let kind = kind(item);
    for (list, which) in [
        ("min", Check::Min),
        ("max", max_check),
        ("maxLimitRequestRatio", Check::Ratio),
    ] {
        for (name, enforced) in resource_list(item.get(list)) {
            errs.extend(check(which, kind, &name, &enforced, requests, limits));
        }
    }
}

/// What a pod breaks of one LimitRange's `Container` and `Pod` items.
pub fn validate_pod(limit_range: &Value, pod: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    for item in items(limit_range) {
        match kind(item) {
            "Container" => {
                for (list, _) in CONTAINER_LISTS {
                    for c in pod
                        .pointer(&format!("/spec/{list}"))
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let (requests, limits) = container_lists(c);
                        checks(item, Check::Max, &requests, &limits, &mut errs);
                    }
                }
            }
            "Pod" => {
                let (requests, limits) = (pod_totals(pod, "requests"), pod_totals(pod, "limits"));
                checks(item, Check::Max, &requests, &limits, &mut errs);
            }
            _ => {}
        }
    }
    errs
}

/// What a claim's storage requests break of one LimitRange's
/// `PersistentVolumeClaim` items (its min and max only).
pub fn validate_claim(limit_range: &Value, claim: &Value) -> Vec<String> {
    let requests = resource_list(claim.pointer("/spec/resources/requests"));
    let none = ResourceList::new();
    let mut errs = Vec::new();
    for item in items(limit_range)
        .iter()
        .filter(|i| kind(i) == "PersistentVolumeClaim")
    {
        for (list, which) in [("min", Check::Min), ("max", Check::MaxRequest)] {
            for (name, enforced) in resource_list(item.get(list)) {
                errs.extend(check(
                    which,
                    "PersistentVolumeClaim",
                    &name,
                    &enforced,
                    &requests,
                    &none,
                ));
            }
        }
    }
    errs
}

/// Several errors as kube's aggregate error prints them: one alone, more
/// in brackets.
pub fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn range(limits: Value) -> Value {
        json!({"spec": {"limits": limits}})
    }

    #[test]
    fn defaults_fill_what_containers_leave_unset_and_say_so() {
        let lr = range(
            json!([{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                               "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]),
        );
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"memory": "1Gi"}}}],
            "initContainers": [{"name": "i"}]}});
        apply_defaults(&lr, &mut pod);
        let c = &pod["spec"]["containers"][0]["resources"];
        assert_eq!(c["limits"], json!({"cpu": "500m", "memory": "1Gi"}));
        assert_eq!(c["requests"], json!({"cpu": "100m", "memory": "128Mi"}));
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu, memory request for container c; cpu limit for container c; \
             cpu, memory request for init container i; cpu, memory limit for init container i"
        );
        let mut untouched = json!({"metadata": {}, "spec": {"containers": [{"name": "c"}]}});
        apply_defaults(
            &range(json!([{"type": "Pod", "max": {"cpu": "1"}}])),
            &mut untouched,
        );
        assert!(untouched["metadata"].get("annotations").is_none());
    }

    #[test]
    fn container_pod_and_claim_checks_in_kube_words() {
        let lr = range(json!([
            {"type": "Container", "min": {"cpu": "100m"}, "max": {"memory": "1Gi"}, "maxLimitRequestRatio": {"cpu": "2"}},
            {"type": "Pod", "max": {"cpu": "1"}},
        ]));
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "50m", "memory": "1Gi"}, "limits": {"cpu": "200m", "memory": "2Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1", "memory": "1Gi"}}},
        ]}});
        assert_eq!(
            validate_pod(&lr, &pod),
            vec![
                "minimum cpu usage per Container is 100m, but request is 50m".to_string(),
                "maximum memory usage per Container is 1Gi, but limit is 2Gi".into(),
                "cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000"
                    .into(),
                "maximum cpu usage per Pod is 1, but limit is 1200m".into(),
            ]
        );
        let bare = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(
            validate_pod(&lr, &bare)[0],
            "minimum cpu usage per Container is 100m.  No request is specified"
        );
        let claims = range(
            json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "5Gi"}}]),
        );
        let claim = |size: &str| json!({"spec": {"resources": {"requests": {"storage": size}}}});
        assert_eq!(
            validate_claim(&claims, &claim("10Gi")),
            vec![
                "maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi"
                    .to_string()
            ]
        );
        assert_eq!(
            validate_claim(&claims, &claim("500Mi")),
            vec![
                "minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"
                    .to_string()
            ]
        );
        assert!(validate_claim(&claims, &claim("2Gi")).is_empty());
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into()]), "[a, b]");
    }

    #[test]
    fn pod_totals_count_sidecars_and_the_largest_init_container() {
        let pod = json!({"spec": {
            "containers": [{"resources": {"requests": {"cpu": "100m"}}}, {"resources": {"requests": {"cpu": "200m"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                               {"restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}}]}});
        let totals = pod_totals(&pod, "requests");
        assert_eq!(totals["cpu"].to_string(), "1");
        assert_eq!(totals["memory"].to_string(), "1Gi");
    }
}
