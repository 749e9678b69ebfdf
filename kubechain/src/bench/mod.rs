//! `kubechain bench`: the same work against raw etcd and through the front
//! door, in one run, at the same concurrency and with the same bytes, printed
//! as one table with each ratio to etcd and the targets of the performance
//! issue (creates ≥ 0.7× etcd, GET ≥ 2×, LIST ≥ 5×, watch p99 < 100 ms with
//! 1,000 watchers, core-server memory < 3× the JSON it caches), and what
//! admission costs a create (20 webhooks and 20 policies that match
//! nothing: ≥ 0.95× creates without them; one matching policy: its CPU),
//! and the front door and core-server's CPU per GET and create as a
//! multiple of a floor's (a server doing the least the design needs,
//! [`floor`]) in the same run.
//!
//! ```text
//! kubechain bench --size small            # CI smoke: fails on errors, not on numbers
//! kubechain bench --target https://127.0.0.1:6443 --kubeconfig .kubechain/kubeconfig
//! ```

mod admission;
mod aggregated;
mod audit;
mod curves;
mod fairness;
pub mod floor;
mod load;
mod parsers;
mod report;
mod target;
mod watch;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, KvClient, Txn, TxnOp};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::signal::unix::{SignalKind, signal};

use crate::client::{self, Api};
use load::{Throughput, closed_loop, for_each};
use report::{CpuTable, Table};
use target::Target;
use watch::{WatchPlan, WatchResult};

/// Options of `kubechain bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Data directory of the cluster the bench starts (default: a temporary
    /// directory, removed afterwards).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Front door port of the cluster the bench starts (default: a free port).
    #[arg(long)]
    port: Option<u16>,
    /// `small`: a smoke run of a few seconds per phase; `full`: the sizes of
    /// the performance targets.
    #[arg(long, value_enum, default_value_t = Size::Full)]
    size: Size,
    /// Requests in flight at once, the same for etcd and kubechain; each
    /// worker has its own connection.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Bench an existing cluster at this URL instead of starting one.
    #[arg(long)]
    target: Option<String>,
    /// Admin kubeconfig (client certificate) for --target (default: $KUBECONFIG).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// etcd of --target (default: from `ports.json` beside the kubeconfig,
    /// else https://127.0.0.1:2379); an `https://` one is reached with the
    /// certificates in `pki/` beside the kubeconfig.
    #[arg(long)]
    etcd_endpoint: Option<String>,
    /// The cluster's etcd key prefix.
    #[arg(long, default_value = "/registry")]
    etcd_prefix: String,
    /// Draw this cost curve instead of the table (repeatable): `crds`
    /// (1,000 in one `kubectl apply`), `watchers` (100, 1,000, 5,000) or
    /// `objects` (10k, 100k, 300k configmaps), or `parsers` (every body
    /// parser up to the 3 MiB limit, in this process, without a cluster);
    /// `--size small` draws them small.
    #[arg(long = "curve", value_enum)]
    curves: Vec<curves::Curve>,
}

/// How big a run is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Size {
    /// CI smoke run.
    Small,
    /// The issue's sizes.
    Full,
}

/// The sizes and times of a run.
struct Plan {
    /// Objects in the LIST (and in its raw etcd copy).
    objects: usize,
    /// Watchers of the two watch phases.
    watchers: [usize; 2],
    /// Timed length of each throughput phase.
    phase: Duration,
    /// Watch events per second.
    rate: u32,
    /// How long each watch phase writes.
    watch_time: Duration,
    /// How long watchers may lag after the last write.
    grace: Duration,
}

/// Characters of the `data.payload` of every benched configmap: the stored
/// object (with its metadata and managed fields) comes to about 1 KiB.
const PAYLOAD: usize = 770;
/// The targets of the performance issue.
const CREATE_RATIO: f64 = 0.7;
const GET_RATIO: f64 = 2.0;
const LIST_RATIO: f64 = 5.0;
/// RoleBindings in the namespace a ServiceAccount's GETs read.
const RBAC_BINDINGS: usize = 1000;
/// A ServiceAccount's GETs against the admin's: authorization must not show.
const RBAC_RATIO: f64 = 0.9;
/// CPU the front door and core-server may spend together per operation
/// (the cost-of-the-split issue's targets), in µs.
const GET_CPU_US: f64 = 150.0;
/// CPU a cached GET may take through the front door and core-server, as a
/// multiple of the floor's in the same run (the cost-of-the-split issue).
const FLOOR_GET_TIMES: f64 = 3.0;
const CREATE_CPU_US: f64 = 300.0;
const LIST_CPU_US: f64 = 1500.0;
const WATCH_P99: Duration = Duration::from_millis(100);
const MEMORY_TIMES_JSON: f64 = 3.0;

