//! The chain across real network namespaces: three etcd members, two
//! core-server replicas, an extension-server, two front doors and
//! metrics-server (an aggregated server), each on a host of its own (a network namespace with its own address, joined by
//! veth to a bridge), linked over TCP with mutual TLS as across machines.
//! A workload of clients runs through the front door while the network is
//! cut and healed, and its history is checked afterwards: no acknowledged
//! write lost, no consistent read stale, no value read that was never
//! written (`tests::history`).
//!
//! Needs root (network namespaces, iptables); the harness removes every
//! namespace, link and rule it made, also when a test fails.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tests::history::{self, Kind, Op, Outcome, Seen};
use tests::informer::Api;
use tests::network::{FaultProxy, Network};
use tests::{bin_dir, eventually};

const ETCD: [&str; 3] = ["etcd-0", "etcd-1", "etcd-2"];
const FRONT_DOORS: [&str; 2] = ["front-0", "front-1"];
const NAMESPACE: &str = "partitions";
const KEYS: usize = 4;
const CLIENTS: usize = 4;
/// The ports of the slow links on the test's own address: etcd members'
/// from here up, the front doors', and the links between the servers'.
const ETCD_PROXY: u16 = 23790;
const FRONT_PROXY: u16 = 16443;
const LINK_PROXY: u16 = 17440;
/// The Node metrics-server measures.
const NODE: &str = "partitions-node";
/// The aggregated API metrics-server serves.
const METRICS: &str = "/apis/metrics.k8s.io/v1beta1/nodes";

/// One chain at a time: each is seven processes on a small machine.
static SERIAL: Mutex<()> = Mutex::new(());

/// The chain, one process per host. Processes are stopped before the
/// network goes (fields drop in order).
struct Chain {
    processes: Vec<(String, Child)>,
    /// The slow links, when the chain was started with them: each etcd
    /// member's (as every server reaches it) and the front door's (as the
    /// clients do).
    proxies: Vec<FaultProxy>,
    dir: PathBuf,
    network: Network,
}

