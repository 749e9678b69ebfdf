//! node.k8s.io/v1 RuntimeClasses: a handler (a DNS label) that never
//! changes, and the overhead and scheduling constraints of the pods that
//! run with it.

use apimachinery::error::FieldError;
use apimachinery::quantity::Quantity;
use apimachinery::table::{self, Column};
use apimachinery::validation;
use generic_server::strategy::Strategy;
use serde_json::Value;

use super::fields::{self, is_set, items, text};
use super::pod_spec;

/// The container resources named without a domain.
const STANDARD_RESOURCES: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

/// The rules of `node.k8s.io/v1/RuntimeClass`.
pub struct RuntimeClassStrategy;

impl Strategy for RuntimeClassStrategy {
    /// A PUT may create a class, as kube's strategy allows.
    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let handler = text(obj, "/handler");
        let mut errs: Vec<FieldError> = validation::dns1123_label(handler)
            .into_iter()
            .map(|m| FieldError::invalid("handler", handler, m))
            .collect();
        if let Some(pod_fixed) = obj.pointer("/overhead/podFixed") {
            errs.extend(overhead(pod_fixed));
        }
        if is_set(obj, "/scheduling") {
            errs.extend(validation::labels(
                obj.pointer("/scheduling/nodeSelector"),
                "scheduling.nodeSelector",
            ));
            errs.extend(tolerations(items(obj, "/scheduling/tolerations")));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(fields::immutable(new, old, "/handler", "handler"));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            // kube describes it with ObjectMeta's (absent) `handler` doc: empty.
            Column::new("Handler", "string", ""),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            fields::text_cell(obj, "/handler"),
            table::age_cell(obj),
        ]
    }
}

/// `overhead.podFixed`, checked as kube checks container limits (and
/// reported, as kube reports it, under `overhead.limits`).
fn overhead(pod_fixed: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (name, value) in pod_fixed.as_object().into_iter().flatten() {
        let path = format!("overhead.limits[{name}]");
        for msg in validation::qualified_name(name) {
            errs.push(FieldError::invalid(&path, name.as_str(), msg));
        }
        let extended = name.contains('/') && !name.contains("kubernetes.io/");
        if !name.contains('/')
            && !STANDARD_RESOURCES.contains(&name.as_str())
            && !name.starts_with("hugepages-")
        {
            errs.push(FieldError::invalid(
                &path,
                name.as_str(),
                "must be a standard resource for containers",
            ));
        } else if extended && name.starts_with("requests.") {
            errs.push(FieldError::invalid(
                &path,
                name.as_str(),
                "doesn't follow extended resource name standard",
            ));
        }
        let Some(quantity) = Quantity::of(value) else {
            let one = serde_json::Map::from_iter([(name.clone(), value.clone())]);
            errs.extend(apimachinery::quantity::validate_list(
                Some(&Value::Object(one)),
                "overhead.limits",
            ));
            continue;
        };
        if quantity.is_negative() {
            errs.push(FieldError::invalid(
                &path,
                quantity.to_string(),
                "must be greater than or equal to 0",
            ));
        }
        if extended && quantity.milli_value() % 1000 != 0 {
            errs.push(FieldError::invalid(
                &path,
                quantity.to_string(),
                "must be an integer",
            ));
        }
    }
    errs
}

/// `scheduling.tolerations`: each as a pod's, and no two alike in key,
/// operator, value and effect.
fn tolerations(list: &[Value]) -> Vec<FieldError> {
    let mut errs = pod_spec::validate_tolerations(list, "scheduling.tolerations");
    let mut seen = Vec::new();
    for (i, toleration) in list.iter().enumerate() {
        let key = ["/key", "/operator", "/value", "/effect"].map(|p| text(toleration, p));
        if seen.contains(&key) {
            errs.push(FieldError::duplicate(
                format!("scheduling.tolerations[{i}]"),
                toleration.clone(),
            ));
        } else {
            seen.push(key);
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn valid_class_and_row() {
        let class = json!({"metadata": {"name": "gvisor"}, "handler": "runsc",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
            "scheduling": {"nodeSelector": {"runtime": "gvisor"},
                "tolerations": [{"key": "runtime", "operator": "Equal", "value": "gvisor", "effect": "NoSchedule"}]}});
        assert!(RuntimeClassStrategy.validate(&class).is_empty());
        assert_eq!(RuntimeClassStrategy.cells(&class)[1], "runsc");
        let headers: Vec<String> = RuntimeClassStrategy
            .columns()
            .iter()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(headers, ["Name", "Handler", "Age"]);
        assert!(RuntimeClassStrategy.allow_create_on_update());
    }

    #[test]
    fn refusals() {
        let missing = json!({"metadata": {"name": "x"}});
        assert_eq!(
            messages(&RuntimeClassStrategy.validate(&missing)),
            [
                "handler: Invalid value: \"\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        let bad = json!({"handler": "runc", "overhead": {"podFixed": {"cpu": "-1", "gpu": "1"}},
            "scheduling": {"nodeSelector": {"bad key!": "x"},
                "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "a", "operator": "Exists"}]}});
        assert_eq!(
            messages(&RuntimeClassStrategy.validate(&bad)),
            [
                "overhead.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                "overhead.limits[gpu]: Invalid value: \"gpu\": must be a standard resource for containers",
                "scheduling.nodeSelector: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "scheduling.tolerations[1]: Duplicate value: {\"key\":\"a\",\"operator\":\"Exists\"}",
            ]
        );
    }

    #[test]
    fn handler_is_immutable() {
        let old = json!({"metadata": {"name": "x"}, "handler": "runc"});
        let mut new = old.clone();
        new["handler"] = json!("crun");
        assert_eq!(
            messages(&RuntimeClassStrategy.validate_update(&new, &old)),
            ["handler: Invalid value: \"crun\": field is immutable"]
        );
    }
}
