//! Discovery and parsing of vendor hooks files into the engine's own rules.
//!
//! Files, per enabled dialect, at the sandbox root `/` then at `/workspace` (the user-level and
//! managed files of those CLIs do not exist in an environment):
//!
//! | dialect | files |
//! |---|---|
//! | `claude-code` | `.claude/settings.json`, `.claude/settings.local.json` |
//! | `gemini-cli` | `.gemini/settings.json` |
//! | `codex` | `.codex/hooks.json`, `.codex/config.toml` (`[hooks]`) |
//! | `cursor` | `.cursor/hooks.json` |
//! | `copilot` | `.github/hooks/*.json` (by name) |
//!
//! Order: hookbox's own files first, then the dialects in [`Dialect::ALL`] order, each at `/`
//! then `/workspace`, files in the order of the table. Each file becomes one group named after
//! its dialect; each vendor event entry a [`Rule`] whose [`VendorRule`] carries the dialect,
//! the event as written, when it fires and the vendor's matcher with the vendor's semantics.
//! Timeouts are converted from the vendor's unit with the vendor's default.
//!
//! Matchers, as each vendor compiles them (`regex` crate; a pattern only JavaScript compiles —
//! lookaround, backreferences — is an error, and matches nothing, as a broken hookbox matcher):
//! - Claude Code, Cursor: `""`, `"*"`, absent → all; only `[A-Za-z0-9_\- ,|]` → exact names
//!   split on `|` and `,`; otherwise an **unanchored** regular expression;
//! - Gemini CLI: tool events: unanchored regular expression, an invalid one is an exact name;
//! - Codex: only `[A-Za-z0-9_|]` → exact names, otherwise unanchored; `Edit`/`Write` match
//!   `apply_patch`;
//! - Copilot: anchored `^(?:m)$`; an invalid one skips the entry.
//!
//! Events whose matcher the vendor ignores (prompt, stop) match every call here too.

use std::sync::Arc;
use std::time::Duration;

use hookbox_protocol::HookEvent;
use hookbox_rootfs::{RootDir, RootFsError};
use serde_json::{Map, Value};

use super::events::{self, EventInfo, Fires, PayloadStyle};
use super::{Dialect, DialectSet};
use crate::config::{Group, Handler, HandlerKind, MAX_TIMEOUT, OnFailure, Rule};
use crate::diagnostic::{Diagnostic, JsonPath, Severity, describe};
use crate::discover::MAX_HOOKS_FILE_SIZE;
use crate::matcher::Matcher;

use super::matchers::matcher_alias_target;
pub use super::matchers::{VendorMatcher, emitted_tools, js_only, known_tools};

/// What a rule from a vendor file needs beyond hookbox's own rule.
#[derive(Debug, Clone)]
pub struct VendorRule {
    pub dialect: Dialect,
    /// The vendor's event as written in the file.
    pub event_name: String,
    /// When, within the hookbox event, it fires.
    pub fires: Fires,
    pub style: PayloadStyle,
    pub matcher: VendorMatcher,
    /// Extra environment variables of the handler (Copilot's `env`).
    pub env: Vec<(String, String)>,
    /// Working directory of the handler relative to the project (Copilot's `cwd`).
    pub cwd: Option<String>,
}

