#!/usr/bin/env bash
# Builds and caches the tools hookbox's tests run that no Debian package ships: Garage, the
# S3-compatible object store that scripts/objectstore.sh starts, and cargo-deb, which builds
# the .deb (scripts/deb.sh). Built once per machine with
# `cargo install --locked` from the Rust package registry into a cache outside the checkout
# ($HOOKBOX_TOOLS_DIR, default ~/.cache/hookbox-tools), so later runs (and CI on the same
# machine) reuse the binary; a fresh machine builds it (about 15 minutes on 2 cores).
# fake-gcs-server, the GCS-compatible store that `scripts/objectstore.sh start --gcs` starts,
# is built the same way with `go install` from the Go module proxy this machine's `go env`
# names (Go FAKE_GCS_SERVER_GO or newer, or 1.21+ which fetches that toolchain from the same
# proxy; scripts/setup.sh installs Debian's golang-go when there is no go at all).
#
#   scripts/tools.sh                  builds what is missing; prints nothing when all is there
#   scripts/tools.sh garage           prints the path of the garage binary (building it if needed)
#   scripts/tools.sh fake-gcs-server  prints the path of the fake-gcs-server binary (likewise)
#   scripts/tools.sh cargo-deb        prints the path of the cargo-deb binary (building it if needed)
#   scripts/tools.sh runsc            prints the path of gVisor's runsc (fetching it if needed)
#   scripts/tools.sh agent-clis       prints the directory of the four agent CLIs (installing them
#                                     if needed); their commands are in its node_modules/.bin
#
# The agent CLIs (tests/agent_clis: `hookbox hooks gate` inside the real CLIs) are the npm
# packages @google/gemini-cli, @openai/codex, @anthropic-ai/claude-code and @github/copilot at
# the versions pinned below, installed with `npm install` from the registry this machine's npm
# configuration names (their native binaries come as npm platform packages; install scripts are
# not run). Not part of the default set: `scripts/tools.sh` alone does not fetch them.
#
# runsc is not built: it is Debian's own package from trixie (Debian 13), whose 0.0~20240729 is
# the oldest that hookbox's gVisor runtime supports (RUNSC_MIN_RELEASE) (bookworm's 0.0~20221219 lacks systrap, mount
# namespaces and statx flags that Debian's own ls uses). The binary is static, so trixie's build
# runs on bookworm. It is fetched with apt from the mirror this machine's own apt sources name,
# with a private sources list and state (nothing under /etc/apt changes, and no other package is
# touched), its signature checked against Debian's archive keyring, and unpacked into the cache.
set -euo pipefail

GARAGE_VERSION=2.5.0
# 1.56.1 honours ifGenerationMatch on media uploads (hookbox's conditional create); 1.52 ignored it.
FAKE_GCS_SERVER_VERSION=1.56.1
# The `go` line of that version's go.mod: the oldest toolchain that builds it.
FAKE_GCS_SERVER_GO=1.26
CARGO_DEB_VERSION=3.8.0
tools_dir=${HOOKBOX_TOOLS_DIR:-${HOME:-/root}/.cache/hookbox-tools}
garage_bin="$tools_dir/garage-$GARAGE_VERSION/bin/garage"
cargo_deb_bin="$tools_dir/cargo-deb-$CARGO_DEB_VERSION/bin/cargo-deb"
fake_gcs_bin="$tools_dir/fake-gcs-server-$FAKE_GCS_SERVER_VERSION/bin/fake-gcs-server"
RUNSC_SUITE=trixie
# The oldest gVisor release the runtime supports (YYYYMMDD, as `runsc --version` says).
RUNSC_MIN_RELEASE=20240729
runsc_bin="$tools_dir/runsc-$RUNSC_SUITE/bin/runsc"
GEMINI_CLI_VERSION=0.61.0
CODEX_VERSION=0.171.0
CLAUDE_CODE_VERSION=2.1.332
COPILOT_VERSION=1.0.102
agent_clis_dir="$tools_dir/agent-clis-gemini$GEMINI_CLI_VERSION-codex$CODEX_VERSION-claude$CLAUDE_CODE_VERSION-copilot$COPILOT_VERSION"

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

# go install MODULE@VERSION into the cache, through ROOT.partial like install_tool; the module
# and its dependencies are checked against the checksum database as `go` always does.
build_fake_gcs_server() {
    [ -x "$fake_gcs_bin" ] && return
    local root work have toolchain
    if ! command -v go >/dev/null 2>&1; then
        echo "tools.sh: go is missing (scripts/setup.sh installs Debian's golang-go)" >&2
        exit 1
    fi
    have=$(go env GOVERSION | sed 's/^go//')
    toolchain=local
    if [ "$(printf '%s\n%s\n' "$FAKE_GCS_SERVER_GO" "$have" | sort -V | head -1)" != "$FAKE_GCS_SERVER_GO" ]; then
        # An older go (1.21 or later) fetches the toolchain the module names, itself a module of
        # the same Go module proxy.
        if [ "$(printf '1.21\n%s\n' "$have" | sort -V | head -1)" != 1.21 ]; then
            echo "tools.sh: fake-gcs-server $FAKE_GCS_SERVER_VERSION needs Go $FAKE_GCS_SERVER_GO or newer (or 1.21+ to fetch it); this go is $have" >&2
            exit 1
        fi
        toolchain=auto
    fi
    root=$(dirname "$(dirname "$fake_gcs_bin")")
    echo "tools.sh: building fake-gcs-server $FAKE_GCS_SERVER_VERSION (once per machine; cached in $tools_dir)" >&2
    work=$(mktemp -d /tmp/hookbox-fake-gcs-build.XXXXXX)
    rm -rf "$root.partial" && mkdir -p "$root.partial/bin"
    if ! (cd "$work" && GOBIN="$root.partial/bin" GOCACHE="$work/cache" CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=$toolchain \
        go install "github.com/fsouza/fake-gcs-server@v$FAKE_GCS_SERVER_VERSION" >"$work/build.log" 2>&1); then
        tail -40 "$work/build.log" >&2
        rm -rf "$work" "$root.partial"
        exit 1
    fi
    rm -rf "$root" "$work"
    mv "$root.partial" "$root"
}

