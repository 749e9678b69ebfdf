//! OpenAPI against kube-apiserver 1.33's: every group-version document of
//! `tests/data/kube-1.33-openapi.json` (kube's own `/openapi/v3` documents
//! for the group-versions it serves by default, reduced by
//! `tests/data/gen_kube_openapi.py`) must be served through the front door
//! with the same paths, operations (method, operationId,
//! `x-kubernetes-action`, `x-kubernetes-group-version-kind`, parameter
//! names, request media types, returned schema) and schemas (type, format,
//! `required`, property types and `x-kubernetes-*` extensions); and
//! `/openapi/v2` must hold the same operations and definitions in Swagger
//! 2.0 form, in JSON and in protobuf. The test prints a summary of the
//! differences and fails on any not in [`KNOWN`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};
use tests::{As, Cluster};

/// Differences from kube 1.33 kubechain keeps, each with its reason:
/// (document, where, field, why). `where` is a path and method
/// (`/api/v1/… get`) or a schema and property (`io.k8s…Pod.spec`).
/// Each is printed; one that no longer shows fails the test.
const KNOWN: &[(&str, &str, &str, &str)] = &[];

/// The protobuf form of `/openapi/v2` kubectl asks for.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// What kube-apiserver answers it with (kube-openapi's handler spells the
/// media type it returns without the `@`, which Go's parser refuses).
const V2_PROTOBUF_ANSWERED: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// HTTP methods of a path item, in kube's order.
const METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch"];

/// One field that differs: which document, where, what kube serves, what kubechain serves.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Difference {
    document: String,
    location: String,
    field: String,
    kube: String,
    kubechain: String,
}

fn table() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/kube-1.33-openapi.json");
    serde_json::from_slice(&std::fs::read(path).expect("the kube 1.33 table"))
        .expect("the kube 1.33 table is JSON")
}

/// The name a `$ref` (or an `allOf` holding one `$ref`) points at, after `prefix`.
fn ref_of<'a>(schema: &'a Value, prefix: &str) -> Option<&'a str> {
    let reference = match schema.get("$ref") {
        Some(r) => r.as_str()?,
        None => match schema.get("allOf")?.as_array()?.as_slice() {
            [only] => only.get("$ref")?.as_str()?,
            _ => return None,
        },
    };
    Some(reference.strip_prefix(prefix).unwrap_or(reference))
}

/// A property's type as one string, as `gen_kube_openapi.py` writes it.
fn type_of(schema: &Value, prefix: &str) -> String {
    if let Some(name) = ref_of(schema, prefix) {
        return format!("@{name}");
    }
    let kind = schema["type"].as_str().unwrap_or_default();
    if kind == "array" {
        return format!("[]{}", type_of(&schema["items"], prefix));
    }
    if kind == "object" && schema["additionalProperties"].is_object() {
        return format!("map[{}]", type_of(&schema["additionalProperties"], prefix));
    }
    match schema["format"].as_str() {
        Some(format) if !format.is_empty() => format!("{kind}/{format}"),
        _ if kind.is_empty() => "any".into(),
        _ => kind.into(),
    }
}

