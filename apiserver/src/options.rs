//! The options every aggregated server takes, with kube's flag names and
//! `KUBECHAIN_*` environment fallbacks.

use std::net::SocketAddr;
use std::path::PathBuf;

use generic_server::config::Logging;
use generic_server::filters::requestheader::RequestHeaderOptions;
use generic_server::tls::TlsFiles;

use crate::{Error, certificates};

/// The options every aggregated server takes, with kube's names; flatten
/// them into your own clap parser.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerOptions {
    /// Address of the HTTPS server.
    #[arg(long, env = "KUBECHAIN_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// HTTP worker threads.
    #[arg(long, env = "KUBECHAIN_WORKERS", default_value_t = 2)]
    pub workers: usize,
    /// Where to serve `/livez`, `/readyz` and `/healthz` over plain HTTP,
    /// for kubelet or docker probes (and `/metrics`, with `--plain-metrics`).
    #[arg(long, env = "KUBECHAIN_METRICS_ADDRESS")]
    pub metrics_address: Option<SocketAddr>,
    /// Also serve `/metrics` on `--metrics-address`, to anyone who reaches
    /// it; without it `/metrics` is served over HTTPS, behind RBAC.
    #[arg(long, env = "KUBECHAIN_PLAIN_METRICS")]
    pub plain_metrics: bool,
    /// The cluster's front door (the aggregator), called with the serving
    /// certificate as this server's identity and verified with
    /// `--client-ca-file`; see `--kubeconfig` for others.
    #[arg(
        long,
        env = "KUBECHAIN_FRONT_DOOR",
        conflicts_with = "kubeconfig",
        requires = "client_ca_file"
    )]
    pub front_door: Option<String>,
    /// A kubeconfig naming the front door and this server's identity (a
    /// client certificate or a token). Without it or `--front-door`, the
    /// in-cluster ServiceAccount is used.
    #[arg(long, env = "KUBECHAIN_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The serving certificate (given or generated) and the cluster CA.
    #[command(flatten)]
    pub tls: ServingOptions,
    /// How the front proxy is trusted (default: as the cluster publishes it).
    #[command(flatten)]
    pub requestheader: RequestHeaderOptions,
    /// How the process logs.
    #[command(flatten)]
    pub logging: Logging,
}

/// How the server serves HTTPS: its certificate, given or generated.
#[derive(clap::Args, Debug, Clone)]
pub struct ServingOptions {
    /// PEM certificate to serve with; without it one is generated in `--cert-dir`.
    #[arg(
        long,
        env = "KUBECHAIN_TLS_CERT_FILE",
        requires = "tls_private_key_file"
    )]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of `--tls-cert-file`.
    #[arg(
        long,
        env = "KUBECHAIN_TLS_PRIVATE_KEY_FILE",
        requires = "tls_cert_file"
    )]
    pub tls_private_key_file: Option<PathBuf>,
    /// Where a generated certificate (`tls.crt`, `tls.key`) and the CA that
    /// signed it (`ca.crt`: what `kubechain register --ca-file` reads) are
    /// kept, and reused while they name the same hosts.
    #[arg(
        long,
        env = "KUBECHAIN_CERT_DIR",
        default_value = "apiserver.local.config/certificates"
    )]
    pub cert_dir: PathBuf,
    /// Host names or IPs the generated certificate is for, besides
    /// `localhost` and `127.0.0.1` (the Service's `<name>.<namespace>.svc`).
    #[arg(long = "tls-san", value_delimiter = ',')]
    pub tls_sans: Vec<String>,
    /// PEM CA whose client certificates authenticate as their subject (the
    /// cluster CA). Without it, the one the cluster publishes in
    /// `kube-system/extension-apiserver-authentication` is followed.
    #[arg(long, env = "KUBECHAIN_CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,
}

impl ServingOptions {
    /// The files of the serving certificate and key: given, or generated.
    pub(crate) fn files(&self) -> (PathBuf, PathBuf) {
        match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => (cert.clone(), key.clone()),
            _ => (self.cert_dir.join("tls.crt"), self.cert_dir.join("tls.key")),
        }
    }

    /// The serving certificate, key and client CA: read, or generated.
    pub(crate) fn load(&self) -> Result<TlsFiles, Error> {
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|source| Error::Setup {
                what: "the TLS files",
                source: generic_server::Error::read(path, source),
            })
        };
        let ca = match &self.client_ca_file {
            Some(path) => read(path)?,
            None => Vec::new(),
        };
        let (cert, key) = match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => (read(cert)?, read(key)?),
            _ => certificates::generated(&self.cert_dir, &self.tls_sans).map_err(|source| {
                Error::Certificates {
                    dir: self.cert_dir.clone(),
                    source,
                }
            })?,
        };
        Ok(TlsFiles { cert, key, ca })
    }
}
