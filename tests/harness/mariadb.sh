#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Throw-away MariaDB servers for powerdiag's integration tests (run tests/harness/setup.sh once first).
set -euo pipefail

HARNESS_TAG=mariadb # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

usage() {
    cat <<'EOF'
Usage: tests/harness/mariadb.sh COMMAND NAME [ARGS...]

  start NAME FLAVOUR PORT   start instance NAME (FLAVOUR: 11.8 = Debian trixie build via its loader,
                            10.11 = Debian 12's /usr/sbin/mariadbd) on 127.0.0.1:PORT; initialises
                            the datadir when the instance has none, then (re)applies the grants:
                              root@127.0.0.1  password $POWERDIAG_IT_ROOT_PASSWORD, ALL WITH GRANT OPTION
                              root@localhost  unix_socket OR mysql_native_password (same password)
                              database powerdiag_it
                            Already running with the same flavour and port: only re-applies grants.
  stop NAME                 SIGCONT, SIGTERM, wait up to 30 s, SIGKILL. Fine if not running.
  sql NAME [CLIENT ARGS]    run the matching mariadb client as root over the instance's socket,
                            e.g.  mariadb.sh sql m118 -e 'SELECT VERSION()'
  env NAME                  print export lines POWERDIAG_IT_<NAME>_{PORT,SOCKET,PIDFILE,DIR}
  status NAME               print the state; exit 0 when running, 3 when stopped
  destroy NAME              stop and delete the instance directory

Instance directory $POWERDIAG_IT_DIR/NAME (default /tmp/powerdiag-it/NAME):
  my.cnf  data/  tmp/  mysqld.sock  mysqld.pid  error.log  mariadbd.out  install-db.log  instance.env

Environment: POWERDIAG_IT_DIR, POWERDIAG_IT_ROOT_PASSWORD (default powerdiag-it-root),
POWERDIAG_CACHE_DIR (default /var/cache/powerdiag), POWERDIAG_IT_START_TIMEOUT (default 60 s),
POWERDIAG_IT_USER (OS user mariadbd runs as when started by root; default mysql),
POWERDIAG_IT_MARIADB_PFS (performance_schema of an 11.8 instance: ON, the default, or OFF;
10.11: OFF, the default, or ON),
POWERDIAG_IT_MARIADB_OPTIONS (extra server options for this start, space-separated name=value
pairs appended to [mysqld], e.g. 'mhnsw_max_cache_size=1M'; a restart must pass them again),
POWERDIAG_IT_LOG (`file`, the default: log-error=error.log; `journal`: no log-error, so the
server logs to stderr, and it is started under systemd-cat, which sends that to the journal —
run the start inside tests/harness/journald.sh's namespace; a restart must pass it again).
EOF
}

IT_DIR=${POWERDIAG_IT_DIR:-/tmp/powerdiag-it}
ROOT_PW=${POWERDIAG_IT_ROOT_PASSWORD:-powerdiag-it-root}
START_TIMEOUT=${POWERDIAG_IT_START_TIMEOUT:-60}
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
    SOCK=$D/mysqld.sock
    PIDF=$D/mysqld.pid
    ERRLOG=$D/error.log
    OUT=$D/mariadbd.out
    CNF=$D/my.cnf
    ROOT_CNF=$D/root.cnf # only for non-root callers: my.cnf plus the root password (0600)
    META=$D/instance.env
    INITED=$D/.initialised
    # Own tmpdir: at start-up mariadbd deletes every '#sql*' file in its tmpdir, so instances
    # sharing /tmp destroy each other's temporary tables (seen: concurrent install-db failing).
    TMPD=$D/tmp
    # sun_path is 108 bytes including the NUL.
    [ "${#SOCK}" -le 107 ] || die "socket path too long for a unix socket (${#SOCK} > 107): $SOCK"
}

load_meta() { # sets FLAVOUR and PORT from instance.env
    [ -f "$META" ] || die "instance '$NAME' does not exist ($META missing); use: mariadb.sh start $NAME FLAVOUR PORT"
    FLAVOUR="" PORT=""
    local k v
    while IFS='=' read -r k v; do
        case $k in
        FLAVOUR) FLAVOUR=$v ;;
        PORT) PORT=$v ;;
        esac
    done <"$META"
    if [ -z "$FLAVOUR" ] || [ -z "$PORT" ]; then die "corrupt $META"; fi
}

