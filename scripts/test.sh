#!/usr/bin/env bash
# The whole test suite: set-up, then every crate's unit and integration tests and the
# end-to-end suite that drives the hookbox binary, then the SDK conformance suite (the unmodified
# google-genai SDK from PyPI, 3.3.0 and 3.6.1 in two venvs that must pass the same tests, and the
# JS SDK from npm, against `hookbox serve`, with the reference's examples),
# the Java SDK's conformance run (tests/java, Maven; the reference's Java examples unmodified),
# other agent CLIs' hooks files (Claude Code, Gemini CLI, Copilot) run by `hookbox serve --hook-dialects`
# through the SDK (tests/vendor_hooks), live interactions over WebSocket through the SDK
# (tests/live), webhooks through the SDK to a receiver that verifies with the standardwebhooks library,
# triggers through the SDK (real minute boundaries, on two replicas of one PostgreSQL database), and
# `hookbox mcp` against the official MCP Python SDK (stdio and streamable HTTP). The store's
# suite runs twice: on SQLite, and on a throwaway PostgreSQL cluster (scripts/postgres.sh); two
# replicas share it end to end (and hand over at a clean stop); a TLS-only cluster checks
# verify-full; the web console is driven in a headless Chromium, and pages in it try DNS
# rebinding and cross-site requests against `hookbox serve` (tests/browser_guard); the Prometheus
# alerting rules and Grafana dashboard (packaging/monitoring) are checked with promtool (tests/monitoring). Snapshots run
# against a throwaway Garage object store (scripts/objectstore.sh), and two replicas with separate
# data dirs carry environments through it (and one cut off from PostgreSQL by a forwarder the test
# controls serves no stale copy once the partition heals, with and without a third replica);
# snapshots (gs://) and gcs sources run against a throwaway fake-gcs-server
# (scripts/objectstore.sh start --gcs). One hookbox policy is enforced by `hookbox hooks gate` in
# four real agent CLIs from npm (Claude Code, Gemini CLI, Codex, Copilot: tests/agent_clis, headless
# against a fake model server, in a loopback-only network namespace) and in `hookbox serve`.
# A test that needs a tool or root that is missing fails;
# HOOKBOX_TEST_ALLOW_SKIP=1 skips such tests instead, loudly. Last, the .deb is built, installed
# with dpkg and run as its systemd unit would run it. The sandbox suite, the end-to-end suite (with
# its replicas on PostgreSQL and Garage), the SDK conformance runs (Python and Java), the MCP run
# and the console run twice: under
# namespaces and under gVisor (HOOKBOX_RUNTIME=gvisor, which the binary reads as --runtime).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test --workspace --locked "$@"
echo "test.sh: the sandbox suite again under gVisor (--runtime gvisor)"
HOOKBOX_TEST_RUNTIME=gvisor cargo test -p hookbox-environments --test all --locked "$@"
echo "test.sh: the end-to-end suite again under gVisor"
HOOKBOX_RUNTIME=gvisor cargo test -p hookbox --test all --locked "$@"
pg_url=$(scripts/postgres.sh start)
pg_tls_url=$(scripts/postgres.sh start --tls)
os_url=$(scripts/objectstore.sh start)
gcs_account=$(scripts/objectstore.sh start --gcs)
trap 'scripts/postgres.sh stop "$pg_url"; scripts/postgres.sh stop "$pg_tls_url"; scripts/objectstore.sh stop "$os_url"; scripts/objectstore.sh stop "$gcs_account"' EXIT
echo "test.sh: the store suite on PostgreSQL ($pg_url)"
HOOKBOX_TEST_STORE=postgres HOOKBOX_TEST_POSTGRES_URL="$pg_url" \
    cargo test -p hookbox-store --locked "$@" -- --include-ignored --skip crash_child_writer
echo "test.sh: two hookbox replicas on one PostgreSQL database"
HOOKBOX_TEST_POSTGRES_URL="$pg_url" cargo test -p hookbox --test all --locked "$@" -- --ignored two_replicas
echo "test.sh: the CLI on PostgreSQL, and TLS to PostgreSQL (verify-full)"
HOOKBOX_TEST_POSTGRES_URL="$pg_url" HOOKBOX_TEST_POSTGRES_TLS_URL="$pg_tls_url" \
    cargo test -p hookbox --test all --locked "$@" -- --ignored postgres_
echo "test.sh: snapshots in a Garage object store"
HOOKBOX_TEST_SNAPSHOT_URL="$os_url" cargo test -p hookbox-snapshot --locked "$@"
echo "test.sh: snapshots in a GCS-compatible store (gs://, fake-gcs-server), and gcs sources read from it"
GOOGLE_SERVICE_ACCOUNT="$gcs_account" GOOGLE_ALLOW_HTTP=true HOOKBOX_TEST_SNAPSHOT_URL=gs://hookbox/snapshots \
    cargo test -p hookbox-snapshot --locked "$@"
GOOGLE_SERVICE_ACCOUNT="$gcs_account" GOOGLE_ALLOW_HTTP=true HOOKBOX_TEST_GCS_BUCKET=hookbox \
    cargo test -p hookbox-environments --test all --locked "$@" -- --ignored gcs_sources_are_read_from_a_gcs_server
echo "test.sh: replicas without a shared disk, on PostgreSQL and Garage (a crash, a clean stop, a healed partition)"
HOOKBOX_TEST_POSTGRES_URL="$pg_url" HOOKBOX_TEST_SNAPSHOT_URL="$os_url" \
    cargo test -p hookbox --test all --locked "$@" -- --ignored replicas_without_a_shared_disk
echo "test.sh: replicas (one database; no shared disk) again under gVisor"
HOOKBOX_RUNTIME=gvisor HOOKBOX_TEST_POSTGRES_URL="$pg_url" HOOKBOX_TEST_SNAPSHOT_URL="$os_url" \
    cargo test -p hookbox --test all --locked "$@" -- --ignored replicas_without_a_shared_disk two_replicas
tests/conformance/run.sh --reference
tests/conformance/run.sh --reference --runtime gvisor
tests/java/run.sh
tests/java/run.sh --runtime gvisor
tests/approvals/run.sh
HOOKBOX_RUNTIME=gvisor tests/approvals/run.sh
tests/live/run.sh
tests/vendor_hooks/run.sh
tests/agent_clis/run.sh
tests/mcp_servers/run.sh
HOOKBOX_RUNTIME=gvisor tests/mcp_servers/run.sh
tests/webhooks/run.sh
HOOKBOX_TEST_POSTGRES_URL="$pg_url" tests/triggers/run.sh
tests/mcp/run.sh
HOOKBOX_RUNTIME=gvisor tests/mcp/run.sh
tests/console/run.sh
HOOKBOX_RUNTIME=gvisor tests/console/run.sh
tests/browser_guard/run.sh
tests/monitoring/run.sh
tests/deb/run.sh
