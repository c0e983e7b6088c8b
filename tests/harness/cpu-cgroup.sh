#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# A CPU-limited cgroup for one test server (tests/it/saturation.rs): cgroup v2 (`cpu.max`) on
# a unified hierarchy, v1 (`cpu.cfs_quota_us`) where the cpu controller is mounted apart.
set -euo pipefail

HARNESS_TAG=cpu-cgroup # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

usage() {
    cat <<'EOF'
Usage: tests/harness/cpu-cgroup.sh COMMAND NAME [ARGS...]

  enter NAME PID        create cgroup pd-it-NAME (no quota) and move process PID, with all its
                        threads, into it
  quota NAME PERCENT    set its CPU quota: PERCENT of one CPU per 100 ms period (e.g. 30), or
                        `max` for none
  leave NAME            move its processes back to the parent and remove it; fine if absent
  where NAME            print the cgroup's directory

Needs root and a writable cgroup filesystem: v1 with the cpu controller under
/sys/fs/cgroup/cpu (or cpu,cpuacct), else v2 at /sys/fs/cgroup with `cpu` in
cgroup.controllers (the script adds it to the root's cgroup.subtree_control).
EOF
}

BASE=/sys/fs/cgroup
PERIOD_US=100000

# Sets VERSION and PARENT: where the cpu controller is.
controller() {
    local d
    for d in "$BASE/cpu" "$BASE/cpu,cpuacct"; do
        if [[ -e $d/cpu.cfs_quota_us ]]; then
            VERSION=1 PARENT=$d
            return
        fi
    done
    if [[ -e $BASE/cgroup.controllers ]]; then
        grep -qw cpu "$BASE/cgroup.controllers" ||
            die "cgroup v2 at $BASE has no cpu controller (cgroup.controllers: $(cat "$BASE/cgroup.controllers"))"
        VERSION=2 PARENT=$BASE
        return
    fi
    die "no cgroup cpu controller under $BASE (neither v1 cpu nor v2)"
}

dir_of() { # NAME
    [[ $1 =~ ^[A-Za-z0-9_-]+$ ]] || die "bad name '$1'"
    controller
    DIR=$PARENT/pd-it-$1
}

cmd=${1:-}
[[ -n $cmd ]] || {
    usage
    exit 2
}
shift
case $cmd in
enter)
    [[ $# -eq 2 && $2 =~ ^[0-9]+$ ]] || die "usage: enter NAME PID"
    dir_of "$1"
    if [[ $VERSION == 2 ]] && ! grep -qw cpu "$PARENT/cgroup.subtree_control"; then
        echo +cpu >"$PARENT/cgroup.subtree_control" ||
            die "cannot enable the cpu controller in $PARENT/cgroup.subtree_control"
    fi
    mkdir -p "$DIR"
    # cgroup.procs moves the whole process (every thread) on v1 and v2.
    echo "$2" >"$DIR/cgroup.procs" || die "cannot move pid $2 into $DIR"
    ;;
quota)
    [[ $# -eq 2 ]] || die "usage: quota NAME PERCENT|max"
    dir_of "$1"
    [[ -d $DIR ]] || die "no cgroup $DIR: run enter first"
    if [[ $2 == max ]]; then
        if [[ $VERSION == 2 ]]; then echo "max $PERIOD_US" >"$DIR/cpu.max"; else
            echo -1 >"$DIR/cpu.cfs_quota_us"
        fi
    else
        [[ $2 =~ ^[0-9]+$ && $2 -ge 1 ]] || die "PERCENT must be a whole number ≥ 1 or max, not '$2'"
        q=$((PERIOD_US * $2 / 100))
        if [[ $VERSION == 2 ]]; then echo "$q $PERIOD_US" >"$DIR/cpu.max"; else
            echo "$PERIOD_US" >"$DIR/cpu.cfs_period_us"
            echo "$q" >"$DIR/cpu.cfs_quota_us"
        fi
    fi
    ;;
leave)
    [[ $# -eq 1 ]] || die "usage: leave NAME"
    dir_of "$1"
    [[ -d $DIR ]] || exit 0
    while read -r pid; do
        echo "$pid" >"$PARENT/cgroup.procs" 2>/dev/null || true
    done <"$DIR/cgroup.procs"
    rmdir "$DIR"
    ;;
where)
    dir_of "$1"
    echo "$DIR"
    ;;
*)
    usage
    exit 2
    ;;
esac
