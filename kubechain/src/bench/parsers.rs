//! The parser curve (`kubechain bench --curve parsers`): every parser and
//! evaluator a request's body reaches, fed the worst shapes of input we know
//! for it at growing sizes up to the 3 MiB body limit, with the CPU time of
//! one call and the peak memory it added. Work that grows faster than its
//! input shows as a per-byte growth above 1×.
//!
//! The parsers run in this process, as they are linked into the servers
//! (`apimachinery`, `proto`); no cluster is started for this curve.

use std::fmt::Write as _;
use std::time::Duration;

use apimachinery::openapi::{Components, SCHEMA_PREFIX};
use apimachinery::{
    apply, cel, field_selector, jsonpath, label_selector, patch, quantity, schema, yaml,
};
use k8s_openapi::api::core::v1 as core;
use serde_json::{Map, Value, json};

use super::Size;

/// The largest request body a server reads (generic-server's limit).
const BODY_LIMIT: usize = 3 * 1024 * 1024;
/// The stack of the servers' threads (generic-server's runtime), which
/// the parsers run on.
pub const SERVER_STACK_BYTES: usize = 8 << 20;
/// A call slower than this at one size is not repeated at the next.
const TOO_SLOW: Duration = Duration::from_secs(20);

/// One input shape: its parser, a name, and how to make and run it at a size.
struct Shape {
    parser: &'static str,
    input: &'static str,
    /// Prepares the input of about `bytes` bytes and returns the call to time.
    make: fn(usize) -> Box<dyn FnOnce() -> String>,
}

/// The parser curve as a table.
pub fn curve(size: Size) -> String {
    let sizes: &[usize] = match size {
        Size::Small => &[16 << 10, 64 << 10],
        Size::Full => &[64 << 10, 512 << 10, BODY_LIMIT],
    };
    let mut table = String::new();
    let _ = writeln!(
        table,
        "parser curve: CPU time of one call / the resident memory it added at its peak (each in a fresh process), by input size up to the {} MiB body limit",
        BODY_LIMIT >> 20
    );
    let mut header = format!("{:<14} {:<34}", "parser", "input");
    for bytes in sizes {
        let _ = write!(header, " {:>20}", human(*bytes));
    }
    let _ = writeln!(table, "{header} {:>8}  outcome at the largest", "growth");
    for (index, shape) in shapes().into_iter().enumerate() {
        let mut row = format!("{:<14} {:<34}", shape.parser, shape.input);
        let mut first: Option<(usize, Duration)> = None;
        let mut last = (0, Duration::ZERO);
        let mut outcome = String::new();
        for &bytes in sizes {
            if last.1 > TOO_SLOW {
                let _ = write!(row, " {:>20}", "skipped");
                continue;
            }
            let (took, peak, result) = measure(index, bytes);
            let _ = write!(
                row,
                " {:>20}",
                format!("{} / {}", millis(took), human(peak))
            );
            first.get_or_insert((bytes, took));
            last = (bytes, took);
            outcome = result;
        }
        // Time per byte at the largest size over time per byte at the smallest.
        let growth = match first {
            Some((b0, t0)) if t0 > Duration::ZERO && last.0 > b0 => {
                let per0 = t0.as_secs_f64() / b0 as f64;
                let per1 = last.1.as_secs_f64() / last.0 as f64;
                format!("{:.1}×", per1 / per0)
            }
            _ => "-".into(),
        };
        let _ = writeln!(table, "{row} {growth:>8}  {}", short(&outcome));
    }
    table
}

/// The environment variable that makes `kubechain bench --curve parsers`
/// measure one call (`<shape>:<bytes>`) and print it, in a fresh process.
const ONE_CALL: &str = "KUBECHAIN_PARSER_CALL";

/// Measures shape `index` at `bytes` in a fresh process of this program, so
/// that the peak memory is the call's own: its CPU time, the resident
/// memory it added at its peak (bytes), and what it answered.
fn measure(index: usize, bytes: usize) -> (Duration, usize, String) {
    let output = std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .args(["bench", "--curve", "parsers"])
            .env(ONE_CALL, format!("{index}:{bytes}"))
            .stderr(std::process::Stdio::inherit())
            .output()
    });
    let text = match output {
        Ok(output) => String::from_utf8_lossy(&output.stdout).into_owned(),
        Err(e) => return (Duration::ZERO, 0, format!("failed: {e}")),
    };
    let mut fields = text.splitn(3, ' ');
    let mut number = || fields.next().and_then(|f| f.parse::<u64>().ok());
    match (number(), number()) {
        (Some(nanos), Some(peak)) => (
            Duration::from_nanos(nanos),
            peak as usize,
            fields.next().unwrap_or("").trim().to_string(),
        ),
        _ => (Duration::ZERO, 0, format!("failed: {}", short(&text))),
    }
}

