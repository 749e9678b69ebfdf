//! TLS material: the PEM files a server is started with, turned into rustls
//! and tonic configurations, and the identity in a peer certificate.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::Error;

/// How long a client waits for a TLS handshake. A server that accepts the
/// connection but never answers (a paused etcd: the kernel still accepts)
/// fails the reconnection in this time, rather than holding every request
/// queued behind it; tonic's connect timeout covers only TCP.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A certificate, its key and the CA that verifies peers.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// PEM certificate chain.
    pub cert: Vec<u8>,
    /// PEM private key.
    pub key: Vec<u8>,
    /// PEM CA bundle for verifying peers.
    pub ca: Vec<u8>,
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::read(path, source))
}

impl TlsFiles {
    /// Reads the three PEM files.
    pub fn load(cert: &Path, key: &Path, ca: &Path) -> Result<Self, Error> {
        Ok(TlsFiles {
            cert: read(cert)?,
            key: read(key)?,
            ca: read(ca)?,
        })
    }

    /// A rustls client configuration that presents this certificate and
    /// trusts only the CA: a server's own HTTPS calls to the front door.
    pub fn https_client(&self) -> Result<rustls::ClientConfig, Error> {
        client_config(&self.ca, Some((&self.cert, &self.key)))
    }

    /// A rustls server configuration that asks for (but does not require)
    /// client certificates signed by the CA: the front door, where
    /// anonymous requests reach health endpoints.
    pub fn https_server(&self) -> Result<rustls::ServerConfig, Error> {
        self.https_server_trusting(&[])
    }

    /// Like [`TlsFiles::https_server`], also accepting client certificates
    /// signed by other CAs (PEM bundles): an aggregated server trusts the
    /// cluster CA and the front-proxy CA. Which one signed a certificate is
    /// then told by a [`ChainVerifier`].
    pub fn https_server_trusting(
        &self,
        extra_cas: &[&[u8]],
    ) -> Result<rustls::ServerConfig, Error> {
        let mut bundles = vec![self.ca.as_slice()];
        bundles.extend_from_slice(extra_cas);
        self.https_server_with(Arc::new(ClientRoots::new(&bundles)?))
    }

    /// An HTTPS server configuration whose client certificates are checked
    /// by `roots`, which may change while the server runs (a front-proxy CA
    /// followed in the cluster); none is required.
    pub fn https_server_with(
        &self,
        roots: Arc<ClientRoots>,
    ) -> Result<rustls::ServerConfig, Error> {
        install_crypto_provider();
        let mut config = rustls::ServerConfig::builder()
            .with_client_cert_verifier(roots)
            .with_single_cert(parse_certs(&self.cert)?, parse_key(&self.key)?)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }

    /// The tonic server configuration of a gRPC link: client certificates required.
    pub fn grpc_server(&self) -> tonic::transport::ServerTlsConfig {
        tonic::transport::ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(&self.cert, &self.key))
            .client_ca_root(tonic::transport::Certificate::from_pem(&self.ca))
    }

    /// The tonic client configuration of a gRPC link to `server_name`.
    pub fn grpc_client(&self, server_name: &str) -> tonic::transport::ClientTlsConfig {
        self.etcd_client().domain_name(server_name)
    }

    /// The client configuration of an etcd connection: this certificate,
    /// and the server verified by the CA alone, as the host its URL names.
    pub fn etcd_client(&self) -> tonic::transport::ClientTlsConfig {
        tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&self.ca))
            .identity(tonic::transport::Identity::from_pem(&self.cert, &self.key))
            .timeout(HANDSHAKE_TIMEOUT)
    }
}

/// A rustls client configuration trusting only `ca` (PEM) and presenting
/// `identity`'s certificate and key (PEM), if given.
pub fn client_config(
    ca: &[u8],
    identity: Option<(&[u8], &[u8])>,
) -> Result<rustls::ClientConfig, Error> {
    install_crypto_provider();
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots_of(ca)?);
    Ok(match identity {
        Some((cert, key)) => builder.with_client_auth_cert(parse_certs(cert)?, parse_key(key)?)?,
        None => builder.with_no_client_auth(),
    })
}

