//! Group-version documents: `/openapi/v3/api/v1` and `/openapi/v3/apis/<group>/<version>`.
//!
//! Shaped like kube-apiserver's: one path per collection, item, all-namespaces
//! list and subresource; operations with `operationId`, `x-kubernetes-action`,
//! an `x-kubernetes-group-version-kind` object and inline parameters (kubectl's
//! `--validate=strict` probe matches the PATCH operation's `fieldValidation`
//! parameter by name, so it cannot be a `$ref`); PATCH request bodies list
//! strategic merge patch only for kinds that support it (kubectl picks the patch
//! type from that list); `components.schemas` holds what the paths reach.

use std::any::TypeId;
use std::collections::BTreeMap;

use k8s_openapi::{NamespaceResourceScope, Resource};
use schemars::JsonSchema;
use serde_json::{Map, Value, json};

use super::components::{Components, SCHEMA_PREFIX, collect_refs, published_form};
use super::parameters::{
    DELETE_COLLECTION_PARAMS, DELETE_PARAMS, LIST_PARAMS, PATCH_PARAMS, WRITE_PARAMS, path_param,
    path_params, query_param,
};
use crate::group_version::GroupVersionKind;

/// The `openapi` version kube-apiserver declares.
pub const OPENAPI_VERSION: &str = "3.0.0";

/// The `info.version` kube-apiserver 1.33 declares.
const INFO_VERSION: &str = "v1.33.0";

/// Every verb of a built-in resource, in discovery order.
pub const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Media types of responses carrying an object.
const OBJECT_MEDIA: [&str; 2] = ["application/json", "application/yaml"];

/// Media types of list responses (lists can be watched).
const LIST_MEDIA: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/json;stream=watch",
];

/// Patch media types every resource lists.
const PATCH_MEDIA: [&str; 3] = [
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
];

/// The strategic merge patch media type, listed only for kinds that support it.
const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";

/// CBOR apply patches, which kube 1.33 lists for the kinds its API installer
/// renders whether or not its `CBORServingAndStorage` gate is on (and
/// refuses, 415, while it is off, as kubechain does).
const APPLY_PATCH_CBOR: &str = "application/apply-patch+cbor";

/// Response codes and their descriptions.
const OK: (&str, &str) = ("200", "OK");
const CREATED_ONLY: (&str, &str) = ("201", "Created");
const ACCEPTED: (&str, &str) = ("202", "Accepted");
/// Responses of a create.
const CREATED: [(&str, &str); 3] = [OK, CREATED_ONLY, ACCEPTED];

const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
const API_RESOURCE_LIST: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList";

/// Media types of a watch's events.
const WATCH_MEDIA: [&str; 4] = [
    "application/json",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
    "application/yaml",
];

/// Media types of the group-version's resource list (`GET /apis/<group>/<version>/`).
const DISCOVERY_MEDIA: [&str; 3] = [
    "application/json",
    "application/vnd.kubernetes.protobuf",
    "application/yaml",
];

/// One resource served in a group-version, as the document needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSpec {
    /// API group, `""` for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind of the resource's objects.
    pub kind: String,
    /// Plural resource name used in paths (`configmaps`).
    pub plural: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Supported verbs among get, list, watch, create, update, patch, delete, deletecollection.
    pub verbs: Vec<String>,
    /// Subresources (`status`, `scale`, …).
    pub subresources: Vec<SubresourceSpec>,
    /// Component name of the kind's schema; its list is `<schema>List`.
    pub schema: String,
    /// Whether PATCH accepts `application/strategic-merge-patch+json` (built-ins yes, custom resources no).
    pub strategic_merge_patch: bool,
    /// Whether DELETE answers with the object rather than a Status (kube's
    /// `rest.MayReturnFullObjectDeleter`: pods, services, persistent volumes, …).
    pub delete_returns_object: bool,
}

/// One subresource of a [`ResourceSpec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubresourceSpec {
    /// Subresource name (`status`, `scale`, `eviction`, …).
    pub name: String,
    /// Component name of the schema sent and returned.
    pub kind_schema: String,
    /// Group/version/kind of that schema (autoscaling/v1 Scale for `scale`).
    pub gvk: GroupVersionKind,
    /// Supported verbs among get, update, patch and create (for a connect
    /// subresource, also delete).
    pub verbs: Vec<String>,
    /// For a subresource that connects to something beyond the store (kube's
    /// `rest.Connecter`: `pods/exec`, `nodes/proxy`), the query parameters of
    /// its options kind (`command`, `container`, …). A connect subresource of
    /// the parent kind itself (`pods/log`) is a read with those parameters.
    pub connect: Option<Vec<String>>,
}

impl ResourceSpec {
    /// The spec of a built-in k8s-openapi kind with every verb and strategic merge patch; adds its schemas.
    pub fn builtin<K: Resource + JsonSchema + 'static>(components: &mut Components) -> Self {
        Self {
            group: K::GROUP.to_string(),
            version: K::VERSION.to_string(),
            kind: K::KIND.to_string(),
            plural: K::URL_PATH_SEGMENT.to_string(),
            namespaced: TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>(),
            verbs: ALL_VERBS.iter().map(|verb| verb.to_string()).collect(),
            subresources: Vec::new(),
            schema: components.add::<K>(),
            strategic_merge_patch: true,
            delete_returns_object: false,
        }
    }

    /// The same spec with a subresource added.
    pub fn with_subresource(mut self, subresource: SubresourceSpec) -> Self {
        self.subresources.push(subresource);
        self
    }

    /// The group/version/kind of the resource's objects.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new(&self.group, &self.version, &self.kind)
    }

    /// Whether `verb` is supported.
    fn can(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// Whether kube renders it with its API installer (built-in and
    /// aggregated kinds: the group-version's resource list, the `/watch/`
    /// paths, CBOR apply patches) rather than with its CRD builder, which
    /// lists none of those. Custom resources are the kinds without
    /// strategic merge patch.
    fn installed(&self) -> bool {
        self.strategic_merge_patch
    }
}

