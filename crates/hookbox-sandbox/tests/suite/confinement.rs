//! What a sandboxed program runs confined by (capabilities, limits, Landlock, seccomp), the
//! same whether it runs in a sandbox of its own or as a call of a warm sandbox, whose init sets
//! part of it once for all its calls (the bounding set and the limits no call can change).
//! Under gVisor, see `gvisor_hosts.rs`.

use std::time::Duration;

use hookbox_sandbox::spec::RuntimeKind;

use super::support::*;

const TIMEOUT: Duration = Duration::from_secs(120);
const LIMIT: usize = 64 * 1024;

#[tokio::test]
async fn a_warm_call_is_confined_exactly_as_a_cold_launch() {
    let t = confinement_tree();
    let expected = expected_confinement(RuntimeKind::Namespaces);
    let out = cold(&t.spec, TIMEOUT, LIMIT).await.unwrap();
    assert!(out.success(), "{:?} {}", out.termination, text(&out.stderr));
    assert_eq!(confinement_lines(&out.stdout), expected, "cold launch");

    let sandbox = warm(&t.spec).await.unwrap();
    // More than one call: what the init set once holds for each of them.
    for n in 0..3 {
        let out = warm_call(&sandbox, &t.spec, TIMEOUT, LIMIT).await.unwrap();
        assert!(out.success(), "{:?} {}", out.termination, text(&out.stderr));
        assert_eq!(confinement_lines(&out.stdout), expected, "warm call {n}");
    }
    stop(sandbox).await;
}
