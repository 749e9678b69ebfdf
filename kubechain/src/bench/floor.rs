//! The bench's floor: the least a front door can do for a request. An
//! actix-web server on rustls (HTTP/2 and HTTP/1.1, the front door's stack
//! and certificate, the same worker threads) answering every request with
//! fixed bytes, run as its own process (`kubechain-floor`) so that its CPU
//! is measured alone. kubechain's cost per request is reported as a
//! multiple of its cost in the same run.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::pin::Pin;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use futures::Stream;
use proto::delegation::delegation_client::DelegationClient;
use proto::delegation::delegation_server::{Delegation, DelegationServer};
use proto::delegation::{self as pb, api_response_frame::Frame};

use super::load::{Throughput, closed_loop};
use super::report::{CpuTable, Table};
use super::{FLOOR_GET_TIMES, alternating, alternating_sampled, configmap, gets, lists};
use crate::client::{Api, Credentials, Http};
use reqwest::{Method, StatusCode};

/// The process name the CPU table knows the floor by.
pub const FLOOR: &str = "kubechain-floor";

/// Options of the floor server (`kubechain floor`, run by the bench).
#[derive(clap::Args, Debug)]
pub struct FloorArgs {
    /// Where to listen (HTTPS).
    #[arg(long, required_unless_present = "serve_socket")]
    listen: Option<SocketAddr>,
    /// PEM serving certificate.
    #[arg(long, required_unless_present = "serve_socket")]
    cert: Option<PathBuf>,
    /// Its PEM private key.
    #[arg(long, required_unless_present = "serve_socket")]
    key: Option<PathBuf>,
    /// The bytes every response carries (a JSON object).
    #[arg(long)]
    body: PathBuf,
    /// `PATH=FILE`: requests of PATH are answered with FILE's bytes instead
    /// (a LIST's); repeatable.
    #[arg(long = "route")]
    routes: Vec<String>,
    /// HTTP worker threads (the front door's default).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Hand every request on with one gRPC call (kubechain's delegation
    /// protocol) to the floor's backend at this Unix socket, as the front
    /// door hands requests to core-server, instead of answering it here.
    #[arg(long)]
    backend: Option<PathBuf>,
    /// Be that backend: answer every delegated request on this Unix socket
    /// with the body.
    #[arg(long, conflicts_with_all = ["listen", "backend"])]
    serve_socket: Option<PathBuf>,
}

/// Serves until killed: HTTPS answering `args.body` (itself, or from its
/// backend), or, with `--serve-socket`, the backend.
pub fn serve(args: FloorArgs) -> Result<()> {
    let body = Bytes::from(std::fs::read(&args.body).context("reading the floor's body")?);
    if let Some(socket) = &args.serve_socket {
        return serve_backend(socket, body);
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (Some(listen), Some(cert), Some(key)) = (args.listen, &args.cert, &args.key) else {
        bail!("--listen, --cert and --key are required");
    };
    let certs = rustls_pemfile::certs(&mut std::fs::read(cert)?.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .context("reading the floor's certificate")?;
    let key = rustls_pemfile::private_key(&mut std::fs::read(key)?.as_slice())?
        .context("no private key for the floor")?;
    let tls = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    let mut routes = std::collections::HashMap::new();
    for route in &args.routes {
        let (path, file) = route.split_once('=').context("a --route is PATH=FILE")?;
        let bytes = std::fs::read(file).with_context(|| format!("reading {file}"))?;
        routes.insert(path.to_string(), Bytes::from(bytes));
    }
    let routes = std::sync::Arc::new(routes);
    let backend = args.backend.clone();
    actix_web::rt::System::new().block_on(async move {
        let backend = backend.map(backend_client);
        actix_web::HttpServer::new(move || {
            let (body, backend, routes) = (body.clone(), backend.clone(), routes.clone());
            actix_web::App::new().default_service(actix_web::web::to(
                move |req: actix_web::HttpRequest, sent: Bytes| {
                    let backend = backend.clone();
                    let body = routes.get(req.path()).unwrap_or(&body).clone();
                    async move {
                        match backend {
                            Some(client) => delegate(client, &req, sent).await,
                            None => actix_web::HttpResponse::build(status_of(req.method()))
                                .content_type("application/json")
                                .body(body),
                        }
                    }
                },
            ))
        })
        // As the front door: responses are written whole, never held for an ACK.
        .on_connect(|conn, _| {
            type Tls = actix_tls::accept::rustls_0_23::TlsStream<actix_web::rt::net::TcpStream>;
            if let Some(tls) = conn.downcast_ref::<Tls>() {
                let _ = tls.get_ref().0.set_nodelay(true);
            }
        })
        .workers(args.workers)
        .disable_signals()
        .bind_rustls_0_23(listen, tls)?
        .run()
        .await
    })?;
    Ok(())
}

/// What the floor answers `method` with: 201 to a POST (a create), 200 else.
fn status_of(method: &actix_web::http::Method) -> actix_web::http::StatusCode {
    match *method == actix_web::http::Method::POST {
        true => actix_web::http::StatusCode::CREATED,
        false => actix_web::http::StatusCode::OK,
    }
}

/// A delegation client of the backend at `socket`.
fn backend_client(socket: PathBuf) -> DelegationClient<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_static("http://floor-backend")
        .connect_with_connector_lazy(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }));
    DelegationClient::new(channel)
}