impl SubresourceSpec {
    /// The `status` subresource of `parent` (get, update, patch of the parent kind).
    pub fn status(parent: &ResourceSpec) -> Self {
        Self {
            name: "status".to_string(),
            kind_schema: parent.schema.clone(),
            gvk: parent.gvk(),
            verbs: ["get", "patch", "update"]
                .iter()
                .map(|v| v.to_string())
                .collect(),
            connect: None,
        }
    }

    /// The `scale` subresource (autoscaling/v1 Scale); adds the Scale schema.
    pub fn scale(components: &mut Components) -> Self {
        Self {
            name: "scale".to_string(),
            kind_schema: components.add::<k8s_openapi::api::autoscaling::v1::Scale>(),
            gvk: GroupVersionKind::new("autoscaling", "v1", "Scale"),
            verbs: ["get", "patch", "update"]
                .iter()
                .map(|v| v.to_string())
                .collect(),
            connect: None,
        }
    }

    /// Whether `verb` is supported.
    fn can(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }
}

/// `api/v1` for the core group, `apis/<group>/<version>` otherwise (the `/openapi/v3/` suffix).
pub fn group_version_path(group: &str, version: &str) -> String {
    crate::group_version::group_version_path(group, version)
        .trim_start_matches('/')
        .to_string()
}

