//! MariaDB 11.8 with a vector index whose graph is larger than the default 16 MiB cache.
//!
//! One test owns the 11.8 server: it changes `mhnsw_max_cache_size`, a global.

use mysql_async::prelude::Queryable;
use rand::{SeedableRng, rngs::StdRng};
use rand_distr::{Distribution, Normal};
use serde_json::Value;

use crate::support::*;

const ROWS: usize = 20_000;
const DIM: usize = 768;
const LATENT: usize = 32;
const MON_USER: &str = "pd_mon";
const MON_PASSWORD: &str = "pd-mon-Pw-2026";
/// A user with no privilege at all (USAGE).
const BARE_USER: &str = "pd_bare";
const BARE_PASSWORD: &str = "pd-bare-Pw-2026";

/// Embedding-like vectors, deterministic: a 32-d Gaussian latent times a fixed random
/// 32×768 matrix, plus N(0, 0.05²) noise. iid random vectors would not thrash the cache
/// (shared/notes/mariadb.md §5).
fn vectors() -> impl Iterator<Item = Vec<f32>> {
    let mut rng = StdRng::seed_from_u64(20_261_122);
    let unit = Normal::new(0.0f32, 1.0).unwrap();
    let noise = Normal::new(0.0f32, 0.05).unwrap();
    let basis: Vec<f32> = (0..LATENT * DIM).map(|_| unit.sample(&mut rng)).collect();
    (0..ROWS).map(move |_| {
        let z: Vec<f32> = (0..LATENT).map(|_| unit.sample(&mut rng)).collect();
        (0..DIM)
            .map(|d| {
                (0..LATENT).map(|k| z[k] * basis[k * DIM + d]).sum::<f32>() + noise.sample(&mut rng)
            })
            .collect()
    })
}

/// Creates `powerdiag_it.docs` with ROWS vectors unless it is already complete, and the
/// least-privilege monitoring user of docs/connecting.md.
pub(crate) async fn prepare(server: &Server) {
    let pool = server.pool();
    let mut c = pool.get_conn().await.expect("connect as root");
    let count: Option<u64> = c
        .query_first("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='powerdiag_it' AND TABLE_NAME='docs'")
        .await
        .unwrap();
    // Rows are loaded in id order (1..=ROWS), so the highest id says whether the load completed. Not
    // COUNT(*): that reads every row, and doctor rightly flags it (PD703) on a server with
    // little other statement time.
    let last_id: Option<u64> = if count == Some(1) {
        c.query_first("SELECT MAX(id) FROM powerdiag_it.docs")
            .await
            .unwrap()
            .flatten()
    } else {
        None
    };
    if last_id != Some(ROWS as u64) {
        c.query_drop("DROP TABLE IF EXISTS powerdiag_it.docs")
            .await
            .unwrap();
        c.query_drop(format!(
            "CREATE TABLE powerdiag_it.docs (id INT PRIMARY KEY, e VECTOR({DIM}) NOT NULL, VECTOR INDEX (e)) ENGINE=InnoDB"
        ))
        .await
        .unwrap();
        // Load with a cache that fits, or the load itself thrashes (3-5× slower).
        c.query_drop("SET GLOBAL mhnsw_max_cache_size = 1073741824")
            .await
            .unwrap();
        let mut batch = Vec::with_capacity(250);
        let mut id = 0;
        let mut sql = String::new();
        for v in vectors() {
            id += 1;
            let text: Vec<String> = v.iter().map(|x| format!("{x:.4}")).collect();
            batch.push(format!("({id},VEC_FromText('[{}]'))", text.join(",")));
            if batch.len() == 250 || id == ROWS {
                sql.clear();
                sql.push_str("INSERT INTO powerdiag_it.docs (id, e) VALUES ");
                sql.push_str(&batch.join(","));
                c.query_drop(&sql).await.unwrap();
                batch.clear();
            }
        }
        c.query_drop("ANALYZE TABLE powerdiag_it.docs")
            .await
            .unwrap();
    }
    for stmt in [
        format!(
            "CREATE USER IF NOT EXISTS '{MON_USER}'@'127.0.0.1' IDENTIFIED BY '{MON_PASSWORD}'"
        ),
        format!("GRANT PROCESS ON *.* TO '{MON_USER}'@'127.0.0.1'"),
        format!("GRANT SELECT ON performance_schema.* TO '{MON_USER}'@'127.0.0.1'"),
        format!("GRANT SELECT ON powerdiag_it.docs TO '{MON_USER}'@'127.0.0.1'"),
        format!("GRANT SELECT ON mysql.innodb_table_stats TO '{MON_USER}'@'127.0.0.1'"),
        format!("GRANT SELECT ON mysql.innodb_index_stats TO '{MON_USER}'@'127.0.0.1'"),
        format!("GRANT SHOW VIEW ON *.* TO '{MON_USER}'@'127.0.0.1'"),
        format!("GRANT REPLICA MONITOR ON *.* TO '{MON_USER}'@'127.0.0.1'"),
        format!(
            "CREATE USER IF NOT EXISTS '{BARE_USER}'@'127.0.0.1' IDENTIFIED BY '{BARE_PASSWORD}'"
        ),
    ] {
        c.query_drop(stmt).await.unwrap();
    }
    // Back to the default, and drop the cache the load built.
    set_cache(&mut c, 16 << 20).await;
    drop(c);
    pool.disconnect().await.unwrap();
}

