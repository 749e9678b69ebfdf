//! Field selectors, parsed and matched the way kube-apiserver does it.
//!
//! The `fieldSelector` query parameter is a comma-separated list of
//! `field=value`, `field==value` or `field!=value` terms, all of which must
//! hold (`k8s.io/apimachinery/pkg/fields/selector.go`). In values, `\,`, `\=`
//! and `\\` stand for `,`, `=` and `\`; an unescaped `,` or `=` in a value, or
//! any other escape, is an error. Field names are not escaped: a term splits at
//! its first operator. Which fields a resource supports is up to the caller
//! (see [`FieldSelector::fields`]); a field the object lacks reads as `""`.
//!
//! ```
//! # use apimachinery::field_selector::FieldSelector;
//! let selector: FieldSelector = "metadata.name=web,status.phase!=Failed".parse().unwrap();
//! let matched = selector.matches(|field| match field {
//!     "metadata.name" => Some("web".to_owned()),
//!     "status.phase" => Some("Running".to_owned()),
//!     _ => None,
//! });
//! assert!(matched);
//! assert_eq!(selector.exact_match("metadata.name"), Some("web"));
//! ```

use std::fmt;
use std::str::FromStr;

/// Why a field selector could not be parsed; `Display` is the Status message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldSelectorError {
    /// A term has no `=`, `==` or `!=` operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    NoOperator {
        /// The whole selector string.
        selector: String,
        /// The term that could not be split.
        term: String,
    },
    /// A value contains a backslash escape other than `\\`, `\,` or `\=`.
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// A value contains an unescaped `,` or `=` (kube prints the code point).
    #[error("invalid field selector: unescaped character in value: {}", u32::from(*.0))]
    UnescapedCharacter(char),
}

/// The operator of one field selector term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldOperator {
    /// `field=value`.
    Equals,
    /// `field==value`.
    DoubleEquals,
    /// `field!=value`.
    NotEquals,
}

impl FieldOperator {
    /// The operator as written in a selector.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldOperator::Equals => "=",
            FieldOperator::DoubleEquals => "==",
            FieldOperator::NotEquals => "!=",
        }
    }
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field path, such as `metadata.name` or `spec.nodeName`.
    pub field: String,
    /// How the field is compared with the value.
    pub op: FieldOperator,
    /// The unescaped value.
    pub value: String,
}

impl FieldRequirement {
    /// Whether a field value (`""` when the object lacks the field) satisfies the term.
    pub fn matches(&self, actual: &str) -> bool {
        match self.op {
            FieldOperator::Equals | FieldOperator::DoubleEquals => actual == self.value,
            FieldOperator::NotEquals => actual != self.value,
        }
    }
}

impl fmt::Display for FieldRequirement {
    /// Formats the term as kube's `hasTerm`/`notHasTerm.String()` do (`==` prints as `=`,
    /// the value escaped so the output parses back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            FieldOperator::NotEquals => "!=",
            FieldOperator::Equals | FieldOperator::DoubleEquals => "=",
        };
        write!(f, "{}{op}{}", self.field, escape_value(&self.value))
    }
}

/// A field selector: the AND of its terms, sorted as kube sorts them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    /// The terms; an empty list matches everything.
    pub requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// A selector that matches every object.
    pub fn everything() -> Self {
        FieldSelector::default()
    }

    /// Parses a `fieldSelector` query string.
    pub fn parse(selector: &str) -> Result<Self, FieldSelectorError> {
        let mut terms = split_terms(selector);
        terms.sort_unstable();
        let requirements = terms
            .into_iter()
            .filter(|term| !term.is_empty())
            .map(|term| parse_term(selector, term))
            .collect::<Result<_, _>>()?;
        Ok(FieldSelector { requirements })
    }

    /// Whether the selector puts no restriction on the object.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object matches; `get` returns a field's value, `None` reading as `""`.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|requirement| {
            let actual = get(&requirement.field).unwrap_or_default();
            requirement.matches(&actual)
        })
    }

    /// The field names the selector uses, so the caller can reject unsupported ones.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.requirements
            .iter()
            .map(|requirement| requirement.field.as_str())
    }

    /// The value the selector requires `field` to equal, if any (e.g. `metadata.name=x`).
    pub fn exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && r.op != FieldOperator::NotEquals)
            .map(|requirement| requirement.value.as_str())
    }
}

impl FromStr for FieldSelector {
    type Err = FieldSelectorError;

    /// Parses a `fieldSelector` query string.
    fn from_str(selector: &str) -> Result<Self, Self::Err> {
        FieldSelector::parse(selector)
    }
}

impl fmt::Display for FieldSelector {
    /// Formats the selector as kube's `Selector.String()` does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, requirement) in self.requirements.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

/// Escapes a literal value for use in a field selector (`\`, `,` and `=`).
pub fn escape_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Reverses [`escape_value`], rejecting stray `,`, `=` and unknown escapes.
pub fn unescape_value(value: &str) -> Result<String, FieldSelectorError> {
    let mut unescaped = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next @ ('\\' | ',' | '=')) => unescaped.push(next),
                Some(next) => return Err(FieldSelectorError::InvalidEscape(format!("\\{next}"))),
                None => return Err(FieldSelectorError::InvalidEscape("\\".to_owned())),
            },
            ',' | '=' => return Err(FieldSelectorError::UnescapedCharacter(c)),
            _ => unescaped.push(c),
        }
    }
    Ok(unescaped)
}

