//! Lints that need the sandbox's filesystem: does each command handler's program, and the
//! script an interpreter is given, exist there (and is a program run directly executable)?
//!
//! A handler whose script is missing fails on every call, and a failing handler fails open: the
//! gate the file meant to install is not in force although the file parses. So each such finding
//! is an error. The filesystem is seen through [`SandboxFs`], which the caller builds the way the
//! sandbox assembles its root (this crate must not know how sandboxes are built). Only plain
//! command lines are judged: anything using shell syntax beyond words and quotes (pipes,
//! variables, redirections, `&&`) is left alone rather than guessed at.

use hookbox_protocol::HookEvent;

use crate::config::{HandlerKind, HooksConfig};
use crate::diagnostic::{Diagnostic, JsonPath, Severity};

/// What a path is inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// Nothing is there.
    Missing,
    /// A file; `executable` when some execute bit is set.
    File { executable: bool },
    /// A directory.
    Dir,
    /// Something this lint cannot judge (made by the sandbox at start, or unreadable).
    Unknown,
}

/// The sandbox's filesystem as the hooks' commands will see it.
pub trait SandboxFs {
    /// What the absolute sandbox path `path` is (symlinks followed as the sandbox would).
    fn lookup(&self, path: &str) -> Entry;
    /// The working directory commands start in (`/workspace`, or `/` in a bare tree).
    fn cwd(&self) -> &str;
    /// The directories of `PATH` inside the sandbox, in order.
    fn path_dirs(&self) -> &[&str];
}

/// Interpreters whose first operand is a script file (unless told `-c`/`-m`/`-e` code).
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "python", "python3", "node", "perl", "ruby", "php", "deno", "bun",
    "tsx", "lua",
];

/// Options after which an interpreter runs code given inline, not a script file.
const INLINE_CODE_FLAGS: &[&str] = &["-c", "-m", "-e", "--eval", "-p", "--print", "-r", "run"];

/// Words a shell runs without looking them up on `PATH`.
const SHELL_BUILTINS: &[&str] = &[
    "true", "false", "echo", "printf", "exit", "cd", ":", "test", "[", "read", "set", "export",
    "eval", "exec", "command", "type", "wait",
];

/// Characters that make a line more than words for this lint.
const SHELL_SYNTAX: &[char] = &[
    '|', '&', ';', '<', '>', '$', '`', '(', ')', '{', '}', '*', '?', '~', '\n',
];

/// One error per command handler whose program or script cannot run in the sandbox.
pub fn handler_programs(config: &HooksConfig, fs: &dyn SandboxFs) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    for group in &config.groups {
        for event in HookEvent::ALL {
            for rule in group.rules(event) {
                for handler in &rule.handlers {
                    let HandlerKind::Command { command } = &handler.kind else {
                        continue;
                    };
                    if let Some(message) = judge(command, fs) {
                        let path = JsonPath::root()
                            .key(&group.name)
                            .key(event.as_str())
                            .index(rule.index)
                            .key("hooks")
                            .index(handler.index)
                            .key("command");
                        diagnostics.push(Diagnostic {
                            severity: Severity::Error,
                            file: group.file.clone(),
                            path: path.as_str().to_owned(),
                            message: format!(
                                "{message}; the handler fails on every call (and so fails open unless \"on_failure\": \"deny\")"
                            ),
                        });
                    }
                }
            }
        }
    }
    diagnostics
}