async fn set_cache(c: &mut mysql_async::Conn, bytes: u64) {
    c.query_drop(format!("SET GLOBAL mhnsw_max_cache_size = {bytes}"))
        .await
        .unwrap();
    c.query_drop("FLUSH TABLES powerdiag_it.docs")
        .await
        .unwrap();
}

/// Runs the same k-NN queries a user would, to warm the cache up.
async fn warm_up(server: &Server, queries: usize) {
    let pool = server.pool();
    let mut c = pool.get_conn().await.unwrap();
    for (i, v) in vectors().step_by(ROWS / queries).take(queries).enumerate() {
        let text: Vec<String> = v
            .iter()
            .map(|x| format!("{:.4}", x + if i % 2 == 0 { 0.1 } else { -0.1 }))
            .collect();
        let _: Vec<u32> = c
            .query(format!(
                "SELECT id FROM powerdiag_it.docs ORDER BY VEC_DISTANCE_EUCLIDEAN(e, VEC_FromText('[{}]')) LIMIT 10",
                text.join(",")
            ))
            .await
            .unwrap();
    }
    drop(c);
    pool.disconnect().await.unwrap();
}

fn index_facts(j: &Value) -> &Value {
    let idx = &j["snapshot"]["mariadb"]["facts"]["vector_indexes"]["available"];
    idx.as_array()
        .and_then(|a| a.iter().find(|i| i["table"] == "docs"))
        .unwrap_or_else(|| panic!("docs index not found: {idx:#}"))
}

