//! Type checking and cost estimation of one CEL expression, in one pass over
//! the parsed AST, against the declaration type of the schema node the rule
//! sits on.
//!
//! The `cel` crate parses and evaluates but does not type-check, so this
//! module does what cel-go's checker does for kube: undeclared variables and
//! functions, undefined fields of schema objects, operators applied to clearly
//! wrong types, and the result type (a rule must be a `bool`, a
//! `messageExpression` a `string`). Where it cannot tell, it stays lenient
//! ([`Ty::Unknown`]): a rule kube accepts must never be rejected here.
//!
//! The cost half follows cel-go's `checker/cost.go`: every node has a
//! `[min, max]` cost, comprehensions multiply their body by the size of their
//! range, and sizes come from a [`SizeSource`] keyed by the field path of an
//! expression (`self.spec.items.@items.name`). The same walk serves the static
//! estimate at CRD creation (sizes from the schema) and the pre-flight bound
//! before each evaluation (sizes from the data).

use std::sync::Arc;

use kube_cel::cel::common::ast::{
    ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators,
};

use super::schema::{DeclKind, DeclType, MAX_REQUEST_SIZE_BYTES};

/// Cost of traversing one byte of a string (cel-go's `StringTraversalCostFactor`).
const STRING_TRAVERSAL_FACTOR: f64 = 0.1;
/// Cost of one byte of a regular expression (cel-go's `RegexStringLengthCostFactor`).
const REGEX_LENGTH_FACTOR: f64 = 0.25;
/// Base cost of a list literal.
const CREATE_LIST_COST: u64 = 10;
/// Base cost of a map literal.
const CREATE_MAP_COST: u64 = 30;

/// The static type of an expression.
#[derive(Debug, Clone)]
pub enum Ty {
    /// The checker cannot tell: accepted everywhere.
    Unknown,
    /// CEL `dyn` (`x-kubernetes-int-or-string`): accepted by operators,
    /// but not as a rule's result.
    Dyn,
    /// `null_type`.
    Null,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `google.protobuf.Duration`.
    Duration,
    /// `google.protobuf.Timestamp`.
    Timestamp,
    /// `list(T)`.
    List(Box<Ty>),
    /// `map(K, V)`.
    Map(Box<Ty>, Box<Ty>),
    /// An object declared by the schema.
    Object(Arc<DeclType>),
    /// `optional_type(T)`.
    Optional(Box<Ty>),
    /// A type value (`int`, `string`, ...).
    Type,
    /// An extension type (`Quantity`, `URL`, ...).
    Opaque(&'static str),
}

impl Ty {
    /// The CEL type of a schema declaration.
    pub fn from_decl(decl: &Arc<DeclType>) -> Ty {
        match &decl.kind {
            DeclKind::Bool => Ty::Bool,
            DeclKind::Int => Ty::Int,
            DeclKind::Double => Ty::Double,
            DeclKind::String => Ty::String,
            DeclKind::Bytes => Ty::Bytes,
            DeclKind::Duration => Ty::Duration,
            DeclKind::Timestamp => Ty::Timestamp,
            DeclKind::Dyn => Ty::Dyn,
            DeclKind::List(item) => Ty::List(Box::new(Ty::from_decl(item))),
            DeclKind::Map(value) => Ty::Map(Box::new(Ty::String), Box::new(Ty::from_decl(value))),
            DeclKind::Object(_) => Ty::Object(decl.clone()),
        }
    }

    /// The name cel-go prints for the type.
    pub fn name(&self) -> String {
        match self {
            Ty::Unknown | Ty::Dyn => "dyn".into(),
            Ty::Null => "null_type".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::String => "string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Duration => "google.protobuf.Duration".into(),
            Ty::Timestamp => "google.protobuf.Timestamp".into(),
            Ty::List(t) => format!("list({})", t.name()),
            Ty::Map(k, v) => format!("map({}, {})", k.name(), v.name()),
            Ty::Object(_) => "object".into(),
            Ty::Optional(t) => format!("optional_type({})", t.name()),
            Ty::Type => "type".into(),
            Ty::Opaque(name) => (*name).into(),
        }
    }

    fn lenient(&self) -> bool {
        matches!(self, Ty::Unknown | Ty::Dyn)
    }

    fn is_numeric(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    fn is_scalar(&self) -> bool {
        matches!(
            self,
            Ty::Bool
                | Ty::Int
                | Ty::Uint
                | Ty::Double
                | Ty::Duration
                | Ty::Timestamp
                | Ty::Null
                | Ty::Type
                | Ty::Opaque(_)
        )
    }

    fn same_kind(&self, other: &Ty) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }

    /// Whether values of the two types may be compared with `==`.
    fn comparable_with(&self, other: &Ty) -> bool {
        self.lenient()
            || other.lenient()
            || matches!(self, Ty::Null)
            || matches!(other, Ty::Null)
            || (self.is_numeric() && other.is_numeric())
            || self.same_kind(other)
    }

    /// The least specific type of two branches.
    fn join(&self, other: &Ty) -> Ty {
        match (self, other) {
            (Ty::Unknown, t) | (t, Ty::Unknown) => t.clone(),
            (Ty::List(a), Ty::List(b)) => Ty::List(Box::new(a.join(b))),
            (Ty::Map(ka, va), Ty::Map(kb, vb)) => {
                Ty::Map(Box::new(ka.join(kb)), Box::new(va.join(vb)))
            }
            (a, b) if a.same_kind(b) => a.clone(),
            _ => Ty::Dyn,
        }
    }
}

/// A `[min, max]` estimate of a cost or a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// Lower bound.
    pub min: u64,
    /// Upper bound.
    pub max: u64,
}

impl Estimate {
    /// A size or cost about which nothing is known.
    pub const UNKNOWN: Estimate = Estimate {
        min: 0,
        max: u64::MAX,
    };

    /// An exact estimate.
    pub const fn fixed(n: u64) -> Estimate {
        Estimate { min: n, max: n }
    }

    fn add(self, other: Estimate) -> Estimate {
        Estimate {
            min: self.min.saturating_add(other.min),
            max: self.max.saturating_add(other.max),
        }
    }

    fn mul(self, other: Estimate) -> Estimate {
        Estimate {
            min: self.min.saturating_mul(other.min),
            max: self.max.saturating_mul(other.max),
        }
    }

    fn factor(self, factor: f64) -> Estimate {
        let scale = |x: u64| {
            let v = (x as f64 * factor).ceil();
            if v >= u64::MAX as f64 {
                u64::MAX
            } else {
                v as u64
            }
        };
        Estimate {
            min: scale(self.min),
            max: scale(self.max),
        }
    }

    fn union(self, other: Estimate) -> Estimate {
        Estimate {
            min: self.min.min(other.min),
            max: self.max.max(other.max),
        }
    }
}

/// One step of the field path of an expression, as cel-go's estimator names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// A root variable (`self`, `oldSelf`).
    Var(String),
    /// An object field (escaped name).
    Field(String),
    /// The items of a list (`@items`).
    Items,
    /// The values of a map (`@values`).
    Values,
    /// The keys of a map (`@keys`).
    Keys,
}

