//! Diagnostics about a hooks file: where (file and JSON path), how bad, and what was expected.
//!
//! The same values feed the runtime's log, `hookbox hooks check` and `hookbox hooks test`, so a
//! person sees before deploying exactly what the runtime will skip.

use std::fmt;

use serde::Serialize;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Probably a mistake, but the part still applies as written.
    Warning,
    /// The part is broken and the runtime skips it.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One finding in one hooks file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The file as the sandbox sees it, e.g. `/.agents/hooks.json`.
    pub file: String,
    /// A JSONPath to the offending part, e.g. `$["security-gate"].pre_tool_execution[0].matcher`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}: {}",
            self.severity, self.file, self.path, self.message
        )
    }
}

/// A JSONPath under construction. Keys that are plain identifiers print as `.key`, others as
/// `["key"]`, so group names with dashes stay readable and unambiguous.
#[derive(Debug, Clone, Default)]
pub(crate) struct JsonPath(String);

impl JsonPath {
    pub(crate) fn root() -> Self {
        JsonPath("$".to_owned())
    }

    pub(crate) fn key(&self, key: &str) -> Self {
        let plain = !key.is_empty()
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !key.starts_with(|c: char| c.is_ascii_digit());
        if plain {
            JsonPath(format!("{}.{key}", self.0))
        } else {
            let quoted = serde_json::to_string(key).unwrap_or_else(|_| format!("\"{key}\""));
            JsonPath(format!("{}[{quoted}]", self.0))
        }
    }

    pub(crate) fn index(&self, index: usize) -> Self {
        JsonPath(format!("{}[{index}]", self.0))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Describes a JSON value's type for "expected X, found Y" messages, with a short excerpt.
pub(crate) fn describe(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => {
            let mut excerpt: String = s.chars().take(40).collect();
            if excerpt.len() < s.len() {
                excerpt.push('…');
            }
            format!("string {excerpt:?}")
        }
        Value::Array(a) => format!("an array of {} item(s)", a.len()),
        Value::Object(_) => "an object".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_quote_keys_that_are_not_identifiers() {
        let p = JsonPath::root()
            .key("security-gate")
            .key("pre_tool_execution")
            .index(0)
            .key("matcher");
        assert_eq!(
            p.as_str(),
            r#"$["security-gate"].pre_tool_execution[0].matcher"#
        );
        assert_eq!(JsonPath::root().key("a\"b").as_str(), r#"$["a\"b"]"#);
        assert_eq!(JsonPath::root().key("").as_str(), r#"$[""]"#);
    }
}
