#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Proves that packages.txt is enough on a clean Debian 12: a gap in it (a library that is only a
# Recommends, as the cross C libraries were) fails here, in CI, not on a user's fresh machine.
#
# Usage: tests/harness/verify-setup.sh     (as root; re-runs itself through sudo otherwise)
#
# 1. A bookworm minbase root (debootstrap, from the host's Debian mirror as setup.sh finds it, or
#    POWERDIAG_DEBIAN_MIRROR) with packages.txt installed exactly as setup.sh installs it
#    (--no-install-recommends), cached in $POWERDIAG_CACHE_DIR/bookworm-verify-HASH where HASH
#    is that of the package names in packages.txt: a changed list builds a new root (the old one
#    is removed). A cold build takes about 2 minutes, a cached check a few seconds.
# 2. In that root (chroot): every C compiler of the list compiles a file including <stdint.h>,
#    and every tool the tests call is on PATH.
set -euo pipefail

HARNESS_TAG=verify-setup # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

ensure_root "${BASH_SOURCE[0]}" "$@"
[ $# -eq 0 ] || die "verify-setup.sh takes no arguments (got: $*)"
T0=$(now)
mapfile -t PACKAGES < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$HERE/packages.txt")
[ "${#PACKAGES[@]}" -gt 0 ] || die "no packages in $HERE/packages.txt"
# The compilers (C and cross C) the Rust build uses, and the tools tests/ runs.
# clang is also what bindgen lays the AIX structs out with (crates/perfstat-sys/regen.sh).
COMPILERS=(gcc powerpc64le-linux-gnu-gcc aarch64-linux-gnu-gcc clang)
TOOLS=(cc make pkg-config curl debootstrap mariadb /usr/sbin/mariadbd mariadb-install-db prometheus
    promtool amtool systemd-analyze shellcheck rpm readelf qemu-aarch64-static qemu-ppc64le-static
    python3 jsonnet openssl sysbench
    # tests/harness/journald.sh: a private journald for the journal test
    unshare nsenter systemd-cat /lib/systemd/systemd-journald)

KEY=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$HERE/packages.txt" | sha256sum | cut -c1-16)
ROOT=$POWERDIAG_CACHE_DIR/bookworm-verify-$KEY
MARKER=.powerdiag-verify-complete
mkdir -p "$POWERDIAG_CACHE_DIR/logs"
LOG=$POWERDIAG_CACHE_DIR/logs/verify-setup.log
exec 8>"$POWERDIAG_CACHE_DIR/.verify-setup.lock"
flock 8

unmount_below() {
    awk -v d="$1" 'index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

build_root() {
    local build=$ROOT.build.$$ mirror old
    for old in "$POWERDIAG_CACHE_DIR"/bookworm-verify-*; do
        [ -e "$old" ] || continue
        log "removing $old (another package list, or an interrupted build)"
        unmount_below "$old"
        rm -rf --one-file-system "$old"
    done
    mirror=$(debian_mirror)
    log "debootstrap bookworm minbase into $build (log: $LOG)"
    : >"$LOG"
    trap 'unmount_below "$build"' EXIT
    debootstrap --variant=minbase bookworm "$build" "$mirror" >>"$LOG" 2>&1 ||
        { tail -n 20 "$LOG" >&2; die "debootstrap bookworm failed (log: $LOG)"; }
    printf '#!/bin/sh\nexit 101\n' >"$build/usr/sbin/policy-rc.d"
    chmod 0755 "$build/usr/sbin/policy-rc.d"
    mount -t proc proc "$build/proc"
    log "installing packages.txt (${#PACKAGES[@]} packages, --no-install-recommends) in the root"
    chroot "$build" env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0 \
        install --no-install-recommends "${PACKAGES[@]}" >>"$LOG" 2>&1 ||
        { tail -n 20 "$LOG" >&2; die "installing packages.txt into a clean bookworm failed (log: $LOG)"; }
    chroot "$build" apt-get clean
    unmount_below "$build"
    trap - EXIT
    date -u +%FT%TZ >"$build/$MARKER"
    mv "$build" "$ROOT"
}

if [ -f "$ROOT/$MARKER" ]; then
    log "clean bookworm root for this package list: $ROOT (cached)"
else
    build_root
fi

fails=()
printf '#include <stdint.h>\nint main(void) { return (int)UINT8_MAX - 255; }\n' >"$ROOT/tmp/verify.c"
for cc in "${COMPILERS[@]}"; do
    if ! out=$(chroot "$ROOT" "$cc" -c /tmp/verify.c -o /tmp/verify.o 2>&1); then
        printf '%s\n' "$out" >&2
        fails+=("$cc cannot compile a C file including <stdint.h>")
    fi
done
rm -f "$ROOT/tmp/verify.c" "$ROOT/tmp/verify.o"
for t in "${TOOLS[@]}"; do
    # shellcheck disable=SC2016 # $1 is expanded by the chroot's sh
    chroot "$ROOT" sh -c 'command -v "$1"' sh "$t" >/dev/null || fails+=("$t is missing")
done
# bindgen (installed by tests/run.sh with cargo) loads libclang.so, which only libclang-dev
# links under that name.
# shellcheck disable=SC2016 # the glob is expanded by the chroot's sh
chroot "$ROOT" sh -c 'ls /usr/lib/llvm-*/lib/libclang.so' >/dev/null 2>&1 ||
    fails+=("libclang.so (for bindgen) is missing")
# tests/cross.sh makes a virtualenv for zig: python3 alone lacks ensurepip without python3-venv.
if ! out=$(chroot "$ROOT" python3 -m venv /tmp/verify-venv 2>&1); then
    printf '%s\n' "$out" >&2
    fails+=("python3 -m venv fails")
fi
rm -rf "$ROOT/tmp/verify-venv"
if [ "${#fails[@]}" -ne 0 ]; then
    for f in "${fails[@]}"; do log "FAIL: $f"; done
    die "packages.txt is not enough on a clean Debian 12 (root: $ROOT): add the package(s) that provide the above"
fi
log "packages.txt suffices on a clean Debian 12: ${#COMPILERS[@]} C compilers and ${#TOOLS[@]} tools checked in $(elapsed "$T0") s"
