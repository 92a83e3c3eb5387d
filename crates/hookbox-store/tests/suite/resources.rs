use super::P;
use hookbox_protocol::api::{Agent, Environment, EnvironmentStatus};
use hookbox_store::{EnvironmentRecord, Page};

use super::temp_store;

fn env(id: &str) -> EnvironmentRecord {
    EnvironmentRecord {
        environment: Environment {
            id: id.into(),
            status: Some(EnvironmentStatus::Active),
            created: Some("t".into()),
            updated: None,
            last_accessed: None,
            file_count: None,
            size_bytes: None,
            sources: None,
            network: None,
            ..Environment::default()
        },
        env: None,
    }
}

#[tokio::test]
async fn environments_upsert_list_and_delete() {
    let (_dir, store) = temp_store().await;
    store.put_environment(P, &env("env_a")).await.unwrap();
    store.put_environment(P, &env("env_b")).await.unwrap();
    let mut changed = env("env_a");
    changed.environment.status = Some(EnvironmentStatus::Expired);
    store.put_environment(P, &changed).await.unwrap();
    let all = store
        .list_environments(P, None, &Page::default())
        .await
        .unwrap();
    assert_eq!(all.items.len(), 2);
    assert_eq!(all.next_page_token, None);
    assert_eq!(
        all.items[0].environment.status,
        Some(EnvironmentStatus::Expired)
    );
    assert!(store.delete_environment(P, "env_a").await.unwrap());
    assert!(store.get_environment(P, "env_a").await.unwrap().is_none());
    assert!(store.get_environment(P, "env_b").await.unwrap().is_some());
}

#[tokio::test]
async fn environments_are_listed_by_mode() {
    let (_dir, store) = temp_store().await;
    store.put_environment(P, &env("env_plain")).await.unwrap();
    let mut hosted = env("env_hosted");
    hosted.environment.mode = Some("self_hosted".into());
    store.put_environment(P, &hosted).await.unwrap();
    let ids = |page: hookbox_store::Paged<EnvironmentRecord>| {
        page.items
            .into_iter()
            .map(|r| r.environment.id)
            .collect::<Vec<_>>()
    };
    let on_demand = store
        .list_environments(P, Some("on_demand"), &Page::default())
        .await
        .unwrap();
    // A record without `mode` is on_demand, the default.
    assert_eq!(ids(on_demand), ["env_plain"]);
    let self_hosted = store
        .list_environments(P, Some("self_hosted"), &Page::default())
        .await
        .unwrap();
    assert_eq!(ids(self_hosted), ["env_hosted"]);
    let other = store
        .list_environments(P, Some("weird_future_mode"), &Page::default())
        .await
        .unwrap();
    assert!(other.items.is_empty());
    let all = store
        .list_environments(P, None, &Page::default())
        .await
        .unwrap();
    assert_eq!(ids(all), ["env_plain", "env_hosted"]);
    // A change (touch) keeps the mode column.
    store
        .change_environment(
            P,
            "env_hosted",
            &hookbox_store::EnvironmentChange::Touch { now: "u".into() },
        )
        .await
        .unwrap();
    let self_hosted = store
        .list_environments(P, Some("self_hosted"), &Page::default())
        .await
        .unwrap();
    assert_eq!(ids(self_hosted), ["env_hosted"]);
}

#[tokio::test]
async fn auth_tokens_are_found_by_hash_and_deleted_only_in_their_scope() {
    use hookbox_store::AuthTokenRecord;
    use hookbox_store::keys::hash_key;
    let (_dir, store) = temp_store().await;
    let token = AuthTokenRecord {
        id: "atk_1".into(),
        project: P.into(),
        interaction_id: "int_1".into(),
        expires_at: "2026-12-05T11:00:00Z".into(),
        created: "2026-12-05T10:00:00Z".into(),
    };
    let sha = hash_key("auth_tokens/abc");
    store.create_auth_token(&token, &sha).await.unwrap();
    assert_eq!(
        store.find_auth_token(&sha).await.unwrap(),
        Some(token.clone())
    );
    assert_eq!(
        store
            .find_auth_token(&hash_key("auth_tokens/abd"))
            .await
            .unwrap(),
        None
    );
    // Another interaction's or project's delete does not touch it.
    assert_eq!(
        store.delete_auth_token(P, "int_2", &sha).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .delete_auth_token("other", "int_1", &sha)
            .await
            .unwrap(),
        None
    );
    assert!(store.find_auth_token(&sha).await.unwrap().is_some());
    assert_eq!(
        store.delete_auth_token(P, "int_1", &sha).await.unwrap(),
        Some(token)
    );
    assert_eq!(store.find_auth_token(&sha).await.unwrap(), None);
}