/// Where the sizes of lists, maps and strings reached by a field path come from.
pub trait SizeSource {
    /// The size range of the values at `path`, if known.
    fn size(&self, path: &[Seg]) -> Option<Estimate>;

    /// The size range of a value whose size nothing else tells.
    fn unknown(&self) -> Estimate {
        Estimate::UNKNOWN
    }
}

/// No sizes known: every size is taken as the largest possible.
pub struct NoSizes;

impl SizeSource for NoSizes {
    fn size(&self, _path: &[Seg]) -> Option<Estimate> {
        None
    }
}

/// Sizes bounded by the schema (`maxItems`, `maxLength`, `maxProperties`, or
/// the request size).
pub struct SchemaSizes<'a> {
    /// The declaration of `self` and `oldSelf`.
    pub root: &'a Arc<DeclType>,
}

impl SizeSource for SchemaSizes<'_> {
    fn size(&self, path: &[Seg]) -> Option<Estimate> {
        let mut current = self.root;
        for seg in path.iter().skip(1) {
            current = match (seg, &current.kind) {
                (Seg::Field(name), DeclKind::Object(_)) => current.field(name)?,
                (Seg::Items, DeclKind::List(item)) | (Seg::Values, DeclKind::Map(item)) => item,
                (Seg::Keys, DeclKind::Map(_)) => {
                    return Some(Estimate {
                        min: 0,
                        max: MAX_REQUEST_SIZE_BYTES,
                    });
                }
                _ => return None,
            };
        }
        // As kube's estimator: objects and scalars have no elements.
        Some(Estimate {
            min: 0,
            max: current.max_elements,
        })
    }
}

/// What the checker learns about one expression.
#[derive(Debug, Clone)]
struct Info {
    ty: Ty,
    path: Option<Vec<Seg>>,
    size: Option<Estimate>,
    /// Sizes of the keys and values of a list or map literal.
    entry: Option<(Option<Estimate>, Option<Estimate>)>,
    cost: Estimate,
}

impl Info {
    fn new(ty: Ty, cost: Estimate) -> Info {
        Info {
            ty,
            path: None,
            size: None,
            entry: None,
            cost,
        }
    }
}

#[derive(Debug, Clone)]
struct Local {
    name: String,
    info: Info,
}

/// The outcome of checking one expression.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The result type.
    pub ty: Ty,
    /// The estimated cost of one evaluation.
    pub cost: Estimate,
    /// Whether the expression reads `oldSelf`.
    pub uses_old_self: bool,
    /// The root variables the expression reads.
    pub roots: Vec<String>,
    /// Type errors, each formatted as cel-go formats an issue.
    pub errors: Vec<String>,
}

/// Type-checks and estimates `expr` (parsed from `source`) for a node whose
/// `self` has type `self_type`. With `optional_old_self`, `oldSelf` is an
/// `optional_type`.
pub fn check(
    expr: &IdedExpr,
    source: &str,
    self_type: &Arc<DeclType>,
    optional_old_self: bool,
    sizes: &dyn SizeSource,
) -> Checked {
    let self_ty = Ty::from_decl(self_type);
    let old_ty = match optional_old_self {
        true => Ty::Optional(Box::new(self_ty.clone())),
        false => self_ty.clone(),
    };
    check_roots(
        expr,
        source,
        &[("self", self_ty), ("oldSelf", old_ty)],
        sizes,
    )
}

/// Type-checks and estimates `expr` with the root variables `roots`
/// (name and type) in scope; a root named `authorizer` brings kube's
/// authorizer library (`group`, `resource`, `check`, `allowed`, ...).
pub fn check_roots(
    expr: &IdedExpr,
    source: &str,
    roots: &[(&str, Ty)],
    sizes: &dyn SizeSource,
) -> Checked {
    let mut checker = Checker {
        source,
        roots,
        sizes,
        locals: Vec::new(),
        errors: Vec::new(),
        uses_old_self: false,
        roots_read: Vec::new(),
    };
    let info = checker.expr(expr);
    Checked {
        ty: info.ty,
        cost: info.cost,
        uses_old_self: checker.uses_old_self,
        roots: checker.roots_read,
        errors: checker.errors,
    }
}

/// Whether `name` is a function callable with a namespace prefix (`sets.contains`).
fn is_qualified_function(name: &str) -> bool {
    matches!(
        name,
        "optional.of"
            | "optional.none"
            | "optional.ofNonZeroValue"
            | "sets.contains"
            | "sets.equivalent"
            | "sets.intersects"
            | "strings.quote"
            | "lists.range"
            | "base64.encode"
            | "base64.decode"
            | "jsonpatch.escapeKey"
            | "ip.isCanonical"
    ) || name.starts_with("math.")
        || name.starts_with("format.")
}

/// What the source position of an error is found by.
enum Hint<'a> {
    Ident(&'a str),
    Field(&'a str),
    Call(&'a str),
    Op(&'a str),
}

struct Checker<'a> {
    source: &'a str,
    roots: &'a [(&'a str, Ty)],
    sizes: &'a dyn SizeSource,
    locals: Vec<Local>,
    errors: Vec<String>,
    uses_old_self: bool,
    roots_read: Vec<String>,
}

