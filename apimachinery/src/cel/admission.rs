//! CEL in admission: the expressions of ValidatingAdmissionPolicies
//! (validations, messageExpression, variables, matchConditions,
//! auditAnnotations) and of webhooks' matchConditions, with kube's root
//! variables `object`, `oldObject`, `request`, `params`,
//! `namespaceObject`, `variables` and `authorizer`.
//!
//! ```ignore
//! let rule = Expression::compile("object.spec.replicas <= params.data.max")?;
//! let mut input = Activation::new(Some(&object), None, &request, Some(&params), None, None);
//! let mut budget = RUNTIME_COST_BUDGET;
//! let allowed = rule.evaluate(&input, &mut budget)? == CelValue::Bool(true);
//! ```
//!
//! Objects are read untyped (JSON as CEL: integers stay integers, strings
//! stay strings, timestamps are strings), where kube types built-ins by
//! their Go structs. As for CRD rules, an evaluation is metered as it runs
//! and stopped at [`PER_CALL_LIMIT`]; what it cost is charged against the
//! caller's budget.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::objects::{Key, Map, Opaque};
use kube_cel::cel::{Context, ExecutionError, FunctionContext};
use serde_json::Value;

use super::check::{NoSizes, Ty, check_roots};
use super::eval::{Failure, Meter, Plan};
use super::library::library;
use super::validate::{CALL_LIMIT_EXCEEDED, execution_error};
use crate::rbac::Attributes;

pub use super::validate::{PER_CALL_LIMIT, RUNTIME_COST_BUDGET};
/// A CEL value, as expressions produce them.
pub use kube_cel::cel::Value as CelValue;

/// The root variables of an admission expression.
pub(crate) const ROOTS: [&str; 7] = [
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
    "authorizer",
];

/// kube's error once a policy's budget is spent.
pub const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// Asks the authorizer whether a user may do something: what
/// `authorizer.…check(verb)` calls.
pub trait Authorize: Send + Sync {
    /// Whether the request's user (or, with `service_account` as
    /// `(namespace, name)`, that account) may do what `attrs` asks, with
    /// the authorizer's reason.
    fn decide(
        &self,
        service_account: Option<(&str, &str)>,
        attrs: &Attributes<'_>,
    ) -> (bool, String);
}

/// Which root variables an expression, or a set of them, reads: only
/// those are converted to CEL for an evaluation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Uses(u8);

impl Uses {
    /// Every root variable.
    pub const ALL: Uses = Uses((1 << ROOTS.len()) - 1);

    fn bit(name: &str) -> u8 {
        ROOTS
            .iter()
            .position(|root| *root == name)
            .map_or(0, |i| 1 << i)
    }

    /// Whether `name` is read.
    pub fn has(self, name: &str) -> bool {
        self.0 & Self::bit(name) != 0
    }

    /// What either reads.
    pub fn with(self, other: Uses) -> Uses {
        Uses(self.0 | other.0)
    }
}

/// A compiled admission expression.
#[derive(Debug)]
pub struct Expression {
    /// The expression as written.
    pub source: String,
    plan: Plan,
    uses: Uses,
}

impl Expression {
    /// Parses and type-checks `source` against the admission variables; the
    /// error is kube's compile error (`compilation failed: ERROR: …`).
    pub fn compile(source: &str) -> Result<Expression, String> {
        let program =
            super::compile::parse(source).map_err(|e| format!("compilation failed: {e}"))?;
        let roots: Vec<(&str, Ty)> = ROOTS.iter().map(|name| (*name, Ty::Dyn)).collect();
        let checked = check_roots(&program, source, &roots, &NoSizes);
        if !checked.errors.is_empty() {
            return Err(format!("compilation failed: {}", checked.errors.join("\n")));
        }
        let uses = checked.roots.iter().fold(Uses::default(), |uses, name| {
            uses.with(Uses(Uses::bit(name)))
        });
        Ok(Expression {
            source: source.to_string(),
            plan: Plan::new(&program),
            uses,
        })
    }

