//! The Pod Security Standards as kube's PodSecurity admission evaluates them
//! (`k8s.io/pod-security-admission`): the `privileged`, `baseline` and
//! `restricted` levels, every check with its version history, the namespace
//! labels that choose a policy, and kube's words for violations, warnings,
//! audit annotations and the report on a namespace's existing pods. No IO:
//! core-server's admission plugin feeds it namespaces and pods.
//!
//! ```
//! use apimachinery::pod_security::{Evaluator, Level, LevelVersion, Version, describe};
//! use serde_json::json;
//!
//! let spec = json!({"containers": [{"name": "c", "securityContext": {"privileged": true}}]});
//! let baseline = LevelVersion { level: Level::Baseline, version: Version::Latest };
//! let violations = Evaluator::new(33).evaluate(baseline, &json!({}), &spec);
//! assert_eq!(
//!     describe(&violations),
//!     r#"privileged (container "c" must not set securityContext.privileged=true)"#
//! );
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;

use serde_json::Value;

use crate::apply::go_quote;
use crate::error::FieldError;
use crate::label_selector::LabelSet;

/// The prefix of PodSecurity's namespace labels and of its audit annotations.
pub const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";

/// The most existing pods a namespace's new enforce level is checked against.
pub const MAX_PODS_TO_CHECK: usize = 3000;

/// A Pod Security Standards level, ordered from least to most strict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Anything goes.
    Privileged,
    /// Known privilege escalations are refused.
    Baseline,
    /// Current hardening practice.
    Restricted,
}

impl Level {
    /// The level's name (`restricted`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    /// Parses a level label value, with kube's complaint for anything else.
    pub fn parse(text: &str) -> Result<Level, &'static str> {
        match text {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err("must be one of privileged, baseline, restricted"),
        }
    }
}

/// A policy version: `latest`, or `v1.N` (kept as its minor number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// The newest policy the server knows.
    Latest,
    /// The policy of Kubernetes v1.N.
    Minor(u64),
}

impl Version {
    /// Parses a version label value (`latest` or `v1.N`, N without leading
    /// zeros), with kube's complaint for anything else.
    pub fn parse(text: &str) -> Result<Version, &'static str> {
        const BAD: &str = r#"must be "latest" or "v1.x""#;
        if text == "latest" {
            return Ok(Version::Latest);
        }
        let digits = text.strip_prefix("v1.").ok_or(BAD)?;
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !canonical {
            return Err(BAD);
        }
        // Go reads it as a signed 64-bit number.
        digits
            .parse::<i64>()
            .map(|n| Version::Minor(n as u64))
            .map_err(|_| BAD)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::Minor(n) => write!(f, "v1.{n}"),
        }
    }
}

/// A level at a version, printed as kube prints it: `restricted:latest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    /// The level.
    pub level: Level,
    /// The version of the level's checks.
    pub version: Version,
}

impl LevelVersion {
    /// `privileged:latest`, the default of every mode.
    pub const PRIVILEGED: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

/// A namespace's policy: what is enforced, audited and warned about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Pods that violate it are refused.
    pub enforce: LevelVersion,
    /// Violations are recorded in the audit log.
    pub audit: LevelVersion,
    /// Violations are returned to the client as warnings.
    pub warn: LevelVersion,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            enforce: LevelVersion::PRIVILEGED,
            audit: LevelVersion::PRIVILEGED,
            warn: LevelVersion::PRIVILEGED,
        }
    }
}

impl Policy {
    /// The policy a namespace's labels choose,
    /// with kube's field errors for bad values. A policy always comes back:
    /// a bad enforce level fails closed (`restricted`), a bad audit or warn
    /// level fails open (`privileged`), a bad version reads as `latest`. A
    /// warn level left unset follows a stricter enforce level.
    pub fn from_labels(labels: &impl LabelSet) -> (Policy, Vec<FieldError>) {
        let label = |name: &str| {
            let key = format!("{LABEL_PREFIX}{name}");
            let value = labels.label(&key)?.unwrap_or_default();
            Some((key, value))
        };
        let mut policy = Policy::default();
        let mut errors = Vec::new();
        for (mode, name, on_error) in [
            (&mut policy.enforce, "enforce", Level::Restricted),
            (&mut policy.audit, "audit", Level::Privileged),
            (&mut policy.warn, "warn", Level::Privileged),
        ] {
            if let Some((key, text)) = label(name) {
                mode.level = Level::parse(text).unwrap_or_else(|why| {
                    errors.push(label_error(&key, text, why));
                    on_error
                });
            }
            if let Some((key, text)) = label(&format!("{name}-version")) {
                mode.version = Version::parse(text).unwrap_or_else(|why| {
                    errors.push(label_error(&key, text, why));
                    Version::Latest
                });
            }
        }
        let enforce_valid = label("enforce").is_some_and(|(_, text)| Level::parse(text).is_ok());
        if label("warn").is_none() && enforce_valid && policy.enforce.level > policy.warn.level {
            policy.warn.level = policy.enforce.level;
            if label("warn-version").is_none() {
                policy.warn.version = policy.enforce.version;
            }
        }
        (policy, errors)
    }

    /// Whether every mode is `privileged` (nothing to check).
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|m| m.level == Level::Privileged)
    }
}

fn label_error(key: &str, text: &str, why: &str) -> FieldError {
    FieldError::invalid(format!("metadata.labels[{key}]"), text, why)
}

/// Field errors as one message, as Go's aggregate error prints them.
pub fn aggregate(errors: &[FieldError]) -> String {
    let mut messages: Vec<String> = Vec::new();
    for e in errors {
        let message = format!("{}: {}", e.field, e.message());
        if !messages.contains(&message) {
            messages.push(message);
        }
    }
    match messages.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", messages.join(", ")),
    }
}

/// One failed check: kube's short reason and its detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The reason, e.g. `privileged`.
    pub reason: String,
    /// The detail, e.g. `container "c" must not set securityContext.privileged=true`.
    pub detail: String,
}

impl Violation {
    fn new(reason: impl Into<String>, detail: impl Into<String>) -> Option<Violation> {
        Some(Violation {
            reason: reason.into(),
            detail: detail.into(),
        })
    }
}