impl Chain {
    /// Makes the hosts, the certificates (every address in them) and starts
    /// every process, with every etcd link and the clients' links to the
    /// front doors through a [`FaultProxy`] on the test's own address when
    /// `proxied`; returns once the front doors are ready.
    fn start_with(proxied: bool) -> Chain {
        if let Some(why) = tests::network::unavailable() {
            panic!("network namespaces are needed (run as root): {why}");
        }
        let network = Network::new(&[
            "etcd-0",
            "etcd-1",
            "etcd-2",
            "core-0",
            "core-1",
            "extension",
            "front-0",
            "front-1",
            "metrics",
        ]);
        let dir = std::env::temp_dir().join(format!(
            "kubechain-partitions-{}-{}",
            std::process::id(),
            network.hosts()[0].netns
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("logs")).expect("the test's directory");
        let ip = |host: &str| network.host(host).addr.to_string();
        let outside = network.outside().to_string();
        let mut etcd_ips: Vec<String> = ETCD.iter().map(|h| ip(h)).collect();
        etcd_ips.push(outside.clone());
        let certs = std::process::Command::new(bin_dir().join("kubechain"))
            .args(["certs", "--dir"])
            .arg(dir.join("pki"))
            .args([
                "--hosts",
                &format!("{},{},{outside}", ip("front-0"), ip("front-1")),
            ])
            .args(["--etcd-members", &ETCD.join(",")])
            .args(["--etcd-hosts", &etcd_ips.join(",")])
            .output()
            .expect("kubechain certs");
        assert!(
            certs.status.success(),
            "{}",
            String::from_utf8_lossy(&certs.stderr)
        );
        let mut proxies = Vec::new();
        if proxied {
            let at = |port: u16| SocketAddr::from((network.outside(), port));
            for (i, member) in ETCD.iter().enumerate() {
                let upstream = SocketAddr::from((network.host(member).addr, 2379));
                proxies.push(FaultProxy::start(at(ETCD_PROXY + i as u16), upstream));
            }
            for (i, door) in FRONT_DOORS.iter().enumerate() {
                let front = SocketAddr::from((network.host(door).addr, 6443));
                proxies.push(FaultProxy::start(at(FRONT_PROXY + i as u16), front));
            }
            // The links between the servers (gRPC to the core and extension
            // servers, HTTPS to metrics-server and back to the front door),
            // which they dial by their registered addresses.
            let links: [(&str, u16, &[&str]); 5] = [
                ("core-0", 7443, &FRONT_DOORS),
                ("core-1", 7443, &FRONT_DOORS),
                ("extension", 7444, &["core-0", "core-1"]),
                ("metrics", 4443, &FRONT_DOORS),
                ("front-0", 6443, &["metrics"]),
            ];
            for (i, (to, port, from)) in links.into_iter().enumerate() {
                let upstream = SocketAddr::from((network.host(to).addr, port));
                let proxy = FaultProxy::start(at(LINK_PROXY + i as u16), upstream);
                for host in from {
                    network.redirect(host, upstream, proxy.addr);
                }
                proxies.push(proxy);
            }
        }
        let mut chain = Chain {
            processes: Vec::new(),
            proxies,
            dir,
            network,
        };
        chain.start_etcd();
        assert!(
            eventually(Duration::from_secs(30), || ETCD.iter().all(|member| chain
                .etcdctl(member, &["endpoint", "health"])
                .contains("is healthy"))),
            "etcd is not healthy; logs in {}",
            chain.dir.join("logs").display()
        );
        chain.start_servers();
        for (door, name) in FRONT_DOORS.iter().enumerate() {
            let front = chain.api(door, Duration::from_secs(5));
            assert!(
                eventually(Duration::from_secs(60), || front.get("/readyz").0 == 200),
                "{name} is not ready; logs in {}",
                chain.dir.join("logs").display()
            );
        }
        assert!(
            eventually(Duration::from_secs(30), || chain.registered("core-server")
                == 2),
            "both core-server replicas register"
        );
        chain.register_metrics_server();
        chain
    }

    /// Registers metrics-server (its APIService, Service, EndpointSlice and
    /// RBAC) and the Node it measures, as `kubechain up` does, and waits
    /// until both front doors serve its API.
    fn register_metrics_server(&self) {
        let addons = std::process::Command::new(bin_dir().join("kubechain"))
            .args(["addons", "--pki", &self.pki(""), "--node", NODE])
            .args(["--server", &format!("https://{}:6443", self.ip("front-0"))])
            .args(["--metrics", &format!("{}:4443", self.ip("metrics"))])
            .output()
            .expect("kubechain addons");
        assert!(
            addons.status.success(),
            "{}",
            String::from_utf8_lossy(&addons.stderr)
        );
        for door in 0..FRONT_DOORS.len() {
            assert!(
                self.metrics_served(door, Duration::from_secs(60)),
                "front door {door} does not serve metrics-server's API; logs in {}",
                self.dir.join("logs").display()
            );
        }
    }

    /// Whether front door `door` serves metrics-server's API (the Node's
    /// metrics) within `time`.
    fn metrics_served(&self, door: usize, time: Duration) -> bool {
        let api = self.api(door, Duration::from_secs(5));
        eventually(time, || {
            let (status, body) = api.get(METRICS);
            status == 200 && body["items"][0]["metadata"]["name"] == NODE
        })
    }

    fn pki(&self, file: &str) -> String {
        self.dir.join("pki").join(file).display().to_string()
    }

    fn ip(&self, host: &str) -> String {
        self.network.host(host).addr.to_string()
    }

    /// Starts `program` on `host` with `args` and `env`, logging to `logs/<name>.log`.
    fn spawn(
        &mut self,
        name: &str,
        host: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, String)],
    ) {
        let log = std::fs::File::create(self.dir.join("logs").join(format!("{name}.log")))
            .expect("a log file");
        let child = self
            .network
            .command(host, program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        self.processes.push((name.to_string(), child));
    }

    fn start_etcd(&mut self) {
        let cluster: Vec<String> = ETCD
            .iter()
            .map(|m| format!("{m}=https://{}:2380", self.ip(m)))
            .collect();
        for member in ETCD {
            let ip = self.ip(member);
            let data = self.dir.join(member).display().to_string();
            let (cert, key, ca) = (
                self.pki(&format!("{member}.crt")),
                self.pki(&format!("{member}.key")),
                self.pki("internal-ca.crt"),
            );
            let args: Vec<String> = [
                "--name",
                member,
                "--data-dir",
                &data,
                "--listen-client-urls",
                &format!("https://{ip}:2379"),
                "--advertise-client-urls",
                &format!("https://{ip}:2379"),
                "--listen-peer-urls",
                &format!("https://{ip}:2380"),
                "--initial-advertise-peer-urls",
                &format!("https://{ip}:2380"),
                "--initial-cluster",
                &cluster.join(","),
                "--initial-cluster-state",
                "new",
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
            .to_vec();
            self.spawn(member, member, Path::new("etcd"), &args, &[]);
        }
    }

    fn start_servers(&mut self) {
        let etcd: Vec<String> = match self.proxies.is_empty() {
            true => ETCD
                .iter()
                .map(|m| format!("https://{}:2379", self.ip(m)))
                .collect(),
            false => self.proxies[..ETCD.len()]
                .iter()
                .map(|p| format!("https://{}", p.addr))
                .collect(),
        };
        let common = |cert: &str| {
            vec![
                ("KUBECHAIN_ETCD_SERVERS", etcd.join(",")),
                ("KUBECHAIN_TLS_CERT_FILE", self.pki(&format!("{cert}.crt"))),
                (
                    "KUBECHAIN_TLS_PRIVATE_KEY_FILE",
                    self.pki(&format!("{cert}.key")),
                ),
            ]
        };
        let mut extension = common("extension-server");
        extension.push(("KUBECHAIN_LISTEN", format!("{}:7444", self.ip("extension"))));
        extension.push(("KUBECHAIN_CLIENT_CA_FILE", self.pki("internal-ca.crt")));
        let extension_endpoint = format!("https://{}:7444", self.ip("extension"));
        let mut cores = Vec::new();
        for host in ["core-0", "core-1"] {
            let mut core = common("core-server");
            core.push(("KUBECHAIN_LISTEN", format!("{}:7443", self.ip(host))));
            core.push(("KUBECHAIN_CLIENT_CA_FILE", self.pki("internal-ca.crt")));
            core.push(("KUBECHAIN_EXTENSION_ENDPOINT", extension_endpoint.clone()));
            core.push((
                "KUBECHAIN_SERVICE_ACCOUNT_SIGNING_KEY_FILE",
                self.pki("sa.key"),
            ));
            cores.push((host, core));
        }
        let mut fronts = Vec::new();
        for door in FRONT_DOORS {
            let mut front = common("aggregator");
            front.extend([
                ("KUBECHAIN_LISTEN", format!("{}:6443", self.ip(door))),
                (
                    "KUBECHAIN_CORE_ENDPOINT",
                    format!("https://{}:7443", self.ip("core-0")),
                ),
                ("KUBECHAIN_CLIENT_CA_FILE", self.pki("ca.crt")),
                (
                    "KUBECHAIN_INTERNAL_CERT_FILE",
                    self.pki("aggregator-internal.crt"),
                ),
                (
                    "KUBECHAIN_INTERNAL_KEY_FILE",
                    self.pki("aggregator-internal.key"),
                ),
                ("KUBECHAIN_INTERNAL_CA_FILE", self.pki("internal-ca.crt")),
                ("KUBECHAIN_SERVICE_ACCOUNT_KEY_FILE", self.pki("sa.pub")),
                (
                    "KUBECHAIN_PROXY_CLIENT_CERT_FILE",
                    self.pki("front-proxy-client.crt"),
                ),
                (
                    "KUBECHAIN_PROXY_CLIENT_KEY_FILE",
                    self.pki("front-proxy-client.key"),
                ),
                (
                    "KUBECHAIN_REQUESTHEADER_CLIENT_CA_FILE",
                    self.pki("front-proxy-ca.crt"),
                ),
            ]);
            fronts.push((door, front));
        }
        let bin = bin_dir();
        self.spawn(
            "extension-server",
            "extension",
            &bin.join("extension-server"),
            &[],
            &extension,
        );
        for (host, env) in cores {
            self.spawn(host, host, &bin.join("core-server"), &[], &env);
        }
        for (door, env) in fronts {
            self.spawn(door, door, &bin.join("aggregator"), &[], &env);
        }
        let metrics = [
            ("KUBECHAIN_LISTEN", format!("{}:4443", self.ip("metrics"))),
            (
                "KUBECHAIN_FRONT_DOOR",
                format!("https://{}:6443", self.ip("front-0")),
            ),
            ("KUBECHAIN_NODE_NAME", NODE.to_string()),
            ("KUBECHAIN_TLS_CERT_FILE", self.pki("metrics-server.crt")),
            (
                "KUBECHAIN_TLS_PRIVATE_KEY_FILE",
                self.pki("metrics-server.key"),
            ),
            ("KUBECHAIN_CLIENT_CA_FILE", self.pki("ca.crt")),
            (
                "KUBECHAIN_REQUESTHEADER_CLIENT_CA_FILE",
                self.pki("front-proxy-ca.crt"),
            ),
            (
                "KUBECHAIN_REQUESTHEADER_ALLOWED_NAMES",
                "front-proxy-client".to_string(),
            ),
        ];
        self.spawn(
            "metrics-server",
            "metrics",
            &bin.join("metrics-server"),
            &[],
            &metrics,
        );
    }

    /// A client of front door `door` (0 or 1), as the admin, from the
    /// test's own address.
    fn api(&self, door: usize, timeout: Duration) -> Api {
        let base = match self.proxies.get(ETCD.len() + door) {
            Some(front) => format!("https://{}", front.addr),
            None => format!("https://{}:6443", self.ip(FRONT_DOORS[door])),
        };
        Api::at(&self.dir.join("pki"), &base, CLIENTS, timeout)
    }

    /// etcdctl, from the test's own address, to `member`: what it said.
    fn etcdctl(&self, member: &str, args: &[&str]) -> String {
        let output = std::process::Command::new("etcdctl")
            .args(["--endpoints", &format!("https://{}:2379", self.ip(member))])
            .args(["--cacert", &self.pki("internal-ca.crt")])
            .args([
                "--cert",
                &self.pki("etcd-0.crt"),
                "--key",
                &self.pki("etcd-0.key"),
            ])
            .args(["--command-timeout", "3s"])
            .args(args)
            .env("ETCDCTL_API", "3")
            .output()
            .expect("etcdctl");
        // Some answers (`endpoint health`) come on stderr.
        let mut said = String::from_utf8_lossy(&output.stdout).into_owned();
        said.push_str(&String::from_utf8_lossy(&output.stderr));
        said
    }

    /// How many replicas of `component` are registered in etcd.
    fn registered(&self, component: &str) -> usize {
        let prefix = format!("/kubechain/endpoints/{component}/");
        self.etcdctl("etcd-0", &["get", "--prefix", "--keys-only", &prefix])
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .count()
    }

    /// The etcd member that leads now.
    fn etcd_leader(&self) -> &'static str {
        let mut leader = None;
        assert!(
            eventually(Duration::from_secs(20), || {
                leader = ETCD.into_iter().find(|member| {
                    let status: Value = serde_json::from_str(
                        &self.etcdctl(member, &["endpoint", "status", "-w", "json"]),
                    )
                    .unwrap_or_default();
                    let status = &status[0]["Status"];
                    status["leader"].as_u64().is_some()
                        && status["leader"] == status["header"]["member_id"]
                });
                leader.is_some()
            }),
            "no etcd member leads"
        );
        leader.expect("a leader")
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        for (_, child) in self.processes.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The path of key `k`.
fn path(k: usize) -> String {
    format!("/api/v1/namespaces/{NAMESPACE}/configmaps/key-{k}")
}

/// The version and value of a ConfigMap answer.
fn state(object: &Value) -> Option<(u64, String)> {
    let rv = object["metadata"]["resourceVersion"]
        .as_str()?
        .parse()
        .ok()?;
    Some((rv, object["data"]["v"].as_str()?.to_string()))
}

/// What an answer to `kind` says happened.
fn outcome(kind: &Kind, status: u16, body: &Value) -> Outcome {
    match status {
        200 | 201 => Outcome::Done(state(body)),
        404 if body["reason"] == "NotFound" => match kind {
            Kind::Get { .. } => Outcome::Done(None),
            _ => Outcome::Refused,
        },
        409 | 422 => Outcome::Refused,
        _ => Outcome::Indeterminate,
    }
}

/// Runs `CLIENTS` clients on `KEYS` keys until `stop`: consistent and
/// cached reads, consistent lists, creates, deletes, and updates with and
/// without a precondition, each write a value never written before;
/// returns the history.
fn workload(doors: [Api; 2], stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Op>> {
    std::thread::spawn(move || {
        let history = Arc::new(Mutex::new(Vec::new()));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|client| {
                let api = doors[client % doors.len()].clone();
                let (stop, history) = (stop.clone(), history.clone());
                std::thread::spawn(move || {
                    let mut seen: HashMap<usize, u64> = HashMap::new();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let k = (client + n as usize * 7) % KEYS;
                        let value = format!("c{client}-{n}");
                        let url = format!("{}{}", api.base, path(k));
                        let object = |rv: Option<u64>| {
                            let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": format!("key-{k}"), "namespace": NAMESPACE},
                                "data": {"v": value}});
                            if let Some(rv) = rv {
                                object["metadata"]["resourceVersion"] = json!(rv.to_string());
                            }
                            object.to_string()
                        };
                        let (kind, request) = match n % 10 {
                            // A consistent list: a consistent read of every key.
                            5 => {
                                history
                                    .lock()
                                    .expect("the history")
                                    .extend(list(&api, client));
                                continue;
                            }
                            0 | 1 | 9 => (Kind::Get { consistent: true }, api.http.get(&url)),
                            2 => (
                                Kind::Get { consistent: false },
                                api.http.get(format!("{url}?resourceVersion=0")),
                            ),
                            7 => (Kind::Delete, api.http.delete(&url)),
                            8 => (
                                Kind::Create(value.clone()),
                                api.http
                                    .post(format!(
                                        "{}/api/v1/namespaces/{NAMESPACE}/configmaps",
                                        api.base
                                    ))
                                    .header("content-type", "application/json")
                                    .body(object(None)),
                            ),
                            step => {
                                let precondition =
                                    (step == 4).then(|| seen.get(&k).copied()).flatten();
                                (
                                    Kind::Update {
                                        value: value.clone(),
                                        precondition,
                                    },
                                    api.http
                                        .put(&url)
                                        .header("content-type", "application/json")
                                        .body(object(precondition)),
                                )
                            }
                        };
                        let invoked = Instant::now();
                        let (status, body) = api.send(request);
                        let op = Op {
                            client,
                            key: format!("key-{k}"),
                            outcome: outcome(&kind, status, &body),
                            kind,
                            invoked,
                            completed: Instant::now(),
                        };
                        if let (Outcome::Done(Some((rv, _))), false) =
                            (&op.outcome, op.kind == Kind::Delete)
                        {
                            seen.insert(k, *rv);
                        }
                        history.lock().expect("the history").push(op);
                        if status >= 500 || status == 0 {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                })
            })
            .collect();
        for client in clients {
            client.join().expect("a client");
        }
        std::mem::take(&mut *history.lock().expect("the history"))
    })
}

/// What a watcher saw, and when each event came.
struct Watched {
    seen: Vec<Seen>,
    /// The version of each ADDED, MODIFIED or DELETED event, and when it came.
    arrived: Vec<(u64, Instant)>,
}

/// Watches the keys like client-go's reflector until `stop`: lists (with a
/// LIST, or when `streaming`, a watch with `sendInitialEvents` up to its
/// end bookmark), watches from there with bookmarks, each watch ending
/// after `seconds`, resumes from the last version seen, lists again after
/// a 410; returns what it saw.
fn watcher(
    api: Api,
    streaming: bool,
    seconds: u64,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Watched> {
    std::thread::spawn(move || {
        let list = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
        let mut watched = Watched {
            seen: Vec::new(),
            arrived: Vec::new(),
        };
        let seen = &mut watched.seen;
        let mut last: Option<u64> = None;
        while !stop.load(Ordering::Relaxed) {
            let query = match last {
                Some(rv) => format!("resourceVersion={rv}"),
                None if streaming => {
                    "sendInitialEvents=true&resourceVersionMatch=NotOlderThan".to_string()
                }
                None => {
                    let (status, body) = api.get(&list);
                    match body["metadata"]["resourceVersion"].as_str().map(str::parse) {
                        Some(Ok(rv)) if status == 200 => {
                            last = Some(rv);
                            format!("resourceVersion={rv}")
                        }
                        _ => {
                            std::thread::sleep(Duration::from_millis(200));
                            continue;
                        }
                    }
                }
            };
            // Until the end of its initial events, a streaming list is a list.
            let mut listing = last.is_none();
            if let Some(from) = last {
                seen.push(Seen::Started(from));
            }
            let url = format!(
                "{}{list}?watch=true&{query}&allowWatchBookmarks=true&timeoutSeconds={seconds}",
                api.base
            );
            let Ok(response) = api.http.get(url).send() else {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            };
            match response.status().as_u16() {
                200 => {}
                410 => {
                    seen.push(Seen::Gone);
                    last = None;
                    continue;
                }
                // Refused (a replica that cannot prove it is current, or
                // none reachable): again after a pause, as a reflector does.
                _ => {
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
            }
            for line in BufReader::new(response).lines() {
                let Ok(event) = line.map(|l| serde_json::from_str::<Value>(&l)) else {
                    break;
                };
                let Ok(event) = event else { break };
                let object = &event["object"];
                let metadata = &object["metadata"];
                let rv = metadata["resourceVersion"]
                    .as_str()
                    .and_then(|v| v.parse().ok());
                let name = metadata["name"].as_str().unwrap_or_default().to_string();
                match (event["type"].as_str(), rv) {
                    (Some("BOOKMARK"), Some(rv)) if listing => {
                        if metadata["annotations"]["k8s.io/initial-events-end"] == "true" {
                            seen.push(Seen::Started(rv));
                            last = Some(rv);
                            listing = false;
                        }
                    }
                    // The initial events: the state at the list's version.
                    _ if listing && event["type"] == "ADDED" => {}
                    (Some("ADDED" | "MODIFIED"), Some(rv)) => {
                        let value = object["data"]["v"].as_str().unwrap_or_default();
                        seen.push(Seen::Event(name, rv, value.into()));
                        watched.arrived.push((rv, Instant::now()));
                        last = Some(rv);
                    }
                    (Some("DELETED"), Some(rv)) => {
                        seen.push(Seen::Deleted(name, rv));
                        watched.arrived.push((rv, Instant::now()));
                        last = Some(rv);
                    }
                    (Some("BOOKMARK"), Some(rv)) => {
                        seen.push(Seen::Bookmark(rv));
                        last = Some(rv);
                    }
                    (Some("ERROR"), _) if object["code"] == 410 => {
                        seen.push(Seen::Gone);
                        last = None;
                        break;
                    }
                    _ => {}
                }
            }
        }
        watched
    })
}

/// A consistent list of the keys, as one consistent read of each at the
/// list's time (a key the list does not hold: read as missing).
fn list(api: &Api, client: usize) -> Vec<Op> {
    let invoked = Instant::now();
    let (status, body) = api.get(&format!("/api/v1/namespaces/{NAMESPACE}/configmaps"));
    let completed = Instant::now();
    let items = body["items"].as_array().cloned().unwrap_or_default();
    (0..KEYS)
        .map(|k| {
            let name = format!("key-{k}");
            let outcome = match status {
                200 => Outcome::Done(
                    items
                        .iter()
                        .find(|item| item["metadata"]["name"] == name.as_str())
                        .and_then(state),
                ),
                _ => Outcome::Indeterminate,
            };
            Op {
                client,
                key: name,
                kind: Kind::Get { consistent: true },
                invoked,
                completed,
                outcome,
            }
        })
        .collect()
}

/// Creates the keys (acknowledged creates, the first writes of the history).
fn create_keys(api: &Api) -> Vec<Op> {
    api.create_namespace(NAMESPACE);
    (0..KEYS)
        .map(|k| {
            let value = format!("initial-{k}");
            let invoked = Instant::now();
            let (status, body) = api.post(
                &format!("/api/v1/namespaces/{NAMESPACE}/configmaps"),
                &json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("key-{k}")}, "data": {"v": value}}),
            );
            assert_eq!(status, 201, "{body}");
            Op {
                client: usize::MAX,
                key: format!("key-{k}"),
                kind: Kind::Create(value),
                invoked,
                completed: Instant::now(),
                outcome: Outcome::Done(state(&body)),
            }
        })
        .collect()
}

