//! The record of an environment's changes and use (`generation`, `updated_at`,
//! `last_accessed_at`): real files, real threads, real processes killed mid-record.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use hookbox_environments::environment::{ACTIVITY_FILE, Environments, META_FILE, read_meta};
use serde_json::json;

use super::common::*;

const DATA_VAR: &str = "HOOKBOX_TEST_ACTIVITY_DATA";
const ID_VAR: &str = "HOOKBOX_TEST_ACTIVITY_ID";
const COUNT_VAR: &str = "HOOKBOX_TEST_ACTIVITY_COUNT";

/// The store over `data` without the test wrapper that removes its environments when dropped
/// (a child process must leave them to the parent).
fn plain_store(data: &Path) -> Environments {
    let credentials =
        Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data).unwrap());
    let egress = hookbox_environments::network::EgressOptions::new(credentials);
    Environments::open(data, options(), egress).unwrap()
}

fn generation(dir: &Path) -> u64 {
    read_meta(dir).unwrap().generation
}

fn env_dir(data: &Path, id: &str) -> PathBuf {
    data.join("environments").join(id)
}

fn child(name: &str, data: &Path, id: &str, count: Option<usize>) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        &format!("suite::activity::{name}"),
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(DATA_VAR, data)
    .env(ID_VAR, id)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    if let Some(count) = count {
        cmd.env(COUNT_VAR, count.to_string());
    }
    cmd.spawn().unwrap()
}

/// Child process body: waits for its stdin to close (so that both children start together),
/// records `COUNT` changes, then prints `DONE`.
#[test]
#[ignore = "helper process for concurrent_changes_from_two_processes_lose_no_generation_bump"]
fn activity_child_marks() {
    let data = PathBuf::from(std::env::var(DATA_VAR).expect("run only by its test"));
    let id = std::env::var(ID_VAR).unwrap();
    let count: usize = std::env::var(COUNT_VAR).unwrap().parse().unwrap();
    let store = plain_store(&data);
    let mut start = String::new();
    std::io::stdin().read_line(&mut start).unwrap();
    for _ in 0..count {
        store.mark_modified(&id).unwrap();
    }
    println!("DONE");
}

/// Child process body: records changes forever, printing `ACK n` after each one returned.
#[test]
#[ignore = "helper process for a_process_killed_while_recording_loses_no_acknowledged_change"]
fn activity_child_marks_forever() {
    let data = PathBuf::from(std::env::var(DATA_VAR).expect("run only by its test"));
    let id = std::env::var(ID_VAR).unwrap();
    let store = plain_store(&data);
    for n in 1.. {
        store.mark_modified(&id).unwrap();
        println!("ACK {n}");
    }
}

// Issue 35: a change was a read-modify-write of `environment.json` with no lock, so two at once
// (server threads, here also an opened environment's writes) could both read generation N and
// both write N + 1: a snapshot could then miss the second change.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_changes_from_threads_lose_no_generation_bump() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(&store, json!({}));
    let dir = env_dir(data.path(), &meta.id);
    let env = Arc::new(store.open_env(&meta.id).unwrap());
    let before = generation(&dir);
    const THREADS: usize = 8;
    const EACH: usize = 5000;
    let barrier = Arc::new(std::sync::Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.0.clone();
            let env = env.clone();
            let id = meta.id.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..EACH {
                    // Half through the opened environment (an upload's record), half through
                    // the store (another process's view of the same directory).
                    if t % 2 == 0 {
                        env.record_write();
                    } else {
                        store.mark_modified(&id).unwrap();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(generation(&dir), before + (THREADS * EACH) as u64);
}

// Issue 35: the same race between processes sharing a data directory (the CLI and the server).
#[test]
fn concurrent_changes_from_two_processes_lose_no_generation_bump() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(&store, json!({}));
    let dir = env_dir(data.path(), &meta.id);
    let before = generation(&dir);
    const EACH: usize = 5000;
    let mut children: Vec<_> = (0..2)
        .map(|_| child("activity_child_marks", data.path(), &meta.id, Some(EACH)))
        .collect();
    // Both are running and opened the store; a line on stdin starts them together.
    for c in &mut children {
        use std::io::Write;
        c.stdin.take().unwrap().write_all(b"go\n").unwrap();
    }
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{:?}", out.status);
        // (The harness prints the test's name on the line the child's output starts.)
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("DONE\n"),
            "the child did not finish"
        );
    }
    assert_eq!(generation(&dir), before + 2 * EACH as u64);
}

// A process killed anywhere in recording a change (five kills, at whatever step each lands)
// leaves every change it acknowledged recorded, and the lock free for the next one.
#[test]
fn a_process_killed_while_recording_loses_no_acknowledged_change() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(&store, json!({}));
    let dir = env_dir(data.path(), &meta.id);
    let mut floor = generation(&dir);
    for round in 0..5 {
        let mut c = child("activity_child_marks_forever", data.path(), &meta.id, None);
        drop(c.stdin.take());
        let mut acked = 0u64;
        let mut killed = false;
        // Read to the end: the lines it printed before it died are still in the pipe.
        for line in BufReader::new(c.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if let Some((_, n)) = line.split_once("ACK ") {
                acked = n.trim().parse().unwrap();
            }
            if !killed && acked >= 40 + 17 * round {
                c.kill().unwrap(); // SIGKILL, wherever it is
                killed = true;
            }
        }
        c.wait().unwrap();
        assert!(killed, "the child stopped by itself");
        let now = generation(&dir);
        // Every acknowledged change is there; at most one more (recorded, not yet printed).
        assert!(
            now >= floor + acked && now <= floor + acked + 1,
            "round {round}: generation {now}, {acked} acknowledged over {floor}"
        );
        // The dead process's lock went with it.
        store.mark_modified(&meta.id).unwrap();
        assert_eq!(generation(&dir), now + 1);
        floor = now + 1;
    }
}

