//! The hooks file schema: parsing `hooks.json` bytes into groups, rules and handlers, with a
//! diagnostic for every malformed part.
//!
//! Parsing never fails as a whole and never panics. Bad JSON yields no groups and one
//! diagnostic; a broken group, rule or handler is skipped with a diagnostic and the rest of the
//! file still applies. Group and handler order is the order written in the file (`serde_json`
//! is built with `preserve_order`).
//!
//! Decided where the reference is silent (see `shared/spec/hooks.md`):
//! - a missing `matcher` is an error and the rule is skipped (guessing "all tools" could run an
//!   audit hook on everything; guessing "none" would hide a gate): say it, skip it;
//! - a non-boolean `enabled` is an error and the group keeps the default, `true`, so a typo
//!   cannot switch a security gate off;
//! - `timeout` must be a positive number of seconds; larger than [`MAX_TIMEOUT`] is clamped;
//! - unknown keys are warnings (they are usually typos of a real key), except where a gate is
//!   lost: a misspelt event (its rules never run) or `on_failure` (the handler fails open), which
//!   are errors; so is a tool matcher that names no tool, or an alternative in it that names
//!   none (`view_file|writefile`): every error is a gate the file meant and is not in force;
//! - `pre_interaction` / `post_interaction` (hookbox extensions) take rules of the same shape;
//!   their matchers are matched against the agent's name, so no tool-name lint applies;
//! - a tool matcher that starts with `mcp:` (hookbox extension) matches remote MCP tools,
//!   `mcp:<server>/<tool>`, and nothing else; no other matcher (not even `*`) matches them.

use std::time::Duration;

use hookbox_protocol::HookEvent;
use serde_json::{Map, Value};

use crate::diagnostic::{Diagnostic, JsonPath, Severity, describe};
use crate::matcher::{Matcher, literal_alternatives, suggest_tool};

/// Timeout of a handler that does not set one (the reference's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest timeout a handler may ask for; a hook that runs longer holds the agent hostage.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// Everything the engine needs from all hooks files of an environment, in dispatch order.
#[derive(Debug, Clone, Default)]
pub struct HooksConfig {
    pub groups: Vec<Group>,
}

/// One named group of rules.
#[derive(Debug, Clone)]
pub struct Group {
    pub name: String,
    /// The file this group came from, as the sandbox sees it.
    pub file: String,
    pub enabled: bool,
    pub pre_tool_execution: Vec<Rule>,
    pub post_tool_execution: Vec<Rule>,
    /// hookbox extension: before the agent works on an interaction's input.
    pub pre_interaction: Vec<Rule>,
    /// hookbox extension: after an interaction's turn ended.
    pub post_interaction: Vec<Rule>,
}

impl HooksConfig {
    /// Whether any rule of `event` comes from another agent CLI's hooks file (only those read
    /// [`crate::engine::VendorExtras`]).
    pub fn has_vendor_rules(&self, event: HookEvent) -> bool {
        self.groups
            .iter()
            .any(|g| g.rules(event).iter().any(|r| r.vendor.is_some()))
    }
}

impl Group {
    /// The rules for `event`.
    pub fn rules(&self, event: HookEvent) -> &[Rule] {
        match event {
            HookEvent::PreToolExecution => &self.pre_tool_execution,
            HookEvent::PostToolExecution => &self.post_tool_execution,
            HookEvent::PreInteraction => &self.pre_interaction,
            HookEvent::PostInteraction => &self.post_interaction,
        }
    }
}

/// A matcher and the handlers it triggers.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Position in the event's array in the file.
    pub index: usize,
    pub matcher: Matcher,
    pub handlers: Vec<Handler>,
    /// Set when the rule comes from another agent CLI's hooks file: its dialect, its event,
    /// its own matcher (which `matcher` above does not replace: it stays [`Matcher::All`]).
    pub vendor: Option<std::sync::Arc<crate::dialect::load::VendorRule>>,
}

