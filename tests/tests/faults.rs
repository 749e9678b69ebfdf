//! The fault suite: what a stopping or failing part of the chain does to
//! everyone else. Real processes, real signals, through the front door.
//!
//! To see the measured times: `cargo test -p tests --test faults -- --nocapture`.

use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tests::{As, Cluster, eventually};

/// The value of one etcd key, empty if there is none.
fn etcd_value(cluster: &Cluster, key: &str) -> String {
    cluster
        .etcdctl(&["get", key, "--print-value-only"])
        .stdout
        .trim()
        .to_string()
}

/// Whether a process runs (a zombie awaiting its parent does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[test]
fn a_sigtermed_core_replica_leaves_at_once_and_its_watches_resume_without_a_gap() {
    let cluster = Cluster::start_with(&["--core-replicas", "2"]);
    assert!(eventually(Duration::from_secs(20), || cluster
        .registrations("core-server")
        .len()
        == 2));
    // A watch through the front door, on whichever replica it lands.
    let mut watch = cluster.kubectl_spawn(&[
        "get",
        "configmaps",
        "-w",
        "--output-watch-events",
        "-o",
        "jsonpath={.type} {.object.metadata.name}{\"\\n\"}",
    ]);
    let (tx, rx) = mpsc::channel();
    let out = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    cluster
        .kubectl(&["create", "configmap", "before", "--from-literal=k=v"])
        .ok();
    let seen = |name: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(line) if line.ends_with(&format!(" {name}")) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    };
    assert!(seen("before"));

    // SIGTERM both replicas in turn: whichever served the watch is among them.
    for victim in cluster.child_pids("core-server") {
        let stopped = Instant::now();
        Cluster::signal(victim, Signal::SIGTERM);
        // Its registration goes at once, not after the 5 s lease expiry.
        assert!(
            eventually(Duration::from_secs(2), || !cluster
                .registrations("core-server")
                .iter()
                .any(|(_, pid)| *pid == victim)),
            "replica {victim} still registered"
        );
        let unregistered = stopped.elapsed();
        // It exits within 10 s.
        assert!(
            eventually(Duration::from_secs(10), || !alive(victim)),
            "replica {victim} still running 10 s after SIGTERM"
        );
        eprintln!(
            "core-server {victim}: unregistered {unregistered:?} after SIGTERM, exited within {:?}",
            stopped.elapsed()
        );
        // Writes go on being served, and the watch sees them.
        let name = format!("after-{victim}");
        assert!(eventually(Duration::from_secs(20), || cluster
            .kubectl(&["create", "configmap", &name, "--from-literal=k=v"])
            .code
            == 0));
        assert!(seen(&name), "the watch missed {name}");
        assert!(eventually(Duration::from_secs(20), || cluster
            .registrations("core-server")
            .len()
            == 2));
    }
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn a_sigtermed_extension_replica_leaves_at_once_and_custom_resources_are_served() {
    let cluster = Cluster::start_with(&["--extension-replicas", "2"]);
    assert!(eventually(Duration::from_secs(20), || cluster
        .registrations("extension-server")
        .len()
        == 2));
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
               metadata: {name: notes.example.com}\n\
               spec: {group: example.com, scope: Namespaced, names: {plural: notes, singular: note, kind: Note},\n\
               versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]}\n";
    cluster.kubectl_stdin(&["apply", "-f", "-"], crd).ok();
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/notes.example.com",
        ])
        .ok();
    for (i, victim) in cluster
        .child_pids("extension-server")
        .into_iter()
        .enumerate()
    {
        let stopped = Instant::now();
        Cluster::signal(victim, Signal::SIGTERM);
        assert!(
            eventually(Duration::from_secs(2), || !cluster
                .registrations("extension-server")
                .iter()
                .any(|(_, pid)| *pid == victim)),
            "replica {victim} still registered"
        );
        let unregistered = stopped.elapsed();
        assert!(eventually(Duration::from_secs(10), || !alive(victim)));
        eprintln!(
            "extension-server {victim}: unregistered {unregistered:?} after SIGTERM, exited within {:?}",
            stopped.elapsed()
        );
        let note = format!("apiVersion: example.com/v1\nkind: Note\nmetadata: {{name: n{i}}}\n");
        assert!(eventually(Duration::from_secs(20), || cluster
            .kubectl_stdin(&["apply", "-f", "-"], &note)
            .code
            == 0));
        assert!(eventually(Duration::from_secs(20), || cluster
            .registrations("extension-server")
            .len()
            == 2));
    }
    let notes = cluster.kubectl(&["get", "notes", "-o", "name"]);
    assert_eq!(notes.ok().lines().count(), 2, "{notes:?}");
}

