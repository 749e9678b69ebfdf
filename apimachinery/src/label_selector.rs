//! Label selectors, parsed and matched the way kube-apiserver does it.
//!
//! The `labelSelector` query parameter follows the grammar of
//! `k8s.io/apimachinery/pkg/labels/selector.go`:
//!
//! ```text
//! <selector>    ::= <requirement> | <requirement> "," <selector>
//! <requirement> ::= [!] KEY [ ("in" | "notin") "(" VALUES ")" | ("=" | "==" | "!=" | ">" | "<") VALUE ]
//! ```
//!
//! Keys are qualified names (an optional DNS subdomain prefix and `/`, then a
//! name of at most 63 characters), values are at most 63 characters and may be
//! empty. Errors carry kube-apiserver's wording so they can be returned as the
//! message of a 400 BadRequest `Status`.
//!
//! ```
//! # use apimachinery::label_selector::LabelSelector;
//! let selector: LabelSelector = "app=web,tier in (front,back),!canary".parse().unwrap();
//! let labels = serde_json::json!({"app": "web", "tier": "front"});
//! assert!(selector.matches(labels.as_object()));
//! ```

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

/// Labels a selector can be matched against, looked up by key.
pub trait LabelSet {
    /// The value under `key`: `None` when absent, `Some(None)` when present
    /// but not a string.
    fn label(&self, key: &str) -> Option<Option<&str>>;
}

impl LabelSet for Map<String, Value> {
    fn label(&self, key: &str) -> Option<Option<&str>> {
        self.get(key).map(Value::as_str)
    }
}

/// An object's labels in the compact form a cache keeps: sorted key/value
/// pairs in one allocation (none when there are no labels).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Labels(Box<[(Box<str>, Box<str>)]>);

impl Labels {
    /// The string-valued labels of a `metadata.labels` object.
    pub fn from_map(map: &Map<String, Value>) -> Labels {
        let mut pairs: Vec<(Box<str>, Box<str>)> = map
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
            .collect();
        pairs.sort_unstable();
        Labels(pairs.into_boxed_slice())
    }
}

impl LabelSet for Labels {
    fn label(&self, key: &str) -> Option<Option<&str>> {
        let i = self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
        Some(Some(&self.0[i].1))
    }
}

/// The binary operators, in the order kube lists them in its errors.
const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

/// Why a label selector could not be built; `Display` is the Status message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The selector string is not well formed (`found ',', expected: ...`).
    #[error("{0}")]
    Syntax(String),
    /// One requirement of a selector string is malformed or invalid.
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    /// A requirement built from a `metav1.LabelSelector` is invalid.
    #[error("{0}")]
    Invalid(String),
    /// A `matchExpressions` entry names an operator kube does not know.
    #[error("{0:?} is not a valid label selector operator")]
    UnknownOperator(String),
    /// A `metav1.LabelSelector` object does not have the expected shape.
    #[error("invalid label selector: {0}")]
    Malformed(String),
}

/// The operator of one label selector requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `key in (a,b)`: the label exists and has one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or has none of the values.
    NotIn,
    /// `key=value`.
    Equals,
    /// `key==value`.
    DoubleEquals,
    /// `key!=value`: the label is absent or has another value.
    NotEquals,
    /// `key`: the label exists.
    Exists,
    /// `!key`: the label does not exist.
    DoesNotExist,
    /// `key>n`: the label is an integer greater than `n`.
    GreaterThan,
    /// `key<n`: the label is an integer less than `n`.
    LessThan,
}

