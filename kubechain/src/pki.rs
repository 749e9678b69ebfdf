//! The cluster's certificates, in two trust domains that never mix:
//!
//! - user-facing: the cluster CA (`ca.crt`) signs the front door's serving
//!   certificate, metrics-server's (serving, and its client certificate at
//!   the front door: an aggregated server talks only to the front door)
//!   and the admin's client certificate; the front-proxy CA signs only the
//!   aggregator's proxy client certificate;
//! - internal: the internal CA (`internal-ca.crt`) signs the gRPC links'
//!   and etcd's certificates, and nothing a user holds: core-server and
//!   extension-server (serving and client), the aggregator's client
//!   certificate (`aggregator-internal`), and each etcd member's (serving,
//!   client and peer).
//!
//! Each certificate names only its own server. Existing files are kept, so
//! a restart reuses them, unless their CA or their names changed.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// The certificate files of one identity.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// PEM certificate.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

/// What a certificate may be used for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Usage {
    /// A client certificate only.
    Client,
    /// A serving certificate only.
    Server,
    /// Both: a server that also calls other servers (or etcd peers).
    Both,
}

/// One certificate to issue: its file name, subject and names.
struct Leaf<'a> {
    name: &'a str,
    cn: &'a str,
    orgs: &'a [&'a str],
    usage: Usage,
    hosts: Vec<String>,
}

/// The PKI directory.
pub struct Pki {
    dir: PathBuf,
}

/// The names a server is reached by on this machine, after its own.
fn local_names(own: &[&str]) -> Vec<String> {
    own.iter()
        .map(|n| n.to_string())
        .chain(["localhost", "127.0.0.1", "::1"].map(String::from))
        .collect()
}

impl Pki {
    /// The PKI in `dir`.
    pub fn new(dir: &Path) -> Self {
        Pki {
            dir: dir.to_path_buf(),
        }
    }

    /// The user-facing cluster CA certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// kube's EncryptionConfiguration for the servers: Secrets encrypted
    /// with secretbox under a generated key.
    pub fn encryption_config(&self) -> PathBuf {
        self.dir.join("encryption-config.yaml")
    }

    /// The internal CA certificate (gRPC links and etcd).
    pub fn internal_ca(&self) -> PathBuf {
        self.dir.join("internal-ca.crt")
    }

    /// A file of the PKI directory.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The files of a component or user.
    pub fn files(&self, name: &str) -> CertFiles {
        CertFiles {
            cert: self.dir.join(format!("{name}.crt")),
            key: self.dir.join(format!("{name}.key")),
        }
    }

