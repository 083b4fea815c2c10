//! Label selectors given on the command line (`--namespace-selector`, `--resource-label-selector`):
//! upstream v1's legacy forms are normalised (`key:value` → `key=value`, `key:*`/`key=*` → `key`), elements are
//! joined with `,`, and the result is validated like Kubernetes' `labels.Parse` before it is sent to the API
//! server as a watch `labelSelector`.
//!
//! Pure: no client, no I/O; the controller sends the result.

/// An invalid selector, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector {selector:?}: {reason}")]
pub struct SelectorError {
    /// The normalised selector.
    pub selector: String,
    /// What is wrong.
    pub reason: String,
}

/// Normalises the flag's elements (each may carry the chart's literal quotes) and validates the result.
/// Returns `None` when no element is given.
pub fn normalise(elements: &[String]) -> Result<Option<String>, SelectorError> {
    let parts: Vec<String> = elements
        .iter()
        .map(|e| e.trim().trim_matches('"').trim().to_owned())
        .filter(|e| !e.is_empty())
        .map(|e| legacy(&e))
        .collect();
    if parts.is_empty() {
        return Ok(None);
    }
    let selector = parts.join(",");
    validate(&selector).map_err(|reason| SelectorError { selector: selector.clone(), reason })?;
    Ok(Some(selector))
}

/// upstream v1 conversions for one element.
fn legacy(element: &str) -> String {
    if let Some(key) = element.strip_suffix(":*").or_else(|| element.strip_suffix("=*")) {
        return key.to_owned();
    }
    let has_operator = ["=", "!", " in ", " notin "].iter().any(|op| element.contains(op));
    match element.split_once(':') {
        Some((k, v)) if !has_operator => format!("{k}={v}"),
        _ => element.to_owned(),
    }
}

/// Splits on commas that are not inside parentheses.
fn requirements(selector: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&selector[start..]);
    out
}

fn validate(selector: &str) -> Result<(), String> {
    for req in requirements(selector) {
        let req = req.trim();
        if req.is_empty() {
            return Err("empty requirement".into());
        }
        if let Some(key) = req.strip_prefix('!') {
            check_key(key.trim())?;
            continue;
        }
        if let Some((key, value)) =
            req.split_once("!=").or_else(|| req.split_once("==")).or_else(|| req.split_once('='))
        {
            check_key(key.trim())?;
            check_value(value.trim())?;
            continue;
        }
        let words: Vec<&str> = req.splitn(2, char::is_whitespace).collect();
        match words.as_slice() {
            [key] => check_key(key)?,
            [key, rest] => {
                check_key(key)?;
                let rest = rest.trim();
                let values = rest
                    .strip_prefix("in")
                    .or_else(|| rest.strip_prefix("notin"))
                    .map(str::trim)
                    .and_then(|v| v.strip_prefix('('))
                    .and_then(|v| v.strip_suffix(')'))
                    .ok_or_else(|| format!("expected '=', '!=', 'in (…)' or 'notin (…)' after {key:?}"))?;
                for v in values.split(',') {
                    check_value(v.trim())?;
                }
            }
            _ => return Err("empty requirement".into()),
        }
    }
    Ok(())
}

fn is_name(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix
        .is_none_or(|p| !p.is_empty() && p.len() <= 253 && p.split('.').all(|l| is_name(l, 63) && !l.contains('_')));
    if prefix_ok && is_name(name, 63) { Ok(()) } else { Err(format!("invalid label key {key:?}")) }
}

fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_name(value, 63) { Ok(()) } else { Err(format!("invalid label value {value:?}")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(elements: &[&str]) -> Result<Option<String>, SelectorError> {
        normalise(&elements.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn legacy_forms_are_converted_as_upstream_v1() {
        assert_eq!(norm(&["team:a"]), Ok(Some("team=a".into())));
        assert_eq!(norm(&["reloader:*"]), Ok(Some("reloader".into())));
        assert_eq!(norm(&["reloader=*", "env:prod"]), Ok(Some("reloader,env=prod".into())));
    }

    #[test]
    fn the_charts_literal_quotes_are_stripped() {
        assert_eq!(norm(&["\"team=a,env!=dev\""]), Ok(Some("team=a,env!=dev".into())));
    }

    #[test]
    fn standard_syntax_is_accepted() {
        for s in
            ["a=b", "a==b", "a!=b", "!a", "a", "a in (x, y)", "a notin (x)", "example.com/a=b", "a=b,c notin (d,e),!f"]
        {
            assert!(norm(&[s]).is_ok(), "{s}");
        }
        assert_eq!(norm(&[]), Ok(None));
    }

    #[test]
    fn invalid_selectors_are_rejected_with_a_reason() {
        for s in ["a=b=c", "-a=b", "a in x", "a=b,", "bad key=x", "a=(b)"] {
            assert!(norm(&[s]).is_err(), "{s} should be rejected");
        }
        let e = norm(&["a=b=c"]).expect_err("invalid");
        assert_eq!(e.to_string(), "invalid selector \"a=b=c\": invalid label value \"b=c\"");
    }
}
