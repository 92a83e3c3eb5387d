//! Hook dialects: the hooks files of other agent CLIs (Claude Code, Gemini CLI, Codex, Cursor,
//! GitHub Copilot) read by the same engine as hookbox's own `.agents/hooks.json`, with adapters
//! at the edges. This module holds the tables every part of that work shares, pure functions
//! with no I/O:
//!
//! - [`Dialect`]: the names (`claude-code`, `gemini-cli`, `codex`, `cursor`, `copilot`,
//!   `agents`), parsed from a list such as `claude-code,cursor` or `all` ([`DialectSet`]);
//! - [`events`]: each vendor's event names ↔ hookbox's four events, which vendor events are
//!   inactive in hookbox (listed by name, never dropped silently), which ignore matchers, and
//!   which fire only for some tools (Cursor's `beforeShellExecution`, …);
//! - [`tools`]: a hookbox tool call ↔ the vendor's tool name and `tool_input`, both directions:
//!   [`tools::to_vendor`] writes what a vendor hook sees for a hookbox call,
//!   [`tools::from_vendor`] reads a vendor CLI's payload as a hookbox call (what `hooks gate`
//!   evaluates), and [`tools::update_from_vendor`] maps a hook's rewritten vendor input back onto
//!   hookbox's arguments or says why it cannot (the call is then denied);
//! - [`patch`]: Codex's `apply_patch` text, written for hookbox's file tools and read back;
//! - [`load`]: which vendor files are read, in which order, parsed into the engine's rules (a
//!   [`load::VendorRule`] on each), with the vendor's matcher semantics, timeout units and the
//!   `hooks check` traps;
//! - [`payload`]: the input a vendor handler reads, and its CLI's environment variables;
//! - [`answer_in`]: a vendor handler's exit code and output read as its CLI reads them;
//! - [`convert`]: one dialect's file written in another where exact (`hooks convert`), refused
//!   naming each part where not.
//!
//! The engine ([`crate::engine`]) runs a vendor rule's handlers with these. The answer a vendor
//! CLI expects from `hookbox hooks gate` (the engine's decision written as that CLI's stdout
//! JSON / exit code) is `answer_out.rs` in this folder, owned by the gate's work.
//! `docs/vendor-hooks.md` is the user's account of all of it.
//!
//! # Mapping decisions (where the vendors leave a choice)
//!
//! Each is chosen so that a vendor gate written for the vendor's own tools still fires on the
//! hookbox call that does the same thing; none may let a call past a gate that would have
//! stopped the vendor's own equivalent.
//!
//! - **`code_execution` with `language: python`** is shown to shell guards as the command
//!   `python3 - <<'HOOKBOX_PY'` … `HOOKBOX_PY` (a delimiter that does not occur in the code),
//!   because that is how the vendors' own agents run Python (through their shell tool), and a
//!   guard that scans commands for `rm -rf` or a secret's path must see the code rather than
//!   be bypassed by a language switch. A rewrite that keeps this exact form maps back to Python
//!   code; any other command a hook substitutes is run as that shell command (`language: bash`),
//!   which is exactly what the hook asked for.
//! - **`delete_file`** is shown as the shell command `rm -- '<absolute path>'` where the vendor
//!   has no delete tool (Claude Code, Gemini CLI, Copilot), because deletion goes through the
//!   shell there and users' `rm` guards must fire; as Cursor's `Delete {file_path}`; and as a
//!   `*** Delete File:` `apply_patch` for Codex, whose file changes all go through that tool. A
//!   rewrite maps back only if it keeps that form (a different path is allowed); anything else
//!   cannot be expressed as a deletion and denies the call.
//! - **`replace_file_content` with several chunks** is shown as one `Edit` (`replace`, `edit`,
//!   `Write`) per chunk, each run through the hooks, in order; any deny denies the whole call.
//!   Not as a `MultiEdit`: that name is legacy, and a matcher written as `Edit` (the common
//!   case) would not fire on it. Codex sees one `apply_patch` with one hunk per chunk, as its
//!   own agent would write it. A rewrite of one chunk's `Edit` maps back onto that chunk; a
//!   rewrite that changes the file of one chunk only denies.
//! - **Codex `apply_patch`**: `write_to_file` is an `*** Add File:`, `replace_file_content` an
//!   `*** Update File:` with one `@@` hunk per chunk, `delete_file` a `*** Delete File:`, with
//!   absolute paths; Codex matchers `Edit` and `Write` match `apply_patch` as Codex's own do. A
//!   rewritten patch is parsed back ([`patch::parse`]); it must touch exactly one file with one
//!   operation and no `*** Move to:`, else the call is denied with the reason.
//! - **`list_dir`** is Claude/Codex `LS {path}` (the legacy name users still match), Gemini
//!   `list_directory {dir_path}`, Cursor `LS {path}` (Cursor documents no listing tool; a
//!   catch-all matcher must still see the call), Copilot `view {path}` (its `view` lists a
//!   directory).
//! - **Paths** are always absolute sandbox paths (`/workspace/…`), as the vendors send them.
//! - Copilot's argument names for `view`/`create`/`edit` are not documented; hookbox uses the
//!   names its CLI sends (`path`, `view_range`, `file_text`, `old_str`, `new_str`).

