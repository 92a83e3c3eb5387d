//! The hand-over from the small front (`hookbox`) to the whole CLI (`hookbox-full`).
//!
//! `hookbox` is what people and hooks run, often once per check (`hookbox tool`, `hooks test`,
//! `hooks gate`): it runs the one-shot commands and the sandbox launcher, and does not link the
//! server's routes, the MCP server, the agents' clients or OpenTelemetry's exporter (of
//! `hookbox-server` only its metrics and audit-log layers), so a start maps and relocates less.
//! For the commands only the whole CLI runs ([`super::Command::needs_full`]), or when spans are
//! to be exported ([`super::Command::exports_spans`]), it execs `hookbox-full`, installed beside
//! it, with the same arguments: the same process (pid, descriptors, environment, working
//! directory), so a service manager or a shell sees no difference.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The file name of the whole CLI, installed beside `hookbox`.
pub const FULL_NAME: &str = "hookbox-full";

/// Set by the front for `hookbox-full` to the front's version, and removed by it at once (no
/// program it starts sees it): a front that finds it set was itself handed the command (a
/// `hookbox-full` that is a link to or a copy of the front, which would exec itself forever),
/// and a whole CLI of another version refuses what a front of that version parsed.
pub const HANDOVER_VAR: &str = "HOOKBOX_HANDED_OVER_BY";

/// [`FULL_NAME`] beside the running binary, or why it cannot be used. It is looked for nowhere
/// else: whoever could replace it there could replace `hookbox` itself.
pub fn find() -> Result<PathBuf, String> {
    let current = std::env::current_exe()
        .map_err(|e| format!("the running hookbox binary cannot be found ({e})"))?;
    beside(&current)
}

/// Execs `full` ([`find`]) with this process's arguments (its `argv[0]` kept, so `ps` still
/// shows `hookbox serve`). Returns only when that failed, with the error printed.
pub fn exec(full: &Path) -> ExitCode {
    use std::os::unix::process::CommandExt as _;
    if std::env::var_os(HANDOVER_VAR).is_some() {
        eprintln!(
            "error: {} handed the command back to a hookbox front: it is not the whole CLI \
             (a link to or a copy of hookbox?); reinstall hookbox",
            full.display()
        );
        return ExitCode::FAILURE;
    }
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| OsString::from("hookbox"));
    let err = std::process::Command::new(full)
        .arg0(argv0)
        .args(args)
        .env(HANDOVER_VAR, env!("CARGO_PKG_VERSION"))
        .exec();
    eprintln!("error: cannot run {}: {err}", full.display());
    ExitCode::FAILURE
}

/// At the start of `hookbox-full`: takes [`HANDOVER_VAR`] out of the environment and refuses a
/// hand-over from a front of another version. Handed over, the process takes the name of the
/// program the user ran (`hookbox`, as `ps -C`, `pgrep -x`, `top` and the journal show it)
/// rather than the file's; run directly, it keeps its own.
///
/// # Safety
///
/// It changes the environment, so it must be called while the process has one thread: first
/// thing in `main`, before anything (an exporter, a runtime) starts another.
pub unsafe fn accept_handover() -> Result<(), String> {
    let Some(front) = std::env::var_os(HANDOVER_VAR) else {
        return Ok(());
    };
    // SAFETY: the caller guarantees the process has one thread, so nothing reads the
    // environment at the same time.
    unsafe { std::env::remove_var(HANDOVER_VAR) };
    let ours = env!("CARGO_PKG_VERSION");
    if front != ours {
        return Err(format!(
            "hookbox {} handed this command to {FULL_NAME} {ours}, another version; reinstall \
             hookbox",
            front.to_string_lossy()
        ));
    }
    if let Some(name) = std::env::args_os()
        .next()
        .as_deref()
        .map(Path::new)
        .and_then(Path::file_name)
    {
        // The kernel keeps 15 bytes of it; a name that cannot be one is left as it is.
        let mut bytes = name.as_encoded_bytes().to_vec();
        bytes.truncate(15);
        if let Ok(name) = std::ffi::CString::new(bytes) {
            let _ = rustix::thread::set_name(&name);
        }
    }
    Ok(())
}

fn beside(exe: &Path) -> Result<PathBuf, String> {
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let candidate = dir.join(FULL_NAME);
    match executable_file(&candidate) {
        Ok(true) => Ok(candidate),
        Ok(false) => Err(format!(
            "{} is not an executable file; reinstall hookbox",
            candidate.display()
        )),
        Err(e) => Err(format!(
            "{} cannot be used ({e}); it is installed beside hookbox: reinstall hookbox (the \
             package, or `cargo install` of the hookbox crate, installs both)",
            candidate.display()
        )),
    }
}

/// Whether `path` is a regular file with an execute bit (symbolic links followed).
fn executable_file(path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(path)?;
    Ok(meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The program a hook should run to call hookbox (`hooks install`): the front beside `exe` when
/// `exe` is the whole CLI (run directly, or handed a command because spans are exported), since
/// the front starts faster and does the same; otherwise `exe` itself.
pub fn front_for(exe: PathBuf) -> PathBuf {
    if exe.file_name() != Some(std::ffi::OsStr::new(FULL_NAME)) {
        return exe;
    }
    let front = exe.with_file_name("hookbox");
    match executable_file(&front) {
        Ok(true) => front,
        _ => exe,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_cli_is_found_only_beside_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let front = dir.path().join("hookbox");
        let missing = beside(&front).unwrap_err();
        assert!(missing.contains(FULL_NAME), "{missing}");
        assert!(
            missing.contains(&dir.path().display().to_string()),
            "{missing}"
        );

        let full = dir.path().join(FULL_NAME);
        std::fs::write(&full, b"#!/bin/sh\n").unwrap();
        let not_executable = beside(&front).unwrap_err();
        assert!(
            not_executable.contains("not an executable"),
            "{not_executable}"
        );

        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(beside(&front).unwrap(), full);
    }

    #[test]
    fn hooks_are_pointed_at_the_front_when_it_is_beside_the_whole_cli() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let full = dir.path().join(FULL_NAME);
        let front = dir.path().join("hookbox");
        // No front beside: the whole CLI itself.
        assert_eq!(front_for(full.clone()), full);
        std::fs::write(&front, b"#!/bin/sh\n").unwrap();
        assert_eq!(front_for(full.clone()), full, "not executable");
        std::fs::set_permissions(&front, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(front_for(full.clone()), front);
        // Any other binary is kept as it is.
        let other = dir.path().join("my-hookbox");
        assert_eq!(front_for(other.clone()), other);
    }
}
