//! Defaulting and validation against kube-apiserver 1.33's: every entry of
//! `tests/data/kube-1.33-defaults.json` is sent through the front door of
//! one cluster. A minimal object of every resource the core server serves
//! must be answered (and stored) as kube answers it, with the fields kube's
//! defaulters, registry strategies and default admission plugins set; every
//! invalid object or update must get kube's 422 Status: the same message
//! and the same causes. The test prints a table of the cases and fails on
//! any difference not in [`KNOWN`], and on a resource served with `create`
//! that the table does not cover.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use tests::{As, Cluster};

/// Differences from kube 1.33 kubechain keeps, each with its reason:
/// (case, where, why). Each is printed; one that no longer shows fails the
/// test, so the list cannot go stale.
const KNOWN: &[(&str, &str, &str)] = &[
    ("persistentvolumeclaim", "metadata.finalizers", PROTECTION),
    ("persistentvolume", "metadata.finalizers", PROTECTION),
    ("replicaset empty selector", "message", EMPTY_SELECTOR),
    ("replicaset empty selector", "causes", EMPTY_SELECTOR),
    ("statefulset empty selector", "message", EMPTY_SELECTOR),
    ("statefulset empty selector", "causes", EMPTY_SELECTOR),
];

/// Why `selector: {}` is answered as a missing selector is.
const EMPTY_SELECTOR: &str = "decoding into the typed object (which drops \
    unknown fields as kube does) gives a missing spec.selector as {}, so the \
    strategies cannot tell the two apart; they answer as kube does for the \
    common mistake, the missing selector (Required, and a template it cannot match)";

/// Why claims and volumes are created without kube's protection finalizers.
const PROTECTION: &str = "kube's StorageObjectInUseProtection admission adds \
    kubernetes.io/pvc-protection and pv-protection, which only the pvc- and \
    pv-protection controllers of kube-controller-manager remove; kubechain runs \
    neither, so the finalizer alone would keep every deleted claim and volume \
    (and their namespaces) terminating forever";

/// Groups served by other servers of the chain, not the core server.
const OTHER_SERVERS: &[&str] = &[
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "metrics.k8s.io",
];

/// A value in the table that matches any present, non-null value.
const ANY: &str = "<any>";

/// In a table message, stands for any text (a rendered Go value).
const WILDCARD: char = '…';

/// The metadata fields compared; the rest (uid, resourceVersion,
/// creationTimestamp, managedFields) the server picks.
const METADATA: &[&str] = &[
    "labels",
    "annotations",
    "generation",
    "finalizers",
    "ownerReferences",
];

/// One difference: the case, where in the answer, kube's, kubechain's.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Difference {
    case: String,
    at: String,
    kube: String,
    kubechain: String,
}

fn table() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/kube-1.33-defaults.json");
    serde_json::from_slice(&std::fs::read(path).expect("the kube 1.33 defaults table"))
        .expect("the kube 1.33 defaults table is JSON")
}

fn entries<'a>(table: &'a Value, key: &str) -> &'a [Value] {
    table[key].as_array().map(Vec::as_slice).unwrap_or_default()
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

/// The object as compared: everything but the metadata the server picks.
fn compared(object: &Value) -> Value {
    let mut out = object.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| METADATA.contains(&k.as_str()));
    }
    out
}

/// Where `got` differs from `want`, field by field (`<any>` matches any
/// present value), as (path, kube, kubechain).
fn differences(
    at: &str,
    want: &Value,
    got: Option<&Value>,
    out: &mut Vec<(String, String, String)>,
) {
    let shown = |v: Option<&Value>| v.map_or("(absent)".to_string(), Value::to_string);
    match (want, got) {
        (Value::String(s), Some(g)) if s == ANY && !g.is_null() => {}
        (Value::Object(w), Some(Value::Object(g))) => {
            let keys: BTreeSet<&String> = w.keys().chain(g.keys()).collect();
            for key in keys {
                let here = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                match w.get(key) {
                    Some(wv) => differences(&here, wv, g.get(key), out),
                    None => out.push((here, "(absent)".into(), shown(g.get(key)))),
                }
            }
        }
        (Value::Array(w), Some(Value::Array(g))) if w.len() == g.len() => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                differences(&format!("{at}[{i}]"), wv, Some(gv), out);
            }
        }
        (w, g) if g == Some(w) => {}
        (w, g) => out.push((at.to_string(), w.to_string(), shown(g))),
    }
}