impl Checker<'_> {
    /// Whether kube's authorizer library is in scope.
    fn has_authorizer(&self) -> bool {
        self.roots.iter().any(|(name, _)| *name == "authorizer")
    }

    fn error(&mut self, hint: Hint<'_>, message: String) {
        let offset = locate(self.source, &hint);
        self.errors
            .push(format_issue(self.source, offset, &message));
    }

    fn local(&self, name: &str) -> Option<&Local> {
        self.locals.iter().rev().find(|l| l.name == name)
    }

    /// The size of a value: computed, from its path, or 1 for scalars.
    fn size_of(&self, info: &Info) -> Option<Estimate> {
        if let Some(size) = info.size {
            return Some(size);
        }
        if let Some(size) = info.path.as_deref().and_then(|p| self.sizes.size(p)) {
            return Some(size);
        }
        info.ty.is_scalar().then_some(Estimate::fixed(1))
    }

    fn size_or_unknown(&self, info: &Info) -> Estimate {
        self.size_of(info).unwrap_or_else(|| self.sizes.unknown())
    }

    /// The size of the items of a list (or the values of a map).
    fn item_size(&self, container: &Info) -> Estimate {
        if let Some(size) = container.entry.and_then(|e| e.1) {
            return size;
        }
        let by_path = container.path.as_ref().and_then(|path| {
            let mut path = path.clone();
            path.push(Seg::Items);
            self.sizes.size(&path)
        });
        by_path.unwrap_or_else(|| self.sizes.unknown())
    }

    fn expr(&mut self, e: &IdedExpr) -> Info {
        match &e.expr {
            Expr::Literal(lit) => literal(lit),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                let operand = self.expr(&select.operand);
                if select.test {
                    let mut info = Info::new(Ty::Bool, operand.cost.add(Estimate::fixed(1)));
                    info.size = Some(Estimate::fixed(1));
                    self.field_type(&operand, &select.field);
                    return info;
                }
                let (ty, seg) = self.field_type(&operand, &select.field);
                let mut cost = operand.cost;
                if matches!(operand.ty, Ty::Object(_) | Ty::Map(..)) {
                    cost = cost.add(Estimate::fixed(1));
                }
                let mut info = Info::new(ty, cost);
                info.path = operand.path.map(|mut p| {
                    p.push(seg);
                    p
                });
                info
            }
            Expr::Call(call) if call.func_name == operators::OPT_SELECT && call.args.len() == 2 => {
                // `a.?field`: the field's type, optional.
                let operand = self.expr(&call.args[0]);
                let field = match &call.args[1].expr {
                    Expr::Literal(LiteralValue::String(s)) => s.inner().to_string(),
                    _ => String::new(),
                };
                let inner = match &operand.ty {
                    Ty::Optional(inner) => Info::new((**inner).clone(), operand.cost),
                    _ => operand.clone(),
                };
                let (ty, seg) = self.field_type(&inner, &field);
                let mut info = Info::new(
                    Ty::Optional(Box::new(ty)),
                    operand.cost.add(Estimate::fixed(1)),
                );
                info.path = operand.path.map(|mut p| {
                    p.push(seg);
                    p
                });
                info
            }
            Expr::Call(call)
                if call.func_name == "bind"
                    && matches!(call.target.as_deref(), Some(IdedExpr { expr: Expr::Ident(ns), .. }) if ns == "cel")
                    && self.local("cel").is_none() =>
            {
                self.bind(&call.args)
            }
            Expr::Call(call) => {
                let target = call.target.as_deref();
                // `optional.none()`, `sets.contains(a, b)`: a namespace, not a receiver.
                if let Some(IdedExpr {
                    expr: Expr::Ident(prefix),
                    ..
                }) = target
                {
                    let qualified = format!("{prefix}.{}", call.func_name);
                    if self.local(prefix).is_none() && is_qualified_function(&qualified) {
                        let args: Vec<Info> = call.args.iter().map(|a| self.expr(a)).collect();
                        return self.call(&qualified, None, args);
                    }
                }
                let target = target.map(|t| self.expr(t));
                let args: Vec<Info> = call.args.iter().map(|a| self.expr(a)).collect();
                self.call(&call.func_name, target, args)
            }
            Expr::List(list) => {
                let mut cost = Estimate::fixed(CREATE_LIST_COST);
                let mut elem = Ty::Unknown;
                let mut item_size: Option<Estimate> = if list.elements.is_empty() {
                    Some(Estimate::fixed(0))
                } else {
                    None
                };
                for (i, element) in list.elements.iter().enumerate() {
                    let info = self.expr(element);
                    cost = cost.add(info.cost);
                    elem = elem.join(&info.ty);
                    let size = self.size_or_unknown(&info);
                    item_size = Some(if i == 0 {
                        size
                    } else {
                        item_size.map_or(size, |s| s.union(size))
                    });
                }
                let mut info = Info::new(Ty::List(Box::new(elem)), cost);
                info.size = Some(Estimate::fixed(list.elements.len() as u64));
                info.entry = Some((Some(Estimate::fixed(1)), item_size));
                info
            }
            Expr::Map(map) => {
                let mut cost = Estimate::fixed(CREATE_MAP_COST);
                let (mut key_ty, mut value_ty) = (Ty::Unknown, Ty::Unknown);
                let (mut key_size, mut value_size): (Option<Estimate>, Option<Estimate>) =
                    (None, None);
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        let k = self.expr(&entry.key);
                        let v = self.expr(&entry.value);
                        cost = cost.add(k.cost).add(v.cost);
                        key_ty = key_ty.join(&k.ty);
                        value_ty = value_ty.join(&v.ty);
                        let (ks, vs) = (self.size_or_unknown(&k), self.size_or_unknown(&v));
                        key_size = Some(key_size.map_or(ks, |s| s.union(ks)));
                        value_size = Some(value_size.map_or(vs, |s| s.union(vs)));
                    }
                }
                let mut info = Info::new(Ty::Map(Box::new(key_ty), Box::new(value_ty)), cost);
                info.size = Some(Estimate::fixed(map.entries.len() as u64));
                info.entry = Some((key_size, value_size));
                info
            }
            Expr::Struct(s) => {
                self.error(
                    Hint::Ident(&s.type_name),
                    format!(
                        "undeclared reference to '{}' (in container '')",
                        s.type_name
                    ),
                );
                Info::new(Ty::Unknown, Estimate::fixed(40))
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Unspecified => Info::new(Ty::Unknown, Estimate::fixed(0)),
        }
    }

    /// `cel.bind(name, init, body)`: `body` sees `name` bound to `init`.
    fn bind(&mut self, args: &[IdedExpr]) -> Info {
        let [name, init, body] = args else {
            self.error(
                Hint::Call("bind"),
                "cel.bind() takes a variable name, a value and an expression".into(),
            );
            return Info::new(Ty::Unknown, Estimate::fixed(1));
        };
        let Expr::Ident(name) = &name.expr else {
            self.error(
                Hint::Call("bind"),
                "cel.bind() variable name must be a simple identifier".into(),
            );
            return Info::new(Ty::Unknown, Estimate::fixed(1));
        };
        let init = self.expr(init);
        self.locals.push(Local {
            name: name.clone(),
            info: init.clone(),
        });
        let mut body = self.expr(body);
        self.locals.pop();
        body.cost = body.cost.add(init.cost);
        body
    }

    fn ident(&mut self, name: &str) -> Info {
        if let Some(local) = self.local(name) {
            let mut info = local.info.clone();
            info.cost = Estimate::fixed(1);
            return info;
        }
        let cost = Estimate::fixed(1);
        if let Some((_, ty)) = self.roots.iter().find(|(root, _)| *root == name) {
            self.uses_old_self |= name == "oldSelf";
            if !self.roots_read.iter().any(|r| r == name) {
                self.roots_read.push(name.to_string());
            }
            let mut info = Info::new(ty.clone(), cost);
            info.path = Some(vec![Seg::Var(name.into())]);
            return info;
        }
        match name {
            "int" | "uint" | "double" | "bool" | "string" | "bytes" | "list" | "map"
            | "null_type" | "type" => Info::new(Ty::Type, cost),
            _ => {
                self.error(
                    Hint::Ident(name),
                    format!("undeclared reference to '{name}' (in container '')"),
                );
                Info::new(Ty::Unknown, cost)
            }
        }
    }

    /// The type of `operand.field`, reporting undefined fields.
    fn field_type(&mut self, operand: &Info, field: &str) -> (Ty, Seg) {
        match &operand.ty {
            Ty::Object(decl) => match decl.field(field) {
                Some(f) => (Ty::from_decl(f), Seg::Field(field.into())),
                None => {
                    self.error(Hint::Field(field), format!("undefined field '{field}'"));
                    (Ty::Unknown, Seg::Field(field.into()))
                }
            },
            Ty::Map(_, v) => ((**v).clone(), Seg::Values),
            Ty::Unknown | Ty::Dyn => (operand.ty.clone(), Seg::Field(field.into())),
            Ty::Optional(_) => (Ty::Unknown, Seg::Field(field.into())),
            other => {
                let name = other.name();
                self.error(
                    Hint::Field(field),
                    format!("type '{name}' does not support field selection"),
                );
                (Ty::Unknown, Seg::Field(field.into()))
            }
        }
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Info {
        let range = self.expr(&c.iter_range);
        let init = self.expr(&c.accu_init);
        let (key, value) = match &range.ty {
            Ty::List(item) => {
                let item_info = self.entry_info(&range, (**item).clone(), Seg::Items, 1);
                (Info::new(Ty::Int, Estimate::fixed(1)), item_info)
            }
            Ty::Map(k, v) => {
                let key_info = self.entry_info(&range, (**k).clone(), Seg::Keys, 0);
                let value_info = self.entry_info(&range, (**v).clone(), Seg::Values, 1);
                (key_info, value_info)
            }
            Ty::Unknown | Ty::Dyn => (
                Info::new(range.ty.clone(), Estimate::fixed(1)),
                Info::new(range.ty.clone(), Estimate::fixed(1)),
            ),
            other => {
                let name = other.name();
                self.error(
                    Hint::Ident(&c.iter_var),
                    format!(
                        "expression of type '{name}' cannot be range of a comprehension (must be list, map, or dynamic)"
                    ),
                );
                (
                    Info::new(Ty::Unknown, Estimate::fixed(1)),
                    Info::new(Ty::Unknown, Estimate::fixed(1)),
                )
            }
        };
        let is_list = matches!(range.ty, Ty::List(_));
        let depth = self.locals.len();
        let mut accu = init.clone();
        accu.path = None;
        self.locals.push(Local {
            name: c.accu_var.clone(),
            info: accu,
        });
        match &c.iter_var2 {
            Some(second) => {
                self.locals.push(Local {
                    name: c.iter_var.clone(),
                    info: key,
                });
                self.locals.push(Local {
                    name: second.clone(),
                    info: value,
                });
            }
            None => {
                let single = if is_list { value } else { key };
                self.locals.push(Local {
                    name: c.iter_var.clone(),
                    info: single,
                });
            }
        }
        let loop_cost = self.expr(&c.loop_cond).cost;
        let step = self.expr(&c.loop_step);
        // The accumulator takes the type the step builds (e.g. map(): a list of the mapped type).
        self.locals.truncate(depth);
        let mut accu = init.clone();
        accu.path = None;
        accu.ty = init.ty.join(&step.ty);
        let range_count = self.size_or_unknown(&range);
        if matches!(c.accu_init.expr, Expr::List(_) | Expr::Map(_)) {
            accu.size = Some(range_count);
            accu.entry = step.entry;
        }
        self.locals.push(Local {
            name: c.accu_var.clone(),
            info: accu,
        });
        let result = self.expr(&c.result);
        self.locals.truncate(depth);

        let cost = range
            .cost
            .add(init.cost)
            .add(range_count.mul(step.cost.add(loop_cost)))
            .add(result.cost);
        let mut info = Info::new(result.ty, cost);
        if matches!(c.accu_init.expr, Expr::List(_) | Expr::Map(_)) {
            info.size = Some(range_count);
            info.entry = step.entry;
        } else if matches!(c.accu_init.expr, Expr::Literal(_)) {
            info.size = result.size;
        }
        info
    }

    /// The info of an iteration variable over `range`.
    fn entry_info(&self, range: &Info, ty: Ty, seg: Seg, entry_index: usize) -> Info {
        let mut info = Info::new(ty, Estimate::fixed(1));
        info.path = range.path.clone().map(|mut p| {
            p.push(seg);
            p
        });
        if let Some(entry) = range.entry {
            info.size = if entry_index == 0 { entry.0 } else { entry.1 };
        }
        info
    }

    fn no_overload(
        &mut self,
        hint: Hint<'_>,
        function: &str,
        target: Option<&Info>,
        args: &[Info],
    ) {
        let list = args
            .iter()
            .map(|a| a.ty.name())
            .collect::<Vec<_>>()
            .join(", ");
        let applied = match target {
            Some(t) => format!("{}.({list})", t.ty.name()),
            None => format!("({list})"),
        };
        self.error(
            hint,
            format!("found no matching overload for '{function}' applied to '{applied}'"),
        );
    }

    fn call(&mut self, name: &str, target: Option<Info>, args: Vec<Info>) -> Info {
        let arg_cost = args.iter().fold(
            target.as_ref().map_or(Estimate::fixed(0), |t| t.cost),
            |acc, a| acc.add(a.cost),
        );
        let op_hint = |name: &str| -> &'static str {
            match name {
                operators::ADD => "+",
                operators::SUBSTRACT | operators::NEGATE => "-",
                operators::MULTIPLY => "*",
                operators::DIVIDE => "/",
                operators::MODULO => "%",
                operators::EQUALS => "==",
                operators::NOT_EQUALS => "!=",
                operators::LESS => "<",
                operators::LESS_EQUALS => "<=",
                operators::GREATER => ">",
                operators::GREATER_EQUALS => ">=",
                operators::LOGICAL_AND => "&&",
                operators::LOGICAL_OR => "||",
                operators::LOGICAL_NOT => "!",
                operators::CONDITIONAL => "?",
                operators::INDEX | operators::OPT_INDEX => "[",
                operators::IN => "in",
                _ => ".",
            }
        };
        match (name, args.as_slice()) {
            (operators::LOGICAL_AND | operators::LOGICAL_OR, [lhs, rhs]) => {
                for side in [lhs, rhs] {
                    if !side.ty.lenient() && !matches!(side.ty, Ty::Bool) {
                        self.no_overload(Hint::Op(op_hint(name)), name, None, &args);
                        break;
                    }
                }
                let cost = Estimate {
                    min: lhs.cost.min,
                    max: lhs.cost.max.saturating_add(rhs.cost.max),
                };
                Info::new(Ty::Bool, cost)
            }
            (operators::LOGICAL_NOT | operators::NOT_STRICTLY_FALSE, [arg]) => {
                if name == operators::LOGICAL_NOT
                    && !arg.ty.lenient()
                    && !matches!(arg.ty, Ty::Bool)
                {
                    self.no_overload(Hint::Op("!"), name, None, &args);
                }
                Info::new(Ty::Bool, arg_cost.add(Estimate::fixed(1)))
            }
            (operators::CONDITIONAL, [cond, t, f]) => {
                if !cond.ty.lenient() && !matches!(cond.ty, Ty::Bool) {
                    self.no_overload(Hint::Op("?"), name, None, &args);
                }
                let mut info = Info::new(t.ty.join(&f.ty), cond.cost.add(t.cost.union(f.cost)));
                info.size = Some(self.size_or_unknown(t).union(self.size_or_unknown(f)));
                info
            }
            (operators::EQUALS | operators::NOT_EQUALS, [lhs, rhs]) => {
                if !lhs.ty.comparable_with(&rhs.ty) {
                    self.no_overload(Hint::Op(op_hint(name)), name, None, &args);
                }
                Info::new(Ty::Bool, self.traversal_cost(lhs, rhs).add(arg_cost))
            }
            (
                operators::LESS
                | operators::LESS_EQUALS
                | operators::GREATER
                | operators::GREATER_EQUALS,
                [lhs, rhs],
            ) => {
                let orderable = |t: &Ty| {
                    t.lenient()
                        || matches!(
                            t,
                            Ty::Int
                                | Ty::Uint
                                | Ty::Double
                                | Ty::String
                                | Ty::Bytes
                                | Ty::Bool
                                | Ty::Duration
                                | Ty::Timestamp
                        )
                };
                let ok = orderable(&lhs.ty)
                    && orderable(&rhs.ty)
                    && (lhs.ty.lenient()
                        || rhs.ty.lenient()
                        || lhs.ty.same_kind(&rhs.ty)
                        || (lhs.ty.is_numeric() && rhs.ty.is_numeric()));
                if !ok {
                    self.no_overload(Hint::Op(op_hint(name)), name, None, &args);
                }
                let cost = if matches!(lhs.ty, Ty::String | Ty::Bytes) {
                    self.traversal_cost(lhs, rhs)
                } else {
                    Estimate::fixed(1)
                };
                Info::new(Ty::Bool, cost.add(arg_cost))
            }
            (operators::ADD, [lhs, rhs]) => self.add(lhs, rhs, arg_cost, &args),
            (
                operators::SUBSTRACT | operators::MULTIPLY | operators::DIVIDE | operators::MODULO,
                [lhs, rhs],
            ) => {
                let ty = match (&lhs.ty, &rhs.ty) {
                    (a, _) if a.lenient() => rhs.ty.clone(),
                    (_, b) if b.lenient() => lhs.ty.clone(),
                    (a, b) if a.is_numeric() && a.same_kind(b) => a.clone(),
                    (Ty::Timestamp, Ty::Timestamp) if name == operators::SUBSTRACT => Ty::Duration,
                    (Ty::Timestamp, Ty::Duration) if name == operators::SUBSTRACT => Ty::Timestamp,
                    (Ty::Duration, Ty::Duration) if name == operators::SUBSTRACT => Ty::Duration,
                    _ => {
                        self.no_overload(Hint::Op(op_hint(name)), name, None, &args);
                        Ty::Unknown
                    }
                };
                Info::new(ty, arg_cost.add(Estimate::fixed(1)))
            }
            (operators::NEGATE, [arg]) => {
                if !arg.ty.lenient() && !matches!(arg.ty, Ty::Int | Ty::Double | Ty::Duration) {
                    self.no_overload(Hint::Op("-"), name, None, &args);
                }
                Info::new(arg.ty.clone(), arg_cost.add(Estimate::fixed(1)))
            }
            (operators::INDEX | operators::OPT_INDEX, [container, index]) => {
                let optional = name == operators::OPT_INDEX;
                let (container_ty, via_optional) = match &container.ty {
                    Ty::Optional(inner) => ((**inner).clone(), true),
                    t => (t.clone(), false),
                };
                let (ty, seg, entry_size) = match &container_ty {
                    Ty::List(item) => {
                        if !index.ty.lenient() && !matches!(index.ty, Ty::Int | Ty::Uint) {
                            self.no_overload(Hint::Op("["), name, None, &args);
                        }
                        (
                            (**item).clone(),
                            Some(Seg::Items),
                            container.entry.and_then(|e| e.1),
                        )
                    }
                    Ty::Map(_, v) => (
                        (**v).clone(),
                        Some(Seg::Values),
                        container.entry.and_then(|e| e.1),
                    ),
                    t if t.lenient() || matches!(t, Ty::Object(_)) => (Ty::Unknown, None, None),
                    _ => {
                        self.no_overload(Hint::Op("["), name, None, &args);
                        (Ty::Unknown, None, None)
                    }
                };
                let ty = if optional || via_optional {
                    Ty::Optional(Box::new(ty))
                } else {
                    ty
                };
                let mut info = Info::new(ty, arg_cost.add(Estimate::fixed(1)));
                info.size = entry_size;
                info.path = match (&container.path, seg) {
                    (Some(p), Some(seg)) => {
                        let mut p = p.clone();
                        p.push(seg);
                        Some(p)
                    }
                    _ => None,
                };
                info
            }
            (operators::IN, [_, container]) => {
                let cost = match container.ty {
                    Ty::List(_) => self.size_or_unknown(container),
                    _ => Estimate::fixed(1),
                };
                if !container.ty.lenient() && !matches!(container.ty, Ty::List(_) | Ty::Map(..)) {
                    self.no_overload(Hint::Op("in"), name, None, &args);
                }
                Info::new(Ty::Bool, cost.add(arg_cost))
            }
            _ => self.function(name, target, args, arg_cost),
        }
    }

    /// cel-go's cost of comparing two strings, bytes, lists or maps.
    fn traversal_cost(&self, lhs: &Info, rhs: &Info) -> Estimate {
        let l = self.size_or_unknown(lhs);
        let r = self.size_or_unknown(rhs);
        let smallest_max = l.max.min(r.max);
        let min = if smallest_max > 0 { 1 } else { 0 };
        Estimate {
            min,
            max: smallest_max,
        }
        .factor(STRING_TRAVERSAL_FACTOR)
    }

    fn add(&mut self, lhs: &Info, rhs: &Info, arg_cost: Estimate, args: &[Info]) -> Info {
        let ty = match (&lhs.ty, &rhs.ty) {
            (a, _) if a.lenient() => rhs.ty.clone(),
            (_, b) if b.lenient() => lhs.ty.clone(),
            (Ty::List(a), Ty::List(b)) => Ty::List(Box::new(a.join(b))),
            (a, b)
                if a.same_kind(b)
                    && matches!(
                        a,
                        Ty::Int | Ty::Uint | Ty::Double | Ty::String | Ty::Bytes | Ty::Duration
                    ) =>
            {
                a.clone()
            }
            (Ty::Timestamp, Ty::Duration) | (Ty::Duration, Ty::Timestamp) => Ty::Timestamp,
            _ => {
                self.no_overload(Hint::Op("+"), operators::ADD, None, args);
                Ty::Unknown
            }
        };
        match ty {
            Ty::String | Ty::Bytes | Ty::List(_) => {
                let size = self.size_or_unknown(lhs).add(self.size_or_unknown(rhs));
                let cost = if matches!(ty, Ty::List(_)) {
                    Estimate::fixed(1)
                } else {
                    size.factor(STRING_TRAVERSAL_FACTOR)
                };
                let mut info = Info::new(ty, cost.add(arg_cost));
                info.size = Some(size);
                info.entry = match (lhs.entry, rhs.entry) {
                    (Some(a), Some(b)) => Some((union_opt(a.0, b.0), union_opt(a.1, b.1))),
                    (Some(a), None) if lhs.size == Some(Estimate::fixed(0)) => Some(a),
                    (None, Some(b)) if lhs.size == Some(Estimate::fixed(0)) => Some(b),
                    _ => None,
                };
                info
            }
            ty => Info::new(ty, arg_cost.add(Estimate::fixed(1))),
        }
    }

    /// Functions and methods: their result type and cost.
    fn function(
        &mut self,
        name: &str,
        target: Option<Info>,
        args: Vec<Info>,
        arg_cost: Estimate,
    ) -> Info {
        let t = target.as_ref();
        let tty = t.map(|t| &t.ty);
        let arg_tys: Vec<&Ty> = args.iter().map(|a| &a.ty).collect();
        let target_size = t.map_or(self.sizes.unknown(), |t| self.size_or_unknown(t));
        let arg_size = |i: usize| {
            args.get(i)
                .map_or(self.sizes.unknown(), |a| self.size_or_unknown(a))
        };
        let traverse_target = target_size.factor(STRING_TRAVERSAL_FACTOR);
        let one = Estimate::fixed(1);
        let is_string = |t: Option<&Ty>| t.is_some_and(|t| t.lenient() || matches!(t, Ty::String));
        let is_list = |t: Option<&Ty>| t.is_some_and(|t| t.lenient() || matches!(t, Ty::List(_)));
        let list_elem = || match tty {
            Some(Ty::List(item)) => (**item).clone(),
            _ => Ty::Unknown,
        };
        // (result type, call cost, result size); `None` type means no overload matched.
        let (ty, cost, size): (Option<Ty>, Estimate, Option<Estimate>) = match name {
            "size" => {
                let subject = tty.or(arg_tys.first().copied());
                let ok = subject.is_some_and(|s| {
                    s.lenient() || matches!(s, Ty::String | Ty::Bytes | Ty::List(_) | Ty::Map(..))
                });
                (ok.then_some(Ty::Int), one, None)
            }
            "contains" if is_string(tty) && args.len() == 1 => {
                let ok = is_string(arg_tys.first().copied());
                (
                    ok.then_some(Ty::Bool),
                    traverse_target.mul(arg_size(0).factor(STRING_TRAVERSAL_FACTOR)),
                    None,
                )
            }
            "startsWith" | "endsWith" => {
                let ok = is_string(tty) && args.len() == 1 && is_string(arg_tys.first().copied());
                (
                    ok.then_some(Ty::Bool),
                    arg_size(0).factor(STRING_TRAVERSAL_FACTOR),
                    None,
                )
            }
            "matches" => {
                let (subject, regex) = match (t, args.as_slice()) {
                    (Some(t), [r]) => (Some(t), Some(r)),
                    (None, [s, r]) => (Some(s), Some(r)),
                    _ => (None, None),
                };
                let ok = subject.is_some_and(|s| is_string(Some(&s.ty)))
                    && regex.is_some_and(|r| is_string(Some(&r.ty)));
                let str_cost = subject
                    .map_or(self.sizes.unknown(), |s| self.size_or_unknown(s))
                    .add(one)
                    .factor(STRING_TRAVERSAL_FACTOR);
                let regex_cost = regex
                    .map_or(self.sizes.unknown(), |r| self.size_or_unknown(r))
                    .factor(REGEX_LENGTH_FACTOR);
                (ok.then_some(Ty::Bool), str_cost.mul(regex_cost), None)
            }
            "find" if is_string(tty) => {
                let regex_cost = arg_size(0).factor(REGEX_LENGTH_FACTOR);
                (
                    Some(Ty::String),
                    target_size
                        .add(one)
                        .factor(STRING_TRAVERSAL_FACTOR)
                        .mul(regex_cost),
                    Some(target_size),
                )
            }
            "findAll" if is_string(tty) => {
                let regex_cost = arg_size(0).factor(REGEX_LENGTH_FACTOR);
                (
                    Some(Ty::List(Box::new(Ty::String))),
                    target_size
                        .add(one)
                        .factor(STRING_TRAVERSAL_FACTOR)
                        .mul(regex_cost),
                    Some(target_size),
                )
            }
            "lowerAscii" | "upperAscii" | "trim" | "substring" | "charAt" => {
                let ok = is_string(tty);
                (ok.then_some(Ty::String), traverse_target, Some(target_size))
            }
            "replace" => {
                // kube's traversal, or the building of the result where that
                // costs more: it can be the most replacements times the
                // replacement (kube charges the traversal only, and a rule
                // that builds gigabytes from two long strings passed).
                let ok = is_string(tty);
                let size = replaced_size(target_size, arg_size(0), arg_size(1));
                let traversal = target_size.factor(2.0 * STRING_TRAVERSAL_FACTOR);
                let building = size.factor(STRING_TRAVERSAL_FACTOR);
                (
                    ok.then_some(Ty::String),
                    Estimate {
                        min: traversal.min.max(building.min),
                        max: traversal.max.max(building.max),
                    },
                    Some(size),
                )
            }
            "reverse" if tty.is_some_and(|t| matches!(t, Ty::String)) => {
                (Some(Ty::String), traverse_target, Some(target_size))
            }
            "split" => (
                is_string(tty).then(|| Ty::List(Box::new(Ty::String))),
                target_size.factor(2.0 * STRING_TRAVERSAL_FACTOR),
                Some(Estimate {
                    min: 0,
                    max: target_size.max,
                }),
            ),
            "join" => {
                // The items' sizes times their count, plus the separators.
                let items = t.map_or(self.sizes.unknown(), |t| self.item_size(t));
                let separators = Estimate {
                    min: target_size.min.saturating_sub(1),
                    max: target_size.max.saturating_sub(1),
                };
                let mut size = target_size.mul(items);
                if !args.is_empty() {
                    size = size.add(arg_size(0).mul(separators));
                }
                (
                    is_list(tty).then_some(Ty::String),
                    size.factor(STRING_TRAVERSAL_FACTOR),
                    Some(size),
                )
            }
            "format" => (is_string(tty).then_some(Ty::String), traverse_target, None),
            "strings.quote" | "jsonpatch.escapeKey" | "base64.encode" => (
                Some(Ty::String),
                arg_size(0).factor(STRING_TRAVERSAL_FACTOR),
                None,
            ),
            "base64.decode" => (
                Some(Ty::Bytes),
                arg_size(0).factor(STRING_TRAVERSAL_FACTOR),
                None,
            ),
            "indexOf" | "lastIndexOf" => match tty {
                Some(Ty::List(_)) => (Some(Ty::Int), target_size, None),
                _ => (is_string(tty).then_some(Ty::Int), traverse_target, None),
            },
            "isSorted" => (is_list(tty).then_some(Ty::Bool), target_size, None),
            "sum" => (is_list(tty).then(list_elem), target_size, None),
            "min" | "max" if t.is_some() => (is_list(tty).then(list_elem), target_size, None),
            "min" | "max" => {
                let joined = arg_tys.iter().fold(Ty::Unknown, |acc, t| acc.join(t));
                let ty = match joined {
                    Ty::List(item) => *item,
                    other => other,
                };
                (Some(ty), Estimate::fixed(args.len() as u64), None)
            }
            "distinct" | "flatten" | "sort" | "slice" | "reverse" => (
                is_list(tty).then(|| tty.cloned().unwrap_or(Ty::Unknown)),
                target_size,
                Some(target_size),
            ),
            "first" | "last" => (
                is_list(tty).then(|| Ty::Optional(Box::new(list_elem()))),
                one,
                None,
            ),
            "lists.range" => (Some(Ty::List(Box::new(Ty::Int))), arg_size(0), None),
            "sets.contains" | "sets.equivalent" | "sets.intersects" => {
                (Some(Ty::Bool), arg_size(0).mul(arg_size(1)), None)
            }
            "int" => (Some(Ty::Int), one, None),
            "uint" => (Some(Ty::Uint), one, None),
            "double" => (Some(Ty::Double), one, None),
            "bool" => (Some(Ty::Bool), one, None),
            "string" => {
                // The longest text a scalar converts to; strings keep their size.
                let size = match arg_tys.first() {
                    Some(Ty::Bool) => Some(Estimate { min: 4, max: 5 }),
                    Some(Ty::Int | Ty::Uint) => Some(Estimate { min: 1, max: 20 }),
                    Some(Ty::Double) => Some(Estimate { min: 1, max: 32 }),
                    Some(Ty::Duration | Ty::Timestamp) => Some(Estimate { min: 2, max: 40 }),
                    Some(Ty::String) => Some(arg_size(0)),
                    Some(Ty::Bytes) => Some(arg_size(0)),
                    _ => None,
                };
                (
                    Some(Ty::String),
                    arg_size(0).factor(STRING_TRAVERSAL_FACTOR),
                    size,
                )
            }
            "bytes" => (
                Some(Ty::Bytes),
                arg_size(0).factor(STRING_TRAVERSAL_FACTOR),
                None,
            ),
            "dyn" => (
                Some(Ty::Dyn),
                one,
                args.first().and_then(|a| self.size_of(a)),
            ),
            "type" => (Some(Ty::Type), one, None),
            "duration" => (Some(Ty::Duration), one, None),
            "timestamp" => (Some(Ty::Timestamp), one, None),
            "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
            | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => {
                (Some(Ty::Int), one, None)
            }
            "optional.of" | "optional.ofNonZeroValue" => (
                Some(Ty::Optional(Box::new(
                    arg_tys.first().map_or(Ty::Unknown, |t| (*t).clone()),
                ))),
                one,
                None,
            ),
            "optional.none" => (Some(Ty::Optional(Box::new(Ty::Unknown))), one, None),
            "hasValue" => (Some(Ty::Bool), one, None),
            "value" => (Some(optional_inner(tty)), one, None),
            "orValue" => (
                Some(optional_inner(tty).join(arg_tys.first().copied().unwrap_or(&Ty::Unknown))),
                one,
                None,
            ),
            "or" => (Some(tty.cloned().unwrap_or(Ty::Unknown)), one, None),
            "url" => (
                Some(Ty::Opaque("URL")),
                arg_size(0).factor(STRING_TRAVERSAL_FACTOR),
                None,
            ),
            "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" => {
                (Some(Ty::String), one, None)
            }
            "getQuery" => (
                Some(Ty::Map(
                    Box::new(Ty::String),
                    Box::new(Ty::List(Box::new(Ty::String))),
                )),
                one,
                None,
            ),
            "quantity" => (
                Some(Ty::Opaque("Quantity")),
                arg_size(0).factor(STRING_TRAVERSAL_FACTOR),
                None,
            ),
            "semver" => (
                Some(Ty::Opaque("Semver")),
                arg_size(0).factor(STRING_TRAVERSAL_FACTOR),
                None,
            ),
            "ip" => (
                Some(Ty::Opaque("net.IP")),
                arg_size(0).factor(STRING_TRAVERSAL_FACTOR),
                None,
            ),
            "cidr" => (
                Some(Ty::Opaque("net.CIDR")),
                arg_size(0).factor(STRING_TRAVERSAL_FACTOR),
                None,
            ),
            "isURL" | "isQuantity" | "isSemver" | "isIP" | "isIPv4" | "isIPv6" | "isCIDR"
            | "isCIDRv4" | "isCIDRv6" => (
                Some(Ty::Bool),
                arg_size(0).factor(STRING_TRAVERSAL_FACTOR),
                None,
            ),
            "isGreaterThan"
            | "isLessThan"
            | "isInteger"
            | "ip.isCanonical"
            | "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast"
            | "containsIP"
            | "containsCIDR" => (Some(Ty::Bool), one, None),
            "sign" | "compareTo" | "asInteger" | "major" | "minor" | "patch" | "family"
            | "prefixLength" => (Some(Ty::Int), one, None),
            "asApproximateFloat" => (Some(Ty::Double), one, None),
            "add" | "sub" => (Some(tty.cloned().unwrap_or(Ty::Unknown)), one, None),
            "masked" => (Some(Ty::Opaque("net.CIDR")), one, None),
            "validate" => (Some(Ty::Unknown), target_size, None),
            n if n.starts_with("format.") || n.starts_with("math.") => {
                (Some(Ty::Unknown), one, None)
            }
            "group" | "resource" | "subresource" | "namespace" | "name" | "path"
            | "serviceAccount" | "check"
                if self.has_authorizer() =>
            {
                (Some(Ty::Opaque("kubernetes.authorization")), one, None)
            }
            "allowed" | "errored" if self.has_authorizer() => (Some(Ty::Bool), one, None),
            "reason" | "error" if self.has_authorizer() => (Some(Ty::String), one, None),
            _ => {
                self.error(
                    Hint::Call(name),
                    format!("undeclared reference to '{name}' (in container '')"),
                );
                return Info::new(Ty::Unknown, arg_cost.add(one));
            }
        };
        match ty {
            Some(ty) => {
                let mut info = Info::new(ty, cost.add(arg_cost));
                info.size = size;
                info
            }
            None => {
                self.no_overload(Hint::Call(name), name, t, &args);
                Info::new(Ty::Unknown, cost.add(arg_cost))
            }
        }
    }
}

