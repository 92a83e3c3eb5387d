//! `hookbox hooks install --for X`: puts `hookbox hooks gate` into an agent CLI's own settings
//! as that CLI's pre-tool hook, so the project's hookbox policy decides every tool call the CLI
//! makes.
//!
//! The file is merged, never replaced: every other key and hook stays as it was, in its order,
//! and only handlers whose command runs `hooks gate --protocol` are the gate's own (found again
//! by that, replaced when they differ, removed by `--uninstall`). Installing twice changes
//! nothing. What changes is printed as a unified diff before it is written (atomically, through
//! a temporary file in the same directory).
//!
//! The command written is `'BINARY' hooks gate --protocol X --root "$PROJECT_DIR_VARIABLE" ||
//! FALLBACK`, where FALLBACK denies in that CLI's protocol ([`answer_out::fallback_shell`]), so
//! a gate that is missing or crashes denies instead of letting the call through. A project-level
//! install also passes `--require-policy`: a gate run outside the project (or in a project whose
//! policy was deleted) denies rather than finding no policy and allowing.

use super::output::{out, outln, unless_reader_gone};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use hookbox_hooks::dialect::Dialect;
use hookbox_hooks::dialect::answer_out::{self, GATE_MARKER};
use serde_json::{Map, Value, json};

/// What a CLI may wait for the gate, in seconds; the gate's own deadline is shorter
/// ([`super::gate::DEFAULT_DEADLINE_SECS`]) so that it answers (denying if it must) before the
/// CLI gives up on it, because every one of these CLIs lets the call through when a hook times
/// out (Cursor only without `failClosed`).
pub const CLI_TIMEOUT_SECS: u64 = 120;

/// The name Copilot's hook file of the gate has (Copilot reads every `*.json` of the folder).
const COPILOT_FILE: &str = "hookbox-gate.json";

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The CLI whose settings get the gate: claude-code, gemini-cli, codex, cursor or copilot.
    #[arg(long = "for", value_name = "CLI", value_parser = parse_cli)]
    cli: Dialect,
    /// Write the user-level settings (every project the CLI opens) instead of the project's.
    #[arg(long)]
    user: bool,
    /// Remove the gate's entry (and nothing else).
    #[arg(long)]
    uninstall: bool,
    /// The project directory (whose settings a project-level install writes).
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// The hookbox the gate entry runs (default: this executable, by its absolute path; the
    /// `hookbox` front beside it when this is `hookbox-full`).
    #[arg(long, value_name = "PATH")]
    binary: Option<String>,
    /// Print the diff without writing anything.
    #[arg(long)]
    dry_run: bool,
}

fn parse_cli(s: &str) -> Result<Dialect, String> {
    match s.parse::<Dialect>() {
        Ok(Dialect::Agents) | Err(_) => Err(format!(
            "unknown CLI `{s}` (expected claude-code, gemini-cli, codex, cursor or copilot)"
        )),
        Ok(d) => Ok(d),
    }
}

