#!/usr/bin/env bash
# The main job: build hookbox and start `hookbox serve` on embedded defaults (SQLite in the data
# dir, the Linux sandbox, the offline agent), listening on 127.0.0.1:8080. Extra arguments go to
# `hookbox serve` (see `hookbox serve --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what serving needs: the test tools (Garage, cargo-deb, PostgreSQL, ...) come with
# scripts/test.sh.
scripts/setup.sh serve
scripts/build.sh release
# The binary cargo just built, wherever CARGO_TARGET_DIR puts it.
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
exec "$target_dir/release/hookbox" serve "$@"
