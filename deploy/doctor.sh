#!/usr/bin/env bash
# Build powerdiag if needed and run `powerdiag doctor` with the given arguments.
# On a fresh Debian/Ubuntu machine it first installs what the build needs (a C toolchain and
# Rust via rustup); elsewhere it tells you what is missing.
#
#   deploy/doctor.sh                          # local defaults: socket, 127.0.0.1:3306, ~/.my.cnf
#   POWERDIAG_MARIADB_URL=mysql://mon:PW@db:3306/ deploy/doctor.sh --format json
#   deploy/doctor.sh --mariadb.defaults-file /etc/powerdiag/my.cnf
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$ROOT/target/release/powerdiag
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
say() { printf 'powerdiag setup: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

if ! command -v cc >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        say "installing a C toolchain (build-essential) for the build"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential pkg-config ca-certificates curl >/dev/null
    else
        say "a C compiler (cc) is needed to build; install your distribution's build tools" && exit 3
    fi
fi
if ! command -v cargo >/dev/null 2>&1; then
    command -v curl >/dev/null 2>&1 || { say "curl is needed to install Rust"; exit 3; }
    say "installing Rust with rustup (into ~/.cargo)"
    curl --proto '=https' --tlsv1.2 -fsSL "${POWERDIAG_RUSTUP_INIT_URL:-https://sh.rustup.rs}" |
        sh -s -- -y --profile minimal --default-toolchain stable >&2
fi
# Rebuild when any source is newer than the binary (cargo is quick when nothing changed).
if [ ! -x "$BIN" ] || [ -n "$(find "$ROOT/crates" "$ROOT/Cargo.toml" "$ROOT/Cargo.lock" -newer "$BIN" -print -quit)" ]; then
    say "building (cargo build --release --locked)"
    (cd "$ROOT" && cargo build --release --locked -p powerdiag >&2)
fi
exec "$BIN" doctor "$@"
