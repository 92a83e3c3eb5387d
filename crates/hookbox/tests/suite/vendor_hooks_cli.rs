//! Other agent CLIs' hooks files (issue #30) through `hookbox hooks test` and `hooks check`: a
//! corpus in each dialect, written in the style of hooks people share (block `rm -rf` and
//! force-push, protect `.env` and secrets, stay in the project, rewrite a command, add context,
//! format after an edit, log every call), run for real in the sandbox against a table of
//! expected decisions and reasons; every `hooks check` trap; the files ignored unless enabled.

use super::support::{hookbox, stdout, text, tree};

/// One row of the decision table.
struct Case {
    name: &'static str,
    fixture: &'static str,
    dialects: &'static str,
    event: &'static str,
    tool: &'static str,
    args: &'static str,
    /// allow, deny or ask.
    decision: &'static str,
    /// A piece of the deny reason, of the rewritten arguments, or of the context; "" for none.
    says: &'static str,
}

const fn case(
    name: &'static str,
    fixture: &'static str,
    dialects: &'static str,
    tool: &'static str,
    args: &'static str,
    decision: &'static str,
    says: &'static str,
) -> Case {
    Case {
        name,
        fixture,
        dialects,
        event: "pre",
        tool,
        args,
        decision,
        says,
    }
}

