//! Each dialect's event names and what they mean in hookbox.
//!
//! A vendor event is [`EventMeaning::Active`] when hookbox runs its handlers (at one of
//! hookbox's four events, possibly only for some tools or only when the tool failed),
//! [`EventMeaning::Inactive`] when the vendor has it but hookbox never emits anything like it
//! (compaction, notifications, session start, …: `hooks check` lists those by name), and
//! unknown otherwise (a typo, or an event of a newer CLI: also listed).

use hookbox_protocol::{HookEvent, ToolName};

use super::Dialect;

/// When, within a hookbox event, a vendor event's handlers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fires {
    /// On every occurrence of the hookbox event.
    Always,
    /// Only for these tools (Cursor's `beforeShellExecution` fires for shell calls only).
    ForTools(&'static [ToolName]),
    /// Only for `code_execution` (Cursor's shell events; Python code is shown as the shell
    /// command that runs it, see the module doc of [`super`]).
    ForShell,
    /// Only for remote MCP tools (Cursor's `beforeMCPExecution`).
    ForMcp,
    /// Only after a tool that failed (`PostToolUseFailure`).
    OnFailure,
    /// Only after a tool that did not fail (Claude's `PostToolUse`, which a failure replaces by
    /// `PostToolUseFailure`).
    OnSuccess,
}

/// What a vendor event name means in hookbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventMeaning {
    Active {
        event: HookEvent,
        fires: Fires,
    },
    /// The vendor has this event; hookbox never emits it.
    Inactive,
    /// Not an event of this dialect.
    Unknown,
}

/// One row of a dialect's event table.
#[derive(Debug, Clone, Copy)]
pub struct EventInfo {
    pub name: &'static str,
    /// `None` when inactive in hookbox.
    pub event: Option<HookEvent>,
    pub fires: Fires,
    /// Whether the vendor compares this event's `matcher` with the tool name; a matcher on an
    /// event that ignores it is a `hooks check` warning.
    pub takes_matcher: bool,
}

const fn active(name: &'static str, event: HookEvent, fires: Fires, m: bool) -> EventInfo {
    EventInfo {
        name,
        event: Some(event),
        fires,
        takes_matcher: m,
    }
}

const fn inactive(name: &'static str, m: bool) -> EventInfo {
    EventInfo {
        name,
        event: None,
        fires: Fires::Always,
        takes_matcher: m,
    }
}

use Fires::{Always, ForMcp, ForShell, ForTools, OnFailure, OnSuccess};
use HookEvent::{PostInteraction, PostToolExecution, PreInteraction, PreToolExecution};

const FILE_READS: &[ToolName] = &[ToolName::ViewFile];
const FILE_EDITS: &[ToolName] = &[ToolName::WriteToFile, ToolName::ReplaceFileContent];

const CLAUDE: &[EventInfo] = &[
    active("PreToolUse", PreToolExecution, Always, true),
    active("PostToolUse", PostToolExecution, OnSuccess, true),
    active("PostToolUseFailure", PostToolExecution, OnFailure, true),
    active("UserPromptSubmit", PreInteraction, Always, false),
    active("Stop", PostInteraction, Always, false),
    inactive("SessionStart", true),
    inactive("Setup", true),
    inactive("UserPromptExpansion", false),
    inactive("PermissionRequest", true),
    inactive("PermissionDenied", true),
    inactive("PostToolBatch", false),
    inactive("Notification", true),
    inactive("MessageDisplay", false),
    inactive("SubagentStart", true),
    inactive("SubagentStop", true),
    inactive("TaskCreated", false),
    inactive("TaskCompleted", false),
    inactive("StopFailure", true),
    inactive("TeammateIdle", false),
    inactive("InstructionsLoaded", true),
    inactive("ConfigChange", true),
    inactive("CwdChanged", false),
    inactive("DirectoryAdded", false),
    inactive("FileChanged", true),
    inactive("WorktreeCreate", false),
    inactive("WorktreeRemove", false),
    inactive("PreCompact", true),
    inactive("PostCompact", true),
    inactive("Elicitation", true),
    inactive("ElicitationResult", true),
    inactive("SessionEnd", true),
];

const GEMINI: &[EventInfo] = &[
    active("BeforeTool", PreToolExecution, Always, true),
    active("AfterTool", PostToolExecution, Always, true),
    active("BeforeAgent", PreInteraction, Always, false),
    active("AfterAgent", PostInteraction, Always, false),
    inactive("BeforeModel", false),
    inactive("AfterModel", false),
    inactive("BeforeToolSelection", false),
    inactive("SessionStart", true),
    inactive("SessionEnd", true),
    inactive("Notification", true),
    inactive("PreCompress", true),
];

const CODEX: &[EventInfo] = &[
    active("PreToolUse", PreToolExecution, Always, true),
    active("PostToolUse", PostToolExecution, Always, true),
    active("UserPromptSubmit", PreInteraction, Always, false),
    active("Stop", PostInteraction, Always, false),
    inactive("SessionStart", true),
    inactive("SubagentStart", true),
    inactive("PermissionRequest", true),
    inactive("PreCompact", true),
    inactive("PostCompact", true),
    inactive("SubagentStop", true),
];

