#!/usr/bin/env bash
# The Debian package, installed for real on this (Debian) machine, as root:
#   1. builds it (scripts/deb.sh --debug) and installs it with `dpkg -i`;
#   2. checks what it installed: binary, man pages, completions, unit, settings, the Prometheus
#      alerting rules (promtool check rules) and the Grafana dashboard;
#   3. checks the unit with `systemd-analyze verify` (a failure where that tool is missing, unless
#      HOOKBOX_TEST_ALLOW_SKIP=1);
#   4. starts the installed binary exactly as the unit's ExecStart does: its EnvironmentFile,
#      its StateDirectory, its capability bounding set (through setpriv), on a free port;
#   5. runs the reference documentation's first example (the security gate) against it with the
#      unmodified google-genai SDK;
#   6. stops it with the unit's KillSignal (SIGTERM) and checks it exited 0 and left no mount;
#   7. does 4 to 6 again with HOOKBOX_RUNTIME=gvisor, as /etc/default/hookbox would set it;
#   8. purges the package.
# Ends with `N passed, M failed`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
venv="${CONFORMANCE_VENV:-$target_dir/conformance-venv}"
[ "$(id -u)" -eq 0 ] || { echo "tests/deb: needs root (dpkg -i)"; exit 1; }
state=/var/lib/hookbox
if [ -e "$state" ]; then
    echo "tests/deb: $state exists already; not touching a hookbox that may be real" >&2
    exit 1
fi

passed=0 failed=0
check() { # NAME COMMAND...
    local name=$1
    shift
    if "$@" >/dev/null 2>&1; then
        echo "ok   $name"
        passed=$((passed + 1))
    else
        echo "FAIL $name"
        failed=$((failed + 1))
    fi
}

pid=""
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    awk -v d="$state/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
    rm -rf "$state"
    dpkg --purge hookbox >/dev/null 2>&1 || true
}
trap cleanup EXIT

deb=$("$root/scripts/deb.sh" --debug)
dpkg -i "$deb" >/dev/null
unit=/lib/systemd/system/hookbox.service
check "dpkg says hookbox is installed" sh -c 'dpkg-query -W -f "\${Status}" hookbox | grep -q "install ok installed"'
check "/usr/bin/hookbox runs" /usr/bin/hookbox --version
check "the sandbox launcher is installed beside it" test -x /usr/bin/hookbox-sandbox-exec
check "the whole CLI, which hookbox execs for serve, is installed beside it" test -x /usr/bin/hookbox-full
check "man page hookbox(1)" test -s /usr/share/man/man1/hookbox.1.gz
check "man page hookbox-serve(1) documents --shutdown-grace" sh -c 'zcat /usr/share/man/man1/hookbox-serve.1.gz | grep -q shutdown\\\\-grace'
check "bash completion loads" bash -c 'source /usr/share/bash-completion/completions/hookbox && complete -p hookbox'
check "zsh and fish completions" test -s /usr/share/zsh/vendor-completions/_hookbox -a -s /usr/share/fish/vendor_completions.d/hookbox.fish
check "settings in /etc/hookbox/config.toml and /etc/default/hookbox" test -f /etc/hookbox/config.toml -a -f /etc/default/hookbox
check "Grafana dashboard in /usr/share/hookbox/monitoring/" python3 -m json.tool /usr/share/hookbox/monitoring/grafana-dashboard.json
check "Prometheus alerting rules in /usr/share/hookbox/monitoring/ pass promtool check rules" promtool check rules /usr/share/hookbox/monitoring/hookbox-alerts.yml
check "the unit stops with SIGTERM" grep -qx 'KillSignal=SIGTERM' "$unit"
grace_default=$(/usr/bin/hookbox serve --help | grep -A3 -e '--shutdown-grace' | sed -n 's/.*\[default: \([0-9.]*\)\].*/\1/p' | head -n1)
stop_timeout=$(sed -n 's/^TimeoutStopSec=//p' "$unit")
# A stop takes at most two grace periods (the drain, then the last checkpoints) and 30 s of
# bounded waits between them.
check "TimeoutStopSec ($stop_timeout s) outlasts a whole stop (grace ${grace_default:-?} s)" \
    python3 -c "import sys; sys.exit(0 if float('$stop_timeout') > 2 * float('${grace_default:-1e9}') + 30 else 1)"
