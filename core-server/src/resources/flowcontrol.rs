//! flowcontrol.apiserver.k8s.io/v1 FlowSchemas and
//! PriorityLevelConfigurations, API Priority and Fairness's configuration:
//! kube's defaults and validation (precedence 1..10000, subjects and rules,
//! Limited or Exempt levels, Queue or Reject with queuing that shuffle
//! sharding can deal), status kept by its subresource, and kube's columns.

use apimachinery::error::FieldError;
use apimachinery::flowcontrol::required_entropy_bits;
use apimachinery::table::{self, Column};
use generic_server::strategy::Strategy;
use serde_json::{Value, json};

use super::fields::{self, default, int, is_set, items, text};

/// The highest matching precedence.
const MAX_PRECEDENCE: i64 = 10000;
/// The most bits of hash a hand may need (kube's `MaxHashBits`).
const MAX_HASH_BITS: f64 = 60.0;

/// Moves `status` out of a create, and keeps the stored one on an update.
fn keep_status(new: &mut Value, old: Option<&Value>) {
    if let Some(map) = new.as_object_mut() {
        match old.and_then(|o| o.get("status")) {
            Some(status) => {
                map.insert("status".into(), status.clone());
            }
            // A struct in kube's types: a new object answers `{}`.
            None => {
                map.insert("status".into(), json!({}));
            }
        }
    }
}

/// The rules of `flowcontrol.apiserver.k8s.io/v1/FlowSchema`.
pub struct FlowSchemaStrategy;

