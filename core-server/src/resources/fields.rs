//! The small vocabulary the strategies here share: reading and defaulting
//! fields of JSON objects, the checks kube repeats everywhere (non-negative
//! numbers, immutable fields, label selectors, ports), and the way kube's
//! printers format values in Table cells.

use apimachinery::error::{FieldError, FieldErrorKind};
use apimachinery::label_selector::LabelSelector;
use apimachinery::validation;
use serde_json::{Map, Value, json};

/// The string at a JSON pointer, `""` if absent.
pub fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The integer at a JSON pointer.
pub fn int(obj: &Value, pointer: &str) -> Option<i64> {
    obj.pointer(pointer).and_then(Value::as_i64)
}

/// The array at a JSON pointer, empty if absent.
pub fn items<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The object at a JSON pointer.
pub fn object<'a>(obj: &'a Value, pointer: &str) -> Option<&'a Map<String, Value>> {
    obj.pointer(pointer).and_then(Value::as_object)
}

/// Whether a JSON pointer holds something other than null.
pub fn is_set(obj: &Value, pointer: &str) -> bool {
    obj.pointer(pointer).is_some_and(|v| !v.is_null())
}

/// Whether a JSON pointer holds a non-empty string, array or object, a number or `true`.
pub fn has(obj: &Value, pointer: &str) -> bool {
    match obj.pointer(pointer) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    }
}

/// Sets a value at a JSON pointer unless something (other than null or `""`) is there.
pub fn default(obj: &mut Value, pointer: &str, value: Value) {
    let empty = match obj.pointer(pointer) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    };
    if empty {
        set(obj, pointer, value);
    }
}

/// Sets a value at a JSON pointer (`~1` and `~0` escapes allowed), creating objects on the way.
pub fn set(obj: &mut Value, pointer: &str, value: Value) {
    let mut cur = obj;
    let parts: Vec<String> = pointer
        .trim_start_matches('/')
        .split('/')
        .map(unescape)
        .collect();
    let Some((last, parents)) = parts.split_last() else {
        return;
    };
    for part in parents {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        cur = map.entry(part.clone()).or_insert_with(|| json!({}));
    }
    if !cur.is_object() {
        *cur = json!({});
    }
    if let Some(map) = cur.as_object_mut() {
        map.insert(last.clone(), value);
    }
}

/// A map key escaped for use in a JSON pointer (`a/b` becomes `a~1b`).
pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn unescape(part: &str) -> String {
    part.replace("~1", "/").replace("~0", "~")
}

/// Removes the field at a JSON pointer.
pub fn remove(obj: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
    let target = if parent.is_empty() {
        Some(obj)
    } else {
        obj.pointer_mut(parent)
    };
    if let Some(map) = target.and_then(Value::as_object_mut) {
        map.remove(&unescape(key));
    }
}

/// Runs `f` on every element of the array at a JSON pointer.
pub fn each_mut(obj: &mut Value, pointer: &str, mut f: impl FnMut(&mut Value)) {
    if let Some(list) = obj.pointer_mut(pointer).and_then(Value::as_array_mut) {
        list.iter_mut().for_each(&mut f);
    }
}

/// The value at a JSON pointer, `null` if absent (for error values).
pub fn value(obj: &Value, pointer: &str) -> Value {
    obj.pointer(pointer).cloned().unwrap_or(Value::Null)
}

/// kube's `ValidateNonnegativeField`, when the field is set.
pub fn non_negative(obj: &Value, pointer: &str, field: &str) -> Option<FieldError> {
    int(obj, pointer)
        .filter(|n| *n < 0)
        .map(|n| FieldError::invalid(field, n, "must be greater than or equal to 0"))
}

/// Collects the non-negative checks of several `(pointer, field)` pairs.
pub fn non_negatives(obj: &Value, fields: &[(&str, &str)]) -> Vec<FieldError> {
    fields
        .iter()
        .filter_map(|(pointer, field)| non_negative(obj, pointer, field))
        .collect()
}

