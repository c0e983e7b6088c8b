#!/usr/bin/env bash
# MySQLTuner, pt-variable-advisor and powerdiag side by side on servers with the everyday
# pitfalls of issue 14 (docs/rules.md's "Side by side with MySQLTuner and pt-variable-advisor"
# table comes from this output):
#
#   tests/bench-peers-advisors.sh
#
# A comparison, not a test: it prints what each tool recommends and fails only when it cannot
# run them. It does its own set-up: the MariaDB 11.8 root (tests/harness/setup.sh), Debian's
# mysqltuner and percona-toolkit (apt), a debug build; two servers of its own on loopback
# (tests/harness/mariadb.sh) under a temporary directory, which it stops and removes whatever
# happens:
#
#   peermem (11.8, port base+1): a 16 MiB buffer pool under random reads of an ~80 MB table, a
#     16 MiB redo log under bulk updates, max_connections 20 with 16 clients held open, a
#     transaction held open while others commit, innodb_data_file_buffering = ON, a global
#     join_buffer_size of a tenth of RAM (× 20 connections: twice the RAM);
#   peersql (10.11, port base+2, query cache on from start-up): tmp_table_size 1 KiB under a
#     large GROUP BY, thread_cache_size 0 under a connect loop, table_open_cache 10 over 40
#     tables, sort_buffer_size 32 KiB, joins on an unindexed column — the provoked states of
#     tests/it/server_pitfalls.rs, driven by mariadb clients instead of Rust.
#
# Each workload runs POWERDIAG_PEERS_WARMUP seconds (default 20) before the tools run, and
# keeps running while they do (powerdiag doctor judges a 10 s window of it; the peers read the
# counters since start-up). Raw outputs are kept in the printed directory.
#
# Environment: POWERDIAG_PEERS_PORT_BASE (33500), POWERDIAG_PEERS_WARMUP (20),
# POWERDIAG_PEERS_KEEP=1 keeps the directory and leaves the servers running.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
BASE=${POWERDIAG_PEERS_PORT_BASE:-33500}
WARMUP=${POWERDIAG_PEERS_WARMUP:-20}
PW=${POWERDIAG_IT_ROOT_PASSWORD:-powerdiag-it-root}
step() { printf '\n==> %s\n' "$*" >&2; }

step "set-up (tests/harness/setup.sh, mysqltuner, percona-toolkit, build)"
"$HERE/harness/setup.sh"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
if ! command -v mysqltuner >/dev/null || ! command -v pt-variable-advisor >/dev/null; then
    apt-get -y -q -o DPkg::Lock::Timeout=300 install --no-install-recommends mysqltuner percona-toolkit >/dev/null
fi
cargo build --locked -p powerdiag
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/powerdiag

work=$(mktemp -d /tmp/powerdiag-peers.XXXXXX)
chmod 755 "$work"
export POWERDIAG_IT_DIR=$work/servers
PIDS=()
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    rm -f "$work/run"
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ "${POWERDIAG_PEERS_KEEP:-0}" = 1 ]; then
        echo "kept $work (servers still running)" >&2
    else
        "$HERE/harness/mariadb.sh" stop peermem >/dev/null 2>&1 || true
        "$HERE/harness/mariadb.sh" stop peersql >/dev/null 2>&1 || true
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT INT TERM

sql() { "$HERE/harness/mariadb.sh" sql "$@"; }
bg() { # run in the background, remember the PID to stop it
    "$@" &
    PIDS+=("$!")
}

step "servers peermem (11.8, port $((BASE + 1))) and peersql (10.11, port $((BASE + 2))) under $work"
"$HERE/harness/mariadb.sh" start peermem 11.8 $((BASE + 1)) >&2
POWERDIAG_IT_MARIADB_OPTIONS="query_cache_type=ON query_cache_size=16M" \
    "$HERE/harness/mariadb.sh" start peersql 10.11 $((BASE + 2)) >&2

