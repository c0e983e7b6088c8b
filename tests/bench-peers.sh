#!/usr/bin/env bash
# The cost of observing, side by side (issue 19): the powerdiag agent against mysqld_exporter +
# node_exporter, and `powerdiag doctor` against MySQLTuner, on one MariaDB 11.8 with the same
# data and the same load, at 0, 10,000 and 100,000 file-per-table tables:
#
#   tests/bench-peers.sh
#
# A measurement, not a test: it prints numbers and ratios (docs/performance.md's "Cost of observing, side
# by side" comes from its output) and fails only when it cannot measure. It does its own set-up:
# tests/harness/setup.sh (the MariaDB 11.8 root), Debian's prometheus-mysqld-exporter and
# mysqltuner (apt), node_exporter v1.12.1 built by the Go toolchain from the Go module proxy
# (cached in /var/cache/powerdiag/go-bin; Debian's prometheus-node-exporter when there is no Go),
# a release build; its own server on loopback (tests/harness/mariadb.sh) under a temporary
# directory, which it stops and removes whatever happens. The Go module proxy does not serve
# mysqld_exporter, so it is Debian 12's (0.14.0; the issue's figures used v0.20.0).
#
# Method:
#   - CPU from cgroups: mariadbd, the agent, the two exporters and each one-shot run are each in
#     a cgroup of their own (v2 `cpu.stat` usage_usec, or v1 `cpuacct.usage`), so threads that
#     exit are counted (per-thread schedstat misses them);
#   - MariaDB CPU per tool from the server itself: mysqld_exporter and the agent each connect as
#     a user of their own, and `userstat` (information_schema.USER_STATISTICS) adds up the CPU
#     time of every command on that user's connections (CPU_TIME) and counts its connections;
#     performance_schema counts its SQL statements (events_statements_summary_by_user_by_
#     event_name). The load's noise does not enter it, unlike the server's cgroup minus the
#     idle rounds' (also printed). It leaves out the server's work to accept a connection (~1 ms
#     here): mysqld_exporter 0.14 connects at every scrape, the agent once, so the ratio leans
#     in the peers' favour;
#   - data: a vector index of POWERDIAG_PEERS_VECTORS (20,000) rows × 768 dimensions, then
#     tests/harness/many-tables.sh grows the server to each table count (file-per-table);
#   - digests: before each table count's runs the digest table is cleared and 1,000 distinct
#     statements run once, so the agent's statement read (every 10 minutes) works on ~1,000
#     digests;
#   - load: one client session runs a point SELECT and an indexed UPDATE once a second through
#     every round, the same for every tool (light: the idle rounds' server CPU is the noise floor
#     under the tools' few milliseconds a minute);
#   - at each table count, rounds interleaved ROUNDS times: idle (the load only), peers
#     (mysqld_exporter and node_exporter with their default collectors, each scraped every 15 s),
#     agent (the default configuration: a sample every 60 s, scraped every 15 s) and agent15
#     (`[sample] interval = "15s"`: as fresh as the peers, whose every scrape reads the server;
#     scraped every 15 s); every scrape asks as Prometheus
#     does (its Accept header, gzip). Each tool starts before its round and runs 20 s before the
#     round is measured; the agent 70 s, so its start-up reads (the first sample's, which lists
#     the vector indexes, and the second statement read a minute later) are not in it. The
#     agent's rounds last AGENT_ROUND_SECONDS (600), so each holds each of its 10-minute reads
#     (statement digests, open transactions, vector sizes) once, as a long run does; the InnoDB
#     size, read every 30 minutes, falls outside and is measured apart (20 reads back to back)
#     and added at a thirtieth a minute. Everything is per minute;
#   - one-shot: doctor (defaults, and --no-probe --sample-window 0) and mysqltuner (defaults
#     with --forcemem and --nocolor, and the same with --skippassword: its default run tries a
#     dictionary of passwords on every account): wall time, own CPU, server CPU and statements
#     (the server's Questions), median of 3. The server CPU two ways: userstat on the tool's own
#     user (doctor as a monitoring user with PROCESS and SELECT, MySQLTuner as a user with all
#     privileges), and the server's cgroup, which also holds what InnoDB does meanwhile (after
#     10,000 CREATE TABLEs, minutes of background statistics work).
#
# Environment: POWERDIAG_PEERS_PORT (33590; the exporters and the agent listen on the next
# three), POWERDIAG_PEERS_TABLES ("0 10000 100000"; growing to 100,000 takes ~15 minutes, and
# MySQLTuner's runs there take minutes each), POWERDIAG_PEERS_ROUNDS (1: about 30 minutes a
# table count),
# POWERDIAG_PEERS_ROUND_SECONDS (60, the least; idle and peers rounds),
# POWERDIAG_PEERS_AGENT_ROUND_SECONDS (600: the agent's rounds), POWERDIAG_PEERS_VECTORS (20000),
# POWERDIAG_PEERS_LOAD_INTERVAL (1: seconds between two load statements' pairs),
# POWERDIAG_PEERS_MODES ("idle peers agent agent15": the rounds, in that order; a subset reruns
# some), POWERDIAG_PEERS_ONESHOTS (1; 0 skips doctor's and MySQLTuner's runs),
# POWERDIAG_PEERS_KEEP=1 keeps the work directory (raw numbers in rounds.tsv, oneshot.tsv).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
PORT=${POWERDIAG_PEERS_PORT:-33590}
TABLE_COUNTS=${POWERDIAG_PEERS_TABLES:-0 10000 100000}
MODES=${POWERDIAG_PEERS_MODES:-idle peers agent agent15}
ONESHOTS=${POWERDIAG_PEERS_ONESHOTS:-1}
ROUNDS=${POWERDIAG_PEERS_ROUNDS:-1}
ROUND_S=${POWERDIAG_PEERS_ROUND_SECONDS:-60}
AGENT_ROUND_S=${POWERDIAG_PEERS_AGENT_ROUND_SECONDS:-600}
VECTORS=${POWERDIAG_PEERS_VECTORS:-20000}
LOAD_S=${POWERDIAG_PEERS_LOAD_INTERVAL:-1}
PW=${POWERDIAG_IT_ROOT_PASSWORD:-powerdiag-it-root}
MYSQLD_EXPORTER_PORT=$((PORT + 1)) NODE_EXPORTER_PORT=$((PORT + 2)) AGENT_PORT=$((PORT + 3))
NODE_EXPORTER_VERSION=v1.12.1
step() { printf '\n==> %s [%s]\n' "$*" "$(date +%T)" >&2; }
fail() { printf 'bench-peers.sh: %s\n' "$*" >&2; exit 1; }
for m in $MODES; do
    [[ $m =~ ^(idle|peers|agent|agent15)$ ]] || fail "POWERDIAG_PEERS_MODES: '$m' is not one of idle, peers, agent, agent15"
