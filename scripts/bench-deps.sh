#!/usr/bin/env bash
# Installs what the benchmarks compare against: Debian's tinyproxy (`cargo bench -p
# hookbox-egress`) and bubblewrap (`cargo bench -p hookbox-environments`).
# Idempotent: installs only what is missing. Run as root (or with sudo available).
set -euo pipefail

need=()
command -v tinyproxy >/dev/null 2>&1 || need+=(tinyproxy)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
if [ ${#need[@]} -gt 0 ]; then
    echo "bench-deps: installing ${need[*]}" >&2
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null
fi
