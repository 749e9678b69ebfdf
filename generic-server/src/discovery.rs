//! Discovery: what a server and its delegates serve, in every form kubectl
//! asks for: aggregated `apidiscovery.k8s.io/v2` on `/api` and `/apis`, and
//! the legacy `APIVersions`, `APIGroupList`, `APIGroup` and
//! `APIResourceList` documents. Each form is rendered once per change and
//! served with an ETag.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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

/// The aggregated-discovery entry of one resource.
pub fn resource_entry(r: &Resource) -> Value {
    let mut entry = json!({
        "resource": r.plural,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
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
                json!({
                    "subresource": s.name,
                    "responseKind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
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

/// Merges group lists: earlier lists win for a group/version both serve;
/// the result is ordered core first, then by priority, then by name.
pub fn merge_groups(lists: &[&[Value]]) -> Vec<Value> {
    merge_groups_with(lists, &group_priority)
}

/// [`merge_groups`] with group priorities given (the aggregator's APIServices').
pub fn merge_groups_with(lists: &[&[Value]], priority: &dyn Fn(&str) -> i64) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::new();
    for list in lists {
        for group in *list {
            let name = group_name(group);
            match merged.iter_mut().find(|g| group_name(g) == name) {
                None => merged.push(group.clone()),
                Some(existing) => {
                    let have: Vec<String> = versions(existing)
                        .iter()
                        .map(|v| v["version"].as_str().unwrap_or("").to_string())
                        .collect();
                    let extra: Vec<Value> = versions(group)
                        .iter()
                        .filter(|v| {
                            !have
                                .iter()
                                .any(|h| Some(h.as_str()) == v["version"].as_str())
                        })
                        .cloned()
                        .collect();
                    if let Some(Value::Array(vs)) = existing.get_mut("versions") {
                        vs.extend(extra);
                    }
                }
            }
        }
    }
    merged.sort_by(|a, b| {
        let (na, nb) = (group_name(a), group_name(b));
        (na != "")
            .cmp(&(nb != ""))
            .then(priority(nb).cmp(&priority(na)))
            .then(na.cmp(nb))
    });
    merged
}

/// The name of a discovery group entry (`""` for core).
pub fn group_name(group: &Value) -> &str {
    group
        .pointer("/metadata/name")
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

/// Groups as aggregated discovery publishes them: without `storageVersionHash`.
fn without_storage_version_hashes(groups: &[Value]) -> Vec<Value> {
    let mut groups = groups.to_vec();
    for version in groups
        .iter_mut()
        .filter_map(|g| g.get_mut("versions").and_then(Value::as_array_mut))
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
    groups
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

/// Every discovery form of a set of groups, rendered once.
#[derive(Debug, Default)]
pub struct Documents {
    /// The merged aggregated group entries (core included).
    pub groups: Vec<Value>,
    rendered: HashMap<String, Rendered>,
}

impl Documents {
    /// Renders every form of these groups.
    pub fn new(groups: Vec<Value>) -> Self {
        let mut rendered = HashMap::new();
        let aggregated = without_storage_version_hashes(&groups);
        let (core, named): (Vec<&Value>, Vec<&Value>) =
            aggregated.iter().partition(|g| group_name(g).is_empty());
        for (version, content_type) in [("v2", AGGREGATED_V2), ("v2beta1", AGGREGATED_V2BETA1)] {
            let list = |items: &[&Value]| json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"), "metadata": {}, "items": items});
            rendered.insert(
                format!("agg/api/{version}"),
                Rendered::new(&list(&core), content_type),
            );
            rendered.insert(
                format!("agg/apis/{version}"),
                Rendered::new(&list(&named), content_type),
            );
        }
        let core_versions: Vec<&str> = core
            .iter()
            .flat_map(|g| versions(g))
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
        let api_groups: Vec<Value> = named.iter().map(|g| legacy_group(g)).collect();
        rendered.insert(
            "/apis".into(),
            Rendered::new(
                &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": api_groups}),
                crate::codec::JSON,
            ),
        );
        for (group, legacy) in named.iter().zip(&api_groups) {
            let mut doc = legacy.clone();
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            rendered.insert(
                format!("/apis/{}", group_name(group)),
                Rendered::new(&doc, crate::codec::JSON),
            );
        }
        for group in &groups {
            for version in versions(group) {
                let v = version["version"].as_str().unwrap_or_default();
                let name = group_name(group);
                let path = apimachinery::group_version::group_version_path(name, v);
                rendered.insert(
                    path,
                    Rendered::new(&resource_list(name, version), crate::codec::JSON),
                );
            }
        }
        Documents { groups, rendered }
    }

    /// The aggregated list for `/api` or `/apis` in a discovery version.
    pub fn aggregated(&self, path: &str, version: &str) -> Option<&Rendered> {
        self.rendered.get(&format!("agg{path}/{version}"))
    }

    /// A legacy document by path (`/api`, `/apis`, `/apis/g`, `/api/v1`, `/apis/g/v`).
    pub fn legacy(&self, path: &str) -> Option<&Rendered> {
        self.rendered.get(path.trim_end_matches('/'))
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
        let group = self.groups.iter().find(|g| group_name(g) == group)?;
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
        self.groups.iter().any(|g| group_name(g) == group)
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
            if kind["group"].as_str() != Some(group) || kind["version"].as_str() != Some(v) {
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
    own: Vec<Value>,
    delegates: Vec<Value>,
    remote: Vec<Value>,
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
    pub fn set_own(&self, groups: Vec<Value>) {
        self.update(|s| s.own = groups);
    }

    /// Replaces the delegates' groups (from their discovery stream).
    pub fn set_delegates(&self, groups: Vec<Value>) {
        self.update(|s| {
            s.delegates = groups;
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
    pub fn set_remote(&self, groups: Vec<Value>) {
        self.update(|s| s.remote = groups);
    }

    /// Replaces the group priorities that order discovery (from APIServices).
    pub fn set_priorities(&self, priorities: HashMap<String, i64>) {
        self.update(|s| s.priorities = priorities);
    }

    /// The groups this server and its delegates serve (not remote ones).
    pub fn local(&self) -> Vec<Value> {
        let sources = self.sources();
        merge_groups(&[&sources.own, &sources.delegates])
    }

    /// The delegates' groups.
    pub fn delegates(&self) -> Vec<Value> {
        self.sources().delegates.clone()
    }

    /// This server's own groups.
    pub fn own(&self) -> Vec<Value> {
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
        let docs = Documents::new(merge_groups_with(
            &[&sources.own, &sources.delegates, &sources.remote],
            &priority,
        ));
        self.current.send_if_modified(|current| {
            if current.groups == docs.groups {
                return false;
            }
            *current = Arc::new(docs);
            true
        });
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
        let docs = Documents::new(merge_groups(&[&groups_from_resources(&resources())]));
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
}
