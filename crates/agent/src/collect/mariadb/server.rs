//! Global variables and status: one statement each, only the names the rules use.
//!
//! What each form costs the server (mariadbd CPU per statement sent back to back, MariaDB 11.8
//! on the 2-core test VM; `tests/bench.sh` measures them once a second, and the agent's sample): `SHOW GLOBAL VARIABLES` ~2.2 ms, with
//! `WHERE Variable_name IN (...)` still ~0.7 ms (the server materialises every variable, then
//! filters), `information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME IN (...)` ~0.6 ms, and
//! `SELECT @@global.a, @@global.b, ...` ~0.06 ms. So doctor, which reads once and must work on
//! any server, uses the `SHOW ... WHERE` form; the agent, which reads every sample, learns from
//! that first read which of the names this server has and afterwards selects exactly those
//! ([`VarPlan`]): `@@name` fails for a variable the server does not have (`mhnsw_*` before
//! 11.7, `query_cache_type` on MySQL 8), so the list must follow the server. On a kept
//! connection it reuses them while the status read shows no setting change
//! ([`SETTING_CHANGES`]; `variables_refresh` at the longest, `Reuse`), so most samples send
//! only the status read.
//!
//! The status read has no cheap form. Every way of reading a status counter (`SHOW GLOBAL
//! STATUS` with `WHERE` or `LIKE`, `information_schema.GLOBAL_STATUS`,
//! `performance_schema.global_status`) fills an information-schema table: the server walks all
//! ~570 status variables and, for each, resets a 12 KB row (`VARIABLE_VALUE` is
//! `VARCHAR(4096)` in utf8mb3) before testing its name. A perf profile of mariadbd (cpu-clock,
//! DWARF unwinding) puts 65-80% of a warm status read in `fill_status`, a third of it in that
//! `memcpy`. Measured once a second on the 2-core VM (`tests/bench.sh`), against a `DO 1` sent
//! the same way: the 15 names with `WHERE ... IN` cost 0.70-0.75 ms of server CPU more, a
//! single name with `LIKE` (which skips the row reset for names that cannot match) still
//! 0.46-0.58 ms. So a sample that reads any status counter costs the server ~0.9 ms here, and
//! the counters are what the metrics need every sample.

use std::collections::BTreeMap;

use powerdiag_rules::{DbError, StatusVar, Var};

use super::session::{Session, TextRow, sql_str, tcol, text_rows};

/// The server's uptime and some of its counters, from one status read: what changes only when
/// one of those counters moves (or the server restarts) is unchanged while the mark is. The
/// agent keeps the vector indexes' list by [`super::vector::SCHEMA_CHANGES`] and the variables
/// by [`SETTING_CHANGES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChangeMark {
    uptime: u64,
    counters: Vec<u64>,
}

impl ChangeMark {
    /// The mark in a status read; `None` when a counter is missing or unreadable (then what it
    /// guards is always read again).
    pub(crate) fn of(status: &BTreeMap<String, String>, counters: &[StatusVar]) -> Option<Self> {
        let num = |v: StatusVar| status.get(v.name())?.trim().parse::<u64>().ok();
        Some(ChangeMark {
            uptime: num(StatusVar::Uptime)?,
            counters: counters.iter().map(|v| num(*v)).collect::<Option<_>>()?,
        })
    }

    /// True when `now` is the same server run with nothing changed since `self`: the same
    /// counters (any difference, a reset by `FLUSH STATUS` included, is a change) and an
    /// uptime that did not go back (a restart).
    pub(crate) fn unchanged_at(&self, now: &ChangeMark) -> bool {
        self.counters == now.counters && now.uptime >= self.uptime
    }
}

/// What moves when a global variable may have changed: `Com_set_option` counts every `SET`
/// statement (`SET GLOBAL` among them, from any session, a stored routine or an event
/// included); `Com_install_plugin` and `Com_uninstall_plugin` count the plugins installed and
/// removed (`INSTALL SONAME` too), which add and remove variables; and the buffer pool's page
/// count moves when InnoDB resizes it, which MariaDB 11.8 may do by itself under memory
/// pressure (down to `innodb_buffer_pool_size_auto_min`). A session's own `SET` moves the first
/// counter too, so on a server whose clients send `SET NAMES` or `SET autocommit` the
/// variables are simply read every sample, as before.
pub(crate) const SETTING_CHANGES: [StatusVar; 4] = [
    StatusVar::ComSetOption,
    StatusVar::ComInstallPlugin,
    StatusVar::ComUninstallPlugin,
    StatusVar::InnodbBufferPoolPagesTotal,
];

/// What moves when any session grants or revokes a privilege or a role. MariaDB gives a session
/// its global privileges when it logs in, so a connection kept across a `GRANT` goes on without
/// it: the agent connects again after one (`Reuse`).
pub(crate) const GRANT_CHANGES: [StatusVar; 5] = [
    StatusVar::ComGrant,
    StatusVar::ComGrantRole,
    StatusVar::ComRevoke,
    StatusVar::ComRevokeAll,
    StatusVar::ComRevokeRole,
];

/// Which of [`Var::ALL`] a server has, learned from a `SHOW GLOBAL VARIABLES` read of that
/// server version. Always starts with [`Var::Version`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VarPlan {
    /// `@@version` when the plan was learned: another version (an upgrade) re-learns it.
    pub(crate) version: String,
    pub(crate) vars: Vec<Var>,
}

