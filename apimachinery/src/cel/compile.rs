//! Compiling a CRD schema's rules at CRD creation or update: what
//! kube-apiserver's `ValidateCustomResourceDefinitionOpenAPISchema` checks
//! about `x-kubernetes-validations`, with its field paths and messages.
//!
//! Per node, children first (kube's order), then the rule entries' own shape
//! (`rule` set, `message` on one line, `reason` known, `fieldPath` valid);
//! then, only if nothing at or below the node is malformed, every rule and
//! `messageExpression` is parsed, type-checked against the node's schema and
//! its cost estimated. A rule's cost is multiplied by how many times it can
//! run (the product of `maxItems`/`maxProperties` above it, or, under an
//! unbounded list or map, how many such nodes fit in one request) and checked
//! against [`STATIC_ESTIMATED_COST_LIMIT`]; the sum over the CRD against
//! [`STATIC_ESTIMATED_CRD_COST_LIMIT`].

use std::sync::Arc;

use crate::error::{Error, FieldError};
use kube_cel::cel::common::ast::IdedExpr;
use kube_cel::cel::parser::Parser;
use serde_json::Value;

use super::check::{Checked, SchemaSizes, Ty, check, format_issue};
use super::eval::Plan;
use super::schema::{
    DeclType, MAX_REQUEST_SIZE_BYTES, RawRule, Schema, decl_type, valid_field_path,
};

/// Largest estimated cost of one rule, times how often it can run
/// (kube's `StaticEstimatedCostLimit`).
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// Largest estimated cost of all rules of one schema
/// (kube's `StaticEstimatedCRDCostLimit`).
pub const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;

/// The `reason` values a rule may name.
const SUPPORTED_REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// One compiled `x-kubernetes-validations` entry.
#[derive(Debug)]
pub struct CompiledRule {
    /// The entry as written.
    pub rule: RawRule,
    /// The rule, ready to evaluate.
    pub program: Plan,
    /// The `messageExpression`, if any, ready to evaluate.
    pub message_expression: Option<Plan>,
    /// Whether the rule reads `oldSelf` (a transition rule).
    pub uses_old_self: bool,
    /// `fieldPath` in field-path form, relative to the node.
    pub field_path: Option<String>,
}

/// The compiled rules of one schema node and of the nodes below it that have any.
#[derive(Debug)]
pub struct Validator {
    /// The node's schema, with `apiVersion`/`kind`/`metadata` added at resource roots.
    pub schema: Schema,
    /// The node's CEL type.
    pub decl: Option<Arc<DeclType>>,
    /// The node's own rules.
    pub rules: Vec<CompiledRule>,
    /// Validators of properties, by property name.
    pub properties: Vec<(String, Validator)>,
    /// Validator of list items.
    pub items: Option<Box<Validator>>,
    /// Validator of map values.
    pub additional_properties: Option<Box<Validator>>,
}

/// Longest rule accepted, in code points (cel-go's expression size limit).
pub const MAX_RULE_CODE_POINTS: usize = 100_000;
/// Deepest expression tree accepted. Checking, costing and evaluating a
/// rule recurse over its tree; the bound keeps them within a worker's stack.
pub const MAX_EXPRESSION_DEPTH: usize = 100;
/// Stack of the thread a rule is parsed on: the parser recurses through a
/// dozen grammar rules per nesting level (about 140 KiB a level unoptimised,
/// up to its own limit of 96), more than a worker's stack holds.
const PARSER_STACK_BYTES: usize = 256 << 20;

/// Parses a CEL expression as kube does (optional syntax enabled), with
/// errors formatted as cel-go formats them. The parser runs on a thread of
/// its own with a large stack, and trees deeper than
/// [`MAX_EXPRESSION_DEPTH`] are refused there.
pub fn parse(source: &str) -> Result<IdedExpr, Error> {
    let size = source.chars().count();
    if size > MAX_RULE_CODE_POINTS {
        return Err(Error::bad_request(format!(
            "expression code point size exceeds limit: size: {size}, limit {MAX_RULE_CODE_POINTS}"
        )));
    }
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-parser".into())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(scope, || parse_bounded(source))
            .map_err(|e| Error::internal(format!("cannot start the CEL parser: {e}")))?
            .join()
            .map_err(|_| recursion_limit(source))?
    })
}