#[test]
fn a_killed_leader_is_replaced_within_its_lease() {
    let cluster = Cluster::start_with(&["--aggregator-replicas", "2"]);
    let key = "/kubechain/leases/aggregator-controllers";
    assert!(eventually(Duration::from_secs(20), || !etcd_value(
        &cluster, key
    )
    .is_empty()));
    let holder = etcd_value(&cluster, key);
    let leader = cluster
        .child_pids("aggregator")
        .into_iter()
        .find(|pid| holder.ends_with(&format!("-{pid}")))
        .expect("the leader among the aggregators");
    let killed = Instant::now();
    Cluster::signal(leader, Signal::SIGKILL);
    // The lease lasts 6 s; the other replica campaigns every 2 s.
    assert!(
        eventually(Duration::from_secs(10), || {
            let now = etcd_value(&cluster, key);
            !now.is_empty() && now != holder
        }),
        "nobody took over {key}"
    );
    eprintln!(
        "leader SIGKILLed: {} took over after {:?}",
        etcd_value(&cluster, key),
        killed.elapsed()
    );
}

#[test]
fn a_stopping_leader_releases_its_lease() {
    let cluster = Cluster::start();
    let key = "/kubechain/leases/aggregator-controllers";
    assert!(eventually(Duration::from_secs(20), || !etcd_value(
        &cluster, key
    )
    .is_empty()));
    let holder = etcd_value(&cluster, key);
    let aggregator = cluster.child_pid("aggregator").expect("an aggregator");
    assert!(holder.ends_with(&format!("-{aggregator}")), "{holder}");
    let stopped = Instant::now();
    Cluster::signal(aggregator, Signal::SIGTERM);
    // Released, not left to expire (the lease lasts 6 s).
    assert!(
        eventually(Duration::from_secs(3), || etcd_value(&cluster, key)
            != holder),
        "the old leader still holds {key}"
    );
    eprintln!(
        "leader lease released {:?} after SIGTERM",
        stopped.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(10), || !alive(aggregator)),
        "the aggregator still runs 10 s after SIGTERM"
    );
    eprintln!("aggregator exited within {:?}", stopped.elapsed());
    // The restarted aggregator leads at once: a namespace deletion completes.
    assert!(eventually(Duration::from_secs(30), || cluster
        .child_pid("aggregator")
        .is_some_and(|pid| pid != aggregator)
        && cluster.kubectl(&["get", "--raw", "/readyz"]).code == 0));
    cluster.kubectl(&["create", "namespace", "brief"]).ok();
    let deleting = Instant::now();
    cluster
        .kubectl(&["delete", "namespace", "brief", "--timeout=20s"])
        .ok();
    eprintln!(
        "namespace deleted {:?} after the request",
        deleting.elapsed()
    );
    // The same after the whole cluster is stopped and started again.
    let mut cluster = cluster;
    cluster.restart();
    cluster.kubectl(&["create", "namespace", "again"]).ok();
    let deleting = Instant::now();
    cluster
        .kubectl(&["delete", "namespace", "again", "--timeout=20s"])
        .ok();
    eprintln!(
        "after a restart, namespace deleted {:?} after the request",
        deleting.elapsed()
    );
}

/// The process group of a process.
fn process_group(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("its stat");
    // After the command's `(name)`: state, parent, process group.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("(name)") + 2..]
        .split(' ')
        .collect();
    fields[2].parse().expect("a process group")
}

#[test]
fn ctrl_c_in_the_launchers_terminal_stops_the_cluster_in_order() {
    let mut cluster = Cluster::start();
    let key = "/kubechain/leases/aggregator-controllers";
    assert!(eventually(Duration::from_secs(20), || !etcd_value(
        &cluster, key
    )
    .is_empty()));
    let holder = etcd_value(&cluster, key);
    // A terminal's Ctrl-C is a SIGINT to its foreground process group,
    // the launcher's: none of the children may be in it.
    let launcher = cluster.launcher_pid().expect("the launcher");
    assert_eq!(process_group(launcher), launcher);
    let children = cluster.children();
    assert!(
        children.iter().any(|(name, _)| name == "etcd"),
        "{children:?}"
    );
    for (name, pid) in &children {
        assert_ne!(
            process_group(*pid),
            launcher,
            "{name} is in the launcher's process group: Ctrl-C stops it at once"
        );
    }
    cluster.interrupt();
    for (name, pid) in &children {
        assert!(!alive(*pid), "{name} runs on after the launcher stopped");
    }
    // The aggregator stopped while etcd still ran: it gave its lease back.
    let log = std::fs::read_to_string(cluster.dir.join("logs/aggregator.log")).expect("its log");
    assert!(
        log.contains("released the leader lease"),
        "the aggregator did not release its lease: {}",
        log.lines().rev().take(10).collect::<Vec<_>>().join("\n")
    );
    // So the next start leads at once: the old holder's lease (6 s) is gone.
    cluster.restart();
    assert_ne!(
        etcd_value(&cluster, key),
        holder,
        "the stopped leader still holds {key}"
    );
}

