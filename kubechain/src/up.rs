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
    pub data_dir: PathBuf,
    /// The front door's port (extra aggregators take the next ports).
    #[arg(long, default_value_t = 6443)]
    pub port: u16,
    /// How many core servers to run.
    #[arg(long, default_value_t = 1)]
    pub core_replicas: usize,
    /// How many extension servers to run.
    #[arg(long, default_value_t = 1)]
    pub extension_replicas: usize,
    /// How many aggregators to run.
    #[arg(long, default_value_t = 1)]
    pub aggregator_replicas: usize,
    /// The servers' log format: `text`, or `json` (one object per line).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// An audit.k8s.io/v1 Policy for the aggregators (kube-apiserver's flag).
    #[arg(long)]
    pub audit_policy_file: Option<PathBuf>,
    /// Where the aggregators write audit events as JSON lines (`-`: their
    /// standard output, which is their log); a second aggregator writes
    /// `<name>-2.<ext>`, and so on.
    #[arg(long)]
    pub audit_log_path: Option<PathBuf>,
}

/// The aggregator flags of the audit options, for replica `index`.
fn audit_args(args: &UpArgs, index: usize) -> Result<Vec<String>> {
    let mut flags = Vec::new();
    if let Some(policy) = &args.audit_policy_file {
        let policy = std::fs::canonicalize(policy)
            .with_context(|| format!("the audit policy {}", policy.display()))?;
        // Refused here, rather than by aggregators failing to start.
        let text = std::fs::read_to_string(&policy)
            .with_context(|| format!("reading {}", policy.display()))?;
        apimachinery::audit::Policy::parse(&text)
            .with_context(|| format!("loading {}", policy.display()))?;
        flags.extend([
            "--audit-policy-file".to_string(),
            policy.display().to_string(),
        ]);
    }
    if let Some(path) = &args.audit_log_path {
        let path = if path.as_os_str() == "-" {
            path.clone()
        } else {
            let absolute = std::path::absolute(path)?;
            if index == 0 {
                absolute
            } else {
                let stem = absolute
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let ext = absolute
                    .extension()
                    .map(|e| format!(".{}", e.to_string_lossy()))
                    .unwrap_or_default();
                absolute.with_file_name(format!("{stem}-{}{ext}", index + 1))
            }
        };
        flags.extend(["--audit-log-path".to_string(), path.display().to_string()]);
    }
    Ok(flags)
}

/// A cluster started by [`start`]: its processes and where to reach it.
pub struct Cluster {
    /// The data directory (absolute).
    pub dir: PathBuf,
    /// The directory of the processes' logs.
    pub logs: PathBuf,
    /// The admin kubeconfig of the first front door.
    pub kubeconfig: PathBuf,
    /// etcd's client URL (`https://`; see [`Pki::etcd_client_tls`]).
    pub etcd_url: String,
    /// The cluster's certificates.
    pub pki: Pki,
    /// The running processes.
    pub children: Supervisor,
}

