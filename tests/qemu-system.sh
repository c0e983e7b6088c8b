#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Real kernels: the static ppc64le and arm64 powerdiag builds (tests/cross.sh) run on Debian
# bookworm's own kernels under QEMU full-system emulation, and what they report is compared
# with the kernel's files of the same boot.
#
# Usage: tests/qemu-system.sh setup           fetch and unpack what the guests need (cached)
#        tests/qemu-system.sh run [CONFIG...]  boot each configuration and check it (default: all)
#        tests/qemu-system.sh record           boot all, and replace the fixture trees they
#                                              recorded (tests/fixtures/linux/qemu-*)
#        tests/qemu-system.sh check CONFIG WORK  check again a run kept with POWERDIAG_QEMU_KEEP=1
#        tests/qemu-system.sh list             the configurations
#
# Configurations (TCG; 50-100 s per boot on a 2-core x86-64 machine):
#   ppc64le  QEMU pseries, POWER9, 2 cores x SMT4 on two NUMA nodes (1 GiB each), the
#            powerpc64le kernel (64 KiB pages); after the first readings the guest takes the
#            sibling threads offline (SMT1, what ppc64_cpu --smt=1 does) and reads again.
#   arm64    QEMU virt, Cortex-A72, 4 CPUs on two NUMA nodes, the arm64 kernel (4 KiB pages).
#
# What it fetches, with a private apt configuration under $POWERDIAG_CACHE_DIR/qemu-system
# (the host's dpkg architectures, sources and installed packages are not touched; the mirror
# is the host's, tests/harness/lib.sh debian_mirror):
#   - for ppc64el and arm64: the kernel linux-image-{powerpc64le,arm64} depends on, and
#     busybox-static and bash-static (record.sh needs bash);
#   - for the host: qemu-system-ppc and qemu-system-arm from bookworm-backports (QEMU 10:
#     bookworm's 7.2 refuses more than one thread per core on pseries under TCG) and the
#     bookworm libraries they need that the host lacks, unpacked into a private root. QEMU
#     runs in a private mount namespace where its compiled-in module directory is that
#     root's, so a host QEMU's modules of another version are never loaded.
# The stand-in `mariadbd` (tests/qemu-system/mariadbd.c: memory and threads for the process
# facts) is compiled with tests/cross.sh's zig; the powerdiag binaries are tests/cross.sh's
# static dev builds, stripped with binutils' cross strip (packages.txt) for the initramfs.
#
# Checks, per boot (each an equality between two readings of the same machine, no
# hard-coded numbers):
#   - collect, doctor and record.sh ran in the guest (exit codes, JSON that parses);
#   - the live facts equal the kernel's files of the same boot, as recorded by record.sh:
#     architecture, CPU model, online threads, cores, threads per core, SMT, NUMA nodes with
#     their CPUs and memory, base page size, THP, huge page sizes, mariadbd's pid, name and
#     threads;
#   - the recorded tree, replayed here by the native build, gives the live facts (what a
#     replay cannot know is excluded: counters, the process's RSS which moved between reads);
#   - after the sibling threads went offline: threads per core 1, the SMT verdict (PD405)
#     follows.
# Results (console logs, the guests' output) stay under $POWERDIAG_QEMU_WORK (default a
# temporary directory, removed unless POWERDIAG_QEMU_KEEP=1).
set -euo pipefail

HARNESS_TAG=qemu-system # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=harness/lib.sh
. "$HERE/harness/lib.sh"
cd "$ROOT"

CACHE=$POWERDIAG_CACHE_DIR/qemu-system
QROOT=$CACHE/qemu-root
CONFIGS=(ppc64le arm64)
BOOT_TIMEOUT=${POWERDIAG_QEMU_TIMEOUT:-900}

# Debian architecture, Rust target and kernel flavour of a configuration.
deb_arch() { case $1 in ppc64le) echo ppc64el ;; arm64) echo arm64 ;; *) die "unknown configuration '$1' (tests/qemu-system.sh list)" ;; esac; }
rust_target() { case $1 in ppc64le) echo powerpc64le-unknown-linux-musl ;; arm64) echo aarch64-unknown-linux-musl ;; esac; }
zig_target() { case $1 in ppc64le) echo powerpc64le-linux-musl ;; arm64) echo aarch64-linux-musl ;; esac; }
cross_strip() { case $1 in ppc64le) echo powerpc64le-linux-gnu-strip ;; arm64) echo aarch64-linux-gnu-strip ;; esac; }

