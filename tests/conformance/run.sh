#!/usr/bin/env bash
# Conformance: the unmodified google-genai SDK (from PyPI) against `hookbox serve` with the
# offline agent. Usage: tests/conformance/run.sh [--reference]  (needs python3 and cargo).
#   --reference      also run the reference documentation's three examples (needs the sandbox
#                    and hooks wired into `hookbox serve`)
#   HOOKBOX_BIN      use this hookbox binary instead of building one
#   GENAI_VERSION    pip requirement (default: google-genai>=3.3.0)
#   CONFORMANCE_VENV where the virtualenv lives (default: target/conformance-venv, reused)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${CONFORMANCE_VENV:-$root/target/conformance-venv}"
requirement="${GENAI_VERSION:-google-genai>=3.3.0}"

if [[ -z "${HOOKBOX_BIN:-}" ]]; then
  cargo build --quiet --manifest-path "$root/Cargo.toml" -p hookbox
  target_dir="${CARGO_TARGET_DIR:-$root/target}"
  HOOKBOX_BIN="$target_dir/debug/hookbox"
fi
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check "$requirement"
"$venv/bin/python" -c 'import google.genai as g; print("google-genai", g.__version__)'

data="$(mktemp -d)"
log="$data/serve.log"
key="conformance-$RANDOM$RANDOM"
port="$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
HOOKBOX_API_KEYS="$key" "$HOOKBOX_BIN" serve --listen "127.0.0.1:$port" --data-dir "$data/data" >"$log" 2>&1 &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$data"; }
trap cleanup EXIT
# The banner is printed once the socket is bound.
for _ in $(seq 100); do
  grep -q "listening on" "$log" && break
  kill -0 "$server" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
grep -q "listening on" "$log" || { echo "hookbox serve did not start"; cat "$log"; exit 1; }

export HOOKBOX_BASE_URL="http://127.0.0.1:$port" HOOKBOX_TEST_KEY="$key"
"$venv/bin/python" "$here/sdk_basic.py"
if [[ "${1:-}" == "--reference" ]]; then
  "$venv/bin/python" "$here/reference_check.py"
fi
