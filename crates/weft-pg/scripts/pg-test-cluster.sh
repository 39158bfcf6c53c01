#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for weft-pg's tests, benches and the lab.
#
#   pg-test-cluster.sh start [DIR]    start (or reuse) a cluster in DIR; prints
#                                     `export WEFT_PG_...=...` lines for eval
#   pg-test-cluster.sh env [DIR]      print those lines for a running cluster
#   pg-test-cluster.sh restart [DIR]  fast restart (sessions are terminated)
#   pg-test-cluster.sh stop [DIR]     stop it (DIR is kept; `rm -rf` it after)
#
#   eval "$(crates/weft-pg/scripts/pg-test-cluster.sh start)"
#
# Holders: with WEFT_PG_HOLDER=PID, `start` holds the cluster for process
# PID only (a test process, the lab): a reaper started beside the server
# stops it once every process that holds it has ended, however it ended
# (panic, abort, kill), so a test run leaves no server behind. Holders of
# one cluster add up: parallel test processes share it, and the last to end
# stops it. A `start` without WEFT_PG_HOLDER (CI, by hand) keeps the
# cluster running until `stop`.
#
# DIR defaults to $WEFT_PG_DIR, else /tmp/weft-pg-test-$UID. Binaries: $PG_BINDIR,
# else `pg_config --bindir`, else the newest /usr/lib/postgresql/*/bin. Exit
# status 3 means "no PostgreSQL binaries here" (tests then skip or, in CI, fail).
#
# PostgreSQL refuses to run as root: as root, initdb/pg_ctl run as the
# `postgres` user (or a created `weftci` user). The server listens on a free
# loopback port and on a Unix socket in DIR/sock, with password
# authentication: role `weft` (SCRAM-SHA-256) and role `weft_md5` (MD5), both
# on database `weft`, over TCP and the Unix socket. TLS is on (ssl=on) with
# a certificate for `localhost` and 127.0.0.1 (and its CA) made at init
# (openssl CLI), exported as WEFT_PG_SSLROOTCERT, so tests run TLS queries
# with sslmode=verify-full. Tuned for tests (fsync=off): never put data you
# want to keep in it.
set -euo pipefail

cmd=${1:-start}
DIR=${2:-${WEFT_PG_DIR:-/tmp/weft-pg-test-$(id -u)}}
DATA=$DIR/data
SOCK=$DIR/sock
LOG=$DIR/server.log
ENVFILE=$DIR/env
HOLDERS=$DIR/holders
REAPER=$DIR/reaper.pid

log() { printf 'pg-test-cluster: %s\n' "$*" >&2; }

find_bindir() {
    if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/initdb" ]; then
        echo "$PG_BINDIR"
        return 0
    fi
    if command -v pg_config >/dev/null 2>&1; then
        local b
        b=$(pg_config --bindir 2>/dev/null || true)
        if [ -n "$b" ] && [ -x "$b/initdb" ]; then
            echo "$b"
            return 0
        fi
    fi
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
            echo "$d"
            return 0
        fi
    done
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

# The user that owns and runs the cluster.
cluster_owner() {
    if [ "$(id -u)" != 0 ]; then
        id -un
        return
    fi
    if id postgres >/dev/null 2>&1; then
        echo postgres
        return
    fi
    if ! id weftci >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /bin/sh weftci >/dev/null
    fi
    echo weftci
}

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$OWNER" -- "$@"
    else
        "$@"
    fi
}

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