# apt with a private state under DIR, for ARCH, from SUITES of the host's mirror.
papt_init() { # DIR ARCH SUITE...
    local dir=$1 arch=$2 mirror s
    shift 2
    mirror=$(debian_mirror)
    mkdir -p "$dir/etc/apt/preferences.d" "$dir/etc/apt/apt.conf.d" "$dir/etc/apt/sources.list.d" \
        "$dir/var/lib/apt/lists/partial" "$dir/var/cache/apt/archives/partial" "$dir/debs"
    : >"$dir/sources.list.new"
    for s in "$@"; do
        printf 'deb [arch=%s signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
            "$arch" "$mirror" "$s" >>"$dir/sources.list.new"
    done
    mv "$dir/sources.list.new" "$dir/etc/apt/sources.list"
}
papt() { # DIR ARCH STATUS apt-get|apt-cache ARGS...
    local dir=$1 arch=$2 status=$3 tool=$4
    shift 4
    "$tool" -o Dir="$dir" -o Dir::State::status="$status" -o Dir::Cache::archives="$dir/debs" \
        -o APT::Architecture="$arch" -o APT::Architectures::="$arch" \
        -o APT::Install-Recommends=0 -o APT::Sandbox::User=root -o Debug::NoLocking=1 "$@"
}

# The guest's files for one configuration: kernel, busybox, bash.
setup_guest() { # CONFIG
    local arch dir flavour kernel f
    arch=$(deb_arch "$1")
    dir=$CACHE/guest-$arch
    [ -f "$dir/.complete" ] && return 0
    log "$1: the bookworm kernel, busybox-static and bash-static for $arch (private apt under $dir)"
    rm -rf "$dir"
    papt_init "$dir/apt" "$arch" bookworm
    : >"$dir/apt/status"
    papt "$dir/apt" "$arch" "$dir/apt/status" apt-get -q update >"$dir/apt/update.log" 2>&1 ||
        die "apt-get update for $arch failed ($(tail -n 3 "$dir/apt/update.log" | tr '\n' ' '))"
    flavour=$([ "$arch" = arm64 ] && echo arm64 || echo powerpc64le)
    kernel=$(papt "$dir/apt" "$arch" "$dir/apt/status" apt-cache depends "linux-image-$flavour" |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1)
    [ -n "$kernel" ] || die "no kernel package behind linux-image-$flavour for $arch"
    (cd "$dir/apt/debs" && papt "$dir/apt" "$arch" "$dir/apt/status" apt-get -q download \
        "$kernel" busybox-static bash-static >"$dir/apt/download.log" 2>&1) ||
        die "apt-get download $kernel busybox-static bash-static failed ($(tail -n 3 "$dir/apt/download.log" | tr '\n' ' '))"
    mkdir -p "$dir/x"
    for f in "$dir"/apt/debs/*.deb; do dpkg-deb -x "$f" "$dir/x"; done
    f=$(find "$dir/x/boot" -name 'vmlinu[xz]-*' | head -n 1)
    [ -n "$f" ] || die "no kernel image in $kernel"
    mv "$f" "$dir/kernel"
    mv "$dir/x/bin/busybox" "$dir/busybox"
    mv "$dir/x/bin/bash-static" "$dir/bash"
    printf '%s\n' "$kernel" >"$dir/kernel-package"
    rm -rf "$dir/x" "$dir/apt/debs"
    touch "$dir/.complete"
}

# QEMU 10 from bookworm-backports and the libraries it needs that the host lacks.
setup_qemu() {
    local dir=$CACHE/qemu-apt f t
    [ -f "$QROOT/.complete" ] && return 0
    log "QEMU 10 (qemu-system-ppc, qemu-system-arm) from bookworm-backports into $QROOT"
    rm -rf "$dir" "$QROOT"
    papt_init "$dir" amd64 bookworm bookworm-backports
    [ "$(dpkg --print-architecture)" = amd64 ] ||
        die "the QEMU recipe is for an amd64 host (this one is $(dpkg --print-architecture))"
    papt "$dir" amd64 /var/lib/dpkg/status apt-get -q update >"$dir/update.log" 2>&1 ||
        die "apt-get update (bookworm-backports) failed ($(tail -n 3 "$dir/update.log" | tr '\n' ' '))"
    # The host's dpkg status, read only: apt fetches just what this host lacks.
    papt "$dir" amd64 /var/lib/dpkg/status apt-get -q -y --download-only -t bookworm-backports \
        install qemu-system-ppc qemu-system-arm >"$dir/download.log" 2>&1 ||
        die "downloading qemu-system-ppc/-arm failed ($(tail -n 3 "$dir/download.log" | tr '\n' ' '))"
    t=$(mktemp -d "$CACHE/.qemu-root.XXXXXX")
    for f in "$dir"/debs/*.deb; do
        # Only the system emulators and their libraries: not the user-mode QEMU that a
        # newer qemu-system-common would also upgrade.
        case ${f##*/} in qemu-user* | qemu-guest*) continue ;; esac
        dpkg-deb -x "$f" "$t"
    done
    { [ -x "$t/usr/bin/qemu-system-ppc64" ] && [ -x "$t/usr/bin/qemu-system-aarch64" ]; } ||
        die "no qemu-system-ppc64/-aarch64 in the downloaded packages (see $dir/download.log)"
    touch "$t/.complete"
    rm -rf "$dir/debs"
    mv -T "$t" "$QROOT"
}


