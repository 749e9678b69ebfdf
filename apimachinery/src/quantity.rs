//! Resource quantities (`500m`, `1Gi`, `2e3`): parsed for comparison and
//! checked with kube's message. Kube also canonicalizes them on output
//! (`1000m` becomes `1`); we store them as written.

use crate::error::FieldError;
use serde_json::Value;

const QUANTITY_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// The value of a quantity string, if it is well formed.
pub fn parse(s: &str) -> Option<f64> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let digits = number.trim_start_matches(['+', '-']);
    if digits.is_empty()
        || digits == "."
        || digits.contains(['+', '-'])
        || digits.matches('.').count() > 1
    {
        return None;
    }
    let base: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => 10f64.powi(exp[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    // Zero times any scale is zero (not NaN when the exponent overflows);
    // a value too large to hold is not a quantity.
    if base == 0.0 {
        return Some(0.0);
    }
    Some(base * scale).filter(|v| v.is_finite())
}

/// The value of a quantity held in JSON (a string, or a bare number).
pub fn of(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => parse(s),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// Checks every quantity of a resource list (`requests`, `limits`, `hard`, ...):
/// well formed and not negative.
pub fn validate_list(list: Option<&Value>, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (name, q) in list.and_then(Value::as_object).into_iter().flatten() {
        let path = format!("{field}[{name}]");
        match of(q) {
            None => errs.push(FieldError::invalid(path, q.clone(), QUANTITY_ERROR)),
            Some(n) if n < 0.0 => errs.push(FieldError::invalid(
                path,
                q.clone(),
                "must be greater than or equal to 0",
            )),
            Some(_) => {}
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `quantity` fuzz target: `0e33333` parsed as NaN, which
    /// passes every `<=` check.
    #[test]
    fn overflowing_exponents_are_never_nan() {
        assert_eq!(parse("0e33333"), Some(0.0));
        assert_eq!(parse("1e33333"), None);
        assert_eq!(parse("1e-33333"), Some(0.0));
        assert_eq!(parse("2e3"), Some(2000.0));
    }

    #[test]
    fn parses_kube_quantities() {
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("1Gi"), Some(1073741824.0));
        assert_eq!(parse("2e3"), Some(2000.0));
        assert_eq!(parse("1.5"), Some(1.5));
        assert_eq!(parse("abc"), None);
        assert_eq!(parse("1Qi"), None);
        assert_eq!(parse(""), None);
        let errs = validate_list(Some(&serde_json::json!({"cpu": "x"})), "spec.hard");
        assert_eq!(errs[0].field, "spec.hard[cpu]");
    }
}
