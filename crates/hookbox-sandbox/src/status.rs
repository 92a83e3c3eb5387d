//! A launcher's status channel: how what happens inside a launch (in another process, under
//! gVisor in another kernel) reaches hookbox. The launcher holds its write end ([`STATUS_FD`],
//! a warm call's own pipe, or under gVisor its stderr) and writes, one line each:
//! - a failure, typed ([`LaunchFailure::encode`]: the stage, the errno, the message), after
//!   which it exits with [`EXIT_SETUP_FAILED`] or [`EXIT_EXEC_FAILED`];
//! - stage timings (`STAGE_MARK<stage> <CLOCK_MONOTONIC ns>`), when the spec asks for them;
//! - a warm call's exit status (`EXIT_MARK<code>`).
//!
//! Anything else on the channel is text some other program wrote (runsc's own complaints under
//! gVisor); it is kept as a failure of the stage the reader names. The channel is closed on a
//! successful exec, so silence means the program ran. This module owns the framing only.
//!
//! [`STATUS_FD`]: crate::spec::STATUS_FD
//! [`EXIT_SETUP_FAILED`]: crate::spec::EXIT_SETUP_FAILED
//! [`EXIT_EXEC_FAILED`]: crate::spec::EXIT_EXEC_FAILED

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;

use crate::error::{LaunchFailure, Stage};
use crate::spec::{EXIT_MARK, FAIL_MARK, STAGE_MARK};

/// The most of a status channel that is read (a launcher writes a few lines).
const MAX_STATUS: usize = 64 * 1024;

/// Writes `failure` on the status channel, or, without one, on stderr (which is the channel for
/// gVisor's init and the runsc wrapper).
pub(crate) fn report(status: &mut Option<File>, failure: &LaunchFailure) {
    let line = failure.encode();
    match status {
        Some(file) => {
            let _ = file.write_all(&line);
        }
        None => {
            let _ = std::io::stderr().write_all(&line);
        }
    }
}

/// Says something that is not a failure on stderr (no status channel is open any more).
pub(crate) fn note(message: &str) {
    let _ = writeln!(std::io::stderr(), "hookbox-sandbox: {message}");
}

/// What a status channel held once every writer was gone.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StatusReport {
    /// The failure reported, if any: the typed line, or text with the reader's stage.
    pub failure: Option<LaunchFailure>,
    /// Stage timings, in order.
    pub stages: Vec<(String, i128)>,
    /// The exit status a warm call reported (none: it was killed, or this is no call).
    pub exit: Option<i32>,
}

/// Reads what is in the channel now (non-blocking: call it once every writer is gone), at most
/// `MAX_STATUS` bytes. Text that is not one of the launcher's lines becomes a failure of stage
/// `untyped`, its message the whole text in order (a typed failure among it keeps its stage).
pub fn read_status(fd: &OwnedFd, untyped: Stage) -> StatusReport {
    let _ = rustix::fs::fcntl_setfl(fd, rustix::fs::OFlags::NONBLOCK);
    let mut buf = vec![0u8; 8192];
    let mut out = Vec::new();
    while let Ok(n) = rustix::io::read(fd, &mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() > MAX_STATUS {
            break;
        }
    }
    parse(&String::from_utf8_lossy(&out), untyped)
}

fn parse(text: &str, untyped: Stage) -> StatusReport {
    let mut report = StatusReport::default();
    let mut message = String::new();
    let mut typed: Option<LaunchFailure> = None;
    for line in text.split_inclusive('\n') {
        if let Some(timing) = line.strip_prefix(STAGE_MARK) {
            let mut parts = timing.split_whitespace();
            if let (Some(name), Some(Ok(ns))) = (parts.next(), parts.next().map(str::parse)) {
                report.stages.push((name.to_owned(), ns));
            }
        } else if let Some(code) = line.strip_prefix(EXIT_MARK) {
            report.exit = code.trim().parse().ok();
        } else if let Some(failure) = line
            .starts_with(FAIL_MARK)
            .then(|| LaunchFailure::decode(line))
            .flatten()
        {
            message.push_str(&failure.message);
            message.push('\n');
            typed.get_or_insert(failure);
        } else {
            message.push_str(line);
        }
    }
    let message = message.trim();
    report.failure = match typed {
        Some(first) => Some(LaunchFailure {
            message: message.to_owned(),
            ..first
        }),
        None if message.is_empty() => None,
        None => Some(LaunchFailure::new(untyped, None, message)),
    };
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(failure: &LaunchFailure) -> String {
        String::from_utf8(failure.encode()).unwrap()
    }

    #[test]
    fn a_typed_failure_keeps_its_stage_among_timings_and_text() {
        let failure =
            LaunchFailure::new(Stage::PivotRoot, Some(libc::EINVAL), "pivot_root: EINVAL");
        let text = format!(
            "{STAGE_MARK}spec_read 10\nrunsc: said something\n{}{STAGE_MARK}root_built 20\n",
            line(&failure)
        );
        let report = parse(&text, Stage::Runsc);
        assert_eq!(
            report.stages,
            [("spec_read".to_owned(), 10), ("root_built".to_owned(), 20)]
        );
        let got = report.failure.unwrap();
        assert_eq!(
            (got.stage, got.errno),
            (Stage::PivotRoot, Some(libc::EINVAL))
        );
        assert_eq!(got.message, "runsc: said something\npivot_root: EINVAL");
        assert_eq!(report.exit, None);
    }

    #[test]
    fn text_alone_is_a_failure_of_the_readers_stage_and_silence_is_none() {
        let report = parse("runsc: cannot start\n", Stage::Runsc);
        assert_eq!(
            report.failure,
            Some(LaunchFailure::new(
                Stage::Runsc,
                None,
                "runsc: cannot start"
            ))
        );
        let report = parse(&format!("{EXIT_MARK}3\n"), Stage::Unknown);
        assert_eq!(report.failure, None);
        assert_eq!(report.exit, Some(3));
    }
}