/// [`parse`] on the current thread, refusing trees deeper than [`MAX_EXPRESSION_DEPTH`].
fn parse_bounded(source: &str) -> Result<IdedExpr, Error> {
    // At its recursion limit the parser's error recovery can take its depth
    // counter below zero, a panic where overflow checks are on: a bad rule.
    let expr =
        std::panic::catch_unwind(|| Parser::new().enable_optional_syntax(true).parse(source))
            .map_err(|_| recursion_limit(source))?
            .map_err(|errors| {
                let issues: Vec<String> = errors
                    .errors
                    .iter()
                    .map(|e| {
                        let (line, column) = (e.pos.0.max(1) as usize, e.pos.1.max(1) as usize);
                        let offset: usize = source
                            .split_inclusive('\n')
                            .take(line - 1)
                            .map(str::len)
                            .sum::<usize>()
                            + source.lines().nth(line - 1).map_or(0, |l| {
                                l.char_indices().nth(column - 1).map_or(l.len(), |(i, _)| i)
                            });
                        format_issue(source, offset, &e.msg)
                    })
                    .collect();
                Error::bad_request(issues.join("\n"))
            })?;
    if depth(&expr) > MAX_EXPRESSION_DEPTH {
        return Err(Error::bad_request(format_issue(
            source,
            0,
            &format!("expression nesting exceeds {MAX_EXPRESSION_DEPTH} levels"),
        )));
    }
    Ok(expr)
}

/// The parser ran out of room: cel-go's recursion error.
fn recursion_limit(source: &str) -> Error {
    Error::bad_request(format_issue(
        source,
        0,
        "expression recursion limit exceeded",
    ))
}

