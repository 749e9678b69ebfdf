//! managedFields entries and the field manager around them (kube's
//! `k8s.io/apimachinery/pkg/util/managedfields/internal`).
//!
//! kube stacks its field manager in this order, outermost first; the functions
//! here follow it:
//!
//! 1. last-applied updater: after a `kubectl` apply, rewrites the client-side
//!    apply annotation if the object has one ([`sync_last_applied`]);
//! 2. last-applied manager: a `kubectl` apply whose conflicts are all with
//!    fields the client-side annotation already held is forced
//!    ([`apply_upgrading_client_side`]);
//! 3. skip-non-applied: an apply to an object without managedFields first
//!    gives every existing field to `before-first-apply`; an update of such an
//!    object (not a create) is not tracked at all;
//! 4. cap: more than ten update entries are folded, oldest first, into
//!    `ancient-changes` buckets per API version;
//! 5. managed-fields updater and strip-meta: an update's changed fields join
//!    the manager's previous entry, the time is set when something changed, and
//!    `apiVersion`, `kind` and server-set metadata never appear in an entry;
//! 6. structured merge: [`track_update`] and [`track_apply`] (structured-merge-diff's
//!    `merge.Updater`).

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;

use super::error::{ApplyError, Conflict, Operation};
use super::fieldpath::{PathElement, Set, go_json, path_string};
use super::schema::{Schema, TypeNode, zero_object};
use super::typed::{self, Errors};

/// How many update entries an object keeps before the oldest are folded.
const MAX_UPDATE_MANAGERS: usize = 10;
/// The manager of the buckets old update entries are folded into.
const ANCIENT_CHANGES: &str = "ancient-changes";
/// The manager that gets the fields of an object applied to for the first time.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";
/// The annotation `kubectl apply` (client-side) keeps its configuration in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The only manager whose applies touch the client-side apply annotation.
const KUBECTL: &str = "kubectl";
/// kube's limit on the total size of an object's annotations.
const ANNOTATIONS_SIZE_LIMIT: usize = 256 * 1024;
/// Paths never recorded in an entry (kube's strip-meta manager).
const STRIPPED: [&[&str]; 12] = [
    &["apiVersion"],
    &["kind"],
    &["metadata"],
    &["metadata", "name"],
    &["metadata", "namespace"],
    &["metadata", "creationTimestamp"],
    &["metadata", "selfLink"],
    &["metadata", "uid"],
    &["metadata", "clusterName"],
    &["metadata", "generation"],
    &["metadata", "managedFields"],
    &["metadata", "resourceVersion"],
];

/// Who wrote an entry: kube's manager identifier without fields and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManagerId {
    manager: String,
    operation: Operation,
    /// Empty for appliers: an applier is the same manager whatever version it applies.
    api_version: String,
    subresource: String,
}

impl ManagerId {
    /// The identity of a manager writing with `operation`.
    pub(crate) fn new(
        manager: &str,
        operation: Operation,
        api_version: &str,
        subresource: &str,
    ) -> ManagerId {
        ManagerId {
            manager: manager.to_owned(),
            operation,
            api_version: match operation {
                Operation::Apply => String::new(),
                Operation::Update => api_version.to_owned(),
            },
            subresource: subresource.to_owned(),
        }
    }

    /// The identifier kube keys entries by: the entry's JSON without fields and time.
    fn identifier(&self) -> String {
        let mut parts = Vec::new();
        let strings = [
            ("manager", self.manager.as_str()),
            ("operation", self.operation.as_str()),
            ("apiVersion", self.api_version.as_str()),
            ("subresource", self.subresource.as_str()),
        ];
        for (name, value) in strings {
            if !value.is_empty() {
                parts.push(format!(
                    "\"{name}\":{}",
                    go_json(&Value::String(value.to_owned()))
                ));
            }
        }
        format!("{{{}}}", parts.join(","))
    }
}