impl Operator {
    /// The operator as kube's `selection.Operator` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

/// One requirement of a selector: a key, an operator and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Builds a requirement, validating it as kube's `labels.NewRequirement` does.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, SelectorError> {
        let errors = requirement_errors(key, operator, &values);
        if errors.is_empty() {
            Ok(Requirement {
                key: key.to_owned(),
                operator,
                values,
            })
        } else {
            Err(SelectorError::Invalid(aggregate(errors)))
        }
    }

    /// The label key this requirement looks at.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator relating the key and the values.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, as given (sorted and de-duplicated when parsed from a string).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a set of labels satisfies this requirement.
    pub fn matches<L: LabelSet + ?Sized>(&self, labels: Option<&L>) -> bool {
        let value = labels.and_then(|labels| labels.label(&self.key));
        let text = value.flatten();
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                text.is_some_and(|text| self.has_value(text))
            }
            Operator::NotIn | Operator::NotEquals => text.is_none_or(|text| !self.has_value(text)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => self.compare(text),
        }
    }

    /// Whether `value` is one of this requirement's values.
    fn has_value(&self, value: &str) -> bool {
        self.values.iter().any(|candidate| candidate == value)
    }

    /// Integer comparison for `gt` and `lt`; anything unparsable does not match.
    fn compare(&self, label: Option<&str>) -> bool {
        let Some(label) = label.and_then(|label| label.parse::<i64>().ok()) else {
            return false;
        };
        let [bound] = self.values.as_slice() else {
            return false;
        };
        let Ok(bound) = bound.parse::<i64>() else {
            return false;
        };
        match self.operator {
            Operator::GreaterThan => label > bound,
            _ => label < bound,
        }
    }
}

impl fmt::Display for Requirement {
    /// Formats the requirement as kube's `Requirement.String()` does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let (open, close) = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::In => (" in (", ")"),
            Operator::NotIn => (" notin (", ")"),
            Operator::Equals => ("=", ""),
            Operator::DoubleEquals => ("==", ""),
            Operator::NotEquals => ("!=", ""),
            Operator::GreaterThan => (">", ""),
            Operator::LessThan => ("<", ""),
        };
        // kube keeps values in a set: printed sorted, each once.
        let mut values = self.values.clone();
        values.sort();
        values.dedup();
        write!(f, "{open}{}{close}", values.join(","))
    }
}

/// A label selector: the AND of its requirements, or a selector matching nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl LabelSelector {
    /// A selector that matches every object.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// A selector that matches no object (what a missing `metav1.LabelSelector` means).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parses a `labelSelector` query string.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let tokens = lex(selector);
        let mut requirements = Parser {
            tokens: &tokens,
            position: 0,
        }
        .parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Converts a `metav1.LabelSelector` JSON object (`matchLabels`, `matchExpressions`).
    ///
    /// `null` gives a selector matching nothing and `{}` one matching everything,
    /// as kube's `metav1.LabelSelectorAsSelector` does.
    pub fn from_label_selector_object(object: &Value) -> Result<Self, SelectorError> {
        let map = match object {
            Value::Null => return Ok(LabelSelector::nothing()),
            Value::Object(map) => map,
            _ => return Err(SelectorError::Malformed("expected an object".to_owned())),
        };
        let mut requirements = match_labels_requirements(map.get("matchLabels"))?;
        requirements.extend(match_expressions_requirements(map.get("matchExpressions"))?);
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether the selector puts no restriction on the labels.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// Whether this is the selector that matches nothing.
    pub fn matches_nothing(&self) -> bool {
        self.nothing
    }

    /// Whether a labels map (`None` when the object has no labels) satisfies the selector.
    pub fn matches<'a>(&self, labels: impl Into<Option<&'a Map<String, Value>>>) -> bool {
        self.matches_labels(labels.into())
    }

    /// Whether a set of labels (`None` when the object has none) satisfies the selector.
    pub fn matches_labels<L: LabelSet + ?Sized>(&self, labels: Option<&L>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether an object's `metadata.labels` satisfy the selector.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.matches(
            object
                .pointer("/metadata/labels")
                .and_then(Value::as_object),
        )
    }

    /// The single value the selector requires for `key`, if it requires exactly one.
    pub fn requires_exact_match(&self, key: &str) -> Option<&str> {
        let requirement = self.requirements.iter().find(|r| r.key == key)?;
        match (requirement.operator, requirement.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [value]) => Some(value),
            _ => None,
        }
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    /// Parses a `labelSelector` query string.
    fn from_str(selector: &str) -> Result<Self, Self::Err> {
        LabelSelector::parse(selector)
    }
}

