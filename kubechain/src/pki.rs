//! The cluster's certificates: a CA, a certificate per server (serving and
//! gRPC client), and the admin client certificate. Existing files are kept,
//! so a restart reuses them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// The components that get a certificate, with their certificate CN.
pub const COMPONENTS: &[(&str, &str)] = &[
    ("aggregator", "kubechain-aggregator"),
    ("core-server", "kubechain-core-server"),
    ("extension-server", "kubechain-extension-server"),
    ("metrics-server", "kubechain-metrics-server"),
];

/// The certificate files of one identity.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// PEM certificate.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

/// The PKI directory.
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// The PKI in `dir`.
    pub fn new(dir: &Path) -> Self {
        Pki {
            dir: dir.to_path_buf(),
        }
    }

    /// The CA certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// kube's EncryptionConfiguration for the servers: Secrets encrypted
    /// with secretbox under a generated key.
    pub fn encryption_config(&self) -> PathBuf {
        self.dir.join("encryption-config.yaml")
    }

    /// The files of a component or user.
    pub fn files(&self, name: &str) -> CertFiles {
        CertFiles {
            cert: self.dir.join(format!("{name}.crt")),
            key: self.dir.join(format!("{name}.key")),
        }
    }

    /// Creates whatever is missing: the CA, a certificate per component (valid
    /// for the component's name, `localhost`, loopback and `extra_hosts`), and
    /// the admin certificate.
    pub fn ensure(&self, extra_hosts: &[String]) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let ca_key_path = self.dir.join("ca.key");
        if !self.ca().exists() || !ca_key_path.exists() {
            let key = KeyPair::generate()?;
            let mut params = CertificateParams::new(Vec::<String>::new())?;
            params
                .distinguished_name
                .push(DnType::CommonName, "kubechain-ca");
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            params.not_after = rcgen::date_time_ymd(2036, 1, 1);
            let cert = params.self_signed(&key)?;
            write(&self.ca(), &cert.pem())?;
            write_key(&ca_key_path, &key.serialize_pem())?;
        }
        let ca_key = KeyPair::from_pem(&std::fs::read_to_string(&ca_key_path)?)?;
        let issuer = Issuer::from_ca_cert_pem(&std::fs::read_to_string(self.ca())?, ca_key)?;
        for (name, cn) in COMPONENTS {
            let mut hosts = vec![
                name.to_string(),
                format!("{name}.kube-system.svc"),
                "localhost".into(),
                "127.0.0.1".into(),
                "::1".into(),
            ];
            hosts.extend(extra_hosts.iter().cloned());
            self.issue(&issuer, name, cn, &[], &hosts, true)?;
        }
        self.issue(
            &issuer,
            "admin",
            "kubernetes-admin",
            &["system:masters"],
            &[],
            false,
        )?;
        self.ensure_front_proxy()?;
        let (sa_key, sa_pub) = (self.dir.join("sa.key"), self.dir.join("sa.pub"));
        if !sa_key.exists() || !sa_pub.exists() {
            let key = KeyPair::generate()?;
            write_key(&sa_key, &key.serialize_pem())?;
            write(&sa_pub, &key.public_key_pem())?;
        }
        if !self.encryption_config().exists() {
            write_key(&self.encryption_config(), &encryption_config())?;
        }
        Ok(())
    }

    /// The front-proxy CA and the aggregator's front-proxy client
    /// certificate (CN `front-proxy-client`), as kube-apiserver has them.
    fn ensure_front_proxy(&self) -> Result<()> {
        let (ca_cert, ca_key) = (
            self.dir.join("front-proxy-ca.crt"),
            self.dir.join("front-proxy-ca.key"),
        );
        if !ca_cert.exists() || !ca_key.exists() {
            let key = KeyPair::generate()?;
            let mut params = CertificateParams::new(Vec::<String>::new())?;
            params
                .distinguished_name
                .push(DnType::CommonName, "kubechain-front-proxy-ca");
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            params.not_after = rcgen::date_time_ymd(2036, 1, 1);
            write(&ca_cert, &params.self_signed(&key)?.pem())?;
            write_key(&ca_key, &key.serialize_pem())?;
        }
        let issuer = Issuer::from_ca_cert_pem(
            &std::fs::read_to_string(&ca_cert)?,
            KeyPair::from_pem(&std::fs::read_to_string(&ca_key)?)?,
        )?;
        self.issue(
            &issuer,
            "front-proxy-client",
            "front-proxy-client",
            &[],
            &[],
            false,
        )
    }

    fn issue(
        &self,
        issuer: &Issuer<'_, KeyPair>,
        name: &str,
        cn: &str,
        orgs: &[&str],
        hosts: &[String],
        server: bool,
    ) -> Result<()> {
        let files = self.files(name);
        if files.cert.exists() && files.key.exists() {
            return Ok(());
        }
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, cn);
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        for host in hosts {
            params.subject_alt_names.push(match host.parse() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(host.as_str().try_into()?),
            });
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if server {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        params.not_after = rcgen::date_time_ymd(2035, 1, 1);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, issuer)?;
        write(&files.cert, &cert.pem())?;
        write_key(&files.key, &key.serialize_pem())?;
        Ok(())
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Writes a secret (a key, a kubeconfig) into a file created with mode
/// 0600: it is never readable by others, not even for a moment. A file
/// already there is replaced, not rewritten in place with its old mode.
fn write_key(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("replacing {}", path.display()));
        }
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))
}

