#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# A three-node Galera cluster of MariaDB 11.8 on loopback (tests/it/galera.rs: PD225–PD227),
# built from the MariaDB 11.8 root's own galera-4 provider (libgalera_smm.so, which Debian's
# mariadb-server pulls in) and tests/harness/mariadb.sh's instances gal1, gal2 and gal3.
#
#   tests/harness/galera.sh start BASE   the cluster: SQL ports BASE, BASE+1, BASE+2; group
#                                        communication BASE+3..BASE+5; IST BASE+6..BASE+8; the
#                                        joiner's SST script (rsync, listens even for an IST)
#                                        BASE+10..BASE+12
#   tests/harness/galera.sh node N       (re)start node N alone into the running cluster (after
#                                        `kill`: its position is recovered from InnoDB first, as
#                                        the packaged galera_recovery does, so it rejoins by IST)
#   tests/harness/galera.sh kill N       SIGKILL node N's mariadbd (a crashed node)
#   tests/harness/galera.sh stop         stop every node
#   tests/harness/galera.sh env          the POWERDIAG_IT_GAL{1,2,3}_* variables, as mariadb.sh env
#
# No state snapshot transfer: the first start bootstraps gal1, stops it, and gives gal2 and gal3
# copies of its data directory, so every node starts from the cluster's own state (a joiner
# with the group's state UUID and seqno needs no SST; a restarted one gets IST). A killed node's
# grastate.dat says seqno -1, which would ask for a full SST (rsync on the host, port 4444): `node`
# recovers the position with `mariadbd --wsrep-recover` and passes it as wsrep_start_position.
# Instances live under POWERDIAG_IT_DIR like every other test server; BASE is remembered there.
set -euo pipefail

HARNESS_TAG=galera # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
MARIADB=$HERE/mariadb.sh
IT_DIR=${POWERDIAG_IT_DIR:-}
BASE_FILE=$IT_DIR/.galera-base

provider() {
    local p=$TRIXIE_ROOT/usr/lib/galera/libgalera_smm.so
    [ -f "$p" ] || die "no Galera provider at $p: the MariaDB 11.8 root lacks galera-4 (remove $TRIXIE_ROOT and rerun tests/harness/setup.sh, which installs it)"
    printf '%s' "$p"
}

base() {
    [ -f "$BASE_FILE" ] || die "the cluster was never started (tests/harness/galera.sh start BASE)"
    cat "$BASE_FILE"
}

# The server options of node N (1-3) joining through ADDRESS.
options() {
    local n=$1 address=$2 b
    b=$(base)
    printf '%s ' \
        wsrep_on=ON \
        "wsrep_provider=$(provider)" \
        wsrep_cluster_name=powerdiag_it \
        "wsrep_node_name=gal$n" \
        "wsrep_cluster_address=$address" \
        "wsrep_provider_options=\"gmcast.listen_addr=tcp://127.0.0.1:$((b + 2 + n));ist.recv_addr=127.0.0.1:$((b + 5 + n))\"" \
        wsrep_sst_method=rsync \
        "wsrep_sst_receive_address=127.0.0.1:$((b + 9 + n))" \
        wsrep_slave_threads=2 \
        binlog_format=ROW \
        innodb_autoinc_lock_mode=2
}

members() {
    local b
    b=$(base)
    printf 'gcomm://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s' $((b + 3)) $((b + 4)) $((b + 5))
}

start_node() { # N ADDRESS [OPTION...]
    local n=$1 address=$2 b
    shift 2
    b=$(base)
    POWERDIAG_IT_MARIADB_OPTIONS="$(options "$n" "$address")$*" "$MARIADB" start "gal$n" 11.8 $((b + n - 1))
}