const CURSOR: &[EventInfo] = &[
    active("preToolUse", PreToolExecution, Always, true),
    active("beforeShellExecution", PreToolExecution, ForShell, true),
    active(
        "beforeReadFile",
        PreToolExecution,
        ForTools(FILE_READS),
        true,
    ),
    active("beforeMCPExecution", PreToolExecution, ForMcp, true),
    active("postToolUse", PostToolExecution, OnSuccess, true),
    active("postToolUseFailure", PostToolExecution, OnFailure, true),
    active("afterShellExecution", PostToolExecution, ForShell, true),
    active(
        "afterFileEdit",
        PostToolExecution,
        ForTools(FILE_EDITS),
        true,
    ),
    active("afterMCPExecution", PostToolExecution, ForMcp, true),
    active("beforeSubmitPrompt", PreInteraction, Always, false),
    active("stop", PostInteraction, Always, false),
    inactive("sessionStart", false),
    inactive("sessionEnd", false),
    inactive("subagentStart", true),
    inactive("subagentStop", true),
    inactive("preCompact", false),
    inactive("afterAgentResponse", false),
    inactive("afterAgentThought", false),
    inactive("beforeTabFileRead", false),
    inactive("afterTabFileEdit", false),
];

const COPILOT: &[EventInfo] = &[
    active("preToolUse", PreToolExecution, Always, true),
    active("postToolUse", PostToolExecution, OnSuccess, true),
    active("postToolUseFailure", PostToolExecution, OnFailure, true),
    active("userPromptSubmitted", PreInteraction, Always, false),
    active("agentStop", PostInteraction, Always, false),
    inactive("sessionStart", false),
    inactive("sessionEnd", false),
    inactive("subagentStart", false),
    inactive("subagentStop", false),
    inactive("errorOccurred", false),
    inactive("preCompact", false),
    inactive("permissionRequest", true),
    inactive("notification", false),
];

const AGENTS: &[EventInfo] = &[
    active("pre_tool_execution", PreToolExecution, Always, true),
    active("post_tool_execution", PostToolExecution, Always, true),
    active("pre_interaction", PreInteraction, Always, true),
    active("post_interaction", PostInteraction, Always, true),
];

/// Every event `dialect` documents, in the vendor's order (active ones first).
pub fn table(dialect: Dialect) -> &'static [EventInfo] {
    match dialect {
        Dialect::Agents => AGENTS,
        Dialect::ClaudeCode => CLAUDE,
        Dialect::GeminiCli => GEMINI,
        Dialect::Codex => CODEX,
        Dialect::Cursor => CURSOR,
        Dialect::Copilot => COPILOT,
    }
}

/// How an event name is written in the payload a handler receives. Copilot selects its
/// payload's shape by the spelling of the event's name in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadStyle {
    /// The dialect's usual shape.
    Native,
    /// Copilot with a PascalCase event name (`PreToolUse`): Claude-like snake_case fields
    /// (`hook_event_name`, `session_id`, `tool_name`, `tool_input`).
    SnakeCase,
}

/// The row for the event `name` of `dialect`, with the payload style its spelling selects.
/// Names are case-sensitive, as the vendors read them; Copilot also accepts the PascalCase
/// form of its camelCase names (`PreToolUse`, and `UserPromptSubmit`/`Stop` for its
/// `userPromptSubmitted`/`agentStop`).
pub fn lookup(dialect: Dialect, name: &str) -> Option<(EventInfo, PayloadStyle)> {
    let rows = table(dialect);
    if let Some(info) = rows.iter().find(|e| e.name == name) {
        return Some((*info, PayloadStyle::Native));
    }
    if dialect != Dialect::Copilot {
        return None;
    }
    let camel = match name {
        "UserPromptSubmit" => "userPromptSubmitted".to_owned(),
        "Stop" => "agentStop".to_owned(),
        _ => {
            let mut chars = name.chars();
            let first = chars.next()?;
            if !first.is_ascii_uppercase() {
                return None;
            }
            format!("{}{}", first.to_ascii_lowercase(), chars.as_str())
        }
    };
    rows.iter()
        .find(|e| e.name == camel)
        .map(|info| (*info, PayloadStyle::SnakeCase))
}

/// What the event `name` of `dialect` means in hookbox.
pub fn meaning(dialect: Dialect, name: &str) -> EventMeaning {
    match lookup(dialect, name) {
        Some((
            EventInfo {
                event: Some(event),
                fires,
                ..
            },
            _,
        )) => EventMeaning::Active { event, fires },
        Some(_) => EventMeaning::Inactive,
        None => EventMeaning::Unknown,
    }
}

/// The vendor events of `dialect` that run at the hookbox event `event`, in table order.
pub fn vendor_events(
    dialect: Dialect,
    event: HookEvent,
) -> impl Iterator<Item = &'static EventInfo> {
    table(dialect)
        .iter()
        .filter(move |e| e.event == Some(event))
}

