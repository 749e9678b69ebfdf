//! CEL validation rules of CustomResourceDefinitions
//! (`x-kubernetes-validations`), as kube-apiserver runs them.
//!
//! Two entry points: [`compile`] when a CRD is created or updated (it rejects
//! what kube rejects, with kube's field paths and messages, including rules
//! too expensive for their schema), and [`validate`] when a custom resource is
//! created or updated.
//!
//! ```ignore
//! let rules = cel::compile(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
//!                          "spec.versions[0].schema.openAPIV3Schema")?;
//! let errors = cel::validate(&rules, &new_object, old_object.as_ref());
//! ```
//!
//! Parsing and evaluation use the `cel` crate (cel-rust) through `kube-cel`,
//! which adds kube's extension libraries (strings, lists, regex, URLs,
//! quantities, IPs, sets, semver, format). The `cel` crate does not
//! type-check or track cost, so [`check`] does both: a type checker over the
//! parsed AST driven by the schema, and cel-go's static cost model.
//!
//! Known differences from kube-apiserver:
//! - Compile errors name the rule entry as JSON (`{"rule":"..."}`) where kube
//!   prints a Go struct; type errors are found by a lenient checker (anything
//!   it cannot type is accepted), and their source positions are found by a
//!   token scan.
//! - Runtime cost is bounded before evaluation (the static estimator fed with
//!   the data's actual sizes), not metered during it, so short-circuiting is
//!   not credited; the bound is what is charged against the budget.
//! - `x-kubernetes-list-type: set` and `map` lists compare in order with `==`,
//!   and `+` concatenates them (kube merges); two-variable comprehensions and
//!   rules inside `allOf` are not supported.

// A library until the CRD strategy wires it in.

pub mod admission;
mod check;
mod compile;
mod eval;
mod library;
mod schema;
pub mod type_checking;
mod validate;
mod value;

use crate::error::FieldError;
use serde_json::Value;

pub use validate::Outcome;

/// The compiled `x-kubernetes-validations` rules of one schema, ready to
/// validate custom resources.
#[derive(Debug, Default)]
pub struct CompiledRules {
    root: Option<compile::Validator>,
}

impl CompiledRules {
    /// Whether there is no rule at all.
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }
}

/// Compiles every rule in `schema` (an `openAPIV3Schema` whose field path is
/// `path`, e.g. `spec.versions[0].schema.openAPIV3Schema`), or returns the
/// errors kube-apiserver reports for them.
pub fn compile(schema: &Value, path: &str) -> Result<CompiledRules, Vec<FieldError>> {
    compile::compile_value(schema, path).map(|root| CompiledRules { root })
}

/// Validates `new` (and, on update, its `old` version) against the rules;
/// the errors are those kube-apiserver reports.
pub fn validate(rules: &CompiledRules, new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    validate_with_warnings(rules, new, old).errors
}

