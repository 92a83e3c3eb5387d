//! Calls paused for a reviewer, on the selected backend: a record leaves `pending` once, by a
//! conditional update, whoever else tries (a second continuation, a concurrent one, the
//! sweeper), all of one pause or none; a continuation is stored only with the settlement it
//! won; deleting the continuation reopens nothing; records stay in their project.

use std::sync::Arc;

use hookbox_protocol::api::{Interaction, InteractionStatus};
use hookbox_store::approvals::{SWEEPER, args_sha256};
use hookbox_store::{
    ApprovalFilter, ApprovalRecord, ApprovalState, Error, Page, Settle, Settled, Settlement, Store,
};
use serde_json::json;

use super::{P, temp_store};

const NOW: &str = "2026-12-04T10:00:00Z";

fn interaction(id: &str) -> Interaction {
    let mut i = Interaction::new(id.to_owned(), InteractionStatus::InProgress);
    i.created = Some(NOW.into());
    i.updated = Some(NOW.into());
    i.environment_id = Some("env_a".into());
    i
}

fn record(interaction: &str, call: &str) -> ApprovalRecord {
    let args = json!({"code": format!("echo {call} >> /workspace/count.txt"), "language": "bash"});
    ApprovalRecord {
        id: format!("approval_{call}"),
        interaction_id: interaction.into(),
        call_id: call.into(),
        environment_id: "env_a".into(),
        tool: "code_execution".into(),
        args_sha256: args_sha256(&args),
        args,
        reason: "deploys need a person".into(),
        hook_group: "review".into(),
        expires_at: "2026-12-04T11:00:00Z".into(),
        created: NOW.into(),
        state: ApprovalState::Pending,
        settled_by: None,
        settled_at: None,
        reviewer_reason: None,
    }
}

/// A paused interaction `int_p` with pending records for `calls`.
async fn paused(store: &dyn Store, calls: &[&str]) {
    store
        .create_interaction(P, &interaction("int_p"))
        .await
        .unwrap();
    for call in calls {
        store
            .create_approval(P, &record("int_p", call))
            .await
            .unwrap();
    }
}

fn settle(by: &str, answers: &[(&str, ApprovalState)]) -> Settle {
    Settle {
        interaction_id: "int_p".into(),
        by: by.into(),
        settlements: answers
            .iter()
            .map(|(call, state)| Settlement {
                id: format!("approval_{call}"),
                state: *state,
                reviewer_reason: (*state == ApprovalState::Denied).then(|| "not today".into()),
            })
            .collect(),
        now: NOW.into(),
    }
}

