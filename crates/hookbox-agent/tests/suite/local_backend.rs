use hookbox_agent::seams::{EnvironmentProvider, EnvironmentSetup, ProviderError};
use hookbox_protocol::api::{FileType, Source};
use hookbox_test_support::LocalBackend;

use super::backend;

fn inline(target: &str, content: &str, encoding: Option<&str>) -> Source {
    Source {
        kind: Some("inline".into()),
        target: Some(target.into()),
        content: Some(content.into()),
        encoding: encoding.map(Into::into),
        ..Source::default()
    }
}

#[tokio::test]
async fn sources_resolve_against_root_and_decode_base64() {
    let (_dir, b) = backend(&[(".agents/hooks.json", "{}")]).await;
    b.update(
        "env_t",
        &EnvironmentSetup {
            sources: vec![inline("/workspace/b.bin", "aGk=", Some("base64"))],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        b.read_file("env_t", "/.agents/hooks.json").await.unwrap(),
        b"{}"
    );
    assert_eq!(
        b.read_file("env_t", "workspace/b.bin").await.unwrap(),
        b"hi"
    );
    let files = b.list_files("env_t", "/", true).await.unwrap();
    let paths: Vec<_> = files.iter().map(|f| f.path.clone().unwrap()).collect();
    assert!(
        paths.contains(&"/.agents/hooks.json".to_string()),
        "{paths:?}"
    );
    let one = b
        .list_files("env_t", "/workspace/b.bin", false)
        .await
        .unwrap();
    assert_eq!(
        (one.len(), one[0].kind, one[0].size_bytes),
        (1, Some(FileType::File), Some(2))
    );
}

#[tokio::test]
async fn escaping_sources_are_rejected_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let b = LocalBackend::new(dir.path().join("envs"));
    let setup = EnvironmentSetup {
        sources: vec![
            inline("ok.txt", "x", None),
            inline("../../evil.txt", "x", None),
        ],
        ..Default::default()
    };
    let err = b.create_with_id("env_x", &setup).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::InvalidSource(m) if m.contains("sources[1]")),
        "{err}"
    );
    assert!(!dir.path().join("envs/env_x").exists());
    assert!(!dir.path().join("evil.txt").exists());
    let bad = EnvironmentSetup {
        sources: vec![inline("a", "!!", Some("base64"))],
        ..Default::default()
    };
    assert!(matches!(
        b.create_with_id("env_y", &bad).await,
        Err(ProviderError::InvalidSource(_))
    ));
}

#[tokio::test]
async fn fork_copies_and_write_respects_overwrite() {
    let (_dir, b) = backend(&[("workspace/a.txt", "A")]).await;
    let forked = b.fork("env_t", &EnvironmentSetup::default()).await.unwrap();
    let env_f = forked.as_str();
    b.write_file(env_f, "/workspace/a.txt", b"B", true)
        .await
        .unwrap();
    assert_eq!(
        b.read_file("env_t", "/workspace/a.txt").await.unwrap(),
        b"A"
    );
    assert_eq!(b.read_file(env_f, "/workspace/a.txt").await.unwrap(), b"B");
    assert!(matches!(
        b.write_file(env_f, "/workspace/a.txt", b"C", false).await,
        Err(ProviderError::FileExists(_))
    ));
    assert!(matches!(
        b.read_file(env_f, "/nope").await,
        Err(ProviderError::FileNotFound(_))
    ));
    b.delete(env_f).await.unwrap();
    assert!(matches!(
        b.read_file(env_f, "/workspace/a.txt").await,
        Err(ProviderError::EnvironmentNotFound(_))
    ));
}
