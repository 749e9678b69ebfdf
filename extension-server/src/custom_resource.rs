//! Custom resources: the resource a served CRD version declares, its
//! strategy (schema defaults and validation, printer columns, selectable
//! fields), its codec (pruning) and the conversion between its versions.

use std::sync::Arc;

use apimachinery::error::FieldError;
use apimachinery::group_version::GroupVersionKind;
use apimachinery::jsonpath::JsonPath;
use apimachinery::table::{self, Column};
use generic_server::codec::{Codec, Normalized};
use generic_server::resource::{Resource, ScaleSelector, ScaleSpec, Subresource};
use generic_server::strategy::{Strategy, string_at};
use serde_json::{Value, json};

use apimachinery::schema::Structural;

/// One served version of a CRD, as everything serving it needs it.
#[derive(Clone)]
pub struct Version {
    /// The CRD's group.
    pub group: String,
    /// The version name.
    pub version: String,
    /// The kind.
    pub kind: String,
    /// The version's CEL validation rules.
    pub rules: Arc<apimachinery::cel::CompiledRules>,
    /// The version's `openAPIV3Schema`, as a structural schema.
    pub structural: Arc<Structural>,
    /// Printer columns: header, type, JSONPath, priority, description.
    pub columns: Vec<(String, String, JsonPath, i32, String)>,
    /// Selectable field paths (`spec.color`).
    pub selectable: Vec<String>,
    /// Whether the version has a status subresource.
    pub status: bool,
}

impl Version {
    /// Reads one version of a CRD.
    pub fn of(crd: &Value, version: &Value) -> Version {
        let text = |v: &Value, p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let columns = version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let path = JsonPath::parse(c["jsonPath"].as_str()?).ok()?;
                Some((
                    text(c, "/name"),
                    text(c, "/type"),
                    path,
                    c["priority"].as_i64().unwrap_or(0) as i32,
                    text(c, "/description"),
                ))
            })
            .collect();
        let selectable = version
            .get("selectableFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| {
                f["jsonPath"]
                    .as_str()
                    .map(|p| p.trim_start_matches('.').to_string())
            })
            .collect();
        let schema = version
            .pointer("/schema/openAPIV3Schema")
            .cloned()
            .unwrap_or(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        let structural = Structural::new(&schema)
            .or_else(|_| {
                Structural::new(
                    &json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                )
            })
            .unwrap_or_default();
        let rules = apimachinery::cel::compile(&schema, "").unwrap_or_default();
        Version {
            rules: Arc::new(rules),
            group: text(crd, "/spec/group"),
            version: text(version, "/name"),
            kind: text(crd, "/spec/names/kind"),
            structural: Arc::new(structural),
            columns,
            selectable,
            status: version.pointer("/subresources/status").is_some(),
        }
    }
}

/// The resource a served CRD version declares.
pub fn resource(crd: &Value, version: &Value) -> Resource {
    let text = |p: &str| {
        crd.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let list = |p: &str| -> Vec<String> {
        crd.pointer(p)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    let served = Version::of(crd, version);
    let scale = version.pointer("/subresources/scale").map(|s| ScaleSpec {
        spec_replicas: pointer_of(s["specReplicasPath"].as_str().unwrap_or(".spec.replicas")),
        status_replicas: pointer_of(
            s["statusReplicasPath"]
                .as_str()
                .unwrap_or(".status.replicas"),
        ),
        selector: match s["labelSelectorPath"].as_str() {
            Some(p) => ScaleSelector::String(pointer_of(p)),
            None => ScaleSelector::None,
        },
    });
    let mut subresources = Vec::new();
    if served.status {
        subresources.push(Subresource {
            name: "status".into(),
            kind: None,
            verbs: verbs(&["get", "patch", "update"]),
            connect: false,
            schema: None,
            options: &[],
        });
    }
    if scale.is_some() {
        let kind = GroupVersionKind::new("autoscaling", "v1", "Scale");
        subresources.push(Subresource {
            name: "scale".into(),
            kind: Some(kind),
            verbs: verbs(&["get", "patch", "update"]),
            connect: false,
            schema: None,
            options: &[],
        });
    }
    // kube hashes the CRD's storage version, when that version is served.
    let storage = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|v| v["storage"] == true && v["served"] == true)
        .and_then(|v| v["name"].as_str())
        .map(|v| GroupVersionKind::new(&served.group, v, &served.kind));
    // A version marked deprecated warns on every answer, in its own words
    // or kube's default ones.
    let deprecation = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|v| v["name"] == served.version.as_str() && v["deprecated"] == true)
        .map(|v| match v["deprecationWarning"].as_str() {
            Some(warning) => warning.to_string(),
            None => format!(
                "{}/{} {} is deprecated",
                served.group, served.version, served.kind
            ),
        });
    Resource {
        storage,
        deprecation,
        group: served.group.clone(),
        version: served.version.clone(),
        kind: served.kind.clone(),
        list_kind: text("/spec/names/listKind"),
        plural: text("/spec/names/plural"),
        singular: text("/spec/names/singular"),
        short_names: list("/spec/names/shortNames"),
        categories: list("/spec/names/categories"),
        namespaced: text("/spec/scope") == "Namespaced",
        verbs: verbs(generic_server::resource::ALL_VERBS),
        subresources,
        strategy: Arc::new(CustomResourceStrategy {
            version: served.clone(),
        }),
        codec: Arc::new(SchemaCodec { version: served }),
        strategic_merge_patch: false,
        schema: None,
        scale,
        converter: None,
    }
}

