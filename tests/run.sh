#!/usr/bin/env bash
# Runs every powerdiag test, doing all set-up on a fresh Debian 12 machine:
#   1. tests/harness/setup.sh: system packages, Rust if missing, the MariaDB 11.8 root (cached);
#      then tests/harness/verify-setup.sh proves its package list suffices on a clean Debian 12
#      root (cached per list), so a package missing from it fails here and not on a new machine;
#      tests/harness/orm.sh setup: Django, SQLAlchemy and PyMySQL in a virtualenv (cached) for the
#      statement tests;
#   2. cargo fmt --check, clippy -D warnings, cargo deny (bans, licences, sources; advisories
#      when GitHub is reachable), cargo check of every target for ppc64le, and the AIX compile
#      check of perfstat-sys with its bindings check (crates/perfstat-sys/ci-check.sh; bindgen-cli
#      0.73.2 installed once); the build; static (musl) debug
#      builds for arm64 and ppc64le run under qemu-user on every recorded tree and example
#      snapshot against the native build (tests/cross.sh), then the same debug builds on Debian
#      bookworm's ppc64el and arm64 kernels booted under QEMU 10 (tests/qemu-system.sh: a pseries
#      POWER9 guest, SMT4 then SMT1, and a virt Cortex-A72 guest, two NUMA nodes each): their
#      facts equal the kernel's files of the same boot and their recorded trees' replay;
#   3. starts MariaDB 11.8 (m118), 10.11 (m1011), a second 10.11 for the hung-server test
#      (hang), a second 11.8 for the 10,000-table statement count (scale), and the others listed
#      below, among them an 11.8 and a 10.11 with default options under a sysbench load
#      (nofa118, nofa1011) on loopback ports under a temporary directory;
#   4. the .deb and .rpm of the debug build (tests/package.sh): their files and scripts, and the
#      .deb installed into a copy of the clean Debian 12 root, where doctor and the agent run
#      against m1011; cargo test --workspace (unit tests and tests/it against those servers,
#      and a real Prometheus), then tests/soak.sh's short variant;
#   5. stops the servers and removes the directory, whatever happened.
#
# Environment: POWERDIAG_IT_PORT_BASE (default 23100, below the kernel's ephemeral range: m118 = +18, m1011 = +10, hang = +11,
# scale = +19, evict = +17, stmt118 = +20, stmt1011 = +12, tiny = +13 (on a tmpfs),
# pitmem = +21, pitsql = +22, tls = +14 (TLS with tests/harness/tls.sh's certificates), tlsname =
# +15 (its certificate names another host), nofa118 = +16 and nofa1011 = +23 (default options,
# tests/it/no_false_alarms.rs runs sysbench on them), lock118 = +24 and lock1011 = +25 (lock
# queues and deadlocks of tests/it/locks.rs), sat118 = +26 (tests/it/saturation.rs puts it in a
# CPU-limited cgroup), jrn118 = +27 (logs to a private systemd journal: tests/harness/journald.sh,
# tests/it/error_log.rs), schema118 = +28 and schema1011 = +29 (tests/it/schema.rs builds and
# fixes a schema on them), rp118 = +30 → rr118 = +31 and rp1011 = +32 → rr1011 = +33 (GTID
# primaries and their replicas: tests/it/replication.rs), gal1..gal3 = +34..+36 with their group
# communication on +37..+39, IST on +40..+42 and SST on +44..+46 (a Galera cluster:
# tests/harness/galera.sh, tests/it/galera.rs), ms118 = +43 (a second primary of rr118: multi-source); the packaged agent
# = +9),
# POWERDIAG_IT_KEEP=1 keeps the servers' directory for post-mortems.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
# Each step prints its start and, when the next one starts (or the script ends), its elapsed time:
# CI's limit is 90 minutes; the whole run should stay under ~40 on a 2-core machine.
RUN_T0=$SECONDS
STEP_NAME="" STEP_T0=$SECONDS
step_end() {
    if [ -n "$STEP_NAME" ]; then
        printf '==> %s: %d s (total %d s)\n' "$STEP_NAME" $((SECONDS - STEP_T0)) $((SECONDS - RUN_T0)) >&2
    fi
    STEP_NAME=""
}
step() {
    step_end
    STEP_NAME=$* STEP_T0=$SECONDS
    printf '\n==> %s\n' "$*" >&2
}
fail() { printf 'run.sh: %s\n' "$*" >&2; exit 1; }

step "set-up (tests/harness/setup.sh)"
"$HERE/harness/setup.sh"

