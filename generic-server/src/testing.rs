//! Test support: a throwaway etcd process per test.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An etcd server on free loopback ports with its data in a temporary
/// directory; killed and removed on drop.
pub struct TestEtcd {
    child: Child,
    dir: std::path::PathBuf,
    client_port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl TestEtcd {
    /// Starts etcd (the `etcd` binary must be on PATH) and waits until it serves.
    pub fn start() -> TestEtcd {
        let dir = std::env::temp_dir().join(format!("kubechain-etcd-{}", uuid::Uuid::new_v4()));
        let (client_port, peer_port) = (free_port(), free_port());
        let client = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let child = Command::new("etcd")
            .args([
                "--data-dir",
                &dir.to_string_lossy(),
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args([
                "--initial-cluster",
                &format!("default={peer}"),
                "--log-level",
                "error",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd on PATH (apt-get install etcd-server)");
        let etcd = TestEtcd {
            child,
            dir,
            client_port,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", client_port)).is_err() {
            assert!(Instant::now() < deadline, "etcd did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        etcd
    }

    /// The client URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }
}

impl Drop for TestEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Certificates for testing the gRPC links: one CA, and a certificate per
/// identity (valid as server and client, for `localhost` and `core-server`).
pub fn tls_files(common_names: &[&str]) -> Vec<crate::tls::TlsFiles> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    let ca_key = KeyPair::generate().expect("ca key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "test-ca");
    let ca_pem = ca.self_signed(&ca_key).expect("ca cert").pem();
    let issuer = Issuer::new(ca, ca_key);
    common_names
        .iter()
        .map(|cn| {
            let key = KeyPair::generate().expect("key");
            let mut params =
                CertificateParams::new(vec!["localhost".to_string(), "core-server".to_string()])
                    .expect("params");
            params.distinguished_name.push(DnType::CommonName, *cn);
            params.extended_key_usages = vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ];
            let cert = params.signed_by(&key, &issuer).expect("cert");
            crate::tls::TlsFiles {
                cert: cert.pem().into_bytes(),
                key: key.serialize_pem().into_bytes(),
                ca: ca_pem.clone().into_bytes(),
            }
        })
        .collect()
}