/// One managedFields entry.
#[derive(Debug, Clone)]
struct Entry {
    id: ManagerId,
    api_version: String,
    time: Option<String>,
    set: Set,
}

/// An object's managedFields, keyed by manager identifier.
#[derive(Debug, Clone, Default)]
pub(crate) struct Managed {
    entries: BTreeMap<String, Entry>,
}

impl Managed {
    /// Reads `metadata.managedFields` (absent or null: no entries).
    pub(crate) fn decode(list: Option<&Value>) -> Result<Managed, ApplyError> {
        let items = match list {
            None | Some(Value::Null) => return Ok(Managed::default()),
            Some(Value::Array(items)) => items,
            Some(other) => {
                return Err(ApplyError::Invalid(format!(
                    "managedFields must be a list, got {other}"
                )));
            }
        };
        let mut managed = Managed::default();
        for (index, item) in items.iter().enumerate() {
            let entry = decode_entry(index, item)?;
            managed.entries.insert(entry.id.identifier(), entry);
        }
        Ok(managed)
    }

    /// The entries as `metadata.managedFields`, in kube's order; `None` when there are none.
    pub(crate) fn encode(&self) -> Option<Value> {
        if self.entries.is_empty() {
            return None;
        }
        let mut entries: Vec<&Entry> = self.entries.values().collect();
        entries.sort_by(|p, q| {
            p.id.operation
                .cmp(&q.id.operation)
                .then_with(|| seconds(p.time.as_deref()).cmp(&seconds(q.time.as_deref())))
                .then_with(|| p.id.manager.cmp(&q.id.manager))
                .then_with(|| p.api_version.cmp(&q.api_version))
                .then_with(|| p.id.subresource.cmp(&q.id.subresource))
        });
        Some(Value::Array(
            entries.into_iter().map(encode_entry).collect(),
        ))
    }

    /// Whether there are no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops entries that own nothing.
    fn drop_empty(&mut self) {
        self.entries.retain(|_, entry| !entry.set.is_empty());
    }
}

/// Reads one entry, with kube's errors.
fn decode_entry(index: usize, item: &Value) -> Result<Entry, ApplyError> {
    let text = |name: &str| item.get(name).and_then(Value::as_str).unwrap_or("");
    let operation = Operation::parse(text("operation"))
        .ok_or_else(|| ApplyError::Invalid("operation must be `Apply` or `Update`".into()))?;
    let api_version = text("apiVersion");
    if api_version.is_empty() {
        return Err(ApplyError::Invalid(
            "apiVersion must not be empty".to_owned(),
        ));
    }
    match text("fieldsType") {
        "FieldsV1" => {}
        "" => {
            return Err(ApplyError::Invalid(format!(
                "missing fieldsType in managed fields entry {index}"
            )));
        }
        other => {
            return Err(ApplyError::Invalid(format!(
                "invalid fieldsType {other:?} in managed fields entry {index}"
            )));
        }
    }
    let set = match item.get("fieldsV1") {
        None | Some(Value::Null) => Set::new(),
        Some(fields) => Set::from_fields_v1(fields)
            .map_err(|error| ApplyError::Invalid(format!("error decoding set: {error}")))?,
    };
    Ok(Entry {
        id: ManagerId::new(text("manager"), operation, api_version, text("subresource")),
        api_version: api_version.to_owned(),
        time: item.get("time").and_then(Value::as_str).map(normalize_time),
        set,
    })
}

/// Writes one entry with kube's key order, empty strings left out.
fn encode_entry(entry: &Entry) -> Value {
    let mut out = Map::new();
    let mut text = |name: &str, value: &str| {
        if !value.is_empty() {
            out.insert(name.to_owned(), Value::String(value.to_owned()));
        }
    };
    text("manager", &entry.id.manager);
    text("operation", entry.id.operation.as_str());
    text("apiVersion", &entry.api_version);
    if let Some(time) = &entry.time {
        text("time", time);
    }
    text("fieldsType", "FieldsV1");
    out.insert("fieldsV1".to_owned(), entry.set.to_fields_v1());
    if !entry.id.subresource.is_empty() {
        out.insert(
            "subresource".to_owned(),
            Value::String(entry.id.subresource.clone()),
        );
    }
    Value::Object(out)
}

