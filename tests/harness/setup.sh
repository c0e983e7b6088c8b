#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# One-time, idempotent set-up of a Debian 12 (bookworm) test host for powerdiag's integration tests.
#
# Usage: tests/harness/setup.sh            (as root; re-runs itself through sudo otherwise)
#
# Environment:
#   POWERDIAG_CACHE_DIR        where the MariaDB 11.8 root lives (default /var/cache/powerdiag)
#   POWERDIAG_DEBIAN_MIRROR    Debian mirror for debootstrap (default: the URIs of the host's apt sources)
#   POWERDIAG_RUSTUP_INIT_URL  rustup installer (default: the official one); only used when cargo is missing
#
# Steps:
#   1. apt: the packages in packages.txt: build-essential pkg-config ca-certificates curl debootstrap mariadb-server mariadb-client
#      prometheus, prometheus-alertmanager (amtool), systemd (systemd-analyze), shellcheck
#      (tests/it/deploy.rs checks deploy/ with them), and the ppc64le and arm64 cross C compilers with their C libraries (ring, in the TLS stack, compiles C
#      in the cross checks), with a temporary /usr/sbin/policy-rc.d (exit 101) so no service starts.
#   2. Stops and disables the system mariadb, prometheus and prometheus-alertmanager services (tests need port 3306 and
#      /run/mysqld/mysqld.sock free).
#   3. Rust via rustup, only if cargo is missing.
#   4. MariaDB 11.8 root: debootstrap --variant=minbase --include=mariadb-server,galera-4 trixie into
#      $POWERDIAG_CACHE_DIR/trixie-mariadb (built in a temp dir, renamed when complete), plus the
#      loader wrappers and the stand-in basedir next to it.
set -euo pipefail

HARNESS_TAG=setup # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