build_cargo_deb() {
    [ -x "$cargo_deb_bin" ] && return
    install_tool cargo-deb "$CARGO_DEB_VERSION" "$tools_dir/cargo-deb-$CARGO_DEB_VERSION"
}

# The Debian mirror this machine already uses: the first URI of its apt sources (deb822 or
# one-line format).
debian_mirror() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] || continue
        awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f"
    done | head -1
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -e "$f" ] || continue
        awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($i !~ /security/) print $i; break } }' "$f"
    done | head -1
}

fetch_runsc() {
    [ -x "$runsc_bin" ] && return
    local mirror work root keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    mirror=$(debian_mirror | head -1)
    if [ -z "$mirror" ]; then
        echo "tools.sh: no Debian mirror in this machine's apt sources; cannot fetch runsc" >&2
        exit 1
    fi
    [ -r "$keyring" ] || { echo "tools.sh: $keyring is missing (debian-archive-keyring)" >&2; exit 1; }
    echo "tools.sh: fetching runsc from Debian $RUNSC_SUITE ($mirror)" >&2
    work=$(mktemp -d /tmp/hookbox-runsc.XXXXXX)
    # apt's download sandbox user must be able to write here.
    chmod 0755 "$work"
    mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
    echo "deb [signed-by=$keyring] $mirror $RUNSC_SUITE main" >"$work/sources.list"
    local opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Dir::State::Status=/dev/null
        -o APT::Sandbox::User=root -qq)
    if ! apt-get "${opts[@]}" update >"$work/apt.log" 2>&1 ||
        ! (cd "$work" && apt-get "${opts[@]}" download runsc >>"$work/apt.log" 2>&1); then
        tail -20 "$work/apt.log" >&2
        rm -rf "$work"
        exit 1
    fi
    root=$(dirname "$(dirname "$runsc_bin")")
    rm -rf "$root.partial" && mkdir -p "$root.partial/bin"
    dpkg-deb -x "$work"/runsc_*.deb "$work/unpacked"
    install -m 0755 "$work/unpacked/usr/bin/runsc" "$root.partial/bin/runsc"
    local release
    release=$("$root.partial/bin/runsc" --version | sed -n 's/^runsc version //p' | grep -o '20[0-9]\{6\}' | head -1 || true)
    if [ -z "$release" ] || [ "$release" -lt "$RUNSC_MIN_RELEASE" ]; then
        echo "tools.sh: Debian $RUNSC_SUITE's runsc is release ${release:-unknown}; hookbox needs $RUNSC_MIN_RELEASE or newer" >&2
        rm -rf "$root.partial" "$work"
        exit 1
    fi
    rm -rf "$root" "$work"
    mv "$root.partial" "$root"
}

# npm install the pinned CLIs into ROOT.partial, then rename (an interrupted install leaves
# nothing that looks finished).
install_agent_clis() {
    [ -x "$agent_clis_dir/node_modules/.bin/copilot" ] && return
    if ! command -v npm >/dev/null 2>&1; then
        echo "tools.sh: npm is missing (scripts/setup.sh installs Debian's npm)" >&2
        exit 1
    fi
    local root=$agent_clis_dir
    echo "tools.sh: installing the agent CLIs from npm (once per machine; cached in $tools_dir)" >&2
    rm -rf "$root.partial" && mkdir -p "$root.partial"
    echo '{"name": "hookbox-agent-clis", "private": true}' >"$root.partial/package.json"
    if ! (cd "$root.partial" && npm install --no-audit --no-fund --ignore-scripts --save-exact \
        "@google/gemini-cli@$GEMINI_CLI_VERSION" "@openai/codex@$CODEX_VERSION" \
        "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@github/copilot@$COPILOT_VERSION" \
        >"$root.partial/install.log" 2>&1); then
        tail -40 "$root.partial/install.log" >&2
        rm -rf "$root.partial"
        exit 1
    fi
    rm -rf "$root"
    mv "$root.partial" "$root"
}

case "${1:-}" in
    "") build_garage; build_fake_gcs_server; build_cargo_deb; fetch_runsc ;;
    runsc) fetch_runsc; echo "$runsc_bin" ;;
    agent-clis) install_agent_clis; echo "$agent_clis_dir" ;;
    garage) build_garage; echo "$garage_bin" ;;
    fake-gcs-server) build_fake_gcs_server; echo "$fake_gcs_bin" ;;
    cargo-deb) build_cargo_deb; echo "$cargo_deb_bin" ;;
    *) echo "usage: tools.sh [garage|fake-gcs-server|cargo-deb|runsc|agent-clis]" >&2; exit 2 ;;
esac