/// One request handed to the backend, its frames gathered into the response.
async fn delegate(
    mut client: DelegationClient<tonic::transport::Channel>,
    req: &actix_web::HttpRequest,
    body: Bytes,
) -> actix_web::HttpResponse {
    let request = pb::ApiRequest {
        method: req.method().to_string(),
        path: req.path().to_string(),
        query: req.query_string().to_string(),
        body,
        ..Default::default()
    };
    let gathered = async {
        let mut frames = client.handle(request).await?.into_inner();
        let (mut status, mut bytes) = (500, bytes::BytesMut::new());
        while let Some(frame) = frames.message().await? {
            match frame.frame {
                Some(Frame::Head(head)) => status = head.status,
                Some(Frame::Chunk(chunk)) => bytes.extend_from_slice(&chunk),
                None => {}
            }
        }
        Ok::<_, tonic::Status>((status, bytes.freeze()))
    };
    match gathered.await {
        Ok((status, bytes)) => actix_web::HttpResponse::build(
            actix_web::http::StatusCode::from_u16(status as u16)
                .unwrap_or(actix_web::http::StatusCode::BAD_GATEWAY),
        )
        .content_type("application/json")
        .body(bytes),
        Err(e) => actix_web::HttpResponse::BadGateway().body(e.to_string()),
    }
}

/// The floor's backend: every delegated request answered with `body`.
struct Backend {
    body: Bytes,
}

type Frames = Pin<Box<dyn Stream<Item = Result<pb::ApiResponseFrame, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl Delegation for Backend {
    type HandleStream = Frames;
    type WatchDiscoveryStream =
        Pin<Box<dyn Stream<Item = Result<pb::DiscoverySnapshot, tonic::Status>> + Send>>;

    async fn handle(
        &self,
        request: tonic::Request<pb::ApiRequest>,
    ) -> Result<tonic::Response<Frames>, tonic::Status> {
        let status = match request.get_ref().method.as_str() {
            "POST" => 201,
            _ => 200,
        };
        let head = pb::ResponseHead {
            status,
            headers: vec![pb::Header {
                name: "content-type".into(),
                value: "application/json".into(),
            }],
            ..Default::default()
        };
        let frames = [Frame::Head(head), Frame::Chunk(self.body.clone())]
            .map(|frame| Ok(pb::ApiResponseFrame { frame: Some(frame) }));
        Ok(tonic::Response::new(Box::pin(futures::stream::iter(
            frames,
        ))))
    }

    async fn watch_discovery(
        &self,
        _: tonic::Request<pb::WatchDiscoveryRequest>,
    ) -> Result<tonic::Response<Self::WatchDiscoveryStream>, tonic::Status> {
        Err(tonic::Status::unimplemented(
            "the floor serves no discovery",
        ))
    }
}

