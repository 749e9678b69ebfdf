//! The API server: routes a request to the store that owns its resource
//! (or to a create-only or read-only endpoint), answers discovery, OpenAPI,
//! health and version, and hands everything else to its delegate, the next
//! server in the chain.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use http::{HeaderValue, StatusCode, header};
use serde_json::{Map, Value, json};

use crate::admission::Admission;
use crate::discovery::{self, Discovery, Group, Rendered};
use crate::handlers;
use crate::health::HealthCheck;
use crate::registry::{PatchSchema, Store};
use crate::request::{ApiRequest, ApiResponse, Handler};
use crate::resource::Resource;
use crate::rest::{Answered, Computed, CreateOnly, ReadOnly, Rest, Stored};
use crate::storage::cacher::Cacher;
use apimachinery::error::{Error, Result};
use apimachinery::openapi::{self, Components, ResourceSpec, SubresourceSpec};

/// Where a resource is served: group, version, resource, and the
/// subresource (`""` for the resource itself) for an endpoint of its own.
type RestKey = (String, String, String, String);

/// One server of the chain.
pub struct ApiServer {
    name: String,
    rest: RwLock<HashMap<RestKey, Arc<dyn Rest>>>,
    discovery: Arc<Discovery>,
    openapi: RwLock<HashMap<String, Rendered>>,
    delegate: Arc<dyn Handler>,
    checks: RwLock<Vec<(String, HealthCheck)>>,
    declared: RwLock<Vec<Resource>>,
}

impl ApiServer {
    /// A server named `name` (for logs) that hands what it does not serve to `delegate`.
    pub fn new(
        name: &str,
        discovery: Arc<Discovery>,
        delegate: Arc<dyn Handler>,
        checks: Vec<(String, HealthCheck)>,
    ) -> Self {
        crate::metrics::global().label_by(discovery.clone());
        ApiServer {
            name: name.into(),
            rest: RwLock::default(),
            discovery,
            openapi: RwLock::default(),
            delegate,
            checks: RwLock::new(checks),
            declared: RwLock::default(),
        }
    }

    /// A server over in-memory storage holding `resources`, at the end of
    /// its chain, and its cache: what controllers' unit tests run against.
    pub async fn in_memory(resources: Vec<Resource>) -> Result<(Arc<ApiServer>, Arc<Cacher>)> {
        let storage = Arc::new(crate::storage::memory::MemoryStorage::default());
        let cacher = Cacher::start(storage).await?;
        let server = Arc::new(ApiServer::new(
            "in-memory",
            Arc::new(Discovery::default()),
            Arc::new(crate::request::NotFoundHandler),
            Vec::new(),
        ));
        server
            .install(resources, &cacher, &Admission::default(), "/registry")
            .await?;
        Ok((server, cacher))
    }

    /// Adds a check that `/readyz` (and `/healthz`) run.
    pub fn add_health_check(&self, name: &str, check: HealthCheck) {
        self.checks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((name.to_string(), check));
    }

    /// The server's discovery.
    pub fn discovery(&self) -> &Arc<Discovery> {
        &self.discovery
    }

    /// Installs built-in resources: a store each, their discovery and their
    /// OpenAPI documents (built once, here).
    pub async fn install(
        &self,
        resources: Vec<Resource>,
        cacher: &Arc<Cacher>,
        admission: &Admission,
        etcd_root: &str,
    ) -> Result<()> {
        let (components, schemas) = self.publish_openapi(&resources);
        let shared: Arc<Map<String, Value>> = Arc::new(components.schemas().clone());
        // Create-only kinds (reviews) are answered by endpoints, not stored.
        for (r, schema) in resources
            .iter()
            .zip(&schemas)
            .filter(|(r, _)| r.supports("get"))
        {
            let patch_schema = schema.as_ref().map(|name| PatchSchema {
                root: json!({ "$ref": format!("{}{name}", openapi::SCHEMA_PREFIX) }),
                components: shared.clone(),
            });
            let store = Store::new(
                r.clone(),
                cacher.clone(),
                admission.clone(),
                etcd_root,
                patch_schema,
            )
            .await?;
            let store = match &r.converter {
                // Admission rules naming another version match (Equivalent).
                Some(converter) => store.with_equivalents(crate::admission::Equivalents {
                    versions: resources
                        .iter()
                        .filter(|o| o.group == r.group && o.plural == r.plural)
                        .filter(|o| o.version != r.version)
                        .map(|o| o.version.clone())
                        .collect(),
                    converter: converter.clone(),
                }),
                None => store,
            };
            self.add_store(Arc::new(store));
        }
        tracing::info!(server = %self.name, resources = resources.len(), "installed resources");
        self.declare(resources);
        Ok(())
    }

