//! Running the binary on copies of the fixtures, and filtering output for snapshots.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A private copy of a fixture tree (handlers may write into it).
/// A copy of fixture tree `name`, owned (when the tests run as root) by [`DEVELOPER_UID`], as a
/// developer's checkout would be: `hooks test` runs the hooks as the tree's owner.
pub fn tree(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(name), dir.path());
    if rustix::process::geteuid().is_root() {
        chown_all(dir.path(), DEVELOPER_UID);
    }
    dir
}

/// The uid a test checkout belongs to.
pub const DEVELOPER_UID: u32 = 4242;

fn chown_all(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if std::fs::symlink_metadata(path).unwrap().is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_all(&entry.unwrap().path(), uid);
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Runs the binary with its data dir (credential store) under the test target dir, never the
/// user's own.
pub fn hookbox(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(args)
        .env_remove("RUST_LOG")
        .env(
            "HOOKBOX_DATA_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("hookbox-data"),
        )
        .output()
        .unwrap()
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// Replaces what changes from run to run (durations, temp paths) with stable tokens.
pub fn filtered(text: &str, root: &Path) -> String {
    let text = text.replace(&root.display().to_string(), "[ROOT]");
    let re = regex_lite(r"\((\d+) ms\)");
    re.replace_all(&text, "([N] ms)").into_owned()
}

fn regex_lite(pattern: &str) -> regex::Regex {
    regex::Regex::new(pattern).unwrap()
}

/// Runs the binary with `args` and its data dir at `data` (`HOOKBOX_DATA_DIR`), logs off.
pub fn hookbox_in(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(args)
        .env("HOOKBOX_DATA_DIR", data)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
