#!/usr/bin/env bash
# One hookbox policy in four real agent CLIs: Claude Code, Gemini CLI, Codex and Copilot (npm
# packages pinned in scripts/tools.sh, headless), each in a scratch project after `hookbox hooks
# install --for CLI`, against a fake model server of this test's own (fake_model.py), and the
# same policy in `hookbox serve` through the google-genai SDK. Everything runs in a network
# namespace this script creates with only loopback up, so no CLI can reach beyond 127.0.0.1.
# Usage: tests/agent_clis/run.sh   (HOOKBOX_BIN: use this binary instead of building).
# Needs root (the network namespace); without it the run fails, unless
# HOOKBOX_TEST_ALLOW_SKIP=1, which skips it loudly. Ends with `N passed, M failed`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [[ "$(id -u)" -ne 0 ]]; then
  if [[ "${HOOKBOX_TEST_ALLOW_SKIP:-}" == 1 ]]; then
    echo "SKIPPED: tests/agent_clis needs root for its network namespace (HOOKBOX_TEST_ALLOW_SKIP=1)" >&2
    exit 0
  fi
  echo "tests/agent_clis needs root (for unshare --net); HOOKBOX_TEST_ALLOW_SKIP=1 skips it" >&2
  exit 1
fi
target_dir="${CARGO_TARGET_DIR:-$root/target}"
venv="${CONFORMANCE_VENV:-$target_dir/conformance-venv}"
if [[ -z "${HOOKBOX_BIN:-}" ]]; then
  cargo build --quiet --locked --manifest-path "$root/Cargo.toml" -p hookbox
  HOOKBOX_BIN="$target_dir/debug/hookbox"
fi
clis="$("$root/scripts/tools.sh" agent-clis)"
# pip is the last thing venv makes: without it, a set-up cut short is made again.
[[ -x "$venv/bin/pip" ]] || python3 -m venv --clear "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "google-genai>=3.3.0"
data="$(mktemp -d /tmp/hookbox-agent-clis.XXXXXX)"
cleanup() {
  awk -v d="$data/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf "$data"
}
trap cleanup EXIT
timeout 1800 unshare --net -- sh -c 'ip link set lo up && exec "$@"' sh \
  "$venv/bin/python" "$here/agent_clis_check.py" "$HOOKBOX_BIN" "$clis" "$data"
