//! Evaluating an expression with its cost metered as it runs, and stopped
//! the moment it goes past its limit, as cel-go's cost tracker stops kube's.
//!
//! The `cel` crate evaluates but neither counts nor stops, and its macros
//! `map` and `filter` copy their whole result at every step (a `map` over
//! 40,000 items took 73 s). So a [`Plan`] walks the expression here: control
//! flow (`&&`, `||`, `?:`, `@not_strictly_false`, comprehensions,
//! `cel.bind`) is evaluated by this module, and each single step (a call, a
//! field selection, a list or map literal) is handed to the crate as a
//! one-node template whose operands are the values already computed here,
//! after its cost has been charged. `map` and `filter` append to a list they
//! own.
//!
//! Costs are cel-go's and kube's (`interpreter/runtimecost.go`,
//! `apiserver/pkg/cel/library/cost.go`): a variable or field 1, a literal 0,
//! a list literal 10, a map literal 30, a call 1 unless its function's cost
//! grows with its operands' sizes (strings at 0.1 per byte). Where this
//! crate's implementation does more work than cel-go's (`size()` of a
//! string counts characters, `distinct` compares every pair, equality
//! compares nested values), the cost is that work's. A call is charged
//! before it runs, with the size of what it would build (`join`, `replace`,
//! `lists.range`), so no call ever allocates past the limit.

use std::sync::Arc;

use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, ListExpr, MapEntryExpr,
    MapExpr, SelectExpr, operators,
};
use kube_cel::cel::{Context, ExecutionError, Value as CelValue};

/// Cost of reading a variable or selecting a field (cel-go's `SelectAndIdentCost`).
const IDENT_COST: u64 = 1;
/// Cost of a list literal (cel-go's `ListCreateBaseCost`).
const LIST_COST: u64 = 10;
/// Cost of a map literal (cel-go's `MapCreateBaseCost`).
const MAP_COST: u64 = 30;
/// Cost of traversing one byte of a string (cel-go's `StringTraversalCostFactor`).
const TRAVERSAL: f64 = 0.1;
/// Cost of one byte of a regular expression (cel-go's `RegexStringLengthCostFactor`).
const REGEX_FACTOR: f64 = 0.25;
/// Cost of an authorization check (kube's authorizer library).
const AUTHORIZER_CHECK_COST: u64 = 350_000;
/// Namespaces of functions called as `namespace.function(...)`: the
/// target is a name, not a value.
const NAMESPACES: [&str; 10] = [
    "base64",
    "cel",
    "format",
    "ip",
    "jsonpatch",
    "lists",
    "math",
    "optional",
    "sets",
    "strings",
];

/// Why an evaluation did not produce a value.
#[derive(Debug)]
pub enum Failure {
    /// A CEL error (no such key, no such overload, …): a value of the
    /// language, which `||` and `&&` may absorb.
    Error(ExecutionError),
    /// The evaluation went past its cost limit and was stopped.
    OverLimit,
}

impl From<ExecutionError> for Failure {
    fn from(error: ExecutionError) -> Failure {
        Failure::Error(error)
    }
}

/// The cost spent so far by one evaluation, and its limit.
#[derive(Debug)]
pub struct Meter {
    spent: u64,
    limit: u64,
}

impl Meter {
    /// A meter that stops an evaluation past `limit`.
    pub fn new(limit: u64) -> Meter {
        Meter { spent: 0, limit }
    }

    /// What the evaluation has cost so far.
    pub fn spent(&self) -> u64 {
        self.spent
    }

    fn charge(&mut self, cost: u64) -> Result<(), Failure> {
        self.spent = self.spent.saturating_add(cost);
        if self.spent > self.limit {
            Err(Failure::OverLimit)
        } else {
            Ok(())
        }
    }
}

/// A parsed expression, prepared for metered evaluation.
#[derive(Debug)]
pub struct Plan {
    root: Node,
}

impl Plan {
    /// Prepares `expr` (as the `cel` parser gives it).
    pub fn new(expr: &IdedExpr) -> Plan {
        Plan { root: plan(expr) }
    }

