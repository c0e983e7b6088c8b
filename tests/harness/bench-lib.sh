# shellcheck shell=bash
# Shared by the benchmarks: tests/bench.sh, tests/harness/clients-cost.sh and
# tests/harness/lock-cost.sh. Sourced, never executed. The caller sets `set -euo pipefail`,
# BENCH_NAME (its tests/harness/mariadb.sh instance) and, before start_agent, BIN (a powerdiag
# binary), work (a scratch directory), BENCH_TAG (its name in messages) and
# POWERDIAG_MARIADB_URL (exported); it kills "$agent_pid" when it exits.

BENCH_HARNESS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# sql ARGS...: the mariadb client on the instance, no column names.
sql() { "$BENCH_HARNESS/mariadb.sh" sql "$BENCH_NAME" -N "$@"; }

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
