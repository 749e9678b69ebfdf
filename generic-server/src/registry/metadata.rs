//! Object metadata the store keeps: resource versions, names, namespaces, generations and the system fields a client cannot change.

use super::*;

/// Sets the value at a JSON pointer, creating objects on the way.
pub fn set_pointer(obj: &mut Value, pointer: &str, value: Value) {
    let mut cur = obj;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let map = cur.as_object_mut().expect("just made an object");
        if i == parts.len() - 1 {
            map.insert(part.to_string(), value);
            return;
        }
        cur = map.entry(part.to_string()).or_insert_with(|| json!({}));
    }
}

/// Sets `metadata.resourceVersion`.
pub fn set_resource_version(obj: &mut Value, revision: i64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert(
            "resourceVersion".into(),
            Value::String(revision.to_string()),
        );
    }
}

pub(super) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub(super) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// The current time as kube serializes it (RFC3339, seconds).
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

pub(super) fn is_being_deleted(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

pub(super) fn finalizers(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Whether an update changes nothing but server-kept bookkeeping. A change
/// of field ownership alone (an apply of the values already there by
/// another manager) is a change, as in kube; the time of an entry is not.
pub(super) fn unchanged(new: &Value, old: &Value) -> bool {
    let strip = |obj: &Value| {
        let mut v = without_rv(obj);
        for entry in v
            .pointer_mut("/metadata/managedFields")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(entry) = entry.as_object_mut() {
                entry.remove("time");
            }
        }
        v
    };
    strip(new) == strip(old)
}

pub(super) fn without_rv(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    v
}

/// Five random characters from kube's alphabet (no vowels, no confusables).
pub fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

pub(super) fn parse_rv(rv: &str) -> Result<i64> {
    rv.parse::<i64>().ok().filter(|r| *r >= 0).ok_or_else(|| {
        Error::bad_request(format!(
            "Invalid value: {rv:?}: resourceVersion must be a non-negative integer"
        ))
    })
}

/// The stored form: JSON without `metadata.resourceVersion`.
pub(super) fn encode(obj: &Value) -> Result<Bytes> {
    serde_json::to_vec(&without_rv(obj))
        .map(Bytes::from)
        .map_err(Error::internal)
}

/// A patched or applied object names what its URL does (kube's
/// `checkName`): the same name, and no other namespace (none is taken to
/// be the URL's).
pub(super) fn check_name(obj: &Value, name: &str, namespace: &str) -> Result<()> {
    let object_name = meta_str(obj, "name");
    if object_name != name {
        return Err(Error::bad_request(format!(
            "the name of the object ({object_name}) does not match the name on the URL ({name})"
        )));
    }
    let object_namespace = meta_str(obj, "namespace");
    if !namespace.is_empty() && !object_namespace.is_empty() && object_namespace != namespace {
        return Err(Error::bad_request(format!(
            "the namespace of the object ({object_namespace}) does not match the namespace on the request ({namespace})"
        )));
    }
    Ok(())
}

/// Puts a namespaced object in the request's namespace (one it names must
/// be that one) and takes a cluster-scoped object out of any, as kube's
/// create and update handlers do before anything else looks at it.
pub(crate) fn ensure_namespace(obj: &mut Value, namespaced: bool, namespace: &str) -> Result<()> {
    let meta = meta_mut(obj);
    if !namespaced {
        meta.remove("namespace");
        return Ok(());
    }
    match meta.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() && ns != namespace => Err(Error::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            meta.insert("namespace".into(), Value::String(namespace.into()));
            Ok(())
        }
    }
}

impl Store {
    pub(super) fn set_namespace(&self, obj: &mut Value, namespace: &str) -> Result<()> {
        ensure_namespace(obj, self.resource.namespaced, namespace)
    }

    /// What a write through a subresource may change: `status` changes only
    /// the status; the main resource leaves a status subresource's status alone.
    pub(super) fn merge_subresource(
        &self,
        subresource: &str,
        mut new: Value,
        old: &Value,
    ) -> Value {
        if let Some(merged) = self
            .resource
            .strategy
            .update_subresource(subresource, &new, old)
        {
            return merged;
        }
        let has_status = self.resource.find_subresource("status").is_some();
        match subresource {
            "status" => {
                let mut merged = old.clone();
                match new.get_mut("status").map(Value::take) {
                    Some(status) => merged["status"] = status,
                    None => {
                        if let Some(m) = merged.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                let rv = meta_str(&new, "resourceVersion").to_string();
                meta_mut(&mut merged).insert("resourceVersion".into(), Value::String(rv));
                merged
            }
            "" if has_status => {
                match old.get("status") {
                    Some(status) => new["status"] = status.clone(),
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                new
            }
            _ => new,
        }
    }

    /// Fields the server owns are copied from the stored object.
    pub(super) fn carry_system_metadata(&self, new: &mut Value, old: &Value) {
        let old_meta = old.get("metadata").cloned().unwrap_or_default();
        let meta = meta_mut(new);
        for field in [
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old_meta.get(field) {
                Some(v) => meta.insert(field.into(), v.clone()),
                None => meta.remove(field),
            };
        }
        if meta
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
        {
            if let Some(uid) = old_meta.get("uid") {
                meta.insert("uid".into(), uid.clone());
            }
        }
        meta.remove("selfLink");
    }

    pub(super) fn bump_generation(&self, new: &mut Value, old: &Value) {
        if !self.resource.strategy.tracks_generation() {
            return;
        }
        let spec = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("metadata");
                m.remove("status");
            }
            v
        };
        let old_generation = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let deletion_started = is_being_deleted(new) && !is_being_deleted(old);
        let generation = if spec(new) != spec(old) || deletion_started {
            old_generation + 1
        } else {
            old_generation
        };
        meta_mut(new).insert("generation".into(), json!(generation));
    }
}