    /// Evaluates the expression in `ctx`, charging `meter`; a panic in the
    /// interpreter (it has `todo!()`s for shapes the checker lets through)
    /// is an error, never a crash.
    pub fn evaluate(&self, ctx: &Context<'_>, meter: &mut Meter) -> Result<CelValue, Failure> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            eval(&self.root, ctx, meter)
        }))
        .unwrap_or_else(|_| {
            Err(Failure::Error(ExecutionError::function_error(
                "eval",
                "internal error evaluating the expression",
            )))
        })
    }
}

/// One node of a plan.
#[derive(Debug)]
enum Node {
    /// Literals, variables and field selections only: handed over whole.
    Leaf { expr: IdedExpr, cost: u64 },
    /// `operand.field` or `has(operand.field)` on a computed operand.
    Select { operand: Box<Node>, step: Step },
    /// `lhs && rhs` (`and`) or `lhs || rhs`.
    Logic {
        and: bool,
        lhs: Box<Node>,
        rhs: Box<Node>,
    },
    /// `condition ? then : otherwise`.
    Conditional(Box<Node>, Box<Node>, Box<Node>),
    /// `@not_strictly_false(arg)`: true unless `arg` is false.
    NotStrictlyFalse(Box<Node>),
    /// Any other call: its operands, then the call itself.
    Call {
        name: String,
        operands: Vec<Node>,
        /// Whether the first operand is the target of a method call.
        method: bool,
        step: Step,
    },
    /// A list literal.
    List { elements: Vec<Node>, step: Step },
    /// A map literal: keys and values, alternating.
    Map { parts: Vec<Node>, step: Step },
    /// `cel.bind(name, init, body)`.
    Bind {
        name: String,
        init: Box<Node>,
        body: Box<Node>,
    },
    /// A comprehension (the `all`, `exists`, `exists_one`, `map` and
    /// `filter` macros).
    Fold(Box<Fold>),
}

/// A single step handed to the interpreter: a node whose operands are
/// variables bound to values computed here.
#[derive(Debug)]
struct Step {
    template: IdedExpr,
    names: Vec<String>,
}

impl Step {
    /// Binds `values` to the template's operand names and evaluates it.
    fn run(&self, ctx: &Context<'_>, values: Vec<CelValue>) -> Result<CelValue, Failure> {
        let mut scope = ctx.new_inner_scope();
        for (name, value) in self.names.iter().zip(values) {
            scope.add_variable_from_value(name.clone(), value);
        }
        Ok(CelValue::resolve(&self.template, &scope)?)
    }
}

/// A comprehension.
#[derive(Debug)]
struct Fold {
    range: Node,
    iter_var: String,
    accu_var: String,
    init: Node,
    condition: Node,
    step: Node,
    result: Node,
    /// For `map` and `filter`: the item each step appends, and the filter
    /// that guards it; the result is then built in place.
    append: Option<(Node, Option<Node>)>,
}

/// The operand name of position `i`.
fn operand(i: usize) -> String {
    format!("@{i}")
}

fn ident(id: u64, name: String) -> IdedExpr {
    IdedExpr {
        id,
        expr: Expr::Ident(name),
    }
}

fn plan(expr: &IdedExpr) -> Node {
    if let Some(cost) = leaf_cost(expr) {
        return Node::Leaf {
            expr: expr.clone(),
            cost,
        };
    }
    let id = expr.id;
    match &expr.expr {
        Expr::Select(select) => Node::Select {
            operand: Box::new(plan(&select.operand)),
            step: Step {
                template: IdedExpr {
                    id,
                    expr: Expr::Select(SelectExpr {
                        operand: Box::new(ident(id, operand(0))),
                        field: select.field.clone(),
                        test: select.test,
                    }),
                },
                names: vec![operand(0)],
            },
        },
        Expr::Call(call) => plan_call(id, call),
        Expr::List(list) => Node::List {
            elements: list.elements.iter().map(plan).collect(),
            step: Step {
                template: IdedExpr {
                    id,
                    expr: Expr::List(ListExpr {
                        elements: (0..list.elements.len())
                            .map(|i| ident(id, operand(i)))
                            .collect(),
                        optional_indices: list.optional_indices.clone(),
                    }),
                },
                names: (0..list.elements.len()).map(operand).collect(),
            },
        },
        Expr::Map(map) => plan_map(id, map).unwrap_or_else(|| Node::Leaf {
            expr: expr.clone(),
            cost: MAP_COST,
        }),
        Expr::Comprehension(fold) => Node::Fold(Box::new(plan_fold(fold))),
        // Struct literals and unset nodes: the interpreter fails on them as it does.
        _ => Node::Leaf {
            expr: expr.clone(),
            cost: 1,
        },
    }
}