    /// Serves computed resources with get, list and watch: each endpoint
    /// is listed every `period` and mirrored into memory, where the
    /// generic store serves it with resourceVersions ([`crate::mirror`]).
    pub async fn install_computed(
        &self,
        resources: Vec<(Resource, Arc<dyn ReadOnly>)>,
        period: std::time::Duration,
    ) -> Result<()> {
        use crate::mirror::{self, Mirror};
        let storage: Arc<dyn crate::storage::Storage> =
            Arc::new(crate::storage::memory::MemoryStorage::default());
        let mut mirrors = Vec::new();
        let mut served = Vec::new();
        for (resource, endpoint) in resources {
            let resource = resource.verbs(&["get", "list", "watch"]);
            mirrors.push(Mirror::new(resource.clone(), endpoint, storage.clone()));
            served.push(resource);
        }
        for mirror in &mirrors {
            if let Err(error) = mirror.sync().await {
                tracing::warn!(%error, "listing a computed resource");
            }
        }
        let cacher = Cacher::start(storage).await?;
        self.install(served, &cacher, &Admission::default(), mirror::ROOT)
            .await?;
        for mirror in mirrors {
            mirror.follow(period);
        }
        Ok(())
    }

    /// Serves read-only resources computed on request (an aggregated
    /// server's metrics): their discovery, OpenAPI documents, `get` and `list`.
    pub fn install_read_only(&self, resources: Vec<(Resource, Arc<dyn ReadOnly>)>) {
        let (resources, endpoints): (Vec<Resource>, Vec<_>) = resources.into_iter().unzip();
        self.publish_openapi(&resources);
        for (r, endpoint) in resources.iter().zip(endpoints) {
            self.add_rest("", Arc::new(Computed::new(r.clone(), endpoint)));
        }
        tracing::info!(server = %self.name, resources = resources.len(), "installed read-only resources");
        self.declare(resources);
    }

    /// Publishes the OpenAPI document of each group-version of `resources`;
    /// returns the schemas and the name of each resource's schema.
    fn publish_openapi(&self, resources: &[Resource]) -> (Components, Vec<Option<String>>) {
        let mut components = Components::new();
        let schemas: Vec<Option<String>> = resources
            .iter()
            .map(|r| {
                r.schema
                    .map(|add| add(&mut components))
                    .inspect(|name| complete_kind_schema(&mut components, name, r))
            })
            .collect();
        let specs: Vec<Option<ResourceSpec>> = resources
            .iter()
            .zip(&schemas)
            .map(|(r, s)| s.as_ref().map(|s| resource_spec(r, s, &mut components)))
            .collect();
        let mut by_gv: Vec<((String, String), Vec<ResourceSpec>)> = Vec::new();
        for spec in specs.into_iter().flatten() {
            let gv = (spec.group.clone(), spec.version.clone());
            match by_gv.iter_mut().find(|(k, _)| *k == gv) {
                Some((_, list)) => list.push(spec),
                None => by_gv.push((gv, vec![spec])),
            }
        }
        for ((group, version), specs) in by_gv {
            let doc = openapi::group_version_document(&group, &version, &specs, &components);
            self.set_openapi(&openapi::group_version_path(&group, &version), &doc);
        }
        (components, schemas)
    }

    /// Adds resources to what this server declares in discovery.
    fn declare(&self, resources: Vec<Resource>) {
        let mut declared = self.declared.write().unwrap_or_else(|e| e.into_inner());
        declared.extend(resources);
        self.refresh_discovery(&declared, None);
    }

    /// Serves a resource added at run time (a custom resource version):
    /// its store, and its place in discovery.
    pub fn add_dynamic(&self, store: Arc<Store>) {
        let resource = store.resource.clone();
        self.add_store(store);
        let mut declared = self.declared.write().unwrap_or_else(|e| e.into_inner());
        declared.retain(|r| {
            !(r.group == resource.group
                && r.version == resource.version
                && r.plural == resource.plural)
        });
        let group = resource.group.clone();
        declared.push(resource);
        self.refresh_discovery(&declared, Some(&group));
    }