    /// The root variables it reads.
    pub fn uses(&self) -> Uses {
        self.uses
    }

    /// Evaluates the expression, metered and stopped at kube's per-call
    /// limit, and charges what it cost to `budget`; the error is kube's
    /// words for what failed.
    pub fn evaluate(&self, input: &Activation, budget: &mut i64) -> Result<CelValue, String> {
        let mut ctx = library().new_inner_scope();
        for (name, value) in &input.values {
            ctx.add_variable_from_value(*name, value.clone());
        }
        let mut meter = Meter::new(PER_CALL_LIMIT);
        let result = self.plan.evaluate(&ctx, &mut meter);
        let spent = i64::try_from(meter.spent()).unwrap_or(i64::MAX);
        if spent > *budget {
            return Err(OUT_OF_BUDGET.to_string());
        }
        *budget -= spent;
        match result {
            Ok(value) => Ok(value),
            Err(Failure::Error(e)) => Err(execution_error(&e)),
            Err(Failure::OverLimit) => Err(CALL_LIMIT_EXCEEDED.to_string()),
        }
    }

    /// Evaluates the expression as a condition: `Ok(true)` only for `true`,
    /// and kube's `expression '…' resulted in error: …` otherwise.
    pub fn holds(&self, input: &Activation, budget: &mut i64) -> Result<bool, String> {
        match self.evaluate(input, budget) {
            Ok(CelValue::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "expression '{}' resulted in error: expected bool, got {}",
                self.source,
                type_name(&other)
            )),
            Err(why) if why == OUT_OF_BUDGET => Err(why),
            Err(why) => Err(format!(
                "expression '{}' resulted in error: {why}",
                self.source
            )),
        }
    }
}

/// The data of one request, as admission expressions see it.
#[derive(Default)]
pub struct Inputs<'a> {
    /// The object written (none on delete).
    pub object: Option<&'a Value>,
    /// The object replaced (none on create).
    pub old_object: Option<&'a Value>,
    /// The AdmissionRequest.
    pub request: Option<&'a Value>,
    /// The params a binding names.
    pub params: Option<&'a Value>,
    /// The namespace written to.
    pub namespace: Option<&'a Value>,
    /// The authorizer for the request's user.
    pub authorizer: Option<Arc<dyn Authorize>>,
}

/// What an admission expression reads: each root variable it uses, as CEL.
pub struct Activation {
    values: Vec<(&'static str, CelValue)>,
    variables: HashMap<Key, CelValue>,
}

/// What an absent root variable reads as.
static NULL: Value = Value::Null;

impl Activation {
    /// The variables of one request, converting only the roots in `uses`.
    pub fn new(inputs: Inputs<'_>, uses: Uses) -> Activation {
        let mut activation = Activation {
            values: Vec::new(),
            variables: HashMap::new(),
        };
        for (name, value) in [
            ("object", inputs.object),
            ("oldObject", inputs.old_object),
            ("request", inputs.request),
            ("params", inputs.params),
            ("namespaceObject", inputs.namespace),
        ] {
            if !uses.has(name) {
                activation.values.push((name, CelValue::Null));
                continue;
            }
            let value = value.unwrap_or(&NULL);
            activation.values.push((name, json_to_cel(value)));
        }
        let authorizer = match inputs.authorizer.filter(|_| uses.has("authorizer")) {
            Some(authz) => CelValue::Opaque(Arc::new(AuthzValue::Check(Box::new(Check {
                authz,
                service_account: None,
                group: String::new(),
                resource: String::new(),
                subresource: String::new(),
                namespace: String::new(),
                name: String::new(),
                path: None,
            })))),
            None => CelValue::Null,
        };
        activation.values.push(("authorizer", authorizer));
        activation.publish_variables();
        activation
    }

