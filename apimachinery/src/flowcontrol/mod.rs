//! API Priority and Fairness (flowcontrol.apiserver.k8s.io/v1), the parts
//! without IO: how a request is matched to a FlowSchema, its flow's hash
//! and shuffle-sharded hand of queues, each priority level's share of the
//! server's seats, what a request costs in seats, the fair queuing itself
//! ([`queueset`]) and kube's mandatory and suggested objects ([`bootstrap`]).
//!
//! ```
//! use apimachinery::flowcontrol::{Dealer, nominal_limits};
//! let dealer = Dealer::new(128, 6).expect("6 of 128 fits");
//! let mut hand = Vec::new();
//! dealer.deal(0xfeed_beef, |card| hand.push(card));
//! assert_eq!(hand.len(), 6);
//! assert_eq!(nominal_limits(600, &[5, 30]), vec![86, 515]);
//! ```

pub mod bootstrap;
pub mod queueset;

use k8s_openapi::api::flowcontrol::v1::{
    FlowSchema, NonResourcePolicyRule, PolicyRulesWithSubjects, ResourcePolicyRule, Subject,
};

/// The API group.
pub const GROUP: &str = "flowcontrol.apiserver.k8s.io";
/// `*` in verbs, groups, resources, namespaces, URLs and subject names.
const ALL: &str = "*";
/// The prefix of a ServiceAccount's user name.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// What classification reads of a request: who asks, and for what.
#[derive(Debug, Clone, Copy)]
pub struct Digest<'a> {
    /// The user name.
    pub user: &'a str,
    /// The user's groups.
    pub groups: &'a [String],
    /// Whether the request names a resource.
    pub resource_request: bool,
    /// The verb (`get`, `list`, … or, for a non-resource request, the lowercase method).
    pub verb: &'a str,
    /// The API group (`""` for core).
    pub api_group: &'a str,
    /// The resource.
    pub resource: &'a str,
    /// The subresource.
    pub subresource: &'a str,
    /// The namespace (empty for cluster-scoped requests).
    pub namespace: &'a str,
    /// The path (for non-resource requests).
    pub path: &'a str,
}

/// Whether `schema` matches the request: any of its rules does.
pub fn matches(schema: &FlowSchema, digest: &Digest<'_>) -> bool {
    schema
        .spec
        .as_ref()
        .and_then(|s| s.rules.as_ref())
        .is_some_and(|rules| rules.iter().any(|r| matches_rule(r, digest)))
}

/// One rule: one of its subjects, and one of its resource rules (for a
/// resource request) or non-resource rules (for any other).
fn matches_rule(rule: &PolicyRulesWithSubjects, digest: &Digest<'_>) -> bool {
    if !rule.subjects.iter().any(|s| matches_subject(s, digest)) {
        return false;
    }
    if digest.resource_request {
        rule.resource_rules
            .iter()
            .flatten()
            .any(|r| matches_resource_rule(r, digest))
    } else {
        rule.non_resource_rules
            .iter()
            .flatten()
            .any(|r| matches_non_resource_rule(r, digest))
    }
}

/// A subject: a user by name, a group the user is in, or a ServiceAccount
/// (name `*` for every one of a namespace); `*` for any user or group.
fn matches_subject(subject: &Subject, digest: &Digest<'_>) -> bool {
    match subject.kind.as_str() {
        "User" => subject
            .user
            .as_ref()
            .is_some_and(|u| u.name == ALL || u.name == digest.user),
        "Group" => subject
            .group
            .as_ref()
            .is_some_and(|g| g.name == ALL || digest.groups.contains(&g.name)),
        "ServiceAccount" => subject.service_account.as_ref().is_some_and(|sa| {
            let Some(rest) = digest.user.strip_prefix(SERVICE_ACCOUNT_PREFIX) else {
                return false;
            };
            let Some((namespace, name)) = rest.split_once(':') else {
                return false;
            };
            sa.namespace == namespace && (sa.name == ALL || sa.name == name)
        }),
        _ => false,
    }
}

/// Whether `value` is in `list`, or `list` holds `*`.
fn listed(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == ALL || v == value)
}

/// A resource rule: verb, group, resource (or `resource/subresource`), and
/// the namespace (or, for a cluster-scoped request, `clusterScope`).
fn matches_resource_rule(rule: &ResourcePolicyRule, digest: &Digest<'_>) -> bool {
    if !listed(&rule.verbs, digest.verb) || !listed(&rule.api_groups, digest.api_group) {
        return false;
    }
    let resource_matches = rule.resources.iter().any(|r| {
        r == ALL
            || if digest.subresource.is_empty() {
                r == digest.resource
            } else {
                r.strip_prefix(digest.resource)
                    .and_then(|rest| rest.strip_prefix('/'))
                    == Some(digest.subresource)
            }
    });
    if !resource_matches {
        return false;
    }
    if digest.namespace.is_empty() {
        rule.cluster_scope == Some(true)
    } else {
        rule.namespaces
            .as_deref()
            .is_some_and(|n| listed(n, digest.namespace))
    }
}