impl Plan {
    fn new(size: Size) -> Plan {
        match size {
            Size::Small => Plan {
                objects: 200,
                watchers: [5, 10],
                phase: Duration::from_secs(2),
                rate: 200,
                watch_time: Duration::from_secs(2),
                grace: Duration::from_secs(5),
            },
            Size::Full => Plan {
                objects: 1000,
                watchers: [100, 1000],
                phase: Duration::from_secs(10),
                rate: 200,
                watch_time: Duration::from_secs(10),
                grace: Duration::from_secs(15),
            },
        }
    }
}

/// Runs `kubechain bench`: prints the table, fails if anything failed.
pub async fn run(args: BenchArgs) -> Result<()> {
    // If whoever started us dies, stop the cluster rather than orphan it.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM);
    raise_open_files_limit();
    let plan = Plan::new(args.size);
    if args.curves.contains(&curves::Curve::Parsers) {
        let size = args.size;
        // On a thread with the servers' stack size (generic-server's runtime).
        let table = std::thread::Builder::new()
            .stack_size(parsers::SERVER_STACK_BYTES)
            .spawn(move || {
                parsers::measure_one_call_if_asked()
                    .then(String::new)
                    .unwrap_or_else(|| parsers::curve(size))
            })?
            .join()
            .map_err(|_| anyhow!("the parser curve panicked"))?;
        print!("{table}");
        if args.curves.iter().all(|c| *c == curves::Curve::Parsers) {
            return Ok(());
        }
    }
    match &args.target {
        Some(url) => eprintln!("bench: targeting {url}"),
        None => eprintln!("bench: starting a cluster"),
    }
    let mut target = Target::open(&args).await?;
    let outcome = tokio::select! {
        outcome = async {
            if args.curves.is_empty() {
                bench(&args, &plan, &mut target).await
            } else {
                curves::run(&args.curves, args.size, &mut target).await
            }
        } => outcome,
        why = interrupted() => Err(anyhow!("{why}")),
    };
    let logs = target.logs().map(|l| l.display().to_string());
    target.close().await;
    let errors = outcome?;
    if !errors.is_empty() {
        let logs = logs
            .map(|l| format!(" (server logs were in {l})"))
            .unwrap_or_default();
        bail!("the bench saw {} kinds of errors{logs}", errors.len());
    }
    Ok(())
}

async fn interrupted() -> String {
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "interrupted".into(),
        _ = term.recv() => "terminated".into(),
    }
}

/// A thousand watchers need a thousand connections; the started servers
/// inherit the limit.
fn raise_open_files_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let want = hard.min(65536);
        if soft < want {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, want, hard);
        }
    }
}

/// Names of this run's namespaces and raw etcd keys, unique per run.
struct Names {
    create_ns: String,
    list_ns: String,
    watch_ns: [String; 2],
    /// Raw etcd keys live under here, outside the cluster's prefix.
    raw: String,
}

impl Names {
    fn new() -> Names {
        let id = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() % 0xff_ffff_ffff)
            .unwrap_or_default();
        let ns = |what: &str| format!("bench-{id:x}-{what}");
        Names {
            create_ns: ns("create"),
            list_ns: ns("list"),
            watch_ns: [ns("watch-a"), ns("watch-b")],
            raw: format!("/kubechain-bench/{id:x}/"),
        }
    }

    fn namespaces(&self) -> Vec<&str> {
        [
            &self.create_ns,
            &self.list_ns,
            &self.watch_ns[0],
            &self.watch_ns[1],
        ]
        .into_iter()
        .map(String::as_str)
        .collect()
    }
}

/// Whether an etcd key is one of the LIST fixture's configmaps (not one
/// that kube keeps in every namespace).
fn is_benched(key: &str) -> bool {
    key.rsplit('/')
        .next()
        .is_some_and(|name| name.starts_with("object-"))
}

/// A configmap of about 1 KiB, as the request body.
fn configmap(name: &str) -> Bytes {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "kubechain-bench"}},
        "data": {"payload": "x".repeat(PAYLOAD)},
    })
    .to_string()
    .into()
}