    /// Stops serving a run-time resource.
    pub fn remove_dynamic(&self, group: &str, version: &str, plural: &str) {
        self.remove_store(group, version, plural);
        let mut declared = self.declared.write().unwrap_or_else(|e| e.into_inner());
        declared.retain(|r| !(r.group == group && r.version == version && r.plural == plural));
        self.refresh_discovery(&declared, Some(group));
    }

    /// Rebuilds this server's own discovery from what it declares: only
    /// `group`'s entry when one group changed, every entry otherwise. The
    /// caller holds the write lock on `declared`, so refreshes never interleave.
    fn refresh_discovery(&self, declared: &[Resource], group: Option<&str>) {
        let own: Vec<Group> = match group {
            None => discovery::groups_from_resources(declared)
                .into_iter()
                .map(Group::new)
                .collect(),
            Some(group) => {
                let mut own = self.discovery.own();
                own.retain(|g| discovery::group_name(g) != group);
                own.extend(
                    discovery::groups_from_resources(declared.iter().filter(|r| r.group == group))
                        .into_iter()
                        .map(Group::new),
                );
                own
            }
        };
        self.discovery.set_own(discovery::merge_groups(&[&own]));
    }

    /// Publishes (or replaces) the OpenAPI document of a group-version (`api/v1`).
    pub fn set_openapi(&self, gv_path: &str, document: &Value) {
        let rendered = Rendered::new(document, crate::codec::JSON);
        self.openapi
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(gv_path.to_string(), rendered);
    }

    /// Removes the OpenAPI document of a group-version.
    pub fn remove_openapi(&self, gv_path: &str) {
        self.openapi
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(gv_path);
    }

    /// The store of a resource, if this server serves it.
    pub fn store(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Store>> {
        self.rest_at(group, version, plural, "")?.store().cloned()
    }

    /// What serves a resource path (or a subresource with an endpoint of its own).
    fn rest_at(
        &self,
        group: &str,
        version: &str,
        plural: &str,
        subresource: &str,
    ) -> Option<Arc<dyn Rest>> {
        let key = (
            group.to_string(),
            version.to_string(),
            plural.to_string(),
            subresource.to_string(),
        );
        self.rest
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned()
    }

    /// Serves `rest` at its resource (and `subresource`, if not `""`).
    fn add_rest(&self, subresource: &str, rest: Arc<dyn Rest>) {
        let r = rest.resource();
        let key = (
            r.group.clone(),
            r.version.clone(),
            r.plural.clone(),
            subresource.to_string(),
        );
        self.rest
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, rest);
    }

    /// Serves a connect subresource (`pods/proxy`) with an endpoint of its
    /// own: `endpoint`'s [`Rest::connect`] answers it, for the resource
    /// [`Rest::resource`] names, which declares the subresource.
    pub fn add_connect(&self, subresource: &str, endpoint: Arc<dyn Rest>) {
        self.add_rest(subresource, endpoint);
    }

    /// Serves a create-only endpoint for `kind` at a resource (and
    /// subresource) of a group/version; discovery comes from the resource
    /// declarations installed with [`ApiServer::install`].
    pub fn add_create_only(
        &self,
        resource: &Resource,
        subresource: &str,
        kind: apimachinery::group_version::GroupVersionKind,
        endpoint: Arc<dyn CreateOnly>,
    ) {
        let answered = Answered {
            resource: resource.clone(),
            kind,
            endpoint,
        };
        self.add_rest(subresource, Arc::new(answered));
    }

    /// Serves a read-only endpoint computed on request for a resource
    /// already installed with [`ApiServer::install`] (beside stored ones in
    /// its group/version, so discovery and OpenAPI come from there).
    pub fn add_read_only(&self, resource: &Resource, endpoint: Arc<dyn ReadOnly>) {
        self.add_rest("", Arc::new(Computed::new(resource.clone(), endpoint)));
    }

    /// Every store this server serves.
    pub fn stores(&self) -> Vec<Arc<Store>> {
        self.rest
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter_map(|rest| rest.store().cloned())
            .collect()
    }

    /// Adds one store (dynamic resources, such as a CRD's).
    pub fn add_store(&self, store: Arc<Store>) {
        self.add_rest("", Arc::new(Stored(store)));
    }

