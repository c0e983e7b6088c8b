#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Throw-away Prometheus servers for powerdiag's integration tests (run tests/harness/setup.sh once
# first: it installs Debian's prometheus and keeps the system service stopped).
set -euo pipefail

HARNESS_TAG=prometheus # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

usage() {
    cat <<'EOF'
Usage: tests/harness/prometheus.sh COMMAND NAME [ARGS...]

  start NAME PORT CONFIG_FILE [FLAG...]
                  start instance NAME: /usr/bin/prometheus on 127.0.0.1:PORT with CONFIG_FILE
                  (checked with promtool first; relative paths in it resolve against its own
                  directory), its TSDB in the instance directory, short retention and
                  --web.enable-lifecycle (so a test can POST /-/reload); any FLAGs are added.
                  Waits until /-/ready answers. Already running on the same port: nothing to do.
  stop NAME       SIGTERM, wait up to 30 s, SIGKILL. Fine if not running.
  env NAME        print export lines POWERDIAG_IT_<NAME>_{PORT,URL,DIR}
  status NAME     print the state; exit 0 when running, 3 when stopped
  destroy NAME    stop and delete the instance directory (and its TSDB)

Instance directory $POWERDIAG_IT_DIR/NAME (default /tmp/powerdiag-it/NAME):
  data/  prometheus.log  launcher.pid  instance.env
Instance names share the directory with tests/harness/mariadb.sh's: use distinct names.

Environment: POWERDIAG_IT_DIR, POWERDIAG_IT_PROM_START_TIMEOUT (default 30 s),
POWERDIAG_IT_PROM_RETENTION (default 6h), POWERDIAG_PROMETHEUS (default /usr/bin/prometheus),
POWERDIAG_PROMTOOL (default /usr/bin/promtool).
EOF
}

IT_DIR=${POWERDIAG_IT_DIR:-/tmp/powerdiag-it}
START_TIMEOUT=${POWERDIAG_IT_PROM_START_TIMEOUT:-30}
RETENTION=${POWERDIAG_IT_PROM_RETENTION:-6h}
PROMETHEUS=${POWERDIAG_PROMETHEUS:-/usr/bin/prometheus}
PROMTOOL=${POWERDIAG_PROMTOOL:-/usr/bin/promtool}
STOP_TIMEOUT=30

# ---------------------------------------------------------------------------------------------
# Instance paths and metadata

