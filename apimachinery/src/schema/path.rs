//! Field paths in kube's `field.Path` spelling, and Go's `%v` for numbers.
//!
//! An empty string is the nil path: its first child is the bare name.

/// `path.Child(name)`: `a.b`, or `b` under the nil path.
pub(crate) fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// `path.Index(i)`: `a[0]`.
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// `path.Key(k)`: `a[k]`.
pub(crate) fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

/// A float64 the way Go's `%v` prints it: shortest digits, `e` notation
/// from an exponent of 6 (or below -4), `e+06` style exponents.
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return "0".into();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// A JSON number as Go's `%v` prints the int64 or float64 it decodes to.
pub(crate) fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        go_float(n.as_f64().unwrap_or(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(child("", "spec"), "spec");
        assert_eq!(child("spec", "x"), "spec.x");
        assert_eq!(index("spec.list", 2), "spec.list[2]");
        assert_eq!(key("spec.map", "k"), "spec.map[k]");
    }

    #[test]
    fn floats_print_like_go() {
        for (f, want) in [
            (3.0, "3"),
            (2.5, "2.5"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-1.5, "-1.5"),
            (0.0, "0"),
        ] {
            assert_eq!(go_float(f), want, "{f}");
        }
    }
}
