//! What only the PostgreSQL backend has: its migrations table, replicas migrating at once.
//! Ignored by default (they need a cluster); `scripts/test.sh` runs them with one.

use hookbox_protocol::api::Step;
use hookbox_store::{PostgresOptions, PostgresStore, SecretKey, Store};

async fn connect(url: &str) -> hookbox_store::Result<PostgresStore> {
    PostgresStore::connect(
        url,
        SecretKey::from_bytes(super::KEY),
        &PostgresOptions::default(),
    )
    .await
}

#[tokio::test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a cluster)"]
async fn replicas_starting_together_apply_each_migration_once() {
    let url = super::fresh_database().await;
    let stores = futures_join(&url).await;
    for store in &stores {
        assert_eq!(store.schema_version().await.unwrap(), 10);
        assert!(!store.has_api_keys().await.unwrap());
    }
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let applied: i64 = client
        .query_one("SELECT COUNT(*) FROM hookbox_schema", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(applied, 9, "each of the nine migrations, once");
}

/// Four stores connecting to `url` at the same time.
async fn futures_join(url: &str) -> Vec<PostgresStore> {
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let url = url.to_owned();
            tokio::spawn(async move { connect(&url).await.unwrap() })
        })
        .collect();
    let mut stores = Vec::new();
    for task in tasks {
        stores.push(task.await.unwrap());
    }
    stores
}

#[tokio::test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a cluster)"]
async fn a_newer_schema_is_refused_and_a_bad_url_says_so_without_echoing_it() {
    let url = super::fresh_database().await;
    drop(connect(&url).await.unwrap());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .execute(
            "INSERT INTO hookbox_schema (version, applied) VALUES (99, 'later')",
            &[],
        )
        .await
        .unwrap();
    let err = connect(&url).await.unwrap_err();
    assert!(
        matches!(err, hookbox_store::Error::SchemaTooNew { found: 99, .. }),
        "{err}"
    );
    let err = connect("postgres://hookbox:hunter2@127.0.0.1:1/none")
        .await
        .unwrap_err()
        .to_string();
    assert!(!err.contains("hunter2"), "{err}");
}

async fn replica(url: &str, id: &str, ttl_ms: u64) -> PostgresStore {
    PostgresStore::connect_replica(
        url,
        SecretKey::from_bytes(super::KEY),
        &PostgresOptions::default(),
        hookbox_store::Replica {
            id: id.into(),
            url: format!("http://{id}.invalid"),
            lease_ttl: std::time::Duration::from_millis(ttl_ms),
        },
    )
    .await
    .unwrap()
}

/// Makes `replica`'s time run out, as if it had stopped heartbeating a whole TTL ago: its
/// heartbeat row and its leases expire now. The test drives expiry instead of racing a short
/// lease against its own database round trips.
async fn expire(url: &str, replica: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let leases = client
        .execute(
            "UPDATE leases SET expires_at = now() - interval '1 second' WHERE owner = $1",
            &[&replica],
        )
        .await
        .unwrap();
    let replicas = client
        .execute(
            "UPDATE replicas SET expires_at = now() - interval '1 second' WHERE id = $1",
            &[&replica],
        )
        .await
        .unwrap();
    assert!(
        leases > 0 && replicas == 1,
        "{replica} held nothing to expire"
    );
}

fn running(id: &str, env: &str) -> hookbox_protocol::api::Interaction {
    let mut i = hookbox_protocol::api::Interaction::new(
        id,
        hookbox_protocol::api::InteractionStatus::InProgress,
    );
    i.environment_id = Some(env.into());
    i
}

