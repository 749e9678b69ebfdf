//! Hosts on one machine: each a network namespace with its own address,
//! joined by veth pairs to one bridge, made by the test itself with
//! Debian's iproute2 and cut apart with iptables inside the namespaces.
//! Everything is named after the test's process, so that two runs never
//! share a name, and removed when the [`Network`] is dropped, also when
//! the test fails. Links that are slow or drop connections go through a
//! [`FaultProxy`].

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// One host: a network namespace and its address on the bridge.
#[derive(Debug, Clone)]
pub struct Host {
    /// What the test calls it (`etcd-0`, `core-1`, ...).
    pub name: String,
    /// The network namespace's name.
    pub netns: String,
    /// Its address.
    pub addr: Ipv4Addr,
}

/// Hosts joined by a bridge, made for one test; the test itself reaches
/// them from the bridge's own address ([`Network::outside`]).
pub struct Network {
    bridge: String,
    hosts: Vec<Host>,
    outside: Ipv4Addr,
}

/// Runs `ip` (or another tool) and fails the test, with its words, if it fails.
fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    assert!(
        output.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Whether this process may make network namespaces (root, with iproute2).
pub fn unavailable() -> Option<String> {
    static PROBES: AtomicU32 = AtomicU32::new(0);
    let probe = format!(
        "kcprobe{}-{}",
        std::process::id() % 100_000,
        PROBES.fetch_add(1, Ordering::Relaxed)
    );
    let made = Command::new("ip").args(["netns", "add", &probe]).output();
    match made {
        Ok(output) if output.status.success() => {
            let _ = Command::new("ip")
                .args(["netns", "delete", &probe])
                .output();
            None
        }
        Ok(output) => Some(String::from_utf8_lossy(&output.stderr).into_owned()),
        Err(e) => Some(e.to_string()),
    }
}

impl Network {
    /// Makes one namespace per name, on a bridge of its own, in a /24 of
    /// 10.213.0.0/16 picked by this process's id and how many it made (addresses .1 upwards in
    /// the order given, the bridge .254): traffic stays on the test's own
    /// addresses.
    pub fn new(names: &[&str]) -> Network {
        static MADE: AtomicU32 = AtomicU32::new(0);
        let made = MADE.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let id = format!("{}{}", pid % 10_000, made % 10);
        let subnet = ((pid % 60) * 4 + made % 4) as u8 + 1;
        let bridge = format!("kcbr{id}");
        let mut network = Network {
            bridge: bridge.clone(),
            hosts: Vec::new(),
            outside: Ipv4Addr::new(10, 213, subnet, 254),
        };
        run("ip", &["link", "add", &bridge, "type", "bridge"]);
        // Where bridged traffic passes the host's iptables (br_netfilter,
        // as docker sets it up, with FORWARD dropping), let the bridge's own through.
        run(
            "iptables",
            &[
                "-w", "-I", "FORWARD", "-i", &bridge, "-o", &bridge, "-j", "ACCEPT",
            ],
        );
        let outside = format!("{}/24", network.outside);
        run("ip", &["addr", "add", &outside, "dev", &bridge]);
        run("ip", &["link", "set", &bridge, "up"]);
        for (i, name) in names.iter().enumerate() {
            let netns = format!("kc{id}-{i}");
            let (outside, inside) = (format!("kcv{id}o{i}"), format!("kcv{id}i{i}"));
            let addr = Ipv4Addr::new(10, 213, subnet, i as u8 + 1);
            run("ip", &["netns", "add", &netns]);
            network.hosts.push(Host {
                name: name.to_string(),
                netns: netns.clone(),
                addr,
            });
            run(
                "ip",
                &[
                    "link", "add", &outside, "type", "veth", "peer", "name", &inside,
                ],
            );
            run("ip", &["link", "set", &outside, "master", &bridge, "up"]);
            run("ip", &["link", "set", &inside, "netns", &netns]);
            let exec = |args: &[&str]| {
                let mut all = vec!["netns", "exec", &netns, "ip"];
                all.extend_from_slice(args);
                run("ip", &all);
            };
            exec(&["link", "set", "lo", "up"]);
            exec(&["addr", "add", &format!("{addr}/24"), "dev", &inside]);
            exec(&["link", "set", &inside, "up"]);
        }
        network
    }

    /// The host called `name`.
    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("no host {name}"))
    }

    /// The test's own address on the bridge.
    pub fn outside(&self) -> Ipv4Addr {
        self.outside
    }

    /// Every host, in the order made.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// A command that runs `program` inside the host `name`'s namespace.
    pub fn command(&self, name: &str, program: &std::path::Path) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.host(name).netns])
            .arg(program);
        command
    }

    /// Runs iptables inside the host `name`.
    fn iptables(&self, name: &str, args: &[&str]) {
        let mut all = vec!["netns", "exec", &self.host(name).netns, "iptables", "-w"];
        all.extend_from_slice(args);
        run("ip", &all);
    }

    /// Drops every packet `to` sends to `from`, at `from`: `from` no longer
    /// hears `to` (one way; what `from` sends still arrives, unanswered).
    pub fn deafen(&self, from: &str, to: &str) {
        let source = self.host(to).addr.to_string();
        self.iptables(from, &["-A", "INPUT", "-s", &source, "-j", "DROP"]);
    }

    /// Cuts `a` and `b` apart both ways.
    pub fn partition(&self, a: &str, b: &str) {
        self.deafen(a, b);
        self.deafen(b, a);
    }

    /// Cuts `group` from every other host, both ways.
    pub fn isolate(&self, group: &[&str]) {
        for inside in group {
            for other in self
                .hosts
                .iter()
                .filter(|h| !group.contains(&h.name.as_str()))
            {
                self.partition(inside, &other.name);
            }
        }
    }

    /// Sends what `from` opens to `to` through `via` instead (a
    /// [`FaultProxy`] in front of `to`), without `from` knowing: a DNAT rule
    /// inside `from`, so that it still dials, and verifies, `to`'s address.
    /// Cuts no longer apply to such a link (the proxy's address is the
    /// test's); [`Network::heal`] leaves it in place.
    pub fn redirect(&self, from: &str, to: SocketAddr, via: SocketAddr) {
        let (ip, port, via) = (to.ip().to_string(), to.port().to_string(), via.to_string());
        self.iptables(
            from,
            &[
                "-t",
                "nat",
                "-A",
                "OUTPUT",
                "-p",
                "tcp",
                "-d",
                &ip,
                "--dport",
                &port,
                "-j",
                "DNAT",
                "--to-destination",
                &via,
            ],
        );
    }

    /// Removes every cut.
    pub fn heal(&self) {
        for host in &self.hosts {
            self.iptables(&host.name, &["-F", "INPUT"]);
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth end, and so the pair.
        for host in &self.hosts {
            let _ = Command::new("ip")
                .args(["netns", "delete", &host.netns])
                .output();
        }
        let _ = Command::new("ip")
            .args(["link", "delete", &self.bridge])
            .output();
        let bridge = self.bridge.as_str();
        let _ = Command::new("iptables")
            .args([
                "-w", "-D", "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT",
            ])
            .output();
    }
}