/// The OpenAPI v3 document of one group-version serving `resources`.
///
/// Every schema the specs name must already be in `components`; refs to
/// missing schemas are left dangling and their schemas left out.
pub fn group_version_document(
    group: &str,
    version: &str,
    resources: &[ResourceSpec],
    components: &Components,
) -> Value {
    let context = Context::new(group, version, components);
    let mut paths = BTreeMap::new();
    if resources.iter().any(ResourceSpec::installed) {
        context.add_resource_list(&mut paths);
    }
    for resource in resources {
        context.add_resource(&mut paths, resource);
    }
    let paths: Map<String, Value> = paths
        .into_iter()
        .map(|(path, item)| (path, Value::Object(item)))
        .collect();
    let paths = Value::Object(paths);
    let mut referenced = Vec::new();
    collect_refs(&paths, &mut |name| referenced.push(name.to_owned()));
    let mut schemas = components.reachable(referenced.iter().map(String::as_str));
    for (name, schema) in schemas.iter_mut() {
        published_form(name, schema);
    }
    json!({
        "openapi": OPENAPI_VERSION,
        "info": {"title": "Kubernetes", "version": INFO_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// What every operation of one group-version shares.
struct Context<'a> {
    /// `/api/v1` or `/apis/<group>/<version>`.
    prefix: String,
    /// `CoreV1`, `AppsV1`, `RbacAuthorizationV1`: the middle of operation IDs.
    id_infix: String,
    /// `core_v1`, `apps_v1`: the operation tag.
    tag: String,
    components: &'a Components,
}

/// The path items of a document, by path.
type Paths = BTreeMap<String, Map<String, Value>>;

impl<'a> Context<'a> {
    /// The context of `group`/`version`.
    fn new(group: &str, version: &str, components: &'a Components) -> Self {
        let words = group_words(group);
        let id_infix =
            words.iter().map(|w| capitalize(w)).collect::<String>() + &capitalize(version);
        let tag_group = words
            .iter()
            .enumerate()
            .map(|(i, w)| if i == 0 { w.clone() } else { capitalize(w) });
        Self {
            prefix: format!("/{}", group_version_path(group, version)),
            id_infix,
            tag: format!("{}_{version}", tag_group.collect::<String>()),
            components,
        }
    }

    /// Adds the collection, item, all-namespaces and subresource paths of `resource`.
    fn add_resource(&self, paths: &mut Paths, resource: &ResourceSpec) {
        let base = if resource.namespaced {
            format!(
                "{}/namespaces/{{namespace}}/{}",
                self.prefix, resource.plural
            )
        } else {
            format!("{}/{}", self.prefix, resource.plural)
        };
        self.add_collection(paths, resource, &base);
        self.add_item(paths, resource, &format!("{base}/{{name}}"));
        if resource.namespaced && resource.can("list") {
            self.add_all_namespaces_list(paths, resource);
        }
        if resource.can("watch") && resource.installed() {
            self.add_watches(paths, resource);
        }
        for subresource in &resource.subresources {
            let path = format!("{base}/{{name}}/{}", subresource.name);
            match &subresource.connect {
                Some(options) if subresource.gvk.kind == resource.kind => {
                    self.add_read_with_options(paths, resource, subresource, options, &path)
                }
                Some(options) => {
                    self.add_connect(paths, resource, subresource, options, &path);
                    // A proxy (its options name a `path`) also serves every path below it.
                    if options.iter().any(|o| o == "path") {
                        self.add_connect(
                            paths,
                            resource,
                            subresource,
                            options,
                            &format!("{path}/{{path}}"),
                        );
                    }
                }
                None => self.add_subresource(paths, resource, subresource, &path),
            }
        }
    }

    /// `GET /<prefix>/`: the group-version's resources (an APIResourceList).
    fn add_resource_list(&self, paths: &mut Paths) {
        let mut rendered = Map::new();
        rendered.insert("description".into(), "get available resources".into());
        let id = format!("get{}APIResources", self.id_infix);
        rendered.insert("operationId".into(), id.into());
        rendered.insert(
            "responses".into(),
            responses(API_RESOURCE_LIST, &DISCOVERY_MEDIA, &[OK]),
        );
        rendered.insert("tags".into(), json!([self.tag]));
        let item = paths.entry(format!("{}/", self.prefix)).or_default();
        item.insert("get".into(), Value::Object(rendered));
    }

    /// The watch paths kube still lists (deprecated in favour of `?watch=true`):
    /// `/watch/…/<plural>/{name}`, `/watch/…/<plural>`, and for a namespaced
    /// resource `/watch/<plural>` across namespaces.
    fn add_watches(&self, paths: &mut Paths, resource: &ResourceSpec) {
        let (kind, gvk) = (&resource.kind, resource.gvk());
        let scoped = scoped_kind(resource);
        let base = if resource.namespaced {
            format!(
                "{}/watch/namespaces/{{namespace}}/{}",
                self.prefix, resource.plural
            )
        } else {
            format!("{}/watch/{}", self.prefix, resource.plural)
        };
        let watch = |action: &'static str, id: String, description: String| {
            Op::new("get", action, id, &gvk)
                .describe(description)
                .responses(responses(WATCH_EVENT, &WATCH_MEDIA, &[OK]))
        };
        let params: Vec<Value> = LIST_PARAMS.iter().map(|name| query_param(name)).collect();
        let with = |mut shared: Vec<Value>| {
            shared.extend_from_slice(&params);
            shared
        };
        if resource.can("get") {
            let mut ops = Map::new();
            let id = format!("watch{}{scoped}", self.id_infix);
            let description = format!(
                "watch changes to an object of kind {kind}. deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter."
            );
            self.push(&mut ops, watch("watch", id, description));
            let shared = with(path_params(resource.namespaced, Some(kind)));
            insert_path(paths, &format!("{base}/{{name}}"), shared, ops);
        }
        let list_description = format!(
            "watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a list operation instead."
        );
        let mut ops = Map::new();
        let id = format!("watch{}{scoped}List", self.id_infix);
        self.push(&mut ops, watch("watchlist", id, list_description.clone()));
        let shared = with(path_params(resource.namespaced, None));
        insert_path(paths, &base, shared, ops);
        if resource.namespaced {
            let mut ops = Map::new();
            let id = format!("watch{}{kind}ListForAllNamespaces", self.id_infix);
            self.push(&mut ops, watch("watchlist", id, list_description));
            let shared = with(path_params(false, None));
            let path = format!("{}/watch/{}", self.prefix, resource.plural);
            insert_path(paths, &path, shared, ops);
        }
    }

    /// A connect subresource of the parent kind (`pods/log`): a read whose
    /// query parameters are its options'.
    fn add_read_with_options(
        &self,
        paths: &mut Paths,
        resource: &ResourceSpec,
        sub: &SubresourceSpec,
        options: &[String],
        path: &str,
    ) {
        let kind = &resource.kind;
        let id = format!(
            "read{}{}{}",
            self.id_infix,
            scoped_kind(resource),
            capitalize(&sub.name)
        );
        let read = Op::new("get", "get", id, &sub.gvk)
            .describe(format!("read {} of the specified {kind}", sub.name))
            .responses(text_responses(&[
                "application/json",
                "application/yaml",
                "text/plain",
            ]));
        let mut ops = Map::new();
        self.push(&mut ops, read);
        let mut params = path_params(resource.namespaced, Some(kind));
        params.extend(options.iter().map(|name| query_param(name)));
        insert_path(paths, path, params, ops);
    }

    /// A connect subresource (`pods/exec`, `services/proxy`): one `connect`
    /// operation per HTTP method its verbs allow, the options' query
    /// parameters on the path. A proxy also answers HEAD and OPTIONS.
    fn add_connect(
        &self,
        paths: &mut Paths,
        resource: &ResourceSpec,
        sub: &SubresourceSpec,
        options: &[String],
        path: &str,
    ) {
        let with_path = path.ends_with("/{path}");
        let proxy = options.iter().any(|o| o == "path");
        let mut methods: Vec<&'static str> = [
            ("delete", "delete"),
            ("get", "get"),
            ("patch", "patch"),
            ("create", "post"),
            ("update", "put"),
        ]
        .iter()
        .filter(|(verb, _)| sub.can(verb))
        .map(|(_, method)| *method)
        .collect();
        if proxy {
            methods.extend(["head", "options"]);
        }
        let suffix = format!(
            "{}{}{}",
            scoped_kind(resource),
            capitalize(&sub.name),
            if with_path { "WithPath" } else { "" }
        );
        let mut ops = Map::new();
        for method in methods {
            let id = format!("connect{}{}{suffix}", self.id_infix, capitalize(method));
            let description = format!(
                "connect {} requests to {} of {}",
                method.to_uppercase(),
                sub.name,
                resource.kind
            );
            let op = Op::new(method, "connect", id, &sub.gvk)
                .describe(description)
                .responses(text_responses(&["*/*"]));
            self.push(&mut ops, op);
        }
        let name = sub.gvk.kind.as_str();
        let mut params = vec![path_param("name", &format!("name of the {name}"))];
        if resource.namespaced {
            params.push(path_param(
                "namespace",
                "object name and auth scope, such as for teams and projects",
            ));
        }
        if with_path {
            params.push(path_param("path", "path to the resource"));
        }
        params.extend(options.iter().map(|name| query_param(name)));
        insert_path(paths, path, params, ops);
    }

    /// `GET` (list/watch), `POST` and `DELETE` (deletecollection) on the collection.
    fn add_collection(&self, paths: &mut Paths, resource: &ResourceSpec, path: &str) {
        let (kind, gvk, scoped) = (&resource.kind, resource.gvk(), scoped_kind(resource));
        let mut ops = Map::new();
        if resource.can("list") {
            let list = Op::new(
                "get",
                "list",
                format!("list{}{scoped}", self.id_infix),
                &gvk,
            )
            .describe(format!("list or watch objects of kind {kind}"))
            .params(LIST_PARAMS)
            .responses(self.list_responses(resource));
            self.push(&mut ops, list);
        }
        if resource.can("create") {
            let create = Op::new(
                "post",
                "post",
                format!("create{}{scoped}", self.id_infix),
                &gvk,
            )
            .describe(format!("create a {kind}"))
            .params(WRITE_PARAMS)
            .body(object_body(&resource.schema))
            .responses(object_responses(&resource.schema, &CREATED));
            self.push(&mut ops, create);
        }
        if resource.can("deletecollection") {
            let id = format!("delete{}Collection{scoped}", self.id_infix);
            let delete = Op::new("delete", "deletecollection", id, &gvk)
                .describe(format!("delete collection of {kind}"))
                .params(DELETE_COLLECTION_PARAMS)
                .body(object_body(DELETE_OPTIONS))
                .responses(object_responses(STATUS, &[OK]));
            self.push(&mut ops, delete);
        }
        insert_path(paths, path, path_params(resource.namespaced, None), ops);
    }

    /// `GET`, `PUT`, `PATCH` and `DELETE` on one object.
    fn add_item(&self, paths: &mut Paths, resource: &ResourceSpec, path: &str) {
        let (kind, gvk, scoped) = (&resource.kind, resource.gvk(), scoped_kind(resource));
        let target = Target {
            verbs: &resource.verbs,
            schema: &resource.schema,
            gvk: &gvk,
            id_suffix: scoped.clone(),
            what: format!("the specified {kind}"),
            strategic_merge_patch: resource.strategic_merge_patch,
        };
        let mut ops = self.object_ops(&target);
        if resource.can("delete") {
            let delete = Op::new(
                "delete",
                "delete",
                format!("delete{}{scoped}", self.id_infix),
                &gvk,
            )
            .describe(format!("delete a {kind}"))
            .params(DELETE_PARAMS)
            .body(object_body(DELETE_OPTIONS))
            .responses(object_responses(
                if resource.delete_returns_object {
                    &resource.schema
                } else {
                    STATUS
                },
                &[OK, ACCEPTED],
            ));
            self.push(&mut ops, delete);
        }
        insert_path(
            paths,
            path,
            path_params(resource.namespaced, Some(kind)),
            ops,
        );
    }

    /// `GET /<prefix>/<plural>`: the list across all namespaces.
    fn add_all_namespaces_list(&self, paths: &mut Paths, resource: &ResourceSpec) {
        let kind = &resource.kind;
        let gvk = resource.gvk();
        let list = Op::new(
            "get",
            "list",
            format!("list{}{kind}ForAllNamespaces", self.id_infix),
            &gvk,
        )
        .describe(format!("list or watch objects of kind {kind}"))
        .params(LIST_PARAMS)
        .responses(self.list_responses(resource));
        let mut ops = Map::new();
        self.push(&mut ops, list);
        insert_path(
            paths,
            &format!("{}/{}", self.prefix, resource.plural),
            path_params(false, None),
            ops,
        );
    }

    /// `GET`, `PUT`, `PATCH` and `POST` on `/{name}/<subresource>`.
    fn add_subresource(
        &self,
        paths: &mut Paths,
        resource: &ResourceSpec,
        sub: &SubresourceSpec,
        path: &str,
    ) {
        let kind = &resource.kind;
        let id_suffix = format!("{}{}", scoped_kind(resource), capitalize(&sub.name));
        let target = Target {
            verbs: &sub.verbs,
            schema: &sub.kind_schema,
            gvk: &sub.gvk,
            id_suffix: id_suffix.clone(),
            what: format!("{} of the specified {kind}", sub.name),
            strategic_merge_patch: resource.strategic_merge_patch,
        };
        let mut ops = self.object_ops(&target);
        if sub.can("create") {
            let create = Op::new(
                "post",
                "post",
                format!("create{}{id_suffix}", self.id_infix),
                &sub.gvk,
            )
            .describe(format!("create {} of a {kind}", sub.name))
            .params(WRITE_PARAMS)
            .body(object_body(&sub.kind_schema))
            .responses(object_responses(&sub.kind_schema, &CREATED));
            self.push(&mut ops, create);
        }
        insert_path(
            paths,
            path,
            path_params(resource.namespaced, Some(kind)),
            ops,
        );
    }

    /// Read (`get`), replace (`update`) and patch (`patch`) operations on one object or subresource.
    fn object_ops(&self, target: &Target) -> Map<String, Value> {
        let mut ops = Map::new();
        let (schema, what, suffix) = (target.schema, &target.what, &target.id_suffix);
        if target.can("get") {
            let read = Op::new(
                "get",
                "get",
                format!("read{}{suffix}", self.id_infix),
                target.gvk,
            )
            .describe(format!("read {what}"))
            .responses(object_responses(schema, &[OK]));
            self.push(&mut ops, read);
        }
        if target.can("update") {
            let replace = Op::new(
                "put",
                "put",
                format!("replace{}{suffix}", self.id_infix),
                target.gvk,
            )
            .describe(format!("replace {what}"))
            .params(WRITE_PARAMS)
            .body(object_body(schema))
            .responses(object_responses(schema, &[OK, CREATED_ONLY]));
            self.push(&mut ops, replace);
        }
        if target.can("patch") {
            let patch = Op::new(
                "patch",
                "patch",
                format!("patch{}{suffix}", self.id_infix),
                target.gvk,
            )
            .describe(format!("partially update {what}"))
            .params(PATCH_PARAMS)
            .body(patch_body(target.strategic_merge_patch))
            .responses(object_responses(schema, &[OK, CREATED_ONLY]));
            self.push(&mut ops, patch);
        }
        ops
    }

    /// Responses of a list: the `<schema>List` when it exists.
    fn list_responses(&self, resource: &ResourceSpec) -> Value {
        let list = format!("{}List", resource.schema);
        if self.components.contains(&list) {
            responses(&list, &LIST_MEDIA, &[OK])
        } else {
            json!({"200": {"description": "OK"}, "401": {"description": "Unauthorized"}})
        }
    }

    /// Renders `op` into `ops` under its HTTP method.
    fn push(&self, ops: &mut Map<String, Value>, op: Op) {
        let mut rendered = Map::new();
        rendered.insert("description".into(), op.description.into());
        rendered.insert("operationId".into(), op.id.into());
        if !op.params.is_empty() {
            rendered.insert(
                "parameters".into(),
                op.params.iter().map(|name| query_param(name)).collect(),
            );
        }
        if let Some(body) = op.body {
            rendered.insert("requestBody".into(), body);
        }
        rendered.insert("responses".into(), op.responses);
        rendered.insert("tags".into(), json!([self.tag]));
        rendered.insert("x-kubernetes-action".into(), op.action.into());
        rendered.insert("x-kubernetes-group-version-kind".into(), op.gvk.to_value());
        ops.insert(op.method.into(), Value::Object(rendered));
    }
}

/// `Namespaced<Kind>` or `<Kind>`: the end of a resource's operation IDs.
fn scoped_kind(resource: &ResourceSpec) -> String {
    let scope = if resource.namespaced {
        "Namespaced"
    } else {
        ""
    };
    format!("{scope}{}", resource.kind)
}

/// One operation before rendering.
struct Op<'g> {
    /// HTTP method, lower case (the key in the path item).
    method: &'static str,
    /// `x-kubernetes-action`.
    action: &'static str,
    /// `operationId`.
    id: String,
    /// `description`.
    description: String,
    /// Names of the inline query parameters.
    params: &'static [&'static str],
    /// `requestBody`, if any.
    body: Option<Value>,
    /// `responses`.
    responses: Value,
    /// `x-kubernetes-group-version-kind`.
    gvk: &'g GroupVersionKind,
}