set_flavour() { # FLAVOUR
    FLAVOUR=$1
    case $FLAVOUR in
    11.8)
        ensure_trixie_wrappers
        MARIADBD=$TRIXIE_WRAP/mariadbd
        CLIENT=$TRIXIE_WRAP/mariadb
        ADMIN=$TRIXIE_WRAP/mariadb-admin
        INSTALL_DB=$TRIXIE_ROOT/usr/bin/mariadb-install-db
        BASEDIR=$TRIXIE_BASE
        PFS=${POWERDIAG_IT_MARIADB_PFS:-ON}
        ;;
    10.11)
        MARIADBD=/usr/sbin/mariadbd
        CLIENT=/usr/bin/mariadb
        ADMIN=/usr/bin/mariadb-admin
        INSTALL_DB=/usr/bin/mariadb-install-db
        BASEDIR=/usr
        PFS=${POWERDIAG_IT_MARIADB_PFS:-OFF}
        local p
        for p in "$MARIADBD" "$CLIENT" "$ADMIN" "$INSTALL_DB"; do
            [ -x "$p" ] || die "$p missing: install mariadb-server and mariadb-client (tests/harness/setup.sh)"
        done
        ;;
    *) die "unknown flavour '$FLAVOUR' (use 11.8 or 10.11)" ;;
    esac
}

# OS user the server runs as: mysql when we are root (mariadbd refuses root without --user=root),
# else ourselves.
set_run_user() {
    if [ "$(id -u)" -eq 0 ]; then
        RUN_USER=${POWERDIAG_IT_USER:-mysql}
        getent passwd "$RUN_USER" >/dev/null ||
            die "OS user '$RUN_USER' does not exist (install mariadb-server or set POWERDIAG_IT_USER)"
    else
        RUN_USER=$(id -un)
    fi
}

