//! `hookbox hooks convert` (issue #30): what "exact" means operationally — a converted corpus
//! file, run by `hooks test` in place of the original, decides every call of a table the same
//! way with the same reasons, and `hooks check` is clean on it; and each refusal names the
//! entry, handler or field and why, writing nothing.

use std::path::Path;

use super::support::{hookbox, stdout, text, tree};

/// The calls every converted corpus file is run against (tool, arguments).
const CALLS: &[(&str, &str)] = &[
    ("code_execution", r#"{"code":"rm -rf /tmp/build"}"#),
    (
        "code_execution",
        r#"{"code":"git push --force origin main"}"#,
    ),
    ("code_execution", r#"{"code":"git push origin main"}"#),
    ("code_execution", r#"{"code":"ls -la"}"#),
    ("code_execution", r#"{"code":"cat .env"}"#),
    ("write_to_file", r#"{"path":".env","content":"x"}"#),
    ("write_to_file", r#"{"path":"src/b.txt","content":"x"}"#),
    ("write_to_file", r#"{"path":"/etc/passwd","content":"x"}"#),
    (
        "replace_file_content",
        r#"{"path":"src/a.txt","chunks":[{"old":"a","new":"b"}]}"#,
    ),
    ("view_file", r#"{"path":".env"}"#),
    ("view_file", r#"{"path":"src/a.txt"}"#),
    ("delete_file", r#"{"path":"src/a.txt"}"#),
    ("list_dir", r#"{"path":"src"}"#),
];

/// The decision, reason, rewritten arguments and context of one call, from `hooks test`.
fn decide(root: &Path, dialects: &str, tool: &str, args: &str) -> String {
    let r = root.to_str().unwrap();
    let out = hookbox(&[
        "hooks",
        "test",
        "--root",
        r,
        "--tool",
        tool,
        "--args",
        args,
        "--hook-dialects",
        dialects,
        "--json",
    ]);
    assert!(out.status.success(), "{tool} {args}: {}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let d = &report["dispatch"];
    format!(
        "{} | {} | {} | {}",
        d["decision"].as_str().unwrap_or_default(),
        d["reason"].as_str().unwrap_or_default(),
        d.get("updated_args")
            .map(|a| a.to_string())
            .unwrap_or_default(),
        d.get("context").map(|a| a.to_string()).unwrap_or_default(),
    )
}

fn convert(root: &Path, to: &str, out: &Path) -> std::process::Output {
    hookbox(&[
        "hooks",
        "convert",
        "--root",
        root.to_str().unwrap(),
        "--to",
        to,
        "--out",
        out.to_str().unwrap(),
    ])
}

#[test]
fn a_converted_corpus_file_decides_every_call_exactly_as_the_original() {
    let corpus = [
        (
            "claude",
            "claude",
            "claude-code",
            "workspace/.claude/settings.json",
        ),
        (
            "gemini",
            "gemini",
            "gemini-cli",
            "workspace/.gemini/settings.json",
        ),
        ("codex", "codex", "codex", "workspace/.codex/hooks.json"),
        ("cursor", "cursor", "cursor", "workspace/.cursor/hooks.json"),
        (
            "copilot",
            "copilot",
            "copilot",
            "workspace/.github/hooks/policy.json",
        ),
    ];
    let mut table = vec!["| file | call | original | converted |".to_owned()];
    let mut wrong = Vec::new();
    for (fixture, to, dialects, file) in corpus {
        let original = tree(&format!("vendor/{fixture}"));
        let converted = tree(&format!("vendor/{fixture}"));
        let target = converted.path().join(file);
        let before = std::fs::read_to_string(&target).unwrap();
        // The result replaces the original (which may hold other settings, so convert does
        // not write over it).
        std::fs::remove_file(&target).unwrap();
        let out = convert(original.path(), to, &target);
        assert!(out.status.success(), "{fixture}: {}", text(&out.stderr));
        let after = std::fs::read_to_string(&target).unwrap();
        assert_ne!(before, after, "{fixture}: the file was not rewritten");
        // Defaults differ between CLIs: every timeout is written explicitly.
        let written: serde_json::Value = serde_json::from_str(&after).unwrap();
        let timeout_key = if fixture == "copilot" {
            "timeoutSec"
        } else {
            "timeout"
        };
        assert!(
            after.matches(timeout_key).count() >= 1
                && !written["hooks"].as_object().unwrap().is_empty(),
            "{fixture}: {after}"
        );
        // `hooks check` says of the converted file what it says of the original: clean for
        // every corpus file but Copilot's, whose exit-2 gate is a trap kept as it is (Copilot
        // only warns on exit 2; an exact conversion keeps that), and Cursor's, whose
        // `failClosed` guard names a script that does not exist on purpose (the linter fails
        // a handler that could never run).
        let check = |root: &Path| {
            hookbox(&[
                "hooks",
                "check",
                "--root",
                root.to_str().unwrap(),
                "--hook-dialects",
                dialects,
            ])
        };
        let (was, now) = (check(original.path()), check(converted.path()));
        assert_eq!(
            now.status.success(),
            !matches!(fixture, "copilot" | "cursor"),
            "{fixture}: hooks check on the converted file:\n{}{}",
            stdout(&now),
            text(&now.stderr)
        );
        assert_eq!(was.status.success(), now.status.success(), "{fixture}");
        for (tool, args) in CALLS {
            let a = decide(original.path(), dialects, tool, args);
            let b = decide(converted.path(), dialects, tool, args);
            table.push(format!("| {fixture} | {tool} {args} | {a} | {b} |"));
            if a != b {
                wrong.push(format!(
                    "{fixture}: {tool} {args}\n  original:  {a}\n  converted: {b}"
                ));
            }
        }
    }
    println!("{}", table.join("\n"));
    // The table must hold real decisions, not only allows.
    assert!(
        table.iter().any(|row| row.contains("| deny |")),
        "{}",
        table.join("\n")
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Runs a conversion that must be refused; returns its stderr, checking nothing was written.
fn refused(fixture: &str, to: &str) -> String {
    let root = tree(&format!("vendor/{fixture}"));
    let scratch = tempfile::tempdir().unwrap();
    let out_file = scratch.path().join("out.json");
    let out = convert(root.path(), to, &out_file);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{fixture} → {to}: {err}");
    assert!(!out_file.exists(), "{fixture} → {to}: a file was written");
    assert!(err.contains("nothing written"), "{err}");
    err
}

#[test]
fn a_conversion_that_is_not_exact_is_refused_naming_each_part() {
    // Claude → Codex: Codex reads exit 2 with empty stderr as "proceed", and Claude's Bash
    // also carries deletions, which Codex shows as apply_patch with writes and edits.
    let err = refused("claude", "codex");
    for needle in [
        "hooks.PreToolUse[1].hooks[0]: the command answers in claude-code's protocol",
        "exit 2 blocks only with stderr",
        "hooks.PreToolUse[1].matcher: matcher \"Bash\" selects shell commands and code, delete_file",
        "the `if` condition \"Bash(git push *)\"",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
    // Copilot: exit 2 is only a warning there.
    let err = refused("claude", "copilot");
    assert!(err.contains("exit 2 is only a warning"), "{err}");
    // Gemini: JSON overrides exit codes; and Gemini's ms timeouts are not whole seconds.
    let err = refused("gemini", "claude");
    assert!(
        err.contains("JSON `decision` overrides any exit code"),
        "{err}"
    );
    // .agents/hooks.json cannot say which dialect a handler speaks.
    let err = refused("codex", "agents");
    assert!(
        err.contains("no way to say a handler speaks codex"),
        "{err}"
    );
    // Cursor's beforeShellExecution fires for shell calls only: no Claude event does.
    let err = refused("cursor", "claude");
    assert!(
        err.contains(
            "hooks.beforeShellExecution[0]: claude-code has no event that runs at the same moment"
        ),
        "{err}"
    );
    // Cursor's failClosed: Codex lets the call through when a hook fails.
    let err = refused("cursor", "codex");
    assert!(err.contains("fails closed"), "{err}");
}

#[test]
fn convert_takes_a_file_or_a_dialect_and_refuses_hookbox_own_files() {
    let root = tree("vendor/codex");
    let r = root.path().to_str().unwrap();
    let file = root.path().join("workspace/.codex/hooks.json");
    let by_file = hookbox(&[
        "hooks",
        "convert",
        "--to",
        "codex",
        "--from",
        file.to_str().unwrap(),
    ]);
    assert!(by_file.status.success(), "{}", text(&by_file.stderr));
    let by_dialect = hookbox(&[
        "hooks", "convert", "--root", r, "--to", "codex", "--from", "codex",
    ]);
    assert!(by_dialect.status.success(), "{}", text(&by_dialect.stderr));
    assert_eq!(stdout(&by_file), stdout(&by_dialect));
    let written: serde_json::Value = serde_json::from_str(&stdout(&by_file)).unwrap();
    // Codex's default timeout (600 s) is written out.
    assert_eq!(
        written["hooks"]["PreToolUse"][0]["hooks"][1]["timeout"],
        serde_json::json!(600)
    );
    let none = hookbox(&[
        "hooks", "convert", "--root", r, "--to", "codex", "--from", "gemini",
    ]);
    assert!(!none.status.success());
    assert!(
        text(&none.stderr).contains("no vendor hooks file"),
        "{}",
        text(&none.stderr)
    );
    let own = hookbox(&[
        "hooks", "convert", "--root", r, "--to", "claude", "--from", "agents",
    ]);
    assert!(!own.status.success());
    assert!(
        text(&own.stderr).contains("hookbox's own format"),
        "{}",
        text(&own.stderr)
    );
}
