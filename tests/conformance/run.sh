#!/usr/bin/env bash
# Conformance: the unmodified google-genai SDK (from PyPI) against `hookbox serve` with the
# offline agent and the real sandbox, on two SDK versions in two virtualenvs: 3.3.0 (the oldest
# supported) and 3.6.1 (the newest 3.x), so every test that passes on one must pass on the other.
# sdk_basic.py runs on both; sdk_36.py (auth tokens, environment modes, tool search: methods
# 3.3.0 lacks) runs on the versions that have them. Usage:
#   tests/conformance/run.sh [--reference] [--runtime R]
#   --reference      also run the reference documentation's three examples (reference_check.py),
#                    with a local HTTPS telemetry receiver reached through the egress proxy
#   --runtime R      run the server's environments under runtime R (`namespaces`, `gvisor`)
#   HOOKBOX_BIN      use this hookbox binary instead of building one
#   GENAI_VERSIONS   space-separated SDK versions (default: "3.3.0 3.6.1"); each gets its own venv
#   CONFORMANCE_VENV where the virtualenvs live (default: <target dir>/conformance-venv-<version>, reused)
# Then the JS SDK (@google/genai, pinned in js/package.json, installed with npm into
# <target dir>/conformance-js) runs js/sdk_js.mjs. Without npm the run fails, unless
# HOOKBOX_TEST_ALLOW_SKIP=1 (then it says loudly that the JS SDK was skipped).
# Needs python3 with venv (scripts/setup.sh installs it) and cargo. Ends with `N passed, M failed`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
read -r -a versions <<<"${GENAI_VERSIONS:-3.3.0 3.6.1}"
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
venv_of() { echo "${CONFORMANCE_VENV:-$target_dir/conformance-venv}-$1"; }
for version in "${versions[@]}"; do
  venv="$(venv_of "$version")"
  # pip is the last thing venv makes: without it, a set-up cut short is made again.
  if [[ ! -x "$venv/bin/pip" ]]; then
    python3 -m venv --clear "$venv"
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check "google-genai==$version" cryptography
  "$venv/bin/python" -c 'import google.genai as g; print("google-genai", g.__version__)'
done
js_dir="$target_dir/conformance-js"
if command -v npm >/dev/null; then
  mkdir -p "$js_dir"
  cp "$here/js/package.json" "$here/js/sdk_js.mjs" "$js_dir/"
  npm install --silent --no-audit --no-fund --no-package-lock --prefix "$js_dir" >/dev/null
elif [[ "${HOOKBOX_TEST_ALLOW_SKIP:-}" == 1 ]]; then
  echo "conformance: SKIPPING the JS SDK run: npm is not installed (HOOKBOX_TEST_ALLOW_SKIP=1)" >&2
  js_dir=""
else
  echo "conformance: npm is needed for the JS SDK run (or set HOOKBOX_TEST_ALLOW_SKIP=1)" >&2
  exit 1
fi
# The telemetry receiver and the port picker run in the first venv.
venv="$(venv_of "${versions[0]}")"

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

serve_args=(--runtime "$runtime" --audit-log "$data/audit.jsonl")
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

export HOOKBOX_BASE_URL="http://127.0.0.1:$port" HOOKBOX_TEST_KEY="$key" HOOKBOX_SERVE_LOG="$log" HOOKBOX_AUDIT_LOG="$data/audit.jsonl"
status=0
for version in "${versions[@]}"; do
  py="$(venv_of "$version")/bin/python"
  echo "conformance: google-genai $version"
  "$py" "$here/sdk_basic.py" | tee "$data/basic-$version.out" || status=1
  "$py" "$here/sdk_36.py" || status=1
  if (( reference )); then
    # Each version's check reads only the telemetry its own run posted.
    : >"$TELEMETRY_EVENTS"
    "$py" "$here/reference_check.py" || status=1
  fi
done
if [[ -n "$js_dir" ]]; then
  echo "conformance: @google/genai (JS) $(node -p "require('$js_dir/node_modules/@google/genai/package.json').version")"
  node "$js_dir/sdk_js.mjs" || status=1
fi
# The same tests pass on every version: compare the names that passed.
for version in "${versions[@]:1}"; do
  if ! diff <(grep '^ok ' "$data/basic-${versions[0]}.out") <(grep '^ok ' "$data/basic-$version.out"); then
    echo "FAIL sdk_basic.py passes different tests on google-genai ${versions[0]} and $version"
    status=1
  fi
done
if (( status )); then
  echo "--- hookbox serve log (last 60 lines) ---"
  tail -n 60 "$log"
fi
exit "$status"