# Runs QROOT's QEMU (for at most BOOT_TIMEOUT seconds): its module directory (compiled in as /usr/lib/x86_64-linux-gnu/qemu)
# bind-mounted over the host's in a private mount namespace.
qemu() { # PROGRAM ARGS...
    local prog=$1 moddir=/usr/lib/x86_64-linux-gnu/qemu
    shift
    # shellcheck disable=SC2016 # expanded by the inner shell
    timeout --foreground "$BOOT_TIMEOUT" unshare --mount --propagation private -- sh -c '
        set -e
        moddir=$1 qroot=$2 prog=$3
        shift 3
        if [ -d "$moddir" ]; then mount --bind "$qroot$moddir" "$moddir"; fi
        exec env LD_LIBRARY_PATH="$(printf "%s/usr/lib/x86_64-linux-gnu:%s/lib/x86_64-linux-gnu" "$qroot" "$qroot")" \
            QEMU_MODULE_DIR="$qroot$moddir" "$qroot/usr/bin/$prog" -L "$qroot/usr/share/qemu" "$@"
    ' qemu "$moddir" "$QROOT" "$prog" "$@"
}

setup() {
    command -v unshare >/dev/null || die "unshare missing (util-linux)"
    command -v cpio >/dev/null || die "cpio missing: apt-get install cpio (packages.txt)"
    mkdir -p "$CACHE"
    setup_qemu
    local c
    for c in "${CONFIGS[@]}"; do setup_guest "$c"; done
    log "QEMU: $(qemu qemu-system-ppc64 --version | head -n 1)"
}

