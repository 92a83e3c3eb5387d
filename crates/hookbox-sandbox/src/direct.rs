//! Running a command hook's one simple command without the shell in between, exactly as
//! `/bin/sh -c` (dash) would have run it: what `crate::launcher` does with
//! [`crate::spec::LaunchSpec::direct`].
//!
//! dash runs `sh -c 'prog args'` by forking and exec'ing `prog`: one whole program start more
//! than the hook needs. bash already execs the single simple command of `bash -c` itself. Here
//! the sandbox's init does the shell's part, inside the sandbox (so the view of files is the
//! sandbox's), and only where it can be identical:
//! - the program is found as dash finds it ([`resolve`]): a word with a `/` as it is, else the
//!   first regular file `DIR/word` for each directory of the call's `PATH`; its `argv[0]` is the
//!   word as written;
//! - its environment is the one dash would export ([`shell_environment`]): the call's variables
//!   in dash's own order (its variable table's buckets) with `PWD` set as dash sets it;
//! - a program killed by a signal is reported as dash reports it: exit status 128 + N and, for
//!   signals other than `SIGINT` and `SIGPIPE`, the signal's description on stderr
//!   ([`signal_message`]).
//!
//! Whatever it cannot do identically (a `/bin/sh` that is not dash, no `PATH`, a `PATH` entry
//! that is empty, relative or a dash `%` option, a variable dash changes or drops, a program not
//! found, not executable, a script without `#!`, any spawn error) makes the caller run the shell
//! line instead, which prints the shell's usual error. Nothing has run by then: a failed spawn
//! never started the program.
//!
//! What does differ is the process tree, as under `bash -c`: the program's parent is the call's
//! init (PID 1 of the call), not a shell, so its `$PPID` is 1, `kill $PPID` does not end the
//! call, and a program that signals its whole process group (`kill 0`) takes no shell with it
//! (its exit status is the same; the init then writes the signal's line that a shell killed
//! along with it would not have written).

use std::ffi::CString;
use std::os::unix::fs::MetadataExt;

/// The size of dash's variable hash table (`VTABSIZE` in its `var.c`).
const DASH_BUCKETS: usize = 39;

/// dash's variables that exist before the environment is read (`varinit`, in its order; an
/// imported one keeps its place). Measured against Debian's dash 0.5.12 (see the tests).
const DASH_INITIAL: &[&str] = &[
    "IFS", "MAIL", "MAILPATH", "PATH", "PS1", "PS2", "PS4", "OPTIND", "LINENO",
];

/// Variables whose value dash sets itself at start-up (an imported one keeps being exported,
/// with dash's value): a call whose environment has one runs through the shell.
const DASH_SETS: &[&str] = &["IFS", "OPTIND", "PPID", "LINENO"];

/// The bucket of dash's variable table that `name` falls in (`hashvar` in its `var.c`).
fn dash_bucket(name: &str) -> usize {
    let bytes = name.as_bytes();
    let first = bytes.first().copied().unwrap_or_default() as u32;
    let hash = bytes
        .iter()
        .fold(first << 4, |h, b| h.wrapping_add(*b as u32));
    hash as usize % DASH_BUCKETS
}

/// Whether dash imports `name` from its environment (`endofname`: a letter or `_`, then letters,
/// digits and `_`).
fn dash_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}