/// The cost of an expression made only of literals, variables and field
/// selections (which is then evaluated whole), or `None`.
fn leaf_cost(expr: &IdedExpr) -> Option<u64> {
    match &expr.expr {
        Expr::Literal(_) => Some(0),
        Expr::Ident(_) => Some(IDENT_COST),
        Expr::Select(select) => leaf_cost(&select.operand).map(|c| c + IDENT_COST),
        _ => None,
    }
}

fn plan_call(id: u64, call: &CallExpr) -> Node {
    let name = call.func_name.as_str();
    let args = &call.args;
    match (name, args.as_slice(), &call.target) {
        (operators::LOGICAL_AND | operators::LOGICAL_OR, [lhs, rhs], None) => {
            return Node::Logic {
                and: name == operators::LOGICAL_AND,
                lhs: Box::new(plan(lhs)),
                rhs: Box::new(plan(rhs)),
            };
        }
        (operators::CONDITIONAL, [c, t, f], None) => {
            return Node::Conditional(Box::new(plan(c)), Box::new(plan(t)), Box::new(plan(f)));
        }
        (operators::NOT_STRICTLY_FALSE, [arg], None) => {
            return Node::NotStrictlyFalse(Box::new(plan(arg)));
        }
        ("bind", [variable, init, body], Some(target)) if matches!(&target.expr, Expr::Ident(n) if n == "cel") => {
            if let Expr::Ident(variable) = &variable.expr {
                return Node::Bind {
                    name: variable.clone(),
                    init: Box::new(plan(init)),
                    body: Box::new(plan(body)),
                };
            }
        }
        _ => {}
    }
    // `strings.quote(x)`: the namespace stays in the template.
    let namespace = call
        .target
        .as_ref()
        .filter(|t| matches!(&t.expr, Expr::Ident(n) if NAMESPACES.contains(&n.as_str())));
    let method = call.target.is_some() && namespace.is_none();
    let mut operands = Vec::new();
    if method && let Some(target) = &call.target {
        operands.push(plan(target));
    }
    operands.extend(args.iter().map(plan));
    let names: Vec<String> = (0..operands.len()).map(operand).collect();
    let mut bound = names.iter().map(|n| ident(id, n.clone()));
    let target = if method {
        bound.next().map(Box::new)
    } else {
        namespace.cloned()
    };
    let qualified = match namespace.map(|t| &t.expr) {
        Some(Expr::Ident(ns)) => format!("{ns}.{name}"),
        _ => name.to_string(),
    };
    Node::Call {
        name: qualified,
        operands,
        method,
        step: Step {
            template: IdedExpr {
                id,
                expr: Expr::Call(CallExpr {
                    func_name: call.func_name.clone(),
                    target,
                    args: bound.collect(),
                }),
            },
            names,
        },
    }
}

fn plan_map(id: u64, map: &MapExpr) -> Option<Node> {
    let mut parts = Vec::new();
    let mut entries = Vec::new();
    for (i, entry) in map.entries.iter().enumerate() {
        let EntryExpr::MapEntry(entry) = &entry.expr else {
            return None;
        };
        parts.push(plan(&entry.key));
        parts.push(plan(&entry.value));
        entries.push(IdedEntryExpr {
            id,
            expr: EntryExpr::MapEntry(MapEntryExpr {
                key: ident(id, operand(2 * i)),
                value: ident(id, operand(2 * i + 1)),
                optional: entry.optional,
            }),
        });
    }
    let names = (0..parts.len()).map(operand).collect();
    Some(Node::Map {
        parts,
        step: Step {
            template: IdedExpr {
                id,
                expr: Expr::Map(MapExpr { entries }),
            },
            names,
        },
    })
}