/// An EncryptionConfiguration encrypting Secrets with a new random
/// secretbox key; `identity` after it still reads Secrets written before
/// encryption was on (rewrite them to encrypt them).
fn encryption_config() -> String {
    use base64::Engine;
    use rand::RngCore;
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    let secret = base64::engine::general_purpose::STANDARD.encode(secret);
    format!(
        "apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources:
      - secrets
    providers:
      - secretbox:
          keys:
            - name: key1
              secret: {secret}
      - identity: {{}}
"
    )
}

/// Writes an admin kubeconfig for `server` (an `https://` URL).
pub fn write_kubeconfig(pki: &Pki, server: &str, path: &Path) -> Result<()> {
    use base64::Engine;
    let b64 = |p: &Path| -> Result<String> {
        Ok(base64::engine::general_purpose::STANDARD
            .encode(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?))
    };
    let admin = pki.files("admin");
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kubechain
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: kubechain-admin
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: kubechain
  context:
    cluster: kubechain
    user: kubechain-admin
current-context: kubechain
",
        ca = b64(&pki.ca())?,
        cert = b64(&admin.cert)?,
        key = b64(&admin.key)?,
    );
    write_key(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pki_is_created_once_and_reused() {
        let dir = std::env::temp_dir().join(format!("kubechain-pki-{}", std::process::id()));
        let pki = Pki::new(&dir);
        pki.ensure(&["example.internal".into()]).unwrap();
        let first = std::fs::read(pki.files("core-server").cert).unwrap();
        pki.ensure(&[]).unwrap();
        assert_eq!(std::fs::read(pki.files("core-server").cert).unwrap(), first);
        write_kubeconfig(&pki, "https://127.0.0.1:6443", &dir.join("kubeconfig")).unwrap();
        let kubeconfig = std::fs::read_to_string(dir.join("kubeconfig")).unwrap();
        assert!(kubeconfig.contains("server: https://127.0.0.1:6443"));
        use std::os::unix::fs::PermissionsExt;
        let mode = |name: &str| {
            std::fs::metadata(dir.join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        for secret in [
            "kubeconfig",
            "ca.key",
            "sa.key",
            "admin.key",
            "core-server.key",
            "encryption-config.yaml",
        ] {
            assert_eq!(mode(secret), 0o600, "{secret}");
        }
        // Rewritten over a file others could read, it is still 0600.
        std::fs::set_permissions(
            dir.join("kubeconfig"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        write_kubeconfig(&pki, "https://127.0.0.1:6443", &dir.join("kubeconfig")).unwrap();
        assert_eq!(mode("kubeconfig"), 0o600);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