/// An HTTPS server configuration serving the certificate in the files
/// `cert` and `key`, read again when they change ([`ReloadingCert`]),
/// with client certificates checked by `roots`.
pub fn https_server_reloading(
    roots: Arc<ClientRoots>,
    cert: &Path,
    key: &Path,
) -> Result<rustls::ServerConfig, Error> {
    install_crypto_provider();
    let mut config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(roots)
        .with_cert_resolver(Arc::new(ReloadingCert::new(cert, key)?));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// How often a served certificate's files are looked at again.
const RELOAD_CHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// A serving certificate from files, read again when their modification
/// times change (looked at, on a handshake, at most every 5 s): a renewed
/// certificate is served to new connections without a restart and without
/// dropping the open ones. Files that do not parse leave the last good
/// certificate in place.
pub struct ReloadingCert {
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
    state: std::sync::Mutex<Served>,
}

/// What is served now, and the files' times when it was read.
struct Served {
    certified: Arc<rustls::sign::CertifiedKey>,
    stamps: (Option<std::time::SystemTime>, Option<std::time::SystemTime>),
    checked: std::time::Instant,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReloadingCert({})", self.cert.display())
    }
}

impl ReloadingCert {
    /// Reads the certificate chain and key (PEM) now.
    pub fn new(cert: &Path, key: &Path) -> Result<Self, Error> {
        let stamps = (modified(cert), modified(key));
        Ok(ReloadingCert {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            state: std::sync::Mutex::new(Served {
                certified: certified(&read(cert)?, &read(key)?)?,
                stamps,
                checked: std::time::Instant::now(),
            }),
        })
    }

    /// The certificate to serve, read again if its files changed.
    fn current(&self) -> Arc<rustls::sign::CertifiedKey> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= RELOAD_CHECK {
            state.checked = std::time::Instant::now();
            let stamps = (modified(&self.cert), modified(&self.key));
            if stamps != state.stamps {
                let loaded = read(&self.cert)
                    .and_then(|cert| Ok((cert, read(&self.key)?)))
                    .and_then(|(cert, key)| certified(&cert, &key));
                match loaded {
                    Ok(certified) => {
                        tracing::info!(cert = %self.cert.display(), "serving the renewed certificate");
                        state.certified = certified;
                        state.stamps = stamps;
                    }
                    Err(error) => {
                        tracing::warn!(%error, cert = %self.cert.display(), "the changed certificate files do not load; the last one is served")
                    }
                }
            }
        }
        state.certified.clone()
    }
}

impl rustls::server::ResolvesServerCert for ReloadingCert {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.current())
    }
}

/// A file's modification time, if it can be read.
fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// A certificate chain and its key (PEM), as rustls serves them; the key
/// must match the certificate.
fn certified(cert: &[u8], key: &[u8]) -> Result<Arc<rustls::sign::CertifiedKey>, Error> {
    let provider = rustls::crypto::ring::default_provider();
    let signing = provider
        .key_provider
        .load_private_key(parse_key(key)?)
        .map_err(|e| Error::Tls(format!("private key: {e}")))?;
    let certified = rustls::sign::CertifiedKey::new(parse_certs(cert)?, signing);
    certified
        .keys_match()
        .map_err(|e| Error::Tls(format!("the key does not match the certificate: {e}")))?;
    Ok(Arc::new(certified))
}

/// Parses every certificate in a PEM bundle.
pub fn parse_certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| Error::Tls(format!("certificate: {e}")))?;
    if certs.is_empty() {
        return Err(Error::Tls("no certificate found".into()));
    }
    Ok(certs)
}

/// The first private key in a PEM file.
pub fn parse_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, Error> {
    rustls_pemfile::private_key(&mut &pem[..])
        .map_err(|e| Error::Tls(format!("private key: {e}")))?
        .ok_or_else(|| Error::Tls("no private key found".into()))
}

