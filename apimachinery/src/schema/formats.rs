//! String formats kube validates in custom resources (kube-openapi's
//! `strfmt` default registry, as filtered by apiextensions' supported list
//! for 1.33), and the stripping of formats kube ignores.

use std::net::IpAddr;
use std::sync::LazyLock;

use base64::Engine as _;
use regex::Regex;

/// The format that validation uses for a schema of `type_` with `format`:
/// kube drops formats it does not support for the type
/// (`StripUnsupportedFormatsPostProcess`).
pub(crate) fn effective_format<'a>(type_: &str, int_or_string: bool, format: &'a str) -> &'a str {
    if format.is_empty() {
        return format;
    }
    let type_ = if int_or_string { "" } else { type_ };
    let keep = match type_ {
        "" | "string" => is_supported(format),
        "integer" => format == "int32" || format == "int64",
        "number" => format == "float" || format == "double",
        _ => false,
    };
    if keep { format } else { "" }
}

/// The formats of the registry that validate strings, by normalized name.
const STRING_FORMATS: [&str; 25] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "quantity",
];

fn normalize(format: &str) -> String {
    format.replace('-', "")
}

/// Whether kube validates strings against this format.
pub(crate) fn is_supported(format: &str) -> bool {
    STRING_FORMATS.contains(&normalize(format).as_str())
}

