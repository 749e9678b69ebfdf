//! Evaluating compiled rules against a custom resource on create and update,
//! as kube's `cel.Validator` does.
//!
//! Every rule runs at every (non-null) node it is declared on: objects, each
//! list item, each map value, scalars. `oldSelf` is the correlated old value:
//! same field name for objects, same key for maps and for items of
//! `x-kubernetes-list-type: map` lists; items of atomic lists and sets have
//! none. Transition rules (those reading `oldSelf`) are skipped when there is
//! no old value, unless `optionalOldSelf` is set (then `oldSelf` is
//! `optional.none()`). On update, an error from a rule that does not read
//! `oldSelf` is ratcheted (dropped, reported as a warning) when the node, or
//! its nearest correlatable ancestor, is unchanged.
//!
//! Cost: each evaluation is metered as it runs ([`super::eval`]) and
//! stopped at [`PER_CALL_LIMIT`], which stops validation, as kube stops when
//! a call runs out of its limit; what each evaluation cost is charged
//! against [`RUNTIME_COST_BUDGET`] for the whole object.

use crate::error::FieldError;
use kube_cel::cel::objects::OptionalValue;
use kube_cel::cel::{ExecutionError, Value as CelValue};
use serde_json::Value;
use std::sync::Arc;

use super::compile::{CompiledRule, Validator};
use super::eval::{Failure, Meter, Plan};
use super::library::library;
use super::schema::Schema;
use super::value::to_cel;

/// Cost limit of one evaluation of one rule (kube's `PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// Cost budget of validating one object (kube's `RuntimeCELCostBudget`).
pub const RUNTIME_COST_BUDGET: i64 = 10_000_000;
/// Longest message a `messageExpression` may produce.
const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5 * 1024;

/// cel-go's words for an evaluation stopped at its limit.
pub(crate) const CALL_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// A field path under construction, rendered as kube's `field.Path`.
#[derive(Clone, Default)]
struct Path(Option<String>);

impl Path {
    fn child(&self, name: &str) -> Path {
        match &self.0 {
            None => Path(Some(name.to_string())),
            Some(p) => Path(Some(format!("{p}.{name}"))),
        }
    }

    fn key(&self, key: &str) -> Path {
        Path(Some(format!("{}[{key}]", self.0.as_deref().unwrap_or(""))))
    }

    fn index(&self, i: usize) -> Path {
        Path(Some(format!("{}[{i}]", self.0.as_deref().unwrap_or(""))))
    }

    /// kube renders the root (a nil path) as `<nil>`.
    fn render(&self) -> String {
        self.0.clone().unwrap_or_else(|| "<nil>".to_string())
    }
}

/// Ratcheting state: is the nearest correlatable node unchanged?
#[derive(Clone, Copy)]
struct Ratchet<'a> {
    /// The old value correlated with the current node, if it has one.
    old: Option<&'a Value>,
    /// Whether the nearest correlatable ancestor equals its old value.
    parent_unchanged: bool,
}

impl<'a> Ratchet<'a> {
    fn unchanged(&self, new: &Value) -> bool {
        match self.old {
            Some(old) => old == new,
            None => self.parent_unchanged,
        }
    }

    fn descend(&self, new: &Value, old_child: Option<&'a Value>) -> Ratchet<'a> {
        if self.old.is_none() {
            return Ratchet {
                old: None,
                parent_unchanged: self.parent_unchanged,
            };
        }
        Ratchet {
            old: old_child,
            parent_unchanged: self.unchanged(new),
        }
    }
}

/// The errors of one validation and the ratcheted errors, as warnings.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Errors to reject the object with.
    pub errors: Vec<FieldError>,
    /// Errors ratcheted away because the value did not change.
    pub warnings: Vec<String>,
}

/// Validates `new` (with `old` on update) against the compiled rules.
pub fn run(root: &Validator, new: &Value, old: Option<&Value>) -> Outcome {
    let mut run = Run {
        budget: RUNTIME_COST_BUDGET,
        outcome: Outcome::default(),
    };
    let ratchet = Ratchet {
        old,
        parent_unchanged: false,
    };
    run.node(root, &Path::default(), new, old, ratchet);
    run.outcome
}

struct Run {
    budget: i64,
    outcome: Outcome,
}

