#!/usr/bin/env bash
# Installs what `cargo bench -p hookbox-egress` compares against: Debian's tinyproxy.
# Idempotent: installs only what is missing. Run as root (or with sudo available).
set -euo pipefail

if ! command -v tinyproxy >/dev/null 2>&1; then
    echo "bench-deps: installing tinyproxy" >&2
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq tinyproxy >/dev/null
fi
