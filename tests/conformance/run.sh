#!/usr/bin/env bash
# Conformance: the unmodified google-genai SDK (from PyPI) against `hookbox serve` with the
# offline agent and the real sandbox. Usage: tests/conformance/run.sh [--reference] [--runtime R]
#   --reference      also run the reference documentation's three examples (reference_check.py),
#                    with a local HTTPS telemetry receiver reached through the egress proxy
#   --runtime R      run the server's environments under runtime R (`namespaces`, `gvisor`)
#   HOOKBOX_BIN      use this hookbox binary instead of building one
#   GENAI_VERSION    pip requirement (default: google-genai>=3.3.0)
#   CONFORMANCE_VENV where the virtualenv lives (default: <target dir>/conformance-venv, reused)
# Needs python3 with venv (scripts/setup.sh installs it) and cargo. Ends with `N passed, M failed`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
venv="${CONFORMANCE_VENV:-$target_dir/conformance-venv}"
requirement="${GENAI_VERSION:-google-genai>=3.3.0}"
reference=0
runtime=namespaces
while (( $# )); do
  case "$1" in
    --reference) reference=1 ;;
    --runtime) runtime="${2:?--runtime needs a value}"; shift ;;
    *) echo "usage: $0 [--reference] [--runtime namespaces|gvisor]" >&2; exit 2 ;;
  esac
  shift
done

if [[ -z "${HOOKBOX_BIN:-}" ]]; then
  cargo build --quiet --locked --manifest-path "$root/Cargo.toml" -p hookbox
  HOOKBOX_BIN="$target_dir/debug/hookbox"
fi
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check "$requirement" cryptography
"$venv/bin/python" -c 'import google.genai as g; print("google-genai", g.__version__)'

data="$(mktemp -d)"
log="$data/serve.log"
key="conformance-$RANDOM$RANDOM"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  # Environment disks are loop-mounted images: detach them before removing the data dir.
  awk -v d="$data/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf "$data"
}
trap cleanup EXIT

# Waits (bounded) until FILE has a line matching PATTERN while process PID lives.
wait_for() {
  local file="$1" pattern="$2" pid="$3"
  for _ in $(seq 200); do
    grep -q "$pattern" "$file" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  grep -q "$pattern" "$file" 2>/dev/null
}

serve_args=(--runtime "$runtime")
echo "conformance: environments run under $runtime"
if (( reference )); then
  # telemetry.example.com of example 3: an HTTPS receiver on loopback with a test CA. hookbox's
  # egress reaches it only through these operator flags (loopback is blocked otherwise).
  mkdir -p "$data/telemetry"
  "$venv/bin/python" "$here/telemetry_receiver.py" "$data/telemetry" >"$data/telemetry/port" 2>"$data/telemetry/log" &
  pids+=($!)
  wait_for "$data/telemetry/port" '^[0-9]' "${pids[-1]}" || { echo "telemetry receiver did not start"; cat "$data/telemetry/log"; exit 1; }
  tport="$(head -n1 "$data/telemetry/port")"
  serve_args+=(--egress-resolve "telemetry.example.com:443=127.0.0.1:$tport"
               --egress-allow-cidr 127.0.0.0/8 --egress-extra-ca "$data/telemetry/ca.pem")
  export TELEMETRY_EVENTS="$data/telemetry/events.jsonl"
fi

port="$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
HOOKBOX_API_KEYS="$key" "$HOOKBOX_BIN" -v serve --listen "127.0.0.1:$port" --data-dir "$data/data" "${serve_args[@]}" >"$log" 2>&1 &
pids+=($!)
# The banner is printed once the socket is bound.
wait_for "$log" "listening on" "${pids[-1]}" || { echo "hookbox serve did not start"; cat "$log"; exit 1; }

export HOOKBOX_BASE_URL="http://127.0.0.1:$port" HOOKBOX_TEST_KEY="$key"
status=0
"$venv/bin/python" "$here/sdk_basic.py" || status=1
if (( reference )); then
  "$venv/bin/python" "$here/reference_check.py" || status=1
fi
if (( status )); then
  echo "--- hookbox serve log (last 60 lines) ---"
  tail -n 60 "$log"
fi
exit "$status"