/// The trust anchors of a PEM CA bundle.
fn roots_of(pem: &[u8]) -> Result<rustls::RootCertStore, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in parse_certs(pem)? {
        roots
            .add(cert)
            .map_err(|e| Error::Tls(format!("CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// The CAs an HTTPS server accepts client certificates from: its own CA and
/// others set while it runs. A handshake uses the CAs of its moment; no CA
/// names are sent as hints, so a client presents its certificate whatever
/// CA signed it (Go's client withholds one that matches no hint).
pub struct ClientRoots {
    /// `None` while no CA is known.
    current: std::sync::RwLock<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>>,
}

impl std::fmt::Debug for ClientRoots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientRoots")
    }
}

impl ClientRoots {
    /// Trusts the CAs of the PEM bundles (none: no client certificate yet).
    pub fn new(bundles: &[&[u8]]) -> Result<Self, Error> {
        Ok(ClientRoots {
            current: std::sync::RwLock::new(verifier_of(bundles)?),
        })
    }

    /// From now on trusts the CAs of these PEM bundles, and no others.
    pub fn trust(&self, bundles: &[&[u8]]) -> Result<(), Error> {
        let verifier = verifier_of(bundles)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = verifier;
        Ok(())
    }

    fn current(&self) -> Option<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The signature algorithms a handshake's proof of key is checked with
/// while no CA is known.
fn algorithms() -> rustls::crypto::WebPkiSupportedAlgorithms {
    rustls::crypto::ring::default_provider().signature_verification_algorithms
}

/// A verifier of optional client certificates signed by the CAs of the
/// PEM `bundles`; `None` when there are none.
fn verifier_of(
    bundles: &[&[u8]],
) -> Result<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for pem in bundles.iter().filter(|pem| !pem.is_empty()) {
        roots.roots.extend(roots_of(pem)?.roots);
    }
    if roots.is_empty() {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map(Some)
        .map_err(|e| Error::Tls(format!("client verifier: {e}")))
}

/// While no CA is known, a client certificate is taken at the handshake
/// with only its key proven; its chain is checked when the request is
/// authenticated, against what is trusted then (a connection made before
/// the cluster's CAs were read is not left without its certificate).
impl rustls::server::danger::ClientCertVerifier for ClientRoots {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        match self.current() {
            Some(verifier) => verifier.verify_client_cert(end_entity, intermediates, now),
            None => Ok(rustls::server::danger::ClientCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        match self.current() {
            Some(verifier) => verifier.verify_tls12_signature(message, cert, dss),
            None => rustls::crypto::verify_tls12_signature(message, cert, dss, &algorithms()),
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        match self.current() {
            Some(verifier) => verifier.verify_tls13_signature(message, cert, dss),
            None => rustls::crypto::verify_tls13_signature(message, cert, dss, &algorithms()),
        }
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        algorithms().supported_schemes()
    }
}

/// Checks client certificate chains against one CA bundle after the
/// handshake, to tell which of the CAs a server trusts signed a peer's
/// certificate (the front-proxy CA or the cluster CA).
#[derive(Clone)]
pub struct ChainVerifier(Arc<dyn rustls::server::danger::ClientCertVerifier>);

impl std::fmt::Debug for ChainVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChainVerifier")
    }
}

impl ChainVerifier {
    /// A verifier trusting the CAs of a PEM bundle.
    pub fn new(ca_pem: &[u8]) -> Result<Self, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots_of(ca_pem)?),
            provider,
        )
        .build()
        .map_err(|e| Error::Tls(format!("client verifier: {e}")))?;
        Ok(ChainVerifier(verifier))
    }

    /// Whether a chain (DER, leaf first) is a valid client certificate
    /// signed, through any intermediates, by one of the CAs.
    pub fn verifies(&self, chain: &[Vec<u8>]) -> bool {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return false;
        };
        let intermediates: Vec<CertificateDer<'_>> = intermediates
            .iter()
            .map(|c| CertificateDer::from(c.as_slice()))
            .collect();
        let now = rustls::pki_types::UnixTime::now();
        self.0
            .verify_client_cert(&CertificateDer::from(leaf.as_slice()), &intermediates, now)
            .is_ok()
    }
}

/// Makes ring the process's rustls crypto provider (idempotent).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The subject of a certificate: common name and organizations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// CN.
    pub common_name: String,
    /// O values.
    pub organizations: Vec<String>,
}

/// The client certificate a connection presented, read once when the
/// connection opens and shared by every request on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// The chain (DER, leaf first), for checks against a CA.
    pub chain: Vec<Vec<u8>>,
    /// The leaf's subject; `None` when it cannot be read (no common name,
    /// not a certificate), and then the certificate names nobody.
    pub subject: Option<Subject>,
}

impl ClientCert {
    /// Reads the leaf's subject of `chain` (DER, leaf first).
    pub fn new(chain: Vec<Vec<u8>>) -> Self {
        let subject = chain.first().and_then(|leaf| subject(leaf));
        ClientCert { chain, subject }
    }
}

/// Reads the subject of a DER certificate.
pub fn subject(der: &[u8]) -> Option<Subject> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let common_name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let organizations = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some(Subject {
        common_name,
        organizations,
    })
}
