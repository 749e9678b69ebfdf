//! `kubechain up`: a whole local cluster in the foreground.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{SignalKind, signal};

use crate::pki::{self, Pki};
use crate::supervisor::{ChildSpec, Supervisor};

/// Options of `kubechain up`.
#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Where certificates, etcd data, logs and the kubeconfig live.
    #[arg(long, default_value = "./.kubechain")]
    data_dir: PathBuf,
    /// The front door's port.
    #[arg(long, default_value_t = 6443)]
    port: u16,
}

/// The loopback ports of everything behind the front door, kept across
/// restarts when still free.
struct Ports {
    etcd: u16,
    etcd_peer: u16,
    core: u16,
    extension: u16,
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

impl Ports {
    fn load_or_pick(path: &Path) -> Result<Ports> {
        let saved: Value = std::fs::read(path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        let mut taken = Vec::new();
        let mut pick = |name: &str| -> Result<u16> {
            let port = match saved.get(name).and_then(Value::as_u64).map(|p| p as u16) {
                Some(p) if is_free(p) && !taken.contains(&p) => p,
                _ => loop {
                    let p = free_port()?;
                    if !taken.contains(&p) {
                        break p;
                    }
                },
            };
            taken.push(port);
            Ok(port)
        };
        let ports = Ports { etcd: pick("etcd")?, etcd_peer: pick("etcd_peer")?, core: pick("core")?, extension: pick("extension")? };
        let text = json!({"etcd": ports.etcd, "etcd_peer": ports.etcd_peer, "core": ports.core, "extension": ports.extension});
        std::fs::write(path, text.to_string())?;
        Ok(ports)
    }
}

/// A sibling binary of this executable (cargo puts them side by side).
fn sibling(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe.parent().context("executable directory")?.join(name);
    if !path.exists() {
        bail!("{} not found next to {} (build the workspace first: cargo build)", name, exe.display());
    }
    Ok(path)
}

fn spec(name: &str, program: PathBuf, args: Vec<String>) -> ChildSpec {
    ChildSpec { name: name.into(), program, args }
}

fn tls_args(pki: &Pki, component: &str) -> Vec<String> {
    let files = pki.files(component);
    vec![
        "--tls-cert-file".into(),
        files.cert.display().to_string(),
        "--tls-private-key-file".into(),
        files.key.display().to_string(),
        "--client-ca-file".into(),
        pki.ca().display().to_string(),
    ]
}

/// Runs `kubechain up`.
pub async fn up(args: UpArgs) -> Result<()> {
    let started = Instant::now();
    // If whoever started us dies, stop the cluster rather than orphan it.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM);
    std::fs::create_dir_all(&args.data_dir).with_context(|| format!("creating {}", args.data_dir.display()))?;
    let dir = std::fs::canonicalize(&args.data_dir)?;
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let pki = Pki::new(&dir.join("pki"));
    pki.ensure(&[]).context("creating certificates")?;
    if !is_free(args.port) {
        bail!("port {} is in use (another cluster?); choose one with --port", args.port);
    }
    let ports = Ports::load_or_pick(&dir.join("ports.json"))?;
    let etcd_url = format!("http://127.0.0.1:{}", ports.etcd);
    let peer_url = format!("http://127.0.0.1:{}", ports.etcd_peer);

    let mut children = Supervisor::new(&logs);
    let etcd_args = [
        "--name", "default",
        "--data-dir", &dir.join("etcd").display().to_string(),
        "--listen-client-urls", &etcd_url,
        "--advertise-client-urls", &etcd_url,
        "--listen-peer-urls", &peer_url,
        "--initial-advertise-peer-urls", &peer_url,
        "--initial-cluster", &format!("default={peer_url}"),
        "--auto-compaction-mode", "periodic",
        "--auto-compaction-retention", "5m",
        "--quota-backend-bytes", "8589934592",
    ]
    .map(String::from)
    .to_vec();
    let etcd = which("etcd").context("etcd is not installed (apt-get install etcd-server)")?;
    children.spawn(spec("etcd", etcd, etcd_args))?;
    wait_until(&mut children, Duration::from_secs(30), || async { tokio::net::TcpStream::connect(("127.0.0.1", ports.etcd)).await.is_ok() })
        .await
        .context("waiting for etcd")?;

    let etcd_flag = vec!["--etcd-servers".to_string(), etcd_url.clone()];
    let mut extension = vec!["--listen".into(), format!("127.0.0.1:{}", ports.extension)];
    extension.extend(etcd_flag.clone());
    extension.extend(tls_args(&pki, "extension-server"));
    children.spawn(spec("extension-server", sibling("extension-server")?, extension))?;

    let mut core = vec![
        "--listen".into(),
        format!("127.0.0.1:{}", ports.core),
        "--extension-endpoint".into(),
        format!("https://127.0.0.1:{}", ports.extension),
    ];
    core.extend(["--advertise-port".to_string(), args.port.to_string()]);
    core.extend(["--service-account-signing-key-file".to_string(), dir.join("pki/sa.key").display().to_string()]);
    core.extend(etcd_flag.clone());
    core.extend(tls_args(&pki, "core-server"));
    children.spawn(spec("core-server", sibling("core-server")?, core))?;

    let mut aggregator = vec![
        "--listen".into(),
        format!("0.0.0.0:{}", args.port),
        "--core-endpoint".into(),
        format!("https://127.0.0.1:{}", ports.core),
    ];
    aggregator.extend(["--service-account-key-file".to_string(), dir.join("pki/sa.pub").display().to_string()]);
    aggregator.extend(etcd_flag);
    aggregator.extend(tls_args(&pki, "aggregator"));
    children.spawn(spec("aggregator", sibling("aggregator")?, aggregator))?;

    let ca = std::fs::read(pki.ca())?;
    let port = args.port;
    wait_until(&mut children, Duration::from_secs(60), || {
        let ca = ca.clone();
        async move { readyz(port, &ca).await.unwrap_or(false) }
    })
    .await
    .with_context(|| format!("waiting for the cluster to be ready (logs in {})", logs.display()))?;

    let kubeconfig = dir.join("kubeconfig");
    pki::write_kubeconfig(&pki, &format!("https://127.0.0.1:{}", args.port), &kubeconfig)?;
    eprintln!("kubechain: ready in {:.1}s; logs in {}", started.elapsed().as_secs_f64(), logs.display());
    println!("kubechain ready: export KUBECONFIG={}", kubeconfig.display());

    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = tick.tick() => children.restart_exited().await?,
        }
    }
    eprintln!("kubechain: stopping");
    children.stop_all().await;
    Ok(())
}

/// Waits for `ready`, failing early if a child exits.
async fn wait_until<F, Fut>(children: &mut Supervisor, timeout: Duration, ready: F) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if ready().await {
            return Ok(());
        }
        if let Some((name, status)) = children.exited() {
            children.stop_all().await;
            bail!("{name} exited during start-up ({status})");
        }
        if Instant::now() > deadline {
            children.stop_all().await;
            bail!("timed out after {}s", timeout.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether the front door answers `GET /readyz` with 200 over verified TLS.
async fn readyz(port: u16, ca_pem: &[u8]) -> Result<bool> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &ca_pem[..]) {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let mut tls = connector.connect("localhost".try_into()?, tcp).await?;
    tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut response)).await??;
    Ok(response.starts_with(b"HTTP/1.1 200"))
}

/// Finds a program on PATH.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(program)).find(|p| p.is_file())
}