/// The vendor's main event name for a hookbox event (what `hooks test --event` and a converted
/// file use).
pub fn primary_name(dialect: Dialect, event: HookEvent) -> &'static str {
    vendor_events(dialect, event)
        .find(|e| e.fires == Fires::Always || e.fires == Fires::OnSuccess)
        .map_or(event.as_str(), |e| e.name)
}

impl Fires {
    /// Whether a handler of an event with this condition runs for a call of `tool` (`None`
    /// for a remote MCP tool or an interaction event) that `failed` (post events only).
    pub fn applies(self, tool: Option<ToolName>, failed: bool) -> bool {
        match self {
            Always => true,
            ForTools(tools) => tool.is_some_and(|t| tools.contains(&t)),
            ForShell => tool == Some(ToolName::CodeExecution),
            ForMcp => tool.is_none(),
            OnFailure => failed,
            OnSuccess => !failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vendor_maps_the_four_hookbox_events() {
        for d in Dialect::ALL {
            for e in HookEvent::ALL {
                assert!(
                    vendor_events(d, e).next().is_some(),
                    "{d} has no event for {e}"
                );
            }
        }
        assert_eq!(
            primary_name(Dialect::ClaudeCode, PreToolExecution),
            "PreToolUse"
        );
        assert_eq!(
            primary_name(Dialect::GeminiCli, PostToolExecution),
            "AfterTool"
        );
        assert_eq!(
            primary_name(Dialect::Cursor, PreInteraction),
            "beforeSubmitPrompt"
        );
        assert_eq!(primary_name(Dialect::Copilot, PostInteraction), "agentStop");
        assert_eq!(
            primary_name(Dialect::Agents, PreToolExecution),
            "pre_tool_execution"
        );
    }

    #[test]
    fn names_are_case_sensitive_and_inactive_events_are_known() {
        assert_eq!(
            meaning(Dialect::ClaudeCode, "PreToolUse"),
            EventMeaning::Active {
                event: PreToolExecution,
                fires: Always
            }
        );
        assert_eq!(
            meaning(Dialect::ClaudeCode, "preToolUse"),
            EventMeaning::Unknown
        );
        assert_eq!(
            meaning(Dialect::ClaudeCode, "PreCompact"),
            EventMeaning::Inactive
        );
        assert_eq!(
            meaning(Dialect::GeminiCli, "PreToolUse"),
            EventMeaning::Unknown
        );
        assert_eq!(
            meaning(Dialect::Cursor, "sessionStart"),
            EventMeaning::Inactive
        );
        assert_eq!(
            meaning(Dialect::Cursor, "beforeShellExecution"),
            EventMeaning::Active {
                event: PreToolExecution,
                fires: ForShell
            }
        );
    }

    #[test]
    fn copilot_pascal_case_selects_the_snake_case_payload() {
        let (info, style) = lookup(Dialect::Copilot, "PreToolUse").unwrap_or_else(|| panic!());
        assert_eq!(info.name, "preToolUse");
        assert_eq!(style, PayloadStyle::SnakeCase);
        let (info, _) = lookup(Dialect::Copilot, "Stop").unwrap_or_else(|| panic!());
        assert_eq!(info.name, "agentStop");
        let (_, style) = lookup(Dialect::Copilot, "preToolUse").unwrap_or_else(|| panic!());
        assert_eq!(style, PayloadStyle::Native);
        assert!(lookup(Dialect::Copilot, "Bogus").is_none());
        assert!(lookup(Dialect::ClaudeCode, "Bogus").is_none());
    }

    #[test]
    fn prompt_and_stop_events_ignore_matchers() {
        for (d, name) in [
            (Dialect::ClaudeCode, "UserPromptSubmit"),
            (Dialect::ClaudeCode, "Stop"),
            (Dialect::Codex, "Stop"),
            (Dialect::GeminiCli, "BeforeAgent"),
        ] {
            let (info, _) = lookup(d, name).unwrap_or_else(|| panic!("{name}"));
            assert!(!info.takes_matcher, "{d} {name}");
        }
        let (info, _) = lookup(Dialect::ClaudeCode, "PreToolUse").unwrap_or_else(|| panic!());
        assert!(info.takes_matcher);
    }

    #[test]
    fn event_conditions_select_tools() {
        assert!(ForShell.applies(Some(ToolName::CodeExecution), false));
        assert!(!ForShell.applies(Some(ToolName::ViewFile), false));
        assert!(ForTools(FILE_READS).applies(Some(ToolName::ViewFile), false));
        assert!(!ForTools(FILE_READS).applies(None, false));
        assert!(ForMcp.applies(None, false));
        assert!(!ForMcp.applies(Some(ToolName::ListDir), false));
        assert!(OnFailure.applies(Some(ToolName::ListDir), true));
        assert!(!OnSuccess.applies(Some(ToolName::ListDir), true));
    }
}
