#!/usr/bin/env bash
# A throwaway single-node Garage (S3-compatible object store; built from the Rust package registry by
# scripts/tools.sh) for tests and benchmarks, on 127.0.0.1 only; or, with --gcs, a throwaway
# fake-gcs-server (a GCS-compatible store, built from the Go module proxy by scripts/tools.sh).
#
#   scripts/objectstore.sh start       starts one in a fresh temp dir with a bucket and a key;
#                                      prints the URL `hookbox serve --snapshot-store` takes as is
#                                      (s3://hookbox/snapshots?endpoint=…&access_key_id=…&…)
#   scripts/objectstore.sh start --gcs starts a fake-gcs-server with the bucket `hookbox`; prints
#                                      the path of a service-account file that points GCS clients
#                                      at it (`gcs_base_url`, no OAuth). Use it as
#                                      GOOGLE_SERVICE_ACCOUNT=PATH GOOGLE_ALLOW_HTTP=true with
#                                      `--snapshot-store gs://hookbox/PREFIX` or `gcs` sources
#   scripts/objectstore.sh down URL    stops its server, keeping its data (a store outage)
#   scripts/objectstore.sh up URL      starts it again on the same data and ports
#   scripts/objectstore.sh stop URL    stops it and removes its directory
#
# (URL is what `start` printed, the service-account path for --gcs.) The credentials ride in the
# URL: this store lives as long as the test run, on loopback.
set -euo pipefail

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

port_of() { sed -E 's#.*endpoint=http://127\.0\.0\.1:([0-9]+).*#\1#' <<<"$1"; }

dir_of() {
    local port
    if [[ "$1" == */service-account.json ]]; then
        [ -f "$1" ] || { echo "objectstore.sh: no store for $1" >&2; exit 1; }
        dirname "$1"
        return
    fi
    port=$(port_of "$1")
    [ -f "/tmp/hookbox-garage-$port.dir" ] || { echo "objectstore.sh: no store on port $port" >&2; exit 1; }
    cat "/tmp/hookbox-garage-$port.dir"
}

# Starts the server of $dir and waits (bounded) until it answers.
run_server() {
    local dir=$1 garage=$2 i
    setsid "$garage" -c "$dir/garage.toml" server >>"$dir/server.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    for i in $(seq 1 300); do
        if "$garage" -c "$dir/garage.toml" status >/dev/null 2>&1; then
            return 0
        fi
        if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
            tail -20 "$dir/server.log" >&2
            echo "objectstore.sh: garage exited" >&2
            exit 1
        fi
        sleep 0.1
    done
    tail -20 "$dir/server.log" >&2
    echo "objectstore.sh: garage did not answer within 30 s" >&2
    exit 1
}

# Waits (bounded) until the S3 API accepts requests for the bucket.
wait_s3() {
    local port=$1 i
    for i in $(seq 1 300); do
        if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
            return 0
        fi
        sleep 0.1
    done
    echo "objectstore.sh: the S3 API did not answer within 30 s" >&2
    exit 1
}

# Starts the fake-gcs-server of $dir on 127.0.0.1:$(cat $dir/backend-port), and in front of it,
# on $(cat $dir/port), scripts/fake-gcs-xml.py (the XML API's object PUT, which fake-gcs-server
# lacks); waits (bounded) until the JSON API answers through it.
run_gcs_server() {
    local dir=$1 port backend i
    port=$(cat "$dir/port")
    backend=$(cat "$dir/backend-port")
    setsid "$(cat "$dir/fake-gcs-server")" -scheme http -host 127.0.0.1 -port "$backend" \
        -public-host "127.0.0.1:$port" -external-url "http://127.0.0.1:$port" \
        -backend filesystem -filesystem-root "$dir/data" -log-level warn \
        >>"$dir/server.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    setsid python3 "$(dirname "$0")/fake-gcs-xml.py" "$port" "$backend" >>"$dir/server.log" 2>&1 </dev/null &
    echo $! >"$dir/pid2"
    for i in $(seq 1 300); do
        if curl -sf -o /dev/null "http://127.0.0.1:$port/storage/v1/b"; then
            return 0
        fi
        if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null || ! kill -0 "$(cat "$dir/pid2")" 2>/dev/null; then
            tail -20 "$dir/server.log" >&2
            echo "objectstore.sh: fake-gcs-server exited" >&2
            exit 1
        fi
        sleep 0.1
    done
    tail -20 "$dir/server.log" >&2
    echo "objectstore.sh: fake-gcs-server did not answer within 30 s" >&2
    exit 1
}

