//! The session's guards come before any other statement (issue 16): a server whose global
//! `max_statement_time` is 1 ms, or whose SQL mode changes how literals parse, must not turn
//! every database check into `insufficient_data` while the server answers.

use mysql_async::prelude::Queryable;

use crate::support::{Server, block_on, check, doctor_json, evict_lock};

#[test]
fn a_global_statement_limit_and_sql_mode_do_not_blind_doctor() {
    // An 11.8 server of its own: there, 1 ms stops even `SHOW GLOBAL VARIABLES`.
    let _lock = evict_lock();
    let server = Server::get("evict");
    // One connection per statement, on its own runtime (a pool cannot outlive block_on).
    let sql = |stmt: String| -> Option<(String, String)> {
        block_on(async {
            let pool = server.pool();
            let mut c = pool.get_conn().await.unwrap();
            let row = c.query_first(stmt).await.unwrap();
            drop(c);
            pool.disconnect().await.unwrap();
            row
        })
    };
    let before = sql("SELECT @@global.max_statement_time, @@global.sql_mode".into()).unwrap();
    sql("TRUNCATE TABLE mysql.general_log".into());
    sql("SET GLOBAL log_output = 'TABLE', GLOBAL general_log = 1".into());
    sql("SET GLOBAL max_statement_time = 0.001, GLOBAL sql_mode = 'NO_BACKSLASH_ESCAPES,ANSI_QUOTES'".into());
    let r = doctor_json(&server.root_url(), &["--no-probe", "--sample-window", "0"]);
    sql(format!(
        "SET GLOBAL max_statement_time = {}, GLOBAL sql_mode = '{}', GLOBAL general_log = 0",
        before.0, before.1
    ));
    // The first statement of doctor's session (the one that read the variables) is the guard.
    let first = sql(
        "SELECT 'first', CONVERT(argument USING utf8mb4) FROM mysql.general_log \
         WHERE command_type = 'Query' AND thread_id = (SELECT MIN(thread_id) FROM mysql.general_log \
         WHERE CONVERT(argument USING utf8mb4) LIKE 'SHOW GLOBAL VARIABLES%') \
         ORDER BY event_time, thread_id LIMIT 1"
            .into(),
    )
    .map(|(_, q)| q)
    .unwrap_or_default();
    assert!(
        first.starts_with("SET SESSION max_statement_time = ") && first.ends_with("sql_mode = ''"),
        "doctor's first statement: {first:?}"
    );

    let j = r.json();
    assert_eq!(j["mariadb"]["reachable"], true, "{}", r.stdout);
    // Server checks judged on what was read, not "insufficient" because the reads were killed.
    for code in ["PD216", "PD203", "PD204"] {
        let c = check(&j, code);
        assert_ne!(c["status"], "insufficient_data", "{code}: {c:#}");
    }
    assert!(
        !r.stdout.contains("max_statement_time exceeded")
            && !r.stdout.contains("Query execution was interrupted"),
        "{}",
        r.stdout
    );
}