/// Splits at commas that are not escaped; escapes stay in the terms.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (index, c) in selector.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&selector[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Splits a term at its first operator and unescapes the value.
fn parse_term(selector: &str, term: &str) -> Result<FieldRequirement, FieldSelectorError> {
    let operators = [
        FieldOperator::NotEquals,
        FieldOperator::DoubleEquals,
        FieldOperator::Equals,
    ];
    let split = term.char_indices().find_map(|(index, _)| {
        let rest = &term[index..];
        operators
            .into_iter()
            .find(|op| rest.starts_with(op.as_str()))
            .map(|op| (index, op))
    });
    let Some((index, op)) = split else {
        return Err(FieldSelectorError::NoOperator {
            selector: selector.to_owned(),
            term: term.to_owned(),
        });
    };
    let value = unescape_value(&term[index + op.as_str().len()..])?;
    Ok(FieldRequirement {
        field: term[..index].to_owned(),
        op,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn getter(fields: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |field| map.get(field).cloned()
    }

    #[test]
    fn parses_and_matches_table() {
        let object = [
            ("metadata.name", "web"),
            ("metadata.namespace", "default"),
            ("spec.nodeName", ""),
        ];
        let cases: &[(&str, bool)] = &[
            ("", true),
            (",", true),
            ("metadata.name=web", true),
            ("metadata.name==web", true),
            ("metadata.name!=web", false),
            ("metadata.name=db", false),
            ("metadata.name=web,metadata.namespace=default", true),
            ("metadata.name=web,metadata.namespace!=default", false),
            ("spec.nodeName=", true),
            ("spec.nodeName!=", false),
            ("status.phase=", true),
            ("status.phase!=Running", true),
            ("metadata.name=web,", true),
        ];
        for (selector, expected) in cases {
            let parsed = FieldSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(getter(&object)), *expected, "{selector:?}");
        }
    }

    #[test]
    fn escapes_in_values() {
        let selector = FieldSelector::parse(r"metadata.name=a\,b\=c\\d,x=y").unwrap();
        assert_eq!(selector.exact_match("metadata.name"), Some(r"a,b=c\d"));
        assert_eq!(selector.requirements.len(), 2);
        assert_eq!(escape_value(r"a,b=c\d"), r"a\,b\=c\\d");
        assert_eq!(
            unescape_value(&escape_value("p=q,r\\s")).unwrap(),
            "p=q,r\\s"
        );
        let bang = FieldSelector::parse("a=x!y").unwrap();
        assert_eq!(bang.exact_match("a"), Some("x!y"));
    }

    #[test]
    fn errors_use_kube_wording() {
        let cases: &[(&str, &str)] = &[
            ("abc", "invalid selector: 'abc'; can't understand 'abc'"),
            ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                r"a=b\!",
                r"invalid field selector: invalid escape sequence: \!",
            ),
            (
                "a=b\\",
                r"invalid field selector: invalid escape sequence: \",
            ),
        ];
        for (selector, message) in cases {
            let error = FieldSelector::parse(selector).expect_err(selector);
            assert_eq!(error.to_string(), *message, "{selector:?}");
        }
    }

    #[test]
    fn splits_at_first_operator_and_sorts() {
        let selector = FieldSelector::parse("z=1,a!=b=,m==2").unwrap_err();
        assert_eq!(
            selector.to_string(),
            "invalid field selector: unescaped character in value: 61"
        );
        let selector = FieldSelector::parse("z=1,a!=b,m==2").unwrap();
        let fields: Vec<&str> = selector.fields().collect();
        assert_eq!(fields, ["a", "m", "z"]);
        assert_eq!(selector.requirements[0].op, FieldOperator::NotEquals);
        assert_eq!(selector.requirements[1].op, FieldOperator::DoubleEquals);
        assert_eq!(selector.to_string(), "a!=b,m=2,z=1");
        assert_eq!(selector.exact_match("a"), None);
        assert_eq!(selector.exact_match("m"), Some("2"));
        assert!(FieldSelector::parse("").unwrap().is_empty());
    }

    /// Found by the `field_selector` fuzz target: an escaped value printed unescaped.
    #[test]
    fn printed_selectors_escape_values_and_parse_back() {
        let selector =
            FieldSelector::parse(r"spec.nodeName==node\,1,metadata.namespace!=kube-system")
                .unwrap();
        let printed = selector.to_string();
        assert_eq!(
            printed,
            r"metadata.namespace!=kube-system,spec.nodeName=node\,1"
        );
        let reparsed = FieldSelector::parse(&printed).unwrap();
        assert_eq!(reparsed.exact_match("spec.nodeName"), Some("node,1"));
        assert_eq!(reparsed.to_string(), printed);
    }
}