done
[[ $ONESHOTS =~ ^[01]$ ]] || fail "POWERDIAG_PEERS_ONESHOTS=$ONESHOTS: 1 runs doctor and MySQLTuner, 0 skips them"

# A round shorter than four 15 s scrape intervals measures when the scrapes fall, not the tools.
if ! [[ $ROUND_S =~ ^[0-9]+$ ]] || [ "$ROUND_S" -lt 60 ]; then
    fail "POWERDIAG_PEERS_ROUND_SECONDS=$ROUND_S: a round must last at least 60 s (four scrape intervals)"
fi
if ! [[ $AGENT_ROUND_S =~ ^[0-9]+$ ]] || [ "$AGENT_ROUND_S" -lt 60 ]; then
    fail "POWERDIAG_PEERS_AGENT_ROUND_SECONDS=$AGENT_ROUND_S: a round must last at least 60 s; 600 holds each of the agent's 10-minute reads once"
fi
for p in "$PORT" "$MYSQLD_EXPORTER_PORT" "$NODE_EXPORTER_PORT" "$AGENT_PORT"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
        fail "port $p is in use: set POWERDIAG_PEERS_PORT to a free range of four ports"
    fi
done

step "set-up (tests/harness/setup.sh, mysqld_exporter, node_exporter, mysqltuner, release build)"
"$HERE/harness/setup.sh"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
need=()
command -v prometheus-mysqld-exporter >/dev/null || need+=(prometheus-mysqld-exporter)
command -v mysqltuner >/dev/null || need+=(mysqltuner)
GOBIN_DIR=/var/cache/powerdiag/go-bin
NODE_EXPORTER=$GOBIN_DIR/node_exporter-$NODE_EXPORTER_VERSION
# go install stamps no version into the binary: the label says which one it is.
NODE_EXPORTER_LABEL="node_exporter $NODE_EXPORTER_VERSION (go install)"
if [ ! -x "$NODE_EXPORTER" ]; then
    if command -v go >/dev/null; then
        mkdir -p "$GOBIN_DIR/build"
        GOBIN=$GOBIN_DIR/build go install "github.com/prometheus/node_exporter@$NODE_EXPORTER_VERSION"
        mv "$GOBIN_DIR/build/node_exporter" "$NODE_EXPORTER"
    else
        command -v prometheus-node-exporter >/dev/null || need+=(prometheus-node-exporter)
        NODE_EXPORTER=$(command -v prometheus-node-exporter || echo /usr/bin/prometheus-node-exporter)
        NODE_EXPORTER_LABEL="Debian's prometheus-node-exporter"
    fi