/// The `x-kubernetes-*` keys of a schema, group-version-kinds as sorted strings.
fn extensions(schema: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in schema.as_object().into_iter().flatten() {
        if !key.starts_with("x-kubernetes-") {
            continue;
        }
        let value = if key == "x-kubernetes-group-version-kind" {
            let mut kinds: Vec<String> = value
                .as_array()
                .into_iter()
                .flatten()
                .map(|g| {
                    format!(
                        "{}/{}/{}",
                        g["group"].as_str().unwrap_or_default(),
                        g["version"].as_str().unwrap_or_default(),
                        g["kind"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            kinds.sort();
            json!(kinds)
        } else {
            value.clone()
        };
        out.insert(key.clone(), value);
    }
    out
}

/// A schema reduced as the table holds it.
fn reduce_schema(schema: &Value, prefix: &str) -> Value {
    let mut out = Map::new();
    for key in ["type", "format"] {
        if let Some(value) = schema.get(key) {
            out.insert(key.into(), value.clone());
        }
    }
    let mut required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !required.is_empty() {
        required.sort();
        out.insert("required".into(), json!(required));
    }
    out.extend(extensions(schema));
    let mut properties = Map::new();
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        let ty = type_of(property, prefix);
        let ext = extensions(property);
        let reduced = if ext.is_empty() {
            json!(ty)
        } else {
            let mut with = Map::from_iter([("type".to_string(), json!(ty))]);
            with.extend(ext);
            Value::Object(with)
        };
        properties.insert(name.clone(), reduced);
    }
    if !properties.is_empty() {
        out.insert("properties".into(), Value::Object(properties));
    }
    Value::Object(out)
}

/// An operation reduced as the table holds it. v2 operations give their
/// request media types in `consumes` and their body as a `body` parameter.
fn reduce_operation(op: &Value, path_params: &[Value], prefix: &str) -> Value {
    let mut params: BTreeSet<&str> = path_params
        .iter()
        .chain(op["parameters"].as_array().into_iter().flatten())
        .filter_map(|p| p["name"].as_str())
        .collect();
    let gvk = &op["x-kubernetes-group-version-kind"];
    let gvk = if gvk.is_object() {
        format!(
            "{}/{}/{}",
            gvk["group"].as_str().unwrap_or_default(),
            gvk["version"].as_str().unwrap_or_default(),
            gvk["kind"].as_str().unwrap_or_default()
        )
    } else {
        String::new()
    };
    let mut out = json!({
        "operationId": op["operationId"].as_str().unwrap_or_default(),
        "action": op["x-kubernetes-action"].as_str().unwrap_or_default(),
        "gvk": gvk,
    });
    let body: Vec<String> = if let Some(content) = op["requestBody"]["content"].as_object() {
        content.keys().cloned().collect()
    } else if params.remove("body") {
        let mut consumes: Vec<String> = op["consumes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_str().map(String::from))
            .collect();
        consumes.sort();
        consumes
    } else {
        Vec::new()
    };
    out["params"] = json!(params);
    if !body.is_empty() {
        out["body"] = json!(body);
    }
    let ok = &op["responses"]["200"];
    let returns = match ok["content"].as_object() {
        Some(content) => content
            .values()
            .next()
            .and_then(|c| ref_of(&c["schema"], prefix)),
        None => ref_of(&ok["schema"], prefix),
    };
    if let Some(returns) = returns {
        out["returns"] = json!(returns);
    }
    out
}

/// Every path of a document: path → method → reduced operation.
fn reduce_paths(document: &Value, prefix: &str) -> BTreeMap<String, BTreeMap<String, Value>> {
    let mut out = BTreeMap::new();
    for (path, item) in document["paths"].as_object().into_iter().flatten() {
        let shared = item["parameters"].as_array().cloned().unwrap_or_default();
        let ops = METHODS
            .iter()
            .filter(|m| item.get(**m).is_some())
            .map(|m| (m.to_string(), reduce_operation(&item[*m], &shared, prefix)))
            .collect();
        out.insert(path.clone(), ops);
    }
    out
}

/// A value as compared: strings as they are, the rest as JSON, absent as empty.
fn text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Collects the differences of one document.
struct Compare<'a> {
    document: &'a str,
    diffs: Vec<Difference>,
}

impl Compare<'_> {
    fn push(&mut self, location: &str, field: &str, kube: String, kubechain: String) {
        self.diffs.push(Difference {
            document: self.document.to_string(),
            location: location.to_string(),
            field: field.to_string(),
            kube,
            kubechain,
        });
    }

    /// Compares two objects key by key (absent on one side shows as empty).
    fn fields(&mut self, location: &str, kube: &Value, ours: &Value) {
        let keys: BTreeSet<&String> = kube
            .as_object()
            .into_iter()
            .chain(ours.as_object())
            .flat_map(|o| o.keys())
            .collect();
        for key in keys {
            let (k, c) = (text(kube.get(key)), text(ours.get(key)));
            if k != c {
                self.push(location, key, k, c);
            }
        }
    }

    fn paths(
        &mut self,
        kube: &BTreeMap<String, BTreeMap<String, Value>>,
        ours: &BTreeMap<String, BTreeMap<String, Value>>,
    ) {
        for (path, ops) in kube {
            let Some(served) = ours.get(path) else {
                self.push(path, "path", "served".into(), "missing".into());
                continue;
            };
            for (method, op) in ops {
                let location = format!("{path} {method}");
                match served.get(method) {
                    Some(got) => self.fields(&location, op, got),
                    None => self.push(&location, "operation", "served".into(), "missing".into()),
                }
            }
            for method in served.keys().filter(|m| !ops.contains_key(*m)) {
                self.push(
                    &format!("{path} {method}"),
                    "operation",
                    "absent".into(),
                    "served".into(),
                );
            }
        }
        for path in ours.keys().filter(|p| !kube.contains_key(*p)) {
            self.push(path, "path", "absent".into(), "served".into());
        }
    }

    /// Compares schemas by name; `skip_untyped` leaves out the type and
    /// format of a schema kube types only by `oneOf` (v2 says `string`).
    fn schemas(
        &mut self,
        names: &BTreeSet<String>,
        kube: &Value,
        ours: &Map<String, Value>,
        skip_untyped: bool,
    ) {
        for name in names {
            let want = &kube[name.as_str()];
            let Some(got) = ours.get(name) else {
                self.push(name, "schema", "served".into(), "missing".into());
                continue;
            };
            let mut want_top = want.clone();
            let mut got_top = got.clone();
            for top in [&mut want_top, &mut got_top] {
                if let Some(o) = top.as_object_mut() {
                    o.remove("properties");
                    if skip_untyped && want.get("type").is_none() {
                        o.remove("type");
                        o.remove("format");
                    }
                }
            }
            self.fields(name, &want_top, &got_top);
            let empty = Map::new();
            let want_props = want["properties"].as_object().unwrap_or(&empty);
            let got_props = got["properties"].as_object().unwrap_or(&empty);
            for (property, k) in want_props {
                let location = format!("{name}.{property}");
                match got_props.get(property) {
                    None => self.push(&location, "property", "served".into(), "missing".into()),
                    Some(c) if k != c => {
                        self.push(&location, "property", text(Some(k)), text(Some(c)))
                    }
                    Some(_) => {}
                }
            }
            for property in got_props.keys().filter(|p| !want_props.contains_key(*p)) {
                self.push(
                    &format!("{name}.{property}"),
                    "property",
                    "absent".into(),
                    "served".into(),
                );
            }
        }
        for name in ours.keys().filter(|n| !names.contains(*n)) {
            self.push(name, "schema", "absent".into(), "served".into());
        }
    }
}

/// The table's paths of a document, as [`reduce_paths`] gives them.
fn table_paths(document: &Value) -> BTreeMap<String, BTreeMap<String, Value>> {
    document["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(path, ops)| {
            let ops = ops
                .as_object()
                .into_iter()
                .flatten()
                .map(|(m, op)| (m.clone(), op.clone()))
                .collect();
            (path.clone(), ops)
        })
        .collect()
}

fn names(list: &Value) -> BTreeSet<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str().map(String::from))
        .collect()
}