    /// The TLS an etcd client of this cluster uses (etcdctl, the bench):
    /// etcd's own certificate (it is a client one too) and the internal CA.
    pub fn etcd_client_tls(&self) -> Result<etcd_client::TlsOptions> {
        let files = self.files("etcd");
        let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
        Ok(etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(read(
                &self.internal_ca(),
            )?))
            .identity(etcd_client::Identity::from_pem(
                read(&files.cert)?,
                read(&files.key)?,
            )))
    }

    /// Creates whatever is missing: the three CAs, each server's
    /// certificates (the front door's also valid for `front_door_hosts`),
    /// a certificate per etcd member in `etcd_members` (the first is
    /// `etcd`), the admin's, and the service-account key pair.
    pub fn ensure(
        &self,
        front_door_hosts: &[String],
        etcd_members: &[String],
        etcd_hosts: &[String],
    ) -> Result<()> {
        private_dir(&self.dir)?;
        let cluster = self.authority("ca", "kubechain-ca")?;
        let mut aggregator = local_names(&["aggregator"]);
        aggregator.extend(front_door_hosts.iter().cloned());
        let user_facing = [
            Leaf {
                name: "aggregator",
                cn: "kubechain-aggregator",
                orgs: &[],
                usage: Usage::Server,
                hosts: aggregator,
            },
            // metrics-server also calls the front door with it.
            Leaf {
                name: "metrics-server",
                cn: "kubechain-metrics-server",
                orgs: &[],
                usage: Usage::Both,
                hosts: local_names(&["metrics-server", "metrics-server.kube-system.svc"]),
            },
            Leaf {
                name: "admin",
                cn: "kubernetes-admin",
                orgs: &["system:masters"],
                usage: Usage::Client,
                hosts: Vec::new(),
            },
        ];
        for leaf in &user_facing {
            self.issue(&cluster, leaf)?;
        }

        let internal = self.authority("internal-ca", "kubechain-internal-ca")?;
        let mut links = vec![
            Leaf {
                name: "core-server",
                cn: "kubechain-core-server",
                orgs: &[],
                usage: Usage::Both,
                hosts: local_names(&["core-server"]),
            },
            Leaf {
                name: "extension-server",
                cn: "kubechain-extension-server",
                orgs: &[],
                usage: Usage::Both,
                hosts: local_names(&["extension-server"]),
            },
            Leaf {
                name: "aggregator-internal",
                cn: "kubechain-aggregator",
                orgs: &[],
                usage: Usage::Client,
                hosts: Vec::new(),
            },
        ];
        for member in etcd_members {
            let mut hosts = local_names(&[member]);
            hosts.extend(etcd_hosts.iter().cloned());
            links.push(Leaf {
                name: member,
                cn: member,
                orgs: &[],
                usage: Usage::Both,
                hosts,
            });
        }
        for leaf in &links {
            self.issue(&internal, leaf)?;
        }

        let front_proxy = self.authority("front-proxy-ca", "kubechain-front-proxy-ca")?;
        // kube-apiserver's front-proxy client certificate.
        self.issue(
            &front_proxy,
            &Leaf {
                name: "front-proxy-client",
                cn: "front-proxy-client",
                orgs: &[],
                usage: Usage::Client,
                hosts: Vec::new(),
            },
        )?;

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

    /// The CA `<name>.crt` + `<name>.key`, made if missing.
    fn authority(&self, name: &str, cn: &str) -> Result<Authority> {
        let files = self.files(name);
        let made = !files.cert.exists() || !files.key.exists();
        if made {
            let key = KeyPair::generate()?;
            let mut params = CertificateParams::new(Vec::<String>::new())?;
            params.distinguished_name.push(DnType::CommonName, cn);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            params.not_after = rcgen::date_time_ymd(2036, 1, 1);
            write(&files.cert, &params.self_signed(&key)?.pem())?;
            write_key(&files.key, &key.serialize_pem())?;
        }
        let pem = read(&files.cert)?;
        let subject = parse_pem(pem.as_bytes(), |cert| cert.subject().as_raw().to_vec())
            .with_context(|| format!("parsing {}", files.cert.display()))?;
        let key = KeyPair::from_pem(&read(&files.key)?)?;
        Ok(Authority {
            issuer: Issuer::from_ca_cert_pem(&pem, key)?,
            subject,
            made,
        })
    }

    /// Writes `leaf`'s certificate and key, unless they exist, were signed
    /// by this CA (one just made signed nothing yet) and name
    /// exactly `leaf`'s subject and hosts.
    fn issue(&self, ca: &Authority, leaf: &Leaf<'_>) -> Result<()> {
        let files = self.files(leaf.name);
        if !ca.made && files.key.exists() && is_current(&files.cert, ca, leaf) {
            return Ok(());
        }
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, leaf.cn);
        for org in leaf.orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        for host in &leaf.hosts {
            params.subject_alt_names.push(match host.parse() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(host.as_str().try_into()?),
            });
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = match leaf.usage {
            Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
            Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
            Usage::Both => vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        };
        params.not_after = rcgen::date_time_ymd(2035, 1, 1);
        // Strict verifiers (Python 3.13's default context, `openssl verify
        // -x509_strict`) want the issuer's key named.
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &ca.issuer)?;
        write(&files.cert, &cert.pem())?;
        write_key(&files.key, &key.serialize_pem())?;
        Ok(())
    }
}

/// A CA: what signs, its subject (the issuer of what it signed), and
/// whether it was just made.
struct Authority {
    issuer: Issuer<'static, KeyPair>,
    subject: Vec<u8>,
    made: bool,
}

/// Applies `f` to the first certificate of a PEM file; `None` if there is none.
fn parse_pem<T>(
    pem: &[u8],
    f: impl FnOnce(&x509_parser::certificate::X509Certificate<'_>) -> T,
) -> Option<T> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).ok()?;
    let cert = pem.parse_x509().ok()?;
    Some(f(&cert))
}

