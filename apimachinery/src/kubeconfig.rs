//! kubeconfig files: the server, CA and credentials their current context
//! names, as client-go's `clientcmd` reads them. Pure: file references are
//! returned as paths (resolved against the kubeconfig's directory) for the
//! caller to read.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Why a kubeconfig could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeconfigError {
    /// The text is not YAML (or JSON).
    #[error("not a kubeconfig: {0}")]
    Syntax(String),
    /// Something the client needs is missing.
    #[error("the kubeconfig has no {0}")]
    Missing(&'static str),
    /// An inline `*-data` field is not base64.
    #[error("{0} is not base64")]
    Base64(&'static str),
}

/// PEM or token material: inline, or in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Material {
    /// The bytes themselves (a `*-data` field, decoded).
    Inline(Vec<u8>),
    /// A file holding them.
    File(PathBuf),
}

/// What a client needs to call the server of a kubeconfig's current context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// The server's URL, without a trailing slash.
    pub server: String,
    /// The CA that verifies the server, if named.
    pub ca: Option<Material>,
    /// The client certificate and key, if the user has them.
    pub identity: Option<(Material, Material)>,
    /// A bearer token, inline or in a file (re-read by the caller as it rotates).
    pub token: Option<Material>,
}

/// Parses a kubeconfig whose relative paths are relative to `base`.
pub fn parse(text: &str, base: &Path) -> Result<ClientConfig, KubeconfigError> {
    let config: Value =
        crate::yaml::from_str(text).map_err(|e| KubeconfigError::Syntax(e.to_string()))?;
    let context_name = config["current-context"].as_str().unwrap_or_default();
    let context = named(&config["contexts"], context_name).map(|c| &c["context"]);
    let pick = |list: &str, key: &str, inner: &str| {
        let wanted = context.and_then(|c| c[key].as_str()).unwrap_or_default();
        named(&config[list], wanted)
            .or_else(|| config[list].get(0))
            .map(|entry| entry[inner].clone())
    };
    let cluster =
        pick("clusters", "cluster", "cluster").ok_or(KubeconfigError::Missing("cluster"))?;
    let user = pick("users", "user", "user").unwrap_or(Value::Null);
    let server = cluster["server"]
        .as_str()
        .ok_or(KubeconfigError::Missing("server"))?
        .trim_end_matches('/')
        .to_string();
    let ca = material(&cluster, "certificate-authority", base)?;
    let identity = match (
        material(&user, "client-certificate", base)?,
        material(&user, "client-key", base)?,
    ) {
        (Some(cert), Some(key)) => Some((cert, key)),
        _ => None,
    };
    let token = match (user["token"].as_str(), user["tokenFile"].as_str()) {
        (Some(token), _) if !token.is_empty() => Some(Material::Inline(token.as_bytes().to_vec())),
        (_, Some(file)) if !file.is_empty() => Some(Material::File(base.join(file))),
        _ => None,
    };
    Ok(ClientConfig {
        server,
        ca,
        identity,
        token,
    })
}

/// The entry of a kubeconfig list (`clusters`, `users`, `contexts`) with a name.
fn named<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list.as_array()?
        .iter()
        .find(|entry| entry["name"].as_str() == Some(name))
}

/// A PEM field of an entry: inline (`<field>-data`, base64) or a file.
fn material(
    entry: &Value,
    field: &'static str,
    base: &Path,
) -> Result<Option<Material>, KubeconfigError> {
    use base64::Engine;
    if let Some(data) = entry[format!("{field}-data")].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|_| KubeconfigError::Base64(field))?;
        return Ok(Some(Material::Inline(bytes)));
    }
    Ok(entry[field]
        .as_str()
        .filter(|f| !f.is_empty())
        .map(|file| Material::File(base.join(file))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_context_names_the_server_and_credentials() {
        let text = "apiVersion: v1\nkind: Config\ncurrent-context: b\n\
            clusters:\n- name: one\n  cluster: {server: 'https://one:6443/', certificate-authority: ca.crt}\n\
            - name: two\n  cluster: {server: 'https://two:6443', certificate-authority-data: aGVsbG8=}\n\
            users:\n- name: admin\n  user: {client-certificate: admin.crt, client-key: /abs/admin.key}\n\
            - name: robot\n  user: {token: abc}\n\
            contexts:\n- name: a\n  context: {cluster: one, user: admin}\n\
            - name: b\n  context: {cluster: two, user: robot}\n";
        let config = parse(text, Path::new("/home/me/.kube")).unwrap();
        assert_eq!(config.server, "https://two:6443");
        assert_eq!(config.ca, Some(Material::Inline(b"hello".to_vec())));
        assert_eq!(config.token, Some(Material::Inline(b"abc".to_vec())));
        assert!(config.identity.is_none());
        let first = parse(
            &text.replace("current-context: b", "current-context: a"),
            Path::new("/k"),
        )
        .unwrap();
        assert_eq!(first.server, "https://one:6443");
        assert_eq!(first.ca, Some(Material::File("/k/ca.crt".into())));
        assert_eq!(
            first.identity,
            Some((
                Material::File("/k/admin.crt".into()),
                Material::File("/abs/admin.key".into())
            ))
        );
        assert_eq!(
            parse("clusters: []", Path::new(".")),
            Err(KubeconfigError::Missing("cluster"))
        );
    }
}
