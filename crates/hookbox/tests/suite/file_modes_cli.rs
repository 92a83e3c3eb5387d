//! Regression: the data dir was created 0755 and `hookbox.db` (with its `-wal` and `-shm`) 0644
//! with the umask, so every local user could read every interaction's content. `hookbox serve`
//! and the CLI create them owner-only, and make an older data dir so when they start.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use super::bounds_cli::http_bytes;
use super::serve_cli::{post_json, start_with};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn cli(data_dir: &Path, args: &[&str]) -> std::process::Output {
    let output = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("RUST_LOG")
        .env_remove("HOOKBOX_SECRET_KEY")
        .output()
        .unwrap();
    assert!(output.status.success(), "{args:?}: {output:?}");
    output
}

/// Every entry hookbox made directly in `data`, and `data` itself, are owner-only.
fn assert_owner_only(data: &Path, expected: &[&str]) {
    assert_eq!(mode(data), 0o700, "the data dir {}", data.display());
    for name in expected {
        let path = data.join(name);
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&path), want, "{name}");
    }
    for entry in std::fs::read_dir(data).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(
            mode(&path) & 0o077,
            0,
            "{} is open to others",
            path.display()
        );
    }
}

#[test]
fn data_dir_and_database_are_not_readable_by_other_local_users() {
    let dir = hookbox_test_support::DataDir::new();
    // A CLI command that creates the data dir (and a parent of it) with the database in it.
    let data = dir.path().join("share").join("cli");
    cli(&data, &["project", "list"]);
    assert_eq!(mode(&dir.path().join("share")), 0o700);
    assert_owner_only(&data, &["hookbox.db", "secret.key"]);
    // One that creates an environment.
    let data = dir.path().join("env");
    cli(&data, &["env", "create"]);
    assert_owner_only(&data, &["hookbox.db", "secret.key", "environments"]);

    // The server, with an upload under way (its spool).
    let data = dir.path().join("serve");
    let server = start_with(&data, &[]);
    let env = post_json(&server.addr, "/v1beta/environments", &serde_json::json!({}));
    let env = env["id"].as_str().unwrap();
    let resp = http_bytes(
        &server.addr,
        "PUT",
        &format!("/upload/v1beta/environments/{env}/files/workspace/a.bin"),
        &[
            ("x-goog-upload-protocol", "resumable"),
            ("x-goog-upload-command", "start"),
        ],
        b"",
    );
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert_owner_only(
        &data,
        &[
            "hookbox.db",
            "hookbox.db-wal",
            "hookbox.db-shm",
            "secret.key",
            "environments",
            "uploads",
        ],
    );
}

#[test]
fn an_older_world_readable_data_dir_and_database_are_made_owner_only_at_start() {
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    cli(&data, &["env", "create"]);
    // What an older release left, with the umask's modes.
    for (name, old) in [
        ("", 0o755),
        ("hookbox.db", 0o644),
        ("secret.key", 0o644),
        ("environments", 0o755),
    ] {
        set_mode(&data.join(name), old);
    }
    let output = cli(&data, &["env", "list"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let db = data.join("hookbox.db");
    assert!(
        stderr.contains(&db.display().to_string()) && stderr.contains("644"),
        "no warning naming {} and its old mode: {stderr}",
        db.display()
    );
    // The path in the message's text, and what the mode allowed (not always reading).
    assert!(
        stderr.contains(&format!(
            "{} was open to other local users (mode 644)",
            db.display()
        )),
        "{stderr}"
    );
    assert_owner_only(&data, &["hookbox.db", "secret.key", "environments"]);

    // The same through `hookbox serve`.
    set_mode(&data, 0o755);
    set_mode(&db, 0o644);
    let server = start_with(&data, &[]);
    post_json(&server.addr, "/v1beta/environments", &serde_json::json!({}));
    assert_owner_only(
        &data,
        &[
            "hookbox.db",
            "hookbox.db-wal",
            "hookbox.db-shm",
            "secret.key",
            "environments",
        ],
    );
}

/// A data dir hookbox may not list (here root's 0733, hookbox run as `nobody`) made every
/// command fail once the data dir was kept owner-only; before, it was used. It is used again,
/// left as it is, with a warning naming it.
#[test]
fn a_data_dir_that_cannot_be_listed_is_used_with_a_warning() {
    use std::os::unix::process::CommandExt;
    let dir = hookbox_test_support::DataDir::new();
    set_mode(dir.path(), 0o755);
    let data = dir.path().join("shared");
    std::fs::create_dir(&data).unwrap();
    set_mode(&data, 0o733);
    // Needs root (to run as another user): fails, never skipped, without it.
    let output = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["project", "list", "--data-dir"])
        .arg(&data)
        .env_remove("RUST_LOG")
        .env_remove("HOOKBOX_SECRET_KEY")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stderr.contains(&format!("{} could not be listed", data.display())),
        "{stderr}"
    );
    assert_eq!(mode(&data), 0o733);
}

/// `hookbox serve` on a non-loopback address opens the store to check for keys before it
/// listens, then again to serve: the warning about a data dir open to others was printed twice.
#[test]
fn serve_warns_about_an_open_data_dir_once() {
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("home");
    // A managed key, so a keyless server may listen on a public address.
    cli(&data, &["project", "create", "ops"]);
    cli(&data, &["key", "create", "--project", "ops"]);
    std::fs::write(data.join("notes.txt"), "not hookbox's").unwrap();
    set_mode(&data, 0o755);
    let stderr_path = dir.path().join("serve.stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(&data)
        .env_remove("RUST_LOG")
        .env_remove("HOOKBOX_API_KEYS")
        .env_remove("HOOKBOX_SECRET_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    // The banner is printed once the store is open and the socket bound.
    let stdout = child.stdout.take().unwrap();
    let listening = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map_while(Result::ok)
        .any(|line| line.starts_with("hookbox is listening on"));
    child.kill().unwrap();
    child.wait().unwrap();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(listening, "serve did not start: {stderr}");
    let warned = stderr.matches("holds files hookbox did not create").count();
    assert_eq!(warned, 1, "{stderr}");
}

/// A CLI command opens the environments and the store, each of which prepared the data dir:
/// the warning about a data dir open to others was printed twice by `env create`.
#[test]
fn a_cli_command_warns_about_an_open_data_dir_once() {
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("home");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("notes.txt"), "not hookbox's").unwrap();
    set_mode(&data, 0o755);
    let output = cli(&data, &["env", "create"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let warned = stderr.matches("holds files hookbox did not create").count();
    assert_eq!(warned, 1, "{stderr}");
    // Its files are owner-only all the same.
    assert_eq!(mode(&data.join("hookbox.db")), 0o600);
}
