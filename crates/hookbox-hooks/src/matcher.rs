//! Matchers: which tool names a rule applies to.
//!
//! A matcher is an RE2-syntax regular expression (the `regex` crate implements the same syntax
//! and the same linear-time guarantee) that must match the **whole** tool name. `""`, `"*"` and
//! `".*"` are catch-alls. An invalid expression matches nothing: a broken security gate must be
//! reported, and must not silently turn into a catch-all.

use hookbox_protocol::ToolName;

/// How the names of remote MCP tools begin (`mcp:<server>/<tool>`), and the matchers that may
/// match them.
pub const MCP_PREFIX: &str = "mcp:";

/// Upper bound on the compiled size of one matcher, so a hostile pattern cannot eat memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Longest pattern accepted; tool names are short, anything longer is a mistake or an attack.
const MAX_PATTERN_LEN: usize = 4096;

/// A compiled matcher.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// `""`, `"*"` or `".*"`: every tool.
    All,
    /// A regex anchored at both ends.
    Regex {
        pattern: String,
        regex: regex::Regex,
    },
    /// An expression that does not compile. Matches nothing.
    Invalid { pattern: String, error: String },
}

impl Matcher {
    /// Compiles `pattern`. Never fails: an invalid pattern becomes [`Matcher::Invalid`].
    pub fn new(pattern: &str) -> Matcher {
        if matches!(pattern, "" | "*" | ".*") {
            return Matcher::All;
        }
        if pattern.len() > MAX_PATTERN_LEN {
            return Matcher::Invalid {
                pattern: pattern.chars().take(64).collect(),
                error: format!("pattern is longer than {MAX_PATTERN_LEN} bytes"),
            };
        }
        match regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()
        {
            Ok(regex) => Matcher::Regex {
                pattern: pattern.to_owned(),
                regex,
            },
            Err(err) => Matcher::Invalid {
                pattern: pattern.to_owned(),
                error: first_line_of_regex_error(&err),
            },
        }
    }

    /// Whether this matcher applies to the tool called `name`.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::All => true,
            Matcher::Regex { regex, .. } => regex.is_match(name),
            Matcher::Invalid { .. } => false,
        }
    }

    /// Whether it is written for remote MCP tools (a pattern starting with
    /// [`MCP_PREFIX`]): only such matchers match `mcp:<server>/<tool>` names,
    /// and they match nothing else.
    pub fn is_for_mcp(&self) -> bool {
        matches!(self, Matcher::Regex { pattern, .. } if pattern.starts_with(MCP_PREFIX))
    }

    /// The built-in tools this matcher applies to.
    pub fn matched_tools(&self) -> Vec<ToolName> {
        ToolName::ALL
            .into_iter()
            .filter(|t| self.matches(t.as_str()))
            .collect()
    }
}

/// The regex crate's errors span several lines with a caret diagram; keep the gist.
fn first_line_of_regex_error(err: &regex::Error) -> String {
    match err {
        regex::Error::Syntax(text) => text
            .lines()
            .rev()
            .find(|l| l.starts_with("error:"))
            .map(|l| l.trim_start_matches("error:").trim().to_owned())
            .unwrap_or_else(|| text.clone()),
        regex::Error::CompiledTooBig(limit) => {
            format!("compiled pattern exceeds the size limit of {limit} bytes")
        }
        other => other.to_string(),
    }
}

/// Words people use for the built-in tools, from other agent products and the reference's own
/// Java samples (`read_file`, `write_file`).
const SYNONYMS: &[(&str, ToolName)] = &[
    ("read", ToolName::ViewFile),
    ("cat", ToolName::ViewFile),
    ("open", ToolName::ViewFile),
    ("view", ToolName::ViewFile),
    ("write", ToolName::WriteToFile),
    ("create", ToolName::WriteToFile),
    ("save", ToolName::WriteToFile),
    ("edit", ToolName::ReplaceFileContent),
    ("replace", ToolName::ReplaceFileContent),
    ("patch", ToolName::ReplaceFileContent),
    ("update", ToolName::ReplaceFileContent),
    ("list", ToolName::ListDir),
    ("ls", ToolName::ListDir),
    ("dir", ToolName::ListDir),
    ("delete", ToolName::DeleteFile),
    ("remove", ToolName::DeleteFile),
    ("rm", ToolName::DeleteFile),
    ("unlink", ToolName::DeleteFile),
    ("bash", ToolName::CodeExecution),
    ("shell", ToolName::CodeExecution),
    ("exec", ToolName::CodeExecution),
    ("run", ToolName::CodeExecution),
    ("code", ToolName::CodeExecution),
    ("python", ToolName::CodeExecution),
    ("command", ToolName::CodeExecution),
];

