//! Reaching a server behind a Service (an aggregated API server, a
//! conversion webhook): the Service resolved to ready endpoints through its
//! EndpointSlices (there is no cluster network), and HTTPS clients that
//! verify the server as `<service>.<namespace>.svc` by a caBundle and may
//! present a client certificate.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::error::{Reason, Result as ApiResult};

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
        let base = if info.api_group.is_empty() {
            format!("{}/{}/", self.root, info.resource)
        } else {
            format!("{}/{}/{}/", self.root, info.api_group, info.resource)
        };
        match (info.namespace.is_empty(), info.name.is_empty()) {
            (false, false) => format!("{base}{}/{}", info.namespace, info.name),
            (false, true) => format!("{base}{}/", info.namespace),
            (true, false) => format!("{base}{}", info.name),
            (true, true) => base,
        }
    }
}

#[async_trait::async_trait]
impl ObjectReader for StorageReader {
    async fn get(&self, path: &str) -> ApiResult<Value> {
        let key = self.key(path);
        let unavailable =
            |e: crate::storage::StorageError| crate::error::Error::unavailable(e.to_string());
        match self.storage.get(&key).await.map_err(unavailable)? {
            Some(kv) => serde_json::from_slice(&kv.value).map_err(crate::error::Error::internal),
            None => Err(crate::error::Error::new(
                Reason::NotFound,
                format!("{path} not found"),
            )),
        }
    }

    async fn list(&self, path: &str, label_selector: &str) -> ApiResult<Vec<Value>> {
        let prefix = self.key(path);
        let selector = crate::label_selector::LabelSelector::parse(label_selector)
            .map_err(|e| crate::error::Error::bad_request(e.to_string()))?;
        let page = self
            .storage
            .range(&prefix, &crate::storage::prefix_end(&prefix), 0, 0)
            .await
            .map_err(|e| crate::error::Error::unavailable(e.to_string()))?;
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
    ) -> Result<reqwest::Client, String> {
        self.client_for(ca_bundle, insecure, &service.server_name(), endpoint)
    }

    /// The client for a server verified as `server_name` at `endpoint`.
    pub fn client_for(
        &self,
        ca_bundle: &str,
        insecure: bool,
        server_name: &str,
        endpoint: SocketAddr,
    ) -> Result<reqwest::Client, String> {
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
            .map_err(|e| e.to_string())?;
        pool.insert(key, client.clone());
        Ok(client)
    }

    fn tls(&self, ca_bundle_b64: &str, insecure: bool) -> Result<rustls::ClientConfig, String> {
        use base64::Engine;
        crate::tls::install_crypto_provider();
        let builder = rustls::ClientConfig::builder();
        let builder = if insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAny::default()))
        } else {
            let mut roots = rustls::RootCertStore::empty();
            let pem = base64::engine::general_purpose::STANDARD
                .decode(ca_bundle_b64)
                .map_err(|e| format!("caBundle: {e}"))?;
            for cert in crate::tls::parse_certs(&pem).map_err(|e| format!("caBundle: {e}"))? {
                roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
            }
            builder.with_root_certificates(roots)
        };
        let mut config = match &self.identity {
            Some(identity) => {
                let certs = crate::tls::parse_certs(&identity.cert).map_err(|e| e.to_string())?;
                let key = rustls_pemfile::private_key(&mut identity.key.as_slice())
                    .map_err(|e| e.to_string())?
                    .ok_or("no client key")?;
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| e.to_string())?
            }
            None => builder.with_no_client_auth(),
        };
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
