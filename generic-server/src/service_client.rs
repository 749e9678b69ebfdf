//! Reaching a server behind a Service (an aggregated API server, a
//! conversion webhook): the Service resolved to ready endpoints through its
//! EndpointSlices (there is no cluster network), and HTTPS clients that
//! verify the server as `<service>.<namespace>.svc` by a caBundle and may
//! present a client certificate.

use apimachinery::keys;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use apimachinery::error::{Reason, Result as ApiResult};

/// Reads Services and EndpointSlices: through a server's own API, or
/// straight from storage.
#[async_trait::async_trait]
pub trait ObjectReader: Send + Sync {
    /// One object by API path.
    async fn get(&self, path: &str) -> ApiResult<Value>;
    /// A collection by API path, filtered by a label selector.
    async fn list(&self, path: &str, label_selector: &str) -> ApiResult<Vec<Value>>;
}

#[async_trait::async_trait]
impl ObjectReader for crate::loopback::Loopback {
    async fn get(&self, path: &str) -> ApiResult<Value> {
        crate::loopback::Loopback::get(self, path).await
    }

    async fn list(&self, path: &str, label_selector: &str) -> ApiResult<Vec<Value>> {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("labelSelector", label_selector)
            .finish();
        let list = self.call(http::Method::GET, path, &query, None).await?;
        Ok(list["items"].as_array().cloned().unwrap_or_default())
    }
}

/// Reads objects straight from storage by their API paths, for servers
/// that do not serve them (the extension server reading Services).
pub struct StorageReader {
    storage: std::sync::Arc<dyn crate::storage::Storage>,
    root: String,
}

impl StorageReader {
    /// A reader of `storage` with keys under `root` (`/registry`).
    pub fn new(storage: std::sync::Arc<dyn crate::storage::Storage>, root: &str) -> Self {
        StorageReader {
            storage,
            root: root.trim_end_matches('/').to_string(),
        }
    }

    /// The key (or key prefix) of an API path, in the chain's key layout.
    fn key(&self, path: &str) -> String {
        let info = crate::request_info::RequestInfo::parse(&http::Method::GET, path, "");
        match (info.namespace.is_empty(), info.name.is_empty()) {
            (_, false) => keys::object_key(
                &self.root,
                &info.api_group,
                &info.resource,
                &info.namespace,
                &info.name,
            ),
            (false, true) => {
                keys::namespace_prefix(&self.root, &info.api_group, &info.resource, &info.namespace)
            }
            (true, true) => keys::key_prefix(&self.root, &info.api_group, &info.resource),
        }
    }
}

#[async_trait::async_trait]
impl ObjectReader for StorageReader {
    async fn get(&self, path: &str) -> ApiResult<Value> {
        let key = self.key(path);
        match self.storage.get(&key).await? {
            Some(kv) => {
                serde_json::from_slice(&kv.value).map_err(apimachinery::error::Error::internal)
            }
            None => Err(apimachinery::error::Error::new(
                Reason::NotFound,
                format!("{path} not found"),
            )),
        }
    }

    async fn list(&self, path: &str, label_selector: &str) -> ApiResult<Vec<Value>> {
        let prefix = self.key(path);
        let selector = apimachinery::label_selector::LabelSelector::parse(label_selector)?;
        let page = self
            .storage
            .range(&prefix, &crate::storage::prefix_end(&prefix), 0, 0)
            .await?;
        Ok(page
            .kvs
            .iter()
            .filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
            .filter(|obj| {
                selector.matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
            })
            .collect())
    }
}

/// Why an APIService's backend cannot be used, as a condition reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Unavailable {
    /// `ServiceNotFound`, `ServicePortError`, `EndpointsNotFound`, `MissingEndpoints`, `FailedDiscoveryCheck`...
    pub reason: &'static str,
    /// Details.
    pub message: String,
}

impl Unavailable {
    fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Unavailable {
            reason,
            message: message.into(),
        }
    }
}

/// A Service and port to reach.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServiceRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Port on the Service.
    pub port: i64,
}