/// Compares the served v3 document of `key` with the table's.
fn compare_v3(
    cluster: &Cluster,
    index: &Value,
    key: &str,
    kube: &Value,
    table: &Value,
) -> Vec<Difference> {
    let mut compare = Compare {
        document: key,
        diffs: Vec::new(),
    };
    let Some(url) = index["paths"][key]["serverRelativeURL"].as_str() else {
        compare.push("/openapi/v3", "listed", "yes".into(), "no".into());
        return compare.diffs;
    };
    let answer = cluster.curl(As::Admin, "GET", url, &[], None);
    assert_eq!(answer.code, 200, "{url}: {}", answer.text);
    let document = &answer.json;
    for (field, want) in [("openapi", "3.0.0"), ("info.title", "Kubernetes")] {
        let got = match field {
            "openapi" => text(document.get("openapi")),
            _ => text(document["info"].get("title")),
        };
        if got != want {
            compare.push("/", field, want.into(), got);
        }
    }
    let prefix = "#/components/schemas/";
    compare.paths(&table_paths(kube), &reduce_paths(document, prefix));
    let ours: Map<String, Value> = document["components"]["schemas"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, schema)| (name.clone(), reduce_schema(schema, prefix)))
        .collect();
    compare.schemas(&names(&kube["schemas"]), &table["schemas"], &ours, false);
    compare.diffs
}

