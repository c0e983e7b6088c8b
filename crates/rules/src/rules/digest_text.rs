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

/// The column a statement is keyed on: the first `WHERE` comparison of a column with one value
/// — `col = ?`, `? = col` (SQLAlchemy's lazy loader writes it so), `col <=> ?` or `col IN ( ? )`
/// (MariaDB writes a list of several values as `IN (...)`, which is not one key) — unquoted,
/// lower case, without its table qualifier. `None` for a statement without such a comparison.
pub(crate) fn key_column(text: &str) -> Option<String> {
    let tokens = tokenize(text);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    let w = upper.iter().position(|t| t == "WHERE")?;
    let end = upper[w..]
        .iter()
        .position(|t| matches!(t.as_str(), "GROUP" | "ORDER" | "LIMIT" | "HAVING"))
        .map_or(upper.len(), |e| w + e);
    let tok = |i: usize| tokens.get(i).filter(|_| i < end).map(String::as_str);
    for i in w + 1..end {
        let t = &tokens[i];
        if is_ident(t) && tok(i + 1) != Some(".") {
            let one_value = match upper[i + 1..end.max(i + 1)] {
                [ref op, ref v, ..] if (op == "=" || op == "<=>") && v == "?" => true,
                // MariaDB 10.11 writes `IN (?)` without spaces.
                [ref op, ref v, ..] if op == "IN" && v == "(?)" => true,
                [ref op, ref open, ref v, ref close, ..] => {
                    op == "IN" && open == "(" && v == "?" && close == ")"
                }
                _ => false,
            };
            if one_value {
                return Some(unquote(t).to_ascii_lowercase());
            }
        }
        // `? = col` or `? = t . col`.
        if t == "?" && matches!(tok(i + 1), Some("=") | Some("<=>")) {
            let mut j = i + 2;
            while tok(j).is_some_and(is_ident) && tok(j + 1) == Some(".") {
                j += 2;
            }
            if let Some(c) = tok(j).filter(|c| is_ident(c)) {
                return Some(unquote(c).to_ascii_lowercase());
            }
        }
    }
    None
}

/// The columns a `SELECT` sends, unquoted, lower case, without table qualifiers (`*` for a
/// star); `None` when the text has no `FROM` (cut short, or no table).
pub(crate) fn selected_columns(text: &str) -> Option<Vec<String>> {
    let tokens = tokenize(text);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    let start = upper.iter().position(|t| t == "SELECT")?;
    let from = start + upper[start..].iter().position(|t| t == "FROM")?;
    let mut out = Vec::new();
    for i in start + 1..from {
        let t = &tokens[i];
        if t == "*" {
            push_unique(&mut out, "*");
        } else if is_ident(t) && tokens.get(i + 1).map(String::as_str) != Some(".") {
            push_unique(&mut out, &unquote(t).to_ascii_lowercase());
        }
    }
    Some(out)
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
    fn key_columns_as_django_and_sqlalchemy_write_them() {
        // Django: a forward foreign key, a reverse relation, a many-to-many through table.
        assert_eq!(
            key_column(
                "SELECT `n1_author` . `id` , `n1_author` . `name` FROM `n1_author` WHERE `n1_author` . `id` = ? LIMIT ?"
            )
            .as_deref(),
            Some("id")
        );
        assert_eq!(
            key_column(
                "SELECT `t` . `id` , `t` . `name` FROM `n1_tag` `t` INNER JOIN `n1_book_tags` ON ( `t` . `id` = `n1_book_tags` . `tag_id` ) WHERE `n1_book_tags` . `book_id` = ?"
            )
            .as_deref(),
            Some("book_id")
        );
        // SQLAlchemy's lazy loader puts the value first.
        assert_eq!(
            key_column("SELECT `book` . `id` FROM `book` WHERE ? = `book` . `author_id`")
                .as_deref(),
            Some("author_id")
        );
        assert_eq!(
            key_column("SELECT `id` FROM `t` WHERE `x` IN ( ? )").as_deref(),
            Some("x")
        );
        // A list of values, a range or no WHERE is no single key.
        // Django's database cache, as 10.11 writes its digest.
        assert_eq!(
            key_column(
                "SELECT `cache_key` , `value` , `expires` FROM `c` WHERE `cache_key` IN (?) "
            )
            .as_deref(),
            Some("cache_key")
        );
        assert_eq!(key_column("SELECT `id` FROM `t` WHERE `x` IN (...)"), None);
        assert_eq!(key_column("SELECT `id` FROM `t` WHERE `x` > ?"), None);
        assert_eq!(key_column("SELECT `id` FROM `t` ORDER BY `x` = ?"), None);
        assert_eq!(
            selected_columns("SELECT `a` . `id` , `a` . `author_id` , `b` FROM `a` WHERE `x` = ?"),
            Some(vec!["id".into(), "author_id".into(), "b".into()])
        );
        assert_eq!(
            selected_columns("SELECT * FROM `a`"),
            Some(vec!["*".into()])
        );
        assert_eq!(selected_columns("SELECT `a` , `b` , ..."), None);
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