/// Serves the backend on `socket` until killed.
fn serve_backend(socket: &Path, body: Bytes) -> Result<()> {
    let _ = std::fs::remove_file(socket);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::UnixListener::bind(socket)?;
        tonic::transport::Server::builder()
            .add_service(DelegationServer::new(Backend { body }))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
            .await?;
        Ok(())
    })
}

/// A floor process the bench started; killed when dropped.
pub struct Floor {
    child: Child,
    /// What the CPU table calls it.
    pub name: &'static str,
    /// Where it is reached: a URL, or its backend's Unix socket.
    pub address: String,
}

/// The floors of one run: one hop (HTTPS answering itself), and two (HTTPS
/// handing each request to a backend over gRPC on a Unix socket).
pub struct Floors {
    /// HTTPS answering itself.
    pub one_hop: Floor,
    /// HTTPS in front of the backend.
    pub two_hops: Floor,
    /// The backend.
    pub backend: Floor,
}

impl Floors {
    /// Starts the floors answering `body`, serving the front door's
    /// certificate from `pki` (so clients trust them alike); files in `dir`.
    pub fn start(dir: &Path, pki: &Path, body: &[u8], list: (&str, &[u8])) -> Result<Floors> {
        let body_file = dir.join("floor-body.json");
        std::fs::write(&body_file, body)?;
        let list_file = dir.join("floor-list.json");
        std::fs::write(&list_file, list.1)?;
        let socket = dir.join("floor-backend.sock");
        let _ = std::fs::remove_file(&socket);
        let backend = Floor::spawn(
            "floor-backend",
            &[
                "--body".into(),
                body_file.display().to_string(),
                "--serve-socket".into(),
                socket.display().to_string(),
            ],
            socket.display().to_string(),
            || socket.exists(),
        )?;
        let https = |name: &'static str, backend: Option<&Path>| {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let listen: SocketAddr = ([127, 0, 0, 1], port).into();
            let mut args = vec![
                format!("--listen={listen}"),
                format!("--cert={}", pki.join("aggregator.crt").display()),
                format!("--key={}", pki.join("aggregator.key").display()),
                format!("--body={}", body_file.display()),
                format!("--route={}={}", list.0, list_file.display()),
            ];
            if let Some(socket) = backend {
                args.push(format!("--backend={}", socket.display()));
            }
            Floor::spawn(name, &args, format!("https://{listen}"), || {
                TcpStream::connect(listen).is_ok()
            })
        };
        Ok(Floors {
            one_hop: https(FLOOR, None)?,
            two_hops: https("floor-2-hops", Some(&socket))?,
            backend,
        })
    }

    /// Each floor process with its pid, for the CPU table.
    pub fn pids(&self) -> Vec<(&'static str, Result<u32, String>)> {
        [&self.one_hop, &self.two_hops, &self.backend]
            .iter()
            .map(|floor| (floor.name, Ok(floor.child.id())))
            .collect()
    }
}

