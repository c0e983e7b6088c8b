#!/usr/bin/env bash
# Every number of docs/performance.md's own measures, in one command, on this machine:
#
#   tests/bench.sh
#
# A measurement, not a test: it prints numbers and their budgets and fails only when it cannot
# measure. It does its own set-up: system packages and the MariaDB 11.8 root
# (tests/harness/setup.sh), wrk, hyperfine and python3-pymysql (apt), a release build, its own MariaDB 11.8 on
# loopback (tests/harness/mariadb.sh, port POWERDIAG_BENCH_PORT, default 33190) under a temporary
# directory, three vector indexes, and later 10,000 tables (tests/harness/many-tables.sh). It
# stops that server and removes the directory whatever happens.
#
#   1. criterion: rules evaluation and snapshot JSON encode/decode (crates/rules/benches/rules.rs),
#      one host sample (crates/agent/benches/host_sample.rs);
#   2. doctor: wall time and CPU (hyperfine) with and without the probe and the sample window,
#      SQL statements (the server's Questions counter) and the server's CPU per run;
#   3. the agent: scrape latency median/p99 (wrk, keep-alive loopback), agent CPU per scrape
#      (/proc/PID/stat over the run), resident memory, SQL statements per sample (its own
#      counter and the server's Questions), the server's CPU per sample (the schedstat run time
#      of mariadbd's threads with the agent sampling every second, minus an idle baseline of the
#      same length), with the variables kept (the default) and read every sample; then what
#      each statement form for variables and status costs the server, sent once a second on
#      one connection, against a `DO 1` sent the same way; what one read of the
#      statement digests costs the server with 1,000 and with 10,000 distinct digests in the
#      table (the agent reading them every sample, against the agent with the reads off), and
#      the agent's memory meanwhile; what the lock read
#      (crates/agent/src/collect/mariadb/locks.rs) costs the server with 5,000 idle connections
#      (tests/harness/lock-pileup.py), with nothing waiting, a row-lock chain of 10 and a
#      metadata-lock pile-up of 10 under each holder source, and the agent's statements per
#      sample with nothing waiting and with the chain; with 5,000 idle clients and a light load
#      (tests/harness/clients-cost.sh): the agent's server CPU a sample and a minute at 15 s,
#      without the clients, with them unspaced and spaced by [sample] spacing_connections;
#   4. scale: 10,000 tables in 8 schemas plus 4 more vector indexes: doctor's wall time and
#      statements, one agent sample's collector time and statements;
#   5. grown to 100,000 tables and 100 vector indexes: the schema read's (PD705-PD708) server
#      CPU per statement (tests/harness/schema-cost.sh), doctor's server CPU above its
#      dictionary bound with and without the vector indexes and with every dictionary read,
#      the agent's resident memory after its first schema read (about 15 minutes to create the
#      tables the first time).
#
# Environment: POWERDIAG_BENCH_PORT (33190), POWERDIAG_BENCH_SECONDS (60: each of the idle and
# agent server-CPU runs), POWERDIAG_BENCH_SCRAPE_SECONDS (10: wrk), POWERDIAG_BENCH_FORM_SAMPLES
# (20: statements of each form), POWERDIAG_BENCH_LOCK_LOOPS (20: lock reads per loop),
# POWERDIAG_BENCH_TABLES (10000), POWERDIAG_BENCH_SCHEMA_TABLES (100000; 0 skips step 5),
# POWERDIAG_BENCH_CLIENT_SECONDS (600: each of the three spans of 5,000 idle clients; 0 skips it),
# POWERDIAG_BENCH_LOCK_CLIENTS (5000: idle connections during the lock read),
# POWERDIAG_BENCH_CRITERION=0 skips step 1.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
PORT=${POWERDIAG_BENCH_PORT:-33190}
SECONDS_CPU=${POWERDIAG_BENCH_SECONDS:-60}
SECONDS_SCRAPE=${POWERDIAG_BENCH_SCRAPE_SECONDS:-10}
FORM_SAMPLES=${POWERDIAG_BENCH_FORM_SAMPLES:-20}
LOCK_LOOPS=${POWERDIAG_BENCH_LOCK_LOOPS:-20}
TABLES=${POWERDIAG_BENCH_TABLES:-10000}
SCHEMA_TABLES=${POWERDIAG_BENCH_SCHEMA_TABLES:-100000}
CLIENT_SECONDS=${POWERDIAG_BENCH_CLIENT_SECONDS:-600}
LOCK_CLIENTS=${POWERDIAG_BENCH_LOCK_CLIENTS:-5000}
step() { printf '\n==> %s\n' "$*" >&2; }
say() { printf '%s\n' "$*" | tee -a "$work/summary"; }