#[test]
fn undersized_cache_thrashes_and_the_fix_works() {
    let _lock = m118_lock();
    let server = Server::m118();
    block_on(prepare(&server));
    let root = server.root_url();
    let mon = server.url(MON_USER, MON_PASSWORD);

    // 1. Default 16 MiB cache: PD101 and PD102 fail, doctor exits 2.
    let r = doctor_json(&root, &[]);
    let j = r.json();
    assert_eq!(r.code, 2, "critical findings exit 2:\n{}", r.stdout);
    assert_eq!(status(&j, "PD101"), "fail", "{:#}", check(&j, "PD101"));
    assert_eq!(status(&j, "PD102"), "fail", "{:#}", check(&j, "PD102"));
    assert_eq!(j["findings"][0]["severity"], "critical");
    let idx = index_facts(&j);
    assert_eq!(idx["dimensions"], DIM);
    assert_eq!(idx["column"], "e");
    assert!(
        idx["hidden_table"]
            .as_str()
            .unwrap()
            .starts_with("powerdiag_it/docs#i#")
    );
    let rows = idx["rows"].as_u64().unwrap();
    assert!(
        (ROWS as u64 * 8 / 10..=ROWS as u64 * 12 / 10).contains(&rows),
        "rows estimate {rows}"
    );
    let pd101 = check(&j, "PD101");
    assert!(
        pd101["remediation"]
            .as_str()
            .unwrap()
            .contains("SET GLOBAL mhnsw_max_cache_size =")
    );
    let probe = &j["snapshot"]["mariadb"]["facts"]["probe"]["available"]["indexes"][0];
    let queries = probe["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 25, "20 distinct + 5 repeats: {probe:#}");
    let rebuilds: u64 = queries[1..]
        .iter()
        .map(|q| q["handler_read_last"].as_u64().unwrap())
        .sum();
    assert!(
        rebuilds >= 2,
        "thrashing shows as cache rebuilds: {probe:#}"
    );
    // Exit code 2 also in text and markdown.
    let t = run(powerdiag()
        .env("POWERDIAG_MARIADB_URL", &root)
        .args(["doctor", "--no-probe"]));
    assert_eq!(t.code, 2);
    assert!(
        t.stdout.contains("CRITICAL PD101 mhnsw-cache-undersized"),
        "{}",
        t.stdout
    );

    // 2. The least-privilege user of docs/connecting.md sees the same verdicts.
    let m = doctor_json(&mon, &[]);
    assert_eq!(m.code, 2, "{}", m.stdout);
    assert_eq!(
        privilege_verdicts(&m.json()),
        privilege_verdicts(&j),
        "least-privilege verdicts differ from root's"
    );

    // 2b. Without PROCESS nor table privileges nothing is visible: that must not read as "no
    //     vector indexes". The server checks that need no privilege still run.
    let b = doctor_json(&server.url(BARE_USER, BARE_PASSWORD), &[]);
    let bj = b.json();
    assert_eq!(
        status(&bj, "PD101"),
        "insufficient_data",
        "{:#}",
        check(&bj, "PD101")
    );
    let why = check(&bj, "PD101")["summary"].as_str().unwrap().to_owned();
    assert!(
        why.contains("GRANT PROCESS ON *.* TO 'pd_bare'@'127.0.0.1'"),
        "{why}"
    );
    assert_eq!(status(&bj, "PD102"), "insufficient_data");
    // The error log is read from its file, whatever the account's privileges.
    assert!(
        ["pass", "fail"].contains(&status(&bj, "PD201").as_str()),
        "{:#}",
        check(&bj, "PD201")
    );
    assert_eq!(b.code, 0, "{}", b.stdout);

    // 3. A cache that fits, after a warm-up: both pass.
    block_on(async {
        let pool = server.pool();
        let mut c = pool.get_conn().await.unwrap();
        set_cache(&mut c, 256 << 20).await;
        drop(c);
        pool.disconnect().await.unwrap();
    });
    block_on(warm_up(&server, 200));
    let r = doctor_json(&root, &[]);
    let fixed = r.json();
    assert_eq!(
        status(&fixed, "PD101"),
        "pass",
        "{:#}",
        check(&fixed, "PD101")
    );
    assert_eq!(
        status(&fixed, "PD102"),
        "pass",
        "{:#}",
        check(&fixed, "PD102")
    );
    // The host's own state (free disk, swap, a saturated disk) belongs to the machine running
    // the tests, not to the fix: tests/it/storage.rs provokes and judges it.
    const HOST_STATE: [&str; 3] = ["PD504", "PD801", "PD802"];
    let findings = fixed["findings"].as_array().unwrap();
    let host_state =
        |f: &&serde_json::Value| HOST_STATE.contains(&f["code"].as_str().unwrap_or(""));
    assert!(
        findings
            .iter()
            .filter(|f| !host_state(f))
            .all(|f| f["severity"] == "info"),
        "no warning or critical left: {:#}",
        fixed["findings"]
    );
    if !findings
        .iter()
        .any(|f| host_state(&f) && f["severity"] != "info")
    {
        assert_eq!(r.code, 0);
    }
    let m = doctor_json(&mon, &[]);
    assert_eq!(
        privilege_verdicts(&m.json()),
        privilege_verdicts(&fixed),
        "least-privilege verdicts differ after the fix"
    );

    // 4. --no-probe: PD102 cannot judge and says why; PD101 still can.
    let r = doctor_json(&root, &["--no-probe"]);
    let j = r.json();
    assert_eq!(status(&j, "PD102"), "insufficient_data");
    assert!(
        check(&j, "PD102")["summary"]
            .as_str()
            .unwrap()
            .contains("--no-probe")
    );
    assert_eq!(status(&j, "PD101"), "pass");

    // Leave the server as we found it.
    block_on(async {
        let pool = server.pool();
        let mut c = pool.get_conn().await.unwrap();
        set_cache(&mut c, 16 << 20).await;
        drop(c);
        pool.disconnect().await.unwrap();
    });
}

/// Checks whose verdict is a measurement of the moment, not a fact the account can or cannot see:
/// PD103 (the share of stalled samples in the probe's profile), PD303 (TLB miss rate), PD403
/// (hypervisor steal share) and PD404 (CPU frequency ratio) move with the machine's load between
/// two probe runs, so root's run and the least-privilege user's run may legitimately disagree on
/// them (PD103 did, under load). What must be equal is every verdict that depends on what the
/// account is allowed to read: the configuration, the status counters and the vector indexes.
const LOAD_DEPENDENT: &[&str] = &["PD103", "PD303", "PD403", "PD404"];

/// `verdicts` without the load-dependent checks, for comparing two separate probe runs.
fn privilege_verdicts(report: &Value) -> Vec<(String, String)> {
    let mut v = verdicts(report);
    v.retain(|(code, _)| !LOAD_DEPENDENT.contains(&code.as_str()));
    assert!(!v.is_empty(), "no checks left to compare in {report:#}");
    v
}

/// The agent keeps its list of vector indexes while no schema changes (listing InnoDB's
/// dictionary costs the server per table on it), and lists again after one: an index created
/// after the agent started appears, and disappears when dropped.
#[test]
fn the_agent_lists_vector_indexes_again_after_a_schema_change() {
    let _lock = m118_lock();
    let server = Server::m118();
    let sql = |stmts: &'static [&'static str]| {
        block_on(async {
            let pool = server.pool();
            let mut c = pool.get_conn().await.expect("connect as root");
            for s in stmts {
                c.query_drop(*s)
                    .await
                    .unwrap_or_else(|e| panic!("{s}: {e}"));
            }
            drop(c);
            pool.disconnect().await.unwrap();
        })
    };
    sql(&["DROP DATABASE IF EXISTS pd_relist"]);
    let agent = crate::agent::start_agent(
        &server.root_url(),
        "[sample]\ninterval = \"1s\"\ntimeout = \"900ms\"\nwindow = \"0s\"\nvector_index_refresh = \"2s\"\n[probe]\nenabled = false\n[statements]\nenabled = false\n",
    );
    let listed = || -> Option<Vec<String>> {
        let (_, _, body) = crate::agent::get(agent.port, "/api/v1/snapshot")?;
        let j: Value = serde_json::from_str(&body).ok()?;
        let s = j.get("snapshot").unwrap_or(&j);
        let idx = s["mariadb"]["facts"]["vector_indexes"]["available"].as_array()?;
        Some(
            idx.iter()
                .map(|i| {
                    format!(
                        "{}.{}",
                        i["schema"].as_str().unwrap_or("?"),
                        i["table"].as_str().unwrap_or("?")
                    )
                })
                .collect(),
        )
    };
    let has = |want: bool| {
        let mut last = None;
        let ok = crate::agent::eventually(std::time::Duration::from_secs(30), || {
            last = listed();
            last.as_ref()
                .is_some_and(|l| l.iter().any(|t| t == "pd_relist.v") == want)
        });
        assert!(
            ok,
            "pd_relist.v listed should be {want}; the agent listed {last:?}"
        );
    };
    has(false);
    sql(&[
        "CREATE DATABASE pd_relist",
        "CREATE TABLE pd_relist.v (id INT PRIMARY KEY, e VECTOR(4) NOT NULL, VECTOR INDEX (e)) ENGINE=InnoDB",
        "INSERT INTO pd_relist.v SELECT seq, VEC_FromText(CONCAT('[', seq, ',1,2,3]')) FROM pd_relist.seq_1_to_50",
    ]);
    has(true);
    sql(&["DROP DATABASE pd_relist"]);
    has(false);
}

/// A refresh with no schema change reads the vector indexes' sizes and row estimates again,
/// not their list or definitions (InnoDB's dictionary, or `INFORMATION_SCHEMA.STATISTICS`
/// without PROCESS; a join over INFORMATION_SCHEMA and a `SHOW CREATE TABLE` per table: the
/// costly part at 10,000 tables): rows added to the base table appear without a schema change,
/// the definitions are read once per listing, and an `ALTER TABLE` that changes `M` and the
/// distance is seen. Two agents: root (the dictionary) and a user without PROCESS (the
/// `STATISTICS` list). On the `evict` server, which no other test changes while `evict_lock`
/// is held, so the general log holds these agents' statements alone.
#[test]
fn a_refresh_reads_sizes_again_and_definitions_only_after_a_schema_change() {
    const USER: &str = "pd_noproc";
    const PASSWORD: &str = "pd-noproc-Pw-2026";
    let _lock = evict_lock();
    let server = Server::get("evict");
    let sql = |stmts: &[&str]| -> Vec<(String, String, i64)> {
        block_on(async {
            let pool = server.pool();
            let mut c = pool.get_conn().await.expect("connect as root");
            let mut last = Vec::new();
            for s in stmts {
                last = c
                    .query::<(String, String, i64), _>(*s)
                    .await
                    .unwrap_or_else(|e| panic!("{s}: {e}"));
            }
            drop(c);
            pool.disconnect().await.unwrap();
            last
        })
    };
    let create_user = format!("CREATE USER {USER}@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'");
    let grant = format!("GRANT SELECT ON pd_refresh.* TO {USER}@'127.0.0.1'");
    sql(&[
        "DROP DATABASE IF EXISTS pd_refresh",
        &format!("DROP USER IF EXISTS {USER}@'127.0.0.1'"),
        "CREATE DATABASE pd_refresh",
        "CREATE TABLE pd_refresh.v (id INT PRIMARY KEY, e VECTOR(4) NOT NULL, VECTOR INDEX (e)) ENGINE=InnoDB",
        "INSERT INTO pd_refresh.v SELECT seq, VEC_FromText(CONCAT('[', seq, ',1,2,3]')) FROM pd_refresh.seq_1_to_50",
        &create_user,
        &grant,
        "TRUNCATE TABLE mysql.general_log",
        "SET GLOBAL log_output = 'TABLE', GLOBAL general_log = 1",
    ]);
    let config = "[sample]\ninterval = \"1s\"\ntimeout = \"900ms\"\nwindow = \"0s\"\nvector_index_refresh = \"2s\"\n[probe]\nenabled = false\n[statements]\nenabled = false\n";
    let agents = [
        crate::agent::start_agent(&server.root_url(), config),
        crate::agent::start_agent(&server.url(USER, PASSWORD), config),
    ];
    let index = |port: u16| -> Option<Value> {
        let (_, _, body) = crate::agent::get(port, "/api/v1/snapshot")?;
        let j: Value = serde_json::from_str(&body).ok()?;
        let s = j.get("snapshot").unwrap_or(&j);
        s["mariadb"]["facts"]["vector_indexes"]["available"]
            .as_array()?
            .iter()
            .find(|i| i["schema"] == "pd_refresh" && i["table"] == "v")
            .cloned()
    };
    let wait_for = |what: &str, want: &dyn Fn(&Value) -> bool| {
        for a in &agents {
            let mut last = None;
            let ok = crate::agent::eventually(std::time::Duration::from_secs(30), || {
                last = index(a.port);
                last.as_ref().is_some_and(want)
            });
            assert!(
                ok,
                "{what}; pd_refresh.v as the agent on port {} has it: {last:#?}",
                a.port
            );
        }
    };
    wait_for("listed with its definition", &|i| {
        i["column"] == "e" && i["dimensions"] == 4 && i["m"].is_null()
    });
    sql(&[
        "INSERT INTO pd_refresh.v SELECT seq, VEC_FromText(CONCAT('[', seq, ',1,2,3]')) FROM pd_refresh.seq_51_to_500",
    ]);
    // The base table's estimate follows its DML (the graph table's own statistics lag).
    wait_for("500 rows after the insert, no schema change", &|i| {
        i["rows"].as_u64().is_some_and(|r| r >= 500) && i["column"] == "e"
    });
    sql(&["ALTER TABLE pd_refresh.v DROP INDEX e, ADD VECTOR INDEX e (e) M=8 DISTANCE=cosine"]);
    wait_for("M and the distance after ALTER TABLE", &|i| {
        i["m"] == 8 && i["distance"] == "cosine" && i["column"] == "e"
    });
    drop(agents);
    let counts: std::collections::BTreeMap<(String, String), i64> = sql(&[
        "SET GLOBAL general_log = 0",
        "SELECT IF(u LIKE 'pd_noproc%', 'pd_noproc', 'root'), CASE \
           WHEN a LIKE 'SHOW CREATE TABLE `pd_refresh`.`v`' THEN 'definitions' \
           WHEN a LIKE 'SELECT NAME FROM information_schema.INNODB_SYS_TABLES%' THEN 'dictionary' \
           WHEN a LIKE 'SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME FROM information_schema.STATISTICS%' \
             THEN 'statistics' \
           WHEN a LIKE 'SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES%' \
             THEN 'row estimates' \
           ELSE 'other' END AS kind, COUNT(*) \
         FROM (SELECT CONVERT(user_host USING utf8mb4) AS u, CONVERT(argument USING utf8mb4) AS a \
               FROM mysql.general_log WHERE command_type = 'Query') q GROUP BY 1, 2",
    ])
    .into_iter()
    .map(|(user, kind, n)| ((user, kind), n))
    .collect();
    sql(&[
        "DROP DATABASE pd_refresh",
        &format!("DROP USER {USER}@'127.0.0.1'"),
        "TRUNCATE TABLE mysql.general_log",
    ]);
    // Without PROCESS the dictionary is tried (and refused) before each STATISTICS list.
    for (user, listing) in [("root", "dictionary"), (USER, "statistics")] {
        let n = |k: &str| {
            counts
                .get(&(user.to_owned(), k.to_owned()))
                .copied()
                .unwrap_or(0)
        };
        // The first listing, and the one after ALTER TABLE: nothing else changed the schema.
        assert_eq!(n(listing), 2, "{user}: {counts:?}");
        assert_eq!(n("definitions"), n(listing), "{user}: {counts:?}");
        // The row estimates alone are a refresh's (a listing reads them with the definitions):
        // at least the one that saw the 500 rows.
        assert!(
            n("row estimates") >= 1,
            "{user}: refreshes without a listing: {counts:?}"
        );
    }
}