/// One handler, with its position in the rule's `hooks` array in the file.
#[derive(Debug, Clone)]
pub struct Handler {
    pub index: usize,
    pub kind: HandlerKind,
    pub timeout: Duration,
    /// What a failure of this handler means (hookbox extension, `"on_failure"`).
    pub on_failure: OnFailure,
    /// Claude Code's `if` (a permission rule the call must match), for vendor handlers; a rule
    /// that could not be read is `Err` and the handler never runs.
    pub condition: Option<Result<crate::dialect::condition::Condition, String>>,
}

/// What a handler's failure (crash, non-zero exit, timeout, output overflow, unparseable
/// output, non-2xx answer, unreachable or blocked URL) means for the call. A hookbox extension:
/// the reference always fails open, which stays the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// The call proceeds (the reference's behaviour).
    #[default]
    Allow,
    /// A pre hook's failure denies the call, with a reason naming the failure; a post hook's is
    /// recorded (there is nothing left to block).
    Deny,
}

/// What a handler does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerKind {
    /// A shell line run with `/bin/sh -c` in the sandbox; the event on stdin.
    Command { command: String },
    /// A POST of the event to `url` with extra `headers`.
    Http {
        url: String,
        headers: Vec<(String, String)>,
        /// Claude Code's `allowedEnvVars`: the variables whose `$NAME` / `${NAME}` in a header
        /// value are replaced by the environment's declared value (empty for every other
        /// name). Always empty in hookbox's own files.
        allowed_env_vars: Vec<String>,
    },
    /// A vendor handler type hookbox cannot run (`prompt`, `agent`, `mcp_tool`): reported by
    /// `hooks check`, and a failure (under `on_failure`) whenever it would run.
    Unsupported {
        type_name: &'static str,
        target: String,
    },
}

impl HandlerKind {
    /// `command` or `http`.
    pub fn type_name(&self) -> &'static str {
        match self {
            HandlerKind::Command { .. } => "command",
            HandlerKind::Http { .. } => "http",
            HandlerKind::Unsupported { type_name, .. } => type_name,
        }
    }

    /// The command line or URL: what identifies the handler to a person.
    pub fn target(&self) -> &str {
        match self {
            HandlerKind::Command { command } => command,
            HandlerKind::Http { url, .. } => url,
            HandlerKind::Unsupported { target, .. } => target,
        }
    }
}

/// Parses one hooks file. `file` is its sandbox path, used in diagnostics and traces.
pub fn parse(file: &str, bytes: &[u8]) -> (Vec<Group>, Vec<Diagnostic>) {
    let mut p = Parser {
        file,
        diagnostics: Vec::new(),
    };
    let groups = p.file(bytes);
    (groups, p.diagnostics)
}

const GROUP_KEYS: &[&str] = &[
    "enabled",
    "pre_tool_execution",
    "post_tool_execution",
    "pre_interaction",
    "post_interaction",
];
const RULE_KEYS: &[&str] = &["matcher", "hooks"];
const COMMAND_KEYS: &[&str] = &["type", "command", "timeout", "on_failure"];
const HTTP_KEYS: &[&str] = &["type", "url", "headers", "timeout", "on_failure"];

struct Parser<'a> {
    file: &'a str,
    diagnostics: Vec<Diagnostic>,
}

