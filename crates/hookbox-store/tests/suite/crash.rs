//! Kill a writer with SIGKILL mid-stream and check that everything it acknowledged is there.

use super::P;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use hookbox_protocol::api::{Interaction, InteractionStatus, Step};
use hookbox_store::Store;

const DIR_VAR: &str = "HOOKBOX_TEST_CRASH_DIR";

/// Child process body: writes interactions and steps forever, printing `ACK` lines to stdout only
/// after each write returned. Run by `sigkill_mid_write_loses_nothing_acknowledged`.
#[tokio::test]
#[ignore = "helper process for the crash test"]
async fn crash_child_writer() {
    let dir = std::env::var(DIR_VAR).expect("run only by the crash test");
    let store = super::sqlite_open(std::path::Path::new(&dir));
    for n in 0.. {
        let id = format!("int_{n}");
        let mut i = Interaction::new(&id, InteractionStatus::InProgress);
        i.steps = vec![Step::user_text(format!("input {n}"))];
        store.create_interaction(P, &i).await.unwrap();
        println!("ACK create {id}");
        for k in 1..=3 {
            store
                .append_step(&id, k, &Step::model_text(format!("{n}.{k}")))
                .await
                .unwrap();
            println!("ACK step {id} {k}");
        }
    }
}

#[tokio::test]
async fn sigkill_mid_write_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    drop(super::sqlite_open(dir.path())); // create the schema before the child races us
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "suite::crash::crash_child_writer",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR_VAR, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked_creates = Vec::new();
    let mut acked_steps = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts.as_slice() {
            ["ACK", "create", id] => acked_creates.push((*id).to_owned()),
            ["ACK", "step", id, k] => {
                acked_steps.push(((*id).to_owned(), k.parse::<usize>().unwrap()))
            }
            _ => continue,
        }
        if acked_steps.len() >= 150 {
            child.kill().unwrap(); // SIGKILL
            break;
        }
    }
    child.wait().unwrap();
    assert!(acked_steps.len() >= 150, "child stopped early");

    let store = super::sqlite_open(dir.path());
    for id in &acked_creates {
        let i = store
            .get_interaction(P, id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{id} lost"));
        assert_eq!(i.status, InteractionStatus::InProgress);
    }
    for (id, k) in &acked_steps {
        let i = store.get_interaction(P, id).await.unwrap().unwrap();
        assert!(i.steps.len() > *k, "step {k} of {id} lost");
        assert_eq!(i.steps[*k], Step::model_text(format!("{}.{k}", &id[4..])));
    }
    // Restart recovery: everything that was running is now failed, with the reason.
    let recovered = store
        .recover_interrupted("hookbox was killed", "now")
        .await
        .unwrap();
    assert!(recovered.len() >= acked_creates.len());
    let last = store
        .get_interaction(P, acked_creates.last().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(last.status, InteractionStatus::Failed);
    assert_eq!(last.errors[0].message, "hookbox was killed");
}