fn plan_fold(fold: &ComprehensionExpr) -> Fold {
    Fold {
        range: plan(&fold.iter_range),
        iter_var: fold.iter_var.clone(),
        accu_var: fold.accu_var.clone(),
        init: plan(&fold.accu_init),
        condition: plan(&fold.loop_cond),
        step: plan(&fold.loop_step),
        result: plan(&fold.result),
        append: appended(fold),
    }
}

/// `item` when `step` is `accu + [item]`.
fn appended_item<'a>(step: &'a IdedExpr, accu_var: &str) -> Option<&'a IdedExpr> {
    let Expr::Call(call) = &step.expr else {
        return None;
    };
    if call.func_name != operators::ADD || call.target.is_some() {
        return None;
    }
    match call.args.as_slice() {
        [
            IdedExpr {
                expr: Expr::Ident(accu),
                ..
            },
            IdedExpr {
                expr: Expr::List(item),
                ..
            },
        ] if accu == accu_var && item.elements.len() == 1 && item.optional_indices.is_empty() => {
            item.elements.first()
        }
        _ => None,
    }
}

/// The item (and filter) of a `map` or `filter` step: `accu + [item]`, or
/// `filter ? accu + [item] : accu`, on an accumulator that starts as `[]`.
fn appended(fold: &ComprehensionExpr) -> Option<(Node, Option<Node>)> {
    let starts_empty = matches!(&fold.accu_init.expr, Expr::List(l) if l.elements.is_empty());
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == fold.accu_var);
    let append = |e| appended_item(e, &fold.accu_var);
    if !starts_empty || !matches!(&fold.result.expr, Expr::Ident(n) if *n == fold.accu_var) {
        return None;
    }
    if let Some(item) = append(&fold.loop_step) {
        return Some((plan(item), None));
    }
    match &fold.loop_step.expr {
        Expr::Call(c) if c.func_name == operators::CONDITIONAL => match c.args.as_slice() {
            [filter, then, otherwise] if is_accu(otherwise) => {
                append(then).map(|item| (plan(item), Some(plan(filter))))
            }
            _ => None,
        },
        _ => None,
    }
}

fn eval(node: &Node, ctx: &Context<'_>, meter: &mut Meter) -> Result<CelValue, Failure> {
    match node {
        Node::Leaf { expr, cost } => {
            meter.charge(*cost)?;
            Ok(CelValue::resolve(expr, ctx)?)
        }
        Node::Select { operand, step } => {
            let value = eval(operand, ctx, meter)?;
            meter.charge(IDENT_COST)?;
            step.run(ctx, vec![value])
        }
        Node::Logic { and, lhs, rhs } => {
            // cel-go's commutative logic: an error on one side gives way to
            // the side that decides; running over the limit never does.
            let decides = !*and;
            let left = boolean(eval(lhs, ctx, meter))?;
            if left.as_ref().is_ok_and(|b| *b == decides) {
                return Ok(CelValue::Bool(decides));
            }
            let right = boolean(eval(rhs, ctx, meter))?;
            match (left, right) {
                (_, Ok(b)) if b == decides => Ok(CelValue::Bool(decides)),
                (Ok(_), Ok(b)) => Ok(CelValue::Bool(b)),
                (Err(e), _) | (_, Err(e)) => Err(Failure::Error(e)),
            }
        }
        Node::Conditional(condition, then, otherwise) => {
            match boolean(eval(condition, ctx, meter))? {
                Ok(true) => eval(then, ctx, meter),
                Ok(false) => eval(otherwise, ctx, meter),
                Err(e) => Err(Failure::Error(e)),
            }
        }
        Node::NotStrictlyFalse(arg) => {
            meter.charge(1)?;
            Ok(CelValue::Bool(
                boolean(eval(arg, ctx, meter))?.unwrap_or(true),
            ))
        }
        Node::Call {
            name,
            operands,
            method,
            step,
        } => {
            let mut values = Vec::with_capacity(operands.len());
            for operand in operands {
                values.push(eval(operand, ctx, meter)?);
            }
            let (target, args) = match (*method, values.split_first()) {
                (true, Some((target, args))) => (Some(target), args),
                _ => (None, values.as_slice()),
            };
            meter.charge(call_cost(name, target, args))?;
            step.run(ctx, values)
        }
        Node::List { elements, step } => {
            let mut values = Vec::with_capacity(elements.len());
            for element in elements {
                values.push(eval(element, ctx, meter)?);
            }
            meter.charge(LIST_COST)?;
            step.run(ctx, values)
        }
        Node::Map { parts, step } => {
            let mut values = Vec::with_capacity(parts.len());
            for part in parts {
                values.push(eval(part, ctx, meter)?);
            }
            meter.charge(MAP_COST)?;
            step.run(ctx, values)
        }
        Node::Bind { name, init, body } => {
            let value = eval(init, ctx, meter)?;
            let mut scope = ctx.new_inner_scope();
            scope.add_variable_from_value(name.clone(), value);
            eval(body, &scope, meter)
        }
        Node::Fold(fold) => eval_fold(fold, ctx, meter),
    }
}