    /// Removes one store.
    pub fn remove_store(&self, group: &str, version: &str, plural: &str) {
        let key = (
            group.to_string(),
            version.to_string(),
            plural.to_string(),
            String::new(),
        );
        self.rest
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }

    /// Whether this server declares (in its discovery) a group/version: an
    /// unknown resource there is a 404 here. An endpoint it answers without
    /// declaring (the front door's TokenReview) leaves the group/version
    /// to the delegate that declares it.
    fn serves_group_version(&self, group: &str, version: &str) -> bool {
        self.declared
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|r| r.group == group && r.version == version)
    }

    async fn health(&self, req: &ApiRequest, endpoint: &str, only: Option<&str>) -> ApiResponse {
        let verbose = req.query_pairs().iter().any(|(k, _)| k == "verbose");
        let excluded: Vec<String> = req
            .query_pairs()
            .into_iter()
            .filter(|(k, _)| k == "exclude")
            .map(|(_, v)| v)
            .collect();
        let mut lines = vec!["[+]ping ok".to_string()];
        let mut failed = false;
        if only == Some("ping") {
            return ApiResponse::bytes(StatusCode::OK, "text/plain; charset=utf-8", "ok");
        }
        let checks = self
            .checks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for (name, check) in &checks {
            if only.is_some_and(|o| o != name) || excluded.contains(name) {
                continue;
            }
            match check().await {
                Ok(()) => lines.push(format!("[+]{name} ok")),
                Err(why) => {
                    failed = true;
                    tracing::warn!(check = %name, %why, "health check failed");
                    lines.push(format!("[-]{name} failed: reason withheld"));
                }
            }
        }
        // kube's `shutdown` check: a stopping server is not ready, so load
        // balancers stop sending it requests while it drains.
        if endpoint == "readyz" && only.is_none() && crate::shutdown::is_draining() {
            failed = true;
            lines.push("[-]shutdown failed: reason withheld".into());
        }
        let status = if failed {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        };
        let body = if verbose || failed {
            lines.push(format!(
                "{endpoint} check {}",
                if failed { "failed" } else { "passed" }
            ));
            lines.join("\n") + "\n"
        } else {
            "ok".into()
        };
        ApiResponse::bytes(status, "text/plain; charset=utf-8", body)
    }

    fn discovery_root(&self, req: &ApiRequest, path: &str) -> ApiResponse {
        let docs = self.discovery.documents();
        if docs.groups.is_empty() {
            // Nothing known yet (the delegates' discovery has not arrived):
            // retryable, not "does not exist".
            return Error::unavailable("the server is currently unable to handle the request")
                .into();
        }
        let accept = req.header(header::ACCEPT).unwrap_or("");
        let rendered = match discovery::aggregated_version(accept) {
            Some(version) => docs.aggregated(path, version),
            None => docs.legacy(path),
        };
        match rendered {
            Some(r) => cached(req, r),
            None => Error::path_not_found().into(),
        }
    }

    fn openapi_index(&self, req: &ApiRequest) -> ApiResponse {
        let docs = self.discovery.documents();
        let own = self.openapi.read().unwrap_or_else(|e| e.into_inner());
        let paths = docs.group_versions().into_iter().map(|(g, v)| {
            let path = openapi::group_version_path(&g, &v);
            let hash = own
                .get(&path)
                .map(|r| r.etag.trim_matches('"').to_string())
                .unwrap_or_default();
            (path, hash)
        });
        cached(
            req,
            &Rendered::new(&openapi::index_document(paths), crate::codec::JSON),
        )
    }
}

/// Gives the schema of a kind kube's tables do not know (an aggregated
/// server's own) what a built-in kind's has: its group-version-kind, and
/// the schema of its list.
fn complete_kind_schema(components: &mut Components, name: &str, r: &Resource) {
    let Some(mut schema) = components.get(name).cloned() else {
        return;
    };
    if schema.get("x-kubernetes-group-version-kind").is_some() || !schema.is_object() {
        return;
    }
    schema["x-kubernetes-group-version-kind"] = json!([r.gvk().to_value()]);
    // A kind declared outside k8s-openapi (an aggregated server's) has no
    // apiVersion and kind fields of its own: every object has them.
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for (field, what) in [
            (
                "apiVersion",
                "APIVersion defines the versioned schema of this representation of an object.",
            ),
            (
                "kind",
                "Kind is a string value representing the REST resource this object represents.",
            ),
        ] {
            properties
                .entry(field)
                .or_insert_with(|| json!({"type": "string", "description": what}));
        }
    }
    components.insert(name, schema);
    if r.supports("list") && !components.contains(&format!("{name}List")) {
        components.add_list(
            name,
            &apimachinery::group_version::GroupVersionKind::new(&r.group, &r.version, &r.list_kind),
        );
    }
}

