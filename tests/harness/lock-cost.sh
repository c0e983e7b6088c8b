#!/usr/bin/env bash
# What the lock read (crates/agent/src/collect/mariadb/locks.rs) costs the server with many idle
# connections (docs/performance.md, "The lock read"), called by tests/bench.sh:
#
#   tests/harness/lock-cost.sh NAME BIN [CLIENTS] [LOOPS]
#
# NAME is a running instance of tests/harness/mariadb.sh (same POWERDIAG_IT_DIR, MariaDB 11.8,
# performance_schema on) on this host, BIN a powerdiag binary. With CLIENTS (5000) idle
# connections (tests/harness/lock-pileup.py): the collector's statements, copied from locks.rs,
# sent as the agent sends them for each case — nothing waiting on a busy server, a row-lock
# chain of 10, a metadata-lock pile-up of 10 under each holder source —, LOOPS (20) times on
# one connection (one client per loop), 110 ms apart (a DO SLEEP between reads: InnoDB
# refreshes its INNODB_TRX/INNODB_LOCKS cache only when its last read is 100 ms old, so back to
# back reads would measure a cache the agent never finds), five loops; mariadbd's time over a
# loop divided by its reads (the connection included: ~1 ms for the loop) as nanoseconds on CPU
# of all its threads (schedstat: the 10 ms ticks are too coarse here), the first case's median
# (DO 1: the loop, the sleeps and the server's background threads) the floor the others are
# given over. Then the agent's own statement counter, quiet and with a chain.
#
# Needs max_connections above CLIENTS + 100 (raised here for the run, up to what the server's
# open_files_limit allows: start it with POWERDIAG_IT_MARIADB_OPTIONS="max_connections=6000"
# for 5,000), /usr/bin/python3 with pymysql (python3-pymysql), curl, and an open-files limit
# above CLIENTS for this shell (raised here to the hard limit).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
usage="usage: lock-cost.sh NAME BIN [CLIENTS] [LOOPS]"
NAME=${1:?$usage}
BIN=${2:?$usage}
LOCK_CLIENTS=${3:-5000}
LOCK_LOOPS=${4:-20}
[[ $LOCK_CLIENTS =~ ^[1-9][0-9]*$ && $LOCK_LOOPS =~ ^[1-9][0-9]*$ ]] ||
    { echo "lock-cost.sh: CLIENTS and LOOPS are numbers ($usage)" >&2; exit 2; }
BENCH_NAME=$NAME BENCH_TAG=lock-cost.sh
# shellcheck source=tests/harness/bench-lib.sh
. "$HERE/bench-lib.sh"
bench_instance
PIDFILE=$(env_of PIDFILE)
DB_PID=$(cat "$PIDFILE")
export POWERDIAG_MARIADB_URL="mysql://root:$PW@127.0.0.1:$PORT/"