running() {
    [ -f "$DATA/PG_VERSION" ] && as_owner "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

init_cluster() {
    log "initdb in $DATA (owner $OWNER, binaries $BINDIR)"
    rm -rf "$DATA" "$SOCK"
    mkdir -p "$DATA" "$SOCK"
    chmod 0755 "$DIR" "$SOCK"
    chmod 0700 "$DATA"
    printf 'weft_admin\n' >"$DIR/adminpw"
    if [ "$(id -u)" = 0 ]; then
        chown -R "$OWNER" "$DIR"
    fi
    as_owner "$BINDIR/initdb" -D "$DATA" -U weft_admin --pwfile="$DIR/adminpw" \
        --auth-local=trust --auth-host=scram-sha-256 \
        --locale=C --encoding=UTF8 --no-sync --no-instructions >"$DIR/initdb.log" 2>&1 || {
        cat "$DIR/initdb.log" >&2
        return 1
    }
    # Below Linux's ephemeral range (32768-60999): a port there may be held
    # by a client connection (tests churn 100,000 of them), which a connect
    # probe does not see, and the server then cannot bind it.
    local port=$((25432 + RANDOM % 2000))
    while ! port_free "$port"; do
        port=$((port + 1))
    done
    cat >>"$DATA/postgresql.conf" <<EOF

# --- weft-pg test cluster ---
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$SOCK'
max_connections = 300
password_encryption = 'scram-sha-256'
fsync = off
synchronous_commit = off
full_page_writes = off
log_min_messages = warning
log_connections = off
EOF
    make_cert
    cat >"$DATA/pg_hba.conf" <<EOF
# weft-pg test cluster: passwords everywhere except the admin's socket login.
local all weft_admin             trust
local all weft_md5               md5
local all all                    scram-sha-256
host  all weft_md5 127.0.0.1/32  md5
host  all all      127.0.0.1/32  scram-sha-256
EOF
    if [ "$(id -u)" = 0 ]; then
        chown "$OWNER" "$DATA/postgresql.conf" "$DATA/pg_hba.conf"
    fi
    echo "$port" >"$DIR/port"
}

# A server certificate for localhost and 127.0.0.1, signed by a throwaway
# CA whose certificate is WEFT_PG_SSLROOTCERT. Without openssl the
# cluster runs without TLS and the TLS tests skip.
make_cert() {
    if ! command -v openssl >/dev/null 2>&1; then
        log "openssl not found: the cluster runs without TLS"
        return 0
    fi
    # A CA (its certificate is the root clients trust) and a server
    # certificate it signs: webpki refuses a CA certificate as a server's.
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' >"$DIR/server.ext"
    {
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -days 3650 -subj "/CN=weft-pg test CA" \
            -keyout "$DIR/ca.key" -out "$DIR/root.crt" &&
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -subj "/CN=localhost" -keyout "$DATA/server.key" -out "$DIR/server.csr" &&
        openssl x509 -req -in "$DIR/server.csr" -CA "$DIR/root.crt" -CAkey "$DIR/ca.key" \
            -CAcreateserial -days 3650 -extfile "$DIR/server.ext" -out "$DATA/server.crt"
    } >"$DIR/openssl.log" 2>&1 || {
        cat "$DIR/openssl.log" >&2
        return 1
    }
    chmod 0600 "$DATA/server.key"
    chmod 0644 "$DIR/root.crt"
    if [ "$(id -u)" = 0 ]; then
        chown "$OWNER" "$DATA/server.key" "$DATA/server.crt"
    fi
    cat >>"$DATA/postgresql.conf" <<EOF
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
EOF
}

start_server() {
    # 9>&-: the server must not inherit the lock.
    as_owner "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null 9>&- || {
        tail -n 30 "$LOG" >&2 || true
        return 1
    }
}

psql_admin() {
    "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$(cat "$DIR/port")" -U weft_admin "$@"
}

create_roles() {
    psql_admin -d postgres <<'EOF'
CREATE ROLE weft LOGIN PASSWORD 'weft';
SET password_encryption = 'md5';
CREATE ROLE weft_md5 LOGIN PASSWORD 'weft_md5';
CREATE DATABASE weft OWNER weft;
GRANT ALL ON DATABASE weft TO weft_md5;
EOF
    psql_admin -d weft -c 'GRANT ALL ON SCHEMA public TO weft_md5;'
}

write_env() {
    local port
    port=$(cat "$DIR/port")
    cat >"$ENVFILE" <<EOF
export WEFT_PG_URL='postgres://weft:weft@127.0.0.1:$port/weft'
export WEFT_PG_MD5_URL='postgres://weft_md5:weft_md5@127.0.0.1:$port/weft'
export WEFT_PG_SOCKET_DIR='$SOCK'
export WEFT_PG_PORT='$port'
export WEFT_PG_DIR='$DIR'
export WEFT_PG_BINDIR='$BINDIR'
EOF
    if [ -f "$DIR/root.crt" ]; then
        echo "export WEFT_PG_SSLROOTCERT='$DIR/root.crt'" >>"$ENVFILE"
    fi
}

