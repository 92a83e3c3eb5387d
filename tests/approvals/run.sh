#!/usr/bin/env bash
# Hooks that ask, end to end: the unmodified google-genai SDK against `hookbox serve`, with a
# real hooks file whose command hook answers {"decision": "ask"} in the sandbox: approve, deny
# with a reason, the --ask-timeout, a pending ask through a kill -9, forged approvals refused.
# Usage: tests/approvals/run.sh   (HOOKBOX_BIN: use this binary instead of building).
# Ends with `N passed, M failed`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
venv="${CONFORMANCE_VENV:-$target_dir/conformance-venv}"
if [[ -z "${HOOKBOX_BIN:-}" ]]; then
  cargo build --quiet --locked --manifest-path "$root/Cargo.toml" -p hookbox
  HOOKBOX_BIN="$target_dir/debug/hookbox"
fi
# pip is the last thing venv makes: without it, a set-up cut short is made again.
[[ -x "$venv/bin/pip" ]] || python3 -m venv --clear "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "google-genai>=3.3.0"
data="$(mktemp -d)"
cleanup() {
  awk -v d="$data/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf "$data"
}
trap cleanup EXIT
timeout 600 "$venv/bin/python" "$here/approvals_check.py" "$HOOKBOX_BIN" "$data"
