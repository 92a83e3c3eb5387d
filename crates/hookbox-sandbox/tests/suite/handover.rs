//! The hand-over of a warm call (its spec in a memfd, its stdio, status channel and reply
//! socket in one `C` message): the call runs with exactly the spec it was given, short or long
//! (far beyond one message's payload), with its stdin (an empty one read as end of file).

use std::time::Duration;

use hookbox_sandbox::spec::LaunchSpec;
use hookbox_sandbox::warm::WarmSandbox;

use super::support::*;

const LIMIT: usize = 256 * 1024;
const TIMEOUT: Duration = Duration::from_secs(120);

/// The program of the specs [`padded`] makes: prints `$PAD` as it received it, then what it read
/// from stdin between two markers.
const PRINT_PAD: &str = "printf '%s' \"$PAD\"; printf '|'; cat; printf '|'";

/// `spec` running [`PRINT_PAD`] with `PAD` set so that its call's JSON is `json_len` bytes
/// long; and `PAD`'s value.
pub fn padded(spec: &LaunchSpec, json_len: usize) -> (LaunchSpec, String) {
    let mut spec = spec.clone();
    spec.argv = vec!["/bin/sh".into(), "-c".into(), PRINT_PAD.into()];
    spec.env.push(("PAD".into(), String::new()));
    let base = serde_json::to_vec(&spec.split_call().1).unwrap().len();
    assert!(base <= json_len, "the spec is already {base} bytes");
    // Varied, not one repeated byte, so that a spec cut or shifted anywhere shows.
    let pad: String = (0..json_len - base)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    spec.env.last_mut().unwrap().1 = pad.clone();
    assert_eq!(
        serde_json::to_vec(&spec.split_call().1).unwrap().len(),
        json_len
    );
    (spec, pad)
}

/// Runs `spec`'s call in `sandbox` with `stdin`; it must succeed. Its stdout.
pub async fn call_with_stdin(sandbox: &WarmSandbox, spec: &LaunchSpec, stdin: &[u8]) -> String {
    let (_, call) = spec.split_call();
    let (out, _) = sandbox
        .call(&call, None)
        .await
        .unwrap()
        .supervise(std::time::Instant::now(), stdin.to_vec(), TIMEOUT, LIMIT)
        .await
        .unwrap();
    assert!(
        out.success(),
        "{:?}: {}",
        out.termination,
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A short spec's length, one at a message's payload limit (`fdpass::MAX_PAYLOAD`), and one
/// far beyond it.
pub fn lengths() -> [usize; 3] {
    [300, hookbox_sandbox::fdpass::MAX_PAYLOAD, 64 * 1024]
}

#[tokio::test]
async fn a_warm_call_runs_its_spec_short_or_long_with_its_stdin() {
    let t = tree(&[]);
    let sandbox = warm(&t.spec).await.unwrap();
    for len in lengths() {
        let (spec, pad) = padded(&t.spec, len);
        for stdin in ["", "given\n"] {
            assert_eq!(
                call_with_stdin(&sandbox, &spec, stdin.as_bytes()).await,
                format!("{pad}|{stdin}|"),
                "spec of {len} bytes, stdin {stdin:?}"
            );
        }
    }
    stop(sandbox).await;
}