/// The files of `dialect` under one base directory (`/` or `/workspace`), in read order.
pub fn candidate_files(root: &RootDir, dialect: Dialect, base: &str) -> Vec<String> {
    let at = |rel: &str| format!("{}/{rel}", base.trim_end_matches('/'));
    match dialect {
        Dialect::Agents => vec![at(".agents/hooks.json")],
        Dialect::ClaudeCode => vec![
            at(".claude/settings.json"),
            at(".claude/settings.local.json"),
        ],
        Dialect::GeminiCli => vec![at(".gemini/settings.json")],
        Dialect::Codex => vec![at(".codex/hooks.json"), at(".codex/config.toml")],
        Dialect::Cursor => vec![at(".cursor/hooks.json")],
        Dialect::Copilot => {
            let dir = at(".github/hooks");
            let mut names: Vec<String> = root
                .list_dir(&dir)
                .map(|entries| {
                    entries
                        .into_iter()
                        .filter(|e| e.name.ends_with(".json"))
                        .map(|e| e.name)
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names.into_iter().map(|n| format!("{dir}/{n}")).collect()
        }
    }
}

/// Where vendor files are looked for.
pub const BASES: [&str; 2] = ["/", "/workspace"];

/// Reads and parses the files of every dialect in `dialects`, in the documented order.
/// Returns the groups, the files found and the diagnostics.
pub fn load(root: &RootDir, dialects: DialectSet) -> (Vec<Group>, Vec<String>, Vec<Diagnostic>) {
    let mut groups = Vec::new();
    let mut files = Vec::new();
    let mut diagnostics = Vec::new();
    for dialect in dialects.iter() {
        for base in BASES {
            for file in candidate_files(root, dialect, base) {
                let bytes = match root.read_file(&file, MAX_HOOKS_FILE_SIZE) {
                    Ok(bytes) => bytes,
                    Err(RootFsError::NotFound { .. }) => continue,
                    Err(err) => {
                        diagnostics.push(Diagnostic {
                            severity: Severity::Error,
                            file: file.clone(),
                            path: "$".into(),
                            message: format!("cannot read the hooks file: {err}; file ignored"),
                        });
                        continue;
                    }
                };
                let (group, diags) = parse(dialect, &file, &bytes);
                diagnostics.extend(diags);
                if let Some(group) = group {
                    files.push(file);
                    groups.push(group);
                }
            }
        }
    }
    (groups, files, diagnostics)
}

/// Parses one vendor file. `None` when it holds no hooks at all (a Claude settings file with
/// only permissions is not a hooks file).
pub fn parse(dialect: Dialect, file: &str, bytes: &[u8]) -> (Option<Group>, Vec<Diagnostic>) {
    let mut p = VendorParser {
        dialect,
        file,
        diagnostics: Vec::new(),
    };
    let group = p.file(bytes);
    (group, p.diagnostics)
}

struct VendorParser<'a> {
    dialect: Dialect,
    file: &'a str,
    diagnostics: Vec<Diagnostic>,
}

impl VendorParser<'_> {
    fn report(&mut self, severity: Severity, path: &JsonPath, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic {
            severity,
            file: self.file.to_owned(),
            path: path.as_str().to_owned(),
            message: message.into(),
        });
    }

    fn file(&mut self, bytes: &[u8]) -> Option<Group> {
        let root = JsonPath::root();
        let value: Value = if self.file.ends_with(".toml") {
            let text = match std::str::from_utf8(bytes) {
                Ok(text) => text,
                Err(_) => {
                    self.report(
                        Severity::Error,
                        &root,
                        "not UTF-8 text; the whole file is ignored",
                    );
                    return None;
                }
            };
            match toml::from_str::<toml::Value>(text) {
                Ok(v) => serde_json::to_value(v).unwrap_or_default(),
                Err(err) => {
                    let first = err
                        .to_string()
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    self.report(
                        Severity::Error,
                        &root,
                        format!("not valid TOML: {first}; the whole file is ignored"),
                    );
                    return None;
                }
            }
        } else {
            match serde_json::from_slice(bytes) {
                Ok(v) => v,
                Err(err) => {
                    self.report(
                        Severity::Error,
                        &root,
                        format!("not valid JSON: {err}; the whole file is ignored"),
                    );
                    return None;
                }
            }
        };
        let Value::Object(top) = value else {
            self.report(
                Severity::Error,
                &root,
                format!(
                    "expected an object, found {}; the whole file is ignored",
                    describe(&value)
                ),
            );
            return None;
        };
        let hooks = match top.get("hooks") {
            None => return None,
            Some(Value::Object(hooks)) => hooks,
            Some(other) => {
                self.report(
                    Severity::Error,
                    &root.key("hooks"),
                    format!(
                        "expected an object of events, found {}; the whole file is ignored",
                        describe(other)
                    ),
                );
                return None;
            }
        };
        let mut enabled = true;
        let mut disabled_names: Vec<String> = Vec::new();
        match self.dialect {
            Dialect::ClaudeCode | Dialect::Copilot => {
                if top.get("disableAllHooks") == Some(&Value::Bool(true)) {
                    self.report(
                        Severity::Warning,
                        &root.key("disableAllHooks"),
                        "disableAllHooks is true: every hook of this file is off",
                    );
                    enabled = false;
                }
            }
            Dialect::GeminiCli => {
                if let Some(Value::Object(cfg)) = top.get("hooksConfig") {
                    if cfg.get("enabled") == Some(&Value::Bool(false)) {
                        self.report(
                            Severity::Warning,
                            &root.key("hooksConfig").key("enabled"),
                            "hooksConfig.enabled is false: every hook of this file is off",
                        );
                        enabled = false;
                    }
                    if let Some(Value::Array(names)) = cfg.get("disabled") {
                        disabled_names = names
                            .iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect();
                    }
                }
            }
            Dialect::Codex | Dialect::Cursor | Dialect::Agents => {}
        }
        let mut group = Group {
            name: self.dialect.as_str().to_owned(),
            file: self.file.to_owned(),
            enabled,
            pre_tool_execution: Vec::new(),
            post_tool_execution: Vec::new(),
            pre_interaction: Vec::new(),
            post_interaction: Vec::new(),
        };
        let hooks_path = root.key("hooks");
        for (name, entries) in hooks {
            let path = hooks_path.key(name);
            let Some((info, style)) = events::lookup(self.dialect, name) else {
                self.report(
                    Severity::Warning,
                    &path,
                    format!(
                        "{name:?} is not a {} event hookbox knows; it never runs here",
                        self.dialect
                    ),
                );
                continue;
            };
            let Some(event) = info.event else {
                self.report(Severity::Warning, &path, format!("{name} is inactive in hookbox (it has no {name} moment); its hooks never run here"));
                continue;
            };
            let Value::Array(entries) = entries else {
                self.report(
                    Severity::Error,
                    &path,
                    format!(
                        "expected an array, found {}; event skipped",
                        describe(entries)
                    ),
                );
                continue;
            };
            for (i, entry) in entries.iter().enumerate() {
                let rule = match self.dialect {
                    Dialect::Cursor | Dialect::Copilot => {
                        self.flat_entry(&path.index(i), i, entry, name, info, style, event)
                    }
                    _ => self.nested_entry(
                        &path.index(i),
                        i,
                        entry,
                        name,
                        info,
                        style,
                        event,
                        &disabled_names,
                    ),
                };
                if let Some(rule) = rule {
                    match event {
                        HookEvent::PreToolExecution => group.pre_tool_execution.push(rule),
                        HookEvent::PostToolExecution => group.post_tool_execution.push(rule),
                        HookEvent::PreInteraction => group.pre_interaction.push(rule),
                        HookEvent::PostInteraction => group.post_interaction.push(rule),
                    }
                }
            }
        }
        Some(group)
    }

    fn vendor_matcher(
        &mut self,
        path: &JsonPath,
        value: Option<&Value>,
        name: &str,
        info: EventInfo,
    ) -> Option<VendorMatcher> {
        let pattern = match value {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(other) => {
                self.report(
                    Severity::Error,
                    path,
                    format!(
                        "expected a string, found {}; entry skipped",
                        describe(other)
                    ),
                );
                return None;
            }
        };
        if let Some(p) = pattern
            && !info.takes_matcher
            && !matches!(p, "" | "*")
        {
            self.report(
                Severity::Warning,
                path,
                format!(
                    "{name} ignores matchers: {p:?} has no effect, the hooks run on every {name}"
                ),
            );
        }
        let matcher = VendorMatcher::new(self.dialect, pattern, info.takes_matcher);
        if info.takes_matcher && info.fires != Fires::ForMcp {
            self.tool_traps(path, &matcher);
        }
        if let VendorMatcher::Invalid { pattern, error } = &matcher {
            let why = if js_only(pattern) {
                format!(
                    "{pattern:?} is a regular expression only JavaScript compiles (lookaround or backreference); hookbox cannot match it, so this gate never runs here ({error})"
                )
            } else {
                format!("invalid regular expression {pattern:?} ({error}); the entry never runs")
            };
            self.report(Severity::Error, path, why);
        }
        Some(matcher)
    }

    /// The traps of a tool matcher: an unanchored expression that also matches other tools of
    /// the vendor (`Edit.*` → `NotebookEdit`), and names hookbox never shows this dialect.
    fn tool_traps(&mut self, path: &JsonPath, matcher: &VendorMatcher) {
        let known = known_tools(self.dialect);
        let emitted = emitted_tools(self.dialect);
        match matcher {
            VendorMatcher::Regex {
                pattern,
                regex,
                anchored: false,
            } => {
                let Ok(anchored) = regex::Regex::new(&format!("^(?:{pattern})$")) else {
                    return;
                };
                let extra: Vec<&str> = known
                    .iter()
                    .copied()
                    .filter(|t| regex.is_match(t) && !anchored.is_match(t))
                    .collect();
                if !extra.is_empty() {
                    self.report(Severity::Warning, path, format!("{} matchers are unanchored regular expressions: {pattern:?} also matches {}; anchor it (\"^(?:{pattern})$\") if that is not meant", self.dialect, extra.join(", ")));
                }
                if !emitted.iter().any(|t| regex.is_match(t)) && !pattern.starts_with("mcp") {
                    self.report(Severity::Warning, path, format!("{pattern:?} matches no tool hookbox shows {} hooks ({}); the entry never runs here", self.dialect, emitted.join(", ")));
                }
            }
            VendorMatcher::Names(names) => {
                let never: Vec<&str> = names
                    .iter()
                    .map(String::as_str)
                    .filter(|n| {
                        !emitted.contains(n)
                            && !n.starts_with("mcp")
                            && !n.starts_with("MCP")
                            && !matcher_alias_target(self.dialect, n)
                    })
                    .collect();
                if !never.is_empty() {
                    self.report(Severity::Warning, path, format!("hookbox never calls {} for {} hooks (it shows them {}); those names never match here", never.join(", "), self.dialect, emitted.join(", ")));
                }
            }
            VendorMatcher::Regex { .. } | VendorMatcher::All | VendorMatcher::Invalid { .. } => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn nested_entry(
        &mut self,
        path: &JsonPath,
        index: usize,
        entry: &Value,
        name: &str,
        info: EventInfo,
        style: PayloadStyle,
        event: HookEvent,
        disabled: &[String],
    ) -> Option<Rule> {
        let Value::Object(map) = entry else {
            self.report(
                Severity::Error,
                path,
                format!(
                    "expected {{\"matcher\", \"hooks\"}}, found {}; entry skipped",
                    describe(entry)
                ),
            );
            return None;
        };
        let matcher = self.vendor_matcher(&path.key("matcher"), map.get("matcher"), name, info)?;
        let Some(Value::Array(list)) = map.get("hooks") else {
            self.report(
                Severity::Error,
                &path.key("hooks"),
                "missing or not an array of handlers; entry skipped",
            );
            return None;
        };
        let mut handlers = Vec::new();
        for (j, h) in list.iter().enumerate() {
            let hp = path.key("hooks").index(j);
            let Value::Object(hm) = h else {
                self.report(
                    Severity::Error,
                    &hp,
                    format!(
                        "expected a handler object, found {}; handler skipped",
                        describe(h)
                    ),
                );
                continue;
            };
            if self.dialect == Dialect::GeminiCli
                && let Some(hname) = hm.get("name").and_then(Value::as_str)
                && disabled.iter().any(|d| d == hname)
            {
                self.report(
                    Severity::Warning,
                    &hp,
                    format!("{hname:?} is in hooksConfig.disabled; it does not run"),
                );
                continue;
            }
            if let Some(handler) = self.handler(&hp, j, hm, name) {
                handlers.push(handler);
            }
        }
        Some(self.rule(
            index,
            matcher,
            handlers,
            name,
            info,
            style,
            event,
            Vec::new(),
            None,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn flat_entry(
        &mut self,
        path: &JsonPath,
        index: usize,
        entry: &Value,
        name: &str,
        info: EventInfo,
        style: PayloadStyle,
        event: HookEvent,
    ) -> Option<Rule> {
        let Value::Object(map) = entry else {
            self.report(
                Severity::Error,
                path,
                format!(
                    "expected a hook object, found {}; entry skipped",
                    describe(entry)
                ),
            );
            return None;
        };
        let matcher = self.vendor_matcher(&path.key("matcher"), map.get("matcher"), name, info)?;
        let handler = self.handler(path, 0, map, name)?;
        let mut env = Vec::new();
        let mut cwd = None;
        if self.dialect == Dialect::Copilot {
            if let Some(Value::Object(vars)) = map.get("env") {
                for (k, v) in vars {
                    let ok = !k.is_empty()
                        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                        && !k.as_bytes()[0].is_ascii_digit();
                    match v.as_str() {
                        Some(v) if ok => env.push((k.clone(), v.to_owned())),
                        _ => self.report(
                            Severity::Error,
                            &path.key("env").key(k),
                            "not a NAME: \"string\" variable; ignored",
                        ),
                    }
                }
            }
            cwd = map.get("cwd").and_then(Value::as_str).map(str::to_owned);
        }
        Some(self.rule(
            index,
            matcher,
            vec![handler],
            name,
            info,
            style,
            event,
            env,
            cwd,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn rule(
        &self,
        index: usize,
        matcher: VendorMatcher,
        handlers: Vec<Handler>,
        name: &str,
        info: EventInfo,
        style: PayloadStyle,
        _event: HookEvent,
        env: Vec<(String, String)>,
        cwd: Option<String>,
    ) -> Rule {
        Rule {
            index,
            matcher: Matcher::All,
            handlers,
            vendor: Some(Arc::new(VendorRule {
                dialect: self.dialect,
                event_name: name.to_owned(),
                fires: info.fires,
                style,
                matcher,
                env,
                cwd,
            })),
        }
    }

    fn handler(
        &mut self,
        path: &JsonPath,
        index: usize,
        map: &Map<String, Value>,
        event_name: &str,
    ) -> Option<Handler> {
        let type_name = map.get("type").and_then(Value::as_str).unwrap_or("command");
        let command = match self.dialect {
            Dialect::Copilot => map.get("bash").or_else(|| map.get("command")),
            _ => map.get("command"),
        }
        .and_then(Value::as_str)
        .map(str::to_owned);
        let kind = match type_name {
            "command" => match command {
                Some(c) if !c.trim().is_empty() => HandlerKind::Command { command: c },
                _ => {
                    let key = if self.dialect == Dialect::Copilot {
                        "bash"
                    } else {
                        "command"
                    };
                    self.report(
                        Severity::Error,
                        path,
                        format!("missing \"{key}\"; handler skipped"),
                    );
                    return None;
                }
            },
            "http" if matches!(self.dialect, Dialect::ClaudeCode | Dialect::Copilot) => {
                let Some(url) = map.get("url").and_then(Value::as_str) else {
                    self.report(Severity::Error, path, "missing \"url\"; handler skipped");
                    return None;
                };
                let lower = url.to_ascii_lowercase();
                if !(lower.starts_with("https://") || lower.starts_with("http://")) {
                    self.report(
                        Severity::Error,
                        &path.key("url"),
                        "expected an http:// or https:// URL; handler skipped",
                    );
                    return None;
                }
                let mut headers = Vec::new();
                if let Some(Value::Object(h)) = map.get("headers") {
                    for (k, v) in h {
                        let token = !k.is_empty()
                            && k.bytes().all(|b| {
                                b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
                            });
                        match v.as_str() {
                            Some(v) if token && !v.chars().any(|c| c.is_control() && c != '\t') => {
                                headers.push((k.clone(), v.to_owned()));
                            }
                            _ => self.report(
                                Severity::Error,
                                &path.key("headers").key(k),
                                "not a valid header name and string value; header dropped",
                            ),
                        }
                    }
                }
                let mut allowed_env_vars = Vec::new();
                match map.get("allowedEnvVars") {
                    None => {}
                    Some(Value::Array(names)) => {
                        for (i, name) in names.iter().enumerate() {
                            match name.as_str() {
                                Some(n)
                                    if !n.is_empty()
                                        && !n.starts_with(|c: char| c.is_ascii_digit())
                                        && n.bytes()
                                            .all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
                                {
                                    allowed_env_vars.push(n.to_owned());
                                }
                                _ => self.report(
                                    Severity::Error,
                                    &path.key("allowedEnvVars").index(i),
                                    "not a variable name; ignored",
                                ),
                            }
                        }
                    }
                    Some(_) => self.report(
                        Severity::Error,
                        &path.key("allowedEnvVars"),
                        "expected an array of variable names; ignored",
                    ),
                }
                HandlerKind::Http {
                    url: url.to_owned(),
                    headers,
                    allowed_env_vars,
                }
            }
            other => {
                let static_name = match other {
                    "prompt" => "prompt",
                    "agent" => "agent",
                    "mcp_tool" => "mcp_tool",
                    "http" => "http",
                    _ => "unsupported",
                };
                self.report(Severity::Error, &path.key("type"), format!("{} handler type {other:?} cannot run in hookbox; it counts as a failure of the hook each time it would run (on_failure decides)", self.dialect));
                HandlerKind::Unsupported {
                    type_name: static_name,
                    target: command
                        .or_else(|| map.get("prompt").and_then(Value::as_str).map(str::to_owned))
                        .unwrap_or_else(|| other.to_owned()),
                }
            }
        };
        let condition = match map.get("if") {
            None => None,
            Some(Value::String(rule)) if self.dialect == Dialect::ClaudeCode => {
                let parsed = super::condition::Condition::parse(rule);
                if let Err(e) = &parsed {
                    self.report(
                        Severity::Error,
                        &path.key("if"),
                        format!("{e}; the handler never runs"),
                    );
                }
                Some(parsed)
            }
            Some(other) => {
                self.report(Severity::Error, &path.key("if"), format!("expected a Claude Code permission rule string, found {}; the handler never runs", describe(other)));
                Some(Err("not a permission rule".to_owned()))
            }
        };

        if map.get("async") == Some(&Value::Bool(true)) {
            self.report(
                Severity::Warning,
                &path.key("async"),
                "\"async\": true is run synchronously by hookbox; its answer counts",
            );
        }
        let timeout = self.timeout(path, map, event_name);
        let on_failure = match (self.dialect, map.get("failClosed")) {
            (Dialect::Cursor, Some(Value::Bool(true))) => OnFailure::Deny,
            _ => OnFailure::Allow,
        };
        Some(Handler {
            index,
            kind,
            timeout,
            on_failure,
            condition,
        })
    }

    fn timeout(&mut self, path: &JsonPath, map: &Map<String, Value>, event_name: &str) -> Duration {
        let (key, millis_unit, default) = match self.dialect {
            Dialect::GeminiCli => ("timeout", true, Duration::from_secs(60)),
            Dialect::Copilot => ("timeoutSec", false, Duration::from_secs(30)),
            Dialect::ClaudeCode if event_name == "UserPromptSubmit" => {
                ("timeout", false, Duration::from_secs(30))
            }
            Dialect::ClaudeCode | Dialect::Codex => ("timeout", false, Duration::from_secs(600)),
            Dialect::Cursor | Dialect::Agents => ("timeout", false, crate::config::DEFAULT_TIMEOUT),
        };
        let Some(value) = map.get(key) else {
            return default.min(MAX_TIMEOUT);
        };
        let Some(n) = value.as_f64().filter(|n| *n > 0.0 && n.is_finite()) else {
            self.report(
                Severity::Error,
                &path.key(key),
                format!(
                    "expected a positive number, found {}; the default ({} s) applies",
                    describe(value),
                    default.as_secs()
                ),
            );
            return default.min(MAX_TIMEOUT);
        };
        if millis_unit && n < 1000.0 {
            // A gate killed after a few milliseconds always times out, and a time-out lets the
            // call through: the gate is gone.
            let severity = match events::lookup(self.dialect, event_name).and_then(|(i, _)| i.event)
            {
                Some(e) if e.decides() => Severity::Error,
                _ => Severity::Warning,
            };
            self.report(severity, &path.key(key), format!("Gemini CLI timeouts are milliseconds: {n} ms is probably meant as seconds (a file migrated from Claude Code?); the hook is killed after {n} ms, as Gemini would"));
        }
        let secs = if millis_unit { n / 1000.0 } else { n };
        let d = Duration::from_secs_f64(secs.min(MAX_TIMEOUT.as_secs_f64()));
        if secs > MAX_TIMEOUT.as_secs_f64() {
            self.report(
                Severity::Warning,
                &path.key(key),
                format!(
                    "longer than hookbox's limit; clamped to {} s",
                    MAX_TIMEOUT.as_secs()
                ),
            );
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(d: Dialect, json: &str) -> (Group, Vec<Diagnostic>) {
        let (g, diags) = parse(d, "/workspace/f", json.as_bytes());
        (g.unwrap_or_else(|| panic!("no group: {diags:?}")), diags)
    }

    fn vm(rule: &Rule) -> &VendorMatcher {
        &rule.vendor.as_ref().unwrap_or_else(|| panic!()).matcher
    }

    #[test]
    fn claude_matchers_are_exact_lists_or_unanchored_regexes() {
        let m = VendorMatcher::new(Dialect::ClaudeCode, Some("Edit|Write"), true);
        assert!(
            m.matches(Dialect::ClaudeCode, "Edit")
                && !m.matches(Dialect::ClaudeCode, "NotebookEdit")
        );
        let m = VendorMatcher::new(Dialect::ClaudeCode, Some("Edit.*"), true);
        assert!(
            m.matches(Dialect::ClaudeCode, "NotebookEdit"),
            "unanchored, as Claude Code"
        );
        let m = VendorMatcher::new(Dialect::Copilot, Some("bash|edit"), true);
        assert!(m.matches(Dialect::Copilot, "bash") && !m.matches(Dialect::Copilot, "bashful"));
        let m = VendorMatcher::new(Dialect::Codex, Some("Edit"), true);
        assert!(m.matches(Dialect::Codex, "apply_patch"));
        let m = VendorMatcher::new(Dialect::GeminiCli, Some("run_shell_command("), true);
        assert!(
            matches!(m, VendorMatcher::Names(_)),
            "Gemini: invalid regex is an exact name"
        );
        let m = VendorMatcher::new(Dialect::ClaudeCode, Some("^(?!Read).*"), true);
        assert!(matches!(m, VendorMatcher::Invalid { .. }));
        assert!(js_only("^(?!Read).*") && js_only("(a)\\1") && !js_only("Edit.*"));
        let m = VendorMatcher::new(Dialect::ClaudeCode, Some("Bash"), false);
        assert!(
            matches!(m, VendorMatcher::All),
            "ignored matcher matches all"
        );
    }

    #[test]
    fn http_headers_are_checked() {
        let (g, diags) = parse_str(
            Dialect::ClaudeCode,
            r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[
            {"type":"http","url":"https://policy.example/hook","headers":{"X-Ok":"1","Bad Name":"2","X-Nl":"a\r\nInjected: 1"}}]}]}}"#,
        );
        let HandlerKind::Http { headers, .. } = &g.pre_tool_execution[0].handlers[0].kind else {
            panic!("not http");
        };
        assert_eq!(headers, &[("X-Ok".to_owned(), "1".to_owned())]);
        assert_eq!(
            diags
                .iter()
                .filter(|d| d.message.contains("header dropped"))
                .count(),
            2
        );
    }

    #[test]
    fn traps_are_diagnosed() {
        let (_, diags) = parse_str(
            Dialect::ClaudeCode,
            r#"{"hooks":{"PreToolUse":[
            {"matcher":"Edit.*","hooks":[{"type":"command","command":"a"}]},
            {"matcher":"WebFetch","hooks":[{"type":"command","command":"b"}]},
            {"matcher":"^(?!Read).*$","hooks":[{"type":"command","command":"c"}]}]}}"#,
        );
        let find = |needle: &str| {
            diags
                .iter()
                .find(|d| d.message.contains(needle))
                .unwrap_or_else(|| panic!("{needle}: {diags:?}"))
        };
        assert!(
            find("also matches MultiEdit, NotebookEdit")
                .path
                .ends_with("[0].matcher")
        );
        assert_eq!(
            find("hookbox never calls WebFetch").severity,
            Severity::Warning
        );
        assert_eq!(find("only JavaScript compiles").severity, Severity::Error);
        let (_, diags) = parse_str(
            Dialect::Codex,
            r#"{"hooks":{"PreToolUse":[{"matcher":"Edit|Write","hooks":[{"type":"command","command":"a"}]}]}}"#,
        );
        assert!(
            diags.is_empty(),
            "Codex Edit|Write reach apply_patch: {diags:?}"
        );
    }

    #[test]
    fn claude_settings_become_rules_with_their_dialect_and_units() {
        let (g, diags) = parse_str(
            Dialect::ClaudeCode,
            r#"{"permissions":{},"hooks":{
            "PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"a","timeout":10}]}],
            "UserPromptSubmit":[{"matcher":"x","hooks":[{"type":"command","command":"b"}]}],
            "PreCompact":[{"hooks":[{"type":"command","command":"c"}]}],
            "Stop":[{"hooks":[{"type":"prompt","prompt":"is it done?"}]}]}}"#,
        );
        assert_eq!(g.pre_tool_execution.len(), 1);
        assert_eq!(
            g.pre_tool_execution[0].handlers[0].timeout,
            Duration::from_secs(10)
        );
        assert_eq!(
            g.pre_interaction[0].handlers[0].timeout,
            Duration::from_secs(30)
        );
        assert!(matches!(
            g.post_interaction[0].handlers[0].kind,
            HandlerKind::Unsupported {
                type_name: "prompt",
                ..
            }
        ));
        let msgs: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
        assert!(
            msgs.iter().any(|m| m.contains("PreCompact is inactive")),
            "{msgs:?}"
        );
        assert!(
            msgs.iter()
                .any(|m| m.contains("UserPromptSubmit ignores matchers")),
            "{msgs:?}"
        );
        assert!(
            msgs.iter().any(|m| m.contains("\"prompt\" cannot run")),
            "{msgs:?}"
        );
        assert!(
            parse(Dialect::ClaudeCode, "f", br#"{"permissions":{}}"#)
                .0
                .is_none()
        );
    }

    #[test]
    fn gemini_milliseconds_and_copilot_seconds() {
        let (g, diags) = parse_str(
            Dialect::GeminiCli,
            r#"{"hooks":{"BeforeTool":[{"matcher":"run_shell_command","hooks":[{"type":"command","command":"a","timeout":10}]}]}}"#,
        );
        assert_eq!(
            g.pre_tool_execution[0].handlers[0].timeout,
            Duration::from_millis(10)
        );
        assert!(
            diags
                .iter()
                .any(|d| d.message.contains("probably meant as seconds"))
        );
        let (g, _) = parse_str(
            Dialect::Copilot,
            r#"{"version":1,"hooks":{"preToolUse":[{"type":"command","bash":"a","timeoutSec":5,"env":{"A":"b"},"cwd":"scripts"}]}}"#,
        );
        let r = &g.pre_tool_execution[0];
        assert_eq!(r.handlers[0].timeout, Duration::from_secs(5));
        assert_eq!(
            r.vendor.as_ref().map(|v| v.env.clone()),
            Some(vec![("A".into(), "b".into())])
        );
        assert!(matches!(vm(r), VendorMatcher::All));
    }

    #[test]
    fn cursor_fail_closed_is_on_failure_deny_and_codex_toml_parses() {
        let (g, _) = parse_str(
            Dialect::Cursor,
            r#"{"version":1,"hooks":{"beforeShellExecution":[{"command":"a","failClosed":true}]}}"#,
        );
        assert_eq!(
            g.pre_tool_execution[0].handlers[0].on_failure,
            OnFailure::Deny
        );
        let (g, diags) = parse(Dialect::Codex, "/workspace/.codex/config.toml", b"model = \"x\"\n[[hooks.PreToolUse]]\nmatcher = \"Bash\"\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"a\"\n");
        let g = g.unwrap_or_else(|| panic!("{diags:?}"));
        assert_eq!(g.pre_tool_execution[0].handlers.len(), 1);
    }
}
