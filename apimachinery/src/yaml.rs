//! YAML from untrusted input, read as kube-apiserver reads it (YAML 1.1
//! scalars, as go-yaml v2 resolves them) and bounded in depth, size and work.
//!
//! A request body, an audit policy or a kubeconfig becomes a JSON value here.
//! The parser (serde-saphyr) checks its limits while it scans: nesting deeper
//! than [`MAX_DEPTH`] is refused at the first bracket past the limit, before
//! any more of the input is read, so the time a document takes grows with its
//! length and never with the square of its depth (libyaml, behind the
//! previous parser, rescanned its open flow collections at every token).
//!
//! The reader recurses once per level: the deepest document allowed takes
//! about 4 MiB of stack in a debug build (a tenth of that optimized), so
//! servers read YAML on their runtime's large-stack threads.
//!
//! ```
//! let object = apimachinery::yaml::to_json(b"kind: ConfigMap\ndata: {a: 'x'}").unwrap();
//! assert_eq!(object["data"]["a"], "x");
//! let deep = format!("a: {}", "[".repeat(100_000));
//! assert!(apimachinery::yaml::to_json(deep.as_bytes()).unwrap_err().to_string().contains("128 levels"));
//! ```

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_saphyr::options::DuplicateKeyPolicy;
use serde_saphyr::{Budget, Options};

/// Deepest nesting of sequences and mappings, as serde_json's limit for JSON.
pub const MAX_DEPTH: usize = 128;
/// Most nodes (scalars, sequences, mappings) of one document: more than a
/// body of the largest size the API accepts can hold, so only a document
/// grown by aliases meets it.
pub const MAX_NODES: usize = 4 << 20;
/// Most aliases (`*name`) in one document, and most anchors (`&name`).
pub const MAX_ALIASES: usize = 50_000;
/// Most events copied or replayed for anchors and aliases in one document
/// (the "billion laughs"): about a tenth of a second of work.
pub const MAX_REPLAYED_EVENTS: usize = 100_000;

/// A YAML document that could not be read, in go-yaml's words where they
/// match (`yaml: line 3: mapping values are not allowed in this context`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("yaml: {0}")]
pub struct YamlError(String);

/// Reads one YAML (or JSON) document as a JSON value.
pub fn to_json(bytes: &[u8]) -> Result<Value, YamlError> {
    from_slice(bytes)
}

/// Reads one YAML (or JSON) document into `T`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, YamlError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| YamlError(format!("invalid UTF-8 at byte {}", e.valid_up_to())))?;
    from_str(text)
}

/// Reads one YAML (or JSON) document from text into `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    serde_saphyr::from_str_with_options(text, options()).map_err(|e| YamlError(describe(&e)))
}

/// Writes a value as one YAML document (what `kubectl -o yaml` prints).
pub fn to_string(value: &Value) -> Result<String, YamlError> {
    serde_saphyr::to_string(value).map_err(|e| YamlError(e.to_string()))
}

/// go-yaml v2's reading (YAML 1.1 booleans, octal with a leading zero, merge
/// keys, the last of duplicate keys wins) within the limits above.
fn options() -> Options {
    let mut budget = Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.flow_nesting_limit = MAX_DEPTH;
    budget.max_nodes = MAX_NODES;
    budget.max_events = 2 * MAX_NODES;
    budget.max_aliases = MAX_ALIASES;
    budget.max_anchors = MAX_ALIASES;
    budget.max_recorded_anchor_events = MAX_REPLAYED_EVENTS;
    let mut options = Options::default();
    options.budget = Some(budget);
    options.alias_limits.max_total_replayed_events = MAX_REPLAYED_EVENTS;
    options.duplicate_keys = DuplicateKeyPolicy::LastWins;
    options.legacy_octal_numbers = true;
    options
}

/// One line: where the parser stopped and why, without its source excerpt.
fn describe(error: &serde_saphyr::Error) -> String {
    let error = error.without_snippet();
    let at = error
        .location()
        .map(|l| format!("line {}: ", l.line()))
        .unwrap_or_default();
    let text = error.to_string();
    let first = text.lines().next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // The parser's own position, "line 1 column 5: ", gives way to go-yaml's "line 1: ".
    let message = match first.split_once(": ") {
        Some((position, rest)) if position.starts_with("line ") => rest,
        _ => first,
    };
    let message = message.split(" at line ").next().unwrap_or(message);
    format!(
        "{at}{}",
        limit_message(message).unwrap_or_else(|| message.to_string())
    )
}

