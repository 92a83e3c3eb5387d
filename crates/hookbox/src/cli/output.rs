//! A command's results on stdout. Rust ignores SIGPIPE, so a write to a pipe whose reader went
//! away (`hookbox env list | head -1`) fails with `EPIPE`, and `println!` would panic on it.
//! Commands print through `out!` and `outln!` instead: a reader that went away becomes
//! [`ReaderGone`], which `main` turns into a quiet exit with status 0 (as ripgrep does; no error
//! text). SIGPIPE stays ignored on purpose: hookbox writes to sandboxed programs' stdin pipes, and
//! a closed pipe there must stay an error, not kill the CLI or the server.

use std::io::{ErrorKind, Write as _};

/// The reader of stdout went away: the command ends quietly with status 0.
#[derive(Debug)]
pub struct ReaderGone;

impl std::fmt::Display for ReaderGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the reader of stdout went away")
    }
}

impl std::error::Error for ReaderGone {}

/// Whether `err` is (or wraps) [`ReaderGone`].
pub fn is_reader_gone(err: &anyhow::Error) -> bool {
    err.downcast_ref::<ReaderGone>().is_some()
}

/// `Ok` when `result` failed only because the reader of stdout went away, for commands whose
/// exit status is a verdict that holds whether or not anyone read it (`hookbox tool`, `hooks
/// check`, `hooks test`) and for the server, which keeps serving.
pub fn unless_reader_gone(result: anyhow::Result<()>) -> anyhow::Result<()> {
    match result {
        Err(err) if is_reader_gone(&err) => Ok(()),
        other => other,
    }
}

/// Writes `bytes` to stdout (locked) and flushes: [`ReaderGone`] when the reader went away, an
/// error for any other failure.
pub fn write_all(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    checked(out.write_all(bytes).and_then(|()| out.flush()))
}

/// Writes formatted text to stdout; what `out!` and `outln!` call.
pub fn write_fmt(args: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    checked(out.write_fmt(args).and_then(|()| out.flush()))
}

fn checked(result: std::io::Result<()>) -> anyhow::Result<()> {
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Err(ReaderGone.into()),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write to stdout")),
    }
}

/// `print!` that returns `anyhow::Result<()>` instead of panicking (see the module doc).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::write_fmt(format_args!($($arg)*))
    };
}

/// `println!` that returns `anyhow::Result<()>` instead of panicking (see the module doc).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::output::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};

#[cfg(test)]
mod tests {
    use std::io::{Error, ErrorKind};

    use super::*;

    #[test]
    fn a_broken_pipe_is_reader_gone_and_any_other_failure_an_error() {
        let gone = checked(Err(Error::from(ErrorKind::BrokenPipe))).unwrap_err();
        assert!(is_reader_gone(&gone));
        // Still recognised under context a caller added.
        assert!(is_reader_gone(&gone.context("printing the list")));
        let full = checked(Err(Error::from_raw_os_error(28))).unwrap_err();
        assert!(!is_reader_gone(&full));
        assert!(format!("{full:#}").starts_with("cannot write to stdout"));
        assert!(unless_reader_gone(Err(ReaderGone.into())).is_ok());
        assert!(unless_reader_gone(Err(full)).is_err());
        assert!(unless_reader_gone(Ok(())).is_ok());
    }
}