/// Violations as kube lists them for one pod: `reason (detail), reason (detail)`.
pub fn describe(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| match v.detail.as_str() {
            "" => v.reason.clone(),
            detail => format!("{} ({detail})", v.reason),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The reasons alone, as kube lists them for a namespace's existing pods.
pub fn reasons(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| v.reason.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What PodSecurity decides about one pod or pod template.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Why the pod is refused (`violates PodSecurity "...": ...`), if it is.
    pub denial: Option<String>,
    /// Warnings for the client.
    pub warnings: Vec<String>,
    /// Audit annotations, keyed without [`LABEL_PREFIX`] (`enforce-policy`,
    /// `audit-violations`, `error`), for the audit log to record.
    pub audit_annotations: BTreeMap<String, String>,
}

/// The checks, evaluated as a server of Kubernetes v1.`newest` evaluates
/// them: `latest`, and any newer version, means v1.`newest`.
#[derive(Debug, Clone, Copy)]
pub struct Evaluator {
    newest: u64,
}

impl Evaluator {
    /// An evaluator for a server of Kubernetes v1.`newest`.
    pub fn new(newest: u64) -> Self {
        Evaluator { newest }
    }

    /// The violations of a pod (its metadata and spec) against a level, in
    /// kube's order: baseline checks, then restricted ones, each by id.
    pub fn evaluate(&self, policy: LevelVersion, metadata: &Value, spec: &Value) -> Vec<Violation> {
        if policy.level == Level::Privileged {
            return Vec::new();
        }
        let minor = match policy.version {
            Version::Latest => self.newest,
            Version::Minor(n) => n.min(self.newest),
        };
        let active = |c: &&Check| {
            c.since <= minor && (c.level == Level::Baseline || policy.level == Level::Restricted)
        };
        let overridden: HashSet<&str> = CHECKS
            .iter()
            .filter(active)
            .filter_map(|c| c.overrides)
            .collect();
        let pod = Pod::new(metadata, spec);
        CHECKS
            .iter()
            .filter(active)
            .filter(|c| !overridden.contains(c.id))
            .filter_map(|c| (c.run)(&pod, minor))
            .collect()
    }

    /// kube's decision about a pod (`enforce`) or a workload's pod template
    /// (not enforced: warned about and audited only).
    pub fn decide(
        &self,
        policy: &Policy,
        policy_errors: &[FieldError],
        metadata: &Value,
        spec: &Value,
        enforce: bool,
    ) -> Decision {
        let mut decision = Decision::default();
        if !policy_errors.is_empty() {
            decision.audit_annotations.insert(
                "error".into(),
                format!("Failed to parse policy: {}", aggregate(policy_errors)),
            );
        }
        let mut results: Vec<(LevelVersion, Vec<Violation>)> = Vec::new();
        let mut evaluate = |level: LevelVersion| -> String {
            if let Some((_, found)) = results.iter().find(|(l, _)| *l == level) {
                return describe(found);
            }
            let found = self.evaluate(level, metadata, spec);
            let text = describe(&found);
            results.push((level, found));
            text
        };
        if enforce {
            decision
                .audit_annotations
                .insert("enforce-policy".into(), policy.enforce.to_string());
            let found = evaluate(policy.enforce);
            if !found.is_empty() {
                decision.denial = Some(format!(
                    "violates PodSecurity \"{}\": {found}",
                    policy.enforce
                ));
            }
        }
        let audited = evaluate(policy.audit);
        if !audited.is_empty() {
            decision.audit_annotations.insert(
                "audit-violations".into(),
                format!("would violate PodSecurity \"{}\": {audited}", policy.audit),
            );
        }
        // No warnings on a request that is refused anyway.
        if decision.denial.is_none() {
            let warned = evaluate(policy.warn);
            if !warned.is_empty() {
                decision.warnings.push(format!(
                    "would violate PodSecurity \"{}\": {warned}",
                    policy.warn
                ));
            }
        }
        decision
    }

    /// kube's warnings when a namespace's enforce level changes: `pods`, in
    /// [`check_order`], `total` of them, are checked (at most
    /// [`MAX_PODS_TO_CHECK`], and only while `in_time` says so), and pods
    /// failing alike are counted under the first name.
    pub fn existing_pods_warnings(
        &self,
        namespace: &str,
        enforce: LevelVersion,
        total: usize,
        pods: impl IntoIterator<Item = Value>,
        mut in_time: impl FnMut() -> bool,
    ) -> Vec<String> {
        let mut checked = 0;
        // Each distinct list of reasons, in the order first seen, with the
        // lexically first pod name and the number of pods giving it.
        let mut seen: Vec<String> = Vec::new();
        let mut counts: HashMap<String, (String, usize)> = HashMap::new();
        for pod in pods.into_iter().take(MAX_PODS_TO_CHECK) {
            checked += 1;
            let metadata = pod.get("metadata").unwrap_or(&Value::Null);
            let found = self.evaluate(enforce, metadata, pod.get("spec").unwrap_or(&Value::Null));
            if !found.is_empty() {
                let name = text(metadata.get("name"));
                let key = reasons(&found);
                match counts.get_mut(&key) {
                    Some((first, count)) => {
                        *count += 1;
                        if name < first.as_str() {
                            *first = name.to_string();
                        }
                    }
                    None => {
                        seen.push(key.clone());
                        counts.insert(key, (name.to_string(), 1));
                    }
                }
            }
            if !in_time() {
                break;
            }
        }
        let mut warnings = Vec::new();
        if checked < total {
            warnings.push(format!(
                "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
            ));
        }
        if !seen.is_empty() {
            warnings.push(format!(
                "existing pods in namespace \"{namespace}\" violate the new PodSecurity enforce level \"{enforce}\""
            ));
        }
        let mut per_pod: Vec<String> = seen
            .into_iter()
            .map(|key| {
                let (name, count) = counts.get(&key).cloned().unwrap_or_default();
                match count {
                    1 => format!("{name}: {key}"),
                    2 => format!("{name} (and 1 other pod): {key}"),
                    n => format!("{name} (and {} other pods): {key}", n - 1),
                }
            })
            .collect();
        per_pod.sort();
        warnings.extend(per_pod);
        warnings
    }
}

/// Whether a pod update changes anything the checks could read, as kube
/// judges it: containers added or removed, an image changed, or an
/// ephemeral container added or changed. Other updates are always allowed.
pub fn significant_update(new: &Value, old: &Value) -> bool {
    fn list<'a>(pod: &'a Value, key: &str) -> Vec<&'a Value> {
        items(field(pod, &["spec", key])).collect()
    }
    let image = |c: &Value| c.get("image").cloned();
    for key in ["containers", "initContainers"] {
        let (now, before) = (list(new, key), list(old, key));
        if now.len() != before.len() || now.iter().zip(&before).any(|(a, b)| image(a) != image(b)) {
            return true;
        }
    }
    let before = list(old, "ephemeralContainers");
    list(new, "ephemeralContainers").iter().any(|c| {
        before
            .iter()
            .find(|o| name(o) == name(c))
            .is_none_or(|o| image(o) != image(c))
    })
}

/// The uid of a pod's controller (its `controller: true` owner), if any.
pub fn controller_uid(pod: &Value) -> Option<&str> {
    items(pod.pointer("/metadata/ownerReferences"))
        .find(|r| r.get("controller") == Some(&Value::Bool(true)))
        .map(|r| text(r.get("uid")))
}