impl Run {
    /// Validates one node and the nodes below it; false once validation must stop.
    fn node(
        &mut self,
        v: &Validator,
        path: &Path,
        new: &Value,
        old: Option<&Value>,
        ratchet: Ratchet<'_>,
    ) -> bool {
        if new.is_null() {
            return true;
        }
        let old = old.filter(|o| !o.is_null());
        if !self.expressions(v, path, new, old, ratchet) {
            return false;
        }
        match new {
            Value::Array(items) => {
                let Some(item_validator) = &v.items else {
                    return true;
                };
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item =
                        old_items.and_then(|olds| correlated_item(&v.schema, item, olds));
                    let ratchet_old =
                        old_items.and_then(|olds| ratchet_item(&v.schema, item, olds));
                    if !self.node(
                        item_validator,
                        &path.index(i),
                        item,
                        old_item,
                        ratchet.descend(new, ratchet_old),
                    ) {
                        return false;
                    }
                }
            }
            Value::Object(fields) => {
                let old_fields = old.and_then(Value::as_object);
                if let Some(value_validator) = &v.additional_properties {
                    for (k, value) in fields {
                        let old_value = old_fields.and_then(|o| o.get(k));
                        if !self.node(
                            value_validator,
                            &path.key(k),
                            value,
                            old_value,
                            ratchet.descend(new, old_value),
                        ) {
                            return false;
                        }
                    }
                }
                for (k, value) in fields {
                    let Some((_, sub)) = v.properties.iter().find(|(name, _)| name == k) else {
                        continue;
                    };
                    let old_value = old_fields.and_then(|o| o.get(k));
                    if !self.node(
                        sub,
                        &path.child(k),
                        value,
                        old_value,
                        ratchet.descend(new, old_value),
                    ) {
                        return false;
                    }
                }
            }
            _ => {}
        }
        true
    }

    /// Runs the node's own rules; false once validation must stop.
    fn expressions(
        &mut self,
        v: &Validator,
        path: &Path,
        new: &Value,
        old: Option<&Value>,
        ratchet: Ratchet<'_>,
    ) -> bool {
        if v.rules.is_empty() {
            return true;
        }
        let type_name = v.schema.ty.clone();
        if self.budget <= 0 {
            self.outcome
                .errors
                .push(FieldError::invalid(path.render(), type_name, OUT_OF_BUDGET));
            return false;
        }
        if v.decl.is_none() {
            return true;
        }
        let self_value = to_cel(new, &v.schema);
        let old_value = old.map(|o| to_cel(o, &v.schema));
        for rule in &v.rules {
            let optional = rule.rule.optional_old_self == Some(true);
            if rule.uses_old_self && old.is_none() && !optional {
                continue;
            }
            let result = match self.evaluate(
                &rule.program,
                &self_value,
                old_value.as_ref(),
                rule,
                optional,
            ) {
                Charged::Within(result) => result,
                Charged::OverLimit => {
                    self.outcome.errors.push(FieldError::invalid(
                        path.render(),
                        type_name,
                        format!(
                            "'{CALL_LIMIT_EXCEEDED}': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                            rule_error_string(rule)
                        ),
                    ));
                    return false;
                }
                Charged::OverBudget => {
                    self.outcome.errors.push(FieldError::invalid(
                        path.render(),
                        type_name,
                        OUT_OF_BUDGET,
                    ));
                    return false;
                }
            };
            match result {
                Ok(CelValue::Bool(true)) => continue,
                Ok(_) => {}
                Err(error) => {
                    let error = execution_error(&error);
                    let detail = if error.starts_with("no such overload") {
                        format!(
                            "'{error}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                            rule_error_string(rule)
                        )
                    } else {
                        format!("{error} evaluating rule: {}", rule_error_string(rule))
                    };
                    self.outcome.errors.push(FieldError::invalid(
                        path.render(),
                        type_name.clone(),
                        detail,
                    ));
                    continue;
                }
            }
            let error_path = match &rule.field_path {
                Some(relative) => path.child(relative),
                None => path.clone(),
            };
            let mut detail = None;
            if let Some(message_expression) = &rule.message_expression {
                let source = &rule.rule.message_expression;
                match self.evaluate(
                    message_expression,
                    &self_value,
                    old_value.as_ref(),
                    rule,
                    optional,
                ) {
                    Charged::OverLimit => {
                        self.push(rule, ratchet, new, FieldError::invalid(
                            error_path.render(),
                            type_name,
                            format!("no further validation rules will be run due to call cost exceeds limit for messageExpression: {source:?}"),
                        ));
                        return false;
                    }
                    Charged::OverBudget => {
                        self.push(rule, ratchet, new, FieldError::invalid(
                            error_path.render(),
                            type_name,
                            "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run",
                        ));
                        return false;
                    }
                    Charged::Within(Ok(CelValue::String(message))) => {
                        let trimmed = message.trim();
                        if !trimmed.is_empty()
                            && trimmed.len() <= MAX_MESSAGE_EXPRESSION_BYTES
                            && !trimmed.contains('\n')
                        {
                            detail = Some(trimmed.to_string());
                        }
                    }
                    Charged::Within(_) => {}
                }
            }
            let detail = detail.unwrap_or_else(|| rule_message_or_default(rule));
            let error = match rule.rule.reason.as_deref() {
                Some("FieldValueForbidden") => FieldError::forbidden(error_path.render(), detail),
                Some("FieldValueRequired") => FieldError::required(error_path.render(), detail),
                Some("FieldValueDuplicate") => {
                    FieldError::duplicate(error_path.render(), type_name.clone())
                }
                _ => FieldError::invalid(error_path.render(), type_name.clone(), detail),
            };
            self.push(rule, ratchet, new, error);
        }
        true
    }

    /// Records a failed rule, or a warning when the unchanged value ratchets it.
    fn push(&mut self, rule: &CompiledRule, ratchet: Ratchet<'_>, new: &Value, error: FieldError) {
        if !rule.uses_old_self && ratchet.unchanged(new) {
            self.outcome.warnings.push(error.to_string());
        } else {
            self.outcome.errors.push(error);
        }
    }
}

