#!/usr/bin/env bash
# The operators' files in packaging/monitoring/ (shipped in the .deb):
#   1. `promtool check rules` on the Prometheus alerting rules;
#   2. `promtool test rules`: each alert fires from synthetic series and stays silent on healthy
#      ones (hookbox-alerts.test.yml);
#   3. every PromQL expression of the Grafana dashboard parses (promtool, with Grafana's
#      $__range, $__rate_interval and $group substituted);
#   4. every hookbox_* series the rules and the dashboard name is one a real `hookbox serve`
#      exports on /metrics.
# promtool is Debian's `prometheus` package (scripts/setup.sh installs it); missing, this fails
# unless HOOKBOX_TEST_ALLOW_SKIP=1. HOOKBOX_BIN: use this binary instead of building.
# Ends with `N passed, M failed`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
mon="$root/packaging/monitoring"
if ! command -v promtool >/dev/null; then
    if [[ "${HOOKBOX_TEST_ALLOW_SKIP:-}" == 1 ]]; then
        echo "monitoring: SKIPPED: promtool is missing (Debian package prometheus; HOOKBOX_TEST_ALLOW_SKIP=1)" >&2
        exit 0
    fi
    echo "monitoring: promtool is missing: install Debian's prometheus package (scripts/setup.sh)" >&2
    exit 1
fi
if [[ -z "${HOOKBOX_BIN:-}" ]]; then
    cargo build --quiet --locked --manifest-path "$root/Cargo.toml" -p hookbox
    HOOKBOX_BIN="$target_dir/debug/hookbox"
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
timeout 120 python3 "$here/monitoring_check.py" "$HOOKBOX_BIN" "$mon" "$scratch"