/// The order kube checks a namespace's pods in, given each pod's controller
/// uid: one pod per controller (and every uncontrolled pod) first, then the
/// other replicas, each in list order.
pub fn check_order(controllers: &[Option<&str>]) -> Vec<usize> {
    let mut seen = HashSet::new();
    let (first, rest): (Vec<usize>, Vec<usize>) =
        (0..controllers.len()).partition(|&i| controllers[i].is_none_or(|uid| seen.insert(uid)));
    first.into_iter().chain(rest).collect()
}

/// One check of the standard, at the version it first applies.
struct Check {
    id: &'static str,
    level: Level,
    since: u64,
    /// The baseline check this restricted one replaces while it applies.
    overrides: Option<&'static str>,
    run: fn(&Pod<'_>, u64) -> Option<Violation>,
}

const fn check(
    id: &'static str,
    level: Level,
    since: u64,
    run: fn(&Pod<'_>, u64) -> Option<Violation>,
) -> Check {
    Check {
        id,
        level,
        since,
        overrides: None,
        run,
    }
}

const fn replacing(base: &'static str, mut c: Check) -> Check {
    c.overrides = Some(base);
    c
}

/// Every check, baseline ones then restricted ones, each sorted by id (the
/// order of kube's messages).
const CHECKS: &[Check] = &[
    check("appArmorProfile", Level::Baseline, 0, app_armor_profile),
    check(
        "capabilities_baseline",
        Level::Baseline,
        0,
        capabilities_baseline,
    ),
    check("hostNamespaces", Level::Baseline, 0, host_namespaces),
    check("hostPathVolumes", Level::Baseline, 0, host_path_volumes),
    check("hostPorts", Level::Baseline, 0, host_ports),
    check(
        "hostProbesAndHostLifecycle",
        Level::Baseline,
        34,
        host_probes_and_lifecycle,
    ),
    check("privileged", Level::Baseline, 0, privileged),
    check("procMount", Level::Baseline, 0, proc_mount_baseline),
    check("seLinuxOptions", Level::Baseline, 0, se_linux_options),
    check(
        "seccompProfile_baseline",
        Level::Baseline,
        0,
        seccomp_profile_baseline,
    ),
    check("sysctls", Level::Baseline, 0, sysctls),
    check(
        "windowsHostProcess",
        Level::Baseline,
        0,
        windows_host_process,
    ),
    check(
        "allowPrivilegeEscalation",
        Level::Restricted,
        8,
        allow_privilege_escalation,
    ),
    replacing(
        "capabilities_baseline",
        check(
            "capabilities_restricted",
            Level::Restricted,
            22,
            capabilities_restricted,
        ),
    ),
    replacing(
        "procMount",
        check(
            "procMount_restricted",
            Level::Restricted,
            35,
            proc_mount_restricted,
        ),
    ),
    replacing(
        "hostPathVolumes",
        check(
            "restrictedVolumes",
            Level::Restricted,
            0,
            restricted_volumes,
        ),
    ),
    check("runAsNonRoot", Level::Restricted, 0, run_as_non_root),
    check("runAsUser", Level::Restricted, 23, run_as_user),
    replacing(
        "seccompProfile_baseline",
        check(
            "seccompProfile_restricted",
            Level::Restricted,
            19,
            seccomp_profile_restricted,
        ),
    ),
];

/// The parts of a pod the checks read.
struct Pod<'a> {
    metadata: &'a Value,
    spec: &'a Value,
    /// Init containers, containers, then ephemeral containers.
    containers: Vec<&'a Value>,
}

impl<'a> Pod<'a> {
    fn new(metadata: &'a Value, spec: &'a Value) -> Self {
        let containers = ["initContainers", "containers", "ephemeralContainers"]
            .iter()
            .flat_map(|list| items(spec.get(list)))
            .collect();
        Pod {
            metadata,
            spec,
            containers,
        }
    }

    /// A field of the pod's securityContext.
    fn security(&self, path: &[&str]) -> Option<&'a Value> {
        security(self.spec, path)
    }

    /// The containers a predicate picks, by name.
    fn containers_where(&self, mut pick: impl FnMut(&'a Value) -> bool) -> Vec<&'a str> {
        self.containers
            .iter()
            .copied()
            .filter(|c| pick(c))
            .map(|c| name(c))
            .collect()
    }

    /// `spec.os.name` is `windows` (kube exempts such pods from Linux-only
    /// restricted checks since v1.25).
    fn windows(&self, minor: u64) -> bool {
        minor >= 25 && field(self.spec, &["os", "name"]).and_then(Value::as_str) == Some("windows")
    }

    /// `spec.hostUsers` is false (a user namespace; kube relaxes some
    /// checks for it since v1.35).
    fn user_namespace(&self, minor: u64) -> bool {
        minor >= 35 && self.spec.get("hostUsers") == Some(&Value::Bool(false))
    }

    fn annotations(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.metadata
            .get("annotations")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default()))
    }
}

fn items(value: Option<&Value>) -> impl Iterator<Item = &Value> {
    value.and_then(Value::as_array).into_iter().flatten()
}

fn text(value: Option<&Value>) -> &str {
    value.and_then(Value::as_str).unwrap_or_default()
}

fn name(container: &Value) -> &str {
    text(container.get("name"))
}

/// A nested field, absent when null.
fn field<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(value, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

/// A field of an object's (pod's or container's) securityContext.
fn security<'a>(owner: &'a Value, path: &[&str]) -> Option<&'a Value> {
    field(owner.get("securityContext")?, path)
}

fn is_true(value: Option<&Value>) -> bool {
    value == Some(&Value::Bool(true))
}

fn plural<'s>(singular: &'s str, plural: &'s str, count: usize) -> &'s str {
    if count == 1 { singular } else { plural }
}

