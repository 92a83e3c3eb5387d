#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and benchmarks, from Debian's `postgresql` package
# (scripts/setup.sh installs it).
#
#   scripts/postgres.sh start        initialises a cluster in a fresh temp dir, listening on a free
#                                    127.0.0.1 port only; prints its URL on stdout
#   scripts/postgres.sh start --tls  the same with TLS only: a throwaway CA and a server
#                                    certificate for `localhost` (openssl), `ssl=on`, `hostssl`
#                                    with a password and no plain `host` line; prints a
#                                    verify-full URL (password, host localhost, sslrootcert=CA)
#   scripts/postgres.sh stop URL     stops that cluster and removes its directory
#
# Without --tls the cluster trusts connections from 127.0.0.1 (it is reachable from this machine
# only and lives as long as the test run). As root, the server runs as the `postgres` user, as
# initdb requires.
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

# A CA and a certificate for DNS:localhost only (so 127.0.0.1 is a wrong host name for it) in
# $1, readable by the server.
make_certs() {
    local d=$1
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=hookbox test CA" \
        -keyout "$d/ca.key" -out "$d/ca.crt" >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
        -keyout "$d/server.key" -out "$d/server.csr" >/dev/null 2>&1
    printf 'subjectAltName=DNS:localhost\n' >"$d/san.ext"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
        -days 2 -extfile "$d/san.ext" -out "$d/server.crt" >/dev/null 2>&1
    # A second, unrelated CA: the "wrong CA" of the tests.
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=some other CA" \
        -keyout "$d/other-ca.key" -out "$d/other-ca.crt" >/dev/null 2>&1
    chmod 0600 "$d/server.key"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$d/server.key" "$d/server.crt"
    chmod 0644 "$d/ca.crt" "$d/other-ca.crt"
}

start() {
    local tls=${1:-} bin dir port options password
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
    options="-c listen_addresses=127.0.0.1 -p $port -k $dir/socket -c fsync=off -c max_connections=200"
    if [ "$tls" = --tls ]; then
        mkdir "$dir/tls"
        make_certs "$dir/tls"
        password=$(python3 -c 'import secrets; print(secrets.token_hex(12))')
        # Local socket for set-up only; over TCP, TLS and a password or nothing.
        printf 'local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n' >"$dir/data/pg_hba.conf"
        options="$options -c ssl=on -c ssl_cert_file=$dir/tls/server.crt -c ssl_key_file=$dir/tls/server.key -c password_encryption=scram-sha-256"
    fi
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w -t 60 -o "$options" \
        start >/dev/null || {
        cat "$dir/data/server.log" >&2
        exit 1
    }
    echo "$dir" >"/tmp/hookbox-pg-$port.dir"
    if [ "$tls" = --tls ]; then
        as_owner "$bin/psql" -h "$dir/socket" -p "$port" -U postgres -qc \
            "ALTER USER postgres PASSWORD '$password'" postgres >/dev/null
        echo "postgres://postgres:$password@localhost:$port/postgres?sslmode=verify-full&sslrootcert=$dir/tls/ca.crt"
    else
        echo "postgres://postgres@127.0.0.1:$port/postgres"
    fi
}

stop() {
    local url=$1 port dir
    port=$(sed -E 's#.*:([0-9]+)/.*#\1#' <<<"${url%%\?*}")
    [ -f "/tmp/hookbox-pg-$port.dir" ] || { echo "postgres.sh: no cluster on port $port" >&2; exit 1; }
    dir=$(cat "/tmp/hookbox-pg-$port.dir")
    as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir" "/tmp/hookbox-pg-$port.dir"
}

case "${1:-}" in
    start) start "${2:-}" ;;
    stop) stop "${2:?usage: postgres.sh stop URL}" ;;
    *) echo "usage: postgres.sh start [--tls] | stop URL" >&2; exit 2 ;;
esac