# The initramfs of CONFIG into FILE.
initramfs() { # CONFIG FILE WORK
    local c=$1 out=$2 work=$3 arch g bin zig
    arch=$(deb_arch "$c")
    g=$CACHE/guest-$arch
    bin=$ROOT/target/$(rust_target "$c")/debug/powerdiag
    [ -x "$bin" ] || die "$bin is not built (tests/cross.sh build dev $(rust_target "$c"))"
    local r=$work/initramfs-$c
    rm -rf "$r"
    mkdir -p "$r"/{bin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,run}
    cp "$g/busybox" "$r/bin/busybox"
    ln -s busybox "$r/bin/sh"
    cp "$g/bash" "$r/bin/bash"
    "$(cross_strip "$c")" -o "$r/usr/bin/powerdiag" "$bin" ||
        die "$(cross_strip "$c") failed (binutils for the target: packages.txt's gcc-*-linux-gnu)"
    zig=$("$ZIG_VENV/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))' 2>/dev/null) ||
        die "no zig (tests/cross.sh setup installs it)"
    "$zig" cc -target "$(zig_target "$c")" -static -O2 -s -o "$r/usr/sbin/mariadbd" "$HERE/qemu-system/mariadbd.c" ||
        die "compiling the stand-in mariadbd for $c failed"
    cp "$HERE/qemu-system/init" "$r/init"
    cp "$HERE/fixtures/linux/record.sh" "$r/record.sh"
    cat >"$r/etc/os-release" <<EOF
PRETTY_NAME="powerdiag QEMU guest ($(cat "$g/kernel-package"), busybox initramfs)"
NAME="powerdiag QEMU guest"
ID=powerdiag-qemu-guest
EOF
    (cd "$r" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$out"
}

boot() { # CONFIG WORK: boots, leaves WORK/CONFIG/{console.log,out/}
    local c=$1 work=$2 arch g t0 rc=0
    arch=$(deb_arch "$c")
    g=$CACHE/guest-$arch
    mkdir -p "$work/$c"
    initramfs "$c" "$work/$c/initramfs.gz" "$work"
    # shellcheck disable=SC2054 # QEMU's options are comma-separated, not the array
    local args=(-nographic -nodefaults -no-reboot -serial mon:stdio -m 2G
        -object memory-backend-ram,id=m0,size=1G -object memory-backend-ram,id=m1,size=1G
        -kernel "$g/kernel" -initrd "$work/$c/initramfs.gz")
    local prog
    # shellcheck disable=SC2054
    case $c in
    ppc64le)
        prog=qemu-system-ppc64
        args+=(-M pseries -cpu POWER9 -smp 8,sockets=1,cores=2,threads=4
            -numa node,nodeid=0,cpus=0-3,memdev=m0 -numa node,nodeid=1,cpus=4-7,memdev=m1
            -append "console=hvc0 quiet loglevel=1 panic=-1")
        ;;
    arm64)
        prog=qemu-system-aarch64
        args+=(-M virt -cpu cortex-a72 -smp 4
            -numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2-3,memdev=m1
            -append "console=ttyAMA0 quiet loglevel=1 panic=-1")
        ;;
    esac
    printf '%s' "$prog" >"$work/$c/qemu-command"
    local a
    for a in "${args[@]}"; do
        case $a in *' '*) printf " '%s'" "$a" ;; *) printf ' %s' "$a" ;; esac
    done >>"$work/$c/qemu-command"
    t0=$(now)
    log "$c: booting $(cat "$g/kernel-package") (timeout ${BOOT_TIMEOUT} s)"
    qemu "$prog" "${args[@]}" </dev/null >"$work/$c/console.log" 2>&1 || rc=$?
    log "$c: guest ended (exit $rc) after $(elapsed "$t0") s"
    [ "$rc" = 124 ] && die "$c: no power-off within ${BOOT_TIMEOUT} s; the console's end: $(tail -c 2000 "$work/$c/console.log")"
    mkdir -p "$work/$c/out"
    sed -n '/^==POWERDIAG-OUT-BEGIN==/,/^==POWERDIAG-OUT-END==/p' "$work/$c/console.log" | tr -d '\r' |
        grep -E '^[A-Za-z0-9+/=]+$' | base64 -d 2>/dev/null | tar -xz -C "$work/$c/out" 2>/dev/null ||
        die "$c: the guest wrote no results (exit $rc); the console's end: $(tail -c 3000 "$work/$c/console.log")"
    # (not anchored: the firmware's escape sequences may precede the first line)
    grep -ao '==POWERDIAG-STEP== .*' "$work/$c/console.log" | tr -d '\r' | sed 's/^==POWERDIAG-STEP== /  guest: /' >&2 || true
}

