#!/usr/bin/env bash
# The web console in a real headless Chromium (Debian `chromium` + `chromium-driver`, installed
# here if missing), driven by Selenium from PyPI: log in, open the security gate's denied call in
# the timeline, check the deny reason is shown. Screenshots go to a temporary dir (printed), and
# replace docs/console/*.png only on request.
# Usage: tests/console/run.sh [--update-screenshots]   (HOOKBOX_BIN: use this binary instead of
# building)
# Ends with `N passed, M failed`.
set -euo pipefail
update=""
case "${1:-}" in
    "") ;;
    --update-screenshots) update=1 ;;
    *) echo "usage: tests/console/run.sh [--update-screenshots]" >&2; exit 2 ;;
esac
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
venv="${CONSOLE_VENV:-$target_dir/console-venv}"
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    echo "console: installing chromium and chromium-driver" >&2
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium chromium-driver >/dev/null
fi
if [[ -z "${HOOKBOX_BIN:-}" ]]; then
  cargo build --quiet --locked --manifest-path "$root/Cargo.toml" -p hookbox
  HOOKBOX_BIN="$target_dir/debug/hookbox"
fi
# pip is the last thing venv makes: without it, a set-up cut short is made again.
[[ -x "$venv/bin/pip" ]] || python3 -m venv --clear "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "selenium>=4.20"
data="$(mktemp -d)"
shots="$(mktemp -d /tmp/hookbox-console-shots.XXXXXX)"
cleanup() {
  awk -v d="$data/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf "$data"
}
trap cleanup EXIT
timeout 300 "$venv/bin/python" "$here/console_check.py" "$HOOKBOX_BIN" "$data" \
    "$root/crates/hookbox/tests/fixtures/security-gate/.agents" "$shots"
if [[ -n "$update" ]]; then
  cp "$shots"/*.png "$root/docs/console/"
  echo "console: screenshots updated in docs/console/"
else
  echo "console: screenshots in $shots (tests/console/run.sh --update-screenshots puts them in docs/console/)"
fi