impl<'g> Op<'g> {
    /// An operation with no parameters, body or responses yet.
    fn new(
        method: &'static str,
        action: &'static str,
        id: String,
        gvk: &'g GroupVersionKind,
    ) -> Self {
        Self {
            method,
            action,
            id,
            description: String::new(),
            params: &[],
            body: None,
            responses: Value::Null,
            gvk,
        }
    }

    /// Sets the description.
    fn describe(mut self, description: String) -> Self {
        self.description = description;
        self
    }

    /// Sets the inline query parameters.
    fn params(mut self, params: &'static [&'static str]) -> Self {
        self.params = params;
        self
    }

    /// Sets the request body.
    fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    /// Sets the responses.
    fn responses(mut self, responses: Value) -> Self {
        self.responses = responses;
        self
    }
}

/// What the read/replace/patch operations of an object path act on.
struct Target<'s> {
    /// Supported verbs.
    verbs: &'s [String],
    /// Component name of the schema sent and returned.
    schema: &'s str,
    /// `x-kubernetes-group-version-kind` of the operations.
    gvk: &'s GroupVersionKind,
    /// End of the operation IDs (`NamespacedPod`, `NamespacedPodStatus`).
    id_suffix: String,
    /// Object of the descriptions (`the specified Pod`, `status of the specified Pod`).
    what: String,
    /// Whether PATCH lists strategic merge patch.
    strategic_merge_patch: bool,
}