/// The loopback ports of everything behind the front door, kept across
/// restarts when still free.
struct Ports {
    etcd: u16,
    etcd_peer: u16,
    metrics: u16,
    core: Vec<u16>,
    extension: Vec<u16>,
    /// Each core-server replica's plain-HTTP health port.
    core_metrics: Vec<u16>,
    /// Each extension-server replica's plain-HTTP health port.
    extension_metrics: Vec<u16>,
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

impl Ports {
    fn load_or_pick(path: &Path, cores: usize, extensions: usize) -> Result<Ports> {
        let saved: Value = std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
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
        let etcd = pick("etcd")?;
        let etcd_peer = pick("etcd_peer")?;
        let metrics = pick("metrics")?;
        let core = (0..cores)
            .map(|i| pick(&format!("core-{i}")))
            .collect::<Result<Vec<_>>>()?;
        let extension = (0..extensions)
            .map(|i| pick(&format!("extension-{i}")))
            .collect::<Result<Vec<_>>>()?;
        let core_metrics = (0..cores)
            .map(|i| pick(&format!("core-metrics-{i}")))
            .collect::<Result<Vec<_>>>()?;
        let extension_metrics = (0..extensions)
            .map(|i| pick(&format!("extension-metrics-{i}")))
            .collect::<Result<Vec<_>>>()?;
        let ports = Ports {
            etcd,
            etcd_peer,
            metrics,
            core,
            extension,
            core_metrics,
            extension_metrics,
        };
        let mut text =
            json!({"etcd": ports.etcd, "etcd_peer": ports.etcd_peer, "metrics": ports.metrics});
        for (i, p) in ports.core.iter().enumerate() {
            text[format!("core-{i}")] = json!(p);
        }
        for (i, p) in ports.extension.iter().enumerate() {
            text[format!("extension-{i}")] = json!(p);
        }
        for (i, p) in ports.core_metrics.iter().enumerate() {
            text[format!("core-metrics-{i}")] = json!(p);
        }
        for (i, p) in ports.extension_metrics.iter().enumerate() {
            text[format!("extension-metrics-{i}")] = json!(p);
        }
        std::fs::write(path, text.to_string())?;
        Ok(ports)
    }
}

/// The supervisor's name of a replica: `core-server`, then `core-server-2`, ...
fn replica_name(component: &str, index: usize) -> String {
    if index == 0 {
        component.to_string()
    } else {
        format!("{component}-{}", index + 1)
    }
}

/// A sibling binary of this executable (cargo puts them side by side).
fn sibling(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe.parent().context("executable directory")?.join(name);
    if !path.exists() {
        bail!(
            "{} not found next to {} (build the workspace first: cargo build)",
            name,
            exe.display()
        );
    }
    Ok(path)
}

fn spec(name: &str, program: PathBuf, args: Vec<String>) -> ChildSpec {
    ChildSpec {
        name: name.into(),
        program,
        args,
    }
}

/// The flags of a server's listener: its certificate, and the CA that
/// verifies its clients (the internal one for a link of the chain).
fn tls_args(pki: &Pki, component: &str, client_ca: &Path) -> Vec<String> {
    let files = pki.files(component);
    vec![
        "--tls-cert-file".into(),
        files.cert.display().to_string(),
        "--tls-private-key-file".into(),
        files.key.display().to_string(),
        "--client-ca-file".into(),
        client_ca.display().to_string(),
    ]
}

/// The flags of a user-facing server's internal links (etcd, the next
/// server): its `<component>-internal` certificate and the internal CA.
fn internal_args(pki: &Pki, component: &str) -> Vec<String> {
    let files = pki.files(&format!("{component}-internal"));
    vec![
        "--internal-cert-file".into(),
        files.cert.display().to_string(),
        "--internal-key-file".into(),
        files.key.display().to_string(),
        "--internal-ca-file".into(),
        pki.internal_ca().display().to_string(),
    ]
}

/// etcd's flags for TLS: clients and peers present a certificate of the
/// internal CA, as etcd's own certificate is.
fn etcd_tls_args(pki: &Pki) -> Vec<String> {
    let files = pki.files("etcd");
    let (cert, key, ca) = (
        files.cert.display().to_string(),
        files.key.display().to_string(),
        pki.internal_ca().display().to_string(),
    );
    [
        "--cert-file",
        &cert,
        "--key-file",
        &key,
        "--trusted-ca-file",
        &ca,
        "--client-cert-auth",
        "--peer-cert-file",
        &cert,
        "--peer-key-file",
        &key,
        "--peer-trusted-ca-file",
        &ca,
        "--peer-client-cert-auth",
    ]
    .map(String::from)
    .to_vec()
}

/// Runs `kubechain up`.
pub async fn up(args: UpArgs) -> Result<()> {
    let started = Instant::now();
    // If whoever started us dies, stop the cluster rather than orphan it.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM);
    let Cluster {
        logs,
        kubeconfig,
        mut children,
        ..
    } = start(&args).await?;
    eprintln!(
        "kubechain: ready in {:.1}s; logs in {}",
        started.elapsed().as_secs_f64(),
        logs.display()
    );
    println!(
        "kubechain ready: export KUBECONFIG={}",
        kubeconfig.display()
    );

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

/// Starts etcd and every server as child processes and waits until each
/// front door is ready; writes the kubeconfigs. The caller supervises and
/// stops the returned children.
pub async fn start(args: &UpArgs) -> Result<Cluster> {
    // A bad audit policy stops `up` before anything starts.
    audit_args(args, 0)?;
    crate::pki::private_dir(&args.data_dir)?;
    let dir = std::fs::canonicalize(&args.data_dir)?;
    let logs = dir.join("logs");
    crate::pki::private_dir(&logs)?;
    let pki = Pki::new(&dir.join("pki"));
    pki.ensure(&[], &["etcd".into()], &[])
        .context("creating certificates")?;
    let front_ports: Vec<u16> = (0..args.aggregator_replicas.max(1))
        .map(|i| args.port + i as u16)
        .collect();
    if let Some(busy) = front_ports.iter().find(|p| !is_free(**p)) {
        bail!("port {busy} is in use (another cluster?); choose one with --port");
    }
    let ports = Ports::load_or_pick(
        &dir.join("ports.json"),
        args.core_replicas.max(1),
        args.extension_replicas.max(1),
    )?;
    let etcd_url = format!("https://127.0.0.1:{}", ports.etcd);
    let peer_url = format!("https://127.0.0.1:{}", ports.etcd_peer);

    let mut children = Supervisor::new(&logs);
    let mut etcd_args = [
        "--name",
        "default",
        "--data-dir",
        &dir.join("etcd").display().to_string(),
        "--listen-client-urls",
        &etcd_url,
        "--advertise-client-urls",
        &etcd_url,
        "--listen-peer-urls",
        &peer_url,
        "--initial-advertise-peer-urls",
        &peer_url,
        "--initial-cluster",
        &format!("default={peer_url}"),
        "--auto-compaction-mode",
        "periodic",
        "--auto-compaction-retention",
        "5m",
        "--quota-backend-bytes",
        "8589934592",
    ]
    .map(String::from)
    .to_vec();
    etcd_args.extend(etcd_tls_args(&pki));
    let etcd = which("etcd").context("etcd is not installed (apt-get install etcd-server)")?;
    children.spawn(spec("etcd", etcd, etcd_args))?;
    wait_until(&mut children, Duration::from_secs(30), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", ports.etcd))
            .await
            .is_ok()
    })
    .await
    .context("waiting for etcd")?;

    let etcd_flag = vec!["--etcd-servers".to_string(), etcd_url.clone()];
    let logging = vec!["--log-format".to_string(), args.log_format.clone()];
    // Every server that reads objects from etcd decrypts with the same keys.
    let storage_flags = [
        etcd_flag.clone(),
        vec![
            "--encryption-provider-config".to_string(),
            pki.encryption_config().display().to_string(),
        ],
    ]
    .concat();
    // The servers behind the front door take delegated requests on Unix
    // sockets too: on one host, no TCP or TLS on the way (their TCP ports
    // stay, with mutual TLS, for callers elsewhere).
    let run = dir.join("run");
    let socket = |component: &str, i: usize| {
        run.join(format!("{}.sock", replica_name(component, i)))
            .display()
            .to_string()
    };
    let sockets = |component: &str, replicas: usize| {
        (0..replicas)
            .map(|i| {
                format!(
                    "{}{}",
                    apimachinery::keys::UNIX_SCHEME,
                    socket(component, i)
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    for (i, port) in ports.extension.iter().enumerate() {
        let mut extension = vec![
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--grpc-socket".into(),
            socket("extension-server", i),
            "--metrics-address".into(),
            format!("127.0.0.1:{}", ports.extension_metrics[i]),
        ];
        extension.extend(storage_flags.clone());
        extension.extend(tls_args(&pki, "extension-server", &pki.internal_ca()));
        extension.extend(logging.clone());
        children.spawn(spec(
            &replica_name("extension-server", i),
            sibling("extension-server")?,
            extension,
        ))?;
    }
    for (i, port) in ports.core.iter().enumerate() {
        let mut core = vec![
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--grpc-socket".into(),
            socket("core-server", i),
            "--extension-endpoint".into(),
            sockets("extension-server", ports.extension.len()),
            "--metrics-address".into(),
            format!("127.0.0.1:{}", ports.core_metrics[i]),
        ];
        core.extend(["--advertise-port".to_string(), args.port.to_string()]);
        core.extend([
            "--service-account-signing-key-file".to_string(),
            pki.path("sa.key").display().to_string(),
            // What pods verify the front door with: the user-facing CA
            // (kubeconfig's certificate-authority-data), published in
            // every namespace's kube-root-ca.crt.
            "--root-ca-file".to_string(),
            pki.ca().display().to_string(),
        ]);
        core.extend(storage_flags.clone());
        core.extend(tls_args(&pki, "core-server", &pki.internal_ca()));
        core.extend(logging.clone());
        children.spawn(spec(
            &replica_name("core-server", i),
            sibling("core-server")?,
            core,
        ))?;
    }
    for (i, port) in front_ports.iter().enumerate() {
        let mut aggregator = vec![
            "--listen".into(),
            format!("0.0.0.0:{port}"),
            "--core-endpoint".into(),
            sockets("core-server", ports.core.len()),
        ];
        aggregator.extend([
            "--service-account-key-file".to_string(),
            pki.path("sa.pub").display().to_string(),
        ]);
        for (flag, file) in [
            ("--proxy-client-cert-file", "front-proxy-client.crt"),
            ("--proxy-client-key-file", "front-proxy-client.key"),
            ("--requestheader-client-ca-file", "front-proxy-ca.crt"),
        ] {
            aggregator.extend([flag.to_string(), pki.path(file).display().to_string()]);
        }
        aggregator.extend(storage_flags.clone());
        aggregator.extend(tls_args(&pki, "aggregator", &pki.ca()));
        aggregator.extend(internal_args(&pki, "aggregator"));
        aggregator.extend(logging.clone());
        aggregator.extend(audit_args(args, i)?);
        children.spawn(spec(
            &replica_name("aggregator", i),
            sibling("aggregator")?,
            aggregator,
        ))?;
    }

    let node = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
        .to_lowercase();
    let mut metrics = vec![
        "--listen".into(),
        format!("127.0.0.1:{}", ports.metrics),
        "--node-name".into(),
        node.clone(),
    ];
    // An aggregated server talks only to the front door.
    metrics.extend([
        "--front-door".to_string(),
        format!("https://127.0.0.1:{}", args.port),
    ]);
    // It follows the front proxy's CA and names the aggregator publishes in
    // kube-system/extension-apiserver-authentication, as stock ones do.
    metrics.extend(tls_args(&pki, "metrics-server", &pki.ca()));
    metrics.extend(logging);
    children.spawn(spec("metrics-server", sibling("metrics-server")?, metrics))?;

    let ca = std::fs::read(pki.ca())?;
    for port in &front_ports {
        let port = *port;
        wait_until(&mut children, Duration::from_secs(60), || {
            let ca = ca.clone();
            async move { readyz(port, &ca).await.unwrap_or(false) }
        })
        .await
        .with_context(|| {
            format!(
                "waiting for the cluster to be ready (logs in {})",
                logs.display()
            )
        })?;
    }
    crate::bootstrap::register(
        &pki,
        &format!("https://127.0.0.1:{}", args.port),
        &node,
        &[([127, 0, 0, 1], ports.metrics).into()],
    )
    .await
    .context("registering the host and metrics-server")?;
    let kubeconfig = dir.join("kubeconfig");
    for (i, port) in front_ports.iter().enumerate() {
        let path = if i == 0 {
            kubeconfig.clone()
        } else {
            dir.join(format!("kubeconfig-{}", i + 1))
        };
        pki::write_kubeconfig(&pki, &format!("https://127.0.0.1:{port}"), &path)?;
    }
    Ok(Cluster {
        dir,
        logs,
        kubeconfig,
        etcd_url,
        pki,
        children,
    })
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
pub async fn readyz(port: u16, ca_pem: &[u8]) -> Result<bool> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &ca_pem[..]) {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let mut tls = connector.connect("localhost".try_into()?, tcp).await?;
    tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut response)).await??;
    Ok(response.starts_with(b"HTTP/1.1 200"))
}

/// Finds a program on PATH.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(policy: Option<PathBuf>, log: Option<&str>) -> UpArgs {
        UpArgs {
            data_dir: PathBuf::from("/tmp/x"),
            port: 6443,
            core_replicas: 1,
            extension_replicas: 1,
            aggregator_replicas: 2,
            log_format: "text".into(),
            audit_policy_file: policy,
            audit_log_path: log.map(PathBuf::from),
        }
    }

    #[test]
    fn each_aggregator_gets_the_policy_and_a_log_of_its_own() {
        let dir = std::env::temp_dir().join(format!("up-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let policy = dir.join("policy.yaml");
        std::fs::write(&policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\n").unwrap();
        let first = audit_args(&args(Some(policy.clone()), Some("/var/log/audit.log")), 0).unwrap();
        assert_eq!(first[0], "--audit-policy-file");
        assert_eq!(first[2..], ["--audit-log-path", "/var/log/audit.log"]);
        let second = audit_args(&args(None, Some("/var/log/audit.log")), 1).unwrap();
        assert_eq!(second, ["--audit-log-path", "/var/log/audit-2.log"]);
        assert_eq!(
            audit_args(&args(None, Some("-")), 1).unwrap(),
            ["--audit-log-path", "-"]
        );
        assert!(audit_args(&args(None, None), 0).unwrap().is_empty());
        std::fs::write(&policy, "kind: Policy\n").unwrap();
        let err = format!(
            "{:#}",
            audit_args(&args(Some(policy), None), 0).unwrap_err()
        );
        assert!(
            err.contains("policy.yaml") && err.contains("group version"),
            "{err}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
