#!/usr/bin/env bash
# The whole test suite: set-up, then every crate's unit and integration tests and the
# end-to-end suite that drives the hookbox binary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test --workspace --locked "$@"
