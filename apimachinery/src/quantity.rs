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

/// How a quantity is written, which decides how kube prints it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Powers of 1000 (`500m`, `2k`), and plain numbers.
    #[default]
    DecimalSI,
    /// Powers of 1024 (`1Gi`).
    BinarySI,
    /// Exponents of ten (`2e3`).
    DecimalExponent,
}

/// The largest magnitude held, in nano units (a quantity beyond it is held
/// as this bound, which every real limit is far below).
const MAX_NANOS: i128 = 10i128.pow(36);
/// Nano units in one unit.
const NANOS: i128 = 1_000_000_000;

/// An exact resource quantity, in nano units, with the format it was
/// written in: the arithmetic, comparisons and canonical printing that
/// LimitRanger and ResourceQuota need (`1000m` prints as `1`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

/// `a` divided by `b`, rounded away from zero (kube rounds a precision it
/// cannot hold up).
fn div_up(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 { q + a.signum() } else { q }
}

impl Quantity {
    /// A whole number of units, written as a plain decimal.
    pub fn from_units(units: i64) -> Self {
        Quantity {
            nanos: i128::from(units) * NANOS,
            format: Format::DecimalSI,
        }
    }

    /// Parses a quantity string exactly; `None` if it is not one.
    pub fn parse(s: &str) -> Option<Self> {
        parse(s)?;
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(split);
        let negative = number.starts_with('-');
        let digits = number.trim_start_matches(['+', '-']);
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let mantissa_digits = format!("{whole}{fraction}");
        let mantissa_digits = mantissa_digits.trim_start_matches('0');
        // A mantissa of more digits than any bound holds saturates.
        let mantissa: i128 = if mantissa_digits.len() > 36 {
            MAX_NANOS
        } else {
            mantissa_digits.parse().unwrap_or(0)
        };
        let (format, ten, two) = match suffix {
            "" => (Format::DecimalSI, 0, 0),
            "n" => (Format::DecimalSI, -9, 0),
            "u" => (Format::DecimalSI, -6, 0),
            "m" => (Format::DecimalSI, -3, 0),
            "k" => (Format::DecimalSI, 3, 0),
            "M" => (Format::DecimalSI, 6, 0),
            "G" => (Format::DecimalSI, 9, 0),
            "T" => (Format::DecimalSI, 12, 0),
            "P" => (Format::DecimalSI, 15, 0),
            "E" => (Format::DecimalSI, 18, 0),
            "Ki" => (Format::BinarySI, 0, 10),
            "Mi" => (Format::BinarySI, 0, 20),
            "Gi" => (Format::BinarySI, 0, 30),
            "Ti" => (Format::BinarySI, 0, 40),
            "Pi" => (Format::BinarySI, 0, 50),
            "Ei" => (Format::BinarySI, 0, 60),
            exp => (Format::DecimalExponent, exp[1..].parse::<i32>().ok()?, 0),
        };
        let exponent = i64::from(ten) + 9 - fraction.len() as i64;
        let mut nanos = mantissa.saturating_mul(1i128 << two);
        if exponent >= 0 {
            for _ in 0..exponent.min(40) {
                nanos = nanos.saturating_mul(10).min(MAX_NANOS);
            }
        } else if exponent < -40 {
            nanos = i128::from(nanos > 0);
        } else {
            nanos = div_up(nanos, 10i128.pow((-exponent) as u32));
        }
        let nanos = nanos.min(MAX_NANOS);
        Some(Quantity {
            nanos: if negative { -nanos } else { nanos },
            format,
        })
    }

    /// The quantity held in JSON (a string or a bare number), if any.
    pub fn of(v: &Value) -> Option<Self> {
        match v {
            Value::String(s) => Self::parse(s),
            Value::Number(n) => Self::parse(&n.to_string()),
            _ => None,
        }
    }

    /// Whether it is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Whether it is below zero.
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// The value in thousandths, rounded up (kube's `MilliValue`).
    pub fn milli_value(&self) -> i128 {
        div_up(self.nanos, 1_000_000)
    }