/// A time as `metav1.Time` writes it (RFC 3339, UTC, whole seconds); unparsable text kept as is.
fn normalize_time(text: &str) -> String {
    let format = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    OffsetDateTime::parse(text, &Rfc3339)
        .ok()
        .and_then(|time| time.to_offset(time::UtcOffset::UTC).format(&format).ok())
        .unwrap_or_else(|| text.to_owned())
}

/// The Unix seconds of a time (0 when absent or unparsable, as kube sorts them).
fn seconds(time: Option<&str>) -> i64 {
    time.and_then(|time| OffsetDateTime::parse(time, &Rfc3339).ok())
        .map_or(0, OffsetDateTime::unix_timestamp)
}

/// What every step needs: the type, the reset fields and the stripped fields.
pub(crate) struct Context<'a> {
    schema: Schema<'a>,
    root: TypeNode<'a>,
    ignored: Set,
    stripped: Set,
}

impl<'a> Context<'a> {
    /// The context of one endpoint.
    pub(crate) fn new(schema: Schema<'a>) -> Context<'a> {
        let field_path = |names: &[&str]| -> Vec<PathElement> {
            names
                .iter()
                .map(|name| PathElement::Field((*name).to_owned()))
                .collect()
        };
        let mut ignored = Set::new();
        for field in schema.reset() {
            let names: Vec<&str> = field.split('.').filter(|name| !name.is_empty()).collect();
            ignored.insert(&field_path(&names));
        }
        let mut stripped = Set::new();
        for names in STRIPPED {
            stripped.insert(&field_path(names));
        }
        Context {
            schema,
            root: schema.root(),
            ignored,
            stripped,
        }
    }
}

/// Records an update: `manager` gets what changed from `old` to `new` (merged into its
/// previous update entry), other entries lose it, and every entry loses what was removed.
pub(crate) fn track_update(
    context: &Context<'_>,
    old: &Value,
    new: &Value,
    managed: &mut Managed,
    id: &ManagerId,
    now: &str,
) -> Result<(), Errors> {
    let mut comparison = typed::compare(old, new, context.root)?;
    comparison.exclude(&context.ignored);
    let changed = comparison.changed();
    for entry in managed.entries.values_mut() {
        entry.set = entry
            .set
            .difference(&changed)
            .difference(&comparison.removed);
    }
    managed.drop_empty();
    let current = changed
        .difference(&comparison.removed)
        .recursive_difference(&context.ignored)
        .difference(&context.stripped);
    if !current.is_empty() {
        let key = id.identifier();
        let previous = managed.entries.remove(&key).map(|entry| entry.set);
        managed.entries.insert(
            key,
            Entry {
                id: id.clone(),
                api_version: id.api_version.clone(),
                time: Some(normalize_time(now)),
                set: match previous {
                    Some(previous) => current.union(&previous),
                    None => current,
                },
            },
        );
    }
    cap_update_managers(managed);
    Ok(())
}

/// Folds the oldest update entries into per-version `ancient-changes` buckets until at most
/// [`MAX_UPDATE_MANAGERS`] remain.
fn cap_update_managers(managed: &mut Managed) {
    let mut updaters: Vec<(i64, String)> = managed
        .entries
        .iter()
        .filter(|(_, entry)| entry.id.operation == Operation::Update)
        .map(|(key, entry)| (seconds(entry.time.as_deref()), key.clone()))
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort();
    let mut remaining = updaters.len();
    let mut first_of_version: HashMap<String, String> = HashMap::new();
    for (_, key) in updaters {
        if remaining <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(entry) = managed.entries.get(&key).cloned() else {
            continue;
        };
        let bucket_id = ManagerId::new(ANCIENT_CHANGES, Operation::Update, &entry.api_version, "");
        let bucket_key = bucket_id.identifier();
        let first = match first_of_version.get(&entry.api_version) {
            None => {
                first_of_version.insert(entry.api_version.clone(), key);
                continue;
            }
            // An existing bucket is never folded into itself.
            Some(_) if key == bucket_key => continue,
            Some(first) => first.clone(),
        };
        if !managed.entries.contains_key(&bucket_key)
            && let Some(first_entry) = managed.entries.remove(&first)
        {
            let bucket = Entry {
                id: bucket_id.clone(),
                ..first_entry
            };
            managed.entries.insert(bucket_key.clone(), bucket);
        }
        managed.entries.remove(&key);
        if let Some(bucket) = managed.entries.get_mut(&bucket_key) {
            bucket.set = entry.set.union(&bucket.set);
            bucket.time = entry.time;
        }
        remaining -= 1;
    }
}

/// Who applies, at which version, whether forced, and when.
#[derive(Clone, Copy)]
struct ApplyRequest<'r> {
    id: &'r ManagerId,
    api_version: &'r str,
    force: bool,
    now: &'r str,
}

