#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Builds the .deb and the .rpm from an already built powerdiag and checks them:
#   1. generates what the packages carry besides the binary (target/package-assets/): the man
#      pages (`powerdiag man --output-dir`, gzipped), the bash/zsh/fish completions
#      (`powerdiag completions`), and the systemd unit with ExecStart=/usr/bin/powerdiag;
#   2. cargo deb --no-build and cargo generate-rpm (metadata: crates/cli/Cargo.toml);
#   3. the .rpm, with Debian's rpm tools: its file list, modes, config files and scripts;
#   4. the .deb: its file list and conffiles (dpkg-deb), then, when the binary runs on this
#      machine, installed with dpkg into a copy (overlayfs) of the clean Debian 12 root that
#      tests/harness/verify-setup.sh maintains — never into that root itself — where the
#      postinst must create the powerdiag user, `systemd-analyze verify` must accept the
#      installed unit, `powerdiag doctor` must report, and the agent, started with the
#      installed unit's ExecStart as the powerdiag user, must answer /healthz and /metrics;
#      then dpkg --purge must remove it cleanly.
#
# Usage: tests/package.sh [--target TRIPLE] [--profile dev|release] [--out DIR]
#   --target   the binary's target (default: the host's; built with cargo or cargo zigbuild)
#   --profile  dev (target/.../debug) or release (default release)
#   --out      where the packages go (default target/packages)
# Environment: POWERDIAG_PACKAGE_MARIADB_PORT: a test server on 127.0.0.1 (tests/harness/
# mariadb.sh, root password POWERDIAG_IT_ROOT_PASSWORD) that the installed doctor and agent
# must reach; without it they run without a database. POWERDIAG_PACKAGE_PORT: the agent's
# port (default 34691).
# Needs root (dpkg into the root, chroot, mount), cargo-deb and cargo-generate-rpm (installed
# with `cargo install --locked` when missing), rpm and debootstrap (packages.txt).
set -euo pipefail

HARNESS_TAG=package # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=harness/lib.sh
. "$HERE/harness/lib.sh"
cd "$ROOT"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

TARGET="" PROFILE=release OUT=$ROOT/target/packages
while [ $# -gt 0 ]; do
    case $1 in
    --target) TARGET=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) die "unknown argument '$1' (usage: tests/package.sh [--target TRIPLE] [--profile dev|release] [--out DIR])" ;;
    esac
done
[ "$(id -u)" -eq 0 ] || die "run as root: the .deb is installed into a chroot"
case $PROFILE in dev) PROFILE_DIR=debug ;; release) PROFILE_DIR=release ;; *) die "--profile must be dev or release" ;; esac
T0=$(now)
TARGET_DIR=$ROOT/target${TARGET:+/$TARGET}/$PROFILE_DIR
BIN=$TARGET_DIR/powerdiag
[ -x "$BIN" ] || die "$BIN is not built (cargo build${TARGET:+ --target $TARGET}${PROFILE:+ --profile $PROFILE} -p powerdiag)"
TARGET_ARGS=()
[ -z "$TARGET" ] || TARGET_ARGS=(--target "$TARGET")

# Pinned tool versions (their own lock files: --locked).
CARGO_DEB_VERSION=3.8.0
CARGO_GENERATE_RPM_VERSION=0.21.1
tool_version() { "$@" --version 2>/dev/null | awk '{ print $NF }'; }
if [ "$(tool_version cargo deb)" != "$CARGO_DEB_VERSION" ]; then
    log "installing cargo-deb $CARGO_DEB_VERSION (once, about 2 minutes)"
    cargo install --locked --quiet cargo-deb --version "$CARGO_DEB_VERSION"
fi
if [ "$(tool_version cargo generate-rpm)" != "$CARGO_GENERATE_RPM_VERSION" ]; then
    log "installing cargo-generate-rpm $CARGO_GENERATE_RPM_VERSION (once, about 2 minutes)"
    cargo install --locked --quiet cargo-generate-rpm --version "$CARGO_GENERATE_RPM_VERSION"
fi
for t in rpm dpkg-deb chroot; do
    command -v "$t" >/dev/null || die "$t is missing (tests/harness/setup.sh installs packages.txt)"
done

