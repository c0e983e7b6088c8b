#!/bin/sh
# Registers the powerdiag agent with AIX's System Resource Controller (SRC), so that
# startsrc/stopsrc/lssrc manage it and SRC restarts it if it dies.
#
#   deploy/aix/powerdiag-src.sh add       # mkssys (as root); then: startsrc -s powerdiag
#   deploy/aix/powerdiag-src.sh remove    # stopsrc, rmssys
#   deploy/aix/powerdiag-src.sh show      # lssrc -S -s powerdiag (the registered definition)
#   deploy/aix/powerdiag-src.sh boot      # also start it at boot (an inittab entry: startsrc)
#
#   startsrc -s powerdiag          start
#   stopsrc -s powerdiag           SIGTERM: the agent stops within 5 s
#   lssrc -s powerdiag             status (active/inoperative, pid)
#   kill -HUP <pid from lssrc>     reload the configuration file
#
# Environment (defaults in brackets): POWERDIAG_BIN [/opt/powerdiag/bin/powerdiag],
# POWERDIAG_USER [powerdiag], POWERDIAG_CONFIG [/etc/powerdiag/agent.toml],
# POWERDIAG_MYCNF [/etc/powerdiag/my.cnf], POWERDIAG_LISTEN [:9987],
# POWERDIAG_LOG [/var/log/powerdiag/agent.log].
#
# The password lives only in POWERDIAG_MYCNF (owner POWERDIAG_USER, mode 0600), never in the
# SRC definition, which any user can read with lssrc -S.
set -eu

SUBSYS=powerdiag
BIN=${POWERDIAG_BIN:-/opt/powerdiag/bin/powerdiag}
RUN_AS=${POWERDIAG_USER:-powerdiag}
CONFIG=${POWERDIAG_CONFIG:-/etc/powerdiag/agent.toml}
MYCNF=${POWERDIAG_MYCNF:-/etc/powerdiag/my.cnf}
LISTEN=${POWERDIAG_LISTEN:-:9987}
LOG=${POWERDIAG_LOG:-/var/log/powerdiag/agent.log}

die() {
    echo "powerdiag-src: $*" >&2
    exit 1
}

check_files() {
    [ -x "$BIN" ] || die "$BIN is missing or not executable (set POWERDIAG_BIN)"
    [ -f "$CONFIG" ] || die "$CONFIG is missing (copy deploy/systemd/agent.toml; set POWERDIAG_CONFIG)"
    [ -f "$MYCNF" ] || die "$MYCNF is missing (copy deploy/systemd/my.cnf, chmod 0600; set POWERDIAG_MYCNF)"
    uid=$(id -u "$RUN_AS" 2>/dev/null) ||
        die "user $RUN_AS does not exist: mkuser login=false rlogin=false home=/ $RUN_AS"
    # Readable or writable by group or others leaks the password.
    if [ -n "$(find "$MYCNF" -prune \( -perm -040 -o -perm -004 -o -perm -020 -o -perm -002 \) -print)" ]; then
        die "$MYCNF must be mode 0600 (chmod 600 $MYCNF): it holds the password"
    fi
    owner=$(find "$MYCNF" -prune -user "$RUN_AS" -print)
    [ -n "$owner" ] || die "$MYCNF must belong to $RUN_AS (chown $RUN_AS $MYCNF)"
}

cmd_add() {
    [ "$(id -u)" = 0 ] || die "run as root"
    check_files
    if lssrc -s "$SUBSYS" >/dev/null 2>&1; then
        die "subsystem $SUBSYS already exists (remove it first: $0 remove)"
    fi
    mkdir -p "$(dirname "$LOG")"
    touch "$LOG"
    chown "$RUN_AS" "$LOG"
    chmod 0640 "$LOG"
    # -S: controlled by signals; -n 15: stopsrc sends SIGTERM, -f 9: stopsrc -f sends SIGKILL.
    # -R: restart when it ends abnormally (SRC gives up after repeated failures, see lssrc).
    # -Q: one instance. -u: run as RUN_AS. -i/-o/-e: no stdin, logs to LOG.
    mkssys -s "$SUBSYS" -p "$BIN" \
        -a "agent --config.file=$CONFIG --mariadb.defaults-file=$MYCNF --web.listen-address=$LISTEN" \
        -u "$uid" -S -n 15 -f 9 -R -Q -G powerdiag \
        -i /dev/null -o "$LOG" -e "$LOG"
    echo "registered: startsrc -s $SUBSYS (and $0 boot to start it at boot)"
}

cmd_remove() {
    [ "$(id -u)" = 0 ] || die "run as root"
    stopsrc -s "$SUBSYS" >/dev/null 2>&1 || true
    if lsitab "$SUBSYS" >/dev/null 2>&1; then
        rmitab "$SUBSYS"
    fi
    rmssys -s "$SUBSYS"
}

cmd_boot() {
    [ "$(id -u)" = 0 ] || die "run as root"
    lssrc -s "$SUBSYS" >/dev/null 2>&1 || die "register it first: $0 add"
    if lsitab "$SUBSYS" >/dev/null 2>&1; then
        echo "inittab already has: $(lsitab "$SUBSYS")"
        return 0
    fi
    # Run level 2 (multi-user), once, after the SRC master (srcmstr) is up.
    mkitab -i srcmstr "$SUBSYS:2:once:/usr/bin/startsrc -s $SUBSYS >/dev/console 2>&1"
}

case ${1:-} in
add) cmd_add ;;
remove) cmd_remove ;;
show) lssrc -S -s "$SUBSYS" ;;
boot) cmd_boot ;;
*)
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
