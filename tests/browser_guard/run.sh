#!/usr/bin/env bash
# DNS rebinding and cross-site requests end to end: pages in a real headless Chromium (Debian
# `chromium`, installed here if missing) try to drive `hookbox serve` through a name re-pointed at
# 127.0.0.1 and from another site; hookbox must refuse them and create nothing, while the same
# pages work against a server that allows the name and the origin (the control).
# Usage: tests/browser_guard/run.sh   (HOOKBOX_BIN: use this binary instead of building)
# Ends with `N passed, M failed`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
if ! command -v chromium >/dev/null; then
    echo "browser_guard: installing chromium" >&2
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium >/dev/null
fi
if [[ -z "${HOOKBOX_BIN:-}" ]]; then
  cargo build --quiet --locked --manifest-path "$root/Cargo.toml" -p hookbox
  HOOKBOX_BIN="$target_dir/debug/hookbox"
fi
data="$(mktemp -d)"
cleanup() {
  awk -v d="$data/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf "$data"
}
trap cleanup EXIT
timeout 300 python3 "$here/rebind_check.py" "$HOOKBOX_BIN" "$data"
