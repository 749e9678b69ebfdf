//! API Priority and Fairness through the front door: kube's bootstrap
//! FlowSchemas and PriorityLevelConfigurations listed by kubectl with
//! kube's columns and restored when deleted; a ServiceAccount flooding a
//! tiny level with 64 concurrent LISTs gets kube's 429 with Retry-After,
//! while the admin (exempt) and another ServiceAccount get none; the
//! response headers name the schema's and level's UIDs; the metrics count
//! the rejections; the dump is the admin's, not the ServiceAccount's.

use std::collections::HashMap;
use std::thread;
use std::time::Duration;

use tests::{As, Cluster, eventually};

const NS: &str = "flood";

/// kube's bootstrap FlowSchemas.
const SCHEMAS: [&str; 13] = [
    "exempt",
    "probes",
    "system-leader-election",
    "endpoint-controller",
    "workload-leader-election",
    "system-node-high",
    "system-nodes",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-system-service-accounts",
    "service-accounts",
    "global-default",
    "catch-all",
];

/// A level of 1 share (3 of the 600 seats), one queue of one request, and
/// the schema sending the `flooder` ServiceAccount's requests to it.
const TINY: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: tiny
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    limitResponse:
      type: Queue
      queuing:
        queues: 1
        handSize: 1
        queueLengthLimit: 1
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: flooders
spec:
  priorityLevelConfiguration:
    name: tiny
  matchingPrecedence: 500
  distinguisherMethod:
    type: ByUser
  rules:
  - subjects:
    - kind: ServiceAccount
      serviceAccount:
        namespace: flood
        name: flooder
    resourceRules:
    - verbs: ["*"]
      apiGroups: ["*"]
      resources: ["*"]
      namespaces: ["*"]
"#;

/// One raw response: status, lowercased headers, body.
#[derive(Debug)]
struct Response {
    code: u16,
    headers: HashMap<String, String>,
    body: String,
}

