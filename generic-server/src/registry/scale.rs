//! The `scale` subresource: an `autoscaling/v1` Scale read from and written to the object.

use super::*;

impl Store {
    pub(super) fn scale_spec(&self) -> Result<&ScaleSpec> {
        self.resource
            .scale
            .as_ref()
            .ok_or_else(Error::path_not_found)
    }

    /// The autoscaling/v1 Scale of an object.
    pub fn to_scale(&self, obj: &Value) -> Result<Value> {
        let spec = self.scale_spec()?;
        let replicas = |pointer: &str| obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0);
        let selector = match &spec.selector {
            ScaleSelector::LabelSelector(pointer) => match obj.pointer(pointer) {
                Some(sel) => LabelSelector::from_label_selector_object(sel)
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
                None => String::new(),
            },
            ScaleSelector::Map(pointer) => obj
                .pointer(pointer)
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default(),
            ScaleSelector::String(pointer) => obj
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            ScaleSelector::None => String::new(),
        };
        let meta = obj.get("metadata").cloned().unwrap_or_default();
        let mut metadata = Map::new();
        for field in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            if let Some(v) = meta.get(field) {
                metadata.insert(field.into(), v.clone());
            }
        }
        let mut status = json!({"replicas": replicas(&spec.status_replicas)});
        if !selector.is_empty() {
            status["selector"] = json!(selector);
        }
        Ok(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": metadata,
            "spec": {"replicas": replicas(&spec.spec_replicas)},
            "status": status,
        }))
    }

    /// Sets the parent's replicas from a Scale, checking the Scale.
    pub(super) fn from_scale(&self, current: &Value, scale: &Value) -> Result<Value> {
        let spec = self.scale_spec()?;
        let name = meta_str(current, "name");
        let rv = meta_str(scale, "resourceVersion");
        if !rv.is_empty() && rv != meta_str(current, "resourceVersion") {
            return Err(self.conflict(name));
        }
        let replicas = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if replicas < 0 {
            let cause = FieldError::invalid(
                "spec.replicas",
                replicas,
                "must be greater than or equal to 0",
            );
            return Err(Error::invalid("autoscaling", "Scale", name, vec![cause]));
        }
        let mut parent = current.clone();
        set_pointer(&mut parent, &spec.spec_replicas, json!(replicas));
        Ok(parent)
    }

    pub(super) fn decode_scale(&self, scale: Value) -> Result<Value> {
        use crate::codec::Codec;
        let got = (
            scale.get("apiVersion").and_then(Value::as_str),
            scale.get("kind").and_then(Value::as_str),
        );
        if !matches!(got, (None | Some("autoscaling/v1"), None | Some("Scale"))) {
            return Err(Error::bad_request(
                "the body of a scale request must be an autoscaling/v1 Scale",
            ));
        }
        crate::codec::TypedCodec::<k8s_openapi::api::autoscaling::v1::Scale>::default()
            .normalize(scale)
            .map(|n| n.object)
            .map_err(|e| {
                Error::bad_request(format!(
                    "Scale in version \"v1\" cannot be handled as a Scale: {e}"
                ))
            })
    }

    /// Replaces an object's replicas through its Scale.
    pub(super) async fn update_scale(
        &self,
        namespace: &str,
        name: &str,
        scale: Value,
        opts: &WriteOptions,
    ) -> Result<Written> {
        let scale = self.decode_scale(scale)?;
        let mut written = self
            .guaranteed_update(namespace, name, "scale", opts, false, |current| {
                self.from_scale(current, &scale)
            })
            .await?;
        written.object = self.to_scale(&written.object)?;
        Ok(written)
    }

    /// Patches an object's Scale.
    pub(super) async fn patch_scale(
        &self,
        namespace: &str,
        name: &str,
        kind: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Written> {
        let schema = self.patch_schema.clone();
        let mut written = self
            .guaranteed_update(namespace, name, "scale", opts, false, |current| {
                let scale = self.to_scale(current)?;
                let scale_schema = json!({"$ref": format!("{}io.k8s.api.autoscaling.v1.Scale", apimachinery::openapi::SCHEMA_PREFIX)});
                let lookup = schema.as_ref().map(|s| patch::strategic::Schema::new(&scale_schema, s.components.as_ref()));
                let patched = patch::apply_patch(kind, &scale, body, lookup)?;
                self.from_scale(current, &self.decode_scale(patched)?)
            })
            .await?;
        written.object = self.to_scale(&written.object)?;
        Ok(written)
    }
}