/// What a metered evaluation came to.
enum Charged {
    /// Within its limits: its value or its CEL error.
    Within(Result<CelValue, ExecutionError>),
    /// Stopped at the per-call limit.
    OverLimit,
    /// It cost more than what was left of the object's budget.
    OverBudget,
}

impl Run {
    /// Evaluates one expression with `self` (and `oldSelf`) bound, stopped
    /// at [`PER_CALL_LIMIT`], and charges what it cost to the object's
    /// budget (kube checks the budget first, then the call's own limit).
    fn evaluate(
        &mut self,
        plan: &Plan,
        self_value: &CelValue,
        old_value: Option<&CelValue>,
        rule: &CompiledRule,
        optional: bool,
    ) -> Charged {
        let mut ctx = library().new_inner_scope();
        ctx.add_variable_from_value("self", self_value.clone());
        if rule.uses_old_self {
            let old = match (old_value, optional) {
                (Some(old), false) => old.clone(),
                (Some(old), true) => CelValue::Opaque(Arc::new(OptionalValue::of(old.clone()))),
                (None, _) => CelValue::Opaque(Arc::new(OptionalValue::none())),
            };
            ctx.add_variable_from_value("oldSelf", old);
        }
        let mut meter = Meter::new(PER_CALL_LIMIT);
        let result = plan.evaluate(&ctx, &mut meter);
        let spent = i64::try_from(meter.spent()).unwrap_or(i64::MAX);
        if spent > self.budget {
            return Charged::OverBudget;
        }
        self.budget -= spent;
        match result {
            Ok(value) => Charged::Within(Ok(value)),
            Err(Failure::Error(e)) => Charged::Within(Err(e)),
            Err(Failure::OverLimit) => Charged::OverLimit,
        }
    }
}

/// An evaluation error in cel-go's words.
pub(crate) fn execution_error(error: &ExecutionError) -> String {
    match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::NoSuchOverload
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::UnsupportedUnaryOperator(..)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::UnsupportedTargetType { .. }
        | ExecutionError::NotSupportedAsMethod { .. } => "no such overload".to_string(),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::IndexOutOfBounds(index) => match index {
            CelValue::Int(i) => format!("index out of bounds: {i}"),
            other => format!("index out of bounds: {other:?}"),
        },
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

fn rule_error_string(rule: &CompiledRule) -> String {
    let message = rule.rule.message.trim();
    if message.is_empty() {
        rule.rule.rule.trim().to_string()
    } else {
        message.to_string()
    }
}

fn rule_message_or_default(rule: &CompiledRule) -> String {
    let message = rule.rule.message.trim();
    if message.is_empty() {
        format!("failed rule: {}", rule_error_string(rule))
    } else {
        message.to_string()
    }
}

/// The values of the map-list key fields of an item.
fn map_keys<'a>(schema: &Schema, item: &'a Value) -> Option<Vec<Option<&'a Value>>> {
    let fields = item.as_object()?;
    Some(schema.list_map_keys.iter().map(|k| fields.get(k)).collect())
}

/// The old item `oldSelf` is bound to: same keys in a map list, none otherwise.
fn correlated_item<'a>(schema: &Schema, item: &Value, olds: &'a [Value]) -> Option<&'a Value> {
    if !schema.is_map_list() {
        return None;
    }
    let keys = map_keys(schema, item)?;
    olds.iter()
        .find(|o| map_keys(schema, o).as_ref() == Some(&keys))
}

/// The old item ratcheting compares with: as for `oldSelf`, plus equal items of a set.
fn ratchet_item<'a>(schema: &Schema, item: &Value, olds: &'a [Value]) -> Option<&'a Value> {
    if schema.list_type.as_deref() == Some("set") {
        return olds.iter().find(|o| *o == item);
    }
    correlated_item(schema, item, olds)
}