impl Strategy for FlowSchemaStrategy {
    fn defaults(&self, obj: &mut Value) {
        if int(obj, "/spec/matchingPrecedence").unwrap_or(0) == 0 {
            fields::set(obj, "/spec/matchingPrecedence", json!(1000));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        keep_status(obj, None);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        keep_status(new, Some(old));
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let precedence = int(obj, "/spec/matchingPrecedence").unwrap_or(0);
        if precedence <= 0 {
            errs.push(FieldError::invalid(
                "spec.matchingPrecedence",
                precedence,
                "must be a positive value",
            ));
        } else if precedence > MAX_PRECEDENCE {
            errs.push(FieldError::invalid(
                "spec.matchingPrecedence",
                precedence,
                format!("must not be greater than {MAX_PRECEDENCE}"),
            ));
        }
        if text(obj, "/spec/priorityLevelConfiguration/name").is_empty() {
            errs.push(FieldError::required(
                "spec.priorityLevelConfiguration.name",
                "must reference a priority level",
            ));
        }
        if is_set(obj, "/spec/distinguisherMethod") {
            let method = text(obj, "/spec/distinguisherMethod/type");
            if !matches!(method, "ByUser" | "ByNamespace") {
                errs.push(FieldError::not_supported(
                    "spec.distinguisherMethod.type",
                    method,
                    &["ByNamespace", "ByUser"],
                ));
            }
        }
        for (i, rule) in items(obj, "/spec/rules").iter().enumerate() {
            errs.extend(validate_rule(rule, &format!("spec.rules[{i}]")));
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "PriorityLevel",
                "string",
                "Name of the priority level referenced by this flow schema",
            ),
            Column::new(
                "MatchingPrecedence",
                "string",
                "Matching precedence of this flow schema",
            ),
            Column::new(
                "DistinguisherMethod",
                "string",
                "How requests of this flow schema are divided into flows",
            ),
            table::age_column(),
            Column::new(
                "MissingPL",
                "string",
                "Whether the priority level this flow schema references is missing (its Dangling condition)",
            ),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let method = text(obj, "/spec/distinguisherMethod/type");
        let dangling = fields::condition(obj, "Dangling")
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        vec![
            table::name_cell(obj),
            json!(text(obj, "/spec/priorityLevelConfiguration/name")),
            fields::int_cell(obj, "/spec/matchingPrecedence"),
            json!(if method.is_empty() { "<none>" } else { method }),
            table::age_cell(obj),
            json!(dangling),
        ]
    }
}

/// One rule: subjects, and at least one resource or non-resource rule.
fn validate_rule(rule: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let subjects = items(rule, "/subjects");
    if subjects.is_empty() {
        errs.push(FieldError::required(format!("{path}.subjects"), ""));
    }
    for (i, subject) in subjects.iter().enumerate() {
        let at = format!("{path}.subjects[{i}]");
        let kind = text(subject, "/kind");
        let required: &[&str] = match kind {
            "User" => &["/user/name"],
            "Group" => &["/group/name"],
            "ServiceAccount" => &["/serviceAccount/name", "/serviceAccount/namespace"],
            other => {
                errs.push(FieldError::not_supported(
                    format!("{at}.kind"),
                    other,
                    &["Group", "ServiceAccount", "User"],
                ));
                &[]
            }
        };
        for pointer in required {
            if text(subject, pointer).is_empty() {
                errs.push(FieldError::required(
                    format!("{at}{}", pointer.replace('/', ".")),
                    "",
                ));
            }
        }
    }
    let (resources, non_resources) = (
        items(rule, "/resourceRules"),
        items(rule, "/nonResourceRules"),
    );
    if resources.is_empty() && non_resources.is_empty() {
        errs.push(FieldError::required(
            path.to_string(),
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, r) in resources.iter().enumerate() {
        let at = format!("{path}.resourceRules[{i}]");
        for field in ["verbs", "apiGroups", "resources"] {
            if items(r, &format!("/{field}")).is_empty() {
                errs.push(FieldError::required(
                    format!("{at}.{field}"),
                    format!("{field} must contain at least one value"),
                ));
            }
        }
        if r.get("clusterScope") != Some(&Value::Bool(true)) && items(r, "/namespaces").is_empty() {
            errs.push(FieldError::required(
                format!("{at}.namespaces"),
                "resource rules that are not cluster scoped must supply at least one namespace",
            ));
        }
    }
    for (i, r) in non_resources.iter().enumerate() {
        let at = format!("{path}.nonResourceRules[{i}]");
        for field in ["verbs", "nonResourceURLs"] {
            if items(r, &format!("/{field}")).is_empty() {
                errs.push(FieldError::required(
                    format!("{at}.{field}"),
                    format!("{field} must contain at least one value"),
                ));
            }
        }
    }
    errs
}

/// The rules of `flowcontrol.apiserver.k8s.io/v1/PriorityLevelConfiguration`.
pub struct PriorityLevelConfigurationStrategy;

impl Strategy for PriorityLevelConfigurationStrategy {
    fn defaults(&self, obj: &mut Value) {
        match text(obj, "/spec/type") {
            "Limited" if is_set(obj, "/spec/limited") => {
                default(obj, "/spec/limited/nominalConcurrencyShares", json!(30));
                default(obj, "/spec/limited/lendablePercent", json!(0));
                if text(obj, "/spec/limited/limitResponse/type") == "Queue" {
                    let q = "/spec/limited/limitResponse/queuing";
                    default(obj, &format!("{q}/queues"), json!(64));
                    default(obj, &format!("{q}/handSize"), json!(8));
                    default(obj, &format!("{q}/queueLengthLimit"), json!(50));
                }
            }
            "Exempt" => {
                default(obj, "/spec/exempt/nominalConcurrencyShares", json!(0));
                default(obj, "/spec/exempt/lendablePercent", json!(0));
            }
            _ => {}
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        keep_status(obj, None);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        keep_status(new, Some(old));
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let (limited, exempt) = (is_set(obj, "/spec/limited"), is_set(obj, "/spec/exempt"));
        match text(obj, "/spec/type") {
            "Limited" => {
                if !limited {
                    errs.push(FieldError::required(
                        "spec.limited",
                        "must not be empty when type is Limited",
                    ));
                }
                if exempt {
                    errs.push(FieldError::forbidden(
                        "spec.exempt",
                        "must be nil if the type is Limited",
                    ));
                }
                if limited {
                    errs.extend(validate_limited(obj));
                }
            }
            "Exempt" => {
                if limited {
                    errs.push(FieldError::forbidden(
                        "spec.limited",
                        "must be nil if the type is not Limited",
                    ));
                }
                errs.extend(validate_shares(obj, "/spec/exempt", "spec.exempt"));
            }
            other => errs.push(FieldError::not_supported(
                "spec.type",
                other,
                &["Exempt", "Limited"],
            )),
        }
        errs
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            table::name_column(),
            Column::new(
                "Type",
                "string",
                "Whether requests of this level are limited",
            ),
            Column::new(
                "NominalConcurrencyShares",
                "string",
                "This level's share of the server's seats",
            ),
            Column::new("Queues", "string", "Number of queues"),
            Column::new("HandSize", "string", "Queues dealt to each flow"),
            Column::new("QueueLengthLimit", "string", "Requests a queue may hold"),
            table::age_column(),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let none = || json!("<none>");
        let limited = is_set(obj, "/spec/limited");
        let queuing = "/spec/limited/limitResponse/queuing";
        let queuing_cell = |field: &str| {
            if limited && is_set(obj, queuing) {
                fields::int_cell(obj, &format!("{queuing}/{field}"))
            } else {
                none()
            }
        };
        vec![
            table::name_cell(obj),
            json!(text(obj, "/spec/type")),
            if limited {
                fields::int_cell(obj, "/spec/limited/nominalConcurrencyShares")
            } else {
                none()
            },
            queuing_cell("queues"),
            queuing_cell("handSize"),
            queuing_cell("queueLengthLimit"),
            table::age_cell(obj),
        ]
    }
}

/// `nominalConcurrencyShares` at least 0, `lendablePercent` within 0..=100.
fn validate_shares(obj: &Value, pointer: &str, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(shares) = int(obj, &format!("{pointer}/nominalConcurrencyShares"))
        && shares < 0
    {
        errs.push(FieldError::invalid(
            format!("{path}.nominalConcurrencyShares"),
            shares,
            "must be a non-negative integer",
        ));
    }
    if let Some(percent) = int(obj, &format!("{pointer}/lendablePercent"))
        && !(0..=100).contains(&percent)
    {
        errs.push(FieldError::invalid(
            format!("{path}.lendablePercent"),
            percent,
            "must be between 0 and 100, inclusive",
        ));
    }
    errs
}

/// A Limited level: its shares, and a Queue (with queuing) or Reject response.
fn validate_limited(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_shares(obj, "/spec/limited", "spec.limited");
    if let Some(percent) = int(obj, "/spec/limited/borrowingLimitPercent")
        && percent < 0
    {
        errs.push(FieldError::invalid(
            "spec.limited.borrowingLimitPercent",
            percent,
            "if specified, must be a non-negative integer",
        ));
    }
    let queuing = is_set(obj, "/spec/limited/limitResponse/queuing");
    match text(obj, "/spec/limited/limitResponse/type") {
        "Queue" if !queuing => errs.push(FieldError::required(
            "spec.limited.limitResponse.queuing",
            "must not be empty if the type is Queue",
        )),
        "Queue" => errs.extend(validate_queuing(obj)),
        "Reject" if queuing => errs.push(FieldError::forbidden(
            "spec.limited.limitResponse.queuing",
            "must be nil if limited.limitResponse.type is not Limited",
        )),
        "Reject" => {}
        other => errs.push(FieldError::not_supported(
            "spec.limited.limitResponse.type",
            other,
            &["Queue", "Reject"],
        )),
    }
    errs
}

/// Positive queues, hand size and queue length; a hand that fits the deck
/// and a hash's entropy.
fn validate_queuing(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let at = "spec.limited.limitResponse.queuing";
    let value = |field: &str| {
        int(obj, &format!("/spec/limited/limitResponse/queuing/{field}")).unwrap_or(0)
    };
    let (queues, hand, length) = (
        value("queues"),
        value("handSize"),
        value("queueLengthLimit"),
    );
    for (field, v) in [
        ("queueLengthLimit", length),
        ("queues", queues),
        ("handSize", hand),
    ] {
        if v <= 0 {
            errs.push(FieldError::invalid(
                format!("{at}.{field}"),
                v,
                "must be positive",
            ));
        }
    }
    if queues > 0 && hand > queues {
        errs.push(FieldError::invalid(
            format!("{at}.handSize"),
            hand,
            format!("should not be greater than queues ({queues})"),
        ));
    } else if let (Ok(q), Ok(h)) = (u32::try_from(queues), u32::try_from(hand))
        && q > 0
        && h > 0
        && required_entropy_bits(q, h) > MAX_HASH_BITS
    {
        errs.push(FieldError::invalid(
            format!("{at}.handSize"),
            hand,
            format!(
                "required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"
            ),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn flow_schemas_are_defaulted_validated_and_printed() {
        let mut fs = json!({"metadata": {"name": "team"}, "spec": {
            "priorityLevelConfiguration": {"name": "low"},
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "team"}}],
                       "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]}]},
            "status": {"conditions": []}});
        FlowSchemaStrategy.defaults(&mut fs);
        FlowSchemaStrategy.prepare_for_create(&mut fs);
        assert_eq!(fs["spec"]["matchingPrecedence"], 1000);
        assert_eq!(fs["status"], json!({}), "reset, an empty struct");
        assert_eq!(
            messages(FlowSchemaStrategy.validate(&fs)),
            vec![
                "spec.rules[0].resourceRules[0].namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace"
            ]
        );
        fs["spec"]["matchingPrecedence"] = json!(10001);
        fs["spec"]["rules"][0]["resourceRules"][0]["clusterScope"] = json!(true);
        fs["spec"]["distinguisherMethod"]["type"] = json!("ByGroup");
        assert_eq!(
            messages(FlowSchemaStrategy.validate(&fs)),
            vec![
                "spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000",
                "spec.distinguisherMethod.type: Unsupported value: \"ByGroup\": supported values: \"ByNamespace\", \"ByUser\"",
            ]
        );
        let cells = FlowSchemaStrategy.cells(&fs);
        assert_eq!(cells[1], "low");
        assert_eq!(cells[2], 10001);
        assert_eq!(cells[5], "?");
    }

    #[test]
    fn priority_levels_are_defaulted_validated_and_printed() {
        let mut pl = json!({"metadata": {"name": "low"}, "spec": {"type": "Limited", "limited": {
            "limitResponse": {"type": "Queue", "queuing": {"queues": 4}}}}});
        PriorityLevelConfigurationStrategy.defaults(&mut pl);
        assert_eq!(pl["spec"]["limited"]["nominalConcurrencyShares"], 30);
        // The default hand of 8 does not fit 4 queues.
        assert_eq!(
            messages(PriorityLevelConfigurationStrategy.validate(&pl)),
            vec![
                "spec.limited.limitResponse.queuing.handSize: Invalid value: 8: should not be greater than queues (4)"
            ]
        );
        pl["spec"]["limited"]["limitResponse"]["queuing"]["handSize"] = json!(2);
        assert!(PriorityLevelConfigurationStrategy.validate(&pl).is_empty());
        let cells = PriorityLevelConfigurationStrategy.cells(&pl);
        assert_eq!(
            cells[1..6],
            [json!("Limited"), json!(30), json!(4), json!(2), json!(50)]
        );
        let reject = json!({"spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": -1,
            "limitResponse": {"type": "Reject", "queuing": {"queues": 1}}}}});
        assert_eq!(
            messages(PriorityLevelConfigurationStrategy.validate(&reject)),
            vec![
                "spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
                "spec.limited.limitResponse.queuing: Forbidden: must be nil if limited.limitResponse.type is not Limited",
            ]
        );
        let mut exempt = json!({"spec": {"type": "Exempt"}});
        PriorityLevelConfigurationStrategy.defaults(&mut exempt);
        assert!(
            PriorityLevelConfigurationStrategy
                .validate(&exempt)
                .is_empty()
        );
        assert_eq!(
            PriorityLevelConfigurationStrategy.cells(&exempt)[2],
            "<none>"
        );
    }
}
