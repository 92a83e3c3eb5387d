use super::P;
use hookbox_protocol::api::{
    CredentialConfig, CredentialStatus, CredentialType, CredentialUpdate, Secret,
};
use hookbox_store::{Page, SecretKey};

use super::temp_store;

fn bearer(id: &str, token: &str) -> CredentialConfig {
    CredentialConfig::BearerToken {
        id: id.into(),
        token: Secret(token.into()),
        header_name: None,
        prefix: None,
    }
}

#[tokio::test]
async fn secrets_are_encrypted_at_rest_and_decrypt_back() {
    let (dir, store) = temp_store().await;
    let meta = store
        .create_credential(
            P,
            &bearer("cred_1", "tok-SUPERSECRET-1"),
            "2026-05-20T10:00:00Z",
        )
        .await
        .unwrap();
    assert_eq!(meta.kind, CredentialType::BearerToken);
    assert_eq!(meta.status, CredentialStatus::Active);
    drop(store);
    // The plaintext appears nowhere in the database (SQLite's files, PostgreSQL's rows).
    if let Some(url) = &dir.database_url() {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let dump: String = client
            .query_one("SELECT string_agg(c::text, ' ') FROM credentials c", &[])
            .await
            .unwrap()
            .get(0);
        assert!(
            dump.contains("cred_1") && !dump.contains("SUPERSECRET"),
            "{dump}"
        );
    } else {
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            assert!(!bytes.windows(16).any(|w| w == b"tok-SUPERSECRET-"));
        }
    }
    let store = super::open(&dir).await;
    let secret = store.credential_secret(P, "cred_1").await.unwrap().unwrap();
    assert_eq!(secret, bearer("cred_1", "tok-SUPERSECRET-1"));

    // A different key cannot read it, and says so without leaking anything.
    drop(store);
    let wrong = super::open_with_key(&dir, SecretKey::from_bytes([1; 32]))
        .await
        .unwrap();
    let err = wrong.credential_secret(P, "cred_1").await.unwrap_err();
    assert!(matches!(err, hookbox_store::Error::Decrypt(_)), "{err}");
}

#[tokio::test]
async fn update_applies_partially_and_checks_the_type() {
    let (_dir, store) = temp_store().await;
    store
        .create_credential(P, &bearer("cred_1", "old"), "t0")
        .await
        .unwrap();
    let meta = store
        .update_credential(
            P,
            "cred_1",
            &CredentialUpdate::BearerToken {
                token: Some(Secret("new".into())),
                header_name: None,
                prefix: Some(String::new()),
            },
            "t1",
        )
        .await
        .unwrap();
    assert_eq!(
        (meta.create_time.as_str(), meta.update_time.as_str()),
        ("t0", "t1")
    );
    let CredentialConfig::BearerToken { token, prefix, .. } =
        store.credential_secret(P, "cred_1").await.unwrap().unwrap()
    else {
        panic!("type changed")
    };
    assert_eq!(token.0, "new");
    assert_eq!(prefix.as_deref(), Some(""));

    let err = store
        .update_credential(
            P,
            "cred_1",
            &CredentialUpdate::OAuth2 {
                client_id: None,
                client_secret: None,
                refresh_token: None,
                token_url: None,
                scopes: None,
            },
            "t2",
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, hookbox_store::Error::CredentialTypeMismatch { .. }),
        "{err}"
    );
    let err = store
        .update_credential(
            P,
            "nope",
            &CredentialUpdate::BearerToken {
                token: None,
                header_name: None,
                prefix: None,
            },
            "t2",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, hookbox_store::Error::NotFound { .. }));
}

#[tokio::test]
async fn duplicate_ids_are_refused_and_list_pages() {
    let (_dir, store) = temp_store().await;
    for i in 0..5 {
        store
            .create_credential(P, &bearer(&format!("cred_{i}"), "x"), "t")
            .await
            .unwrap();
    }
    assert!(matches!(
        store
            .create_credential(P, &bearer("cred_0", "y"), "t")
            .await,
        Err(hookbox_store::Error::AlreadyExists { .. })
    ));
    let first = store
        .list_credentials(
            P,
            &Page {
                size: Some(2),
                token: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        first
            .items
            .iter()
            .map(|c| c.id.as_str())
            .collect::<Vec<_>>(),
        ["cred_0", "cred_1"]
    );
    let mut seen = first.items.len();
    let mut token = first.next_page_token;
    while let Some(t) = token {
        let page = store
            .list_credentials(
                P,
                &Page {
                    size: Some(2),
                    token: Some(t),
                },
            )
            .await
            .unwrap();
        seen += page.items.len();
        token = page.next_page_token;
    }
    assert_eq!(seen, 5);
    assert!(store.delete_credential(P, "cred_0").await.unwrap());
    assert!(store.get_credential(P, "cred_0").await.unwrap().is_none());
}

#[test]
fn key_file_is_created_0600_and_reused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // SAFETY of the test: HOOKBOX_SECRET_KEY is not set in the test environment.
    assert!(std::env::var(hookbox_store::env_vars::HOOKBOX_SECRET_KEY).is_err());
    let a = SecretKey::load_or_create(dir.path()).unwrap();
    let mode = std::fs::metadata(dir.path().join("secret.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let b = SecretKey::load_or_create(dir.path()).unwrap();
    let (nonce, ct) = a.seal("id", b"x").unwrap();
    assert_eq!(b.open("id", &nonce, &ct).unwrap(), b"x");
}
