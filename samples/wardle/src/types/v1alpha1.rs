//! `wardle.example.com/v1alpha1`: Flunders and Fischers, as kube's
//! sample-apiserver declares them (`pkg/apis/wardle/v1alpha1/types.go`).

use kubechain_apiserver::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The version.
pub const VERSION: &str = "v1alpha1";

/// A Flunder: a thing that refers to another flunder or to a fischer.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "io.k8s.sample-apiserver.pkg.apis.wardle.v1alpha1.Flunder")]
pub struct Flunder {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the flunder refers to.
    #[serde(default)]
    pub spec: FlunderSpec,
    /// What the flunder is (nothing yet, as in kube's sample).
    #[serde(default)]
    pub status: FlunderStatus,
}
kubechain_apiserver::kind!(
    Flunder,
    "wardle.example.com",
    "v1alpha1",
    "flunders",
    Namespaced
);

/// What a Flunder refers to.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.sample-apiserver.pkg.apis.wardle.v1alpha1.FlunderSpec")]
pub struct FlunderSpec {
    /// A name of another flunder or fischer, depending on the reference type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The reference type: `Flunder` (the default when a reference is set) or `Fischer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_type: Option<String>,
}

/// A Flunder's status: empty.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "io.k8s.sample-apiserver.pkg.apis.wardle.v1alpha1.FlunderStatus")]
pub struct FlunderStatus {}

/// A Fischer: the names no Flunder may have.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.sample-apiserver.pkg.apis.wardle.v1alpha1.Fischer")]
pub struct Fischer {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Names of Flunders that are disallowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disallowed_flunders: Vec<String>,
}
kubechain_apiserver::kind!(
    Fischer,
    "wardle.example.com",
    "v1alpha1",
    "fischers",
    Cluster
);