/// A value as a boolean: `Ok(Err(_))` is a CEL error (absorbable), `Err`
/// a stop.
fn boolean(value: Result<CelValue, Failure>) -> Result<Result<bool, ExecutionError>, Failure> {
    match value {
        Ok(CelValue::Bool(b)) => Ok(Ok(b)),
        Ok(_) => Ok(Err(ExecutionError::NoSuchOverload)),
        Err(Failure::Error(e)) => Ok(Err(e)),
        Err(Failure::OverLimit) => Err(Failure::OverLimit),
    }
}

fn eval_fold(fold: &Fold, ctx: &Context<'_>, meter: &mut Meter) -> Result<CelValue, Failure> {
    let range = eval(&fold.range, ctx, meter)?;
    let items: Vec<CelValue> = match &range {
        CelValue::List(items) => items.iter().cloned().collect(),
        CelValue::Map(map) => map.map.keys().map(CelValue::from).collect(),
        _ => return Err(Failure::Error(ExecutionError::NoSuchOverload)),
    };
    let mut scope = ctx.new_inner_scope();
    if let Some((item, filter)) = &fold.append {
        // `map` and `filter`: what each step would cost as written
        // (`accu + [item]`: the accumulator, a list literal, the sum), the
        // result built in place.
        meter.charge(LIST_COST)?;
        let mut result = Vec::new();
        for value in items {
            scope.add_variable_from_value(fold.iter_var.clone(), value);
            if let Some(filter) = filter {
                match boolean(eval(filter, &scope, meter))? {
                    Ok(true) => {}
                    Ok(false) => {
                        meter.charge(IDENT_COST)?;
                        continue;
                    }
                    Err(e) => return Err(Failure::Error(e)),
                }
            }
            let value = eval(item, &scope, meter)?;
            meter.charge(IDENT_COST + LIST_COST + 1)?;
            result.push(value);
        }
        return Ok(CelValue::List(Arc::new(result)));
    }
    let accu = eval(&fold.init, ctx, meter)?;
    scope.add_variable_from_value(fold.accu_var.clone(), accu);
    for value in items {
        match boolean(eval(&fold.condition, &scope, meter))? {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(Failure::Error(e)),
        }
        scope.add_variable_from_value(fold.iter_var.clone(), value);
        let accu = eval(&fold.step, &scope, meter)?;
        scope.add_variable_from_value(fold.accu_var.clone(), accu);
    }
    eval(&fold.result, &scope, meter)
}

/// The size cel-go's cost functions see: bytes of a string, items of a
/// list or map, 1 for anything else.
fn size(value: &CelValue) -> u64 {
    match value {
        CelValue::String(s) => s.len() as u64,
        CelValue::Bytes(b) => b.len() as u64,
        CelValue::List(l) => l.len() as u64,
        CelValue::Map(m) => m.map.len() as u64,
        _ => 1,
    }
}

/// Everything in a value: the bytes of its strings and one per other
/// scalar, list and map, at every level; what comparing it walks.
fn deep_size(value: &CelValue) -> u64 {
    match value {
        CelValue::List(l) => l.iter().map(deep_size).fold(1, u64::saturating_add),
        CelValue::Map(m) => m
            .map
            .values()
            .map(|v| deep_size(v).saturating_add(1))
            .fold(1, u64::saturating_add),
        other => size(other).max(1),
    }
}

