#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and benchmarks, from Debian's `postgresql` package
# (scripts/setup.sh installs it).
#
#   scripts/postgres.sh start        initialises a cluster in a fresh temp dir, listening on a free
#                                    127.0.0.1 port only; prints its URL on stdout
#   scripts/postgres.sh stop URL     stops that cluster and removes its directory
#
# The cluster trusts connections from 127.0.0.1 (it is reachable from this machine only and lives
# as long as the test run). As root, the server runs as the `postgres` user, as initdb requires.
set -euo pipefail

bindir() {
    local d
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/initdb" ] && { echo "$d"; return; }
    done
    echo "postgres.sh: no PostgreSQL found (run scripts/setup.sh)" >&2
    exit 1
}

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    local bin dir port
    bin=$(bindir)
    dir=$(mktemp -d /tmp/hookbox-pg.XXXXXX)
    chmod 0755 "$dir"
    mkdir "$dir/data" "$dir/socket"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir/data" "$dir/socket"
    as_owner "$bin/initdb" -D "$dir/data" --auth=trust --username=postgres -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
    }
    port=$(free_port)
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir/socket -c fsync=off -c max_connections=200" \
        start >/dev/null || {
        cat "$dir/data/server.log" >&2
        exit 1
    }
    echo "$dir" >"/tmp/hookbox-pg-$port.dir"
    echo "postgres://postgres@127.0.0.1:$port/postgres"
}

stop() {
    local url=$1 port dir
    port=$(sed -E 's#.*:([0-9]+)/.*#\1#' <<<"$url")
    [ -f "/tmp/hookbox-pg-$port.dir" ] || { echo "postgres.sh: no cluster on port $port" >&2; exit 1; }
    dir=$(cat "/tmp/hookbox-pg-$port.dir")
    as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir" "/tmp/hookbox-pg-$port.dir"
}

case "${1:-}" in
    start) start ;;
    stop) stop "${2:?usage: postgres.sh stop URL}" ;;
    *) echo "usage: postgres.sh start | stop URL" >&2; exit 2 ;;
esac
