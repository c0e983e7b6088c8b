//! The remediation text the server-configuration rules share: the exact `SET GLOBAL` for a
//! dynamic variable and the my.cnf line that keeps it after a restart.

/// `SET GLOBAL` statements for dynamic variables and the `[mariadbd]` lines persisting them.
/// Each item is (variable, value for SQL, value for my.cnf).
pub(crate) fn set_global(items: &[(&str, String, String)]) -> String {
    let sql: Vec<String> = items
        .iter()
        .map(|(name, sql, _)| format!("SET GLOBAL {name} = {sql};"))
        .collect();
    format!(
        "{}\nand persist it under [mariadbd] in the server's option file:\n{}",
        sql.join(" "),
        cnf_lines(items)
    )
}

/// `[mariadbd]` lines for variables that need a restart.
pub(crate) fn restart_with(items: &[(&str, String, String)]) -> String {
    format!(
        "under [mariadbd] in the server's option file, then restart mariadbd:\n{}",
        cnf_lines(items)
    )
}

fn cnf_lines(items: &[(&str, String, String)]) -> String {
    items
        .iter()
        .map(|(name, _, cnf)| format!("    {name} = {cnf}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `bytes` rounded down to whole MiB (at least 1 MiB): a size that stays within a budget.
pub(crate) fn mib_floor(bytes: u64) -> u64 {
    (bytes >> 20).max(1) << 20
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        let t = set_global(&[
            ("a", "1".into(), "1M".into()),
            ("b", "2".into(), "2".into()),
        ]);
        assert_eq!(
            t,
            "SET GLOBAL a = 1; SET GLOBAL b = 2;\nand persist it under [mariadbd] in the server's option file:\n    a = 1M\n    b = 2"
        );
        assert!(restart_with(&[("x", String::new(), "ON".into())]).ends_with("    x = ON"));
        assert_eq!(mib_floor(3 << 20 | 5), 3 << 20);
        assert_eq!(mib_floor(10), 1 << 20);
    }
}
