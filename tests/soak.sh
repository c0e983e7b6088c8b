#!/usr/bin/env bash
# Soak test of `powerdiag agent`: scrapes /metrics 10 times a second while MariaDB is restarted
# every RESTART_EVERY seconds, then reports the agent's memory before and after, scrape latency
# (median, p99) and CPU per scrape. Fails when resident memory grows by more than
# POWERDIAG_SOAK_MAX_GROWTH_KB after the warm-up, or when a scrape fails.
#
#   tests/soak.sh                      # short variant (CI, from tests/run.sh): 30 s
#   POWERDIAG_SOAK_SECONDS=3600 tests/soak.sh    # long variant, an hour
#
# Needs a running test server (tests/run.sh starts them; or tests/harness/mariadb.sh start
# m1011 10.11 PORT and `eval "$(tests/harness/mariadb.sh env m1011)"`) and a built powerdiag.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BIN=${POWERDIAG_BIN:-$ROOT/target/debug/powerdiag}
NAME=${POWERDIAG_SOAK_SERVER:-m1011}
SECONDS_TOTAL=${POWERDIAG_SOAK_SECONDS:-30}
RESTART_EVERY=${POWERDIAG_SOAK_RESTART_EVERY:-10}
MAX_GROWTH_KB=${POWERDIAG_SOAK_MAX_GROWTH_KB:-2048}
PW=${POWERDIAG_IT_ROOT_PASSWORD:-powerdiag-it-root}
upper=$(printf '%s' "$NAME" | tr '[:lower:]' '[:upper:]')
port_var=POWERDIAG_IT_${upper}_PORT
PORT=${!port_var:?"$port_var is not set: start the test servers first (see the header of $0)"}
[ -x "$BIN" ] || { echo "soak: $BIN is missing; cargo build first" >&2; exit 1; }

work=$(mktemp -d /tmp/powerdiag-soak.XXXXXX)
agent_pid=
cleanup() {
    [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# The shipped configuration, as installed: a shorter window or timeout would hide a sample
# that cannot fit its budget (issue 16: a hung server kept reading as up).
cp "$ROOT/deploy/systemd/agent.toml" "$work/agent.toml"
listen=127.0.0.1:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
POWERDIAG_MARIADB_URL="mysql://root:$PW@127.0.0.1:$PORT/" \
    "$BIN" agent --web.listen-address "$listen" --config.file "$work/agent.toml" --log.level warn \
    2>"$work/agent.log" &
agent_pid=$!
for _ in $(seq 100); do curl -fsS "http://$listen/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$agent_pid/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$agent_pid/stat"; }

# Warm up: a few samples and scrapes, so allocator pools and caches reach their steady size.
for _ in $(seq 30); do curl -fsS -o /dev/null "http://$listen/metrics"; sleep 0.1; done
rss_before=$(rss_kb)
ticks_before=$(cpu_ticks)
echo "soak: agent pid $agent_pid on $listen, $SECONDS_TOTAL s at 10 scrapes/s, restarting $NAME every $RESTART_EVERY s; RSS after warm-up ${rss_before} kB"

end=$((SECONDS + SECONDS_TOTAL))
next_restart=$((SECONDS + RESTART_EVERY))
scrapes=0
failures=0
: >"$work/latency"
while [ "$SECONDS" -lt "$end" ]; do
    if [ "$SECONDS" -ge "$next_restart" ]; then
        ("$HERE/harness/mariadb.sh" stop "$NAME" >/dev/null 2>&1 &&
            "$HERE/harness/mariadb.sh" start "$NAME" 10.11 "$PORT" >/dev/null 2>&1) &
        next_restart=$((SECONDS + RESTART_EVERY))
    fi
    if t=$(curl -fsS -o /dev/null -w '%{time_total}' "http://$listen/metrics"); then
        echo "$t" >>"$work/latency"
    else
        failures=$((failures + 1))
    fi
    scrapes=$((scrapes + 1))
    sleep 0.1
done
wait $(jobs -p | grep -v "^$agent_pid$") 2>/dev/null || true
"$HERE/harness/mariadb.sh" start "$NAME" 10.11 "$PORT" >/dev/null 2>&1 || true

rss_after=$(rss_kb)
ticks=$(($(cpu_ticks) - ticks_before))
hz=$(getconf CLK_TCK)
read -r median p99 < <(sort -n "$work/latency" | awk '{a[NR]=$1} END {m=a[int((NR+1)/2)]; p=a[int(NR*0.99)]; if (p=="") p=a[NR]; printf "%.3f %.3f\n", m*1000, p*1000}')
cpu_ms=$(awk -v t="$ticks" -v hz="$hz" 'BEGIN {printf "%.0f", t * 1000 / hz}')
echo "soak: $scrapes scrapes, $failures failed; latency median ${median} ms, p99 ${p99} ms (curl, includes connection set-up)"
echo "soak: agent CPU ${cpu_ms} ms over the run (samples and scrapes together); RSS ${rss_before} kB -> ${rss_after} kB"
growth=$((rss_after - rss_before))
if [ "$failures" -gt 0 ]; then
    echo "soak: FAIL: $failures scrapes failed" >&2
    exit 1
fi
if [ "$growth" -gt "$MAX_GROWTH_KB" ]; then
    echo "soak: FAIL: resident memory grew by $growth kB (limit $MAX_GROWTH_KB kB)" >&2
    exit 1
fi
echo "soak: ok (RSS growth ${growth} kB, limit ${MAX_GROWTH_KB} kB)"
