#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The ORM applications of the statement tests (tests/it/statements.rs): Django and SQLAlchemy
# through PyMySQL, installed from PyPI into a virtualenv under the cache directory.
#
#   orm.sh setup              create the virtualenv (once; versions pinned below)
#   orm.sh run PORT ARGS...   run tests/harness/orm/app.py ARGS against 127.0.0.1:PORT as root
#                             (password $POWERDIAG_IT_ROOT_PASSWORD), e.g. `run 23118 bad 40`
#   orm.sh n1 PORT ARGS...    run tests/harness/orm/n1.py ARGS (N+1 shapes on both ORMs), e.g.
#                             `n1 23112 run sqlalchemy reverse 9 40`
#
# Environment: POWERDIAG_CACHE_DIR (default /var/cache/powerdiag), POWERDIAG_IT_ROOT_PASSWORD.
set -euo pipefail
HARNESS_TAG=orm # used by lib.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

DJANGO=5.2.19
PYMYSQL=1.2.4
SQLALCHEMY=2.1.9
VENV=$POWERDIAG_CACHE_DIR/orm-venv-django$DJANGO-sqlalchemy$SQLALCHEMY-pymysql$PYMYSQL

setup() {
    if [ -x "$VENV/bin/python" ] && [ -f "$VENV/.complete" ]; then
        return 0
    fi
    command -v python3 >/dev/null 2>&1 || die "python3 missing: apt-get install python3 python3-venv"
    local start tmp
    start=$(now)
    mkdir -p "$POWERDIAG_CACHE_DIR"
    tmp=$(mktemp -d "$POWERDIAG_CACHE_DIR/.orm-venv.XXXXXX")
    python3 -m venv "$tmp" || die "python3 -m venv failed: apt-get install python3-venv"
    "$tmp/bin/python" -m pip install --quiet --disable-pip-version-check \
        "Django==$DJANGO" "SQLAlchemy==$SQLALCHEMY" "PyMySQL==$PYMYSQL" ||
        die "pip install Django==$DJANGO SQLAlchemy==$SQLALCHEMY PyMySQL==$PYMYSQL failed (needs https access to PyPI)"
    touch "$tmp/.complete"
    # Another set-up may have finished first: keep theirs.
    if ! mv -T "$tmp" "$VENV" 2>/dev/null; then rm -rf "$tmp"; fi
    # venv scripts carry absolute paths: recreate the launcher paths after the rename.
    python3 -m venv --upgrade "$VENV" >/dev/null
    log "Django $DJANGO + SQLAlchemy $SQLALCHEMY + PyMySQL $PYMYSQL in $VENV ($(elapsed "$start") s)"
}

case ${1:-} in
setup) setup ;;
run | n1)
    [ $# -ge 3 ] || die "usage: orm.sh $1 PORT ARGS..."
    setup
    app=$HERE/orm/app.py
    [ "$1" = run ] || app=$HERE/orm/n1.py
    export ORM_PORT=$2
    export ORM_PASSWORD=${POWERDIAG_IT_ROOT_PASSWORD:-powerdiag-it-root}
    shift 2
    exec "$VENV/bin/python" "$app" "$@"
    ;;
*) die "usage: orm.sh setup | orm.sh run PORT ARGS... | orm.sh n1 PORT ARGS..." ;;
esac