/// Each key's final state, read consistently once every fault has healed.
fn final_state(api: &Api) -> HashMap<String, Option<(u64, String)>> {
    (0..KEYS)
        .map(|k| {
            let mut last = None;
            assert!(
                eventually(Duration::from_secs(30), || {
                    let (status, body) = api.get(&path(k));
                    last = match status {
                        200 => Some(state(&body)),
                        404 => Some(None),
                        _ => None,
                    };
                    last.is_some()
                }),
                "key-{k} is not readable after the heal"
            );
            (format!("key-{k}"), last.flatten())
        })
        .collect()
}

/// How a scenario's watchers watch: each watch's timeout, in seconds.
#[derive(Clone, Copy)]
enum Watches {
    /// A few seconds: watches end and resume all through the scenario.
    Short,
    /// Longer than the scenario: the first watches stay open through the
    /// fault and its heal, and must deliver every write.
    Open,
}

/// What a scenario's run came to.
struct Run {
    history: Vec<Op>,
    /// From the heal until the last failure of an operation sent after it
    /// (zero if none failed).
    recovered: Duration,
    /// The longest time from a write's acknowledgement to a watcher's event.
    lag: Duration,
    /// Watches opened and bookmarks seen, over every watcher.
    watches: usize,
    bookmarks: usize,
}

