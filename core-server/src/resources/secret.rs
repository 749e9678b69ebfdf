//! Secrets: `stringData` is merged into `data`, `type` defaults to Opaque
//! and never changes, and the well-known types require their keys.

use apimachinery::error::FieldError;
use apimachinery::table::{self, Column};
use base64::Engine;
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::data;

const FIELDS: &[&str] = &["data"];

/// The rules of `v1/Secret`.
pub struct SecretStrategy;

/// Moves `stringData` into `data`, base64-encoded; `stringData` wins.
fn merge_string_data(obj: &mut Value) {
    let Some(Value::Object(strings)) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    if !obj["data"].is_object() {
        obj["data"] = json!({});
    }
    for (key, value) in strings {
        let text = value.as_str().unwrap_or_default();
        obj["data"][key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

fn secret_type(obj: &Value) -> &str {
    obj.get("type").and_then(Value::as_str).unwrap_or("Opaque")
}

fn has_key(obj: &Value, key: &str) -> bool {
    obj.pointer(&format!("/data/{key}")).is_some()
}

impl Strategy for SecretStrategy {
    fn defaults(&self, obj: &mut Value) {
        if obj
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            obj["type"] = json!("Opaque");
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        merge_string_data(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        merge_string_data(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = data::validate_keys(obj, FIELDS);
        if data::total_size(obj, FIELDS) > data::MAX_BYTES {
            errs.push(FieldError::too_long("data", data::MAX_BYTES));
        }
        let required: &[&str] = match secret_type(obj) {
            "kubernetes.io/tls" => &["tls.crt", "tls.key"],
            "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
            "kubernetes.io/dockercfg" => &[".dockercfg"],
            "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
            _ => &[],
        };
        for key in required {
            if !has_key(obj, key) {
                errs.push(FieldError::required(format!("data[{key}]"), ""));
            }
        }
        if secret_type(obj) == "kubernetes.io/basic-auth"
            && !has_key(obj, "username")
            && !has_key(obj, "password")
        {
            errs.push(FieldError::required("data[username]", ""));
        }
        if secret_type(obj) == "kubernetes.io/service-account-token"
            && obj
                .pointer("/metadata/annotations/kubernetes.io~1service-account.name")
                .is_none()
        {
            errs.push(FieldError::required(
                "metadata.annotations[kubernetes.io/service-account.name]",
                "",
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if secret_type(new) != secret_type(old) {
            errs.push(FieldError::invalid(
                "type",
                secret_type(new),
                "field is immutable",
            ));
        }
        errs.extend(data::validate_immutable(new, old, FIELDS));
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new("Type", "string", "The type of the secret"),
            Column::new("Data", "string", "The number of entries in the secret"),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            json!(secret_type(obj)),
            json!(data::count(obj, FIELDS)),
            table::age_cell(obj),
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["type"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_is_merged_and_types_checked() {
        let mut s = json!({"metadata": {"name": "s"}, "data": {"a": "b2xk"}, "stringData": {"a": "new", "b": "x"}});
        SecretStrategy.prepare_for_create(&mut s);
        SecretStrategy.defaults(&mut s);
        assert_eq!(s["data"], json!({"a": "bmV3", "b": "eA=="}));
        assert!(s.get("stringData").is_none());
        assert_eq!(s["type"], "Opaque");
        let tls = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
        assert_eq!(SecretStrategy.validate(&tls).len(), 1);
        let changed = SecretStrategy.validate_update(
            &json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}),
            &s,
        );
        assert_eq!(changed.len(), 1);
    }
}