# Node N's last committed position as uuid:seqno when its grastate.dat does not know it (after
# a crash: seqno -1), read by a recovery run of mariadbd on its own configuration; nothing when
# the file knows it.
recovered_position() { # N
    local n=$1 d state out pos log
    d=$IT_DIR/gal$n
    state=$d/data/grastate.dat
    grep -Eq '^seqno: +-1$' "$state" 2>/dev/null || return 0
    [ -f "$d/my.cnf" ] || die "gal$n has no configuration at $d/my.cnf: start the cluster first"
    # The error log goes to the instance's tmp/, which the server's user may write.
    log=$d/tmp/wsrep-recover.log
    rm -f "$log"
    timeout 120 "$TRIXIE_WRAP/mariadbd" --defaults-file="$d/my.cnf" --wsrep-recover \
        --log-error="$log" >/dev/null 2>&1 || {
        tail -n 20 "$log" >&2 2>/dev/null || true
        die "gal$n: mariadbd --wsrep-recover failed (log: $log)"
    }
    out=$(cat "$log")
    pos=$(printf '%s\n' "$out" | sed -n 's/.*WSREP: Recovered position: *\([0-9a-f-]*:[0-9-]*\).*/\1/p' | tail -n 1)
    [ -n "$pos" ] || {
        printf '%s\n' "$out" | tail -n 20 >&2
        die "gal$n: mariadbd --wsrep-recover printed no recovered position (log: $log)"
    }
    log "gal$n: recovered position $pos from its storage"
    printf '%s' "$pos"
}

bootstrap_safe() { # marks gal1's state as the one to bootstrap from
    local f=$IT_DIR/gal1/data/grastate.dat
    [ -f "$f" ] && sed -i 's/^safe_to_bootstrap: 0$/safe_to_bootstrap: 1/' "$f"
    return 0
}

cmd_start() {
    local b=${1:?start needs BASE}
    [[ $b =~ ^[0-9]+$ ]] || die "bad base port '$b'"
    mkdir -p "$IT_DIR"
    printf '%s\n' "$b" >"$BASE_FILE"
    if [ ! -f "$IT_DIR/gal1/data/grastate.dat" ]; then
        log "first start: bootstrapping gal1, then copying its state to gal2 and gal3"
        start_node 1 gcomm://
        "$MARIADB" stop gal1
        local n
        for n in 2 3; do
            # An instance of its own (configuration, accounts), then gal1's data.
            POWERDIAG_IT_MARIADB_OPTIONS="" "$MARIADB" start "gal$n" 11.8 $((b + n - 1))
            "$MARIADB" stop "gal$n"
            rm -rf "$IT_DIR/gal$n/data"
            cp -a "$IT_DIR/gal1/data" "$IT_DIR/gal$n/data"
            sed -i 's/^safe_to_bootstrap: 1$/safe_to_bootstrap: 0/' "$IT_DIR/gal$n/data/grastate.dat"
        done
    fi
    bootstrap_safe
    start_node 1 gcomm://
    start_node 2 "$(members)"
    start_node 3 "$(members)"
    log "cluster up: gal1..gal3 on ports $b..$((b + 2))"
}

cmd_node() {
    local n=${1:?node needs N}
    [[ $n =~ ^[123]$ ]] || die "node N: N is 1, 2 or 3"
    local pos
    pos=$(recovered_position "$n")
    if [ -n "$pos" ]; then
        start_node "$n" "$(members)" "wsrep_start_position=$pos"
    else
        start_node "$n" "$(members)"
    fi
}

cmd_kill() {
    local n=${1:?kill needs N} pid
    [[ $n =~ ^[123]$ ]] || die "kill N: N is 1, 2 or 3"
    pid=$(cat "$IT_DIR/gal$n/mysqld.pid" 2>/dev/null) || die "gal$n is not running"
    kill -KILL "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    log "gal$n (pid $pid) killed"
}

cmd_stop() {
    local n
    for n in 3 2 1; do
        "$MARIADB" stop "gal$n" || true
    done
}

cmd_env() {
    local n
    for n in 1 2 3; do
        "$MARIADB" env "gal$n"
    done
}

case ${1:-} in
start | node | kill | stop | env)
    [ -n "$IT_DIR" ] || die "POWERDIAG_IT_DIR must name the test servers' directory (tests/run.sh sets it)"
    ;;
esac
case ${1:-} in
start) cmd_start "${2:-}" ;;
node) cmd_node "${2:-}" ;;
kill) cmd_kill "${2:-}" ;;
stop) cmd_stop ;;
env) cmd_env ;;
*)
    sed -n '3,18p' "$0" >&2
    exit 2
    ;;
esac
