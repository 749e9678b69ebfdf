//! networking.k8s.io/v1 IPAddresses: one allocated IP, named by the address
//! itself in canonical form, with a reference to what it was allocated to
//! (a Service, usually) that never changes.

use apimachinery::error::FieldError;
use apimachinery::openapi::property_description;
use apimachinery::table::{self, Column};
use apimachinery::validation::{self, NameRule};
use generic_server::strategy::Strategy;
use k8s_openapi::api::networking::v1beta1::IPAddressSpec;
use serde_json::{Value, json};

use super::fields::{self, is_set, text};

/// The rules of `networking.k8s.io/v1/IPAddress`.
pub struct IPAddressStrategy;

impl Strategy for IPAddressStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::IpAddress
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        // Typed decoding gives a missing reference as one of empty strings.
        let missing = fields::object(obj, "/spec/parentRef")
            .is_none_or(|r| r.values().all(|v| v.is_null() || v == ""));
        if missing {
            return vec![FieldError::required("spec.parentRef", "")];
        }
        let mut errs = Vec::new();
        let group = text(obj, "/spec/parentRef/group");
        if !group.is_empty() {
            for msg in validation::dns1123_subdomain(group) {
                errs.push(FieldError::invalid("spec.parentRef.group", group, msg));
            }
        }
        for (field, required) in [("resource", true), ("name", true), ("namespace", false)] {
            let value = text(obj, &format!("/spec/parentRef/{field}"));
            let path = format!("spec.parentRef.{field}");
            if value.is_empty() {
                if required {
                    errs.push(FieldError::required(path, ""));
                }
                continue;
            }
            for msg in validation::path_segment_name(value) {
                errs.push(FieldError::invalid(&path, value, msg));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(fields::immutable(
            new,
            old,
            "/spec/parentRef",
            "spec.parentRef",
        ));
        errs
    }

    /// kube's printer declares Name and ParentRef but fills an age cell too.
    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "ParentRef",
                "string",
                &property_description::<IPAddressSpec>("parentRef"),
            ),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let parent = if is_set(obj, "/spec/parentRef") {
            let resource = text(obj, "/spec/parentRef/resource");
            let group = text(obj, "/spec/parentRef/group");
            let mut parent = if group.is_empty() {
                resource.to_lowercase()
            } else {
                format!("{resource}.{group}").to_lowercase()
            };
            let namespace = text(obj, "/spec/parentRef/namespace");
            if !namespace.is_empty() {
                parent = format!("{parent}/{namespace}");
            }
            format!("{parent}/{}", text(obj, "/spec/parentRef/name"))
        } else {
            "<none>".into()
        };
        vec![table::name_cell(obj), json!(parent), table::age_cell(obj)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn address() -> Value {
        json!({"metadata": {"name": "10.96.0.10"}, "spec": {"parentRef":
            {"group": "", "resource": "services", "namespace": "kube-system", "name": "kube-dns"}}})
    }

    #[test]
    fn valid_address_and_row() {
        assert!(IPAddressStrategy.validate(&address()).is_empty());
        assert_eq!(
            IPAddressStrategy.cells(&address())[1],
            "services/kube-system/kube-dns"
        );
        let gateway = json!({"spec": {"parentRef": {"group": "Gateway.Networking.k8s.io", "resource": "Gateways", "name": "gw"}}});
        assert_eq!(
            IPAddressStrategy.cells(&gateway)[1],
            "gateways.gateway.networking.k8s.io/gw"
        );
        assert_eq!(IPAddressStrategy.columns().len(), 2);
        assert_eq!(IPAddressStrategy.cells(&address()).len(), 3);
    }

    #[test]
    fn names_are_canonical_addresses() {
        let rule = IPAddressStrategy.name_rule();
        assert!(rule.check("10.0.0.1").is_empty());
        assert!(rule.check("2001:db8::1").is_empty());
        assert_eq!(rule.check("010.0.0.1"), ["must not have leading 0s"]);
        assert_eq!(
            rule.check("2001:db8:0::1"),
            ["must be in canonical form (\"2001:db8::1\")"]
        );
    }

    #[test]
    fn refusals_and_immutable_parent() {
        assert_eq!(
            messages(&IPAddressStrategy.validate(&json!({"spec": {}}))),
            ["spec.parentRef: Required value"]
        );
        let bad = json!({"spec": {"parentRef": {"group": "Bad_Group", "namespace": "a/b"}}});
        let errs = messages(&IPAddressStrategy.validate(&bad));
        assert!(errs[0].starts_with(
            "spec.parentRef.group: Invalid value: \"Bad_Group\": a lowercase RFC 1123 subdomain"
        ));
        assert_eq!(
            errs[1..],
            [
                "spec.parentRef.resource: Required value",
                "spec.parentRef.name: Required value",
                "spec.parentRef.namespace: Invalid value: \"a/b\": may not contain '/'",
            ]
        );
        let old = address();
        let mut new = old.clone();
        new["spec"]["parentRef"]["name"] = json!("other");
        let errs = IPAddressStrategy.validate_update(&new, &old);
        assert_eq!(
            (errs.len(), errs[0].field.as_str(), errs[0].detail.as_str()),
            (1, "spec.parentRef", "field is immutable")
        );
    }
}