/// Answers a rendered document, or 304 when the client has it.
/// A rendered document, or 304 Not Modified when the client holds its ETag.
pub fn cached(req: &ApiRequest, rendered: &Rendered) -> ApiResponse {
    let mut resp = if req.header(header::IF_NONE_MATCH) == Some(rendered.etag.as_str()) {
        ApiResponse::bytes(
            StatusCode::NOT_MODIFIED,
            rendered.content_type,
            bytes::Bytes::new(),
        )
    } else {
        ApiResponse::bytes(StatusCode::OK, rendered.content_type, rendered.body.clone())
    };
    if let Ok(etag) = HeaderValue::from_str(&rendered.etag) {
        resp.headers.insert(header::ETAG, etag);
    }
    resp.headers
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    resp
}

/// The OpenAPI description of a resource.
fn resource_spec(r: &Resource, schema: &str, components: &mut Components) -> ResourceSpec {
    let mut spec = ResourceSpec {
        group: r.group.clone(),
        version: r.version.clone(),
        kind: r.kind.clone(),
        plural: r.plural.clone(),
        namespaced: r.namespaced,
        verbs: r.verbs.clone(),
        subresources: Vec::new(),
        schema: schema.to_string(),
        strategic_merge_patch: r.strategic_merge_patch,
        delete_returns_object: r.strategy.openapi_delete_returns_object(),
    };
    for sub in &r.subresources {
        let kind_schema = match sub.schema {
            Some(add) => add(components),
            None => spec.schema.clone(),
        };
        let gvk = sub.kind.clone().unwrap_or_else(|| spec.gvk());
        spec.subresources.push(SubresourceSpec {
            name: sub.name.clone(),
            kind_schema,
            gvk,
            verbs: sub.verbs.clone(),
            connect: sub
                .connect
                .then(|| sub.options.iter().map(|o| o.to_string()).collect()),
        });
    }
    spec
}

#[async_trait::async_trait]
impl Handler for ApiServer {
    async fn handle(&self, req: ApiRequest) -> ApiResponse {
        let path = if req.path.len() > 1 {
            req.path.trim_end_matches('/').to_string()
        } else {
            req.path.clone()
        };
        match path.as_str() {
            "/healthz" | "/livez" | "/readyz" => return self.health(&req, &path[1..], None).await,
            "/version" => return ApiResponse::json(StatusCode::OK, &crate::version::info()),
            "/api" | "/apis" => return self.discovery_root(&req, &path),
            "/openapi/v3" => return self.openapi_index(&req),
            _ => {}
        }
        // A server behind the front door serves its metrics there, at
        // `/metrics/<name>`, to whoever RBAC lets read that path.
        if path.strip_prefix("/metrics/") == Some(self.name.as_str())
            && req.method == http::Method::GET
        {
            return ApiResponse::bytes(
                StatusCode::OK,
                crate::metrics::Metrics::CONTENT_TYPE,
                crate::metrics::global().render(),
            );
        }
        for endpoint in ["/healthz/", "/livez/", "/readyz/"] {
            if let Some(check) = path.strip_prefix(endpoint) {
                return self
                    .health(&req, &endpoint[1..endpoint.len() - 1], Some(check))
                    .await;
            }
        }
        if let Some(gv_path) = path.strip_prefix("/openapi/v3/") {
            let doc = self
                .openapi
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(gv_path)
                .cloned();
            if let Some(doc) = doc {
                return cached(&req, &doc);
            }
            return self.delegate.handle(req).await;
        }
        let info = req.info.clone();
        if info.is_resource_request {
            let (group, version) = (&info.api_group, &info.api_version);
            // A subresource with an endpoint of its own (a token request),
            // else the resource's own REST.
            let own = (!info.subresource.is_empty())
                .then(|| self.rest_at(group, version, &info.resource, &info.subresource))
                .flatten();
            let rest = own.or_else(|| self.rest_at(group, version, &info.resource, ""));
            if let Some(rest) = rest {
                return handlers::serve(rest.as_ref(), req).await;
            }
            if self.serves_group_version(&info.api_group, &info.api_version) {
                return Error::path_not_found().into();
            }
            return self.delegate.handle(req).await;
        }
        if info.is_discovery() {
            if let Some(doc) = self.discovery.documents().legacy(&path) {
                return cached(&req, doc);
            }
        }
        self.delegate.handle(req).await
    }
}

