//! The JSONPath subset kubectl and CRD printer columns use:
//! `.a.b`, `['a.b']`, `[0]`, `[*]`, `..` is not supported, and filters
//! `[?(@.type=="Ready")]` with `==` and `!=`.

use serde_json::Value;

/// A parsed JSONPath.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath(Vec<Step>);

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter {
        path: Vec<String>,
        equal: bool,
        value: Value,
    },
}

/// Why a path did not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unsupported JSONPath {path:?}: {why}")]
pub struct JsonPathError {
    path: String,
    why: &'static str,
}

impl JsonPath {
    /// Parses `.spec.replicas`, `{.spec.replicas}` or `spec.replicas`.
    pub fn parse(path: &str) -> Result<JsonPath, JsonPathError> {
        let err = |why| JsonPathError {
            path: path.to_string(),
            why,
        };
        let text = path.trim();
        let text = text
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or(text);
        let text = text.strip_prefix('$').unwrap_or(text);
        if !text.is_empty() && !text.starts_with('.') && !text.starts_with('[') {
            return Self::parse(&format!(".{text}"));
        }
        let mut steps = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('.') {
                if after.starts_with('.') {
                    return Err(err("recursive descent is not supported"));
                }
                let end = after.find(['.', '[']).unwrap_or(after.len());
                let name = &after[..end];
                if name.is_empty() {
                    return Err(err("empty field name"));
                }
                steps.push(Step::Field(name.to_string()));
                rest = &after[end..];
            } else if let Some(after) = rest.strip_prefix('[') {
                let end = after.find(']').ok_or_else(|| err("unclosed ["))?;
                let inner = &after[..end];
                steps.push(
                    parse_bracket(inner).ok_or_else(|| err("unsupported bracket expression"))?,
                );
                rest = &after[end + 1..];
            } else {
                return Err(err("expected . or ["));
            }
        }
        Ok(JsonPath(steps))
    }

    /// Every value the path selects.
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![root];
        for step in &self.0 {
            let mut next = Vec::new();
            for value in current {
                match step {
                    Step::Field(name) => next.extend(value.get(name)),
                    Step::Index(i) => {
                        if let Some(items) = value.as_array() {
                            let index = if *i < 0 { items.len() as i64 + i } else { *i };
                            next.extend(usize::try_from(index).ok().and_then(|i| items.get(i)));
                        }
                    }
                    Step::All => match value {
                        Value::Array(items) => next.extend(items.iter()),
                        Value::Object(map) => next.extend(map.values()),
                        _ => {}
                    },
                    Step::Filter {
                        path,
                        equal,
                        value: want,
                    } => {
                        for item in value.as_array().into_iter().flatten() {
                            let got = path.iter().try_fold(item, |v, k| v.get(k));
                            if got.is_some_and(|g| (g == want) == *equal) {
                                next.push(item);
                            }
                        }
                    }
                }
            }
            current = next;
        }
        current
    }

    /// The first value the path selects.
    pub fn first<'a>(&self, root: &'a Value) -> Option<&'a Value> {
        self.find(root).into_iter().next()
    }
}

fn parse_bracket(inner: &str) -> Option<Step> {
    let inner = inner.trim();
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(i) = inner.parse::<i64>() {
        return Some(Step::Index(i));
    }
    if let Some(name) = inner.strip_prefix('\'').and_then(|n| n.strip_suffix('\'')) {
        return Some(Step::Field(name.to_string()));
    }
    if let Some(name) = inner.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        return Some(Step::Field(name.to_string()));
    }
    let filter = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let (lhs, equal, rhs) = if let Some((l, r)) = filter.split_once("==") {
        (l, true, r)
    } else {
        let (l, r) = filter.split_once("!=")?;
        (l, false, r)
    };
    let path = lhs
        .trim()
        .strip_prefix("@.")?
        .split('.')
        .map(str::to_string)
        .collect();
    let rhs = rhs.trim();
    let value = if let Some(s) = rhs.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Value::String(s.to_string())
    } else if let Some(s) = rhs.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        Value::String(s.to_string())
    } else {
        serde_json::from_str(rhs).ok()?
    };
    Some(Step::Filter { path, equal, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_select_values() {
        let obj = json!({"spec": {"replicas": 3, "containers": [{"image": "a"}, {"image": "b"}], "a.b": 1},
                         "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "False"}]}});
        let find = |p: &str| {
            JsonPath::parse(p)
                .unwrap()
                .find(&obj)
                .into_iter()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(find(".spec.replicas"), vec![json!(3)]);
        assert_eq!(find("{.spec.replicas}"), vec![json!(3)]);
        assert_eq!(find("spec.replicas"), vec![json!(3)]);
        assert_eq!(
            find(".spec.containers[*].image"),
            vec![json!("a"), json!("b")]
        );
        assert_eq!(find(".spec.containers[-1].image"), vec![json!("b")]);
        assert_eq!(find(".spec['a.b']"), vec![json!(1)]);
        assert_eq!(
            find(r#".status.conditions[?(@.type=="Ready")].status"#),
            vec![json!("True")]
        );
        assert_eq!(
            find(r#".status.conditions[?(@.type!="Ready")].type"#),
            vec![json!("Other")]
        );
        assert!(find(".spec.missing").is_empty());
        assert!(JsonPath::parse(".spec..x").is_err());
        assert!(JsonPath::parse(".spec[").is_err());
    }
}