/// Creates configmaps `<prefix>-<n>` (n from `names`) in `namespace` from
/// every client for `slice`, as a closed loop.
fn create_configmaps(
    apis: &[Api],
    namespace: &str,
    prefix: &'static str,
    names: &std::sync::Arc<std::sync::atomic::AtomicU64>,
    slice: Duration,
) -> impl std::future::Future<Output = Throughput> + use<> {
    let path = format!("/api/v1/namespaces/{namespace}/configmaps");
    let names = names.clone();
    closed_loop(apis.to_vec(), slice, move |api: Api, _| {
        let path = path.clone();
        let name = format!(
            "{prefix}-{}",
            names.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        async move {
            api.call(
                Method::POST,
                &path,
                Some(configmap(&name)),
                StatusCode::CREATED,
            )
            .await
            .map(drop)
        }
    })
}

/// Measures everything, prints the table, and returns the errors seen.
async fn bench(args: &BenchArgs, plan: &Plan, target: &mut Target) -> Result<Vec<String>> {
    let names = Names::new();
    let concurrency = args.concurrency.max(1);
    // A second front door that audits, for the audit rows (a cluster the
    // bench started only).
    let audited = match target.start_audited_front_door().await? {
        Some(url) => Some(
            (0..concurrency)
                .map(|_| target.credentials.at(&url).api())
                .collect::<Result<Vec<_>>>()?,
        ),
        None => None,
    };
    // An author's aggregated server, beside a cluster the bench started.
    let wardle = aggregated::start(target, &target.credentials.api()?).await?;
    let credentials = &target.credentials;
    let admin = credentials.api()?;
    let http_version = admin.http_version().await?;
    let apis = (0..concurrency)
        .map(|_| credentials.api())
        .collect::<Result<Vec<_>>>()?;
    let mut etcds = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        etcds.push(client::etcd(&target.etcd, target.etcd_tls.clone()).await?);
    }
    let mut errors = Vec::new();
    // The core server's memory and the JSON stored before the run: what the
    // cache grows by is set against the JSON the run adds.
    let idle = (
        target.rss("core-server"),
        stored_json(&etcds[0], &format!("{}/", args.etcd_prefix))
            .await?
            .0,
    );

    for ns in names.namespaces() {
        create_namespace(&admin, ns).await?;
    }
    // The LIST fixture: created through kubechain, then the same stored bytes
    // copied to raw etcd keys, so both sides read identical values.
    eprintln!("bench: creating {} configmaps to list", plan.objects);
    let list_path = format!("/api/v1/namespaces/{}/configmaps", names.list_ns);
    let path = list_path.clone();
    for_each(&apis, plan.objects, move |api: Api, i| {
        let path = path.clone();
        async move {
            api.call(
                Method::POST,
                &path,
                Some(configmap(&format!("object-{i}"))),
                StatusCode::CREATED,
            )
            .await
            .map(drop)
        }
    })
    .await
    .context("creating the LIST fixture")?;
    // The namespace also holds what kube keeps in every namespace (the
    // kube-root-ca.crt ConfigMap): copied with the rest, so both sides read
    // the same values, but never counted as one of the bench's objects.
    let stored = range(
        &etcds[0],
        &format!("{}/configmaps/{}/", args.etcd_prefix, names.list_ns),
    )
    .await?;
    let own: Vec<&Vec<u8>> = stored
        .iter()
        .filter(|(key, _)| is_benched(key))
        .map(|(_, value)| value)
        .collect();
    if own.len() != plan.objects {
        bail!(
            "etcd holds {} of the {} configmaps just created (is --etcd-prefix right?)",
            own.len(),
            plan.objects
        );
    }
    let listed_objects = stored.len();
    let raw_list = format!("{}list/", names.raw);
    let copies: Vec<(String, Vec<u8>)> = stored
        .iter()
        .map(|(key, value)| {
            (
                format!("{raw_list}{}", key.rsplit('/').next().unwrap_or_default()),
                value.clone(),
            )
        })
        .collect();
    let template = (*own.first().context("no LIST fixture")?).clone();
    let object_bytes = own.iter().map(|v| v.len()).sum::<usize>() / own.len();
    let copies = std::sync::Arc::new(copies);
    for_each(&etcds, listed_objects, move |mut kv: KvClient, i| {
        let (key, value) = copies[i as usize].clone();
        async move { kv.put(key, value, None).await.map(drop).map_err(Into::into) }
    })
    .await
    .context("copying the LIST fixture to raw etcd keys")?;
    let listed: Value = serde_json::from_slice(
        &admin
            .call(Method::GET, &list_path, None, StatusCode::OK)
            .await?,
    )?;
    let items = listed["items"].as_array().map(Vec::len).unwrap_or_default();
    if items != listed_objects {
        bail!(
            "LIST returned {items} of the {listed_objects} configmaps stored ({} of them the bench's)",
            plan.objects
        );
    }

    // The floor: the GET's own bytes, answered by the least a front door does.
    let get_path = format!("{list_path}/object-0");
    let floors = match target.dir() {
        Some(dir) if dir.join("pki/aggregator.key").exists() => {
            let body = admin
                .call(Method::GET, &get_path, None, StatusCode::OK)
                .await?;
            let list = admin
                .call(Method::GET, &list_path, None, StatusCode::OK)
                .await?;
            let pki = dir.join("pki");
            Some(floor::Floors::start(
                &dir,
                &pki,
                &body,
                (&list_path, &list),
            )?)
        }
        _ => None,
    };
    let mut pids = target.pids();
    pids.extend(floors.iter().flat_map(floor::Floors::pids));
    let mut table = Table::default();
    let mut cpu = CpuTable::new(&pids);
    let seconds = plan.phase.as_secs_f64();

    // Creates: a create-if-absent transaction against a POST of the same object.
    let raw_create = format!("{}create/", names.raw);
    let etcd_creates = phase(
        &mut cpu,
        "raw etcd creates",
        seconds,
        closed_loop(etcds.clone(), plan.phase, move |mut kv: KvClient, i| {
            let key = format!("{raw_create}{i}");
            let value = template.clone();
            async move {
                let txn = Txn::new()
                    .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(key, value, None)]);
                if !kv.txn(txn).await?.succeeded() {
                    bail!("create transaction found the key already there");
                }
                Ok(())
            }
        }),
    )
    .await;
    let create_path = format!("/api/v1/namespaces/{}/configmaps", names.create_ns);
    let chain_creates = phase(
        &mut cpu,
        "kubechain creates",
        seconds,
        closed_loop(apis.clone(), plan.phase, move |api: Api, i| {
            let path = create_path.clone();
            async move {
                api.call(
                    Method::POST,
                    &path,
                    Some(configmap(&format!("created-{i}"))),
                    StatusCode::CREATED,
                )
                .await
                .map(drop)
            }
        }),
    )
    .await;
    table.throughput("creates/s", &etcd_creates, &chain_creates, CREATE_RATIO);
    admission::measure(
        &admin,
        &apis,
        &names.create_ns,
        plan.phase,
        &mut cpu,
        &mut table,
        &mut errors,
    )
    .await?;
    if let Some(audited) = &audited {
        audit::measure(
            &apis,
            audited,
            &names.create_ns,
            plan.phase,
            &mut cpu,
            &mut table,
            &mut errors,
        )
        .await;
    }

    // GET of one object: a linearizable point read against a GET.
    let raw_key = format!("{raw_list}object-0");
    let etcd_gets = phase(
        &mut cpu,
        "raw etcd GETs",
        seconds,
        closed_loop(etcds.clone(), plan.phase, move |mut kv: KvClient, _| {
            let key = raw_key.clone();
            async move {
                let found = kv.get(key, None).await?.kvs().len();
                if found != 1 {
                    bail!("point read found {found} keys");
                }
                Ok(())
            }
        }),
    )
    .await;
    // The same GETs as a ServiceAccount bound to view, among many
    // RoleBindings: what authorizing by RBAC costs against the admin's.
    // The two run in alternating slices, so that a machine whose speed
    // drifts during the run (a shared VM's does) slows both alike.
    let readers = service_account_apis(&admin, credentials, &names.list_ns, concurrency).await?;
    fairness::measure(
        &admin,
        credentials,
        &readers[0],
        &names.list_ns,
        &list_path,
        &get_path,
        plan.phase,
        &mut table,
        &mut errors,
    )
    .await?;
    let [chain_gets, reader_gets] = alternating(
        &mut cpu,
        ["kubechain GETs", "kubechain GETs as a ServiceAccount"],
        plan.phase,
        |slice| gets(apis.clone(), slice, &get_path),
        |slice| gets(readers.clone(), slice, &get_path),
    )
    .await;
    table.throughput("GET/s (one object)", &etcd_gets, &chain_gets, GET_RATIO);
    let floor_phases = match &floors {
        Some(floors) => {
            floor::measure(
                floors,
                credentials,
                concurrency,
                &get_path,
                [
                    ("raw etcd creates", etcd_creates.ops),
                    ("kubechain creates", chain_creates.ops),
                ],
                (&list_path, plan.objects * PAYLOAD),
                plan.phase,
                &mut cpu,
                &mut table,
                &mut errors,
            )
            .await?
        }
        None => Vec::new(),
    };
    table.versus(
        &format!("GET/s as a ServiceAccount ({RBAC_BINDINGS} RoleBindings)"),
        "admin",
        &chain_gets,
        &reader_gets,
        RBAC_RATIO,
    );

    // LIST: a linearizable range read of the copies against a LIST.
    let objects = plan.objects;
    let raw_prefix = raw_list.clone();
    let etcd_lists = phase(
        &mut cpu,
        "raw etcd LISTs",
        seconds,
        closed_loop(etcds.clone(), plan.phase, move |mut kv: KvClient, _| {
            let prefix = raw_prefix.clone();
            async move {
                let found = kv
                    .get(prefix, Some(GetOptions::new().with_prefix()))
                    .await?
                    .kvs()
                    .len();
                if found != listed_objects {
                    bail!("range read found {found} of {listed_objects} keys");
                }
                Ok(())
            }
        }),
    )
    .await;
    let chain_lists = phase(
        &mut cpu,
        "kubechain LISTs",
        seconds,
        lists(apis.clone(), plan.phase, &list_path, objects * PAYLOAD),
    )
    .await;
    table.throughput(
        &format!("LIST/s ({objects} objects)"),
        &etcd_lists,
        &chain_lists,
        LIST_RATIO,
    );

    for (phase_name, result) in [
        ("creates", &etcd_creates),
        ("creates", &chain_creates),
        ("GETs", &etcd_gets),
        ("GETs", &chain_gets),
        ("LISTs", &etcd_lists),
        ("LISTs", &chain_lists),
    ] {
        result.report_failures(phase_name, &mut errors);
    }

    // The aggregator's proxy: metrics-server's node list through the front
    // door against the same GETs sent to metrics-server directly, as the
    // proxy sends them (front-proxy certificate, identity headers).
    if let Some(direct) = target
        .dir()
        .and_then(|dir| metrics_server_client(&dir).transpose())
    {
        let direct = direct?;
        let path = "/apis/metrics.k8s.io/v1beta1/nodes";
        let get = move |api: Api, _| async move {
            api.call(Method::GET, path, None, StatusCode::OK)
                .await
                .map(drop)
        };
        let directs = (0..concurrency)
            .map(|_| direct.api_with_headers(identity_headers()))
            .collect::<Result<Vec<_>>>()?;
        let direct_gets = phase(
            &mut cpu,
            "metrics-server GETs, direct",
            seconds,
            closed_loop(directs, plan.phase, get),
        )
        .await;
        let proxied_gets = phase(
            &mut cpu,
            "metrics-server GETs, proxied",
            seconds,
            closed_loop(apis.clone(), plan.phase, get),
        )
        .await;
        table.proxy(
            "aggregated API GET/s (metrics-server)",
            &direct_gets,
            &proxied_gets,
        );
        for (what, result) in [
            ("direct metrics-server GETs", &direct_gets),
            ("proxied metrics-server GETs", &proxied_gets),
        ] {
            result.report_failures(what, &mut errors);
        }
    }

    let flunder_phases = match &wardle {
        Some(wardle) => {
            aggregated::measure(
                wardle,
                &admin,
                &apis,
                &readers[0],
                &names.list_ns,
                plan.phase,
                &mut cpu,
                &mut table,
                &mut errors,
            )
            .await?
        }
        None => Vec::new(),
    };

    // The cache's growth, measured before watchers add their buffers.
    if let (Some(before), Some(after)) = (idle.0, target.rss("core-server")) {
        let added = stored_json(&etcds[0], &format!("{}/", args.etcd_prefix))
            .await?
            .0
            .saturating_sub(idle.1);
        table.cache_growth(before, after, added, MEMORY_TIMES_JSON);
    }

    // Watch delivery latency.
    let mut notes = Vec::new();
    for (watchers, ns) in plan.watchers.iter().zip(&names.watch_ns) {
        eprintln!(
            "bench: watch latency, {watchers} watchers, {} events/s for {:.0} s",
            plan.rate,
            plan.watch_time.as_secs_f64()
        );
        let watch_plan = WatchPlan {
            watchers: *watchers,
            rate: plan.rate,
            duration: plan.watch_time,
            grace: plan.grace,
            sample: None,
        };
        let before = cpu.snapshot();
        let result = match watch::measure(credentials, ns, &watch_plan).await {
            Ok(result) => result,
            Err(e) => WatchResult {
                watchers: *watchers,
                failed: 1,
                errors: vec![format!("{e:#}")],
                ..Default::default()
            },
        };
        cpu.record(&format!("watch, {watchers} watchers"), before);
        eprintln!(
            "bench:   p50 {:?}, p99 {:?}, {} delivered, {} lost",
            result.p50, result.p99, result.delivered, result.lost
        );
        if result.failed > 0 {
            errors.push(format!(
                "watch with {watchers} watchers: {} failures; first: {}",
                result.failed,
                result.errors.join(" | ")
            ));
        }
        notes.push(format!(
            "watch, {watchers} watchers: {:.0} writes/s of {} asked, POST p50 {:.1} ms (included in every delivery latency)",
            result.write_rate,
            plan.rate,
            result.write_p50.as_secs_f64() * 1000.0
        ));
        table.watch(&result, WATCH_P99);
    }

    if let Some(exit) = target.exited() {
        errors.push(exit);
    }
    // Memory, against the JSON of everything the servers cache.
    let (json_bytes, json_objects) =
        stored_json(&etcds[0], &format!("{}/", args.etcd_prefix)).await?;
    for (name, pid) in target.pids() {
        let memory =
            pid.and_then(|pid| target::memory(pid).ok_or_else(|| "no /proc entry".to_string()));
        table.memory(
            name,
            memory,
            (name == "core-server").then_some((json_bytes, MEMORY_TIMES_JSON)),
        );
    }
    table.json_size(json_bytes, json_objects);

    let size = if args.size == Size::Small {
        "small"
    } else {
        "full"
    };
    println!(
        "kubechain bench: size {size}, concurrency {concurrency} (one connection per worker, {http_version} to the front door), {seconds:.0} s per phase,"
    );
    println!(
        "objects of {object_bytes} bytes of stored JSON, watch events at {}/s for {:.0} s",
        plan.rate,
        plan.watch_time.as_secs_f64()
    );
    println!();
    print!("{}", table.render());
    println!();
    for note in &notes {
        println!("{note}");
    }
    println!();
    print!(
        "{}",
        cpu.render(
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        )
    );
    println!();
    let mut per_op = vec![
        ("raw etcd creates", etcd_creates.ops, None),
        ("kubechain creates", chain_creates.ops, Some(CREATE_CPU_US)),
        ("raw etcd GETs", etcd_gets.ops, None),
        ("kubechain GETs", chain_gets.ops, Some(GET_CPU_US)),
        ("raw etcd LISTs", etcd_lists.ops, None),
        ("kubechain LISTs", chain_lists.ops, Some(LIST_CPU_US)),
    ];
    per_op.extend(floor_phases.iter().map(|(name, ops)| (*name, *ops, None)));
    per_op.extend(flunder_phases.iter().map(|(name, ops)| (*name, *ops, None)));
    print!("{}", cpu.per_op(&per_op));
    println!();
    print_errors(&errors);

    if !target.is_disposable() {
        cleanup(&admin, &etcds[0], &names).await;
    }
    Ok(errors)
}