/// Shorthand for a failed result as a response.
pub fn respond(result: Result<ApiResponse>) -> ApiResponse {
    result.unwrap_or_else(ApiResponse::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{NotFoundHandler, UserInfo};
    use http::Method;

    struct Plain;
    impl crate::strategy::Strategy for Plain {}

    /// Two computed config maps.
    struct Computed;

    #[async_trait::async_trait]
    impl ReadOnly for Computed {
        async fn list(&self, _req: &ApiRequest, namespace: &str) -> Result<Vec<Value>> {
            let all = [("a", "x", "1"), ("b", "y", "2")];
            Ok(all
                .iter()
                .filter(|(_, ns, _)| namespace.is_empty() || namespace == *ns)
                .map(|(name, ns, tier)| json!({"metadata": {"name": name, "namespace": ns, "labels": {"tier": tier}}}))
                .collect())
        }
    }

    async fn call(server: &ApiServer, method: Method, path: &str, query: &str) -> (u16, Value) {
        let req = ApiRequest::new(
            method,
            path,
            query,
            http::HeaderMap::new(),
            bytes::Bytes::new(),
            UserInfo::default(),
        );
        let resp = server.handle(req).await;
        let status = resp.status.as_u16();
        (
            status,
            serde_json::from_slice(&resp.into_bytes().await).unwrap_or(Value::Null),
        )
    }

    #[tokio::test]
    async fn read_only_resources_answer_get_and_list() {
        let server = ApiServer::new(
            "test",
            Arc::new(Discovery::default()),
            Arc::new(NotFoundHandler),
            Vec::new(),
        );
        let resource = Resource::builtin::<k8s_openapi::api::core::v1::ConfigMap>(Plain)
            .verbs(&["get", "list"]);
        server.install_read_only(vec![(resource, Arc::new(Computed))]);

        let (code, obj) = call(
            &server,
            Method::GET,
            "/api/v1/namespaces/y/configmaps/b",
            "",
        )
        .await;
        assert_eq!(
            (code, obj["kind"].as_str(), obj["apiVersion"].as_str()),
            (200, Some("ConfigMap"), Some("v1"))
        );
        assert_eq!(
            call(
                &server,
                Method::GET,
                "/api/v1/namespaces/x/configmaps/b",
                ""
            )
            .await
            .0,
            404
        );
        let (_, all) = call(&server, Method::GET, "/api/v1/configmaps", "").await;
        assert_eq!(
            (all["kind"].as_str(), all["items"].as_array().map(Vec::len)),
            (Some("ConfigMapList"), Some(2))
        );
        let (_, selected) = call(
            &server,
            Method::GET,
            "/api/v1/configmaps",
            "labelSelector=tier%3D2",
        )
        .await;
        assert_eq!(selected["items"][0]["metadata"]["name"], "b");
        let (_, named) = call(
            &server,
            Method::GET,
            "/api/v1/configmaps",
            "fieldSelector=metadata.name%3Da",
        )
        .await;
        assert_eq!(named["items"].as_array().map(Vec::len), Some(1));
        assert_eq!(
            call(
                &server,
                Method::GET,
                "/api/v1/configmaps",
                "fieldSelector=data.x%3Da"
            )
            .await
            .0,
            400
        );
        assert_eq!(
            call(&server, Method::POST, "/api/v1/namespaces/x/configmaps", "")
                .await
                .0,
            405
        );
        assert_eq!(
            call(&server, Method::GET, "/api/v1/configmaps", "watch=true")
                .await
                .0,
            405
        );
        let (_, discovery) = call(&server, Method::GET, "/api/v1", "").await;
        assert_eq!(discovery["resources"][0]["verbs"], json!(["get", "list"]));
    }
}
