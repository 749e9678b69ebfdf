//! The chain across real network namespaces: three etcd members, two
//! core-server replicas, an extension-server and two front doors, each on
//! a host of its own (a network namespace with its own address, joined by
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
/// from here up, and the front door's.
const ETCD_PROXY: u16 = 23790;
const FRONT_PROXY: u16 = 16443;

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
        chain
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

/// What an answer says happened.
fn outcome(status: u16, body: &Value) -> Outcome {
    match status {
        200 | 201 => Outcome::Done(state(body)),
        404 if body["reason"] == "NotFound" => Outcome::Done(None),
        409 | 422 => Outcome::Refused,
        _ => Outcome::Indeterminate,
    }
}

/// Runs `CLIENTS` clients on `KEYS` keys until `stop`: consistent and
/// cached reads, consistent lists, and updates with and without a
/// precondition, each write a value never written before; returns the
/// history.
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
                        if n % 6 == 5 {
                            // A consistent list: a consistent read of every key.
                            history.lock().expect("the history").extend(list(&api, client));
                            continue;
                        }
                        let (kind, request) = match n % 5 {
                            0 | 1 => (
                                Kind::Get { consistent: true },
                                api.http.get(format!("{}{}", api.base, path(k))),
                            ),
                            2 => (
                                Kind::Get { consistent: false },
                                api.http
                                    .get(format!("{}{}?resourceVersion=0", api.base, path(k))),
                            ),
                            step => {
                                let precondition = (step == 4).then(|| seen.get(&k).copied()).flatten();
                                let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": format!("key-{k}"), "namespace": NAMESPACE},
                                    "data": {"v": value}});
                                if let Some(rv) = precondition {
                                    object["metadata"]["resourceVersion"] = json!(rv.to_string());
                                }
                                (
                                    Kind::Update { value, precondition },
                                    api.http
                                        .put(format!("{}{}", api.base, path(k)))
                                        .header("content-type", "application/json")
                                        .body(object.to_string()),
                                )
                            }
                        };
                        let invoked = Instant::now();
                        let (status, body) = api.send(request);
                        let op = Op {
                            client,
                            key: format!("key-{k}"),
                            kind,
                            invoked,
                            completed: Instant::now(),
                            outcome: outcome(status, &body),
                        };
                        if let Outcome::Done(Some((rv, _))) = &op.outcome {
                            seen.insert(k, *rv);
                        }
                        history.lock().expect("the history").push(op);
                        if status != 200 && status != 201 {
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

/// Watches the keys like client-go's reflector until `stop`: lists, watches
/// from the list's version (with bookmarks, each watch ending after a few
/// seconds), resumes from the last version seen, lists again after a 410;
/// returns what it saw.
fn watcher(api: Api, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Seen>> {
    std::thread::spawn(move || {
        let list = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
        let mut seen = Vec::new();
        let mut last: Option<u64> = None;
        while !stop.load(Ordering::Relaxed) {
            let from = match last {
                Some(rv) => rv,
                None => {
                    let (status, body) = api.get(&list);
                    match body["metadata"]["resourceVersion"].as_str().map(str::parse) {
                        Some(Ok(rv)) if status == 200 => rv,
                        _ => {
                            std::thread::sleep(Duration::from_millis(200));
                            continue;
                        }
                    }
                }
            };
            seen.push(Seen::Started(from));
            last = Some(from);
            let url = format!(
                "{}{list}?watch=true&resourceVersion={from}&allowWatchBookmarks=true&timeoutSeconds=4",
                api.base
            );
            let Ok(response) = api.http.get(url).send() else {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            };
            if response.status().as_u16() == 410 {
                seen.push(Seen::Gone);
                last = None;
                continue;
            }
            for line in BufReader::new(response).lines() {
                let Ok(event) = line.map(|l| serde_json::from_str::<Value>(&l)) else {
                    break;
                };
                let Ok(event) = event else { break };
                let object = &event["object"];
                let rv = object["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|v| v.parse().ok());
                match (event["type"].as_str(), rv) {
                    (Some("ADDED" | "MODIFIED"), Some(rv)) => {
                        let name = object["metadata"]["name"].as_str().unwrap_or_default();
                        let value = object["data"]["v"].as_str().unwrap_or_default();
                        seen.push(Seen::Event(name.into(), rv, value.into()));
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
        seen
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
                outcome: outcome(status, &body),
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

/// Runs the workload through `fault` (applied after a calm start, healed
/// before a calm end) and checks its history.
fn under(chain: &Chain, fault: impl FnOnce(&Chain), heal: impl FnOnce(&Chain)) -> Vec<Op> {
    let api = chain.api(0, Duration::from_secs(5));
    let mut history = create_keys(&api);
    let stop = Arc::new(AtomicBool::new(false));
    let watchers: Vec<_> = (0..2)
        .map(|door| watcher(chain.api(door, Duration::from_secs(30)), stop.clone()))
        .collect();
    let doors = [api.clone(), chain.api(1, Duration::from_secs(5))];
    let running = workload(doors, stop.clone());
    std::thread::sleep(Duration::from_secs(3));
    fault(chain);
    std::thread::sleep(Duration::from_secs(10));
    heal(chain);
    std::thread::sleep(Duration::from_secs(5));
    stop.store(true, Ordering::Relaxed);
    history.extend(running.join().expect("the workload"));
    let reads = history::check_reads(&history);
    assert!(reads.is_empty(), "{reads:#?}");
    let writes = history::check_writes(&history, &final_state(&api));
    assert!(writes.is_empty(), "{writes:#?}");
    for (i, watcher) in watchers.into_iter().enumerate() {
        let seen = watcher.join().expect("a watcher");
        let count = |what: fn(&Seen) -> bool| seen.iter().filter(|s| what(s)).count();
        let events = count(|s| matches!(s, Seen::Event(..)));
        eprintln!(
            "watcher {i}: {events} events, {} bookmarks, {} watches, {} times 410 Gone",
            count(|s| matches!(s, Seen::Bookmark(_))),
            count(|s| matches!(s, Seen::Started(_))),
            count(|s| matches!(s, Seen::Gone)),
        );
        assert!(events > 0, "watcher {i} saw no event: {seen:?}");
        let failures = history::check_watch(&history, i, &seen);
        assert!(failures.is_empty(), "{failures:#?}");
    }
    history
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
/// `fault` and `heal`, the history checked, its tally reported.
fn scenario(what: &str, proxied: bool, fault: impl FnOnce(&Chain), heal: impl FnOnce(&Chain)) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let chain = Chain::start_with(proxied);
    let history = under(&chain, fault, heal);
    let (done, refused, unknown) = tally(&history);
    eprintln!(
        "{what}: {} operations: {done} done, {refused} refused, {unknown} indeterminate",
        history.len()
    );
    // The workload ran on both sides of the fault.
    assert!(done > 50, "{what}: only {done} operations succeeded");
}

#[test]
fn a_core_replica_cut_from_etcd_serves_no_stale_read_and_loses_no_write() {
    scenario(
        "core-1 cut from etcd",
        false,
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
        |chain| chain.network.isolate(&[chain.etcd_leader()]),
        |chain| chain.network.heal(),
    );
}

#[test]
fn etcd_quorum_lost_and_regained_loses_nothing() {
    scenario(
        "etcd quorum lost",
        false,
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
        set(Duration::from_millis(100), 5),
        set(Duration::ZERO, 0),
    );
}