/// Whether `text` is `pattern` with each `…` standing for any text.
fn matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split(WILDCARD);
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// `(groupVersion, plural)` of a collection path such as
/// `/apis/apps/v1/namespaces/default/deployments`.
fn resource_of(path: &str) -> (String, String) {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let plural = segments.last().copied().unwrap_or_default().to_string();
    let group_version = match segments.as_slice() {
        ["api", version, ..] => (*version).to_string(),
        ["apis", group, version, ..] => format!("{group}/{version}"),
        _ => String::new(),
    };
    (group_version, plural)
}

fn post(cluster: &Cluster, path: &str, object: &Value) -> tests::Answer {
    cluster.curl(
        As::Admin,
        "POST",
        path,
        &["Content-Type: application/json"],
        Some(object.to_string().as_bytes()),
    )
}

/// Creates one minimal object: the differences of its answer, and of what
/// a GET then reads (metadata and status aside: controllers may have moved
/// them on, as kube's add the service CIDR finalizer).
fn check_defaults(cluster: &Cluster, case: &Value) -> Vec<Difference> {
    let name = text(case, "case");
    let path = text(case, "path");
    let want = compared(&case["stored"]);
    let answer = post(cluster, path, &case["object"]);
    let mut found: Vec<(String, String, String)> = Vec::new();
    if answer.code != 201 {
        found.push((
            "create".into(),
            "201".into(),
            format!("{} {}", answer.code, answer.text),
        ));
    } else {
        differences("", &want, Some(&compared(&answer.json)), &mut found);
        let object_name = text(&case["object"]["metadata"], "name");
        let read = cluster.curl(
            As::Admin,
            "GET",
            &format!("{path}/{object_name}"),
            &[],
            None,
        );
        let mut stored = compared(&read.json);
        let mut want_stored = want.clone();
        for v in [&mut stored, &mut want_stored] {
            if let Some(map) = v.as_object_mut() {
                map.remove("status");
                map.remove("metadata");
            }
        }
        let mut later = Vec::new();
        differences("", &want_stored, Some(&stored), &mut later);
        found.extend(
            later
                .into_iter()
                .map(|(at, k, c)| (format!("stored: {at}"), k, c)),
        );
    }
    found
        .into_iter()
        .map(|(at, kube, kubechain)| Difference {
            case: name.to_string(),
            at,
            kube,
            kubechain,
        })
        .collect()
}