/// One manager's fields an apply would take without force.
struct OwnerConflict {
    key: String,
    id: ManagerId,
    api_version: String,
    set: Set,
}

/// Why the structured apply stopped.
enum Failure {
    /// Other managers own fields the configuration changes.
    Conflicts(Vec<OwnerConflict>),
    /// Anything else.
    Error(ApplyError),
}

impl From<ApplyError> for Failure {
    fn from(error: ApplyError) -> Failure {
        Failure::Error(error)
    }
}

impl Failure {
    /// The error the caller sees.
    fn into_error(self) -> ApplyError {
        match self {
            Failure::Error(error) => error,
            Failure::Conflicts(conflicts) => ApplyError::Conflicts(
                conflicts
                    .iter()
                    .flat_map(|conflict| {
                        conflict.set.paths().into_iter().map(|path| Conflict {
                            manager: conflict.id.manager.clone(),
                            operation: conflict.id.operation,
                            api_version: conflict.api_version.clone(),
                            subresource: conflict.id.subresource.clone(),
                            field: path_string(&path),
                        })
                    })
                    .collect(),
            ),
        }
    }
}

/// Applies a configuration (structured-merge-diff's `Updater.Apply`): merges it, prunes
/// what the applier dropped, checks ownership, and makes the applier's entry exactly the
/// configuration's fields. Returns the new object.
fn track_apply(
    context: &Context<'_>,
    live: &Value,
    config: &Value,
    managed: &mut Managed,
    request: ApplyRequest<'_>,
) -> Result<Value, Failure> {
    let ApplyRequest {
        id,
        api_version,
        force,
        now,
    } = request;
    let invalid = |what: &str, error: Errors| ApplyError::Invalid(format!("{what}: {error}"));
    let merged = typed::merge(live, config, context.root)
        .map_err(|error| invalid("failed to merge config", error))?;
    let key = id.identifier();
    let previous = managed.entries.get(&key);
    let last = previous.map(|entry| entry.set.clone());
    let set = typed::to_field_set(config, context.root)
        .map_err(|error| invalid("failed to get field set", error))?
        .recursive_difference(&context.ignored);
    let entry = Entry {
        id: id.clone(),
        api_version: api_version.to_owned(),
        time: previous.and_then(|entry| entry.time.clone()),
        set,
    };
    managed.entries.insert(key.clone(), entry);
    let new = prune(context, merged, managed, last)
        .map_err(|error| invalid("failed to prune fields", error))?;

    let mut comparison = typed::compare(live, &new, context.root)
        .map_err(|error| invalid("failed to compare objects", error))?;
    comparison.exclude(&context.ignored);
    let changed = comparison.changed();
    let conflicts: Vec<OwnerConflict> = managed
        .entries
        .iter()
        .filter(|(other, _)| **other != key)
        .filter_map(|(other, entry)| {
            let set = entry.set.intersection(&changed);
            (!set.is_empty()).then(|| OwnerConflict {
                key: other.clone(),
                id: entry.id.clone(),
                api_version: entry.api_version.clone(),
                set,
            })
        })
        .collect();
    if !force && !conflicts.is_empty() {
        return Err(Failure::Conflicts(conflicts));
    }
    for conflict in &conflicts {
        if let Some(entry) = managed.entries.get_mut(&conflict.key) {
            entry.set = entry.set.difference(&conflict.set);
        }
    }
    for (other, entry) in managed.entries.iter_mut() {
        if *other != key {
            entry.set = entry.set.difference(&comparison.removed);
        }
    }
    managed.drop_empty();
    if let Some(entry) = managed.entries.get_mut(&key) {
        entry.set = entry.set.difference(&context.stripped);
        if !typed::values_equal(live, &new) {
            entry.time = Some(normalize_time(now));
        }
    }
    managed.drop_empty();
    Ok(new)
}