impl Parser<'_> {
    fn report(&mut self, severity: Severity, path: &JsonPath, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic {
            severity,
            file: self.file.to_owned(),
            path: path.as_str().to_owned(),
            message: message.into(),
        });
    }

    fn error(&mut self, path: &JsonPath, message: impl Into<String>) {
        self.report(Severity::Error, path, message);
    }

    fn warn(&mut self, path: &JsonPath, message: impl Into<String>) {
        self.report(Severity::Warning, path, message);
    }

    fn file(&mut self, bytes: &[u8]) -> Vec<Group> {
        let root = JsonPath::root();
        let value: Value = match serde_json::from_slice(bytes) {
            Ok(value) => value,
            Err(err) => {
                self.error(
                    &root,
                    format!("not valid JSON: {err}; the whole file is ignored"),
                );
                return Vec::new();
            }
        };
        let Value::Object(groups) = value else {
            self.error(
                &root,
                format!(
                    "expected an object mapping group names to groups, found {}; the whole file is ignored",
                    describe(&value)
                ),
            );
            return Vec::new();
        };
        groups
            .iter()
            .filter_map(|(name, group)| self.group(&root.key(name), name, group))
            .collect()
    }

    fn group(&mut self, path: &JsonPath, name: &str, value: &Value) -> Option<Group> {
        let Value::Object(map) = value else {
            // #31: a file of events without the named group around them said only "found an
            // array".
            let hint = match HookEvent::ALL.iter().any(|e| e.as_str() == name) {
                true => format!(
                    " ({name:?} is an event: put it inside a named group, {{\"my-gate\": {{\"{name}\": [...]}}}})"
                ),
                false => String::new(),
            };
            self.error(
                path,
                format!(
                    "expected a group object with pre_tool_execution and/or post_tool_execution, found {}{hint}; group skipped",
                    describe(value)
                ),
            );
            return None;
        };
        self.unknown_keys(path, map, GROUP_KEYS);
        let enabled = match map.get("enabled") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.error(
                    &path.key("enabled"),
                    format!(
                        "expected true or false, found {}; the group stays enabled",
                        describe(other)
                    ),
                );
                true
            }
        };
        let pre = self.rules(path, map, HookEvent::PreToolExecution);
        let post = self.rules(path, map, HookEvent::PostToolExecution);
        let pre_interaction = self.rules(path, map, HookEvent::PreInteraction);
        let post_interaction = self.rules(path, map, HookEvent::PostInteraction);
        if !HookEvent::ALL.iter().any(|e| map.contains_key(e.as_str())) {
            self.warn(
                path,
                "group has neither pre_tool_execution nor post_tool_execution; it does nothing",
            );
        }
        Some(Group {
            name: name.to_owned(),
            file: self.file.to_owned(),
            enabled,
            pre_tool_execution: pre,
            post_tool_execution: post,
            pre_interaction,
            post_interaction,
        })
    }

    fn rules(&mut self, group: &JsonPath, map: &Map<String, Value>, event: HookEvent) -> Vec<Rule> {
        let path = group.key(event.as_str());
        match map.get(event.as_str()) {
            None => Vec::new(),
            Some(Value::Array(rules)) => rules
                .iter()
                .enumerate()
                .filter_map(|(i, rule)| self.rule(&path.index(i), i, rule, event))
                .collect(),
            Some(other) => {
                self.error(
                    &path,
                    format!(
                        "expected an array of {{\"matcher\", \"hooks\"}} rules, found {}; {} skipped",
                        describe(other),
                        event
                    ),
                );
                Vec::new()
            }
        }
    }

    fn rule(
        &mut self,
        path: &JsonPath,
        index: usize,
        value: &Value,
        event: HookEvent,
    ) -> Option<Rule> {
        let Value::Object(map) = value else {
            self.error(
                path,
                format!(
                    "expected a rule object {{\"matcher\", \"hooks\"}}, found {}; rule skipped",
                    describe(value)
                ),
            );
            return None;
        };
        self.unknown_keys(path, map, RULE_KEYS);
        let matcher = match map.get("matcher") {
            Some(Value::String(pattern)) => self.matcher(&path.key("matcher"), pattern, event),
            Some(other) => {
                self.error(
                    &path.key("matcher"),
                    format!(
                        "expected a regular expression string, found {}; rule skipped",
                        describe(other)
                    ),
                );
                return None;
            }
            None => {
                self.error(
                    path,
                    match event.is_tool_event() {
                        true => "missing \"matcher\" (use \"*\" to match every tool); rule skipped",
                        false => {
                            "missing \"matcher\" (use \"*\" to match every agent); rule skipped"
                        }
                    },
                );
                return None;
            }
        };
        let handlers = match map.get("hooks") {
            Some(Value::Array(handlers)) => {
                if handlers.is_empty() {
                    self.warn(&path.key("hooks"), "no handlers; the rule does nothing");
                }
                handlers
                    .iter()
                    .enumerate()
                    .filter_map(|(i, h)| self.handler(&path.key("hooks").index(i), i, h))
                    .collect()
            }
            Some(other) => {
                self.error(
                    &path.key("hooks"),
                    format!(
                        "expected an array of handlers, found {}; rule skipped",
                        describe(other)
                    ),
                );
                return None;
            }
            None => {
                self.error(
                    path,
                    "missing \"hooks\" (the array of handlers); rule skipped",
                );
                return None;
            }
        };
        Some(Rule {
            index,
            matcher,
            handlers,
            vendor: None,
        })
    }

    fn matcher(&mut self, path: &JsonPath, pattern: &str, event: HookEvent) -> Matcher {
        let matcher = Matcher::new(pattern);
        match &matcher {
            Matcher::All => {}
            Matcher::Invalid { error, .. } => {
                let hint = if pattern.starts_with('*') {
                    format!(
                        " (this looks like a shell glob; the regular expression is \".{pattern}\")"
                    )
                } else {
                    String::new()
                };
                self.error(
                    path,
                    format!(
                        "invalid regular expression {pattern:?}: {error}{hint}; the rule matches no tool"
                    ),
                );
            }
            Matcher::Regex { .. } => {
                // Interaction events match agent names, and `mcp:` matchers remote MCP tools,
                // which no list knows.
                // A tool matcher that names no tool, or an alternative that names none, is a
                // gate the file meant to install and that is not in force: an error.
                if event.is_tool_event() && !matcher.is_for_mcp() {
                    if matcher.matched_tools().is_empty() {
                        self.error(path, no_tool_message(pattern));
                    } else if let Some(message) = dead_alternatives_message(pattern) {
                        self.error(path, message);
                    }
                }
            }
        }
        matcher
    }

    fn handler(&mut self, path: &JsonPath, index: usize, value: &Value) -> Option<Handler> {
        let Value::Object(map) = value else {
            self.error(
                path,
                format!(
                    "expected a handler object with \"type\", found {}; handler skipped",
                    describe(value)
                ),
            );
            return None;
        };
        let kind = match map.get("type") {
            Some(Value::String(t)) if t == "command" => {
                self.unknown_keys(path, map, COMMAND_KEYS);
                let command = self.required_string(path, map, "command")?;
                HandlerKind::Command { command }
            }
            Some(Value::String(t)) if t == "http" => {
                self.unknown_keys(path, map, HTTP_KEYS);
                let url = self.required_string(path, map, "url")?;
                if !self.url_ok(&path.key("url"), &url) {
                    return None;
                }
                let headers = self.headers(&path.key("headers"), map.get("headers"));
                HandlerKind::Http {
                    url,
                    headers,
                    allowed_env_vars: Vec::new(),
                }
            }
            Some(Value::String(t)) => {
                self.error(
                    &path.key("type"),
                    format!(
                        "unknown handler type {t:?} (expected \"command\" or \"http\"){}; handler skipped",
                        nearest(t, &["command", "http"])
                    ),
                );
                return None;
            }
            Some(other) => {
                self.error(
                    &path.key("type"),
                    format!(
                        "expected \"command\" or \"http\", found {}; handler skipped",
                        describe(other)
                    ),
                );
                return None;
            }
            None => {
                self.error(
                    path,
                    "missing \"type\" (\"command\" or \"http\"); handler skipped",
                );
                return None;
            }
        };
        let timeout = self.timeout(&path.key("timeout"), map.get("timeout"))?;
        let on_failure = self.on_failure(&path.key("on_failure"), map.get("on_failure"));
        Some(Handler {
            index,
            kind,
            timeout,
            on_failure,
            condition: None,
        })
    }

    /// `"allow"` or `"deny"`. Anything else is an error and counts as `"deny"`: a typo made
    /// while asking for fail-closed must not leave the gate failing open.
    fn on_failure(&mut self, path: &JsonPath, value: Option<&Value>) -> OnFailure {
        match value {
            None => OnFailure::Allow,
            Some(Value::String(s)) if s == "allow" => OnFailure::Allow,
            Some(Value::String(s)) if s == "deny" => OnFailure::Deny,
            Some(other) => {
                let hint = match other {
                    Value::String(s) => nearest(s, &["allow", "deny"]),
                    _ => String::new(),
                };
                self.error(
                    path,
                    format!(
                        "expected \"allow\" or \"deny\" (hookbox extension: what a failure of this handler means), found {}{hint}; treated as \"deny\", the stricter",
                        describe(other)
                    ),
                );
                OnFailure::Deny
            }
        }
    }

    fn required_string(
        &mut self,
        path: &JsonPath,
        map: &Map<String, Value>,
        key: &str,
    ) -> Option<String> {
        match map.get(key) {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
            Some(Value::String(_)) => {
                self.error(
                    &path.key(key),
                    format!("\"{key}\" is empty; handler skipped"),
                );
                None
            }
            Some(other) => {
                self.error(
                    &path.key(key),
                    format!(
                        "expected a string, found {}; handler skipped",
                        describe(other)
                    ),
                );
                None
            }
            None => {
                self.error(path, format!("missing \"{key}\"; handler skipped"));
                None
            }
        }
    }

    fn url_ok(&mut self, path: &JsonPath, url: &str) -> bool {
        let lower = url.to_ascii_lowercase();
        if lower.starts_with("https://") {
            true
        } else if lower.starts_with("http://") {
            self.warn(
                path,
                "plain http: the event and any injected headers travel unencrypted",
            );
            true
        } else {
            self.error(
                path,
                format!("expected an http:// or https:// URL, found {url:?}; handler skipped"),
            );
            false
        }
    }

    fn headers(&mut self, path: &JsonPath, value: Option<&Value>) -> Vec<(String, String)> {
        let map = match value {
            None => return Vec::new(),
            Some(Value::Object(map)) => map,
            Some(other) => {
                self.error(
                    path,
                    format!(
                        "expected an object of header names to strings, found {}; no headers sent",
                        describe(other)
                    ),
                );
                return Vec::new();
            }
        };
        let mut headers = Vec::new();
        for (name, value) in map {
            let header_path = path.key(name);
            if !is_header_name(name) {
                self.error(&header_path, "not a valid HTTP header name; header skipped");
                continue;
            }
            match value {
                Value::String(v) if is_header_value(v) => headers.push((name.clone(), v.clone())),
                Value::String(_) => {
                    self.error(
                        &header_path,
                        "header value contains control characters; header skipped",
                    );
                }
                other => self.error(
                    &header_path,
                    format!(
                        "expected a string, found {}; header skipped",
                        describe(other)
                    ),
                ),
            }
        }
        headers
    }

    fn timeout(&mut self, path: &JsonPath, value: Option<&Value>) -> Option<Duration> {
        let Some(value) = value else {
            return Some(DEFAULT_TIMEOUT);
        };
        let seconds = value.as_f64().filter(|s| s.is_finite() && *s > 0.0);
        let Some(seconds) = seconds else {
            let hint = match value {
                Value::String(s) if s.trim().parse::<f64>().is_ok() => {
                    format!(" (write {} without quotes)", s.trim())
                }
                _ => String::new(),
            };
            self.error(
                path,
                format!(
                    "expected a positive number of seconds, found {}{hint}; handler skipped",
                    describe(value)
                ),
            );
            return None;
        };
        if seconds > MAX_TIMEOUT.as_secs_f64() {
            self.warn(
                path,
                format!(
                    "{seconds} s is more than the maximum of {} s; clamped",
                    MAX_TIMEOUT.as_secs()
                ),
            );
            return Some(MAX_TIMEOUT);
        }
        Some(Duration::try_from_secs_f64(seconds).unwrap_or(MAX_TIMEOUT))
    }

    fn unknown_keys(&mut self, path: &JsonPath, map: &Map<String, Value>, known: &[&str]) {
        for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
            if key == "updated_args" {
                // A hookbox extension misplaced: it belongs in a pre hook's answer.
                self.warn(
                    &path.key(key),
                    "\"updated_args\" is ignored here: it is part of a pre_tool_execution hook's answer (printed or returned by the handler, with \"decision\": \"allow\"), not a handler setting, and post_tool_execution hooks cannot rewrite arguments",
                );
                continue;
            }
            if key == "additional_context" {
                self.warn(
                    &path.key(key),
                    "\"additional_context\" is ignored here: it is part of a hook's answer (printed or returned by the handler, e.g. {\"decision\": \"allow\", \"additional_context\": \"...\"}), not a handler setting",
                );
                continue;
            }
            let message = format!(
                "unknown key {key:?} is ignored (expected one of: {}){}",
                known.join(", "),
                nearest(key, known)
            );
            match gate_lost(key, &map[key], known) {
                Some(lost) => self.error(&path.key(key), format!("{message}; {lost}")),
                None => self.warn(&path.key(key), message),
            }
        }
    }
}

