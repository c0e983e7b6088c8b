//! A concrete statement and its plan, for the statements the statement rules name (`doctor
//! --explain`, the agent's opt-in `[statements] samples` and `explain`): the sample performance_schema's statement history kept of a digest, what
//! `EXPLAIN FORMAT=JSON` said of it, the index the plan lacks, and the redaction of literals.
//! Pure: the collector reads, this module judges text.

use serde::{Deserialize, Serialize};

use crate::Gathered;

/// One recent execution of a digest and its plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatementSample {
    /// The statement as performance_schema recorded it (`SQL_TEXT`, at most
    /// `performance_schema_max_sql_text_length` bytes): literals from production, unless
    /// `redacted`.
    pub sql_text: String,
    /// The literals of `sql_text` and of the plan's conditions were replaced by `?`
    /// (doctor's `--redact`, the agent's `[statements] redact`).
    pub redacted: bool,
    /// The session's default schema when it ran (`CURRENT_SCHEMA`).
    pub schema: Option<String>,
    /// `EXPLAIN FORMAT=JSON` of it, or why there is none (not a plain `SELECT`, cut short, the
    /// server refused).
    pub plan: Gathered<Plan>,
}

/// What `EXPLAIN FORMAT=JSON` said, one entry per table read, in join order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    pub tables: Vec<PlanTable>,
}

/// One table of a plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanTable {
    /// The name (or alias) the plan gives it.
    pub table: String,
    /// `ALL` (every row), `index` (every index entry), `range`, `ref`, `eq_ref`, `const`…
    pub access_type: String,
    pub key: Option<String>,
    #[serde(default)]
    pub possible_keys: Vec<String>,
    /// The optimizer's estimate of rows read.
    pub rows: Option<u64>,
    /// The condition applied to its rows (`attached_condition`).
    pub condition: Option<String>,
    /// The rows are sorted after they are read (a filesort), by `sort_key`.
    pub sort_key: Option<String>,
    /// For a table read whole (`ALL`, `index`): the columns an index would need, from the
    /// plan — equality columns of the condition, then range columns, then the sort.
    #[serde(default)]
    pub index_columns: Vec<String>,
}

impl PlanTable {
    /// Every row (or index entry) is read.
    pub fn reads_everything(&self) -> bool {
        matches!(self.access_type.as_str(), "ALL" | "index")
    }

    /// `shop_patch: ALL (every row), no key, ~19,804 rows`.
    pub fn summary(&self) -> String {
        let access = match self.access_type.as_str() {
            "ALL" => "ALL (every row)".to_owned(),
            "index" => "index (every index entry)".to_owned(),
            a => a.to_owned(),
        };
        let key = self
            .key
            .as_deref()
            .map_or_else(|| "no key".to_owned(), |k| format!("key {k}"));
        let rows = self
            .rows
            .map_or_else(String::new, |r| format!(", ~{r} rows"));
        let sort = if self.sort_key.is_some() {
            ", then sorted (filesort)"
        } else {
            ""
        };
        format!("{}: {access}, {key}{rows}{sort}", self.table)
    }
}

impl Plan {
    /// The first table read whole that has index columns to suggest: (table, columns).
    pub fn missing_index(&self) -> Option<(&str, &[String])> {
        self.tables
            .iter()
            .find(|t| t.reads_everything() && !t.index_columns.is_empty())
            .map(|t| (t.table.as_str(), t.index_columns.as_slice()))
    }
}

