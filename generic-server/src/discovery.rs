//! Discovery: what a server and its delegates serve, in every form kubectl
//! asks for: aggregated `apidiscovery.k8s.io/v2` on `/api` and `/apis`, and
//! the legacy `APIVersions`, `APIGroupList`, `APIGroup` and
//! `APIResourceList` documents. Each form is rendered once per change and
//! served with an ETag.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::watch;

use apimachinery::group_version::api_version;

use crate::resource::Resource;

/// The Content-Type of an aggregated discovery v2 answer.
pub const AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// The Content-Type of an aggregated discovery v2beta1 answer.
pub const AGGREGATED_V2BETA1: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// Which aggregated discovery version the Accept header asks for, if any.
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    for part in accept.split(',') {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        if params.contains(&"g=apidiscovery.k8s.io") && params.contains(&"as=APIGroupDiscoveryList")
        {
            if params.contains(&"v=v2") {
                return Some("v2");
            }
            if params.contains(&"v=v2beta1") {
                return Some("v2beta1");
            }
        }
    }
    None
}

/// kube-apiserver's group priorities (`groupPriorityMinimum`); higher first.
pub fn group_priority(group: &str) -> i64 {
    match group {
        "" => 18000,
        "apiregistration.k8s.io" => 18000,
        "apps" => 17800,
        "events.k8s.io" => 17750,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "autoscaling" => 17500,
        "batch" => 17400,
        "certificates.k8s.io" => 17300,
        "networking.k8s.io" => 17200,
        "policy" => 17100,
        "rbac.authorization.k8s.io" => 17000,
        "storage.k8s.io" => 16800,
        "admissionregistration.k8s.io" => 16700,
        "apiextensions.k8s.io" => 16700,
        "scheduling.k8s.io" => 16600,
        "coordination.k8s.io" => 16500,
        "node.k8s.io" => 16300,
        "discovery.k8s.io" => 16200,
        "flowcontrol.apiserver.k8s.io" => 16100,
        "resource.k8s.io" => 16100,
        "internal.apiserver.k8s.io" => 16000,
        "metrics.k8s.io" => 100,
        _ => 1000,
    }
}

