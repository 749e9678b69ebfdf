//! The cluster under test: one the bench starts (as `kubechain up` would,
//! and stops afterwards) or an existing one given by URL and kubeconfig.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use super::BenchArgs;
use crate::client::Credentials;
use crate::pki::Pki;
use crate::up::{self, UpArgs};

/// The processes whose memory the bench reports.
pub const SERVERS: &[&str] = &["aggregator", "core-server", "extension-server", "etcd"];
/// The bench's second front door, which audits every request (a link to
/// the aggregator's binary under this name, so its CPU is told apart).
pub const AUDITED: &str = "aggregator-audited";
/// The aggregated server the bench measures: the wardle sample.
pub const AGGREGATED: &str = "wardle-server";
/// The audit policy of [`AUDITED`]: every request at Metadata level.
const METADATA_POLICY: &str =
    "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n";

/// The cluster under test.
pub struct Target {
    /// How to reach the front door.
    pub credentials: Credentials,
    /// etcd's client URL.
    pub etcd: String,
    /// The TLS of an `https://` etcd: the cluster's internal CA and a client certificate.
    pub etcd_tls: Option<etcd_client::TlsOptions>,
    /// The admin kubeconfig (for kubectl).
    pub kubeconfig: PathBuf,
    /// Whether the bench started the cluster (and so knows its processes).
    started: Option<Started>,
    /// For `--target`: the kubeconfig's directory, which the command lines
    /// of a `kubechain up` cluster's processes name.
    cluster_dir: Option<String>,
}

struct Started {
    cluster: up::Cluster,
    /// A data directory the bench made, removed when it is done.
    temporary: bool,
}

