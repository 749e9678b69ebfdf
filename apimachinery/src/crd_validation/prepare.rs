//! What kube's registry does to a CRD before validating it: v1 defaulting
//! (`SetDefaults_CustomResourceDefinition`) and the strategy's
//! `PrepareForCreate` / `PrepareForUpdate` (status and stored versions).

use serde_json::{Map, Value, json};

/// Applies v1 defaults: `names.singular` (lowercased kind), `names.listKind`
/// (`<kind>List`), `conversion.strategy: None`, and port 443 on a
/// conversion webhook service.
pub fn default_crd(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let empty = |names: &Map<String, Value>, k: &str| {
            names
                .get(k)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        };
        if empty(names, "singular") && !kind.is_empty() {
            names.insert("singular".into(), json!(kind.to_lowercase()));
        }
        if empty(names, "listKind") && !kind.is_empty() {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    match spec.get_mut("conversion") {
        None | Some(Value::Null) => {
            spec.insert("conversion".into(), json!({"strategy": "None"}));
        }
        Some(conversion) => {
            if let Some(service) = conversion
                .pointer_mut("/webhook/clientConfig/service")
                .and_then(Value::as_object_mut)
            {
                service.entry("port").or_insert(json!(443));
            }
        }
    }
}

/// The storage version's name, if one is marked.
fn storage_version(crd: &Value) -> Option<String> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name")?.as_str().map(str::to_string))
}

fn add_stored_version(crd: &mut Value) {
    let Some(storage) = storage_version(crd) else {
        return;
    };
    let Some(status) = crd.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let stored = status.entry("storedVersions").or_insert_with(|| json!([]));
    if let Value::Array(list) = stored {
        if !list.iter().any(|v| v.as_str() == Some(storage.as_str())) {
            list.push(json!(storage));
        }
    } else {
        *stored = json!([storage]);
    }
}

/// On create: the status is reset, generation set to 1, and the storage
/// version recorded in `status.storedVersions`.
pub fn prepare_for_create(crd: &mut Value) {
    let Some(obj) = crd.as_object_mut() else {
        return;
    };
    obj.insert("status".into(), json!({}));
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("generation".into(), json!(1));
    }
    add_stored_version(crd);
}

/// On update: the status is kept from `old`, generation bumped when the
/// spec changed, and a new storage version appended to `storedVersions`.
pub fn prepare_for_update(new: &mut Value, old: &Value) {
    let Some(obj) = new.as_object_mut() else {
        return;
    };
    obj.insert(
        "status".into(),
        old.get("status").cloned().unwrap_or_else(|| json!({})),
    );
    let generation = old
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let changed = obj.get("spec") != old.get("spec");
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert(
            "generation".into(),
            json!(if changed { generation + 1 } else { generation }),
        );
    }
    add_stored_version(new);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_defaults() {
        let mut crd = json!({"spec": {"names": {"kind": "Widget", "plural": "widgets"}}});
        default_crd(&mut crd);
        assert_eq!(crd["spec"]["names"]["singular"], "widget");
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
        let mut crd = json!({"spec": {"names": {"kind": "W"}, "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "s", "namespace": "n"}}}}}});
        default_crd(&mut crd);
        assert_eq!(
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"],
            443
        );
    }

    #[test]
    fn stored_versions_follow_storage() {
        let mut crd = json!({"metadata": {"name": "w"}, "spec": {"versions": [{"name": "v1", "storage": true}]}, "status": {"x": 1}});
        prepare_for_create(&mut crd);
        assert_eq!(crd["status"], json!({"storedVersions": ["v1"]}));
        assert_eq!(crd["metadata"]["generation"], 1);
        let old = crd.clone();
        let mut new = json!({"metadata": {"name": "w"}, "spec": {"versions": [{"name": "v1"}, {"name": "v2", "storage": true}]}});
        prepare_for_update(&mut new, &old);
        assert_eq!(new["status"]["storedVersions"], json!(["v1", "v2"]));
        assert_eq!(new["metadata"]["generation"], 2);
    }
}