/// `size` times a cost factor, rounded up.
fn scaled(size: u64, factor: f64) -> u64 {
    (size as f64 * factor).ceil() as u64
}

/// The cost of calling `name` on these values, charged before the call.
fn call_cost(name: &str, target: Option<&CelValue>, args: &[CelValue]) -> u64 {
    // kube's functions take the target as their first argument.
    let mut all: Vec<&CelValue> = target.into_iter().collect();
    all.extend(args);
    let first = all.first().copied();
    let second = all.get(1).copied();
    let traverse = |v: Option<&CelValue>| v.map_or(0, |v| scaled(size(v), TRAVERSAL));
    let is_text =
        |v: Option<&CelValue>| matches!(v, Some(CelValue::String(_) | CelValue::Bytes(_)));
    let cost = match name {
        operators::EQUALS | operators::NOT_EQUALS => {
            let smaller = first.map_or(1, deep_size).min(second.map_or(1, deep_size));
            scaled(smaller, TRAVERSAL)
        }
        operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS
            if is_text(first) =>
        {
            scaled(first.map_or(0, size).min(second.map_or(0, size)), TRAVERSAL)
        }
        operators::ADD
            if first.is_some_and(|v| {
                matches!(
                    v,
                    CelValue::String(_) | CelValue::Bytes(_) | CelValue::List(_)
                )
            }) =>
        {
            scaled(first.map_or(0, size) + second.map_or(0, size), TRAVERSAL)
        }
        operators::IN => match second {
            Some(list @ CelValue::List(_)) => deep_size(list),
            _ => 1,
        },
        "size" | "charAt" | "reverse" | "lowerAscii" | "upperAscii" | "substring" | "trim"
        | "url" | "isURL" | "quantity" | "isQuantity" | "semver" | "isSemver" | "cidr" | "isIP"
        | "isIPv4" | "isIPv6" | "isCIDR" | "isCIDRv4" | "isCIDRv6" | "ip" | "validate"
        | "string" | "bytes" | "startsWith" | "endsWith"
            if is_text(first) =>
        {
            traverse(first)
        }
        "contains" if is_text(first) => traverse(first).max(1) * traverse(second).max(1),
        "contains" => first.map_or(1, deep_size),
        "matches" | "find" | "findAll" => {
            let text = scaled(1 + first.map_or(0, size), TRAVERSAL);
            text * scaled(second.map_or(0, size), REGEX_FACTOR).max(1)
        }
        "indexOf" | "lastIndexOf" if is_text(first) => traverse(first) + traverse(second),
        "indexOf" | "lastIndexOf" | "isSorted" | "sum" | "max" | "min" | "flatten" | "slice"
        | "first" | "last" => first.map_or(1, deep_size),
        "sort" => {
            let n = first.map_or(1, size).max(1);
            n.saturating_mul(64 - n.leading_zeros() as u64) + first.map_or(1, deep_size)
        }
        "distinct" => first
            .map_or(1, size)
            .saturating_mul(first.map_or(1, deep_size)),
        "sets.contains" | "sets.equivalent" | "sets.intersects" => {
            let (a, b) = (first.map_or(1, deep_size), second.map_or(1, deep_size));
            a.saturating_mul(b).max(1)
        }
        "split" => scaled(first.map_or(0, size), 2.0 * TRAVERSAL),
        "replace" => {
            let built = replaced_size(first, second, all.get(2).copied());
            scaled(first.map_or(0, size), 2.0 * TRAVERSAL).max(scaled(built, TRAVERSAL))
        }
        "join" => scaled(joined_size(first, second), 2.0 * TRAVERSAL),
        "format" => {
            let rendered = second.map_or(0, deep_size) + first.map_or(0, size);
            scaled(rendered, 2.0 * TRAVERSAL)
        }
        "strings.quote" | "base64.encode" | "base64.decode" | "jsonpatch.escapeKey" => {
            scaled(first.map_or(0, size), 2.0 * TRAVERSAL)
        }
        "lists.range" => match first {
            Some(CelValue::Int(n)) => (*n).max(0) as u64,
            _ => 1,
        },
        "check" => AUTHORIZER_CHECK_COST,
        _ => 1,
    };
    cost.max(1)
}