impl Target {
    /// Starts a cluster, or describes the one `--target` names.
    pub async fn open(args: &BenchArgs) -> Result<Target> {
        if let Some(url) = &args.target {
            let kubeconfig = args
                .kubeconfig
                .clone()
                .or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from))
                .context("--target needs --kubeconfig")?;
            let credentials = Credentials::from_kubeconfig(&kubeconfig, Some(url))?;
            let etcd = match &args.etcd_endpoint {
                Some(e) => e.clone(),
                None => etcd_from_ports_file(&kubeconfig)
                    .unwrap_or_else(|| "https://127.0.0.1:2379".to_string()),
            };
            let etcd_tls = if etcd.starts_with("http://") {
                None
            } else {
                let pki = kubeconfig.parent().unwrap_or(Path::new(".")).join("pki");
                Some(Pki::new(&pki).etcd_client_tls().with_context(|| {
                    format!(
                        "etcd at {etcd} needs the cluster's certificates in {}",
                        pki.display()
                    )
                })?)
            };
            let cluster_dir = std::fs::canonicalize(&kubeconfig)
                .ok()
                .and_then(|k| Some(k.parent()?.display().to_string()));
            return Ok(Target {
                credentials,
                etcd,
                etcd_tls,
                kubeconfig,
                started: None,
                cluster_dir,
            });
        }
        let temporary = args.data_dir.is_none();
        let data_dir = args.data_dir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("kubechain-bench-{}", std::process::id()))
        });
        let port = match args.port {
            Some(p) => p,
            None => TcpListener::bind("127.0.0.1:0")?.local_addr()?.port(),
        };
        let up_args = UpArgs {
            data_dir,
            port,
            core_replicas: 1,
            extension_replicas: 1,
            aggregator_replicas: 1,
            log_format: "text".into(),
            audit_policy_file: None,
            audit_log_path: None,
        };
        let cluster = up::start(&up_args).await.context("starting a cluster")?;
        let credentials = Credentials::from_kubeconfig(&cluster.kubeconfig, None)?;
        let etcd = cluster.etcd_url.clone();
        let etcd_tls = Some(cluster.pki.etcd_client_tls()?);
        Ok(Target {
            credentials,
            etcd,
            etcd_tls,
            kubeconfig: cluster.kubeconfig.clone(),
            started: Some(Started { cluster, temporary }),
            cluster_dir: None,
        })
    }

    /// Whether this run owns the cluster (and may simply throw it away).
    pub fn is_disposable(&self) -> bool {
        self.started.as_ref().is_some_and(|s| s.temporary)
    }

    /// The cluster's data directory (`pki/`, `ports.json`), when known.
    pub fn dir(&self) -> Option<PathBuf> {
        match &self.started {
            Some(started) => Some(started.cluster.dir.clone()),
            None => self.cluster_dir.as_ref().map(PathBuf::from),
        }
    }

    /// Where the started cluster's logs are.
    pub fn logs(&self) -> Option<&Path> {
        self.started.as_ref().map(|s| s.cluster.logs.as_path())
    }

    /// Starts a second front door on a cluster the bench started, beside
    /// the first and like it but auditing every request at Metadata level
    /// to a file; its URL (`None` for `--target`).
    pub async fn start_audited_front_door(&mut self) -> Result<Option<String>> {
        let Some(started) = self.started.as_mut() else {
            return Ok(None);
        };
        let cluster = &mut started.cluster;
        let mut spec = cluster
            .children
            .spec("aggregator")
            .context("the aggregator's command line")?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if let Some(at) = spec.args.iter().position(|a| a == "--listen") {
            spec.args[at + 1] = format!("127.0.0.1:{port}");
        }
        let policy = cluster.dir.join("bench-audit-policy.yaml");
        std::fs::write(&policy, METADATA_POLICY)?;
        let log = cluster.logs.join("bench-audit.log");
        spec.args.extend([
            "--audit-policy-file".to_string(),
            policy.display().to_string(),
            "--audit-log-path".to_string(),
            log.display().to_string(),
        ]);
        let link = cluster.dir.join(AUDITED);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&spec.program, &link)?;
        spec.program = link;
        spec.name = AUDITED.to_string();
        cluster.children.spawn(spec)?;
        let ca = std::fs::read(cluster.pki.ca())?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !up::readyz(port, &ca).await.unwrap_or(false) {
            if let Some((name, status)) = cluster.children.exited() {
                anyhow::bail!(
                    "{name} exited ({status}); its log is in {}",
                    cluster.logs.display()
                );
            }
            if std::time::Instant::now() > deadline {
                anyhow::bail!("the audited front door was not ready within 30 s");
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        Ok(Some(format!("https://127.0.0.1:{port}")))
    }

    /// Starts the aggregated server the bench measures (the wardle
    /// sample, found next to this program) as a child of a cluster the
    /// bench started, with `args`; false for `--target` or without the
    /// program.
    pub fn start_aggregated(&mut self, args: Vec<String>) -> Result<bool> {
        let Some(started) = self.started.as_mut() else {
            return Ok(false);
        };
        let program = std::env::current_exe()?.with_file_name(AGGREGATED);
        if !program.exists() {
            eprintln!(
                "bench: no {} next to this program: no aggregated server rows",
                program.display()
            );
            return Ok(false);
        }
        started
            .cluster
            .children
            .spawn(crate::supervisor::ChildSpec {
                name: AGGREGATED.to_string(),
                program,
                args,
            })?;
        Ok(true)
    }

    /// The process of each server, by name; `Err` says why it is unknown.
    /// The audited front door and the aggregated server are among them
    /// once they run.
    pub fn pids(&self) -> Vec<(&'static str, Result<u32, String>)> {
        let children = own_children();
        let running = |name: &&&str| {
            self.started.is_some() && children.iter().any(|(child, _)| child == **name)
        };
        let extra = [AUDITED, AGGREGATED];
        let names = SERVERS.iter().chain(extra.iter().filter(running));
        names
            .map(|name| {
                let pid = match &self.started {
                    Some(_) => children
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, pid)| *pid)
                        .ok_or_else(|| "not running".to_string()),
                    None => by_name(name, self.cluster_dir.as_deref()),
                };
                (*name, pid)
            })
            .collect()
    }

    /// The process of the server `name`, if known.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.pids().into_iter().find(|(n, _)| *n == name)?.1.ok()
    }

    /// The resident bytes of the server `name`, if known.
    pub fn rss(&self, name: &str) -> Option<u64> {
        memory(self.pid(name)?).map(|(rss, _)| rss)
    }

    /// Whether a started server has exited (it would have been restarted by
    /// `kubechain up`; in a bench it is an error).
    pub fn exited(&mut self) -> Option<String> {
        let started = self.started.as_mut()?;
        started
            .cluster
            .children
            .exited()
            .map(|(name, status)| format!("{name} exited during the bench ({status})"))
    }

    /// Kills a server of a cluster the bench started and starts it again, as
    /// `kubechain up` would after a crash; false for `--target`.
    pub async fn restart(&mut self, name: &str) -> Result<bool> {
        let Some(started) = self.started.as_mut() else {
            return Ok(false);
        };
        let pid = own_children()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, pid)| pid)
            .with_context(|| format!("{name} is not running"))?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )?;
        while started.cluster.children.exited().is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        started.cluster.children.restart_exited().await?;
        Ok(true)
    }

    /// Stops a started cluster; removes its data directory if the bench made it.
    pub async fn close(mut self) {
        if let Some(mut started) = self.started.take() {
            started.cluster.children.stop_all().await;
            if started.temporary {
                let _ = std::fs::remove_dir_all(&started.cluster.dir);
            }
        }
    }
}