    /// Adds `variables.<name>`, visible to the expressions evaluated after.
    pub fn set_variable(&mut self, name: &str, value: CelValue) {
        self.variables
            .insert(Key::String(Arc::new(name.to_string())), value);
        self.publish_variables();
    }

    fn publish_variables(&mut self) {
        let map = CelValue::Map(Map {
            map: Arc::new(self.variables.clone()),
        });
        self.values.retain(|(name, _)| *name != "variables");
        self.values.push(("variables", map));
    }
}

/// JSON as CEL, untyped.
fn json_to_cel(value: &Value) -> CelValue {
    super::value::to_cel(value, &super::schema::Schema::default())
}

/// The name cel-go gives a value's type, for error messages.
pub fn type_name(value: &CelValue) -> &'static str {
    match value {
        CelValue::Bool(_) => "bool",
        CelValue::Int(_) => "int",
        CelValue::UInt(_) => "uint",
        CelValue::Float(_) => "double",
        CelValue::String(_) => "string",
        CelValue::Bytes(_) => "bytes",
        CelValue::List(_) => "list",
        CelValue::Map(_) => "map",
        CelValue::Null => "null_type",
        CelValue::Duration(_) => "google.protobuf.Duration",
        CelValue::Timestamp(_) => "google.protobuf.Timestamp",
        _ => "dyn",
    }
}

/// A request to the authorizer under construction (`authorizer.group(…)…`).
#[derive(Clone)]
struct Check {
    authz: Arc<dyn Authorize>,
    service_account: Option<(String, String)>,
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
    path: Option<String>,
}

/// The values of kube's authorizer library: a check being built, or its
/// decision.
#[derive(Clone)]
enum AuthzValue {
    Check(Box<Check>),
    Decision { allowed: bool, reason: String },
}

impl std::fmt::Debug for AuthzValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthzValue::Check(check) => write!(
                f,
                "Authorizer{{group: {:?}, resource: {:?}, path: {:?}}}",
                check.group, check.resource, check.path
            ),
            AuthzValue::Decision { allowed, reason } => {
                write!(f, "Decision{{allowed: {allowed}, reason: {reason:?}}}")
            }
        }
    }
}

impl PartialEq for AuthzValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                AuthzValue::Decision { allowed, reason },
                AuthzValue::Decision {
                    allowed: a,
                    reason: r,
                },
            ) => allowed == a && reason == r,
            _ => std::ptr::eq(self, other),
        }
    }
}

impl Eq for AuthzValue {}

impl Opaque for AuthzValue {
    fn runtime_type_name(&self) -> &str {
        match self {
            AuthzValue::Check(_) => "kubernetes.authorization.Authorizer",
            AuthzValue::Decision { .. } => "kubernetes.authorization.Decision",
        }
    }
}

/// Adds kube's authorizer library to the shared CEL environment.
pub(crate) fn register(ctx: &mut Context<'static>) {
    for name in [
        "group",
        "resource",
        "subresource",
        "namespace",
        "name",
        "path",
        "serviceAccount",
        "check",
        "allowed",
        "reason",
        "errored",
        "error",
    ] {
        ctx.add_function(name, authorizer_call);
    }
}

