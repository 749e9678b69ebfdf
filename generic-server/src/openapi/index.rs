//! The `/openapi/v3` index and the `?hash=` of each group-version document.
//!
//! kube-apiserver names each document by the SHA-512 of its JSON, upper-case
//! hex; kubectl puts that URL in its HTTP cache, so the hash must change
//! exactly when the document does. SHA-512 is written out here (FIPS 180-4)
//! to keep the crate free of a digest dependency for this one use.

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
    sha512(serialized)
        .iter()
        .map(|byte| format!("{byte:02X}"))
        .collect()
}

/// SHA-512 round constants (FIPS 180-4 §4.2.3).
const K: [u64; 80] = [
    0x428a2f98d728ae22,
    0x7137449123ef65cd,
    0xb5c0fbcfec4d3b2f,
    0xe9b5dba58189dbbc,
    0x3956c25bf348b538,
    0x59f111f1b605d019,
    0x923f82a4af194f9b,
    0xab1c5ed5da6d8118,
    0xd807aa98a3030242,
    0x12835b0145706fbe,
    0x243185be4ee4b28c,
    0x550c7dc3d5ffb4e2,
    0x72be5d74f27b896f,
    0x80deb1fe3b1696b1,
    0x9bdc06a725c71235,
    0xc19bf174cf692694,
    0xe49b69c19ef14ad2,
    0xefbe4786384f25e3,
    0x0fc19dc68b8cd5b5,
    0x240ca1cc77ac9c65,
    0x2de92c6f592b0275,
    0x4a7484aa6ea6e483,
    0x5cb0a9dcbd41fbd4,
    0x76f988da831153b5,
    0x983e5152ee66dfab,
    0xa831c66d2db43210,
    0xb00327c898fb213f,
    0xbf597fc7beef0ee4,
    0xc6e00bf33da88fc2,
    0xd5a79147930aa725,
    0x06ca6351e003826f,
    0x142929670a0e6e70,
    0x27b70a8546d22ffc,
    0x2e1b21385c26c926,
    0x4d2c6dfc5ac42aed,
    0x53380d139d95b3df,
    0x650a73548baf63de,
    0x766a0abb3c77b2a8,
    0x81c2c92e47edaee6,
    0x92722c851482353b,
    0xa2bfe8a14cf10364,
    0xa81a664bbc423001,
    0xc24b8b70d0f89791,
    0xc76c51a30654be30,
    0xd192e819d6ef5218,
    0xd69906245565a910,
    0xf40e35855771202a,
    0x106aa07032bbd1b8,
    0x19a4c116b8d2d0c8,
    0x1e376c085141ab53,
    0x2748774cdf8eeb99,
    0x34b0bcb5e19b48a8,
    0x391c0cb3c5c95a63,
    0x4ed8aa4ae3418acb,
    0x5b9cca4f7763e373,
    0x682e6ff3d6b2b8a3,
    0x748f82ee5defb2fc,
    0x78a5636f43172f60,
    0x84c87814a1f0ab72,
    0x8cc702081a6439ec,
    0x90befffa23631e28,
    0xa4506cebde82bde9,
    0xbef9a3f7b2c67915,
    0xc67178f2e372532b,
    0xca273eceea26619c,
    0xd186b8c721c0c207,
    0xeada7dd6cde0eb1e,
    0xf57d4f7fee6ed178,
    0x06f067aa72176fba,
    0x0a637dc5a2c898a6,
    0x113f9804bef90dae,
    0x1b710b35131c471b,
    0x28db77f523047d84,
    0x32caab7b40c72493,
    0x3c9ebe0a15c9bebc,
    0x431d67c49c100d4c,
    0x4cc5d4becb3e42b6,
    0x597f299cfc657e2a,
    0x5fcb6fab3ad6faec,
    0x6c44198c4a475817,
];

/// SHA-512 initial hash value (FIPS 180-4 §5.3.5).
const H0: [u64; 8] = [
    0x6a09e667f3bcc908,
    0xbb67ae8584caa73b,
    0x3c6ef372fe94f82b,
    0xa54ff53a5f1d36f1,
    0x510e527fade682d1,
    0x9b05688c2b3e6c1f,
    0x1f83d9abfb41bd6b,
    0x5be0cd19137e2179,
];

/// The SHA-512 digest of `data`.
fn sha512(data: &[u8]) -> [u8; 64] {
    let mut state = H0;
    let mut message = data.to_vec();
    let bit_len = (data.len() as u128).wrapping_mul(8);
    message.push(0x80);
    while message.len() % 128 != 112 {
        message.push(0);
    }
    message.extend_from_slice(&bit_len.to_be_bytes());
    for block in message.chunks_exact(128) {
        compress(&mut state, block);
    }
    let mut digest = [0u8; 64];
    for (out, word) in digest.chunks_exact_mut(8).zip(state) {
        out.copy_from_slice(&word.to_be_bytes());
    }
    digest
}

/// One SHA-512 compression of a 128-byte block into `state`.
fn compress(state: &mut [u64; 8], block: &[u8]) {
    let mut w = [0u64; 80];
    for (word, bytes) in w.iter_mut().zip(block.chunks_exact(8)) {
        let mut buffer = [0u8; 8];
        buffer.copy_from_slice(bytes);
        *word = u64::from_be_bytes(buffer);
    }
    for t in 16..80 {
        let s0 = w[t - 15].rotate_right(1) ^ w[t - 15].rotate_right(8) ^ (w[t - 15] >> 7);
        let s1 = w[t - 2].rotate_right(19) ^ w[t - 2].rotate_right(61) ^ (w[t - 2] >> 6);
        w[t] = w[t - 16]
            .wrapping_add(s0)
            .wrapping_add(w[t - 7])
            .wrapping_add(s1);
    }
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
    for t in 0..80 {
        let s1 = e.rotate_right(14) ^ e.rotate_right(18) ^ e.rotate_right(41);
        let ch = (e & f) ^ (!e & g);
        let t1 = h
            .wrapping_add(s1)
            .wrapping_add(ch)
            .wrapping_add(K[t])
            .wrapping_add(w[t]);
        let s0 = a.rotate_right(28) ^ a.rotate_right(34) ^ a.rotate_right(39);
        let maj = (a & b) ^ (a & c) ^ (b & c);
        let t2 = s0.wrapping_add(maj);
        (h, g, f, e, d, c, b, a) = (g, f, e, d.wrapping_add(t1), c, b, a, t1.wrapping_add(t2));
    }
    for (word, add) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
        *word = word.wrapping_add(add);
    }
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