pub fn run(args: InstallArgs) -> anyhow::Result<ExitCode> {
    let home = || -> anyhow::Result<PathBuf> {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .context("HOME is not set, so the user-level settings cannot be found")
    };
    let root = std::path::absolute(&args.root)
        .with_context(|| format!("cannot use {} as the project", args.root.display()))?;
    let path = if args.user {
        user_settings(args.cli, &home()?)
    } else {
        project_settings(args.cli, &root)
    };
    let binary = match &args.binary {
        Some(b) => b.clone(),
        None => super::full::front_for(
            std::env::current_exe()
                .context("cannot find this executable's path (give --binary)")?,
        )
        .to_string_lossy()
        .into_owned(),
    };
    let before = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut doc = match &before {
        Some(text) if !text.trim().is_empty() => {
            serde_json::from_str::<Value>(text).with_context(|| {
                format!(
                    "{} is not plain JSON (comments are not supported); edit it by hand",
                    path.display()
                )
            })?
        }
        _ => json!({}),
    };
    let Value::Object(map) = &mut doc else {
        bail!("{} does not hold a JSON object", path.display());
    };
    let entry = gate_entry(args.cli, &binary, !args.user);
    if args.uninstall {
        remove(args.cli, map);
    } else {
        install(args.cli, map, &entry)?;
    }
    let after = if args.uninstall && is_empty_gate_file(args.cli, map) {
        None
    } else {
        Some(format!("{}\n", serde_json::to_string_pretty(&*map)?))
    };
    let old = before.clone().unwrap_or_default();
    let new = after.clone().unwrap_or_default();
    if before.is_some() == after.is_some() && old == new {
        outln!(
            "{}: {}",
            path.display(),
            if args.uninstall {
                "no hookbox gate to remove"
            } else {
                "the hookbox gate is already installed"
            }
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let shown = out!("{}", diff(&path, &old, &new));
    if args.dry_run {
        shown?;
        return Ok(ExitCode::SUCCESS);
    }
    // The settings file is written whether or not anyone still reads the diff: a reader that
    // went away must not leave the gate uninstalled behind a successful exit.
    unless_reader_gone(shown)?;
    match &after {
        Some(text) => write_atomically(&path, text)?,
        None => std::fs::remove_file(&path)
            .with_context(|| format!("cannot remove {}", path.display()))?,
    }
    if !args.uninstall {
        unless_reader_gone(out!(
            "{}",
            trust_steps(args.cli, &path, &root, map, args.user)
        ))?;
        if !args.user && !root.join(".agents/hooks.json").is_file() {
            unless_reader_gone(outln!(
                "note: {} has no .agents/hooks.json yet; until it has one, the gate denies every call",
                root.display()
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The settings file of `cli` in the project `root`.
pub fn project_settings(cli: Dialect, root: &Path) -> PathBuf {
    match cli {
        Dialect::ClaudeCode => root.join(".claude/settings.json"),
        Dialect::GeminiCli => root.join(".gemini/settings.json"),
        Dialect::Codex => root.join(".codex/hooks.json"),
        Dialect::Cursor => root.join(".cursor/hooks.json"),
        Dialect::Copilot | Dialect::Agents => root.join(".github/hooks").join(COPILOT_FILE),
    }
}

/// The user-level settings file of `cli` (honouring the CLI's own home variable).
pub fn user_settings(cli: Dialect, home: &Path) -> PathBuf {
    let var = |name: &str, default: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map_or_else(|| home.join(default), PathBuf::from)
    };
    match cli {
        Dialect::ClaudeCode => var("CLAUDE_CONFIG_DIR", ".claude").join("settings.json"),
        Dialect::GeminiCli => home.join(".gemini/settings.json"),
        Dialect::Codex => var("CODEX_HOME", ".codex").join("hooks.json"),
        Dialect::Cursor => home.join(".cursor/hooks.json"),
        Dialect::Copilot | Dialect::Agents => var("COPILOT_HOME", ".copilot")
            .join("hooks")
            .join(COPILOT_FILE),
    }
}

/// The variable in which `cli` tells its hooks the project directory (none for Codex, whose
/// hooks run in the session's directory).
fn project_dir_variable(cli: Dialect) -> Option<&'static str> {
    match cli {
        Dialect::ClaudeCode => Some("CLAUDE_PROJECT_DIR"),
        Dialect::GeminiCli => Some("GEMINI_PROJECT_DIR"),
        Dialect::Cursor => Some("CURSOR_PROJECT_DIR"),
        Dialect::Copilot => Some("COPILOT_PROJECT_DIR"),
        Dialect::Codex | Dialect::Agents => None,
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The shell command of the gate's entry.
pub fn gate_command(cli: Dialect, binary: &str, require_policy: bool) -> String {
    let mut cmd = format!("{}{GATE_MARKER}{}", shell_quote(binary), cli.as_str());
    if let Some(var) = project_dir_variable(cli) {
        let _ = write!(cmd, " --root \"${var}\"");
    }
    if require_policy {
        cmd.push_str(" --require-policy");
    }
    let _ = write!(cmd, " || {}", answer_out::fallback_shell(cli));
    cmd
}

/// The gate's handler (Cursor, Copilot) or group (the others) for `cli`.
fn gate_entry(cli: Dialect, binary: &str, require_policy: bool) -> Value {
    let command = gate_command(cli, binary, require_policy);
    match cli {
        Dialect::ClaudeCode | Dialect::Codex => json!({"hooks": [
            {"type": "command", "command": command, "timeout": CLI_TIMEOUT_SECS}
        ]}),
        // Gemini's timeouts are milliseconds.
        Dialect::GeminiCli => json!({"hooks": [
            {"type": "command", "name": "hookbox-gate", "command": command,
             "timeout": CLI_TIMEOUT_SECS * 1000}
        ]}),
        // failClosed: a crash or time-out denies (Cursor's default lets the call through).
        Dialect::Cursor => json!({
            "command": command, "timeout": CLI_TIMEOUT_SECS, "failClosed": true
        }),
        Dialect::Copilot | Dialect::Agents => json!({
            "type": "command", "bash": command, "timeoutSec": CLI_TIMEOUT_SECS
        }),
    }
}

fn is_gate_handler(handler: &Value) -> bool {
    ["command", "bash"].iter().any(|k| {
        handler
            .get(k)
            .and_then(Value::as_str)
            .is_some_and(answer_out::is_gate_command)
    })
}

/// Whether `cli` nests handlers in groups (`{matcher, hooks: [...]}`) or lists them flat.
fn nested(cli: Dialect) -> bool {
    matches!(
        cli,
        Dialect::ClaudeCode | Dialect::GeminiCli | Dialect::Codex
    )
}

fn install(cli: Dialect, map: &mut Map<String, Value>, entry: &Value) -> anyhow::Result<()> {
    let event = answer_out::pre_tool_event(cli);
    if matches!(cli, Dialect::Cursor | Dialect::Copilot) && !map.contains_key("version") {
        map.insert("version".into(), json!(1));
    }
    let hooks = map.entry("hooks").or_insert_with(|| json!({}));
    let Value::Object(hooks) = hooks else {
        bail!("`hooks` is not an object");
    };
    let list = hooks.entry(event).or_insert_with(|| json!([]));
    let Value::Array(list) = list else {
        bail!("`hooks.{event}` is not a list");
    };
    // Already there exactly: nothing to do (idempotent, and in place).
    if list.iter().any(|e| e == entry) && count_gates(cli, list) == 1 {
        return Ok(());
    }
    remove_from_list(cli, list);
    list.push(entry.clone());
    Ok(())
}

fn count_gates(cli: Dialect, list: &[Value]) -> usize {
    if nested(cli) {
        list.iter()
            .filter_map(|g| g.get("hooks").and_then(Value::as_array))
            .flatten()
            .filter(|h| is_gate_handler(h))
            .count()
    } else {
        list.iter().filter(|h| is_gate_handler(h)).count()
    }
}

/// Takes the gate's handlers out of one event's list, and the groups that only held them.
fn remove_from_list(cli: Dialect, list: &mut Vec<Value>) {
    if nested(cli) {
        list.retain_mut(|group| {
            let Some(Value::Array(handlers)) = group.get_mut("hooks") else {
                return true;
            };
            let had = handlers.len();
            handlers.retain(|h| !is_gate_handler(h));
            !(handlers.is_empty() && had > 0)
        });
    } else {
        list.retain(|h| !is_gate_handler(h));
    }
}

fn remove(cli: Dialect, map: &mut Map<String, Value>) {
    let Some(Value::Object(hooks)) = map.get_mut("hooks") else {
        return;
    };
    let mut emptied = Vec::new();
    for (event, list) in hooks.iter_mut() {
        if let Value::Array(list) = list {
            let had = count_gates(cli, list);
            remove_from_list(cli, list);
            if had > 0 && list.is_empty() {
                emptied.push(event.clone());
            }
        }
    }
    for event in emptied {
        hooks.shift_remove(&event);
    }
    if hooks.is_empty() {
        map.shift_remove("hooks");
    }
}

/// A Copilot file of the gate's own that holds nothing else any more (it is deleted).
fn is_empty_gate_file(cli: Dialect, map: &Map<String, Value>) -> bool {
    cli == Dialect::Copilot && map.keys().all(|k| k == "version")
}

fn diff(path: &Path, old: &str, new: &str) -> String {
    let name = path.display().to_string();
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .header(&name, &name)
        .to_string()
}

fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .with_context(|| format!("{} has no parent directory", path.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    if let Ok(meta) = std::fs::metadata(path) {
        std::fs::set_permissions(tmp.path(), meta.permissions())?;
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644))?;
    }
    tmp.persist(path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

/// What a person must still do before the CLI runs the gate.
fn trust_steps(
    cli: Dialect,
    path: &Path,
    root: &Path,
    map: &Map<String, Value>,
    user: bool,
) -> String {
    let mut out = String::new();
    match cli {
        Dialect::ClaudeCode => {
            let _ = writeln!(
                out,
                "Claude Code reads the hook at its next start (`/hooks` shows it)."
            );
        }
        Dialect::GeminiCli => {
            let _ = writeln!(
                out,
                "Gemini CLI runs project hooks only in a trusted folder: trust {} when Gemini asks (or `/permissions`); a changed hook must be confirmed again.",
                root.display()
            );
        }
        Dialect::Cursor => {
            let _ = writeln!(
                out,
                "Cursor reads the hook at its next start (Settings → Hooks shows it)."
            );
        }
        Dialect::Copilot => {
            let _ = writeln!(
                out,
                "Copilot runs repository hooks only in a trusted folder: trust {} when Copilot asks (or start it with --trust-folder).",
                root.display()
            );
        }
        Dialect::Codex => {
            let _ = writeln!(
                out,
                "Codex runs a hook only once it is trusted by its hash: review it with `/hooks` in codex, or add these lines to $CODEX_HOME/config.toml (~/.codex/config.toml):"
            );
            if !user {
                let _ = writeln!(
                    out,
                    "\n[projects.{}]\ntrust_level = \"trusted\"",
                    toml_key(&root.to_string_lossy())
                );
            }
            for (key, hash) in codex_trust_hashes(path, map) {
                let _ = writeln!(
                    out,
                    "\n[hooks.state.{}]\ntrusted_hash = \"{hash}\"",
                    toml_key(&key)
                );
            }
        }
        Dialect::Agents => {}
    }
    out
}

fn toml_key(s: &str) -> String {
    // A TOML basic string is a JSON string for everything a path holds.
    Value::String(s.to_owned()).to_string()
}

/// Codex's trust keys and hashes for the gate's handlers in `map` (the hooks.json at `path`):
/// key `"<file>:<event in snake_case>:<group index>:<handler index>"`, hash `sha256:` of the
/// compact, key-sorted JSON `{event_name, hooks: [{async, command, timeout, type}], matcher?}`
/// (what `codex` itself computes; its `/hooks` lists the same hash).
pub fn codex_trust_hashes(path: &Path, map: &Map<String, Value>) -> Vec<(String, String)> {
    use sha2::Digest as _;
    let event = answer_out::pre_tool_event(Dialect::Codex);
    let snake = "pre_tool_use";
    let mut out = Vec::new();
    let Some(groups) = map
        .get("hooks")
        .and_then(|h| h.get(event))
        .and_then(Value::as_array)
    else {
        return out;
    };
    for (gi, group) in groups.iter().enumerate() {
        let handlers = group
            .get("hooks")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (hi, h) in handlers.iter().enumerate() {
            if !is_gate_handler(h) {
                continue;
            }
            // Keys inserted in sorted order: serde_json keeps insertion order here.
            let mut handler = Map::new();
            handler.insert(
                "async".into(),
                json!(h.get("async").and_then(Value::as_bool).unwrap_or(false)),
            );
            handler.insert(
                "command".into(),
                h.get("command").cloned().unwrap_or_default(),
            );
            handler.insert(
                "timeout".into(),
                json!(h.get("timeout").and_then(Value::as_u64).unwrap_or(600)),
            );
            handler.insert("type".into(), json!("command"));
            let mut ident = Map::new();
            ident.insert("event_name".into(), json!(snake));
            ident.insert("hooks".into(), json!([Value::Object(handler)]));
            if let Some(m) = group.get("matcher") {
                ident.insert("matcher".into(), m.clone());
            }
            let digest = sha2::Sha256::digest(Value::Object(ident).to_string().as_bytes());
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            out.push((
                format!("{}:{snake}:{gi}:{hi}", path.display()),
                format!("sha256:{hex}"),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installed(cli: Dialect, start: Value) -> Value {
        let mut doc = start;
        let entry = gate_entry(cli, "/usr/bin/hookbox", true);
        if let Value::Object(map) = &mut doc {
            install(cli, map, &entry).unwrap_or_else(|e| panic!("{e}"));
        }
        doc
    }

    #[test]
    fn install_keeps_other_hooks_and_keys_and_is_idempotent() {
        let start = json!({
            "model": "opus",
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "./mine.sh"}]}],
                "Stop": [{"hooks": [{"type": "command", "command": "./stop.sh"}]}]}
        });
        let once = installed(Dialect::ClaudeCode, start.clone());
        assert_eq!(once["model"], "opus");
        assert_eq!(once["hooks"]["Stop"], start["hooks"]["Stop"]);
        let pre = once["hooks"]["PreToolUse"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0], start["hooks"]["PreToolUse"][0]);
        assert!(is_gate_handler(&pre[1]["hooks"][0]));
        let twice = installed(Dialect::ClaudeCode, once.clone());
        assert_eq!(twice, once);
        let mut removed = twice;
        if let Value::Object(map) = &mut removed {
            remove(Dialect::ClaudeCode, map);
        }
        assert_eq!(removed, start);
    }

    #[test]
    fn a_changed_gate_entry_is_replaced_not_added() {
        let old = installed(Dialect::Codex, json!({}));
        let mut doc = old.clone();
        let entry = gate_entry(Dialect::Codex, "/opt/hookbox", true);
        if let Value::Object(map) = &mut doc {
            install(Dialect::Codex, map, &entry).unwrap_or_else(|e| panic!("{e}"));
        }
        let pre = doc["hooks"]["PreToolUse"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(pre.len(), 1);
        assert!(
            pre[0]["hooks"][0]["command"]
                .as_str()
                .is_some_and(|c| c.starts_with("'/opt/hookbox' hooks gate"))
        );
    }

    #[test]
    fn flat_formats_get_version_and_the_clis_own_keys() {
        let cursor = installed(Dialect::Cursor, json!({}));
        assert_eq!(cursor["version"], 1);
        assert_eq!(cursor["hooks"]["preToolUse"][0]["failClosed"], true);
        let copilot = installed(Dialect::Copilot, json!({}));
        assert!(is_gate_handler(&copilot["hooks"]["preToolUse"][0]));
        assert_eq!(
            copilot["hooks"]["preToolUse"][0]["timeoutSec"],
            CLI_TIMEOUT_SECS
        );
        let gemini = installed(Dialect::GeminiCli, json!({}));
        assert_eq!(
            gemini["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"],
            CLI_TIMEOUT_SECS * 1000
        );
    }

    #[test]
    fn the_command_names_the_project_and_falls_back_to_a_deny() {
        let cmd = gate_command(Dialect::ClaudeCode, "/a b/hookbox", true);
        assert!(cmd.starts_with("'/a b/hookbox' hooks gate --protocol claude-code --root \"$CLAUDE_PROJECT_DIR\" --require-policy || {"));
        let cmd = gate_command(Dialect::Codex, "it's", false);
        assert!(cmd.starts_with(r"'it'\''s' hooks gate --protocol codex || {"));
    }

    /// The identity hashed is exactly Codex's (tests/agent_clis runs codex 0.171.0 trusting the
    /// gate by these lines, without the bypass flag).
    #[test]
    fn codex_trust_hash_is_sha256_of_the_sorted_compact_identity() {
        let doc = json!({"hooks": {"PreToolUse": [{"hooks": [
            {"type": "command", "command": "x hooks gate --protocol codex", "timeout": 120}]}]}});
        let Value::Object(map) = doc else { panic!() };
        let hashes = codex_trust_hashes(Path::new("/p/.codex/hooks.json"), &map);
        assert_eq!(hashes.len(), 1);
        assert_eq!(hashes[0].0, "/p/.codex/hooks.json:pre_tool_use:0:0");
        use sha2::Digest as _;
        let expected = sha2::Sha256::digest(
            br#"{"event_name":"pre_tool_use","hooks":[{"async":false,"command":"x hooks gate --protocol codex","timeout":120,"type":"command"}]}"#,
        );
        let hex: String = expected.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hashes[0].1, format!("sha256:{hex}"));
    }
}