/// Removes what the applier owned last time and no longer applies, unless another manager
/// (or the new configuration) owns it, or the applier never owned it.
fn prune(
    context: &Context<'_>,
    merged: Value,
    managed: &Managed,
    last: Option<Set>,
) -> Result<Value, Errors> {
    let Some(last) = last.filter(|last| !last.is_empty()) else {
        return Ok(merged);
    };
    let root = context.root;
    let named = |set: &Set| typed::ensure_named_fields_are_members(set, root);
    let last = named(&last);
    let pruned = typed::remove_items(&merged, &last, root);

    // Add back what any manager owns.
    let owned = managed
        .entries
        .values()
        .fold(Set::new(), |all, entry| all.union(&entry.set));
    let merged_set = named(&typed::to_field_set(&merged, root)?);
    let pruned_set = named(&typed::to_field_set(&pruned, root)?);
    let removable = merged_set.difference(&pruned_set.union(&named(&owned)));
    let pruned = typed::remove_items(&merged, &removable, root);

    // Add back what the applier did not own last time.
    let pruned_set = named(&typed::to_field_set(&pruned, root)?);
    let removable = merged_set.difference(&pruned_set).intersection(&last);
    Ok(typed::remove_items(&merged, &removable, root))
}

/// Skip-non-applied, then the structured apply: an object applied to for the first time
/// has its existing fields given to `before-first-apply` first.
fn apply_tracking_existing(
    context: &Context<'_>,
    live: &Value,
    config: &Value,
    mut managed: Managed,
    request: ApplyRequest<'_>,
) -> Result<(Value, Managed), Failure> {
    if managed.is_empty() {
        let zero = zero_object(&context.schema, live);
        let before = ManagerId::new(
            BEFORE_FIRST_APPLY,
            Operation::Update,
            request.api_version,
            &request.id.subresource,
        );
        track_update(context, &zero, live, &mut managed, &before, request.now).map_err(|error| {
            ApplyError::Invalid(format!(
                "failed to create manager for existing fields: failed to update ManagedFields ({}): {error}",
                object_description(live)
            ))
        })?;
    }
    let object = track_apply(context, live, config, &mut managed, request)?;
    Ok((object, managed))
}