/// Why `text` may not be explained, if it may not: only one plain `SELECT` (no `INTO`, no
/// locking clause, no second statement), whole (not cut at the server's text limit).
pub fn not_explainable(text: &str, max_len: Option<usize>) -> Option<String> {
    if max_len.is_some_and(|m| text.len() >= m) {
        return Some(format!(
            "the statement was cut at performance_schema_max_sql_text_length ({} bytes)",
            text.len()
        ));
    }
    let masked = mask_literals(text, ' ');
    // Backquoted names are not keywords either.
    let mut in_name = false;
    let bare: String = masked
        .chars()
        .map(|c| {
            if c == '`' {
                in_name = !in_name;
                ' '
            } else if in_name {
                ' '
            } else {
                c
            }
        })
        .collect();
    let upper = bare.to_ascii_uppercase();
    let words: Vec<&str> = upper
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let first = masked
        .trim_start_matches(|c: char| c.is_whitespace() || c == '(')
        .get(..6)
        .map(str::to_ascii_uppercase);
    if first.as_deref() != Some("SELECT") {
        return Some("only a plain SELECT is explained".into());
    }
    if masked.trim_end().trim_end_matches(';').contains(';') {
        return Some("more than one statement".into());
    }
    if masked.contains("/*") || masked.contains("--") || masked.contains('#') {
        return Some("a comment in the statement (it could hide an executable comment)".into());
    }
    for w in [
        "INTO",
        "UPDATE",
        "SHARE",
        "LOCK",
        "SKIP",
        "NOWAIT",
        "PROCEDURE",
    ] {
        if words.contains(&w) {
            return Some(format!(
                "`{w}` in it: only a plain SELECT without INTO or a locking clause is explained"
            ));
        }
    }
    None
}

/// The text with every string literal (`'…'`, `"…"`) and number replaced by `?`.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let masked = mask_literals(text, '\u{0}');
    // Strings became runs of NULs: one `?` per run.
    let mut prev_nul = false;
    let chars: Vec<char> = masked.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\u{0}' {
            if !prev_nul {
                out.push('?');
            }
            prev_nul = true;
            i += 1;
            continue;
        }
        prev_nul = false;
        // A number not part of a name: digits (with a point, exponent, hex) after a
        // non-name character.
        let after_name = out
            .chars()
            .last()
            .is_some_and(|p| p.is_ascii_alphanumeric() || p == '_' || p == '`' || p == '$');
        if c.is_ascii_digit() && !after_name {
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_')
            {
                i += 1;
            }
            out.push('?');
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// `text` with the contents and quotes of string literals replaced by `fill`; backquoted
/// names are kept.
fn mask_literals(text: &str, fill: char) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            // Inside a backquoted name: kept as it is.
            Some('`') => {
                out.push(c);
                if c == '`' {
                    if chars.peek() == Some(&'`') {
                        chars.next();
                        out.push('`');
                    } else {
                        quote = None;
                    }
                }
            }
            // Inside a string: masked, escapes and doubled quotes included.
            Some(q) => {
                out.push(fill);
                if c == '\\' {
                    if chars.next().is_some() {
                        out.push(fill);
                    }
                } else if c == q {
                    if chars.peek() == Some(&q) {
                        chars.next();
                        out.push(fill);
                    } else {
                        quote = None;
                    }
                }
            }
            None => {
                if c == '\'' || c == '"' {
                    quote = Some(c);
                    out.push(fill);
                } else {
                    if c == '`' {
                        quote = Some(c);
                    }
                    out.push(c);
                }
            }
        }
    }
    out
}

/// Reads `EXPLAIN FORMAT=JSON`'s document: every table object, in order, with the filesort
/// above it.
pub fn parse_plan(json: &str) -> Result<Plan, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("EXPLAIN's JSON: {e}"))?;
    let mut tables = Vec::new();
    walk(&v, None, &mut tables);
    if tables.is_empty() {
        return Err("EXPLAIN named no table".into());
    }
    Ok(Plan { tables })
}