# A binary that runs here generates the man pages and completions (they are the same for every
# target): the packaged one when it can run, else the host's debug build.
HOST_BIN=$BIN
if ! "$HOST_BIN" --version >/dev/null 2>&1; then
    HOST_BIN=${POWERDIAG_HOST_BIN:-$ROOT/target/debug/powerdiag}
    "$HOST_BIN" --version >/dev/null 2>&1 ||
        die "neither $BIN nor $HOST_BIN runs here: build the host's (cargo build -p powerdiag) or set POWERDIAG_HOST_BIN"
fi

# 1. Generated assets.
ASSETS=$ROOT/target/package-assets
rm -rf "$ASSETS"
mkdir -p "$ASSETS/man" "$ASSETS/completions"
"$HOST_BIN" man --output-dir "$ASSETS/man" 2>/dev/null
gzip -9n "$ASSETS"/man/*.1
"$HOST_BIN" completions bash >"$ASSETS/completions/powerdiag.bash"
"$HOST_BIN" completions zsh >"$ASSETS/completions/_powerdiag"
"$HOST_BIN" completions fish >"$ASSETS/completions/powerdiag.fish"
sed 's|/usr/local/bin/powerdiag|/usr/bin/powerdiag|g' deploy/systemd/powerdiag-agent.service \
    >"$ASSETS/powerdiag-agent.service"
grep -q '^ExecStart=/usr/bin/powerdiag agent' "$ASSETS/powerdiag-agent.service" ||
    die "the packaged unit's ExecStart is not /usr/bin/powerdiag agent"
MAN_PAGES=$(find "$ASSETS/man" -name '*.1.gz' | wc -l)
[ "$MAN_PAGES" -ge 2 ] || die "powerdiag man wrote $MAN_PAGES pages"

# 2. The packages, from a stripped copy of the binary in a staging target directory (both
# tools read CARGO_TARGET_DIR; a debug build is 170 MB with its symbols). Release builds are
# stripped by tests/release.sh already; strip here only what this machine's strip can read.
STAGE=$ROOT/target/package-stage
rm -rf "$STAGE" "$OUT"
mkdir -p "$STAGE${TARGET:+/$TARGET}/$PROFILE_DIR" "$OUT"
cp "$BIN" "$STAGE${TARGET:+/$TARGET}/$PROFILE_DIR/powerdiag"
if [ "$HOST_BIN" = "$BIN" ]; then
    strip "$STAGE${TARGET:+/$TARGET}/$PROFILE_DIR/powerdiag"
fi
CARGO_TARGET_DIR=$STAGE cargo deb -p powerdiag --no-build --no-strip --quiet "${TARGET_ARGS[@]}" \
    --profile "$PROFILE" --output "$OUT/" >/dev/null
CARGO_TARGET_DIR=$STAGE cargo generate-rpm -p crates/cli "${TARGET_ARGS[@]}" --profile "$PROFILE" \
    -o "$OUT/" >/dev/null
DEB=$(find "$OUT" -name '*.deb' | head -n1)
RPM=$(find "$OUT" -name '*.rpm' | head -n1)
{ [ -f "$DEB" ] && [ -f "$RPM" ]; } || die "cargo deb / cargo generate-rpm made no package in $OUT"
log "built $(basename "$DEB") ($(du -h "$DEB" | cut -f1)) and $(basename "$RPM") ($(du -h "$RPM" | cut -f1))"

fails=()
# The files both packages must carry (the .deb without the leading slash), by role.
EXPECTED=(
    /usr/bin/powerdiag
    /usr/lib/systemd/system/powerdiag-agent.service
    /usr/lib/sysusers.d/powerdiag.conf
    /etc/powerdiag/agent.toml
    /etc/powerdiag/my.cnf
    /etc/default/powerdiag-agent
    /usr/share/man/man1/powerdiag.1.gz
    /usr/share/man/man1/powerdiag-doctor.1.gz
    /usr/share/man/man1/powerdiag-agent.1.gz
    /usr/share/bash-completion/completions/powerdiag
    /usr/share/fish/vendor_completions.d/powerdiag.fish
    /usr/share/powerdiag/runbooks/PD101.md
    /usr/share/powerdiag/runbooks/PowerdiagAgentDown.md
    /usr/share/doc/powerdiag/examples/prometheus/powerdiag.rules.yml
    /usr/share/doc/powerdiag/examples/systemd/perf.conf
    /usr/share/doc/powerdiag/README.md
    /usr/share/doc/powerdiag/docs/agent.md
    /usr/share/doc/powerdiag/docs/rules.md
)
has() { # LIST PATH
    grep -qxF -- "$2" <<<"$1" || fails+=("$3 lacks $2")
}

# 3. The .rpm with rpm's own tools.
rpm_q() { rpm -qp --nosignature "$@" "$RPM" 2>/dev/null; }
RPM_FILES=$(rpm_q -l)
for f in "${EXPECTED[@]}" /usr/share/zsh/site-functions/_powerdiag /usr/share/licenses/powerdiag/LICENSE; do
    has "$RPM_FILES" "$f" ".rpm"
done
RPM_CONFIG=$(rpm_q --configfiles)
for f in /etc/powerdiag/agent.toml /etc/powerdiag/my.cnf /etc/default/powerdiag-agent; do
    has "$RPM_CONFIG" "$f" ".rpm's config files"
done
# my.cnf holds a password: 0600 root.
RPM_MODES=$(rpm_q --queryformat '[%{FILEMODES:perms} %{FILEUSERNAME} %{FILENAMES}\n]')
has "$RPM_MODES" "-rw------- root /etc/powerdiag/my.cnf" ".rpm (mode)"
has "$RPM_MODES" "-rwxr-xr-x root /usr/bin/powerdiag" ".rpm (mode)"
RPM_SCRIPTS=$(rpm_q --scripts)
for s in "postinstall scriptlet" "preuninstall scriptlet" "postuninstall scriptlet" "systemd-sysusers powerdiag.conf" "useradd --system"; do
    grep -qF "$s" <<<"$RPM_SCRIPTS" || fails+=(".rpm scripts lack '$s'")
done
# Every scriptlet is valid sh.
for phase in postinstall preuninstall postuninstall; do
    awk -v p="$phase scriptlet" 'index($0, p) == 1 { on = 1; next } /scriptlet \(using/ { on = 0 } on' \
        <<<"$RPM_SCRIPTS" | sh -n || fails+=(".rpm $phase scriptlet is not valid sh")
done
RPM_ARCH=$(rpm_q --queryformat '%{ARCH}')
log ".rpm: $(wc -l <<<"$RPM_FILES") files, arch $RPM_ARCH, requires: $(rpm_q --requires | tr '\n' ' ')"

# 4. The .deb: contents, then an install into a copy of the clean Debian 12 root.
DEB_FILES=$(dpkg-deb --fsys-tarfile "$DEB" | tar -t | sed -e 's|^\./|/|' -e 's|/$||')
for f in "${EXPECTED[@]}" /usr/share/zsh/vendor-completions/_powerdiag; do
    has "$DEB_FILES" "$f" ".deb"
done
DEB_CONFFILES=$(dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles)
for f in /etc/powerdiag/agent.toml /etc/powerdiag/my.cnf /etc/default/powerdiag-agent; do
    has "$DEB_CONFFILES" "$f" ".deb's conffiles"
done
for s in postinst prerm postrm; do
    dpkg-deb --ctrl-tarfile "$DEB" | tar -xO "./$s" | sh -n || fails+=(".deb $s is not valid sh")
done
DEB_ARCH=$(dpkg-deb --field "$DEB" Architecture)
log ".deb: $(wc -l <<<"$DEB_FILES") entries, arch $DEB_ARCH, depends: $(dpkg-deb --field "$DEB" Depends)"

if [ "$DEB_ARCH" != "$(dpkg --print-architecture)" ]; then
    log "the .deb is for $DEB_ARCH: not installed here (the $(dpkg --print-architecture) one is)"
else
    KEY=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$HERE/harness/packages.txt" | sha256sum | cut -c1-16)
    CLEAN=$POWERDIAG_CACHE_DIR/bookworm-verify-$KEY
    # verify-setup.sh removes the roots of other package lists (another checkout's) under its
    # exclusive lock: hold it shared while this root is in use, so it cannot vanish mid-test.
    for _ in 1 2 3; do
        [ -f "$CLEAN/.powerdiag-verify-complete" ] || "$HERE/harness/verify-setup.sh"
        exec 7>"$POWERDIAG_CACHE_DIR/.verify-setup.lock"
        flock -s 7
        [ -f "$CLEAN/.powerdiag-verify-complete" ] && break
        exec 7>&-
    done
    [ -f "$CLEAN/.powerdiag-verify-complete" ] || die "no clean Debian 12 root at $CLEAN"
    WORK=$(mktemp -d /tmp/powerdiag-package.XXXXXX)
    M=$WORK/root
    AGENT_PID=""
    teardown() {
        if [ -n "$AGENT_PID" ]; then kill "$AGENT_PID" 2>/dev/null || true; wait "$AGENT_PID" 2>/dev/null || true; fi
        for m in "$M/proc" "$M"; do
            if mountpoint -q "$m"; then umount "$m" || umount -l "$m"; fi
        done
        rm -rf --one-file-system "$WORK"
    }
    trap teardown EXIT
    mkdir -p "$WORK/upper" "$WORK/work" "$M"
    # A copy-on-write view: the cached root stays as verify-setup.sh built it.
    mount -t overlay overlay -o "lowerdir=$CLEAN,upperdir=$WORK/upper,workdir=$WORK/work" "$M"
    mount -t proc proc "$M/proc"
    cp "$DEB" "$M/tmp/powerdiag.deb"
    in_root() { chroot "$M" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }
    in_root dpkg -i /tmp/powerdiag.deb >"$WORK/dpkg.log" 2>&1 || {
        cat "$WORK/dpkg.log" >&2
        die "dpkg -i failed in the clean Debian 12 root"
    }
    in_root getent passwd powerdiag >/dev/null || fails+=("the postinst created no powerdiag user")
    [ "$(in_root stat -c '%a %U' /etc/powerdiag/my.cnf)" = "600 root" ] || fails+=("/etc/powerdiag/my.cnf is not 0600 root")
    in_root powerdiag --version | grep -q "^powerdiag $(cargo pkgid -p powerdiag | sed 's/.*[#@]//') " ||
        fails+=("the installed powerdiag --version is not this version")
    # The installed unit as systemd reads it (its binary must exist: ExecStart is checked).
    # --man=no: the clean root has no man(1); the pages are checked in the file list above.
    if ! out=$(in_root systemd-analyze verify --man=no /usr/lib/systemd/system/powerdiag-agent.service 2>&1); then
        printf '%s\n' "$out" >&2
        fails+=("systemd-analyze verify rejects the installed unit")
    fi
    for f in /usr/share/man/man1/powerdiag.1.gz /usr/share/bash-completion/completions/powerdiag; do
        in_root test -s "$f" || fails+=("$f is empty or missing after dpkg -i")
    done
    # doctor, as an operator would run it first.
    DB_PORT=${POWERDIAG_PACKAGE_MARIADB_PORT:-}
    DB_PW=${POWERDIAG_IT_ROOT_PASSWORD:-powerdiag-it-root}
    URL=${DB_PORT:+mysql://root:$DB_PW@127.0.0.1:$DB_PORT/}
    rc=0
    in_root env ${URL:+POWERDIAG_MARIADB_URL=$URL} powerdiag doctor --format json --sample-window 0 \
        --timeout 5s >"$WORK/doctor.json" 2>"$WORK/doctor.err" || rc=$?
    if [ "$rc" -gt 2 ]; then
        cat "$WORK/doctor.err" >&2
        fails+=("the installed powerdiag doctor exited $rc")
    elif ! python3 - "$WORK/doctor.json" "${URL:+reachable}" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
s = d["summary"]
assert s["checks"] >= 20 and s["checks"] == s["fail"] + s["pass"] + s["not_applicable"] + s["insufficient_data"], s
if sys.argv[2] == "reachable":
    assert d["mariadb"]["reachable"], d["mariadb"]
print(f"[package] installed doctor: exit {d['exit_code']}, {s['line']}", file=sys.stderr)
PY
        fails+=("the installed powerdiag doctor's report is wrong (above)")
    fi
    # The agent: the installed unit's ExecStart and /etc/default file, as the powerdiag user;
    # %d (the credentials directory) is a copy of my.cnf only that user can read.
    PORT=${POWERDIAG_PACKAGE_PORT:-34691}
    CRED=$M/run/powerdiag-credentials
    mkdir -p "$CRED"
    cp "$M/etc/powerdiag/my.cnf" "$CRED/my.cnf"
    if [ -n "$DB_PORT" ]; then
        # The test server, in the [client] section the operator fills in.
        printf '[client]\nuser=root\npassword=%s\nhost=127.0.0.1\nport=%s\n' "$DB_PW" "$DB_PORT" >"$CRED/my.cnf"
    fi
    chroot "$M" chown -R powerdiag:powerdiag /run/powerdiag-credentials
    chmod 0700 "$CRED"
    EXEC=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$M/usr/lib/systemd/system/powerdiag-agent.service" |
        sed -e 's/^ExecStart=//' -e 's/\\$//' | tr -s ' \n' ' ')
    # shellcheck disable=SC1090,SC1091 # the installed environment file
    ARGS=$(. "$M/etc/default/powerdiag-agent" && printf '%s' "${POWERDIAG_AGENT_ARGS:-}")
    # The shipped listen address (:9987, every interface) becomes this test's loopback port.
    ARGS=$(sed -E 's/--web\.listen-address(=| +)[^ ]+//g' <<<"$ARGS")
    EXEC=${EXEC//%d/\/run\/powerdiag-credentials}
    EXEC=${EXEC//\$POWERDIAG_AGENT_ARGS/$ARGS}
    read -r -a EXEC_ARGV <<<"$EXEC"
    log "agent in the root as powerdiag: ${EXEC_ARGV[*]} --web.listen-address=127.0.0.1:$PORT"
    port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
    ! port_in_use "$PORT" || die "port $PORT is in use: set POWERDIAG_PACKAGE_PORT"
    chroot --userspec=powerdiag:powerdiag "$M" env -i PATH=/usr/bin:/bin \
        "${EXEC_ARGV[@]}" "--web.listen-address=127.0.0.1:$PORT" >"$WORK/agent.log" 2>&1 &
    AGENT_PID=$!
    ok=0
    for _ in $(seq 1 100); do
        if curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 &&
            curl -fsS "http://127.0.0.1:$PORT/metrics" 2>/dev/null | grep -q '^powerdiag_check{'; then
            ok=1
            break
        fi
        kill -0 "$AGENT_PID" 2>/dev/null || break
        sleep 0.2
    done
    if [ "$ok" = 1 ]; then
        metrics=$(curl -fsS "http://127.0.0.1:$PORT/metrics")
        log "installed agent: /healthz ok, /metrics $(grep -c '^powerdiag_check{' <<<"$metrics") check series, $(awk '$1 == "powerdiag_mariadb_up"' <<<"$metrics" | grep . || echo 'no powerdiag_mariadb_up')"
        if [ -n "$URL" ] && ! awk '$1 == "powerdiag_mariadb_up" && $2 == 1 { ok = 1 } END { exit !ok }' <<<"$metrics"; then
            fails+=("the installed agent did not reach MariaDB (agent log: $(tail -n 3 "$WORK/agent.log"))")
        fi
    else
        cat "$WORK/agent.log" >&2
        fails+=("the installed agent did not serve /healthz and /metrics on 127.0.0.1:$PORT")
    fi
    kill "$AGENT_PID" 2>/dev/null || true
    wait "$AGENT_PID" 2>/dev/null || true
    AGENT_PID=""
    rm -rf "$CRED"
    in_root dpkg --purge powerdiag >>"$WORK/dpkg.log" 2>&1 || fails+=("dpkg --purge failed: $(tail -n 3 "$WORK/dpkg.log")")
    for f in /usr/bin/powerdiag /etc/powerdiag/my.cnf /usr/lib/systemd/system/powerdiag-agent.service; do
        ! in_root test -e "$f" || fails+=("$f is left after dpkg --purge")
    done
fi

if [ "${#fails[@]}" -ne 0 ]; then
    for f in "${fails[@]}"; do log "FAIL: $f"; done
    die "the packages are wrong (${#fails[@]} problem(s) above)"
fi
log "packages ok in $(elapsed "$T0") s: $DEB $RPM"
