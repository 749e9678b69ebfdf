//! The CRD controller: accepts a CRD's names (or reports the conflict),
//! establishes it, serves its versions (stores, discovery, OpenAPI), and on
//! deletion removes every custom resource before letting the CRD go.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use apimachinery::error::Reason;
use apimachinery::group_version::GroupVersionKind;
use apimachinery::openapi::{self, Components, ResourceSpec, SubresourceSpec};
use generic_server::admission::Admission;
use generic_server::admission::Equivalents;
use generic_server::informer::Change;
use generic_server::loopback::Loopback;
use generic_server::registry::{DeleteOptions, ListOptions, PatchSchema, Store};
use generic_server::request::UserInfo;
use generic_server::server::ApiServer;
use generic_server::service_client::{Clients, ObjectReader};
use generic_server::storage::cacher::Cacher;
use generic_server::strategy::Converter;
use serde_json::{Map, Value};

use crate::conversion::{NoneConverter, WebhookConverter};
use crate::crd::{self, CLEANUP_FINALIZER, set_condition};
use crate::custom_resource;

const CRD_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// What the controller needs to serve custom resources.
pub struct Context {
    /// The server that serves them.
    pub server: Arc<ApiServer>,
    /// Its watch cache.
    pub cacher: Arc<Cacher>,
    /// Its admission chain.
    pub admission: Admission,
    /// The etcd key prefix.
    pub etcd_root: String,
    /// A client of the server's own API.
    pub client: Loopback,
    /// Reads Services and EndpointSlices (for conversion webhooks).
    pub reader: Arc<dyn ObjectReader>,
    /// HTTPS clients to conversion webhooks.
    pub webhooks: Arc<Clients>,
}

/// The CRD controller actor.
pub struct CrdController {
    ctx: Arc<Context>,
    crds: HashMap<String, Value>,
    /// CRD name → (generation served, group, plural, versions).
    served: HashMap<String, (i64, String, String, Vec<String>)>,
    cleaning: HashSet<String>,
}

impl CrdController {
    /// A controller serving through `ctx`.
    pub fn new(ctx: Context) -> Self {
        CrdController {
            ctx: Arc::new(ctx),
            crds: HashMap::new(),
            served: HashMap::new(),
            cleaning: HashSet::new(),
        }
    }

    /// The status a CRD should have: names accepted (or the conflict), established.
    fn desired_status(&self, crd: &Value) -> Value {
        let mut desired = crd.clone();
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let group = crd.pointer("/spec/group").cloned().unwrap_or_default();
        let names = crd.pointer("/spec/names").cloned().unwrap_or_default();
        let conflict = self
            .crds
            .iter()
            .filter(|(other, c)| other.as_str() != name && c.pointer("/spec/group") == Some(&group))
            .find_map(|(_, other)| name_conflict(&names, other.pointer("/status/acceptedNames")?));
        match conflict {
            Some((reason, message)) => {
                set_condition(&mut desired, "NamesAccepted", "False", reason, &message);
                if !crd::is_true(crd, "Established") {
                    set_condition(
                        &mut desired,
                        "Established",
                        "False",
                        "NotAccepted",
                        "not all names are accepted",
                    );
                }
            }
            None => {
                desired["status"]["acceptedNames"] = names;
                set_condition(
                    &mut desired,
                    "NamesAccepted",
                    "True",
                    "NoConflicts",
                    "no conflicts found",
                );
                set_condition(
                    &mut desired,
                    "Established",
                    "True",
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                );
            }
        }
        desired
    }

    fn write_status(&self, desired: Value, ctx: &mut actix::Context<Self>) {
        let client = self.ctx.client.clone();
        ctx.spawn(
            async move {
                let name = desired
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if let Err(e) = client
                    .update(&format!("{CRD_PATH}/{name}/status"), &desired)
                    .await
                {
                    if e.reason() != Reason::Conflict && e.reason() != Reason::NotFound {
                        tracing::warn!(crd = %name, error = %e, "updating CRD status failed");
                    }
                }
            }
            .into_actor(self),
        );
    }

    fn serve(&mut self, crd: &Value, ctx: &mut actix::Context<Self>) {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let generation = crd
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if self
            .served
            .get(&name)
            .is_some_and(|(g, ..)| *g == generation)
        {
            return;
        }
        let (context, crd) = (self.ctx.clone(), crd.clone());
        ctx.spawn(
            async move { build_stores(&context, &crd).await }
                .into_actor(self)
                .map(move |built, this, _| match built {
                    Ok(stores) => this.install(name, generation, stores),
                    Err(e) => tracing::warn!(crd = %name, error = %e, "serving CRD failed"),
                }),
        );
    }