fn verbs(list: &[&str]) -> Vec<String> {
    list.iter().map(|v| v.to_string()).collect()
}

/// `.spec.replicas` as a JSON pointer.
fn pointer_of(path: &str) -> String {
    format!("/{}", path.trim_start_matches('.').replace('.', "/"))
}

/// Checks a custom resource's structure: prunes fields the schema does not know.
pub struct SchemaCodec {
    version: Version,
}

impl Codec for SchemaCodec {
    fn normalize(&self, mut obj: Value) -> generic_server::Result<Normalized> {
        let unknown_fields = apimachinery::schema::prune(&mut obj, &self.version.structural, true);
        Ok(Normalized {
            object: obj,
            unknown_fields,
        })
    }
}

/// The rules of a custom resource: its schema and its printer columns.
pub struct CustomResourceStrategy {
    version: Version,
}

impl Strategy for CustomResourceStrategy {
    fn defaults(&self, obj: &mut Value) {
        apimachinery::schema::apply_defaults(obj, &self.version.structural);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if self.version.status {
            if let Some(map) = obj.as_object_mut() {
                map.remove("status");
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = apimachinery::schema::validate(obj, &self.version.structural);
        errs.extend(apimachinery::cel::validate(&self.version.rules, obj, None));
        errs
    }

    fn validation_is_costly(&self) -> bool {
        !self.version.rules.is_empty()
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = apimachinery::schema::validate(new, &self.version.structural);
        errs.extend(apimachinery::cel::validate(
            &self.version.rules,
            new,
            Some(old),
        ));
        errs
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn return_deleted_object(&self) -> bool {
        true
    }

    fn columns(&self) -> Vec<Column> {
        let mut columns = vec![table::name_column()];
        for (name, kind, _, priority, description) in &self.version.columns {
            let kind = if kind == "date" {
                "string"
            } else {
                kind.as_str()
            };
            columns.push(Column {
                priority: *priority,
                ..Column::new(name, kind, description)
            });
        }
        if !self
            .version
            .columns
            .iter()
            .any(|c| c.0.eq_ignore_ascii_case("age"))
        {
            columns.push(table::age_column());
        }
        columns
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let mut cells = vec![table::name_cell(obj)];
        for (_, kind, path, _, _) in &self.version.columns {
            let found = path.find(obj);
            let cell = match (kind.as_str(), found.as_slice()) {
                (_, []) => Value::Null,
                ("date", [value, ..]) => json!(table::age_of(value.as_str())),
                (_, [one]) => (*one).clone(),
                (_, many) => json!(
                    many.iter()
                        .map(|v| v
                            .as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| v.to_string()))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            };
            cells.push(cell);
        }
        if !self
            .version
            .columns
            .iter()
            .any(|c| c.0.eq_ignore_ascii_case("age"))
        {
            cells.push(table::age_cell(obj));
        }
        cells
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        // Selectable fields of custom resources are declared at run time;
        // they are looked up in `field_value`, and `check_selectors`
        // consults `declared_fields`.
        &[]
    }

    fn declared_fields(&self) -> Vec<String> {
        self.version.selectable.clone()
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        string_at(obj, field)
    }
}
