//! The CLI and the server on PostgreSQL: every command that touches the store takes
//! `--database`, and TLS to the database is verified as libpq's `sslmode` says (against a
//! throwaway TLS-only cluster from `scripts/postgres.sh start --tls`).

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use super::serve_cli::{fresh_database, http, json_body, start_with};

fn hookbox(data: &std::path::Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env_remove("HOOKBOX_DATABASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a PostgreSQL cluster)"]
fn postgres_credentials_made_by_the_cli_are_the_servers() {
    let database = fresh_database();
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let made = hookbox(
        &data,
        &["credential", "create", "pg-token", "--database", &database],
        "the-secret-value",
    );
    assert!(made.status.success(), "{}", stderr(&made));
    // Not in the data dir's SQLite: a server there without --database does not know it.
    let sqlite = start_with(&data, &[]);
    let missing = http(&sqlite.addr, "GET", "/v1beta/credentials/pg-token", "");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    drop(sqlite);
    let server = start_with(&data, &["--database", &database]);
    let seen = json_body(&http(
        &server.addr,
        "GET",
        "/v1beta/credentials/pg-token",
        "",
    ));
    assert_eq!(seen["id"], "pg-token", "{seen}");
    assert!(!seen.to_string().contains("the-secret-value"));
    let listed = hookbox(&data, &["credential", "list", "--json"], "");
    assert!(
        !String::from_utf8_lossy(&listed.stdout).contains("pg-token"),
        "without --database the CLI reads SQLite"
    );
    let listed = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["credential", "list", "--data-dir"])
        .arg(&data)
        .env("HOOKBOX_DATABASE_URL", &database)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("pg-token"),
        "HOOKBOX_DATABASE_URL works as --database: {}",
        stderr(&listed)
    );
}

#[test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_TLS_URL (scripts/test.sh starts a TLS-only PostgreSQL cluster)"]
fn postgres_over_tls_is_verified_and_refusals_never_show_the_password() {
    let url = std::env::var("HOOKBOX_TEST_POSTGRES_TLS_URL")
        .expect("HOOKBOX_TEST_POSTGRES_TLS_URL (scripts/postgres.sh start --tls prints one)");
    let password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .map(|(_, pw)| pw.to_owned())
        .unwrap();
    assert!(url.contains("sslmode=verify-full"), "{url}");
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let ok = hookbox(
        &data,
        &["project", "create", "tls-team", "--database", &url],
        "",
    );
    assert!(ok.status.success(), "{}", stderr(&ok));
    let listed = hookbox(&data, &["project", "list", "--database", &url], "");
    assert!(String::from_utf8_lossy(&listed.stdout).contains("tls-team"));
    // The server too: it answers over the verified connection.
    let server = start_with(&data, &["--database", &url]);
    let ready = http(&server.addr, "GET", "/readyz", "");
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    drop(server);

    let refusals = [
        // The certificate names `localhost` only.
        (
            url.replace("@localhost:", "@127.0.0.1:"),
            "not valid for name",
        ),
        // Signed by another CA.
        (url.replace("/ca.crt", "/other-ca.crt"), "UnknownIssuer"),
        // The cluster takes TLS only.
        (
            url.replace("sslmode=verify-full", "sslmode=disable"),
            "no encryption",
        ),
    ];
    for (bad, why) in refusals {
        let out = hookbox(&data, &["project", "list", "--database", &bad], "");
        let err = stderr(&out);
        assert!(!out.status.success(), "{bad} was accepted");
        assert!(err.contains(why), "{why}: {err}");
        assert!(!err.contains(&password), "the password leaked: {err}");
    }
    // verify-ca checks the chain but not the name: the same address is fine with it.
    let by_ip = url
        .replace("@localhost:", "@127.0.0.1:")
        .replace("verify-full", "verify-ca");
    let out = hookbox(&data, &["project", "list", "--database", &by_ip], "");
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL (scripts/test.sh starts a PostgreSQL cluster)"]
fn postgres_replicas_share_their_quotas() {
    let database = fresh_database();
    let dir = hookbox_test_support::DataDir::new();
    let data = dir.path().join("data");
    let config = dir.path().join("quotas.toml");
    let replicas = |quotas: &str| {
        std::fs::write(&config, format!("[quotas]\n{quotas}\n")).unwrap();
        let args = [
            "--database",
            database.as_str(),
            "--cluster-secret",
            "a-cluster-secret-for-tests",
            "--config",
            config.to_str().unwrap(),
        ];
        (start_with(&data, &args), start_with(&data, &args))
    };
    let agent = "antigravity-preview-09-2026";
    let background = |addr: &str, command: &str| {
        http(
            addr,
            "POST",
            "/v1beta/interactions",
            &format!(r#"{{"agent":"{agent}","input":"run `{command}`","background":true}}"#),
        )
    };

    // Two running interactions, one on each replica, fill the project's two places.
    let (a, b) = replicas("running_interactions = 2");
    let first = background(&a.addr, "sleep 60");
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let second = background(&b.addr, "sleep 60");
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    for addr in [&a.addr, &b.addr] {
        let third = background(addr, "true");
        assert!(third.starts_with("HTTP/1.1 429"), "{third}");
        let error = &json_body(&third)["error"];
        assert_eq!(error["status"], "RESOURCE_EXHAUSTED", "{third}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("across replicas"),
            "{third}"
        );
        assert!(third.to_ascii_lowercase().contains("\r\nretry-after: "));
    }
    // A place given back on one replica is free on the other.
    let id = json_body(&first)["id"].as_str().unwrap().to_owned();
    let cancelled = http(
        &a.addr,
        "POST",
        &format!("/v1beta/interactions/{id}/cancel"),
        "",
    );
    assert!(cancelled.starts_with("HTTP/1.1 200"), "{cancelled}");
    super::lifecycle_cli::wait_for(std::time::Duration::from_secs(10), "a free place", || {
        background(&b.addr, "true")
            .starts_with("HTTP/1.1 200")
            .then_some(())
    });
    drop((a, b));

    // One sandboxed tool call at a time across the cluster: a call on B while A's runs is
    // refused, and the model is told why.
    let (a, b) = replicas("sandbox_processes = 1");
    let running = background(&a.addr, "sleep 60");
    let id = json_body(&running)["id"].as_str().unwrap().to_owned();
    // Until A's call runs (its call step is stored first), B's could still take the place.
    super::lifecycle_cli::wait_for(
        std::time::Duration::from_secs(20),
        "A's call to run",
        || {
            let i = json_body(&http(
                &a.addr,
                "GET",
                &format!("/v1beta/interactions/{id}"),
                "",
            ));
            i.to_string().contains("code_execution_call").then_some(())
        },
    );
    let refused = json_body(&http(
        &b.addr,
        "POST",
        "/v1beta/interactions",
        &format!(r#"{{"agent":"{agent}","input":"run `echo not-run`"}}"#),
    ));
    let text = refused.to_string();
    assert!(text.contains("sandbox_processes"), "{text}");
    assert!(text.contains("across replicas"), "{text}");
    assert!(!text.contains("not-run\\n"), "{text}");
    drop((a, b));

    // One request bucket for the project, whichever replica a request reaches.
    let (a, b) = replicas("requests_per_second = 0.01\nburst = 2");
    for (addr, expect) in [
        (&a.addr, "200"),
        (&b.addr, "200"),
        (&a.addr, "429"),
        (&b.addr, "429"),
    ] {
        let resp = http(addr, "GET", "/v1beta/environments", "");
        assert!(resp.starts_with(&format!("HTTP/1.1 {expect}")), "{resp}");
    }
}