/// Like [`validate`], also returning the errors ratcheted away on update
/// (kube sends them as warnings).
pub fn validate_with_warnings(rules: &CompiledRules, new: &Value, old: Option<&Value>) -> Outcome {
    match &rules.root {
        Some(root) => validate::run(root, new, old),
        None => Outcome::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PREFIX: &str = "spec.versions[0].schema.openAPIV3Schema";

    /// A CRD root schema whose `spec` is `spec`.
    fn root(spec: Value) -> Value {
        json!({"type": "object", "properties": {"spec": spec}})
    }

    fn compiled(schema: Value) -> CompiledRules {
        match compile(&schema, PREFIX) {
            Ok(rules) => rules,
            Err(errors) => panic!("compile failed: {}", render(&errors)),
        }
    }

    fn compile_errors(schema: Value) -> Vec<String> {
        match compile(&schema, PREFIX) {
            Ok(_) => panic!("expected compile errors"),
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    }

    fn render(errors: &[FieldError]) -> String {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn check(rules: &CompiledRules, new: Value, old: Option<Value>) -> Vec<String> {
        validate(rules, &new, old.as_ref())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn replicas_schema() -> Value {
        root(json!({
            "type": "object",
            "x-kubernetes-validations": [{
                "rule": "self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas",
                "message": "replicas should be in between minReplicas and maxReplicas."
            }],
            "properties": {
                "minReplicas": {"type": "integer"},
                "replicas": {"type": "integer"},
                "maxReplicas": {"type": "integer"}
            }
        }))
    }

    #[test]
    fn compiled_rules_can_be_shared_between_requests() {
        fn shareable<T: Send + Sync>() {}
        shareable::<CompiledRules>();
    }

    #[test]
    fn accepts_common_rules() {
        let spec = json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 63},
            "i": {"type": "integer"}, "f": {"type": "number"}, "b": {"type": "boolean"},
            "created": {"type": "string", "format": "date-time"},
            "expired": {"type": "string", "format": "date-time"},
            "ttl": {"type": "string", "format": "duration"},
            "q": {"type": "string", "maxLength": 20},
            "u": {"type": "string", "maxLength": 200},
            "ios": {"x-kubernetes-int-or-string": true},
            "set1": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 10, "items": {"type": "string", "maxLength": 10}},
            "set2": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 10, "items": {"type": "string", "maxLength": 10}},
            "nums": {"type": "array", "maxItems": 10, "items": {"type": "integer"}},
            "labels": {"type": "object", "maxProperties": 10, "additionalProperties": {"type": "string", "maxLength": 10}},
            "conditions": {"type": "array", "maxItems": 10, "items": {"type": "object", "properties": {
                "type": {"type": "string", "maxLength": 10}, "status": {"type": "string", "maxLength": 10}}}}
        }});
        let rules = [
            "self.name == 'singleton' || self.name.matches('^[a-z]+$')",
            "!has(self.expired) || self.created + self.ttl < self.expired",
            "self.set1.all(e, !(e in self.set2))",
            "self.labels.all(k, !(k in self.set1)) && self.labels.exists(k, self.labels[k].startsWith('a')) || true",
            "self.set1.exists_one(x, x == 'a') || size(self.set1) == 0",
            "self.nums.filter(n, n > 1).size() <= 3 && self.nums.map(n, n * 2).all(n, n < 100)",
            "self.nums.sum() < 100 && (self.nums.size() == 0 || self.nums.min() >= 0) && self.nums.isSorted()",
            "self.nums.indexOf(2) < 5 && [1, 2, 3].lastIndexOf(2) == 1",
            "quantity(self.q).isGreaterThan(quantity('1Gi')) || !isQuantity(self.q)",
            "isURL(self.u) && url(self.u).getScheme() == 'https'",
            "self.?name.orValue('') != 'x'",
            "type(self.ios) == string ? self.ios.endsWith('%') : self.ios > 0",
            "int(self.i) > 1 && double(self.i) / 2.0 > 1.0 && self.i % 2 == 0 && -self.i < 0 && self.f >= 0.5",
            "self.name.lowerAscii() == self.name && self.name.upperAscii().size() > 0 && self.name.contains('a')",
            "'k' in self.labels && self.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
            "self.created > timestamp('2020-01-01T00:00:00Z') && duration('1h') < self.ttl",
            "self.nums[0] == 1 && self.b == true",
            "cel.bind(n, self.name, n.size() > 1 && n.size() < 60)",
            "self.name.split('-').size() < 5 && self.name.replace('-', '').size() > 0 && self.name.substring(1) != ''",
        ];
        let validations: Vec<Value> = rules.iter().map(|r| json!({"rule": r})).collect();
        let mut spec = spec;
        spec["x-kubernetes-validations"] = json!(validations);
        let compiled = compiled(root(spec));
        let object = json!({"spec": {
            "name": "abc", "i": 4, "f": 1.0, "b": true,
            "created": "2024-01-01T00:00:00Z", "expired": "2024-01-02T00:00:00Z", "ttl": "2h",
            "q": "2Gi", "u": "https://example.com", "ios": "50%",
            "set1": ["a", "b"], "set2": ["c"], "nums": [1, 2, 3],
            "labels": {"k": "abc"}, "conditions": [{"type": "Ready", "status": "True"}]
        }});
        assert_eq!(check(&compiled, object, None), Vec::<String>::new());
    }

    #[test]
    fn docs_replicas_rule() {
        let rules = compiled(replicas_schema());
        assert!(
            check(
                &rules,
                json!({"spec": {"minReplicas": 1, "replicas": 2, "maxReplicas": 3}}),
                None
            )
            .is_empty()
        );
        assert_eq!(
            check(
                &rules,
                json!({"spec": {"minReplicas": 1, "replicas": 5, "maxReplicas": 3}}),
                None
            ),
            vec![
                r#"spec: Invalid value: "object": replicas should be in between minReplicas and maxReplicas."#
            ]
        );
        // A missing field is a runtime error, as in kube.
        let missing = check(&rules, json!({"spec": {"replicas": 5}}), None);
        assert_eq!(missing.len(), 1);
        assert!(
            missing[0].starts_with(r#"spec: Invalid value: "object": no such key: m"#),
            "{missing:?}"
        );
        assert!(missing[0].ends_with(
            "Replicas evaluating rule: replicas should be in between minReplicas and maxReplicas."
        ));
    }

    #[test]
    fn docs_rules_on_lists_strings_and_the_root() {
        let rules = compiled(json!({
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('a')"}],
            "properties": {"spec": {"type": "object", "properties": {
                "items": {"type": "array", "items": {"type": "integer"}, "maxItems": 10,
                          "x-kubernetes-validations": [{"rule": "self.all(x, x > 0)"}, {"rule": "self.size() > 0"}]},
                "name": {"type": "string", "maxLength": 20, "x-kubernetes-validations": [{"rule": "self.size() > 0"}]}
            }}}
        }));
        let ok = json!({"metadata": {"name": "abc"}, "spec": {"items": [1, 2], "name": "x"}});
        assert!(check(&rules, ok, None).is_empty());
        let bad = json!({"metadata": {"name": "xyz"}, "spec": {"items": [], "name": ""}});
        assert_eq!(
            check(&rules, bad, None),
            vec![
                r#"<nil>: Invalid value: "object": failed rule: self.metadata.name.startsWith('a')"#,
                r#"spec.items: Invalid value: "array": failed rule: self.size() > 0"#,
                r#"spec.name: Invalid value: "string": failed rule: self.size() > 0"#,
            ]
        );
        let negative = json!({"metadata": {"name": "a"}, "spec": {"items": [1, -1]}});
        assert_eq!(
            check(&rules, negative, None),
            vec![r#"spec.items: Invalid value: "array": failed rule: self.all(x, x > 0)"#]
        );
    }

    #[test]
    fn docs_transition_rule() {
        let rules = compiled(root(json!({"type": "object", "properties": {
            "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "Value is immutable"}]}
        }})));
        // No old value on create: transition rules are skipped.
        assert!(check(&rules, json!({"spec": {"name": "a"}}), None).is_empty());
        assert!(
            check(
                &rules,
                json!({"spec": {"name": "a"}}),
                Some(json!({"spec": {"name": "a"}}))
            )
            .is_empty()
        );
        assert_eq!(
            check(
                &rules,
                json!({"spec": {"name": "b"}}),
                Some(json!({"spec": {"name": "a"}}))
            ),
            vec![r#"spec.name: Invalid value: "string": Value is immutable"#]
        );
        // A field added on update has no old value either.
        assert!(
            check(
                &rules,
                json!({"spec": {"name": "b"}}),
                Some(json!({"spec": {}}))
            )
            .is_empty()
        );
    }

    #[test]
    fn optional_old_self_runs_on_create() {
        let rules = compiled(root(json!({"type": "object", "properties": {
            "name": {"type": "string", "x-kubernetes-validations": [{
                "rule": "oldSelf.hasValue() ? self == oldSelf.value() : self.startsWith('new-')",
                "optionalOldSelf": true, "message": "must start new-, then never change"}]}
        }})));
        assert!(check(&rules, json!({"spec": {"name": "new-a"}}), None).is_empty());
        assert_eq!(check(&rules, json!({"spec": {"name": "a"}}), None).len(), 1);
        assert_eq!(
            check(
                &rules,
                json!({"spec": {"name": "new-b"}}),
                Some(json!({"spec": {"name": "new-a"}}))
            )
            .len(),
            1
        );
    }

    #[test]
    fn docs_message_expression_reason_and_field_path() {
        let rules = compiled(root(json!({
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.x < self.y", "messageExpression": "'x must be less than ' + string(self.y)"},
                {"rule": "self.x != 13", "reason": "FieldValueForbidden", "message": "x may not be 13", "fieldPath": ".x"},
                {"rule": "self.x != 14", "fieldPath": ".x"}
            ],
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}
        })));
        assert!(check(&rules, json!({"spec": {"x": 1, "y": 5}}), None).is_empty());
        assert_eq!(
            check(&rules, json!({"spec": {"x": 13, "y": 5}}), None),
            vec![
                r#"spec: Invalid value: "object": x must be less than 5"#,
                "spec.x: Forbidden: x may not be 13"
            ]
        );
        assert_eq!(
            check(&rules, json!({"spec": {"x": 14, "y": 20}}), None),
            vec![r#"spec.x: Invalid value: "object": failed rule: self.x != 14"#]
        );
    }

    #[test]
    fn int_or_string_is_dynamic() {
        let rules = compiled(root(json!({"type": "object", "properties": {
            "port": {"x-kubernetes-int-or-string": true, "x-kubernetes-validations": [{
                "rule": "type(self) == int ? self > 0 : self.endsWith('%')", "message": "bad port"}]}
        }})));
        assert!(check(&rules, json!({"spec": {"port": 8080}}), None).is_empty());
        assert!(check(&rules, json!({"spec": {"port": "50%"}}), None).is_empty());
        assert_eq!(
            check(&rules, json!({"spec": {"port": 0}}), None),
            vec![r#"spec.port: Invalid value: "": bad port"#]
        );
        assert_eq!(check(&rules, json!({"spec": {"port": "x"}}), None).len(), 1);
    }

    #[test]
    fn compilation_failures_are_reported_like_kube() {
        let at = format!("{PREFIX}.properties[spec].x-kubernetes-validations[0]");
        let errors = compile_errors(root(
            json!({"type": "object", "properties": {"x": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.foo > 1"}]}),
        ));
        assert_eq!(
            errors,
            vec![format!(
                "{at}.rule: Invalid value: {{\"rule\":\"self.foo > 1\"}}: compilation failed: ERROR: <input>:1:5: undefined field 'foo'\n | self.foo > 1\n | ....^"
            )]
        );
        let errors = compile_errors(root(
            json!({"type": "object", "properties": {"x": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.x + 1"}]}),
        ));
        assert_eq!(
            errors,
            vec![format!(
                "{at}.rule: Invalid value: {{\"rule\":\"self.x + 1\"}}: cel expression must evaluate to a bool"
            )]
        );
        let errors = compile_errors(root(
            json!({"type": "object", "properties": {"x": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.x >"}]}),
        ));
        assert!(
            errors[0].contains(".rule: Invalid value: {\"rule\":\"self.x >\"}: compilation failed: ERROR: <input>:1:"),
            "{errors:?}"
        );
        let errors = compile_errors(root(
            json!({"type": "object", "properties": {"x": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.x > 1", "messageExpression": "self.x"}]}),
        ));
        assert_eq!(
            errors,
            vec![format!(
                r#"{at}.messageExpression: Invalid value: {{"rule":"self.x > 1","messageExpression":"self.x"}}: messageExpression must evaluate to a string"#
            )]
        );
        let errors = compile_errors(root(
            json!({"type": "object", "properties": {"x": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.x > 1", "messageExpression": "'x is ' + self.nope"}]}),
        ));
        assert!(
            errors[0].starts_with(&format!("{at}.messageExpression: Invalid value: ")),
            "{errors:?}"
        );
        assert!(errors[0].contains("messageExpression compilation failed: ERROR: <input>:1:15: undefined field 'nope'\n | 'x is ' + self.nope\n | ..............^"), "{errors:?}");
    }

    #[test]
    fn rule_entries_are_checked() {
        let at = format!("{PREFIX}.properties[spec].x-kubernetes-validations");
        let errors = compile_errors(root(
            json!({"type": "object", "properties": {"x": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.x > 1", "reason": "FieldValueBogus"},
                {"rule": "self.x > 1", "fieldPath": ".y"},
                {"rule": " "},
                {"rule": "self.x > 1", "optionalOldSelf": true}
            ]}),
        ));
        assert_eq!(
            errors,
            vec![
                format!(
                    r#"{at}[0].reason: Unsupported value: "FieldValueBogus": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#
                ),
                format!(
                    r#"{at}[1].fieldPath: Invalid value: ".y": fieldPath must be a valid path"#
                ),
                format!("{at}[2].rule: Required value: rule is not specified"),
            ]
        );
        let errors = compile_errors(root(
            json!({"type": "object", "properties": {"x": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.x > 1", "optionalOldSelf": true}]}),
        ));
        assert_eq!(
            errors,
            vec![format!(
                "{at}[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
            )]
        );
    }

    #[test]
    fn transition_rules_need_correlatable_values() {
        let errors = compile_errors(root(json!({"type": "object", "properties": {
            "list": {"type": "array", "maxItems": 10,
                     "items": {"type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}
        }})));
        assert_eq!(
            errors,
            vec![format!(
                r#"{PREFIX}.properties[spec].properties[list].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within {PREFIX}.properties[spec].properties[list]"#
            )]
        );
        // Items of a map list correlate by key.
        compiled(root(json!({"type": "object", "properties": {
            "list": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "maxItems": 10,
                     "items": {"type": "object", "required": ["name"], "properties": {
                         "name": {"type": "string", "maxLength": 10}, "value": {"type": "integer"}},
                         "x-kubernetes-validations": [{"rule": "self.value >= oldSelf.value", "message": "value may only grow"}]}}
        }})));
    }

    fn nested_rule_schema(bounded: bool) -> Value {
        let mut list = json!({"type": "array", "items": {"type": "string"},
            "x-kubernetes-validations": [{"rule": "self.all(x, self.exists(y, x != y && x.startsWith(y)))"}]});
        if bounded {
            list["maxItems"] = json!(20);
            list["items"]["maxLength"] = json!(64);
        }
        root(json!({"type": "object", "properties": {"names": list}}))
    }

    #[test]
    fn unbounded_nested_rules_are_too_expensive() {
        let errors = compile_errors(nested_rule_schema(false));
        let rule =
            format!("{PREFIX}.properties[spec].properties[names].x-kubernetes-validations[0].rule");
        assert_eq!(
            errors,
            vec![
                format!(
                    "{rule}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
                ),
                format!(
                    "{rule}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
                ),
                format!(
                    "{PREFIX}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
                ),
            ]
        );
        let rules = compiled(nested_rule_schema(true));
        assert!(check(&rules, json!({"spec": {"names": ["a", "ab"]}}), None).len() == 1);
    }

    fn strings_schema(rule: &str, max_length: Option<u64>) -> Value {
        let mut text = json!({"type": "string"});
        if let Some(max) = max_length {
            text["maxLength"] = json!(max);
        }
        let mut list = json!({"type": "array", "items": {"type": "string", "maxLength": 8}});
        if max_length.is_some() {
            list["maxItems"] = json!(16);
        }
        root(
            json!({"type": "object", "x-kubernetes-validations": [{"rule": rule}],
            "properties": {"l": list, "s": text, "t": text}}),
        )
    }

    #[test]
    fn rules_that_build_strings_are_costed_by_what_they_build() {
        // The red team's rules: accepted before, with unbounded strings.
        for rule in [
            "self.l.map(x, self.s).join('').size() > 0",
            "self.s.replace('a', self.t).size() > 0",
        ] {
            let errors = compile_errors(strings_schema(rule, None));
            assert!(
                errors[0].contains("estimated rule cost exceeds budget by factor of"),
                "{rule}: {errors:?}"
            );
            // Bounded by the schema, they are cheap and run.
            let rules = compiled(strings_schema(rule, Some(64)));
            let object = json!({"spec": {"l": ["a"], "s": "abc", "t": "x"}});
            assert!(check(&rules, object, None).is_empty(), "{rule}");
        }
    }

    #[test]
    fn rules_under_unbounded_lists_count_every_possible_item() {
        // A cheap rule is fine anywhere; a costlier one on the items of an unbounded
        // list is charged for every item that fits in a request.
        compiled(root(
            json!({"type": "object", "properties": {"list": {"type": "array",
            "items": {"type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": "self.size() > 1"}]}}}}),
        ));
        let errors = compile_errors(root(
            json!({"type": "object", "properties": {"list": {"type": "array",
            "items": {"type": "string", "maxLength": 100, "x-kubernetes-validations": [{"rule": "self.matches('^[a-z]+$')"}]}}}}),
        ));
        assert!(
            errors[0].contains(
                "items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of"
            ),
            "{errors:?}"
        );
    }

    #[test]
    fn old_self_correlates_list_items_and_map_values_by_key() {
        let rules = compiled(root(json!({"type": "object", "properties": {
            "list": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "maxItems": 10,
                     "items": {"type": "object", "required": ["name"], "properties": {
                         "name": {"type": "string", "maxLength": 10}, "value": {"type": "integer"}},
                         "x-kubernetes-validations": [{"rule": "self.value >= oldSelf.value", "message": "value may only grow"}]}},
            "map": {"type": "object", "maxProperties": 10, "additionalProperties": {"type": "integer",
                     "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "may only grow"}]}}
        }})));
        let old = json!({"spec": {"list": [{"name": "a", "value": 1}, {"name": "b", "value": 5}], "map": {"a": 1, "b": 5}}});
        // Reordered and grown: fine; new items have no old value.
        let new = json!({"spec": {"list": [{"name": "c", "value": 0}, {"name": "b", "value": 6}, {"name": "a", "value": 1}],
                                  "map": {"b": 5, "c": 0, "a": 2}}});
        assert!(check(&rules, new, Some(old.clone())).is_empty());
        let shrunk = json!({"spec": {"list": [{"name": "b", "value": 4}, {"name": "a", "value": 1}], "map": {"a": 0, "b": 5}}});
        assert_eq!(
            check(&rules, shrunk, Some(old)),
            vec![
                r#"spec.list[0]: Invalid value: "object": value may only grow"#,
                r#"spec.map[a]: Invalid value: "integer": may only grow"#,
            ]
        );
    }

    #[test]
    fn unchanged_values_ratchet() {
        let rules = compiled(root(json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": "self.startsWith('a')"}]},
            "other": {"type": "integer"}
        }})));
        let old = json!({"spec": {"name": "bad", "other": 1}});
        let outcome = validate_with_warnings(
            &rules,
            &json!({"spec": {"name": "bad", "other": 2}}),
            Some(&old),
        );
        assert!(outcome.errors.is_empty());
        assert_eq!(
            outcome.warnings,
            vec![r#"spec.name: Invalid value: "string": failed rule: self.startsWith('a')"#]
        );
        assert_eq!(
            check(
                &rules,
                json!({"spec": {"name": "worse", "other": 1}}),
                Some(old)
            )
            .len(),
            1
        );
    }

    fn pairwise(rules: usize, max_items: usize) -> Value {
        let rule = json!({"rule": "self.all(x, self.all(y, x != y || x == y))"});
        root(
            json!({"type": "object", "properties": {"list": {"type": "array", "maxItems": max_items,
            "items": {"type": "integer"}, "x-kubernetes-validations": vec![rule; rules]}}}),
        )
    }

    #[test]
    fn runtime_cost_is_limited_per_call_and_per_object() {
        let rules = compiled(pairwise(1, 1000));
        let small: Vec<i64> = (0..100).collect();
        assert!(check(&rules, json!({"spec": {"list": small}}), None).is_empty());
        let big: Vec<i64> = (0..1000).collect();
        assert_eq!(
            check(&rules, json!({"spec": {"list": big}}), None),
            vec![
                r#"spec.list: Invalid value: "array": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(x, self.all(y, x != y || x == y))"#
            ]
        );
        let rules = compiled(pairwise(40, 300));
        let medium: Vec<i64> = (0..250).collect();
        assert_eq!(
            check(&rules, json!({"spec": {"list": medium}}), None),
            vec![
                r#"spec.list: Invalid value: "array": validation failed due to running out of cost budget, no further validation rules will be run"#
            ]
        );
    }
}