if command -v systemd-analyze >/dev/null; then
    man_check=--man=no
    command -v man >/dev/null && man_check=--man=yes
    check "systemd-analyze verify $unit" systemd-analyze verify "$man_check" "$unit"
elif [ "${HOOKBOX_TEST_ALLOW_SKIP:-}" = 1 ]; then
    echo "*** SKIPPED systemd-analyze verify: systemd-analyze is not installed (HOOKBOX_TEST_ALLOW_SKIP=1) ***"
else
    # A missing tool is a failure, not a pass: scripts/setup.sh installs systemd.
    check "systemd-analyze verify $unit (systemd-analyze is not installed; scripts/setup.sh installs it)" false
fi

# Start it the way the unit does.
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit" | tr 'A-Z' 'a-z' | sed 's/cap_//g; s/ /,+/g')
set -a
# shellcheck disable=SC1091
. /etc/default/hookbox
set +a
# One start of the installed binary as the unit starts it, the reference's first example
# against it, and a stop with the unit's KillSignal. $1 names the run in the checks; the rest
# are extra words for HOOKBOX_ARGS.
log=""
out=""
serve_as_unit() {
    local label=$1
    shift
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    HOOKBOX_ARGS="--listen 127.0.0.1:$port $*"
    read -ra words <<<"$exec_start"
    argv=()
    for w in "${words[@]}"; do
        if [ "$w" = '$HOOKBOX_ARGS' ]; then
            read -ra extra <<<"$HOOKBOX_ARGS"
            argv+=("${extra[@]}")
        else
            argv+=("$w")
        fi
    done
    mkdir -m 0700 "$state" # StateDirectory=hookbox, StateDirectoryMode=0700
    log=$(mktemp)
    setpriv --bounding-set "-all,+$caps" -- "${argv[@]}" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do
        grep -q "listening on" "$log" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    check "$label: the installed hookbox serves as the unit starts it" grep -q "listening on http://127.0.0.1:$port" "$log"
    if [ "${HOOKBOX_RUNTIME:-}" = gvisor ]; then
        check "$label: it found runsc and runs environments under gVisor" grep -q "^runtime: gvisor (runsc release" "$log"
    fi

    out=$(HOOKBOX_BASE_URL="http://127.0.0.1:$port" HOOKBOX_TEST_KEY=local \
        "$venv/bin/python" "$root/tests/conformance/reference/1_security_gate.py" 2>&1 || true)
    check "$label: the reference's first example: the gate's reason reaches the SDK" \
        grep -q "Destructive command blocked by security gate." <<<"$out"

    kill -TERM "$pid"
    status=0
    wait "$pid" || status=$?
    pid=""
    check "$label: SIGTERM: a clean exit" test "$status" -eq 0
    check "$label: no mount left under $state" sh -c "! awk -v d='$state/' 'index(\$5, d) == 1' /proc/self/mountinfo | grep -q ."
    if (( failed )); then
        echo "--- hookbox serve (installed, $label) log ---"
        tail -n 40 "$log"
        echo "--- example output ---"
        echo "$out" | tail -n 20
    fi
    awk -v d="$state/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
    rm -rf "$state"
}

# pip is the last thing venv makes: without it, a set-up cut short is made again.
[[ -x "$venv/bin/pip" ]] || python3 -m venv --clear "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "google-genai>=3.3.0"
serve_as_unit namespaces
# The same unit with gVisor, as /etc/default/hookbox would ask for it (HOOKBOX_RUNTIME).
HOOKBOX_RUNTIME=gvisor serve_as_unit gvisor
echo "$passed passed, $failed failed"
(( failed == 0 ))
