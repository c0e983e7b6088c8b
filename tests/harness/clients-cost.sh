#!/usr/bin/env bash
# What the agent's samples cost the server with many idle clients connected
# (docs/performance.md, "At 100,000 tables, 10,000 digests and 5,000 connections"): MariaDB adds
# up every connection's counters for each global status read, so a sample's cost grows with the
# connected clients, and the agent spaces its samples by them ([sample] spacing_connections).
#
#   tests/harness/clients-cost.sh NAME BIN [SECONDS] [CLIENTS] [INTERVAL]
#
# NAME is a running instance of tests/harness/mariadb.sh (same POWERDIAG_IT_DIR) on this host,
# BIN a powerdiag binary. Three spans of SECONDS (600) each, the agent sampling every INTERVAL
# (15s, the peers' scrape interval) with a light load running (one session: a point SELECT and
# an indexed UPDATE once a second): no other client, with the default spacing; CLIENTS (5000)
# idle clients (tests/harness/lock-pileup.py) with the spacing off (spacing_connections = 0);
# the same with the default spacing. Each span starts once the agent has taken its first two
# samples (the first one's start-up reads are measured elsewhere). Doctor's server CPU with and
# without the clients too. The server's CPU is what
# userstat counts on the agent's own user (the thread CPU time of its statements: the status
# read adds up the clients' counters on the agent's connection), so neither the load nor InnoDB's
# background work enters it; its samples are its status reads (performance_schema counts them).
# Prints one line a span and the ratios to the span without clients (the budget: ≤ 1.5×).
# POWERDIAG_CLIENTS_SPANS picks the spans and their lengths: "none off spaced" by default,
# "none:600 spaced:1800" for longer spans (the watch reads between spaced samples are counted
# apart). POWERDIAG_CLIENTS_BESIDE=OTHER (another running instance, an empty one) measures, during
# each span, the same agent without clients on OTHER and gives each span's ratio to that: this
# VM's cost of a sample moves several-fold with its state from hour to hour (caches gone cold
# between samples), so spans measured side by side compare the sizes, spans measured apart
# partly compare the hours. POWERDIAG_CLIENTS_DOCTOR=0 leaves doctor out.
#
# Needs the server's max_connections above CLIENTS + 10 (raised here when it is not, up to what
# the server's open_files_limit allows: start it with POWERDIAG_IT_MARIADB_OPTIONS=
# "max_connections=6000" for 5,000), performance_schema on, /usr/bin/python3 with pymysql
# (python3-pymysql), and an open-files limit above CLIENTS for this shell (raised here to the
# hard limit).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage="usage: clients-cost.sh NAME BIN [SECONDS] [CLIENTS] [INTERVAL]"
NAME=${1:?$usage}
BIN=${2:?$usage}
SPAN=${3:-600}
CLIENTS=${4:-5000}
INTERVAL=${5:-15s}
[[ $SPAN =~ ^[1-9][0-9]*$ && $CLIENTS =~ ^[1-9][0-9]*$ && $INTERVAL =~ ^[1-9][0-9]*s$ ]] ||
    { echo "clients-cost.sh: SECONDS and CLIENTS are numbers, INTERVAL a number of seconds such as 15s ($usage)" >&2; exit 2; }
BENCH_NAME=$NAME BENCH_TAG=clients-cost.sh
# shellcheck source=tests/harness/bench-lib.sh
. "$HERE/bench-lib.sh"
bench_instance
BESIDE=${POWERDIAG_CLIENTS_BESIDE:-}
DOCTOR=${POWERDIAG_CLIENTS_DOCTOR:-1}
if [ -n "$BESIDE" ]; then
    [ "$BESIDE" != "$NAME" ] || { echo "clients-cost.sh: POWERDIAG_CLIENTS_BESIDE names $NAME itself: name another instance" >&2; exit 2; }
    bench_running "$BESIDE" ||
        { echo "clients-cost.sh: POWERDIAG_CLIENTS_BESIDE: no running instance $BESIDE beside $NAME (the same POWERDIAG_IT_DIR; tests/harness/mariadb.sh start $BESIDE 11.8 PORT)" >&2; exit 2; }