// A crash between creating the record and its first write leaves it empty (or, in principle,
// short): what `environment.json` says still holds, and the next change counts from there.
#[test]
fn a_record_a_crash_left_empty_or_short_hides_no_change() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    for junk in [&b""[..], &b"hbactiv1\x05\x00"[..]] {
        let meta = create(&store, json!({}));
        let dir = env_dir(data.path(), &meta.id);
        let stored = read_meta_file(&dir)["generation"].as_u64().unwrap();
        std::fs::write(dir.join(ACTIVITY_FILE), junk).unwrap();
        assert_eq!(generation(&dir), stored);
        store.mark_modified(&meta.id).unwrap();
        assert_eq!(
            generation(&dir),
            stored + 1,
            "a change after the crash is seen"
        );
        assert_eq!(read_meta(&dir).unwrap().id, meta.id);
    }
}

fn read_meta_file(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join(META_FILE)).unwrap()).unwrap()
}

// Issue 35: a change recorded from outside a tool call set `last_accessed_at` to now even when
// the stored time was later (a clock stepped back, another host's time), moving it back; and a
// tool call's touch must not either.
#[tokio::test]
async fn last_accessed_at_never_moves_back() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(&store, json!({}));
    let dir = env_dir(data.path(), &meta.id);
    let mut stored = read_meta_file(&dir);
    let later = stored["last_accessed_at"].as_u64().unwrap() + 3600;
    stored["last_accessed_at"] = json!(later);
    stored["updated_at"] = json!(later);
    std::fs::write(
        dir.join(META_FILE),
        serde_json::to_vec_pretty(&stored).unwrap(),
    )
    .unwrap();
    store.mark_modified(&meta.id).unwrap();
    let after = read_meta(&dir).unwrap();
    assert_eq!(after.last_accessed_at, later);
    assert_eq!(after.updated_at, later);
    let env = store.open_env(&meta.id).unwrap();
    bash_ok(&env, "true").await;
    let out = env
        .call_tool(call("list_dir", json!({"path": "/workspace"})))
        .await;
    assert!(matches!(
        out.result,
        hookbox_environments::lifecycle::ToolResult::Ok { .. }
    ));
    let after = read_meta(&dir).unwrap();
    assert_eq!(after.last_accessed_at, later);
    assert_eq!(after.updated_at, later);
    assert_eq!(after.generation, stored["generation"].as_u64().unwrap() + 2);
}

// Issue 35: every write tool call rewrote `environment.json` as a temporary file and a rename
// (a new inode, and a flush ext4 does on rename): now it changes one record in place.
#[tokio::test]
async fn a_write_tool_call_creates_no_file_and_renames_none() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(&store, json!({}));
    let dir = env_dir(data.path(), &meta.id);
    let env = store.open_env(&meta.id).unwrap();
    bash_ok(&env, "true").await; // the first change starts the record
    let listing = |dir: &Path| -> Vec<(String, u64)> {
        let mut out: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().ino(),
                )
            })
            .collect();
        out.sort();
        out
    };
    // A file created, renamed or removed in the directory changes its mtime (nanoseconds),
    // even when ext4 hands a freed inode number out again.
    let dir_mtime = |dir: &Path| {
        let m = std::fs::metadata(dir).unwrap();
        (m.mtime(), m.mtime_nsec())
    };
    let before = (listing(&dir), dir_mtime(&dir));
    let meta_bytes = std::fs::read(dir.join(META_FILE)).unwrap();
    let generation_before = generation(&dir);
    for _ in 0..3 {
        bash_ok(&env, "echo x >> /workspace/log").await;
    }
    assert_eq!(
        (listing(&dir), dir_mtime(&dir)),
        before,
        "files created, removed or renamed"
    );
    assert_eq!(std::fs::read(dir.join(META_FILE)).unwrap(), meta_bytes);
    assert_eq!(generation(&dir), generation_before + 3);
}

// Review of issue 35's record: a change started from the record alone, so an
// `environment.json` holding a larger generation (rewritten by a build without records, or
// durable when the record's page was lost with the power) hid every later bump behind it.
#[tokio::test]
async fn a_change_is_seen_when_environment_json_holds_more_than_the_record() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(&store, json!({}));
    let dir = env_dir(data.path(), &meta.id);
    // A change, so that the record exists.
    store.mark_modified(&meta.id).unwrap();
    assert!(dir.join(ACTIVITY_FILE).exists());
    let recorded = generation(&dir);
    // `environment.json` five changes ahead of the record.
    let mut stored = read_meta_file(&dir);
    stored["generation"] = json!(recorded + 5);
    std::fs::write(
        dir.join(META_FILE),
        serde_json::to_vec_pretty(&stored).unwrap(),
    )
    .unwrap();
    assert_eq!(generation(&dir), recorded + 5);
    // The next change must be seen as one: a snapshot that recorded `recorded + 5` would
    // otherwise take the tree for unchanged.
    store.mark_modified(&meta.id).unwrap();
    assert_eq!(generation(&dir), recorded + 6);
}