/// A field that may not change on update (`field is immutable`).
pub fn immutable(new: &Value, old: &Value, pointer: &str, field: &str) -> Option<FieldError> {
    (new.pointer(pointer) != old.pointer(pointer))
        .then(|| FieldError::invalid(field, value(new, pointer), "field is immutable"))
}

/// For a kind whose generation kube leaves unset at create but bumps on
/// every change of its spec (CSIDriver): `metadata.generation` one past the
/// old object's (0 when it has none) when the value at `pointer` changed.
pub fn bump_generation_on_change(new: &mut Value, old: &Value, pointer: &str) {
    if new.pointer(pointer) != old.pointer(pointer) {
        let next = int(old, "/metadata/generation").unwrap_or(0) + 1;
        set(new, "/metadata/generation", json!(next));
    }
}

/// kube's `ValidateCSIDriverName`: required, at most 63 characters, and a
/// DNS subdomain once lowercased.
pub fn csi_driver_name(name: &str, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(field, ""));
    }
    if name.len() > 63 {
        errs.push(FieldError::too_long(field, 63));
    }
    for msg in validation::dns1123_subdomain(&name.to_lowercase()) {
        errs.push(FieldError::invalid(field, name, msg));
    }
    errs
}

/// A list longer than allowed (`Too many`).
pub fn too_many(field: impl Into<String>, max: usize) -> FieldError {
    FieldError {
        kind: FieldErrorKind::TooMany,
        field: field.into(),
        value: None,
        detail: format!("must have at most {max} items"),
    }
}

/// kube's `IsValidPortNum` for a port number field.
pub fn port_number(port: i64, field: &str) -> Option<FieldError> {
    (!(1..=65535).contains(&port))
        .then(|| FieldError::invalid(field, port, "must be between 1 and 65535, inclusive"))
}

