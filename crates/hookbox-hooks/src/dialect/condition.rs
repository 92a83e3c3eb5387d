//! Claude Code's handler `if` field: a permission rule (`Bash(git *)`, `Edit(src/**)`,
//! `Read`) that a tool call must match for the handler to run.
//!
//! Read as Claude Code documents permission rules: `Tool` alone matches every call of that
//! tool; `Bash(SPEC)` matches the whole command against SPEC, where `*` is any text (a trailing
//! `:*` is the legacy prefix form); for the file tools (`Read`, `Edit`, `Write`) SPEC is a path
//! pattern where `**` is any path, `*` any text within one component, and a relative pattern is
//! relative to the project (`/workspace`). A rule hookbox cannot read is reported by
//! `hooks check` and never matches, as a broken matcher.

use serde_json::Value;

use super::absolute_path;

/// A parsed `if` rule.
#[derive(Debug, Clone)]
pub struct Condition {
    pub tool: String,
    /// Compiled SPEC; `None` matches every call of `tool`.
    pattern: Option<regex::Regex>,
    pub text: String,
}

impl Condition {
    /// Parses `Tool` or `Tool(SPEC)`.
    pub fn parse(text: &str) -> Result<Condition, String> {
        let text = text.trim();
        let (tool, spec) = match text.split_once('(') {
            None => (text, None),
            Some((tool, rest)) => {
                let spec = rest
                    .strip_suffix(')')
                    .ok_or_else(|| format!("{text:?}: missing the closing parenthesis"))?;
                (tool, Some(spec))
            }
        };
        if tool.is_empty() || !tool.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "{text:?}: not a permission rule such as Bash(git *)"
            ));
        }
        let pattern = match spec {
            None | Some("" | "*" | "**") => None,
            Some(spec) => Some(compile(tool, spec).map_err(|e| format!("{text:?}: {e}"))?),
        };
        Ok(Condition {
            tool: tool.to_owned(),
            pattern,
            text: text.to_owned(),
        })
    }

    /// Whether the vendor call `tool_name` with `tool_input` matches.
    pub fn matches(&self, tool_name: &str, tool_input: &Value) -> bool {
        if tool_name != self.tool {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return true;
        };
        let subject = match tool_name {
            "Bash" => tool_input.get("command"),
            _ => tool_input
                .get("file_path")
                .or_else(|| tool_input.get("path")),
        };
        subject
            .and_then(Value::as_str)
            .is_some_and(|s| pattern.is_match(s))
    }
}

fn compile(tool: &str, spec: &str) -> Result<regex::Regex, regex::Error> {
    let mut re = String::from("^");
    if tool == "Bash" {
        let (body, prefix) = match spec.strip_suffix(":*") {
            Some(body) => (body, true),
            None => (spec, false),
        };
        for part in body.split('*').enumerate() {
            if part.0 > 0 {
                re.push_str("[\\s\\S]*");
            }
            re.push_str(&regex::escape(part.1));
        }
        if prefix {
            re.push_str("[\\s\\S]*");
        }
    } else {
        let path = if spec.starts_with('/') || spec.starts_with("**") {
            spec.to_owned()
        } else {
            absolute_path(spec.trim_start_matches("./"))
        };
        let mut rest = path.as_str();
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("**") {
                re.push_str("[\\s\\S]*");
                rest = r;
            } else if let Some(r) = rest.strip_prefix('*') {
                re.push_str("[^/]*");
                rest = r;
            } else {
                let end = rest.find('*').unwrap_or(rest.len());
                re.push_str(&regex::escape(&rest[..end]));
                rest = &rest[end..];
            }
        }
    }
    re.push('$');
    regex::RegexBuilder::new(&re).size_limit(1 << 20).build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yes(rule: &str, tool: &str, input: Value) -> bool {
        Condition::parse(rule)
            .unwrap_or_else(|e| panic!("{e}"))
            .matches(tool, &input)
    }

    #[test]
    fn bash_rules_match_the_whole_command() {
        assert!(yes(
            "Bash(git *)",
            "Bash",
            json!({"command": "git push --force"})
        ));
        assert!(!yes(
            "Bash(git *)",
            "Bash",
            json!({"command": "echo git x"})
        ));
        assert!(yes(
            "Bash(npm run test:*)",
            "Bash",
            json!({"command": "npm run test -- --ci"})
        ));
        assert!(yes("Bash", "Bash", json!({"command": "anything"})));
        assert!(!yes("Bash(git *)", "Read", json!({"file_path": "git x"})));
    }

    #[test]
    fn file_rules_are_path_patterns() {
        assert!(yes(
            "Edit(src/**)",
            "Edit",
            json!({"file_path": "/workspace/src/a/b.rs"})
        ));
        assert!(!yes(
            "Edit(src/**)",
            "Edit",
            json!({"file_path": "/workspace/lib/a.rs"})
        ));
        assert!(yes(
            "Read(./.env)",
            "Read",
            json!({"file_path": "/workspace/.env"})
        ));
        assert!(yes(
            "Read(**/.env*)",
            "Read",
            json!({"file_path": "/workspace/x/.env.local"})
        ));
        assert!(yes(
            "Write(*.md)",
            "Write",
            json!({"file_path": "/workspace/README.md"})
        ));
        assert!(!yes(
            "Write(*.md)",
            "Write",
            json!({"file_path": "/workspace/docs/a.md"})
        ));
    }

    #[test]
    fn unreadable_rules_are_errors() {
        assert!(Condition::parse("Bash(git *").is_err());
        assert!(Condition::parse("rm -rf").is_err());
    }
}