/// Sends one invalid object (or creates the setup object and sends the
/// invalid update as a merge patch): the differences of the Status.
fn check_invalid(cluster: &Cluster, case: &Value) -> Vec<Difference> {
    let name = text(case, "case");
    let path = text(case, "path");
    let mut found: Vec<(String, String, String)> = Vec::new();
    let answer = if let Some(setup) = case.get("setup") {
        let created = post(cluster, path, setup);
        if created.code != 201 {
            found.push((
                "setup".into(),
                "201".into(),
                format!("{} {}", created.code, created.text),
            ));
        }
        let target = format!("{path}/{}", text(&setup["metadata"], "name"));
        cluster.curl(
            As::Admin,
            "PATCH",
            &target,
            &["Content-Type: application/merge-patch+json"],
            Some(case["patch"].to_string().as_bytes()),
        )
    } else {
        post(cluster, path, &case["object"])
    };
    let status = &answer.json;
    let code = case["code"].as_u64().unwrap_or_default();
    if u64::from(answer.code) != code || status["code"].as_u64() != Some(code) {
        found.push(("code".into(), code.to_string(), answer.code.to_string()));
    }
    if status["reason"] != "Invalid" {
        found.push((
            "reason".into(),
            "\"Invalid\"".into(),
            status["reason"].to_string(),
        ));
    }
    let message = text(case, "message");
    if !matches(message, text(status, "message")) {
        found.push((
            "message".into(),
            message.into(),
            text(status, "message").into(),
        ));
    }
    let causes: Vec<&Value> = status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let want = case["causes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let shown = |c: &Value| {
        format!(
            "{} {} {}",
            text(c, "reason"),
            text(c, "field"),
            text(c, "message")
        )
    };
    let same = want.len() == causes.len()
        && want.iter().zip(&causes).all(|(w, c)| {
            text(w, "reason") == text(c, "reason")
                && text(w, "field") == text(c, "field")
                && matches(text(w, "message"), text(c, "message"))
        });
    if !same {
        found.push((
            "causes".into(),
            want.iter().map(shown).collect::<Vec<_>>().join(" | "),
            causes
                .iter()
                .map(|c| shown(c))
                .collect::<Vec<_>>()
                .join(" | "),
        ));
    }
    found
        .into_iter()
        .map(|(at, kube, kubechain)| Difference {
            case: name.to_string(),
            at,
            kube,
            kubechain,
        })
        .collect()
}

/// Every `(groupVersion, plural)` the core server serves with `create`,
/// as the front door's discovery lists them.
fn creatable(cluster: &Cluster) -> BTreeSet<(String, String)> {
    let mut paths = vec!["/api/v1".to_string()];
    let apis = cluster.curl(As::Admin, "GET", "/apis", &[], None);
    assert_eq!(apis.code, 200, "{}", apis.text);
    for group in apis.json["groups"].as_array().into_iter().flatten() {
        if OTHER_SERVERS.contains(&text(group, "name")) {
            continue;
        }
        for version in group["versions"].as_array().into_iter().flatten() {
            paths.push(format!("/apis/{}", text(version, "groupVersion")));
        }
    }
    let mut out = BTreeSet::new();
    for path in paths {
        let list = cluster.curl(As::Admin, "GET", &path, &[], None);
        assert_eq!(list.code, 200, "{path}: {}", list.text);
        for r in list.json["resources"].as_array().into_iter().flatten() {
            let plural = text(r, "name");
            let creates = r["verbs"]
                .as_array()
                .is_some_and(|v| v.iter().any(|v| v == "create"));
            if creates && !plural.contains('/') {
                out.insert((
                    text(&list.json, "groupVersion").to_string(),
                    plural.to_string(),
                ));
            }
        }
    }
    out
}

#[test]
fn defaults_and_validation_match_kube_1_33() {
    let cluster = Cluster::start();
    let table = table();
    // Pods are admitted only once their namespace's default account exists.
    assert!(
        tests::eventually(Duration::from_secs(30), || {
            cluster
                .curl(
                    As::Admin,
                    "GET",
                    "/api/v1/namespaces/default/serviceaccounts/default",
                    &[],
                    None,
                )
                .code
                == 200
        }),
        "the default service account"
    );

    let mut diffs = Vec::new();
    let mut rows = Vec::new();
    for case in entries(&table, "defaults") {
        let found = check_defaults(&cluster, case);
        rows.push(row("defaults", case, &found));
        diffs.extend(found);
    }
    for case in entries(&table, "invalid") {
        let found = check_invalid(&cluster, case);
        rows.push(row("invalid", case, &found));
        diffs.extend(found);
    }

    // Every resource created through the core server has a case or a reason.
    let covered: BTreeSet<(String, String)> = entries(&table, "defaults")
        .iter()
        .map(|c| resource_of(text(c, "path")))
        .chain(
            entries(&table, "excluded")
                .iter()
                .map(|e| (text(e, "groupVersion").into(), text(e, "resource").into())),
        )
        .collect();
    for (group_version, plural) in creatable(&cluster).difference(&covered) {
        diffs.push(Difference {
            case: format!("{group_version} {plural}"),
            at: "covered".into(),
            kube: "a defaults case or an exclusion".into(),
            kubechain: "served with create, not in the table".into(),
        });
    }

    println!("kube 1.33 defaulting and validation against kubechain's:\n");
    println!("| table | case | kubechain |");
    println!("| --- | --- | --- |");
    for row in &rows {
        println!("{row}");
    }
    diffs.sort();
    tests::judge_differences(&diffs, KNOWN, |k, d| k.0 == d.case && k.1 == d.at, |k| k.2);
}

