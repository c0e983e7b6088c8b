#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# A private systemd journal for one test (tests/it/error_log.rs): Debian's own
# systemd-journald, started in a mount namespace of its own with empty tmpfs over
# /run/systemd, /run/log and /var/log/journal, so it never touches the host's journal (or the
# host's journald, on a machine running systemd). Processes started with `exec` see that
# journal at the standard paths and log to it; the namespace lives while journald does.
set -euo pipefail

HARNESS_TAG=journald # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

usage() {
    cat <<'EOF'
Usage: tests/harness/journald.sh COMMAND DIR [ARGS...]

  start DIR             start journald in a new mount namespace; DIR (created) keeps its pid
                        and log
  exec DIR CMD [ARG...] run CMD in that namespace (it sees and writes the private journal)
  stop DIR              stop journald (the namespace goes with its last process); fine if
                        not running

Needs root, unshare and nsenter (util-linux) and /lib/systemd/systemd-journald (systemd).
EOF
}

JOURNALD=/lib/systemd/systemd-journald

pid_of() { # DIR -> the journald pid if it runs
    local pid
    pid=$(cat "$1/journald.pid" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == systemd-journal ]] || return 1
    printf '%s\n' "$pid"
}

cmd=${1:-}
[[ -n $cmd && -n ${2:-} ]] || {
    usage
    exit 2
}
DIR=$2
shift 2
[[ $(id -u) -eq 0 ]] || die "must run as root (a mount namespace and journald)"

case $cmd in
start)
    [[ -x $JOURNALD ]] || die "$JOURNALD is missing: apt-get install systemd (packages.txt)"
    mkdir -p "$DIR"
    if pid=$(pid_of "$DIR"); then
        log "journald already runs (pid $pid)"
        exit 0
    fi
    rm -f "$DIR/journald.pid"
    # The namespace's first process mounts the tmpfs and becomes journald; setsid so that it
    # outlives the caller's process group.
    # shellcheck disable=SC2016 # expanded by the inner shell
    setsid unshare -m --propagation private bash -c '
        set -e
        mkdir -p /run/systemd /run/log /var/log/journal
        mount -t tmpfs -o mode=0755 pd-journal /run/systemd
        mount -t tmpfs -o mode=0755 pd-journal /run/log
        mount -t tmpfs -o mode=2755 pd-journal /var/log/journal
        echo $$ >"$1/journald.pid"
        exec "$2"
    ' _ "$DIR" "$JOURNALD" </dev/null >"$DIR/journald.log" 2>&1 &
    for _ in $(seq 100); do
        if pid=$(pid_of "$DIR") && nsenter -t "$pid" -m test -S /run/systemd/journal/stdout; then
            log "journald up (pid $pid)"
            exit 0
        fi
        sleep 0.1
    done
    die "journald did not start: $(tail -5 "$DIR/journald.log" 2>/dev/null)"
    ;;
exec)
    [[ $# -ge 1 ]] || die "exec needs a command"
    pid=$(pid_of "$DIR") || die "no journald runs for $DIR (start it first)"
    exec nsenter -t "$pid" -m --wd="$PWD" -- "$@"
    ;;
stop)
    if pid=$(pid_of "$DIR"); then
        kill "$pid"
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        log "journald stopped"
    fi
    rm -f "$DIR/journald.pid"
    ;;
*)
    usage
    exit 2
    ;;
esac