step "set-up check: packages.txt on a clean Debian 12 root (tests/harness/verify-setup.sh)"
"$HERE/harness/verify-setup.sh"
"$HERE/harness/orm.sh" setup
# rustup puts cargo in ~/.cargo/bin; a fresh login shell may not have it on PATH yet.
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
if command -v rustup >/dev/null 2>&1; then
    # fmt/clippy; rust-src for the AIX check (-Zbuild-std=core); the cross-check targets.
    rustup component add rustfmt clippy rust-src >/dev/null
    rustup target add powerpc64le-unknown-linux-gnu aarch64-unknown-linux-gnu >/dev/null
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo deny: duplicate versions, licences, sources (deny.toml)"
# Installed once (a few minutes of CPU); --locked builds it with its own tested lock file.
command -v cargo-deny >/dev/null 2>&1 || cargo install --locked cargo-deny
cargo deny --locked check bans licenses sources
# The advisory database is cloned from GitHub. Without network that fetch fails, which says
# nothing about our dependencies: reported, not failed. Once fetched, an advisory fails the run.
if cargo deny --locked fetch db; then
    cargo deny --locked --offline check advisories
else
    printf 'cargo deny: the advisory database (github.com/rustsec/advisory-db) could not be fetched; advisories NOT checked\n' >&2
fi

step "cross checks: every target for ppc64le, and perfstat-sys for AIX"
# The bindings check (regen.sh --check) needs the bindgen that wrote them; clang and
# libclang-dev come from packages.txt.
if [ "$(bindgen --version 2>/dev/null)" != "bindgen 0.73.2" ]; then
    cargo install --locked bindgen-cli --version 0.73.2
fi
cargo check --workspace --all-targets --locked --target powerpc64le-unknown-linux-gnu
crates/perfstat-sys/ci-check.sh

step "build"
cargo build --workspace --all-targets --locked

# Static musl builds for the other architectures, executed: tests/release.sh builds the
# release versions and the packages of all three.
CROSS_TARGETS=(aarch64-unknown-linux-musl powerpc64le-unknown-linux-musl)
step "static builds for arm64 and ppc64le (tests/cross.sh build dev)"
"$HERE/cross.sh" build dev "${CROSS_TARGETS[@]}"

step "arm64 and ppc64le under qemu-user: every recorded tree and example as the native build (tests/cross.sh check dev)"
"$HERE/cross.sh" check dev "${CROSS_TARGETS[@]}"

step "arm64 and ppc64le on Debian's own kernels under QEMU full-system emulation (tests/qemu-system.sh run)"
"$HERE/qemu-system.sh" run

base=${POWERDIAG_IT_PORT_BASE:-23100}
if ! [[ $base =~ ^[0-9]+$ ]] || [ "$base" -lt 1024 ] || [ "$base" -gt 65500 ]; then
    fail "POWERDIAG_IT_PORT_BASE must be a number from 1024 to 65500 (got '$base')"
fi
# Below the kernel's ephemeral ports: a client that keeps connecting to a port nobody listens on
# yet (a Galera node to its peers, a replica to its stopped primary) is given ephemeral source
# ports one after another, and when one equals the destination TCP connects the socket to itself
# and holds the port, so the server it waits for cannot bind it (a CI run lost gal3 that way).
read -r eph_lo eph_hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || eph_lo=
if [ -n "$eph_lo" ] && [ $((base + 46)) -ge "$eph_lo" ] && [ $((base + 9)) -le "$eph_hi" ]; then
    printf 'run.sh: warning: test ports %s..%s overlap the ephemeral ports %s..%s (net.ipv4.ip_local_port_range): a retrying client can take a server'"'"'s port; choose POWERDIAG_IT_PORT_BASE below %s\n' \
        $((base + 9)) $((base + 46)) "$eph_lo" "$eph_hi" $((eph_lo - 46)) >&2