    fn install(&mut self, name: String, generation: i64, stores: Vec<Arc<Store>>) {
        let server = &self.ctx.server;
        let versions: Vec<String> = stores.iter().map(|s| s.resource.version.clone()).collect();
        if let Some((_, group, plural, old)) = self.served.get(&name) {
            for version in old.iter().filter(|v| !versions.contains(v)) {
                server.remove_dynamic(group, version, plural);
            }
        }
        let (group, plural) = stores
            .first()
            .map(|s| (s.resource.group.clone(), s.resource.plural.clone()))
            .unwrap_or_default();
        for store in stores {
            server.add_dynamic(store);
        }
        tracing::info!(crd = %name, ?versions, "serving custom resources");
        self.served
            .insert(name, (generation, group.clone(), plural, versions));
        self.publish_openapi(&group);
    }

    fn unserve(&mut self, name: &str) {
        let Some((_, group, plural, versions)) = self.served.remove(name) else {
            return;
        };
        for version in &versions {
            self.ctx.server.remove_dynamic(&group, version, &plural);
        }
        self.ctx.cacher.unregister(&apimachinery::keys::key_prefix(
            &self.ctx.etcd_root,
            &group,
            &plural,
        ));
        tracing::info!(crd = %name, "stopped serving custom resources");
        self.publish_openapi(&group);
    }

    /// Rebuilds the OpenAPI documents of every version of a group.
    fn publish_openapi(&self, group: &str) {
        let mut by_version: HashMap<String, Vec<Arc<Store>>> = HashMap::new();
        for (_, g, plural, versions) in self.served.values() {
            if g != group {
                continue;
            }
            for version in versions {
                if let Some(store) = self.ctx.server.store(g, version, plural) {
                    by_version.entry(version.clone()).or_default().push(store);
                }
            }
        }
        for (version, stores) in &by_version {
            let path = openapi::group_version_path(group, version);
            let crds: Vec<&Value> = stores.iter().filter_map(|s| self.crd_of(s)).collect();
            self.ctx.server.set_openapi(
                &path,
                &openapi_document(group, version, &stores.iter().zip(crds).collect::<Vec<_>>()),
            );
        }
        // Versions no CRD serves any more lose their document.
        let served: HashSet<&String> = by_version.keys().collect();
        for crd in self
            .crds
            .values()
            .filter(|c| c.pointer("/spec/group").and_then(Value::as_str) == Some(group))
        {
            for v in crd::versions(crd) {
                let version = v["name"].as_str().unwrap_or_default().to_string();
                if !served.contains(&version) {
                    self.ctx
                        .server
                        .remove_openapi(&openapi::group_version_path(group, &version));
                }
            }
        }
    }

    fn crd_of(&self, store: &Store) -> Option<&Value> {
        self.crds.values().find(|c| {
            c.pointer("/spec/group").and_then(Value::as_str) == Some(&store.resource.group)
                && c.pointer("/spec/names/plural").and_then(Value::as_str)
                    == Some(&store.resource.plural)
        })
    }

    fn cleanup(&mut self, crd: &Value, ctx: &mut actix::Context<Self>) {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !self.cleaning.insert(name.clone()) {
            return;
        }
        let context = self.ctx.clone();
        let crd = crd.clone();
        let store = self.served.get(&name).and_then(|(_, group, plural, _)| {
            crd::storage_version(&crd).and_then(|v| context.server.store(group, v, plural))
        });
        ctx.spawn(
            async move { delete_instances(&context, &crd, store).await }
                .into_actor(self)
                .map(move |done, this, ctx| {
                    this.cleaning.remove(&name);
                    if done {
                        this.unserve(&name);
                        let client = this.ctx.client.clone();
                        let name = name.clone();
                        ctx.spawn(
                            async move { remove_finalizer(&client, &name).await }.into_actor(this),
                        );
                    } else if let Some(crd) = this.crds.get(&name).cloned() {
                        ctx.run_later(Duration::from_secs(1), move |this, ctx| {
                            this.cleanup(&crd, ctx)
                        });
                    }
                }),
        );
    }
}