impl Floor {
    /// Runs `kubechain floor` with `args` as `name`, waiting until `ready`.
    fn spawn(
        name: &'static str,
        args: &[String],
        address: String,
        ready: impl Fn() -> bool,
    ) -> Result<Floor> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg0(name)
            .arg("floor")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready() {
            if let Some(status) = child.try_wait()? {
                bail!("{name} exited: {status}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                bail!("{name} was not ready within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Floor {
            child,
            name,
            address,
        })
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The phases [`measure`] runs, by HTTP version: kubechain's, the floor's.
const PHASES: [(Http, [&str; 2]); 2] = [
    (
        Http::Two,
        ["kubechain cached GETs, HTTP/2", "floor GETs, HTTP/2"],
    ),
    (
        Http::One,
        ["kubechain cached GETs, HTTP/1.1", "floor GETs, HTTP/1.1"],
    ),
];

/// Slices each GET phase against the floor is cut into, alternating: the
/// spread of both costs over one sitting.
const ROUNDS: u32 = 10;

/// What a LIST through kubechain may cost, as a multiple of the floor
/// writing the same bytes (the cost-of-the-split issue).
const FLOOR_LIST_TIMES: f64 = 1.5;

/// What a create through kubechain may cost beyond the two-hop floor and
/// etcd's own create, in µs (the cost-of-the-split issue).
const CREATE_ALLOWANCE_US: f64 = 100.0;

/// Cached GETs of `path` (`resourceVersion=0`) through the front door and
/// from the one-hop floor over HTTP/2 and HTTP/1.1, and LISTs of
/// `list.0` (at least `list.1` bytes) through both, each pair alternating
/// in slices (a machine whose speed drifts slows both alike); creates
/// through the two-hop floor. The table gets the front door and
/// core-server's CPU per GET and LIST as a multiple of the one-hop floor's,
/// and per create against the two-hop floor's plus etcd's own (`creates`:
/// the phases of raw etcd's creates and kubechain's, with their
/// operations). Returns each phase with its operations, for the CPU per
/// operation table.
#[allow(clippy::too_many_arguments)]
pub async fn measure(
    floors: &Floors,
    credentials: &Credentials,
    concurrency: usize,
    path: &str,
    creates: [(&str, u64); 2],
    list: (&str, usize),
    duration: Duration,
    cpu: &mut CpuTable,
    table: &mut Table,
    errors: &mut Vec<String>,
) -> Result<Vec<(&'static str, u64)>> {
    let mut phases = Vec::new();
    // Served from the watch cache (kube's `resourceVersion=0`), as the
    // floor serves its bytes: a GET without it is a quorum read of etcd.
    let cached = format!("{path}?resourceVersion=0");
    for (http, names) in PHASES {
        let clients = |at: &Credentials| {
            (0..concurrency)
                .map(|_| at.over(http).api())
                .collect::<Result<Vec<_>>>()
        };
        let floor = credentials.at(&floors.one_hop.address);
        let (chain, floor) = (clients(credentials)?, clients(&floor)?);
        let ([chain, base], [chain_samples, floor_samples]) = alternating_sampled(
            cpu,
            names,
            duration,
            ROUNDS,
            [FRONT_DOOR_AND_CORE, &[FLOOR]],
            |slice| gets(chain.clone(), slice, &cached),
            |slice| gets(floor.clone(), slice, &cached),
        )
        .await;
        table.spread(
            &format!(
                "spread of CPU µs per cached GET over {ROUNDS} slices ({})",
                http.name()
            ),
            &floor_samples,
            &chain_samples,
        );
        let metric = format!("CPU µs per cached GET, front door + core ({})", http.name());
        phases.extend(against_floor(
            cpu,
            table,
            errors,
            &metric,
            names,
            [chain, base],
            FLOOR_GET_TIMES,
        ));
    }

    // The same GETs through the two-hop floor (one gRPC call behind the
    // front), the least a design with the API in its own process needs.
    let name = "floor GETs, 2 hops";
    let clients = (0..concurrency)
        .map(|_| {
            credentials
                .at(&floors.two_hops.address)
                .over(Http::Two)
                .api()
        })
        .collect::<Result<Vec<_>>>()?;
    let before = cpu.snapshot();
    let got = gets(clients, duration, &cached).await;
    cpu.record(name, before);
    let chain_phase = PHASES[0].1[0];
    let chain_ops = phases
        .iter()
        .find(|(phase, _)| *phase == chain_phase)
        .map_or(0, |(_, ops)| *ops);
    if let (Some(two_hops), Some(chain_us)) = (
        per_op_us(
            cpu,
            name,
            &[floors.two_hops.name, floors.backend.name],
            got.ops,
        ),
        per_op_us(cpu, chain_phase, FRONT_DOOR_AND_CORE, chain_ops),
    ) {
        table.multiple(
            "CPU µs per cached GET vs the 2-hop floor, front door + core (HTTP/2)",
            "2-hop floor",
            two_hops,
            chain_us,
        );
    }
    got.report_failures(name, errors);
    phases.push((name, got.ops));

    // LISTs: the same bytes written by the one-hop floor.
    let (list_path, least) = list;
    let names = ["kubechain LISTs, vs the floor", "floor LISTs"];
    let clients = |at: &Credentials| {
        (0..concurrency)
            .map(|_| at.api())
            .collect::<Result<Vec<_>>>()
    };
    let (chain, floor) = (
        clients(credentials)?,
        clients(&credentials.at(&floors.one_hop.address))?,
    );
    let [chain, base] = alternating(
        cpu,
        names,
        duration,
        |slice| lists(chain.clone(), slice, list_path, least),
        |slice| lists(floor.clone(), slice, list_path, least),
    )
    .await;
    phases.extend(against_floor(
        cpu,
        table,
        errors,
        "CPU µs per LIST, front door + core (HTTP/2)",
        names,
        [chain, base],
        FLOOR_LIST_TIMES,
    ));

    let name = "floor creates, 2 hops";
    let clients = (0..concurrency)
        .map(|_| credentials.at(&floors.two_hops.address).api())
        .collect::<Result<Vec<_>>>()?;
    let before = cpu.snapshot();
    let created = closed_loop(clients, duration, |api: Api, i| async move {
        api.call(
            Method::POST,
            "/api/v1/namespaces/floor/configmaps",
            Some(configmap(&format!("floor-{i}"))),
            StatusCode::CREATED,
        )
        .await
        .map(drop)
    })
    .await;
    cpu.record(name, before);
    let [(etcd_phase, etcd_ops), (chain_phase, chain_ops)] = creates;
    let two_hops = per_op_us(
        cpu,
        name,
        &[floors.two_hops.name, floors.backend.name],
        created.ops,
    );
    let etcd = per_op_us(cpu, etcd_phase, &["etcd"], etcd_ops);
    if let (Some(two_hops), Some(etcd), Some(chain_us)) = (
        two_hops,
        etcd,
        per_op_us(cpu, chain_phase, FRONT_DOOR_AND_CORE, chain_ops),
    ) {
        table.floor(
            "CPU µs per create, front door + core (HTTP/2)",
            "2 hops + etcd + 100",
            two_hops + etcd + CREATE_ALLOWANCE_US,
            chain_us,
            1.0,
            created.failed > 0,
        );
    }
    created.report_failures(name, errors);
    phases.push((name, created.ops));
    Ok(phases)
}

/// The processes whose CPU a request through kubechain costs.
const FRONT_DOOR_AND_CORE: &[&str] = &["aggregator", "core-server"];

/// The CPU µs `processes` used together per operation in `phase`.
fn per_op_us(cpu: &CpuTable, phase: &str, processes: &[&str], ops: u64) -> Option<f64> {
    processes.iter().try_fold(0.0, |sum, process| {
        let used = cpu.cpu_per_op(phase, process, ops)?;
        Some(sum + used.as_secs_f64() * 1e6)
    })
}

/// Judges a pair of phases, kubechain's (`names[0]`) and the floor's: the
/// front door and core-server's CPU per operation against at most
/// `max_times` the floor's; reports their failures and returns them with
/// their operations.
fn against_floor(
    cpu: &CpuTable,
    table: &mut Table,
    errors: &mut Vec<String>,
    metric: &str,
    names: [&'static str; 2],
    [chain, base]: [Throughput; 2],
    max_times: f64,
) -> [(&'static str, u64); 2] {
    if let (Some(floor_us), Some(chain_us)) = (
        per_op_us(cpu, names[1], &[FLOOR], base.ops),
        per_op_us(cpu, names[0], FRONT_DOOR_AND_CORE, chain.ops),
    ) {
        table.floor(
            metric,
            "floor",
            floor_us,
            chain_us,
            max_times,
            chain.failed + base.failed > 0,
        );
    }
    chain.report_failures(names[0], errors);
    base.report_failures(names[1], errors);
    [(names[0], chain.ops), (names[1], base.ops)]
}