/// Compares the served `/openapi/v2` with the union of the table's documents.
fn compare_v2(document: &Value, table: &Value) -> Vec<Difference> {
    let mut compare = Compare {
        document: "openapi/v2",
        diffs: Vec::new(),
    };
    if document["swagger"] != "2.0" {
        compare.push("/", "swagger", "2.0".into(), text(document.get("swagger")));
    }
    let mut kube_paths = BTreeMap::new();
    let mut kube_names = BTreeSet::new();
    for doc in table["documents"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, d)| d)
    {
        kube_paths.extend(table_paths(doc));
        kube_names.extend(names(&doc["schemas"]));
    }
    // kube's v2 operations take every media type (`consumes: */*`) but PATCH's.
    for op in kube_paths.values_mut().flat_map(|ops| ops.values_mut()) {
        if op.get("body").is_some() && op["action"] != "patch" {
            op["body"] = json!(["*/*"]);
        }
    }
    let prefix = "#/definitions/";
    // Only the table's group-versions are compared (kube's v2 also has
    // `/api/`, `/apis/`, `/version/`, and whatever else is served).
    let prefixes: Vec<String> = table["documents"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, _)| format!("/{key}/"))
        .collect();
    let ours_paths = reduce_paths(document, prefix)
        .into_iter()
        .filter(|(p, _)| prefixes.iter().any(|gv| p.starts_with(gv.as_str())))
        .collect();
    compare.paths(&kube_paths, &ours_paths);
    let ours: Map<String, Value> = document["definitions"]
        .as_object()
        .into_iter()
        .flatten()
        // kubechain's metrics-server adds its own kinds, as an aggregated server would.
        .filter(|(name, _)| {
            kube_names.contains(*name)
                || name.starts_with("io.k8s.") && !name.starts_with("io.k8s.metrics.")
        })
        .map(|(name, schema)| (name.clone(), reduce_schema(schema, prefix)))
        .collect();
    compare.schemas(&kube_names, &table["schemas"], &ours, true);
    compare.diffs
}

/// `/openapi/v2` in protobuf: the media type kubectl asks for, decoded with
/// gnostic's schema, holds the same definitions and paths as the JSON.
fn v2_protobuf_matches(cluster: &Cluster, json_document: &Value) -> Vec<Difference> {
    use prost::Message as _;
    let mut compare = Compare {
        document: "openapi/v2 protobuf",
        diffs: Vec::new(),
    };
    let file = cluster.dir.join("openapi-v2.pb");
    let output = cluster
        .curl_command(As::Admin)
        .arg("-H")
        .arg(format!("Accept: {V2_PROTOBUF}"))
        .arg("-o")
        .arg(&file)
        .args(["-w", "%{http_code} %{content_type}"])
        .arg(format!("https://localhost:{}/openapi/v2", cluster.port))
        .output()
        .expect("curl");
    let status = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(status.starts_with("200 "), "{status}");
    let content_type = status.trim_start_matches("200 ");
    if content_type != V2_PROTOBUF_ANSWERED {
        compare.push(
            "/openapi/v2",
            "content-type",
            V2_PROTOBUF_ANSWERED.into(),
            content_type.into(),
        );
        return compare.diffs;
    }
    let bytes = std::fs::read(&file).expect("the protobuf answer");
    let decoded =
        proto::openapi_v2::Document::decode(bytes.as_slice()).expect("gnostic's Document");
    let definitions: BTreeSet<String> = decoded
        .definitions
        .iter()
        .flat_map(|d| &d.additional_properties)
        .map(|named| named.name.clone())
        .collect();
    let want: BTreeSet<String> = json_document["definitions"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, _)| name.clone())
        .collect();
    if definitions != want {
        compare.push(
            "definitions",
            "names",
            format!("{} as in JSON", want.len()),
            format!("{}", definitions.len()),
        );
    }
    // Every path's operation IDs, method by method, as in the JSON.
    let operation_ids = |ops: [(&str, Option<&proto::openapi_v2::Operation>); 7]| {
        ops.iter()
            .filter_map(|(method, op)| op.map(|op| format!("{method} {}", op.operation_id)))
            .collect::<Vec<_>>()
    };
    let paths: BTreeMap<String, Vec<String>> = decoded
        .paths
        .iter()
        .flat_map(|p| &p.path)
        .map(|named| {
            let item = named.value.clone().unwrap_or_default();
            let ops = operation_ids([
                ("get", item.get.as_ref()),
                ("put", item.put.as_ref()),
                ("post", item.post.as_ref()),
                ("delete", item.delete.as_ref()),
                ("options", item.options.as_ref()),
                ("head", item.head.as_ref()),
                ("patch", item.patch.as_ref()),
            ]);
            (named.name.clone(), ops)
        })
        .collect();
    let want: BTreeMap<String, Vec<String>> = json_document["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(path, item)| {
            let ops = METHODS
                .iter()
                .filter_map(|m| Some(format!("{m} {}", item.get(*m)?["operationId"].as_str()?)))
                .collect();
            (path.clone(), ops)
        })
        .collect();
    assert!(want.len() > 300, "the JSON's paths: {}", want.len());
    for (path, ops) in &want {
        let got = paths.get(path).cloned().unwrap_or_default();
        if &got != ops {
            compare.push(path, "operations", ops.join(", "), got.join(", "));
        }
    }
    compare.diffs
}

