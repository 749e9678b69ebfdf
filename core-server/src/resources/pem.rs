//! PEM blocks found as Go's `encoding/pem` finds them, so that what kube
//! accepts in a CertificateSigningRequest is accepted here and nothing
//! more: text before, between and after blocks is skipped, and a block
//! whose end line or base64 is malformed is passed over.

use base64::Engine;
use base64::engine::{GeneralPurpose, GeneralPurposeConfig};

/// Base64 as Go's `StdEncoding` decodes it: padded, trailing bits ignored.
const GO_STD: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);
const BEGIN: &[u8] = b"-----BEGIN ";
const END: &[u8] = b"-----END ";
const DASHES: &[u8] = b"-----";

/// One PEM block.
#[derive(Debug, PartialEq)]
pub struct Block {
    /// The type on its BEGIN line, e.g. `CERTIFICATE`.
    pub label: String,
    /// Whether `Key: value` headers follow the BEGIN line.
    pub has_headers: bool,
    /// The decoded body.
    pub der: Vec<u8>,
}

/// The line at the start of `data` (without its newline and trailing
/// spaces, tabs and carriage return), and what follows it.
fn line(data: &[u8]) -> (&[u8], &[u8]) {
    let (line, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[data.len()..]),
    };
    let kept = line
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\r'))
        .map_or(0, |i| i + 1);
    (&line[..kept], rest)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// What follows the next `-----BEGIN ` at the start of `data` or of a line.
fn after_begin(data: &[u8]) -> Option<&[u8]> {
    if let Some(rest) = data.strip_prefix(BEGIN) {
        return Some(rest);
    }
    let at = find(data, b"\n-----BEGIN ")?;
    Some(&data[at + 1 + BEGIN.len()..])
}

/// The first well-formed block in `data`, and what follows it.
pub fn decode(data: &[u8]) -> Option<(Block, &[u8])> {
    let mut rest = data;
    loop {
        let (type_line, after) = line(after_begin(rest)?);
        rest = after;
        let Some(label) = type_line.strip_suffix(DASHES) else {
            continue;
        };
        let mut has_headers = false;
        loop {
            if rest.is_empty() {
                return None;
            }
            let (header, next) = line(rest);
            if !header.contains(&b':') {
                break;
            }
            has_headers = true;
            rest = next;
        }
        let (body_end, trailer_start) = if !has_headers && rest.starts_with(END) {
            (0, END.len())
        } else {
            match find(rest, b"\n-----END ") {
                Some(at) => (at, at + 1 + END.len()),
                None => continue,
            }
        };
        let trailer = &rest[trailer_start..];
        let Some(end_line) = trailer.get(..label.len() + DASHES.len()) else {
            continue;
        };
        let after_end = &trailer[end_line.len()..];
        let (tail, next) = line(after_end);
        if !end_line.starts_with(label) || !end_line.ends_with(DASHES) || !tail.is_empty() {
            continue;
        }
        let body: Vec<u8> = rest[..body_end]
            .iter()
            .copied()
            .filter(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .collect();
        let Ok(der) = GO_STD.decode(body) else {
            continue;
        };
        let block = Block {
            label: String::from_utf8_lossy(label).into_owned(),
            has_headers,
            der,
        };
        return Some((block, next));
    }
}

/// Every block in `data`, in order.
pub fn blocks(mut data: &[u8]) -> Vec<Block> {
    let mut found = Vec::new();
    while let Some((block, rest)) = decode(data) {
        found.push(block);
        data = rest;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(data: &str) -> Vec<(String, bool, Vec<u8>)> {
        blocks(data.as_bytes())
            .into_iter()
            .map(|b| (b.label, b.has_headers, b.der))
            .collect()
    }

    #[test]
    fn blocks_are_found_among_other_text() {
        let data = "explanatory text\n-----BEGIN CERTIFICATE-----\naGVs\nbG8=\n-----END CERTIFICATE-----\nmore\n-----BEGIN KEY-----\nProc-Type: 4,ENCRYPTED\n\nAA==\n-----END KEY-----  \r\n";
        assert_eq!(
            labels(data),
            vec![
                ("CERTIFICATE".into(), false, b"hello".to_vec()),
                ("KEY".into(), true, vec![0]),
            ]
        );
        // At the very start, and without a final newline.
        assert_eq!(
            labels("-----BEGIN X-----\n-----END X-----"),
            vec![("X".into(), false, Vec::new())]
        );
    }

    #[test]
    fn malformed_blocks_are_passed_over() {
        for bad in [
            "notacert",
            // The END line names another type.
            "-----BEGIN CERTIFICATE-----\nAA==\n-----END KEY-----\n",
            // Text after the END line's dashes.
            "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE----- x\n",
            // The body is not base64.
            "-----BEGIN CERTIFICATE-----\nnot*base64\n-----END CERTIFICATE-----\n",
            // No END line, or a BEGIN line in mid-line.
            "-----BEGIN CERTIFICATE-----\nAA==\n",
            "x -----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
        ] {
            assert!(blocks(bad.as_bytes()).is_empty(), "{bad:?}");
        }
        // A bad block does not hide a good one after it.
        let data =
            "-----BEGIN A-----\n***\n-----END A-----\n-----BEGIN B-----\nAA==\n-----END B-----\n";
        assert_eq!(labels(data), vec![("B".into(), false, vec![0])]);
    }
}