/// The limit a document went past, in words, if `message` names one.
fn limit_message(message: &str) -> Option<String> {
    if message.contains("recursion limit") {
        return Some(format!(
            "the document nests more than {MAX_DEPTH} levels deep"
        ));
    }
    let breach = message.strip_prefix("budget breached: ")?;
    let name = breach.split([' ', '{']).next().unwrap_or(breach);
    Some(match name {
        "Depth" => format!("the document nests more than {MAX_DEPTH} levels deep"),
        "Aliases" | "Anchors" => {
            format!("the document has more than {MAX_ALIASES} aliases or anchors")
        }
        "Nodes" | "Events" => format!("the document has more than {MAX_NODES} nodes"),
        "RecordedAnchorEvents" | "RecordedAnchorBytes" => format!(
            "the document's anchors and aliases expand to more than {MAX_REPLAYED_EVENTS} events"
        ),
        _ => format!("the document is too large: {breach}"),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_is_written_reads_back_the_same() {
        let object = serde_json::json!({"kind": "APIService", "spec": {"caBundle": "LS0t", "n": 1,
            "yes": "yes", "list": [{"a": null}, "08"], "empty": {}}});
        let text = super::to_string(&object).unwrap();
        assert_eq!(super::to_json(text.as_bytes()).unwrap(), object, "{text}");
    }

    use super::*;
    use serde_json::json;

    fn yaml(text: &str) -> Value {
        to_json(text.as_bytes()).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn refused(text: &str) -> String {
        match to_json(text.as_bytes()) {
            Ok(v) => panic!("{text:?} was read as {v}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn scalars_resolve_as_go_yaml_v2_resolves_them() {
        assert_eq!(
            yaml("a: yes\nb: off\nc: n\nd: True"),
            json!({"a": true, "b": false, "c": false, "d": true})
        );
        assert_eq!(
            yaml("a: 010\nb: 0x10\nc: 1_000\nd: 1e3"),
            json!({"a": 8, "b": 16, "c": 1000, "d": 1000.0})
        );
        assert_eq!(
            yaml("a: ~\nb: null\nc: '1'\nd: 2020-01-01"),
            json!({"a": null, "b": null, "c": "1", "d": "2020-01-01"})
        );
        assert_eq!(yaml("a: 1\na: 2"), json!({"a": 2}));
        assert_eq!(
            yaml("base: &b {x: 1}\nm:\n  <<: *b\n  y: 2"),
            json!({"base": {"x": 1}, "m": {"x": 1, "y": 2}})
        );
        assert_eq!(yaml(""), Value::Null);
        assert_eq!(
            yaml("{\"json\": [1, 2.5, \"x\"]}"),
            json!({"json": [1, 2.5, "x"]})
        );
    }

    #[test]
    fn errors_name_the_line_in_one_line() {
        let e = refused("a: b: c");
        assert_eq!(
            e,
            "yaml: line 1: mapping values are not allowed in this context"
        );
        assert!(
            refused("a: [1,\n2").starts_with("yaml: line "),
            "{}",
            refused("a: [1,\n2")
        );
        assert!(!refused("{a: 1").contains('\n'));
    }

    /// Runs `test` on a stack as large as a server thread's: a document
    /// near the limit takes more than a test thread's 2 MiB in a debug build.
    fn on_server_stack(test: fn()) {
        let thread = std::thread::Builder::new().stack_size(8 << 20).spawn(test);
        if let Err(panic) = thread.expect("a thread").join() {
            std::panic::resume_unwind(panic);
        }
    }

    #[test]
    fn nesting_stops_at_the_limit_in_flow_and_block_style() {
        on_server_stack(nesting_stops_at_the_limit);
    }

    fn nesting_stops_at_the_limit() {
        let ok = format!(
            "a: {}{}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        yaml(&ok);
        for deep in [
            format!("a: {}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH)),
            format!("spec: {{x: {}", "[".repeat(200_000)),
            format!("a: {}", "{b: ".repeat(200_000)),
            format!("x:\n  {}1\n", "- ".repeat(200_000)),
            (0..MAX_DEPTH + 1)
                .map(|d| format!("{}a:\n", " ".repeat(d)))
                .collect(),
        ] {
            let e = refused(&deep);
            assert!(e.contains("nests more than 128 levels deep"), "{e}");
        }
    }

    #[test]
    fn aliases_cannot_expand_without_bound() {
        on_server_stack(aliases_are_bounded);
    }

    fn aliases_are_bounded() {
        // "Billion laughs": nine levels of aliases, each ten times the last.
        let mut laughs = String::from("a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol,lol]\n");
        for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
        {
            let refs = vec![format!("*{prev}"); 10].join(",");
            laughs.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        let e = refused(&laughs);
        assert!(e.contains("expand to more than 100000 events"), "{e}");
        let many: String = std::iter::once("a: &x 1\nb:\n".to_string())
            .chain((0..MAX_ALIASES + 1).map(|_| "- *x\n".to_string()))
            .collect();
        assert!(refused(&many).contains("aliases"), "{}", refused(&many));
    }
}
