#!/usr/bin/env bash
# Installs what hookbox needs on a fresh Debian machine. Idempotent: installs only what is
# missing. Run as root (or with sudo available).
# Usage: scripts/setup.sh [serve|test]
#   serve: only what building and serving need (scripts/serve.sh): git (repository sources),
#          python3, e2fsprogs and mount (per-environment disks), curl.
#   test (the default, scripts/test.sh and .ci/run): that, and every test tool: PostgreSQL, a
#          JDK and Maven, node, Go, Garage, fake-gcs-server, cargo-deb, runsc.
set -euo pipefail
mode="${1:-test}"
case "$mode" in
    serve|test) ;;
    *) echo "usage: scripts/setup.sh [serve|test]" >&2; exit 2 ;;
esac

need_debs=()
have() { command -v "$1" >/dev/null 2>&1; }
have git || need_debs+=(git)
have python3 || need_debs+=(python3)
# Per-environment disk caps: an ext4 image per environment, loop-mounted.
have mkfs.ext4 || need_debs+=(e2fsprogs)
have mount || need_debs+=(mount)
have curl || need_debs+=(curl)
[ -e /usr/bin/python3 ] || need_debs+=(python3)
if [ "$mode" = test ]; then
python3 -c 'import venv, ensurepip' 2>/dev/null || need_debs+=(python3-venv)
have ip || need_debs+=(iproute2)
have unshare || need_debs+=(util-linux)
# `script` gives the progress test a terminal.
have script || need_debs+=(bsdutils)
# The PostgreSQL store's tests (scripts/postgres.sh runs a throwaway cluster).
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need_debs+=(postgresql)
have runuser || need_debs+=(util-linux)
# scripts/postgres.sh start --tls makes a throwaway CA and certificate.
have openssl || need_debs+=(openssl)
# tests/deb/run.sh starts the installed binary under the unit's capability bounding set.
have setpriv || need_debs+=(util-linux)
have dpkg-deb || need_debs+=(dpkg)
# tests/java/run.sh: the Java SDK's conformance run needs a JDK 17 or newer (javac: it compiles
# the reference's examples while it runs) and Maven.
java_major() { javac -version 2>&1 | sed -n 's/^javac \([0-9]*\).*/\1/p'; }
{ have javac && [ "$(java_major)" -ge 17 ] 2>/dev/null; } || need_debs+=(default-jdk-headless)
have mvn || need_debs+=(maven)
# The egress suite runs real programs in a network namespace: curl, and node (whose fetch
# ignores proxy variables). A missing one fails those tests (HOOKBOX_TEST_ALLOW_SKIP=1 skips).
have node || need_debs+=(nodejs)
# tests/agent_clis installs the four agent CLIs from npm (scripts/tools.sh agent-clis).
have npm || need_debs+=(npm)
# tests/deb/run.sh checks the unit with `systemd-analyze verify`.
have systemd-analyze || need_debs+=(systemd)
# scripts/tools.sh builds fake-gcs-server (the GCS-compatible store) with go.
have go || need_debs+=(golang-go)
# tests/monitoring/run.sh checks the Prometheus alerting rules with promtool.
have promtool || need_debs+=(prometheus)
fi

if [ ${#need_debs[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${need_debs[*]}" >&2
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_debs[@]}" >/dev/null
fi

if ! have cargo; then
    echo "setup: cargo is missing; install the Rust toolchain (rustup) first" >&2
    exit 1
fi

# Serving needs nothing more; the rest is for the tests.
[ "$mode" = test ] || exit 0

# Garage, the S3-compatible store the snapshot tests run against (scripts/objectstore.sh),
# fake-gcs-server, the GCS-compatible one (from the Go module proxy), and
# cargo-deb for the .deb: built from the Rust package registry once per machine and cached
# outside the checkout. gVisor's runsc (the `--runtime gvisor` sandbox) is Debian 13's package,
# fetched into the same cache; it is linked onto PATH unless a runsc is there already (one too
# old is refused by hookbox, naming the release it needs).
"$(dirname "$0")/tools.sh"
if ! command -v runsc >/dev/null 2>&1; then
    runsc_bin=$("$(dirname "$0")/tools.sh" runsc)
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd ln -sf "$runsc_bin" /usr/local/bin/runsc
    echo "setup: runsc linked at /usr/local/bin/runsc ($runsc_bin)" >&2
fi