#[tokio::test]
async fn expired_auth_tokens_are_purged_and_live_ones_kept() {
    use hookbox_store::AuthTokenRecord;
    use hookbox_store::keys::hash_key;
    let (_dir, store) = temp_store().await;
    let token = |id: &str, expires_at: &str| AuthTokenRecord {
        id: id.into(),
        project: P.into(),
        interaction_id: "int_1".into(),
        expires_at: expires_at.into(),
        created: "2026-12-05T09:00:00Z".into(),
    };
    let old = token("atk_old", "2026-12-05T10:00:00Z");
    let at_cutoff = token("atk_edge", "2026-12-05T11:00:00Z");
    let live = token("atk_live", "2026-12-05T12:00:00Z");
    for (t, secret) in [(&old, "a"), (&at_cutoff, "b"), (&live, "c")] {
        store
            .create_auth_token(t, &hash_key(&format!("auth_tokens/{secret}")))
            .await
            .unwrap();
    }
    // Only what expired strictly before the cutoff goes.
    assert_eq!(
        store
            .purge_expired_auth_tokens("2026-12-05T11:00:00Z")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .find_auth_token(&hash_key("auth_tokens/a"))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .find_auth_token(&hash_key("auth_tokens/b"))
            .await
            .unwrap(),
        Some(at_cutoff)
    );
    assert_eq!(
        store
            .find_auth_token(&hash_key("auth_tokens/c"))
            .await
            .unwrap(),
        Some(live.clone())
    );
    // Nothing left to purge at the same cutoff; a later one takes the rest but the live token.
    assert_eq!(
        store
            .purge_expired_auth_tokens("2026-12-05T11:00:00Z")
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .purge_expired_auth_tokens("2026-12-05T11:30:00Z")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .find_auth_token(&hash_key("auth_tokens/c"))
            .await
            .unwrap(),
        Some(live)
    );
}

#[tokio::test]
async fn agents_round_trip() {
    let (_dir, store) = temp_store().await;
    let agent: Agent = serde_json::from_value(serde_json::json!({
        "id": "agent_1", "base_agent": "antigravity-preview-09-2026", "description": "d",
        "tools": [{"type": "code_execution"}], "custom": 1
    }))
    .unwrap();
    store.put_agent(P, &agent).await.unwrap();
    assert_eq!(store.get_agent(P, "agent_1").await.unwrap().unwrap(), agent);
    assert_eq!(
        store.list_agents(P, &Page::default()).await.unwrap().items,
        [agent]
    );
    assert!(store.delete_agent(P, "agent_1").await.unwrap());
    assert!(store.get_agent(P, "agent_1").await.unwrap().is_none());
}