/// The environment dash passes to a program it runs for `sh -c LINE` when started with `env`,
/// in the same order: `pwd` gives `PWD`'s value from the imported one (dash keeps an imported
/// `PWD` naming the working directory, else sets it to `getcwd()`). `None` where this could
/// differ from dash: a name dash would drop, set itself or that comes twice, or no `PWD` value.
pub fn shell_environment(
    env: &[(String, String)],
    pwd: impl FnOnce(Option<&str>) -> Option<String>,
) -> Option<Vec<(String, String)>> {
    let mut buckets: Vec<Vec<(&str, Option<String>)>> = vec![Vec::new(); DASH_BUCKETS];
    for name in DASH_INITIAL {
        buckets[dash_bucket(name)].insert(0, (name, None));
    }
    let mut imported_pwd = None;
    for (name, value) in env {
        if !dash_name(name) || DASH_SETS.contains(&name.as_str()) {
            return None;
        }
        let bucket = &mut buckets[dash_bucket(name)];
        match bucket.iter_mut().find(|(n, _)| *n == name.as_str()) {
            Some((_, Some(_))) => return None,
            Some((_, slot)) => *slot = Some(value.clone()),
            None => bucket.push((name, Some(value.clone()))),
        }
        if name == "PWD" {
            imported_pwd = Some(value.as_str());
        }
    }
    let pwd = pwd(imported_pwd)?;
    let bucket = &mut buckets[dash_bucket("PWD")];
    match bucket.iter_mut().find(|(n, _)| *n == "PWD") {
        Some((_, slot)) => *slot = Some(pwd),
        None => bucket.push(("PWD", Some(pwd))),
    }
    Some(
        buckets
            .into_iter()
            .flatten()
            .filter_map(|(name, value)| value.map(|v| (name.to_owned(), v)))
            .collect(),
    )
}

/// `PWD` as dash sets it at start-up in the current directory: `imported` when it is absolute
/// and names the same file as `.`, else the current directory (`None` when that fails).
pub fn dash_pwd(imported: Option<&str>) -> Option<String> {
    if let Some(path) = imported.filter(|p| p.starts_with('/'))
        && let (Ok(named), Ok(here)) = (std::fs::metadata(path), std::fs::metadata("."))
        && named.dev() == here.dev()
        && named.ino() == here.ino()
    {
        return Some(path.to_owned());
    }
    std::env::current_dir()
        .ok()
        .and_then(|dir| dir.into_os_string().into_string().ok())
}

/// The file dash would exec for the command word `word` with the search path `path` (the
/// call's `PATH`), where `regular` says whether a path names a regular file (following
/// symlinks, as dash's `stat`): `word` itself when it holds a `/`, else the first `DIR/word`
/// that is a regular file. `None` (run the shell) when nothing is found or `path` has an entry
/// this does not resolve as dash does: empty (the current directory), relative, or with `%`.
pub fn resolve(word: &str, path: Option<&str>, regular: impl Fn(&str) -> bool) -> Option<String> {
    if word.contains('/') {
        return Some(word.to_owned());
    }
    for dir in path?.split(':') {
        if !dir.starts_with('/') || dir.contains('%') {
            return None;
        }
        // Always one more `/`, as dash joins them (`/bin/` gives `/bin//sh`, which a script
        // sees as its `$0`).
        let candidate = format!("{dir}/{word}");
        if regular(&candidate) {
            return Some(candidate);
        }
    }
    None
}

/// What dash writes on stderr when its program was killed by `signal` (`sprint_status`): the
/// signal's description (`strsignal`, in the C locale, which dash never leaves), with
/// ` (core dumped)` when it dumped core; nothing for `SIGINT` and `SIGPIPE`.
pub fn signal_message(signal: i32, core_dumped: bool) -> Option<String> {
    if signal == libc::SIGINT || signal == libc::SIGPIPE {
        return None;
    }
    // SAFETY: strsignal returns a pointer to a NUL-terminated string (static, or a buffer of
    // this thread's) that stays valid until the next call; it is copied at once. The launcher
    // is single-threaded.
    let text = unsafe {
        let ptr = libc::strsignal(signal);
        if ptr.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr(ptr).to_string_lossy().into_owned()
    };
    let core = if core_dumped { " (core dumped)" } else { "" };
    Some(format!("{text}{core}\n"))
}

/// Whether `/bin/sh`, as the sandbox sees it, is dash (on Debian a symlink to `dash`).
fn sh_is_dash() -> bool {
    std::fs::canonicalize("/bin/sh")
        .is_ok_and(|path| path.file_name().is_some_and(|name| name == "dash"))
}

/// A program to start directly: path, argv and environment as `execve` takes them.
pub(crate) struct DirectExec {
    pub path: CString,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
}