#[tokio::test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a cluster)"]
async fn a_lease_moves_only_when_it_expires_and_stale_writes_are_fenced_off() {
    let url = super::fresh_database().await;
    // A: a replica that will stop renewing; B: the survivor. Both leases outlast the test; A's
    // expiry is driven by the test (`expire`).
    let a = replica(&url, "replica-a", 60_000).await;
    let b = replica(&url, "replica-b", 60_000).await;
    let (ca, cb) = (a.cluster().unwrap(), b.cluster().unwrap());
    let mut changes = cb.changes();
    ca.heartbeat().await.unwrap();
    cb.heartbeat().await.unwrap();
    let resource = "env:env_1";
    assert_eq!(
        ca.claim(resource).await.unwrap(),
        hookbox_store::Claim::Held { fence: 1 }
    );
    // Held by A: B is told where it runs; A keeps its fence.
    assert_eq!(
        cb.claim(resource).await.unwrap(),
        hookbox_store::Claim::Elsewhere {
            replica: "replica-a".into(),
            url: "http://replica-a.invalid".into()
        }
    );
    assert_eq!(
        ca.claim(resource).await.unwrap(),
        hookbox_store::Claim::Held { fence: 1 }
    );
    a.create_interaction(super::P, &running("int_a", "env_1"))
        .await
        .unwrap();
    a.append_step("int_a", 0, &Step::user_text("hi"))
        .await
        .unwrap();
    // B hears of A's writes through LISTEN/NOTIFY.
    let heard = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            if changes.recv().await.unwrap() == "int_a" {
                return;
            }
        }
    })
    .await;
    assert!(heard.is_ok(), "no notification reached the other replica");

    // A stops renewing. Until its lease expires B cannot take the environment; once it has, B
    // takes it with a newer fence, and A's late writes are refused rather than mixed into B's run.
    assert!(
        matches!(
            cb.claim(resource).await.unwrap(),
            hookbox_store::Claim::Elsewhere { .. }
        ),
        "the lease moved before it expired"
    );
    expire(&url, "replica-a").await;
    assert_eq!(
        cb.claim(resource).await.unwrap(),
        hookbox_store::Claim::Held { fence: 2 }
    );
    let err = a
        .append_step("int_a", 1, &Step::model_text("late"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, hookbox_store::Error::Fenced { fence: 1, .. }),
        "{err}"
    );
    // A's interaction (its replica stopped heartbeating) is failed by B, with a reason.
    let reaped = cb.reap("replica-a stopped", "t1").await.unwrap();
    assert_eq!(reaped, ["int_a"]);
    let stored = b.get_interaction(super::P, "int_a").await.unwrap().unwrap();
    assert_eq!(
        stored.status,
        hookbox_protocol::api::InteractionStatus::Failed
    );
    assert_eq!(stored.errors[0].message, "replica-a stopped");
    assert_eq!(
        stored.steps.len(),
        1,
        "the acknowledged step is kept, the fenced one is not"
    );
    // B's own running interactions are never reaped by B.
    b.create_interaction(super::P, &running("int_b", "env_1"))
        .await
        .unwrap();
    assert!(cb.reap("x", "t2").await.unwrap().is_empty());
}