/// Creates a namespace through the front door.
async fn create_namespace(admin: &Api, name: &str) -> Result<()> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    admin
        .call(
            Method::POST,
            "/api/v1/namespaces",
            Some(body.to_string().into()),
            StatusCode::CREATED,
        )
        .await
        .map(drop)
}

/// Prints the errors a run saw, or that it saw none (the line the tests look for).
fn print_errors(errors: &[String]) {
    if errors.is_empty() {
        println!("errors: none");
    } else {
        println!("errors:");
        for e in errors {
            println!("  {e}");
        }
    }
}

/// GETs of one path by `apis` for `duration`, each expecting 200.
async fn gets(apis: Vec<Api>, duration: Duration, path: &str) -> Throughput {
    let path = path.to_string();
    closed_loop(apis, duration, move |api: Api, _| {
        let path = path.clone();
        async move {
            api.call(Method::GET, &path, None, StatusCode::OK)
                .await
                .map(drop)
        }
    })
    .await
}

/// LISTs of `path` by `apis` for `duration`, each expecting 200 and at
/// least `least` bytes (parsing every list would load the bench, not the
/// server: a complete list is at least as long as its payloads).
async fn lists(apis: Vec<Api>, duration: Duration, path: &str, least: usize) -> Throughput {
    let path = path.to_string();
    closed_loop(apis, duration, move |api: Api, _| {
        let path = path.clone();
        async move {
            let body = api.call(Method::GET, &path, None, StatusCode::OK).await?;
            if body.len() < least {
                bail!("LIST returned {} bytes, fewer than {least}", body.len());
            }
            Ok(())
        }
    })
    .await
}