/// The DNS names and IP addresses a certificate is valid for, as text.
fn host_names(cert: &x509_parser::certificate::X509Certificate<'_>) -> Option<Vec<String>> {
    use x509_parser::extensions::GeneralName;
    let Some(san) = cert.subject_alternative_name().ok()? else {
        return Some(Vec::new());
    };
    san.value
        .general_names
        .iter()
        .map(|name| match name {
            GeneralName::DNSName(dns) => Some(dns.to_string()),
            GeneralName::IPAddress(ip) => match ip.len() {
                4 => Some(std::net::IpAddr::from(<[u8; 4]>::try_from(*ip).ok()?).to_string()),
                16 => Some(std::net::IpAddr::from(<[u8; 16]>::try_from(*ip).ok()?).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Whether the certificate at `path` is `leaf`'s as it would be issued
/// now: signed by `ca`, with `leaf`'s common name and exactly its hosts.
fn is_current(path: &Path, ca: &Authority, leaf: &Leaf<'_>) -> bool {
    let Ok(pem) = std::fs::read(path) else {
        return false;
    };
    let mut wanted: Vec<String> = leaf
        .hosts
        .iter()
        .map(|h| {
            h.parse::<std::net::IpAddr>()
                .map_or_else(|_| h.clone(), |ip| ip.to_string())
        })
        .collect();
    wanted.sort();
    parse_pem(&pem, |cert| {
        let cn = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok());
        let names = host_names(cert).map(|mut names| {
            names.sort();
            names
        });
        let names_its_issuer = cert.extensions().iter().any(|e| {
            matches!(
                e.parsed_extension(),
                x509_parser::extensions::ParsedExtension::AuthorityKeyIdentifier(_)
            )
        });
        cert.issuer().as_raw() == ca.subject.as_slice()
            && cn == Some(leaf.cn)
            && names.as_ref() == Some(&wanted)
            && names_its_issuer
    })
    .unwrap_or(false)
}

/// Creates `dir` (and its missing parents) 0700 and makes it 0700 if it
/// was there: it holds keys, etcd's data or logs that only the cluster's
/// owner may read.
pub fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
        .with_context(|| format!("creating {}", dir.display()))
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
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

    fn temp_dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("kubechain-pki-{name}-{}", std::process::id()))
    }

    /// The issuer's CN and the host names of a PEM certificate.
    fn issuer_and_names(path: &Path) -> Result<(String, Vec<String>)> {
        parse_pem(&std::fs::read(path)?, |cert| {
            let issuer = cert.issuer().iter_common_name().next()?.as_str().ok()?;
            Some((issuer.to_string(), host_names(cert)?))
        })
        .flatten()
        .with_context(|| format!("parsing {}", path.display()))
    }

    #[test]
    fn pki_is_created_once_and_reused() -> Result<()> {
        let dir = temp_dir("reuse");
        let pki = Pki::new(&dir);
        let etcd = ["etcd".to_string()];
        pki.ensure(&["example.internal".into()], &etcd, &[])?;
        let first = std::fs::read(pki.files("core-server").cert)?;
        pki.ensure(&["example.internal".into()], &etcd, &[])?;
        assert_eq!(std::fs::read(pki.files("core-server").cert)?, first);
        write_kubeconfig(&pki, "https://127.0.0.1:6443", &dir.join("kubeconfig"))?;
        let kubeconfig = std::fs::read_to_string(dir.join("kubeconfig"))?;
        assert!(kubeconfig.contains("server: https://127.0.0.1:6443"));
        use std::os::unix::fs::PermissionsExt;
        let mode =
            |name: &str| std::fs::metadata(dir.join(name)).map(|m| m.permissions().mode() & 0o777);
        for secret in [
            "kubeconfig",
            "ca.key",
            "internal-ca.key",
            "front-proxy-ca.key",
            "sa.key",
            "admin.key",
            "core-server.key",
            "encryption-config.yaml",
            "aggregator-internal.key",
            "etcd.key",
        ] {
            assert_eq!(mode(secret)?, 0o600, "{secret}");
        }
        // Rewritten over a file others could read, it is still 0600.
        std::fs::set_permissions(
            dir.join("kubeconfig"),
            std::fs::Permissions::from_mode(0o644),
        )?;
        write_kubeconfig(&pki, "https://127.0.0.1:6443", &dir.join("kubeconfig"))?;
        assert_eq!(mode("kubeconfig")?, 0o600);
        std::fs::remove_dir_all(dir)?;
        Ok(())
    }

    #[test]
    fn every_certificate_passes_strict_verification() -> Result<()> {
        let dir = temp_dir("strict");
        let pki = Pki::new(&dir);
        pki.ensure(&[], &["etcd".to_string()], &[])?;
        let strict = |ca: &str, leaf: &str| -> Result<String> {
            let out = std::process::Command::new("openssl")
                .args(["verify", "-x509_strict", "-CAfile"])
                .arg(dir.join(ca))
                .arg(dir.join(leaf))
                .output()?;
            Ok(String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr))
        };
        for (ca, leaf) in [
            ("ca.crt", "aggregator.crt"),
            ("ca.crt", "admin.crt"),
            ("ca.crt", "metrics-server.crt"),
            ("internal-ca.crt", "core-server.crt"),
            ("internal-ca.crt", "etcd.crt"),
            ("front-proxy-ca.crt", "front-proxy-client.crt"),
        ] {
            let said = strict(ca, leaf)?;
            assert!(said.trim().ends_with(": OK"), "{leaf}: {said}");
        }
        std::fs::remove_dir_all(dir)?;
        Ok(())
    }

    #[test]
    fn the_chain_trusts_only_the_internal_ca_and_each_certificate_names_only_its_server()
    -> Result<()> {
        let dir = temp_dir("domains");
        let pki = Pki::new(&dir);
        let members = ["etcd", "etcd2"].map(String::from);
        pki.ensure(
            &["kubechain.example".into()],
            &members,
            &["*.etcd.kubechain.svc".into()],
        )?;
        let of = |name: &str| issuer_and_names(&pki.files(name).cert);
        for user_facing in ["aggregator", "metrics-server", "admin"] {
            assert_eq!(of(user_facing)?.0, "kubechain-ca", "{user_facing}");
        }
        for internal in [
            "core-server",
            "extension-server",
            "aggregator-internal",
            "etcd",
            "etcd2",
        ] {
            assert_eq!(of(internal)?.0, "kubechain-internal-ca", "{internal}");
        }
        assert_eq!(of("front-proxy-client")?.0, "kubechain-front-proxy-ca");
        let local = ["localhost", "127.0.0.1", "::1"];
        assert_eq!(
            of("core-server")?.1,
            [&["core-server"][..], &local].concat()
        );
        assert_eq!(
            of("etcd2")?.1,
            [&["etcd2"][..], &local, &["*.etcd.kubechain.svc"]].concat()
        );
        assert_eq!(
            of("aggregator")?.1,
            [&["aggregator"][..], &local, &["kubechain.example"]].concat()
        );
        assert!(of("aggregator-internal")?.1.is_empty());
        std::fs::remove_dir_all(dir)?;
        Ok(())
    }

    #[test]
    fn certificates_of_an_older_layout_are_issued_again() -> Result<()> {
        let dir = temp_dir("upgrade");
        let pki = Pki::new(&dir);
        let etcd = ["etcd".to_string()];
        pki.ensure(&[], &etcd, &[])?;
        // core-server's certificate as the single-CA layout had it: signed
        // by the cluster CA, naming other servers too.
        let mut cluster = pki.authority("ca", "kubechain-ca")?;
        cluster.made = true;
        let old = Leaf {
            name: "core-server",
            cn: "kubechain-core-server",
            orgs: &[],
            usage: Usage::Both,
            hosts: local_names(&["core-server", "aggregator"]),
        };
        pki.issue(&cluster, &old)?;
        let core = pki.files("core-server").cert;
        assert_eq!(issuer_and_names(&core)?.0, "kubechain-ca");
        pki.ensure(&[], &etcd, &[])?;
        let (issuer, names) = issuer_and_names(&core)?;
        assert_eq!(issuer, "kubechain-internal-ca");
        assert!(!names.contains(&"aggregator".to_string()), "{names:?}");
        // New front-door names take effect too.
        let before = std::fs::read(pki.files("aggregator").cert)?;
        pki.ensure(&["kubechain.example".into()], &etcd, &[])?;
        assert_ne!(std::fs::read(pki.files("aggregator").cert)?, before);
        std::fs::remove_dir_all(dir)?;
        Ok(())
    }
}
