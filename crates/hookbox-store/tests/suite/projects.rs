//! Projects: every resource is scoped to one, another project's resource behaves as absent,
//! managed keys are found by hash only, and a version-1 database migrates into `default`.

use hookbox_protocol::api::{
    Agent, CredentialConfig, Environment, Interaction, InteractionStatus, Step,
};
use hookbox_store::{
    ApiKeyRecord, DEFAULT_PROJECT, EnvironmentRecord, Error, Page, ProjectRecord, Store,
};
use serde_json::json;

use super::temp_store;

fn bearer(id: &str, token: &str) -> CredentialConfig {
    CredentialConfig::BearerToken {
        id: id.into(),
        token: hookbox_protocol::api::Secret(token.into()),
        header_name: None,
        prefix: None,
    }
}

fn env_record(id: &str) -> EnvironmentRecord {
    EnvironmentRecord {
        environment: Environment {
            id: id.into(),
            status: None,
            created: None,
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
async fn resources_of_one_project_are_absent_from_another() {
    let (_dir, store) = temp_store().await;
    let (a, b) = ("team-a", "team-b");
    let mut interaction = Interaction::new("int_a", InteractionStatus::InProgress);
    interaction.steps.push(Step::user_text("hello"));
    store.create_interaction(a, &interaction).await.unwrap();
    store
        .put_environment(a, &env_record("env_a"))
        .await
        .unwrap();
    store
        .create_credential(a, &bearer("shared-name", "secret-a"), "t")
        .await
        .unwrap();
    let agent: Agent = serde_json::from_value(json!({"id": "agent_a"})).unwrap();
    store.put_agent(a, &agent).await.unwrap();

    // Project b sees none of it.
    assert!(store.get_interaction(b, "int_a").await.unwrap().is_none());
    assert!(!store.delete_interaction(b, "int_a").await.unwrap());
    assert!(store.get_environment(b, "env_a").await.unwrap().is_none());
    assert!(!store.delete_environment(b, "env_a").await.unwrap());
    assert!(
        store
            .list_environments(b, None, &Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(store.count_environments(b).await.unwrap(), 0);
    assert!(
        store
            .get_credential(b, "shared-name")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .credential_secret(b, "shared-name")
            .await
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        store
            .update_credential(
                b,
                "shared-name",
                &serde_json::from_value(json!({"type": "bearer_token", "token": "x"})).unwrap(),
                "t"
            )
            .await,
        Err(Error::NotFound { .. })
    ));
    assert!(!store.delete_credential(b, "shared-name").await.unwrap());
    assert!(
        store
            .list_credentials(b, &Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(store.get_agent(b, "agent_a").await.unwrap().is_none());
    assert!(!store.delete_agent(b, "agent_a").await.unwrap());
    assert!(
        store
            .list_agents(b, &Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(store.count_running_interactions(b).await.unwrap(), 0);

    // The same credential id in b is a different credential with its own secret.
    store
        .create_credential(b, &bearer("shared-name", "secret-b"), "t")
        .await
        .unwrap();
    let secret = |p: &'static str| {
        let store = store.clone();
        async move {
            match store
                .credential_secret(p, "shared-name")
                .await
                .unwrap()
                .unwrap()
            {
                CredentialConfig::BearerToken { token, .. } => token.0,
                other => panic!("{other:?}"),
            }
        }
    };
    assert_eq!(secret(a).await, "secret-a");
    assert_eq!(secret(b).await, "secret-b");

    // Nothing of a changed.
    assert_eq!(
        store
            .get_interaction(a, "int_a")
            .await
            .unwrap()
            .unwrap()
            .steps
            .len(),
        1
    );
    assert!(store.get_environment(a, "env_a").await.unwrap().is_some());
    assert!(store.get_agent(a, "agent_a").await.unwrap().is_some());
    assert_eq!(store.count_running_interactions(a).await.unwrap(), 1);
    let usage = store.project_usage(a).await.unwrap();
    assert_eq!(
        (
            usage.interactions,
            usage.environments,
            usage.credentials,
            usage.agents
        ),
        (1, 1, 1, 1)
    );
}

#[tokio::test]
async fn managed_keys_are_found_by_hash_and_die_when_revoked() {
    let (_dir, store) = temp_store().await;
    let key = ApiKeyRecord {
        id: "key_1".into(),
        project: "team-a".into(),
        prefix: "hbk_abcd".into(),
        created: "t".into(),
        revoked: None,
    };
    // No such project yet.
    assert!(matches!(
        store.create_api_key(&key, &[1; 32]).await,
        Err(Error::NotFound { .. })
    ));
    store
        .create_project(&ProjectRecord {
            name: "team-a".into(),
            created: "t".into(),
            quotas: Default::default(),
        })
        .await
        .unwrap();
    assert!(matches!(
        store
            .create_project(&ProjectRecord {
                name: "team-a".into(),
                created: "t".into(),
                quotas: Default::default(),
            })
            .await,
        Err(Error::AlreadyExists { .. })
    ));
    assert!(!store.has_api_keys().await.unwrap());
    store.create_api_key(&key, &[1; 32]).await.unwrap();
    assert!(store.has_api_keys().await.unwrap());
    assert_eq!(
        store.find_api_key(&[1; 32]).await.unwrap(),
        Some(key.clone())
    );
    assert_eq!(store.find_api_key(&[2; 32]).await.unwrap(), None);
    assert!(store.revoke_api_key("key_1", "later").await.unwrap());
    assert!(!store.revoke_api_key("key_1", "later").await.unwrap());
    assert_eq!(store.find_api_key(&[1; 32]).await.unwrap(), None);
    // A revoked key still means "keys are in use": no fallback to local mode.
    assert!(store.has_api_keys().await.unwrap());
    assert_eq!(
        store.list_api_keys().await.unwrap()[0].revoked.as_deref(),
        Some("later")
    );
    let mut quotas = serde_json::Map::new();
    quotas.insert("environments".into(), json!(3));
    store.set_project_quotas("team-a", &quotas).await.unwrap();
    assert_eq!(
        store.get_project("team-a").await.unwrap().unwrap().quotas,
        quotas
    );
    assert!(store.delete_project("team-a").await.unwrap());
    assert!(store.list_api_keys().await.unwrap().is_empty());
    assert!(!store.has_api_keys().await.unwrap());
}

#[tokio::test]
async fn a_version_1_database_migrates_into_the_default_project() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hookbox.db");
    {
        // The schema and a row as hookbox 0.1 (schema version 1) wrote them.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE interactions (id TEXT PRIMARY KEY, status TEXT NOT NULL, agent TEXT, environment_id TEXT, previous_interaction_id TEXT, created TEXT NOT NULL, updated TEXT NOT NULL, usage_json TEXT, errors_json TEXT NOT NULL DEFAULT '[]', body_json TEXT NOT NULL);
             CREATE INDEX interactions_status ON interactions(status);
             CREATE TABLE steps (interaction_id TEXT NOT NULL REFERENCES interactions(id) ON DELETE CASCADE, idx INTEGER NOT NULL, step_json TEXT NOT NULL, PRIMARY KEY (interaction_id, idx)) WITHOUT ROWID;
             CREATE TABLE environments (id TEXT PRIMARY KEY, record_json TEXT NOT NULL);
             CREATE TABLE credentials (id TEXT PRIMARY KEY, type TEXT NOT NULL, status TEXT NOT NULL, create_time TEXT NOT NULL, update_time TEXT NOT NULL, nonce BLOB NOT NULL, ciphertext BLOB NOT NULL);
             CREATE TABLE agents (id TEXT PRIMARY KEY, agent_json TEXT NOT NULL);
             INSERT INTO interactions (id, status, created, updated, body_json) VALUES ('int_old', 'completed', 't', 't', '{\"id\":\"int_old\",\"status\":\"completed\"}');
             INSERT INTO environments (id, record_json) VALUES ('env_old', '{\"environment\":{\"id\":\"env_old\"}}');
             INSERT INTO agents (id, agent_json) VALUES ('agent_old', '{\"id\":\"agent_old\"}');
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    // A credential sealed the version-1 way (associated data: the id alone).
    let key = hookbox_store::SecretKey::from_bytes([42; 32]);
    let plain = serde_json::to_vec(&bearer("old-cred", "old-secret")).unwrap();
    let (nonce, ct) = key.seal("old-cred", &plain).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "INSERT INTO credentials VALUES ('old-cred', 'bearer_token', 'active', 't', 't', ?1, ?2)",
            rusqlite::params![nonce, ct],
        )
        .unwrap();

    let store = super::sqlite_open(dir.path());
    assert_eq!(
        store.schema_version().await.unwrap(),
        hookbox_store::sqlite::SCHEMA_VERSION
    );
    let d = DEFAULT_PROJECT;
    let old = store.get_interaction(d, "int_old").await.unwrap().unwrap();
    assert_eq!(
        old.hooks, None,
        "a row from before the hooks column has no trace"
    );
    assert!(store.get_environment(d, "env_old").await.unwrap().is_some());
    assert!(store.get_agent(d, "agent_old").await.unwrap().is_some());
    match store
        .credential_secret(d, "old-cred")
        .await
        .unwrap()
        .unwrap()
    {
        CredentialConfig::BearerToken { token, .. } => assert_eq!(token.0, "old-secret"),
        other => panic!("{other:?}"),
    }
    assert!(
        store
            .get_interaction("other", "int_old")
            .await
            .unwrap()
            .is_none()
    );
}