/// Runs the workload through `fault` (applied after a calm start, healed
/// before a calm end), checks its history and that every part of the
/// chain serves again after the heal.
fn under(
    chain: &Chain,
    watches: Watches,
    fault: impl FnOnce(&Chain),
    heal: impl FnOnce(&Chain),
) -> Run {
    let api = chain.api(0, Duration::from_secs(5));
    let mut history = create_keys(&api);
    let stop = Arc::new(AtomicBool::new(false));
    let seconds = match watches {
        Watches::Short => 4,
        // Open from before the fault until after the workload stops.
        Watches::Open => 20,
    };
    // One watcher lists with a LIST, the other with a streaming list.
    let watchers: Vec<_> = (0..2)
        .map(|door| {
            let api = chain.api(door, Duration::from_secs(seconds + 30));
            watcher(api, door == 1, seconds, stop.clone())
        })
        .collect();
    let doors = [api.clone(), chain.api(1, Duration::from_secs(5))];
    let running = workload(doors, stop.clone());
    std::thread::sleep(Duration::from_secs(2));
    fault(chain);
    std::thread::sleep(Duration::from_secs(9));
    heal(chain);
    let healed = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    stop.store(true, Ordering::Relaxed);
    let stopped = Instant::now();
    history.extend(running.join().expect("the workload"));
    let reads = history::check_reads(&history);
    assert!(reads.is_empty(), "{reads:#?}");
    let conditional = history::check_conditional_writes(&history);
    assert!(conditional.is_empty(), "{conditional:#?}");
    let writes = history::check_writes(&history, &final_state(&api));
    assert!(writes.is_empty(), "{writes:#?}");
    // Healed without a restart: the other door and the aggregated server too.
    let other = chain.api(1, Duration::from_secs(5));
    assert!(
        eventually(Duration::from_secs(30), || other.get(&path(0)).0 / 100 != 5),
        "front-1 does not serve after the heal"
    );
    for door in 0..FRONT_DOORS.len() {
        assert!(
            chain.metrics_served(door, Duration::from_secs(30)),
            "front door {door} does not serve metrics-server's API after the heal"
        );
    }
    let mut run = Run {
        recovered: history
            .iter()
            .filter(|op| op.outcome == Outcome::Indeterminate && op.invoked > healed)
            .map(|op| op.completed - healed)
            .max()
            .unwrap_or_default(),
        lag: Duration::ZERO,
        watches: 0,
        bookmarks: 0,
        history,
    };
    for (i, watcher) in watchers.into_iter().enumerate() {
        let Watched { seen, arrived } = watcher.join().expect("a watcher");
        let count = |what: fn(&Seen) -> bool| seen.iter().filter(|s| what(s)).count();
        let events = count(|s| matches!(s, Seen::Event(..) | Seen::Deleted(..)));
        let gone = count(|s| matches!(s, Seen::Gone));
        run.watches += count(|s| matches!(s, Seen::Started(_)));
        run.bookmarks += count(|s| matches!(s, Seen::Bookmark(_)));
        assert!(events > 0, "watcher {i} saw no event: {seen:?}");
        let failures = history::check_watch(&run.history, i, &seen);
        assert!(failures.is_empty(), "{failures:#?}");
        let came: HashMap<u64, Instant> = arrived.into_iter().collect();
        let first = seen.iter().find_map(|s| match s {
            Seen::Started(rv) => Some(*rv),
            _ => None,
        });
        for op in &run.history {
            let (Kind::Create(_) | Kind::Update { .. }, Outcome::Done(Some((rv, _)))) =
                (&op.kind, &op.outcome)
            else {
                continue;
            };
            match came.get(rv) {
                Some(at) => run.lag = run.lag.max(at.saturating_duration_since(op.completed)),
                // A watch open all along delivers every write acknowledged
                // well before the end: it never goes silent.
                None if matches!(watches, Watches::Open)
                    && first.is_some_and(|first| *rv > first)
                    && op.completed + Duration::from_secs(5) < stopped =>
                {
                    panic!(
                        "watcher {i} never delivered {} at version {rv} ({gone} times 410); it saw, last: {:?}",
                        op.key,
                        &seen[seen.len().saturating_sub(20)..]
                    )
                }
                None => {}
            }
        }
    }
    run
}

