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
    let all = store.list_environments(P, &Page::default()).await.unwrap();
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