/// kube's `IsValidPortName` (an IANA service name).
pub fn port_name(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters".to_string());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if !name.chars().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// Checks a `metav1.LabelSelector` as kube's `ValidateLabelSelector` does.
pub fn label_selector(selector: &Value, field: &str) -> Vec<FieldError> {
    let mut errs = validation::labels(selector.get("matchLabels"), &format!("{field}.matchLabels"));
    for (i, expr) in items(selector, "/matchExpressions").iter().enumerate() {
        let path = format!("{field}.matchExpressions[{i}]");
        let values = items(expr, "/values");
        match text(expr, "/operator") {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                format!("{path}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                format!("{path}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(FieldError::invalid(
                format!("{path}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = text(expr, "/key");
        for msg in validation::qualified_name(key) {
            errs.push(FieldError::invalid(format!("{path}.key"), key, msg));
        }
    }
    errs
}

/// Whether a label selector object selects nothing in particular (absent or `{}`).
pub fn selector_is_empty(selector: Option<&Value>) -> bool {
    selector.is_none_or(|s| !has(s, "/matchLabels") && !has(s, "/matchExpressions"))
}

/// A label selector object as a selector (nothing for null or malformed).
pub fn selector_of(selector: Option<&Value>) -> LabelSelector {
    selector
        .and_then(|s| LabelSelector::from_label_selector_object(s).ok())
        .unwrap_or_else(LabelSelector::nothing)
}

/// kube's `FormatLabelSelector`: the selector string, `<none>` if empty.
pub fn format_selector(selector: Option<&Value>) -> String {
    let formatted = match selector {
        Some(s) if !s.is_null() => LabelSelector::from_label_selector_object(s)
            .map(|s| s.to_string())
            .unwrap_or_else(|_| "<error>".into()),
        _ => String::new(),
    };
    none_if_empty(formatted)
}

/// kube's `FormatLabels`: `k=v` pairs sorted by key, `<none>` if empty.
pub fn format_labels(labels: Option<&Value>) -> String {
    let mut pairs: Vec<String> = labels
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    none_if_empty(pairs.join(","))
}

/// `<none>` for an empty string, as kube's printers show it.
pub fn none_if_empty(s: String) -> String {
    if s.is_empty() { "<none>".into() } else { s }
}

/// The value of a field for a field selector: the string at a dotted path, `""` if absent.
pub fn field_string(obj: &Value, path: &str) -> String {
    generic_server::strategy::string_at(obj, path).unwrap_or_default()
}

/// Seconds since the Unix epoch of an RFC3339 timestamp (UTC or with an offset).
pub fn epoch_seconds(ts: &str) -> Option<i64> {
    let (date, rest) = ts.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (clock, offset) = match rest.find(['Z', 'z', '+', '-']) {
        Some(i) => rest.split_at(i),
        None => return None,
    };
    let clock = clock.split('.').next()?;
    let mut c = clock.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (c.next()??, c.next()??, c.next()??);
    let offset_seconds = match offset.chars().next()? {
        'Z' | 'z' => 0,
        sign => {
            let (oh, om) = offset[1..].split_once(':')?;
            let secs = oh.parse::<i64>().ok()? * 3600 + om.parse::<i64>().ok()? * 60;
            if sign == '-' { -secs } else { secs }
        }
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    Some(days * 86400 + hh * 3600 + mm * 60 + ss - offset_seconds)
}

/// A condition of `status.conditions` by type.
pub fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    items(obj, "/status/conditions")
        .iter()
        .find(|c| text(c, "/type") == kind)
}

/// Whether a condition of this type has status `True`.
pub fn condition_true(obj: &Value, kind: &str) -> bool {
    condition(obj, kind).is_some_and(|c| text(c, "/status") == "True")
}

/// An integer cell, 0 if absent.
pub fn int_cell(obj: &Value, pointer: &str) -> Value {
    json!(int(obj, pointer).unwrap_or(0))
}

/// A string cell.
pub fn text_cell(obj: &Value, pointer: &str) -> Value {
    json!(text(obj, pointer))
}

/// An int-or-string value as kube prints it (`25%`, `1`).
pub fn int_or_string(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_defaults() {
        assert_eq!(epoch_seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(epoch_seconds("2024-03-01T12:00:05Z"), Some(1_709_294_405));
        assert_eq!(
            epoch_seconds("2024-03-01T13:00:05+01:00"),
            Some(1_709_294_405)
        );
        assert_eq!(epoch_seconds("nope"), None);
        let mut obj = json!({"spec": {"a": ""}});
        default(&mut obj, "/spec/a", json!("x"));
        default(&mut obj, "/spec/b/c", json!(1));
        default(&mut obj, "/spec/b/c", json!(2));
        assert_eq!(obj, json!({"spec": {"a": "x", "b": {"c": 1}}}));
        remove(&mut obj, "/spec/b");
        assert_eq!(obj, json!({"spec": {"a": "x"}}));
        set(
            &mut obj,
            &format!("/spec/{}", escape("example.com/gpu")),
            json!(1),
        );
        assert_eq!(obj["spec"]["example.com/gpu"], 1);
    }

    #[test]
    fn selectors_and_labels() {
        let sel = json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In"}]});
        let errs = label_selector(&sel, "spec.selector");
        assert_eq!(
            errs[0].to_string(),
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
        );
        assert_eq!(
            format_selector(Some(&json!({"matchLabels": {"b": "2", "a": "1"}}))),
            "a=1,b=2"
        );
        assert_eq!(format_selector(None), "<none>");
        assert_eq!(format_labels(Some(&json!({"z": "1", "a": "2"}))), "a=2,z=1");
        assert!(selector_is_empty(Some(&json!({}))));
        assert_eq!(port_name("http"), Vec::<String>::new());
        assert_eq!(port_name("HTTP").len(), 2);
    }
}