/// The pids of every process of the cluster, etcd included.
fn all_pids(cluster: &Cluster) -> Vec<(String, u32)> {
    let mut pids = cluster.children();
    pids.sort();
    pids
}

#[test]
fn a_paused_etcd_fails_requests_in_time_and_everything_recovers_after() {
    let cluster = Cluster::start();
    cluster
        .kubectl(&["create", "configmap", "before", "--from-literal=k=v"])
        .ok();
    let pids = all_pids(&cluster);
    let etcd = cluster.child_pid("etcd").expect("etcd");
    let paused = Instant::now();
    Cluster::signal(etcd, Signal::SIGSTOP);
    let timed = |what: &str, answer: tests::Answer, started: Instant| {
        let took = started.elapsed();
        eprintln!(
            "etcd paused: {what} answered {} after {took:?}",
            answer.code
        );
        assert!(
            answer.code == 503 || answer.code == 504,
            "{what}: {} {}",
            answer.code,
            answer.text
        );
        assert_eq!(answer.json["kind"], "Status", "{}", answer.text);
        assert!(took < Duration::from_secs(15), "{what} took {took:?}");
    };
    let started = Instant::now();
    let list = cluster.curl(
        As::Admin,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[],
        None,
    );
    timed("a consistent LIST", list, started);
    let started = Instant::now();
    let create = cluster.curl(
        As::Admin,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &["Content-Type: application/json"],
        Some(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"during"}}"#),
    );
    timed("a create", create, started);
    let ready = cluster.curl(As::Admin, "GET", "/readyz?verbose", &[], None);
    assert_eq!(ready.code, 500, "{}", ready.text);
    assert!(ready.text.contains("[-]etcd failed"), "{}", ready.text);
    std::thread::sleep(Duration::from_secs(10).saturating_sub(paused.elapsed()));
    Cluster::signal(etcd, Signal::SIGCONT);
    let resumed = Instant::now();
    assert!(eventually(Duration::from_secs(30), || cluster
        .kubectl(&["create", "configmap", "after", "--from-literal=k=v"])
        .code
        == 0));
    assert!(eventually(Duration::from_secs(30), || cluster
        .curl(As::Admin, "GET", "/readyz", &[], None)
        .code
        == 200));
    eprintln!(
        "etcd resumed: writes and /readyz back after {:?}",
        resumed.elapsed()
    );
    assert_eq!(
        cluster
            .kubectl(&["get", "configmap", "before", "-o", "jsonpath={.data.k}"])
            .ok(),
        "v"
    );
    assert_eq!(all_pids(&cluster), pids, "a process was restarted");
}

