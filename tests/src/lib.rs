//! The end-to-end harness: a real cluster started the way a user starts
//! one (`kubechain up`), driven with the real `kubectl`, real `etcdctl` and
//! the client libraries. Each [`Cluster`] has its own data directory and
//! ports, and is stopped when dropped.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod history;
pub mod informer;
pub mod network;

/// The directory holding the workspace's binaries (next to the test binary).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps dir");
    deps.parent().expect("target profile dir").to_path_buf()
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A running local cluster.
pub struct Cluster {
    /// Its data directory.
    pub dir: PathBuf,
    /// The front door's port.
    pub port: u16,
    launcher: Option<Child>,
    /// How long `kubechain up` took to print its ready line.
    pub startup: Duration,
    /// Extra `kubechain up` arguments (replica counts), kept across restarts.
    up_args: Vec<String>,
    /// Environment variables for `kubechain up` (its children inherit them).
    up_env: Vec<(String, String)>,
}

/// The output of a command, decoded.
#[derive(Debug)]
pub struct Run {
    /// Exit code (-1 if killed).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    fn from(output: Output) -> Run {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Panics with the output unless the command succeeded; returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(
            self.code, 0,
            "command failed\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        &self.stdout
    }

    /// Panics unless the command failed; returns stderr.
    pub fn err(&self) -> &str {
        assert_ne!(
            self.code, 0,
            "command unexpectedly succeeded\nstdout: {}",
            self.stdout
        );
        &self.stderr
    }

    /// Parses stdout as watch events, one JSON object per line.
    pub fn events(&self) -> Vec<Value> {
        self.ok()
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a watch event ({e}): {l}"))
            })
            .collect()
    }

    /// Parses stdout as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(self.ok())
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }
}

impl Cluster {
    /// Starts a fresh cluster in a new temporary directory.
    pub fn start() -> Cluster {
        Self::start_with(&[])
    }

    /// Starts a cluster on a data directory and port.
    pub fn start_in(dir: PathBuf, port: u16) -> Cluster {
        let mut cluster = Cluster {
            dir,
            port,
            launcher: None,
            startup: Duration::ZERO,
            up_args: Vec::new(),
            up_env: Vec::new(),
        };
        cluster.launch();
        cluster
    }

    /// Runs `kubechain up` and waits for its ready line.
    fn launch(&mut self) {
        if let Err(why) = self.try_launch() {
            panic!("{why}");
        }
    }