/// Why `command` cannot run, if that can be told without running it.
fn judge(command: &str, fs: &dyn SandboxFs) -> Option<String> {
    if command.contains(SHELL_SYNTAX) {
        return None;
    }
    let words = shlex::split(command)?;
    // `NAME=value prog` and `env prog` run `prog`.
    let mut words = words
        .iter()
        .map(String::as_str)
        .skip_while(|w| *w == "env" || is_assignment(w))
        .peekable();
    let program = words.next()?;
    if SHELL_BUILTINS.contains(&program) {
        return None;
    }
    let (resolved, entry) = match program.contains('/') {
        true => {
            let path = absolute(program, fs.cwd());
            let entry = fs.lookup(&path);
            (path, entry)
        }
        false => {
            let found = fs.path_dirs().iter().find_map(|dir| {
                let path = format!("{}/{program}", dir.trim_end_matches('/'));
                match fs.lookup(&path) {
                    Entry::Missing | Entry::Dir => None,
                    entry => Some((path, entry)),
                }
            });
            match found {
                Some(found) => found,
                None => {
                    return Some(format!(
                        "program {program:?} is not on the sandbox's PATH ({})",
                        fs.path_dirs().join(":")
                    ));
                }
            }
        }
    };
    match entry {
        Entry::Missing => {
            return Some(format!(
                "{resolved} does not exist in the sandbox{}",
                where_hint(&resolved)
            ));
        }
        Entry::Dir => return Some(format!("{resolved} is a directory, not a program")),
        Entry::File { executable: false } => {
            return Some(format!(
                "{resolved} is not executable (chmod +x it, or run it through its interpreter)"
            ));
        }
        Entry::File { executable: true } | Entry::Unknown => {}
    }
    let name = program.rsplit('/').next().unwrap_or(program);
    if !INTERPRETERS.contains(&name) {
        return None;
    }
    let script = loop {
        let word = words.next()?;
        if INLINE_CODE_FLAGS.contains(&word) {
            return None;
        }
        if word == "--" {
            break words.next()?;
        }
        if !word.starts_with('-') {
            break word;
        }
    };
    let path = absolute(script, fs.cwd());
    match fs.lookup(&path) {
        Entry::Missing => Some(format!(
            "script {path} does not exist in the sandbox{}",
            where_hint(&path)
        )),
        Entry::Dir if name.starts_with("python") => None, // a package's __main__
        Entry::Dir => Some(format!("script {path} is a directory")),
        Entry::File { .. } | Entry::Unknown => None,
    }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// `path` as an absolute sandbox path (relative ones are relative to `cwd`).
fn absolute(path: &str, cwd: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!(
            "{}/{}",
            cwd.trim_end_matches('/'),
            path.trim_start_matches("./")
        )
    }
}

/// Where a sandbox path lives on the tree being checked, for the person fixing it.
fn where_hint(path: &str) -> &'static str {
    if path.starts_with("/workspace/") {
        " (sandbox paths are under --root: /workspace/x is ROOT/workspace/x)"
    } else {
        " (sandbox paths are under --root: /.agents/x is ROOT/.agents/x)"
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    struct Fake(HashMap<&'static str, Entry>);

    impl SandboxFs for Fake {
        fn lookup(&self, path: &str) -> Entry {
            self.0.get(path).copied().unwrap_or(Entry::Missing)
        }
        fn cwd(&self) -> &str {
            "/workspace"
        }
        fn path_dirs(&self) -> &[&str] {
            &["/usr/bin", "/bin"]
        }
    }

    fn fs() -> Fake {
        let exe = Entry::File { executable: true };
        let plain = Entry::File { executable: false };
        Fake(HashMap::from([
            ("/usr/bin/python3", exe),
            ("/bin/sh", exe),
            ("/.agents/gate.py", plain),
            ("/.agents/run.sh", exe),
            ("/.agents/plain.sh", plain),
            ("/workspace/local.py", plain),
        ]))
    }

    #[test]
    fn missing_and_non_executable_scripts_are_found() {
        let fs = fs();
        assert_eq!(judge("python3 /.agents/gate.py", &fs), None);
        assert_eq!(judge("python3 -u /.agents/gate.py --x", &fs), None);
        assert_eq!(judge("python3 local.py", &fs), None);
        assert_eq!(judge("/.agents/run.sh", &fs), None);
        assert_eq!(judge("A=1 env /.agents/run.sh", &fs), None);
        let nope = judge("python3 /.agents/nope.py", &fs).unwrap_or_default();
        assert!(
            nope.contains("script /.agents/nope.py does not exist"),
            "{nope}"
        );
        let plain = judge("/.agents/plain.sh", &fs).unwrap_or_default();
        assert!(plain.contains("not executable"), "{plain}");
        let typo = judge("pyhton3 /.agents/gate.py", &fs).unwrap_or_default();
        assert!(typo.contains("not on the sandbox's PATH"), "{typo}");
    }

    #[test]
    fn inline_code_builtins_and_shell_syntax_are_left_alone() {
        let fs = fs();
        for line in [
            "python3 -c 'print(1)'",
            "true",
            "echo '{}'",
            "cat | /nope",
            "$HOME/x.sh",
            "/nope && true",
            "sh -c 'exit 0'",
            "'unterminated",
        ] {
            assert_eq!(judge(line, &fs), None, "{line}");
        }
    }
}
