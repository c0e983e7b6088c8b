#!/usr/bin/env bash
# Runs every powerdiag test, doing all set-up on a fresh Debian 12 machine:
#   1. tests/harness/setup.sh: system packages, Rust if missing, the MariaDB 11.8 root (cached);
#      tests/harness/orm.sh setup: Django and PyMySQL in a virtualenv (cached) for the
#      statement tests;
#   2. cargo fmt --check, clippy -D warnings, cargo check for ppc64le and arm64, and the AIX
#      compile check of perfstat-sys (crates/perfstat-sys/ci-check.sh);
#   3. starts MariaDB 11.8 (m118), 10.11 (m1011), a second 10.11 for the hung-server test
#      (hang) and a second 11.8 for the 10,000-table statement count (scale) on loopback ports
#      under a temporary directory;
#   4. cargo test --workspace (unit tests and tests/it against those servers, and a real
#      Prometheus), then tests/soak.sh's short variant;
#   5. stops the servers and removes the directory, whatever happened.
#
# Environment: POWERDIAG_IT_PORT_BASE (default 33100: m118 = +18, m1011 = +10, hang = +11,
# scale = +19, evict = +17, stmt118 = +20, stmt1011 = +12),
# POWERDIAG_IT_KEEP=1 keeps the servers' directory for post-mortems.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
cd "$ROOT"
step() { printf '\n==> %s\n' "$*" >&2; }

step "set-up (tests/harness/setup.sh)"
"$HERE/harness/setup.sh"
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

step "cross checks: ppc64le, arm64, and perfstat-sys for AIX"
for target in powerpc64le-unknown-linux-gnu aarch64-unknown-linux-gnu; do
    cargo check --workspace --all-targets --locked --target "$target"
done
crates/perfstat-sys/ci-check.sh

step "build"
cargo build --workspace --all-targets --locked

base=${POWERDIAG_IT_PORT_BASE:-33100}
export POWERDIAG_IT_DIR
POWERDIAG_IT_DIR=$(mktemp -d /tmp/powerdiag-it.XXXXXX)
chmod 755 "$POWERDIAG_IT_DIR"
SERVERS=(m118 m1011 hang scale evict stmt118 stmt1011)
cleanup() {
    local rc=$?
    step "stopping test servers"
    for s in "${SERVERS[@]}"; do "$HERE/harness/mariadb.sh" stop "$s" || true; done
    if [ "${POWERDIAG_IT_KEEP:-0}" = 1 ]; then
        echo "kept $POWERDIAG_IT_DIR" >&2
    else
        rm -rf "$POWERDIAG_IT_DIR"
    fi
    exit "$rc"
}
trap cleanup EXIT INT TERM

step "starting MariaDB 11.8 (four) and 10.11 (three) under $POWERDIAG_IT_DIR"
"$HERE/harness/mariadb.sh" start m118 11.8 $((base + 18)) &
p1=$!
"$HERE/harness/mariadb.sh" start m1011 10.11 $((base + 10)) &
p2=$!
"$HERE/harness/mariadb.sh" start hang 10.11 $((base + 11)) &
p3=$!
"$HERE/harness/mariadb.sh" start scale 11.8 $((base + 19)) &
p4=$!
# evict: restarted by tests/it/evicted_stats.rs, whose undersized vector cache must survive that.
POWERDIAG_IT_MARIADB_OPTIONS=mhnsw_max_cache_size=1M "$HERE/harness/mariadb.sh" start evict 11.8 $((base + 17)) &
p5=$!
# stmt118, stmt1011: performance_schema ON, owned by tests/it/statements.rs (it resets the
# digest table and drives an ORM application).
"$HERE/harness/mariadb.sh" start stmt118 11.8 $((base + 20)) &
p6=$!
POWERDIAG_IT_MARIADB_PFS=ON "$HERE/harness/mariadb.sh" start stmt1011 10.11 $((base + 12)) &
p7=$!
wait "$p1" && wait "$p2" && wait "$p3" && wait "$p4" && wait "$p5" && wait "$p6" && wait "$p7"
for s in "${SERVERS[@]}"; do
    eval "$("$HERE/harness/mariadb.sh" env "$s")"
done

step "cargo test"
cargo test --workspace --locked -- --test-threads "${POWERDIAG_TEST_THREADS:-4}"

step "agent soak, short variant (restarts m1011 while scraping at 10/s)"
"$HERE/soak.sh"
