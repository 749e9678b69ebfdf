//! W3C Trace Context across processes: the `traceparent` a client sends
//! (or one the front door starts) travels with the request over every hop —
//! the gRPC links, the proxy to aggregated servers, and calls to admission
//! webhooks — and each process logs its span of the request under the
//! trace's id. Spans of sampled traces (flag `01`) are logged at info,
//! others at debug, so tracing costs nothing unless asked for.

use std::time::Instant;

use http::{HeaderMap, HeaderValue};

/// The header that carries a trace's context.
pub const TRACEPARENT: &str = "traceparent";

/// One span's place in a trace: the trace, this span, and whether the
/// trace is sampled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace's id: 32 lowercase hex digits, not all zero.
    pub trace_id: String,
    /// This span's id: 16 lowercase hex digits, not all zero.
    pub span_id: String,
    /// The span this one was called from, if any.
    pub parent_id: Option<String>,
    /// Whether the caller asked for the trace to be recorded.
    pub sampled: bool,
}

/// Whether `text` is `len` lowercase hex digits, not all zero.
fn hex_id(text: &str, len: usize) -> bool {
    text.len() == len
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && text.bytes().any(|b| b != b'0')
}

/// A random trace id: 16 bytes in hex, not all zero.
fn random_trace_id() -> String {
    format!("{:032x}", rand::random::<u128>().max(1))
}

/// A random span id: 8 bytes in hex, not all zero.
fn random_span_id() -> String {
    format!("{:016x}", rand::random::<u64>().max(1))
}

impl TraceContext {
    /// The context a `traceparent` value names, as the W3C recommendation
    /// parses it (a later version's extra fields are ignored); `None` when
    /// it is malformed, so a new trace starts.
    pub fn parse(value: &str) -> Option<TraceContext> {
        let mut fields = value.trim().split('-');
        let (version, trace_id, parent, flags) = (
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
        );
        let version_ok =
            version.len() == 2 && version.bytes().all(|b| b.is_ascii_hexdigit()) && version != "ff";
        if !version_ok || (version == "00" && fields.next().is_some()) {
            return None;
        }
        if !hex_id(trace_id, 32) || !hex_id(parent, 16) || flags.len() != 2 {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(TraceContext {
            trace_id: trace_id.to_string(),
            span_id: parent.to_string(),
            parent_id: None,
            sampled: flags & 1 == 1,
        })
    }

    /// A new trace, not sampled.
    pub fn start() -> TraceContext {
        TraceContext {
            trace_id: random_trace_id(),
            span_id: random_span_id(),
            parent_id: None,
            sampled: false,
        }
    }

    /// A span called from this one.
    pub fn child(&self) -> TraceContext {
        TraceContext {
            trace_id: self.trace_id.clone(),
            span_id: random_span_id(),
            parent_id: Some(self.span_id.clone()),
            sampled: self.sampled,
        }
    }

    /// This process's span of a request with `headers`: a child of the
    /// caller's span, or the first span of a new trace.
    pub fn of(headers: &HeaderMap) -> TraceContext {
        headers
            .get(TRACEPARENT)
            .and_then(|v| v.to_str().ok())
            .and_then(TraceContext::parse)
            .map_or_else(TraceContext::start, |caller| caller.child())
    }

    /// The `traceparent` naming this span as the parent of the next hop.
    pub fn header(&self) -> String {
        format!(
            "00-{}-{}-{}",
            self.trace_id,
            self.span_id,
            if self.sampled { "01" } else { "00" }
        )
    }

    /// Sets `headers`' `traceparent` to this span, for the next hop.
    pub fn propagate(&self, headers: &mut HeaderMap) {
        if let Ok(value) = HeaderValue::from_str(&self.header()) {
            headers.insert(TRACEPARENT, value);
        }
    }

    /// Logs the span `name` that began at `started` and answered `code`:
    /// at info for a sampled trace, else at debug.
    pub fn log(&self, name: &str, started: Instant, code: u16, audit_id: &str) {
        let parent = self.parent_id.as_deref().unwrap_or("");
        let micros = started.elapsed().as_micros() as u64;
        if self.sampled {
            tracing::info!(target: "trace", trace_id = %self.trace_id, span_id = %self.span_id, parent_id = parent, span = name, %audit_id, code, micros, "span");
        } else {
            tracing::debug!(target: "trace", trace_id = %self.trace_id, span_id = %self.span_id, parent_id = parent, span = name, %audit_id, code, micros, "span");
        }
    }
}

tokio::task_local! {
    /// The span of the request being served by the current task.
    static CURRENT: TraceContext;
}

/// Runs `future` as the span `context` (what [`current`] returns inside).
pub async fn scope<F: std::future::Future>(context: TraceContext, future: F) -> F::Output {
    CURRENT.scope(context, future).await
}

/// The span of the request being served, if the caller is inside one.
pub fn current() -> Option<TraceContext> {
    CURRENT.try_with(Clone::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLED: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_as_the_recommendation_says() {
        let context = TraceContext::parse(SAMPLED).expect("valid");
        assert_eq!(context.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.span_id, "00f067aa0ba902b7");
        assert!(context.sampled);
        assert_eq!(context.header(), SAMPLED);
        let later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-ever";
        assert!(
            TraceContext::parse(later).is_some_and(|c| !c.sampled),
            "a later version's extra fields are ignored"
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-x1",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn each_hop_is_a_child_of_the_one_before() {
        let mut headers = HeaderMap::new();
        headers.insert(TRACEPARENT, HeaderValue::from_static(SAMPLED));
        let front = TraceContext::of(&headers);
        assert_eq!(front.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(front.parent_id.as_deref(), Some("00f067aa0ba902b7"));
        assert_ne!(front.span_id, "00f067aa0ba902b7");
        front.propagate(&mut headers);
        let behind = TraceContext::of(&headers);
        assert_eq!(behind.parent_id.as_deref(), Some(front.span_id.as_str()));
        assert!(behind.sampled);

        let started = TraceContext::of(&HeaderMap::new());
        assert!(hex_id(&started.trace_id, 32) && hex_id(&started.span_id, 16));
        assert!(!started.sampled && started.parent_id.is_none());
    }

    #[tokio::test]
    async fn the_current_span_is_the_scoped_one() {
        assert_eq!(current(), None);
        let context = TraceContext::start();
        let seen = scope(context.clone(), async { current() }).await;
        assert_eq!(seen, Some(context));
    }
}
