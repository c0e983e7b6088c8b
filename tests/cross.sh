#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Static (musl) powerdiag binaries for other architectures, built with cargo-zigbuild (zig from
# PyPI's ziglang), and — for those this machine cannot run natively — a real execution under
# qemu-user (Debian's qemu-user-static): the emulated binary must collect exactly the facts the
# native one collects from every recorded tree in tests/fixtures/linux (POWER8, POWER9 and x86
# machines: parsing, arithmetic and byte order of the POWER build), and judge every example
# snapshot in examples/ exactly as the native one does.
#
# Usage: tests/cross.sh setup                      the toolchain only (idempotent)
#        tests/cross.sh build PROFILE TARGET...    PROFILE dev or release; TARGET a musl triple
#        tests/cross.sh check PROFILE TARGET...    run the built TARGETs against the native build
#
# Toolchain (installed when missing): the rustup musl targets, rust-src, cargo-zigbuild
# $ZIGBUILD_VERSION (cargo install --locked) and ziglang $ZIG_VERSION in a virtualenv under
# $POWERDIAG_CACHE_DIR. Rust ships no prebuilt std for powerpc64le-unknown-linux-musl in 1.95
# (its rust-std is "available = false" in the release manifest), so that target builds std
# from rust-src (-Zbuild-std, with RUSTC_BOOTSTRAP=1 as crates/perfstat-sys/ci-check.sh does
# for AIX); the others use rustup's.
# The native reference is target/debug/powerdiag (tests/run.sh builds it).
set -euo pipefail

HARNESS_TAG=cross # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=harness/lib.sh
. "$HERE/harness/lib.sh"
cd "$ROOT"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

ZIGBUILD_VERSION=0.24.1 # ZIG_VERSION and ZIG_VENV: tests/harness/lib.sh

setup() {
    local t
    if [ ! -f "$ZIG_VENV/.complete" ]; then
        command -v python3 >/dev/null 2>&1 || die "python3 missing: apt-get install python3 python3-venv"
        log "zig $ZIG_VERSION (PyPI ziglang) into $ZIG_VENV"
        mkdir -p "$POWERDIAG_CACHE_DIR"
        t=$(mktemp -d "$POWERDIAG_CACHE_DIR/.zig-venv.XXXXXX")
        python3 -m venv "$t" || die "python3 -m venv failed: apt-get install python3-venv"
        "$t/bin/pip" install --quiet --disable-pip-version-check "ziglang==$ZIG_VERSION" ||
            die "pip install ziglang==$ZIG_VERSION failed (needs https access to PyPI)"
        touch "$t/.complete"
        mv -T "$t" "$ZIG_VENV" 2>/dev/null || rm -rf "$t"
    fi
    if [ "$(cargo-zigbuild --version 2>/dev/null | awk '{ print $NF }')" != "$ZIGBUILD_VERSION" ]; then
        log "installing cargo-zigbuild $ZIGBUILD_VERSION (once, about 2 minutes)"
        cargo install --locked --quiet cargo-zigbuild --version "$ZIGBUILD_VERSION"
    fi
    if command -v rustup >/dev/null 2>&1; then
        rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl >/dev/null 2>&1 ||
            die "rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl failed"
        rustup component add rust-src >/dev/null 2>&1 || die "rustup component add rust-src failed"
    fi
}

zig_env() {
    local zig
    zig=$("$ZIG_VENV/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
    [ -x "$zig" ] || die "no zig binary in $ZIG_VENV (remove it and re-run tests/cross.sh setup)"
    export CARGO_ZIGBUILD_ZIG_PATH=$zig
}

has_std() { # TARGET: rustup installed a prebuilt std for it
    [ -d "$(rustc --print sysroot)/lib/rustlib/$1/lib" ]
}

build() { # PROFILE TARGET...
    local profile=$1 t start
    shift
    setup
    zig_env
    for t in "$@"; do
        start=$(now)
        local env=(CARGO_PROFILE_RELEASE_STRIP=symbols) extra=()
        if ! has_std "$t"; then
            # A std built from source has no self-contained crt1.o/libc.a next to it: zig's
            # linker brings musl's own (and libunwind).
            local v=CARGO_TARGET_${t^^}_RUSTFLAGS
            env+=(RUSTC_BOOTSTRAP=1 "${v//-/_}=-C link-self-contained=no")
            extra=("-Zbuild-std=std,panic_abort")
        fi
        log "cargo zigbuild --profile $profile --target $t ${extra[*]}"
        # Release binaries are stripped (symbols are no use on a database host).
        env "${env[@]}" cargo zigbuild --locked --quiet -p powerdiag --bin powerdiag \
            --profile "$profile" --target "$t" "${extra[@]}"
        log "$t ($profile): $(describe "$(bin_path "$profile" "$t")") in $(elapsed "$start") s"
    done
}

# "static PowerPC64 (little endian), 12 MB" from the ELF headers (binutils' readelf).
describe() { # BINARY
    local machine endian link
    machine=$(readelf -h "$1" | sed -n 's/^ *Machine: *//p')
    endian=$(readelf -h "$1" | sed -n 's/^ *Data: *[^,]*, *//p')
    link=static
    readelf -l "$1" | grep -q 'Requesting program interpreter' && link=dynamic
    printf '%s %s (%s), %s' "$link" "$machine" "$endian" "$(du -h "$1" | cut -f1)"
}

bin_path() { # PROFILE TARGET
    local dir=$1
    [ "$dir" = dev ] && dir=debug
    printf '%s/target/%s/%s/powerdiag' "$ROOT" "$2" "$dir"
}

# qemu-user for a target, or nothing when it runs natively.
runner() { # TARGET
    case $1 in
    x86_64-*) [ "$(uname -m)" = x86_64 ] || echo qemu-x86_64-static ;;
    aarch64-*) [ "$(uname -m)" = aarch64 ] || echo qemu-aarch64-static ;;
    powerpc64le-*) [ "$(uname -m)" = ppc64le ] || echo qemu-ppc64le-static ;;
    *) die "no qemu-user known for $1" ;;
    esac
}

