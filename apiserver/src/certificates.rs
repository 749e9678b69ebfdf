//! A serving certificate made at start when none is given, as
//! k8s.io/apiserver's `--cert-dir` does, but signed by a CA of its own
//! (written beside it) so the APIService's `caBundle` names a real CA and
//! the server's certificate can be renewed under it.

use std::io::{Error, ErrorKind};
use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// The certificate and key (PEM) in `dir` for `sans` (and localhost):
/// those kept there when they were made for the same names, else new ones
/// (a new CA too, when none is kept).
pub fn generated(dir: &Path, sans: &[String]) -> Result<(Vec<u8>, Vec<u8>), Error> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    names.extend(
        sans.iter()
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty()),
    );
    names.sort();
    names.dedup();
    let listed = names.join("\n") + "\n";
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    if std::fs::read_to_string(dir.join("names")).ok().as_deref() == Some(listed.as_str()) {
        if let (Ok(cert), Ok(key)) = (std::fs::read(&cert_path), std::fs::read(&key_path)) {
            return Ok((cert, key));
        }
    }
    create_private_dir(dir)?;
    let invalid = |e: rcgen::Error| Error::new(ErrorKind::InvalidData, e.to_string());
    let issuer = match (
        std::fs::read_to_string(dir.join("ca.crt")),
        std::fs::read_to_string(dir.join("ca.key")),
    ) {
        (Ok(cert), Ok(key)) => {
            Issuer::from_ca_cert_pem(&cert, KeyPair::from_pem(&key).map_err(invalid)?)
                .map_err(invalid)?
        }
        _ => {
            let key = KeyPair::generate().map_err(invalid)?;
            let mut params = CertificateParams::new(Vec::<String>::new()).map_err(invalid)?;
            params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
            params
                .distinguished_name
                .push(DnType::CommonName, "kubechain-apiserver-ca");
            let cert = params.self_signed(&key).map_err(invalid)?;
            write_private(&dir.join("ca.key"), key.serialize_pem().as_bytes())?;
            std::fs::write(dir.join("ca.crt"), cert.pem())?;
            Issuer::new(params, key)
        }
    };
    let key = KeyPair::generate().map_err(invalid)?;
    let mut params = CertificateParams::new(names.clone()).map_err(invalid)?;
    params
        .distinguished_name
        .push(DnType::CommonName, names[0].as_str());
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    // Strict verifiers want the issuer's key named.
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, &issuer).map_err(invalid)?.pem();
    write_private(&key_path, key.serialize_pem().as_bytes())?;
    std::fs::write(&cert_path, &cert)?;
    std::fs::write(dir.join("names"), listed)?;
    tracing::info!(dir = %dir.display(), ?names, "generated a serving certificate; its CA is ca.crt");
    Ok((cert.into_bytes(), key.serialize_pem().into_bytes()))
}

/// Creates `dir` (and its parents) readable by its owner only.
fn create_private_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Writes a secret readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_made_once_per_set_of_names() {
        let dir = std::env::temp_dir().join(format!("kubechain-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let names = vec!["wardle.wardle.svc".to_string()];
        let first = generated(&dir, &names).unwrap();
        assert_eq!(generated(&dir, &names).unwrap(), first, "kept");
        let ca = std::fs::read(dir.join("ca.crt")).unwrap();
        let other = generated(&dir, &["other.svc".to_string()]).unwrap();
        assert_ne!(other.0, first.0, "new names, new certificate");
        assert_eq!(
            std::fs::read(dir.join("ca.crt")).unwrap(),
            ca,
            "under the same CA"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("tls.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