# Records who holds the cluster: WEFT_PG_HOLDER's process, or `keep` (held
# until `stop`).
add_holder() {
    mkdir -p "$HOLDERS"
    touch "$HOLDERS/${WEFT_PG_HOLDER:-keep}"
}

reaper_alive() {
    local pid
    pid=$(cat "$REAPER" 2>/dev/null) && [ -n "$pid" ] &&
        grep -qa reap "/proc/$pid/cmdline" 2>/dev/null
}

# Starts the reaper unless one runs: detached from the caller's session,
# descriptors and lock (a test harness waits for the end of the output of
# the script it runs).
start_reaper() {
    reaper_alive && return 0
    setsid bash "$0" reap "$DIR" </dev/null >/dev/null 2>&1 9>&- &
    echo "$!" >"$REAPER"
}

# The reaper: once a second, under the lock, drops the holders whose
# process has ended; when none is left, stops the server and exits.
reap() {
    while sleep 1; do
        exec 9>"$DIR.lock"
        flock 9 2>/dev/null || true
        local held=0 h
        for h in "$HOLDERS"/*; do
            [ -e "$h" ] || continue
            case ${h##*/} in
            keep) held=1 ;;
            *[!0-9]*) rm -f "$h" ;;
            *) if kill -0 "${h##*/}" 2>/dev/null; then held=1; else rm -f "$h"; fi ;;
            esac
        done
        if [ "$held" = 0 ]; then
            if running; then
                as_owner "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 9>&- ||
                    log "reaper: could not stop the server in $DATA"
            fi
            rm -f "$REAPER"
            exit 0
        fi
        exec 9>&-
    done
}

BINDIR=$(find_bindir) || {
    log "no PostgreSQL binaries found (install postgresql, or set PG_BINDIR)"
    exit 3
}
OWNER=$(cluster_owner)
mkdir -p "$DIR"

# One invocation at a time per DIR (parallel `cargo test` processes); the
# reaper takes the lock only while it looks.
if [ "$cmd" != reap ]; then
    exec 9>"$DIR.lock"
    flock 9 2>/dev/null || true
fi

case "$cmd" in
start)
    # A cluster made by an older version of this script has no TLS: the
    # TLS tests need one that has, so make it afresh (it is throwaway).
    if command -v openssl >/dev/null 2>&1 && [ -f "$ENVFILE" ] &&
        ! grep -q WEFT_PG_SSLROOTCERT "$ENVFILE"; then
        log "the cluster in $DIR has no TLS certificate: recreating it"
        if running; then
            as_owner "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 9>&-
        fi
        rm -rf "$DATA" "$ENVFILE" "$DIR/port"
    fi
    add_holder
    if running && [ -f "$ENVFILE" ]; then
        start_reaper
        cat "$ENVFILE"
        exit 0
    fi
    if [ -f "$DATA/PG_VERSION" ] && [ -f "$ENVFILE" ] && [ -f "$DIR/port" ] && port_free "$(cat "$DIR/port")"; then
        start_server
    else
        init_cluster
        start_server
        create_roles
        write_env
    fi
    start_reaper
    log "PostgreSQL $("$BINDIR/postgres" -V | awk '{print $3}') running, data in $DATA"
    cat "$ENVFILE"
    ;;
env)
    running || {
        log "no cluster running in $DIR"
        exit 1
    }
    cat "$ENVFILE"
    ;;
restart)
    as_owner "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -m fast -w -t 60 restart >/dev/null 9>&-
    ;;
stop)
    rm -rf "$HOLDERS"
    if running; then
        as_owner "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
    fi
    ;;
reap)
    reap
    ;;
*)
    echo "usage: $0 start|env|restart|stop [DIR]" >&2
    exit 2
    ;;
esac