impl fmt::Display for LabelSelector {
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

/// Requirements for `matchLabels`: one `key=value` each.
fn match_labels_requirements(labels: Option<&Value>) -> Result<Vec<Requirement>, SelectorError> {
    let Some(labels) = labels.filter(|labels| !labels.is_null()) else {
        return Ok(Vec::new());
    };
    let labels = labels
        .as_object()
        .ok_or_else(|| SelectorError::Malformed("matchLabels must be an object".to_owned()))?;
    labels
        .iter()
        .map(|(key, value)| {
            let value = value.as_str().ok_or_else(|| {
                SelectorError::Malformed(format!("matchLabels[{key}] must be a string"))
            })?;
            Requirement::new(key, Operator::Equals, vec![value.to_owned()])
        })
        .collect()
}

/// Requirements for `matchExpressions`.
fn match_expressions_requirements(
    expressions: Option<&Value>,
) -> Result<Vec<Requirement>, SelectorError> {
    let Some(expressions) = expressions.filter(|expressions| !expressions.is_null()) else {
        return Ok(Vec::new());
    };
    let expressions = expressions
        .as_array()
        .ok_or_else(|| SelectorError::Malformed("matchExpressions must be a list".to_owned()))?;
    expressions.iter().map(expression_requirement).collect()
}

/// One `matchExpressions` entry as a requirement.
fn expression_requirement(expression: &Value) -> Result<Requirement, SelectorError> {
    let text = |field: &str| {
        expression
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let operator = match text("operator") {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        other => return Err(SelectorError::UnknownOperator(other.to_owned())),
    };
    let values = match expression.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(values)) => values
            .iter()
            .map(|value| value.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| SelectorError::Malformed("values must be strings".to_owned()))?,
        Some(_) => return Err(SelectorError::Malformed("values must be a list".to_owned())),
    };
    Requirement::new(text("key"), operator, values)
}

/// Field errors for a requirement, in the order kube's `NewRequirement` reports them.
fn requirement_errors(key: &str, operator: Operator, values: &[String]) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(error) = key_error("key", key) {
        errors.push(error);
    }
    let values_detail = match operator {
        Operator::In | Operator::NotIn if values.is_empty() => {
            Some("for 'in', 'notin' operators, values set can't be empty")
        }
        Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if values.len() != 1 => {
            Some("exact-match compatibility requires one single value")
        }
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
            Some("values set must be empty for exists and does not exist")
        }
        Operator::GreaterThan | Operator::LessThan if values.len() != 1 => {
            Some("for 'Gt', 'Lt' operators, exactly one value is required")
        }
        _ => None,
    };
    if let Some(detail) = values_detail {
        errors.push(invalid("values", &go_string_slice(values), detail));
    }
    if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
        for (index, value) in values.iter().enumerate() {
            if value.parse::<i64>().is_err() {
                let detail = "for 'Gt', 'Lt' operators, the value must be an integer";
                errors.push(invalid(
                    &format!("values[{index}]"),
                    &go_quote(value),
                    detail,
                ));
            }
        }
    }
    for (index, value) in values.iter().enumerate() {
        let problems = crate::validation::label_value(value);
        if !problems.is_empty() {
            let field = format!("values[{index}][{key}]");
            errors.push(invalid(&field, &go_quote(value), &problems.join("; ")));
        }
    }
    errors
}

/// kube's `validateLabelKey`: a field error when `key` is not a qualified name.
fn key_error(field: &str, key: &str) -> Option<String> {
    let problems = crate::validation::qualified_name(key);
    (!problems.is_empty()).then(|| invalid(field, &go_quote(key), &problems.join("; ")))
}

/// Formats a `field.Invalid` error as kube prints it.
fn invalid(field: &str, value: &str, detail: &str) -> String {
    format!("{field}: Invalid value: {value}: {detail}")
}

/// Joins field errors as kube's `ErrorList.ToAggregate().Error()` does.
fn aggregate(mut errors: Vec<String>) -> String {
    let mut seen = std::collections::HashSet::new();
    errors.retain(|error| seen.insert(error.clone()));
    match errors.as_slice() {
        [single] => single.clone(),
        _ => format!("[{}]", errors.join(", ")),
    }
}

/// A string quoted like Go's `%q`.
fn go_quote(value: &str) -> String {
    format!("{value:?}")
}

