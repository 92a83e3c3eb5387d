#!/usr/bin/env bash
# The whole test suite: set-up, then every crate's unit and integration tests and the
# end-to-end suite that drives the hookbox binary, then the SDK conformance suite (the unmodified
# google-genai SDK from PyPI, in a venv, against `hookbox serve`, with the reference's examples),
# and `hookbox mcp` against the official MCP Python SDK (stdio and streamable HTTP).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test --workspace --locked "$@"
tests/conformance/run.sh --reference
tests/mcp/run.sh