/// Items quoted and comma-joined, as kube's `joinQuote` (no escaping).
fn join_quote<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    items
        .into_iter()
        .map(|s| format!("\"{}\"", s.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `container "a"` or `containers "a", "b"`.
fn containers_phrase(names: &[&str]) -> String {
    format!(
        "{} {}",
        plural("container", "containers", names.len()),
        join_quote(names)
    )
}

/// A violation blaming `who` (joined by ` and `) for `what`, or none when
/// nobody is to blame.
fn blame(reason: &str, who: Vec<String>, what: impl fmt::Display) -> Option<Violation> {
    if who.is_empty() {
        return None;
    }
    Violation::new(reason, format!("{} {what}", who.join(" and ")))
}

/// `pod or container "a"`: containers that must set something the pod did not.
fn pod_or(containers: &[&str]) -> Vec<String> {
    setters(false, containers)
        .into_iter()
        .map(|c| format!("pod or {c}"))
        .collect()
}

/// Who set something: `pod`, containers, or both.
fn setters(pod: bool, containers: &[&str]) -> Vec<String> {
    let mut who = Vec::new();
    if pod {
        who.push("pod".to_string());
    }
    if !containers.is_empty() {
        who.push(containers_phrase(containers));
    }
    who
}

fn app_armor_profile(pod: &Pod<'_>, _: u64) -> Option<Violation> {
    let mut types = BTreeSet::new();
    let mut bad = |profile: Option<&Value>| {
        let kind = profile.map(|p| text(p.get("type")))?;
        (!matches!(kind, "RuntimeDefault" | "Localhost")).then(|| types.insert(kind.to_string()))
    };
    let pod_bad = bad(pod.security(&["appArmorProfile"])).is_some();
    let containers = pod.containers_where(|c| bad(security(c, &["appArmorProfile"])).is_some());
    let mut who = setters(pod_bad, &containers);
    let mut annotations: Vec<String> = pod
        .annotations()
        .filter(|(k, v)| {
            k.starts_with("container.apparmor.security.beta.kubernetes.io/")
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect();
    let mut values: Vec<String> = types.into_iter().collect();
    if !annotations.is_empty() {
        annotations.sort();
        who.push(plural("annotation", "annotations", annotations.len()).to_string());
        values.extend(annotations);
    }
    blame(
        plural(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        who,
        format!(
            "must not set AppArmor profile type to {}",
            join_quote(&values)
        ),
    )
}

/// Capabilities a baseline container may add.
const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// The containers adding capabilities outside `allowed`, and those capabilities.
fn added_capabilities<'a>(pod: &Pod<'a>, allowed: &[&str]) -> (Vec<&'a str>, BTreeSet<&'a str>) {
    let mut added = BTreeSet::new();
    let containers = pod.containers_where(|c| {
        let mut bad = false;
        for cap in items(security(c, &["capabilities", "add"])) {
            let cap = cap.as_str().unwrap_or_default();
            if !allowed.contains(&cap) {
                added.insert(cap);
                bad = true;
            }
        }
        bad
    });
    (containers, added)
}

/// What containers adding capabilities are told.
fn must_not_add(added: BTreeSet<&str>) -> String {
    format!(
        "must not include {} in securityContext.capabilities.add",
        join_quote(added)
    )
}

fn capabilities_baseline(pod: &Pod<'_>, _: u64) -> Option<Violation> {
    let (containers, added) = added_capabilities(pod, DEFAULT_CAPABILITIES);
    blame(
        "non-default capabilities",
        setters(false, &containers),
        must_not_add(added),
    )
}

fn host_namespaces(pod: &Pod<'_>, _: u64) -> Option<Violation> {
    let shared: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .iter()
        .filter(|f| is_true(pod.spec.get(**f)))
        .map(|f| format!("{f}=true"))
        .collect();
    if shared.is_empty() {
        return None;
    }
    Violation::new("host namespaces", shared.join(", "))
}

fn host_path_volumes(pod: &Pod<'_>, _: u64) -> Option<Violation> {
    let volumes: Vec<&str> = items(pod.spec.get("volumes"))
        .filter(|v| field(v, &["hostPath"]).is_some())
        .map(name)
        .collect();
    if volumes.is_empty() {
        return None;
    }
    Violation::new(
        "hostPath volumes",
        format!(
            "{} {}",
            plural("volume", "volumes", volumes.len()),
            join_quote(&volumes)
        ),
    )
}

fn host_ports(pod: &Pod<'_>, _: u64) -> Option<Violation> {
    let mut ports = BTreeSet::new();
    let containers = pod.containers_where(|c| {
        let mut bad = false;
        for port in items(c.get("ports")) {
            match port.get("hostPort").and_then(Value::as_i64) {
                Some(p) if p != 0 => {
                    ports.insert(p.to_string());
                    bad = true;
                }
                _ => {}
            }
        }
        bad
    });
    blame(
        "hostPort",
        setters(false, &containers),
        format!(
            "{} {} {}",
            plural("uses", "use", containers.len()),
            plural("hostPort", "hostPorts", ports.len()),
            ports.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

fn host_probes_and_lifecycle(pod: &Pod<'_>, _: u64) -> Option<Violation> {
    const HANDLERS: &[&[&str]] = &[
        &["livenessProbe"],
        &["readinessProbe"],
        &["startupProbe"],
        &["lifecycle", "postStart"],
        &["lifecycle", "preStop"],
    ];
    let mut containers = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for c in &pod.containers {
        for handler in HANDLERS.iter().filter_map(|path| field(c, path)) {
            for action in ["httpGet", "tcpSocket"] {
                let host = text(field(handler, &[action, "host"]));
                if !host.is_empty() {
                    containers.insert(name(c));
                    hosts.insert(host);
                }
            }
        }
    }
    let names: Vec<&str> = containers.into_iter().collect();
    blame(
        "probe or lifecycle host",
        setters(false, &names),
        format!(
            "{} {} {}",
            plural("uses", "use", names.len()),
            plural(
                "probe or lifecycle host",
                "probe or lifecycle hosts",
                hosts.len()
            ),
            join_quote(hosts)
        ),
    )
}

fn privileged(pod: &Pod<'_>, _: u64) -> Option<Violation> {
    let containers = pod.containers_where(|c| is_true(security(c, &["privileged"])));
    blame(
        "privileged",
        setters(false, &containers),
        "must not set securityContext.privileged=true",
    )
}

/// Refuses any procMount but `Default`.
fn proc_mount_restricted(pod: &Pod<'_>, _: u64) -> Option<Violation> {
    let mut kinds = BTreeSet::new();
    let containers = pod.containers_where(|c| match security(c, &["procMount"]) {
        Some(kind) if kind.as_str() != Some("Default") => {
            kinds.insert(kind.as_str().unwrap_or_default());
            true
        }
        _ => false,
    });
    blame(
        "procMount",
        setters(false, &containers),
        format!(
            "must not set securityContext.procMount to {}",
            join_quote(kinds)
        ),
    )
}

/// As [`proc_mount_restricted`], but any value is allowed in a user namespace.
fn proc_mount_baseline(pod: &Pod<'_>, minor: u64) -> Option<Violation> {
    if pod.user_namespace(minor) {
        return None;
    }
    proc_mount_restricted(pod, minor)
}

fn se_linux_options(pod: &Pod<'_>, minor: u64) -> Option<Violation> {
    let engine = if minor >= 31 {
        "container_engine_t"
    } else {
        ""
    };
    let allowed = [
        "",
        "container_t",
        "container_init_t",
        "container_kvm_t",
        engine,
    ];
    let mut types = BTreeSet::new();
    let (mut user, mut role) = (false, false);
    let mut bad = |options: Option<&Value>| {
        let Some(options) = options else {
            return false;
        };
        let kind = text(options.get("type"));
        let bad_type = !allowed.contains(&kind);
        if bad_type {
            types.insert(kind.to_string());
        }
        let set_user = !text(options.get("user")).is_empty();
        let set_role = !text(options.get("role")).is_empty();
        user |= set_user;
        role |= set_role;
        bad_type || set_user || set_role
    };
    let pod_bad = bad(pod.security(&["seLinuxOptions"]));
    let containers = pod.containers_where(|c| bad(security(c, &["seLinuxOptions"])));
    let mut what = Vec::new();
    if !types.is_empty() {
        what.push(format!(
            "{} {}",
            plural("type", "types", types.len()),
            join_quote(&types)
        ));
    }
    if user {
        what.push("user may not be set".to_string());
    }
    if role {
        what.push("role may not be set".to_string());
    }
    blame(
        "seLinuxOptions",
        setters(pod_bad, &containers),
        format!(
            "set forbidden securityContext.seLinuxOptions: {}",
            what.join("; ")
        ),
    )
}

fn valid_seccomp(profile: &Value) -> bool {
    matches!(text(profile.get("type")), "RuntimeDefault" | "Localhost")
}

/// Seccomp profiles explicitly set to something other than `RuntimeDefault`
/// or `Localhost`, by the pod or its containers.
fn seccomp_set_badly(pod: &Pod<'_>) -> Option<Violation> {
    let mut values = BTreeSet::new();
    let mut bad = |profile: Option<&Value>| match profile {
        Some(p) if !valid_seccomp(p) => {
            values.insert(text(p.get("type")).to_string());
            true
        }
        _ => false,
    };
    let pod_bad = bad(pod.security(&["seccompProfile"]));
    let containers = pod.containers_where(|c| bad(security(c, &["seccompProfile"])));
    blame(
        "seccompProfile",
        setters(pod_bad, &containers),
        format!(
            "must not set securityContext.seccompProfile.type to {}",
            join_quote(values)
        ),
    )
}

/// Before v1.19: the seccomp annotations, after: the fields.
fn seccomp_profile_baseline(pod: &Pod<'_>, minor: u64) -> Option<Violation> {
    if minor >= 19 {
        return seccomp_set_badly(pod);
    }
    const POD_KEY: &str = "seccomp.security.alpha.kubernetes.io/pod";
    let valid =
        |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let annotations: BTreeMap<&str, &str> = pod.annotations().collect();
    let container_keys = pod
        .containers
        .iter()
        .map(|c| format!("container.seccomp.security.alpha.kubernetes.io/{}", name(c)));
    let forbidden: BTreeSet<String> = std::iter::once(POD_KEY.to_string())
        .chain(container_keys)
        .filter_map(|key| {
            let value = annotations.get(key.as_str())?;
            (!valid(value)).then(|| format!("{key}={}", go_quote(value)))
        })
        .collect();
    if forbidden.is_empty() {
        return None;
    }
    Violation::new(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            plural("annotation", "annotations", forbidden.len()),
            forbidden.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

fn seccomp_profile_restricted(pod: &Pod<'_>, minor: u64) -> Option<Violation> {
    if pod.windows(minor) {
        return None;
    }
    seccomp_set_badly(pod).or_else(|| {
        if pod.security(&["seccompProfile"]).is_some() {
            return None;
        }
        let unset = pod.containers_where(|c| security(c, &["seccompProfile"]).is_none());
        blame(
            "seccompProfile",
            pod_or(&unset),
            r#"must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
        )
    })
}

/// The sysctls a baseline pod may set, by the version that allowed them.
const SAFE_SYSCTLS: &[(u64, &str)] = &[
    (0, "kernel.shm_rmid_forced"),
    (0, "net.ipv4.ip_local_port_range"),
    (0, "net.ipv4.tcp_syncookies"),
    (0, "net.ipv4.ping_group_range"),
    (0, "net.ipv4.ip_unprivileged_port_start"),
    (27, "net.ipv4.ip_local_reserved_ports"),
    (29, "net.ipv4.tcp_keepalive_time"),
    (29, "net.ipv4.tcp_fin_timeout"),
    (29, "net.ipv4.tcp_keepalive_intvl"),
    (29, "net.ipv4.tcp_keepalive_probes"),
    (32, "net.ipv4.tcp_rmem"),
    (32, "net.ipv4.tcp_wmem"),
    (37, "net.ipv4.tcp_slow_start_after_idle"),
    (37, "net.ipv4.tcp_notsent_lowat"),
];

fn sysctls(pod: &Pod<'_>, minor: u64) -> Option<Violation> {
    let forbidden: Vec<&str> = items(pod.security(&["sysctls"]))
        .map(name)
        .filter(|n| {
            !SAFE_SYSCTLS
                .iter()
                .any(|(since, s)| *since <= minor && s == n)
        })
        .collect();
    if forbidden.is_empty() {
        return None;
    }
    Violation::new("forbidden sysctls", forbidden.join(", "))
}

fn windows_host_process(pod: &Pod<'_>, _: u64) -> Option<Violation> {
    let host_process = |owner: &Value| is_true(security(owner, &["windowsOptions", "hostProcess"]));
    let containers = pod.containers_where(host_process);
    blame(
        "hostProcess",
        setters(host_process(pod.spec), &containers),
        "must not set securityContext.windowsOptions.hostProcess=true",
    )
}

fn allow_privilege_escalation(pod: &Pod<'_>, minor: u64) -> Option<Violation> {
    if pod.windows(minor) {
        return None;
    }
    let containers = pod.containers_where(|c| {
        security(c, &["allowPrivilegeEscalation"]) != Some(&Value::Bool(false))
    });
    blame(
        "allowPrivilegeEscalation != false",
        setters(false, &containers),
        "must set securityContext.allowPrivilegeEscalation=false",
    )
}

fn capabilities_restricted(pod: &Pod<'_>, minor: u64) -> Option<Violation> {
    if pod.windows(minor) {
        return None;
    }
    let keeping = pod.containers_where(|c| {
        !items(security(c, &["capabilities", "drop"])).any(|d| d.as_str() == Some("ALL"))
    });
    let (adding, added) = added_capabilities(pod, &["NET_BIND_SERVICE"]);
    let mut details = Vec::new();
    if !keeping.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_phrase(&keeping)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} {}",
            containers_phrase(&adding),
            must_not_add(added)
        ));
    }
    if details.is_empty() {
        return None;
    }
    Violation::new("unrestricted capabilities", details.join("; "))
}

/// Inline volume types a restricted pod may use.
const ALLOWED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// Restricted volume types, in the order kube names the first one found.
const RESTRICTED_VOLUMES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn restricted_volumes(pod: &Pod<'_>, _: u64) -> Option<Violation> {
    let mut volumes = Vec::new();
    let mut kinds = BTreeSet::new();
    for volume in items(pod.spec.get("volumes")) {
        if ALLOWED_VOLUMES
            .iter()
            .any(|k| field(volume, &[*k]).is_some())
        {
            continue;
        }
        volumes.push(name(volume));
        let kind = RESTRICTED_VOLUMES
            .iter()
            .copied()
            .find(|k| field(volume, &[*k]).is_some())
            .unwrap_or("unknown");
        kinds.insert(kind);
    }
    if volumes.is_empty() {
        return None;
    }
    Violation::new(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            plural("volume", "volumes", volumes.len()),
            join_quote(&volumes),
            plural("uses", "use", volumes.len()),
            plural(
                "restricted volume type",
                "restricted volume types",
                kinds.len()
            ),
            join_quote(kinds)
        ),
    )
}

fn run_as_non_root(pod: &Pod<'_>, minor: u64) -> Option<Violation> {
    const REASON: &str = "runAsNonRoot != true";
    if pod.user_namespace(minor) {
        return None;
    }
    let pod_setting = pod.security(&["runAsNonRoot"]);
    let explicit =
        pod.containers_where(|c| security(c, &["runAsNonRoot"]) == Some(&Value::Bool(false)));
    blame(
        REASON,
        setters(pod_setting == Some(&Value::Bool(false)), &explicit),
        "must not set securityContext.runAsNonRoot=false",
    )
    .or_else(|| {
        if is_true(pod_setting) {
            return None;
        }
        let implicit = pod.containers_where(|c| security(c, &["runAsNonRoot"]).is_none());
        blame(
            REASON,
            pod_or(&implicit),
            "must set securityContext.runAsNonRoot=true",
        )
    })
}

fn run_as_user(pod: &Pod<'_>, minor: u64) -> Option<Violation> {
    if pod.user_namespace(minor) {
        return None;
    }
    let root = |owner: &Value| security(owner, &["runAsUser"]).and_then(Value::as_i64) == Some(0);
    let containers = pod.containers_where(root);
    blame(
        "runAsUser=0",
        setters(root(pod.spec), &containers),
        "must not set runAsUser=0",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RESTRICTED: LevelVersion = LevelVersion {
        level: Level::Restricted,
        version: Version::Latest,
    };
    const BASELINE: LevelVersion = LevelVersion {
        level: Level::Baseline,
        version: Version::Latest,
    };

    fn labels(value: Value) -> serde_json::Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    fn at(level: Level, minor: u64) -> LevelVersion {
        LevelVersion {
            level,
            version: Version::Minor(minor),
        }
    }

    /// A container that meets `restricted`.
    fn good(name: &str) -> Value {
        json!({"name": name, "image": "i", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}}})
    }

    /// A restricted-clean pod spec with `change` merged into its first container's securityContext.
    fn spec_with(change: Value) -> Value {
        let mut c = good("c");
        for (k, v) in change.as_object().cloned().unwrap_or_default() {
            c["securityContext"][k] = v;
        }
        json!({"containers": [c]})
    }

    fn eval(level: LevelVersion, metadata: Value, spec: Value) -> String {
        describe(&Evaluator::new(33).evaluate(level, &metadata, &spec))
    }

    fn restricted(spec: Value) -> String {
        eval(RESTRICTED, json!({}), spec)
    }

    fn baseline(spec: Value) -> String {
        eval(BASELINE, json!({}), spec)
    }

    #[test]
    fn checks_are_in_kube_order() {
        for level in [Level::Baseline, Level::Restricted] {
            let ids: Vec<&str> = CHECKS
                .iter()
                .filter(|c| c.level == level)
                .map(|c| c.id)
                .collect();
            let mut sorted = ids.clone();
            sorted.sort();
            assert_eq!(ids, sorted);
        }
        let first_restricted = CHECKS.iter().position(|c| c.level == Level::Restricted);
        assert!(
            CHECKS[first_restricted.unwrap_or(0)..]
                .iter()
                .all(|c| c.level == Level::Restricted)
        );
    }

    #[test]
    fn a_bare_container_violates_restricted_in_kube_words() {
        assert_eq!(
            restricted(json!({"containers": [{"name": "c", "image": "nginx"}]})),
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
        );
        assert_eq!(restricted(json!({"containers": [good("c")]})), "");
        assert_eq!(baseline(json!({"containers": [{"name": "c"}]})), "");
        let privileged = LevelVersion::PRIVILEGED;
        assert_eq!(
            eval(
                privileged,
                json!({}),
                spec_with(json!({"privileged": true}))
            ),
            ""
        );
    }

    #[test]
    fn several_containers_are_listed_together() {
        let spec = json!({"initContainers": [{"name": "i"}], "containers": [{"name": "a"}, good("b")],
                          "ephemeralContainers": [{"name": "e"}]});
        let found = restricted(spec);
        assert!(
            found.starts_with(
                r#"allowPrivilegeEscalation != false (containers "i", "a", "e" must set"#
            ),
            "{found}"
        );
    }

    #[test]
    fn privileged() {
        assert_eq!(
            baseline(spec_with(json!({"privileged": true}))),
            r#"privileged (container "c" must not set securityContext.privileged=true)"#
        );
        assert_eq!(baseline(spec_with(json!({"privileged": false}))), "");
    }

    #[test]
    fn host_namespaces_paths_and_ports() {
        let mut spec = spec_with(json!({}));
        spec["hostNetwork"] = json!(true);
        spec["hostIPC"] = json!(true);
        spec["volumes"] =
            json!([{"name": "h", "hostPath": {"path": "/"}}, {"name": "e", "emptyDir": {}}]);
        spec["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9, "hostPort": 10000}]);
        assert_eq!(
            baseline(spec.clone()),
            r#"host namespaces (hostNetwork=true, hostIPC=true), hostPath volumes (volume "h"), hostPort (container "c" uses hostPorts 10000, 8080)"#
        );
        // Restricted names hostPath as a restricted volume type instead.
        assert_eq!(
            restricted(spec),
            r#"host namespaces (hostNetwork=true, hostIPC=true), hostPort (container "c" uses hostPorts 10000, 8080), restricted volume types (volume "h" uses restricted volume type "hostPath")"#
        );
    }

    #[test]
    fn restricted_volume_types() {
        let mut spec = spec_with(json!({}));
        spec["volumes"] = json!([{"name": "a", "nfs": {}}, {"name": "b", "gitRepo": {}},
                                 {"name": "c", "secret": {}}, {"name": "d"}]);
        assert_eq!(
            restricted(spec),
            r#"restricted volume types (volumes "a", "b", "d" use restricted volume types "gitRepo", "nfs", "unknown")"#
        );
    }

    #[test]
    fn capabilities() {
        let add = spec_with(json!({"capabilities": {"add": ["NET_RAW", "CHOWN", "SYS_ADMIN"]}}));
        assert_eq!(
            baseline(add.clone()),
            r#"non-default capabilities (container "c" must not include "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add)"#
        );
        assert_eq!(
            restricted(add),
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]; container "c" must not include "CHOWN", "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add)"#
        );
        let bind =
            spec_with(json!({"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}));
        assert_eq!(restricted(bind), "");
        // Before v1.22 restricted checked only the baseline capabilities.
        let keep = spec_with(json!({"capabilities": {"add": ["NET_RAW"]}}));
        assert_eq!(
            eval(at(Level::Restricted, 21), json!({}), keep),
            r#"non-default capabilities (container "c" must not include "NET_RAW" in securityContext.capabilities.add)"#
        );
    }

    #[test]
    fn run_as_non_root_and_run_as_user() {
        let mut spec = spec_with(json!({"runAsNonRoot": false, "runAsUser": 0}));
        spec["securityContext"] = json!({"runAsNonRoot": false, "runAsUser": 0});
        assert_eq!(
            restricted(spec),
            r#"runAsNonRoot != true (pod and container "c" must not set securityContext.runAsNonRoot=false), runAsUser=0 (pod and container "c" must not set runAsUser=0)"#
        );
        let mut pod_level = json!({"containers": [good("a"), good("b")]});
        pod_level["securityContext"] = json!({"runAsNonRoot": true});
        for c in [
            "/containers/0/securityContext",
            "/containers/1/securityContext",
        ] {
            if let Some(sc) = pod_level.pointer_mut(c).and_then(Value::as_object_mut) {
                sc.remove("runAsNonRoot");
            }
        }
        assert_eq!(restricted(pod_level), "");
        // runAsUser is checked from v1.23.
        let root = spec_with(json!({"runAsUser": 0}));
        assert_eq!(eval(at(Level::Restricted, 22), json!({}), root.clone()), "");
        assert!(restricted(root).starts_with("runAsUser=0"));
    }

    #[test]
    fn user_namespaces_relax_root_checks_from_v1_35() {
        let mut spec =
            spec_with(json!({"runAsNonRoot": false, "runAsUser": 0, "procMount": "Unmasked"}));
        spec["hostUsers"] = json!(false);
        let evaluator = Evaluator::new(37);
        let found = |lv| describe(&evaluator.evaluate(lv, &json!({}), &spec));
        assert_eq!(
            found(at(Level::Restricted, 35)),
            r#"procMount (container "c" must not set securityContext.procMount to "Unmasked")"#
        );
        assert_eq!(found(at(Level::Baseline, 35)), "");
        assert!(found(at(Level::Restricted, 34)).contains("runAsUser=0"));
        assert!(found(at(Level::Baseline, 34)).starts_with("procMount"));
    }

    #[test]
    fn seccomp_profiles() {
        let mut spec = spec_with(json!({"seccompProfile": {"type": "Unconfined"}}));
        spec["securityContext"] = json!({"seccompProfile": {"type": "Unconfined"}});
        let expected = r#"seccompProfile (pod and container "c" must not set securityContext.seccompProfile.type to "Unconfined")"#;
        assert_eq!(baseline(spec.clone()), expected);
        assert_eq!(restricted(spec), expected);
        let mut pod_level = json!({"containers": [{"name": "c", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": true}}]});
        pod_level["securityContext"] =
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "p"}});
        assert_eq!(restricted(pod_level), "");
        // Before v1.19: the annotations.
        let metadata = json!({"annotations": {
            "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
            "container.seccomp.security.alpha.kubernetes.io/c": "runtime/default"}});
        assert_eq!(
            eval(
                at(Level::Baseline, 18),
                metadata,
                json!({"containers": [{"name": "c"}]})
            ),
            r#"seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined")"#
        );
    }

    #[test]
    fn windows_pods_skip_linux_only_checks() {
        let spec = json!({"os": {"name": "windows"}, "containers": [{"name": "c", "securityContext": {"runAsNonRoot": true}}]});
        assert_eq!(restricted(spec.clone()), "");
        assert!(
            eval(at(Level::Restricted, 24), json!({}), spec)
                .starts_with("allowPrivilegeEscalation")
        );
    }

    #[test]
    fn windows_host_process() {
        let mut spec = spec_with(json!({"windowsOptions": {"hostProcess": true}}));
        spec["securityContext"] = json!({"windowsOptions": {"hostProcess": true}});
        assert_eq!(
            baseline(spec),
            r#"hostProcess (pod and container "c" must not set securityContext.windowsOptions.hostProcess=true)"#
        );
    }

    #[test]
    fn sysctls_by_version() {
        let mut spec = spec_with(json!({}));
        spec["securityContext"] = json!({"sysctls": [
            {"name": "net.ipv4.tcp_rmem", "value": "1"}, {"name": "kernel.msgmax", "value": "1"},
            {"name": "net.ipv4.tcp_syncookies", "value": "1"}]});
        assert_eq!(baseline(spec.clone()), "forbidden sysctls (kernel.msgmax)");
        assert_eq!(
            eval(at(Level::Baseline, 31), json!({}), spec),
            "forbidden sysctls (net.ipv4.tcp_rmem, kernel.msgmax)"
        );
    }

    #[test]
    fn app_armor() {
        let mut spec = spec_with(json!({"appArmorProfile": {"type": "Unconfined"}}));
        spec["securityContext"] =
            json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": "p"}});
        let metadata = json!({"annotations": {
            "container.apparmor.security.beta.kubernetes.io/c": "unconfined",
            "container.apparmor.security.beta.kubernetes.io/d": "localhost/x"}});
        assert_eq!(
            eval(BASELINE, metadata, spec),
            r#"forbidden AppArmor profiles (container "c" and annotation must not set AppArmor profile type to "Unconfined", "container.apparmor.security.beta.kubernetes.io/c="unconfined"")"#
        );
        assert_eq!(
            baseline(spec_with(
                json!({"appArmorProfile": {"type": "RuntimeDefault"}})
            )),
            ""
        );
    }

    #[test]
    fn se_linux() {
        let mut spec = spec_with(json!({"seLinuxOptions": {"type": "spc_t", "user": "u"}}));
        spec["securityContext"] = json!({"seLinuxOptions": {"role": "r"}});
        assert_eq!(
            baseline(spec),
            r#"seLinuxOptions (pod and container "c" set forbidden securityContext.seLinuxOptions: type "spc_t"; user may not be set; role may not be set)"#
        );
        let engine = spec_with(json!({"seLinuxOptions": {"type": "container_engine_t"}}));
        assert_eq!(baseline(engine.clone()), "");
        assert!(eval(at(Level::Baseline, 30), json!({}), engine).starts_with("seLinuxOptions"));
    }

    #[test]
    fn proc_mount() {
        assert_eq!(
            baseline(spec_with(json!({"procMount": "Unmasked"}))),
            r#"procMount (container "c" must not set securityContext.procMount to "Unmasked")"#
        );
        assert_eq!(baseline(spec_with(json!({"procMount": "Default"}))), "");
    }

    #[test]
    fn probe_and_lifecycle_hosts_from_v1_34() {
        let mut spec = spec_with(json!({}));
        spec["containers"][0]["livenessProbe"] = json!({"httpGet": {"host": "evil", "port": 80}});
        spec["containers"][0]["lifecycle"] =
            json!({"preStop": {"tcpSocket": {"host": "a", "port": 1}}});
        assert_eq!(
            baseline(spec.clone()),
            "",
            "a v1.33 server does not check it"
        );
        assert_eq!(
            describe(&Evaluator::new(34).evaluate(BASELINE, &json!({}), &spec)),
            r#"probe or lifecycle host (container "c" uses probe or lifecycle hosts "a", "evil")"#
        );
    }

    #[test]
    fn levels_and_versions_parse_as_kube_does() {
        assert_eq!(Level::parse("baseline"), Ok(Level::Baseline));
        assert!(Level::parse("Baseline").is_err());
        assert_eq!(Version::parse("latest"), Ok(Version::Latest));
        assert_eq!(Version::parse("v1.0"), Ok(Version::Minor(0)));
        assert_eq!(Version::parse("v1.25"), Ok(Version::Minor(25)));
        for bad in [
            "v1.025",
            "v1.",
            "v2.1",
            "1.25",
            "v1.2x",
            "v1.99999999999999999999",
        ] {
            assert_eq!(
                Version::parse(bad),
                Err(r#"must be "latest" or "v1.x""#),
                "{bad}"
            );
        }
        assert_eq!(at(Level::Baseline, 30).to_string(), "baseline:v1.30");
        assert_eq!(RESTRICTED.to_string(), "restricted:latest");
    }

    #[test]
    fn labels_choose_the_policy() {
        let (policy, errors) = Policy::from_labels(&serde_json::Map::new());
        assert!(errors.is_empty() && policy.fully_privileged());
        let (policy, errors) = Policy::from_labels(&labels(json!({
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/enforce-version": "v1.30"})));
        assert!(errors.is_empty());
        assert_eq!(policy.enforce, at(Level::Baseline, 30));
        assert_eq!(
            policy.warn,
            at(Level::Baseline, 30),
            "warn follows a stricter enforce"
        );
        assert_eq!(policy.audit, LevelVersion::PRIVILEGED);
        let (policy, _) = Policy::from_labels(&labels(json!({
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/warn": "privileged"})));
        assert_eq!(policy.warn, LevelVersion::PRIVILEGED);
    }

    #[test]
    fn bad_labels_fail_closed_for_enforce_and_open_for_the_rest() {
        let (policy, errors) = Policy::from_labels(&labels(json!({
            "pod-security.kubernetes.io/warn": "loud",
            "pod-security.kubernetes.io/enforce": "strict",
            "pod-security.kubernetes.io/enforce-version": "1.2"})));
        assert_eq!(policy.enforce, RESTRICTED);
        assert_eq!(policy.warn, LevelVersion::PRIVILEGED);
        assert_eq!(
            aggregate(&errors),
            r#"[metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted, metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "1.2": must be "latest" or "v1.x", metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "loud": must be one of privileged, baseline, restricted]"#
        );
    }

    #[test]
    fn decisions_deny_warn_and_audit() {
        let evaluator = Evaluator::new(33);
        let policy = Policy {
            enforce: BASELINE,
            audit: RESTRICTED,
            warn: RESTRICTED,
        };
        let spec = json!({"containers": [{"name": "c"}]});
        let decision = evaluator.decide(&policy, &[], &json!({}), &spec, true);
        assert_eq!(decision.denial, None);
        assert_eq!(decision.warnings.len(), 1);
        assert!(decision.warnings[0].starts_with(
            r#"would violate PodSecurity "restricted:latest": allowPrivilegeEscalation"#
        ));
        assert_eq!(
            decision.audit_annotations["enforce-policy"],
            "baseline:latest"
        );
        assert_eq!(
            decision.audit_annotations["audit-violations"],
            decision.warnings[0]
        );
        let bad = spec_with(json!({"privileged": true}));
        let refused = evaluator.decide(&policy, &[], &json!({}), &bad, true);
        assert_eq!(
            refused.denial.as_deref(),
            Some(
                r#"violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#
            )
        );
        assert!(refused.warnings.is_empty(), "no warnings beside a refusal");
        let template = evaluator.decide(&policy, &[], &json!({}), &bad, false);
        assert_eq!(template.denial, None);
        assert!(!template.audit_annotations.contains_key("enforce-policy"));
        assert_eq!(template.warnings.len(), 1);
    }

    #[test]
    fn existing_pods_are_reported_by_reason() {
        let evaluator = Evaluator::new(33);
        let pod = |name: &str, privileged: bool| {
            json!({"metadata": {"name": name}, "spec": {"containers": [
                {"name": "c", "securityContext": {"privileged": privileged}}]}})
        };
        let pods = vec![
            pod("b", true),
            pod("a", true),
            pod("ok", false),
            pod("c", true),
        ];
        let warnings = evaluator.existing_pods_warnings("ns", BASELINE, 4, pods.clone(), || true);
        assert_eq!(
            warnings,
            vec![
                r#"existing pods in namespace "ns" violate the new PodSecurity enforce level "baseline:latest""#.to_string(),
                "a (and 2 other pods): privileged".to_string(),
            ]
        );
        let hurried = evaluator.existing_pods_warnings("ns", BASELINE, 4, pods, || false);
        assert_eq!(
            hurried[0],
            "new PodSecurity enforce level only checked against the first 1 of 4 existing pods"
        );
        assert_eq!(hurried[2], "b: privileged");
    }

    #[test]
    fn only_image_and_container_changes_are_significant() {
        let pod = |image: &str, ephemeral: Value| {
            json!({"spec": {
            "containers": [{"name": "c", "image": image}], "ephemeralContainers": ephemeral}})
        };
        let old = pod("a", json!([{"name": "e", "image": "x"}]));
        let mut labelled = old.clone();
        labelled["metadata"] = json!({"labels": {"l": "v"}});
        labelled["spec"]["activeDeadlineSeconds"] = json!(5);
        assert!(!significant_update(&labelled, &old));
        assert!(significant_update(
            &pod("b", json!([{"name": "e", "image": "x"}])),
            &old
        ));
        assert!(significant_update(
            &pod("a", json!([{"name": "e", "image": "x"}, {"name": "f"}])),
            &old
        ));
        assert!(significant_update(
            &json!({"spec": {"containers": []}}),
            &old
        ));
    }

    #[test]
    fn one_pod_per_controller_is_checked_first() {
        let owned = |uid: &str| json!({"metadata": {"ownerReferences": [{"uid": uid, "controller": true}]}});
        let pods = [owned("x"), json!({}), owned("x"), owned("y")];
        let controllers: Vec<Option<&str>> = pods.iter().map(controller_uid).collect();
        assert_eq!(controllers, vec![Some("x"), None, Some("x"), Some("y")]);
        assert_eq!(check_order(&controllers), vec![0, 1, 3, 2]);
    }
}
