//! A real Kubernetes API for tests: kubechain's etcd and servers, started
//! with `kubechain up` on a free port in a temporary directory that is
//! removed when the [`TestCluster`] is dropped, with kube-rs clients for
//! the admin, for any ServiceAccount, or impersonating any user, and an
//! author's aggregated server run and registered beside it (as a process
//! with [`TestCluster::spawn`], or inside the test's own process with
//! `kubechain_apiserver::spawn`).
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = kubechain_envtest::TestCluster::start()?;
//! let configmaps: Api<ConfigMap> = Api::namespaced(cluster.admin().await?, "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! configmaps.create(&PostParams::default(), &cm).await?;
//! // Someone with no RBAC may not read it.
//! let nobody: Api<ConfigMap> = Api::namespaced(cluster.impersonating("nobody", &[]).await?, "default");
//! assert!(nobody.get("settings").await.is_err());
//! # Ok(()) }
//! ```
//!
//! The binaries (`kubechain`, the servers, and an author's) are found in
//! `$KUBECHAIN_BIN_DIR`, next to the test executable (a workspace that
//! builds them), or on `PATH`.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// How long a cluster may take to be ready.
const READY_WITHIN: Duration = Duration::from_secs(90);
/// The line `kubechain up` prints when the cluster answers.
const READY_LINE: &str = "kubechain ready: export KUBECONFIG=";

/// What can go wrong setting up a test cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A program could not be found or run.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The cluster did not become ready.
    #[error("the cluster did not start: {0}")]
    Start(String),
    /// A command (`kubechain register`) failed.
    #[error("{command} failed: {stderr}")]
    Command {
        /// The command.
        command: String,
        /// What it said.
        stderr: String,
    },
    /// A kubeconfig could not be read or turned into a client.
    #[error("a kube client: {0}")]
    Client(String),
    /// The API refused a request.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// Something did not happen in time.
    #[error("waited {0:?} for {1}")]
    Timeout(Duration, String),
}

