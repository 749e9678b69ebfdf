//! Field selectors: the `fieldSelector` query string, parsed and matched.
//!
//! Input: line 1 the selector, then `field=value` lines: the object's fields.
//! A parsed selector must print as a string that parses back to the same
//! terms, and escaping any value must unescape back to it.
#![no_main]

use apimachinery::field_selector::{FieldOperator, FieldSelector, escape_value, unescape_value};
use kubechain_fuzz::{split_line, text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (selector, rest) = split_line(data);
    let rest = text(rest);
    let fields: Vec<(&str, &str)> = rest
        .lines()
        .map(|line| line.split_once('=').unwrap_or((line, "")))
        .collect();
    let get = |name: &str| {
        fields
            .iter()
            .find(|(field, _)| *field == name)
            .map(|(_, value)| (*value).to_owned())
    };
    let selector = text(selector);
    for (_, value) in &fields {
        let escaped = escape_value(value);
        assert_eq!(
            unescape_value(&escaped).as_deref(),
            Ok(*value),
            "escape of {value:?}"
        );
    }
    let Ok(parsed) = FieldSelector::parse(&selector) else {
        return;
    };
    let matched = parsed.matches(get);
    for field in parsed.fields() {
        let _ = parsed.exact_match(field);
    }
    let printed = parsed.to_string();
    let reparsed = FieldSelector::parse(&printed)
        .unwrap_or_else(|e| panic!("{printed:?} (printed from {selector:?}) does not parse: {e}"));
    assert_eq!(
        terms(&reparsed),
        terms(&parsed),
        "{printed:?} parses differently from {selector:?}"
    );
    assert_eq!(reparsed.matches(get), matched);
});

/// The terms, sorted, with `==` read as `=` (kube prints both as `=`).
fn terms(selector: &FieldSelector) -> Vec<(String, bool, String)> {
    let mut terms: Vec<_> = selector
        .requirements
        .iter()
        .map(|r| {
            (
                r.field.clone(),
                r.op == FieldOperator::NotEquals,
                r.value.clone(),
            )
        })
        .collect();
    terms.sort();
    terms
}
