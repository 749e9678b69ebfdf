//! Server-side apply and managed fields.

use super::*;

impl Store {
    /// The schema server-side apply merges with, and the top-level fields a
    /// write through `subresource` may not touch.
    pub(super) fn apply_schema<'a>(
        &'a self,
        subresource: &str,
        root: &'a Option<Value>,
    ) -> apply::Schema<'a> {
        let schema = match (&self.patch_schema, root) {
            (Some(s), Some(root)) => apply::Schema::new(root, s.components.as_ref()),
            _ => apply::Schema::deduced(),
        };
        let schema = if self.resource.strategic_merge_patch {
            schema
        } else {
            schema.unstructured()
        };
        let has_status = self.resource.find_subresource("status").is_some();
        match subresource {
            "status" => schema.reset_fields(&["spec"]),
            "" if has_status => schema.reset_fields(&["status"]),
            _ => schema,
        }
    }

    /// Records a write's field ownership in `metadata.managedFields`.
    pub(super) fn track(
        &self,
        old: Option<&Value>,
        new: &mut Value,
        subresource: &str,
        opts: &WriteOptions,
    ) {
        let Some(manager) = opts
            .field_manager
            .as_ref()
            .or(opts.default_manager.as_ref())
        else {
            return;
        };
        let root = self.patch_schema.as_ref().map(|s| s.root.clone());
        let schema = self.apply_schema(subresource, &root);
        let _ = apply::update(
            old,
            new,
            manager,
            &self.resource.api_version(),
            subresource,
            &now_rfc3339(),
            schema,
        );
    }

    /// Server-side apply: creates the object if absent, otherwise merges the
    /// applied configuration, with conflicts between field managers.
    pub(super) async fn apply(
        &self,
        namespace: &str,
        name: &str,
        subresource: &str,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Written> {
        let Some(manager) = opts.field_manager.clone().filter(|m| !m.is_empty()) else {
            let cause = FieldError::required("fieldManager", "is required for apply patch");
            return Err(Error::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![cause],
            ));
        };
        let mut config = crate::codec::decode(crate::codec::MediaType::Yaml, body).await?;
        if !config.is_object() {
            return Err(Error::bad_request(
                "the applied configuration must be an object",
            ));
        }
        let (api_version, kind) = (self.resource.api_version(), self.resource.kind.clone());
        for (field, want) in [("apiVersion", &api_version), ("kind", &kind)] {
            match config.get(field).and_then(Value::as_str) {
                Some(got) if got == want => {}
                Some(got) => {
                    return Err(Error::bad_request(format!(
                        "the {field} in the data ({got}) does not match the expected {field} ({want})"
                    )));
                }
                None => return Err(Error::bad_request(format!("{field} must be set"))),
            }
        }
        super::metadata::check_name(&config, name, namespace)?;
        if self.resource.namespaced {
            meta_mut(&mut config).insert("namespace".into(), json!(namespace));
        }
        let root = self.patch_schema.as_ref().map(|s| s.root.clone());
        let run = |live: Option<&Value>| {
            let schema = self.apply_schema(subresource, &root);
            apply::apply(
                live,
                &config,
                &manager,
                &api_version,
                subresource,
                opts.force,
                &now_rfc3339(),
                schema,
            )
            .map_err(Error::from)
        };
        if self.read_stored(namespace, name).await?.is_none() {
            if !subresource.is_empty() {
                return Err(self.not_found(name));
            }
            let created = run(None)?;
            match self.create_inner(namespace, created, opts, true).await {
                Err(Error::AlreadyExists { .. }) => {}
                other => return other,
            }
        }
        self.guaranteed_update(namespace, name, subresource, opts, true, |current| {
            run(Some(current))
        })
        .await
    }
}