/// The length of `s.replace(old, new)`, known before it is built.
fn replaced_size(s: Option<&CelValue>, old: Option<&CelValue>, new: Option<&CelValue>) -> u64 {
    let (Some(CelValue::String(s)), Some(CelValue::String(old)), Some(CelValue::String(new))) =
        (s, old, new)
    else {
        return s.map_or(0, size);
    };
    let count = if old.is_empty() {
        s.chars().count() as u64 + 1
    } else {
        s.matches(old.as_str()).count() as u64
    };
    let (old, new) = (old.len() as u64, new.len() as u64);
    (s.len() as u64 + count.saturating_mul(new)).saturating_sub(count.saturating_mul(old))
}

/// The length of `list.join(separator)`, known before it is built.
fn joined_size(list: Option<&CelValue>, separator: Option<&CelValue>) -> u64 {
    let Some(CelValue::List(items)) = list else {
        return 1;
    };
    let parts: u64 = items.iter().map(size).fold(0, u64::saturating_add);
    let separators = (items.len() as u64).saturating_sub(1);
    parts.saturating_add(separators.saturating_mul(separator.map_or(0, size)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::library::library;

    fn run(
        source: &str,
        limit: u64,
        bind: &[(&str, CelValue)],
    ) -> (Result<CelValue, Failure>, u64) {
        let parsed = crate::cel::compile::parse(source).expect("parses");
        let plan = Plan::new(&parsed);
        let mut ctx = library().new_inner_scope();
        for (name, value) in bind {
            ctx.add_variable_from_value(*name, value.clone());
        }
        let mut meter = Meter::new(limit);
        let result = plan.evaluate(&ctx, &mut meter);
        (result, meter.spent())
    }

    fn value(source: &str) -> CelValue {
        match run(source, u64::MAX, &[]).0 {
            Ok(v) => v,
            Err(e) => panic!("{source}: {e:?}"),
        }
    }

    fn ints(n: i64) -> CelValue {
        CelValue::List(Arc::new((0..n).map(CelValue::Int).collect()))
    }

    fn text(s: &str) -> CelValue {
        CelValue::String(Arc::new(s.to_string()))
    }

    #[test]
    fn results_are_the_interpreters() {
        for (source, expected) in [
            ("1 + 2 * 3 == 7", true),
            ("[1, 2, 3].map(x, x * 2) == [2, 4, 6]", true),
            ("[1, 2, 3, 4].filter(x, x % 2 == 0) == [2, 4]", true),
            ("[1, 2, 3].map(x, x > 1, x * 10) == [20, 30]", true),
            ("[1, 2, 3].all(x, x > 0) && [1, 2].exists(x, x == 2)", true),
            ("[1, 2, 3].exists_one(x, x == 2)", true),
            ("{'a': 1, 'b': 2}.all(k, k.size() == 1)", true),
            ("{'a': [1, 2]}.a.map(x, [x]).size() == 2", true),
            ("has({'a': 1}.a) && !has({'a': 1}.b)", true),
            (
                "'abc'.startsWith('a') && 'a,b'.split(',').join('-') == 'a-b'",
                true,
            ),
            (
                "strings.quote('x') == '\"x\"' && 'aXa'.replace('a', 'bb') == 'bbXbb'",
                true,
            ),
            (
                "cel.bind(x, [1, 2], x.map(y, x.size() + y)) == [3, 4]",
                true,
            ),
            (
                "[[1, 2], [3]].map(l, l.map(x, x + 1)) == [[2, 3], [4]]",
                true,
            ),
            (
                "lists.range(3) == [0, 1, 2] && [3, 1, 2].sort() == [1, 2, 3]",
                true,
            ),
            ("true ? 1 == 1 : 1 / 0 == 1", true),
        ] {
            assert_eq!(value(source), CelValue::Bool(expected), "{source}");
        }
    }

    #[test]
    fn errors_are_absorbed_by_logic_as_cel_go_does() {
        assert_eq!(value("{}.a == 1 || true"), CelValue::Bool(true));
        assert_eq!(value("true || {}.a == 1"), CelValue::Bool(true));
        assert_eq!(value("{}.a == 1 && false"), CelValue::Bool(false));
        assert!(matches!(
            run("{}.a == 1 || false", 100, &[]).0,
            Err(Failure::Error(_))
        ));
        assert!(matches!(
            run("1 / 0 == 1", 100, &[]).0,
            Err(Failure::Error(_))
        ));
        assert!(matches!(
            run("[1].all(x, {}.missing)", 100, &[]).0,
            Err(Failure::Error(_))
        ));
    }

    #[test]
    fn costs_are_cel_gos() {
        assert_eq!(run("1 == 1", 100, &[]).1, 1);
        let s = text(&"a".repeat(1000));
        assert_eq!(
            run("self.startsWith('a')", 1000, &[("self", s.clone())]).1,
            1 + 100
        );
        // A map over n items: the range, then per item the item and the
        // append (the accumulator, a list literal, the sum): 1 + 10 + 13n.
        let (mapped, cost) = run("self.map(x, x)", u64::MAX, &[("self", ints(100))]);
        assert_eq!(mapped.map(|v| size(&v)).ok(), Some(100));
        assert_eq!(cost, 1 + 10 + 13 * 100);
    }

    #[test]
    fn map_and_filter_are_linear() {
        // 40,000 items took the interpreter 73 s; here a few milliseconds.
        let (result, cost) = run(
            "self.map(x, x).filter(x, x % 2 == 0).size() == 20000",
            u64::MAX,
            &[("self", ints(40_000))],
        );
        assert_eq!(result.ok(), Some(CelValue::Bool(true)));
        assert!(cost < 2_000_000, "{cost}");
    }

    #[test]
    fn an_evaluation_stops_at_its_limit_before_building_what_it_cannot_afford() {
        let s = text(&"a".repeat(100_000));
        let t = text(&"b".repeat(100_000));
        let bind = [("s", s), ("t", t), ("l", ints(10_000))];
        // 10^10 bytes would be built: refused before the call, having spent little.
        let (result, spent) = run("s.replace('a', t).size() > 0", 1_000_000, &bind);
        assert!(matches!(result, Err(Failure::OverLimit)), "{result:?}");
        assert!(spent > 1_000_000 && spent < u64::MAX, "{spent}");
        let (result, _) = run("l.map(x, s).join('').size() > 0", 1_000_000, &bind);
        assert!(matches!(result, Err(Failure::OverLimit)), "{result:?}");
        let (result, _) = run("lists.range(1000000000).size() > 0", 1_000_000, &bind);
        assert!(matches!(result, Err(Failure::OverLimit)), "{result:?}");
        // Nested loops: stopped once the count passes the limit.
        let (result, spent) = run("l.all(x, l.all(y, x + y >= 0))", 1_000_000, &bind);
        assert!(matches!(result, Err(Failure::OverLimit)), "{result:?}");
        assert!(spent <= 1_000_000 + 10_000, "{spent}");
        // A limit is never absorbed by `||`.
        let (result, _) = run("l.all(x, l.all(y, true)) || true", 1_000, &bind);
        assert!(matches!(result, Err(Failure::OverLimit)), "{result:?}");
    }
}
#[cfg(test)]
mod speed {
    use super::*;
    #[test]
    #[ignore]
    fn cost_units_per_second() {
        let l = CelValue::List(Arc::new((0..2000).map(CelValue::Int).collect()));
        for source in [
            "l.all(x, l.all(y, x + y >= 0))",
            "l.map(x, l.filter(y, y > x).size()).size() > 0",
            "l.exists(x, string(x).startsWith('a'))",
        ] {
            let parsed = crate::cel::compile::parse(source).expect("parses");
            let plan = Plan::new(&parsed);
            let mut ctx = crate::cel::library::library().new_inner_scope();
            ctx.add_variable_from_value("l", l.clone());
            let mut meter = Meter::new(1_000_000);
            let started = std::time::Instant::now();
            let result = plan.evaluate(&ctx, &mut meter);
            eprintln!(
                "{source}: {:?} spent {} in {:?} ({:.0} ns per unit)",
                result.is_ok(),
                meter.spent(),
                started.elapsed(),
                started.elapsed().as_nanos() as f64 / meter.spent() as f64
            );
        }
    }
}
