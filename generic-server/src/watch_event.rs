//! The watch event on the wire, kube's JSON framing: one
//! `{"type":"<TYPE>","object":<object>}` line per event. Every place that
//! writes or reads an event does it here: the watch cache (each event
//! encoded once for all its watchers), the watch handler (bookmarks,
//! Tables, errors), the delegation link's resumed watches, the front
//! door's watch hub, and an aggregated server following the front door.

use bytes::Bytes;
use serde_json::Value;

/// The `type` of an error event.
pub const ERROR: &str = "ERROR";
/// The `type` of a bookmark.
pub const BOOKMARK: &str = "BOOKMARK";

/// The line of an event whose object is already JSON.
pub fn line(kind: &str, object: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    line.into()
}

/// The line of an event whose object is a value.
pub fn value_line(kind: &str, object: &Value) -> Bytes {
    line(
        kind,
        &serde_json::to_vec(object).unwrap_or_else(|_| b"null".to_vec()),
    )
}

/// Whether a line is an ERROR event.
pub fn is_error(line: &[u8]) -> bool {
    line.starts_with(b"{\"type\":\"ERROR\"")
}

/// A parsed event: its type and object.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct Event {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The object (a Status for an error).
    #[serde(default)]
    pub object: Value,
}

impl Event {
    /// The object's resourceVersion, if it has one.
    pub fn resource_version(&self) -> Option<&str> {
        self.object
            .pointer("/metadata/resourceVersion")?
            .as_str()
            .filter(|v| !v.is_empty())
    }
}

/// Parses one line.
pub fn parse(line: &[u8]) -> serde_json::Result<Event> {
    serde_json::from_slice(line)
}

/// The resourceVersion of the last event in `chunk` (whole lines).
pub fn last_resource_version(chunk: &[u8]) -> Option<String> {
    let last = chunk
        .strip_suffix(b"\n")
        .unwrap_or(chunk)
        .rsplit(|b| *b == b'\n')
        .next()?;
    parse(last).ok()?.resource_version().map(str::to_string)
}

/// Takes the whole lines out of `pending` (bytes as they arrive), leaving
/// a line not yet ended; blank lines are skipped.
pub fn take_lines(pending: &mut Vec<u8>) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    while let Some(end) = pending.iter().position(|b| *b == b'\n') {
        let line: Vec<u8> = pending.drain(..=end).collect();
        if !line.iter().all(u8::is_ascii_whitespace) {
            lines.push(line);
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_are_written_and_read_back() {
        let written = value_line("ADDED", &json!({"metadata": {"resourceVersion": "7"}}));
        assert_eq!(
            &written[..],
            b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"7\"}}}\n"
        );
        let event = parse(&written).unwrap();
        assert_eq!(
            (event.kind.as_str(), event.resource_version()),
            ("ADDED", Some("7"))
        );
        assert!(!is_error(&written));
        assert!(is_error(&value_line(ERROR, &json!({"code": 410}))));
        let two = [
            written.to_vec(),
            line(BOOKMARK, b"{\"metadata\":{\"resourceVersion\":\"9\"}}").to_vec(),
        ]
        .concat();
        assert_eq!(last_resource_version(&two).as_deref(), Some("9"));
        let mut pending = two[..two.len() - 5].to_vec();
        pending.extend_from_slice(b"\n");
        let mut cut = b"\n".to_vec();
        cut.extend_from_slice(&two);
        cut.truncate(cut.len() - 3);
        let taken = take_lines(&mut cut);
        assert_eq!(taken.len(), 1);
        assert_eq!(&taken[0][..], &written[..]);
        assert!(!cut.is_empty());
    }
}