#[tokio::test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a cluster)"]
async fn quota_places_and_the_request_bucket_are_shared_and_a_clean_leave_frees_everything() {
    let url = super::fresh_database().await;
    let a = replica(&url, "replica-a", 60_000).await;
    let b = replica(&url, "replica-b", 60_000).await;
    let (ca, cb) = (a.cluster().unwrap(), b.cluster().unwrap());
    ca.heartbeat().await.unwrap();
    cb.heartbeat().await.unwrap();
    assert_eq!(
        ca.peers().await.unwrap(),
        vec![(
            "replica-b".to_owned(),
            "http://replica-b.invalid".to_owned()
        )]
    );

    // Two places, one taken on each replica; a third is refused on both.
    let held_a = ca.hold("running_interactions", "p", 2).await.unwrap();
    let held_b = cb.hold("running_interactions", "p", 2).await.unwrap();
    assert!(held_a.is_some() && held_b.is_some());
    assert!(
        ca.hold("running_interactions", "p", 2)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        cb.hold("running_interactions", "p", 2)
            .await
            .unwrap()
            .is_none()
    );
    // Other projects and quotas are counted apart; a name with a quote is data, not SQL.
    assert!(
        cb.hold("running_interactions", "o'q", 1)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        cb.hold("sandbox_processes", "p", 1)
            .await
            .unwrap()
            .is_some()
    );
    cb.unhold(&held_b.unwrap()).await.unwrap();
    assert!(
        ca.hold("running_interactions", "p", 2)
            .await
            .unwrap()
            .is_some()
    );

    // One bucket: burst 3, taken in batches of up to 2, whichever replica asks.
    use hookbox_store::TokenGrant;
    assert_eq!(
        ca.take_tokens("p", 0.001, 3.0, 2.0).await.unwrap(),
        TokenGrant::Granted(2.0)
    );
    assert_eq!(
        cb.take_tokens("p", 0.001, 3.0, 2.0).await.unwrap(),
        TokenGrant::Granted(1.0)
    );
    match ca.take_tokens("p", 0.001, 3.0, 2.0).await.unwrap() {
        TokenGrant::Wait(seconds) => assert!(seconds > 900.0, "{seconds}"),
        other => panic!("an empty bucket granted {other:?}"),
    }

    // A holds a lease and places; after it leaves, B takes the lease at once and A's places
    // no longer count.
    assert!(matches!(
        ca.claim("env:env_x").await.unwrap(),
        hookbox_store::Claim::Held { .. }
    ));
    assert_eq!(
        cb.holder("env:env_x")
            .await
            .unwrap()
            .map(|(id, _)| id)
            .as_deref(),
        Some("replica-a")
    );
    ca.leave().await.unwrap();
    assert_eq!(cb.holder("env:env_x").await.unwrap(), None);
    assert!(cb.peers().await.unwrap().is_empty());
    assert!(matches!(
        cb.claim("env:env_x").await.unwrap(),
        hookbox_store::Claim::Held { .. }
    ));
    assert!(
        cb.hold("running_interactions", "p", 1)
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a cluster)"]
async fn a_take_that_waited_for_the_bucket_takes_no_tokens_away() {
    use hookbox_store::TokenGrant;
    let url = super::fresh_database().await;
    let a = replica(&url, "replica-a", 60_000).await;
    let ca = a.cluster().unwrap();
    ca.heartbeat().await.unwrap();
    // Creates the bucket (burst 3) and takes one token.
    assert_eq!(
        ca.take_tokens("p", 1000.0, 3.0, 1.0).await.unwrap(),
        TokenGrant::Granted(1.0)
    );
    // What a take finds after waiting for the row lock while another replica's take
    // committed: an `updated` later than the instant its own statement began. Here ten
    // seconds later, with two tokens left.
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let changed = client
        .execute(
            "UPDATE rate_buckets SET tokens = 2, updated = now() + interval '10 seconds' \
             WHERE project = 'p'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(changed, 1);
    // The two tokens are there to take: a refill over a negative time must not take them
    // away (it took 10 000 at 1000/s), nor may the take move `updated` back.
    assert_eq!(
        ca.take_tokens("p", 1000.0, 3.0, 2.0).await.unwrap(),
        TokenGrant::Granted(2.0)
    );
    let later: bool = client
        .query_one(
            "SELECT updated > now() + interval '9 seconds' FROM rate_buckets WHERE project = 'p'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(later, "the take moved the bucket's time back");
}

/// Polls `check` until it holds, for at most 20 s (an observable condition, not a sleep).
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

// Regression (issue 36): a replica must know when a lease stopped being its own: fencing numbers
// only grow (a released lease used to be deleted, so the next owner started again at 1 and
// could not be told from an old one), a refused write forgets the lease at once, and a lease
// nobody renewed within its TTL is not held by local reckoning either.
#[tokio::test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a cluster)"]
async fn a_replica_knows_which_leases_it_holds_and_fences_only_grow() {
    let url = super::fresh_database().await;
    let a = replica(&url, "replica-a", 60_000).await;
    let b = replica(&url, "replica-b", 60_000).await;
    let (ca, cb) = (a.cluster().unwrap(), b.cluster().unwrap());
    ca.heartbeat().await.unwrap();
    cb.heartbeat().await.unwrap();
    let held = |fence| hookbox_store::Claim::Held { fence };

    // Released and left leases keep their fence: every next owner's is higher.
    assert_eq!(ca.claim("env:x").await.unwrap(), held(1));
    assert_eq!(ca.fence("env:x"), Some(1));
    ca.release("env:x").await.unwrap();
    assert_eq!(ca.fence("env:x"), None);
    assert_eq!(cb.claim("env:x").await.unwrap(), held(2));
    assert_eq!(cb.fence("env:x"), Some(2));
    cb.leave().await.unwrap();
    assert_eq!(cb.fence("env:x"), None);
    assert_eq!(ca.claim("env:x").await.unwrap(), held(3));
    assert_eq!(ca.fence("env:x"), Some(3));
    cb.heartbeat().await.unwrap();

    // A's heartbeat lapses (as when it is cut off from the database): B takes its lease, and
    // A's next write is refused and A forgets the lease, though A's own clock says it is valid.
    assert_eq!(ca.claim("env:y").await.unwrap(), held(1));
    a.create_interaction(super::P, &running("int_y", "y"))
        .await
        .unwrap();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .execute(
            "UPDATE replicas SET expires_at = now() - interval '1 second' WHERE id = 'replica-a'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(cb.claim("env:y").await.unwrap(), held(2));
    assert_eq!(ca.fence("env:y"), Some(1), "A has not heard yet");
    let err = a
        .append_step("int_y", 0, &Step::user_text("late"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, hookbox_store::Error::Fenced { fence: 1, .. }),
        "{err}"
    );
    assert_eq!(ca.fence("env:y"), None);
    // A heartbeat forgets a lease another replica took, too.
    assert_eq!(ca.fence("env:x"), Some(3));
    client
        .execute(
            "UPDATE leases SET owner = 'replica-b', fence = fence + 1 WHERE resource = 'env:x'",
            &[],
        )
        .await
        .unwrap();
    ca.heartbeat().await.unwrap();
    assert_eq!(ca.fence("env:x"), None);

    // Not renewed within the TTL: not held by local reckoning, until a heartbeat renews it
    // (nobody took it meanwhile, so with the same fence).
    let c = replica(&url, "replica-c", 500).await;
    let cc = c.cluster().unwrap();
    cc.heartbeat().await.unwrap();
    assert_eq!(cc.claim("env:z").await.unwrap(), held(1));
    until("C's lease to lapse by its own reckoning", async || {
        cc.fence("env:z").is_none()
    })
    .await;
    until("C's heartbeat to renew it", async || {
        cc.heartbeat().await.unwrap();
        cc.fence("env:z") == Some(1)
    })
    .await;
}

// Replicas minting tokens for one interaction at once take turns: the live-token cap holds
// exactly, not the cap plus however many raced past the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a cluster)"]
async fn replicas_minting_auth_tokens_at_once_never_pass_the_cap() {
    use hookbox_store::keys::hash_key;
    use hookbox_store::{AuthTokenRecord, Error, MAX_LIVE_AUTH_TOKENS};
    const EXTRA: u32 = 40;
    let url = super::fresh_database().await;
    let stores = futures_join(&url).await;
    let tasks: Vec<_> = (0..MAX_LIVE_AUTH_TOKENS + EXTRA)
        .map(|n| {
            let store = stores[n as usize % stores.len()].clone();
            tokio::spawn(async move {
                let record = AuthTokenRecord {
                    id: format!("atk_{n}"),
                    project: super::P.into(),
                    interaction_id: "int_1".into(),
                    expires_at: "2026-12-05T11:00:00Z".into(),
                    created: "2026-12-05T10:00:00Z".into(),
                };
                store
                    .create_auth_token(&record, &hash_key(&format!("auth_tokens/{n}")))
                    .await
            })
        })
        .collect();
    let (mut created, mut refused) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => created += 1,
            Err(Error::TooManyAuthTokens { .. }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((created, refused), (MAX_LIVE_AUTH_TOKENS, EXTRA));
}