#[test]
fn etcd_killed_under_a_hundred_watchers_leaves_no_silent_gap() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use tests::informer::{Api, Informed, informer};
    const WATCHERS: usize = 100;
    let cluster = Cluster::start();
    let api = Api::new(&cluster, 4);
    api.create_namespace("numbered");
    let path = "/api/v1/namespaces/numbered/configmaps";
    let stop = Arc::new(AtomicBool::new(false));
    let watchers: Vec<Arc<Mutex<Informed>>> = (0..WATCHERS)
        .map(|_| {
            let seen = Arc::new(Mutex::new(Informed::default()));
            let (api, seen2, stop) = (Api::new(&cluster, 1), seen.clone(), stop.clone());
            std::thread::spawn(move || informer(api, path.to_string(), seen2, stop));
            seen
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    // A writer that numbers its objects, retrying each number until it is acknowledged.
    let mut acknowledged = Vec::new();
    let mut killed_at = None;
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut n = 0;
    while n < 120 && Instant::now() < deadline {
        if n == 40 && killed_at.is_none() {
            let etcd = cluster.child_pid("etcd").expect("etcd");
            Cluster::signal(etcd, Signal::SIGKILL);
            killed_at = Some(Instant::now());
        }
        let name = format!("n-{n:04}");
        let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        match api.post(path, &object) {
            (201, _) => {
                acknowledged.push(name);
                n += 1;
            }
            // Saved before its answer was lost: acknowledged all the same.
            (409, _) => {
                acknowledged.push(name);
                n += 1;
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    let recovered = killed_at.map(|k| k.elapsed());
    assert_eq!(acknowledged.len(), 120, "the writer could not finish");
    // Every watcher gets every object, once and in order (or relisted after 410).
    let complete = |seen: &Arc<Mutex<Informed>>| {
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        acknowledged.iter().all(|name| seen.added.contains(name))
    };
    assert!(
        eventually(Duration::from_secs(60), || watchers.iter().all(complete)),
        "{} watchers missed objects",
        watchers.iter().filter(|w| !complete(w)).count()
    );
    stop.store(true, Ordering::Relaxed);
    let (mut resumes, mut relists) = (0, 0);
    for seen in &watchers {
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut sorted = seen.added.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, seen.added, "out of order or twice: {:?}", seen.ends);
        resumes += seen.resumes;
        relists += seen.relists;
    }
    eprintln!(
        "etcd SIGKILLed after 40 of 120 writes: the writer finished {recovered:?} after the kill; \
         {WATCHERS} watchers saw every object once and in order ({resumes} watch resumes, {relists} relists after 410)"
    );
}

#[test]
fn an_aggregated_server_that_never_answers_harms_nobody_else() {
    use std::io::Read;
    let cluster = Cluster::start();
    // It takes connections (the kernel's backlog) and never says a word.
    let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hole.local_addr().unwrap().port();
    let ca_bundle = tests::openssl_self_signed(&cluster.dir, "hole", "hole.hole.svc");
    let manifests = format!(
        "{}---\napiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {{name: v1.hole.example.com}}\n\
         spec: {{group: hole.example.com, version: v1, groupPriorityMinimum: 1000, versionPriority: 15,\n\
         caBundle: {ca_bundle}, service: {{namespace: hole, name: hole, port: 443}}}}\n",
        tests::local_service("hole", "hole", port)
    );
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], &manifests)
        .ok();
    let condition = |field: &str| {
        cluster
            .kubectl(&[
                "get",
                "apiservice",
                "v1.hole.example.com",
                "-o",
                &format!("jsonpath={{.status.conditions[0].{field}}}"),
            ])
            .stdout
    };
    assert!(
        eventually(Duration::from_secs(30), || condition("status") == "False"
            && !condition("message").is_empty()),
        "{}",
        condition("message")
    );
    eprintln!("a silent aggregated server: {}", condition("message"));
    let asked = Instant::now();
    let answer = cluster.curl(
        As::Admin,
        "GET",
        "/apis/hole.example.com/v1/namespaces/default/things",
        &[],
        None,
    );
    assert_eq!(answer.code, 503, "{}", answer.text);
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    // Everyone else is served as before.
    cluster.kubectl(&["get", "configmaps", "-A"]).ok();
    let resources = cluster.kubectl(&["api-resources", "-o", "name"]);
    assert!(
        resources.stdout.lines().any(|l| l == "configmaps"),
        "{resources:?}"
    );
    cluster.kubectl(&["create", "namespace", "passing"]).ok();
    let deleting = Instant::now();
    cluster
        .kubectl(&["delete", "namespace", "passing", "--timeout=30s"])
        .ok();
    eprintln!(
        "namespace deleted {:?} after the request, beside a silent server; kubectl api-resources exit {}",
        deleting.elapsed(),
        resources.code
    );
    let mut sink = [0u8; 1];
    hole.set_nonblocking(true).unwrap();
    let _ = hole.accept().map(|(mut s, _)| s.read(&mut sink));
}

#[test]
fn watchers_that_never_read_cost_bounded_memory_and_slow_nobody() {
    use std::io::Write;
    use tests::informer::Api;
    const WATCHERS: usize = 200;
    let cluster = Cluster::start();
    let api = Api::new(&cluster, 2);
    api.create_namespace("flood");
    let rss = |name: &str| {
        cluster
            .memory_kib()
            .into_iter()
            .filter(|(n, _)| n == name)
            .map(|(_, kib)| kib)
            .sum::<u64>()
    };
    let before = (rss("aggregator"), rss("core-server"));
    // Watches that are opened and then never read (the socket's buffers fill).
    let script = r#"
import socket, ssl, sys, time
port, pki, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
ctx.set_alpn_protocols(["http/1.1"])
socks = []
for i in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /api/v1/namespaces/flood/configmaps?watch=1 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    socks.append(s)
print("open", flush=True)
sys.stdin.read()
"#;
    let mut flood = std::process::Command::new("python3")
        .args(["-c", script, &cluster.port.to_string()])
        .arg(cluster.dir.join("pki"))
        .arg(WATCHERS.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(flood.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "open");
    // 300 objects of 10 KiB: 600 MB of events if every watcher's were kept.
    let data = "x".repeat(10 * 1024);
    let started = Instant::now();
    for n in 0..300 {
        let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("big-{n}")}, "data": {"blob": data}});
        let (status, body) = api.post("/api/v1/namespaces/flood/configmaps", &object);
        assert_eq!(status, 201, "{body}");
    }
    let wrote = started.elapsed();
    // Another client is served as usual.
    let asked = Instant::now();
    cluster
        .kubectl(&["get", "configmaps", "-n", "flood", "-o", "name"])
        .ok();
    let served = asked.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let after = (rss("aggregator"), rss("core-server"));
    eprintln!(
        "{WATCHERS} watchers that never read, 300 x 10 KiB written in {wrote:?}: \
         aggregator {} -> {} MiB, core-server {} -> {} MiB; another client's list took {served:?}",
        before.0 / 1024,
        after.0 / 1024,
        before.1 / 1024,
        after.1 / 1024
    );
    // Kept whole, the events would be 600 MB in each process.
    assert!(
        after.0 < before.0 + 100 * 1024,
        "aggregator grew {} KiB",
        after.0 - before.0
    );
    assert!(
        after.1 < before.1 + 100 * 1024,
        "core-server grew {} KiB",
        after.1 - before.1
    );
    let _ = flood.stdin.take().map(|mut s| s.write_all(b""));
    let _ = flood.kill();
    let _ = flood.wait();
}