/// A non-resource rule: verb, and the path exactly, under a `prefix/*`, or `*`.
fn matches_non_resource_rule(rule: &NonResourcePolicyRule, digest: &Digest<'_>) -> bool {
    listed(&rule.verbs, digest.verb)
        && rule.non_resource_urls.iter().any(|url| {
            url == ALL
                || url == digest.path
                || url
                    .strip_suffix('*')
                    .is_some_and(|prefix| prefix.ends_with('/') && digest.path.starts_with(prefix))
        })
}

/// The flow a request belongs to within its schema: its user (`ByUser`),
/// its namespace (`ByNamespace`), or one flow for all (no method).
pub fn distinguisher<'a>(schema: &FlowSchema, digest: &Digest<'a>) -> &'a str {
    let method = schema
        .spec
        .as_ref()
        .and_then(|s| s.distinguisher_method.as_ref())
        .map(|m| m.type_.as_str());
    match method {
        Some("ByUser") => digest.user,
        Some("ByNamespace") => digest.namespace,
        _ => "",
    }
}

/// The hash of a flow (its schema and distinguisher), FNV-1a over both
/// with a separator, so that flows are spread over a level's queues.
pub fn flow_hash(schema: &str, distinguisher: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for byte in schema
        .bytes()
        .chain(std::iter::once(0))
        .chain(distinguisher.bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    hash
}

/// The most bits of a hash shuffle sharding may use (kube's `MaxHashBits`).
const MAX_HASH_BITS: f64 = 60.0;

/// Deals a hand of `hand_size` distinct queues out of `deck_size` from a
/// flow's hash (kube's shuffle-sharding dealer): flows share a queue often,
/// but rarely their whole hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dealer {
    deck_size: u32,
    hand_size: u32,
}

impl Dealer {
    /// A dealer, if the hand fits in the deck and in a hash's entropy.
    pub fn new(deck_size: u32, hand_size: u32) -> Option<Dealer> {
        (hand_size >= 1
            && hand_size <= deck_size
            && required_entropy_bits(deck_size, hand_size) <= MAX_HASH_BITS)
            .then_some(Dealer {
                deck_size,
                hand_size,
            })
    }

    /// The hand's cards, in dealing order.
    pub fn deal(&self, mut hash: u64, mut pick: impl FnMut(usize)) {
        // At most 60 bits of entropy: a hand of a deck of two or more has
        // at most 60 cards (and of a deck of one, one).
        let mut remainders = [0u64; 64];
        let hand = self.hand_size.min(64) as usize;
        for (i, remainder) in remainders.iter_mut().enumerate().take(hand) {
            let left = u64::from(self.deck_size) - i as u64;
            *remainder = hash % left;
            hash /= left;
        }
        for i in 0..hand {
            let mut card = remainders[i];
            for j in (0..i).rev() {
                if card >= remainders[j] {
                    card += 1;
                }
            }
            pick(card as usize);
        }
    }
}

/// Bits of hash a hand of `hand_size` out of `deck_size` needs.
pub fn required_entropy_bits(deck_size: u32, hand_size: u32) -> f64 {
    (f64::from(deck_size).log2() * f64::from(hand_size)).ceil()
}

/// Each level's nominal concurrency limit in seats, kube's
/// `ceil(serverCL × NCS(i) / ΣNCS)`, for levels with the given shares.
pub fn nominal_limits(server_limit: u32, shares: &[u32]) -> Vec<u32> {
    let total: u64 = shares.iter().map(|s| u64::from(*s)).sum();
    shares
        .iter()
        .map(|s| {
            if total == 0 {
                0
            } else {
                let limit = (u64::from(server_limit) * u64::from(*s)).div_ceil(total);
                u32::try_from(limit).unwrap_or(u32::MAX)
            }
        })
        .collect()
}

/// Objects one seat of a LIST pays for (kube's `objectsPerSeat`).
const OBJECTS_PER_SEAT: u64 = 100;
/// The most seats one request takes (kube's `maximumSeats`).
pub const MAX_SEATS: u32 = 10;

