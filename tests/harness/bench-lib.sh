# shellcheck shell=bash
# Shared by the benchmarks: tests/bench.sh, tests/harness/clients-cost.sh and
# tests/harness/lock-cost.sh. Sourced, never executed. The caller sets `set -euo pipefail`,
# BENCH_NAME (its tests/harness/mariadb.sh instance), BENCH_TAG (its name in messages) and, before
# bench_instance or start_agent, BIN (a powerdiag binary); before start_agent also work (a
# scratch directory) and POWERDIAG_MARIADB_URL (exported). It kills "$agent_pid" when it exits.

BENCH_HARNESS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# sql ARGS...: the mariadb client on the instance, no column names.
sql() { "$BENCH_HARNESS/mariadb.sh" sql "$BENCH_NAME" -N "$@"; }

# bench_instance: the checks a benchmark on a running instance starts with — BIN an executable,
# BENCH_NAME running (tests/harness/mariadb.sh status) — each failing with exit 2 and the fix, named
# by BENCH_TAG; sets PW (the harness's root password) and PORT (the instance's).
# shellcheck disable=SC2034 # PW and PORT are the caller's
bench_instance() {
    [ -x "$BIN" ] || { echo "$BENCH_TAG: $BIN is not an executable powerdiag (cargo build --release first)" >&2; exit 2; }
    bench_running "$BENCH_NAME" ||
        { echo "$BENCH_TAG: no running instance $BENCH_NAME (tests/harness/mariadb.sh start $BENCH_NAME 11.8 PORT, with the same POWERDIAG_IT_DIR)" >&2; exit 2; }
    PW=${POWERDIAG_IT_ROOT_PASSWORD:-powerdiag-it-root}
    PORT=$(env_of PORT)
}

# bench_running NAME: whether the instance NAME (same POWERDIAG_IT_DIR) is running.
bench_running() { "$BENCH_HARNESS/mariadb.sh" status "$1" >/dev/null 2>&1; }

# env_of KEY: the instance's POWERDIAG_IT_<NAME>_<KEY> (PORT, PIDFILE, ...); empty when there is none.
env_of() { "$BENCH_HARNESS/mariadb.sh" env "$BENCH_NAME" | sed -n "s/^export POWERDIAG_IT_[A-Z0-9_]*_$1=//p" | tr -d "'\""; }

# start_agent CONFIG: `powerdiag agent` with CONFIG (TOML) on a free local port, its log in
# $work/agent.log; returns once it has published a sample, sets agent_pid and listen.
# shellcheck disable=SC2154 # BIN and work are the caller's
start_agent() {
    printf '%s' "$1" >"$work/agent.toml"
    listen=127.0.0.1:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$BIN" agent --web.listen-address "$listen" --config.file "$work/agent.toml" --log.level warn 2>"$work/agent.log" &
    agent_pid=$!
    for _ in $(seq 100); do curl -fsS "http://$listen/metrics" 2>/dev/null | grep -q '^powerdiag_mariadb_up 1' && return; sleep 0.1; done
    echo "$BENCH_TAG: the agent did not publish a sample" >&2
    cat "$work/agent.log" >&2
    exit 1
}
stop_agent() { kill "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=; }

# metric NAME: the value of one series (NAME with its labels, as exposed) of the running agent.
metric() { curl -fsS "http://$listen/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