work=$(mktemp -d /tmp/powerdiag-lock-cost.XXXXXX)
agent_pid='' max_connections=''
cleanup() {
    local rc=$?
    [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null
    [ -n "${PILEUP_PID:-}" ] && kill "$PILEUP_PID" 2>/dev/null
    [ -n "$max_connections" ] && sql -e "SET GLOBAL max_connections = $max_connections" 2>/dev/null
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT INT TERM

run_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d", s}'; }

locks_rs=$ROOT/crates/agent/src/collect/mariadb/locks.rs
lock_sql() { # NAME [ARG]: one statement of locks.rs, its Rust string literal as sent
    python3 - "$locks_rs" "$@" <<'EOF'
import re, sys
src, what = open(sys.argv[1]).read(), sys.argv[2]
arg = sys.argv[3] if len(sys.argv) > 3 else ""
lit = lambda s: re.sub(r"\\\n\s*", "", s)  # a line continuation and the indent after it
const = lambda n: lit(re.search(r'const %s: &str =\s*"((?:[^"\\]|\\.)*)"' % n, src, re.S).group(1))
out = const(what).replace("{ids}", arg).replace("{seconds}", arg)
assert not re.search(r'[{}\\\n]', out), out
print(out)
EOF
}
lock_floor=
lock_cost() { # LABEL SQL...: min/median/max over five loops of mariadbd ms per read, and the median over the floor
    local label=$1 i t0 t1 per=() median
    shift
    for ((i = 0; i < LOCK_LOOPS; i++)); do printf '%s;\n' "$@" "DO SLEEP(0.11)"; done >"$work/lock.sql"
    for _ in 1 2 3 4 5; do
        t0=$(run_ns "$DB_PID")
        sql <"$work/lock.sql" >/dev/null
        t1=$(run_ns "$DB_PID")
        per+=("$(awk -v t="$((t1 - t0))" -v n="$LOCK_LOOPS" 'BEGIN {printf "%.2f", t / 1e6 / n}')")
    done
    median=$(printf '%s\n' "${per[@]}" | sort -n | sed -n 3p)
    [ -n "$lock_floor" ] || lock_floor=$median
    echo "lock read, $label ($# statements): $(printf '%s\n' "${per[@]}" | sort -n | sed -n '1p;3p;5p' | paste -sd/ -) ms of server CPU per read (min/median/max of 5 loops of $LOCK_LOOPS), median $(awk -v m="$median" -v f="$lock_floor" 'BEGIN {printf "%.2f", m - f}') ms over the floor"
}
pileup_cmd() { # COMMAND: sends it to the helper, prints its answer's last word
    local line
    echo "$1" >&"${PILEUP[1]}"
    read -r line <&"${PILEUP[0]}" || { echo "lock-cost.sh: lock-pileup.py ended" >&2; exit 1; }
    echo "${line##* }"
}
max_connections=$(sql -e "SELECT @@max_connections")
sql -e "SET GLOBAL max_connections = GREATEST(@@max_connections, $((LOCK_CLIENTS + 100)))"
ulimit -n "$(ulimit -Hn)" # the helper's connections
coproc PILEUP { /usr/bin/python3 "$HERE/lock-pileup.py" "$PORT" "$PW" "$LOCK_CLIENTS"; }
read -r _ <&"${PILEUP[0]}" # "idle ready"
echo "lock read: $(sql -e "SHOW GLOBAL STATUS LIKE 'Threads_connected'" | cut -f2) connections"
waiters=$(lock_sql WAITERS_SQL 0)
lock_cost "DO 1 sent the same way (the floor)" "DO 1"
lock_cost "nothing waiting, a busy server (Threads_running >= 3): WAITERS_SQL (performance_schema.threads)" "$waiters"
lock_cost "the same from information_schema.PROCESSLIST (performance_schema off): WAITERS_SQL_PROCESSLIST" "$(lock_sql WAITERS_SQL_PROCESSLIST 0)"
pileup_cmd "chain 10" >/dev/null
ids=$(sql -e "SELECT GROUP_CONCAT(DISTINCT t) FROM (SELECT r.trx_mysql_thread_id t FROM information_schema.INNODB_LOCK_WAITS w JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id UNION SELECT b.trx_mysql_thread_id FROM information_schema.INNODB_LOCK_WAITS w JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id) q")
lock_cost "row-lock chain of 10 waiters: CHAIN_SQL ($(sql -e 'SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS') rows), WAITERS_SQL with both sides' ids" \
    "$(lock_sql CHAIN_SQL)" "$(lock_sql WAITERS_SQL "$ids")"
lock_cost "the same from information_schema.PROCESSLIST" \
    "$(lock_sql CHAIN_SQL)" "$(lock_sql WAITERS_SQL_PROCESSLIST "$ids")"
pileup_cmd release >/dev/null
source_sql=$(lock_sql SOURCE_SQL)
holder=$(pileup_cmd "mdl 10")
lock_cost "metadata-lock pile-up of 10, PROCESSLIST only: WAITERS_SQL, SOURCE_SQL, the candidates" \
    "$waiters" "$source_sql" "$(lock_sql CANDIDATES_SQL 0)"
pileup_cmd release >/dev/null
sql -e "INSTALL SONAME 'metadata_lock_info'"
holder=$(pileup_cmd "mdl 10")
lock_cost "metadata-lock pile-up of 10, METADATA_LOCK_INFO: WAITERS_SQL, SOURCE_SQL, MLI_SQL, the holder's session" \
    "$waiters" "$source_sql" "$(lock_sql MLI_SQL)" "$(lock_sql SESSIONS_SQL "$holder")"
pileup_cmd release >/dev/null
sql -e "UNINSTALL SONAME 'metadata_lock_info'"
sql -e "UPDATE performance_schema.setup_instruments SET ENABLED = 'YES' WHERE NAME = 'wait/lock/metadata/sql/mdl'"
holder=$(pileup_cmd "mdl 10")
lock_cost "metadata-lock pile-up of 10, performance_schema: WAITERS_SQL, SOURCE_SQL, PFS_MDL_SQL, the holder's session" \
    "$waiters" "$source_sql" "$(lock_sql PFS_MDL_SQL)" "$(lock_sql SESSIONS_SQL "$holder")"
pileup_cmd release >/dev/null
sql -e "UPDATE performance_schema.setup_instruments SET ENABLED = 'NO' WHERE NAME = 'wait/lock/metadata/sql/mdl'"
# The agent: statements per sample with nothing waiting (the lock read skipped), then with the
# chain (its status read shows Innodb_row_lock_current_waits > 0); every second, not spaced by
# the idle connections, so the third sample is a steady one.
start_agent $'[sample]\ninterval = "1s"\ntimeout = "900ms"\nwindow = "0s"\nspacing_connections = 0\n[probe]\nenabled = false\n'
sleep 3.5
quiet=$(metric powerdiag_sample_sql_statements)
pileup_cmd "chain 10" >/dev/null
sleep 2.5
echo "agent, $LOCK_CLIENTS idle connections: $quiet SQL statements per sample with nothing waiting, $(metric powerdiag_sample_sql_statements) with the row-lock chain ($(metric 'powerdiag_mariadb_lock_waiting_sessions{kind="row"}') row-lock waiters seen) (budget: quiet adds 0)"
stop_agent
pileup_cmd release >/dev/null
eval "exec ${PILEUP[1]}>&-"
wait "$PILEUP_PID" 2>/dev/null || true
sql -e "SET GLOBAL max_connections = $max_connections"
max_connections=

