//! `wardle.example.com/v1beta1`: Flunders only, whose spec names a
//! flunder or a fischer in fields of their own, as kube's sample-apiserver
//! declares them (`pkg/apis/wardle/v1beta1/types.go`). Flunders are stored
//! in this version.

use kubechain_apiserver::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Flunder: a thing that refers to another flunder or to a fischer.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "io.k8s.sample-apiserver.pkg.apis.wardle.v1beta1.Flunder")]
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
    "v1beta1",
    "flunders",
    Namespaced
);

/// What a Flunder refers to: a flunder or a fischer, not both.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.sample-apiserver.pkg.apis.wardle.v1beta1.FlunderSpec")]
pub struct FlunderSpec {
    /// A name of another flunder, mutually exclusive to the fischerReference.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub flunder_reference: String,
    /// A name of a fischer, mutually exclusive to the flunderReference.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fischer_reference: String,
    /// The reference type: `Flunder` or `Fischer`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reference_type: String,
}

/// A Flunder's status: empty.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "io.k8s.sample-apiserver.pkg.apis.wardle.v1beta1.FlunderStatus")]
pub struct FlunderStatus {}
