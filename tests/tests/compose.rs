//! The docker-compose deployment (issue 6): `deploy/compose-up.sh` with three
//! core servers, kubectl through the published front door, one core
//! container stopped and requests still served; and the three-member etcd
//! variant (`--ha`) serving on after losing its leader; in both, each
//! container mounts only its own keys and no CA key. Each test uses its
//! own compose project, port, certificates and image tag, with the debug
//! binaries this test run was built with, and tears everything down (images
//! included) even when it fails.
//!
//! Runs when `docker info` succeeds; otherwise it prints why and passes.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tests::{bin_dir, docker_unavailable, eventually, free_port};

/// Image builds and compose projects one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// A compose project started by `deploy/compose-up.sh`, torn down on drop.
struct Project {
    name: String,
    dir: PathBuf,
    env: Vec<(&'static str, String)>,
}

impl Project {
    fn new(suffix: &str) -> Project {
        let name = format!("kc-e2e-{}-{suffix}", std::process::id());
        let dir = std::env::temp_dir().join(&name);
        std::fs::create_dir_all(&dir).expect("the project's directory");
        let env = vec![
            ("KUBECHAIN_COMPOSE_PROJECT", name.clone()),
            ("KUBECHAIN_COMPOSE_PORT", free_port().to_string()),
            ("KUBECHAIN_PKI_DIR", dir.join("pki").display().to_string()),
            (
                "KUBECHAIN_COMPOSE_KUBECONFIG",
                dir.join("kubeconfig").display().to_string(),
            ),
            ("KUBECHAIN_IMAGE_TAG", name.clone()),
            ("KUBECHAIN_PROFILE", "debug".to_string()),
            ("KUBECHAIN_BIN_DIR", bin_dir().display().to_string()),
        ];
        Project { name, dir, env }
    }

    /// `deploy/compose-up.sh ARGS`; panics with its output if it fails.
    fn up(&self, args: &[&str]) {
        tests::deploy_script("compose-up.sh", args, &self.env, Some("compose-up: ready"));
    }

    fn kubectl(&self, args: &[&str]) -> tests::Run {
        tests::kubectl_in(&self.dir, args)
    }

    /// The running containers of a service.
    fn containers(&self, service: &str) -> Vec<String> {
        let out = Command::new("docker")
            .args(["ps", "-q", "--filter"])
            .arg(format!("label=com.docker.compose.project={}", self.name))
            .args(["--filter"])
            .arg(format!("label=com.docker.compose.service={service}"))
            .output()
            .expect("docker ps");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }

    /// Whether every running container of `service` passes its health check.
    fn healthy(&self, service: &str) -> bool {
        tests::all_healthy(&self.containers(service))
    }

    fn docker(&self, args: &[&str]) -> String {
        let out = Command::new("docker").args(args).output().expect("docker");
        assert!(
            out.status.success(),
            "docker {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `etcdctl ARGS` inside an etcd container of the project.
    fn etcdctl(&self, container: &str, args: &[&str]) -> String {
        let mut full = vec!["exec", container, "/usr/local/bin/etcdctl"];
        full.extend(args);
        self.docker(&full)
    }

    /// The core servers registered in etcd.
    fn core_registrations(&self) -> usize {
        let etcd = self.containers("etcd");
        let keys = self.etcdctl(
            &etcd[0],
            &[
                "get",
                "--prefix",
                "--keys-only",
                "/kubechain/endpoints/core-server/",
            ],
        );
        keys.lines().filter(|l| !l.is_empty()).count()
    }

    /// The files the project's running containers bind-mount, as (service,
    /// host path, path in the container).
    fn bind_mounts(&self) -> Vec<(String, PathBuf, String)> {
        let ids = self.docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={}", self.name),
        ]);
        let ids: Vec<&str> = ids.split_whitespace().collect();
        assert!(!ids.is_empty(), "no containers in {}", self.name);
        let mut inspect = vec!["inspect"];
        inspect.extend(&ids);
        let containers: Value =
            serde_json::from_str(&self.docker(&inspect)).expect("docker inspect JSON");
        let mut mounts = Vec::new();
        for container in containers.as_array().expect("containers") {
            let service = container["Config"]["Labels"]["com.docker.compose.service"]
                .as_str()
                .expect("a compose service label")
                .to_string();
            for mount in container["Mounts"].as_array().into_iter().flatten() {
                if mount["Type"] == "bind" {
                    mounts.push((
                        service.clone(),
                        PathBuf::from(mount["Source"].as_str().expect("a source")),
                        mount["Destination"]
                            .as_str()
                            .expect("a destination")
                            .to_string(),
                    ));
                }
            }
        }
        mounts
    }