    /// Runs `kubechain up`; `Err` when it exits before its ready line.
    fn try_launch(&mut self) -> Result<(), String> {
        let started = Instant::now();
        let mut launcher = Command::new(bin_dir().join("kubechain"))
            .args([
                "up",
                "--data-dir",
                &self.dir.display().to_string(),
                "--port",
                &self.port.to_string(),
            ])
            .args(&self.up_args)
            .envs(self.up_env.iter().map(|(k, v)| (k, v)))
            // Its own process group, as a shell's foreground job has.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kubechain binary (cargo build --workspace first)");
        let stdout = launcher.stdout.take().expect("launcher stdout");
        self.launcher = Some(launcher);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        loop {
            match rx.recv_timeout(Duration::from_secs(90)) {
                Ok(line) if line.starts_with("kubechain ready: export KUBECONFIG=") => break,
                Ok(_) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    if let Some(mut launcher) = self.launcher.take() {
                        let _ = launcher.wait();
                    }
                    return Err(format!(
                        "kubechain up exited before it was ready; logs in {}",
                        self.dir.join("logs").display()
                    ));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                    "kubechain up did not become ready in 90 s; logs in {}",
                    self.dir.join("logs").display()
                ),
            }
        }
        self.startup = started.elapsed();
        Ok(())
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// A command with this cluster's kubeconfig and its own kubectl cache.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("KUBECONFIG", self.kubeconfig())
            .env("KUBECACHEDIR", self.dir.join("kubectl-cache"));
        cmd
    }

    /// Runs the stock `kubectl` (the one on PATH) with arguments.
    pub fn kubectl(&self, args: &[&str]) -> Run {
        Run::from(
            self.command("kubectl")
                .args(args)
                .output()
                .expect("kubectl on PATH"),
        )
    }

    /// Runs kubectl with a manifest on stdin (`-f -`).
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Run {
        with_stdin(self.command("kubectl").args(args), input)
    }

    /// Starts kubectl without waiting (for `get -w`).
    pub fn kubectl_spawn(&self, args: &[&str]) -> Child {
        self.command("kubectl")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl on PATH")
    }

    /// The etcd client URL of this cluster (TLS, client certificates required).
    pub fn etcd_endpoint(&self) -> String {
        format!("https://127.0.0.1:{}", self.ports()["etcd"])
    }

    /// `etcdctl` (v3 API) for this cluster's etcd, trusting only the
    /// internal CA, with no client certificate yet; the caller adds the rest.
    pub fn etcdctl_anonymous(&self) -> Command {
        let mut cmd = Command::new("etcdctl");
        cmd.env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(self.etcd_endpoint())
            .arg("--cacert")
            .arg(self.dir.join("pki/internal-ca.crt"));
        cmd
    }

    /// `etcdctl` for this cluster's etcd presenting the PKI's `<stem>.crt`
    /// and `.key`; the caller adds the rest.
    pub fn etcdctl_as(&self, stem: &str) -> Command {
        let pki = self.dir.join("pki");
        let mut cmd = self.etcdctl_anonymous();
        cmd.arg("--cert")
            .arg(pki.join(format!("{stem}.crt")))
            .arg("--key")
            .arg(pki.join(format!("{stem}.key")));
        cmd
    }

    /// Runs `etcdctl` against this cluster's etcd with the cluster's
    /// credentials (etcd's own certificate, of the internal CA).
    pub fn etcdctl(&self, args: &[&str]) -> Run {
        let output = self
            .etcdctl_as("etcd")
            .args(args)
            .output()
            .expect("etcdctl on PATH");
        Run::from(output)
    }

    /// A field of the APIService `name` (a JSONPath such as
    /// `{.spec.versionPriority}`), trimmed; empty when it does not exist.
    pub fn apiservice_field(&self, name: &str, jsonpath: &str) -> String {
        self.kubectl(&[
            "get",
            "apiservice",
            name,
            "-o",
            &format!("jsonpath={jsonpath}"),
        ])
        .stdout
        .trim()
        .to_string()
    }

    /// Whether the APIService `name` is Available.
    pub fn apiservice_available(&self, name: &str) -> bool {
        self.apiservice_field(name, "{.status.conditions[0].status}") == "True"
    }

    /// The launcher's process id.
    pub fn launcher_pid(&self) -> Option<u32> {
        self.launcher.as_ref().map(Child::id)
    }

    /// The servers' pids (the aggregator and every `*-server`), sorted: the
    /// same before and after an attack shows none of them restarted.
    pub fn server_pids(&self) -> Vec<(String, u32)> {
        let mut pids: Vec<_> = self
            .children()
            .into_iter()
            .filter(|(name, _)| name.ends_with("-server") || name == "aggregator")
            .collect();
        pids.sort();
        pids
    }

    /// The launcher's children: (program name, pid).
    pub fn children(&self) -> Vec<(String, u32)> {
        let Some(pid) = self.launcher_pid() else {
            return Vec::new();
        };
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| d.flatten().collect::<Vec<_>>())
            .unwrap_or_default();
        tasks
            .iter()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .flat_map(|c| {
                c.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok())
                    .collect::<Vec<_>>()
            })
            .filter_map(|child| {
                let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).ok()?;
                let argv0 = cmdline.split(|b| *b == 0).next()?;
                let name = Path::new(std::str::from_utf8(argv0).ok()?)
                    .file_name()?
                    .to_str()?
                    .to_string();
                Some((name, child))
            })
            .collect()
    }

    /// The pid of a child process by program name (`core-server`, `etcd`).
    pub fn child_pid(&self, name: &str) -> Option<u32> {
        self.children()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, pid)| pid)
    }

    /// The resident memory (KiB) of each child process, by program name.
    pub fn memory_kib(&self) -> Vec<(String, u64)> {
        self.children()
            .into_iter()
            .filter_map(|(name, pid)| {
                let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
                let rss = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))?
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .ok()?;
                Some((name, rss))
            })
            .collect()
    }

    /// Sends a signal to a process.
    pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal);
    }

    /// Stops the cluster (SIGTERM to the launcher) and waits.
    pub fn stop(&mut self) {
        if let Some(mut launcher) = self.launcher.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(launcher.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let deadline = Instant::now() + Duration::from_secs(20);
            while launcher.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = launcher.kill();
            let _ = launcher.wait();
        }
    }

    /// Presses Ctrl-C in the launcher's terminal: SIGINT to the
    /// launcher's process group; waits for the launcher to exit.
    pub fn interrupt(&mut self) {
        if let Some(mut launcher) = self.launcher.take() {
            let group = nix::unistd::Pid::from_raw(launcher.id() as i32);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGINT);
            let deadline = Instant::now() + Duration::from_secs(30);
            while launcher.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = launcher.kill();
            let _ = launcher.wait();
        }
    }

    /// Stops and starts the cluster again on the same data directory.
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The metrics text served at `http://127.0.0.1:<port>/metrics`.
pub fn scrape(port: u64) -> String {
    let out = std::process::Command::new("curl")
        .args(["-sf", &format!("http://127.0.0.1:{port}/metrics")])
        .output()
        .expect("curl");
    assert!(out.status.success(), "scraping port {port} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of the sample whose name and labels start with `prefix`.
pub fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
}

/// `deploy/<script> ARGS` with `env` (the compose and swarm scripts); with
/// `ready`, asserts that it succeeded and printed that line, and returns
/// its output either way.
pub fn deploy_script(
    script: &str,
    args: &[&str],
    env: &[(&'static str, String)],
    ready: Option<&str>,
) -> String {
    let out = Command::new(workspace().join("deploy").join(script))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap_or_else(|e| panic!("running deploy/{script}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if let Some(line) = ready {
        assert!(out.status.success(), "{script} {args:?} failed:\n{text}");
        assert!(text.contains(line), "no {line:?} line:\n{text}");
    } else if !out.status.success() {
        eprintln!("{script} {args:?} failed:\n{text}");
    }
    text
}

/// kubectl with the `kubeconfig` (and a discovery cache) in a deployment's `dir`.
pub fn kubectl_in(dir: &Path, args: &[&str]) -> Run {
    let out = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env("KUBECACHEDIR", dir.join("kubectl-cache"))
        .output()
        .expect("kubectl on PATH");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Each kubechain server and the `kubechain certs` files it holds, as
/// `deploy/docker-compose.yml` mounts them: what the swarm stack's secrets
/// and the Kubernetes Secrets must hold too.
pub const SERVER_FILES: [(&str, &[&str]); 4] = [
    (
        "aggregator",
        &[
            "aggregator.crt",
            "aggregator.key",
            "aggregator-internal.crt",
            "aggregator-internal.key",
            "ca.crt",
            "internal-ca.crt",
            "front-proxy-client.crt",
            "front-proxy-client.key",
            "front-proxy-ca.crt",
            "sa.pub",
            "encryption-config.yaml",
        ],
    ),
    (
        "core-server",
        &[
            "core-server.crt",
            "core-server.key",
            "internal-ca.crt",
            "ca.crt",
            "sa.key",
            "encryption-config.yaml",
        ],
    ),
    (
        "extension-server",
        &[
            "extension-server.crt",
            "extension-server.key",
            "internal-ca.crt",
            "encryption-config.yaml",
        ],
    ),
    (
        "metrics-server",
        &[
            "metrics-server.crt",
            "metrics-server.key",
            "ca.crt",
            "front-proxy-ca.crt",
        ],
    ),
];

/// What the task that registers metrics-server holds: the admin's credentials.
pub const ADDONS_FILES: &[&str] = &["admin.crt", "admin.key", "ca.crt"];

/// Whether there are `containers` and every one passes its docker health check.
pub fn all_healthy(containers: &[String]) -> bool {
    !containers.is_empty()
        && containers.iter().all(|c| {
            Command::new("docker")
                .args(["inspect", "--format", "{{.State.Health.Status}}", c])
                .output()
                .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "healthy")
        })
}

/// Why docker cannot be used here, if it cannot (the compose and swarm tests).
pub fn docker_unavailable() -> Option<String> {
    match Command::new("docker").arg("info").output() {
        Err(e) => Some(format!("docker is not installed ({e})")),
        Ok(out) if !out.status.success() => Some(format!(
            "`docker info` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(_) => None,
    }
}

/// Judges the differences a test found against one of kube's tables:
/// each one `known` allows (`allows` says which, `reason` why) is printed
/// with its reason, the others are printed; the test fails on any not
/// allowed, and on any allowed one that no longer shows, so the list of
/// known differences cannot go stale.
pub fn judge_differences<D: std::fmt::Debug, K: std::fmt::Debug>(
    diffs: &[D],
    known: &[K],
    allows: impl Fn(&K, &D) -> bool,
    reason: impl Fn(&K) -> &str,
) {
    let mut allowed = Vec::new();
    let mut failures = Vec::new();
    for d in diffs {
        match known.iter().find(|k| allows(k, d)) {
            Some(k) => allowed.push(format!("{d:?}\n      because {}", reason(k))),
            None => failures.push(format!("{d:?}")),
        }
    }
    let stale: Vec<String> = known
        .iter()
        .filter(|k| !diffs.iter().any(|d| allows(k, d)))
        .map(|k| format!("{k:?}"))
        .collect();
    println!("\nknown differences (allow-listed): {}", allowed.len());
    for a in &allowed {
        println!("  {a}");
    }
    println!("\ndifferences: {}", failures.len());
    for f in &failures {
        println!("  {f}");
    }
    assert!(
        stale.is_empty(),
        "allow-listed differences that no longer show (remove them): {stale:#?}"
    );
    assert!(
        failures.is_empty(),
        "{} differences from kube 1.33 (the table above)",
        failures.len()
    );
}

/// Polls `check` until it returns true or the timeout passes.
pub fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    check()
}

impl Cluster {
    /// Starts a fresh cluster with extra `kubechain up` arguments, e.g.
    /// `["--core-replicas", "3", "--extension-replicas", "2"]`.
    pub fn start_with(args: &[&str]) -> Cluster {
        Self::start_with_env(args, &[])
    }

    /// [`Cluster::start_with`], with environment variables for the launcher
    /// and the servers it starts (`KUBECHAIN_AUDIT_WEBHOOK_CONFIG_FILE`, …).
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Cluster {
        let dir = std::env::temp_dir().join(format!(
            "kubechain-e2e-{}-{}",
            std::process::id(),
            free_port()
        ));
        let mut cluster = Cluster {
            dir,
            port: free_port(),
            launcher: None,
            startup: Duration::ZERO,
            up_args: args.iter().map(|a| a.to_string()).collect(),
            up_env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        // A port found free may be taken by another test's process before
        // the aggregator binds it: a launcher that exits early gets another.
        for _ in 1..3 {
            match cluster.try_launch() {
                Ok(()) => return cluster,
                Err(why) => {
                    eprintln!("{why}; trying another port");
                    cluster.port = free_port();
                }
            }
        }
        cluster.launch();
        cluster
    }

    /// The pids of every running child with this program name (`core-server`), sorted.
    pub fn child_pids(&self, name: &str) -> Vec<u32> {
        let mut pids: Vec<u32> = self
            .children()
            .into_iter()
            .filter(|(n, _)| n == name)
            .map(|(_, pid)| pid)
            .collect();
        pids.sort_unstable();
        pids
    }

    /// The replicas registered in etcd for a component, as (address, pid).
    pub fn registrations(&self, component: &str) -> Vec<(String, u32)> {
        let run = self.etcdctl(&[
            "get",
            "--prefix",
            &format!("/kubechain/endpoints/{component}/"),
            "--print-value-only",
        ]);
        run.ok()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|v| {
                Some((
                    v["address"].as_str()?.to_string(),
                    u32::try_from(v["pid"].as_u64()?).ok()?,
                ))
            })
            .collect()
    }

    /// The loopback ports `kubechain up` gave the replicas behind the front
    /// door, by name (`core-0`, `extension-1`, `etcd`).
    pub fn ports(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.dir.join("ports.json")).expect("ports.json"))
            .expect("ports json")
    }
}

/// Who a raw request ([`Cluster::curl`]) is sent as.
#[derive(Clone, Copy, Debug)]
pub enum As<'a> {
    /// The admin client certificate (`system:masters`).
    Admin,
    /// A bearer token, e.g. a ServiceAccount's from `kubectl create token`.
    Token(&'a str),
    /// No credentials at all.
    Anonymous,
}

/// A raw answer: status code, the body parsed as JSON (`Null` if it is not), and the body as text.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status code (0 if curl got none).
    pub code: u16,
    /// The body as JSON, or `Null`.
    pub json: Value,
    /// The body as text.
    pub text: String,
}

impl Cluster {
    /// Sends one request with curl through the front door, the path sent
    /// as is (`--path-as-is`: no dot segment resolved on the way).
    pub fn curl(
        &self,
        who: As<'_>,
        method: &str,
        path: &str,
        headers: &[&str],
        body: Option<&[u8]>,
    ) -> Answer {
        let mut cmd = self.curl_command(who);
        cmd.args(["--path-as-is", "--max-time", "30", "-X", method]);
        for header in headers {
            cmd.args(["-H", header]);
        }
        if let Some(body) = body {
            let file = self.dir.join(format!("curl-body-{}", free_port()));
            std::fs::write(&file, body).expect("writing body");
            cmd.arg("--data-binary").arg(format!("@{}", file.display()));
        }
        let output = cmd
            .args(["-w", "\n%{http_code}"])
            .arg(format!("https://localhost:{}{path}", self.port))
            .output()
            .expect("curl on PATH");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        Answer {
            code: code.trim().parse().unwrap_or(0),
            json: serde_json::from_str(body).unwrap_or(Value::Null),
            text: body.to_string(),
        }
    }

    /// `curl -sS` trusting the cluster CA and presenting `who`'s credentials;
    /// the caller adds the rest (the URL last).
    pub fn curl_command(&self, who: As<'_>) -> Command {
        let pki = self.dir.join("pki");
        let mut cmd = Command::new("curl");
        cmd.arg("-sS").arg("--cacert").arg(pki.join("ca.crt"));
        match who {
            As::Admin => {
                cmd.arg("--cert")
                    .arg(pki.join("admin.crt"))
                    .arg("--key")
                    .arg(pki.join("admin.key"));
            }
            As::Token(token) => {
                cmd.args(["-H", &format!("Authorization: Bearer {token}")]);
            }
            As::Anonymous => {}
        }
        cmd
    }

    /// A kubeconfig at `<dir>/<name>.kubeconfig` that authenticates with
    /// `token`, in `namespace` by default.
    pub fn token_kubeconfig(&self, name: &str, token: &str, namespace: &str) -> PathBuf {
        let path = self.dir.join(format!("{name}.kubeconfig"));
        let config = serde_json::json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "kubechain", "cluster": {
                "server": format!("https://127.0.0.1:{}", self.port),
                "certificate-authority": self.dir.join("pki/ca.crt"),
            }}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": "kubechain", "user": name, "namespace": namespace}}],
            "current-context": name,
        });
        std::fs::write(&path, config.to_string()).expect("writing a kubeconfig");
        path
    }

    /// Runs kubectl with another kubeconfig (see [`Cluster::token_kubeconfig`]).
    pub fn kubectl_with(&self, kubeconfig: &Path, args: &[&str]) -> Run {
        Run::from(
            self.command("kubectl")
                .env("KUBECONFIG", kubeconfig)
                .args(args)
                .output()
                .expect("kubectl on PATH"),
        )
    }

    /// Runs kubectl with another kubeconfig and a manifest on stdin.
    pub fn kubectl_stdin_with(&self, kubeconfig: &Path, args: &[&str], input: &str) -> Run {
        with_stdin(
            self.command("kubectl")
                .env("KUBECONFIG", kubeconfig)
                .args(args),
            input,
        )
    }

    /// Runs `tests/python/<script>` with this cluster's kubeconfig (or
    /// `kubeconfig`), and checks it succeeded and printed `<done>: all checks passed`.
    pub fn python(&self, script: &str, kubeconfig: Option<&Path>, done: &str) {
        let mut cmd = self.command("python3");
        if let Some(kubeconfig) = kubeconfig {
            cmd.env("KUBECONFIG", kubeconfig);
        }
        let output = cmd
            .arg(workspace().join("tests/python").join(script))
            .output()
            .expect("python3 on PATH");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{script} failed\nstdout: {stdout}\nstderr: {stderr}"
        );
        assert!(
            stdout.contains(&format!("{done}: all checks passed")),
            "{stdout}"
        );
    }

    /// A ServiceAccount `name` in `default` with no permissions, and a token for it.
    pub fn service_account_token(&self, name: &str) -> String {
        self.kubectl(&["create", "serviceaccount", name]).ok();
        self.kubectl(&["create", "token", name])
            .ok()
            .trim()
            .to_string()
    }

    /// Creates the namespace `name` and waits until it holds what kube's
    /// controllers put in every namespace (the `kube-root-ca.crt`
    /// ConfigMap), as kube's e2e framework waits before a test counts
    /// what a namespace holds.
    pub fn create_namespace(&self, name: &str) {
        self.kubectl(&["create", "namespace", name]).ok();
        assert!(
            eventually(Duration::from_secs(10), || self
                .kubectl(&["get", "configmap", ROOT_CA_CONFIG_MAP, "-n", name])
                .code
                == 0),
            "no {ROOT_CA_CONFIG_MAP} in the new namespace {name}"
        );
    }
}

