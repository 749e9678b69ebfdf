//! networking.k8s.io/v1 ServiceCIDRs: the ranges Service cluster IPs come
//! from, one or two (one per IP family) canonical CIDRs. The CIDRs never
//! change, except that a single-stack range may gain its second family.

use apimachinery::error::FieldError;
use apimachinery::ip;
use apimachinery::openapi::property_description;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use k8s_openapi::api::networking::v1beta1::ServiceCIDRSpec;
use serde_json::{Value, json};

use super::fields::{self, items};

/// The rules of `networking.k8s.io/v1/ServiceCIDR`.
pub struct ServiceCIDRStrategy;

/// The CIDRs of `spec.cidrs` as strings.
fn cidrs(obj: &Value) -> Vec<&str> {
    items(obj, "/spec/cidrs")
        .iter()
        .map(|c| c.as_str().unwrap_or_default())
        .collect()
}

impl Strategy for ServiceCIDRStrategy {
    /// kube resets the status on create, to an empty struct (`{}`).
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let list = cidrs(obj);
        let spec = fields::value(obj, "/spec");
        if list.is_empty() {
            return vec![FieldError::required(
                "spec.cidrs",
                "at least one CIDR required",
            )];
        }
        if list.len() > 2 {
            return vec![FieldError::invalid(
                "spec.cidrs",
                spec,
                "may only hold up to 2 values",
            )];
        }
        if let &[first, second] = list.as_slice() {
            let family = |c: &str| ip::parse_cidr_lenient(c).map(|c| c.is_ipv6());
            let dual = matches!((family(first), family(second)), (Some(a), Some(b)) if a != b);
            if !dual {
                return vec![FieldError::invalid(
                    "spec.cidrs",
                    spec,
                    "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
                )];
            }
        }
        let mut errs = Vec::new();
        for (i, cidr) in list.iter().enumerate() {
            for msg in ip::valid_cidr(cidr) {
                errs.push(FieldError::invalid(format!("spec.cidrs[{i}]"), *cidr, msg));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let (new_cidrs, old_cidrs) = (cidrs(new), cidrs(old));
        let changed = |i: usize| {
            FieldError::invalid(
                format!("spec.cidrs[{i}]"),
                new_cidrs[i],
                "field is immutable",
            )
        };
        if new_cidrs.len() == old_cidrs.len() {
            (0..new_cidrs.len())
                .filter(|i| new_cidrs[*i] != old_cidrs[*i])
                .map(changed)
                .collect()
        } else if old_cidrs.len() == 1 && new_cidrs.len() == 2 {
            // A single-stack range may become dual-stack, its first CIDR kept.
            let mut errs: Vec<FieldError> = (new_cidrs[0] != old_cidrs[0])
                .then(|| changed(0))
                .into_iter()
                .collect();
            errs.extend(self.validate(new));
            errs
        } else {
            vec![FieldError::invalid(
                "spec.cidrs",
                fields::value(new, "/spec/cidrs"),
                "field is immutable",
            )]
        }
    }

    /// A status write checks nothing beyond metadata.
    fn validate_subresource_update(
        &self,
        subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Vec<FieldError> {
        if subresource == "status" {
            return Vec::new();
        }
        self.validate_update(new, old)
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "CIDRs",
                "string",
                &property_description::<ServiceCIDRSpec>("cidrs"),
            ),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            table::name_cell(obj),
            json!(cidrs(obj).join(",")),
            table::age_cell(obj),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn range(cidrs: Value) -> Value {
        json!({"metadata": {"name": "extra"}, "spec": {"cidrs": cidrs}})
    }

    #[test]
    fn valid_ranges_and_row() {
        assert!(
            ServiceCIDRStrategy
                .validate(&range(json!(["10.96.0.0/16"])))
                .is_empty()
        );
        let dual = range(json!(["10.96.0.0/16", "2001:db8::/112"]));
        assert!(ServiceCIDRStrategy.validate(&dual).is_empty());
        assert_eq!(
            ServiceCIDRStrategy.cells(&dual)[1],
            "10.96.0.0/16,2001:db8::/112"
        );
    }

    #[test]
    fn refusals() {
        assert_eq!(
            messages(&ServiceCIDRStrategy.validate(&range(json!([])))),
            ["spec.cidrs: Required value: at least one CIDR required"]
        );
        assert_eq!(
            messages(&ServiceCIDRStrategy.validate(&range(json!(["10.0.0.0/16", "10.1.0.0/16"])))),
            [
                "spec.cidrs: Invalid value: {\"cidrs\":[\"10.0.0.0/16\",\"10.1.0.0/16\"]}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"
            ]
        );
        assert_eq!(
            messages(&ServiceCIDRStrategy.validate(&range(json!(["10.0.0.1/16"])))),
            [
                "spec.cidrs[0]: Invalid value: \"10.0.0.1/16\": must not have bits set beyond the prefix length"
            ]
        );
        assert_eq!(
            messages(&ServiceCIDRStrategy.validate(&range(json!(["a", "b", "c"])))),
            [
                "spec.cidrs: Invalid value: {\"cidrs\":[\"a\",\"b\",\"c\"]}: may only hold up to 2 values"
            ]
        );
    }

    #[test]
    fn updates() {
        let old = range(json!(["10.96.0.0/16"]));
        assert_eq!(
            messages(&ServiceCIDRStrategy.validate_update(&range(json!(["10.97.0.0/16"])), &old)),
            ["spec.cidrs[0]: Invalid value: \"10.97.0.0/16\": field is immutable"]
        );
        let grown = range(json!(["10.96.0.0/16", "2001:db8::/112"]));
        assert!(ServiceCIDRStrategy.validate_update(&grown, &old).is_empty());
        assert_eq!(
            messages(&ServiceCIDRStrategy.validate_update(&old, &grown)),
            ["spec.cidrs: Invalid value: [\"10.96.0.0/16\"]: field is immutable"]
        );
        assert!(
            ServiceCIDRStrategy
                .validate_subresource_update("status", &grown, &grown)
                .is_empty()
        );
    }
}