/// kube's last-applied manager: when `kubectl` meets conflicts only on fields its
/// client-side apply annotation held with the live values, the apply is forced.
fn apply_upgrading_client_side(
    context: &Context<'_>,
    live: &Value,
    config: &Value,
    managed: Managed,
    request: ApplyRequest<'_>,
) -> Result<(Value, Managed), ApplyError> {
    let attempt = apply_tracking_existing(context, live, config, managed.clone(), request);
    let conflicts = match attempt {
        Err(Failure::Conflicts(conflicts)) if request.id.manager == KUBECTL => conflicts,
        other => return other.map_err(Failure::into_error),
    };
    let Some(allowed) = allowed_by_last_applied(context, live, request.api_version) else {
        return Err(Failure::Conflicts(conflicts).into_error());
    };
    let remaining: Vec<OwnerConflict> = conflicts
        .into_iter()
        .filter_map(|conflict| {
            let set = conflict.set.difference(&allowed);
            (!set.is_empty()).then_some(OwnerConflict { set, ..conflict })
        })
        .collect();
    if !remaining.is_empty() {
        return Err(Failure::Conflicts(remaining).into_error());
    }
    let forced = ApplyRequest {
        force: true,
        ..request
    };
    apply_tracking_existing(context, live, config, managed, forced).map_err(Failure::into_error)
}

/// The fields of the client-side apply annotation whose values the live object still has.
fn allowed_by_last_applied(context: &Context<'_>, live: &Value, api_version: &str) -> Option<Set> {
    let text = annotation(live, LAST_APPLIED).filter(|text| !text.is_empty())?;
    let last: Value = serde_json::from_str(text).ok()?;
    let kind = last.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() || last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return None;
    }
    typed::validate(&last, context.root, true, false).ok()?;
    let set = typed::to_field_set(&last, context.root).ok()?;
    let comparison = typed::compare(&last, live, context.root).ok()?;
    Some(
        set.difference(&comparison.modified)
            .difference(&comparison.added)
            .difference(&comparison.removed),
    )
}

/// Records a create or update by `manager` in `new`'s managedFields (kube's `FieldManager.Update`
/// and `UpdateNoErrors`).
pub(crate) fn update(
    old: Option<&Value>,
    new: &mut Value,
    id: &ManagerId,
    now: &str,
    schema: Schema<'_>,
) {
    if !new.is_object() {
        return;
    }
    let context = Context::new(schema);
    let live_fields = old.and_then(managed_fields).cloned();
    let request_fields = managed_fields(new).cloned();
    let creating = old.is_none_or(|old| {
        old.pointer("/metadata/uid")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    });
    let mut managed = if !id.subresource.is_empty() {
        Managed::decode(live_fields.as_ref()).unwrap_or_default()
    } else if is_reset(request_fields.as_ref()) {
        Managed::default()
    } else {
        match Managed::decode(request_fields.as_ref()) {
            Ok(managed) if !managed.is_empty() => managed,
            _ => Managed::decode(live_fields.as_ref()).unwrap_or_default(),
        }
    };
    set_managed_fields(new, None);
    if managed.is_empty() && !creating {
        return;
    }
    let old_object = match old {
        Some(old) => without_managed_fields(old),
        None => zero_object(&schema, new),
    };
    match track_update(&context, &old_object, new, &mut managed, id, now) {
        Ok(()) => set_managed_fields(new, managed.encode()),
        Err(_) => set_managed_fields(new, live_fields),
    }
}