impl ServiceRef {
    /// The service of an APIService, if it is remote.
    pub fn of(apiservice: &Value) -> Option<ServiceRef> {
        let service = apiservice
            .pointer("/spec/service")
            .filter(|s| s.is_object())?;
        Some(ServiceRef {
            namespace: service["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            name: service["name"].as_str().unwrap_or_default().to_string(),
            port: service["port"].as_i64().unwrap_or(443),
        })
    }

    /// The DNS name the backend's certificate is verified against.
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

/// Resolves a Service to the ready addresses of its endpoints, as
/// kube-aggregator does with endpoint routing.
pub async fn resolve(
    client: &dyn ObjectReader,
    service: &ServiceRef,
) -> Result<Vec<SocketAddr>, Unavailable> {
    let path = format!(
        "/api/v1/namespaces/{}/services/{}",
        service.namespace, service.name
    );
    let svc = match client.get(&path).await {
        Ok(svc) => svc,
        Err(e) if e.reason() == Reason::NotFound => {
            return Err(Unavailable::new(
                "ServiceNotFound",
                format!(
                    "service/{} in {:?} is not present",
                    service.name, service.namespace
                ),
            ));
        }
        Err(e) => return Err(Unavailable::new("ServiceAccessError", e.to_string())),
    };
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(port) = ports
        .iter()
        .find(|p| p["port"].as_i64() == Some(service.port))
    else {
        return Err(Unavailable::new(
            "ServicePortError",
            format!(
                "service/{} in {:?} is not listening on port {}",
                service.name, service.namespace, service.port
            ),
        ));
    };
    let port_name = port["name"].as_str().unwrap_or_default().to_string();
    let target = port["targetPort"].as_i64();
    let selector = format!("kubernetes.io/service-name={}", service.name);
    let slices_path = format!(
        "/apis/discovery.k8s.io/v1/namespaces/{}/endpointslices",
        service.namespace
    );
    let items = client
        .list(&slices_path, &selector)
        .await
        .unwrap_or_default();
    if items.is_empty() {
        return Err(Unavailable::new(
            "EndpointsNotFound",
            format!(
                "cannot find endpoints for service/{} in {:?}",
                service.name, service.namespace
            ),
        ));
    }
    let mut addresses = Vec::new();
    for slice in &items {
        let Some(slice_port) = slice["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| p["port"].as_i64())
            .or(target)
        else {
            continue;
        };
        for endpoint in slice["endpoints"].as_array().into_iter().flatten() {
            if endpoint.pointer("/conditions/ready") == Some(&Value::Bool(false)) {
                continue;
            }
            for ip in endpoint["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if let (Ok(ip), Ok(port)) = (ip.parse(), u16::try_from(slice_port)) {
                    addresses.push(SocketAddr::new(ip, port));
                }
            }
        }
    }
    if addresses.is_empty() {
        return Err(Unavailable::new(
            "MissingEndpoints",
            format!(
                "endpoints for service/{} in {:?} have no addresses with port name {port_name:?}",
                service.name, service.namespace
            ),
        ));
    }
    Ok(addresses)
}

/// A client certificate to present.
#[derive(Clone)]
pub struct Identity {
    /// The front-proxy client certificate (PEM).
    pub cert: Vec<u8>,
    /// Its key (PEM).
    pub key: Vec<u8>,
}

/// HTTPS clients to servers behind Services, one per (TLS settings,
/// endpoint), reused so connections pool (HTTP/2 where the server offers it).
pub struct Clients {
    identity: Option<Identity>,
    pool: Mutex<HashMap<(String, SocketAddr), reqwest::Client>>,
}

impl Clients {
    /// A pool presenting `identity`, if any.
    pub fn new(identity: Option<Identity>) -> Self {
        Clients {
            identity,
            pool: Mutex::default(),
        }
    }

    /// The client for `service` at `endpoint`, verifying it by the base64
    /// `ca_bundle` (or not at all when `insecure`).
    pub fn client(
        &self,
        ca_bundle: &str,
        insecure: bool,
        service: &ServiceRef,
        endpoint: SocketAddr,
    ) -> crate::Result<reqwest::Client> {
        self.client_for(ca_bundle, insecure, &service.server_name(), endpoint)
    }

    /// The client for a server verified as `server_name` at `endpoint`.
    pub fn client_for(
        &self,
        ca_bundle: &str,
        insecure: bool,
        server_name: &str,
        endpoint: SocketAddr,
    ) -> crate::Result<reqwest::Client> {
        let ca = ca_bundle;
        let key = (format!("{insecure}|{ca}|{server_name}"), endpoint);
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = pool.get(&key) {
            return Ok(client.clone());
        }
        let tls = self.tls(ca, insecure)?;
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .resolve(server_name, endpoint)
            .connect_timeout(Duration::from_secs(3))
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|e| crate::Error::Tls(format!("https client: {e}")))?;
        pool.insert(key, client.clone());
        Ok(client)
    }

    fn tls(&self, ca_bundle_b64: &str, insecure: bool) -> crate::Result<rustls::ClientConfig> {
        use base64::Engine;
        crate::tls::install_crypto_provider();
        let builder = rustls::ClientConfig::builder();
        let builder = if insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAny::default()))
        } else {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(ca_bundle_b64)
                .map_err(|e| crate::Error::Tls(format!("caBundle: {e}")))?;
            let verifier = CaBundleVerifier::new(&pem)
                .map_err(|e| crate::Error::Tls(format!("caBundle: {e}")))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
        };
        let mut config = match &self.identity {
            Some(identity) => {
                let certs = crate::tls::parse_certs(&identity.cert)?;
                builder.with_client_auth_cert(certs, crate::tls::parse_key(&identity.key)?)?
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// Verifies a server by a caBundle as Go's TLS does: a chain to one of the
/// bundle's certificates, or (what webpki alone refuses) the very
/// certificate of the bundle itself, as `openssl req -x509` makes for the
/// common tutorials: self-signed, marked `CA:TRUE`, and still checked for
/// its name, its validity period and, if it names any, the server-auth use.
#[derive(Debug)]
struct CaBundleVerifier {
    chained: Arc<rustls::client::WebPkiServerVerifier>,
    pinned: Vec<rustls::pki_types::CertificateDer<'static>>,
}

impl CaBundleVerifier {
    fn new(pem: &[u8]) -> crate::Result<Self> {
        let pinned = crate::tls::parse_certs(pem)?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in &pinned {
            roots.add(cert.clone())?;
        }
        let chained = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .map_err(|e| crate::Error::Tls(e.to_string()))?;
        Ok(CaBundleVerifier { chained, pinned })
    }

    /// Checks a server certificate that is itself in the bundle.
    fn verify_pinned(
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        server_name: &rustls::pki_types::ServerName<'_>,
        now: rustls::pki_types::UnixTime,
    ) -> Result<(), rustls::Error> {
        use rustls::CertificateError;
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        let (_, cert) = x509_parser::parse_x509_certificate(end_entity.as_ref())
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        let validity = cert.validity();
        if now < validity.not_before.timestamp() {
            return Err(CertificateError::NotValidYet.into());
        }
        if now > validity.not_after.timestamp() {
            return Err(CertificateError::Expired.into());
        }
        if let Ok(Some(usage)) = cert.extended_key_usage()
            && !usage.value.any
            && !usage.value.server_auth
        {
            return Err(CertificateError::InvalidPurpose.into());
        }
        Ok(())
    }
}

impl rustls::client::danger::ServerCertVerifier for CaBundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let chained = self.chained.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        match chained {
            Err(_)
                if self
                    .pinned
                    .iter()
                    .any(|c| c.as_ref() == end_entity.as_ref()) =>
            {
                Self::verify_pinned(end_entity, server_name, now)
                    .map(|()| rustls::client::danger::ServerCertVerified::assertion())
            }
            // A CA certificate that is not the bundle's own: Go, which does
            // not look at the flag, finds no authority for it.
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other)))
                if other.to_string().contains("CaUsedAsEndEntity") =>
            {
                Err(rustls::CertificateError::UnknownIssuer.into())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.chained.supported_verify_schemes()
    }
}