impl Target<'_> {
    /// Whether `verb` is supported.
    fn can(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }
}

/// Merges `ops` and path-level `params` into the path item at `path`.
fn insert_path(paths: &mut Paths, path: &str, params: Vec<Value>, ops: Map<String, Value>) {
    if ops.is_empty() {
        return;
    }
    let item = paths.entry(path.to_string()).or_default();
    item.insert("parameters".into(), Value::Array(params));
    item.extend(ops);
}

/// A required request body of any media type holding `schema`.
fn object_body(schema: &str) -> Value {
    json!({"content": {"*/*": {"schema": schema_ref(schema)}}, "required": true})
}

/// The PATCH request body: the patch media types, strategic merge patch
/// (and CBOR apply, see [`APPLY_PATCH_CBOR`]) only if `smp`.
fn patch_body(smp: bool) -> Value {
    let mut content = Map::new();
    let media = PATCH_MEDIA
        .iter()
        .copied()
        .chain(smp.then_some(STRATEGIC_MERGE_PATCH))
        .chain(smp.then_some(APPLY_PATCH_CBOR));
    let mut media: Vec<&str> = media.collect();
    media.sort_unstable();
    for media_type in media {
        content.insert(media_type.into(), json!({"schema": schema_ref(PATCH)}));
    }
    json!({"content": content, "required": true})
}