/// kube's size of `s.replace(old, new)`: as many replacements as `old`
/// fits in `s`, each `new` long (and around every character when `old` may
/// be empty), or the original size when replacing cannot grow it.
fn replaced_size(s: Estimate, old: Estimate, new: Estimate) -> Estimate {
    let (count_max, retained_max) = if old.min == 0 {
        (s.max.saturating_add(1), s.max)
    } else if new.max <= old.min {
        (0, s.max)
    } else {
        (s.max.div_ceil(old.min), 0)
    };
    let (count_min, retained_min) = if old.max == 0 {
        (s.min.saturating_add(1), s.min)
    } else if old.max <= new.min {
        (0, s.min)
    } else {
        (s.min.div_ceil(old.max), 0)
    };
    Estimate {
        min: count_min
            .saturating_mul(new.min)
            .saturating_add(retained_min),
        max: count_max
            .saturating_mul(new.max)
            .saturating_add(retained_max),
    }
}

fn optional_inner(ty: Option<&Ty>) -> Ty {
    match ty {
        Some(Ty::Optional(inner)) => (**inner).clone(),
        _ => Ty::Unknown,
    }
}

fn union_opt(a: Option<Estimate>, b: Option<Estimate>) -> Option<Estimate> {
    Some(a?.union(b?))
}

