//! The `/openapi/v3` index and the `?hash=` of each group-version document.
//!
//! kube-apiserver names each document by the SHA-512 of its JSON, upper-case
//! hex; kubectl puts that URL in its HTTP cache, so the hash must change
//! exactly when the document does.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The `/openapi/v3` index: `{"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=<H>"}, …}}`.
///
/// Each item is a group-version path (`api/v1`, `apis/apps/v1`) and its
/// document's hash; an empty hash leaves `?hash=` out. Paths are sorted.
pub fn index_document(paths: impl IntoIterator<Item = (String, String)>) -> Value {
    let sorted: BTreeMap<String, String> = paths.into_iter().collect();
    let entries: serde_json::Map<String, Value> = sorted
        .into_iter()
        .map(|(path, hash)| {
            let url = if hash.is_empty() {
                format!("/openapi/v3/{path}")
            } else {
                format!("/openapi/v3/{path}?hash={hash}")
            };
            (path, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": entries})
}

/// The upper-case hex SHA-512 of a serialized document, as kube-apiserver puts in `?hash=`.
pub fn content_hash(serialized: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA512, serialized)
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02X}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha512_matches_fips_vectors() {
        assert_eq!(
            content_hash(b"abc"),
            "DDAF35A193617ABACC417349AE20413112E6FA4E89A97EA20A9EEEE64B55D39A\
             2192992A274FC1A836BA3C23A3FEEBBD454D4423643CE80E2A9AC94FA54CA49F"
        );
        assert_eq!(
            content_hash(b""),
            "CF83E1357EEFB8BDF1542850D66D8007D620E4050B5715DC83F4A921D36CE9CE\
             47D0D13C5D85F2B0FF8318D2877EEC2F63B931BD47417A81A538327AF927DA3E"
        );
        let two_blocks = b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
        assert_eq!(
            content_hash(two_blocks),
            "8E959B75DAE313DA8CF4F72814FC143F8F7779C6EB9F7FA17299AEADB6889018\
             501D289E4900F7E4331B99DEC4B5433AC7D329EEB6DD26545E96E55B874BE909"
        );
    }

    #[test]
    fn index_lists_sorted_paths_with_hashes() {
        let index = index_document([
            ("apis/apps/v1".to_string(), "AB".to_string()),
            ("api/v1".to_string(), "CD".to_string()),
            ("apis/example.com/v1".to_string(), String::new()),
        ]);
        assert_eq!(
            index["paths"]["api/v1"]["serverRelativeURL"],
            "/openapi/v3/api/v1?hash=CD"
        );
        assert_eq!(
            index["paths"]["apis/apps/v1"]["serverRelativeURL"],
            "/openapi/v3/apis/apps/v1?hash=AB"
        );
        assert_eq!(
            index["paths"]["apis/example.com/v1"]["serverRelativeURL"],
            "/openapi/v3/apis/example.com/v1"
        );
        let keys: Vec<_> = index["paths"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["api/v1", "apis/apps/v1", "apis/example.com/v1"]);
    }
}