set_instance() { # NAME
    NAME=$1
    [[ $NAME =~ ^[A-Za-z0-9_]+(-[A-Za-z0-9_]+)*$ ]] ||
        die "bad instance name '$NAME' (letters, digits, _ and inner -)"
    case $IT_DIR in
    /*) ;;
    *) die "POWERDIAG_IT_DIR must be an absolute path (got '$IT_DIR')" ;;
    esac
    D=$IT_DIR/$NAME
    DATA=$D/data
    LOG=$D/prometheus.log
    PIDF=$D/launcher.pid
    META=$D/instance.env
}

load_meta() { # sets PORT and CONFIG from instance.env
    [ -f "$META" ] || die "instance '$NAME' does not exist ($META missing); use: prometheus.sh start $NAME PORT CONFIG_FILE"
    local k v kind=""
    PORT="" CONFIG=""
    while IFS='=' read -r k v; do
        case $k in
        KIND) kind=$v ;;
        PORT) PORT=$v ;;
        CONFIG) CONFIG=$v ;;
        esac
    done <"$META"
    [ "$kind" = prometheus ] || die "instance '$NAME' ($D) is not a Prometheus instance (a MariaDB one?): pick another name"
    if [ -z "$PORT" ] || [ -z "$CONFIG" ]; then die "corrupt $META"; fi
}

pid_of_instance() { # prints the pid of this instance's prometheus if it is running
    local pid
    pid=$(cat "$PIDF" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [ -r "/proc/$pid/cmdline" ] || return 1
    # Only our server: its command line carries this instance's TSDB directory.
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "--storage.tsdb.path=$DATA" || return 1
    printf '%s' "$pid"
}

lock_instance() {
    mkdir -p "$IT_DIR"
    exec 8>"$IT_DIR/.prometheus-$NAME.lock"
    flock -w 120 8 || die "timed out waiting for the lock on instance '$NAME'"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

url() { printf 'http://127.0.0.1:%s' "$PORT"; }

show_log() {
    [ -s "$LOG" ] || return 0
    printf -- '----- last lines of %s -----\n' "$LOG" >&2
    tail -n 30 "$LOG" >&2
}

# ---------------------------------------------------------------------------------------------

wait_ready() { # PID
    local pid=$1 deadline
    deadline=$(($(date +%s) + START_TIMEOUT))
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            show_log
            die "$NAME: prometheus (pid $pid) exited during start-up"
        fi
        if curl -fsS --max-time 2 -o /dev/null "$(url)/-/ready" 2>/dev/null; then
            return 0
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            show_log
            kill -KILL "$pid" 2>/dev/null || true
            die "$NAME: $(url)/-/ready not answering after ${START_TIMEOUT} s; killed it (pid $pid)"
        fi
        sleep 0.2
    done
}

cmd_start() {
    [ $# -ge 3 ] || {
        usage >&2
        die "start needs NAME PORT CONFIG_FILE"
    }
    set_instance "$1"
    local port=$2 config=$3 pid t0
    shift 3
    if ! [[ $port =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
        die "bad port '$port'"
    fi
    [ -x "$PROMETHEUS" ] || die "$PROMETHEUS missing: install prometheus (tests/harness/setup.sh)"
    [ -x "$PROMTOOL" ] || die "$PROMTOOL missing: install prometheus (tests/harness/setup.sh)"
    command -v curl >/dev/null 2>&1 || die "curl missing: install curl (tests/harness/setup.sh)"
    [ -f "$config" ] || die "config file '$config' does not exist"
    config=$(realpath -- "$config")
    lock_instance
    t0=$(now)

    if [ -f "$META" ]; then
        load_meta
        if pid=$(pid_of_instance); then
            [ "$PORT" = "$port" ] ||
                die "instance '$NAME' is already running on port $PORT (asked for $port); stop it first"
            [ "$CONFIG" = "$config" ] ||
                die "instance '$NAME' is already running with $CONFIG (asked for $config); stop it first"
            log "$NAME: already running (pid $pid, $(url))"
            return 0
        fi
    elif [ -e "$D" ]; then
        die "$D exists but is not a Prometheus instance (a MariaDB one?): pick another name"
    fi
    PORT=$port
    CONFIG=$config
    if port_in_use "$PORT"; then
        die "port $PORT on 127.0.0.1 is already in use (another instance or service?)"
    fi
    if ! "$PROMTOOL" check config "$CONFIG" >"$IT_DIR/.prometheus-$NAME.check" 2>&1; then
        cat "$IT_DIR/.prometheus-$NAME.check" >&2
        die "$NAME: promtool check config rejected $CONFIG"
    fi
    rm -f "$IT_DIR/.prometheus-$NAME.check"

    mkdir -p "$DATA"
    printf 'KIND=prometheus\nPORT=%s\nCONFIG=%s\n' "$PORT" "$CONFIG" >"$META"
    rm -f "$PIDF"
    printf -- '----- %s: start on port %s -----\n' "$(date -u +%FT%TZ)" "$PORT" >>"$LOG"

    # New session (not killed with the caller's process group), no inherited stdio (a caller that
    # captures our output must see EOF), and the instance lock (fd 8) closed in the child.
    setsid "$PROMETHEUS" \
        --config.file="$CONFIG" \
        --storage.tsdb.path="$DATA" \
        --storage.tsdb.retention.time="$RETENTION" \
        --web.listen-address="127.0.0.1:$PORT" \
        --web.enable-lifecycle \
        "$@" </dev/null >>"$LOG" 2>&1 8>&- &
    pid=$!
    printf '%s\n' "$pid" >"$PIDF"
    wait_ready "$pid"
    log "$NAME: Prometheus up in $(elapsed "$t0") s (pid $pid, $(url), config $CONFIG)"
}

cmd_stop() {
    [ $# -eq 1 ] || die "stop needs NAME"
    set_instance "$1"
    local pid t0 deadline
    if [ ! -f "$META" ]; then
        log "$NAME: no such instance (nothing to stop)"
        return 0
    fi
    load_meta
    lock_instance
    if ! pid=$(pid_of_instance); then
        log "$NAME: not running"
        rm -f "$PIDF"
        return 0
    fi
    t0=$(now)
    kill -CONT "$pid" 2>/dev/null || true # a test may have SIGSTOPped it
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$(($(date +%s) + STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            log "$NAME: still running after ${STOP_TIMEOUT} s; SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
            break
        fi
        sleep 0.1
    done
    rm -f "$PIDF"
    log "$NAME: stopped in $(elapsed "$t0") s"
}

cmd_env() {
    [ $# -eq 1 ] || die "env needs NAME"
    set_instance "$1"
    load_meta
    local v
    v=POWERDIAG_IT_$(printf '%s' "$NAME" | tr '[:lower:]-' '[:upper:]_')
    printf 'export %s_PORT=%q\n' "$v" "$PORT"
    printf 'export %s_URL=%q\n' "$v" "$(url)"
    printf 'export %s_DIR=%q\n' "$v" "$D"
}

cmd_status() {
    [ $# -eq 1 ] || die "status needs NAME"
    set_instance "$1"
    if [ ! -f "$META" ]; then
        printf '%s: absent (%s)\n' "$NAME" "$D"
        return 3
    fi
    load_meta
    local pid
    if pid=$(pid_of_instance); then
        printf '%s: running pid=%s port=%s url=%s config=%s dir=%s\n' \
            "$NAME" "$pid" "$PORT" "$(url)" "$CONFIG" "$D"
        return 0
    fi
    printf '%s: stopped port=%s config=%s dir=%s\n' "$NAME" "$PORT" "$CONFIG" "$D"
    return 3
}

cmd_destroy() {
    [ $# -eq 1 ] || die "destroy needs NAME"
    set_instance "$1"
    if [ -f "$META" ]; then
        cmd_stop "$1"
    elif [ -e "$D" ]; then
        die "$D is not a Prometheus instance (a MariaDB one?): not deleting it"
    fi
    rm -rf "$D"
    rm -f "$IT_DIR/.prometheus-$NAME.lock"
    log "$NAME: deleted $D"
}

[ $# -ge 1 ] || {
    usage >&2
    exit 2
}
cmd=$1
shift
case $cmd in
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
env) cmd_env "$@" ;;
status) cmd_status "$@" ;;
destroy) cmd_destroy "$@" ;;
-h | --help | help) usage ;;
*)
    usage >&2
    die "unknown command '$cmd'"
    ;;
esac