/// The aggregated-discovery entry of one resource. As kube's, a
/// `responseKind` names its group and version only when they differ from
/// the resource's (a `scale` subresource's `autoscaling/v1` Scale).
pub fn resource_entry(r: &Resource) -> Value {
    let mut entry = json!({
        "resource": r.plural,
        "responseKind": {"group": "", "version": "", "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        entry["shortNames"] = json!(r.short_names);
    }
    // Only the legacy APIResourceList publishes it; the aggregated forms drop it.
    if let Some(hash) = r.storage_version_hash() {
        entry[STORAGE_VERSION_HASH] = json!(hash);
    }
    if !r.categories.is_empty() {
        entry["categories"] = json!(r.categories);
    }
    if !r.subresources.is_empty() {
        entry["subresources"] = r
            .subresources
            .iter()
            .map(|s| {
                let kind = s.kind.clone().unwrap_or_else(|| r.gvk());
                let (group, version) = if kind.group == r.group && kind.version == r.version {
                    ("", "")
                } else {
                    (kind.group.as_str(), kind.version.as_str())
                };
                json!({
                    "subresource": s.name,
                    "responseKind": {"group": group, "version": version, "kind": kind.kind},
                    "verbs": s.verbs,
                })
            })
            .collect();
    }
    entry
}

/// Aggregated-discovery group entries for a set of resources, one per group,
/// versions in the order given.
pub fn groups_from_resources<'a>(resources: impl IntoIterator<Item = &'a Resource>) -> Vec<Value> {
    let mut groups: Vec<(String, Vec<(String, Vec<Value>)>)> = Vec::new();
    for r in resources {
        let group = match groups.iter_mut().find(|(g, _)| *g == r.group) {
            Some(g) => g,
            None => {
                groups.push((r.group.clone(), Vec::new()));
                groups.last_mut().expect("just pushed")
            }
        };
        match group.1.iter_mut().find(|(v, _)| *v == r.version) {
            Some((_, list)) => list.push(resource_entry(r)),
            None => group.1.push((r.version.clone(), vec![resource_entry(r)])),
        }
    }
    groups
        .into_iter()
        .map(|(name, mut versions)| {
            versions.sort_by(|a, b| compare_versions(&a.0, &b.0));
            json!({
                "metadata": {"name": name, "creationTimestamp": null},
                "versions": versions.into_iter().map(|(version, resources)| json!({
                    "version": version, "resources": resources, "freshness": "Current",
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// Orders versions as kube does: GA before beta before alpha, higher
/// numbers first, and versions that look like none of these last, by name.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(v: &str) -> (u8, i64, i64, String) {
        let parse = |rest: &str| -> Option<(u8, i64, i64)> {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let major: i64 = digits.parse().ok()?;
            let tail = &rest[digits.len()..];
            if tail.is_empty() {
                return Some((0, major, 0));
            }
            for (class, word) in [(1u8, "beta"), (2u8, "alpha")] {
                if let Some(minor) = tail.strip_prefix(word) {
                    return Some((class, major, minor.parse().ok()?));
                }
            }
            None
        };
        match v.strip_prefix('v').and_then(parse) {
            Some((class, major, minor)) => (class, -major, -minor, String::new()),
            None => (3, 0, 0, v.to_string()),
        }
    }
    key(a).cmp(&key(b))
}

/// One aggregated-discovery group entry, shared: an unchanged group keeps
/// its `Arc` from one version of discovery to the next, so nothing about it
/// is merged, compared or rendered again.
pub type Group = Arc<Value>;

/// Merges group lists: earlier lists win for a group/version both serve;
/// the result is ordered core first, then by priority, then by name.
pub fn merge_groups(lists: &[&[Group]]) -> Vec<Group> {
    merge_groups_with(lists, &group_priority)
}

/// [`merge_groups`] with group priorities given (the aggregator's APIServices').
pub fn merge_groups_with(lists: &[&[Group]], priority: &dyn Fn(&str) -> i64) -> Vec<Group> {
    let mut merged: Vec<Group> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for list in lists {
        for group in *list {
            let name = group_name(group);
            let Some(&at) = index.get(name) else {
                index.insert(name, merged.len());
                merged.push(group.clone());
                continue;
            };
            let have: Vec<&Value> = versions(&merged[at])
                .iter()
                .map(|v| &v["version"])
                .collect();
            let extra: Vec<Value> = versions(group)
                .iter()
                .filter(|v| !have.contains(&&v["version"]))
                .cloned()
                .collect();
            if extra.is_empty() {
                continue;
            }
            let mut combined = Value::clone(&merged[at]);
            if let Some(Value::Array(vs)) = combined.get_mut("versions") {
                vs.extend(extra);
            }
            merged[at] = Arc::new(combined);
        }
    }
    merged.sort_by(|a, b| {
        let (na, nb) = (group_name(a), group_name(b));
        (!na.is_empty())
            .cmp(&!nb.is_empty())
            .then(priority(nb).cmp(&priority(na)))
            .then(na.cmp(nb))
    });
    merged
}

/// The name of a discovery group entry (`""` for core).
pub fn group_name(group: &Value) -> &str {
    group
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The version entries of a discovery group entry, preferred first.
pub fn versions(group: &Value) -> &[Value] {
    group
        .get("versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The resource entries of a discovery version entry.
pub fn resources(version: &Value) -> &[Value] {
    version
        .get("resources")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The resource field only legacy discovery has (apidiscovery v2 has none).
const STORAGE_VERSION_HASH: &str = "storageVersionHash";

/// A group as aggregated discovery publishes it: without `storageVersionHash`.
fn without_storage_version_hashes(group: &Value) -> Value {
    let mut group = group.clone();
    for version in group
        .get_mut("versions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for r in version
            .get_mut("resources")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(r) = r.as_object_mut() {
                r.remove(STORAGE_VERSION_HASH);
            }
        }
    }
    group
}

/// One rendered discovery answer and its ETag.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The body.
    pub body: Bytes,
    /// The ETag (quoted).
    pub etag: String,
    /// The Content-Type.
    pub content_type: &'static str,
}

impl Rendered {
    /// Renders a document as JSON and a newline (as kube's encoder writes
    /// it); the ETag is the hash of its bytes.
    pub fn new(value: &Value, content_type: &'static str) -> Self {
        let mut body = serde_json::to_vec(value).unwrap_or_default();
        body.push(b'\n');
        Self::bytes(body.into(), content_type)
    }

    /// A document already encoded; the ETag is the hash of its bytes.
    pub fn bytes(body: Bytes, content_type: &'static str) -> Self {
        let etag = format!("\"{}\"", apimachinery::openapi::content_hash(&body));
        Rendered {
            body,
            etag,
            content_type,
        }
    }
}

/// Every discovery form of a set of groups, each rendered on first use.
/// A group unchanged since the previous version of discovery brings its
/// renderings along, so a change costs what changed, not what is served.
#[derive(Debug, Default)]
pub struct Documents {
    /// The merged aggregated group entries (core included).
    pub groups: Vec<Group>,
    /// Each group's renderings, in the order of `groups`.
    parts: Vec<Arc<GroupParts>>,
    /// A group's index in `groups`, by name.
    by_name: HashMap<String, usize>,
    /// The documents of every group: the aggregated lists, `/api` and `/apis`.
    lists: OnceLock<HashMap<String, Rendered>>,
}

/// The renderings of one group, each made on first use.
#[derive(Debug)]
struct GroupParts {
    group: Group,
    /// The aggregated entry (without storage version hashes), as JSON.
    aggregated: OnceLock<Bytes>,
    /// The `APIGroup` entry `/apis` lists, as JSON.
    legacy: OnceLock<Bytes>,
    /// `/apis/<group>`.
    group_doc: OnceLock<Rendered>,
    /// The `APIResourceList` of each version.
    version_lists: OnceLock<HashMap<String, Rendered>>,
    /// The entry as JSON, as the delegation stream sends it.
    snapshot: OnceLock<Bytes>,
}

impl GroupParts {
    fn new(group: Group) -> Self {
        GroupParts {
            group,
            aggregated: OnceLock::new(),
            legacy: OnceLock::new(),
            group_doc: OnceLock::new(),
            version_lists: OnceLock::new(),
            snapshot: OnceLock::new(),
        }
    }

    fn aggregated(&self) -> &Bytes {
        self.aggregated.get_or_init(|| {
            serde_json::to_vec(&without_storage_version_hashes(&self.group))
                .unwrap_or_default()
                .into()
        })
    }

    fn legacy(&self) -> &Bytes {
        self.legacy.get_or_init(|| {
            serde_json::to_vec(&legacy_group(&self.group))
                .unwrap_or_default()
                .into()
        })
    }

    fn group_doc(&self) -> &Rendered {
        self.group_doc.get_or_init(|| {
            let mut doc = legacy_group(&self.group);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            Rendered::new(&doc, crate::codec::JSON)
        })
    }

    fn version_list(&self, version: &str) -> Option<&Rendered> {
        self.version_lists
            .get_or_init(|| {
                let name = group_name(&self.group);
                versions(&self.group)
                    .iter()
                    .map(|v| {
                        let rendered = Rendered::new(&resource_list(name, v), crate::codec::JSON);
                        (
                            v["version"].as_str().unwrap_or_default().to_string(),
                            rendered,
                        )
                    })
                    .collect()
            })
            .get(version)
    }

    fn snapshot(&self) -> &Bytes {
        self.snapshot
            .get_or_init(|| serde_json::to_vec(&*self.group).unwrap_or_default().into())
    }
}

/// A JSON list whose items are already encoded: `head`, the items joined by
/// commas, `tail`, and a newline.
fn joined<'a>(head: &str, items: impl Iterator<Item = &'a Bytes>, tail: &str) -> Bytes {
    let mut body = head.as_bytes().to_vec();
    for (i, item) in items.enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item);
    }
    body.extend_from_slice(tail.as_bytes());
    body.push(b'\n');
    body.into()
}

impl Documents {
    /// The documents of these groups.
    pub fn new(groups: impl IntoIterator<Item = impl Into<Group>>) -> Self {
        Self::after(groups.into_iter().map(Into::into).collect(), None)
    }

    /// The documents of these groups, taking over what `previous` rendered
    /// of the groups that did not change.
    fn after(groups: Vec<Group>, previous: Option<&Documents>) -> Self {
        let mut by_name = HashMap::with_capacity(groups.len());
        let mut parts = Vec::with_capacity(groups.len());
        let mut kept = Vec::with_capacity(groups.len());
        for (i, group) in groups.into_iter().enumerate() {
            let name = group_name(&group).to_string();
            let old = previous
                .and_then(|p| p.by_name.get(&name).map(|&at| &p.parts[at]))
                .filter(|old| old.group == group);
            let part = match old {
                Some(old) => old.clone(),
                None => Arc::new(GroupParts::new(group)),
            };
            kept.push(part.group.clone());
            parts.push(part);
            by_name.insert(name, i);
        }
        Documents {
            groups: kept,
            parts,
            by_name,
            lists: OnceLock::new(),
        }
    }

    /// The documents about every group.
    fn lists(&self) -> &HashMap<String, Rendered> {
        self.lists.get_or_init(|| {
            let mut rendered = HashMap::new();
            let (core, named): (Vec<&Arc<GroupParts>>, Vec<&Arc<GroupParts>>) = self
                .parts
                .iter()
                .partition(|p| group_name(&p.group).is_empty());
            for (version, content_type) in [("v2", AGGREGATED_V2), ("v2beta1", AGGREGATED_V2BETA1)] {
                let head = format!(
                    r#"{{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/{version}","metadata":{{}},"items":["#
                );
                for (path, parts) in [("/api", &core), ("/apis", &named)] {
                    let body = joined(&head, parts.iter().map(|p| p.aggregated()), "]}");
                    rendered.insert(
                        format!("agg{path}/{version}"),
                        Rendered::bytes(body, content_type),
                    );
                }
            }
            let core_versions: Vec<&str> = core
                .iter()
                .flat_map(|p| versions(&p.group))
                .filter_map(|v| v["version"].as_str())
                .collect();
            rendered.insert(
                "/api".into(),
                Rendered::new(
                    &json!({"kind": "APIVersions", "versions": core_versions,
                            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]}),
                    crate::codec::JSON,
                ),
            );
            let body = joined(
                r#"{"kind":"APIGroupList","apiVersion":"v1","groups":["#,
                named.iter().map(|p| p.legacy()),
                "]}",
            );
            rendered.insert("/apis".into(), Rendered::bytes(body, crate::codec::JSON));
            rendered
        })
    }

    /// The aggregated list for `/api` or `/apis` in a discovery version.
    pub fn aggregated(&self, path: &str, version: &str) -> Option<&Rendered> {
        self.lists().get(&format!("agg{path}/{version}"))
    }

    /// A legacy document by path (`/api`, `/apis`, `/apis/g`, `/api/v1`, `/apis/g/v`).
    pub fn legacy(&self, path: &str) -> Option<&Rendered> {
        let path = path.trim_end_matches('/');
        let part = |name: &str| self.by_name.get(name).map(|&at| &self.parts[at]);
        let segments: Vec<&str> = path.split('/').skip(1).collect();
        match segments.as_slice() {
            ["api"] | ["apis"] => self.lists().get(path),
            ["api", version] => part("")?.version_list(version),
            ["apis", group] if !group.is_empty() => Some(part(group)?.group_doc()),
            ["apis", group, version] if !group.is_empty() => part(group)?.version_list(version),
            _ => None,
        }
    }

    /// Each group's entry as JSON (with storage version hashes), as the
    /// delegation stream sends them.
    pub fn snapshot(&self) -> Vec<Bytes> {
        self.parts.iter().map(|p| p.snapshot().clone()).collect()
    }

    /// Every group/version served, as (group, version).
    pub fn group_versions(&self) -> Vec<(String, String)> {
        self.groups
            .iter()
            .flat_map(|g| {
                let name = group_name(g).to_string();
                versions(g)
                    .iter()
                    .filter_map(move |v| Some((name.clone(), v["version"].as_str()?.to_string())))
            })
            .collect()
    }

    /// The plural and scope of a kind in a group/version: `(plural, namespaced)`.
    pub fn find_kind(&self, group: &str, version: &str, kind: &str) -> Option<(String, bool)> {
        let group = &self.groups[*self.by_name.get(group)?];
        let version = versions(group).iter().find(|v| v["version"] == version)?;
        let resource = resources(version)
            .iter()
            .find(|r| r.pointer("/responseKind/kind").and_then(Value::as_str) == Some(kind))?;
        Some((
            resource["resource"].as_str()?.to_string(),
            resource["scope"] == "Namespaced",
        ))
    }

    /// Whether a group (any version) is served.
    pub fn serves_group(&self, group: &str) -> bool {
        self.by_name.contains_key(group)
    }

    /// Whether a resource (and its subresource, unless empty) is served in
    /// a group/version.
    pub fn serves(&self, group: &str, version: &str, resource: &str, subresource: &str) -> bool {
        let Some(&at) = self.by_name.get(group) else {
            return false;
        };
        let Some(version) = versions(&self.groups[at])
            .iter()
            .find(|v| v["version"] == version)
        else {
            return false;
        };
        resources(version)
            .iter()
            .find(|r| r["resource"] == resource)
            .is_some_and(|r| {
                subresource.is_empty()
                    || r["subresources"]
                        .as_array()
                        .is_some_and(|subs| subs.iter().any(|s| s["subresource"] == subresource))
            })
    }
}

fn legacy_group(group: &Value) -> Value {
    let name = group_name(group);
    let versions: Vec<Value> = versions(group)
        .iter()
        .filter_map(|v| v["version"].as_str())
        .map(|v| json!({"groupVersion": api_version(name, v), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": versions, "preferredVersion": preferred})
}

fn resource_list(group: &str, version: &Value) -> Value {
    let v = version["version"].as_str().unwrap_or_default();
    let mut listed = Vec::new();
    for r in resources(version) {
        let mut entry = json!({
            "name": r["resource"],
            "singularName": r.get("singularResource").cloned().unwrap_or(json!("")),
            "namespaced": r["scope"] == "Namespaced",
            "kind": r.pointer("/responseKind/kind").cloned().unwrap_or(json!("")),
            "verbs": r.get("verbs").cloned().unwrap_or(json!([])),
        });
        for field in ["shortNames", "categories", STORAGE_VERSION_HASH] {
            if let Some(value) = r.get(field) {
                entry[field] = value.clone();
            }
        }
        listed.push(entry);
        for s in r
            .get("subresources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let kind = &s["responseKind"];
            let mut sub = json!({
                "name": format!("{}/{}", r["resource"].as_str().unwrap_or_default(), s["subresource"].as_str().unwrap_or_default()),
                "singularName": "",
                "namespaced": r["scope"] == "Namespaced",
                "kind": kind["kind"],
                "verbs": s.get("verbs").cloned().unwrap_or(json!([])),
            });
            let (kind_group, kind_version) = (
                kind["group"].as_str().unwrap_or_default(),
                kind["version"].as_str().unwrap_or_default(),
            );
            let own = (kind_group.is_empty() && kind_version.is_empty())
                || (kind_group == group && kind_version == v);
            if !own {
                sub["group"] = kind["group"].clone();
                sub["version"] = kind["version"].clone();
            }
            listed.push(sub);
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version(group, v), "resources": listed})
}

/// The discovery of a server: its own groups merged with its delegates',
/// re-rendered whenever either changes; subscribers see each new version.
/// Its sources sit behind one lock, and every write publishes the new
/// documents before it returns, so a writer's next read sees its change.
pub struct Discovery {
    sources: Mutex<Sources>,
    current: watch::Sender<Arc<Documents>>,
}

/// What discovery is merged from.
#[derive(Default)]
struct Sources {
    own: Vec<Group>,
    delegates: Vec<Group>,
    remote: Vec<Group>,
    priorities: HashMap<String, i64>,
    delegates_known: bool,
}

impl Default for Discovery {
    fn default() -> Self {
        Discovery {
            sources: Mutex::default(),
            current: watch::channel(Arc::new(Documents::default())).0,
        }
    }
}

/// `groups`, each replaced by the equal entry of `old` if there is one, so
/// that an unchanged group stays the same `Arc`.
fn reusing(old: &[Group], groups: impl IntoIterator<Item = impl Into<Group>>) -> Vec<Group> {
    let known: HashMap<&str, &Group> = old.iter().map(|g| (group_name(g), g)).collect();
    groups
        .into_iter()
        .map(|group| {
            let group = group.into();
            match known.get(group_name(&group)) {
                Some(same) if **same == group => Group::clone(same),
                _ => group,
            }
        })
        .collect()
}

impl Discovery {
    /// The current documents.
    pub fn documents(&self) -> Arc<Documents> {
        self.current.borrow().clone()
    }

    /// Follows changes.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Documents>> {
        self.current.subscribe()
    }

    /// Replaces this server's own groups.
    pub fn set_own(&self, groups: impl IntoIterator<Item = impl Into<Group>>) {
        self.update(|s| s.own = reusing(&s.own, groups));
    }

    /// Replaces the delegates' groups (from their discovery stream).
    pub fn set_delegates(&self, groups: impl IntoIterator<Item = impl Into<Group>>) {
        self.update(|s| {
            s.delegates = reusing(&s.delegates, groups);
            s.delegates_known = true;
        });
    }

    /// Whether the delegates' discovery has arrived at least once.
    pub fn delegates_known(&self) -> bool {
        self.sources().delegates_known
    }

    /// A readiness check: ready once the delegates' discovery has arrived.
    pub fn readiness(self: &Arc<Self>) -> crate::health::HealthCheck {
        let discovery = self.clone();
        Arc::new(move || {
            let known = discovery.delegates_known();
            Box::pin(async move {
                if known {
                    Ok(())
                } else {
                    Err(crate::Error::NotReady(
                        "no discovery from the delegates yet".into(),
                    ))
                }
            })
        })
    }

    /// Replaces the groups of remote aggregated servers (the aggregator's).
    pub fn set_remote(&self, groups: impl IntoIterator<Item = impl Into<Group>>) {
        self.update(|s| s.remote = reusing(&s.remote, groups));
    }

    /// Replaces the group priorities that order discovery (from APIServices).
    pub fn set_priorities(&self, priorities: HashMap<String, i64>) {
        self.update(|s| s.priorities = priorities);
    }

    /// The groups this server and its delegates serve (not remote ones).
    pub fn local(&self) -> Vec<Group> {
        let sources = self.sources();
        merge_groups(&[&sources.own, &sources.delegates])
    }

    /// The delegates' groups.
    pub fn delegates(&self) -> Vec<Group> {
        self.sources().delegates.clone()
    }

    /// This server's own groups.
    pub fn own(&self) -> Vec<Group> {
        self.sources().own.clone()
    }

    fn sources(&self) -> std::sync::MutexGuard<'_, Sources> {
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the sources and publishes the documents they make, under the
    /// lock, so concurrent writers publish in the order they wrote.
    fn update(&self, change: impl FnOnce(&mut Sources)) {
        let mut sources = self.sources();
        change(&mut sources);
        let priority = |group: &str| {
            sources
                .priorities
                .get(group)
                .copied()
                .unwrap_or_else(|| group_priority(group))
        };
        let groups = merge_groups_with(
            &[&sources.own, &sources.delegates, &sources.remote],
            &priority,
        );
        let previous = self.documents();
        if previous.groups == groups {
            return;
        }
        let docs = Documents::after(groups, Some(&previous));
        self.current.send_replace(Arc::new(docs));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;

    struct Plain;
    impl Strategy for Plain {}

    fn resources() -> Vec<Resource> {
        vec![
            Resource::builtin::<ConfigMap>(Plain).short_names(&["cm"]),
            Resource::builtin::<Deployment>(Plain)
                .short_names(&["deploy"])
                .categories(&["all"])
                .subresource("status", &["get", "patch", "update"]),
        ]
    }

    #[test]
    fn aggregated_and_legacy_forms() {
        let groups: Vec<Group> = groups_from_resources(&resources())
            .into_iter()
            .map(Group::new)
            .collect();
        let docs = Documents::new(merge_groups(&[&groups]));
        assert!(docs.serves("", "v1", "configmaps", ""));
        assert!(docs.serves("apps", "v1", "deployments", "status"));
        assert!(!docs.serves("apps", "v1", "deployments", "scale"));
        assert!(!docs.serves("apps", "v2", "deployments", ""));
        assert!(!docs.serves("", "v1", "made-up", ""));
        assert!(!docs.serves("made.up", "v1", "configmaps", ""));
        let api: Value =
            serde_json::from_slice(&docs.aggregated("/api", "v2").unwrap().body).unwrap();
        assert_eq!(api["items"][0]["metadata"]["name"], "");
        assert_eq!(
            api["items"][0]["versions"][0]["resources"][0]["shortNames"][0],
            "cm"
        );
        let apis: Value =
            serde_json::from_slice(&docs.aggregated("/apis", "v2").unwrap().body).unwrap();
        assert_eq!(apis["items"][0]["metadata"]["name"], "apps");
        let legacy: Value = serde_json::from_slice(&docs.legacy("/apis").unwrap().body).unwrap();
        assert_eq!(
            legacy["groups"][0]["preferredVersion"]["groupVersion"],
            "apps/v1"
        );
        let list: Value =
            serde_json::from_slice(&docs.legacy("/apis/apps/v1").unwrap().body).unwrap();
        assert_eq!(list["resources"][1]["name"], "deployments/status");
        let core: Value = serde_json::from_slice(&docs.legacy("/api").unwrap().body).unwrap();
        assert_eq!(core["versions"][0], "v1");
    }

    #[test]
    fn versions_are_ordered_like_kube() {
        let mut versions = vec![
            "v1beta1", "foo", "v1", "v2alpha1", "v2", "v1alpha2", "v10beta3",
        ];
        versions.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            versions,
            vec![
                "v2", "v1", "v10beta3", "v1beta1", "v2alpha1", "v1alpha2", "foo"
            ]
        );
    }

    #[test]
    fn accept_header_selects_aggregated() {
        let agg = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_version(agg), Some("v2"));
        assert_eq!(aggregated_version("application/json, */*"), None);
    }

    #[test]
    fn merged_groups_are_ordered_and_discovery_notifies() {
        let discovery = Discovery::default();
        let mut rx = discovery.subscribe();
        discovery.set_own(groups_from_resources(&resources()));
        discovery.set_delegates(vec![
            json!({"metadata":{"name":"example.com"},"versions":[{"version":"v1","resources":[]}]}),
        ]);
        assert!(rx.has_changed().unwrap());
        let names: Vec<String> = discovery
            .documents()
            .groups
            .iter()
            .map(|g| group_name(g).to_string())
            .collect();
        assert_eq!(names, vec!["", "apps", "example.com"]);
        let etag = rx
            .borrow_and_update()
            .aggregated("/apis", "v2")
            .unwrap()
            .etag
            .clone();
        assert!(etag.starts_with('"'));
    }

    #[test]
    fn a_change_renders_only_the_group_that_changed() {
        let widget = |group: &str, version: &str| {
            json!({"metadata": {"name": group}, "versions": [{"version": version, "resources": [
                {"resource": "widgets", "scope": "Namespaced", "verbs": ["get"]}]}]})
        };
        let discovery = Discovery::default();
        discovery.set_own((0..100).map(|i| widget(&format!("g{i}.example.com"), "v1")));
        let before = discovery.documents();
        let list = |docs: &Documents, group: &str| {
            docs.legacy(&format!("/apis/{group}/v1"))
                .unwrap()
                .body
                .clone()
        };
        let unchanged = list(&before, "g1.example.com");
        // The same groups again, plus one changed and one new: the rest keep
        // their entries and what was rendered of them.
        let mut groups: Vec<Value> = (0..100)
            .map(|i| widget(&format!("g{i}.example.com"), "v1"))
            .collect();
        groups[2] = widget("g2.example.com", "v2");
        groups.push(widget("new.example.com", "v1"));
        discovery.set_own(groups);
        let after = discovery.documents();
        let at = |docs: &Documents, name: &str| {
            docs.groups
                .iter()
                .find(|g| group_name(g) == name)
                .unwrap()
                .clone()
        };
        assert!(Arc::ptr_eq(
            &at(&before, "g1.example.com"),
            &at(&after, "g1.example.com")
        ));
        assert!(!Arc::ptr_eq(
            &at(&before, "g2.example.com"),
            &at(&after, "g2.example.com")
        ));
        // Rendered once, handed on: the same bytes, not a copy.
        assert_eq!(list(&after, "g1.example.com").as_ptr(), unchanged.as_ptr());
        assert!(after.legacy("/apis/g2.example.com/v1").is_none());
        assert!(after.legacy("/apis/g2.example.com/v2").is_some());
        let apis: Value =
            serde_json::from_slice(&after.aggregated("/apis", "v2").unwrap().body).unwrap();
        assert_eq!(apis["items"].as_array().unwrap().len(), 101);
        assert_eq!(apis["kind"], "APIGroupDiscoveryList");
        // Setting the same groups again publishes nothing new.
        let mut rx = discovery.subscribe();
        rx.borrow_and_update();
        discovery.set_own(after.groups.iter().map(|g| Value::clone(g)));
        assert!(!rx.has_changed().unwrap());
    }
}
