//! Health checks: what `/healthz`, `/livez` and `/readyz` run, each by name.

use std::sync::Arc;

use futures::future::BoxFuture;

/// A named health check's test: `Err` says why it fails (logged, never shown).
pub type HealthCheck = Arc<dyn Fn() -> BoxFuture<'static, crate::Result<()>> + Send + Sync>;

/// How long a probe waits for its answer.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// `<server> probe http://127.0.0.1:7453/readyz`: GETs a plain-HTTP health
/// URL (the metrics port's) and exits 0 when it answers 200, else 1, printing
/// why: a docker `HEALTHCHECK` for images that hold nothing but the server.
/// Returns when the process was started any other way.
pub fn probe_if_asked() {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() != Some("probe") {
        return;
    }
    let Some(url) = args.next() else {
        eprintln!("usage: probe http://HOST:PORT/PATH");
        std::process::exit(2);
    };
    match probe(&url) {
        Ok((200, _)) => std::process::exit(0),
        Ok((status, body)) => eprintln!("{url}: {status}\n{body}"),
        Err(e) => eprintln!("{url}: {e}"),
    }
    std::process::exit(1);
}

/// The status and body of `GET url`, for a plain `http://host:port/path` URL.
fn probe(url: &str) -> std::io::Result<(u16, String)> {
    use std::io::{Error, ErrorKind, Read, Write};
    let invalid = |why: &str| Error::new(ErrorKind::InvalidInput, why.to_string());
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| invalid("only http:// URLs are probed"))?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let address = std::net::ToSocketAddrs::to_socket_addrs(host)?
        .next()
        .ok_or_else(|| invalid("the host has no address"))?;
    let mut stream = std::net::TcpStream::connect_timeout(&address, PROBE_TIMEOUT)?;
    stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
    stream.set_write_timeout(Some(PROBE_TIMEOUT))?;
    let path = if path.is_empty() { "/" } else { path };
    // One write: the request leaves whole, not a piece per format argument.
    let request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n");
    stream.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    stream.take(64 * 1024).read_to_end(&mut answer)?;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| Error::new(ErrorKind::InvalidData, "not an HTTP answer"))?;
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_reads_the_status_and_refuses_other_schemes() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut conn, _) = listener.accept().unwrap();
            // The whole request is read before answering: a socket closed
            // with unread bytes resets, and the probe would see no answer.
            let mut request = Vec::new();
            let mut buf = [0u8; 256];
            while !request.ends_with(b"\r\n\r\n") {
                let n = conn.read(&mut buf).expect("a request");
                assert!(n > 0, "the probe closed mid-request");
                request.extend_from_slice(&buf[..n]);
            }
            let request = String::from_utf8_lossy(&request).to_string();
            conn.write_all(b"HTTP/1.1 500 Internal Server Error\r\n\r\n[-]etcd failed\n")
                .unwrap();
            request
        });
        let (status, body) = probe(&format!("http://{address}/readyz?verbose")).unwrap();
        assert_eq!(status, 500);
        assert_eq!(body, "[-]etcd failed\n");
        assert!(
            server
                .join()
                .unwrap()
                .starts_with("GET /readyz?verbose HTTP/1.0\r\n")
        );
        assert!(probe("https://127.0.0.1:1/readyz").is_err());
    }
}