/// Prints the differences grouped by document and field, then judges them
/// against [`KNOWN`].
fn report(diffs: &[Difference]) {
    let mut counts: BTreeMap<(&str, &str, &str, &str), usize> = BTreeMap::new();
    for d in diffs {
        *counts
            .entry((
                d.document.as_str(),
                d.field.as_str(),
                short(&d.kube),
                short(&d.kubechain),
            ))
            .or_default() += 1;
    }
    println!("| document | field | kube | kubechain | count |");
    println!("| --- | --- | --- | --- | --- |");
    for ((document, field, kube, ours), n) in &counts {
        println!("| {document} | {field} | {kube} | {ours} | {n} |");
    }
    tests::judge_differences(
        diffs,
        KNOWN,
        |k, d| k.0 == d.document && k.1 == d.location && k.2 == d.field,
        |k| k.3,
    );
}

/// A value short enough for the summary (long ones become `…`, so alike rows group).
fn short(value: &str) -> &str {
    if value.len() > 24 { "…" } else { value }
}

#[test]
fn openapi_matches_kube_1_33() {
    let cluster = Cluster::start();
    let table = table();
    let index = cluster.curl(As::Admin, "GET", "/openapi/v3", &[], None);
    assert_eq!(index.code, 200, "{}", index.text);
    let mut diffs = Vec::new();
    for (key, kube) in table["documents"].as_object().expect("documents") {
        diffs.extend(compare_v3(&cluster, &index.json, key, kube, &table));
    }
    let v2 = cluster.curl(
        As::Admin,
        "GET",
        "/openapi/v2",
        &["Accept: application/json"],
        None,
    );
    assert_eq!(v2.code, 200, "{}", v2.text);
    diffs.extend(compare_v2(&v2.json, &table));
    diffs.extend(v2_protobuf_matches(&cluster, &v2.json));
    diffs.sort();
    report(&diffs);
}

/// The table itself: every document is one of the discovery table's
/// group-versions, its paths sit under that group-version, its operations
/// name a known action, and every schema a document lists is in the table.
#[test]
fn table_is_well_formed() {
    let table = table();
    let discovery: Value = serde_json::from_slice(
        &std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/data/kube-1.33-discovery.json"
        ))
        .expect("the discovery table"),
    )
    .expect("JSON");
    let group_versions: BTreeSet<String> = discovery["groupVersions"]
        .as_array()
        .expect("groupVersions")
        .iter()
        .map(|gv| match gv["groupVersion"].as_str().unwrap_or_default() {
            "v1" => "api/v1".to_string(),
            other => format!("apis/{other}"),
        })
        .collect();
    let documents = table["documents"].as_object().expect("documents");
    let keys: BTreeSet<String> = documents.keys().cloned().collect();
    assert_eq!(
        keys, group_versions,
        "one document per default group-version"
    );
    let (mut operations, mut paths) = (0, 0);
    let actions = [
        "",
        "get",
        "list",
        "watch",
        "watchlist",
        "put",
        "post",
        "patch",
        "delete",
        "deletecollection",
        "connect",
    ];
    for (key, document) in documents {
        for (path, ops) in document["paths"].as_object().expect("paths") {
            paths += 1;
            operations += ops.as_object().map_or(0, |ops| ops.len());
            assert!(path.starts_with(&format!("/{key}/")), "{key}: {path}");
            for (method, op) in ops.as_object().expect("operations") {
                assert!(METHODS.contains(&method.as_str()), "{path} {method}");
                let action = op["action"].as_str().expect("action");
                assert!(actions.contains(&action), "{path} {method}: {action}");
                assert!(op["operationId"].as_str().is_some_and(|id| !id.is_empty()));
            }
        }
        for name in names(&document["schemas"]) {
            assert!(table["schemas"][&name].is_object(), "{key}: {name}");
        }
    }
    assert_eq!(
        (paths, operations),
        (349, 718),
        "paths and operations in the table"
    );
    let schemas = table["schemas"].as_object().expect("schemas");
    assert_eq!(schemas.len(), 513, "schemas in the table");
    // Kinds, as the discovery table names them, have their schema.
    let pod = &table["schemas"]["io.k8s.api.core.v1.Pod"];
    assert_eq!(pod["x-kubernetes-group-version-kind"], json!(["/v1/Pod"]));
}