/// GET `http://127.0.0.1:<port><path>`: the status code and the body.
fn plain_get(port: u64, path: &str) -> (u16, String) {
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "-w",
            "\n%{http_code}",
            &format!("http://127.0.0.1:{port}{path}"),
        ])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
fn a_stopping_front_door_is_unready_and_serves_on_for_its_shutdown_delay() {
    let cluster = Cluster::start_with_env(&[], &[("KUBECHAIN_SHUTDOWN_DELAY_DURATION", "15s")]);
    // The servers behind the front door answer probes on their metrics
    // port, anonymously, and serve nothing else there.
    let core = cluster.ports()["core-metrics-0"]
        .as_u64()
        .expect("core-server's metrics port");
    let (code, body) = plain_get(core, "/readyz?verbose");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("[+]etcd ok"), "{body}");
    assert_eq!(plain_get(core, "/livez/etcd").0, 200);
    assert_eq!(plain_get(core, "/api/v1/namespaces").0, 404);
    assert_eq!(
        plain_get(core, "/metrics").0,
        404,
        "metrics without --plain-metrics"
    );
    assert_eq!(plain_get(core, "/readyz").0, 200);

    let aggregator = cluster.child_pid("aggregator").expect("an aggregator");
    let ready = cluster.curl(As::Anonymous, "GET", "/readyz", &[], None);
    assert_eq!(ready.code, 200, "{}", ready.text);
    let stopped = Instant::now();
    Cluster::signal(aggregator, Signal::SIGTERM);
    // kube's `shutdown` check: unready at once, so load balancers move on...
    let mut unready = cluster.curl(As::Anonymous, "GET", "/readyz?verbose", &[], None);
    assert!(
        eventually(Duration::from_secs(2), || {
            unready = cluster.curl(As::Anonymous, "GET", "/readyz?verbose", &[], None);
            unready.code == 500
        }),
        "/readyz after SIGTERM: {} {}",
        unready.code,
        unready.text
    );
    assert!(
        unready.text.contains("[-]shutdown failed"),
        "{}",
        unready.text
    );
    // ...while it still serves, liveness and requests alike, for its delay.
    assert_eq!(
        cluster.curl(As::Anonymous, "GET", "/livez", &[], None).code,
        200
    );
    cluster.kubectl(&["get", "namespace", "default"]).ok();
    assert!(
        stopped.elapsed() < Duration::from_secs(15),
        "the checks outlasted the delay"
    );
    assert!(
        alive(aggregator),
        "the aggregator stopped before its delay was over"
    );
    assert!(
        eventually(Duration::from_secs(40), || !alive(aggregator)),
        "the aggregator still runs 40 s after SIGTERM"
    );
}