fn literal(lit: &LiteralValue) -> Info {
    let zero = Estimate::fixed(0);
    let (ty, size) = match lit {
        LiteralValue::Boolean(_) => (Ty::Bool, None),
        LiteralValue::Int(_) => (Ty::Int, None),
        LiteralValue::UInt(_) => (Ty::Uint, None),
        LiteralValue::Double(_) => (Ty::Double, None),
        LiteralValue::Null => (Ty::Null, None),
        LiteralValue::String(s) => (
            Ty::String,
            Some(Estimate::fixed(s.inner().chars().count() as u64)),
        ),
        LiteralValue::Bytes(b) => (Ty::Bytes, Some(Estimate::fixed(b.inner().len() as u64))),
    };
    let mut info = Info::new(ty, zero);
    info.size = size;
    info
}

/// A token of CEL source: its text and byte offset.
struct Token<'a> {
    text: &'a str,
    offset: usize,
}

/// Splits CEL source into identifiers, numbers and punctuation, skipping
/// string literals: enough to find where an error is.
fn tokenize(source: &str) -> Vec<Token<'_>> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'"' || c == b'\'' {
            let triple = bytes
                .get(i..i + 3)
                .is_some_and(|t| t.iter().all(|&b| b == c));
            let quote_len = if triple { 3 } else { 1 };
            let mut j = i + quote_len;
            while j < bytes.len() {
                if bytes[j] == b'\\' {
                    j += 2;
                    continue;
                }
                if bytes[j] == c
                    && (!triple
                        || bytes
                            .get(j..j + 3)
                            .is_some_and(|t| t.iter().all(|&b| b == c)))
                {
                    j += quote_len;
                    break;
                }
                j += 1;
            }
            i = j.min(bytes.len());
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            tokens.push(Token {
                text: &source[start..i],
                offset: start,
            });
        } else {
            let two = source.get(i..i + 2).unwrap_or("");
            let len = if matches!(two, "==" | "!=" | "<=" | ">=" | "&&" | "||") {
                2
            } else {
                1
            };
            let len = if source.is_char_boundary(i + len) {
                len
            } else {
                1
            };
            let end = (i + len).min(source.len());
            if let Some(text) = source.get(i..end) {
                tokens.push(Token { text, offset: i });
            }
            i = end.max(i + 1);
            while i < source.len() && !source.is_char_boundary(i) {
                i += 1;
            }
        }
    }
    tokens
}