/// How many operations ended each way: done, refused, indeterminate.
fn tally(history: &[Op]) -> (usize, usize, usize) {
    history
        .iter()
        .fold((0, 0, 0), |(d, r, i), op| match op.outcome {
            Outcome::Done(_) => (d + 1, r, i),
            Outcome::Refused => (d, r + 1, i),
            Outcome::Indeterminate => (d, r, i + 1),
        })
}

/// One scenario: a chain of its own (one at a time), the workload through
/// `fault` and `heal`, the history checked (a failed check fails the test:
/// no lost write, stale read, watch gap or repeat), its row reported.
fn scenario(
    what: &str,
    proxied: bool,
    watches: Watches,
    fault: impl FnOnce(&Chain),
    heal: impl FnOnce(&Chain),
) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let chain = Chain::start_with(proxied);
    let run = under(&chain, watches, fault, heal);
    let (done, refused, unknown) = tally(&run.history);
    eprintln!(
        "| {what} | {} operations: {done} done, {refused} refused, {unknown} indeterminate | 0 lost, 0 stale, 0 watch gaps or repeats | {} watches, {} bookmarks, watch lag at most {:.1} s | recovered {:.1} s after the heal |",
        run.history.len(),
        run.watches,
        run.bookmarks,
        run.lag.as_secs_f64(),
        run.recovered.as_secs_f64(),
    );
    // The workload ran on both sides of the fault.
    assert!(done > 50, "{what}: only {done} operations succeeded");
}