/// Which accepted name of another CRD the requested names collide with.
fn name_conflict(names: &Value, accepted: &Value) -> Option<(&'static str, String)> {
    let text = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    for (field, reason) in [
        ("plural", "PluralConflict"),
        ("singular", "SingularConflict"),
        ("kind", "KindConflict"),
        ("listKind", "ListKindConflict"),
    ] {
        let wanted = text(names, field);
        if !wanted.is_empty() && wanted == text(accepted, field) {
            return Some((reason, format!("{wanted:?} is already in use")));
        }
    }
    let taken: Vec<&Value> = accepted
        .get("shortNames")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    for short in names
        .get("shortNames")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if taken.contains(&short) {
            return Some((
                "ShortNamesConflict",
                format!("{:?} is already in use", short.as_str().unwrap_or_default()),
            ));
        }
    }
    None
}

/// A store for every served version of a CRD.
async fn build_stores(ctx: &Context, crd: &Value) -> apimachinery::Result<Vec<Arc<Store>>> {
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let storage = crd::storage_version(crd).unwrap_or_default().to_string();
    let served_versions: Vec<String> = crd::versions(crd)
        .iter()
        .filter(|v| v["served"] == true)
        .filter_map(|v| v["name"].as_str().map(str::to_string))
        .collect();
    let mut stores = Vec::new();
    for version in crd::versions(crd).iter().filter(|v| v["served"] == true) {
        let resource = custom_resource::resource(crd, version);
        // Server-side apply sees the published schema: apiVersion, kind and
        // ObjectMeta added to the version's own.
        let served = custom_resource::Version::of(crd, version);
        let root = apimachinery::schema::to_openapi_resource(
            Some(&served.structural),
            &group,
            &served.version,
            &served.kind,
        );
        let schema = PatchSchema {
            root,
            components: object_meta_components(),
        };
        let converter: Arc<dyn Converter> = match crd
            .pointer("/spec/conversion/strategy")
            .and_then(Value::as_str)
        {
            Some("Webhook") => Arc::new(WebhookConverter::new(
                crd,
                ctx.reader.clone(),
                ctx.webhooks.clone(),
            )),
            _ => Arc::new(NoneConverter {
                group: group.clone(),
                storage: storage.clone(),
            }),
        };
        let store = Store::new(
            resource,
            ctx.cacher.clone(),
            ctx.admission.clone(),
            &ctx.etcd_root,
            Some(schema),
        )
        .await?;
        let equivalents = Equivalents {
            versions: served_versions
                .iter()
                .filter(|v| **v != served.version)
                .cloned()
                .collect(),
            converter: converter.clone(),
        };
        stores.push(Arc::new(
            store
                .with_converter(converter)
                .with_equivalents(equivalents),
        ));
    }
    Ok(stores)
}

/// The components a custom resource's schema refers to (ObjectMeta and
/// what it references), built once.
fn object_meta_components() -> Arc<Map<String, Value>> {
    static COMPONENTS: std::sync::LazyLock<Arc<Map<String, Value>>> =
        std::sync::LazyLock::new(|| {
            let mut components = Components::new();
            components.add::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
            Arc::new(components.schemas().clone())
        });
    COMPONENTS.clone()
}

/// The OpenAPI document of one group-version of custom resources.
fn openapi_document(group: &str, version: &str, kinds: &[(&Arc<Store>, &Value)]) -> Value {
    let mut components = Components::new();
    components.add::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
    let reversed: Vec<&str> = group.split('.').rev().collect();
    let mut specs = Vec::new();
    for (store, crd) in kinds {
        let r = &store.resource;
        let served = crd::versions(crd)
            .iter()
            .find(|v| v["name"] == version)
            .cloned()
            .unwrap_or_default();
        let structural = custom_resource::Version::of(crd, &served).structural;
        let schema =
            apimachinery::schema::to_openapi_resource(Some(&structural), group, version, &r.kind);
        let name = format!("{}.{version}.{}", reversed.join("."), r.kind);
        components.insert(name.clone(), schema);
        components.add_list(&name, &GroupVersionKind::new(group, version, &r.list_kind));
        let mut spec = ResourceSpec {
            group: group.into(),
            version: version.into(),
            kind: r.kind.clone(),
            plural: r.plural.clone(),
            namespaced: r.namespaced,
            verbs: r.verbs.clone(),
            subresources: Vec::new(),
            schema: name,
            strategic_merge_patch: false,
            delete_returns_object: false,
        };
        if r.find_subresource("status").is_some() {
            spec.subresources.push(SubresourceSpec::status(&spec));
        }
        if r.scale.is_some() {
            spec.subresources
                .push(SubresourceSpec::scale(&mut components));
        }
        specs.push(spec);
    }
    openapi::group_version_document(group, version, &specs, &components)
}

