//! What the fuzz targets share: splitting one input into parts, and the
//! OpenAPI v3 schemas of a few built-in kinds for strategic merge patch and
//! server-side apply, built once the way generic-server builds them.

use std::sync::OnceLock;

use apimachinery::openapi::{Components, SCHEMA_PREFIX};
use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch, core::v1 as core};
use serde_json::{Map, Value, json};

/// The input up to the first newline, and the rest after it.
pub fn split_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// The input split at every newline, into at most `n` parts (the last keeps its newlines).
pub fn split_lines(data: &[u8], n: usize) -> Vec<&[u8]> {
    data.splitn(n, |&b| b == b'\n').collect()
}

/// The bytes as JSON, if they are JSON.
pub fn json(bytes: &[u8]) -> Option<Value> {
    serde_json::from_slice(bytes).ok()
}

/// The bytes as text, invalid UTF-8 replaced (so every input reaches the parser).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `components.schemas` of the kinds below, and each kind's root reference.
pub struct KindSchemas {
    /// Schema name to schema, as the server's OpenAPI v3 document holds them.
    pub components: Map<String, Value>,
    /// `(kind, {"$ref": ...})` for every kind added.
    pub roots: Vec<(&'static str, Value)>,
}

impl KindSchemas {
    /// The root reference of `kind` (`Deployment`, `Pod`, ...), if it is one of ours.
    pub fn root(&self, kind: &str) -> Option<&Value> {
        self.roots.iter().find(|(k, _)| *k == kind).map(|(_, r)| r)
    }

    /// The root reference of the object's `kind`, if it is one of ours.
    pub fn root_of(&self, object: &Value) -> Option<&Value> {
        object
            .get("kind")
            .and_then(Value::as_str)
            .and_then(|kind| self.root(kind))
    }
}

/// The schemas of Deployment, StatefulSet, Pod, Service, ConfigMap and Job.
pub fn kind_schemas() -> &'static KindSchemas {
    static SCHEMAS: OnceLock<KindSchemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let mut components = Components::new();
        let names = [
            ("Deployment", components.add::<apps::Deployment>()),
            ("StatefulSet", components.add::<apps::StatefulSet>()),
            ("Pod", components.add::<core::Pod>()),
            ("Service", components.add::<core::Service>()),
            ("ConfigMap", components.add::<core::ConfigMap>()),
            ("Job", components.add::<batch::Job>()),
        ];
        KindSchemas {
            components: components.schemas().clone(),
            roots: names
                .into_iter()
                .map(|(kind, name)| (kind, json!({ "$ref": format!("{SCHEMA_PREFIX}{name}") })))
                .collect(),
        }
    })
}

/// Lets panics raised inside the named crates' sources unwind instead of
/// aborting, for code the server already runs under `catch_unwind` (the CEL
/// interpreter's `todo!()`s, see `extension-server/src/cel/validate.rs`).
///
/// libfuzzer-sys's panic hook aborts on every panic, caught or not; this hook
/// keeps that for every other panic. Run the target's body in
/// [`abort_on_uncaught`] so that a tolerated panic nothing caught is still
/// reported, with its message. `fragments` match the panic location's file,
/// e.g. `/cel-0.`.
pub fn tolerate_caught_panics_in(fragments: &'static [&'static str]) {
    let abort = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let tolerated = info
            .location()
            .is_some_and(|at| fragments.iter().any(|f| at.file().contains(f)));
        if tolerated {
            LAST_TOLERATED.with(|last| *last.borrow_mut() = Some(info.to_string()));
        } else {
            abort(info);
        }
    }));
}

thread_local! {
    static LAST_TOLERATED: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `body`; a tolerated panic that escapes it is printed and aborts, as a crash.
pub fn abort_on_uncaught(body: impl FnOnce()) {
    LAST_TOLERATED.with(|last| *last.borrow_mut() = None);
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).is_err() {
        let message = LAST_TOLERATED.with(|last| last.borrow_mut().take());
        eprintln!("uncaught {}", message.as_deref().unwrap_or("panic"));
        std::process::abort();
    }
}
