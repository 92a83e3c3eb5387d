#!/usr/bin/env bash
# Builds and caches the tools hookbox's tests run that no Debian package ships: Garage, the
# S3-compatible object store that scripts/objectstore.sh starts, and cargo-deb, which builds
# the .deb (scripts/deb.sh). Built once per machine with
# `cargo install --locked` from the Rust package registry into a cache outside the checkout
# ($HOOKBOX_TOOLS_DIR, default ~/.cache/hookbox-tools), so later runs (and CI on the same
# machine) reuse the binary; a fresh machine builds it (about 15 minutes on 2 cores).
#
#   scripts/tools.sh            builds what is missing; prints nothing when all is there
#   scripts/tools.sh garage     prints the path of the garage binary (building it if needed)
#   scripts/tools.sh cargo-deb  prints the path of the cargo-deb binary (building it if needed)
set -euo pipefail

GARAGE_VERSION=2.5.0
CARGO_DEB_VERSION=3.8.0
tools_dir=${HOOKBOX_TOOLS_DIR:-${HOME:-/root}/.cache/hookbox-tools}
garage_bin="$tools_dir/garage-$GARAGE_VERSION/bin/garage"
cargo_deb_bin="$tools_dir/cargo-deb-$CARGO_DEB_VERSION/bin/cargo-deb"

# cargo install CRATE VERSION ROOT [cargo install flags...], into ROOT.partial then renamed, so
# an interrupted build leaves nothing that looks finished.
install_tool() {
    local crate=$1 version=$2 root=$3 target
    shift 3
    echo "tools.sh: building $crate $version (once per machine; cached in $tools_dir)" >&2
    target=$(mktemp -d "/tmp/hookbox-$crate-build.XXXXXX")
    if ! CARGO_TARGET_DIR="$target" cargo install "$crate" --version "=$version" --locked \
        "$@" --root "$root.partial" >"$target/build.log" 2>&1; then
        tail -40 "$target/build.log" >&2
        rm -rf "$target" "$root.partial"
        exit 1
    fi
    rm -rf "$root"
    mv "$root.partial" "$root"
    rm -rf "$target"
}

build_garage() {
    [ -x "$garage_bin" ] && return
    # The SQLite metadata engine only: no metrics, K2V or LMDB, to keep the build short.
    install_tool garage "$GARAGE_VERSION" "$tools_dir/garage-$GARAGE_VERSION" \
        --no-default-features --features bundled-libs,sqlite
}

build_cargo_deb() {
    [ -x "$cargo_deb_bin" ] && return
    install_tool cargo-deb "$CARGO_DEB_VERSION" "$tools_dir/cargo-deb-$CARGO_DEB_VERSION"
}

case "${1:-}" in
    "") build_garage; build_cargo_deb ;;
    garage) build_garage; echo "$garage_bin" ;;
    cargo-deb) build_cargo_deb; echo "$cargo_deb_bin" ;;
    *) echo "usage: tools.sh [garage|cargo-deb]" >&2; exit 2 ;;
esac