/// In the process [`measure`] started: runs the one call named by
/// [`ONE_CALL`] and prints `<CPU ns> <peak bytes added> <outcome>`. `false`
/// when this process was not started for that.
pub fn measure_one_call_if_asked() -> bool {
    let Some((index, bytes)) = std::env::var(ONE_CALL).ok().and_then(|v| {
        let (index, bytes) = v.split_once(':')?;
        Some((index.parse::<usize>().ok()?, bytes.parse::<usize>().ok()?))
    }) else {
        return false;
    };
    let Some(shape) = shapes().into_iter().nth(index) else {
        return false;
    };
    let call = (shape.make)(bytes);
    // Writing 5 to clear_refs resets the peak (VmHWM) to the current RSS.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = status_kib("VmRSS:");
    let started = thread_cpu();
    let outcome = call();
    let took = thread_cpu().saturating_sub(started);
    let peak = status_kib("VmHWM:").saturating_sub(before);
    println!("{} {} {}", took.as_nanos(), peak * 1024, short(&outcome));
    true
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    use nix::time::{ClockId, clock_gettime};
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

/// A `/proc/self/status` line's value, in KiB.
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        })
        .unwrap_or(0)
}

fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn human(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The first line of an outcome, at most 60 characters.
fn short(outcome: &str) -> String {
    let line = outcome.lines().next().unwrap_or("");
    match line.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// `ok` or the error's text.
fn answer<T, E: std::fmt::Display>(result: Result<T, E>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(e) => format!("refused: {e}"),
    }
}

/// `text` repeated until it fills `bytes`.
fn fill(text: &str, bytes: usize) -> String {
    text.repeat(bytes / text.len().max(1))
}

/// `item(i)` for i = 0.. joined by `sep` until about `bytes` long.
fn list(bytes: usize, sep: &str, item: impl Fn(usize) -> String) -> String {
    let mut out = String::with_capacity(bytes + 64);
    let mut i = 0;
    while out.len() < bytes {
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(&item(i));
        i += 1;
    }
    out
}

/// The count of `item`s of `each` bytes in `bytes`.
fn count(bytes: usize, each: usize) -> usize {
    (bytes / each).max(1)
}

/// A length-delimited protobuf field.
fn proto_field(number: u8, data: &[u8]) -> Vec<u8> {
    let mut out = vec![(number << 3) | 2];
    let mut n = data.len();
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(data);
    out
}

/// `k8s\0` + `runtime.Unknown` {typeMeta, raw}.
fn proto_envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [
        proto_field(1, api_version.as_bytes()),
        proto_field(2, kind.as_bytes()),
    ]
    .concat();
    [
        b"k8s\0".to_vec(),
        proto_field(1, &type_meta),
        proto_field(2, raw),
    ]
    .concat()
}