/// The depth of an expression tree (run where the parser ran: it may be deep).
fn depth(expr: &IdedExpr) -> usize {
    use kube_cel::cel::common::ast::{EntryExpr, Expr, MapExpr, StructExpr};
    let children: Vec<&IdedExpr> = match &expr.expr {
        Expr::Call(call) => call.target.iter().map(|t| &**t).chain(&call.args).collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => entries
            .iter()
            .flat_map(|e| match &e.expr {
                EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Select(select) => vec![&*select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    };
    1 + children.into_iter().map(depth).max().unwrap_or(0)
}

/// A rule's cost that counts toward the CRD total, by field path.
struct RuleCost {
    path: String,
    cost: u64,
}

/// The schema walk, collecting errors as kube does: schema errors first, CEL errors after.
#[derive(Default)]
pub struct Compiler {
    schema_errors: Vec<FieldError>,
    cel_errors: Vec<FieldError>,
    total: u64,
    most_expensive: Vec<RuleCost>,
}

/// Where a node sits: its path, how often it can occur, what it may correlate.
#[derive(Clone)]
struct Place<'a> {
    path: &'a str,
    is_resource_root: bool,
    /// How many times the node can occur; `None` under an unbounded list or map.
    cardinality: Option<u64>,
    /// The highest list or map above whose items cannot be correlated with old items.
    uncorrelatable: Option<String>,
}

impl Compiler {
    /// Compiles a whole schema found at `path` (e.g. `spec.versions[0].schema.openAPIV3Schema`).
    pub fn compile(
        mut self,
        schema: &Schema,
        path: &str,
    ) -> Result<Option<Validator>, Vec<FieldError>> {
        let place = Place {
            path,
            is_resource_root: true,
            cardinality: Some(1),
            uncorrelatable: None,
        };
        let validator = self.node(schema, place);
        if self.total > STATIC_ESTIMATED_CRD_COST_LIMIT {
            for expensive in &self.most_expensive {
                self.cel_errors.push(FieldError::forbidden(
                    expensive.path.clone(),
                    "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
                ));
            }
            self.cel_errors.push(FieldError::forbidden(
                path,
                cost_error_message(
                    "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                    self.total,
                    STATIC_ESTIMATED_CRD_COST_LIMIT,
                ),
            ));
        }
        let mut errors = self.schema_errors;
        errors.extend(self.cel_errors);
        if errors.is_empty() {
            Ok(validator)
        } else {
            Err(errors)
        }
    }

    fn observe(&mut self, path: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
            return;
        }
        self.most_expensive.push(RuleCost { path, cost });
        self.most_expensive
            .sort_by_key(|c| std::cmp::Reverse(c.cost));
        self.most_expensive.truncate(4);
    }

    fn node(&mut self, schema: &Schema, place: Place<'_>) -> Option<Validator> {
        let schema_errors_before = self.schema_errors.len();
        // How many children each occurrence of this node holds.
        let child_factor = match schema.ty.as_str() {
            "object" if schema.additional_properties.is_some() => {
                schema.max_properties.map(|n| n.max(0) as u64)
            }
            "array" => schema.max_items.map(|n| n.max(0) as u64),
            _ => Some(1),
        };
        let child_cardinality = place
            .cardinality
            .and_then(|c| child_factor.map(|f| c.saturating_mul(f)));

        let additional_properties = schema.additional_properties.as_ref().and_then(|child| {
            let path = format!("{}.additionalProperties", place.path);
            let child_place = Place {
                path: &path,
                is_resource_root: child.embedded_resource,
                cardinality: child_cardinality,
                uncorrelatable: place.uncorrelatable.clone(),
            };
            self.node(child, child_place).map(Box::new)
        });
        let correlatable_map = matches!(
            schema.map_type.as_deref(),
            None | Some("granular") | Some("atomic")
        );
        let mut properties = Vec::new();
        for (name, child) in &schema.properties {
            let path = format!("{}.properties[{name}]", place.path);
            let uncorrelatable = match (&place.uncorrelatable, correlatable_map) {
                (Some(p), _) => Some(p.clone()),
                (None, false) => Some(place.path.to_string()),
                (None, true) => None,
            };
            let child_place = Place {
                path: &path,
                is_resource_root: child.embedded_resource,
                cardinality: child_cardinality,
                uncorrelatable,
            };
            if let Some(v) = self.node(child, child_place) {
                properties.push((name.clone(), v));
            }
        }
        let items = schema.items.as_ref().and_then(|child| {
            let path = format!("{}.items", place.path);
            let uncorrelatable = match &place.uncorrelatable {
                Some(p) => Some(p.clone()),
                None if schema.list_type.as_deref() != Some("map") => Some(place.path.to_string()),
                None => None,
            };
            let child_place = Place {
                path: &path,
                is_resource_root: child.embedded_resource,
                cardinality: child_cardinality,
                uncorrelatable,
            };
            self.node(child, child_place).map(Box::new)
        });

        self.rule_shapes(schema, place.path);
        let mut rules = Vec::new();
        let value_schema = if place.is_resource_root {
            schema.with_type_and_object_meta()
        } else {
            schema.clone()
        };
        let decl = decl_type(schema, place.is_resource_root);
        if !schema.rules.is_empty() && self.schema_errors.len() == schema_errors_before {
            match &decl {
                Some(decl) => rules = self.rules(schema, decl, &place),
                None => self.cel_errors.push(FieldError::invalid(
                    format!("{}.x-kubernetes-validations", place.path),
                    "",
                    "internal error: failed to retrieve type information for x-kubernetes-validations",
                )),
            }
        }
        if rules.is_empty()
            && properties.is_empty()
            && items.is_none()
            && additional_properties.is_none()
        {
            return None;
        }
        Some(Validator {
            schema: value_schema,
            decl,
            rules,
            properties,
            items,
            additional_properties,
        })
    }

    /// The shape checks kube makes on each entry before compiling any.
    fn rule_shapes(&mut self, schema: &Schema, path: &str) {
        for (i, rule) in schema.rules.iter().enumerate() {
            let at = |field: &str| format!("{path}.x-kubernetes-validations[{i}].{field}");
            let trimmed_rule = rule.rule.trim();
            let trimmed_message = rule.message.trim();
            if trimmed_rule.is_empty() {
                self.schema_errors
                    .push(FieldError::required(at("rule"), "rule is not specified"));
            } else if !rule.message.is_empty() && trimmed_message.is_empty() {
                self.schema_errors.push(FieldError::invalid(
                    at("message"),
                    rule.message.clone(),
                    "message must be non-empty if specified",
                ));
            } else if has_newlines(trimmed_message) {
                self.schema_errors.push(FieldError::invalid(
                    at("message"),
                    rule.message.clone(),
                    "message must not contain line breaks",
                ));
            } else if has_newlines(trimmed_rule) && trimmed_message.is_empty() {
                self.schema_errors.push(FieldError::required(
                    at("message"),
                    "message must be specified if rule contains line breaks",
                ));
            }
            if !rule.message_expression.is_empty() && rule.message_expression.trim().is_empty() {
                self.schema_errors.push(FieldError::required(
                    at("messageExpression"),
                    "messageExpression must be non-empty if specified",
                ));
            }
            if let Some(reason) = &rule.reason
                && !SUPPORTED_REASONS.contains(&reason.as_str())
            {
                self.schema_errors.push(FieldError::not_supported(
                    at("reason"),
                    reason.clone(),
                    &SUPPORTED_REASONS,
                ));
            }
            if !rule.field_path.is_empty() && rule.field_path.trim().is_empty() {
                self.schema_errors.push(FieldError::invalid(
                    at("fieldPath"),
                    rule.field_path.clone(),
                    "fieldPath must be non-empty if specified",
                ));
            }
            if has_newlines(&rule.field_path) {
                self.schema_errors.push(FieldError::invalid(
                    at("fieldPath"),
                    rule.field_path.clone(),
                    "fieldPath must not contain line breaks",
                ));
            }
            if !rule.field_path.is_empty() && valid_field_path(&rule.field_path, schema).is_err() {
                self.schema_errors.push(FieldError::invalid(
                    at("fieldPath"),
                    rule.field_path.clone(),
                    "fieldPath must be a valid path",
                ));
            }
        }
    }

    /// Compiles the rules of one well-formed node.
    fn rules(
        &mut self,
        schema: &Schema,
        decl: &Arc<DeclType>,
        place: &Place<'_>,
    ) -> Vec<CompiledRule> {
        let mut compiled = Vec::new();
        // How many times a rule here can run when no bound is declared above it.
        let max_cardinality = MAX_REQUEST_SIZE_BYTES / (decl.min_size + 1);
        for (i, rule) in schema.rules.iter().enumerate() {
            let at = |field: &str| format!("{}.x-kubernetes-validations[{i}].{field}", place.path);
            if rule.rule.trim().is_empty() {
                continue;
            }
            let optional = rule.optional_old_self == Some(true);
            let outcome = compile_expression(&rule.rule, decl, optional);
            let (program, checked, error) = match outcome {
                Ok((program, checked)) => {
                    let error = match checked.ty {
                        Ty::Bool | Ty::Unknown => None,
                        _ => Some("cel expression must evaluate to a bool".to_string()),
                    };
                    (Some(program), Some(checked), error)
                }
                Err(issues) => (None, None, Some(format!("compilation failed: {issues}"))),
            };
            // A rule that failed to compile costs nothing (kube reports the compile error only).
            let base_cost = if error.is_none() {
                checked.as_ref().map_or(0, |c| c.cost.max)
            } else {
                0
            };
            let times = place.cardinality.unwrap_or(max_cardinality);
            let cost = if base_cost == 0 {
                0
            } else {
                base_cost.saturating_mul(times)
            };
            if cost > STATIC_ESTIMATED_COST_LIMIT {
                self.cel_errors.push(FieldError::forbidden(
                    at("rule"),
                    cost_error_message("estimated rule cost", cost, STATIC_ESTIMATED_COST_LIMIT),
                ));
            }
            self.observe(at("rule"), cost);
            if let Some(error) = &error {
                self.cel_errors.push(FieldError::invalid(
                    at("rule"),
                    rule.raw.clone(),
                    error.clone(),
                ));
            }
            let uses_old_self =
                error.is_none() && checked.as_ref().is_some_and(|c| c.uses_old_self);

            let mut message_expression = None;
            if error.is_none() && !rule.message_expression.is_empty() {
                match compile_expression(&rule.message_expression, decl, optional) {
                    Err(issues) => self.cel_errors.push(FieldError::invalid(
                        at("messageExpression"),
                        rule.raw.clone(),
                        format!("messageExpression compilation failed: {issues}"),
                    )),
                    Ok((_, checked)) if !matches!(checked.ty, Ty::String | Ty::Unknown) => {
                        self.cel_errors.push(FieldError::invalid(
                            at("messageExpression"),
                            rule.raw.clone(),
                            "messageExpression must evaluate to a string",
                        ))
                    }
                    Ok((program, checked)) => {
                        if checked.cost.max > STATIC_ESTIMATED_COST_LIMIT {
                            self.cel_errors.push(FieldError::forbidden(
                                at("messageExpression"),
                                cost_error_message(
                                    "estimated messageExpression cost",
                                    checked.cost.max,
                                    STATIC_ESTIMATED_COST_LIMIT,
                                ),
                            ));
                        }
                        self.observe(at("messageExpression"), checked.cost.max);
                        message_expression = Some(Plan::new(&program));
                    }
                }
            }

            if uses_old_self {
                if let Some(uncorrelatable) = &place.uncorrelatable {
                    self.cel_errors.push(FieldError::invalid(
                        at("rule"),
                        rule.rule.clone(),
                        format!(
                            "oldSelf cannot be used on the uncorrelatable portion of the schema within {uncorrelatable}"
                        ),
                    ));
                }
            } else if let Some(optional_old_self) = rule.optional_old_self {
                self.cel_errors.push(FieldError::invalid(
                    at("optionalOldSelf"),
                    optional_old_self,
                    "may not be set if oldSelf is not used in rule",
                ));
            }

            if let (Some(program), None) = (program, error) {
                let field_path = (!rule.field_path.is_empty())
                    .then(|| valid_field_path(&rule.field_path, schema).ok())
                    .flatten();
                compiled.push(CompiledRule {
                    rule: rule.clone(),
                    program: Plan::new(&program),
                    message_expression,
                    uses_old_self,
                    field_path,
                });
            }
        }
        compiled
    }
}

/// Parses and checks one expression against the node's type.
fn compile_expression(
    source: &str,
    decl: &Arc<DeclType>,
    optional_old_self: bool,
) -> Result<(IdedExpr, Checked), Error> {
    let program = parse(source)?;
    let checked = check(
        &program,
        source,
        decl,
        optional_old_self,
        &SchemaSizes { root: decl },
    );
    if checked.errors.is_empty() {
        Ok((program, checked))
    } else {
        Err(Error::bad_request(checked.errors.join("\n")))
    }
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// kube's `getCostErrorMessage`.
pub fn cost_error_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// Compiles the rules of `schema` (an `openAPIV3Schema`), whose field path is `path`.
pub fn compile_value(schema: &Value, path: &str) -> Result<Option<Validator>, Vec<FieldError>> {
    Compiler::default().compile(&Schema::parse(schema), path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_messages_match_kube() {
        assert_eq!(
            cost_error_message("estimated rule cost", 64_000_000, 10_000_000),
            "estimated rule cost exceeds budget by factor of 6.4x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        );
        assert!(cost_error_message("x", 12, 10).contains("factor of 1.200000x"));
        assert!(cost_error_message("x", 1_001, 10).contains("factor of more than 100x"));
    }

    #[test]
    fn parse_errors_are_formatted_like_cel_go() {
        let err = parse("self.x ==").expect_err("incomplete").to_string();
        assert!(err.starts_with("ERROR: <input>:1:"), "{err}");
        assert!(err.contains("Syntax error"), "{err}");
        assert!(err.contains("\n | self.x ==\n | "), "{err}");
    }

    #[test]
    fn deep_and_huge_rules_are_refused() {
        let chain = |terms: usize| vec!["self.x"; terms].join(" + ") + " >= 0";
        assert!(parse(&chain(MAX_EXPRESSION_DEPTH - 10)).is_ok());
        let err = parse(&chain(MAX_EXPRESSION_DEPTH + 10))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("expression nesting exceeds 100 levels"),
            "{err}"
        );
        // Far past the parser's own limit, in parentheses: an error, not a crash.
        let parens = format!("{}self.x{}", "(".repeat(5000), ")".repeat(5000));
        assert!(parse(&parens).is_err());
        let huge = "1 + ".repeat(MAX_RULE_CODE_POINTS / 4 + 1) + "1";
        let err = parse(&huge).unwrap_err().to_string();
        assert!(
            err.contains("expression code point size exceeds limit"),
            "{err}"
        );
    }

    /// Found by the `cel` fuzz target: a syntax error at the parser's
    /// recursion limit underflowed its depth counter (a panic in tests).
    #[test]
    fn errors_at_the_recursion_limit_do_not_panic() {
        // The parser's frames are large in unoptimised builds: give it room.
        let parsed = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(|| ["(", "{"].map(|open| parse(&format!("{}?[", open.repeat(97)))))
            .expect("spawns")
            .join()
            .expect("no panic escapes parse");
        assert!(parsed.iter().all(Result::is_err), "{parsed:?}");
    }
}