/// A 200 answering a string in each of `media`, plus 401.
fn text_responses(media: &[&str]) -> Value {
    let content: Map<String, Value> = media
        .iter()
        .map(|m| (m.to_string(), json!({"schema": {"type": "string"}})))
        .collect();
    json!({"200": {"content": content, "description": "OK"}, "401": {"description": "Unauthorized"}})
}

/// Responses returning `schema` as an object, plus 401.
fn object_responses(schema: &str, codes: &[(&str, &str)]) -> Value {
    responses(schema, &OBJECT_MEDIA, codes)
}

/// Responses with `codes` returning `schema` in `media`, plus 401.
fn responses(schema: &str, media: &[&str], codes: &[(&str, &str)]) -> Value {
    let content: Map<String, Value> = media
        .iter()
        .map(|media_type| {
            (
                media_type.to_string(),
                json!({"schema": schema_ref(schema)}),
            )
        })
        .collect();
    let mut responses = Map::new();
    for (code, description) in codes {
        responses.insert(
            code.to_string(),
            json!({"content": content, "description": description}),
        );
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    Value::Object(responses)
}

/// `{"$ref": "#/components/schemas/<name>"}`.
fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("{SCHEMA_PREFIX}{name}")})
}

/// The words of a group in operation IDs: `core` for `""`, `rbac.authorization.k8s.io` → `rbac`, `authorization`.
fn group_words(group: &str) -> Vec<String> {
    if group.is_empty() {
        return vec!["core".to_string()];
    }
    let trimmed = group.strip_suffix(".k8s.io").unwrap_or(group);
    trimmed
        .split(['.', '-'])
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// `word` with its first letter upper-cased.
fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap, core::v1::Namespace};

    fn core_document() -> (Value, Components) {
        let mut components = Components::new();
        let configmaps = ResourceSpec::builtin::<ConfigMap>(&mut components);
        let namespaces = ResourceSpec::builtin::<Namespace>(&mut components);
        let namespaces = namespaces
            .clone()
            .with_subresource(SubresourceSpec::status(&namespaces));
        (
            group_version_document("", "v1", &[configmaps, namespaces], &components),
            components,
        )
    }

    fn param_names(op: &Value) -> Vec<&str> {
        op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str())
            .collect()
    }

    #[test]
    fn config_map_patch_has_inline_field_validation_and_gvk_object() {
        let (document, _) = core_document();
        assert_eq!(document["openapi"], "3.0.0");
        assert_eq!(
            document["info"],
            json!({"title": "Kubernetes", "version": "v1.33.0"})
        );
        let patch = &document["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(patch["operationId"], "patchCoreV1NamespacedConfigMap");
        assert_eq!(patch["x-kubernetes-action"], "patch");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "", "kind": "ConfigMap", "version": "v1"})
        );
        assert_eq!(
            param_names(patch),
            ["dryRun", "fieldManager", "fieldValidation", "force"]
        );
        let field_validation = &patch["parameters"][2];
        assert_eq!(field_validation["in"], "query");
        assert!(field_validation.get("$ref").is_none());
        let content = patch["requestBody"]["content"]
            .as_object()
            .expect("content");
        let media: Vec<&str> = content.keys().map(String::as_str).collect();
        assert_eq!(
            media,
            [
                "application/apply-patch+cbor",
                "application/apply-patch+yaml",
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
            ]
        );
        assert_eq!(
            patch["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.ConfigMap"
        );
    }

    #[test]
    fn core_document_has_collection_all_namespaces_and_cluster_paths() {
        let (document, _) = core_document();
        let paths = document["paths"].as_object().expect("paths");
        for path in [
            "/api/v1/configmaps",
            "/api/v1/namespaces/{namespace}/configmaps",
            "/api/v1/namespaces/{namespace}/configmaps/{name}",
            "/api/v1/namespaces",
            "/api/v1/namespaces/{name}",
            "/api/v1/namespaces/{name}/status",
        ] {
            assert!(paths.contains_key(path), "missing {path}");
        }
        let list = &paths["/api/v1/namespaces/{namespace}/configmaps"]["get"];
        assert_eq!(list["operationId"], "listCoreV1NamespacedConfigMap");
        assert!(param_names(list).contains(&"watch"));
        assert_eq!(
            list["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.ConfigMapList"
        );
        let delete = &paths["/api/v1/namespaces/{namespace}/configmaps/{name}"]["delete"];
        assert_eq!(
            delete["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status"
        );
        assert_eq!(
            paths["/api/v1/configmaps"]["get"]["operationId"],
            "listCoreV1ConfigMapForAllNamespaces"
        );
        assert_eq!(
            paths["/api/v1/namespaces/{name}/status"]["patch"]["operationId"],
            "patchCoreV1NamespaceStatus"
        );
        let create = &paths["/api/v1/namespaces/{namespace}/configmaps"]["post"];
        assert_eq!(
            param_names(create),
            ["dryRun", "fieldManager", "fieldValidation"]
        );
        let item_params = param_names(&paths["/api/v1/namespaces/{namespace}/configmaps/{name}"]);
        assert_eq!(item_params, ["name", "namespace", "pretty"]);
    }

    #[test]
    fn document_holds_only_reachable_schemas() {
        let (document, components) = core_document();
        let schemas = document["components"]["schemas"]
            .as_object()
            .expect("schemas");
        for name in [
            "io.k8s.api.core.v1.ConfigMap",
            "io.k8s.api.core.v1.ConfigMapList",
            STATUS,
            DELETE_OPTIONS,
            PATCH,
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "io.k8s.api.core.v1.NamespaceSpec",
        ] {
            assert!(schemas.contains_key(name), "missing {name}");
        }
        let mut more = components.clone();
        more.add::<Deployment>();
        let again = group_version_document(
            "",
            "v1",
            &[ResourceSpec::builtin::<ConfigMap>(&mut more)],
            &more,
        );
        assert!(
            !again["components"]["schemas"]
                .as_object()
                .expect("schemas")
                .contains_key("io.k8s.api.apps.v1.Deployment")
        );
    }

    #[test]
    fn custom_resource_lacks_strategic_merge_patch() {
        let mut components = Components::new();
        let gvk = GroupVersionKind::new("example.com", "v1", "Foo");
        components.insert("com.example.v1.Foo", json!({
            "type": "object",
            "x-kubernetes-group-version-kind": [gvk.to_value()],
            "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        }));
        components.add_list(
            "com.example.v1.Foo",
            &GroupVersionKind::new("example.com", "v1", "FooList"),
        );
        let foos = ResourceSpec {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Foo".into(),
            plural: "foos".into(),
            namespaced: true,
            verbs: ALL_VERBS.iter().map(|v| v.to_string()).collect(),
            subresources: Vec::new(),
            schema: "com.example.v1.Foo".into(),
            strategic_merge_patch: false,
            delete_returns_object: false,
        };
        let document = group_version_document("example.com", "v1", &[foos], &components);
        let patch =
            &document["paths"]["/apis/example.com/v1/namespaces/{namespace}/foos/{name}"]["patch"];
        let content = patch["requestBody"]["content"]
            .as_object()
            .expect("content");
        assert!(!content.contains_key(STRATEGIC_MERGE_PATCH));
        assert!(!content.contains_key(APPLY_PATCH_CBOR));
        assert!(content.contains_key("application/merge-patch+json"));
        // As kube's CRD builder: no resource list, no `/watch/` paths.
        let paths = document["paths"].as_object().expect("paths");
        assert!(!paths.contains_key("/apis/example.com/v1/"));
        assert!(
            !paths.keys().any(|p| p.contains("/watch/")),
            "{:?}",
            paths.keys()
        );
        assert_eq!(patch["operationId"], "patchExampleComV1NamespacedFoo");
        assert_eq!(patch["tags"], json!(["exampleCom_v1"]));
        assert!(param_names(patch).contains(&"fieldValidation"));
        assert!(document["components"]["schemas"]["com.example.v1.FooList"].is_object());
    }

    #[test]
    fn deployment_scale_uses_autoscaling_scale() {
        let mut components = Components::new();
        let deployments = ResourceSpec::builtin::<Deployment>(&mut components);
        let status = SubresourceSpec::status(&deployments);
        let scale = SubresourceSpec::scale(&mut components);
        let deployments = deployments.with_subresource(status).with_subresource(scale);
        let document = group_version_document("apps", "v1", &[deployments], &components);
        let scale = &document["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
            ["patch"];
        assert_eq!(scale["operationId"], "patchAppsV1NamespacedDeploymentScale");
        assert_eq!(
            scale["x-kubernetes-group-version-kind"],
            json!({"group": "autoscaling", "kind": "Scale", "version": "v1"})
        );
        assert!(document["components"]["schemas"]["io.k8s.api.autoscaling.v1.Scale"].is_object());
        assert_eq!(
            document["paths"]["/apis/apps/v1/deployments"]["get"]["tags"],
            json!(["apps_v1"])
        );
    }

    #[test]
    fn watch_paths_and_the_resource_list_are_listed() {
        let (document, _) = core_document();
        let paths = &document["paths"];
        let resources = &paths["/api/v1/"]["get"];
        assert_eq!(resources["operationId"], "getCoreV1APIResources");
        assert!(resources.get("x-kubernetes-action").is_none());
        assert_eq!(
            resources["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            format!("{SCHEMA_PREFIX}{API_RESOURCE_LIST}")
        );
        for (path, id, action) in [
            (
                "/api/v1/watch/namespaces/{namespace}/configmaps/{name}",
                "watchCoreV1NamespacedConfigMap",
                "watch",
            ),
            (
                "/api/v1/watch/namespaces/{namespace}/configmaps",
                "watchCoreV1NamespacedConfigMapList",
                "watchlist",
            ),
            (
                "/api/v1/watch/configmaps",
                "watchCoreV1ConfigMapListForAllNamespaces",
                "watchlist",
            ),
            (
                "/api/v1/watch/namespaces/{name}",
                "watchCoreV1Namespace",
                "watch",
            ),
            (
                "/api/v1/watch/namespaces",
                "watchCoreV1NamespaceList",
                "watchlist",
            ),
        ] {
            let op = &paths[path]["get"];
            assert_eq!(op["operationId"], id, "{path}");
            assert_eq!(op["x-kubernetes-action"], action, "{path}");
            assert_eq!(
                op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
                format!("{SCHEMA_PREFIX}{WATCH_EVENT}")
            );
            let names: Vec<&str> = paths[path]["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["name"].as_str())
                .collect();
            assert!(
                names.contains(&"watch") && names.contains(&"labelSelector"),
                "{path}: {names:?}"
            );
        }
        let kinds =
            &document["components"]["schemas"][WATCH_EVENT]["x-kubernetes-group-version-kind"];
        assert_eq!(
            kinds.as_array().map(Vec::len),
            Some(62),
            "every group-version kube registers"
        );
    }

    #[test]
    fn connect_subresources_list_their_methods_and_options() {
        let mut components = Components::new();
        let mut pods = ResourceSpec::builtin::<k8s_openapi::api::core::v1::Pod>(&mut components);
        pods.delete_returns_object = true;
        let option = |name: &str, kind: &str, verbs: &[&str], options: &[&str]| SubresourceSpec {
            name: name.into(),
            kind_schema: String::new(),
            gvk: GroupVersionKind::new("", "v1", kind),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            connect: Some(options.iter().map(|o| o.to_string()).collect()),
        };
        let pods = pods
            .clone()
            .with_subresource(option(
                "exec",
                "PodExecOptions",
                &["create", "get"],
                &["command", "stdin"],
            ))
            .with_subresource(option("log", "Pod", &["get"], &["container", "follow"]))
            .with_subresource(option(
                "proxy",
                "PodProxyOptions",
                &["create", "delete", "get", "patch", "update"],
                &["path"],
            ));
        let document = group_version_document("", "v1", &[pods], &components);
        let paths = &document["paths"];
        let exec = &paths["/api/v1/namespaces/{namespace}/pods/{name}/exec"];
        assert_eq!(
            exec["get"]["operationId"],
            "connectCoreV1GetNamespacedPodExec"
        );
        assert_eq!(
            exec["post"]["operationId"],
            "connectCoreV1PostNamespacedPodExec"
        );
        assert_eq!(exec["post"]["x-kubernetes-action"], "connect");
        assert_eq!(
            exec["post"]["x-kubernetes-group-version-kind"]["kind"],
            "PodExecOptions"
        );
        let names: Vec<&str> = exec["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(names, ["name", "namespace", "command", "stdin"]);
        assert_eq!(exec["parameters"][3]["schema"]["type"], "boolean");
        let log = &paths["/api/v1/namespaces/{namespace}/pods/{name}/log"]["get"];
        assert_eq!(log["operationId"], "readCoreV1NamespacedPodLog");
        assert_eq!(log["x-kubernetes-action"], "get");
        let proxy = paths["/api/v1/namespaces/{namespace}/pods/{name}/proxy/{path}"]
            .as_object()
            .expect("the proxy's subpaths");
        let methods: Vec<&str> = proxy
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "parameters")
            .collect();
        assert_eq!(
            methods,
            ["delete", "get", "patch", "post", "put", "head", "options"]
        );
        assert_eq!(
            proxy["head"]["operationId"],
            "connectCoreV1HeadNamespacedPodProxyWithPath"
        );
        let delete = &paths["/api/v1/namespaces/{namespace}/pods/{name}"]["delete"];
        assert_eq!(
            delete["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.Pod",
            "pods answer DELETE with the pod"
        );
        // Published in kube's form; inside, int-or-string stays structural.
        let schemas = &document["components"]["schemas"];
        assert_eq!(
            schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"],
            "int-or-string"
        );
        assert!(schemas["io.k8s.apimachinery.pkg.api.resource.Quantity"]["oneOf"].is_array());
        assert_eq!(
            components
                .get("io.k8s.apimachinery.pkg.util.intstr.IntOrString")
                .map(|s| s["x-kubernetes-int-or-string"].clone()),
            Some(json!(true))
        );
    }

    #[test]
    fn operation_id_infixes_follow_kube() {
        let components = Components::new();
        assert_eq!(
            Context::new("rbac.authorization.k8s.io", "v1", &components).id_infix,
            "RbacAuthorizationV1"
        );
        assert_eq!(
            Context::new("rbac.authorization.k8s.io", "v1", &components).tag,
            "rbacAuthorization_v1"
        );
        assert_eq!(
            Context::new("apiextensions.k8s.io", "v1", &components).id_infix,
            "ApiextensionsV1"
        );
        assert_eq!(Context::new("", "v1", &components).id_infix, "CoreV1");
        assert_eq!(
            Context::new("flowcontrol.apiserver.k8s.io", "v1", &components).id_infix,
            "FlowcontrolApiserverV1"
        );
        assert_eq!(
            Context::new("batch", "v1beta1", &components).id_infix,
            "BatchV1beta1"
        );
        assert_eq!(group_version_path("apps", "v1"), "apis/apps/v1");
    }
}
