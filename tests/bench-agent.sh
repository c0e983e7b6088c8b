#!/usr/bin/env bash
# Benchmark of `powerdiag agent` against its budget: scrape latency (median, p99) over
# keep-alive loopback with wrk, agent CPU per scrape (from /proc/PID/stat over the run), resident
# memory, and SQL statements per sample. A measurement, not a test: it prints numbers.
#
#   POWERDIAG_MARIADB_URL=mysql://root:PW@127.0.0.1:PORT/ tests/bench-agent.sh [SECONDS]
#
# Needs wrk (`apt-get install wrk`) and a release build (`cargo build --release -p powerdiag`).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${POWERDIAG_BIN:-$ROOT/target/release/powerdiag}
DURATION=${1:-10}
: "${POWERDIAG_MARIADB_URL:?set POWERDIAG_MARIADB_URL to the server to watch}"
command -v wrk >/dev/null || { echo "bench-agent: wrk is missing (apt-get install wrk)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "bench-agent: $BIN is missing (cargo build --release -p powerdiag)" >&2; exit 1; }

work=$(mktemp -d /tmp/powerdiag-bench.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
printf '[sample]\ninterval = "15s"\ntimeout = "5s"\nwindow = "1s"\n' >"$work/agent.toml"
listen=127.0.0.1:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" agent --web.listen-address "$listen" --config.file "$work/agent.toml" --log.level warn 2>"$work/log" &
pid=$!
for _ in $(seq 100); do curl -fsS "http://$listen/metrics" 2>/dev/null | grep -q '^powerdiag_mariadb_up' && break; sleep 0.1; done

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
t0=$(ticks)
wrk -t1 -c1 -d"${DURATION}s" --latency "http://$listen/metrics" >"$work/wrk"
t1=$(ticks)
requests=$(awk '/requests in/ {print $1}' "$work/wrk")
p50=$(awk '$1 == "50%" {print $2}' "$work/wrk")
p99=$(awk '$1 == "99%" {print $2}' "$work/wrk")
cpu_us=$(awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v n="$requests" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}')
body=$(curl -fsS "http://$listen/metrics")
echo "agent $("$BIN" --version | awk '{print $2}') on $(uname -m), $(nproc) CPUs"
echo "scrapes:        $requests in ${DURATION} s; latency median $p50, p99 $p99 (wrk, keep-alive, loopback)"
echo "CPU per scrape: ${cpu_us} µs (agent utime+stime over the run, samples included)"
echo "resident:       $(rss) kB"
echo "per sample:     $(grep '^powerdiag_sample_sql_statements' <<<"$body" | awk '{print $2}') SQL statements, $(grep '^powerdiag_sample_duration_seconds' <<<"$body" | awk '{print $2}') s (1 s of it the OS window)"
echo "metrics body:   $(wc -c <<<"$body") bytes"
