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
