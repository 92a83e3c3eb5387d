//! What a test needs from the machine, and the one way to go without it. **For tests only**
//! (a dev-dependency, never wired into the binary).
//!
//! A test that needs root or a program calls [`root`] or [`program`] first. Where the need is
//! met they return `true` and the test runs. Where it is not, the test **fails** (a panic naming
//! what is missing and what installs it), so a machine that lacks something can never pass a
//! test that did not run. The only way out is the opt-out [`ALLOW_SKIP`] (`HOOKBOX_TEST_ALLOW_SKIP=1`,
//! one name for the whole project, shell and Python suites included): then they print a
//! `SKIPPED` banner to the terminal (past the test harness's output capture) and return
//! `false`, and the test returns at once.
//!
//! ```ignore
//! if !hookbox_test_require::root("loop-mounted disk images") {
//!     return;
//! }
//! ```
//!
//! It must not decide anything but "run or fail": a test's assertions never depend on it.

use std::io::Write as _;

/// The opt-out: set to `1`, a missing need skips the test (loudly) instead of failing it.
pub const ALLOW_SKIP: &str = "HOOKBOX_TEST_ALLOW_SKIP";

/// True when the test may go on; `false` only when `missing` says what is not there and
/// [`ALLOW_SKIP`] is `1`.
///
/// # Panics
/// When `missing` is `Some` and [`ALLOW_SKIP`] is not `1`: the test fails, naming the need.
pub fn require(need: &str, missing: Option<String>) -> bool {
    decide(
        need,
        missing,
        std::env::var(ALLOW_SKIP).as_deref() == Ok("1"),
    )
}

fn decide(need: &str, missing: Option<String>, allow_skip: bool) -> bool {
    let Some(missing) = missing else {
        return true;
    };
    let test = std::thread::current()
        .name()
        .unwrap_or("<unnamed test>")
        .to_owned();
    if allow_skip {
        // Straight to the process's stderr: libtest captures only the print macros, and a skip
        // must show in a passing run's output.
        let _ = writeln!(
            std::io::stderr(),
            "\n*** SKIPPED {test}: it needs {need}, and {missing} ({ALLOW_SKIP}=1 is set, so this test did not run) ***\n"
        );
        return false;
    }
    panic!(
        "{test} needs {need}, and {missing}. Run it where that is there (scripts/setup.sh installs what the tests need; they run as root), or set {ALLOW_SKIP}=1 to skip such tests"
    );
}

/// Root (effective uid 0), which hookbox itself needs for loop devices, mounts and uid ranges.
/// `why` says what the test does with it.
///
/// # Panics
/// Without root, unless [`ALLOW_SKIP`] is `1` (see [`require`]).
pub fn root(why: &str) -> bool {
    let euid = rustix::process::geteuid();
    require(
        &format!("root ({why})"),
        (!euid.is_root()).then(|| format!("it runs as uid {}", euid.as_raw())),
    )
}

/// A program that runs (`NAME --version` starts and exits 0). `why` says what the test does with
/// it.
///
/// # Panics
/// When it does not run, unless [`ALLOW_SKIP`] is `1` (see [`require`]).
pub fn program(name: &str, why: &str) -> bool {
    let missing = match std::process::Command::new(name)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
    {
        Ok(status) if status.success() => None,
        Ok(status) => Some(format!("`{name} --version` failed ({status})")),
        Err(e) => Some(format!("`{name}` cannot be run ({e})")),
    };
    require(&format!("`{name}` ({why})"), missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_met_need_runs_the_test_with_or_without_the_opt_out() {
        assert!(decide("anything", None, false));
        assert!(decide("anything", None, true));
        assert!(program("cat", "coreutils, which is always there"));
    }

    #[test]
    #[should_panic(expected = "needs `nothing-here` (a test), and it is not there")]
    fn a_missing_need_fails_the_test_without_the_opt_out() {
        decide(
            "`nothing-here` (a test)",
            Some("it is not there".into()),
            false,
        );
    }

    #[test]
    fn a_missing_need_skips_only_with_the_opt_out() {
        assert!(!decide(
            "`nothing-here` (a test)",
            Some("it is not there".into()),
            true
        ));
    }
}
