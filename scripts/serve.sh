#!/usr/bin/env bash
# The main job: build hookbox and start `hookbox serve` on embedded defaults (SQLite in the data
# dir, the Linux sandbox, the offline agent), listening on 127.0.0.1:8080. Extra arguments go to
# `hookbox serve` (see `hookbox serve --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --locked -p hookbox
exec target/release/hookbox serve "$@"
