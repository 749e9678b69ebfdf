//! What the apps/v1 controllers (and ReplicationControllers) share: the
//! selector and template rules, int-or-percent checks, the status a new
//! object starts with, and the Containers/Images/Selector table cells.

use apimachinery::error::FieldError;
use apimachinery::table::Column;
use serde_json::Value;

use super::fields::{self, int_or_string};
use super::pod_spec;
use apimachinery::label_selector::LabelSelector;

/// Checks `spec.selector` (a `metav1.LabelSelector`) and `spec.template`
/// against it, for a controller named `owner` (`ReplicaSet`, `StatefulSet`,
/// `DaemonSet`), as kube does for a missing selector: it is required (a
/// DaemonSet only finds that it matches no template) and selects nothing.
/// Decoding into the typed object gives a missing selector as `{}`, so an
/// empty one reads as missing here too (kube calls `{}` "empty selector is
/// invalid for deployment"; the common mistake is leaving it out).
pub fn validate_selector_and_template(obj: &Value, owner: &str) -> Vec<FieldError> {
    let selector = obj
        .pointer("/spec/selector")
        .filter(|s| !fields::selector_is_empty(Some(s)));
    let mut errs = Vec::new();
    match selector {
        Some(selector) => errs.extend(fields::label_selector(selector, "spec.selector")),
        None if owner != "DaemonSet" => errs.push(FieldError::required("spec.selector", "")),
        None => {}
    }
    errs.extend(pod_spec::validate_controller_template(
        obj.pointer("/spec/template"),
        "spec.template",
        &selector.map_or_else(LabelSelector::nothing, |s| fields::selector_of(Some(s))),
        owner,
    ));
    errs
}

/// apps/v1 selectors never change (`field is immutable`).
pub fn selector_immutable(new: &Value, old: &Value) -> Option<FieldError> {
    fields::immutable(new, old, "/spec/selector", "spec.selector")
}

/// The value of an int-or-percent (percent as its number), 0 if absent.
pub fn int_or_percent_value(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => s.trim_end_matches('%').parse().unwrap_or(0),
        _ => 0,
    }
}

/// kube's `ValidatePositiveIntOrPercent`, and optionally `IsNotMoreThan100Percent`.
pub fn validate_int_or_percent(
    v: Option<&Value>,
    field: &str,
    at_most_100_percent: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match v {
        Some(Value::String(s)) => {
            let number = s
                .strip_suffix('%')
                .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            match number {
                None => errs.push(FieldError::invalid(field, s.as_str(), "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")),
                Some(n) if at_most_100_percent && n.parse::<i64>().unwrap_or(0) > 100 => {
                    errs.push(FieldError::invalid(field, s.as_str(), "must not be greater than 100%"))
                }
                Some(_) => {}
            }
        }
        Some(Value::Number(n)) if n.as_i64().unwrap_or(0) < 0 => errs.push(FieldError::invalid(
            field,
            n.as_i64().unwrap_or(0),
            "must be greater than or equal to 0",
        )),
        _ => {}
    }
    errs
}

/// The int-or-percent at a pointer as a cell (`N/A` if absent, as the PDB printer shows).
pub fn int_or_percent_cell(obj: &Value, pointer: &str) -> String {
    int_or_string(obj.pointer(pointer)).unwrap_or_else(|| "N/A".into())
}

/// The wide Containers, Images and Selector columns of a controller.
pub fn wide_columns(with_selector: bool) -> Vec<Column> {
    let mut columns = vec![
        Column::new(
            "Containers",
            "string",
            "Names of each container in the template.",
        )
        .wide(),
        Column::new(
            "Images",
            "string",
            "Images referenced by each container in the template.",
        )
        .wide(),
    ];
    if with_selector {
        columns.push(
            Column::new(
                "Selector",
                "string",
                "Label selector for pods. Existing pods selected by this selector are the ones affected by this controller.",
            )
            .wide(),
        );
    }
    columns
}

/// The Containers and Images cells of the template at a pointer.
pub fn template_cells(obj: &Value, template: &str) -> [Value; 2] {
    let (containers, images) =
        pod_spec::containers_and_images(obj.pointer(&format!("{template}/spec")));
    [containers, images]
}

/// A selector cell as kube's `selector.String()` prints it (empty when none).
pub fn selector_string(obj: &Value) -> String {
    fields::selector_of(obj.pointer("/spec/selector")).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn int_or_percent_rules() {
        assert!(validate_int_or_percent(Some(&json!("25%")), "f", true).is_empty());
        assert_eq!(
            validate_int_or_percent(Some(&json!("125%")), "f", true)[0].detail,
            "must not be greater than 100%"
        );
        assert_eq!(
            validate_int_or_percent(Some(&json!(-1)), "f", true)[0].detail,
            "must be greater than or equal to 0"
        );
        assert_eq!(
            validate_int_or_percent(Some(&json!("x")), "f", true).len(),
            1
        );
        assert_eq!(int_or_percent_value(Some(&json!("25%"))), 25);
    }
}