/// A string slice printed like Go's `%#v`.
fn go_string_slice(values: &[String]) -> String {
    if values.is_empty() {
        return "[]string(nil)".to_owned();
    }
    let quoted: Vec<String> = values.iter().map(|value| go_quote(value)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// A token of the selector language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    /// A character sequence the lexer could not read.
    Error,
    /// The end of the input.
    End,
    /// `)`.
    ClosedPar,
    /// `,`.
    Comma,
    /// `!`.
    DoesNotExist,
    /// `==`.
    DoubleEquals,
    /// `=`.
    Equals,
    /// `>`.
    GreaterThan,
    /// A key or a value.
    Identifier,
    /// `in`.
    In,
    /// `<`.
    LessThan,
    /// `!=`.
    NotEquals,
    /// `notin`.
    NotIn,
    /// `(`.
    OpenPar,
}

/// A token and the text it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Scanned {
    token: Token,
    literal: String,
}

/// The token a literal stands for, if it is an operator or a keyword.
fn keyword(literal: &str) -> Option<Token> {
    Some(match literal {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

/// Whether a byte can start an operator.
fn is_special(byte: u8) -> bool {
    matches!(byte, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Whether a byte is blank for the lexer.
fn is_blank(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

/// Splits a selector into tokens, ending with `Token::End`.
fn lex(input: &str) -> Vec<Scanned> {
    let bytes = input.as_bytes();
    let mut position = 0;
    let mut tokens = Vec::new();
    loop {
        while position < bytes.len() && is_blank(bytes[position]) {
            position += 1;
        }
        let Some(&byte) = bytes.get(position) else {
            tokens.push(Scanned {
                token: Token::End,
                literal: String::new(),
            });
            return tokens;
        };
        let (scanned, next) = if is_special(byte) {
            lex_symbol(input, position)
        } else {
            lex_word(input, position)
        };
        tokens.push(scanned);
        position = next;
    }
}

/// Reads the longest operator starting at `start`.
fn lex_symbol(input: &str, start: usize) -> (Scanned, usize) {
    let bytes = input.as_bytes();
    let mut end = start;
    let mut last: Option<(Token, usize)> = None;
    while end < bytes.len() && is_special(bytes[end]) {
        end += 1;
        match keyword(&input[start..end]) {
            Some(token) => last = Some((token, end)),
            None if last.is_some() => break,
            None => {}
        }
    }
    match last {
        Some((token, end)) => (
            Scanned {
                token,
                literal: input[start..end].to_owned(),
            },
            end,
        ),
        None => {
            let literal = format!("error expected: keyword found '{}'", &input[start..end]);
            (
                Scanned {
                    token: Token::Error,
                    literal,
                },
                end,
            )
        }
    }
}

/// Reads an identifier or a keyword starting at `start`.
fn lex_word(input: &str, start: usize) -> (Scanned, usize) {
    let bytes = input.as_bytes();
    let mut end = start;
    while end < bytes.len() && !is_special(bytes[end]) && !is_blank(bytes[end]) {
        end += 1;
    }
    let literal = input[start..end].to_owned();
    let token = keyword(&literal).unwrap_or(Token::Identifier);
    (Scanned { token, literal }, end)
}

/// Whether a token is read as an operator or, after an operator, as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    /// `in` and `notin` are operators.
    KeyAndOperator,
    /// `in` and `notin` are plain identifiers.
    Values,
}

/// Recursive-descent parser over the scanned tokens.
struct Parser<'a> {
    tokens: &'a [Scanned],
    position: usize,
}

impl Parser<'_> {
    /// The current token, without consuming it.
    fn lookahead(&self, context: Context) -> (Token, &str) {
        let scanned = &self.tokens[self.position.min(self.tokens.len() - 1)];
        (in_context(scanned.token, context), &scanned.literal)
    }

    /// The current token, consuming it.
    fn consume(&mut self, context: Context) -> (Token, String) {
        let (token, literal) = self.lookahead(context);
        let literal = literal.to_owned();
        self.position += 1;
        (token, literal)
    }

    /// `<selector>`: requirements separated by commas.
    fn parse(mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self.requirement()?;
                    requirements.push(requirement);
                    if self.after_requirement()? {
                        return Ok(requirements);
                    }
                }
                Token::End => return Ok(requirements),
                _ => {
                    return Err(SelectorError::Syntax(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    /// Consumes what follows a requirement: a comma (then an identifier) or the
    /// end, which it reports as `true`.
    fn after_requirement(&mut self) -> Result<bool, SelectorError> {
        let (token, literal) = self.consume(Context::Values);
        match token {
            Token::End => Ok(true),
            Token::Comma => match self.lookahead(Context::Values) {
                (Token::Identifier | Token::DoesNotExist, _) => Ok(false),
                (_, next) => Err(SelectorError::Syntax(format!(
                    "found '{next}', expected: identifier after ','"
                ))),
            },
            _ => Err(SelectorError::Syntax(format!(
                "found '{literal}', expected: ',' or 'end of string'"
            ))),
        }
    }

    /// `<requirement>`: a key with its inferred or explicit operator and values.
    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let (key, operator) = self.key_and_inferred_operator()?;
        if let Some(operator) = operator {
            return Requirement::new(&key, operator, Vec::new()).map_err(unwrap_invalid);
        }
        let operator = self.operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.values()?,
            _ => self.exact_value()?,
        };
        Requirement::new(&key, operator, values).map_err(unwrap_invalid)
    }

    /// Reads `[!] KEY`; the operator is known when the key stands alone.
    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Operator>), SelectorError> {
        let (mut token, mut literal) = self.consume(Context::Values);
        let negated = token == Token::DoesNotExist;
        if negated {
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(SelectorError::Requirement(format!(
                "found '{literal}', expected: identifier"
            )));
        }
        if let Some(error) = key_error("<nil>", &literal) {
            return Err(SelectorError::Requirement(error));
        }
        let alone = matches!(self.lookahead(Context::Values).0, Token::End | Token::Comma);
        let operator = match (negated, alone) {
            (true, _) => Some(Operator::DoesNotExist),
            (false, true) => Some(Operator::Exists),
            (false, false) => None,
        };
        Ok((literal, operator))
    }

    /// Reads a binary operator.
    fn operator(&mut self) -> Result<Operator, SelectorError> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(SelectorError::Requirement(format!(
                    "found '{literal}', expected: {BINARY_OPERATORS}"
                )));
            }
        })
    }

    /// Reads `( VALUES )`, returning the sorted, de-duplicated values.
    fn values(&mut self) -> Result<Vec<String>, SelectorError> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(SelectorError::Requirement(format!(
                "found '{literal}' expected: '('"
            )));
        }
        let (token, literal) = self.lookahead(Context::Values);
        let literal = literal.to_owned();
        let mut values = match token {
            Token::Identifier | Token::Comma => {
                let values = self.identifier_list()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(SelectorError::Requirement(format!(
                        "found '{literal}', expected: ')'"
                    )));
                }
                values
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                vec![String::new()]
            }
            _ => {
                return Err(SelectorError::Requirement(format!(
                    "found '{literal}', expected: ',', ')' or identifier"
                )));
            }
        };
        values.sort();
        values.dedup();
        Ok(values)
    }

    /// Reads comma-separated, possibly empty, identifiers up to (not including) `)`.
    fn identifier_list(&mut self) -> Result<Vec<String>, SelectorError> {
        let mut values = Vec::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.push(literal);
                    match self.lookahead(Context::Values) {
                        (Token::Comma, _) => continue,
                        (Token::ClosedPar, _) => return Ok(values),
                        (_, next) => {
                            return Err(SelectorError::Requirement(format!(
                                "found '{next}', expected: ',' or ')'"
                            )));
                        }
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.push(String::new());
                            return Ok(values);
                        }
                        Token::Comma => values.push(String::new()),
                        _ => {}
                    }
                }
                _ => {
                    return Err(SelectorError::Requirement(format!(
                        "found '{literal}', expected: ',', or identifier"
                    )));
                }
            }
        }
    }

    /// Reads the single value of an exact-match or comparison requirement.
    fn exact_value(&mut self) -> Result<Vec<String>, SelectorError> {
        if matches!(self.lookahead(Context::Values).0, Token::End | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            Ok(vec![literal])
        } else {
            Err(SelectorError::Requirement(format!(
                "found '{literal}', expected: identifier"
            )))
        }
    }
}