/// The built-in tool a mistyped name most likely meant, if any is close.
pub fn suggest_tool(name: &str) -> Option<ToolName> {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    // A leading verb such as `read` in `read_file` says more than edit distance does.
    if let Some(first) = words.first()
        && let Some((_, tool)) = SYNONYMS.iter().find(|(word, _)| word == first)
    {
        return Some(*tool);
    }
    ToolName::ALL
        .into_iter()
        .map(|t| (strsim::levenshtein(&lower, t.as_str()), t))
        .filter(|(distance, t)| *distance <= t.as_str().len() / 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, t)| t)
}

/// The top-level alternatives of a pattern (`a|b|c`), if it has no grouping to confuse a split.
pub(crate) fn literal_alternatives(pattern: &str) -> Option<Vec<&str>> {
    let is_literalish = pattern
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '|');
    is_literalish.then(|| pattern.split('|').collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ToolName::*;

    fn tools(pattern: &str) -> Vec<ToolName> {
        Matcher::new(pattern).matched_tools()
    }

    #[test]
    fn reference_matcher_table() {
        assert_eq!(tools("code_execution"), vec![CodeExecution]);
        assert_eq!(tools("write_to_file"), vec![WriteToFile]);
        assert_eq!(
            tools("view_file|write_to_file"),
            vec![ViewFile, WriteToFile]
        );
        assert_eq!(
            tools("view_file|write_to_file|replace_file_content"),
            vec![ViewFile, WriteToFile, ReplaceFileContent]
        );
        // `.*_file` covers only the names ending in `_file`.
        assert_eq!(tools(".*_file"), vec![ViewFile, WriteToFile, DeleteFile]);
        for all in ["", "*", ".*"] {
            assert_eq!(tools(all), ToolName::ALL.to_vec(), "{all:?}");
        }
    }

    #[test]
    fn shell_glob_is_invalid_and_matches_nothing() {
        let m = Matcher::new("*_file");
        assert!(matches!(m, Matcher::Invalid { .. }), "{m:?}");
        assert!(tools("*_file").is_empty());
    }

    #[test]
    fn match_is_on_the_whole_name() {
        // Unanchored, `file` would match five tools and `code` one.
        assert!(tools("file").is_empty());
        assert!(tools("code").is_empty());
        assert!(tools("view_file_extra").is_empty());
        // An alternation must not let one side escape the anchors.
        assert_eq!(tools("view|code_execution"), vec![CodeExecution]);
        assert_eq!(tools("(view|delete)_file"), vec![ViewFile, DeleteFile]);
    }

    #[test]
    fn matching_is_case_sensitive() {
        assert!(tools("Code_Execution").is_empty());
        assert_eq!(tools("(?i)Code_Execution"), vec![CodeExecution]);
    }

    #[test]
    fn oversized_patterns_are_invalid_not_expensive() {
        assert!(matches!(
            Matcher::new(&"a".repeat(MAX_PATTERN_LEN + 1)),
            Matcher::Invalid { .. }
        ));
        assert!(matches!(
            Matcher::new("(a{1000}){1000}"),
            Matcher::Invalid { .. }
        ));
    }

    #[test]
    fn suggestions_for_common_mistakes() {
        assert_eq!(suggest_tool("read_file"), Some(ViewFile));
        assert_eq!(suggest_tool("write_file"), Some(WriteToFile));
        assert_eq!(suggest_tool("edit_file"), Some(ReplaceFileContent));
        assert_eq!(suggest_tool("code_exec"), Some(CodeExecution));
        assert_eq!(suggest_tool("list_dirs"), Some(ListDir));
        assert_eq!(suggest_tool("xyzzy"), None);
    }

    #[test]
    fn alternatives_split_only_plain_patterns() {
        assert_eq!(
            literal_alternatives("read_file|write_file"),
            Some(vec!["read_file", "write_file"])
        );
        assert_eq!(literal_alternatives("(read|view)_file"), None);
    }
}