/// Why a request to a backend failed, in the words of Go's client (which
/// kube-aggregator's conditions and webhook errors quote): an unknown
/// authority, a name mismatch, an expired certificate, a refused
/// connection, a timeout; else the error itself.
pub fn describe(error: &reqwest::Error) -> String {
    use rustls::CertificateError as C;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return match tls {
                rustls::Error::InvalidCertificate(C::UnknownIssuer) => {
                    "x509: certificate signed by unknown authority".into()
                }
                rustls::Error::InvalidCertificate(C::NotValidForNameContext {
                    expected,
                    presented,
                }) => format!(
                    "x509: certificate is valid for {}, not {}",
                    presented.join(", "),
                    expected.to_str()
                ),
                rustls::Error::InvalidCertificate(C::NotValidForName) => {
                    "x509: certificate is not valid for the requested name".into()
                }
                rustls::Error::InvalidCertificate(
                    C::Expired
                    | C::ExpiredContext { .. }
                    | C::NotValidYet
                    | C::NotValidYetContext { .. },
                ) => "x509: certificate has expired or is not yet valid".into(),
                other => format!("tls: {other}"),
            };
        }
        // An io::Error's source() skips the error it wraps: look inside.
        source = match e.downcast_ref::<std::io::Error>() {
            Some(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
                return "connect: connection refused".into();
            }
            Some(io) => io.get_ref().map(|inner| inner as _),
            None => e.source(),
        };
    }
    if error.is_timeout() {
        return "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into();
    }
    error.to_string()
}

/// The largest answer a webhook may give: a conversion of a long list
/// must fit, an endless answer must not exhaust the server.
const MAX_REVIEW_ANSWER_BYTES: usize = 64 << 20;

