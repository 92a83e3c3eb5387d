//! `--runtime gvisor` from the command line: a missing or too old `runsc` is refused naming
//! what is needed, and an environment created under gVisor keeps it and runs on gVisor's kernel
//! with the reference's hooks (when `runsc` is installed, as `scripts/setup.sh` does).

use super::support::{hookbox_in, text};

#[test]
fn a_missing_or_old_runsc_is_refused_naming_the_release_needed() {
    let data = hookbox_test_support::DataDir::new();
    let out = hookbox_in(
        data.path(),
        &[
            "env",
            "create",
            "--runtime",
            "gvisor",
            "--runsc",
            "/nonexistent/runsc",
        ],
    );
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--runtime gvisor") && stderr.contains("/nonexistent/runsc"),
        "{stderr}"
    );

    // Debian 12's runsc, as far as its version goes.
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("runsc");
    std::fs::write(
        &old,
        "#!/bin/sh\necho 'runsc version 0.0~20221219.0'\necho 'spec: 1.0.2-dev'\n",
    )
    .unwrap();
    std::fs::set_permissions(&old, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = hookbox_in(
        data.path(),
        &[
            "env",
            "create",
            "--runtime",
            "gvisor",
            "--runsc",
            old.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("20221219") && stderr.contains("20240729"),
        "{stderr}"
    );
    // Nothing was created, and the namespaces runtime was not used in its place.
    assert_eq!(text(&hookbox_in(data.path(), &["env", "list"]).stdout), "");
}

#[test]
fn an_environment_created_under_gvisor_keeps_it_and_runs_the_reference_gate() {
    if !hookbox_test_require::program("runsc", "the gVisor runtime; scripts/setup.sh installs it") {
        return;
    }
    let runsc = which("runsc").unwrap();
    let data = hookbox_test_support::DataDir::new();
    let hooks = super::support::fixture("security-gate/.agents/hooks.json");
    let gate = super::support::fixture("security-gate/.agents/hooks-scripts/gate.py");
    let create = hookbox_in(
        data.path(),
        &[
            "env",
            "create",
            "--runtime",
            "gvisor",
            "--runsc",
            runsc.to_str().unwrap(),
            "--source",
            &format!("inline:.agents/hooks.json=@{}", hooks.display()),
            "--source",
            &format!("inline:.agents/hooks-scripts/gate.py=@{}", gate.display()),
            "--source",
            "inline:tmp/forbidden/keep=precious",
        ],
    );
    assert!(create.status.success(), "{}", text(&create.stderr));
    let id = text(&create.stdout).trim().to_owned();
    let show = hookbox_in(data.path(), &["env", "show", &id]);
    let meta: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(meta["runtime"], "gvisor", "{meta}");

    // Opened without --runtime: the environment's own runtime applies.
    let kernel = hookbox_in(
        data.path(),
        &[
            "tool",
            &id,
            "code_execution",
            "--args",
            r#"{"code": "dmesg | head -1", "language": "bash"}"#,
        ],
    );
    assert!(kernel.status.success(), "{}", text(&kernel.stderr));
    assert!(
        text(&kernel.stdout).contains("gVisor"),
        "{}",
        text(&kernel.stdout)
    );

    let denied = hookbox_in(
        data.path(),
        &[
            "tool",
            &id,
            "code_execution",
            "--args",
            r#"{"code": "rm -rf /tmp/forbidden", "language": "bash"}"#,
        ],
    );
    assert_eq!(denied.status.code(), Some(2), "{}", text(&denied.stderr));
    let kept = hookbox_in(
        data.path(),
        &[
            "tool",
            &id,
            "view_file",
            "--args",
            r#"{"path": "/tmp/forbidden/keep"}"#,
        ],
    );
    assert!(
        text(&kept.stdout).contains("precious"),
        "{}",
        text(&kept.stdout)
    );
    assert!(
        hookbox_in(data.path(), &["env", "rm", &id])
            .status
            .success()
    );
}

fn which(name: &str) -> Result<std::path::PathBuf, ()> {
    let path = std::env::var_os("PATH").ok_or(())?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or(())
}

#[test]
fn serve_refuses_a_config_that_needs_gvisor_without_a_usable_runsc() {
    let data = hookbox_test_support::DataDir::new();
    let config = data.path().join("config.toml");
    std::fs::write(&config, "[projects.team-a]\nruntime = \"gvisor\"\n").unwrap();
    let out = hookbox_in(
        data.path(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data.path().to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            // The default runtime stays namespaces (even when the suite runs under
            // HOOKBOX_RUNTIME=gvisor): the config alone needs gVisor here.
            "--runtime",
            "namespaces",
            "--runsc",
            "/nonexistent/runsc",
        ],
    );
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("runtime = \"gvisor\"") && stderr.contains("/nonexistent/runsc"),
        "{stderr}"
    );
}