const CASES: &[Case] = &[
    // Claude Code
    case(
        "claude: rm -rf denied by exit 2 (stderr is the reason)",
        "claude",
        "claude-code",
        "code_execution",
        r#"{"code":"rm -rf /tmp/build"}"#,
        "deny",
        "rm -rf is not allowed",
    ),
    case(
        "claude: git push --force denied",
        "claude",
        "claude-code",
        "code_execution",
        r#"{"code":"git push --force origin main"}"#,
        "deny",
        "force-push",
    ),
    case(
        "claude: a handler's `if` rule (Bash(git push *)) selects the calls it runs for",
        "claude",
        "claude-code",
        "code_execution",
        r#"{"code":"git push origin main"}"#,
        "deny",
        "pushes need a review",
    ),
    case(
        "claude: ls allowed (the `if` handler does not run)",
        "claude",
        "claude-code",
        "code_execution",
        r#"{"code":"ls -la"}"#,
        "allow",
        "",
    ),
    case(
        "claude: npm test rewritten by updatedInput",
        "claude",
        "claude-code",
        "code_execution",
        r#"{"code":"npm test"}"#,
        "allow",
        "npm test -- --ci",
    ),
    case(
        "claude: .env write denied by JSON",
        "claude",
        "claude-code",
        "write_to_file",
        r#"{"path":".env","content":"KEY=1"}"#,
        "deny",
        "/workspace/.env holds secrets",
    ),
    case(
        "claude: secrets/ read denied (Read)",
        "claude",
        "claude-code",
        "view_file",
        r#"{"path":"/workspace/secrets/key.pem"}"#,
        "deny",
        "holds secrets",
    ),
    case(
        "claude: edit outside the project denied",
        "claude",
        "claude-code",
        "replace_file_content",
        r#"{"path":"/etc/hosts","old_content":"a","new_content":"b"}"#,
        "deny",
        "outside the project",
    ),
    case(
        "claude: second chunk of a two-chunk edit is checked too",
        "claude",
        "claude-code",
        "replace_file_content",
        r#"{"path":"/etc/hosts","chunks":[{"old_content":"a","new_content":"b"},{"old_content":"c","new_content":"d"}]}"#,
        "deny",
        "outside the project",
    ),
    case(
        "claude: edit in the project allowed",
        "claude",
        "claude-code",
        "write_to_file",
        r#"{"path":"src/b.txt","content":"b"}"#,
        "allow",
        "",
    ),
    case(
        "claude: delete_file of .env reaches the Bash guard as rm",
        "claude",
        "claude-code",
        "delete_file",
        r#"{"path":"/workspace/.env"}"#,
        "deny",
        "shell access to .env",
    ),
    case(
        "claude: python code under the Bash guard",
        "claude",
        "claude-code",
        "code_execution",
        r#"{"code":"import os\nos.system('rm -rf /')","language":"python"}"#,
        "deny",
        "rm -rf is not allowed",
    ),
    case(
        "claude: a rewrite that cannot map back onto the call denies",
        "claude",
        "claude-code",
        "delete_file",
        r#"{"path":"/workspace/app.log"}"#,
        "deny",
        "cannot be expressed as hookbox's delete_file",
    ),
    case(
        "claude: list_dir allowed (only the log hook)",
        "claude",
        "claude-code",
        "list_dir",
        r#"{"path":"/workspace"}"#,
        "allow",
        "",
    ),
    // Claude's files are ignored unless enabled.
    case(
        "off by default: the Claude gate does not run",
        "claude",
        "",
        "code_execution",
        r#"{"code":"rm -rf /tmp/build"}"#,
        "allow",
        "",
    ),
    // Gemini CLI
    case(
        "gemini: rm -rf denied by plain text + exit 2",
        "gemini",
        "gemini-cli",
        "code_execution",
        r#"{"code":"rm -rf /tmp/build"}"#,
        "deny",
        "rm -rf is not allowed (gemini policy)",
    ),
    case(
        "gemini: .env write denied by JSON although exit 1",
        "gemini",
        "gemini-cli",
        "write_to_file",
        r#"{"path":"/workspace/.env","content":"x"}"#,
        "deny",
        "holds secrets (gemini policy)",
    ),
    case(
        "gemini: tool_input merged (rewrite)",
        "gemini",
        "gemini-cli",
        "code_execution",
        r#"{"code":"npm test"}"#,
        "allow",
        "npm test -- --ci",
    ),
    case(
        "gemini: a migrated Claude permissionDecision does not deny",
        "gemini",
        "gemini-cli",
        "code_execution",
        r#"{"code":"curl http://example.test"}"#,
        "allow",
        "",
    ),
    case(
        "gemini: ls allowed",
        "gemini",
        "gemini-cli",
        "code_execution",
        r#"{"code":"ls"}"#,
        "allow",
        "",
    ),
    // Codex
    case(
        "codex: rm -rf denied by exit 2 + stderr",
        "codex",
        "codex",
        "code_execution",
        r#"{"code":"rm -rf /tmp/build"}"#,
        "deny",
        "codex policy",
    ),
    case(
        "codex: ask makes the hook fail and the call proceed",
        "codex",
        "codex",
        "code_execution",
        r#"{"code":"git push origin main"}"#,
        "allow",
        "",
    ),
    case(
        "codex: .env write (apply_patch) denied by an Edit|Write matcher",
        "codex",
        "codex",
        "write_to_file",
        r#"{"path":".env","content":"x"}"#,
        "deny",
        "holds secrets (codex policy)",
    ),
    case(
        "codex: .env delete (apply_patch Delete File) denied",
        "codex",
        "codex",
        "delete_file",
        r#"{"path":"/workspace/.env"}"#,
        "deny",
        "holds secrets (codex policy)",
    ),
    case(
        "codex: src write allowed",
        "codex",
        "codex",
        "write_to_file",
        r#"{"path":"src/a.rs","content":"fn main() {}"}"#,
        "allow",
        "",
    ),
    // Cursor
    case(
        "cursor: rm -rf denied by beforeShellExecution exit 2",
        "cursor",
        "cursor",
        "code_execution",
        r#"{"code":"rm -rf /tmp/build"}"#,
        "deny",
        "cursor policy",
    ),
    case(
        "cursor: .env write denied (agent_message to the model)",
        "cursor",
        "cursor",
        "write_to_file",
        r#"{"path":".env","content":"x"}"#,
        "deny",
        "holds secrets (cursor policy)",
    ),
    case(
        "cursor: secrets/ read denied by beforeReadFile",
        "cursor",
        "cursor",
        "view_file",
        r#"{"path":"/workspace/secrets/k"}"#,
        "deny",
        "may not be read",
    ),
    case(
        "cursor: failClosed guard that cannot run denies",
        "cursor",
        "cursor",
        "delete_file",
        r#"{"path":"/workspace/old.txt"}"#,
        "deny",
        "fail closed",
    ),
    case(
        "cursor: ls allowed",
        "cursor",
        "cursor",
        "code_execution",
        r#"{"code":"ls"}"#,
        "allow",
        "",
    ),
    // Copilot
    case(
        "copilot: rm -rf denied by permissionDecision",
        "copilot",
        "copilot",
        "code_execution",
        r#"{"code":"rm -rf /tmp/build"}"#,
        "deny",
        "copilot policy",
    ),
    case(
        "copilot: exit 2 only warns (force-push proceeds)",
        "copilot",
        "copilot",
        "code_execution",
        r#"{"code":"git push --force"}"#,
        "allow",
        "",
    ),
    case(
        "copilot: .env create denied",
        "copilot",
        "copilot",
        "write_to_file",
        r#"{"path":".env","content":"x"}"#,
        "deny",
        "copilot policy",
    ),
    // All at once, as the issue's "done when": each file's gate enforced.
    case(
        "all: Claude, Gemini and Copilot gates together",
        "all",
        "all",
        "code_execution",
        r#"{"code":"rm -rf /tmp/build"}"#,
        "deny",
        "rm -rf",
    ),
];

