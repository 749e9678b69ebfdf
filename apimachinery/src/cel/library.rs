//! The CEL environment rules run in: the `cel` crate's standard functions,
//! kube's extension libraries from `kube-cel` (strings, lists, regex, URLs,
//! quantities, IPs, sets, ...), and the few standard pieces the `cel` crate
//! lacks (`type()`, type names, `dyn()`, `bool()`). Built once, shared by
//! every evaluation; each evaluation adds `self` and `oldSelf` in a child
//! scope.

use std::sync::{Arc, LazyLock};

use kube_cel::KubeCelExt as _;
use kube_cel::cel::common::ast::Expr;
use kube_cel::cel::{Context, ExecutionError, FunctionContext, Value};

/// Type names usable as values (`type(x) == string`).
const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
];

static LIBRARY: LazyLock<Context<'static>> = LazyLock::new(|| {
    let mut ctx = Context::default().with_all();
    ctx.add_function("type", type_of);
    ctx.add_function("dyn", dyn_of);
    ctx.add_function("bool", bool_of);
    ctx.add_function("cel.bind", bind);
    super::admission::register(&mut ctx);
    for name in TYPE_NAMES {
        ctx.add_variable_from_value(*name, type_name(name));
    }
    ctx
});

fn type_of(_: &FunctionContext, v: Value) -> Result<Value, ExecutionError> {
    Ok(type_value(&v))
}

/// `cel.bind(name, init, body)`: evaluates `body` with `name` bound to `init`.
fn bind(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    let [name, init, body] = ftx.args else {
        return Err(ftx.error("cel.bind() takes a variable name, a value and an expression"));
    };
    let Expr::Ident(name) = &name.expr else {
        return Err(ftx.error("cel.bind() variable name must be a simple identifier"));
    };
    let value = Value::resolve(init, ftx.ptx)?;
    let mut scope = ftx.ptx.new_inner_scope();
    scope.add_variable_from_value(name.clone(), value);
    Value::resolve(body, &scope)
}

fn dyn_of(_: &FunctionContext, v: Value) -> Result<Value, ExecutionError> {
    Ok(v)
}

fn bool_of(ftx: &FunctionContext, v: Value) -> Result<Value, ExecutionError> {
    match &v {
        Value::Bool(_) => Ok(v),
        Value::String(s) if matches!(s.as_str(), "true" | "TRUE" | "True" | "t" | "1") => {
            Ok(Value::Bool(true))
        }
        Value::String(s) if matches!(s.as_str(), "false" | "FALSE" | "False" | "f" | "0") => {
            Ok(Value::Bool(false))
        }
        other => Err(ftx.error(format!("type conversion error from '{other:?}' to 'bool'"))),
    }
}

/// The shared root context holding every function.
pub fn library() -> &'static Context<'static> {
    &LIBRARY
}

/// A type value: the type's name, marked so it never equals a plain string.
fn type_name(name: &str) -> Value {
    Value::String(Arc::new(format!("\u{0}type:{name}")))
}

fn type_value(v: &Value) -> Value {
    let name = match v {
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(s) if s.starts_with('\u{0}') => "type",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::Bool(_) => "bool",
        Value::Null => "null_type",
        Value::Duration(_) => "google.protobuf.Duration",
        Value::Timestamp(_) => "google.protobuf.Timestamp",
        Value::Function(..) | Value::Opaque(_) => "opaque",
    };
    type_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_cel::cel::parser::Parser;

    fn eval(expr: &str) -> Value {
        let parsed = Parser::new()
            .enable_optional_syntax(true)
            .parse(expr)
            .expect("parses");
        Value::resolve(&parsed, &library().new_inner_scope()).expect("evaluates")
    }

    #[test]
    fn has_kube_functions() {
        assert_eq!(eval("[1, 2, 3].isSorted()"), Value::Bool(true));
        assert_eq!(
            eval("[1, 2, 3].sum() == 6 && [4, 2].min() == 2 && [4, 2].max() == 4"),
            Value::Bool(true)
        );
        assert_eq!(
            eval("['a', 'b'].indexOf('b') == 1 && 'abcabc'.lastIndexOf('c') == 5"),
            Value::Bool(true)
        );
        assert_eq!(
            eval("'ABC'.lowerAscii() == 'abc' && 'abc'.upperAscii() == 'ABC'"),
            Value::Bool(true)
        );
        assert_eq!(
            eval("'abc'.matches('^a') && 'abc'.contains('b')"),
            Value::Bool(true)
        );
        assert_eq!(
            eval("url('https://example.com/x').getHost() == 'example.com'"),
            Value::Bool(true)
        );
        assert_eq!(
            eval("quantity('1Gi').isGreaterThan(quantity('500Mi'))"),
            Value::Bool(true)
        );
    }

    #[test]
    fn has_type_values() {
        assert_eq!(
            eval("type(1) == int && type('a') == string && type(1) != string"),
            Value::Bool(true)
        );
        assert_eq!(eval("type('int') == int"), Value::Bool(false));
        assert_eq!(eval("dyn(1) == 1"), Value::Bool(true));
        assert_eq!(eval("optional.none().hasValue()"), Value::Bool(false));
        assert_eq!(
            eval("cel.bind(x, [1, 2], x.size() == 2 && x[1] == 2)"),
            Value::Bool(true)
        );
    }
}
