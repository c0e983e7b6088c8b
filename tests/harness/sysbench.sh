#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Debian's sysbench `oltp_read_write` against a tests/harness/mariadb.sh instance: a healthy
# OLTP load for tests/it/no_false_alarms.rs.
set -euo pipefail

HARNESS_TAG=sysbench # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

usage() {
    cat <<'EOF'
Usage: tests/harness/sysbench.sh COMMAND NAME [ARGS...]

  prepare NAME          (re)create database sbtest on the running harness instance NAME and fill
                        it: sysbench oltp_read_write --tables=4 --table-size=N prepare
                        (N = $POWERDIAG_SYSBENCH_TABLE_SIZE, default 20000: about 20 MiB of data,
                        well inside the default 128 MiB buffer pool)
  run NAME SECONDS      sysbench oltp_read_write run with $POWERDIAG_SYSBENCH_THREADS threads
                        (default 4) at $POWERDIAG_SYSBENCH_RATE transactions a second at most
                        (default 0: as fast as it goes) for SECONDS, in the
                        foreground; its output goes to $POWERDIAG_IT_DIR/NAME.sysbench.log (the
                        path is printed on stdout); exit status is sysbench's
  cleanup NAME          drop database sbtest

Connects as root over the instance's unix socket (tests/harness/mariadb.sh env NAME), with the
password $POWERDIAG_IT_ROOT_PASSWORD (default powerdiag-it-root) in the environment (MYSQL_PWD),
never on the command line.

Environment: POWERDIAG_IT_DIR (as mariadb.sh; default /tmp/powerdiag-it),
POWERDIAG_IT_ROOT_PASSWORD, POWERDIAG_SYSBENCH_TABLE_SIZE (default 20000),
POWERDIAG_SYSBENCH_THREADS (default 4), POWERDIAG_SYSBENCH_RATE (default 0, no limit). A fixed
rate makes the load the same on any machine fast enough for it (tests/it/no_false_alarms.rs
uses 500: unlimited, a fast run of the CI VM made ~1,150 transactions a second and ~2 MB/s of
redo, which the default 96 MiB redo log holds for under a minute, and PD206 rightly said so);
tests/it/saturation.rs needs no limit, to fill a CPU quota.
EOF
}

IT_DIR=${POWERDIAG_IT_DIR:-/tmp/powerdiag-it}
TABLES=4
THREADS=${POWERDIAG_SYSBENCH_THREADS:-4}
RATE=${POWERDIAG_SYSBENCH_RATE:-0}
TABLE_SIZE=${POWERDIAG_SYSBENCH_TABLE_SIZE:-20000}

# Sets SOCK for instance NAME from `mariadb.sh env NAME` and checks that it is running.
set_instance() { # NAME
    NAME=$1
    local env var
    command -v sysbench >/dev/null 2>&1 ||
        die "sysbench is not installed (Debian package sysbench; tests/harness/setup.sh installs it)"
    "$HERE/mariadb.sh" status "$NAME" >/dev/null 2>&1 ||
        die "instance '$NAME' is not running under $IT_DIR: tests/harness/mariadb.sh start $NAME FLAVOUR PORT"
    env=$("$HERE/mariadb.sh" env "$NAME") || die "mariadb.sh env $NAME failed"
    eval "$env"
    var=POWERDIAG_IT_$(printf '%s' "$NAME" | tr '[:lower:]-' '[:upper:]_')_SOCKET
    SOCK=${!var:-}
    [ -S "$SOCK" ] || die "instance '$NAME': no socket at '$SOCK'"
    LOG=$IT_DIR/$NAME.sysbench.log
}

# sysbench has only --mysql-password for the password, which would put it in argv (visible to
# every user in ps). Its client library, MariaDB Connector/C (libmariadb), takes the password
# from MYSQL_PWD when none is given: the environment is readable only by the same user and root.
sb() { # sysbench COMMAND and options; the connection options are added here
    MYSQL_PWD=${POWERDIAG_IT_ROOT_PASSWORD:-powerdiag-it-root} sysbench oltp_read_write \
        --db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root --mysql-db=sbtest \
        --tables="$TABLES" --table-size="$TABLE_SIZE" "$@"
}

cmd_prepare() {
    [ $# -eq 1 ] || die "prepare needs NAME"
    [[ $TABLE_SIZE =~ ^[1-9][0-9]*$ ]] ||
        die "POWERDIAG_SYSBENCH_TABLE_SIZE must be a positive number (got '$TABLE_SIZE')"
    set_instance "$1"
    local t0 out
    t0=$(now)
    # From scratch every time: sysbench's prepare fails on tables that already exist.
    "$HERE/mariadb.sh" sql "$NAME" -e 'DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest' ||
        die "$NAME: could not create database sbtest"
    if ! out=$(sb prepare 2>&1); then
        printf '%s\n' "$out" >&2
        die "$NAME: sysbench prepare failed"
    fi
    log "$NAME: sbtest prepared ($TABLES tables of $TABLE_SIZE rows) in $(elapsed "$t0") s"
}

cmd_run() {
    [ $# -eq 2 ] || die "run needs NAME SECONDS"
    [[ $2 =~ ^[1-9][0-9]*$ ]] || die "SECONDS must be a positive number (got '$2')"
    [[ $THREADS =~ ^[1-9][0-9]*$ ]] ||
        die "POWERDIAG_SYSBENCH_THREADS must be a positive number (got '$THREADS')"
    set_instance "$1"
    local rc=0
    printf '%s\n' "$LOG"
    [[ $RATE =~ ^[0-9]+$ ]] || die "POWERDIAG_SYSBENCH_RATE must be a number (got '$RATE')"
    sb --threads="$THREADS" --rate="$RATE" --time="$2" --report-interval=0 run >"$LOG" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        tail -n 20 "$LOG" >&2
        die "$NAME: sysbench run failed (rc=$rc; log: $LOG)"
    fi
    grep -E '^ *transactions:' "$LOG" >&2 || die "$NAME: no transaction count in $LOG"
}

cmd_cleanup() {
    [ $# -eq 1 ] || die "cleanup needs NAME"
    set_instance "$1"
    "$HERE/mariadb.sh" sql "$NAME" -e 'DROP DATABASE IF EXISTS sbtest' ||
        die "$NAME: could not drop database sbtest"
}

[ $# -ge 1 ] || {
    usage >&2
    exit 2
}
cmd=$1
shift
case $cmd in
prepare) cmd_prepare "$@" ;;
run) cmd_run "$@" ;;
cleanup) cmd_cleanup "$@" ;;
-h | --help | help) usage ;;
*)
    usage >&2
    die "unknown command '$cmd'"
    ;;
esac
