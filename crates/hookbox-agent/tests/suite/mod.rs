mod fake_models;
mod local_backend;
mod offline_loop;

use std::sync::Arc;

use hookbox_agent::Model;
use hookbox_agent::agent_loop::{LoopConfig, LoopContext, LoopEvent, LoopOutcome, run};
use hookbox_agent::seams::{EnvironmentSetup, ToolExecutor};
use hookbox_protocol::ToolName;
use hookbox_protocol::api::{Source, Step};
use hookbox_test_support::LocalBackend;
use tokio::sync::{mpsc, watch};

/// A local backend in a temp dir with one environment `env_t` holding `files`.
pub async fn backend(files: &[(&str, &str)]) -> (tempfile::TempDir, Arc<LocalBackend>) {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(LocalBackend::new(dir.path()));
    let setup = EnvironmentSetup {
        sources: files
            .iter()
            .map(|(target, content)| Source {
                kind: Some("inline".into()),
                target: Some((*target).into()),
                content: Some((*content).into()),
                ..Source::default()
            })
            .collect(),
        ..EnvironmentSetup::default()
    };
    backend.create_with_id("env_t", &setup).await.unwrap();
    (dir, backend)
}

/// Runs the loop on `input`; returns the outcome and the steps in the order they were streamed.
pub async fn run_loop(
    model: &dyn Model,
    executor: &dyn ToolExecutor,
    input: &str,
    config: LoopConfig,
) -> (LoopOutcome, Vec<Step>) {
    run_conversation(model, executor, vec![Step::user_text(input)], &[], config).await
}

/// Runs the loop on `conversation` with the client's `functions`; the outcome and the new steps
/// (an approval request's step included).
pub async fn run_conversation(
    model: &dyn Model,
    executor: &dyn ToolExecutor,
    conversation: Vec<Step>,
    functions: &[hookbox_agent::model::FunctionDecl],
    config: LoopConfig,
) -> (LoopOutcome, Vec<Step>) {
    let (outcome, events) = run_events(model, executor, conversation, functions, &[], config).await;
    (outcome, steps_of(&events))
}

/// The steps among `events`, in order (an approval request's step included).
pub fn steps_of(events: &[LoopEvent]) -> Vec<Step> {
    events
        .iter()
        .filter_map(|e| match e {
            LoopEvent::Step(s) | LoopEvent::ApprovalRequested { step: s, .. } => Some(s.clone()),
            LoopEvent::Output { .. } => None,
        })
        .collect()
}

/// Runs the loop on `conversation`, continuing a pause whose calls the server settled as
/// `settled`; the outcome and every event, in order.
pub async fn run_events(
    model: &dyn Model,
    executor: &dyn ToolExecutor,
    conversation: Vec<Step>,
    functions: &[hookbox_agent::model::FunctionDecl],
    settled: &[hookbox_agent::approval::SettledCall],
    config: LoopConfig,
) -> (LoopOutcome, Vec<LoopEvent>) {
    let (tx, mut rx) = mpsc::channel(64);
    let (_cancel_tx, cancel_rx) = watch::channel(false);
    let ctx = LoopContext {
        model,
        executor,
        environment_id: Some("env_t"),
        model_name: None,
        system_instruction: Some("Be brief."),
        tools: &ToolName::ALL,
        functions,
        mcp: &hookbox_agent::mcp::Unreachable::default(),
        settled,
        search: None,
    };
    let collect = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(event) = rx.recv().await {
            events.push(event);
        }
        events
    });
    let outcome = run(ctx, config, conversation, &tx, cancel_rx).await;
    drop(tx);
    (outcome, collect.await.unwrap())
}