async fn listed(store: &dyn Store, state: Option<ApprovalState>) -> Vec<ApprovalRecord> {
    store
        .list_approvals(
            P,
            &ApprovalFilter {
                interaction_id: Some("int_p".into()),
                state,
            },
            &Page::default(),
        )
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn a_paused_call_is_settled_once_by_a_conditional_update() {
    let (_place, store) = temp_store().await;
    paused(store.as_ref(), &["call_1"]).await;
    let pending = listed(store.as_ref(), Some(ApprovalState::Pending)).await;
    assert_eq!(pending, vec![record("int_p", "call_1")]);
    assert!(pending[0].args_intact());

    let won = store
        .settle_approvals(P, &settle("int_a", &[("call_1", ApprovalState::Approved)]))
        .await
        .unwrap();
    let Settled::Won(won) = won else {
        panic!("{won:?}")
    };
    assert_eq!(won[0].state, ApprovalState::Approved);
    assert_eq!(won[0].settled_by.as_deref(), Some("int_a"));
    assert_eq!(won[0].settled_at.as_deref(), Some(NOW));

    // A second answer, a denial after the approval, and the sweeper: all refused, nothing moves.
    for (by, state) in [
        ("int_b", ApprovalState::Approved),
        ("int_c", ApprovalState::Denied),
        (SWEEPER, ApprovalState::TimedOut),
    ] {
        let again = store
            .settle_approvals(P, &settle(by, &[("call_1", state)]))
            .await
            .unwrap();
        let Settled::Refused(now) = again else {
            panic!("{by} settled it again: {again:?}")
        };
        assert_eq!(now[0].state, ApprovalState::Approved);
        assert_eq!(now[0].settled_by.as_deref(), Some("int_a"));
    }
    assert!(
        listed(store.as_ref(), Some(ApprovalState::Pending))
            .await
            .is_empty()
    );
    assert_eq!(
        listed(store.as_ref(), Some(ApprovalState::Approved))
            .await
            .len(),
        1
    );
    // `pending` cannot be "settled" back.
    let reopened = store
        .settle_approvals(P, &settle("int_d", &[("call_1", ApprovalState::Pending)]))
        .await
        .unwrap();
    assert!(matches!(reopened, Settled::Refused(_)));
}

#[tokio::test]
async fn the_records_of_one_pause_are_settled_all_or_none() {
    let (_place, store) = temp_store().await;
    paused(store.as_ref(), &["call_1", "call_2"]).await;
    // The sweeper took call_2 first; an answer to both then changes neither.
    let swept = store
        .settle_approvals(P, &settle(SWEEPER, &[("call_2", ApprovalState::TimedOut)]))
        .await
        .unwrap();
    assert!(matches!(swept, Settled::Won(_)));
    let both = settle(
        "int_a",
        &[
            ("call_1", ApprovalState::Approved),
            ("call_2", ApprovalState::Approved),
        ],
    );
    let Settled::Refused(now) = store.settle_approvals(P, &both).await.unwrap() else {
        panic!("a partly settled pause was settled")
    };
    assert_eq!(
        now.iter()
            .map(|r| (r.state, r.settled_by.clone()))
            .collect::<Vec<_>>(),
        [
            (ApprovalState::Pending, None),
            (ApprovalState::TimedOut, Some(SWEEPER.to_owned()))
        ]
    );
    assert_eq!(
        listed(store.as_ref(), Some(ApprovalState::Pending))
            .await
            .len(),
        1
    );
    // A record that does not exist is refused too, and nothing moves.
    let missing = settle(
        "int_a",
        &[
            ("call_1", ApprovalState::Approved),
            ("call_9", ApprovalState::Approved),
        ],
    );
    assert!(matches!(
        store.settle_approvals(P, &missing).await.unwrap(),
        Settled::Refused(_)
    ));
    assert_eq!(
        listed(store.as_ref(), Some(ApprovalState::Pending))
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn concurrent_settlements_of_one_call_have_one_winner() {
    let (_place, store) = temp_store().await;
    paused(store.as_ref(), &["call_1"]).await;
    // Every task waits at the barrier, then all settle at once (on PostgreSQL each on its own
    // pooled connection, so the row lock decides).
    let barrier = Arc::new(tokio::sync::Barrier::new(12));
    let tasks: Vec<_> = (0..12)
        .map(|n| {
            let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                let state = if n % 3 == 0 {
                    ApprovalState::TimedOut
                } else {
                    ApprovalState::Approved
                };
                let by = format!("int_{n}");
                store
                    .settle_approvals(P, &settle(&by, &[("call_1", state)]))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        if let Settled::Won(records) = task.await.unwrap() {
            winners.push(records[0].settled_by.clone());
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let settled = listed(store.as_ref(), None).await;
    assert_eq!(settled[0].settled_by, winners[0]);
}

#[tokio::test]
async fn a_continuation_is_stored_only_with_the_settlement_it_won() {
    let (_place, store) = temp_store().await;
    paused(store.as_ref(), &["call_1"]).await;
    let answer = |id: &str| {
        let mut i = interaction(id);
        i.previous_interaction_id = Some("int_p".into());
        i
    };
    let first = store
        .create_interaction_settling(
            P,
            &answer("int_a"),
            &settle("int_a", &[("call_1", ApprovalState::Denied)]),
        )
        .await
        .unwrap();
    assert!(matches!(first, Settled::Won(_)), "{first:?}");
    assert!(store.get_interaction(P, "int_a").await.unwrap().is_some());
    let second = store
        .create_interaction_settling(
            P,
            &answer("int_b"),
            &settle("int_b", &[("call_1", ApprovalState::Approved)]),
        )
        .await
        .unwrap();
    let Settled::Refused(now) = second else {
        panic!("approved after a denial: {second:?}")
    };
    assert_eq!(now[0].state, ApprovalState::Denied);
    assert_eq!(now[0].reviewer_reason.as_deref(), Some("not today"));
    assert!(
        store.get_interaction(P, "int_b").await.unwrap().is_none(),
        "a refused continuation is not stored"
    );
    // A continuation whose id is taken stores nothing and settles nothing.
    store
        .create_approval(P, &record("int_p", "call_2"))
        .await
        .unwrap();
    let taken = store
        .create_interaction_settling(
            P,
            &answer("int_a"),
            &settle("int_a", &[("call_2", ApprovalState::Approved)]),
        )
        .await;
    assert!(
        matches!(taken, Err(Error::AlreadyExists { .. })),
        "{taken:?}"
    );
    assert_eq!(
        listed(store.as_ref(), Some(ApprovalState::Pending))
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn deleting_the_continuation_reopens_nothing() {
    let (_place, store) = temp_store().await;
    paused(store.as_ref(), &["call_1"]).await;
    let mut answer = interaction("int_a");
    answer.previous_interaction_id = Some("int_p".into());
    let won = store
        .create_interaction_settling(
            P,
            &answer,
            &settle("int_a", &[("call_1", ApprovalState::Denied)]),
        )
        .await
        .unwrap();
    assert!(matches!(won, Settled::Won(_)));
    assert!(store.delete_interaction(P, "int_a").await.unwrap());
    let again = store
        .settle_approvals(P, &settle("int_b", &[("call_1", ApprovalState::Approved)]))
        .await
        .unwrap();
    assert!(matches!(again, Settled::Refused(_)), "{again:?}");
    // Deleting the paused interaction takes its records with it.
    assert!(store.delete_interaction(P, "int_p").await.unwrap());
    assert!(listed(store.as_ref(), None).await.is_empty());
}

#[tokio::test]
async fn records_stay_in_their_project_and_withdrawn_ones_are_gone() {
    let (_place, store) = temp_store().await;
    paused(store.as_ref(), &["call_1", "call_2"]).await;
    let duplicate = store.create_approval(P, &record("int_p", "call_1")).await;
    assert!(
        matches!(duplicate, Err(Error::AlreadyExists { .. })),
        "{duplicate:?}"
    );
    // Another project sees none of them and cannot settle them.
    let theirs = store
        .list_approvals("other", &ApprovalFilter::default(), &Page::default())
        .await
        .unwrap();
    assert!(theirs.items.is_empty());
    let foreign = store
        .settle_approvals(
            "other",
            &settle("int_x", &[("call_1", ApprovalState::Approved)]),
        )
        .await
        .unwrap();
    assert_eq!(foreign, Settled::Refused(Vec::new()));
    // Pages, oldest first.
    let first = store
        .list_approvals(
            P,
            &ApprovalFilter::default(),
            &Page {
                size: Some(1),
                token: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(first.items[0].call_id, "call_1");
    let second = store
        .list_approvals(
            P,
            &ApprovalFilter::default(),
            &Page {
                size: Some(1),
                token: first.next_page_token,
            },
        )
        .await
        .unwrap();
    assert_eq!(second.items[0].call_id, "call_2");
    assert_eq!(second.next_page_token, None);
    // A run that ended without waiting withdraws what is still pending, nothing settled.
    store
        .settle_approvals(P, &settle("int_a", &[("call_1", ApprovalState::Approved)]))
        .await
        .unwrap();
    assert_eq!(store.withdraw_approvals(P, "int_p").await.unwrap(), 1);
    let left = listed(store.as_ref(), None).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].state, ApprovalState::Approved);
}