ensure_root "${BASH_SOURCE[0]}" "$@"
[ $# -eq 0 ] || die "setup.sh takes no arguments (got: $*)"
export DEBIAN_FRONTEND=noninteractive

# The package list lives in packages.txt (shared with verify-setup.sh, which proves it suffices).
mapfile -t PACKAGES < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$HERE/packages.txt")
[ "${#PACKAGES[@]}" -gt 0 ] || die "no packages in $HERE/packages.txt"
SYSTEM_SERVICES=(mariadb prometheus prometheus-alertmanager)
POLICY=/usr/sbin/policy-rc.d
POLICY_SAVED=/usr/sbin/policy-rc.d.powerdiag-saved
POLICY_TAG='# powerdiag-harness: temporary, deny service starts during package installs'
LOG_DIR=$POWERDIAG_CACHE_DIR/logs
BUILD_PREFIX=$POWERDIAG_CACHE_DIR/.trixie-mariadb.build.
SUMMARY=()

case $POWERDIAG_CACHE_DIR in
/*) ;;
*) die "POWERDIAG_CACHE_DIR must be an absolute path (got '$POWERDIAG_CACHE_DIR')" ;;
esac
[[ $POWERDIAG_CACHE_DIR =~ ^[A-Za-z0-9/._-]+$ ]] ||
    die "POWERDIAG_CACHE_DIR may only contain letters, digits and / . _ - (got '$POWERDIAG_CACHE_DIR')"

mkdir -p "$POWERDIAG_CACHE_DIR" "$LOG_DIR"
chmod 0755 "$POWERDIAG_CACHE_DIR"

# One setup at a time.
exec 9>"$POWERDIAG_CACHE_DIR/.setup.lock"
if ! flock -n 9; then
    log "another setup.sh is running; waiting for it"
    flock 9
fi

step_done() { # NAME START
    local t
    t=$(elapsed "$2")
    SUMMARY+=("$(printf '%-28s %6s s' "$1" "$t")")
    log "step '$1' done in $t s"
}

# ---------------------------------------------------------------------------------------------
# policy-rc.d: keep package installs from starting services. A pre-existing policy (e.g. the
# Docker one) is saved and put back exactly; a copy left by an interrupted run is recovered.

restore_policy() {
    if [ -e "$POLICY_SAVED" ]; then
        mv -f "$POLICY_SAVED" "$POLICY"
    elif [ -f "$POLICY" ] && grep -qxF "$POLICY_TAG" "$POLICY"; then
        rm -f "$POLICY"
    fi
}

install_policy() {
    restore_policy # recover from an interrupted earlier run first
    if [ -e "$POLICY" ]; then
        cp -p "$POLICY" "$POLICY_SAVED"
    fi
    trap restore_policy EXIT
    printf '#!/bin/sh\n%s\nexit 101\n' "$POLICY_TAG" >"$POLICY.tmp"
    chmod 0755 "$POLICY.tmp"
    mv -f "$POLICY.tmp" "$POLICY"
}

# ---------------------------------------------------------------------------------------------
# Step 1: packages

is_installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" = installed ]
}

has_candidate() {
    local c
    c=$(apt-cache policy "$1" 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
    [ -n "$c" ] && [ "$c" != "(none)" ]
}

apt_get() {
    apt-get -y -q -o DPkg::Lock::Timeout=300 \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
}

apt_update() {
    log "apt-get update"
    apt_get update >>"$LOG_DIR/apt.log" 2>&1 || {
        tail -n 20 "$LOG_DIR/apt.log" >&2
        die "apt-get update failed (full log: $LOG_DIR/apt.log)"
    }
}

install_packages() {
    local missing=() p need_update=0
    for p in "${PACKAGES[@]}"; do
        is_installed "$p" || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        log "apt: all packages already installed"
        return 0
    fi
    log "apt: installing ${missing[*]}"
    : >"$LOG_DIR/apt.log"
    if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
        need_update=1
    else
        for p in "${missing[@]}"; do
            has_candidate "$p" || need_update=1
        done
    fi
    [ "$need_update" -eq 0 ] || apt_update

    install_policy
    if ! apt_get install --no-install-recommends "${missing[@]}" >>"$LOG_DIR/apt.log" 2>&1; then
        if [ "$need_update" -eq 0 ]; then
            log "apt-get install failed; the package lists may be stale, retrying after apt-get update"
            apt_update
            apt_get install --no-install-recommends "${missing[@]}" >>"$LOG_DIR/apt.log" 2>&1 || {
                tail -n 30 "$LOG_DIR/apt.log" >&2
                die "apt-get install failed (full log: $LOG_DIR/apt.log)"
            }
        else
            tail -n 30 "$LOG_DIR/apt.log" >&2
            die "apt-get install failed (full log: $LOG_DIR/apt.log)"
        fi
    fi
    restore_policy
    trap - EXIT
    for p in "${PACKAGES[@]}"; do
        is_installed "$p" || die "package $p is still not installed (log: $LOG_DIR/apt.log)"
    done
}

# ---------------------------------------------------------------------------------------------
# Step 2: the system's own services must not run (tests need 3306 and /run/mysqld/mysqld.sock).

pid_alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

stop_system_services() {
    local svc pid
    for svc in "${SYSTEM_SERVICES[@]}"; do
        if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
            if systemctl list-unit-files "$svc.service" >/dev/null 2>&1; then
                systemctl disable --now "$svc.service" >/dev/null 2>&1 ||
                    log "warning: systemctl disable --now $svc.service failed"
            fi
        elif [ -x "/etc/init.d/$svc" ]; then
            # Without systemd the init script is the service; it only touches its own pid file.
            "/etc/init.d/$svc" stop >/dev/null 2>&1 || true
        fi
        if [ -x "/etc/init.d/$svc" ] && command -v update-rc.d >/dev/null 2>&1; then
            update-rc.d "$svc" disable >/dev/null 2>&1 || true
        fi
    done

    # The system server, if any, is the one owning /run/mysqld/mysqld.pid.
    pid=$(cat /run/mysqld/mysqld.pid 2>/dev/null || true)
    if pid_alive "$pid"; then
        die "the system MariaDB server (pid $pid, /run/mysqld/mysqld.pid) is still running; stop it"
    fi
    if [ -S /run/mysqld/mysqld.sock ]; then
        log "removing stale socket /run/mysqld/mysqld.sock (no system server is running)"
        rm -f /run/mysqld/mysqld.sock
    fi
    if (exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null; then
        die "something listens on 127.0.0.1:3306; the tests need that port free"
    fi
}

# ---------------------------------------------------------------------------------------------
# Step 3: Rust

install_rust() {
    local c
    for c in "$(command -v cargo || true)" "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" \
        "$(if [ -n "${SUDO_USER:-}" ]; then getent passwd "$SUDO_USER" | cut -d: -f6; fi)/.cargo/bin/cargo"; do
        if [ -n "$c" ] && [ -x "$c" ] && [ "$c" != /.cargo/bin/cargo ]; then
            log "rust: $("$c" --version) already installed ($c)"
            return 0
        fi
    done
    local url=${POWERDIAG_RUSTUP_INIT_URL:-https://sh.rustup.rs}
    log "rust: installing the stable toolchain with rustup ($url)"
    curl --proto '=https' --tlsv1.2 -fsSL "$url" |
        sh -s -- -y --profile minimal --default-toolchain stable --component rustfmt,clippy
    "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" --version >&2
}

# ---------------------------------------------------------------------------------------------
# Step 4: MariaDB 11.8 root (Debian trixie), see /work/shared/notes/mariadb.md section 1.

# debian_mirror: in lib.sh (shared with verify-setup.sh).

# Unmount anything below DIR (debootstrap mounts proc/sys/dev there) and kill processes whose
# root is inside it (a package's daemon started during the install).
release_dir() {
    local dir=$1 m p r
    awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null || log "warning: could not unmount $m"; done
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null || true)
        if [ "$r" = "$dir" ] || [[ $r == "$dir"/* ]]; then
            log "killing process ${p#/proc/} left running inside $dir"
            kill -KILL "${p#/proc/}" 2>/dev/null || true
        fi
    done
}

# release_dir, then delete DIR without crossing file systems (never through a leftover bind mount).
remove_build_dir() {
    local dir=$1
    [ -e "$dir" ] || return 0
    release_dir "$dir"
    if awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { found = 1 } END { exit !found }' /proc/mounts; then
        die "file systems are still mounted below $dir; unmount them and delete it by hand"
    fi
    rm -rf --one-file-system "$dir"
}

DEBOOTSTRAP_PID=""
BUILD_DIR=""
# Interrupted while debootstrap runs: stop it and everything it started, delete the half root.
abort_build() {
    trap - INT TERM HUP
    log "interrupted ($1): stopping debootstrap and removing $BUILD_DIR"
    if [ -n "$DEBOOTSTRAP_PID" ]; then
        kill -TERM -- "-$DEBOOTSTRAP_PID" 2>/dev/null || true
        sleep 2
        kill -KILL -- "-$DEBOOTSTRAP_PID" 2>/dev/null || true
        wait "$DEBOOTSTRAP_PID" 2>/dev/null || true
    fi
    [ -z "$BUILD_DIR" ] || remove_build_dir "$BUILD_DIR"
    exit 130
}

build_trixie_root() {
    local mirror build old version rc
    if trixie_root_complete; then
        log "MariaDB 11.8 root already complete: $TRIXIE_ROOT ($(cat "$TRIXIE_ROOT/$TRIXIE_MARKER"))"
        return 0
    fi
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed (step 1 should have done that)"
    for old in "$BUILD_PREFIX"*; do # leftovers of interrupted runs (we hold the setup lock)
        [ -e "$old" ] || continue
        log "removing leftover build dir $old"
        remove_build_dir "$old"
    done
    if [ -e "$TRIXIE_ROOT" ]; then
        log "removing incomplete root $TRIXIE_ROOT (no $TRIXIE_MARKER)"
        remove_build_dir "$TRIXIE_ROOT"
    fi
    mirror=$(debian_mirror)
    build=$BUILD_PREFIX$$
    log "debootstrap trixie (minbase + mariadb-server) into $build from the host's Debian mirror (about 1 min)"
    : >"$LOG_DIR/debootstrap.log"
    rc=0
    # Own session, so an interrupt can take down debootstrap and the dpkg it runs in the root.
    # It inherits the setup lock (fd 9) on purpose: if this script is SIGKILLed, the next run
    # waits for the orphaned debootstrap instead of deleting the build dir under it.
    setsid debootstrap --variant=minbase --include=mariadb-server,galera-4 trixie "$build" "$mirror" \
        </dev/null >>"$LOG_DIR/debootstrap.log" 2>&1 &
    DEBOOTSTRAP_PID=$!
    BUILD_DIR=$build
    trap 'abort_build INT' INT
    trap 'abort_build TERM' TERM
    trap 'abort_build HUP' HUP
    wait "$DEBOOTSTRAP_PID" || rc=$?
    trap - INT TERM HUP
    DEBOOTSTRAP_PID=""
    if [ "$rc" -ne 0 ] || [ ! -x "$build/usr/sbin/mariadbd" ]; then
        tail -n 25 "$LOG_DIR/debootstrap.log" >&2
        if [ -f "$build/debootstrap/debootstrap.log" ]; then
            cp "$build/debootstrap/debootstrap.log" "$LOG_DIR/debootstrap-inner.log"
            log "debootstrap's own log: $LOG_DIR/debootstrap-inner.log"
        fi
        remove_build_dir "$build"
        die "debootstrap failed (rc=$rc; log: $LOG_DIR/debootstrap.log)"
    fi
    # debootstrap cleans up its mounts; make sure, and that no daemon from the root survived.
    release_dir "$build"
    rm -f "$build"/var/cache/apt/archives/*.deb
    trixie_arch
    version=$("$build$TRIXIE_LOADER" --library-path "$build/usr/lib/$TRIXIE_MULTIARCH" \
        "$build/usr/sbin/mariadbd" --version 2>&1) ||
        die "the new root's mariadbd does not run through its loader: $version"
    version=${version##*/mariadbd }
    version=${version#"${version%%[! ]*}"} # "Ver 11.8.6-MariaDB-0+deb13u1 from Debian ..."
    printf '%s\n' "$version" >"$build/$TRIXIE_MARKER"
    chmod 0755 "$build"
    mv -T "$build" "$TRIXIE_ROOT"
    log "MariaDB 11.8 root ready: $TRIXIE_ROOT ($version; $(du -sh "$TRIXIE_ROOT" | cut -f1))"
}

# ---------------------------------------------------------------------------------------------

T0=$(now)

t=$(now)
install_packages
step_done "apt packages" "$t"

t=$(now)
stop_system_services
step_done "stop system services" "$t"

t=$(now)
install_rust
step_done "rust" "$t"

t=$(now)
build_trixie_root
step_done "trixie MariaDB 11.8 root" "$t"

t=$(now)
ensure_trixie_wrappers
"$TRIXIE_WRAP/mariadbd" --version >/dev/null ||
    die "the 11.8 wrapper $TRIXIE_WRAP/mariadbd does not run"
step_done "11.8 wrappers + basedir" "$t"

stop_system_services # a last check: nothing above may have started a server

log "summary:"
for line in "${SUMMARY[@]}"; do
    log "  $line"
done
log "  $(printf '%-28s %6s s' total "$(elapsed "$T0")")"
log "10.11: $(/usr/sbin/mariadbd --version)"
log "11.8:  $("$TRIXIE_WRAP/mariadbd" --version)"
