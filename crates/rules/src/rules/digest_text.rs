//! What a statement's digest text shows plainly: the table and the columns an index on it would
//! need. Shared by the statement rules (PD701's and PD703's remediations).

/// The table and the columns an index would need, when a single-table statement's text shows
/// them: `WHERE` columns compared with `= ?` (or `IN`), then ones compared by range, then the
/// `ORDER BY` columns. `None` for joins, subqueries or no usable `WHERE`/`ORDER BY`.
pub(crate) fn index_columns(text: &str) -> Option<(String, Vec<String>)> {
    let tokens = tokenize(text);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    let count = |w: &str| upper.iter().filter(|t| *t == w).count();
    if count("SELECT") > 1 || count("JOIN") > 0 || count("FROM") != 1 {
        return None;
    }
    let from = upper.iter().position(|t| t == "FROM")?;
    let mut table = tokens.get(from + 1)?.clone();
    if tokens.get(from + 2).map(String::as_str) == Some(".") {
        table = format!("{table}.{}", tokens.get(from + 3)?);
    }
    if !table.starts_with('`') || upper.get(from + 2).is_some_and(|t| t == ",") {
        return None;
    }
    let mut eq = Vec::new();
    let mut range = Vec::new();
    let mut order = Vec::new();
    if let Some(w) = upper.iter().position(|t| t == "WHERE") {
        let end = upper[w..]
            .iter()
            .position(|t| matches!(t.as_str(), "GROUP" | "ORDER" | "LIMIT" | "HAVING"))
            .map_or(upper.len(), |e| w + e);
        for i in w + 1..end {
            let t = &tokens[i];
            if !is_ident(t) {
                continue;
            }
            // Skip a qualifier: `t` . `col` keeps `col`.
            if tokens.get(i + 1).map(String::as_str) == Some(".") {
                continue;
            }
            let op = upper.get(i + 1).map(String::as_str).unwrap_or("");
            match op {
                "=" | "IN" | "<=>" => push_unique(&mut eq, t),
                "<" | ">" | "<=" | ">=" | "BETWEEN" | "LIKE" => push_unique(&mut range, t),
                _ => {}
            }
        }
    }
    if let Some(o) = upper.iter().position(|t| t == "ORDER") {
        let end = upper[o..]
            .iter()
            .position(|t| t == "LIMIT")
            .map_or(upper.len(), |e| o + e);
        for i in o + 1..end {
            let t = &tokens[i];
            // A qualifier (`t` . `col`) is not a column.
            if is_ident(t) && tokens.get(i + 1).map(String::as_str) != Some(".") {
                push_unique(&mut order, t);
            }
        }
    }
    let mut cols = eq;
    for c in range.into_iter().chain(order) {
        push_unique(&mut cols, &c);
    }
    (!cols.is_empty()).then_some((table, cols))
}

/// The tables a statement's text names — after `FROM` (and its comma list), `JOIN`, `UPDATE`,
/// `INTO` — as (schema when qualified, table), unquoted, each once. Derived tables and
/// subqueries (`FROM (`) are skipped; their own `FROM` is read.
pub(crate) fn tables_named(text: &str) -> Vec<(Option<String>, String)> {
    let tokens = tokenize(text);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    let mut out: Vec<(Option<String>, String)> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let from = upper[i] == "FROM";
        if !(from || matches!(upper[i].as_str(), "JOIN" | "UPDATE" | "INTO")) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while let Some(first) = tokens.get(j).filter(|t| is_ident(t)) {
            let (name, next) = if tokens.get(j + 1).map(String::as_str) == Some(".")
                && let Some(second) = tokens.get(j + 2).filter(|t| is_ident(t))
            {
                ((Some(unquote(first)), unquote(second)), j + 3)
            } else {
                ((None, unquote(first)), j + 1)
            };
            if !out.contains(&name) {
                out.push(name);
            }
            j = next;
            // An alias (`AS` optional), then a comma continues a FROM list.
            if upper.get(j).map(String::as_str) == Some("AS") {
                j += 1;
            }
            if tokens.get(j).is_some_and(|t| is_ident(t)) {
                j += 1;
            }
            if !(from && tokens.get(j).map(String::as_str) == Some(",")) {
                break;
            }
            j += 1;
        }
        i = j.max(i + 1);
    }
    out
}

/// `` `a``b` `` → ``a`b``.
fn unquote(t: &str) -> String {
    t[1..t.len() - 1].replace("``", "`")
}

fn is_ident(t: &str) -> bool {
    t.len() > 2 && t.starts_with('`') && t.ends_with('`')
}

fn push_unique(v: &mut Vec<String>, t: &str) {
    if !v.iter().any(|x| x == t) {
        v.push(t.to_owned());
    }
}

/// Digest text tokens: the server already separates them with spaces; backquoted names stay
/// whole.
fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in text.chars() {
        if quoted {
            cur.push(c);
            if c == '`' {
                quoted = false;
            }
        } else if c == '`' {
            cur.push(c);
            quoted = true;
        } else if c.is_whitespace() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_from_digest_text() {
        let t = |s: Option<&str>, n: &str| (s.map(str::to_owned), n.to_owned());
        assert_eq!(
            tables_named(
                "SELECT * FROM `a` . `t` AS `x` , `u` JOIN `v` ON `x` . `id` = `v` . `id` WHERE `id` IN ( SELECT `id` FROM `w``q` )"
            ),
            [
                t(Some("a"), "t"),
                t(None, "u"),
                t(None, "v"),
                t(None, "w`q")
            ]
        );
        assert_eq!(
            tables_named("UPDATE `s` . `counters` SET `n` = `n` + ? WHERE `id` = ?"),
            [t(Some("s"), "counters")]
        );
        assert_eq!(
            tables_named("INSERT INTO `log` SELECT * FROM `log_old`"),
            [t(None, "log"), t(None, "log_old")]
        );
        assert_eq!(tables_named("SELECT ? FROM ( SELECT ? ) `d`"), []);
        assert_eq!(tables_named("COMMIT"), []);
    }

    #[test]
    fn index_columns_from_digest_text() {
        assert_eq!(
            index_columns("SELECT COUNT ( * ) FROM `a` . `t` WHERE `t` . `x` IN (...) AND `y` > ?"),
            Some(("`a`.`t`".into(), vec!["`x`".into(), "`y`".into()]))
        );
        assert_eq!(
            index_columns("SELECT * FROM `a` JOIN `b` ON `a` . `id` = `b` . `a`"),
            None
        );
        assert_eq!(index_columns("SELECT * FROM `a`"), None);
        // Django's listing, as MariaDB 11.8 wrote its digest.
        assert_eq!(
            index_columns(
                "SELECT `shop_patch` . `id` , `shop_patch` . `name` FROM `shop_patch` WHERE `shop_patch` . `state` = ? ORDER BY `shop_patch` . `date` DESC , `shop_patch` . `id` DESC LIMIT ?"
            ),
            Some((
                "`shop_patch`".into(),
                vec!["`state`".into(), "`date`".into(), "`id`".into()]
            ))
        );
    }
}