/// Deletes every custom resource of a CRD; true once none is left.
async fn delete_instances(ctx: &Context, crd: &Value, store: Option<Arc<Store>>) -> bool {
    let mut terminating = crd.clone();
    set_condition(
        &mut terminating,
        "Terminating",
        "True",
        "InstanceDeletionInProgress",
        "CustomResource deletion is in progress",
    );
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !crd::is_true(crd, "Terminating")
        || crd::condition(crd, "Terminating")
            .is_some_and(|c| c["reason"] != "InstanceDeletionInProgress")
    {
        let _ = ctx
            .client
            .update(&format!("{CRD_PATH}/{name}/status"), &terminating)
            .await;
    }
    let Some(store) = store else { return true };
    let user = UserInfo {
        name: "system:apiextensions-controller".into(),
        groups: vec!["system:masters".into()],
        ..Default::default()
    };
    let options = DeleteOptions {
        user,
        ..Default::default()
    };
    for _ in 0..60 {
        let Ok(list) = store.list("", &ListOptions::default()).await else {
            return false;
        };
        if list.items.is_empty() {
            return true;
        }
        for obj in &list.items {
            if let Err(e) = store.delete(&obj.namespace, &obj.name, &options).await {
                if e.reason() != Reason::NotFound {
                    tracing::warn!(crd = %name, object = %obj.name, error = %e, "deleting a custom resource failed");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    false
}

/// Removes the cleanup finalizer so the CRD goes away.
async fn remove_finalizer(client: &Loopback, name: &str) {
    let path = format!("{CRD_PATH}/{name}");
    for _ in 0..10 {
        let Ok(mut crd) = client.get(&path).await else {
            return;
        };
        let Some(list) = crd
            .pointer_mut("/metadata/finalizers")
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        list.retain(|f| f != CLEANUP_FINALIZER);
        match client.update(&path, &crd).await {
            Err(e) if e.reason() == Reason::Conflict => continue,
            _ => return,
        }
    }
}

impl Actor for CrdController {
    type Context = actix::Context<Self>;
}

/// A CRD changed (from the informer).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Sync(pub Change);

impl Handler<Sync> for CrdController {
    type Result = ();

    fn handle(&mut self, Sync(change): Sync, ctx: &mut actix::Context<Self>) {
        match change {
            Change::Present(crd) => {
                let name = crd
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                self.crds.insert(name, crd.clone());
                if crd
                    .pointer("/metadata/deletionTimestamp")
                    .is_some_and(|t| !t.is_null())
                {
                    self.cleanup(&crd, ctx);
                    return;
                }
                let desired = self.desired_status(&crd);
                if desired["status"] != crd["status"] {
                    self.write_status(desired.clone(), ctx);
                }
                if crd::is_true(&desired, "NamesAccepted") {
                    self.serve(&crd, ctx);
                }
            }
            Change::Deleted(crd) => {
                let name = crd
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                self.crds.remove(&name);
                self.unserve(&name);
            }
        }
    }
}

/// How long start-up waits for the CRDs present at start to be served.
const SERVED_AT_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Waits until every established CRD in `crds` has its served versions
/// installed in `server` (or [`SERVED_AT_START_TIMEOUT`] passes), so that a
/// new replica is only found by callers once it serves every custom resource.
pub async fn served_at_start(server: Arc<ApiServer>, crds: Arc<Store>) {
    let deadline = tokio::time::Instant::now() + SERVED_AT_START_TIMEOUT;
    loop {
        let pending = match crds.list("", &ListOptions::default()).await {
            Ok(list) => list
                .items
                .iter()
                .map(|item| item.value())
                .filter(|crd| unserved_versions(&server, crd) > 0)
                .count(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot list CRDs at start");
                1
            }
        };
        if pending == 0 {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(pending, "CRDs still not served at start; going on");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many of an established CRD's served versions `server` lacks a store for.
fn unserved_versions(server: &ApiServer, crd: &Value) -> usize {
    let deleting = crd
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    if deleting || !crd::is_true(crd, "Established") {
        return 0;
    }
    let text = |path: &str| {
        crd.pointer(path)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let (group, plural) = (text("/spec/group"), text("/spec/names/plural"));
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool() == Some(true))
        .filter_map(|v| v["name"].as_str())
        .filter(|version| server.store(group, version, plural).is_none())
        .count()
}

#[cfg(test)]
mod tests {
    use generic_server::informer;
    use generic_server::service_client::StorageReader;
    use serde_json::json;

    use super::*;

    /// A server holding CRDs over memory storage, with the controller
    /// following them; the server and a client of it.
    async fn serving() -> (Arc<ApiServer>, Loopback) {
        let (server, cacher) = ApiServer::in_memory(vec![crd::resource()])
            .await
            .expect("a server");
        let admission = Admission::default();
        let client = Loopback::new(server.clone(), "test");
        let context = Context {
            server: server.clone(),
            cacher: cacher.clone(),
            admission,
            etcd_root: "/registry".into(),
            client: client.clone(),
            reader: Arc::new(StorageReader::new(cacher.storage().clone(), "/registry")),
            webhooks: Arc::new(Clients::new(None)),
        };
        let crds = server
            .store("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .expect("the CRD store");
        let controller = CrdController::new(context).start();
        informer::follow(crds, Duration::from_secs(60), move |change| {
            controller.do_send(Sync(change));
            true
        });
        (server, client)
    }

    fn widgets(plural: &str, kind: &str) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.example.com")},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
        })
    }

    /// The CRD once `condition` is True, polled for up to 5 s.
    async fn when_true(client: &Loopback, name: &str, condition: &str) -> Option<Value> {
        for _ in 0..100 {
            if let Ok(crd) = client.get(&format!("{CRD_PATH}/{name}")).await {
                if crd::is_true(&crd, condition) {
                    return Some(crd);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    #[actix::test]
    async fn a_new_crd_is_established_and_served_and_a_clashing_one_is_not() {
        let (server, client) = serving().await;
        client
            .create(CRD_PATH, &widgets("widgets", "Widget"))
            .await
            .expect("created");
        let crd = when_true(&client, "widgets.example.com", "Established")
            .await
            .expect("established");
        assert!(crd::is_true(&crd, "NamesAccepted"));
        let crds = server
            .store("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .expect("the CRD store");
        tokio::time::timeout(
            Duration::from_secs(5),
            served_at_start(server.clone(), crds),
        )
        .await
        .expect("served at start");
        assert!(server.store("example.com", "v1", "widgets").is_some());
        let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}});
        let created = client
            .create("/apis/example.com/v1/namespaces/ns/widgets", &widget)
            .await
            .expect("a widget");
        assert_eq!(created["spec"]["size"], 1);

        // A second CRD claiming the same kind under another plural is refused its names.
        let mut clash = widgets("gizmos", "Widget");
        clash["spec"]["names"]["singular"] = json!("gizmo");
        client.create(CRD_PATH, &clash).await.expect("created");
        let mut refused = None;
        for _ in 0..100 {
            let crd = client
                .get(&format!("{CRD_PATH}/gizmos.example.com"))
                .await
                .expect("the CRD");
            if crd::condition(&crd, "NamesAccepted").is_some_and(|c| c["status"] == "False") {
                refused = Some(crd);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let refused = refused.expect("names refused");
        assert!(!crd::is_true(&refused, "Established"));
        assert!(server.store("example.com", "v1", "gizmos").is_none());
    }

    #[actix::test]
    async fn a_deleted_crd_takes_its_custom_resources_and_its_store_with_it() {
        let (server, client) = serving().await;
        client
            .create(CRD_PATH, &widgets("widgets", "Widget"))
            .await
            .expect("created");
        when_true(&client, "widgets.example.com", "Established")
            .await
            .expect("established");
        let widget =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
        client
            .create("/apis/example.com/v1/namespaces/ns/widgets", &widget)
            .await
            .expect("a widget");
        client
            .delete(&format!("{CRD_PATH}/widgets.example.com"))
            .await
            .expect("deleting");
        let mut gone = false;
        for _ in 0..200 {
            if client
                .get(&format!("{CRD_PATH}/widgets.example.com"))
                .await
                .is_err()
            {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(gone, "the CRD goes once its widgets are gone");
        for _ in 0..100 {
            if server.store("example.com", "v1", "widgets").is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(server.store("example.com", "v1", "widgets").is_none());
    }
}