/// One call of the authorizer library, on the value it is called on.
fn authorizer_call(ftx: &FunctionContext) -> Result<CelValue, ExecutionError> {
    let this = match &ftx.this {
        Some(CelValue::Opaque(opaque)) => opaque.downcast_ref::<AuthzValue>().cloned(),
        _ => None,
    };
    let Some(this) = this else {
        return Err(ftx.error(format!("no such overload: {}", ftx.name)));
    };
    let mut strings = Vec::new();
    for arg in ftx.args {
        match CelValue::resolve(arg, ftx.ptx)? {
            CelValue::String(s) => strings.push(s.to_string()),
            _ => return Err(ftx.error(format!("no such overload: {}", ftx.name))),
        }
    }
    let argument = |i: usize| strings.get(i).cloned().unwrap_or_default();
    let value = match (this, ftx.name) {
        (AuthzValue::Decision { allowed, .. }, "allowed") => return Ok(CelValue::Bool(allowed)),
        (AuthzValue::Decision { reason, .. }, "reason") => {
            return Ok(CelValue::String(Arc::new(reason)));
        }
        (AuthzValue::Decision { .. }, "errored") => return Ok(CelValue::Bool(false)),
        (AuthzValue::Decision { .. }, "error") => return Ok(CelValue::String(Arc::default())),
        (AuthzValue::Check(check), "check") => {
            let verb = argument(0);
            let service_account = check
                .service_account
                .as_ref()
                .map(|(ns, name)| (ns.as_str(), name.as_str()));
            let attrs = Attributes {
                verb: &verb,
                resource_request: check.path.is_none(),
                api_group: &check.group,
                resource: &check.resource,
                subresource: &check.subresource,
                name: &check.name,
                namespace: &check.namespace,
                path: check.path.as_deref().unwrap_or_default(),
            };
            let (allowed, reason) = check.authz.decide(service_account, &attrs);
            AuthzValue::Decision { allowed, reason }
        }
        (AuthzValue::Check(mut check), name) => {
            match name {
                "group" => check.group = argument(0),
                "resource" => check.resource = argument(0),
                "subresource" => check.subresource = argument(0),
                "namespace" => check.namespace = argument(0),
                "name" => check.name = argument(0),
                "path" => check.path = Some(argument(0)),
                "serviceAccount" => check.service_account = Some((argument(0), argument(1))),
                _ => return Err(ftx.error(format!("no such overload: {name}"))),
            }
            AuthzValue::Check(check)
        }
        (_, name) => return Err(ftx.error(format!("no such overload: {name}"))),
    };
    Ok(CelValue::Opaque(Arc::new(value)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct OnlyPods;
    impl Authorize for OnlyPods {
        fn decide(&self, account: Option<(&str, &str)>, attrs: &Attributes<'_>) -> (bool, String) {
            let allowed = attrs.resource == "pods" && attrs.verb == "create" && account.is_none();
            (allowed, format!("asked about {}", attrs.resource))
        }
    }

    /// The data of the tests' request.
    struct Data {
        object: Value,
        request: Value,
        params: Value,
        namespace: Value,
    }

    fn data(object: Value) -> Data {
        Data {
            object,
            request: json!({"operation": "CREATE", "userInfo": {"username": "alice"}}),
            params: json!({"data": {"max": "3"}, "spec": {"max": 3}}),
            namespace: json!({"metadata": {"name": "ns", "labels": {"env": "prod"}}}),
        }
    }

    fn input(data: &Data) -> Activation {
        let inputs = Inputs {
            object: Some(&data.object),
            old_object: None,
            request: Some(&data.request),
            params: Some(&data.params),
            namespace: Some(&data.namespace),
            authorizer: Some(Arc::new(OnlyPods)),
        };
        Activation::new(inputs, Uses::ALL)
    }

    fn holds(source: &str, input: &Activation) -> Result<bool, String> {
        let mut budget = RUNTIME_COST_BUDGET;
        Expression::compile(source)?.holds(input, &mut budget)
    }

    #[test]
    fn reads_kubes_variables() {
        let data = data(json!({"spec": {"replicas": 5}}));
        let input = input(&data);
        assert_eq!(
            holds("object.spec.replicas > params.spec.max", &input),
            Ok(true)
        );
        assert_eq!(
            holds("int(params.data.max) < object.spec.replicas", &input),
            Ok(true)
        );
        assert_eq!(holds("oldObject == null", &input), Ok(true));
        assert_eq!(
            holds("request.userInfo.username == 'alice'", &input),
            Ok(true)
        );
        assert_eq!(
            holds("namespaceObject.metadata.labels.env == 'prod'", &input),
            Ok(true)
        );
        assert_eq!(
            holds("has(object.spec.template)", &input),
            Ok(false),
            "has() on a missing field"
        );
    }

    #[test]
    fn only_the_roots_read_are_converted() {
        let compiled =
            Expression::compile("object.a == 1 && size(variables) == 0").expect("compiles");
        assert!(compiled.uses().has("object") && compiled.uses().has("variables"));
        assert!(!compiled.uses().has("request") && !compiled.uses().has("params"));
        let data = data(json!({"a": 1}));
        let inputs = Inputs {
            object: Some(&data.object),
            request: Some(&data.request),
            ..Default::default()
        };
        let input = Activation::new(inputs, compiled.uses());
        let mut budget = RUNTIME_COST_BUDGET;
        assert_eq!(compiled.holds(&input, &mut budget), Ok(true));
        let request = Expression::compile("request == null").expect("compiles");
        assert_eq!(
            request.holds(&input, &mut budget),
            Ok(true),
            "not converted"
        );
    }

    #[test]
    fn variables_are_seen_by_later_expressions() {
        let data = data(json!({"spec": {"replicas": 5}}));
        let mut input = input(&data);
        let mut budget = RUNTIME_COST_BUDGET;
        let value = Expression::compile("object.spec.replicas * 2")
            .and_then(|e| e.evaluate(&input, &mut budget))
            .expect("evaluates");
        input.set_variable("doubled", value);
        assert_eq!(holds("variables.doubled == 10", &input), Ok(true));
    }

    #[test]
    fn errors_in_kubes_words() {
        let data = data(json!({"spec": {}}));
        let input = input(&data);
        assert_eq!(
            holds("object.spec.replicas > 1", &input),
            Err(
                "expression 'object.spec.replicas > 1' resulted in error: no such key: replicas"
                    .into()
            )
        );
        let error = Expression::compile("nope.x == 1").expect_err("undeclared");
        assert!(
            error.starts_with(
                "compilation failed: ERROR: <input>:1:1: undeclared reference to 'nope'"
            ),
            "{error}"
        );
        assert!(
            holds("object.spec", &input)
                .unwrap_err()
                .contains("expected bool")
        );
    }

    #[test]
    fn the_authorizer_decides_for_the_user_or_an_account() {
        let data = data(json!({}));
        let input = input(&data);
        assert_eq!(
            holds(
                "authorizer.group('').resource('pods').namespace('ns').check('create').allowed()",
                &input
            ),
            Ok(true)
        );
        assert_eq!(
            holds(
                "authorizer.group('apps').resource('deployments').check('create').allowed()",
                &input
            ),
            Ok(false)
        );
        assert_eq!(
            holds(
                "authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('create').allowed()",
                &input
            ),
            Ok(false)
        );
        assert_eq!(
            holds(
                "authorizer.group('').resource('secrets').check('get').reason() == 'asked about secrets'",
                &input
            ),
            Ok(true)
        );
    }

    #[test]
    fn sizes_the_checker_cannot_see_are_bounded_by_the_data() {
        let data = data(json!({"n": 7, "name": "web"}));
        let input = input(&data);
        assert_eq!(
            holds(
                "'n is ' + string(object.n) + object.name == 'n is 7web'",
                &input
            ),
            Ok(true)
        );
    }

    #[test]
    fn costly_expressions_are_not_run() {
        let big: Vec<i64> = (0..2000).collect();
        let data = data(json!({"items": big}));
        let input = input(&data);
        let source =
            "object.items.all(a, object.items.all(b, object.items.all(c, a + b + c >= 0)))";
        assert_eq!(
            holds(source, &input),
            Err(format!(
                "expression '{source}' resulted in error: {CALL_LIMIT_EXCEEDED}"
            ))
        );
        assert_eq!(holds("object.items.all(a, a >= 0)", &input), Ok(true));
    }
}