/// What dash would exec for the words `words` with the call's `env`, in the current directory
/// (the call's, already entered), or `None` when the shell must run the line.
pub(crate) fn prepare(words: &[String], env: &[(String, String)]) -> Option<DirectExec> {
    // Everything here models dash (its environment order, builtins, signal lines): where the
    // sandbox's `/bin/sh` is another shell, that shell runs the line.
    if !sh_is_dash() {
        return None;
    }
    let word = words.first()?;
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    let program = resolve(word, path, |p| {
        std::fs::metadata(p).is_ok_and(|m| m.file_type().is_file())
    })?;
    let env = shell_environment(env, dash_pwd)?;
    let cstring = |s: String| CString::new(s).ok();
    Some(DirectExec {
        path: cstring(program)?,
        argv: words
            .iter()
            .map(|w| cstring(w.clone()))
            .collect::<Option<_>>()?,
        envp: env
            .into_iter()
            .map(|(k, v)| cstring(format!("{k}={v}")))
            .collect::<Option<_>>()?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The environment the host's `/bin/sh` gives a program it runs, started with exactly
    /// `env`, in that order (`env -i`: `Command::envs` would sort it), in `/`.
    fn shell_env(env: &[(String, String)]) -> Vec<(String, String)> {
        let out = std::process::Command::new("/usr/bin/env")
            .arg("-i")
            .args(env.iter().map(|(k, v)| format!("{k}={v}")))
            .args(["/bin/sh", "-c", "exec /usr/bin/env"])
            .env_clear()
            .current_dir("/")
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect()
    }

    /// A deterministic pseudo-random sequence (xorshift), so a failure can be reproduced.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self, below: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % below as u64) as usize
        }
    }

    #[test]
    fn the_environment_is_in_the_order_the_host_shell_exports_it() {
        // `exec env` in the shell: dash sees a single simple command and would fork; `exec`
        // makes it the shell's own environment that env prints, the one any program gets.
        const FIRST: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_";
        const REST: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789";
        let usual = [
            "PATH",
            "HOME",
            "LANG",
            "USER",
            "TMPDIR",
            "PWD",
            "TERM",
            "PS1",
            "MAIL",
            "HISTSIZE",
            "HTTP_PROXY",
            "https_proxy",
            "SSL_CERT_FILE",
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..200 {
            let mut names: Vec<String> = Vec::new();
            for _ in 0..1 + rng.next(24) {
                let mut name = String::from(FIRST[rng.next(FIRST.len())] as char);
                for _ in 0..rng.next(9) {
                    name.push(REST[rng.next(REST.len())] as char);
                }
                names.push(name);
            }
            for name in usual {
                if rng.next(3) == 0 {
                    names.push(name.to_owned());
                }
            }
            names.sort();
            names.dedup();
            // Shuffle: the order the variables are given in matters within a bucket.
            for i in (1..names.len()).rev() {
                names.swap(i, rng.next(i + 1));
            }
            let env: Vec<(String, String)> = names
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let value = match n.as_str() {
                        "PATH" => "/usr/bin:/bin".to_owned(),
                        "PWD" if round % 2 == 0 => "/".to_owned(),
                        "PWD" => "/nonexistent".to_owned(),
                        _ => format!("v{i}"),
                    };
                    (n.clone(), value)
                })
                .collect();
            // The shell runs in `/`: a valid imported `PWD` and `getcwd()` are both `/`.
            let ours = shell_environment(&env, |_| Some("/".to_owned())).unwrap();
            assert_eq!(ours, shell_env(&env), "round {round}: {env:?}");
        }
    }

    #[test]
    fn a_variable_the_shell_would_change_or_drop_means_the_shell_runs() {
        let pwd = |_: Option<&str>| Some("/".to_owned());
        let path = ("PATH".to_owned(), "/bin".to_owned());
        for (name, value) in [
            ("IFS", "x"),
            ("OPTIND", "3"),
            ("PPID", "1"),
            ("LINENO", "7"),
            ("1A", "x"),
            ("A-B", "x"),
            ("", "x"),
            ("PATH", "/usr/bin"),
        ] {
            let env = vec![path.clone(), (name.to_owned(), value.to_owned())];
            assert_eq!(shell_environment(&env, pwd), None, "{name}");
        }
        assert_eq!(
            shell_environment(std::slice::from_ref(&path), |_| None),
            None,
            "no working directory"
        );
        assert!(shell_environment(&[path], pwd).is_some());
    }

    #[test]
    fn pwd_is_kept_only_when_it_names_the_working_directory() {
        // The test's own working directory, whatever it is.
        let here = std::env::current_dir().unwrap();
        let here = here.to_str().unwrap();
        assert_eq!(dash_pwd(Some(here)).as_deref(), Some(here));
        let dotted = format!("{here}/.");
        assert_eq!(dash_pwd(Some(&dotted)).as_deref(), Some(dotted.as_str()));
        assert_eq!(dash_pwd(Some("/nonexistent-dir")).as_deref(), Some(here));
        assert_eq!(dash_pwd(Some(".")).as_deref(), Some(here));
        assert_eq!(dash_pwd(None).as_deref(), Some(here));
    }

    #[test]
    fn the_program_is_found_as_the_shell_finds_it() {
        // As the filesystem reads a path: `//` is one separator.
        let regular = |p: &str| {
            ["/usr/bin/python3", "/bin/sh", "/b/tool"].contains(&p.replace("//", "/").as_str())
        };
        let path = Some("/usr/local/bin:/usr/bin:/bin");
        let cases: &[(&str, Option<&str>, Option<&str>)] = &[
            ("python3", path, Some("/usr/bin/python3")),
            ("sh", path, Some("/bin/sh")),
            ("sh", Some("/bin/:/usr/bin"), Some("/bin//sh")),
            ("/x/anything", path, Some("/x/anything")),
            ("./gate", path, Some("./gate")),
            ("sub/dir", None, Some("sub/dir")),
            ("missing", path, None),
            ("sh", None, None),
            ("sh", Some(""), None),
            ("sh", Some(":/bin"), None),
            ("sh", Some("bin:/bin"), None),
            ("sh", Some("/usr/lib%builtin:/bin"), None),
            // An entry that does not resolve as dash does stops the search, even after a miss.
            ("tool", Some("/usr/bin::/b"), None),
            // ... but not after the program was found.
            ("sh", Some("/bin::x"), Some("/bin/sh")),
        ];
        for (word, path, expected) in cases {
            assert_eq!(
                resolve(word, *path, regular).as_deref(),
                *expected,
                "{word} on {path:?}"
            );
        }
    }

    #[test]
    fn a_signal_death_is_described_as_the_shell_describes_it() {
        assert_eq!(
            signal_message(libc::SIGKILL, false).as_deref(),
            Some("Killed\n")
        );
        assert_eq!(
            signal_message(libc::SIGSEGV, true).as_deref(),
            Some("Segmentation fault (core dumped)\n")
        );
        assert_eq!(
            signal_message(libc::SIGTERM, false).as_deref(),
            Some("Terminated\n")
        );
        assert_eq!(signal_message(libc::SIGINT, false), None);
        assert_eq!(signal_message(libc::SIGPIPE, false), None);
        // The same text the host's shell prints for a child it lost to each signal.
        for signal in [
            libc::SIGKILL,
            libc::SIGTERM,
            libc::SIGUSR1,
            libc::SIGHUP,
            libc::SIGALRM,
        ] {
            let mut shell = std::process::Command::new("/bin/sh");
            shell
                .args(["-c", &format!("/bin/sh -c 'kill -{signal} $$'")])
                .env_clear();
            // The shell would inherit the test's own dispositions (SIGHUP ignored under nohup,
            // which a shell cannot undo): each signal starts at its default.
            // SAFETY: signal(2) is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut shell, move || {
                    libc::signal(signal, libc::SIG_DFL);
                    Ok(())
                });
            }
            let out = shell.output().unwrap();
            assert_eq!(out.status.code(), Some(128 + signal));
            assert_eq!(
                String::from_utf8(out.stderr).unwrap(),
                signal_message(signal, false).unwrap_or_default(),
                "signal {signal}"
            );
        }
    }
}