fn walk(v: &serde_json::Value, sort_key: Option<&str>, out: &mut Vec<PlanTable>) {
    match v {
        serde_json::Value::Object(m) => {
            let sort = m
                .get("filesort")
                .and_then(|f| f.get("sort_key"))
                .and_then(|s| s.as_str())
                .or_else(|| m.get("sort_key").and_then(|s| s.as_str()))
                .or(sort_key);
            if let (Some(name), Some(access)) = (
                m.get("table_name").and_then(|x| x.as_str()),
                m.get("access_type").and_then(|x| x.as_str()),
            ) {
                let condition = m
                    .get("attached_condition")
                    .and_then(|x| x.as_str())
                    .map(str::to_owned);
                let mut t = PlanTable {
                    table: name.to_owned(),
                    access_type: access.to_owned(),
                    key: m.get("key").and_then(|x| x.as_str()).map(str::to_owned),
                    possible_keys: m
                        .get("possible_keys")
                        .and_then(|x| x.as_array())
                        .map(|a| {
                            a.iter()
                                .filter_map(|k| k.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default(),
                    rows: m.get("rows").and_then(|x| x.as_u64()),
                    condition,
                    sort_key: sort.map(str::to_owned),
                    index_columns: Vec::new(),
                };
                if t.reads_everything() {
                    t.index_columns = index_columns(&t);
                }
                out.push(t);
            }
            for (k, x) in m {
                if k != "attached_condition" {
                    walk(x, sort, out);
                }
            }
        }
        serde_json::Value::Array(a) => {
            for x in a {
                walk(x, sort_key, out);
            }
        }
        _ => {}
    }
}

/// `shop_patch.state`, ``shop_patch.`name` ``, `` `t`.`c` `` or, when the statement named the
/// schema, `shop.shop_patch.state` → (table, column).
fn column_ref(token: &str) -> Option<(String, String)> {
    let mut parts = token.rsplitn(3, '.');
    let (c, t) = (parts.next()?, parts.next()?);
    if parts
        .next()
        .is_some_and(|schema| schema.trim_matches('`').is_empty())
    {
        return None;
    }
    let unq = |s: &str| s.trim_matches('`').to_owned();
    let (t, c) = (unq(t), unq(c));
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$')
    };
    (ok(&t) && ok(&c)).then_some((t, c))
}

/// The columns an index on `t` would need: equalities of its condition, then ranges, then its
/// sort's columns.
fn index_columns(t: &PlanTable) -> Vec<String> {
    let mut eq = Vec::new();
    let mut range = Vec::new();
    let push = |v: &mut Vec<String>, c: String| {
        if !v.contains(&c) {
            v.push(c);
        }
    };
    if let Some(cond) = &t.condition {
        let masked = mask_literals(cond, 'x');
        let tokens: Vec<&str> = masked
            .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
            .filter(|s| !s.is_empty())
            .collect();
        for (i, tok) in tokens.iter().enumerate() {
            let Some((table, col)) = column_ref(tok) else {
                continue;
            };
            if table != t.table {
                continue;
            }
            match tokens.get(i + 1).map(|o| o.to_ascii_lowercase()).as_deref() {
                Some("=" | "<=>" | "in") => push(&mut eq, col),
                Some("<" | ">" | "<=" | ">=" | "between" | "like") => push(&mut range, col),
                _ => {}
            }
        }
    }
    let mut cols = eq;
    for c in range {
        if !cols.contains(&c) {
            cols.push(c);
        }
    }
    if let Some(sort) = &t.sort_key {
        for part in sort.split(',') {
            let first = part.split_whitespace().next().unwrap_or("");
            if let Some((table, col)) = column_ref(first)
                && table == t.table
                && !cols.contains(&col)
            {
                cols.push(col);
            }
        }
    }
    cols
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MariaDB 11.8's plan of the ORM test's listing without its index.
    const SCAN: &str = r#"{
  "query_block": {
    "select_id": 1,
    "cost": 3.5397964,
    "nested_loop": [
      {
        "read_sorted_file": {
          "filesort": {
            "sort_key": "shop_patch.`date` desc, shop_patch.`id` desc",
            "table": {
              "table_name": "shop_patch",
              "access_type": "ALL",
              "loops": 1,
              "rows": 19804,
              "cost": 3.5397964,
              "filtered": 100,
              "attached_condition": "shop_patch.state = 3 and shop_patch.`name` like 'x%'"
            }
          }
        }
      }
    ]
  }
}"#;

    #[test]
    fn a_full_scan_and_the_index_it_lacks() {
        let p = parse_plan(SCAN).unwrap();
        assert_eq!(p.tables.len(), 1);
        let t = &p.tables[0];
        assert_eq!(
            t.summary(),
            "shop_patch: ALL (every row), no key, ~19804 rows, then sorted (filesort)"
        );
        assert_eq!(t.index_columns, ["state", "name", "date", "id"]);
        assert_eq!(
            p.missing_index(),
            Some(("shop_patch", &t.index_columns[..]))
        );
    }

    #[test]
    fn a_statement_that_names_the_schema_has_its_columns_found() {
        // MariaDB 10.11's plan of `... FROM pd_regress.orders WHERE customer_id = 17`.
        let p = parse_plan(
            r#"{"query_block":{"select_id":1,"nested_loop":[{"table":{"table_name":"orders","access_type":"ALL","rows":198375,"filtered":100,"attached_condition":"pd_regress.orders.customer_id = 17"}}]}}"#,
        )
        .unwrap();
        assert_eq!(p.tables[0].index_columns, ["customer_id"]);
        assert_eq!(column_ref("`s`.`t`.`c`"), Some(("t".into(), "c".into())));
        assert_eq!(column_ref(".t.c"), None);
    }

    #[test]
    fn a_plan_that_uses_an_index_lacks_none() {
        let p = parse_plan(
            r#"{"query_block":{"select_id":1,"nested_loop":[{"table":{"table_name":"shop_patch","access_type":"ref","possible_keys":["patch_state_date"],"key":"patch_state_date","rows":2483,"attached_condition":"shop_patch.state <=> 3"}}]}}"#,
        )
        .unwrap();
        assert_eq!(
            p.tables[0].summary(),
            "shop_patch: ref, key patch_state_date, ~2483 rows"
        );
        assert_eq!(p.missing_index(), None);
        assert!(parse_plan("{}").is_err() && parse_plan("not json").is_err());
    }

    #[test]
    fn only_plain_selects_are_explained() {
        assert_eq!(
            not_explainable("SELECT * FROM t WHERE a = 'x;y'", None),
            None
        );
        assert_eq!(not_explainable("  (SELECT 1)", None), None);
        for bad in [
            "UPDATE t SET a = 1",
            "SELECT * FROM t FOR UPDATE",
            "SELECT * FROM t LOCK IN SHARE MODE",
            "SELECT a INTO @x FROM t",
            "SELECT 1; DROP TABLE t",
            "SELECT /*!50000 1 */",
            "DELETE FROM t",
        ] {
            assert!(not_explainable(bad, None).is_some(), "{bad}");
        }
        // `into` inside a string or a backquoted name is not a clause.
        assert_eq!(
            not_explainable("SELECT `into` FROM t WHERE a = 'into'", None),
            None
        );
        assert!(
            not_explainable("SELECT * FROM t WHERE a = 1", Some(27))
                .unwrap()
                .contains("cut")
        );
    }

    #[test]
    fn redaction_replaces_every_literal() {
        assert_eq!(
            redact(
                "SELECT a1, `t2`.b FROM t WHERE x = 'it''s' AND y IN (1, 2.5e3, 0x1F) AND z = \"q\\\"\""
            ),
            "SELECT a1, `t2`.b FROM t WHERE x = ? AND y IN (?, ?, ?) AND z = ?"
        );
        assert_eq!(
            redact("shop_patch.state = 3 and shop_patch.`name` like 'x%'"),
            "shop_patch.state = ? and shop_patch.`name` like ?"
        );
    }
}