/// `in` and `notin` read as identifiers where values are expected.
fn in_context(token: Token, context: Context) -> Token {
    match (token, context) {
        (Token::In | Token::NotIn, Context::Values) => Token::Identifier,
        _ => token,
    }
}

/// A requirement validation error, as the parser reports it.
fn unwrap_invalid(error: SelectorError) -> SelectorError {
    match error {
        SelectorError::Invalid(message) => SelectorError::Requirement(message),
        other => SelectorError::Requirement(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn parses_and_matches_table() {
        let cases: &[(&str, Value, bool)] = &[
            ("", json!({"a": "b"}), true),
            ("a=b", json!({"a": "b"}), true),
            ("a==b", json!({"a": "b"}), true),
            ("a=b", json!({"a": "c"}), false),
            ("a!=b", json!({"a": "c"}), true),
            ("a!=b", json!({}), true),
            ("a!=b", json!({"a": "b"}), false),
            ("a", json!({"a": ""}), true),
            ("a", json!({}), false),
            ("!a", json!({}), true),
            ("!a", json!({"a": "x"}), false),
            ("a in (x,y)", json!({"a": "y"}), true),
            ("a in (x,y)", json!({}), false),
            ("a notin (x,y)", json!({}), true),
            ("a notin (x,y)", json!({"a": "x"}), false),
            ("a notin (x,y)", json!({"a": "z"}), true),
            ("a>5", json!({"a": "6"}), true),
            ("a>5", json!({"a": "5"}), false),
            ("a<5", json!({"a": "-1"}), true),
            ("a<5", json!({"a": "x"}), false),
            ("a>5", json!({}), false),
            ("a=b,c=d", json!({"a": "b", "c": "d"}), true),
            ("a=b,c=d", json!({"a": "b", "c": "e"}), false),
            (
                "  a = b ,  c  in ( d , e )  ",
                json!({"a": "b", "c": "e"}),
                true,
            ),
            ("a=", json!({"a": ""}), true),
            ("a=,b", json!({"a": "", "b": "x"}), true),
            ("a in ()", json!({"a": ""}), true),
            ("a in (,x)", json!({"a": ""}), true),
            ("in in (in)", json!({"in": "in"}), true),
            (
                "example.com/app=web",
                json!({"example.com/app": "web"}),
                true,
            ),
            ("app=web-1.2_3", json!({"app": "web-1.2_3"}), true),
            (
                "x in (foo,,baz),y,z notin ()",
                json!({"x": "", "y": "1"}),
                true,
            ),
            (
                "x in (foo,,baz),y,z notin ()",
                json!({"x": "baz", "y": "1", "z": ""}),
                false,
            ),
        ];
        for (selector, given, expected) in cases {
            let parsed = LabelSelector::parse(selector)
                .unwrap_or_else(|e| panic!("{selector:?} failed to parse: {e}"));
            assert_eq!(
                parsed.matches(&labels(given.clone())),
                *expected,
                "{selector:?} on {given}"
            );
            // The cache's compact copy of the labels matches the same way.
            let compact = Labels::from_map(&labels(given.clone()));
            assert_eq!(
                parsed.matches_labels(Some(&compact)),
                *expected,
                "{selector:?} on compact {given}"
            );
        }
    }

    #[test]
    fn missing_labels_map_is_empty_labels() {
        let exists: LabelSelector = "a".parse().unwrap();
        let absent: LabelSelector = "!a,b!=c,d notin (e)".parse().unwrap();
        assert!(!exists.matches(None));
        assert!(absent.matches(None));
        assert!(absent.matches_object(&json!({"metadata": {"name": "x"}})));
        assert!(exists.matches_object(&json!({"metadata": {"labels": {"a": "1"}}})));
    }

    #[test]
    fn errors_use_kube_wording() {
        let cases: &[(&str, &str)] = &[
            (
                ",",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            ("a,", "found '', expected: identifier after ','"),
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            (
                "a b",
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "a in x",
                "unable to parse requirement: found 'x' expected: '('",
            ),
            (
                "a in (x",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            (
                "a in (=",
                "unable to parse requirement: found '=', expected: ',', ')' or identifier",
            ),
            (
                "a=(",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "!=",
                "found '!=', expected: !, identifier, or 'end of string'",
            ),
            (
                "!,a",
                "unable to parse requirement: found ',', expected: identifier",
            ),
            (
                "a>x",
                "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            (
                "a/b/c",
                "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            ),
            (
                "-a",
                "unable to parse requirement: <nil>: Invalid value: \"-a\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ),
            (
                "/a",
                "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty",
            ),
            (
                "a=b-",
                "unable to parse requirement: values[0][a]: Invalid value: \"b-\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ),
        ];
        for (selector, message) in cases {
            let error = LabelSelector::parse(selector).expect_err(selector);
            assert_eq!(error.to_string(), *message, "{selector:?}");
        }
    }

    #[test]
    fn long_key_and_value_are_rejected() {
        let long = "a".repeat(64);
        let error = LabelSelector::parse(&long).unwrap_err().to_string();
        assert!(
            error.contains("name part must be no more than 63 characters"),
            "{error}"
        );
        let error = LabelSelector::parse(&format!("a={long}"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("must be no more than 63 characters"),
            "{error}"
        );
        assert!(LabelSelector::parse(&format!("{}=x", "a".repeat(63))).is_ok());
        let upper = LabelSelector::parse("Example.com/a")
            .unwrap_err()
            .to_string();
        assert!(
            upper.contains("prefix part a lowercase RFC 1123 subdomain"),
            "{upper}"
        );
    }

    #[test]
    fn display_is_sorted_like_kube() {
        let selector: LabelSelector = "z in (b,a,a), !y, x=1, w>3".parse().unwrap();
        assert_eq!(selector.to_string(), "w>3,x=1,!y,z in (a,b)");
    }

    #[test]
    fn exact_match_and_emptiness() {
        let selector: LabelSelector = "a=b,c in (d),e in (f,g)".parse().unwrap();
        assert_eq!(selector.requires_exact_match("a"), Some("b"));
        assert_eq!(selector.requires_exact_match("c"), Some("d"));
        assert_eq!(selector.requires_exact_match("e"), None);
        assert!(LabelSelector::parse("").unwrap().is_empty());
        assert!(!LabelSelector::nothing().is_empty());
        assert!(!LabelSelector::nothing().matches(None));
    }

    #[test]
    fn converts_label_selector_objects() {
        let object = json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "back"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "Exists"},
                {"key": "env", "operator": "NotIn", "values": ["dev"]}
            ]
        });
        let selector = LabelSelector::from_label_selector_object(&object).unwrap();
        assert_eq!(
            selector.to_string(),
            "app=web,!canary,env notin (dev),tier in (back,front),zone"
        );
        let good = labels(json!({"app": "web", "tier": "back", "zone": "a"}));
        let canary = labels(json!({"app": "web", "tier": "back", "zone": "a", "canary": "1"}));
        assert!(selector.matches(&good));
        assert!(!selector.matches(&canary));
        assert!(
            LabelSelector::from_label_selector_object(&json!({}))
                .unwrap()
                .is_empty()
        );
        assert!(
            LabelSelector::from_label_selector_object(&Value::Null)
                .unwrap()
                .matches_nothing()
        );
    }

    #[test]
    fn label_selector_object_errors() {
        let bad_operator =
            json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]});
        assert_eq!(
            LabelSelector::from_label_selector_object(&bad_operator)
                .unwrap_err()
                .to_string(),
            "\"Gt\" is not a valid label selector operator"
        );
        let empty_in = json!({"matchExpressions": [{"key": "a", "operator": "In"}]});
        assert_eq!(
            LabelSelector::from_label_selector_object(&empty_in)
                .unwrap_err()
                .to_string(),
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
        );
        let exists_values =
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]});
        assert_eq!(
            LabelSelector::from_label_selector_object(&exists_values)
                .unwrap_err()
                .to_string(),
            "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist"
        );
        let bad_key = json!({"matchLabels": {"-a": "b"}});
        let message = LabelSelector::from_label_selector_object(&bad_key)
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("key: Invalid value: \"-a\": name part"),
            "{message}"
        );
    }

    /// Found by the `label_selector` fuzz target: a selector object with a
    /// value twice printed it twice, and the printed form parsed back
    /// without the repeat.
    #[test]
    fn repeated_values_print_once() {
        let selector = LabelSelector::from_label_selector_object(&serde_json::json!({
            "matchExpressions": [{"key": "c", "operator": "In", "values": ["e", "e"]}]
        }))
        .unwrap();
        assert_eq!(selector.to_string(), "c in (e)");
        assert_eq!(
            LabelSelector::parse(&selector.to_string())
                .unwrap()
                .to_string(),
            "c in (e)"
        );
    }
}