/// The ConfigMap kube's root CA publisher keeps in every namespace.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// A serving certificate made as the common tutorials make one, `openssl
/// req -x509 -newkey rsa:2048 -nodes -subj /CN=<host> -addext
/// subjectAltName=DNS:<host>`: self-signed and its own CA (`CA:TRUE`).
/// Writes `<dir>/<name>.crt` and `.key`; returns the certificate in base64,
/// as a `caBundle` holds it.
pub fn openssl_self_signed(dir: &Path, name: &str, host: &str) -> String {
    use base64::Engine;
    let (crt, key) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .args(["-subj", &format!("/CN={host}")])
        .args(["-addext", &format!("subjectAltName=DNS:{host}")])
        .output()
        .expect("openssl on PATH");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pem = std::fs::read(&crt).expect("the certificate");
    assert!(
        String::from_utf8_lossy(
            &Command::new("openssl")
                .args(["x509", "-noout", "-text", "-in"])
                .arg(&crt)
                .output()
                .expect("openssl")
                .stdout
        )
        .contains("CA:TRUE"),
        "openssl makes a CA:TRUE certificate"
    );
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// Starts the test aggregated server (`tests/python/aggregated_server.py`)
/// on `port` with the serving certificate `<dir>/<cert>.crt` and `.key`;
/// returns once it says it is ready.
pub fn start_aggregated_server(cluster: &Cluster, port: u16, cert: &str) -> Server {
    spawn_ready(
        Command::new("python3")
            .arg(workspace().join("tests/python/aggregated_server.py"))
            .arg(port.to_string())
            .arg(cluster.dir.join(format!("{cert}.crt")))
            .arg(cluster.dir.join(format!("{cert}.key")))
            .arg(cluster.dir.join("pki/front-proxy-ca.crt")),
    )
}

/// Starts the test webhook (`tests/python/admission_webhook.py`) on
/// `port` with the certificate `<dir>/hook.crt`, logging the reviews it
/// gets to `log`.
pub fn start_webhook(dir: &Path, port: u16, log: &Path) -> Server {
    spawn_ready(
        Command::new("python3")
            .arg(workspace().join("tests/python/admission_webhook.py"))
            .arg(port.to_string())
            .arg(dir.join("hook.crt"))
            .arg(dir.join("hook.key"))
            .arg(log),
    )
}

/// The test webhook with an `openssl req -x509` certificate, behind the
/// Service `webhooks/hook`: its CA bundle, the log of its reviews, its process.
pub fn webhook_behind_service(cluster: &Cluster) -> (String, PathBuf, Server) {
    let dir = &cluster.dir;
    let ca = openssl_self_signed(dir, "hook", "hook.webhooks.svc");
    let port = free_port();
    let log = dir.join("webhook-reviews.jsonl");
    let webhook = start_webhook(dir, port, &log);
    cluster
        .kubectl_stdin(
            &["apply", "-f", "-"],
            &local_service("webhooks", "hook", port),
        )
        .ok();
    (ca, log, webhook)
}

/// A test server's process (a webhook, an aggregated server): killed and
/// reaped when dropped, so a failing test leaves none behind.
pub struct Server(Child);

impl std::ops::Deref for Server {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Server {
    /// Takes charge of a running process, to kill it when dropped.
    pub fn new(child: Child) -> Server {
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spawns a test server and returns once its first line says `ready`.
pub fn spawn_ready(command: &mut Command) -> Server {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the test server starts");
    let mut line = String::new();
    if let Some(out) = child.stdout.as_mut() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    assert_eq!(line.trim(), "ready");
    Server(child)
}

/// A Namespace, a Service `name` in it on port 443, and an EndpointSlice
/// sending it to `127.0.0.1:<port>`: how an aggregated server or webhook
/// that runs on this machine is reached (there is no cluster network).
pub fn local_service(namespace: &str, name: &str, port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}}}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {namespace}}}\n\
         spec: {{ports: [{{name: https, port: 443, targetPort: {port}}}]}}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: {name}-1, namespace: {namespace}, labels: {{kubernetes.io/service-name: {name}}}}}\n\
         addressType: IPv4\nendpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]\n\
         ports: [{{name: https, port: {port}, protocol: TCP}}]\n"
    )
}

/// Runs a command with `input` on its stdin.
fn with_stdin(command: &mut Command, input: &str) -> Run {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("writing stdin");
    Run::from(child.wait_with_output().expect("the command's output"))
}