/// GET `path` with curl as `who`, headers included (`-i`).
fn get(cluster: &Cluster, who: As<'_>, path: &str) -> Response {
    let output = cluster
        .curl_command(who)
        .args(["-i", "--max-time", "60"])
        .arg(format!("https://localhost:{}{path}", cluster.port))
        .output()
        .expect("curl on PATH");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let code = lines
        .next()
        .and_then(|status| status.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Response {
        code,
        headers,
        body: body.to_string(),
    }
}

/// How many LISTs each of the 64 flooding threads sends, one after the other.
const ROUNDS: usize = 3;

/// `count` GETs of `path` one after the other with `token`, over one
/// connection (one curl), each timed by curl; every one must succeed.
/// Returns the p50 and p99 in milliseconds.
fn timed(cluster: &Cluster, token: &str, path: &str, count: usize) -> (f64, f64) {
    let url = format!("https://localhost:{}{path}", cluster.port);
    let output = cluster
        .curl_command(As::Token(token))
        .args(["-w", "%{http_code} %{time_total}\\n"])
        .args((0..count).flat_map(|_| ["-o", "/dev/null", &url]))
        .output()
        .expect("curl on PATH");
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut times: Vec<f64> = out
        .lines()
        .map(|line| {
            let (code, seconds) = line.split_once(' ').unwrap_or(("", ""));
            assert_eq!(code, "200", "{out}");
            seconds.trim().parse::<f64>().expect("a time") * 1000.0
        })
        .collect();
    assert_eq!(times.len(), count, "{out}");
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

/// A ServiceAccount in [`NS`] bound to `view` there, and its token.
fn viewer(cluster: &Cluster, name: &str) -> String {
    cluster
        .kubectl(&["create", "serviceaccount", name, "-n", NS])
        .ok();
    cluster
        .kubectl(&[
            "create",
            "rolebinding",
            &format!("{name}-view"),
            "--clusterrole=view",
            &format!("--serviceaccount={NS}:{name}"),
            "-n",
            NS,
        ])
        .ok();
    cluster
        .kubectl(&["create", "token", name, "-n", NS])
        .ok()
        .trim()
        .to_string()
}

fn uid(cluster: &Cluster, kind: &str, name: &str) -> String {
    cluster
        .kubectl(&["get", kind, name, "-o", "jsonpath={.metadata.uid}"])
        .ok()
        .trim()
        .to_string()
}

/// The sum of a metric's samples whose line contains every one of `labels`.
fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[test]
fn priority_and_fairness() {
    let cluster = Cluster::start();

    // kube's bootstrap objects, with kube's columns.
    assert!(
        eventually(Duration::from_secs(30), || {
            let out = cluster.kubectl(&["get", "flowschemas"]).stdout;
            SCHEMAS.iter().all(|s| out.contains(&format!("\n{s} ")))
        }),
        "{}",
        cluster.kubectl(&["get", "flowschemas"]).stdout
    );
    let schemas = cluster.kubectl(&["get", "flowschemas"]).ok().to_string();
    let header: Vec<&str> = schemas
        .lines()
        .next()
        .expect("a header")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "PRIORITYLEVEL",
            "MATCHINGPRECEDENCE",
            "DISTINGUISHERMETHOD",
            "AGE",
            "MISSINGPL"
        ]
    );
    let row = |out: &str, name: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in\n{out}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let exempt = row(&schemas, "exempt");
    assert_eq!(exempt[..4], ["exempt", "exempt", "1", "<none>"]);
    assert!(
        eventually(Duration::from_secs(10), || {
            row(
                &cluster.kubectl(&["get", "flowschemas"]).stdout,
                "catch-all",
            )[5] == "False"
        }),
        "catch-all is not marked as having its level"
    );
    let levels = cluster
        .kubectl(&["get", "prioritylevelconfigurations"])
        .ok()
        .to_string();
    let header: Vec<&str> = levels
        .lines()
        .next()
        .expect("a header")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "TYPE",
            "NOMINALCONCURRENCYSHARES",
            "QUEUES",
            "HANDSIZE",
            "QUEUELENGTHLIMIT",
            "AGE"
        ]
    );
    assert_eq!(
        row(&levels, "catch-all")[..6],
        ["catch-all", "Limited", "5", "<none>", "<none>", "<none>"]
    );
    assert_eq!(
        row(&levels, "workload-low")[..6],
        ["workload-low", "Limited", "100", "128", "6", "50"]
    );
    assert_eq!(row(&levels, "exempt")[1..3], ["Exempt", "<none>"]);

    // Validation, in kube's words.
    let bad = TINY
        .split("---")
        .next()
        .expect("the level")
        .replace("handSize: 1", "handSize: 2");
    let refused = cluster.kubectl_stdin(&["apply", "-f", "-"], &bad);
    assert!(
        refused
            .err()
            .contains("spec.limited.limitResponse.queuing.handSize: Invalid value: 2: should not be greater than queues (1)"),
        "{}",
        refused.stderr
    );

    // A namespace of 300 configmaps: a LIST of them takes 4 seats, more
    // than the tiny level's 3, so it runs alone.
    cluster.kubectl(&["create", "namespace", NS]).ok();
    let items: Vec<serde_json::Value> = (0..300)
        .map(|i| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": NS}, "data": {"i": i.to_string()}})
        })
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    cluster
        .kubectl_stdin(&["create", "-f", "-"], &list.to_string())
        .ok();
    let flooder = viewer(&cluster, "flooder");
    let bystander = viewer(&cluster, "bystander");
    cluster.kubectl_stdin(&["apply", "-f", "-"], TINY).ok();
    let (schema_uid, level_uid) = (
        uid(&cluster, "flowschema", "flooders"),
        uid(&cluster, "prioritylevelconfiguration", "tiny"),
    );
    let path = format!("/api/v1/namespaces/{NS}/configmaps");
    // The front door follows the new schema (and counts the configmaps).
    assert!(
        eventually(Duration::from_secs(10), || {
            let r = get(&cluster, As::Token(&flooder), &path);
            r.code == 200 && r.headers.get("x-kubernetes-pf-flowschema-uid") == Some(&schema_uid)
        }),
        "the flooder's requests are not classified as flooders"
    );
    thread::sleep(Duration::from_secs(1));
    // The bystander's GETs of one object, timed without the flood (reported, not asserted).
    let one = format!("{path}/cm-7");
    let quiet = timed(&cluster, &bystander, &one, 30);

    // 64 LISTs at once from the flooder, three times each; the admin and
    // the bystander at the same time.
    let (flood, others, busy) = thread::scope(|scope| {
        let flood: Vec<_> = (0..64)
            .map(|_| {
                scope.spawn(|| {
                    (0..ROUNDS)
                        .map(|_| get(&cluster, As::Token(&flooder), &path))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let busy = scope.spawn(|| timed(&cluster, &bystander, &one, 30));
        let others: Vec<_> = (0..8)
            .map(|i| {
                let who = if i % 2 == 0 {
                    As::Admin
                } else {
                    As::Token(&bystander)
                };
                let path = &path;
                let cluster = &cluster;
                scope.spawn(move || (0..4).map(|_| get(cluster, who, path)).collect::<Vec<_>>())
            })
            .collect();
        (
            flood
                .into_iter()
                .flat_map(|h| h.join().expect("a flood thread"))
                .collect::<Vec<_>>(),
            others
                .into_iter()
                .flat_map(|h| h.join().expect("a thread"))
                .collect::<Vec<_>>(),
            busy.join().expect("the timed thread"),
        )
    });
    eprintln!(
        "the bystander's GETs (one connection, curl's time_total, 30 each): p50 {:.1} ms, p99 {:.1} ms without the flood; p50 {:.1} ms, p99 {:.1} ms during it",
        quiet.0, quiet.1, busy.0, busy.1
    );
    let rejected: Vec<&Response> = flood.iter().filter(|r| r.code == 429).collect();
    let served = flood.iter().filter(|r| r.code == 200).count();
    eprintln!(
        "flood of 64 × {ROUNDS}: {served} served, {} rejected",
        rejected.len()
    );
    assert!(!rejected.is_empty(), "no 429 in the flood");
    assert!(served > 0, "none of the flood was served");
    assert_eq!(rejected.len() + served, 64 * ROUNDS, "{flood:?}");
    for r in &rejected {
        assert_eq!(r.headers.get("retry-after").map(String::as_str), Some("1"));
        let status: serde_json::Value = serde_json::from_str(&r.body).expect("a Status");
        assert_eq!(
            status["message"],
            "Too many requests, please try again later."
        );
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(status["code"], 429);
    }
    for r in &flood {
        assert_eq!(
            r.headers.get("x-kubernetes-pf-flowschema-uid"),
            Some(&schema_uid)
        );
        assert_eq!(
            r.headers.get("x-kubernetes-pf-prioritylevel-uid"),
            Some(&level_uid)
        );
    }
    assert!(
        others.iter().all(|r| r.code == 200),
        "{:?}",
        others.iter().map(|r| (r.code, &r.body)).collect::<Vec<_>>()
    );
    // The admin is exempt; the bystander is a ServiceAccount like any other.
    let exempt_uid = uid(&cluster, "flowschema", "exempt");
    let accounts_uid = uid(&cluster, "flowschema", "service-accounts");
    let admin = get(&cluster, As::Admin, &path);
    assert_eq!(
        admin.headers.get("x-kubernetes-pf-flowschema-uid"),
        Some(&exempt_uid)
    );
    let other = get(&cluster, As::Token(&bystander), &path);
    assert_eq!(
        other.headers.get("x-kubernetes-pf-flowschema-uid"),
        Some(&accounts_uid)
    );
    assert_eq!(
        other.headers.get("x-kubernetes-pf-prioritylevel-uid"),
        Some(&uid(&cluster, "prioritylevelconfiguration", "workload-low"))
    );

    // The metrics count exactly the flood's rejections.
    let metrics = cluster
        .kubectl(&["get", "--raw", "/metrics"])
        .ok()
        .to_string();
    let flooders = ["flow_schema=\"flooders\"", "priority_level=\"tiny\""];
    assert_eq!(
        metric(
            &metrics,
            "apiserver_flowcontrol_rejected_requests_total",
            &flooders
        ),
        rejected.len() as f64,
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("flooders"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        metric(
            &metrics,
            "apiserver_flowcontrol_dispatched_requests_total",
            &flooders
        ) >= served as f64
    );
    assert_eq!(
        metric(
            &metrics,
            "apiserver_flowcontrol_nominal_limit_seats",
            &["priority_level=\"tiny\""]
        ),
        3.0
    );
    assert_eq!(
        metric(
            &metrics,
            "apiserver_flowcontrol_current_inqueue_requests",
            &flooders
        ),
        0.0
    );
    assert!(metrics.contains("apiserver_flowcontrol_request_wait_duration_seconds_bucket{"));

    // The dump: the admin's, not the ServiceAccount's.
    let dump_path = "/debug/api_priority_and_fairness/dump_priority_levels";
    let dump = get(&cluster, As::Admin, dump_path);
    assert_eq!(dump.code, 200, "{}", dump.body);
    eprintln!("{}", dump.body);
    assert!(
        dump.body
            .starts_with("PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing,"),
        "{}",
        dump.body
    );
    let tiny: Vec<&str> = dump
        .body
        .lines()
        .find(|l| l.starts_with("tiny,"))
        .expect("the tiny level")
        .split(',')
        .map(str::trim)
        .collect();
    assert_eq!(tiny[7], rejected.len().to_string(), "{}", dump.body);
    assert!(
        dump.body
            .lines()
            .any(|l| l.starts_with("exempt,") && l.contains("<none>"))
    );
    let refused = get(&cluster, As::Token(&flooder), dump_path);
    assert_eq!(refused.code, 403, "{}", refused.body);

    // A mandatory schema deleted comes back (a new object).
    cluster.kubectl(&["delete", "flowschema", "catch-all"]).ok();
    assert!(
        eventually(Duration::from_secs(40), || {
            let now = cluster.kubectl(&["get", "flowschema", "catch-all", "-o", "json"]);
            now.code == 0 && now.json()["spec"]["matchingPrecedence"] == 10000
        }),
        "catch-all was not restored"
    );
}