sql_quote() { # escape for a single-quoted SQL string literal
    local s=${1//\\/\\\\}
    printf '%s' "${s//\'/\\\'}"
}

# Client as root over the socket: unix_socket auth when we are root, the password otherwise.
client_defaults() {
    if [ "$(id -u)" -eq 0 ]; then
        printf '%s' "$CNF"
        return 0
    fi
    (
        umask 077
        printf '!include %s\n[client]\npassword=%s\n' "$CNF" "$ROOT_PW" >"$ROOT_CNF.tmp"
    )
    mv -f "$ROOT_CNF.tmp" "$ROOT_CNF"
    printf '%s' "$ROOT_CNF"
}

pid_of_instance() { # prints the pid of this instance's mariadbd if it is running
    local pid
    pid=$(cat "$PIDF" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || pid=$(cat "$D/launcher.pid" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [ -r "/proc/$pid/cmdline" ] || return 1
    # Only our server: its command line carries this instance's --defaults-file.
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "--defaults-file=$CNF" || return 1
    printf '%s' "$pid"
}

lock_instance() {
    mkdir -p "$IT_DIR"
    exec 8>"$IT_DIR/.$NAME.lock"
    flock -w 120 8 || die "timed out waiting for the lock on instance '$NAME'"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------------------------------------

write_config() {
    local tmp=$CNF.tmp
    {
        printf '# Generated by tests/harness/mariadb.sh: instance %s, MariaDB %s. Rewritten on every start.\n' \
            "$NAME" "$FLAVOUR"
        printf '[mysqld]\n'
        [ "$(id -u)" -ne 0 ] || printf 'user=%s\n' "$RUN_USER"
        printf '%s\n' \
            "basedir=$BASEDIR" \
            "datadir=$DATA" \
            "socket=$SOCK" \
            "port=$PORT" \
            "pid-file=$PIDF" \
            "tmpdir=$TMPD" \
            "bind-address=127.0.0.1" \
            "skip-name-resolve" \
            "innodb_buffer_pool_size=256M" \
            "performance_schema=$PFS" \
            "local_infile=ON" \
            "max_connections=200"
        [ "${POWERDIAG_IT_LOG:-file}" = journal ] || printf 'log-error=%s\n' "$ERRLOG"
        local opt
        for opt in ${POWERDIAG_IT_MARIADB_OPTIONS:-}; do
            printf '%s\n' "$opt"
        done
        if [ "$FLAVOUR" = 11.8 ]; then
            trixie_arch
            printf '%s\n' \
                "plugin-dir=$TRIXIE_ROOT/usr/lib/mysql/plugin" \
                "lc-messages-dir=$TRIXIE_ROOT/usr/share/mariadb" \
                "character-sets-dir=$TRIXIE_ROOT/usr/share/mariadb/charsets"
        fi
        printf '\n[client]\nuser=root\nsocket=%s\nport=%s\n' "$SOCK" "$PORT"
        if [ "$FLAVOUR" = 11.8 ]; then
            printf '%s\n' \
                "plugin-dir=$TRIXIE_ROOT/usr/lib/$TRIXIE_MULTIARCH/libmariadb3/plugin" \
                "character-sets-dir=$TRIXIE_ROOT/usr/share/mariadb/charsets"
        fi
    } >"$tmp"
    chmod 0644 "$tmp"
    mv -f "$tmp" "$CNF"
}

init_datadir() {
    local rc=0 socket_user
    rm -rf "$DATA" "$INITED"
    mkdir -p "$DATA"
    chown "$RUN_USER:" "$DATA"
    chmod 0750 "$DATA"
    socket_user=$RUN_USER
    log "$NAME: initialising $DATA (MariaDB $FLAVOUR)"
    MYSQLD_BOOTSTRAP=$MARIADBD "$INSTALL_DB" --defaults-file="$CNF" --basedir="$BASEDIR" \
        --datadir="$DATA" --user="$RUN_USER" --auth-root-authentication-method=socket \
        --auth-root-socket-user="$socket_user" --skip-test-db --skip-name-resolve --force \
        >"$D/install-db.log" 2>&1 </dev/null || rc=$?
    if [ "$rc" -ne 0 ]; then
        tail -n 30 "$D/install-db.log" >&2
        die "$NAME: mariadb-install-db failed (rc=$rc; log: $D/install-db.log)"
    fi
    touch "$INITED"
}

wait_ready() { # PID
    local pid=$1 deadline
    deadline=$(($(date +%s) + START_TIMEOUT))
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            show_logs
            die "$NAME: mariadbd (pid $pid) exited during start-up"
        fi
        if [ -S "$SOCK" ] &&
            "$ADMIN" --defaults-file="$CNF" --connect-timeout=2 ping >/dev/null 2>&1; then
            return 0
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            show_logs
            kill -CONT "$pid" 2>/dev/null || true
            kill -KILL "$pid" 2>/dev/null || true
            die "$NAME: not answering on $SOCK after ${START_TIMEOUT} s; killed it (pid $pid)"
        fi
        sleep 0.1
    done
}

show_logs() {
    local f
    for f in "$ERRLOG" "$OUT"; do
        [ -s "$f" ] || continue
        printf -- '----- last lines of %s -----\n' "$f" >&2
        tail -n 30 "$f" >&2
    done
}

apply_grants() {
    local pw boot_user=root
    pw=$(sql_quote "$ROOT_PW")
    # Right after install-db only unix_socket accounts work: root@localhost if we are root, else
    # the account install-db made for our OS user.
    [ "$(id -u)" -eq 0 ] || boot_user=$(id -un)
    # A Galera node answers on its socket before it has joined its cluster (ERROR 1047 "WSREP
    # has not yet prepared node for application use"): wait until it takes statements.
    case " ${POWERDIAG_IT_MARIADB_OPTIONS:-} " in
    *" wsrep_on=ON "*)
        local deadline=$(($(date +%s) + 2 * START_TIMEOUT))
        until "$CLIENT" --defaults-file="$CNF" --user="$boot_user" --batch \
            -e "SELECT 1 FROM mysql.user LIMIT 1" >/dev/null 2>&1; do
            if [ "$(date +%s)" -ge "$deadline" ]; then
                show_logs
                die "$NAME: the Galera node did not join its cluster within $((2 * START_TIMEOUT)) s"
            fi
            sleep 0.1
        done
        ;;
    esac
    if ! "$CLIENT" --defaults-file="$CNF" --user="$boot_user" --batch >"$D/grants.log" 2>&1 <<EOF; then
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '$pw';
ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '$pw';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('$pw');
CREATE DATABASE IF NOT EXISTS powerdiag_it;
EOF
        cat "$D/grants.log" >&2
        die "$NAME: applying the root accounts over $SOCK failed"
    fi
}

cmd_start() {
    [ $# -eq 3 ] || {
        usage >&2
        die "start needs NAME FLAVOUR PORT"
    }
    set_instance "$1"
    local flavour=$2 port=$3 pid t0
    if ! [[ $port =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
        die "bad port '$port'"
    fi
    set_flavour "$flavour"
    set_run_user
    local opt
    for opt in ${POWERDIAG_IT_MARIADB_OPTIONS:-}; do
        [[ $opt =~ ^[a-z][a-z0-9_-]*(=[A-Za-z0-9_./:,;=\"-]*)?$ ]] ||
            die "POWERDIAG_IT_MARIADB_OPTIONS: '$opt' is not a name=value server option"
    done
    lock_instance
    t0=$(now)

    if [ -f "$META" ]; then
        load_meta
        [ "$FLAVOUR" = "$flavour" ] ||
            die "instance '$NAME' holds a MariaDB $FLAVOUR datadir, not $flavour: 'mariadb.sh destroy $NAME' first"
        set_flavour "$flavour"
        if pid=$(pid_of_instance); then
            [ "$PORT" = "$port" ] ||
                die "instance '$NAME' is already running on port $PORT (asked for $port); stop it first"
            log "$NAME: already running (pid $pid); re-applying grants"
            apply_grants
            return 0
        fi
    fi
    PORT=$port
    if port_in_use "$PORT"; then
        die "port $PORT on 127.0.0.1 is already in use (another instance or service?)"
    fi

    mkdir -p "$IT_DIR" "$D"
    chmod 0755 "$IT_DIR" "$D"
    printf 'FLAVOUR=%s\nPORT=%s\n' "$FLAVOUR" "$PORT" >"$META"
    write_config
    rm -f "$PIDF" "$SOCK" "$D/launcher.pid"
    # The server (and install-db's bootstrap) writes its pid file, socket, error log and
    # temporary files here, as RUN_USER.
    mkdir -p "$TMPD"
    touch "$ERRLOG" "$OUT"
    chown "$RUN_USER:" "$D" "$TMPD" "$ERRLOG"
    chmod 0750 "$TMPD"
    [ -f "$INITED" ] || init_datadir

    # New session (not killed with the caller's process group), no inherited stdio (a caller that
    # captures our output must see EOF), and the instance lock (fd 8) closed in the child.
    local launch=()
    case ${POWERDIAG_IT_LOG:-file} in
    file) ;;
    # systemd-cat connects stdout and stderr to the journal, then execs mariadbd (same pid).
    journal) launch=(systemd-cat --identifier=mariadbd --) ;;
    *) die "POWERDIAG_IT_LOG must be file or journal (got '$POWERDIAG_IT_LOG')" ;;
    esac
    setsid "${launch[@]}" "$MARIADBD" --defaults-file="$CNF" </dev/null >>"$OUT" 2>&1 8>&- &
    pid=$!
    printf '%s\n' "$pid" >"$D/launcher.pid"
    wait_ready "$pid"
    apply_grants
    log "$NAME: MariaDB $FLAVOUR up in $(elapsed "$t0") s (pid $(cat "$PIDF" 2>/dev/null || echo "$pid"), port $PORT, socket $SOCK)"
}

cmd_stop() {
    [ $# -eq 1 ] || die "stop needs NAME"
    set_instance "$1"
    local pid t0 deadline
    if [ ! -d "$D" ]; then
        log "$NAME: no such instance (nothing to stop)"
        return 0
    fi
    lock_instance
    if ! pid=$(pid_of_instance); then
        log "$NAME: not running"
        rm -f "$SOCK" "$D/launcher.pid"
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
            rm -f "$PIDF" "$SOCK"
            break
        fi
        sleep 0.1
    done
    rm -f "$D/launcher.pid"
    log "$NAME: stopped in $(elapsed "$t0") s"
}

cmd_sql() {
    [ $# -ge 1 ] || die "sql needs NAME"
    set_instance "$1"
    shift
    load_meta
    set_flavour "$FLAVOUR"
    pid_of_instance >/dev/null || die "instance '$NAME' is not running: mariadb.sh start $NAME $FLAVOUR $PORT"
    local defaults
    defaults=$(client_defaults)
    exec "$CLIENT" --defaults-file="$defaults" "$@"
}

cmd_env() {
    [ $# -eq 1 ] || die "env needs NAME"
    set_instance "$1"
    load_meta
    local v
    v=POWERDIAG_IT_$(printf '%s' "$NAME" | tr '[:lower:]-' '[:upper:]_')
    printf 'export %s_PORT=%q\n' "$v" "$PORT"
    printf 'export %s_SOCKET=%q\n' "$v" "$SOCK"
    printf 'export %s_PIDFILE=%q\n' "$v" "$PIDF"
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
        printf '%s: running pid=%s flavour=%s port=%s socket=%s dir=%s\n' \
            "$NAME" "$pid" "$FLAVOUR" "$PORT" "$SOCK" "$D"
        return 0
    fi
    printf '%s: stopped flavour=%s port=%s dir=%s\n' "$NAME" "$FLAVOUR" "$PORT" "$D"
    return 3
}

cmd_destroy() {
    [ $# -eq 1 ] || die "destroy needs NAME"
    cmd_stop "$1"
    rm -rf "$D"
    rm -f "$IT_DIR/.$NAME.lock"
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
sql) cmd_sql "$@" ;;
env) cmd_env "$@" ;;
status) cmd_status "$@" ;;
destroy) cmd_destroy "$@" ;;
-h | --help | help) usage ;;
*)
    usage >&2
    die "unknown command '$cmd'"
    ;;
esac
