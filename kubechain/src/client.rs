//! Clients of the front door over HTTPS (reqwest on rustls with ring,
//! authenticated by the client certificate of a kubeconfig) and of raw etcd,
//! for the bench, registration and the launcher.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use reqwest::{Method, StatusCode};

/// Where the front door is and how to prove who we are to it.
pub struct Credentials {
    /// The front door's URL (`https://host:port`).
    pub server: String,
    /// TLS: the cluster CA as the only root, the admin client certificate.
    pub tls: rustls::ClientConfig,
    /// The cluster CA (PEM), for clients that authenticate otherwise.
    pub ca: Vec<u8>,
}

impl Credentials {
    /// Reads the current context of a kubeconfig; `server` overrides its URL.
    pub fn from_kubeconfig(path: &Path, server: Option<&str>) -> Result<Credentials> {
        use apimachinery::kubeconfig::{self, Material};
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let config = kubeconfig::parse(&text, path.parent().unwrap_or(Path::new(".")))
            .with_context(|| format!("parsing {}", path.display()))?;
        let bytes = |material: &Material| match material {
            Material::Inline(bytes) => Ok(bytes.clone()),
            Material::File(file) => {
                std::fs::read(file).with_context(|| format!("reading {}", file.display()))
            }
        };
        let ca = bytes(
            config
                .ca
                .as_ref()
                .context("kubeconfig has no certificate-authority")?,
        )?;
        let (cert, key) = config
            .identity
            .as_ref()
            .context("kubeconfig has no client-certificate (the bench authenticates with a client certificate)")?;
        let (cert, key) = (bytes(cert)?, bytes(key)?);
        Ok(Credentials {
            server: server
                .unwrap_or(&config.server)
                .trim_end_matches('/')
                .to_string(),
            tls: tls_config(&ca, Some((&cert, &key)))?,
            ca,
        })
    }

    /// The same credentials, offering only `http` (by ALPN).
    pub fn over(&self, http: Http) -> Credentials {
        let mut tls = self.tls.clone();
        tls.alpn_protocols = match http {
            Http::Two => vec![b"h2".to_vec()],
            Http::One => vec![b"http/1.1".to_vec()],
        };
        Credentials {
            server: self.server.clone(),
            tls,
            ca: self.ca.clone(),
        }
    }

    /// A client that presents no certificate and authenticates with a bearer token.
    pub fn bearer(&self, token: &str) -> Result<Api> {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))?,
        );
        Credentials {
            server: self.server.clone(),
            tls: tls_config(&self.ca, None)?,
            ca: self.ca.clone(),
        }
        .api_with_headers(headers)
    }

    /// A client with its own connection (HTTP/2 when the server offers it).
    pub fn api(&self) -> Result<Api> {
        self.api_with_headers(reqwest::header::HeaderMap::new())
    }

    /// The same credentials for another front door of the cluster.
    pub fn at(&self, server: &str) -> Credentials {
        Credentials {
            server: server.to_string(),
            tls: self.tls.clone(),
            ca: self.ca.clone(),
        }
    }

    /// A client sending `headers` with every request.
    pub fn api_with_headers(&self, headers: reqwest::header::HeaderMap) -> Result<Api> {
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .tls_backend_preconfigured(self.tls.clone())
            .pool_max_idle_per_host(usize::MAX)
            .build()
            .context("building the HTTPS client")?;
        Ok(Api {
            base: self.server.clone(),
            http,
        })
    }
}

/// An HTTP version a client may be held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Http {
    /// HTTP/1.1 (the Python client's and most scripts').
    One,
    /// HTTP/2 (kubectl's and client-go's).
    Two,
}

impl Http {
    /// Its name, as people write it.
    pub fn name(self) -> &'static str {
        match self {
            Http::One => "HTTP/1.1",
            Http::Two => "HTTP/2",
        }
    }
}

/// A rustls client configuration (ring) trusting only `ca`, presenting the
/// certificate and key of `identity` (PEM) if there is one.
pub fn tls_config(ca: &[u8], identity: Option<(&[u8], &[u8])>) -> Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &ca[..]) {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let mut config = match identity {
        Some((cert, key)) => {
            let chain = rustls_pemfile::certs(&mut &cert[..]).collect::<Result<Vec<_>, _>>()?;
            let key = rustls_pemfile::private_key(&mut &key[..])?.context("no private key")?;
            builder.with_client_auth_cert(chain, key)?
        }
        None => builder.with_no_client_auth(),
    };
    // reqwest leaves a preconfigured TLS setup as it is: offer HTTP/2 here.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The front door, through one client.
#[derive(Clone)]
pub struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    /// Sends a request; any status other than `expect` is an error that
    /// quotes the response.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        expect: StatusCode,
    ) -> Result<Bytes> {
        let response = self.send(method.clone(), path, body).await?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .with_context(|| format!("{method} {path}: reading the body"))?;
        if status != expect {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
            bail!("{method} {path}: {status} (wanted {expect}): {text}");
        }
        Ok(bytes)
    }

    /// Sends a request and returns the response as it arrives (for watches).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<reqwest::Response> {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .header("Accept", "application/json");
        if let Some(body) = body {
            request = request
                .header("Content-Type", "application/json")
                .body(body);
        }
        request
            .send()
            .await
            .with_context(|| format!("{method} {path}"))
    }

    /// GETs `path` accepting `accept`, expecting 200.
    pub async fn get_as(&self, path: &str, accept: &str) -> Result<Bytes> {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .header("Accept", accept)
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        let status = response.status();
        let bytes = response.bytes().await?;
        if status != StatusCode::OK {
            bail!("GET {path}: {status}");
        }
        Ok(bytes)
    }

    /// The HTTP version the front door speaks to this client.
    pub async fn http_version(&self) -> Result<String> {
        Ok(format!(
            "{:?}",
            self.send(Method::GET, "/version", None).await?.version()
        ))
    }
}

/// A raw etcd KV client on its own connection (over `tls` if given),
/// allowed large ranges.
pub async fn etcd(
    endpoint: &str,
    tls: Option<etcd_client::TlsOptions>,
) -> Result<etcd_client::KvClient> {
    let options = tls.map(|tls| etcd_client::ConnectOptions::new().with_tls(tls));
    let client = etcd_client::Client::connect([endpoint], options)
        .await
        .with_context(|| format!("connecting to etcd at {endpoint}"))?;
    Ok(client.kv_client().max_decoding_message_size(256 << 20))
}
