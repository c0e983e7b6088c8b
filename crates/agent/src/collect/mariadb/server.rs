//! Global variables and status: one statement each, only the names the rules use.

use std::collections::BTreeMap;

use powerdiag_rules::{DbError, StatusVar, Var};

use super::session::{Session, TextRow, sql_str, tcol, text_rows};

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
