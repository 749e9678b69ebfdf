//! Child processes: started with their output in a log file, restarted when
//! they die, stopped in reverse order on shutdown.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// How to start one child.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// Its name, also the log file's.
    pub name: String,
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
}

struct Running {
    spec: ChildSpec,
    child: Child,
    started: Instant,
}

/// The launcher's children.
pub struct Supervisor {
    logs: PathBuf,
    children: Vec<Running>,
}

/// glibc malloc settings for the children (unless `GLIBC_TUNABLES` is set):
/// a LIST's megabyte buffers come from the heap rather than fresh mappings,
/// and freed memory is kept for the next one instead of being handed back
/// and faulted in again. In `kubechain bench` they cut the CPU of a LIST
/// of 1,000 objects by about a fifth, for about 5% more resident memory.
/// deploy/docker-compose.yml sets the same.
const MALLOC_TUNABLES: &str =
    "glibc.malloc.mmap_threshold=4194304:glibc.malloc.trim_threshold=33554432";

impl Supervisor {
    /// A supervisor writing logs into `logs`.
    pub fn new(logs: &Path) -> Self {
        Supervisor {
            logs: logs.to_path_buf(),
            children: Vec::new(),
        }
    }

    fn start(&self, spec: &ChildSpec) -> Result<Child> {
        let path = self.logs.join(format!("{}.log", spec.name));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut command = Command::new(&spec.program);
        if std::env::var_os("GLIBC_TUNABLES").is_none() {
            command.env("GLIBC_TUNABLES", MALLOC_TUNABLES);
        }
        // A process group of its own: a terminal's Ctrl-C (SIGINT to the
        // foreground group) reaches only the launcher, which stops the
        // children in order, etcd last, so that each leaves cleanly.
        command
            .process_group(0)
            .args(&spec.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} ({})", spec.name, spec.program.display()))
    }

    /// How the child `name` was started, if it was.
    pub fn spec(&self, name: &str) -> Option<ChildSpec> {
        self.children
            .iter()
            .find(|r| r.spec.name == name)
            .map(|r| r.spec.clone())
    }

    /// Starts a child.
    pub fn spawn(&mut self, spec: ChildSpec) -> Result<()> {
        let child = self.start(&spec)?;
        self.children.push(Running {
            spec,
            child,
            started: Instant::now(),
        });
        Ok(())
    }

    /// The first child that has exited, if any (checked without waiting).
    pub fn exited(&mut self) -> Option<(String, std::process::ExitStatus)> {
        self.children.iter_mut().find_map(|r| {
            r.child
                .try_wait()
                .ok()
                .flatten()
                .map(|status| (r.spec.name.clone(), status))
        })
    }

    /// Restarts every child that has exited (a crash loop is slowed to one
    /// restart per second).
    pub async fn restart_exited(&mut self) -> Result<()> {
        for i in 0..self.children.len() {
            let Ok(Some(status)) = self.children[i].child.try_wait() else {
                continue;
            };
            let name = self.children[i].spec.name.clone();
            eprintln!(
                "kubechain: {name} exited ({status}); restarting (log: {}/{name}.log)",
                self.logs.display()
            );
            let since = self.children[i].started.elapsed();
            if since < Duration::from_secs(1) {
                tokio::time::sleep(Duration::from_secs(1) - since).await;
            }
            let child = self.start(&self.children[i].spec)?;
            self.children[i].child = child;
            self.children[i].started = Instant::now();
        }
        Ok(())
    }

    /// Stops every child, last started first: SIGTERM, then SIGKILL after 5 s.
    pub async fn stop_all(&mut self) {
        while let Some(mut running) = self.children.pop() {
            if let Some(pid) = running.child.id() {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
            }
            if tokio::time::timeout(Duration::from_secs(5), running.child.wait())
                .await
                .is_err()
            {
                let _ = running.child.kill().await;
            }
        }
    }
}