pub mod answer_in;
pub mod answer_out;
pub mod condition;
pub mod convert;
pub mod events;
pub mod load;
pub mod matchers;
pub mod patch;
pub mod payload;
pub mod tools;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A hooks file format: whose files they are, how their input is written and answers read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Dialect {
    /// hookbox's own `.agents/hooks.json` (always active).
    #[serde(rename = "agents")]
    Agents,
    /// Claude Code: `.claude/settings.json`, `.claude/settings.local.json`.
    #[serde(rename = "claude-code")]
    ClaudeCode,
    /// Gemini CLI: `.gemini/settings.json`.
    #[serde(rename = "gemini-cli")]
    GeminiCli,
    /// OpenAI Codex CLI: `.codex/hooks.json`, `.codex/config.toml`.
    #[serde(rename = "codex")]
    Codex,
    /// Cursor: `.cursor/hooks.json`.
    #[serde(rename = "cursor")]
    Cursor,
    /// GitHub Copilot (CLI and cloud agent): `.github/hooks/*.json`.
    #[serde(rename = "copilot")]
    Copilot,
}

impl Dialect {
    /// Every dialect, in the order files are read (hookbox's own first).
    pub const ALL: [Dialect; 6] = [
        Dialect::Agents,
        Dialect::ClaudeCode,
        Dialect::GeminiCli,
        Dialect::Codex,
        Dialect::Cursor,
        Dialect::Copilot,
    ];

    /// The vendor dialects: what `all` enables.
    pub const VENDORS: [Dialect; 5] = [
        Dialect::ClaudeCode,
        Dialect::GeminiCli,
        Dialect::Codex,
        Dialect::Cursor,
        Dialect::Copilot,
    ];

    /// The name used on the command line, in settings and in traces.
    pub const fn as_str(self) -> &'static str {
        match self {
            Dialect::Agents => "agents",
            Dialect::ClaudeCode => "claude-code",
            Dialect::GeminiCli => "gemini-cli",
            Dialect::Codex => "codex",
            Dialect::Cursor => "cursor",
            Dialect::Copilot => "copilot",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a dialect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown hook dialect `{0}` (expected a comma-separated list of claude-code, gemini-cli, codex, cursor, copilot, agents, or `all`)"
)]
pub struct UnknownDialect(pub String);

impl FromStr for Dialect {
    type Err = UnknownDialect;

    /// Also accepts the short names people type (`claude`, `gemini`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "agents" => Ok(Dialect::Agents),
            "claude-code" | "claude" => Ok(Dialect::ClaudeCode),
            "gemini-cli" | "gemini" => Ok(Dialect::GeminiCli),
            "codex" => Ok(Dialect::Codex),
            "cursor" => Ok(Dialect::Cursor),
            "copilot" => Ok(Dialect::Copilot),
            _ => Err(UnknownDialect(s.to_owned())),
        }
    }
}

/// Which vendor dialects are enabled. hookbox's own files are always read; the empty set (the
/// default) reads nothing else, so an environment behaves exactly as without this feature.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DialectSet(u8);

impl DialectSet {
    /// No vendor dialect (the default).
    pub const NONE: DialectSet = DialectSet(0);

    /// Every vendor dialect.
    pub fn all() -> DialectSet {
        Dialect::VENDORS.into_iter().collect()
    }