/// A RoleBinding named `account` of `view` to the ServiceAccount `account`.
fn view_binding(namespace: &str, account: &str) -> String {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": account},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    })
    .to_string()
}

/// `count` clients authenticating as a ServiceAccount bound to `view` in
/// `namespace`, after [`RBAC_BINDINGS`] RoleBindings of other accounts
/// there; ready once the front door lets the account read.
async fn service_account_apis(
    admin: &Api,
    credentials: &client::Credentials,
    namespace: &str,
    count: usize,
) -> Result<Vec<Api>> {
    eprintln!("bench: creating {RBAC_BINDINGS} RoleBindings");
    create_service_account(admin, namespace, "bench-reader").await?;
    let bindings =
        format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings");
    let others = (0..count).map(|_| admin.clone()).collect::<Vec<_>>();
    let (path, owned) = (bindings.clone(), namespace.to_string());
    for_each(&others, RBAC_BINDINGS - 1, move |api: Api, i| {
        let path = path.clone();
        let body = view_binding(&owned, &format!("other-{i}"));
        async move {
            api.call(Method::POST, &path, Some(body.into()), StatusCode::CREATED)
                .await
                .map(drop)
        }
    })
    .await
    .context("creating RoleBindings")?;
    admin
        .call(
            Method::POST,
            &bindings,
            Some(view_binding(namespace, "bench-reader").into()),
            StatusCode::CREATED,
        )
        .await?;
    let token = token_of(admin, namespace, "bench-reader").await?;
    let apis = (0..count)
        .map(|_| credentials.bearer(&token))
        .collect::<Result<Vec<_>>>()?;
    let probe = format!("/api/v1/namespaces/{namespace}/configmaps?limit=1");
    for _ in 0..100 {
        if apis[0]
            .call(Method::GET, &probe, None, StatusCode::OK)
            .await
            .is_ok()
        {
            return Ok(apis);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("the ServiceAccount could not read {probe} within 5 s")
}

/// Creates the ServiceAccount `namespace/name`.
async fn create_service_account(admin: &Api, namespace: &str, name: &str) -> Result<()> {
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}});
    admin
        .call(
            Method::POST,
            &format!("/api/v1/namespaces/{namespace}/serviceaccounts"),
            Some(account.to_string().into()),
            StatusCode::CREATED,
        )
        .await
        .map(drop)
}