/// POSTs a review to the webhook a `clientConfig` (admissionregistration's
/// or a CRD conversion's: `url`, or `service` with `path`, and `caBundle`)
/// names, with `query` appended, and returns the JSON answer; the error
/// is Go's words for what failed (`Post "https://…": …`).
pub async fn post_review(
    reader: &dyn ObjectReader,
    clients: &Clients,
    client_config: &Value,
    query: &str,
    review: &Value,
    timeout: Duration,
) -> Result<Value, String> {
    let ca = client_config["caBundle"].as_str().unwrap_or_default();
    let (client, url) = match (
        client_config["url"].as_str(),
        client_config.get("service").filter(|s| s.is_object()),
    ) {
        (Some(url), _) => {
            let parsed = reqwest::Url::parse(url).map_err(|e| e.to_string())?;
            let host = parsed.host_str().unwrap_or_default();
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = parsed.port_or_known_default().unwrap_or(443);
            let addr = tokio::net::lookup_host((host.as_str(), port))
                .await
                .map_err(|e| format!("dial tcp: lookup {host}: {e}"))?
                .next()
                .ok_or_else(|| format!("dial tcp: lookup {host}: no such host"))?;
            let client = clients
                .client_for(ca, false, &host, addr)
                .map_err(|e| e.to_string())?;
            (client, url.to_string())
        }
        (None, Some(svc)) => {
            let service = ServiceRef {
                namespace: svc["namespace"].as_str().unwrap_or_default().into(),
                name: svc["name"].as_str().unwrap_or_default().into(),
                port: svc["port"].as_i64().unwrap_or(443),
            };
            let endpoints = resolve(reader, &service).await.map_err(|e| e.message)?;
            let endpoint = *endpoints.first().ok_or("no endpoints")?;
            let path = svc["path"].as_str().unwrap_or("/");
            let url = format!(
                "https://{}:{}{path}",
                service.server_name(),
                endpoint.port()
            );
            let client = clients
                .client(ca, false, &service, endpoint)
                .map_err(|e| e.to_string())?;
            (client, url)
        }
        _ => return Err("no webhook client configuration".into()),
    };
    let url = match (query.is_empty(), url.contains('?')) {
        (true, _) => url,
        (false, true) => format!("{url}&{query}"),
        (false, false) => format!("{url}?{query}"),
    };
    let failed = |e: reqwest::Error| format!("Post {url:?}: {}", describe(&e));
    let mut post = client.post(&url);
    // The webhook is the next hop of the request's trace.
    if let Some(trace) = crate::trace::current() {
        post = post.header(crate::trace::TRACEPARENT, trace.header());
    }
    let answer = post
        .header("Content-Type", "application/json")
        .body(review.to_string())
        .timeout(timeout)
        .send()
        .await
        .map_err(failed)?;
    let status = answer.status();
    let mut answer = answer;
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await.map_err(failed)? {
        if body.len() + chunk.len() > MAX_REVIEW_ANSWER_BYTES {
            return Err(format!(
                "the response from {url:?} is larger than {MAX_REVIEW_ANSWER_BYTES} bytes"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        return Err(format!(
            "the server responded with status code {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&body[..body.len().min(1024)])
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("cannot decode the response: {e}"))
}

/// Accepts any server certificate: only for `insecureSkipTLSVerify: true`.
#[derive(Debug)]
pub(crate) struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl Default for AcceptAny {
    fn default() -> Self {
        AcceptAny(Arc::new(rustls::crypto::ring::default_provider()))
    }
}

impl rustls::client::danger::ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

    /// A certificate like `openssl req -x509 -subj /CN=<name> -addext
    /// subjectAltName=DNS:<name>` makes: self-signed, its own CA (`CA:TRUE`).
    fn self_signed_ca(name: &str) -> rcgen::Certificate {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.self_signed(&key).unwrap()
    }

    fn verify(
        bundle: &rcgen::Certificate,
        served: &rcgen::Certificate,
        name: &str,
    ) -> Result<(), rustls::Error> {
        let verifier = CaBundleVerifier::new(bundle.pem().as_bytes()).unwrap();
        let served = CertificateDer::from(served.der().to_vec());
        verifier
            .verify_server_cert(
                &served,
                &[],
                &ServerName::try_from(name.to_string()).unwrap(),
                &[],
                UnixTime::now(),
            )
            .map(|_| ())
    }

    #[test]
    fn a_self_signed_ca_in_the_bundle_serves_as_itself() {
        let cert = self_signed_ca("wardle-server.wardle.svc");
        verify(&cert, &cert, "wardle-server.wardle.svc").unwrap();
        // Still checked for its name, and only that exact certificate passes.
        let wrong_name = verify(&cert, &cert, "other.wardle.svc")
            .unwrap_err()
            .to_string();
        assert!(wrong_name.contains("not valid for name"), "{wrong_name}");
        let stranger = self_signed_ca("wardle-server.wardle.svc");
        let unknown = verify(&cert, &stranger, "wardle-server.wardle.svc")
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("UnknownIssuer"), "{unknown}");
    }
}
