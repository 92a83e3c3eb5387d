//! Vendor matchers as each agent CLI compiles them (see [`super::load`] for the rules per
//! dialect), and the tool names each dialect knows and hookbox shows it.

use super::Dialect;
use super::tools::matcher_aliases;

/// A vendor matcher, compiled with the vendor's semantics.
#[derive(Debug, Clone)]
pub enum VendorMatcher {
    All,
    /// Exact tool names.
    Names(Vec<String>),
    Regex {
        pattern: String,
        regex: regex::Regex,
        anchored: bool,
    },
    /// Does not compile here: matches nothing.
    Invalid {
        pattern: String,
        error: String,
    },
}

const REGEX_SIZE_LIMIT: usize = 1 << 20;
const MAX_PATTERN_LEN: usize = 4096;

impl VendorMatcher {
    /// Compiles `pattern` (absent = `None`) as `dialect` does for an event that
    /// `takes_matcher`.
    pub fn new(dialect: Dialect, pattern: Option<&str>, takes_matcher: bool) -> VendorMatcher {
        let Some(pattern) = pattern else {
            return VendorMatcher::All;
        };
        if !takes_matcher || matches!(pattern, "" | "*") {
            return VendorMatcher::All;
        }
        if pattern.len() > MAX_PATTERN_LEN {
            return VendorMatcher::Invalid {
                pattern: pattern.chars().take(64).collect(),
                error: format!("pattern is longer than {MAX_PATTERN_LEN} bytes"),
            };
        }
        let names = || {
            VendorMatcher::Names(
                pattern
                    .split(['|', ','])
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned)
                    .collect(),
            )
        };
        let simple = |extra: &[char]| {
            pattern
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|' || extra.contains(&c))
        };
        let compile = |anchored: bool| {
            let source = if anchored {
                format!("^(?:{pattern})$")
            } else {
                pattern.to_owned()
            };
            regex::RegexBuilder::new(&source)
                .size_limit(REGEX_SIZE_LIMIT)
                .dfa_size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map(|regex| VendorMatcher::Regex {
                    pattern: pattern.to_owned(),
                    regex,
                    anchored,
                })
                .map_err(|e| VendorMatcher::Invalid {
                    pattern: pattern.to_owned(),
                    error: regex_error(&e),
                })
        };
        match dialect {
            Dialect::ClaudeCode | Dialect::Cursor if simple(&['-', ' ', ',']) => names(),
            Dialect::Codex if simple(&[]) => names(),
            Dialect::ClaudeCode | Dialect::Cursor | Dialect::Codex => {
                compile(false).unwrap_or_else(|invalid| invalid)
            }
            // Gemini: an expression that does not compile is compared as an exact name.
            Dialect::GeminiCli => {
                compile(false).unwrap_or_else(|_| VendorMatcher::Names(vec![pattern.to_owned()]))
            }
            Dialect::Copilot | Dialect::Agents => compile(true).unwrap_or_else(|invalid| invalid),
        }
    }

    /// Whether it matches the vendor tool `tool_name` (with the vendor's aliases: Codex's
    /// `Edit`/`Write` match `apply_patch`).
    pub fn matches(&self, dialect: Dialect, tool_name: &str) -> bool {
        let one = |name: &str| match self {
            VendorMatcher::All => true,
            VendorMatcher::Names(names) => names.iter().any(|n| n == name),
            VendorMatcher::Regex { regex, .. } => regex.is_match(name),
            VendorMatcher::Invalid { .. } => false,
        };
        one(tool_name)
            || matcher_aliases(dialect, tool_name)
                .iter()
                .any(|alias| one(alias))
    }

    /// The pattern as written (`*` for all).
    pub fn pattern(&self) -> String {
        match self {
            VendorMatcher::All => "*".to_owned(),
            VendorMatcher::Names(names) => names.join("|"),
            VendorMatcher::Regex { pattern, .. } | VendorMatcher::Invalid { pattern, .. } => {
                pattern.clone()
            }
        }
    }
}

fn regex_error(err: &regex::Error) -> String {
    match err {
        regex::Error::Syntax(text) => text
            .lines()
            .rev()
            .find(|l| l.starts_with("error:"))
            .map(|l| l.trim_start_matches("error:").trim().to_owned())
            .unwrap_or_else(|| text.clone()),
        other => other.to_string(),
    }
}

/// The tool names a dialect's own CLI has (what its users' matchers name).
pub fn known_tools(dialect: Dialect) -> &'static [&'static str] {
    match dialect {
        Dialect::ClaudeCode => &[
            "Bash",
            "Read",
            "Write",
            "Edit",
            "MultiEdit",
            "NotebookEdit",
            "NotebookRead",
            "Glob",
            "Grep",
            "LS",
            "WebFetch",
            "WebSearch",
            "Agent",
            "Task",
            "TodoWrite",
            "BashOutput",
            "KillShell",
            "ExitPlanMode",
        ],
        Dialect::Codex => &["Bash", "apply_patch", "Edit", "Write", "Read", "LS"],
        Dialect::GeminiCli => &[
            "run_shell_command",
            "read_file",
            "read_many_files",
            "write_file",
            "replace",
            "list_directory",
            "glob",
            "grep_search",
            "google_web_search",
            "web_fetch",
            "save_memory",
            "write_todos",
        ],
        Dialect::Cursor => &["Shell", "Read", "Write", "Grep", "Delete", "Task", "LS"],
        Dialect::Copilot => &[
            "bash",
            "powershell",
            "view",
            "create",
            "edit",
            "glob",
            "grep",
            "task",
            "web_fetch",
            "ask_user",
        ],
        Dialect::Agents => &[],
    }
}

/// The tool names hookbox shows a dialect's hooks (see [`super::tools`]).
pub fn emitted_tools(dialect: Dialect) -> &'static [&'static str] {
    match dialect {
        Dialect::ClaudeCode => &["Bash", "Read", "Write", "Edit", "LS"],
        Dialect::Codex => &["Bash", "apply_patch", "Read", "LS"],
        Dialect::GeminiCli => &[
            "run_shell_command",
            "read_file",
            "write_file",
            "replace",
            "list_directory",
        ],
        Dialect::Cursor => &["Shell", "Read", "Write", "Delete", "LS"],
        Dialect::Copilot => &["bash", "view", "create", "edit"],
        Dialect::Agents => &[],
    }
}

/// Whether a matcher name reaches an emitted tool through the vendor's aliases (Codex's `Edit`
/// and `Write` match `apply_patch`).
pub(super) fn matcher_alias_target(dialect: Dialect, name: &str) -> bool {
    emitted_tools(dialect)
        .iter()
        .any(|t| matcher_aliases(dialect, t).contains(&name))
}

/// Whether a pattern uses what only JavaScript's regular expressions have (lookaround,
/// backreferences, named backreferences).
pub fn js_only(pattern: &str) -> bool {
    ["(?=", "(?!", "(?<=", "(?<!", "\\k<"]
        .iter()
        .any(|s| pattern.contains(s))
        || pattern
            .as_bytes()
            .windows(2)
            .any(|w| w[0] == b'\\' && (b'1'..=b'9').contains(&w[1]))
}