#[test]
fn a_core_replica_cut_from_etcd_serves_no_stale_read_and_loses_no_write() {
    scenario(
        "core-1 cut from etcd",
        false,
        Watches::Short,
        |chain| {
            for member in ETCD {
                chain.network.partition("core-1", member);
            }
            // Cut off, it can no longer renew its registration: the front
            // doors stop sending it requests once the registration expires.
            assert!(
                eventually(Duration::from_secs(20), || chain.registered("core-server")
                    == 1),
                "core-1 is still registered, cut from etcd"
            );
        },
        |chain| chain.network.heal(),
    );
}

#[test]
fn the_etcd_leader_isolated_in_a_minority_loses_nothing() {
    scenario(
        "the etcd leader isolated",
        false,
        Watches::Short,
        |chain| chain.network.isolate(&[chain.etcd_leader()]),
        |chain| chain.network.heal(),
    );
}

#[test]
fn etcd_quorum_lost_and_regained_loses_nothing() {
    scenario(
        "etcd quorum lost",
        false,
        Watches::Short,
        |chain| {
            for (i, a) in ETCD.iter().enumerate() {
                for b in &ETCD[i + 1..] {
                    chain.network.partition(a, b);
                }
            }
        },
        |chain| chain.network.heal(),
    );
}

#[test]
fn the_front_door_cut_from_one_core_replica_loses_nothing() {
    scenario(
        "front-0 cut from core-1",
        false,
        Watches::Short,
        |chain| chain.network.partition("front-0", "core-1"),
        |chain| chain.network.heal(),
    );
}

#[test]
fn every_etcd_link_and_the_clients_slow_with_resets_loses_nothing() {
    let set = |delay, percent| {
        move |chain: &Chain| {
            for proxy in &chain.proxies {
                proxy.set(delay, percent);
            }
        }
    };
    scenario(
        "100 ms links with 5% resets",
        true,
        Watches::Short,
        set(Duration::from_millis(100), 5),
        set(Duration::ZERO, 0),
    );
}

#[test]
fn watches_open_through_a_cut_and_its_heal_miss_nothing() {
    scenario(
        "core-1 cut from etcd, watches open",
        false,
        Watches::Open,
        |chain| {
            for member in ETCD {
                chain.network.partition("core-1", member);
            }
        },
        |chain| chain.network.heal(),
    );
}

#[test]
fn a_core_replica_that_no_longer_hears_etcd_serves_no_stale_read() {
    scenario(
        "core-1 deaf to etcd (one way)",
        false,
        Watches::Open,
        |chain| {
            for member in ETCD {
                chain.network.deafen("core-1", member);
            }
        },
        |chain| chain.network.heal(),
    );
}
