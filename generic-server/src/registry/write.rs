//! Create, update, patch and delete: the order in which a strategy's hooks, admission and validation run, fixed here for every resource.

use super::*;
use crate::strategy::Strategy;

/// A strategy's validation of a create (or, with `old`, an update through
/// `subresource`); on the
/// blocking pool where it may be long (expressions with a cost budget), so
/// that it never holds a thread that serves other requests.
async fn validate(
    strategy: &Arc<dyn Strategy>,
    subresource: &str,
    new: &Value,
    old: Option<&Value>,
) -> Vec<apimachinery::error::FieldError> {
    let run =
        |strategy: &dyn Strategy, subresource: &str, new: &Value, old: Option<&Value>| match old {
            None => strategy.validate(new),
            Some(old) => strategy.validate_subresource_update(subresource, new, old),
        };
    if !strategy.validation_is_costly() {
        return run(strategy.as_ref(), subresource, new, old);
    }
    let (strategy, new, old) = (strategy.clone(), new.clone(), old.cloned());
    let subresource = subresource.to_string();
    crate::runtime::offload(move || run(strategy.as_ref(), &subresource, &new, old.as_ref())).await
}

/// How many names a create with `generateName` tries (kube's
/// `maxNameGenerationCreateAttempts`).
const NAME_GENERATION_ATTEMPTS: usize = 8;

impl Store {
    /// Creates an object.
    pub async fn create(
        &self,
        namespace: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Written> {
        self.create_inner(namespace, obj, opts, false).await
    }

    /// Creates an object; `tracked` when an apply already set its
    /// managedFields. A name generated from `generateName` that is taken
    /// is generated again, up to [`NAME_GENERATION_ATTEMPTS`] in all
    /// (kube's RetryGenerateName): the client never sees the collision.
    pub(super) async fn create_inner(
        &self,
        namespace: &str,
        obj: Value,
        opts: &WriteOptions,
        tracked: bool,
    ) -> Result<Written> {
        let named = |field: &str| {
            obj.pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_str)
                .is_some_and(|name| !name.is_empty())
        };
        if named("name") || !named("generateName") {
            return self.create_once(namespace, obj, opts, tracked).await;
        }
        let mut attempt = 1;
        loop {
            match self
                .create_once(namespace, obj.clone(), opts, tracked)
                .await
            {
                Err(Error::AlreadyExists { .. }) if attempt < NAME_GENERATION_ATTEMPTS => {
                    attempt += 1;
                }
                written => return written,
            }
        }
    }

