//! A chain that trusts only itself: the gRPC links and etcd accept only
//! certificates of the internal CA, never one of the user-facing cluster CA,
//! even with the right name on it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use proto::delegation::delegation_client::DelegationClient;
use proto::delegation::{ApiRequest, UserInfo, api_response_frame::Frame};
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair};
use tests::Cluster;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// Writes `<dir>/<name>.crt` and `.key`: a client certificate with common
/// name `cn`, signed by the CA `<pki>/<ca>.crt` + `.key`.
fn issue_client(pki: &Path, ca: &str, dir: &Path, name: &str, cn: &str) -> (PathBuf, PathBuf) {
    let read = |file: String| std::fs::read_to_string(pki.join(file)).expect("the CA's files");
    let ca_key = KeyPair::from_pem(&read(format!("{ca}.key"))).expect("the CA key");
    let issuer = Issuer::from_ca_cert_pem(&read(format!("{ca}.crt")), ca_key).expect("the CA");
    let key = KeyPair::generate().expect("a key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer).expect("a certificate");
    let (crt, key_file) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&crt, cert.pem()).expect("writing the certificate");
    std::fs::write(&key_file, key.serialize_pem()).expect("writing the key");
    (crt, key_file)
}

/// A gRPC `Handle` call, as the server above would send it, to the server
/// at `port` (verified as `server_name` by the internal CA), presenting
/// `cert` + `key`: `GET /api/v1/namespaces` for a `system:masters` user.
/// The status of the answer, or why there is none.
async fn list_namespaces(
    cluster: &Cluster,
    port: u64,
    server_name: &str,
    (cert, key): &(PathBuf, PathBuf),
) -> Result<(u32, String), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let read = |p: &Path| std::fs::read(p).expect("a PEM file");
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(
            &cluster.dir.join("pki/internal-ca.crt"),
        )))
        .identity(Identity::from_pem(read(cert), read(key)))
        .domain_name(server_name);
    let channel = Channel::from_shared(format!("https://127.0.0.1:{port}"))
        .expect("a URL")
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    let request = ApiRequest {
        method: "GET".into(),
        path: "/api/v1/namespaces".into(),
        user: Some(UserInfo {
            name: "kubernetes-admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut frames = DelegationClient::new(channel)
        .handle(request)
        .await
        .map_err(|status| format!("handle: {status:?}"))?
        .into_inner();
    let mut status = None;
    let mut body = Vec::new();
    while let Some(frame) = frames
        .message()
        .await
        .map_err(|status| format!("frame: {status:?}"))?
    {
        match frame.frame {
            Some(Frame::Head(head)) => status = Some(head.status),
            Some(Frame::Chunk(chunk)) => body.extend_from_slice(&chunk),
            None => {}
        }
    }
    let status = status.ok_or("no head frame")?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grpc_links_refuse_a_user_facing_certificate_with_the_aggregators_name() {
    let cluster = Cluster::start();
    let pki = cluster.dir.join("pki");
    // What a holder of the user-facing CA (or of anything it signed) could
    // make: the aggregator's name, from the cluster CA.
    let forged = issue_client(
        &pki,
        "ca",
        &cluster.dir,
        "forged-aggregator",
        "kubechain-aggregator",
    );
    let real = (
        pki.join("aggregator-internal.crt"),
        pki.join("aggregator-internal.key"),
    );
    let admin = (pki.join("admin.crt"), pki.join("admin.key"));
    let ports = cluster.ports();
    for (port, server) in [
        ("core-0", "core-server"),
        ("extension-0", "extension-server"),
    ] {
        let port = ports[port].as_u64().expect("a port");
        let (status, body) = list_namespaces(&cluster, port, server, &real)
            .await
            .unwrap_or_else(|why| panic!("{server} refused the aggregator's certificate: {why}"));
        if server == "core-server" {
            assert_eq!(status, 200, "{body}");
            assert!(body.contains("\"NamespaceList\""), "{body}");
        } else {
            // The end of the chain answers (it serves no namespaces).
            assert_eq!(status, 404, "{body}");
        }
        for (what, cert) in [
            (
                "a certificate of the cluster CA named kubechain-aggregator",
                &forged,
            ),
            ("the admin's certificate", &admin),
        ] {
            let answer = list_namespaces(&cluster, port, server, cert).await;
            assert!(answer.is_err(), "{server} answered {what}: {answer:?}");
        }
    }
}

#[test]
fn etcd_requires_a_client_certificate_of_the_internal_ca() {
    let cluster = Cluster::start();
    let timeouts = ["--dial-timeout", "2s", "--command-timeout", "3s"];
    let get = ["get", "/registry/namespaces/default", "--keys-only"];

    // The cluster's credentials: the key is there.
    let stored = cluster.etcdctl(&get);
    assert_eq!(stored.ok().trim(), "/registry/namespaces/default");

    // TLS without a client certificate: refused.
    let anonymous = cluster
        .etcdctl_anonymous()
        .args(timeouts)
        .args(get)
        .output()
        .expect("etcdctl");
    assert!(
        !anonymous.status.success(),
        "etcd answered without a client certificate: {}",
        String::from_utf8_lossy(&anonymous.stdout)
    );
    // A certificate of the user-facing CA: refused.
    let admin = cluster
        .etcdctl_as("admin")
        .args(timeouts)
        .args(get)
        .output()
        .expect("etcdctl");
    assert!(
        !admin.status.success(),
        "etcd answered the admin's certificate: {}",
        String::from_utf8_lossy(&admin.stdout)
    );
    // Plain HTTP: nothing answers.
    let plain = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg("--endpoints")
        .arg(cluster.etcd_endpoint().replace("https://", "http://"))
        .args(timeouts)
        .args(get)
        .output()
        .expect("etcdctl");
    assert!(!plain.status.success(), "etcd answered plain HTTP");
}

/// Sends one delegated request (`GET path`) over a server's Unix socket with
/// curl, as the user `uid` (or ours); the response's headers and trailers.
fn over_socket(cluster: &Cluster, socket: &Path, path: &str, uid: Option<u32>) -> String {
    use prost::Message;
    let request = ApiRequest {
        method: "GET".into(),
        path: path.into(),
        ..Default::default()
    }
    .encode_to_vec();
    // A gRPC message: uncompressed, its length, then the protobuf.
    let mut framed = vec![0];
    framed.extend_from_slice(&(request.len() as u32).to_be_bytes());
    framed.extend_from_slice(&request);
    let body = cluster.dir.join("socket-request.bin");
    std::fs::write(&body, framed).expect("writing the request");
    let mut command = std::process::Command::new("curl");
    if let Some(uid) = uid {
        command = std::process::Command::new("setpriv");
        command.args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".into(),
            "curl".into(),
        ]);
    }
    let output = command
        .args([
            "-s",
            "--max-time",
            "10",
            "--http2-prior-knowledge",
            "--unix-socket",
        ])
        .arg(socket)
        .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
        .arg("--data-binary")
        .arg(format!("@{}", body.display()))
        .args(["-o", "/dev/null", "-D", "-"])
        .arg("http://localhost/kubechain.delegation.v1.Delegation/Handle")
        .output()
        .expect("curl");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_unix_sockets_serve_only_this_users_processes() {
    use std::os::unix::fs::PermissionsExt;
    let cluster = Cluster::start();
    let socket = cluster.dir.join("run").join("core-server.sock");
    let mode = |path: &Path| {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(&socket), 0o600, "the socket's mode");
    assert_eq!(
        mode(&cluster.dir.join("run")),
        0o700,
        "its directory's mode"
    );
    // The replica is found at its socket: the launcher's links use it.
    let at = format!("unix://{}", socket.display());
    assert!(
        cluster
            .registrations("core-server")
            .iter()
            .any(|(address, _)| *address == at),
        "core-server registered {:?}",
        cluster.registrations("core-server")
    );
    let ours = over_socket(&cluster, &socket, "/api/v1/namespaces", None);
    assert!(ours.contains("grpc-status: 0"), "{ours}");
    // Opened to everyone, as a careless operator might: the kernel's word on
    // who is calling still keeps another user out.
    let set_mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
    };
    set_mode(&cluster.dir, 0o755);
    set_mode(&cluster.dir.join("run"), 0o755);
    set_mode(&socket, 0o666);
    let nobody = over_socket(&cluster, &socket, "/api/v1/namespaces", Some(65534));
    assert!(nobody.contains("grpc-status: 7"), "{nobody}");
    assert!(
        nobody.contains("user%2065534%20may%20not%20delegate"),
        "{nobody}"
    );
    set_mode(&socket, 0o600);
    set_mode(&cluster.dir.join("run"), 0o700);
}
