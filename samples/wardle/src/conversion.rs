//! Flunders between v1alpha1 (one `reference`, its type saying what it
//! names) and v1beta1 (a field for each), as kube's sample converts them.

use crate::types::{v1alpha1, v1beta1};

impl From<v1alpha1::Flunder> for v1beta1::Flunder {
    fn from(alpha: v1alpha1::Flunder) -> Self {
        let mut spec = v1beta1::FlunderSpec::default();
        let reference = alpha.spec.reference.unwrap_or_default();
        match alpha.spec.reference_type.as_deref() {
            Some("Flunder") => spec.flunder_reference = reference,
            Some("Fischer") => spec.fischer_reference = reference,
            _ => {}
        }
        spec.reference_type = alpha.spec.reference_type.unwrap_or_default();
        v1beta1::Flunder {
            metadata: alpha.metadata,
            spec,
            status: v1beta1::FlunderStatus {},
        }
    }
}

impl From<v1beta1::Flunder> for v1alpha1::Flunder {
    fn from(beta: v1beta1::Flunder) -> Self {
        let spec = beta.spec;
        let reference = match spec.reference_type.as_str() {
            "Flunder" => Some(spec.flunder_reference),
            "Fischer" => Some(spec.fischer_reference),
            _ => None,
        };
        v1alpha1::Flunder {
            metadata: beta.metadata,
            spec: v1alpha1::FlunderSpec {
                reference: reference.filter(|r| !r.is_empty()),
                reference_type: Some(spec.reference_type).filter(|t| !t.is_empty()),
            },
            status: v1alpha1::FlunderStatus {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_lands_in_the_field_its_type_names_and_comes_back() {
        for kind in ["Flunder", "Fischer"] {
            let alpha = v1alpha1::Flunder {
                spec: v1alpha1::FlunderSpec {
                    reference: Some("other".into()),
                    reference_type: Some(kind.into()),
                },
                ..Default::default()
            };
            let beta = v1beta1::Flunder::from(alpha);
            let (named, other) = match kind {
                "Flunder" => (&beta.spec.flunder_reference, &beta.spec.fischer_reference),
                _ => (&beta.spec.fischer_reference, &beta.spec.flunder_reference),
            };
            assert_eq!((named.as_str(), other.as_str()), ("other", ""));
            let back = v1alpha1::Flunder::from(beta);
            assert_eq!(back.spec.reference.as_deref(), Some("other"));
            assert_eq!(back.spec.reference_type.as_deref(), Some(kind));
        }
        let bare = v1beta1::Flunder::from(v1alpha1::Flunder::default());
        assert_eq!(bare.spec.reference_type, "");
        assert_eq!(v1alpha1::Flunder::from(bare).spec.reference, None);
    }
}
