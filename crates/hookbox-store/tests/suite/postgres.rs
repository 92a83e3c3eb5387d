//! What only the PostgreSQL backend has: its migrations table, replicas migrating at once.
//! Ignored by default (they need a cluster); `scripts/test.sh` runs them with one.

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
        assert_eq!(store.schema_version().await.unwrap(), 2);
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
    assert_eq!(applied, 1);
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