fi
# name:offset of every test server; checked before anything starts so a busy port is one clear error.
SERVER_PORTS=(m118:18 m1011:10 hang:11 scale:19 evict:17 stmt118:20 stmt1011:12 tiny:13 pitmem:21 pitsql:22 tls:14 tlsname:15 nofa118:16 nofa1011:23 lock118:24 lock1011:25 sat118:26 jrn118:27 schema118:28 schema1011:29 rp118:30 rr118:31 rp1011:32 rr1011:33 gal1:34 gal2:35 gal3:36 ms118:43)
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
busy=()
for sp in "${SERVER_PORTS[@]}"; do
    port=$((base + ${sp#*:}))
    # A left-over instance of our own (same name, same port) is reused by mariadb.sh start.
    if port_in_use "$port" && ! "$HERE/harness/mariadb.sh" status "${sp%%:*}" 2>/dev/null | grep -q "port=$port "; then
        busy+=("$port (${sp%%:*})")
    fi
done
# The agent installed from the .deb (tests/package.sh) listens on base + 9; the Galera nodes'
# group communication, IST and SST receivers on base + 37..42 and 44..46.
if port_in_use $((base + 9)); then busy+=("$((base + 9)) (packaged agent)"); fi
for off in 37 38 39 40 41 42 44 45 46; do
    if port_in_use $((base + off)); then busy+=("$((base + off)) (Galera group communication/IST/SST)"); fi
done
[ "${#busy[@]}" -eq 0 ] ||
    fail "port(s) in use on 127.0.0.1: ${busy[*]}; stop what holds them (ss -ltnp) or move the test servers with POWERDIAG_IT_PORT_BASE=N (ports N+9..N+46; default 23100)"
export POWERDIAG_IT_DIR
POWERDIAG_IT_DIR=$(mktemp -d /tmp/powerdiag-it.XXXXXX)
chmod 755 "$POWERDIAG_IT_DIR"
SERVERS=(m118 m1011 hang scale evict stmt118 stmt1011 tiny pitmem pitsql tls tlsname nofa118 nofa1011 lock118 lock1011 sat118 jrn118 schema118 schema1011 rp118 rr118 rp1011 rr1011 ms118)
cleanup() {
    local rc=$?
    step "stopping test servers"
    trap - EXIT
    for s in "${SERVERS[@]}"; do "$HERE/harness/mariadb.sh" stop "$s" || true; done
    "$HERE/harness/galera.sh" stop 2>/dev/null || true
    "$HERE/harness/cpu-cgroup.sh" leave sat118 2>/dev/null || true
    "$HERE/harness/cpu-cgroup.sh" leave gal3 2>/dev/null || true
    "$HERE/harness/journald.sh" stop "$POWERDIAG_IT_JOURNAL_DIR" 2>/dev/null || true
    umount "$POWERDIAG_IT_DIR/tiny" 2>/dev/null || true
    if [ "${POWERDIAG_IT_KEEP:-0}" = 1 ]; then
        echo "kept $POWERDIAG_IT_DIR" >&2
    else
        rm -rf "$POWERDIAG_IT_DIR"
    fi
    step_end
    printf '==> run.sh: %s after %d s\n' "$([ "$rc" = 0 ] && echo passed || echo "FAILED (exit $rc)")" $((SECONDS - RUN_T0)) >&2
    exit "$rc"
}
trap cleanup EXIT INT TERM

step "starting MariaDB 11.8 (fifteen, and a three-node Galera cluster) and 10.11 (ten) under $POWERDIAG_IT_DIR"
start_server() { # NAME FLAVOUR OFFSET [WRAPPER...]: in the background, output to $POWERDIAG_IT_DIR/NAME.start.log
    "${@:4}" "$HERE/harness/mariadb.sh" start "$1" "$2" $((base + $3)) >"$POWERDIAG_IT_DIR/$1.start.log" 2>&1 &
    START_PIDS+=("$!:$1")
}
START_PIDS=()
start_server m118 11.8 18
start_server m1011 10.11 10
start_server hang 10.11 11
start_server scale 11.8 19
# evict: restarted by tests/it/evicted_stats.rs, whose undersized vector cache must survive that.
POWERDIAG_IT_MARIADB_OPTIONS=mhnsw_max_cache_size=1M start_server evict 11.8 17
# stmt118, stmt1011: performance_schema ON, owned by tests/it/statements.rs (it resets the
# digest table and drives an ORM application).
start_server stmt118 11.8 20
# tiny: a 10.11 whose datadir is on a 320 MiB tmpfs, which tests/it/storage.rs fills past
# PD801's limit (and frees again).
mkdir -p "$POWERDIAG_IT_DIR/tiny"
mount -t tmpfs -o size=320m,mode=755 tmpfs "$POWERDIAG_IT_DIR/tiny" ||
    fail "could not mount a tmpfs for the tiny server (run.sh runs as root on Debian 12)"
POWERDIAG_IT_MARIADB_OPTIONS="innodb_log_file_size=16M innodb_buffer_pool_size=32M" start_server tiny 10.11 13
POWERDIAG_IT_MARIADB_PFS=ON start_server stmt1011 10.11 12
# pitmem, pitsql: owned by tests/it/server_pitfalls.rs, which changes their globals under load
# (issue 14's pitfalls); pitsql starts with the query cache on, which SET GLOBAL cannot do.
start_server pitmem 11.8 21
POWERDIAG_IT_MARIADB_OPTIONS="query_cache_type=ON query_cache_size=16M" start_server pitsql 10.11 22
# tls: an 11.8 with ssl_ca/ssl_cert/ssl_key from a throw-away PKI, owned by tests/it/tls.rs
# (REQUIRE SSL and REQUIRE X509 accounts).
export POWERDIAG_IT_TLS_CERTS=$POWERDIAG_IT_DIR/tls-certs
"$HERE/harness/tls.sh" certs "$POWERDIAG_IT_TLS_CERTS"
POWERDIAG_IT_MARIADB_OPTIONS="$("$HERE/harness/tls.sh" server-options "$POWERDIAG_IT_TLS_CERTS")" start_server tls 11.8 14
# tlsname: the same CA, a certificate naming another host (VERIFY_CA against VERIFY_IDENTITY)
POWERDIAG_IT_MARIADB_OPTIONS="$("$HERE/harness/tls.sh" server-options "$POWERDIAG_IT_TLS_CERTS" wrongname)" start_server tlsname 11.8 15
# nofa118, nofa1011: the harness's default options, owned by tests/it/no_false_alarms.rs, which
# runs sysbench oltp_read_write (tests/harness/sysbench.sh) on them and wants no failing warning
# or critical verdict from doctor or the agent.
start_server nofa118 11.8 16
start_server nofa1011 10.11 23
# lock118, lock1011: owned by tests/it/locks.rs, which queues sessions on row and metadata
# locks, provokes deadlocks and switches the metadata-lock sources on and off.
start_server lock118 11.8 24
start_server lock1011 10.11 25
# sat118: owned by tests/it/saturation.rs, which moves it into a CPU-limited cgroup
# (tests/harness/cpu-cgroup.sh) under sysbench and lifts the limit again.
start_server sat118 11.8 26
# jrn118: log_error empty, its stderr in a private systemd journal (journald in a mount namespace
# of its own, tests/harness/journald.sh); owned by tests/it/error_log.rs, which crashes it.
export POWERDIAG_IT_JOURNAL_DIR=$POWERDIAG_IT_DIR/journal
"$HERE/harness/journald.sh" start "$POWERDIAG_IT_JOURNAL_DIR"
POWERDIAG_IT_LOG=journal start_server jrn118 11.8 27 "$HERE/harness/journald.sh" exec "$POWERDIAG_IT_JOURNAL_DIR"
# schema118, schema1011: owned by tests/it/schema.rs, which builds a schema with a redundant
# index, a table without a primary key and an Aria table on each, and applies the fixes.
start_server schema118 11.8 28
start_server schema1011 10.11 29
# rp118 → rr118, rp1011 → rr1011: GTID primaries (binary log, ROW format) and their replicas,
# owned by tests/it/replication.rs, which points each replica at its primary and stops,
# breaks and restarts replication.
POWERDIAG_IT_MARIADB_OPTIONS="log_bin=mariadb-bin server_id=1 binlog_format=ROW" start_server rp118 11.8 30
POWERDIAG_IT_MARIADB_OPTIONS="server_id=2" start_server rr118 11.8 31
POWERDIAG_IT_MARIADB_OPTIONS="log_bin=mariadb-bin server_id=1 binlog_format=ROW" start_server rp1011 10.11 32
POWERDIAG_IT_MARIADB_OPTIONS="server_id=2" start_server rr1011 10.11 33
# ms118: a second GTID primary (domain 3) for rr118's second replication connection
# (multi-source, tests/it/replication.rs).
POWERDIAG_IT_MARIADB_OPTIONS="log_bin=mariadb-bin server_id=3 gtid_domain_id=3 binlog_format=ROW" start_server ms118 11.8 43
# gal1..gal3: a three-node Galera cluster of 11.8 (its nodes start one after the other),
# owned by tests/it/galera.rs, which kills, restarts and CPU-limits its nodes.
"$HERE/harness/galera.sh" start $((base + 34)) >"$POWERDIAG_IT_DIR/galera.start.log" 2>&1 &
START_PIDS+=("$!:galera")
# Wait for every start (each is checked: no `wait a && wait b`, where set -e ignores all but the last)
# and stop at once, with the server's own error, if any failed.
failed=()
for pn in "${START_PIDS[@]}"; do
    if ! wait "${pn%%:*}"; then failed+=("${pn#*:}"); fi
done
for s in "${SERVERS[@]}" galera; do cat "$POWERDIAG_IT_DIR/$s.start.log" >&2; done
[ "${#failed[@]}" -eq 0 ] || fail "test server(s) failed to start: ${failed[*]} (their errors are above); not running the tests"
for s in "${SERVERS[@]}"; do
    eval "$("$HERE/harness/mariadb.sh" env "$s")"
done
eval "$("$HERE/harness/galera.sh" env)"

step "packages: the .deb in a clean Debian 12 root, the .rpm with rpm tools (tests/package.sh)"
POWERDIAG_PACKAGE_MARIADB_PORT=$((base + 10)) POWERDIAG_PACKAGE_PORT=$((base + 9)) \
    "$HERE/package.sh" --profile dev --out "$POWERDIAG_IT_DIR/packages"

step "cargo test"
cargo test --workspace --locked -- --test-threads "${POWERDIAG_TEST_THREADS:-4}"

step "agent soak, short variant (restarts m1011 while scraping at 10/s)"
"$HERE/soak.sh"