/// A token of the ServiceAccount `namespace/name` (a TokenRequest).
async fn token_of(admin: &Api, namespace: &str, name: &str) -> Result<String> {
    let request =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let answer: Value = serde_json::from_slice(
        &admin
            .call(
                Method::POST,
                &format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"),
                Some(request.to_string().into()),
                StatusCode::CREATED,
            )
            .await
            .context("requesting a ServiceAccount token")?,
    )?;
    Ok(answer["status"]["token"]
        .as_str()
        .context("a token")?
        .to_string())
}

/// A client of the cluster's metrics-server as the aggregator's proxy is
/// one, from the data directory `kubechain up` keeps; `None` when the
/// cluster runs none.
fn metrics_server_client(dir: &std::path::Path) -> Result<Option<client::Credentials>> {
    let Ok(ports) = std::fs::read_to_string(dir.join("ports.json")) else {
        return Ok(None);
    };
    let Some(port) = serde_json::from_str::<Value>(&ports)?["metrics"].as_u64() else {
        return Ok(None);
    };
    let ca = std::fs::read(dir.join("pki/ca.crt")).context("reading ca.crt")?;
    front_proxy_client(dir, &format!("https://127.0.0.1:{port}"), ca).map(Some)
}

/// A client of an aggregated server at `server` (whose certificate `ca`
/// signed) as the aggregator's proxy is one: its front-proxy certificate,
/// from the data directory `kubechain up` keeps.
fn front_proxy_client(
    dir: &std::path::Path,
    server: &str,
    ca: Vec<u8>,
) -> Result<client::Credentials> {
    let pki = dir.join("pki");
    let read =
        |name: &str| std::fs::read(pki.join(name)).with_context(|| format!("reading {name}"));
    let tls = client::tls_config(
        &ca,
        Some((
            &read("front-proxy-client.crt")?,
            &read("front-proxy-client.key")?,
        )),
    )?;
    Ok(client::Credentials {
        server: server.to_string(),
        tls,
        ca,
    })
}

