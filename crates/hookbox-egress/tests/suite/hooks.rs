//! http hooks through [`EgressPoster`]: the telemetry example of the reference (a post hook over
//! HTTPS whose `Authorization` header is injected from a stored credential; hooks.json holds no
//! secret), run by the real hooks engine, plus blocked URLs failing open with the reason traced.

use std::sync::Arc;
use std::time::Duration;

use hookbox_egress::EgressPoster;
use hookbox_hooks::command::LocalRunner;
use hookbox_hooks::http::{HttpError, HttpPoster, HttpRequest, HttpResponse};
use hookbox_hooks::{Decision, Failure, HookEngine, HooksConfig, Outcome};
use hookbox_protocol::{ToolCall, ToolName};
use serde_json::json;

use super::support::*;

/// The hooks engine's seam over the egress poster, as `hookbox-environments` wires an environment's
/// hooks (egress itself does not know the engine).
#[derive(Debug)]
struct HookPoster(EgressPoster);

#[async_trait::async_trait]
impl HttpPoster for HookPoster {
    async fn post(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        self.0.post(request).await
    }
}

fn engine(poster: EgressPoster) -> HookEngine {
    let runner = LocalRunner {
        cwd: None,
        env: Vec::new(),
    };
    HookEngine::new(Arc::new(runner), Arc::new(HookPoster(poster)))
}

fn hooks(url: &str) -> HooksConfig {
    let file = json!({"telemetry": {"post_tool_execution": [{
        "matcher": "*",
        "hooks": [{"type": "http", "url": url, "timeout": 5}]
    }]}})
    .to_string();
    assert!(!file.contains(SECRET));
    let (groups, diags) = hookbox_hooks::config::parse("/.agents/hooks.json", file.as_bytes());
    assert!(
        diags
            .iter()
            .all(|d| d.severity != hookbox_hooks::Severity::Error),
        "{diags:?}"
    );
    HooksConfig { groups }
}

fn call() -> ToolCall {
    ToolCall {
        name: ToolName::CodeExecution,
        args: json!({"code": "ls", "language": "bash"}),
    }
}

#[tokio::test]
async fn telemetry_post_hook_gets_the_injected_authorization() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["telemetry.example.test"]))).await;
    let env = EnvBuilder::new(
        json!({"allowlist": [{"domain": "telemetry.example.test", "credential": "telemetry"}]}),
        ca.clone(),
    )
    .pin("telemetry.example.test")
    .build();
    let url = format!("https://telemetry.example.test:{}/ingest", recv.addr.port());
    let d = engine(EgressPoster::new(env.egress.clone()))
        .post_tool(&hooks(&url), &call(), "env_test", None)
        .await;
    assert_eq!(d.decision, Decision::Allow);
    assert_eq!(d.trace[0].outcome, Outcome::Completed, "{:?}", d.trace);
    let seen = recv.seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/ingest");
    assert_eq!(
        seen[0].header("authorization"),
        vec![format!("Bearer {SECRET}")]
    );
    let payload: serde_json::Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(payload["hook_event_name"], "post_tool_execution");
    // The trace never shows the secret.
    assert!(!serde_json::to_string(&d).unwrap().contains(SECRET));
}

#[tokio::test]
async fn blocked_hook_urls_fail_open_and_say_why() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(None).await;
    let port = recv.addr.port();
    let mut b = EnvBuilder::new(json!({"allowlist": [{"domain": "*.example.test"}]}), ca);
    b.loopback_allowed = false;
    let env = b.pin("hook.example.test").build();
    let poster = EgressPoster::new(env.egress.clone());
    for (url, rule) in [
        (format!("http://127.0.0.1:{port}/"), "loopback"),
        (format!("http://localhost:{port}/"), "localhost"),
        (format!("http://[::ffff:127.0.0.1]:{port}/"), "loopback"),
        (format!("http://hook.example.test:{port}/"), "loopback"),
        (format!("http://other.test:{port}/"), "not-allowlisted"),
    ] {
        let err = poster
            .post(HttpRequest {
                url: url.clone(),
                headers: vec![],
                body: b"{}".to_vec(),
                timeout: Duration::from_secs(5),
                response_limit: 1024,
            })
            .await
            .unwrap_err();
        match err {
            HttpError::Blocked(why) => assert!(why.contains(rule), "{url}: {why}"),
            other => panic!("{url}: {other:?}"),
        }
    }
    let d = engine(poster)
        .post_tool(
            &hooks(&format!("http://127.0.0.1:{port}/ingest")),
            &call(),
            "env_test",
            None,
        )
        .await;
    assert_eq!(d.decision, Decision::Allow);
    match &d.trace[0].outcome {
        Outcome::Failed {
            failure: Failure::Http { message },
        }
        | Outcome::FailedOpen {
            failure: Failure::Http { message },
        } => {
            assert!(message.contains("loopback"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(recv.seen.lock().unwrap().is_empty());
    assert_eq!(env.audit.denied_rules().len(), 6);
}

#[tokio::test]
async fn hook_headers_are_overridden_by_injection_and_bodies_are_capped() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["big.example.test"]))).await;
    let env = EnvBuilder::new(
        json!({"allowlist": [{"domain": "big.example.test", "transform": {"X-Api-Key": "k1"}}]}),
        ca,
    )
    .pin("big.example.test")
    .build();
    let poster = EgressPoster::new(env.egress.clone());
    let resp = poster
        .post(HttpRequest {
            url: format!("https://big.example.test:{}/big", recv.addr.port()),
            headers: vec![("X-Api-Key".into(), "from-hooks-file".into())],
            body: b"{}".to_vec(),
            timeout: Duration::from_secs(5),
            response_limit: 1000,
        })
        .await
        .unwrap();
    assert_eq!(resp.status, 200);
    assert!(resp.truncated);
    assert_eq!(resp.body.len(), 1000);
    assert_eq!(recv.seen.lock().unwrap()[0].header("x-api-key"), vec!["k1"]);
}

/// Regression (issue 36, item 7): a webhook delivery refused by the SSRF guard stored an error
/// saying what the receiver's name resolves to. The error names the rule only.
#[tokio::test]
async fn a_webhook_refused_for_where_its_name_points_is_told_the_rule_not_the_address() {
    let pins = ["hooks.internal.test:8080=127.0.0.1:8080".parse().unwrap()];
    let poster = EgressPoster::for_webhooks(Vec::new(), None, &pins).unwrap();
    let err = poster
        .post(HttpRequest {
            url: "http://hooks.internal.test:8080/deliver".into(),
            headers: vec![],
            body: b"{}".to_vec(),
            timeout: Duration::from_secs(5),
            response_limit: 1024,
        })
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, HttpError::Blocked(_)), "{text}");
    assert!(
        text.contains(
            "the address hooks.internal.test resolves to is in a blocked range (loopback)"
        ),
        "{text}"
    );
    assert!(!text.contains("127.0.0"), "{text}");
}