fn row(table: &str, case: &Value, found: &[Difference]) -> String {
    let state = if found.is_empty() {
        "same".to_string()
    } else {
        let at: Vec<&str> = found.iter().map(|d| d.at.as_str()).collect();
        format!("differs: {}", at.join(", "))
    };
    format!("| {table} | {} | {state} |", text(case, "case"))
}

/// The table itself: every case names its source and a unique object, and
/// every invalid case's message is kube's aggregate of its causes.
#[test]
fn defaults_table_is_well_formed() {
    let table = table();
    assert!(!entries(&table, "read").is_empty(), "the sources read");
    let mut names = BTreeSet::new();
    for case in entries(&table, "defaults") {
        let what = text(case, "case");
        assert!(!text(case, "source").is_empty(), "{what}: a source");
        let object = &case["object"];
        let stored = &case["stored"];
        assert_eq!(object["apiVersion"], stored["apiVersion"], "{what}");
        assert_eq!(object["kind"], stored["kind"], "{what}");
        let name = text(&object["metadata"], "name");
        assert!(
            names.insert((text(case, "path").to_string(), name.to_string())),
            "{what}: {name} twice"
        );
        // What the client sent comes back, unless kube moves it (stringData).
        let mut missing = Vec::new();
        if what != "secret" {
            let mut sent = compared(object);
            if let Some(meta) = sent.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.clear();
            }
            let mut found = Vec::new();
            differences("", &sent, Some(&compared(stored)), &mut found);
            missing.extend(found.into_iter().filter(|(_, k, _)| k != "(absent)"));
        }
        assert!(
            missing.is_empty(),
            "{what}: sent but not stored: {missing:?}"
        );
    }
    for case in entries(&table, "invalid") {
        let what = text(case, "case");
        assert!(!text(case, "source").is_empty(), "{what}: a source");
        assert_eq!(case["code"], 422, "{what}");
        assert_eq!(
            case.get("setup").is_some(),
            case.get("patch").is_some(),
            "{what}: a setup object goes with a patch"
        );
        let causes = case["causes"].as_array().expect("causes");
        assert!(!causes.is_empty(), "{what}: causes");
        // kube's ToAggregate drops repeated messages; the causes keep them.
        let mut parts: Vec<String> = Vec::new();
        for c in causes {
            let part = format!("{}: {}", text(c, "field"), text(c, "message"));
            if !parts.contains(&part) {
                parts.push(part);
            }
        }
        let joined = if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        };
        let message = text(case, "message");
        assert!(
            message.ends_with(&format!(" is invalid: {joined}")),
            "{what}: {message} is not the aggregate of its causes {joined}"
        );
    }
    for excluded in entries(&table, "excluded") {
        assert!(!text(excluded, "why").is_empty(), "{excluded}: a reason");
    }
    assert!(matches("a …: b", "a {\"x\":1}: b"));
    assert!(!matches("a …: b", "a x: c"));
    assert!(matches("plain", "plain") && !matches("plain", "plain!"));
}