/// The identity the aggregator's proxy asserts for the admin.
fn identity_headers() -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        "X-Remote-User",
        reqwest::header::HeaderValue::from_static("kubernetes-admin"),
    );
    headers.insert(
        "X-Remote-Group",
        reqwest::header::HeaderValue::from_static("system:masters"),
    );
    headers
}

/// Runs one timed phase with a progress line, recording who used the CPU.
async fn phase(
    cpu: &mut CpuTable,
    name: &str,
    seconds: f64,
    work: impl std::future::Future<Output = Throughput>,
) -> Throughput {
    eprintln!("bench: {name} ({seconds:.0} s)");
    let before = cpu.snapshot();
    let result = work.await;
    cpu.record(name, before);
    eprintln!(
        "bench:   {:.0}/s, {} failed",
        result.per_second(),
        result.failed
    );
    result
}

/// Slices [`alternating`] cuts each of its two phases into.
const SLICES: u32 = 4;

/// Runs two phases in alternating slices ([`SLICES`] of each), so that a
/// machine whose speed drifts during the run slows both alike.
async fn alternating<A, B, FA, FB>(
    cpu: &mut CpuTable,
    names: [&str; 2],
    duration: Duration,
    a: FA,
    b: FB,
) -> [Throughput; 2]
where
    FA: Fn(Duration) -> A,
    FB: Fn(Duration) -> B,
    A: std::future::Future<Output = Throughput>,
    B: std::future::Future<Output = Throughput>,
{
    alternating_sampled(cpu, names, duration, SLICES, [&[], &[]], a, b)
        .await
        .0
}