/// Server-side apply of `config` to `live` (kube's `FieldManager.Apply`), returning the
/// new object with its managedFields.
pub(crate) fn apply(
    live: Option<&Value>,
    config: &Value,
    id: &ManagerId,
    api_version: &str,
    force: bool,
    now: &str,
    schema: Schema<'_>,
) -> Result<Value, ApplyError> {
    if !config.is_object() {
        return Err(ApplyError::BadRequest(
            "error decoding YAML: the applied configuration must be an object".to_owned(),
        ));
    }
    if managed_fields(config).is_some_and(|fields| !fields.is_null()) {
        return Err(ApplyError::BadRequest(
            "metadata.managedFields must be nil".to_owned(),
        ));
    }
    let context = Context::new(schema);
    typed::validate(config, context.root, true, false).map_err(|error| {
        ApplyError::Invalid(format!(
            "failed to create typed patch object ({}): {error}",
            object_description(config)
        ))
    })?;
    let live_object = live.map_or_else(|| Value::Object(Map::new()), without_managed_fields);
    typed::validate(&live_object, context.root, false, true).map_err(|error| {
        ApplyError::Invalid(format!(
            "failed to create typed live object ({}): {error}",
            object_description(&live_object)
        ))
    })?;
    let managed = Managed::decode(live.and_then(managed_fields)).map_err(|error| {
        ApplyError::Invalid(format!("failed to decode managed fields: {error}"))
    })?;
    let request = ApplyRequest {
        id,
        api_version,
        force,
        now,
    };
    let (mut object, managed) =
        apply_upgrading_client_side(&context, &live_object, config, managed, request)?;
    if id.manager == KUBECTL {
        sync_last_applied(&mut object, config);
    }
    set_managed_fields(&mut object, managed.encode());
    Ok(object)
}

/// kube's last-applied updater: rewrites an existing client-side apply annotation with the
/// applied configuration (Go's JSON: sorted keys, trailing newline).
fn sync_last_applied(object: &mut Value, config: &Value) {
    if annotation(object, LAST_APPLIED).is_none_or(str::is_empty) {
        return;
    }
    let mut applied = config.clone();
    if let Some(metadata) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
        match metadata.get_mut("annotations") {
            Some(Value::Object(annotations)) => {
                annotations.remove(LAST_APPLIED);
            }
            Some(_) => {
                metadata.remove("annotations");
            }
            None => {}
        }
    }
    let text = format!("{}\n", go_json(&applied));
    let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    annotations.insert(LAST_APPLIED.to_owned(), Value::String(text));
    let size: usize = annotations
        .iter()
        .map(|(key, value)| key.len() + value.as_str().map_or(0, str::len))
        .sum();
    if size > ANNOTATIONS_SIZE_LIMIT {
        annotations.remove(LAST_APPLIED);
    }
}

/// An annotation's value.
fn annotation<'v>(object: &'v Value, name: &str) -> Option<&'v str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(name))
        .and_then(Value::as_str)
}

/// Whether a request's managedFields ask for a reset: `[]` or `[{}]`.
fn is_reset(fields: Option<&Value>) -> bool {
    const KNOWN: [&str; 7] = [
        "manager",
        "operation",
        "apiVersion",
        "time",
        "fieldsType",
        "fieldsV1",
        "subresource",
    ];
    match fields {
        Some(Value::Array(items)) => match items.as_slice() {
            [] => true,
            [Value::Object(entry)] => KNOWN.iter().all(|name| match entry.get(*name) {
                None | Some(Value::Null) => true,
                Some(Value::String(text)) => text.is_empty() && *name != "fieldsV1",
                Some(_) => false,
            }),
            _ => false,
        },
        _ => false,
    }
}

/// `metadata.managedFields`, if present.
fn managed_fields(object: &Value) -> Option<&Value> {
    object.get("metadata")?.get("managedFields")
}

/// A copy of an object without `metadata.managedFields`.
fn without_managed_fields(object: &Value) -> Value {
    let mut copy = object.clone();
    set_managed_fields(&mut copy, None);
    copy
}

/// Sets `metadata.managedFields`, or removes it for `None`.
fn set_managed_fields(object: &mut Value, fields: Option<Value>) {
    let Some(object) = object.as_object_mut() else {
        return;
    };
    match fields {
        Some(fields) => {
            let metadata = object
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(metadata) = metadata.as_object_mut() {
                metadata.insert("managedFields".to_owned(), fields);
            }
        }
        None => {
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("managedFields");
            }
        }
    }
}