impl VarPlan {
    /// The plan for the server that answered `variables` (a `SHOW` read).
    pub(crate) fn learn(variables: &BTreeMap<String, String>) -> Option<VarPlan> {
        let version = variables.get(Var::Version.name())?.clone();
        let mut vars = vec![Var::Version];
        vars.extend(
            Var::ALL
                .iter()
                .copied()
                .filter(|v| *v != Var::Version && variables.contains_key(v.name())),
        );
        Some(VarPlan { version, vars })
    }

    /// `SELECT @@global.version, ...`: one row, one column per variable.
    pub(crate) fn sql(&self) -> String {
        let cols: Vec<String> = self
            .vars
            .iter()
            .map(|v| format!("@@global.{}", v.name()))
            .collect();
        format!("SELECT {}", cols.join(","))
    }

    /// The row of [`VarPlan::sql`] as `SHOW` would have spelt it: booleans come back from
    /// `@@` as `1`/`0`, from `SHOW` as `ON`/`OFF`.
    pub(crate) fn parse(&self, row: &TextRow) -> BTreeMap<String, String> {
        self.vars
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let raw = tcol(row, i).unwrap_or_default();
                let value = match (v.is_bool(), raw.as_str()) {
                    (true, "1") => "ON".to_owned(),
                    (true, "0") => "OFF".to_owned(),
                    _ => raw,
                };
                (v.name().to_owned(), value)
            })
            .collect()
    }
}

/// Reads the variables with `plan`: `Ok(None)` when the server no longer matches it (another
/// version, or a variable it does not have), so the caller reads them with `SHOW` instead.
pub(crate) async fn read_variables_planned(
    s: &mut Session,
    plan: &VarPlan,
) -> Result<Option<BTreeMap<String, String>>, DbError> {
    let rows = match s.query(&plan.sql()).await {
        Ok(rows) => text_rows(&rows),
        // ER_UNKNOWN_SYSTEM_VARIABLE: the server changed under the plan.
        Err(e) if e.message.contains("ERROR 1193 ") => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let vars = plan.parse(row);
    if vars.get(Var::Version.name()) != Some(&plan.version) {
        return Ok(None);
    }
    Ok(Some(vars))
}

/// `SHOW GLOBAL VARIABLES WHERE Variable_name IN (...)`: works on MariaDB and MySQL alike and
/// needs no privilege.
pub(crate) fn variables_sql() -> String {
    show_sql("VARIABLES", Var::ALL.iter().map(|v| v.name()))
}

pub(crate) fn status_sql() -> String {
    show_sql("STATUS", StatusVar::ALL.iter().map(|v| v.name()))
}

fn show_sql<'a>(what: &str, names: impl Iterator<Item = &'a str>) -> String {
    let list: Vec<String> = names.map(sql_str).collect();
    format!(
        "SHOW GLOBAL {what} WHERE Variable_name IN ({})",
        list.join(",")
    )
}

/// Name/value rows into a map with lower-case names.
pub(crate) fn parse_name_values(rows: &[TextRow]) -> BTreeMap<String, String> {
    rows.iter()
        .filter_map(|r| {
            Some((
                tcol(r, 0)?.to_ascii_lowercase(),
                tcol(r, 1).unwrap_or_default(),
            ))
        })
        .collect()
}

pub(crate) async fn read_variables(s: &mut Session) -> Result<BTreeMap<String, String>, DbError> {
    Ok(parse_name_values(&text_rows(
        &s.query(&variables_sql()).await?,
    )))
}

pub(crate) async fn read_status(s: &mut Session) -> Result<BTreeMap<String, String>, DbError> {
    Ok(parse_name_values(&text_rows(
        &s.query(&status_sql()).await?,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_list_every_name_once() {
        let sql = variables_sql();
        assert!(sql.starts_with("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('version',"));
        for v in Var::ALL {
            assert_eq!(sql.matches(&format!("'{}'", v.name())).count(), 1);
        }
        assert!(status_sql().contains("'handler_read_last'"));
    }

    #[test]
    fn a_plan_selects_what_the_server_has_and_reads_booleans_as_show_does() {
        let shown: BTreeMap<String, String> = [
            ("version", "10.11.19-MariaDB"),
            ("large_pages", "OFF"),
            ("performance_schema", "ON"),
            ("max_connections", "151"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let plan = VarPlan::learn(&shown).unwrap();
        assert_eq!(
            plan.sql(),
            "SELECT @@global.version,@@global.performance_schema,@@global.large_pages,@@global.max_connections"
        );
        assert!(!plan.sql().contains("mhnsw"));
        let row = ["10.11.19-MariaDB", "1", "0", "151"]
            .map(|v| Some(v.to_owned()))
            .to_vec();
        assert_eq!(plan.parse(&row), shown);
        assert_eq!(VarPlan::learn(&BTreeMap::new()), None);
    }

    #[test]
    fn name_values_are_lower_cased_and_nulls_tolerated() {
        let rows = vec![
            vec![
                Some("Version".to_owned()),
                Some("11.8.6-MariaDB".to_owned()),
            ],
            vec![Some("socket".to_owned()), None],
            vec![None, Some("x".to_owned())],
        ];
        let m = parse_name_values(&rows);
        assert_eq!(m.get("version").map(String::as_str), Some("11.8.6-MariaDB"));
        assert_eq!(m.get("socket").map(String::as_str), Some(""));
        assert_eq!(m.len(), 2);
    }
}