/// [`alternating`] in `rounds` slices of each phase, with each slice's CPU
/// µs per operation of the processes `sampled` names for its phase
/// (summed): the spread of a cost over one sitting.
async fn alternating_sampled<A, B, FA, FB>(
    cpu: &mut CpuTable,
    names: [&str; 2],
    duration: Duration,
    rounds: u32,
    sampled: [&[&str]; 2],
    a: FA,
    b: FB,
) -> ([Throughput; 2], [Vec<f64>; 2])
where
    FA: Fn(Duration) -> A,
    FB: Fn(Duration) -> B,
    A: std::future::Future<Output = Throughput>,
    B: std::future::Future<Output = Throughput>,
{
    let slice = duration / rounds.max(1);
    eprintln!(
        "bench: {} and {} ({:.0} s each, alternating)",
        names[0],
        names[1],
        duration.as_secs_f64()
    );
    let mut totals = [Throughput::default(), Throughput::default()];
    let mut samples = [Vec::new(), Vec::new()];
    for round in 0..rounds.max(1) {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let before = cpu.snapshot();
            let done = if which == 0 {
                a(slice).await
            } else {
                b(slice).await
            };
            let used = match sampled[which] {
                [] => None,
                processes => cpu.used_since(&before, processes),
            };
            if let Some(used) = used.filter(|_| done.ops > 0) {
                samples[which].push(used.as_secs_f64() * 1e6 / done.ops as f64);
            }
            cpu.record(names[which], before);
            totals[which].follow(done);
        }
    }
    for (name, total) in names.iter().zip(&totals) {
        eprintln!(
            "bench:   {name}: {:.0}/s, {} failed",
            total.per_second(),
            total.failed
        );
    }
    (totals, samples)
}

/// Every key and value under `prefix`, read in pages.
async fn range(kv: &KvClient, prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    page_through(kv, prefix, |key, value| {
        out.push((String::from_utf8_lossy(key).into_owned(), value.to_vec()))
    })
    .await?;
    Ok(out)
}

/// The total size and count of the values under `prefix`.
async fn stored_json(kv: &KvClient, prefix: &str) -> Result<(u64, u64)> {
    let (mut bytes, mut count) = (0u64, 0u64);
    page_through(kv, prefix, |_, value| {
        bytes += value.len() as u64;
        count += 1;
    })
    .await?;
    Ok((bytes, count))
}

async fn page_through(
    kv: &KvClient,
    prefix: &str,
    mut each: impl FnMut(&[u8], &[u8]),
) -> Result<()> {
    let mut kv = kv.clone();
    let mut end = prefix.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    let mut from = prefix.as_bytes().to_vec();
    loop {
        let response = kv
            .get(
                from.clone(),
                Some(GetOptions::new().with_range(end.clone()).with_limit(500)),
            )
            .await?;
        for entry in response.kvs() {
            each(entry.key(), entry.value());
        }
        match response.kvs().last() {
            Some(last) if response.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => return Ok(()),
        }
    }
}

/// Removes what the bench made in a cluster that outlives it.
async fn cleanup(admin: &Api, kv: &KvClient, names: &Names) {
    for ns in names.namespaces() {
        if let Err(e) = admin
            .send(Method::DELETE, &format!("/api/v1/namespaces/{ns}"), None)
            .await
        {
            eprintln!("bench: could not delete namespace {ns}: {e:#}");
        }
    }
    if let Err(e) = kv
        .clone()
        .delete(names.raw.as_str(), Some(DeleteOptions::new().with_prefix()))
        .await
    {
        eprintln!("bench: could not delete {}: {e}", names.raw);
    }
}
