#!/usr/bin/env bash
# `hookbox mcp` against the official MCP Python SDK from PyPI (in a venv), over stdio and
# streamable HTTP. Usage: tests/mcp/run.sh   (HOOKBOX_BIN: use this binary instead of building)
# Ends with `N passed, M failed`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
venv="${MCP_VENV:-$target_dir/mcp-venv}"
if [[ -z "${HOOKBOX_BIN:-}" ]]; then
  cargo build --quiet --locked --manifest-path "$root/Cargo.toml" -p hookbox
  HOOKBOX_BIN="$target_dir/debug/hookbox"
fi
# pip is the last thing venv makes: without it, a set-up cut short is made again.
[[ -x "$venv/bin/pip" ]] || python3 -m venv --clear "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "mcp>=1.20"
data="$(mktemp -d)"
cleanup() {
  awk -v d="$data/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf "$data"
}
trap cleanup EXIT
timeout 300 "$venv/bin/python" "$here/mcp_check.py" "$HOOKBOX_BIN" "$data" "$root/crates/hookbox-environments/tests/fixtures"
