//! Label selectors: parses the Kubernetes string syntax (`app=web,tier!=db,env in (a,b),!old`)
//! into kube's [`Expression`]s and matches them against labels looked up by key. kube-core has
//! the expression type but no parser for the string form manifests and `cache.list-objects`
//! use, and its matcher wants a `BTreeMap`, which the cache does not keep (too heavy per object).

use std::collections::BTreeSet;
use std::str::FromStr;

pub use kube::core::Expression;

/// A label selector that failed to parse; the message says where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label selector {input:?}: {reason}")]
pub struct SelectorError {
    input: String,
    reason: String,
}

/// A parsed selector that remembers its source text, for display and for the API server's
/// `labelSelector` parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelector {
    text: String,
    expressions: Vec<Expression>,
}

impl LabelSelector {
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether labels, given as a lookup by key, satisfy every requirement.
    pub fn matches<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.expressions.iter().all(|e| match e {
            Expression::In(key, values) => label(key).is_some_and(|v| values.contains(v)),
            Expression::NotIn(key, values) => label(key).is_none_or(|v| !values.contains(v)),
            Expression::Exists(key) => label(key).is_some(),
            Expression::DoesNotExist(key) => label(key).is_none(),
            Expression::Equal(key, value) => label(key) == Some(value.as_str()),
            Expression::NotEqual(key, value) => label(key) != Some(value.as_str()),
        })
    }
}

impl LabelSelector {
    /// A label selector as objects spell it (`metav1.LabelSelector`: `matchLabels`,
    /// `matchExpressions` with the operators `In`, `NotIn`, `Exists`, `DoesNotExist`), through
    /// its string form. One that selects nothing in particular (neither field, or both empty) is
    /// refused: as a parent's selector it would claim everything.
    pub fn from_object(object: &serde_json::Value) -> Result<Self, SelectorError> {
        let fail = |reason: String| SelectorError { input: object.to_string(), reason };
        let mut requirements = Vec::new();
        for (key, value) in object.get("matchLabels").and_then(|m| m.as_object()).into_iter().flatten() {
            let value = value.as_str().ok_or_else(|| fail(format!("matchLabels.{key} is not a string")))?;
            requirements.push(format!("{key}={value}"));
        }
        for (i, expression) in object.get("matchExpressions").and_then(|m| m.as_array()).into_iter().flatten().enumerate() {
            let field = |name: &str| expression.get(name).and_then(|v| v.as_str()).ok_or_else(|| fail(format!("matchExpressions[{i}].{name} is missing")));
            let (key, operator) = (field("key")?, field("operator")?);
            let values: Vec<&str> = expression.get("values").and_then(|v| v.as_array()).into_iter().flatten().filter_map(|v| v.as_str()).collect();
            requirements.push(match operator {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.to_string(),
                "DoesNotExist" => format!("!{key}"),
                other => return Err(fail(format!("matchExpressions[{i}].operator {other:?} is not In, NotIn, Exists or DoesNotExist"))),
            });
        }
        if requirements.is_empty() {
            return Err(fail("must have either matchLabels, matchExpressions, or both".into()));
        }
        requirements.join(",").parse()
    }
}

impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// As its text (a shard Lease publishes the selectors of the plugins it runs).
impl serde::Serialize for LabelSelector {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for LabelSelector {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(input: &str) -> Result<Self, SelectorError> {
        let fail = |reason: String| SelectorError { input: input.to_string(), reason };
        let mut expressions = Vec::new();
        for requirement in split_requirements(input).map_err(fail)? {
            expressions.push(parse_requirement(requirement).map_err(fail)?);
        }
        Ok(LabelSelector { text: input.trim().to_string(), expressions })
    }
}

/// Splits on commas that are not inside a `( … )` value set.
fn split_requirements(input: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("unbalanced ')'")?,
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '('".into());
    }
    parts.push(&input[start..]);
    if parts.len() == 1 && parts[0].trim().is_empty() {
        return Ok(Vec::new());
    }
    Ok(parts)
}

fn parse_requirement(req: &str) -> Result<Expression, String> {
    let req = req.trim();
    if req.is_empty() {
        return Err("empty requirement".into());
    }
    if let Some(key) = req.strip_prefix('!') {
        return Ok(Expression::DoesNotExist(label_key(key.trim())?));
    }
    if let Some((key, value)) = req.split_once("!=") {
        return Ok(Expression::NotEqual(label_key(key.trim())?, label_value(value.trim())?));
    }
    if let Some((key, value)) = req.split_once("==").or_else(|| req.split_once('=')) {
        return Ok(Expression::Equal(label_key(key.trim())?, label_value(value.trim())?));
    }
    let mut words = req.splitn(2, char::is_whitespace);
    let key = label_key(words.next().unwrap_or_default())?;
    let Some(rest) = words.next().map(str::trim) else {
        return Ok(Expression::Exists(key));
    };
    let (negated, set) = if let Some(set) = rest.strip_prefix("notin") {
        (true, set)
    } else if let Some(set) = rest.strip_prefix("in") {
        (false, set)
    } else {
        return Err(format!("expected '=', '!=', 'in' or 'notin' after {key:?}"));
    };
    let set = set.trim();
    let inner = set.strip_prefix('(').and_then(|s| s.strip_suffix(')')).ok_or_else(|| format!("the values of {key:?} must be in parentheses"))?;
    let values = inner.split(',').map(|v| label_value(v.trim())).collect::<Result<BTreeSet<_>, _>>()?;
    Ok(if negated { Expression::NotIn(key, values) } else { Expression::In(key, values) })
}

