//! Reaching an aggregated server: its Service resolved to ready endpoints
//! through EndpointSlices (there is no cluster network), and HTTPS clients
//! that verify it as `<service>.<namespace>.svc` by its caBundle and present
//! the front-proxy client certificate.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use generic_server::error::Reason;
use generic_server::loopback::Loopback;
use serde_json::Value;

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
        Unavailable { reason, message: message.into() }
    }
}

/// The service an APIService points at.
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
        let service = apiservice.pointer("/spec/service").filter(|s| s.is_object())?;
        Some(ServiceRef {
            namespace: service["namespace"].as_str().unwrap_or_default().to_string(),
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
pub async fn resolve(client: &Loopback, service: &ServiceRef) -> Result<Vec<SocketAddr>, Unavailable> {
    let path = format!("/api/v1/namespaces/{}/services/{}", service.namespace, service.name);
    let svc = match client.get(&path).await {
        Ok(svc) => svc,
        Err(e) if e.reason() == Reason::NotFound => {
            return Err(Unavailable::new(
                "ServiceNotFound",
                format!("service/{} in {:?} is not present", service.name, service.namespace),
            ));
        }
        Err(e) => return Err(Unavailable::new("ServiceAccessError", e.to_string())),
    };
    let ports = svc.pointer("/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(port) = ports.iter().find(|p| p["port"].as_i64() == Some(service.port)) else {
        return Err(Unavailable::new(
            "ServicePortError",
            format!("service/{} in {:?} is not listening on port {}", service.name, service.namespace, service.port),
        ));
    };
    let port_name = port["name"].as_str().unwrap_or_default().to_string();
    let target = port["targetPort"].as_i64();
    let query = format!("labelSelector=kubernetes.io%2Fservice-name%3D{}", service.name);
    let slices_path = format!("/apis/discovery.k8s.io/v1/namespaces/{}/endpointslices", service.namespace);
    let slices = client.call(http::Method::GET, &slices_path, &query, None).await.ok();
    let items = slices.as_ref().and_then(|s| s["items"].as_array()).cloned().unwrap_or_default();
    if items.is_empty() {
        return Err(Unavailable::new(
            "EndpointsNotFound",
            format!("cannot find endpoints for service/{} in {:?}", service.name, service.namespace),
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
            for ip in endpoint["addresses"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                if let (Ok(ip), Ok(port)) = (ip.parse(), u16::try_from(slice_port)) {
                    addresses.push(SocketAddr::new(ip, port));
                }
            }
        }
    }
    if addresses.is_empty() {
        return Err(Unavailable::new(
            "MissingEndpoints",
            format!("endpoints for service/{} in {:?} have no addresses with port name {port_name:?}", service.name, service.namespace),
        ));
    }
    Ok(addresses)
}

/// How the aggregator authenticates to backends and verifies them.
#[derive(Clone)]
pub struct Identity {
    /// The front-proxy client certificate (PEM).
    pub cert: Vec<u8>,
    /// Its key (PEM).
    pub key: Vec<u8>,
}

/// HTTPS clients to backends, one per (TLS settings, endpoint), reused so
/// connections pool (HTTP/2 where the backend offers it).
pub struct Clients {
    identity: Identity,
    pool: Mutex<HashMap<(String, SocketAddr), reqwest::Client>>,
}

impl Clients {
    /// A pool presenting `identity`.
    pub fn new(identity: Identity) -> Self {
        Clients { identity, pool: Mutex::default() }
    }

    /// The client for an APIService's backend at `endpoint`.
    pub fn client(&self, apiservice: &Value, service: &ServiceRef, endpoint: SocketAddr) -> Result<reqwest::Client, String> {
        let ca = apiservice.pointer("/spec/caBundle").and_then(Value::as_str).unwrap_or_default().to_string();
        let insecure = apiservice.pointer("/spec/insecureSkipTLSVerify") == Some(&Value::Bool(true));
        let key = (format!("{insecure}|{ca}|{}", service.server_name()), endpoint);
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = pool.get(&key) {
            return Ok(client.clone());
        }
        let tls = self.tls(&ca, insecure)?;
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .resolve(&service.server_name(), endpoint)
            .connect_timeout(Duration::from_secs(3))
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|e| e.to_string())?;
        pool.insert(key, client.clone());
        Ok(client)
    }

    fn tls(&self, ca_bundle_b64: &str, insecure: bool) -> Result<rustls::ClientConfig, String> {
        use base64::Engine;
        generic_server::tls::install_crypto_provider();
        let builder = rustls::ClientConfig::builder();
        let builder = if insecure {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAny::default()))
        } else {
            let mut roots = rustls::RootCertStore::empty();
            let pem = base64::engine::general_purpose::STANDARD.decode(ca_bundle_b64).map_err(|e| format!("caBundle: {e}"))?;
            for cert in generic_server::tls::parse_certs(&pem).map_err(|e| format!("caBundle: {e}"))? {
                roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
            }
            builder.with_root_certificates(roots)
        };
        let certs = generic_server::tls::parse_certs(&self.identity.cert).map_err(|e| e.to_string())?;
        let key = rustls_pemfile::private_key(&mut self.identity.key.as_slice())
            .map_err(|e| e.to_string())?
            .ok_or("no front-proxy client key")?;
        let mut config = builder.with_client_auth_cert(certs, key).map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// Accepts any server certificate: only for `insecureSkipTLSVerify: true`.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

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
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
