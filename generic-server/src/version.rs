//! `/version`: the Kubernetes version whose API kubechain implements.

use serde_json::{Value, json};

/// The Kubernetes minor version served (kubectl's dispatcher picks its
/// kubectl by this).
pub const KUBERNETES_MINOR: &str = "33";

/// The Kubernetes version served, as a valid semver `gitVersion`.
pub const KUBERNETES_VERSION: &str = "v1.33.0";

/// The `/version` document.
pub fn info() -> Value {
    json!({
        "major": "1",
        "minor": KUBERNETES_MINOR,
        "emulationMajor": "1",
        "emulationMinor": KUBERNETES_MINOR,
        "gitVersion": KUBERNETES_VERSION,
        "gitCommit": env!("CARGO_PKG_VERSION"),
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "kubechain (rust)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    })
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}
