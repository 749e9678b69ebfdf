//! kubechain: the launcher. `kubechain up` starts a whole local cluster
//! (etcd, extension-server, core-server, aggregator) as supervised child
//! processes; `kubechain certs` writes the certificates for a compose
//! deployment and `kubechain addons` registers its Node and metrics-server.

mod bench;
mod bootstrap;
mod client;
mod pki;
mod register;
mod supervisor;
mod up;

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

/// kubechain's command line.
#[derive(Parser, Debug)]
#[command(version, about = "kubechain: the Kubernetes API server chain, in Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start a local cluster and supervise it in the foreground.
    Up(up::UpArgs),
    /// Measure raw etcd and the same work through kubechain, in one run.
    Bench(bench::BenchArgs),
    /// The bench's floor server: fixed bytes over the front door's HTTP stack.
    #[command(hide = true)]
    Floor(bench::floor::FloorArgs),
    /// Register an aggregated API server (APIService, its Service and
    /// EndpointSlice, and the RBAC it needs); idempotent.
    Register(register::RegisterArgs),
    /// Write the cluster certificates (for docker-compose) into a directory.
    Certs {
        /// Where to write them.
        #[arg(long, default_value = "deploy/pki")]
        dir: PathBuf,
        /// Extra host names or IPs the front door's certificate is valid for.
        #[arg(long, value_delimiter = ',')]
        hosts: Vec<String>,
        /// The etcd members, each with its own certificate for its name.
        #[arg(long, value_delimiter = ',', default_value = "etcd")]
        etcd_members: Vec<String>,
        /// Extra names every etcd member's certificate is valid for, e.g.
        /// `*.etcd.kubechain.svc` for a StatefulSet's pods sharing one.
        #[arg(long, value_delimiter = ',')]
        etcd_hosts: Vec<String>,
        /// Also write an admin kubeconfig for this server URL.
        #[arg(long)]
        kubeconfig_server: Option<String>,
    },
    /// Register the host's Node and metrics-server with a running cluster, as `up` does (for docker-compose).
    Addons {
        /// The cluster's certificates (the admin's is used).
        #[arg(long, default_value = "deploy/pki")]
        pki: PathBuf,
        /// The front door's URL.
        #[arg(long)]
        server: String,
        /// The name of the Node metrics-server measures.
        #[arg(long)]
        node: String,
        /// metrics-server's addresses (`IP:port`, or `name:port` for every
        /// address the name resolves to: a Service's or a swarm service's).
        #[arg(long, value_delimiter = ',', required = true)]
        metrics: Vec<String>,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Command::Up(args) => runtime.block_on(up::up(args)),
        Command::Bench(args) => runtime.block_on(bench::run(args)),
        Command::Register(args) => runtime.block_on(register::run(args)),
        Command::Floor(args) => bench::floor::serve(args),
        Command::Certs {
            dir,
            hosts,
            etcd_members,
            etcd_hosts,
            kubeconfig_server,
        } => {
            let pki = pki::Pki::new(&dir);
            pki.ensure(&hosts, &etcd_members, &etcd_hosts)?;
            if let Some(server) = kubeconfig_server {
                pki::write_kubeconfig(&pki, &server, &dir.join("kubeconfig"))?;
            }
            println!("certificates written to {}", dir.display());
            Ok(())
        }
        Command::Addons {
            pki,
            server,
            node,
            metrics,
        } => {
            let mut addresses = Vec::new();
            for address in &metrics {
                let resolved = std::net::ToSocketAddrs::to_socket_addrs(address.as_str())
                    .with_context(|| format!("resolving the metrics-server address {address}"))?;
                addresses.extend(resolved.filter(|a| a.is_ipv4()));
            }
            addresses.sort();
            addresses.dedup();
            anyhow::ensure!(!addresses.is_empty(), "no IPv4 address for {metrics:?}");
            runtime.block_on(bootstrap::register(
                &pki::Pki::new(&pki),
                &server,
                &node,
                &addresses,
            ))?;
            println!("registered Node {node} and metrics-server at {addresses:?}");
            Ok(())
        }
    }
}