static UUID: LazyLock<Regex> =
    LazyLock::new(|| rx(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID3: LazyLock<Regex> = LazyLock::new(|| {
    rx(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    rx(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    rx(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    rx(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static EMAIL: LazyLock<Regex> = LazyLock::new(|| rx(r"^(?:[^<>]*<)?[^@\s<>]+@[^@\s<>]+(?:>)?$"));
static SSN: LazyLock<Regex> = LazyLock::new(|| rx(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static HEXCOLOR: LazyLock<Regex> = LazyLock::new(|| rx(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGBCOLOR: LazyLock<Regex> = LazyLock::new(|| {
    let c = r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*";
    rx(&format!(r"^rgb\({c},{c},{c}\)$"))
});
static CREDITCARD: LazyLock<Regex> = LazyLock::new(|| {
    rx(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$",
    )
});
static BSON: LazyLock<Regex> = LazyLock::new(|| rx(r"^[0-9a-fA-F]{24}$"));
static DATE_TIME: LazyLock<Regex> = LazyLock::new(|| {
    rx(r"^(\d{4}-\d{2}-\d{2})[tT](\d{2}):(\d{2}):(\d{2})(\.\d+)?([zZ]|[+-]\d{2}:\d{2})$")
});
static DURATION_GO: LazyLock<Regex> =
    LazyLock::new(|| rx(r"^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$"));
static DURATION_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    rx(
        r"^(\d+)\s*(ns|us|µs|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|sec|minutes?|mins?|hours?|hr|days?|weeks?|wk)$",
    )
});
static QUANTITY: LazyLock<Regex> = LazyLock::new(|| {
    rx(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
});
static URI_SCHEME: LazyLock<Regex> = LazyLock::new(|| rx(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:"));

/// Compiles a pattern written in this file.
fn rx(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| panic!("built-in format pattern {pattern:?}: {e}"))
}

/// Whether `value` is valid for `format` (callers pass supported formats).
pub(crate) fn validates(format: &str, value: &str) -> bool {
    match normalize(format).as_str() {
        "bsonobjectid" => BSON.is_match(value),
        "uri" => is_uri(value),
        "email" => EMAIL.is_match(value),
        "hostname" => value.len() <= 255 && HOSTNAME.is_match(value),
        "ipv4" => value.parse::<IpAddr>().is_ok() && value.contains('.'),
        "ipv6" => value.parse::<IpAddr>().is_ok() && value.contains(':'),
        "cidr" => is_cidr(value),
        "mac" => is_mac(value),
        "uuid" => UUID.is_match(value),
        "uuid3" => UUID3.is_match(value),
        "uuid4" => UUID4.is_match(value),
        "uuid5" => UUID5.is_match(value),
        "isbn" => is_isbn10(value) || is_isbn13(value),
        "isbn10" => is_isbn10(value),
        "isbn13" => is_isbn13(value),
        "creditcard" => is_credit_card(value),
        "ssn" => SSN.is_match(value),
        "hexcolor" => HEXCOLOR.is_match(value),
        "rgbcolor" => RGBCOLOR.is_match(value),
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(value)
            .is_ok(),
        "date" => is_date(value),
        "duration" => DURATION_GO.is_match(value) || value == "0" || DURATION_WORDS.is_match(value),
        "datetime" => is_date_time(value),
        "quantity" => QUANTITY.is_match(value),
        _ => true,
    }
}

fn is_uri(value: &str) -> bool {
    !value.is_empty()
        && !value.chars().any(|c| c.is_whitespace() || c.is_control())
        && (value.starts_with('/') || URI_SCHEME.is_match(value))
}

fn is_cidr(value: &str) -> bool {
    let Some((addr, bits)) = value.split_once('/') else {
        return false;
    };
    let Ok(ip) = addr.parse::<IpAddr>() else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    !bits.is_empty()
        && bits.len() <= 3
        && bits.chars().all(|c| c.is_ascii_digit())
        && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

fn is_mac(value: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit());
    let groups_ok = |sep: char, width: usize| {
        let parts: Vec<&str> = value.split(sep).collect();
        let bytes = parts.len() * width / 2;
        matches!(bytes, 6 | 8 | 20) && parts.iter().all(|p| hex(p, width))
    };
    groups_ok(':', 2) || groups_ok('-', 2) || groups_ok('.', 4)
}

fn is_date(value: &str) -> bool {
    let b = value.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| {
        value
            .get(r)
            .filter(|s| s.chars().all(|c| c.is_ascii_digit()))
            .and_then(|s| s.parse::<u32>().ok())
    };
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

fn is_date_time(value: &str) -> bool {
    let Some(c) = DATE_TIME.captures(value) else {
        return false;
    };
    let part = |i: usize| c.get(i).map_or("", |m| m.as_str());
    let num = |i: usize| part(i).parse::<u32>().unwrap_or(99);
    is_date(part(1)) && num(2) <= 23 && num(3) <= 59 && num(4) <= 59
}

fn digits_only(value: &str) -> String {
    value.chars().filter(|c| *c != ' ' && *c != '-').collect()
}

fn is_isbn10(value: &str) -> bool {
    let s = digits_only(value);
    let b = s.as_bytes();
    if b.len() != 10
        || !b[..9].iter().all(u8::is_ascii_digit)
        || !(b[9].is_ascii_digit() || b[9] == b'X')
    {
        return false;
    }
    let sum: u32 = b
        .iter()
        .enumerate()
        .map(|(i, c)| (i as u32 + 1) * if *c == b'X' { 10 } else { u32::from(c - b'0') })
        .sum();
    sum.is_multiple_of(11)
}

fn is_isbn13(value: &str) -> bool {
    let s = digits_only(value);
    let b = s.as_bytes();
    if b.len() != 13 || !b.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = b[..12]
        .iter()
        .enumerate()
        .map(|(i, c)| u32::from(c - b'0') * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    (10 - sum % 10) % 10 == u32::from(b[12] - b'0')
}

fn is_credit_card(value: &str) -> bool {
    let s: String = value.chars().filter(char::is_ascii_digit).collect();
    if !CREDITCARD.is_match(&s) {
        return false;
    }
    let mut sum = 0;
    for (i, c) in s.bytes().rev().enumerate() {
        let mut d = u32::from(c - b'0');
        if i % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    sum % 10 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_table() {
        let cases = [
            ("date-time", "2024-01-02T03:04:05Z", true),
            ("date-time", "2024-01-02T03:04:05.123+02:00", true),
            ("date-time", "2024-01-02 03:04:05", false),
            ("datetime", "2024-02-30T00:00:00Z", false),
            ("date", "2024-02-29", true),
            ("date", "2023-02-29", false),
            ("date", "2024-1-2", false),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", true),
            ("uuid", "not-a-uuid", false),
            ("uuid4", "123e4567-e89b-42d3-a456-426614174000", true),
            ("uuid4", "123e4567-e89b-12d3-a456-426614174000", false),
            ("byte", "aGVsbG8=", true),
            ("byte", "not base64!", false),
            ("ipv4", "10.0.0.1", true),
            ("ipv4", "::1", false),
            ("ipv6", "::1", true),
            ("cidr", "10.0.0.0/8", true),
            ("cidr", "10.0.0.0/33", false),
            ("mac", "00:00:5e:00:53:01", true),
            ("mac", "00:00:5e", false),
            ("hostname", "example.com", true),
            ("hostname", "-bad-", false),
            ("email", "a@b.c", true),
            ("email", "nope", false),
            ("uri", "https://example.com/x", true),
            ("uri", "no scheme", false),
            ("duration", "1h30m", true),
            ("duration", "3 days", true),
            ("duration", "soon", false),
            ("quantity", "10Gi", true),
            ("quantity", "1.5", true),
            ("quantity", "ten", false),
            ("hexcolor", "#fff", true),
            ("rgbcolor", "rgb(255, 0, 10)", true),
            ("isbn10", "0321751043", true),
            ("isbn13", "978-0321751041", true),
            ("creditcard", "4111 1111 1111 1111", true),
            ("ssn", "123-45-6789", true),
            ("bsonobjectid", "507f1f77bcf86cd799439011", true),
            ("password", "anything", true),
        ];
        for (format, value, ok) in cases {
            assert!(is_supported(format), "{format}");
            assert_eq!(validates(format, value), ok, "{format} {value}");
        }
    }

    #[test]
    fn unsupported_formats_are_stripped() {
        assert_eq!(effective_format("string", false, "date-time"), "date-time");
        assert_eq!(effective_format("string", false, "int32"), "");
        assert_eq!(effective_format("string", false, "k8s-short-name"), "");
        assert_eq!(effective_format("integer", false, "int32"), "int32");
        assert_eq!(effective_format("integer", false, "date"), "");
        assert_eq!(effective_format("number", false, "double"), "double");
        assert_eq!(effective_format("boolean", false, "byte"), "");
        assert_eq!(effective_format("integer", true, "uuid"), "uuid");
    }
}