check() { # CONFIG WORK
    local c=$1 work=$2 native=$ROOT/target/debug/powerdiag d
    [ -x "$native" ] || die "$native is not built (cargo build -p powerdiag)"
    for d in "$work/$c/out"/*/; do
        [ -d "$d/tree" ] || continue
        "$native" collect --mariadb.url mysql://nobody@127.0.0.1:9/ --timeout 1s --no-probe --sample-window 0 \
            --path.procfs "$d/tree/proc" --path.sysfs "$d/tree/sys" --path.rootfs "$d/tree/root" \
            >"$d/replay.json" 2>"$d/replay.err" || die "$c: the native replay of $d/tree failed: $(cat "$d/replay.err")"
        "$native" doctor --mariadb.url mysql://nobody@127.0.0.1:9/ --timeout 1s --no-probe --sample-window 0 \
            --path.procfs "$d/tree/proc" --path.sysfs "$d/tree/sys" --path.rootfs "$d/tree/root" \
            --format json >"$d/doctor.replay.json" 2>>"$d/replay.err" || [ $? -le 2 ] ||
            die "$c: the native doctor on $d/tree failed: $(cat "$d/replay.err")"
    done
    python3 "$HERE/qemu-system/compare.py" "$c" "$work/$c/out"
}

run() {
    local cs=("$@") c work t0
    [ ${#cs[@]} -gt 0 ] || cs=("${CONFIGS[@]}")
    for c in "${cs[@]}"; do deb_arch "$c" >/dev/null; done
    setup
    work=${POWERDIAG_QEMU_WORK:-$(mktemp -d /tmp/powerdiag-qemu.XXXXXX)}
    mkdir -p "$work"
    if [ "${POWERDIAG_QEMU_KEEP:-0}" != 1 ] && [ -z "${POWERDIAG_QEMU_WORK:-}" ]; then
        # shellcheck disable=SC2064 # expand now
        trap "rm -rf '$work'" EXIT
    else
        log "results kept in $work"
    fi
    for c in "${cs[@]}"; do
        t0=$(now)
        boot "$c" "$work"
        check "$c" "$work"
        log "$c: checked in $(elapsed "$t0") s"
    done
    LAST_WORK=$work
}

record() {
    POWERDIAG_QEMU_KEEP=1 run
    local c d name dest
    for c in "${CONFIGS[@]}"; do
        for d in "$LAST_WORK/$c/out"/*/; do
            [ -d "$d/tree" ] || continue
            name=$(basename "$d")
            dest=$HERE/fixtures/linux/qemu-$c$([ "$name" = boot ] || echo "-$name")
            rm -rf "$dest"
            cp -a "$d/tree" "$dest"
            {
                echo
                echo "## How it was made"
                echo
                echo "\`tests/qemu-system.sh record\` booted Debian bookworm's"
                echo "\`$(cat "$CACHE/guest-$(deb_arch "$c")/kernel-package")\` under QEMU"
                echo "\`$(qemu qemu-system-ppc64 --version | sed -n 's/^QEMU emulator version //p')\` (TCG) from an initramfs"
                echo "(busybox, bash-static, the static powerdiag debug build and the stand-in \`mariadbd\` of"
                echo "\`tests/qemu-system/mariadbd.c\`, 64 MiB and 8 threads; no MariaDB runs), and ran"
                echo "\`record.sh\` from its \`/init\`$([ "$name" = boot ] || echo ", after taking every sibling thread offline (SMT1)")."
                echo "QEMU's command line (kernel and initramfs paths are the run's):"
                echo
                echo '```'
                sed "s|$CACHE|\$CACHE|g; s|$LAST_WORK|\$WORK|g" "$LAST_WORK/$c/qemu-command"
                echo
                echo '```'
                echo
                echo "The live facts matched these files (\`tests/qemu-system/compare.py\`); the expected facts"
                echo "and verdicts of their replay are the insta snapshot \`tests/it/snapshots/linux_tree@$(basename "$dest").snap\`."
            } >>"$dest/README.md"
            log "recorded $dest"
        done
    done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
setup) setup ;;
run) run "$@" ;;
record) record ;;
check)
    [ $# -eq 2 ] || die "usage: tests/qemu-system.sh check CONFIG WORK (the results of a run kept with POWERDIAG_QEMU_KEEP=1)"
    check "$@"
    ;;
list) printf '%s\n' "${CONFIGS[@]}" ;;
*) die "usage: tests/qemu-system.sh setup | run [CONFIG...] | record | list" ;;
esac