/// The seats a LIST served from the watch cache takes: one per hundred
/// objects it goes through (all `stored` ones, as kube estimates a list
/// from its cache), at least 1 and at most [`MAX_SEATS`]; 1 when the
/// count is unknown (kube's choice for resources it does not store).
pub fn list_seats(stored: Option<u64>) -> u32 {
    match stored {
        None => 1,
        Some(count) => u32::try_from(
            count
                .div_ceil(OBJECTS_PER_SEAT)
                .clamp(1, u64::from(MAX_SEATS)),
        )
        .unwrap_or(MAX_SEATS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(value: serde_json::Value) -> FlowSchema {
        serde_json::from_value(value).expect("a FlowSchema")
    }

    fn digest<'a>(user: &'a str, groups: &'a [String], verb: &'a str, ns: &'a str) -> Digest<'a> {
        Digest {
            user,
            groups,
            resource_request: true,
            verb,
            api_group: "",
            resource: "configmaps",
            subresource: "",
            namespace: ns,
            path: "/api/v1/namespaces/ns/configmaps",
        }
    }

    #[test]
    fn subjects_rules_and_scopes_match_as_kube_matches_them() {
        let fs = schema(json!({
            "metadata": {"name": "team"},
            "spec": {"priorityLevelConfiguration": {"name": "low"}, "matchingPrecedence": 500,
                "distinguisherMethod": {"type": "ByNamespace"},
                "rules": [{
                    "subjects": [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "team", "name": "*"}},
                                 {"kind": "User", "user": {"name": "alice"}}],
                    "resourceRules": [{"verbs": ["list", "get"], "apiGroups": [""], "resources": ["configmaps", "pods/log"], "namespaces": ["team", "other"]}],
                    "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/debug/*"]}]
                }]}
        }));
        let groups = vec!["system:authenticated".to_string()];
        let sa = "system:serviceaccount:team:bot";
        assert!(matches(&fs, &digest(sa, &groups, "list", "team")));
        assert!(matches(&fs, &digest("alice", &groups, "get", "other")));
        assert!(!matches(&fs, &digest("bob", &groups, "list", "team")));
        assert!(!matches(
            &fs,
            &digest("system:serviceaccount:else:bot", &groups, "list", "team")
        ));
        assert!(!matches(&fs, &digest(sa, &groups, "delete", "team")));
        assert!(!matches(&fs, &digest(sa, &groups, "list", "elsewhere")));
        // Cluster-scoped requests need clusterScope.
        assert!(!matches(&fs, &digest(sa, &groups, "list", "")));
        let mut log = digest(sa, &groups, "get", "team");
        log.resource = "pods";
        log.subresource = "log";
        assert!(matches(&fs, &log));
        log.subresource = "exec";
        assert!(!matches(&fs, &log));
        let mut path = digest(sa, &groups, "get", "");
        path.resource_request = false;
        for (p, expected) in [
            ("/healthz", true),
            ("/debug/x/y", true),
            ("/debug", false),
            ("/readyz", false),
        ] {
            path.path = p;
            assert_eq!(matches(&fs, &path), expected, "{p}");
        }
        assert_eq!(
            distinguisher(&fs, &digest(sa, &groups, "list", "team")),
            "team"
        );
    }

    #[test]
    fn the_exempt_schema_matches_system_masters_only() {
        let exempt = bootstrap::mandatory_flow_schemas()
            .into_iter()
            .find(|f| f["metadata"]["name"] == "exempt")
            .map(schema)
            .expect("exempt");
        let masters = vec!["system:masters".to_string()];
        let others = vec!["system:authenticated".to_string()];
        assert!(matches(&exempt, &digest("admin", &masters, "list", "")));
        assert!(matches(&exempt, &digest("admin", &masters, "delete", "ns")));
        assert!(!matches(&exempt, &digest("bob", &others, "list", "ns")));
    }

    #[test]
    fn hands_are_distinct_cards_of_the_deck() {
        let dealer = Dealer::new(8, 3).expect("a dealer");
        for hash in [0u64, 1, 7, 12345, u64::MAX] {
            let mut hand = Vec::new();
            dealer.deal(hash, |c| hand.push(c));
            assert_eq!(hand.len(), 3);
            assert!(hand.iter().all(|c| *c < 8));
            let mut unique = hand.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), 3, "{hand:?}");
        }
        // Different flows get different hands.
        let hand = |h| {
            let mut v = Vec::new();
            dealer.deal(h, |c| v.push(c));
            v
        };
        assert_ne!(hand(flow_hash("fs", "alice")), hand(flow_hash("fs", "bob")));
        assert!(Dealer::new(4, 5).is_none());
        assert!(Dealer::new(1 << 20, 4).is_none(), "80 bits of entropy");
        assert!(Dealer::new(1, 1).is_some());
    }

    #[test]
    fn limits_and_seats() {
        // kube's defaults: 600 seats over the bootstrap levels' 245 shares.
        let shares = [0, 5, 30, 40, 10, 40, 100, 20];
        let limits = nominal_limits(600, &shares);
        assert_eq!(limits, vec![0, 13, 74, 98, 25, 98, 245, 49]);
        assert_eq!(nominal_limits(600, &[0, 0]), vec![0, 0]);
        assert_eq!(list_seats(None), 1);
        assert_eq!(list_seats(Some(0)), 1);
        assert_eq!(list_seats(Some(101)), 2);
        assert_eq!(list_seats(Some(300)), 3);
        assert_eq!(list_seats(Some(100_000)), MAX_SEATS);
    }
}