start_gcs() {
    local dir port
    dir=$(mktemp -d /tmp/hookbox-fake-gcs.XXXXXX)
    port=$(free_port)
    echo "$port" >"$dir/port"
    free_port >"$dir/backend-port"
    "$(dirname "$0")/tools.sh" fake-gcs-server >"$dir/fake-gcs-server"
    echo gcs >"$dir/kind"
    mkdir -p "$dir/data"
    run_gcs_server "$dir"
    curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' \
        --data-binary '{"name": "hookbox"}' "http://127.0.0.1:$port/storage/v1/b"
    # object_store's GCS client reads the endpoint from a service-account file; no OAuth.
    printf '{"gcs_base_url": "http://127.0.0.1:%s", "disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}\n' \
        "$port" >"$dir/service-account.json"
    echo "$dir/service-account.json"
}

start() {
    local garage dir s3 rpc admin key_id secret node
    garage=$(scripts_dir=$(dirname "$0"); "$scripts_dir/tools.sh" garage)
    dir=$(mktemp -d /tmp/hookbox-garage.XXXXXX)
    s3=$(free_port); rpc=$(free_port); admin=$(free_port)
    cat >"$dir/garage.toml" <<TOML
metadata_dir = "$dir/meta"
data_dir = "$dir/data"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:$rpc"
rpc_public_addr = "127.0.0.1:$rpc"
rpc_secret = "$(hex 32)"

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:$s3"

[admin]
api_bind_addr = "127.0.0.1:$admin"
TOML
    chmod 0600 "$dir/garage.toml"
    echo "$garage" >"$dir/garage"
    run_server "$dir" "$garage"
    node=$("$garage" -c "$dir/garage.toml" node id -q 2>/dev/null | cut -d@ -f1)
    "$garage" -c "$dir/garage.toml" layout assign -z local -c 10G "$node" >/dev/null
    "$garage" -c "$dir/garage.toml" layout apply --version 1 >/dev/null
    key_id="GK$(hex 12)"
    secret=$(hex 32)
    "$garage" -c "$dir/garage.toml" bucket create hookbox >/dev/null
    "$garage" -c "$dir/garage.toml" key import --yes -n hookbox "$key_id" "$secret" >/dev/null
    "$garage" -c "$dir/garage.toml" bucket allow --read --write --owner hookbox --key hookbox >/dev/null
    wait_s3 "$s3"
    echo "$dir" >"/tmp/hookbox-garage-$s3.dir"
    echo "s3://hookbox/snapshots?endpoint=http://127.0.0.1:$s3&region=garage&access_key_id=$key_id&secret_access_key=$secret"
}

down() {
    local dir pidfile
    dir=$(dir_of "$1")
    for pidfile in "$dir/pid" "$dir/pid2"; do
        if [ -f "$pidfile" ]; then
            kill -9 "$(cat "$pidfile")" 2>/dev/null || true
            while kill -0 "$(cat "$pidfile")" 2>/dev/null; do sleep 0.05; done
            rm -f "$pidfile"
        fi
    done
}

up() {
    local dir
    dir=$(dir_of "$1")
    if [ -f "$dir/kind" ]; then
        run_gcs_server "$dir"
        return
    fi
    run_server "$dir" "$(cat "$dir/garage")"
    wait_s3 "$(port_of "$1")"
}

stop() {
    local dir
    dir=$(dir_of "$1")
    down "$1"
    [ -f "$dir/kind" ] || rm -f "/tmp/hookbox-garage-$(port_of "$1").dir"
    rm -rf "$dir"
}

case "${1:-}" in
    start)
        case "${2:-}" in
            "") start ;;
            --gcs) start_gcs ;;
            *) echo "usage: objectstore.sh start [--gcs]" >&2; exit 2 ;;
        esac ;;
    down) down "${2:?usage: objectstore.sh down URL}" ;;
    up) up "${2:?usage: objectstore.sh up URL}" ;;
    stop) stop "${2:?usage: objectstore.sh stop URL}" ;;
    *) echo "usage: objectstore.sh start [--gcs] | down URL | up URL | stop URL" >&2; exit 2 ;;
esac