/// Validates a label key: an optional DNS-subdomain prefix and '/', then a name of at most 63
/// characters. Shared with manifest validation (label mappings name a key).
pub fn label_key(key: &str) -> Result<String, String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && !crate::resource::is_dns_subdomain(prefix)
    {
        return Err(format!("label key prefix {prefix:?} is not a DNS subdomain"));
    }
    if !is_label_name(name) {
        return Err(format!("label key {key:?} must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"));
    }
    Ok(key.to_string())
}

fn label_value(value: &str) -> Result<String, String> {
    if value.is_empty() || is_label_name(value) { Ok(value.to_string()) } else { Err(format!("label value {value:?} is not valid")) }
}

fn is_label_name(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty() && s.len() <= 63 && s.starts_with(alnum) && s.ends_with(alnum) && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    impl LabelSelector {
        fn matches_map(&self, labels: &BTreeMap<String, String>) -> bool {
            self.matches(|k| labels.get(k).map(String::as_str))
        }
    }

    #[test]
    fn parses_every_operator_and_matches() {
        let s: LabelSelector = "app=web, tier!=db,env in (prod, staging),zone notin (x),team,!legacy".parse().unwrap();
        let good = labels(&[("app", "web"), ("tier", "fe"), ("env", "prod"), ("zone", "y"), ("team", "a")]);
        assert!(s.matches_map(&good));
        let mut bad = good.clone();
        bad.insert("legacy".into(), "1".into());
        assert!(!s.matches_map(&bad));
        let mut bad = good.clone();
        bad.insert("env".into(), "dev".into());
        assert!(!s.matches_map(&bad));
        assert!(!s.matches_map(&labels(&[("app", "web")])));
    }

    #[test]
    fn double_equals_and_prefixed_keys() {
        let s: LabelSelector = "example.com/role==leader".parse().unwrap();
        assert!(s.matches_map(&labels(&[("example.com/role", "leader")])));
        assert!(!s.matches_map(&labels(&[("role", "leader")])));
    }

    #[test]
    fn empty_selects_everything() {
        let s: LabelSelector = "".parse().unwrap();
        assert!(s.matches_map(&labels(&[])));
    }

    /// The table of cases the SDKs' fake hosts are held to as well (`tests/cases/selectors.yaml`).
    #[test]
    fn the_shared_table_of_cases() {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Case {
            selector: String,
            #[serde(default)]
            invalid: bool,
            #[serde(default, rename = "match")]
            matches: Vec<BTreeMap<String, String>>,
            #[serde(default)]
            miss: Vec<BTreeMap<String, String>>,
        }
        let cases: Vec<Case> = serde_saphyr::from_str(include_str!("../../tests/cases/selectors.yaml")).expect("the table parses");
        assert!(cases.len() > 30, "{} cases", cases.len());
        for case in cases {
            let parsed = case.selector.parse::<LabelSelector>();
            if case.invalid {
                assert!(parsed.is_err(), "{:?} should be refused", case.selector);
                continue;
            }
            let selector = parsed.unwrap_or_else(|e| panic!("{:?}: {e}", case.selector));
            for labels in &case.matches {
                assert!(selector.matches_map(labels), "{:?} should select {labels:?}", case.selector);
            }
            for labels in &case.miss {
                assert!(!selector.matches_map(labels), "{:?} should not select {labels:?}", case.selector);
            }
        }
    }

    #[test]
    fn object_selectors_become_the_string_form() {
        let object = serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}, {"key": "legacy", "operator": "DoesNotExist"}],
        });
        let s = LabelSelector::from_object(&object).unwrap();
        assert_eq!(s.as_str(), "app=web,tier in (a,b),!legacy");
        assert!(s.matches_map(&labels(&[("app", "web"), ("tier", "b")])));
        assert!(!s.matches_map(&labels(&[("app", "web"), ("tier", "b"), ("legacy", "")])));
        for (object, needle) in [
            (serde_json::json!({}), "must have either matchLabels"),
            (serde_json::json!({"matchLabels": {}}), "must have either matchLabels"),
            (serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Gt"}]}), "is not In, NotIn"),
            (serde_json::json!({"matchLabels": {"a": 1}}), "not a string"),
        ] {
            let err = LabelSelector::from_object(&object).unwrap_err().to_string();
            assert!(err.contains(needle), "{object}: {err}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        for (input, needle) in [
            ("app in web", "parentheses"),
            ("app=(", "unbalanced"),
            ("a,,b", "empty requirement"),
            ("-bad=x", "label key"),
            ("app=no spaces", "label value"),
            ("app sometimes (x)", "expected"),
        ] {
            let err = input.parse::<LabelSelector>().unwrap_err().to_string();
            assert!(err.contains(needle), "{input}: {err}");
        }
    }
}