    /// The value in units, rounded up (kube's `Value`).
    pub fn value(&self) -> i128 {
        div_up(self.nanos, NANOS)
    }

    /// The sum; a zero quantity takes the other's format, as kube's `Add`.
    pub fn add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: (self.nanos + other.nanos).clamp(-MAX_NANOS, MAX_NANOS),
            format: if self.is_zero() {
                other.format
            } else {
                self.format
            },
        }
    }

    /// The difference, in this quantity's format.
    pub fn sub(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: (self.nanos - other.nanos).clamp(-MAX_NANOS, MAX_NANOS),
            format: self.format,
        }
    }
}

impl std::fmt::Display for Quantity {
    /// kube's canonical form: the largest suffix that keeps the number whole.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let sign = if self.nanos < 0 { "-" } else { "" };
        let magnitude = self.nanos.abs();
        let whole = magnitude % NANOS == 0;
        if self.format == Format::BinarySI && whole && magnitude >= 1024 * NANOS {
            let mut units = magnitude / NANOS;
            let mut step = 0;
            while units % 1024 == 0 && step < 6 {
                units /= 1024;
                step += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][step];
            return write!(f, "{sign}{units}{suffix}");
        }
        // Nano units are 10^-9: find the largest multiple of three that
        // divides evenly, up to 10^18.
        let mut exponent = -9i32;
        let mut number = magnitude;
        while exponent < 18 && number % 1000 == 0 {
            number /= 1000;
            exponent += 3;
        }
        if self.format == Format::DecimalExponent {
            return match exponent {
                0 => write!(f, "{sign}{number}"),
                e => write!(f, "{sign}{number}e{e}"),
            };
        }
        let suffix = match exponent {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            _ => "E",
        };
        write!(f, "{sign}{number}{suffix}")
    }
}

/// Named quantities (`cpu`, `requests.memory`), in name order, as kube's
/// `ResourceList`.
pub type ResourceList = std::collections::BTreeMap<String, Quantity>;

/// The well-formed quantities of a JSON resource list (malformed ones,
/// which validation refuses, are left out).
pub fn resource_list(list: Option<&Value>) -> ResourceList {
    list.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), Quantity::of(v)?)))
        .collect()
}

/// A resource list as JSON, each quantity in canonical form.
pub fn to_json(list: &ResourceList) -> Value {
    Value::Object(
        list.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.to_string())))
            .collect(),
    )
}

/// `a + b` for every name in either (kube's `quota.Add`).
pub fn add_lists(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, v) in b {
        let sum = out.get(k).copied().unwrap_or_default().add(*v);
        out.insert(k.clone(), sum);
    }
    out
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

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn exact_quantities_print_as_kube_canonicalizes_them() {
        for (input, printed) in [
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("2000", "2k"),
            ("1500", "1500"),
            ("1Gi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("1024Ki", "1Mi"),
            ("1000Ki", "1000Ki"),
            ("0.5Gi", "512Mi"),
            ("2e3", "2e3"),
            ("0", "0"),
            ("-100m", "-100m"),
            ("1.5Ki", "1536"),
        ] {
            assert_eq!(q(input).to_string(), printed, "{input}");
        }
        assert_eq!(q("1n").milli_value(), 1, "rounded up");
        assert_eq!(q("100m").add(q("400m")).to_string(), "500m");
        assert_eq!(Quantity::default().add(q("1Gi")).to_string(), "1Gi");
        assert_eq!(q("1Gi").sub(q("512Mi")).to_string(), "512Mi");
        assert!(q("1Gi") > q("1G"));
        assert_eq!(q("1e100"), q("1e99"), "saturated, never overflowing");
        assert!(Quantity::parse("1x").is_none());
        let list = resource_list(Some(&serde_json::json!({"cpu": "1", "memory": "bad"})));
        assert_eq!(list.len(), 1);
        assert_eq!(
            to_json(&add_lists(&list, &list)),
            serde_json::json!({"cpu": "2"})
        );
    }
}
