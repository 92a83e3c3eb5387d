//! Recognising a shell line that is one simple command of plain words, which `/bin/sh -c` would
//! only fork and exec: such a line can be exec'd directly, as bash does for `bash -c` (one
//! program start fewer per command hook). See [`simple_command`].
//!
//! The test is deliberately narrow: a line qualifies only when no character in it is one the
//! shell (dash, Debian's `/bin/sh`) expands, quotes or treats as an operator, and its first word
//! cannot name a builtin, a special builtin or a reserved word. Anything else, and anything in
//! doubt, stays with the shell. Whoever runs the words must still resolve them as the shell would
//! and fall back to the shell on anything it cannot do identically (hookbox-sandbox's launcher
//! does).

/// Every builtin, special builtin and reserved word of dash (its `builtins.def` and man page),
/// with the other shells' common builtins that are not programs (`let`, `source`, ...) so a line
/// meant for one of them is never exec'd as a program of that name. A first word in this list is
/// never exec'd directly.
const SHELL_WORDS: &[&str] = &[
    // Special builtins.
    ".",
    ":",
    "break",
    "continue",
    "eval",
    "exec",
    "exit",
    "export",
    "readonly",
    "return",
    "set",
    "shift",
    "times",
    "trap",
    "unset",
    // Regular builtins of dash.
    "[",
    "alias",
    "bg",
    "cd",
    "chdir",
    "command",
    "echo",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "jobs",
    "kill",
    "local",
    "printf",
    "pwd",
    "read",
    "test",
    "true",
    "type",
    "ulimit",
    "umask",
    "unalias",
    "wait",
    "history",
    "login",
    "newgrp",
    // Reserved words.
    "!",
    "{",
    "}",
    "case",
    "do",
    "done",
    "elif",
    "else",
    "esac",
    "fi",
    "for",
    "function",
    "if",
    "in",
    "select",
    "then",
    "until",
    "while",
    "[[",
    "]]",
    "time",
    // Builtins of other shells, in doubt.
    "builtin",
    "declare",
    "typeset",
    "let",
    "source",
    "enable",
    "dirs",
    "pushd",
    "popd",
    "shopt",
    "suspend",
    "disown",
    "logout",
    "mapfile",
    "readarray",
    "caller",
    "compgen",
    "complete",
    "compopt",
    "help",
    "bind",
];

/// Whether dash never expands or treats specially byte `b` anywhere in a word (`=` is judged
/// separately: it makes a leading word an assignment).
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'_' | b'.' | b'/' | b':' | b',' | b'+' | b'@' | b'%' | b'-'
        )
}

/// The words of `line` when it is exactly one simple command of plain words that `/bin/sh -c`
/// would run as a program (see the module doc): words of `plain` bytes (and `=` after the
/// first word) separated by spaces, the first naming no builtin or reserved word and holding no
/// `=`. `None` for everything else: quotes, `$`, backquotes, backslashes, globs, `~`, `#`,
/// braces, redirections, operators, newlines, tabs, non-ASCII, an empty line, and a line whose
/// first byte is `-` or `+` (the shell would read it as options).
pub fn simple_command(line: &str) -> Option<Vec<String>> {
    // `/bin/sh -c -x…` reads a line starting with `-` or `+` as more options, not as a command.
    if line.starts_with(['-', '+']) {
        return None;
    }
    let words: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
    let first = *words.first()?;
    if SHELL_WORDS.contains(&first) || !first.bytes().all(plain) {
        return None;
    }
    let rest_plain = words[1..]
        .iter()
        .all(|w| w.bytes().all(|b| plain(b) || b == b'='));
    rest_plain.then(|| words.iter().map(|w| (*w).to_owned()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_simple_command_of_plain_words_is_recognised() {
        let direct: &[(&str, &[&str])] = &[
            ("sh /.agents/gate.sh", &["sh", "/.agents/gate.sh"]),
            ("python3 check.py", &["python3", "check.py"]),
            (
                "  /usr/bin/env   -i  A=1 prog ",
                &["/usr/bin/env", "-i", "A=1", "prog"],
            ),
            ("./gate", &["./gate"]),
            (
                "node hooks/pre.js --mode=strict",
                &["node", "hooks/pre.js", "--mode=strict"],
            ),
            (
                "tool a,b c:d e+f user@host 50%",
                &["tool", "a,b", "c:d", "e+f", "user@host", "50%"],
            ),
            ("x-y_z.1", &["x-y_z.1"]),
            ("truex", &["truex"]),
            ("/bin/true", &["/bin/true"]),
            ("/bin/echo hi", &["/bin/echo", "hi"]),
            // Only the line's first byte is read as options: a space before it makes a command.
            (" -gate", &["-gate"]),
        ];
        for (line, words) in direct {
            assert_eq!(
                simple_command(line).as_deref(),
                Some(&words.iter().map(|w| w.to_string()).collect::<Vec<_>>()[..]),
                "{line:?}"
            );
        }
        let shell = [
            "",
            "   ",
            "true",
            ":",
            ".",
            ". ./env.sh",
            "exec prog",
            "command -v sh",
            "cd /tmp",
            "read x",
            "echo hi",
            "printf x",
            "test -f x",
            "[ -f x ]",
            "kill 1",
            "pwd",
            "false",
            "exit 3",
            "set -e",
            "if",
            "while",
            "time prog",
            "A=1 prog",
            "A=1",
            "sh 'x.sh'",
            "sh \"x.sh\"",
            "echo $HOME",
            "prog $1",
            "prog `id`",
            "prog \\n",
            "ls *.py",
            "ls x?",
            "ls [ab]",
            "ls ~",
            "ls ~/x",
            "prog # comment",
            "prog#x",
            "prog {a,b}",
            "prog > out",
            "prog < in",
            "prog 2>&1",
            "a; b",
            "a && b",
            "a | b",
            "a &",
            "(a)",
            "a\nb",
            "a\tb",
            "prog é",
            "prog !x",
            "prog ^x",
            "-./x hi",
            "-gate",
            "+x prog",
        ];
        for line in shell {
            assert_eq!(simple_command(line), None, "{line:?}");
        }
    }
}
