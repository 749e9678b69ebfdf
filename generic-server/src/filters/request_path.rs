//! The request path, decoded once and checked before anything reads it:
//! what request info parses, what is authorized, and what the proxy and the
//! delegation forward are then one and the same path.
//!
//! Go's `net/http` hands kube-apiserver the percent-decoded path; so does
//! [`clean`]. A path that a later hop could read differently is refused
//! instead of being resolved: dot segments (`.`, `..`, also as `%2e`),
//! empty segments (`//`), encoded slashes (`%2F`), backslashes, control
//! characters and bytes that are not UTF-8.

use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};

use apimachinery::error::{Error, Result};

/// Longest request path accepted, in bytes (kube's limit on a request line's URL).
pub const MAX_PATH_BYTES: usize = 8 * 1024;

/// The characters that must stay escaped in one segment of a forwarded path.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\')
    .add(b'^')
    .add(b'|');

/// The decoded path of a request, or a 400 Status saying why it is refused.
pub fn clean(raw: &str) -> Result<String> {
    let refuse = |why: &str| {
        Error::bad_request(format!(
            "the request path {:?} is refused: {why}",
            shorten(raw)
        ))
    };
    if raw.len() > MAX_PATH_BYTES {
        return Err(refuse(&format!("longer than {MAX_PATH_BYTES} bytes")));
    }
    if !raw.starts_with('/') {
        return Err(refuse("it does not start with /"));
    }
    let encoded_slash = raw.as_bytes().windows(3).any(|w| {
        w[0] == b'%'
            && matches!(
                (w[1], w[2].to_ascii_lowercase()),
                (b'2', b'f') | (b'5', b'c')
            )
    });
    if encoded_slash || raw.contains('\\') {
        return Err(refuse("it holds an encoded slash or a backslash"));
    }
    let path = percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| refuse("it is not UTF-8 once decoded"))?;
    if path.chars().any(char::is_control) {
        return Err(refuse("it holds control characters"));
    }
    let inner = path.strip_prefix('/').unwrap_or(&path);
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    if path.len() > 1 {
        for segment in inner.split('/') {
            match segment {
                "" => return Err(refuse("it has an empty segment (//)")),
                "." | ".." => return Err(refuse("it has a dot segment (. or ..)")),
                _ => {}
            }
        }
    }
    Ok(path.into_owned())
}

/// A clean path encoded again for a URL: what [`clean`] decoded, escaped
/// segment by segment so that the next hop reads the very same segments.
pub fn encode(path: &str) -> String {
    path.split('/')
        .map(|segment| utf8_percent_encode(segment, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// A path cut short for an error message.
fn shorten(raw: &str) -> &str {
    let mut end = raw.len().min(256);
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    &raw[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_pass_decoded() {
        assert_eq!(clean("/").unwrap(), "/");
        assert_eq!(clean("/api/v1/namespaces").unwrap(), "/api/v1/namespaces");
        assert_eq!(clean("/apis/").unwrap(), "/apis/");
        assert_eq!(
            clean("/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Aview").unwrap(),
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:view"
        );
        assert_eq!(
            clean("/api/v1/namespaces/a.b").unwrap(),
            "/api/v1/namespaces/a.b"
        );
    }

    #[test]
    fn unclean_paths_are_refused() {
        for path in [
            "/openapi/v3/apis/g/v1/../../../../../apis/g/v1/namespaces/default/things/x",
            "/api/v1/namespaces/default/./configmaps",
            "/api/v1/namespaces/%2e%2e/configmaps",
            "/api/v1/namespaces/.%2E/configmaps",
            "/api/v1/namespaces/default/configmaps/..",
            "/api/v1/namespaces/default/configmaps/a%2Fb",
            "/api/v1/namespaces/default/configmaps/a%2fb",
            "/api/v1/namespaces/default/configmaps/a%5cb",
            "/api/v1/namespaces/default/configmaps/a\\b",
            "//api/v1/namespaces",
            "/api//v1/namespaces",
            "/api/v1/namespaces//",
            "/api/v1/namespaces/%00",
            "/api/v1/namespaces/%ff",
            "api/v1",
        ] {
            let err = clean(path).unwrap_err();
            assert_eq!(err.code(), 400, "{path}");
        }
        assert_eq!(
            clean(&format!("/{}", "a".repeat(MAX_PATH_BYTES)))
                .unwrap_err()
                .code(),
            400
        );
    }

    #[test]
    fn encode_restores_what_clean_decoded() {
        for raw in [
            "/api/v1/namespaces/default/configmaps/x%3Fwatch%3D1",
            "/api/v1/namespaces/default/configmaps/a%23b",
            "/api/v1/namespaces/default/configmaps/a%25b",
            "/apis/g/v1/things/system:x",
        ] {
            let path = clean(raw).unwrap();
            let again = encode(&path);
            assert!(!again.contains('?') && !again.contains('#'), "{again}");
            assert_eq!(clean(&again).unwrap(), path);
        }
    }
}