/// `kubechain up` keeps `ports.json` beside the kubeconfig: etcd's port is there.
fn etcd_from_ports_file(kubeconfig: &Path) -> Option<String> {
    let ports: Value =
        serde_json::from_slice(&std::fs::read(kubeconfig.parent()?.join("ports.json")).ok()?)
            .ok()?;
    Some(format!("https://127.0.0.1:{}", ports["etcd"].as_u64()?))
}

/// This process's children: (program name, pid).
fn own_children() -> Vec<(String, u32)> {
    let tasks = std::fs::read_dir("/proc/self/task")
        .map(|d| d.flatten().collect::<Vec<_>>())
        .unwrap_or_default();
    tasks
        .iter()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .filter_map(|pid| Some((program_name(pid)?, pid)))
        .collect()
}

fn program_name(pid: u32) -> Option<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let argv0 = cmdline.split(|b| *b == 0).next()?;
    Some(
        Path::new(std::str::from_utf8(argv0).ok()?)
            .file_name()?
            .to_str()?
            .to_string(),
    )
}

/// The one process on this machine whose program is `name` (what `pgrep`
/// would find, without its 15-character limit on names); among several,
/// the one whose command line names `dir`.
fn by_name(name: &str, dir: Option<&str>) -> Result<u32, String> {
    let entries = std::fs::read_dir("/proc").map_err(|e| format!("reading /proc: {e}"))?;
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| program_name(*pid).as_deref() == Some(name))
        .collect();
    if let (true, Some(dir)) = (pids.len() > 1, dir) {
        let names_dir = |pid: &u32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&format!("{dir}/")))
        };
        pids.retain(names_dir);
    }
    match pids.as_slice() {
        [pid] => Ok(*pid),
        [] => Err("no such process on this machine".into()),
        many => Err(format!("{} processes named {name}", many.len())),
    }
}

/// Resident memory of a process, now and at its peak, in bytes.
pub fn memory(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// CPU time (user + system) a process has used; `None` for this process.
pub fn cpu_time(pid: Option<u32>) -> Option<std::time::Duration> {
    let path = pid.map_or_else(
        || "/proc/self/stat".to_string(),
        |pid| format!("/proc/{pid}/stat"),
    );
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the command name (which may hold spaces): state is the
    // 3rd field of the whole line, utime the 14th, stime the 15th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // /proc counts in USER_HZ, 100 on Linux.
    Some(std::time::Duration::from_millis(ticks * 10))
}