    /// One attempt at a create.
    async fn create_once(
        &self,
        namespace: &str,
        mut obj: Value,
        opts: &WriteOptions,
        tracked: bool,
    ) -> Result<Written> {
        let mut warnings = Vec::new();
        obj = self.decode_object(obj, opts, &mut warnings)?;
        self.set_namespace(&mut obj, namespace)?;
        let meta = meta_mut(&mut obj);
        if meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| !rv.is_empty())
        {
            return Err(Error::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let generate_name = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
            && !generate_name.is_empty()
        {
            meta.insert(
                "name".into(),
                Value::String(format!("{generate_name}{}", random_suffix())),
            );
        }
        meta.insert(
            "uid".into(),
            Value::String(uuid::Uuid::new_v4().to_string()),
        );
        meta.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
        for field in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(field);
        }
        if self.resource.strategy.tracks_generation() {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
        let strategy = &self.resource.strategy;
        strategy.prepare_for_create(&mut obj);
        strategy.defaults(&mut obj);
        let name = meta_str(&obj, "name").to_string();
        let attrs = self.attributes(
            Operation::Create,
            "",
            namespace,
            &name,
            None,
            &opts.user,
            opts.dry_run,
        );
        // What the writer sent (defaulted, as kube's decoder defaults) is
        // what its managedFields entry owns: recorded before mutating
        // admission adds anything, as kube's create handler does.
        if !tracked {
            self.track(None, &mut obj, "", opts);
        }
        self.admission.admit(&attrs, &mut obj).await?;
        let mut errs =
            validation::object_meta(&obj, self.resource.namespaced, strategy.name_rule());
        errs.extend(validate(strategy, "", &obj, None).await);
        if !errs.is_empty() {
            return Err(self
                .invalid(&name, errs)
                .with_warnings(attrs.take_warnings()));
        }
        self.admission.validate(&attrs, Some(&obj)).await?;
        warnings.extend(attrs.take_warnings());
        warnings.extend(strategy.warnings(&obj));
        if opts.dry_run {
            return Ok(Written {
                object: obj,
                created: true,
                warnings,
            });
        }
        let bytes = self.stored(&obj).await?;
        let revision = self
            .storage
            .create(&self.key(namespace, &name), bytes)
            .await
            .map_err(|e| storage_error(self, &name, e))?;
        set_resource_version(&mut obj, revision);
        Ok(Written {
            object: obj,
            created: true,
            warnings,
        })
    }

    /// Replaces an object (PUT), or its status (`subresource = "status"`).
    pub async fn update(
        &self,
        namespace: &str,
        name: &str,
        subresource: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Written> {
        if subresource == "scale" {
            return self.update_scale(namespace, name, obj, opts).await;
        }
        let mut warnings = Vec::new();
        let mut obj = self.decode_object(obj, opts, &mut warnings)?;
        let body_name = meta_str(&obj, "name");
        if body_name != name {
            return Err(Error::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        self.set_namespace(&mut obj, namespace)?;
        let mut written = self
            .guaranteed_update(namespace, name, subresource, opts, false, |_| {
                Ok(obj.clone())
            })
            .await;
        if let Err(Error::NotFound { .. }) = &written {
            if subresource.is_empty() && self.resource.strategy.allow_create_on_update() {
                let mut fresh = obj.clone();
                meta_mut(&mut fresh).remove("resourceVersion");
                written = self.create(namespace, fresh, opts).await;
            }
        }
        let mut written = written?;
        warnings.append(&mut written.warnings);
        written.warnings = warnings;
        Ok(written)
    }

    /// Patches an object (or its status).
    pub async fn patch(
        &self,
        namespace: &str,
        name: &str,
        subresource: &str,
        kind: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Written> {
        if subresource == "scale" {
            return self.patch_scale(namespace, name, kind, body, opts).await;
        }
        if kind == PatchType::StrategicMerge && !self.resource.strategic_merge_patch {
            return Err(crate::codec::unsupported_media_type(&[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]));
        }
        if kind == PatchType::Apply {
            return self.apply(namespace, name, subresource, body, opts).await;
        }
        let schema = self.patch_schema.clone();
        self.guaranteed_update(namespace, name, subresource, opts, false, |current| {
            let patch_schema = schema
                .as_ref()
                .map(|s| patch::strategic::Schema::new(&s.root, s.components.as_ref()));
            let patched = patch::apply_patch(kind, current, body, patch_schema)?;
            super::metadata::check_name(&patched, name, namespace)?;
            // A strategic patch that gives a field a value of the wrong
            // type: kube's 422 on the patch, in its converter's words.
            if kind == PatchType::StrategicMerge
                && let Err(crate::Error::Decode(e)) = self.resource.codec.normalize(patched.clone())
                && let Some(why) = crate::codec::cannot_restore(&e)
            {
                let quoted = serde_json::from_slice::<Value>(body)
                    .map(|p| patch::go_format(&p))
                    .unwrap_or_default();
                return Err(Error::invalid(
                    "",
                    "",
                    "",
                    vec![FieldError::invalid("patch", quoted, why)],
                ));
            }
            Ok(patched)
        })
        .await
    }

    /// The update loop: read, compute the new object, check, write with a
    /// revision comparison, and retry on a lost race (a caller that named a
    /// resourceVersion then gets its 409 from the check against the state
    /// read again; a patch, computed from that state, goes on as kube's does).
    pub(super) async fn guaranteed_update(
        &self,
        namespace: &str,
        name: &str,
        subresource: &str,
        opts: &WriteOptions,
        tracked: bool,
        compute: impl Fn(&Value) -> Result<Value>,
    ) -> Result<Written> {
        let strategy = &self.resource.strategy;
        for _attempt in 0..16 {
            let stored = self.read_stored(namespace, name).await?;
            let Some(Stored {
                object: old,
                revision,
                stale,
            }) = stored
            else {
                return Err(self.not_found(name));
            };
            // kube defaults what it reads from storage: an object stored
            // before a default was added compares as if it had it.
            let mut old = old;
            strategy.defaults(&mut old);
            let mut warnings = Vec::new();
            let computed = compute(&old)?;
            let mut new = self.decode_object(computed, opts, &mut warnings)?;
            self.set_namespace(&mut new, namespace)?;
            let requested_rv = meta_str(&new, "resourceVersion").to_string();
            // "0" reads as 0, which kube takes as no precondition at all.
            let precondition = !requested_rv.is_empty() && requested_rv != "0";
            if precondition && requested_rv != revision.to_string() {
                return Err(self.conflict(name));
            }
            let mut new = self.merge_subresource(subresource, new, &old);
            self.carry_system_metadata(&mut new, &old);
            if subresource.is_empty() {
                strategy.prepare_for_update(&mut new, &old);
            }
            strategy.defaults(&mut new);
            let attrs = self.attributes(
                Operation::Update,
                subresource,
                namespace,
                name,
                Some(&old),
                &opts.user,
                opts.dry_run,
            );
            // Recorded before mutating admission, as at create.
            if !tracked {
                self.track(Some(&old), &mut new, subresource, opts);
            }
            self.admission.admit(&attrs, &mut new).await?;
            let mut errs =
                validation::object_meta(&new, self.resource.namespaced, strategy.name_rule());
            errs.extend(validation::object_meta_update(&new, &old));
            errs.extend(validate(strategy, subresource, &new, Some(&old)).await);
            if !errs.is_empty() {
                return Err(self
                    .invalid(name, errs)
                    .with_warnings(attrs.take_warnings()));
            }
            self.admission.validate(&attrs, Some(&new)).await?;
            warnings.extend(attrs.take_warnings());
            warnings.extend(strategy.warnings(&new));
            self.bump_generation(&mut new, &old);
            let key = self.key(namespace, name);
            if is_being_deleted(&new) && finalizers(&new).is_empty() && strategy.may_remove(&new) {
                if opts.dry_run {
                    return Ok(Written {
                        object: new,
                        created: false,
                        warnings,
                    });
                }
                match self.storage.delete(&key, Some(revision)).await {
                    Ok(_) => {
                        return Ok(Written {
                            object: new,
                            created: false,
                            warnings,
                        });
                    }
                    // Read again: a caller's resourceVersion is checked
                    // against the new state above (a patch's is the state's own).
                    Err(crate::Error::Conflict { .. }) => continue,
                    Err(e) => return Err(storage_error(self, name, e)),
                }
            }
            // A stale value is rewritten, so that it takes the current key.
            if unchanged(&new, &old) && !stale {
                return Ok(Written {
                    object: old,
                    created: false,
                    warnings,
                });
            }
            if opts.dry_run {
                return Ok(Written {
                    object: new,
                    created: false,
                    warnings,
                });
            }
            match self
                .storage
                .update(&key, self.stored(&new).await?, revision)
                .await
            {
                Ok(rev) => {
                    set_resource_version(&mut new, rev);
                    return Ok(Written {
                        object: new,
                        created: false,
                        warnings,
                    });
                }
                // As above: the next attempt checks a caller's resourceVersion.
                Err(crate::Error::Conflict { .. }) => continue,
                Err(e) => return Err(storage_error(self, name, e)),
            }
        }
        Err(self.conflict(name))
    }

    /// Deletes an object, or marks it for deletion while finalizers remain.
    pub async fn delete(
        &self,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted> {
        let key = self.key(namespace, name);
        for _attempt in 0..16 {
            let Some(Stored {
                object: mut obj,
                revision,
                ..
            }) = self.read_stored(namespace, name).await?
            else {
                return Err(self.not_found(name));
            };
            if let Some(uid) = &opts.uid {
                let actual = meta_str(&obj, "uid");
                if uid != actual {
                    return Err(self.precondition_failed(
                        name,
                        &format!("UID in precondition: {uid}, UID in object meta: {actual}"),
                    ));
                }
            }
            if let Some(rv) = &opts.resource_version {
                if rv != &revision.to_string() {
                    return Err(self.precondition_failed(
                        name,
                        &format!("ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {revision}"),
                    ));
                }
            }
            let attrs = self.attributes(
                Operation::Delete,
                "",
                namespace,
                name,
                Some(&obj),
                &opts.user,
                opts.dry_run,
            );
            self.admission.validate(&attrs, None).await?;
            let warnings = attrs.take_warnings();
            let mut keep =
                self.resource.strategy.begin_delete(&mut obj)? || !finalizers(&obj).is_empty();
            if is_being_deleted(&obj) {
                return Ok(Deleted {
                    object: obj,
                    gone: false,
                    warnings: warnings.clone(),
                });
            }
            // Orphan and Foreground deletion wait for the garbage collector.
            let finalizer = match opts.propagation_policy.as_deref() {
                Some("Orphan") => Some("orphan"),
                Some("Foreground") => Some("foregroundDeletion"),
                _ => None,
            };
            if let Some(finalizer) = finalizer {
                let list = meta_mut(&mut obj)
                    .entry("finalizers")
                    .or_insert_with(|| json!([]));
                if let Some(list) = list.as_array_mut() {
                    if !list.iter().any(|f| f == finalizer) {
                        list.push(json!(finalizer));
                    }
                }
                keep = true;
            }
            if keep {
                let meta = meta_mut(&mut obj);
                meta.entry("deletionTimestamp")
                    .or_insert_with(|| Value::String(now_rfc3339()));
                meta.entry("deletionGracePeriodSeconds").or_insert(json!(0));
                if opts.dry_run {
                    return Ok(Deleted {
                        object: obj,
                        gone: false,
                        warnings: warnings.clone(),
                    });
                }
                match self
                    .storage
                    .update(&key, self.stored(&obj).await?, revision)
                    .await
                {
                    Ok(rev) => {
                        set_resource_version(&mut obj, rev);
                        return Ok(Deleted {
                            object: obj,
                            gone: false,
                            warnings: warnings.clone(),
                        });
                    }
                    Err(crate::Error::Conflict { .. }) => continue,
                    Err(e) => return Err(storage_error(self, name, e)),
                }
            }
            if opts.dry_run {
                return Ok(Deleted {
                    object: obj,
                    gone: true,
                    warnings: warnings.clone(),
                });
            }
            match self.storage.delete(&key, Some(revision)).await {
                Ok(_) => {
                    return Ok(Deleted {
                        object: obj,
                        gone: true,
                        warnings: warnings.clone(),
                    });
                }
                Err(crate::Error::Conflict { .. }) => continue,
                Err(e) => return Err(storage_error(self, name, e)),
            }
        }
        Err(self.conflict(name))
    }

    /// Deletes every object matching the list options.
    pub async fn delete_collection(
        &self,
        namespace: &str,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Vec<Value>> {
        let mut all = list.clone();
        all.limit = 0;
        all.continue_token = None;
        let matching = self.list(namespace, &all).await?;
        let mut deleted = Vec::new();
        for obj in matching.items {
            match self.delete(&obj.namespace, &obj.name, opts).await {
                Ok(d) => deleted.push(d.object),
                Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    pub(super) fn precondition_failed(&self, name: &str, detail: &str) -> Error {
        Error::Conflict {
            resource: self.resource.group_resource(),
            name: name.into(),
            detail: format!("Precondition failed: {detail}"),
        }
    }

    pub(super) fn attributes<'a>(
        &'a self,
        operation: Operation,
        subresource: &'a str,
        namespace: &'a str,
        name: &'a str,
        old: Option<&'a Value>,
        user: &'a UserInfo,
        dry_run: bool,
    ) -> Attributes<'a> {
        Attributes {
            operation,
            resource: &self.resource,
            subresource,
            namespace,
            name,
            old,
            user,
            dry_run,
            equivalents: self.equivalents.as_ref(),
            warnings: Default::default(),
        }
    }

    /// Checks apiVersion and kind (defaulting them), then the structure,
    /// honouring `fieldValidation`.
    pub(super) fn decode_object(
        &self,
        mut obj: Value,
        opts: &WriteOptions,
        warnings: &mut Vec<String>,
    ) -> Result<Value> {
        let Value::Object(map) = &mut obj else {
            return Err(Error::bad_request(format!(
                "the object provided is unrecognized (must be of type {})",
                self.resource.kind
            )));
        };
        let (api_version, kind) = (self.resource.api_version(), self.resource.kind.clone());
        let got_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let got_kind = map
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !got_version.is_empty() && got_version != api_version {
            return Err(Error::bad_request(format!(
                "the API version in the data ({got_version}) does not match the expected API version ({api_version})"
            )));
        }
        if !got_kind.is_empty() && got_kind != kind {
            // A built-in kind's decoder (kube's scheme) names the conversion it lacks.
            if self.resource.strategic_merge_patch {
                let version = &self.resource.version;
                let group = &self.resource.group;
                let internal = if group.is_empty() {
                    "core"
                } else {
                    group.split('.').next().unwrap_or(group)
                };
                return Err(Error::bad_request(format!(
                    "{got_kind} in version {version:?} cannot be handled as a {kind}: \
                     converting ({version}.{got_kind}) to ({internal}.{kind}): unknown conversion"
                )));
            }
            return Err(Error::bad_request(format!(
                "the kind in the data ({got_kind}) does not match the expected kind ({kind})"
            )));
        }
        map.insert("apiVersion".into(), Value::String(api_version.clone()));
        map.insert("kind".into(), Value::String(kind.clone()));
        let normalized = self.resource.codec.normalize(obj).map_err(|e| {
            Error::bad_request(format!(
                "{kind} in version {:?} cannot be handled as a {kind}: {e}",
                self.resource.version
            ))
        })?;
        if !normalized.unknown_fields.is_empty() {
            match opts.field_validation {
                FieldValidation::Strict => {
                    let list = normalized
                        .unknown_fields
                        .iter()
                        .map(|f| format!("unknown field {f:?}"))
                        .collect::<Vec<_>>();
                    return Err(Error::bad_request(format!(
                        "{kind} in version {:?} cannot be handled as a {kind}: strict decoding error: {}",
                        self.resource.version,
                        list.join(", ")
                    )));
                }
                FieldValidation::Warn => {
                    warnings.extend(
                        normalized
                            .unknown_fields
                            .iter()
                            .map(|f| format!("unknown field {f:?}")),
                    );
                }
                FieldValidation::Ignore => {}
            }
        }
        Ok(normalized.object)
    }
}