    /// Checks that each container holds only its own keys (`keys`: service
    /// and the key files it mounts) and no CA key: every bind mount is one
    /// file of the PKI directory, never the directory.
    fn assert_only_own_keys(&self, keys: &[(&str, &[&str])]) {
        let mounts = self.bind_mounts();
        for (service, source, destination) in &mounts {
            assert!(
                source.is_file(),
                "{service} mounts {} (not a single file) at {destination}",
                source.display()
            );
            let name = source.file_name().and_then(|n| n.to_str()).unwrap_or("");
            assert!(
                !name.ends_with("ca.key"),
                "{service} mounts the CA key {name}"
            );
        }
        for (service, expected) in keys {
            let mut held: Vec<&str> = mounts
                .iter()
                .filter(|(s, _, _)| s == service)
                .filter_map(|(_, source, _)| source.file_name()?.to_str())
                .filter(|name| name.ends_with(".key"))
                .collect();
            held.sort_unstable();
            held.dedup();
            let mut expected = expected.to_vec();
            expected.sort_unstable();
            assert_eq!(held, expected, "the keys {service} holds");
        }
    }

    /// Creates a configmap; whether kubectl succeeded.
    fn create_configmap(&self, namespace: &str, name: &str) -> bool {
        self.kubectl(&[
            "create",
            "configmap",
            name,
            "-n",
            namespace,
            "--from-literal=k=v",
        ])
        .code
            == 0
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let logs = Command::new("docker")
                .args(["ps", "-a", "--filter"])
                .arg(format!("label=com.docker.compose.project={}", self.name))
                .output();
            if let Ok(out) = logs {
                eprintln!(
                    "containers of {}:\n{}",
                    self.name,
                    String::from_utf8_lossy(&out.stdout)
                );
            }
        }
        tests::deploy_script(
            "compose-down.sh",
            &["--volumes", "--rmi", "all"],
            &self.env,
            None,
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn compose_with_three_core_servers_serves_through_the_loss_of_one() {
    if let Some(why) = docker_unavailable() {
        println!("skipping the compose test: {why}");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let project = Project::new("scale");
    project.up(&["--scale", "core-server=3"]);

    let namespaces = project.kubectl(&["get", "namespaces", "-o", "name"]);
    assert!(
        namespaces.ok().contains("namespace/default"),
        "{}",
        namespaces.stdout
    );
    project.kubectl(&["create", "namespace", "compose"]).ok();
    assert!(project.create_configmap("compose", "before"));
    // core-server publishes the cluster CA it mounts (its certificate
    // only) in every namespace, as the kubeconfig holds it.
    let ca = std::fs::read_to_string(project.dir.join("pki/ca.crt")).expect("the cluster CA");
    let published = || {
        let run = project.kubectl(&[
            "get",
            "configmap",
            "kube-root-ca.crt",
            "-n",
            "compose",
            "-o",
            "jsonpath={.data.ca\\.crt}",
        ]);
        run.code == 0 && run.stdout == ca
    };
    assert!(
        eventually(Duration::from_secs(10), published),
        "kube-root-ca.crt in compose does not hold pki/ca.crt"
    );
    // metrics-server, registered by compose-up.sh, answers through the aggregator's proxy.
    let mut top = project.kubectl(&["top", "node", "--no-headers"]);
    assert!(
        eventually(Duration::from_secs(30), || {
            top = project.kubectl(&["top", "node", "--no-headers"]);
            top.code == 0
        }),
        "kubectl top node: {}",
        top.stderr
    );
    assert_eq!(
        top.stdout.split_whitespace().next(),
        Some("kubechain-compose"),
        "{}",
        top.stdout
    );
    project.assert_only_own_keys(&[
        ("etcd", &["etcd.key"]),
        (
            "aggregator",
            &[
                "aggregator.key",
                "aggregator-internal.key",
                "front-proxy-client.key",
            ],
        ),
        ("core-server", &["core-server.key", "sa.key"]),
        ("extension-server", &["extension-server.key"]),
        ("metrics-server", &["metrics-server.key"]),
    ]);
    // Every server's containers pass their /readyz probe.
    for (service, _) in tests::SERVER_FILES {
        assert!(
            eventually(Duration::from_secs(60), || project.healthy(service)),
            "{service}'s containers are not healthy"
        );
    }
    let cores = project.containers("core-server");
    assert_eq!(cores.len(), 3, "core containers: {cores:?}");
    assert!(
        eventually(Duration::from_secs(20), || project.core_registrations()
            == 3),
        "three core servers registered"
    );

    project.docker(&["stop", &cores[0]]);
    assert_eq!(project.containers("core-server").len(), 2);
    // A clean stop unregisters at once.
    assert!(
        eventually(Duration::from_secs(10), || project.core_registrations()
            == 2),
        "the stopped core server is still registered"
    );
    for n in 0..10 {
        assert!(
            project.create_configmap("compose", &format!("after-{n}")),
            "create {n} after the stop failed"
        );
    }
    let listed = project.kubectl(&["get", "configmaps", "-n", "compose", "-o", "name"]);
    let names = listed.ok();
    assert_eq!(
        names
            .lines()
            .filter(|l| l.starts_with("configmap/after-") || *l == "configmap/before")
            .count(),
        11,
        "{names}"
    );
}

/// The member id of the etcd leader and the container that runs it.
fn etcd_leader(project: &Project) -> String {
    project
        .containers("etcd")
        .into_iter()
        .chain(project.containers("etcd2"))
        .chain(project.containers("etcd3"))
        .find(|container| {
            let status = project.etcdctl(container, &["endpoint", "status", "-w", "json"]);
            let status: Value = serde_json::from_str(&status).unwrap_or_default();
            let status = &status[0]["Status"];
            status["leader"].as_u64().is_some() && status["leader"] == status["header"]["member_id"]
        })
        .expect("an etcd leader")
}

#[test]
fn compose_with_three_etcd_members_serves_through_the_loss_of_the_leader() {
    if let Some(why) = docker_unavailable() {
        println!("skipping the compose HA test: {why}");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let project = Project::new("ha");
    project.up(&["--ha"]);
    // Each member holds its own key only (mounted as /pki/etcd.key).
    project.assert_only_own_keys(&[
        ("etcd", &["etcd.key"]),
        ("etcd2", &["etcd2.key"]),
        ("etcd3", &["etcd3.key"]),
    ]);
    project.kubectl(&["create", "namespace", "ha"]).ok();
    assert!(project.create_configmap("ha", "before"));

    let leader = etcd_leader(&project);
    project.docker(&["stop", &leader]);
    // A new leader is elected within seconds; from then on every write goes through.
    let first = || {
        let run = project.kubectl(&[
            "create",
            "configmap",
            "after-0",
            "-n",
            "ha",
            "--from-literal=k=v",
        ]);
        // A create that timed out during the election may still have been applied.
        run.code == 0 || run.stderr.contains("already exists")
    };
    assert!(
        eventually(Duration::from_secs(30), first),
        "no write after losing the leader"
    );
    for n in 1..6 {
        assert!(
            project.create_configmap("ha", &format!("after-{n}")),
            "create {n} with two of three members failed"
        );
    }
    // The test's own, beside the namespace's kube-root-ca.crt.
    let listed = project.kubectl(&["get", "configmaps", "-n", "ha", "-o", "name"]);
    assert_eq!(
        listed
            .ok()
            .lines()
            .filter(|l| l.starts_with("configmap/after-") || *l == "configmap/before")
            .count(),
        7,
        "{}",
        listed.stdout
    );
}
