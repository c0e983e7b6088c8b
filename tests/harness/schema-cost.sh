#!/usr/bin/env bash
# The server CPU of each statement of the schema read (collect/mariadb/schema.rs), as
# docs/performance.md ("The schema read") reports it: each statement alone RUNS times (5) on an
# otherwise idle server, mariadbd's user+system time around it from /proc (10 ms ticks), the
# median and the range. The IN-list statements name OPEN tables (200, the collector's cap),
# after FLUSH TABLES so each run opens them.
#
#   tests/harness/schema-cost.sh NAME [RUNS] [OPEN]
#
# NAME is an instance of tests/harness/mariadb.sh (same POWERDIAG_IT_DIR), on this host.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=${1:?usage: schema-cost.sh NAME [RUNS] [OPEN]}
RUNS=${2:-5}
OPEN=${3:-200}
[[ $RUNS =~ ^[1-9][0-9]*$ && $OPEN =~ ^[1-9][0-9]*$ ]] || { echo "schema-cost.sh: RUNS and OPEN are numbers" >&2; exit 2; }
sql() { "$HERE/mariadb.sh" sql "$NAME" -N "$@"; }
dir=$("$HERE/mariadb.sh" env "$NAME" | sed -n 's/^export POWERDIAG_IT_[A-Z0-9_]*_PIDFILE=//p' | tr -d "'\"")
pid=$(cat "$dir")
tick=$(getconf CLK_TCK)
cpu_ms() { awk -v t="$tick" '{ sub(/.*\) /, ""); split($0, f, " "); print (f[12] + f[13]) * 1000 / t }' "/proc/$pid/stat"; }

SYSTEM="('mysql', 'information_schema', 'performance_schema', 'sys')"
in_list=$(sql -e "SET SESSION group_concat_max_len = 16777216;
  SELECT CONCAT('(TABLE_SCHEMA, TABLE_NAME) IN (', COALESCE(GROUP_CONCAT(CONCAT('(_utf8mb4 X''', HEX(TABLE_SCHEMA), ''', _utf8mb4 X''', HEX(TABLE_NAME), ''')')), '(NULL, NULL)'), ')')
  FROM (SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA NOT IN $SYSTEM LIMIT $OPEN) t")
tables=$(sql -e "SELECT COUNT(*) FROM information_schema.INNODB_SYS_TABLES")

measure() {
    local label=$1 query=$2 flush=${3:-} runs=() rows=0 a b
    for ((i = 0; i < RUNS; i++)); do
        [ -n "$flush" ] && sql -e "FLUSH TABLES"
        sleep 0.3
        a=$(cpu_ms)
        rows=$(sql -e "$query" | wc -l)
        b=$(cpu_ms)
        runs+=($((${b%.*} - ${a%.*})))
    done
    sorted=$(printf '%s\n' "${runs[@]}" | sort -n)
    median=$(sed -n "$(((RUNS + 1) / 2))p" <<<"$sorted")
    printf '| %s | %s | %s ms (%s–%s) |\n' "$label" "$rows" "$median" "$(head -1 <<<"$sorted")" "$(tail -1 <<<"$sorted")"
}

echo "schema read on $NAME: $tables InnoDB dictionary tables, $RUNS runs each"
echo "| statement | rows | server CPU, median (range) |"
echo "|---|---|---|"
# Each statement runs in its own client connection: this is what connecting costs.
measure "(a connection and SELECT 1: included in every line below)" "SELECT 1"
measure "INNODB_SYS_TABLES" "SELECT TABLE_ID, NAME FROM information_schema.INNODB_SYS_TABLES"
measure "INNODB_SYS_INDEXES" "SELECT TABLE_ID, INDEX_ID, NAME, TYPE FROM information_schema.INNODB_SYS_INDEXES"
measure "INNODB_SYS_FIELDS" "SELECT INDEX_ID, NAME FROM information_schema.INNODB_SYS_FIELDS"
measure "mysql.innodb_table_stats" "SELECT database_name, table_name, n_rows, clustered_index_size * @@innodb_page_size, sum_of_other_index_sizes * @@innodb_page_size FROM mysql.innodb_table_stats"
measure ".frm listing (names only)" "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA NOT IN $SYSTEM"
measure "performance_schema writes per table" "SELECT OBJECT_SCHEMA, OBJECT_NAME, COUNT_WRITE FROM performance_schema.table_io_waits_summary_by_table WHERE OBJECT_TYPE = 'TABLE' AND COUNT_WRITE > 0 AND OBJECT_SCHEMA NOT IN $SYSTEM"
measure "performance_schema index usage" "SELECT OBJECT_SCHEMA, OBJECT_NAME, INDEX_NAME, COUNT_READ FROM performance_schema.table_io_waits_summary_by_index_usage WHERE OBJECT_TYPE = 'TABLE' AND INDEX_NAME IS NOT NULL AND OBJECT_SCHEMA NOT IN $SYSTEM"
measure "mysql.innodb_index_stats, every size (not sent: the scan the ranges replace)" "SELECT database_name, table_name, index_name, stat_value * @@innodb_page_size FROM mysql.innodb_index_stats WHERE stat_name = 'size'"
measure "mysql.innodb_index_stats, $OPEN tables by primary-key ranges" "SELECT database_name, table_name, index_name, stat_value FROM mysql.innodb_index_stats WHERE stat_name = 'size' AND (${in_list//TABLE_SCHEMA, TABLE_NAME/database_name, table_name})"
measure "information_schema.STATISTICS, $OPEN tables (IN list)" "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, NON_UNIQUE, INDEX_TYPE, COLUMN_NAME, SUB_PART, NULLABLE FROM information_schema.STATISTICS WHERE $in_list" flush
measure "information_schema.TABLES, $OPEN tables (IN list)" "SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE, TABLE_ROWS, DATA_LENGTH, INDEX_LENGTH, UPDATE_TIME, CREATE_TIME, TABLE_TYPE FROM information_schema.TABLES WHERE $in_list" flush