#[tokio::test]
async fn expiry_and_touch_do_not_race_and_listing_spans_projects() {
    use hookbox_store::EnvironmentChange::{Expire, Touch};
    let (_dir, store) = temp_store().await;
    let mut old = env("env_old");
    old.environment.last_accessed = Some("2026-01-01T00:00:00Z".into());
    store.put_environment(P, &old).await.unwrap();
    let mut fresh = env("env_fresh");
    fresh.environment.last_accessed = Some("2026-06-01T00:00:00Z".into());
    store.put_environment("other", &fresh).await.unwrap();

    let expire = Expire {
        cutoff: "2026-03-01T00:00:00Z".into(),
        now: "2026-06-02T00:00:00Z".into(),
    };
    // Recently used: stays active.
    let kept = store
        .change_environment("other", "env_fresh", &expire)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.environment.status, Some(EnvironmentStatus::Active));
    // A touch that lands first keeps the old one alive too.
    store
        .change_environment(
            P,
            "env_old",
            &Touch {
                now: "2026-06-02T00:00:00Z".into(),
            },
        )
        .await
        .unwrap();
    let kept = store
        .change_environment(P, "env_old", &expire)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.environment.status, Some(EnvironmentStatus::Active));
    // Unused past the cutoff: expired, with the time.
    let later = Expire {
        cutoff: "2026-09-01T00:00:00Z".into(),
        now: "2026-09-01T00:00:01Z".into(),
    };
    let gone = store
        .change_environment(P, "env_old", &later)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(gone.environment.status, Some(EnvironmentStatus::Expired));
    assert_eq!(
        gone.environment.updated.as_deref(),
        Some("2026-09-01T00:00:01Z")
    );
    // A touch never revives it.
    let still = store
        .change_environment(
            P,
            "env_old",
            &Touch {
                now: "2026-09-02T00:00:00Z".into(),
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(still.environment.status, Some(EnvironmentStatus::Expired));
    assert_eq!(
        store
            .get_environment(P, "env_old")
            .await
            .unwrap()
            .unwrap()
            .environment
            .status,
        Some(EnvironmentStatus::Expired)
    );
    // Another project's id is "none", never changed.
    assert!(
        store
            .change_environment("other", "env_old", &later)
            .await
            .unwrap()
            .is_none()
    );

    let mut all = Vec::new();
    let mut page = Page {
        size: Some(1),
        token: None,
    };
    loop {
        let got = store.list_all_environments(&page).await.unwrap();
        all.extend(got.items.into_iter().map(|(p, r)| (p, r.environment.id)));
        match got.next_page_token {
            Some(t) => page.token = Some(t),
            None => break,
        }
    }
    all.sort();
    assert_eq!(
        all,
        vec![
            (P.to_owned(), "env_old".to_owned()),
            ("other".to_owned(), "env_fresh".to_owned())
        ]
    );
}

// Issue 35: a touch rewrote the record even when it changed nothing, and an earlier `now`
// (a replica whose clock lags) moved `last_accessed` back, shortening the environment's life.
#[tokio::test]
async fn touch_never_moves_last_accessed_back() {
    use hookbox_store::EnvironmentChange::Touch;
    let (_dir, store) = temp_store().await;
    let mut e = env("env_t");
    e.environment.last_accessed = Some("2026-12-05T10:00:05Z".into());
    store.put_environment(P, &e).await.unwrap();
    for now in ["2026-12-05T10:00:05Z", "2026-12-05T10:00:04Z"] {
        let got = store
            .change_environment(P, "env_t", &Touch { now: now.into() })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            got.environment.last_accessed.as_deref(),
            Some("2026-12-05T10:00:05Z")
        );
    }
    let later = store
        .change_environment(
            P,
            "env_t",
            &Touch {
                now: "2026-12-05T10:00:06Z".into(),
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        later.environment.last_accessed.as_deref(),
        Some("2026-12-05T10:00:06Z")
    );
    let stored = store.get_environment(P, "env_t").await.unwrap().unwrap();
    assert_eq!(
        stored.environment.last_accessed.as_deref(),
        Some("2026-12-05T10:00:06Z")
    );
}

// Review: nothing bounded how many live tokens an interaction could hold, so a caller could
// grow the table (and every expiry sweep) without end.
#[tokio::test]
async fn an_interaction_holds_at_most_its_cap_of_live_auth_tokens() {
    use hookbox_store::keys::hash_key;
    use hookbox_store::{AuthTokenRecord, Error, MAX_LIVE_AUTH_TOKENS};
    let (_dir, store) = temp_store().await;
    let now = "2026-12-05T10:00:00Z";
    let token = |n: u32, interaction: &str, expires_at: &str| {
        let record = AuthTokenRecord {
            id: format!("atk_{interaction}_{n}"),
            project: P.into(),
            interaction_id: interaction.into(),
            expires_at: expires_at.into(),
            created: now.into(),
        };
        let sha = hash_key(&format!("auth_tokens/{interaction}/{n}"));
        (record, sha)
    };
    // Expired ones do not count.
    for n in 0..3 {
        let (t, sha) = token(1000 + n, "int_1", "2026-12-05T09:00:00Z");
        store.create_auth_token(&t, &sha).await.unwrap();
    }
    for n in 0..MAX_LIVE_AUTH_TOKENS {
        let (t, sha) = token(n, "int_1", "2026-12-05T11:00:00Z");
        store.create_auth_token(&t, &sha).await.unwrap();
    }
    let (over, over_sha) = token(MAX_LIVE_AUTH_TOKENS, "int_1", "2026-12-05T11:00:00Z");
    let refused = store.create_auth_token(&over, &over_sha).await;
    assert!(
        matches!(
            &refused,
            Err(Error::TooManyAuthTokens { interaction, limit })
                if interaction == "int_1" && *limit == MAX_LIVE_AUTH_TOKENS
        ),
        "{refused:?}"
    );
    assert!(!refused.unwrap_err().is_unavailable());
    assert_eq!(store.find_auth_token(&over_sha).await.unwrap(), None);
    // Another interaction has a cap of its own.
    let (other, other_sha) = token(0, "int_2", "2026-12-05T11:00:00Z");
    store.create_auth_token(&other, &other_sha).await.unwrap();
    // A deleted token makes room.
    let (_, first_sha) = token(0, "int_1", "2026-12-05T11:00:00Z");
    assert!(
        store
            .delete_auth_token(P, "int_1", &first_sha)
            .await
            .unwrap()
            .is_some()
    );
    store.create_auth_token(&over, &over_sha).await.unwrap();
    assert!(store.find_auth_token(&over_sha).await.unwrap().is_some());
    // A taken id is still "already exists", not the cap.
    let (_, fresh_sha) = token(7777, "int_2", "2026-12-05T11:00:00Z");
    assert!(matches!(
        store.create_auth_token(&other, &fresh_sha).await,
        Err(Error::AlreadyExists { .. })
    ));
}
