//! Label selectors: the `labelSelector` query string and the
//! `metav1.LabelSelector` object, parsed and matched.
//!
//! Input: line 1 the selector string, then a JSON object that is both the
//! labels to match and a `{"matchLabels", "matchExpressions"}` selector.
//! A parsed selector must print as a string that parses back to the same
//! selector (kube's `String()` output is sent on as a query).
#![no_main]

use apimachinery::label_selector::{LabelSelector, Labels};
use kubechain_fuzz::{json, split_line, text};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fuzz_target!(|data: &[u8]| {
    let (selector, rest) = split_line(data);
    let labels = json(rest).unwrap_or(Value::Null);
    let map = labels.as_object().cloned().unwrap_or_default();
    if let Ok(selector) = LabelSelector::parse(&text(selector)) {
        check(&selector, &map);
    }
    if let Ok(selector) = LabelSelector::from_label_selector_object(&labels) {
        check(&selector, &map);
    }
});

fn check(selector: &LabelSelector, labels: &Map<String, Value>) {
    let matched = selector.matches(labels);
    let _ = selector.matches(None);
    let _ = selector.matches_object(&serde_json::json!({"metadata": {"labels": labels}}));
    for requirement in selector.requirements() {
        let _ = selector.requires_exact_match(requirement.key());
    }
    if labels.values().all(Value::is_string) {
        let compact = Labels::from_map(labels);
        assert_eq!(
            selector.matches_labels(Some(&compact)),
            matched,
            "compact labels disagree"
        );
    }
    if selector.matches_nothing() {
        return;
    }
    let printed = selector.to_string();
    let reparsed = LabelSelector::parse(&printed)
        .unwrap_or_else(|e| panic!("{printed:?} (printed from {selector:?}) does not parse: {e}"));
    assert_eq!(reparsed.to_string(), printed, "printing is not stable");
    assert_eq!(
        reparsed.matches(labels),
        matched,
        "{printed:?} matches differently"
    );
}