/// The byte offset an error is reported at, as close to cel-go's as a token
/// scan gets: the `.` of a selection, the `(` of a call, the operator, the
/// identifier.
fn locate(source: &str, hint: &Hint<'_>) -> usize {
    let tokens = tokenize(source);
    let found = match hint {
        Hint::Ident(name) => tokens
            .iter()
            .enumerate()
            .find(|(i, t)| t.text == *name && (*i == 0 || tokens[i - 1].text != "."))
            .map(|(_, t)| t.offset),
        Hint::Field(name) => tokens
            .windows(2)
            .find(|w| w[0].text == "." && w[1].text == *name)
            .map(|w| w[0].offset),
        Hint::Call(name) => {
            let short = name.rsplit('.').next().unwrap_or(name);
            tokens
                .windows(2)
                .find(|w| w[0].text == short && w[1].text == "(")
                .map(|w| w[1].offset)
        }
        Hint::Op(op) => tokens.iter().find(|t| t.text == *op).map(|t| t.offset),
    };
    found.unwrap_or(0)
}

/// Formats an issue as cel-go does: location, message, source line, caret.
pub fn format_issue(source: &str, offset: usize, message: &str) -> String {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or("");
    let line_no = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = source
        .get(line_start..offset)
        .map_or(0, |s| s.chars().count());
    let line = source[line_start..].lines().next().unwrap_or("");
    format!(
        "ERROR: <input>:{line_no}:{}: {message}\n | {line}\n | {}^",
        column + 1,
        ".".repeat(column)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::schema::{Schema, decl_type};
    use kube_cel::cel::parser::Parser;
    use serde_json::json;

    fn run(schema: serde_json::Value, rule: &str) -> Checked {
        let schema = Schema::parse(&schema);
        let decl = decl_type(&schema, false).expect("visible");
        let expr = Parser::new()
            .enable_optional_syntax(true)
            .parse(rule)
            .expect("parses");
        check(&expr, rule, &decl, false, &SchemaSizes { root: &decl })
    }

    fn object() -> serde_json::Value {
        json!({"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "name": {"type": "string", "maxLength": 10},
            "tags": {"type": "array", "maxItems": 5, "items": {"type": "string", "maxLength": 8}},
            "ios": {"x-kubernetes-int-or-string": true}
        }})
    }

    #[test]
    fn types_rules() {
        let c = run(object(), "self.replicas > 0 && self.name.startsWith('a')");
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert!(matches!(c.ty, Ty::Bool));
        let c = run(
            object(),
            "self.tags.all(t, t.size() < 5) && self.tags.map(t, t.size()).sum() < 10",
        );
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert!(!c.uses_old_self);
        assert!(run(object(), "self.replicas == oldSelf.replicas").uses_old_self);
        assert!(
            run(
                object(),
                "type(self.ios) == string ? self.ios.endsWith('%') : self.ios < 5"
            )
            .errors
            .is_empty()
        );
        assert!(
            run(object(), "cel.bind(n, self.name, n.size() < 5 && n != 'x')")
                .errors
                .is_empty()
        );
    }

    #[test]
    fn reports_errors_like_cel_go() {
        let c = run(object(), "self.foo == 1");
        assert_eq!(
            c.errors,
            vec![
                "ERROR: <input>:1:5: undefined field 'foo'\n | self.foo == 1\n | ....^".to_string()
            ]
        );
        let c = run(object(), "self.replicas + 'a' == 1");
        assert!(
            c.errors[0].contains("found no matching overload for '_+_' applied to '(int, string)'"),
            "{:?}",
            c.errors
        );
        let c = run(object(), "bar > 1");
        assert!(c.errors[0].contains("undeclared reference to 'bar' (in container '')"));
        let c = run(object(), "self.name.frobnicate()");
        assert!(c.errors[0].contains("undeclared reference to 'frobnicate'"));
        let c = run(object(), "self.replicas.startsWith('a')");
        assert!(
            c.errors[0]
                .contains("found no matching overload for 'startsWith' applied to 'int.(string)'"),
            "{:?}",
            c.errors
        );
    }

    #[test]
    fn estimates_costs_from_bounds() {
        let bounded = run(object(), "self.tags.all(x, self.tags.exists(y, x == y))");
        assert!(bounded.cost.max < 1000, "{:?}", bounded.cost);
        let unbounded = run(
            json!({"type": "array", "items": {"type": "string"}}),
            "self.all(x, self.exists(y, x == y))",
        );
        assert!(
            unbounded.cost.max > 1_000_000_000_000,
            "{:?}",
            unbounded.cost
        );
        let literal = run(object(), "['a', 'b'].exists(p, self.name.startsWith(p))");
        assert!(literal.cost.max < 100, "{:?}", literal.cost);
    }
}