fi
[ "$(sql -e 'SELECT @@performance_schema')" = 1 ] ||
    { echo "clients-cost.sh: performance_schema is off on $NAME: the agent's samples are counted there" >&2; exit 2; }
want=$((CLIENTS + 20))
if [ "$(sql -e 'SELECT @@max_connections')" -lt "$want" ]; then
    sql -e "SET GLOBAL max_connections = $want"
fi
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -gt "$want" ] ||
    { echo "clients-cost.sh: this shell may open $(ulimit -n) files, fewer than $CLIENTS clients need (raise the hard limit: ulimit -Hn)" >&2; exit 2; }

work=$(mktemp -d /tmp/powerdiag-clients-cost.XXXXXX)
agent_pid='' load_pid='' idle_pid='' beside_pid=''
cleanup() {
    local rc=$?
    [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null
    # The load's pipeline (its loop and its client), then the subshell around it.
    [ -n "$load_pid" ] && pkill -P "$load_pid" 2>/dev/null; [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null
    [ -n "$idle_pid" ] && kill "$idle_pid" 2>/dev/null
    [ -n "$beside_pid" ] && kill "$beside_pid" 2>/dev/null
    sql -e "DROP USER IF EXISTS pd_cost_agent@'127.0.0.1'; DROP DATABASE IF EXISTS pd_cost" 2>/dev/null || true
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT INT TERM

# The agent's own user (PROCESS, SELECT and REPLICA MONITOR, as docs/connecting.md grants), so userstat and
# performance_schema tell its statements from everything else; the password through standard
# input and the environment, never argv.
sql <<SQL
SET GLOBAL userstat = 1;
DROP USER IF EXISTS pd_cost_agent@'127.0.0.1';
CREATE USER pd_cost_agent@'127.0.0.1' IDENTIFIED BY '$PW';
GRANT PROCESS, SELECT, REPLICA MONITOR ON *.* TO pd_cost_agent@'127.0.0.1';
CREATE DATABASE IF NOT EXISTS pd_cost;
CREATE OR REPLACE TABLE pd_cost.load (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB;
INSERT INTO pd_cost.load VALUES (1, 0), (2, 0), (3, 0);
SQL

# The light load: one session, a point SELECT and an indexed UPDATE once a second.
(while sleep 1; do echo "SELECT n FROM pd_cost.load WHERE id = 2; UPDATE pd_cost.load SET n = n + 1 WHERE id = 2;"; done |
    "$HERE/mariadb.sh" sql "$NAME" -N >/dev/null) &
load_pid=$!

# CPU time (µs), status reads (the samples: its `SHOW STATUS` statements less the watch reads),
# statements and connections of the agent's user so far, and its watch reads (`SHOW GLOBAL
# STATUS LIKE`, one statement each: the digests are not kept by user, and nothing else here
# sends that form).
counters() {
    local r
    r=$(sql -e "SELECT ROUND(CPU_TIME * 1000000),
        (SELECT COALESCE(SUM(COUNT_STAR), 0) FROM performance_schema.events_statements_summary_by_user_by_event_name
            WHERE USER = 'pd_cost_agent' AND EVENT_NAME = 'statement/sql/show_status')
        - (SELECT COALESCE(SUM(COUNT_STAR), 0) FROM performance_schema.events_statements_summary_by_digest
            WHERE DIGEST_TEXT LIKE 'SHOW GLOBAL STATUS LIKE%'),
        (SELECT COALESCE(SUM(COUNT_STAR), 0) FROM performance_schema.events_statements_summary_by_user_by_event_name
            WHERE USER = 'pd_cost_agent' AND EVENT_NAME LIKE 'statement/sql/%'),
        TOTAL_CONNECTIONS,
        (SELECT COALESCE(SUM(COUNT_STAR), 0) FROM performance_schema.events_statements_summary_by_digest
            WHERE DIGEST_TEXT LIKE 'SHOW GLOBAL STATUS LIKE%')
        FROM information_schema.USER_STATISTICS WHERE USER = 'pd_cost_agent'")
    echo "${r:-0 0 0 0 0}"
}

declare -A PER_MIN
SPANS=${POWERDIAG_CLIENTS_SPANS:-none off spaced}
# The length of span KEY: SECONDS, or KEY:SECONDS in POWERDIAG_CLIENTS_SPANS; 0 when not asked.
span_seconds() {
    local w
    for w in $SPANS; do
        case $w in
            "$1") echo "$SPAN"; return ;;
            "$1":*) echo "${w#*:}"; return ;;
        esac
    done
    echo 0
}
for w in $SPANS; do
    [[ $w =~ ^(none|off|spaced)(:[1-9][0-9]*)?$ ]] ||
        { echo "clients-cost.sh: POWERDIAG_CLIENTS_SPANS holds $w: use none, off and spaced, each optionally :SECONDS" >&2; exit 2; }
done
span() { # KEY LABEL SPACING
    local key=$1 label=$2 spacing=$3 c0 c1 samples watches base now nl=$'\n' secs beside
    secs=$(span_seconds "$key")
    [ "$secs" -gt 0 ] || return 0
    if [ -n "$BESIDE" ]; then
        # The same agent on the other instance, without clients, over the same span.
        POWERDIAG_CLIENTS_SPANS="none:$secs" POWERDIAG_CLIENTS_DOCTOR=0 POWERDIAG_CLIENTS_BESIDE='' \
            "$HERE/clients-cost.sh" "$BESIDE" "$BIN" "$secs" 1 "$INTERVAL" >"$work/beside" 2>&1 &
        beside_pid=$!
    fi
    # The timeout is the default 5 s, or half a shorter interval.
    printf '[sample]\ninterval = "%s"\ntimeout = "%sms"\nwindow = "0s"\n%s[probe]\nenabled = false\n' \
        "$INTERVAL" "$((${INTERVAL%s} > 10 ? 5000 : ${INTERVAL%s} * 500))" "${spacing:+spacing_connections = $spacing$nl}" >"$work/agent.toml"
    read -r _ base _ _ <<<"$(counters)"
    POWERDIAG_MARIADB_URL="mysql://pd_cost_agent:$PW@127.0.0.1:$PORT/" \
        "$BIN" agent --web.listen-address 127.0.0.1:0 --config.file "$work/agent.toml" >"$work/agent.log" 2>&1 &
    agent_pid=$!
    # The first two samples: start-up reads and the first spaced pause are left out.
    for _ in $(seq 600); do
        read -r _ now _ _ <<<"$(counters)"
        [ "$now" -ge $((base + 2)) ] && break
        [[ $(ps -o stat= -p "$agent_pid") != Z* ]] || { echo "clients-cost.sh: the agent stopped: $(tail -3 "$work/agent.log")" >&2; exit 1; }
        sleep 1
    done
    read -r -a c0 <<<"$(counters)"
    sleep "$secs"
    read -r -a c1 <<<"$(counters)"
    kill "$agent_pid"
    wait "$agent_pid" 2>/dev/null || true
    agent_pid=
    samples=$((c1[1] - c0[1])) watches=$((c1[4] - c0[4]))
    [ "$samples" -gt 0 ] || { echo "clients-cost.sh: no sample in $secs s ($label): lengthen SECONDS" >&2; exit 1; }
    PER_MIN[$key]=$(awk -v u="$((c1[0] - c0[0]))" -v s="$secs" 'BEGIN {printf "%.2f", u / 1e3 * 60 / s}')
    echo "clients-cost: $label: $samples samples in $secs s, $(awk -v u="$((c1[0] - c0[0]))" -v n="$samples" 'BEGIN {printf "%.2f", u / 1e3 / n}') ms of server CPU a sample (userstat on the agent's user), ${PER_MIN[$key]} ms a minute; $(awk -v q="$((c1[2] - c0[2]))" -v n="$samples" 'BEGIN {printf "%.2f", q / n}') statements a sample (watch reads included), $watches watch reads, $((c1[3] - c0[3])) new connections"
    [ -n "$beside_pid" ] || return 0
    wait "$beside_pid" || { echo "clients-cost.sh: the span beside it on $BESIDE failed: $(tail -3 "$work/beside")" >&2; exit 1; }
    beside_pid=
    beside=$(sed -n 's/^clients-cost: no other client.* ms of server CPU a sample (userstat on the agent.s user), \([0-9.]*\) ms a minute.*/\1/p' "$work/beside")
    [ -n "$beside" ] || { echo "clients-cost.sh: no result from the span beside it on $BESIDE: $(tail -3 "$work/beside")" >&2; exit 1; }
    echo "clients-cost: beside it, on $BESIDE: $(sed -n 's/^clients-cost: //p' "$work/beside")"
    echo "clients-cost: $label: $(awk -v a="${PER_MIN[$key]}" -v b="$beside" 'BEGIN {printf "%.2f", a / b}')× the agent's server CPU a minute on $BESIDE without clients over the same span (budget ≤ 1.5×)"
}

# Doctor too (`--no-probe --sample-window 0`), five runs as the same user: the median server CPU
# of a run (userstat: its statements, the connection's authentication left out).
doctor_cost() { # LABEL
    local c0 c1 runs=() q
    for _ in 1 2 3 4 5; do
        read -r -a c0 <<<"$(counters)"
        POWERDIAG_MARIADB_URL="mysql://pd_cost_agent:$PW@127.0.0.1:$PORT/" \
            "$BIN" doctor --no-probe --sample-window 0 --format json >/dev/null || true
        read -r -a c1 <<<"$(counters)"
        runs+=("$(awk -v u="$((c1[0] - c0[0]))" 'BEGIN {printf "%.1f", u / 1e3}')")
        q=$((c1[2] - c0[2]))
    done
    echo "clients-cost: doctor --no-probe --sample-window 0, $1: $(printf '%s\n' "${runs[@]}" | sort -n | sed -n 3p) ms of server CPU a run (median of 5: $(printf '%s\n' "${runs[@]}" | sort -n | paste -sd' ' -)), $q statements"
}

span none "no other client, agent every $INTERVAL" ""
[ "$DOCTOR" = 0 ] || doctor_cost "no other client"
if [ "$(span_seconds off)" = 0 ] && [ "$(span_seconds spaced)" = 0 ]; then exit 0; fi
coproc IDLE { /usr/bin/python3 "$HERE/lock-pileup.py" "$PORT" "$PW" "$CLIENTS"; }
# shellcheck disable=SC2153 # IDLE_PID is set by coproc
idle_pid=$IDLE_PID
read -r _ <&"${IDLE[0]}" # "idle ready"
connected=$(sql -e "SHOW GLOBAL STATUS LIKE 'Threads_connected'" | cut -f2)
[ "$DOCTOR" = 0 ] || doctor_cost "$connected connected ($CLIENTS idle)"
span off "$connected connected ($CLIENTS idle), agent every $INTERVAL, spacing off" 0
span spaced "$connected connected ($CLIENTS idle), agent every $INTERVAL, default spacing" ""
for k in off spaced; do
    if [ -z "${PER_MIN[$k]:-}" ] || [ -z "${PER_MIN[none]:-}" ]; then continue; fi
    echo "clients-cost: $CLIENTS idle clients, $([ $k = off ] && echo "spacing off" || echo "default spacing"): $(awk -v a="${PER_MIN[$k]}" -v b="${PER_MIN[none]}" 'BEGIN {printf "%.2f", a / b}')× the agent's server CPU a minute without them (budget ≤ 1.5×)"
done