/// The result of harness calls.
pub type Result<T> = std::result::Result<T, Error>;

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// Where the binary `name` is: `$KUBECHAIN_BIN_DIR`, next to the test
/// executable, or on `PATH`.
pub fn binary(name: &str) -> PathBuf {
    let beside_tests = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join(name)));
    std::env::var_os("KUBECHAIN_BIN_DIR")
        .map(|dir| PathBuf::from(dir).join(name))
        .into_iter()
        .chain(beside_tests)
        .find(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// A running cluster, stopped and removed when dropped.
pub struct TestCluster {
    dir: PathBuf,
    port: u16,
    launcher: Child,
}

impl TestCluster {
    /// Starts etcd and every server in a new temporary directory, and
    /// returns once the front door answers.
    pub fn start() -> Result<TestCluster> {
        static STARTED: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kubechain-envtest-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        // A port taken between the probe and the bind: try another.
        let mut last = String::new();
        for _ in 0..3 {
            match Self::launch(&dir, free_port()) {
                Ok(cluster) => return Ok(cluster),
                Err(Error::Start(why)) => last = why,
                Err(other) => return Err(other),
            }
        }
        Err(Error::Start(last))
    }

    fn launch(dir: &Path, port: u16) -> Result<TestCluster> {
        let mut launcher = Command::new(binary("kubechain"))
            .arg("up")
            .arg("--data-dir")
            .arg(dir)
            .args(["--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(io("running kubechain up"))?;
        let Some(stdout) = launcher.stdout.take() else {
            return Err(Error::Start("no output of kubechain up".into()));
        };
        let (lines, ready) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let cluster = TestCluster {
            dir: dir.to_path_buf(),
            port,
            launcher,
        };
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match ready.recv_timeout(left) {
                Ok(line) if line.starts_with(READY_LINE) => return Ok(cluster),
                Ok(_) => continue,
                Err(_) => {
                    return Err(Error::Start(format!(
                        "kubechain up was not ready in {READY_WITHIN:?}; logs in {}",
                        cluster.dir.join("logs").display()
                    )));
                }
            }
        }
    }

    /// The cluster's data directory (`pki/`, `logs/`, the kubeconfig).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The front door's URL.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The admin's kubeconfig (a `system:masters` client certificate).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The cluster's CA, which signs the front door's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("pki/ca.crt")
    }

    /// The flags with which an author's server stores in the cluster's
    /// etcd (`kubechain-apiserver`'s `StorageOptions`).
    pub fn etcd_flags(&self) -> Vec<String> {
        let ports: serde_json::Value = std::fs::read(self.dir.join("ports.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        let pki = |file: &str| self.dir.join("pki").join(file).display().to_string();
        vec![
            "--etcd-servers".into(),
            format!(
                "https://127.0.0.1:{}",
                ports["etcd"].as_u64().unwrap_or(2379)
            ),
            "--etcd-certfile".into(),
            pki("etcd.crt"),
            "--etcd-keyfile".into(),
            pki("etcd.key"),
            "--etcd-cafile".into(),
            pki("internal-ca.crt"),
        ]
    }

    /// A client as the admin.
    pub async fn admin(&self) -> Result<Client> {
        client_of(&self.kubeconfig(), |_| {}).await
    }

    /// A client as the admin impersonating `user` in `groups`: what that
    /// user may do is decided as for them.
    pub async fn impersonating(&self, user: &str, groups: &[&str]) -> Result<Client> {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        client_of(&self.kubeconfig(), |kubeconfig| {
            for auth in &mut kubeconfig.auth_infos {
                if let Some(info) = auth.auth_info.as_mut() {
                    info.impersonate = Some(user.to_string());
                    info.impersonate_groups = Some(groups.clone()).filter(|g| !g.is_empty());
                }
            }
        })
        .await
    }

    /// A client as the ServiceAccount `namespace/name`, made (with its
    /// namespace) when missing.
    pub async fn service_account(&self, namespace: &str, name: &str) -> Result<Client> {
        client_of(
            &self.service_account_kubeconfig(namespace, name).await?,
            |_| {},
        )
        .await
    }

    /// A kubeconfig of the ServiceAccount `namespace/name` (made, with its
    /// namespace, when missing) holding a token of it valid for a day: an
    /// author's server runs with it as a pod would.
    pub async fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> Result<PathBuf> {
        use k8s_openapi::api::authentication::v1::TokenRequest;
        use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
        use kube::api::{Api, PostParams};
        let admin = self.admin().await?;
        let named = |name: &str| kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        };
        let create = PostParams::default();
        let namespaces: Api<Namespace> = Api::all(admin.clone());
        let namespace_object = Namespace {
            metadata: named(namespace),
            ..Default::default()
        };
        ignore_exists(namespaces.create(&create, &namespace_object).await)?;
        let accounts: Api<ServiceAccount> = Api::namespaced(admin, namespace);
        let account = ServiceAccount {
            metadata: named(name),
            ..Default::default()
        };
        ignore_exists(accounts.create(&create, &account).await)?;
        let mut request = TokenRequest::default();
        request.spec.expiration_seconds = Some(86_400);
        let token = accounts
            .create_token_request(name, &create, &request)
            .await?
            .status
            .map(|s| s.token)
            .unwrap_or_default();
        let path = self.dir.join(format!("{namespace}-{name}.kubeconfig"));
        let config = serde_json::json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "kubechain", "cluster": {
                "server": self.url(), "certificate-authority": self.ca_file(),
            }}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": "kubechain", "user": name, "namespace": namespace}}],
            "current-context": name,
        });
        std::fs::write(&path, config.to_string()).map_err(io("writing a kubeconfig"))?;
        Ok(path)
    }

    /// Runs an author's server: `program` with `args`, its output in
    /// `logs/<name>.log`; stopped when the returned process is dropped.
    pub fn spawn(&self, name: &str, program: &Path, args: &[String]) -> Result<ServerProcess> {
        let log = std::fs::File::create(self.dir.join("logs").join(format!("{name}.log")))
            .map_err(io("creating a server's log"))?;
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(io(format!("running {}", program.display())))?;
        Ok(ServerProcess(child))
    }

    /// Registers an aggregated server with `kubechain register`: the
    /// group's versions served at `addresses` under a certificate `ca_file`
    /// signed, as `identity` (`serviceaccount:<ns>:<name>` or
    /// `user:<name>`), its Service `service` (`namespace/name`).
    pub fn register(
        &self,
        group: &str,
        versions: &[&str],
        addresses: &[SocketAddr],
        service: &str,
        ca_file: &Path,
        identity: &str,
    ) -> Result<()> {
        let mut command = Command::new(binary("kubechain"));
        command.args(["register", "--group", group, "--service", service]);
        for version in versions {
            command.args(["--version", version]);
        }
        for address in addresses {
            command.args(["--address", &address.to_string()]);
        }
        let out = command
            .arg("--ca-file")
            .arg(ca_file)
            .args(["--identity", identity])
            .env("KUBECONFIG", self.kubeconfig())
            .env("RUST_BACKTRACE", "0")
            .output()
            .map_err(io("running kubechain register"))?;
        if !out.status.success() {
            return Err(Error::Command {
                command: "kubechain register".into(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    }

    /// Waits until the APIService `<version>.<group>` is Available.
    pub async fn wait_available(&self, group: &str, version: &str) -> Result<()> {
        use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
        let services: kube::Api<APIService> = kube::Api::all(self.admin().await?);
        let name = format!("{version}.{group}");
        let available = || async {
            services
                .get(&name)
                .await
                .ok()
                .and_then(|s| s.status?.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
        };
        let deadline = Instant::now() + READY_WITHIN;
        while !available().await {
            if Instant::now() > deadline {
                return Err(Error::Timeout(
                    READY_WITHIN,
                    format!("{name} to be Available"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}

impl Drop for TestCluster {
    /// Stops the cluster (SIGTERM, so that `kubechain up` stops its
    /// servers) and removes its directory, kept when the test failed.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.launcher.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.launcher.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.launcher.kill();
        let _ = self.launcher.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// An author's server the harness runs; killed when dropped.
pub struct ServerProcess(Child);

impl ServerProcess {
    /// Kills it now (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A client from the kubeconfig at `path`, after `adjust`.
async fn client_of(path: &Path, adjust: impl FnOnce(&mut Kubeconfig)) -> Result<Client> {
    let mut kubeconfig = Kubeconfig::read_from(path).map_err(|e| Error::Client(e.to_string()))?;
    adjust(&mut kubeconfig);
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Client(e.to_string()))?;
    Client::try_from(config).map_err(|e| Error::Client(e.to_string()))
}

/// A create's result, an object already there counting as done.
fn ignore_exists<T>(created: std::result::Result<T, kube::Error>) -> Result<()> {
    match created {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(other) => Err(other.into()),
    }
}
