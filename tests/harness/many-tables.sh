#!/usr/bin/env bash
# Generates a large server for powerdiag's scale test and benchmark: TABLES plain InnoDB tables
# spread over SCHEMAS schemas (pd_scale_00, pd_scale_01, ...), plus VECTORS small tables with a
# vector index each in pd_scale_00 (MariaDB 11.7+). Idempotent: existing tables are kept.
#
#   tests/harness/many-tables.sh NAME [TABLES] [SCHEMAS] [VECTORS]     (default 10000 8 4)
#   tests/harness/many-tables.sh NAME drop                             (drops the pd_scale_* schemas)
#
# NAME is an instance of tests/harness/mariadb.sh (same POWERDIAG_IT_DIR). The statements go
# through one client session as one stream.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=${1:?usage: many-tables.sh NAME [TABLES] [SCHEMAS] [VECTORS] | NAME drop}
sql() { "$HERE/mariadb.sh" sql "$NAME" -N "$@"; }

if [ "${2:-}" = drop ]; then
    sql -e "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'pd\\_scale\\_%'" |
        while read -r s; do sql -e "DROP DATABASE \`$s\`"; done
    exit 0
fi
TABLES=${2:-10000}
SCHEMAS=${3:-8}
VECTORS=${4:-4}
[[ $TABLES =~ ^[0-9]+$ && $SCHEMAS =~ ^[1-9][0-9]*$ && $VECTORS =~ ^[0-9]+$ ]] ||
    { echo "many-tables.sh: TABLES, SCHEMAS and VECTORS are numbers" >&2; exit 2; }

started=$(date +%s.%N)
# Each table in its own .ibd file, as servers run (innodb_file_per_table is ON by default): the
# dictionary and tablespace reads whose cost grows with the tables are what the scale test and
# the bench measure. Log flushes and .frm syncs are off while it runs (restored on exit).
saved=$(sql -e 'SELECT @@GLOBAL.innodb_flush_log_at_trx_commit, @@GLOBAL.innodb_file_per_table, @@GLOBAL.sync_frm' 2>/dev/null || true)
if [ -n "$saved" ]; then
    read -r flush fpt sfrm <<<"$saved"
    trap 'sql -e "SET GLOBAL innodb_flush_log_at_trx_commit = $flush, GLOBAL innodb_file_per_table = $fpt, GLOBAL sync_frm = $sfrm"' EXIT
    sql -e 'SET GLOBAL innodb_flush_log_at_trx_commit = 0, GLOBAL innodb_file_per_table = 1, GLOBAL sync_frm = 0'
fi
{
    for ((s = 0; s < SCHEMAS; s++)); do
        printf 'CREATE DATABASE IF NOT EXISTS pd_scale_%02d;\n' "$s"
    done
    for ((i = 0; i < TABLES; i++)); do
        printf 'CREATE TABLE IF NOT EXISTS pd_scale_%02d.t%05d (id INT PRIMARY KEY, a INT, b VARCHAR(64), KEY (a)) ENGINE=InnoDB;\n' \
            $((i % SCHEMAS)) "$i"
    done
    for ((v = 0; v < VECTORS; v++)); do
        printf 'CREATE TABLE IF NOT EXISTS pd_scale_00.vec%02d (id INT PRIMARY KEY, e VECTOR(16) NOT NULL, VECTOR INDEX (e)) ENGINE=InnoDB;\n' "$v"
        printf 'INSERT IGNORE INTO pd_scale_00.vec%02d VALUES ' "$v"
        for ((r = 1; r <= 200; r++)); do
            printf '(%d,VEC_FromText("[%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d]"))' "$r" \
                $((r % 7)) $((r % 11)) $((r % 13)) $((r % 17)) $((r % 19)) $((r % 23)) $((r % 29)) $((r % 31)) \
                $((r % 37)) $((r % 41)) $((r % 43)) $((r % 47)) $((r % 53)) $((r % 59)) $((r % 61)) $((r % 67))
            [ "$r" -lt 200 ] && printf ','
        done
        printf ';\n'
    done
} | sql
echo "many-tables: $TABLES tables in $SCHEMAS schemas and $VECTORS vector indexes on $NAME in $(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s" >&2
