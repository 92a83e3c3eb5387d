#!/usr/bin/env bash
# Triggers end to end: the unmodified google-genai SDK against `hookbox serve`; with
# HOOKBOX_TEST_POSTGRES_URL (scripts/postgres.sh start), the minute-boundary run is on two
# replicas sharing a fresh database, where it must fire once. Waits for two real minute
# boundaries. Usage: tests/triggers/run.sh   (HOOKBOX_BIN: use this binary instead of
# building). Ends with `N passed, M failed`.
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
if [[ -n "${HOOKBOX_TEST_POSTGRES_URL:-}" ]]; then
  name="hb_triggers_$RANDOM$RANDOM"
  psql -q "$HOOKBOX_TEST_POSTGRES_URL" -c "CREATE DATABASE $name"
  export HOOKBOX_TRIGGERS_DATABASE="${HOOKBOX_TEST_POSTGRES_URL%/*}/$name"
fi
timeout 600 "$venv/bin/python" "$here/triggers_check.py" "$HOOKBOX_BIN" "$data"
