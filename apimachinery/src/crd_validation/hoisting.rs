//! The internal form kube validates a v1 CRD in: per-version `schema`,
//! `subresources`, `additionalPrinterColumns` and `selectableFields` that
//! are identical in every version move to the spec
//! (`Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_...`).

use serde_json::Value;

/// A v1 spec seen in its internal form, borrowing the JSON.
pub(super) struct InternalSpec<'a> {
    /// `spec.versions`.
    pub versions: Vec<&'a Value>,
    /// The hoisted `spec.validation` (a `{openAPIV3Schema}` object).
    pub validation: Option<&'a Value>,
    /// The hoisted `spec.subresources`.
    pub subresources: Option<&'a Value>,
    /// The hoisted `spec.additionalPrinterColumns`.
    pub columns: Vec<&'a Value>,
    /// The hoisted `spec.selectableFields`.
    pub selectable_fields: Vec<&'a Value>,
    schema_hoisted: bool,
    subresources_hoisted: bool,
    columns_hoisted: bool,
    selectable_hoisted: bool,
}

/// An optional object field, null counting as absent.
fn object_field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|x| !x.is_null())
}

/// A list field, absent or null counting as empty (kube's semantic equality).
fn list_field<'a>(v: &'a Value, key: &str) -> Vec<&'a Value> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn all_same<T: PartialEq>(items: &[T]) -> bool {
    items.windows(2).all(|w| w[0] == w[1])
}

impl<'a> InternalSpec<'a> {
    /// Splits `spec` into its internal form.
    pub fn new(spec: &'a Value) -> Self {
        let versions: Vec<&Value> = spec
            .get("versions")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let schemas: Vec<Option<&Value>> =
            versions.iter().map(|v| object_field(v, "schema")).collect();
        let subs: Vec<Option<&Value>> = versions
            .iter()
            .map(|v| object_field(v, "subresources"))
            .collect();
        let cols: Vec<Vec<&Value>> = versions
            .iter()
            .map(|v| list_field(v, "additionalPrinterColumns"))
            .collect();
        let sels: Vec<Vec<&Value>> = versions
            .iter()
            .map(|v| list_field(v, "selectableFields"))
            .collect();
        let any = !versions.is_empty();
        let schema_hoisted = any && all_same(&schemas);
        let subresources_hoisted = any && all_same(&subs);
        let columns_hoisted = any && all_same(&cols);
        let selectable_hoisted = schema_hoisted && all_same(&sels);
        InternalSpec {
            validation: if schema_hoisted { schemas[0] } else { None },
            subresources: if subresources_hoisted { subs[0] } else { None },
            columns: if columns_hoisted {
                cols[0].clone()
            } else {
                Vec::new()
            },
            selectable_fields: if selectable_hoisted {
                sels[0].clone()
            } else {
                Vec::new()
            },
            versions,
            schema_hoisted,
            subresources_hoisted,
            columns_hoisted,
            selectable_hoisted,
        }
    }

    /// `versions[i].schema` as kept per version (`None` when hoisted).
    pub fn version_schema(&self, i: usize) -> Option<&'a Value> {
        if self.schema_hoisted {
            None
        } else {
            object_field(self.versions[i], "schema")
        }
    }

    /// `versions[i].subresources` as kept per version.
    pub fn version_subresources(&self, i: usize) -> Option<&'a Value> {
        if self.subresources_hoisted {
            None
        } else {
            object_field(self.versions[i], "subresources")
        }
    }

    /// `versions[i].additionalPrinterColumns` as kept per version.
    pub fn version_columns(&self, i: usize) -> Vec<&'a Value> {
        if self.columns_hoisted {
            Vec::new()
        } else {
            list_field(self.versions[i], "additionalPrinterColumns")
        }
    }

    /// `versions[i].selectableFields` as kept per version.
    pub fn version_selectable_fields(&self, i: usize) -> Vec<&'a Value> {
        if self.selectable_hoisted {
            Vec::new()
        } else {
            list_field(self.versions[i], "selectableFields")
        }
    }

    /// The subresources that apply to version `i` (kube's
    /// `getSubresourcesForVersion`).
    pub fn subresources_for(&self, i: usize) -> Option<&'a Value> {
        let per_version = (0..self.versions.len()).any(|j| self.version_subresources(j).is_some());
        if per_version {
            self.version_subresources(i)
        } else {
            self.subresources
        }
    }

    /// Whether any version enables the status subresource.
    pub fn any_status_enabled(&self) -> bool {
        has_status(self.subresources)
            || (0..self.versions.len()).any(|i| has_status(self.version_subresources(i)))
    }
}

/// Whether these subresources include `status`.
pub(super) fn has_status(subresources: Option<&Value>) -> bool {
    subresources
        .and_then(|s| s.get("status"))
        .is_some_and(|s| !s.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identical_fields_are_hoisted() {
        let spec = json!({"versions": [
            {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}, "subresources": {"status": {}}},
            {"name": "v2", "schema": {"openAPIV3Schema": {"type": "object"}}, "additionalPrinterColumns": [{"name": "A"}]}
        ]});
        let internal = InternalSpec::new(&spec);
        assert!(internal.validation.is_some());
        assert!(internal.version_schema(0).is_none());
        assert!(internal.subresources.is_none());
        assert!(internal.version_subresources(0).is_some());
        assert!(internal.version_subresources(1).is_none());
        assert!(has_status(internal.subresources_for(0)));
        assert!(!has_status(internal.subresources_for(1)));
        assert!(internal.any_status_enabled());
        assert!(internal.columns.is_empty());
        assert_eq!(internal.version_columns(1).len(), 1);
    }

    #[test]
    fn absent_and_empty_lists_are_equal() {
        let spec =
            json!({"versions": [{"name": "v1", "additionalPrinterColumns": []}, {"name": "v2"}]});
        let internal = InternalSpec::new(&spec);
        assert!(internal.columns.is_empty());
        assert!(internal.version_columns(0).is_empty());
        assert!(internal.validation.is_none());
        assert!(internal.version_schema(0).is_none());
    }
}