fi
if [ ${#need[@]} -gt 0 ]; then
    # The packages' services are not started (no init here; policy-rc.d denies it elsewhere):
    # this script starts each exporter itself.
    DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=300 install --no-install-recommends "${need[@]}" >/dev/null
fi
cargo build --release --locked -p powerdiag
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/powerdiag

# --- cgroups ---------------------------------------------------------------------------------
work=$(mktemp -d /tmp/powerdiag-bench-peers.XXXXXX)
chmod 755 "$work"
export POWERDIAG_IT_DIR=$work/servers
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    CG=/sys/fs/cgroup/powerdiag-bench-peers.$$ CG_KIND=v2
elif [ -d /sys/fs/cgroup/cpuacct ]; then
    CG=/sys/fs/cgroup/cpuacct/powerdiag-bench-peers.$$ CG_KIND=v1
else
    fail "neither cgroup v2 (/sys/fs/cgroup/cgroup.controllers) nor a v1 cpuacct hierarchy: CPU cannot be measured per process"
fi
mkdir "$CG" || fail "cannot create $CG (run as root)"
cg() { mkdir -p "$CG/$1"; }
cg_add() { echo "$2" >"$CG/$1/cgroup.procs"; }
cg_usec() { # NAME: CPU microseconds of everything that ever ran in it
    if [ "$CG_KIND" = v2 ]; then
        awk '$1 == "usage_usec" {print $2}' "$CG/$1/cpu.stat"
    else
        echo $(($(cat "$CG/$1/cpuacct.usage") / 1000))
    fi
}
# Runs a command inside cgroup NAME: the shell joins it, then becomes the command.
cg_exec() { local name=$1; shift; cg "$name"; sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' _ "$CG/$name" "$@"; }
# The same in the background, the command's pid in SPAWNED (the subshell becomes the command,
# so killing that pid stops the tool).
cg_spawn() { # NAME LOG CMD...
    local name=$1 log=$2
    shift 2
    cg "$name"
    exec_in() { exec sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' _ "$CG/$name" "$@"; }
    exec_in "$@" >"$log" 2>&1 &
    SPAWNED=$!
}
# Stops everything still in the tools' cgroups (not the server's).
kill_tools() {
    local d p
    for d in "$CG"/*/; do
        if [ ! -d "$d" ] || [ "$d" = "$CG/server/" ]; then continue; fi
        while read -r p; do kill "$p" 2>/dev/null || true; done <"$d/cgroup.procs"
    done
}

PIDS=()
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    for p in "${PIDS[@]}" "${SCRAPER:-}"; do
        if [ -n "$p" ]; then kill "$p" 2>/dev/null || true; fi
    done
    kill_tools
    wait 2>/dev/null || true
    "$HERE/harness/mariadb.sh" stop peers >/dev/null 2>&1 || true
    # A cgroup can be removed once empty; anything left is moved out first.
    for d in "$CG"/*/ "$CG"; do
        [ -d "$d" ] || continue
        while read -r p; do echo "$p" >"${CG%/*}/cgroup.procs" 2>/dev/null || true; done <"$d/cgroup.procs"
        rmdir "$d" 2>/dev/null || true
    done
    if [ "${POWERDIAG_PEERS_KEEP:-0}" = 1 ]; then
        echo "kept $work" >&2
    else
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT INT TERM

# --- the server, its data and its load -------------------------------------------------------
step "MariaDB 11.8 on 127.0.0.1:$PORT"
"$HERE/harness/mariadb.sh" start peers 11.8 "$PORT"
eval "$("$HERE/harness/mariadb.sh" env peers)"
DB_PID=$(cat "$POWERDIAG_IT_PEERS_PIDFILE")
cg server
cg_add server "$DB_PID"
sql() { "$HERE/harness/mariadb.sh" sql peers -N "$@"; }
# The tools take the credentials from the environment (never argv): powerdiag its URL, mysqltuner
# --passenv, mysqld_exporter DATA_SOURCE_NAME. The agent, mysqld_exporter, doctor and MySQLTuner
# each have a user of their own, with the privileges their documentation asks for (the agent
# the server-wide ones of docs/connecting.md; MySQLTuner root's), so userstat tells their server work apart from the load's and InnoDB's background
# work. The statements go through standard input, so the password is never in a command line.
sql <<SQL
SET GLOBAL userstat = 1;
CREATE USER pd_bench_agent@'127.0.0.1' IDENTIFIED BY '$PW';
GRANT PROCESS, SELECT, REPLICA MONITOR ON *.* TO pd_bench_agent@'127.0.0.1';
CREATE USER pd_bench_peers@'127.0.0.1' IDENTIFIED BY '$PW';
GRANT PROCESS, REPLICATION CLIENT, SELECT ON *.* TO pd_bench_peers@'127.0.0.1';
CREATE USER pd_bench_size@'127.0.0.1' IDENTIFIED BY '$PW';
GRANT SELECT ON mysql.innodb_table_stats TO pd_bench_size@'127.0.0.1';
CREATE USER pd_bench_doctor@'127.0.0.1' IDENTIFIED BY '$PW';
GRANT PROCESS, SELECT ON *.* TO pd_bench_doctor@'127.0.0.1';
CREATE USER pd_bench_tuner@'127.0.0.1' IDENTIFIED BY '$PW';
GRANT ALL PRIVILEGES ON *.* TO pd_bench_tuner@'127.0.0.1' WITH GRANT OPTION;
SQL
export POWERDIAG_MARIADB_URL="mysql://root:$PW@127.0.0.1:$PORT/" PEERS_PW=$PW
AGENT_URL="mysql://pd_bench_agent:$PW@127.0.0.1:$PORT/" DOCTOR_URL="mysql://pd_bench_doctor:$PW@127.0.0.1:$PORT/"
# USER: CPU_TIME in µs, SQL statements, connections so far (0 0 0 before the first). userstat's
# own command counters leave SHOW statements out, so the statements come from performance_schema.
userstat() {
    local r
    r=$(sql -e "SELECT ROUND(CPU_TIME * 1000000),
        (SELECT COALESCE(SUM(COUNT_STAR), 0) FROM performance_schema.events_statements_summary_by_user_by_event_name
            WHERE USER = '$1' AND EVENT_NAME LIKE 'statement/sql/%'),
        TOTAL_CONNECTIONS FROM information_schema.USER_STATISTICS WHERE USER = '$1'")
    echo "${r:-0 0 0}"
}
questions() { sql -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'QUESTIONS'"; }

step "vector data: $VECTORS rows × 768 dimensions with a vector index"
python3 - "$VECTORS" <<'EOF' | sql
import random, sys
random.seed(20261125)
rows = int(sys.argv[1])
print("CREATE DATABASE IF NOT EXISTS peers;")
print("CREATE TABLE peers.docs (id INT PRIMARY KEY, n INT NOT NULL, grp INT NOT NULL, e VECTOR(768) NOT NULL, VECTOR INDEX (e)) ENGINE=InnoDB;")
for start in range(0, rows, 100):
    vals = ",".join(
        "(%d,0,%d,VEC_FromText('[%s]'))" % (i + 1, i % 50, ",".join("%.3f" % random.gauss(0, 1) for _ in range(768)))
        for i in range(start, min(rows, start + 100)))
    print("INSERT INTO peers.docs VALUES %s;" % vals)
print("ANALYZE TABLE peers.docs;")
EOF

step "background load: one session, a point SELECT and an UPDATE every ${LOAD_S} s"
(
    i=0
    while :; do
        i=$((i + 1))
        id=$((i % VECTORS + 1))
        printf 'SELECT id, n FROM peers.docs WHERE id = %d; UPDATE peers.docs SET n = n + 1 WHERE id = %d;\n' "$id" "$id"
        sleep "$LOAD_S"
    done | sql >/dev/null 2>&1
) &
PIDS+=($!)

# --- the tools -------------------------------------------------------------------------------
SCRAPER=
# A scrape as Prometheus 2.x sends it: its Accept header (scrape.go's scrapeAcceptHeader) and
# gzip, which every tool here answers compressed (promhttp and the agent alike).
PROMETHEUS_ACCEPT='application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1'
start_scraper() { # URL...: scrape each every 15 s from now on
    (
        while :; do
            for u in "$@"; do
                curl -fsS -o /dev/null -H "Accept: $PROMETHEUS_ACCEPT" -H 'Accept-Encoding: gzip' "$u" || true
            done
            sleep 15
        done
    ) &
    SCRAPER=$!
}
stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
wait_http() { # URL NAME
    for _ in $(seq 100); do curl -fsS -o /dev/null "$1" 2>/dev/null && return; sleep 0.1; done
    fail "$2 did not answer at $1"
}
TOOL_PIDS=()
start_peers() {
    DATA_SOURCE_NAME="pd_bench_peers:$PW@(127.0.0.1:$PORT)/" cg_spawn peers_mysqld "$work/mysqld_exporter.log" \
        prometheus-mysqld-exporter --web.listen-address="127.0.0.1:$MYSQLD_EXPORTER_PORT"
    TOOL_PIDS+=("$SPAWNED")
    cg_spawn peers_node "$work/node_exporter.log" \
        "$NODE_EXPORTER" --web.listen-address="127.0.0.1:$NODE_EXPORTER_PORT"
    TOOL_PIDS+=("$SPAWNED")
    wait_http "http://127.0.0.1:$MYSQLD_EXPORTER_PORT/metrics" mysqld_exporter
    wait_http "http://127.0.0.1:$NODE_EXPORTER_PORT/metrics" node_exporter
    start_scraper "http://127.0.0.1:$MYSQLD_EXPORTER_PORT/metrics" "http://127.0.0.1:$NODE_EXPORTER_PORT/metrics"
}
start_agent() { # [SAMPLE_INTERVAL]: the default configuration, or a sample every SAMPLE_INTERVAL
    local config=()
    if [ -n "${1:-}" ]; then
        printf '[sample]\ninterval = "%s"\n' "$1" >"$work/agent-$1.toml"
        config=(--config.file "$work/agent-$1.toml")
    fi
    POWERDIAG_MARIADB_URL=$AGENT_URL cg_spawn agent "$work/agent.log" \
        "$BIN" agent --web.listen-address "127.0.0.1:$AGENT_PORT" --log.level warn "${config[@]}"
    TOOL_PIDS+=("$SPAWNED")
    wait_http "http://127.0.0.1:$AGENT_PORT/metrics" "the powerdiag agent"
    start_scraper "http://127.0.0.1:$AGENT_PORT/metrics"
}
stop_tools() {
    stop_pid "$SCRAPER"
    SCRAPER=
    for p in "${TOOL_PIDS[@]}"; do stop_pid "$p"; done
    TOOL_PIDS=()
    # Nothing of a tool may run into the next round.
    for d in "$CG"/peers_mysqld "$CG"/peers_node "$CG"/agent; do
        [ -z "$(cat "$d/cgroup.procs")" ] || fail "$d still has processes after its round: $(cat "$d/cgroup.procs")"
    done
}
tool_usec() { # MODE: CPU of the tool's cgroups
    case $1 in
        idle) echo 0 ;;
        peers) echo $(($(cg_usec peers_mysqld) + $(cg_usec peers_node))) ;;
        agent | agent15) cg_usec agent ;;
    esac
}
for g in peers_mysqld peers_node agent; do cg "$g"; done

printf 'tables\tround\tmode\tseconds\ttool_usec\tserver_usec\tquestions\tmysqld_usec\tnode_usec\tuser_cpu_usec\tuser_statements\tuser_connections\n' >"$work/rounds.tsv"
printf 'tables\ttool\trun\twall_ms\tcpu_usec\tserver_usec\tstatements\tuser_cpu_usec\n' >"$work/oneshot.tsv"
printf 'tables\tusec_per_read\n' >"$work/size.tsv"

round() { # TABLES ROUND MODE
    local t=$1 r=$2 mode=$3 s0 s1 t0 t1 q0 q1 m0 m1 n0 n1 w0 w1 user=none warm=20 len=$ROUND_S u0 u1
    case $mode in
        peers) start_peers; user=pd_bench_peers ;;
        agent) start_agent; user=pd_bench_agent warm=70 len=$AGENT_ROUND_S ;;
        agent15) start_agent 15s; user=pd_bench_agent warm=70 len=$AGENT_ROUND_S ;;
    esac
    sleep "$warm"
    m0=$(cg_usec peers_mysqld) n0=$(cg_usec peers_node) u0=$(userstat "$user")
    t0=$(tool_usec "$mode") s0=$(cg_usec server) q0=$(questions) w0=$(date +%s.%N)
    sleep "$len"
    t1=$(tool_usec "$mode") s1=$(cg_usec server) q1=$(questions) w1=$(date +%s.%N)
    m1=$(cg_usec peers_mysqld) n1=$(cg_usec peers_node) u1=$(userstat "$user")
    stop_tools
    # shellcheck disable=SC2086 # u0 and u1 are three numbers each
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$r" "$mode" \
        "$(awk -v a="$w0" -v b="$w1" 'BEGIN {printf "%.2f", b - a}')" $((t1 - t0)) $((s1 - s0)) \
        $((q1 - q0 - 1)) $((m1 - m0)) $((n1 - n0)) \
        "$(printf '%s %s\n' "$u0" "$u1" | awk '{printf "%d\t%d\t%d", $4 - $1, $5 - $2, $6 - $3}')" |
        tee -a "$work/rounds.tsv" >&2
}

# The agent's InnoDB size read (SIZE_SQL in crates/agent/src/collect/mariadb/innodb.rs), every 30
# minutes, falls outside the agent's rounds: its server CPU per read, 20 reads back to back.
size_read() { # TABLES
    local u0 u1
    u0=$(userstat pd_bench_size)
    for _ in $(seq 20); do
        echo "SELECT COUNT(*), COALESCE(SUM(clustered_index_size), 0) * @@innodb_page_size, COALESCE(SUM(sum_of_other_index_sizes), 0) * @@innodb_page_size, TIMESTAMPDIFF(SECOND, MIN(last_update), NOW()) FROM mysql.innodb_table_stats;"
    done | MYSQL_PWD=$PW sql --user=pd_bench_size --protocol=tcp --host=127.0.0.1 --port="$PORT" \
        --skip-ssl-verify-server-cert >/dev/null
    u1=$(userstat pd_bench_size)
    printf '%s\t%s\n' "$1" "$(printf '%s %s\n' "$u0" "$u1" | awk '{printf "%d", ($4 - $1) / 20}')" |
        tee -a "$work/size.tsv" >&2
}

# A one-shot run's server CPU two ways: the server's cgroup (everything mariadbd did meanwhile,
# InnoDB's background work on freshly created tables included) and userstat on the tool's own
# user (its commands only, as the agent's rounds are measured; the connection's accept left out).
oneshot() { # TABLES TOOL RUN USER CMD...
    local t=$1 tool=$2 run=$3 user=$4 name w0 w1 c0 s0 s1 q0 q1 u0 u1
    shift 4
    name=one_$tool
    cg "$name"
    u0=$(userstat "$user")
    c0=$(cg_usec "$name") s0=$(cg_usec server) q0=$(questions) w0=$(date +%s%N)
    cg_exec "$name" "$@" </dev/null >"$work/$tool.$t.$run.out" 2>&1 || true
    w1=$(date +%s%N) s1=$(cg_usec server) q1=$(questions)
    u1=$(userstat "$user")
    # shellcheck disable=SC2086 # u0 and u1 are three numbers each
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$tool" "$run" $(((w1 - w0) / 1000000)) \
        $(($(cg_usec "$name") - c0)) $((s1 - s0)) $((q1 - q0 - 1)) \
        "$(printf '%s %s\n' "$u0" "$u1" | awk '{printf "%d", $4 - $1}')" | tee -a "$work/oneshot.tsv" >&2
}

ram_mb=$(awk '/MemTotal/ {printf "%d", $2 / 1024}' /proc/meminfo)
for tables in $TABLE_COUNTS; do
    if [ "$tables" -gt 0 ]; then
        step "$tables file-per-table tables (tests/harness/many-tables.sh)"
        "$HERE/harness/many-tables.sh" peers "$tables" 8 0
    fi
    # Each CREATE TABLE is a digest of its own: cleared, the table holds the load's, the
    # tools' and 1,000 distinct application digests (the alias is part of the digest), so the
    # agent's statement read is measured at that size at every table count.
    step "$tables tables: the digest table cleared, then 1,000 distinct statement digests"
    sql -e "TRUNCATE performance_schema.events_statements_summary_by_digest"
    for i in $(seq 1000); do echo "SELECT $i AS c$i;"; done | sql >/dev/null
    echo "digests in the table: $(sql -e "SELECT COUNT(*) FROM performance_schema.events_statements_summary_by_digest")" >&2
    step "$tables tables: one-shot runs (doctor, mysqltuner), $([ "$ONESHOTS" = 1 ] && echo "3 each" || echo "skipped (POWERDIAG_PEERS_ONESHOTS=0)")"
    for run in $([ "$ONESHOTS" = 1 ] && echo 1 2 3); do
        POWERDIAG_MARIADB_URL=$DOCTOR_URL oneshot "$tables" doctor_no_window "$run" pd_bench_doctor \
            "$BIN" doctor --no-probe --sample-window 0 --format json
        POWERDIAG_MARIADB_URL=$DOCTOR_URL oneshot "$tables" doctor "$run" pd_bench_doctor "$BIN" doctor --format json
        oneshot "$tables" mysqltuner "$run" pd_bench_tuner \
            mysqltuner --host 127.0.0.1 --port "$PORT" --user pd_bench_tuner --passenv PEERS_PW --forcemem "$ram_mb" --nocolor
        # Most of MySQLTuner's default run is its dictionary check of the accounts' passwords.
        oneshot "$tables" mysqltuner_skippassword "$run" pd_bench_tuner \
            mysqltuner --host 127.0.0.1 --port "$PORT" --user pd_bench_tuner --passenv PEERS_PW --forcemem "$ram_mb" --nocolor --skippassword
    done
    size_read "$tables"
    echo "digests in the table before the rounds: $(sql -e "SELECT COUNT(*) FROM performance_schema.events_statements_summary_by_digest")" >&2
    for ((r = 1; r <= ROUNDS; r++)); do
        for mode in $MODES; do
            step "$tables tables, round $r/$ROUNDS: $mode ($([[ $mode == agent* ]] && echo "$AGENT_ROUND_S" || echo "$ROUND_S") s)"
            round "$tables" "$r" "$mode"
        done
    done
done

step "summary"
# shellcheck source=/dev/null
python3 - "$work/rounds.tsv" "$work/oneshot.tsv" "$work/size.tsv" "$(. /etc/os-release && echo "$PRETTY_NAME"), $(nproc) CPUs, MariaDB $(sql -e 'SELECT VERSION()'), $(prometheus-mysqld-exporter --version 2>&1 | head -1 | cut -d' ' -f1-3), $NODE_EXPORTER_LABEL, powerdiag $("$BIN" --version | awk '{print $2}')" <<'EOF'
import csv, statistics, sys
rounds = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
oneshot = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
size = {r["tables"]: float(r["usec_per_read"]) / 1000 for r in csv.DictReader(open(sys.argv[3]), delimiter="\t")}
print(sys.argv[4])
print()
print("| tables | per minute | mysqld_exporter + node_exporter | powerdiag agent, 60 s samples | ratio | powerdiag agent, 15 s samples | ratio |")
print("|---|---|---|---|---|---|---|")
for t in dict.fromkeys(r["tables"] for r in rounds):
    rs = [r for r in rounds if r["tables"] == t]
    def per_min(mode, key):
        v = [float(r[key]) / 1000 / (float(r["seconds"]) / 60) for r in rs if r["mode"] == mode]
        return statistics.median(v) if v else float("nan")
    idle = per_min("idle", "server_usec")
    size_ms = size.get(t, float("nan"))
    ratio = lambda a, b: "%.3f" % (a / b) if b > 0 else "n/a"
    # Each line: the peers, then the agent at 60 s and at 15 s with its ratio to the peers.
    def line(what, fmt, peers, agent, agent15, bold=False):
        b = "**" if bold else ""
        print(("| %s | %s | " + fmt + " | " + fmt + " | %s%s%s | " + fmt + " | %s%s%s |") % (
            t, what, peers, agent, b, ratio(agent, peers), b, agent15, b, ratio(agent15, peers), b))
    tool = {m: per_min(m, "tool_usec") for m in ("peers", "agent", "agent15")}
    print("| %s | exporter CPU | %.1f ms (mysqld_exporter %.1f, node_exporter %.1f) | %.1f ms | %s | %.1f ms | %s |" % (
        t, tool["peers"], per_min("peers", "mysqld_usec"), per_min("peers", "node_usec"),
        tool["agent"], ratio(tool["agent"], tool["peers"]), tool["agent15"], ratio(tool["agent15"], tool["peers"])))
    # userstat: the tools' own connections, as the server counts them.
    u = {m: per_min(m, "user_cpu_usec") for m in ("peers", "agent", "agent15")}
    line("MariaDB CPU on the tool's connections (userstat), ms", "%.2f", u["peers"], u["agent"], u["agent15"], True)
    line("the same with the agent's InnoDB size read (every 30 min, outside the round: %.2f ms a read), ms" % size_ms,
         "%.2f", u["peers"], u["agent"] + size_ms / 30, u["agent15"] + size_ms / 30, True)
    srv = {m: per_min(m, "server_usec") - idle for m in ("peers", "agent", "agent15")}
    line("MariaDB cgroup CPU minus the idle rounds' (%.1f ms), ms" % idle, "%.1f", srv["peers"], srv["agent"], srv["agent15"])
    q = {m: per_min(m, "user_statements") * 1000 for m in ("peers", "agent", "agent15")}
    line("SQL statements (performance_schema, by user)", "%.1f", q["peers"], q["agent"], q["agent15"])
    c = {m: per_min(m, "user_connections") * 1000 for m in ("peers", "agent", "agent15")}
    line("connections (userstat)", "%.1f", c["peers"], c["agent"], c["agent15"])
print()
print("| tables | one-shot (median of 3) | wall | own CPU | MariaDB CPU on its connections (userstat) | MariaDB cgroup CPU | statements |")
print("|---|---|---|---|---|---|---|")
for t in dict.fromkeys(r["tables"] for r in oneshot):
    for tool in dict.fromkeys(r["tool"] for r in oneshot):
        rs = [r for r in oneshot if r["tables"] == t and r["tool"] == tool]
        m = lambda k: statistics.median(float(r[k]) for r in rs)
        name = {"doctor_no_window": "doctor --no-probe --sample-window 0", "doctor": "doctor (defaults)", "mysqltuner": "mysqltuner (defaults)", "mysqltuner_skippassword": "mysqltuner --skippassword"}[tool]
        spread = lambda k: "%.1f–%.1f" % (min(float(r[k]) for r in rs) / 1000, max(float(r[k]) for r in rs) / 1000)
        print("| %s | %s | %.0f ms | %.1f ms | %.1f ms (%s) | %.1f ms (%s) | %.0f |" % (
            t, name, m("wall_ms"), m("cpu_usec") / 1000, m("user_cpu_usec") / 1000, spread("user_cpu_usec"),
            m("server_usec") / 1000, spread("server_usec"), m("statements")))
EOF
