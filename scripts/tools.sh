#!/usr/bin/env bash
# Builds and caches the tools hookbox's tests run that no Debian package ships: Garage, the
# S3-compatible object store that scripts/objectstore.sh starts. Built once per machine with
# `cargo install --locked` from the Rust package registry into a cache outside the checkout
# ($HOOKBOX_TOOLS_DIR, default ~/.cache/hookbox-tools), so later runs (and CI on the same
# machine) reuse the binary; a fresh machine builds it (about 15 minutes on 2 cores).
#
#   scripts/tools.sh            builds what is missing; prints nothing when all is there
#   scripts/tools.sh garage     prints the path of the garage binary (building it if needed)
set -euo pipefail

GARAGE_VERSION=2.5.0
tools_dir=${HOOKBOX_TOOLS_DIR:-${HOME:-/root}/.cache/hookbox-tools}
garage_bin="$tools_dir/garage-$GARAGE_VERSION/bin/garage"

build_garage() {
    [ -x "$garage_bin" ] && return
    echo "tools.sh: building garage $GARAGE_VERSION (once per machine; cached in $tools_dir)" >&2
    local target
    target=$(mktemp -d /tmp/hookbox-garage-build.XXXXXX)
    # The SQLite metadata engine only: no metrics, K2V or LMDB, to keep the build short.
    if ! CARGO_TARGET_DIR="$target" cargo install garage --version "=$GARAGE_VERSION" --locked \
        --no-default-features --features bundled-libs,sqlite \
        --root "$tools_dir/garage-$GARAGE_VERSION.partial" >"$target/build.log" 2>&1; then
        tail -40 "$target/build.log" >&2
        rm -rf "$target"
        exit 1
    fi
    rm -rf "$tools_dir/garage-$GARAGE_VERSION"
    mv "$tools_dir/garage-$GARAGE_VERSION.partial" "$tools_dir/garage-$GARAGE_VERSION"
    rm -rf "$target"
}

case "${1:-}" in
    "") build_garage ;;
    garage) build_garage; echo "$garage_bin" ;;
    *) echo "usage: tools.sh [garage]" >&2; exit 2 ;;
esac