step "set-up (tests/harness/setup.sh, wrk, hyperfine, python3-pymysql, release build)"
"$HERE/harness/setup.sh"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
if ! command -v wrk >/dev/null || ! command -v hyperfine >/dev/null || ! /usr/bin/python3 -c 'import pymysql' 2>/dev/null; then
    apt-get -y -q -o DPkg::Lock::Timeout=300 install --no-install-recommends wrk hyperfine python3-pymysql >/dev/null
fi
cargo build --release --locked -p powerdiag
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/powerdiag

work=$(mktemp -d /tmp/powerdiag-bench.XXXXXX)
chmod 755 "$work"
export POWERDIAG_IT_DIR=$work/servers
agent_pid=
cleanup() {
    local rc=$?
    [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null
    "$HERE/harness/mariadb.sh" stop bench >/dev/null 2>&1 || true
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT INT TERM

step "MariaDB 11.8 on 127.0.0.1:$PORT"
# Room for 5,000 idle clients (step 3) and 10,000 distinct digests (the 11.8 default keeps 5,000).
POWERDIAG_IT_MARIADB_OPTIONS="max_connections=6000 performance_schema_digests_size=20000" \
    "$HERE/harness/mariadb.sh" start bench 11.8 "$PORT"
eval "$("$HERE/harness/mariadb.sh" env bench)"
DB_PID=$(cat "$POWERDIAG_IT_BENCH_PIDFILE")
export POWERDIAG_MARIADB_URL="mysql://root:${POWERDIAG_IT_ROOT_PASSWORD:-powerdiag-it-root}@127.0.0.1:$PORT/"
BENCH_NAME=bench BENCH_TAG=bench
# shellcheck source=tests/harness/bench-lib.sh
. "$HERE/harness/bench-lib.sh"

step "vector data: three indexes (5,000 × 256-d, 2,000 × 128-d cosine, 1,000 × 64-d)"
python3 - <<'EOF' | sql
import random
random.seed(20261122)
print("CREATE DATABASE IF NOT EXISTS bench;")
for name, rows, dim, dist in [("docs", 5000, 256, "euclidean"), ("faq", 2000, 128, "cosine"), ("tags", 1000, 64, "euclidean")]:
    print(f"CREATE TABLE bench.{name} (id INT PRIMARY KEY, e VECTOR({dim}) NOT NULL, VECTOR INDEX (e) DISTANCE={dist}) ENGINE=InnoDB;")
    for start in range(0, rows, 250):
        vals = ",".join(
            "(%d,VEC_FromText('[%s]'))" % (i + 1, ",".join("%.4f" % random.gauss(0, 1) for _ in range(dim)))
            for i in range(start, min(rows, start + 250)))
        print(f"INSERT INTO bench.{name} VALUES {vals};")
    print(f"ANALYZE TABLE bench.{name};")
EOF

: >"$work/summary"
# shellcheck source=/dev/null
say "machine: $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.0f GB", $2 / 1048576}' /proc/meminfo), $(. /etc/os-release && echo "$PRETTY_NAME"), load at start $(cut -d' ' -f1-3 /proc/loadavg)"
say "server: $(sql -e 'SELECT VERSION()'), powerdiag $("$BIN" --version | awk '{print $2}') (release build)"

if [ "${POWERDIAG_BENCH_CRITERION:-1}" != 0 ]; then
    step "criterion benches"
    for b in "powerdiag-rules rules" "powerdiag-agent host_sample"; do
        # shellcheck disable=SC2086 # a package and a bench
        set -- $b
        cargo bench --locked -p "$1" --bench "$2" 2>/dev/null | tee "$work/criterion" |
            awk '/^[^ ].*time:|^[a-zA-Z].*$/ && !/Gnuplot|Benchmarking|Warming|Collecting|Analyzing|Found|outlier|change:|Performance|No change|mild|severe/' >&2
        awk '/time:/ {name = $0; sub(/ +time:.*/, "", name); if (name == "") name = prev; t = $0; sub(/.*time: +\[[^ ]+ [^ ]+ /, "", t); sub(/ [^ ]+ [^ ]+\]$/, "", t); printf "criterion: %-50s %s\n", name, t} {prev = $0}' "$work/criterion" |
            tee -a "$work/summary"
    done
fi

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Nanoseconds on CPU over every live thread of a process (finer than the 10 ms ticks).
run_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d", s}'; }
questions() { sql -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'QUESTIONS'"; }
hz=$(getconf CLK_TCK)

doctor_bench() { # LABEL ARGS...
    local label=$1
    shift
    hyperfine -N -i --warmup 2 --runs "${RUNS:-20}" --export-json "$work/h.json" -- "$BIN doctor --format json $*" >/dev/null 2>&1 || true
    python3 - "$work/h.json" "$label" <<'EOF' | tee -a "$work/summary"
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print("doctor %-44s wall %7.1f ms ± %.1f (median %.1f), CPU user %.1f + sys %.1f ms" % (
    sys.argv[2], r["mean"] * 1e3, r["stddev"] * 1e3, r["median"] * 1e3, r["user"] * 1e3, r["system"] * 1e3))
EOF
}
doctor_statements() { # LABEL ARGS...: statements and server CPU of one run (median of 5)
    local label=$1 q0 q1 n0 n1 stm=() cpu=()
    shift
    for _ in 1 2 3 4 5; do
        q0=$(questions) n0=$(run_ns "$DB_PID")
        "$BIN" doctor --format json "$@" >/dev/null || true
        n1=$(run_ns "$DB_PID") q1=$(questions)
        stm+=($((q1 - q0 - 1))) cpu+=($(((n1 - n0) / 1000)))
    done
    say "doctor $label: $(printf '%s\n' "${stm[@]}" | sort -n | sed -n 3p) SQL statements (server's Questions), server CPU $(printf '%s\n' "${cpu[@]}" | sort -n | sed -n 3p) µs (median of 5)"
}

step "doctor (hyperfine -N -i --warmup 2 --runs 20)"
doctor_bench "--no-probe --sample-window 0" --no-probe --sample-window 0
doctor_bench "--no-probe (1 s sample window)" --no-probe
doctor_bench "(defaults: probe, 1 s window)"
doctor_statements "--no-probe --sample-window 0" --no-probe --sample-window 0
doctor_statements "with the probe" --sample-window 0

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$agent_pid/status"; }

step "agent: scrapes (wrk -t1 -c1 -d${SECONDS_SCRAPE}s), a 15 s interval"
start_agent $'[sample]\ninterval = "15s"\ntimeout = "5s"\nwindow = "1s"\n'
sleep 2
t0=$(ticks "$agent_pid")
wrk -t1 -c1 -d"${SECONDS_SCRAPE}s" --latency "http://$listen/metrics" >"$work/wrk"
t1=$(ticks "$agent_pid")
requests=$(awk '/requests in/ {print $1}' "$work/wrk")
say "agent scrape latency: median $(awk '$1 == "50%" {print $2}' "$work/wrk"), p99 $(awk '$1 == "99%" {print $2}' "$work/wrk") over $requests scrapes (budget: median ≤ 1 ms)"
say "agent CPU per scrape: $(awk -v t="$((t1 - t0))" -v hz="$hz" -v n="$requests" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}') µs, samples included (budget ≤ 500 µs)"
say "agent resident memory: $(rss) kB after $requests scrapes (budget ≤ 10,240 kB)"
say "agent SQL statements per sample (its counter): $(metric powerdiag_sample_sql_statements), first sample (vector-index list) included"
say "agent metrics body: $(curl -fsS "http://$listen/metrics" | wc -c) bytes"
stop_agent

step "server CPU: idle ${SECONDS_CPU} s, then the agent sampling every 1 s (probe off) for ${SECONDS_CPU} s, twice"
sleep 1
i0=$(ticks "$DB_PID") in0=$(run_ns "$DB_PID") iq0=$(questions)
sleep "$SECONDS_CPU"
i1=$(ticks "$DB_PID") in1=$(run_ns "$DB_PID") iq1=$(questions)
agent_server_cpu() { # LABEL VARIABLES_REFRESH
    start_agent "$(printf '[sample]\ninterval = "1s"\ntimeout = "900ms"\nwindow = "0s"\nvariables_refresh = "%s"\n[probe]\nenabled = false\n' "$2")"
    sleep 1.5 # the first sample lists the vector indexes; measure the steady state
    local a0 a1 an0 an1 aq0 aq1
    a0=$(ticks "$DB_PID") an0=$(run_ns "$DB_PID") aq0=$(questions)
    sleep "$SECONDS_CPU"
    a1=$(ticks "$DB_PID") an1=$(run_ns "$DB_PID") aq1=$(questions)
    say "agent, $1: SQL statements per sample $(awk -v a="$((aq1 - aq0 - 1))" -v i="$((iq1 - iq0 - 1))" -v n="$SECONDS_CPU" 'BEGIN {printf "%.2f", (a - i) / n}') (the server's Questions over $SECONDS_CPU samples; last sample's own counter $(metric powerdiag_sample_sql_statements)) (budget ≤ 5)"
    say "agent, $1: server CPU per sample $(awk -v a="$((an1 - an0))" -v i="$((in1 - in0))" -v n="$SECONDS_CPU" 'BEGIN {printf "%.0f", (a - i) / 1e3 / n}') µs (schedstat of mariadbd's threads, minus idle); $(awk -v a="$((a1 - a0))" -v i="$((i1 - i0))" -v hz="$hz" -v n="$SECONDS_CPU" 'BEGIN {printf "%.0f", (a - i) * 1e6 / hz / n}') µs (utime+stime ticks: $((a1 - a0)) with the agent, $((i1 - i0)) idle) (budget ≤ 500 µs)"
    say "agent, $1: sample duration $(metric powerdiag_sample_duration_seconds) s (no OS window)"
    stop_agent
}
# The default keeps the variables until the status read shows a setting change (any SET, a
# plugin, a buffer-pool resize), 10 minutes at the longest: nothing here sends a SET, so every
# steady sample is the status read alone. "0s" reads them every sample.
agent_server_cpu "variables kept until a setting changes (the default)" 10m
agent_server_cpu "variables every sample (variables_refresh = 0)" 0s

step "statement digests: one read (two statements) with 1,000, then 10,000 distinct digests in the table"
# 1,000 distinct application digests (the alias is part of the digest), then the agent sampling
# every second with the digest table read every sample, against the agent with the reads off:
# the difference per sample is what one read costs the server (the SQL is the collector's own).
# Then the same at 10,000, and the agent's memory with the read on at each size (it keeps the
# busiest [statements] limit, 100, of each read as the next one's baseline).
digest_read_cpu() { # ENABLED: prints mariadbd ns per sample; the agent's VmRSS (kB) at its end in $work/digest_rss
    start_agent "$(printf '[sample]\ninterval = "1s"\ntimeout = "900ms"\nwindow = "0s"\nvariables_refresh = "1h"\n[probe]\nenabled = false\n[statements]\nenabled = %s\ninterval = "1s"\n' "$1")"
    sleep 2.5 # the first samples list the vector indexes and take the first digest read
    local n0 n1
    n0=$(run_ns "$DB_PID")
    sleep "$SECONDS_CPU"
    n1=$(run_ns "$DB_PID")
    rss >"$work/digest_rss"
    stop_agent
    echo $(((n1 - n0) / SECONDS_CPU))
}
for digests in 1000 10000; do
    for ((i = 1; i <= digests; i++)); do echo "SELECT $i AS c$i;"; done | sql -D powerdiag_it >/dev/null
    say "digests in the table: $(sql -e "SELECT COUNT(*) FROM performance_schema.events_statements_summary_by_digest") (performance_schema_digests_size $(sql -e "SELECT @@performance_schema_digests_size"))"
    without=$(digest_read_cpu false)
    rss_without=$(cat "$work/digest_rss")
    with=$(digest_read_cpu true)
    say "statement digests: one read (aggregate + busiest 100 of $digests digests) costs $(((with - without) / 1000)) µs of server CPU (agent sample with the read $((with / 1000)) µs, without $((without / 1000)) µs; schedstat over ${SECONDS_CPU} samples each) (budget at 1,000: < 1,000 µs)"
    say "statement digests: the agent's VmRSS after ${SECONDS_CPU} reads of $digests digests $(cat "$work/digest_rss") kB, without the read $rss_without kB (budget ≤ 16 MB, bounded by [statements] limit)"
done

step "server CPU per statement form: one statement a second on one connection, ${FORM_SAMPLES} times each"
# What each way of reading variables and status costs mariadbd, against a trivial statement sent
# the same way (docs/performance.md: why the status read is the floor of an agent sample). Each statement is
# followed by a marker SELECT so the reply is known to be complete; "DO 1" carries the same.
names() { sed -n "/pub enum $1 {/,/^    }/p" "$ROOT/crates/rules/src/var.rs" | grep -o '=> "[a-z0-9_]*"' | cut -d'"' -f2; }
in_list() { names "$1" | sed "s/.*/'&'/" | paste -sd, -; }
at_list() { names Var | sed 's/^/@@global./' | paste -sd, -; }
form_cost() { # SQL: prints mariadbd ns (all threads, minus idle) per statement
    local t0 t1 line i
    coproc FORM { sql --skip-ssl -B -n 2>&1; }
    echo "SELECT 'ready';" >&"${FORM[1]}"
    while read -r line <&"${FORM[0]}"; do [ "$line" = ready ] && break; done
    t0=$(run_ns "$DB_PID")
    for ((i = 0; i < FORM_SAMPLES; i++)); do
        sleep 1
        echo "$1; SELECT 'done';" >&"${FORM[1]}"
        while read -r line <&"${FORM[0]}"; do [ "$line" = "done" ] && break; done
    done
    t1=$(run_ns "$DB_PID")
    eval "exec ${FORM[1]}>&-"
    wait "$FORM_PID" 2>/dev/null || true
    echo $(((t1 - t0 - (in1 - in0) * FORM_SAMPLES / SECONDS_CPU) / FORM_SAMPLES))
}
base=$(form_cost "DO 1")
say "statement form: DO 1 (with the marker): $((base / 1000)) µs of server CPU per statement, once a second"
for form in \
    "SHOW GLOBAL STATUS WHERE Variable_name IN ($(in_list StatusVar))" \
    "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ($(in_list StatusVar))" \
    "SHOW GLOBAL STATUS LIKE 'handler_read_last'" \
    "SHOW GLOBAL VARIABLES WHERE Variable_name IN ($(in_list Var))" \
    "SELECT $(at_list)"; do
    c=$(form_cost "$form")
    say "statement form: +$(((c - base) / 1000)) µs over DO 1: ${form:0:90}$([ ${#form} -gt 90 ] && echo ...)"
done

step "lock read: server CPU with $LOCK_CLIENTS idle connections (tests/harness/lock-cost.sh)"
"$HERE/harness/lock-cost.sh" bench "$BIN" "$LOCK_CLIENTS" "$LOCK_LOOPS" | tee -a "$work/summary"

if [ "$CLIENT_SECONDS" -gt 0 ]; then
    step "5,000 idle clients and a light load: the agent every 15 s, ${CLIENT_SECONDS} s spans (tests/harness/clients-cost.sh)"
    "$HERE/harness/clients-cost.sh" bench "$BIN" "$CLIENT_SECONDS" 5000 15s | tee -a "$work/summary"
fi

step "scale: $TABLES tables (tests/harness/many-tables.sh)"
s=$(date +%s.%N)
"$HERE/harness/many-tables.sh" bench "$TABLES" 8 4
say "generator: $TABLES tables in 8 schemas + 4 vector indexes in $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
RUNS=5 doctor_bench "at scale, --no-probe --sample-window 0" --no-probe --sample-window 0
RUNS=5 doctor_bench "at scale (defaults: probe, 1 s window)"
doctor_statements "at scale, --no-probe --sample-window 0" --no-probe --sample-window 0
start_agent $'[sample]\ninterval = "2s"\ntimeout = "1500ms"\nwindow = "0s"\n[probe]\nenabled = false\n'
first=$(curl -fsS "http://$listen/metrics")
sleep 2.5
later=$(curl -fsS "http://$listen/metrics")
collectors() { awk '/^powerdiag_collector_duration_seconds\{collector="mariadb/ {match($0, /"[^"]+"/); printf "%s %.1f ms, ", substr($0, RSTART + 1, RLENGTH - 2), $2 * 1e3}'; }
stmts() { awk '$1 == "powerdiag_sample_sql_statements" {print $2}'; }
say "agent sample at scale, first (lists $(sql -e "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE 'pd\\_scale\\_%' OR TABLE_SCHEMA = 'bench'") tables' vector indexes): $(collectors <<<"$first")$(stmts <<<"$first") statements"
say "agent sample at scale, steady: $(collectors <<<"$later")$(stmts <<<"$later") statements"
stop_agent

if [ "$SCHEMA_TABLES" -gt 0 ]; then
    step "the schema read at $SCHEMA_TABLES tables (tests/harness/many-tables.sh, tests/harness/schema-cost.sh)"
    s=$(date +%s.%N)
    "$HERE/harness/many-tables.sh" bench "$SCHEMA_TABLES" 8 100
    say "generator: grown to $SCHEMA_TABLES tables and 100 vector indexes in $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
    "$HERE/harness/schema-cost.sh" bench 3 | tee -a "$work/summary"
    # Doctor above its dictionary bound (20,000 tables), on the server's host: the InnoDB size
    # and the vector graph tables from the data directory (budgets: 50 ms without vector
    # indexes — the collector off sends what a server without them gets —, 100 ms with 100).
    doctor_statements "at $SCHEMA_TABLES tables and 100 vector indexes, --no-probe --sample-window 0 (budget ≤ 100 ms)" --no-probe --sample-window 0
    doctor_statements "at $SCHEMA_TABLES tables, without the vector indexes (budget ≤ 50 ms)" --no-probe --sample-window 0 --no-collector.mariadb_vector_indexes
    doctor_statements "at $SCHEMA_TABLES tables, every dictionary read (--dictionary-max-tables 1000000)" --no-probe --sample-window 0 --dictionary-max-tables 1000000
    start_agent $'[sample]\ninterval = "10s"\nwindow = "0s"\n[probe]\nenabled = false\n'
    sleep 30
    say "agent at $SCHEMA_TABLES tables after its first schema read: VmRSS $(rss) kB, anonymous $(awk '/^RssAnon:/ {print $2}' "/proc/$agent_pid/status") kB, peak $(awk '/^VmHWM:/ {print $2}' "/proc/$agent_pid/status") kB (budget ≤ 16 MB)"
    stop_agent
fi

step "summary"
cat "$work/summary"