step "peermem: schema, then the pitfalls"
sql peermem <<'SQL'
CREATE DATABASE pit;
USE pit;
CREATE TABLE big (id INT PRIMARY KEY, pad CHAR(255) NOT NULL) ENGINE=InnoDB;
INSERT INTO big SELECT seq, MD5(seq) FROM seq_1_to_250000;
CREATE TABLE small (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB;
INSERT INTO small SELECT seq, 0 FROM seq_1_to_1000;
ANALYZE TABLE big, small;
SQL
ram=$(awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo)
sql peermem -e "SET GLOBAL innodb_buffer_pool_size = 16777216; SET GLOBAL innodb_log_file_size = 16777216;
    SET GLOBAL join_buffer_size = $((ram / 10)); SET GLOBAL innodb_data_file_buffering = ON;
    SET GLOBAL max_connections = 20"
touch "$work/run"
# A transaction left open after reading, and idle clients: 16 of 20 connections with the load.
bg "$HERE/harness/mariadb.sh" sql peermem -e "START TRANSACTION WITH CONSISTENT SNAPSHOT; SELECT COUNT(*) FROM pit.small; DO SLEEP(3600)"
for _ in $(seq 11); do bg "$HERE/harness/mariadb.sh" sql peermem -e "DO SLEEP(3600)"; done
reads() { while [ -e "$work/run" ]; do echo "SELECT pad FROM pit.big WHERE id = $((RANDOM * 8 + RANDOM % 8 + 1));"; done; }
updates() {
    local i=0
    while [ -e "$work/run" ]; do
        i=$((i + 1))
        echo "UPDATE pit.big SET pad = REPEAT(CHAR(65 + $i % 26), 255) WHERE id BETWEEN $(((i * 2000) % 248000)) AND $(((i * 2000) % 248000 + 2000));"
    done
}
commits() { local i=0; while [ -e "$work/run" ]; do i=$((i + 1)); echo "UPDATE pit.small SET v = v + 1 WHERE id = $((i % 1000 + 1));"; done; }
bg bash -c "$(declare -f reads); work=$work; reads | $HERE/harness/mariadb.sh sql peermem >/dev/null"
bg bash -c "$(declare -f updates); work=$work; updates | $HERE/harness/mariadb.sh sql peermem >/dev/null"
bg bash -c "$(declare -f commits); work=$work; commits | $HERE/harness/mariadb.sh sql peermem >/dev/null"

step "peersql: schema, then the pitfalls"
{
    echo "CREATE DATABASE pit; USE pit;"
    echo "CREATE TABLE t1 (id INT PRIMARY KEY, a INT NOT NULL, b INT NOT NULL, pad CHAR(100) NOT NULL) ENGINE=InnoDB;"
    echo "INSERT INTO t1 SELECT seq, seq % 500, seq % 5000, MD5(seq) FROM seq_1_to_20000;"
    echo "CREATE TABLE t2 (id INT PRIMARY KEY, a INT NOT NULL) ENGINE=InnoDB;"
    echo "INSERT INTO t2 SELECT seq, seq % 500 FROM seq_1_to_2000;"
    for j in $(seq 0 39); do
        echo "CREATE TABLE m$j (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB; INSERT INTO m$j SELECT seq, seq FROM seq_0_to_9;"
    done
    echo "SET GLOBAL tmp_table_size = 1024; SET GLOBAL max_heap_table_size = 16384; SET GLOBAL thread_cache_size = 0;"
    echo "SET GLOBAL table_open_cache = 10; SET GLOBAL sort_buffer_size = 32768; FLUSH TABLES;"
} | sql peersql
app() {
    local i=0 k u lo
    while [ -e "$work/run" ]; do
        i=$((i + 1)) k=$((i % 97)) u=$RANDOM$i lo=$((i % 97 * 100))
        echo "SELECT b, COUNT(*) FROM pit.t1 WHERE id BETWEEN $lo AND $((lo + 3000)) AND a > -$u GROUP BY b;"
        echo "SELECT id FROM pit.t1 WHERE id BETWEEN $lo AND $((lo + 3000)) AND a > -$u ORDER BY pad;"
        echo "SELECT COUNT(*) FROM pit.t1 JOIN pit.t2 ON t1.a = t2.a WHERE t1.id < $((200 + k)) AND t1.b > -$u;"
        for j in $(seq 0 39); do echo "SELECT v FROM pit.m$j WHERE id = $((k % 10)) AND v > -$u;"; done
    done
}
connects() { while [ -e "$work/run" ]; do "$HERE/harness/mariadb.sh" sql peersql -e "DO 1"; sleep 0.01; done; }
bg bash -c "$(declare -f app); work=$work; app | $HERE/harness/mariadb.sh sql peersql >/dev/null"
bg bash -c "$(declare -f connects); work=$work; HERE=$HERE; connects"

step "workloads running for ${WARMUP} s"
sleep "$WARMUP"

for s in peermem peersql; do
    eval "$("$HERE/harness/mariadb.sh" env "$s")"
    key=$(echo "$s" | tr '[:lower:]' '[:upper:]')
    port_var=POWERDIAG_IT_${key}_PORT sock_var=POWERDIAG_IT_${key}_SOCKET
    port=${!port_var} sock=${!sock_var}
    step "$s: mysqltuner"
    # --forcemem: the RAM MySQLTuner would read itself (it asks for it over TCP).
    # The password from the environment (--passenv) and a private option file (pt's F=), never argv.
    PEERS_PW=$PW mysqltuner --host 127.0.0.1 --port "$port" --user root --passenv PEERS_PW \
        --forcemem $((ram / 1048576)) --noinfo --nocolor --nodbstat --notbstat --nocolstat --noidxstat \
        >"$work/$s.mysqltuner.txt" 2>&1 || true
    step "$s: pt-variable-advisor"
    (umask 077 && printf '[client]\nuser=root\npassword=%s\n' "$PW" >"$work/$s.pt.cnf")
    pt-variable-advisor "F=$work/$s.pt.cnf,h=127.0.0.1,P=$port" >"$work/$s.pt-variable-advisor.txt" 2>&1 || true
    step "$s: powerdiag doctor (10 s window of the same workload)"
    POWERDIAG_MARIADB_URL="mysql://root:$PW@127.0.0.1:$port/" \
        "$BIN" doctor --no-probe --sample-window 10s --format json >"$work/$s.powerdiag.json" || true
    : "$sock"
done

step "results (raw outputs in $work)"
for s in peermem peersql; do
    printf '\n## %s\n\n### MySQLTuner: problems ([!!]) and recommendations\n' "$s"
    grep -E '^\[!!\]|^    [^ ]' "$work/$s.mysqltuner.txt" | sed -n '/./p' || true
    printf '\n### pt-variable-advisor\n'
    grep -E '^# (NOTE|WARN|CRIT)' "$work/$s.pt-variable-advisor.txt" || true
    printf '\n### powerdiag (failing checks)\n'
    python3 - "$work/$s.powerdiag.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for c in j["checks"]:
    if c["status"] == "fail":
        print(f'{c["code"]} {c["name"]}: {c["summary"]}')
PY
done