fn run(c: &Case) -> serde_json::Value {
    let root = tree(&format!("vendor/{}", c.fixture));
    let r = root.path().to_str().unwrap();
    let mut argv = vec![
        "hooks", "test", "--root", r, "--tool", c.tool, "--args", c.args, "--event", c.event,
        "--json",
    ];
    if !c.dialects.is_empty() {
        argv.extend(["--hook-dialects", c.dialects]);
    }
    let out = hookbox(&argv);
    assert!(out.status.success(), "{}: {}", c.name, text(&out.stderr));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn the_vendor_corpus_decides_as_each_cli_would() {
    let mut table = vec![
        "| case | expected | got |".to_owned(),
        "|---|---|---|".to_owned(),
    ];
    let mut wrong = Vec::new();
    for c in CASES {
        let report = run(c);
        let d = &report["dispatch"];
        let decision = d["decision"].as_str().unwrap_or_default().to_owned();
        let said = [
            d["reason"].as_str().unwrap_or_default().to_owned(),
            d.get("updated_args")
                .map(|a| a.to_string())
                .unwrap_or_default(),
        ]
        .join(" ");
        let ok = decision == c.decision && (c.says.is_empty() || said.contains(c.says));
        let expected = if c.says.is_empty() {
            c.decision.to_owned()
        } else {
            format!("{} ({})", c.decision, c.says)
        };
        let got = format!("{decision} {}", said.trim()).trim().to_owned();
        table.push(format!("| {} | {expected} | {got} |", c.name));
        if !ok {
            wrong.push(format!("{}: expected {expected}, got {got}\n{d:#}", c.name));
        }
    }
    println!("{}", table.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn the_trace_names_file_dialect_event_and_meaning() {
    let c = &CASES[0];
    let report = run(c);
    let trace = report["dispatch"]["trace"].as_array().unwrap();
    let deny = trace.iter().find(|t| t["outcome"] == "deny").unwrap();
    assert_eq!(deny["file"], "/workspace/.claude/settings.json");
    assert_eq!(deny["vendor"]["dialect"], "claude-code");
    assert_eq!(deny["vendor"]["event"], "PreToolUse");
    assert_eq!(deny["vendor"]["tool_name"], "Bash");
    assert_eq!(deny["vendor"]["meaning"], "exit 2: block");
    // The reference's trace fields are all still there.
    for key in [
        "group",
        "file",
        "rule_index",
        "handler_index",
        "handler_type",
        "target",
        "duration_ms",
    ] {
        assert!(deny.get(key).is_some(), "{key}");
    }
}

#[test]
fn a_vendor_event_runs_by_its_own_name() {
    let root = tree("vendor/claude");
    let r = root.path().to_str().unwrap();
    let out = hookbox(&[
        "hooks",
        "test",
        "--root",
        r,
        "--hook-dialects",
        "claude-code",
        "--event",
        "PostToolUse",
        "--tool",
        "write_to_file",
        "--args",
        r#"{"path":"src/a.txt","content":"x"}"#,
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let d = &report["dispatch"];
    assert_eq!(d["event"], "post_tool_execution");
    assert_eq!(d["additional_context"], serde_json::json!(["formatted"]));
    let trace = d["trace"].as_array().unwrap();
    assert_eq!(
        trace.len(),
        1,
        "only PostToolUse's handlers run: {trace:#?}"
    );
    // A prompt event adds context for the model.
    let out = hookbox(&[
        "hooks",
        "test",
        "--root",
        r,
        "--hook-dialects",
        "claude-code",
        "--event",
        "UserPromptSubmit",
        "--input",
        "fix the bug",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        report["dispatch"]["additional_context"],
        serde_json::json!(["Project rule: run the tests before you say you are done."])
    );
    // An inactive event is refused by name; an unknown one too.
    let out = hookbox(&[
        "hooks",
        "test",
        "--root",
        r,
        "--hook-dialects",
        "claude-code",
        "--event",
        "PreCompact",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("PreCompact (claude-code) is inactive in hookbox"),
        "{}",
        text(&out.stderr)
    );
    let out = hookbox(&[
        "hooks",
        "test",
        "--root",
        r,
        "--event",
        "BeforeTool",
        "--tool",
        "list_dir",
    ]);
    assert!(
        text(&out.stderr).contains("enable it with --hook-dialects gemini-cli"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_same_handler_through_two_files_runs_once() {
    let root = tree("vendor/dedup");
    let r = root.path().to_str().unwrap();
    let out = hookbox(&[
        "hooks",
        "test",
        "--root",
        r,
        "--hook-dialects",
        "claude-code,cursor",
        "--tool",
        "code_execution",
        "--args",
        r#"{"code":"ls"}"#,
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let outcomes: Vec<&str> = report["dispatch"]["trace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["allow", "skipped"]);
}

#[test]
fn hooks_check_knows_every_trap_and_fails_when_a_gate_is_gone() {
    let root = tree("vendor/traps");
    let r = root.path().to_str().unwrap();
    let out = hookbox(&[
        "hooks",
        "check",
        "--root",
        r,
        "--hook-dialects",
        "all",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "a gate is gone: exit 1");
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let diags = report["diagnostics"].as_array().unwrap();
    let find = |needle: &str| {
        diags
            .iter()
            .find(|d| d["message"].as_str().unwrap().contains(needle))
            .unwrap_or_else(|| panic!("no diagnostic with {needle:?}: {diags:#?}"))
    };
    let unanchored = find("also matches MultiEdit, NotebookEdit");
    assert_eq!(unanchored["path"], "$.hooks.PreToolUse[0].matcher");
    assert_eq!(find("only JavaScript compiles")["severity"], "error");
    assert_eq!(find("hookbox never calls WebFetch")["severity"], "warning");
    assert_eq!(
        find("\"prompt\" cannot run in hookbox")["severity"],
        "error"
    );
    assert_eq!(
        find("Stop ignores matchers")["path"],
        "$.hooks.Stop[0].matcher"
    );
    assert!(find("PreCompact is inactive")["path"] == "$.hooks.PreCompact");
    find("\"PreToolUsed\" is not a claude-code event");
    let gemini = find("10 ms is probably meant as seconds");
    assert_eq!(gemini["severity"], "error");
    assert_eq!(gemini["file"], "/workspace/.gemini/settings.json");
    let copilot = find("Copilot only warns on exit 2");
    assert_eq!(copilot["file"], "/workspace/.github/hooks/guard.json");
    assert_eq!(report["files"].as_array().unwrap().len(), 3);

    // Not enabled: the same tree is checked as before, vendor files unread.
    let out = hookbox(&["hooks", "check", "--root", r]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("no hooks files"), "{}", stdout(&out));
}
