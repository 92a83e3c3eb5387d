#!/usr/bin/env bash
# Builds hookbox's binaries (hookbox, hookbox-full, hookbox-sandbox-exec) in a cargo profile
# (release unless one is named), with the sandbox launcher linked static-pie: it is exec'd at
# every sandbox's start, and a static launcher starts without the dynamic loader's work (loading
# and binding libc and libgcc_s: about half of its start-up CPU, on the one-shot commands'
# critical path). Still position-independent, so its address stays randomised. Cargo sets
# codegen options per invocation only, so the launcher is linked again by `cargo rustc`;
# `cargo build` alone gives the same launcher, dynamically linked.
#
#   scripts/build.sh [PROFILE]
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-release}
cargo build --locked -p hookbox --profile "$profile" --bin hookbox --bin hookbox-full
cargo rustc --locked -p hookbox --profile "$profile" --bin hookbox-sandbox-exec \
    -- -C target-feature=+crt-static