/// What is lost when an unknown `key` is ignored, when it is part of a gate: a misspelt event
/// (its rules never run) or a misspelt `on_failure` (the handler fails open). `None` where
/// nothing is lost (a comment-like key, a misspelt `timeout`), which stays a warning.
fn gate_lost(key: &str, value: &Value, known: &[&str]) -> Option<&'static str> {
    let near = |target: &str| {
        known.contains(&target) && strsim::levenshtein(key, target) <= target.len() / 2
    };
    let event_near = HookEvent::ALL.iter().any(|e| near(e.as_str()));
    if known == GROUP_KEYS && (event_near || value.is_array()) {
        return Some("the rules under it never run");
    }
    if near("on_failure") {
        return Some("the handler fails open");
    }
    None
}

/// For a plain alternation some of whose alternatives name no tool (`view_file|writefile`):
/// which, and what they probably meant. The alternatives that do match still run.
fn dead_alternatives_message(pattern: &str) -> Option<String> {
    let dead: Vec<String> = literal_alternatives(pattern)?
        .into_iter()
        .filter(|alt| !alt.is_empty() && Matcher::new(alt).matched_tools().is_empty())
        .map(|alt| match suggest_tool(alt) {
            Some(tool) => format!("\"{alt}\" (did you mean \"{tool}\"?)"),
            None => format!("\"{alt}\""),
        })
        .collect();
    if dead.is_empty() {
        return None;
    }
    Some(format!(
        "in matcher {pattern:?}, {} names none of the built-in tools; the rule never runs for the tool meant",
        dead.join(", ")
    ))
}

/// `; did you mean "x"?` for the closest of `known`, or nothing when none is close.
fn nearest(word: &str, known: &[&str]) -> String {
    known
        .iter()
        .map(|k| (strsim::levenshtein(word, k), *k))
        .min_by_key(|(d, _)| *d)
        .filter(|(d, k)| *d <= k.len() / 2)
        .map(|(_, k)| format!("; did you mean \"{k}\"?"))
        .unwrap_or_default()
}

fn no_tool_message(pattern: &str) -> String {
    let names =
        "code_execution, view_file, write_to_file, replace_file_content, list_dir, delete_file";
    let suggestions: Vec<String> = literal_alternatives(pattern)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|alt| suggest_tool(alt).map(|tool| format!("\"{alt}\" → \"{tool}\"")))
        .collect();
    let mut message = format!(
        "matcher {pattern:?} matches none of the built-in tools ({names}); the rule never runs"
    );
    if !suggestions.is_empty() {
        message.push_str("; did you mean ");
        message.push_str(&suggestions.join(", "));
        message.push('?');
    }
    message
}

/// RFC 9110 token characters.
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn is_header_value(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

#[cfg(test)]
mod tests;