/// A Pod with `n` containers (a list keyed by name), and its OpenAPI schemas.
fn pod(n: usize) -> Value {
    let containers: Vec<Value> = (0..n)
        .map(|i| json!({"name": format!("c{i}"), "image": "x"}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": containers}})
}

/// The Pod schema's root reference and its components.
fn pod_schemas() -> (Value, Map<String, Value>) {
    let mut components = Components::new();
    let name = components.add::<core::Pod>();
    (
        json!({ "$ref": format!("{SCHEMA_PREFIX}{name}") }),
        components.schemas().clone(),
    )
}

/// Containers in about `bytes` of Pod JSON.
fn containers_in(bytes: usize) -> usize {
    count(bytes, r#"{"name":"c00000","image":"x"},"#.len())
}

/// A CRD root schema whose `spec` has a list of integers `l` (at most
/// 50,000), a list `m` (at most 800) and the rule, compiled as the
/// extension server compiles it.
fn rules(rule: &str) -> Result<cel::CompiledRules, String> {
    let spec = json!({"type": "object",
        "x-kubernetes-validations": [{"rule": rule}],
        "properties": {
            "l": {"type": "array", "maxItems": 50_000, "items": {"type": "integer"}},
            "m": {"type": "array", "maxItems": 800, "items": {"type": "integer"}}}});
    let root = json!({"type": "object", "properties": {"spec": spec}});
    cel::compile(&root, "spec.versions[0].schema.openAPIV3Schema").map_err(|errors| {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// Runs `rule` on a Widget whose spec is `spec`.
fn run_rule(rule: &'static str, spec: Value) -> Box<dyn FnOnce() -> String> {
    let object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": spec});
    Box::new(move || match rules(rule) {
        Ok(rules) => match cel::validate_with_warnings(&rules, &object, None)
            .errors
            .first()
        {
            Some(e) => format!("refused: {e}"),
            None => "ok".into(),
        },
        Err(e) => format!("refused at compile: {e}"),
    })
}

/// Every shape of the curve.
fn shapes() -> Vec<Shape> {
    vec![
        Shape {
            parser: "yaml",
            input: "flow nesting x: [[[[…",
            make: |b| {
                let text = format!("x: {}", fill("[", b));
                Box::new(move || answer(yaml::to_json(text.as_bytes())))
            },
        },
        Shape {
            parser: "yaml",
            input: "block nesting - - - - …",
            make: |b| {
                let text = format!("{}1\n", fill("- ", b));
                Box::new(move || answer(yaml::to_json(text.as_bytes())))
            },
        },
        Shape {
            parser: "yaml",
            input: "flow map {k0: 0, k1: 1, …}",
            make: |b| {
                let text = format!("{{{}}}", list(b, ", ", |i| format!("k{i}: {i}")));
                Box::new(move || answer(yaml::to_json(text.as_bytes())))
            },
        },
        Shape {
            parser: "yaml",
            input: "block map k0: v0\\n …",
            make: |b| {
                let text = list(b, "\n", |i| format!("k{i}: v{i}"));
                Box::new(move || answer(yaml::to_json(text.as_bytes())))
            },
        },
        Shape {
            parser: "yaml",
            input: "aliases of a 1,000-item anchor",
            make: |b| {
                let anchor = format!("a: &a [{}]\n", fill("x, ", 3000));
                let text = format!("{anchor}b: [{}]", list(b, ", ", |_| "*a".into()));
                Box::new(move || answer(yaml::to_json(text.as_bytes())))
            },
        },
        Shape {
            parser: "json",
            input: "nesting [[[[…",
            make: |b| {
                let text = fill("[", b);
                Box::new(move || answer(serde_json::from_str::<Value>(&text)))
            },
        },
        Shape {
            parser: "json",
            input: "object {\"k0\":0, …}",
            make: |b| {
                let text = format!("{{{}}}", list(b, ",", |i| format!("\"k{i}\":{i}")));
                Box::new(move || answer(serde_json::from_str::<Value>(&text)))
            },
        },
        Shape {
            parser: "protobuf",
            input: "100 envelopes nested in RawExtensions",
            make: |b| {
                // The innermost holds what the 100 levels (~60 bytes each) leave.
                let core = vec![b' '; b.saturating_sub(6000)];
                let mut body = proto_envelope("apps/v1", "ControllerRevision", &core);
                for _ in 0..100 {
                    let data = proto_field(2, &proto_field(1, &body));
                    body = proto_envelope("apps/v1", "ControllerRevision", &data);
                }
                Box::new(move || answer(proto::k8s::decode(&body)))
            },
        },
        Shape {
            parser: "protobuf",
            input: "ConfigMap with n data entries",
            make: |b| {
                let metadata = proto_field(1, &proto_field(1, b"cm"));
                let mut config_map = metadata;
                let mut i = 0;
                while config_map.len() < b {
                    let entry = [
                        proto_field(1, format!("k{i}").as_bytes()),
                        proto_field(2, b"v"),
                    ]
                    .concat();
                    config_map.extend(proto_field(2, &entry));
                    i += 1;
                }
                let body = proto_envelope("v1", "ConfigMap", &config_map);
                Box::new(move || answer(proto::k8s::decode(&body)))
            },
        },
        Shape {
            parser: "json patch",
            input: "n adds at the front of a list",
            make: |b| {
                let op = r#"{"op":"add","path":"/a/0","value":1}"#;
                let ops = format!("[{}]", list(b, ",", |_| op.into()));
                Box::new(move || {
                    answer(patch::apply_patch(
                        patch::PatchType::Json,
                        &json!({"a": []}),
                        ops.as_bytes(),
                        None,
                    ))
                })
            },
        },
        Shape {
            parser: "json patch",
            input: "n copies of a growing list",
            make: |b| {
                let op = r#"{"op":"copy","from":"/a","path":"/a/-"}"#;
                let ops = format!("[{}]", list(b, ",", |_| op.into()));
                Box::new(move || {
                    answer(patch::apply_patch(
                        patch::PatchType::Json,
                        &json!({"a": [1]}),
                        ops.as_bytes(),
                        None,
                    ))
                })
            },
        },
        Shape {
            parser: "merge patch",
            input: "n keys onto n keys",
            make: |b| {
                let keys = format!("{{{}}}", list(b / 2, ",", |i| format!("\"k{i}\":{i}")));
                let original: Value = serde_json::from_str(&keys).unwrap_or_default();
                Box::new(move || {
                    answer(patch::apply_patch(
                        patch::PatchType::Merge,
                        &original,
                        keys.as_bytes(),
                        None,
                    ))
                })
            },
        },
        Shape {
            parser: "merge patch",
            input: "n nulls onto n keys",
            make: |b| {
                let keys = format!("{{{}}}", list(b / 2, ",", |i| format!("\"k{i}\":{i}")));
                let original: Value = serde_json::from_str(&keys).unwrap_or_default();
                let nulls = format!("{{{}}}", list(b / 2, ",", |i| format!("\"k{i}\":null")));
                Box::new(move || {
                    answer(patch::apply_patch(
                        patch::PatchType::Merge,
                        &original,
                        nulls.as_bytes(),
                        None,
                    ))
                })
            },
        },
        Shape {
            parser: "json patch",
            input: "10,000 removes from n members",
            make: |b| {
                let keys = format!("{{{}}}", list(b / 2, ",", |i| format!("\"k{i}\":{i}")));
                let original: Value = serde_json::from_str(&keys).unwrap_or_default();
                let ops = format!(
                    "[{}]",
                    list(b / 2, ",", |i| format!(
                        r#"{{"op":"remove","path":"/k{i}"}}"#
                    ))
                );
                let ops: Vec<Value> = serde_json::from_str(&ops).unwrap_or_default();
                let ops = serde_json::to_vec(&ops[..ops.len().min(patch::json::MAX_OPERATIONS)])
                    .unwrap_or_default();
                Box::new(move || {
                    answer(patch::apply_patch(
                        patch::PatchType::Json,
                        &original,
                        &ops,
                        None,
                    ))
                })
            },
        },
        Shape {
            parser: "strategic",
            input: "n deletions by key of n containers",
            make: |b| {
                let n = containers_in(b / 2);
                let original = pod(n);
                let deletions: Vec<Value> = (0..n)
                    .map(|i| json!({"$patch": "delete", "name": format!("c{i}")}))
                    .collect();
                let body = json!({"spec": {"containers": deletions}}).to_string();
                let (root, components) = pod_schemas();
                Box::new(move || {
                    let schema = patch::Schema::new(&root, &components);
                    answer(patch::apply_patch(
                        patch::PatchType::StrategicMerge,
                        &original,
                        body.as_bytes(),
                        Some(schema),
                    ))
                })
            },
        },
        Shape {
            parser: "strategic",
            input: "n containers onto n (merge key)",
            make: |b| {
                let n = containers_in(b / 2);
                let original = pod(n);
                let mut changed = pod(n);
                for c in changed["spec"]["containers"]
                    .as_array_mut()
                    .into_iter()
                    .flatten()
                {
                    c["image"] = json!("y");
                }
                let body = changed.to_string();
                let (root, components) = pod_schemas();
                Box::new(move || {
                    let schema = patch::Schema::new(&root, &components);
                    answer(patch::apply_patch(
                        patch::PatchType::StrategicMerge,
                        &original,
                        body.as_bytes(),
                        Some(schema),
                    ))
                })
            },
        },
        Shape {
            parser: "apply",
            input: "n containers, applied twice",
            make: |b| {
                let config = pod(containers_in(b));
                let (root, components) = pod_schemas();
                Box::new(move || {
                    let schema = || apply::Schema::new(&root, &components);
                    let now = "2024-05-01T10:00:00Z";
                    let first = apply::apply(None, &config, "a", "v1", "", false, now, schema());
                    match first {
                        Ok(live) => answer(apply::apply(
                            Some(&live),
                            &config,
                            "b",
                            "v1",
                            "",
                            true,
                            now,
                            schema(),
                        )),
                        Err(e) => answer(Err::<(), _>(e)),
                    }
                })
            },
        },
        Shape {
            parser: "label selector",
            input: "k in (v0, v1, …), matched",
            make: |b| {
                let text = format!("k in ({})", list(b, ",", |i| format!("v{i}")));
                Box::new(move || {
                    let labels = json!({"k": "none"});
                    match label_selector::LabelSelector::parse(&text) {
                        Ok(s) => format!("ok, matches: {}", s.matches(labels.as_object())),
                        Err(e) => format!("refused: {e}"),
                    }
                })
            },
        },
        Shape {
            parser: "label selector",
            input: "k0=v,k1=v,… matched",
            make: |b| {
                let text = list(b, ",", |i| format!("k{i}=v"));
                Box::new(move || {
                    let labels = json!({"k0": "v"});
                    match label_selector::LabelSelector::parse(&text) {
                        Ok(s) => format!("ok, matches: {}", s.matches(labels.as_object())),
                        Err(e) => format!("refused: {e}"),
                    }
                })
            },
        },
        Shape {
            parser: "field selector",
            input: "metadata.name!=a0,… matched",
            make: |b| {
                let text = list(b, ",", |i| format!("metadata.name!=a{i}"));
                Box::new(move || match field_selector::FieldSelector::parse(&text) {
                    Ok(s) => format!("ok, matches: {}", s.matches(|_| Some("b".into()))),
                    Err(e) => format!("refused: {e}"),
                })
            },
        },
        Shape {
            parser: "jsonpath",
            input: "{..a} over n nested objects",
            make: |b| {
                let levels = count(b, r#"{"a":}"#.len()).min(120);
                let mut document = json!(1);
                for _ in 0..levels {
                    document = json!({"a": document, "b": [document.clone()]});
                    if document.to_string().len() > b {
                        break;
                    }
                }
                Box::new(move || match jsonpath::JsonPath::parse("{..a}") {
                    Ok(path) => format!("ok, {} found", path.find(&document).len()),
                    Err(e) => format!("refused: {e}"),
                })
            },
        },
        Shape {
            parser: "jsonpath",
            input: "a path .a.a.a… parsed",
            make: |b| {
                let text = format!("{{{}}}", fill(".a", b));
                Box::new(move || answer(jsonpath::JsonPath::parse(&text)))
            },
        },
        Shape {
            parser: "cel",
            input: "l.map(x, x) on l ≤ 50,000 items",
            make: |b| {
                let items: Vec<usize> = (0..count(b, 7).min(50_000)).collect();
                run_rule("self.l.map(x, x).size() >= 0", json!({"l": items}))
            },
        },
        Shape {
            parser: "cel",
            input: "all pairs of m ≤ 800 items",
            make: |b| {
                let items: Vec<usize> = (0..count(b, 4).min(800)).collect();
                run_rule(
                    "self.m.all(x, self.m.all(y, x + y >= 0))",
                    json!({"m": items}),
                )
            },
        },
        Shape {
            parser: "schema",
            input: "n properties, each with a pattern",
            make: |b| {
                let structural = schema::Structural::new(&json!({"type": "object",
                    "additionalProperties": {"type": "string", "pattern": "^[a-z]+[0-9]*$", "maxLength": 64}}));
                let object: Value = serde_json::from_str(&format!(
                    "{{{}}}",
                    list(b, ",", |i| format!("\"k{i}\":\"v{i}\""))
                ))
                .unwrap_or_default();
                Box::new(move || match structural {
                    Ok(structural) => format!(
                        "ok, {} errors",
                        schema::validate(&object, &structural).len()
                    ),
                    Err(e) => format!("refused: {e}"),
                })
            },
        },
        Shape {
            parser: "quantity",
            input: "n digits",
            make: |b| {
                let text = fill("1", b);
                Box::new(move || match quantity::parse(&text) {
                    Some(n) => format!("ok, {n:e}"),
                    None => "refused".into(),
                })
            },
        },
    ]
}