/// A slow, unreliable link: a TCP proxy in the test's process (this
/// kernel has no `netem`), as Toxiproxy does it. Each chunk is held for
/// the delay in each direction, and each second every open connection is
/// reset (RST) with the given chance: long-lived connections (watches,
/// etcd's gRPC streams, pooled keep-alives) are cut as often as new ones.
pub struct FaultProxy {
    /// Where clients connect instead of the upstream.
    pub addr: SocketAddr,
    faults: Arc<Faults>,
}

/// What a [`FaultProxy`] does now, and the connections it holds.
#[derive(Default)]
struct Faults {
    delay_ms: AtomicU64,
    reset_percent: AtomicU32,
    stop: AtomicBool,
    open: std::sync::Mutex<Vec<(TcpStream, TcpStream, Arc<AtomicBool>)>>,
}

/// A small generator of random numbers, enough to pick connections.
fn random(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Closes a connection with a reset instead of a FIN.
fn reset(stream: &TcpStream) {
    let linger = nix::libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let _ = nix::sys::socket::setsockopt(stream, nix::sys::socket::sockopt::Linger, &linger);
    let _ = stream.shutdown(Shutdown::Both);
}

/// Copies `from` to `to`, each chunk held for the current delay; marks
/// the connection `closed` when done.
fn pump(mut from: TcpStream, mut to: TcpStream, faults: Arc<Faults>, closed: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let delay = faults.delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    closed.store(true, Ordering::Relaxed);
}

impl FaultProxy {
    /// Listens on `listen` and forwards every connection to `upstream`,
    /// faithfully until [`FaultProxy::set`].
    pub fn start(listen: SocketAddr, upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind(listen).unwrap_or_else(|e| panic!("{listen}: {e}"));
        let faults = Arc::new(Faults::default());
        let shared = faults.clone();
        let ticking = faults.clone();
        std::thread::spawn(move || {
            let mut seed = u64::from(std::process::id()) << 16 | u64::from(listen.port()) | 1;
            while !ticking.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(1));
                let percent = u64::from(ticking.reset_percent.load(Ordering::Relaxed));
                let mut open = ticking.open.lock().unwrap_or_else(|e| e.into_inner());
                open.retain(|(client, server, closed)| {
                    if closed.load(Ordering::Relaxed) {
                        return false;
                    }
                    if random(&mut seed) % 100 < percent {
                        reset(client);
                        reset(server);
                        return false;
                    }
                    true
                });
            }
        });
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if shared.stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(3))
                else {
                    reset(&client);
                    continue;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let (Ok(client_reader), Ok(server_reader), Ok(c), Ok(s)) = (
                    client.try_clone(),
                    server.try_clone(),
                    client.try_clone(),
                    server.try_clone(),
                ) else {
                    continue;
                };
                let closed = Arc::new(AtomicBool::new(false));
                shared
                    .open
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((c, s, closed.clone()));
                let (up, down) = (shared.clone(), shared.clone());
                let also = closed.clone();
                std::thread::spawn(move || pump(client_reader, server, up, closed));
                std::thread::spawn(move || pump(server_reader, client, down, also));
            }
        });
        FaultProxy {
            addr: listen,
            faults,
        }
    }

    /// From now on: hold each chunk for `delay`, and reset each open
    /// connection with a chance of `reset_percent` in a hundred each second.
    pub fn set(&self, delay: Duration, reset_percent: u32) {
        self.faults
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
        self.faults
            .reset_percent
            .store(reset_percent, Ordering::Relaxed);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.faults.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so that it sees the stop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}
