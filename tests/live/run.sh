#!/usr/bin/env bash
# Live interactions over WebSocket, end to end: the unmodified google-genai SDK (3.6.1, whose
# `client.aio.interactions.connect` is the live API) against `hookbox serve` with a real hooks
# file: turns over the socket, a hook's deny, an ask answered over REST while the socket waits,
# a socket killed mid-turn and reconnected, a cancel, malformed and oversized frames, a flood.
# Usage: tests/live/run.sh   (HOOKBOX_BIN: use this binary instead of building).
# Ends with `N passed, M failed`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
venv="${LIVE_VENV:-$target_dir/live-venv}"
if [[ -z "${HOOKBOX_BIN:-}" ]]; then
  cargo build --quiet --locked --manifest-path "$root/Cargo.toml" -p hookbox
  HOOKBOX_BIN="$target_dir/debug/hookbox"
fi
# pip is the last thing venv makes: without it, a set-up cut short is made again.
[[ -x "$venv/bin/pip" ]] || python3 -m venv --clear "$venv"
# The live API is in 3.5.0 and later; 3.6.1 is the newest 3.x this test was written against.
"$venv/bin/pip" install --quiet --disable-pip-version-check "google-genai==3.6.1"
data="$(mktemp -d)"
cleanup() {
  awk -v d="$data/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf "$data"
}
trap cleanup EXIT
timeout 600 "$venv/bin/python" "$here/live_check.py" "$HOOKBOX_BIN" "$data"
