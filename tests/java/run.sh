#!/usr/bin/env bash
# The Java conformance run: the official Java SDK (com.google.genai:google-genai, from Maven's
# default repository) against `hookbox serve` with the offline agent and the real sandbox, driven
# by JUnit 5 (tests/java/src/test/java/dev/hookbox/conformance/):
#   - the reference documentation's Java examples, from their verbatim copies in tests/java/reference/,
#     compiled and run unmodified (their `new Client()` reads GOOGLE_GEMINI_BASE_URL and
#     GEMINI_API_KEY, set here): the security gate denies `rm -rf` and the model sees the reason;
#     the multi-turn privacy example continues with previous_interaction_id; when the reference
#     text is beside the checkout, the copies are compared with the examples it shows (without
#     it that one test is reported as not run, and the rest still runs);
#   - interactions (create, get, streaming, replay, resume, background, cancel, delete, errors),
#     environments and their files, credentials, agents, triggers, webhooks (to a receiver on
#     127.0.0.1 that checks the Standard Webhooks signatures), a function-tool round trip and an
#     approval; every answer parsed by the SDK's own types is compared with the bytes hookbox sent.
# Usage: tests/java/run.sh [--runtime namespaces|gvisor]
#   HOOKBOX_BIN           use this hookbox binary instead of building one
#   GENAI_JAVA_VERSION    another google-genai release than the one pom.xml names
#   HOOKBOX_REFERENCE_DOC the reference text the copies are checked against (default:
#                         shared/reference/… beside the checkout; optional)
#   HOOKBOX_TOOLS_DIR     the cache outside the checkout (default ~/.cache/hookbox-tools); Maven's
#                         repository is kept in its m2/, so a second run downloads nothing
# Needs a JDK 17+ and Maven (scripts/setup.sh installs them). Ends with Surefire's
# `Tests run: N, Failures: F, Errors: E, Skipped: S`; exits non-zero on any failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
tools_dir="${HOOKBOX_TOOLS_DIR:-${HOME:-/root}/.cache/hookbox-tools}"
reference="${HOOKBOX_REFERENCE_DOC:-$root/../shared/reference/000_4a40fa512f86aa3a.txt}"
runtime=namespaces
while (( $# )); do
  case "$1" in
    --runtime) runtime="${2:?--runtime needs a value}"; shift ;;
    *) echo "usage: $0 [--runtime namespaces|gvisor]" >&2; exit 2 ;;
  esac
  shift
done

for tool in javac mvn; do
  command -v "$tool" >/dev/null || { echo "java conformance: $tool is missing (scripts/setup.sh installs a JDK and Maven)" >&2; exit 1; }
done
reference_note=""
if [[ ! -f "$reference" ]]; then
  reference_note="java conformance: the reference text is not at $reference (HOOKBOX_REFERENCE_DOC): the examples run from their copies in tests/java/reference/, but the check that those are verbatim is NOT RUN"
  echo "$reference_note" >&2
fi
if [[ -z "${HOOKBOX_BIN:-}" ]]; then
  cargo build --quiet --locked --manifest-path "$root/Cargo.toml" -p hookbox
  HOOKBOX_BIN="$target_dir/debug/hookbox"
fi

data="$(mktemp -d)"
log="$data/serve.log"
key="java-conformance-$RANDOM$RANDOM"
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  # Environment disks are loop-mounted images: detach them before removing the data dir.
  awk -v d="$data/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf "$data"
}
trap cleanup EXIT

# Port 0: the banner names the port the server bound.
# --egress-allow-cidr admits the webhook receiver the tests run on 127.0.0.1.
env -u GEMINI_API_KEY HOOKBOX_API_KEYS="$key" "$HOOKBOX_BIN" -v serve --listen 127.0.0.1:0 --data-dir "$data/data" \
    --runtime "$runtime" --egress-allow-cidr 127.0.0.1/32 >"$log" 2>&1 &
pid=$!
base=""
for _ in $(seq 400); do
  base="$(sed -n 's|^hookbox is listening on \(http://[^ ]*\).*|\1|p' "$log" | head -n1)"
  [[ -n "$base" ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
[[ -n "$base" ]] || { echo "hookbox serve did not start"; cat "$log"; exit 1; }
genai="${GENAI_JAVA_VERSION:-$(sed -n 's|.*<genai.version>\(.*\)</genai.version>.*|\1|p' "$here/pom.xml")}"
echo "java conformance: google-genai $genai (Java) against hookbox at $base, environments under $runtime"

mvn_args=(-B -ntp -Dstyle.color=never -f "$here/pom.xml" "-Dmaven.repo.local=$tools_dir/m2"
          "-Dbuild.dir=$target_dir/java-conformance")
[[ -n "${GENAI_JAVA_VERSION:-}" ]] && mvn_args+=("-Dgenai.version=$GENAI_JAVA_VERSION")
status=0
# Only this run's server and key reach the SDK: no other key, Vertex switch or API version.
env -u GOOGLE_API_KEY -u GOOGLE_GENAI_USE_VERTEXAI -u GOOGLE_GENAI_USE_ENTERPRISE -u GOOGLE_GENAI_API_VERSION \
    -u GOOGLE_CLOUD_PROJECT -u GOOGLE_CLOUD_LOCATION \
    HOOKBOX_BASE_URL="$base" HOOKBOX_TEST_KEY="$key" HOOKBOX_REFERENCE_DOC="$reference" \
    GOOGLE_GEMINI_BASE_URL="$base" GEMINI_API_KEY="$key" \
    timeout 1200 mvn "${mvn_args[@]}" test || status=1
[[ -n "$reference_note" ]] && echo "$reference_note" >&2
if (( status )); then
  echo "--- hookbox serve log (last 60 lines) ---"
  tail -n 60 "$log"
fi
exit "$status"