/// An object as kube names it in errors: `namespace/name; group/version, Kind=kind`.
fn object_description(object: &Value) -> String {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let api_version = text("/apiVersion");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!(
        "{}/{}; {group}/{version}, Kind={}",
        text("/metadata/namespace"),
        text("/metadata/name"),
        text("/kind")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identifiers_match_kube() {
        let update = ManagerId::new("kubectl", Operation::Update, "apps/v1", "");
        assert_eq!(
            update.identifier(),
            r#"{"manager":"kubectl","operation":"Update","apiVersion":"apps/v1"}"#
        );
        let apply = ManagerId::new("kubectl", Operation::Apply, "apps/v1", "status");
        assert_eq!(
            apply.identifier(),
            r#"{"manager":"kubectl","operation":"Apply","subresource":"status"}"#
        );
    }

    #[test]
    fn entries_decode_and_encode_in_kube_order() {
        let list = json!([
            {"manager": "b", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:02Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:b": {}}}},
            {"manager": "a", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:01.500Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}},
            {"manager": "z", "operation": "Apply", "apiVersion": "v1", "time": "2025-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:z": {}}}, "subresource": "status"}
        ]);
        let managed = Managed::decode(Some(&list)).unwrap();
        let encoded = managed.encode().unwrap();
        let order: Vec<&str> = encoded
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| entry["manager"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["z", "a", "b"]);
        assert_eq!(encoded[1]["time"], "2024-01-01T00:00:01Z");
        assert_eq!(encoded[0]["subresource"], "status");
        let keys: Vec<&String> = encoded[0].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "manager",
                "operation",
                "apiVersion",
                "time",
                "fieldsType",
                "fieldsV1",
                "subresource"
            ]
        );
    }

    #[test]
    fn bad_entries_are_rejected_like_kube() {
        let bad = |entry: Value| {
            Managed::decode(Some(&json!([entry])))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            bad(json!({"operation": "Patch", "apiVersion": "v1", "fieldsType": "FieldsV1"})),
            "operation must be `Apply` or `Update`"
        );
        assert_eq!(
            bad(json!({"operation": "Update", "fieldsType": "FieldsV1"})),
            "apiVersion must not be empty"
        );
        assert_eq!(
            bad(json!({"operation": "Update", "apiVersion": "v1"})),
            "missing fieldsType in managed fields entry 0"
        );
    }

    #[test]
    fn resets_are_recognised() {
        assert!(is_reset(Some(&json!([]))));
        assert!(is_reset(Some(&json!([{}]))));
        assert!(!is_reset(Some(&json!([{"manager": "x"}]))));
        assert!(!is_reset(Some(&Value::Null)));
        assert!(!is_reset(None));
    }

    #[test]
    fn old_update_entries_fold_into_ancient_changes() {
        let mut managed = Managed::default();
        for index in 0..12 {
            let id = ManagerId::new(&format!("m{index:02}"), Operation::Update, "v1", "");
            let mut set = Set::new();
            set.insert(&[PathElement::Field(format!("f{index}"))]);
            managed.entries.insert(
                id.identifier(),
                Entry {
                    id,
                    api_version: "v1".to_owned(),
                    time: Some(format!("2024-01-01T00:00:{index:02}Z")),
                    set,
                },
            );
        }
        cap_update_managers(&mut managed);
        assert_eq!(managed.entries.len(), 10);
        let bucket = ManagerId::new(ANCIENT_CHANGES, Operation::Update, "v1", "").identifier();
        let bucket = &managed.entries[&bucket];
        assert_eq!(bucket.set.paths().len(), 3);
        assert_eq!(bucket.time.as_deref(), Some("2024-01-01T00:00:02Z"));
    }

    #[test]
    fn objects_are_described_like_kube() {
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                            "metadata": {"name": "web", "namespace": "default"}});
        assert_eq!(
            object_description(&object),
            "default/web; apps/v1, Kind=Deployment"
        );
        let object = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}});
        assert_eq!(object_description(&object), "/n; /v1, Kind=Node");
    }
}