    /// Whether `dialect` is enabled; [`Dialect::Agents`] always is.
    pub fn contains(self, dialect: Dialect) -> bool {
        dialect == Dialect::Agents || self.0 & Self::bit(dialect) != 0
    }

    /// Whether no vendor dialect is enabled.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Adds `dialect` (adding [`Dialect::Agents`] changes nothing).
    pub fn insert(&mut self, dialect: Dialect) {
        self.0 |= Self::bit(dialect);
    }

    /// The enabled vendor dialects, in [`Dialect::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Dialect> {
        Dialect::VENDORS
            .into_iter()
            .filter(move |d| self.0 & Self::bit(*d) != 0)
    }

    fn bit(dialect: Dialect) -> u8 {
        match dialect {
            Dialect::Agents => 0,
            Dialect::ClaudeCode => 1,
            Dialect::GeminiCli => 2,
            Dialect::Codex => 4,
            Dialect::Cursor => 8,
            Dialect::Copilot => 16,
        }
    }
}

impl FromIterator<Dialect> for DialectSet {
    fn from_iter<I: IntoIterator<Item = Dialect>>(iter: I) -> Self {
        let mut set = DialectSet::NONE;
        for d in iter {
            set.insert(d);
        }
        set
    }
}

impl FromStr for DialectSet {
    type Err = UnknownDialect;

    /// `all`, `none`, the empty string, or a comma-separated list of names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut set = DialectSet::NONE;
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.to_ascii_lowercase().as_str() {
                "all" => set = DialectSet(set.0 | DialectSet::all().0),
                "none" => {}
                _ => set.insert(part.parse()?),
            }
        }
        Ok(set)
    }
}

impl fmt::Display for DialectSet {
    /// The comma-separated names, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.iter().map(Dialect::as_str).collect();
        f.write_str(&names.join(","))
    }
}

/// The sandbox's working directory: the project directory vendor hooks are told about
/// (`cwd`, `CLAUDE_PROJECT_DIR`, …).
pub const PROJECT_DIR: &str = "/workspace";

/// A tool path as an absolute sandbox path, lexically normalised (`.` and `..` folded, never
/// above `/`; relative paths are relative to [`PROJECT_DIR`]), as vendors always send them.
pub fn absolute_path(path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{PROJECT_DIR}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for component in joined.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_short_names_parse() {
        for d in Dialect::ALL {
            assert_eq!(d.as_str().parse::<Dialect>(), Ok(d));
            assert_eq!(
                serde_json::to_value(d).ok(),
                Some(serde_json::json!(d.as_str()))
            );
        }
        assert_eq!("claude".parse(), Ok(Dialect::ClaudeCode));
        assert_eq!(" Gemini ".parse(), Ok(Dialect::GeminiCli));
        assert!("claude_code".parse::<Dialect>().is_err());
    }

    #[test]
    fn lists_and_all_parse_and_agents_is_always_on() {
        let set: DialectSet = "claude-code, cursor".parse().unwrap_or_default();
        assert!(set.contains(Dialect::ClaudeCode) && set.contains(Dialect::Cursor));
        assert!(!set.contains(Dialect::GeminiCli));
        assert!(set.contains(Dialect::Agents));
        assert_eq!(set.to_string(), "claude-code,cursor");
        assert_eq!("all".parse(), Ok(DialectSet::all()));
        assert_eq!(DialectSet::all().iter().count(), 5);
        assert_eq!("".parse(), Ok(DialectSet::NONE));
        assert_eq!("none".parse(), Ok(DialectSet::NONE));
        assert_eq!(DialectSet::NONE.to_string(), "none");
        assert_eq!("agents".parse(), Ok(DialectSet::NONE));
        assert_eq!(
            "claude-code,nope".parse::<DialectSet>(),
            Err(UnknownDialect("nope".into()))
        );
    }

    #[test]
    fn paths_become_absolute_and_never_climb_above_root() {
        assert_eq!(absolute_path("src/a.rs"), "/workspace/src/a.rs");
        assert_eq!(absolute_path("/etc/./passwd"), "/etc/passwd");
        assert_eq!(absolute_path("../../../etc/shadow"), "/etc/shadow");
        assert_eq!(absolute_path("/workspace/a/../.env"), "/workspace/.env");
    }
}