# The facts of a collection without what differs between two runs of the same binary on the
# same files (when, how long), or between builds (the version string names the target).
normalise() {
    python3 -c '
import json, sys
d = json.load(sys.stdin)
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items()
                if k not in ("taken_at", "duration_seconds", "powerdiag_version")}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
json.dump(strip(d), sys.stdout, indent=1, sort_keys=True)
print()'
}

check() { # PROFILE TARGET...
    local profile=$1 t native=$ROOT/target/debug/powerdiag tree ex q bin n fails=() start
    shift
    [ -x "$native" ] || die "$native is not built (cargo build -p powerdiag)"
    local work
    work=$(mktemp -d /tmp/powerdiag-cross.XXXXXX)
    # shellcheck disable=SC2064 # expand now
    trap "rm -rf '$work'" EXIT
    # An address where nothing listens: the database part fails the same way for both.
    local db=(--mariadb.url mysql://nobody@127.0.0.1:9/ --timeout 1s --no-probe --sample-window 0)
    for t in "$@"; do
        start=$(now)
        bin=$(bin_path "$profile" "$t")
        [ -x "$bin" ] || die "$bin is not built (tests/cross.sh build $profile $t)"
        q=$(runner "$t")
        if [ -n "$q" ]; then
            command -v "$q" >/dev/null || die "$q is missing: apt-get install qemu-user-static (packages.txt)"
        fi
        # It is the right binary: static, for the target's machine, and it says so itself.
        describe "$bin" | grep -q '^static ' || fails+=("$t: not statically linked: $(describe "$bin")")
        $q "$bin" --version | grep -q "target $t)" || fails+=("$t: --version does not name the target: $($q "$bin" --version)")
        n=0
        for tree in tests/fixtures/linux/*/; do
            [ -d "$tree/proc" ] || continue
            local paths=(--path.procfs "$tree/proc" --path.sysfs "$tree/sys" --path.rootfs "$tree/root")
            "$native" collect "${db[@]}" "${paths[@]}" 2>/dev/null | normalise >"$work/native.json"
            $q "$bin" collect "${db[@]}" "${paths[@]}" 2>/dev/null | normalise >"$work/cross.json"
            if ! diff -u "$work/native.json" "$work/cross.json" >"$work/diff" 2>&1; then
                fails+=("$t: the facts of $(basename "$tree") differ from the native build's: $(head -c 2000 "$work/diff")")
            fi
            grep -q '"hardware_threads"' "$work/cross.json" || fails+=("$t: no host facts from $(basename "$tree")")
            n=$((n + 1))
        done
        [ "$n" -ge 6 ] || fails+=("$t: only $n recorded trees in tests/fixtures/linux")
        for ex in examples/*.json; do
            "$native" doctor --from "$ex" --format json >"$work/native.raw" 2>/dev/null || true
            $q "$bin" doctor --from "$ex" --format json >"$work/cross.raw" 2>/dev/null || true
            normalise <"$work/native.raw" >"$work/native.json"
            normalise <"$work/cross.raw" >"$work/cross.json"
            if ! diff -u "$work/native.json" "$work/cross.json" >"$work/diff" 2>&1; then
                fails+=("$t: the report on $ex differs from the native build's: $(head -c 2000 "$work/diff")")
            fi
            n=$((n + 1))
        done
        log "$t${q:+ under $q}: $n replays identical to the native build's in $(elapsed "$start") s"
    done
    if [ "${#fails[@]}" -ne 0 ]; then
        for f in "${fails[@]}"; do log "FAIL: $f"; done
        die "the cross builds do not behave as the native one"
    fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
setup) setup ;;
build)
    [ $# -ge 2 ] || die "usage: tests/cross.sh build dev|release TARGET..."
    build "$@"
    ;;
check)
    [ $# -ge 2 ] || die "usage: tests/cross.sh check dev|release TARGET..."
    check "$@"
    ;;
*) die "usage: tests/cross.sh setup | build PROFILE TARGET... | check PROFILE TARGET..." ;;
esac
