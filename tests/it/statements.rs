//! Statement analysis (PD701–PD704, "Top statements") against a real ORM: a small Django
//! application (tests/harness/orm/app.py, through PyMySQL) drives MariaDB 11.8 and 10.11 with
//! performance_schema ON (the `stmt118` and `stmt1011` servers, owned by these tests: they
//! reset the digest table). The naive pages must fail each rule naming the right statement;
//! after the fixes (an index, select_related, a precomputed count) each passes in doctor after
//! a reset of the digest table, and in the agent within two intervals without one. Vector
//! searches do not trip PD701; a server with performance_schema OFF, a disabled consumer and a
//! missing privilege give insufficient_data naming the fix.

use std::time::Duration;

use serde_json::Value;

use crate::agent::{eventually, get, start_agent};
use crate::support::*;

fn orm(server: &Server, args: &[&str]) {
    let port = server.port.to_string();
    let mut all = vec!["run", port.as_str()];
    all.extend_from_slice(args);
    harness_script("orm.sh", &all);
}

fn sql(server: &Server, statement: &str) {
    let pool = server.pool();
    block_on(async {
        use mysql_async::prelude::Queryable;
        let mut c = pool.get_conn().await.unwrap();
        c.query_drop(statement)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
        drop(c);
        pool.disconnect().await.unwrap();
    });
}

/// `powerdiag collect` of `server` (no probe, no window) into `path`.
fn collect_into(server: &Server, path: &std::path::Path) -> std::path::PathBuf {
    let c = run(powerdiag()
        .env("POWERDIAG_MARIADB_URL", server.root_url())
        .args(["collect", "--no-probe", "--sample-window", "0", "-o"])
        .arg(path));
    assert_eq!(c.code, 0, "{}", c.stderr);
    path.to_owned()
}

fn reset_digests(server: &Server) {
    sql(
        server,
        "TRUNCATE performance_schema.events_statements_summary_by_digest",
    );
}

/// The digest hash of the listed statement whose text contains `needle`.
fn digest_of(report: &Value, needle: &str) -> String {
    report["top_statements"]["statements"]
        .as_array()
        .unwrap_or_else(|| panic!("no top_statements in {report:#}"))
        .iter()
        .find(|s| s["text"].as_str().unwrap_or_default().contains(needle))
        .unwrap_or_else(|| {
            panic!(
                "no statement with {needle:?} in {:#}",
                report["top_statements"]
            )
        })["digest"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Asserts `code` fails and its evidence names the digest (first 12 hex digits).
fn fails_naming(report: &Value, code: &str, digest: &str) {
    let c = check(report, code);
    assert_eq!(c["status"], "fail", "{code}: {c:#}");
    let evidence = c["evidence"].to_string();
    assert!(
        evidence.contains(&digest[..12]),
        "{code} does not name digest {digest}: {c:#}"
    );
}

const RULES: [&str; 4] = ["PD701", "PD702", "PD703", "PD704"];

const LISTING: &str = "WHERE `shop_patch` . `state` = ?";
const LOOKUP: &str = "FROM `shop_person` WHERE `shop_person` . `id` = ?";
const COUNT: &str = "SELECT COUNT ( * ) AS `__count` FROM `shop_patch` INNER JOIN";
const GROUP: &str = "`shop_patch` . `content` AS `content` , COUNT";

/// The whole story on one server: naive pages fail, fixed pages pass.
fn orm_story(server: &Server) {
    let root = server.root_url();
    orm(server, &["setup"]);
    reset_digests(server);
    orm(server, &["bad", "40"]);
    let r = doctor_json(&root, &["--no-probe"]).json();
    fails_naming(&r, "PD701", &digest_of(&r, LISTING));
    fails_naming(&r, "PD702", &digest_of(&r, LOOKUP));
    fails_naming(&r, "PD703", &digest_of(&r, COUNT));
    fails_naming(&r, "PD704", &digest_of(&r, GROUP));
    // PD702 names the listing as the lookup's parent: 50 lookups per page.
    let n1 = check(&r, "PD702")["evidence"].to_string();
    assert!(
        n1.contains("its parent: ") && n1.contains("`shop_patch` WHERE `shop_patch` . `state`"),
        "{n1}"
    );
    assert!(
        check(&r, "PD702")["summary"].as_str().unwrap().starts_with(
            "a statement runs once per row of another, 50.0 times per call (2000 calls"
        ),
        "{n1}"
    );
    assert!(
        check(&r, "PD702")["remediation"]
            .as_str()
            .unwrap()
            .contains("select_related")
    );
    // The indexes the listing's table has, read from the server: none starts with `state`.
    let evidence = check(&r, "PD701")["evidence"].to_string();
    assert!(
        evidence.contains(".shop_patch has PRIMARY KEY (`id`)") && !evidence.contains("(`state`"),
        "{evidence}"
    );
    // The index the digest text asks for: equality column, then the ORDER BY columns.
    let rem = check(&r, "PD701")["remediation"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        rem.contains("EXPLAIN SELECT") && rem.contains("ON `shop_patch` (`state`, `date`, `id`)"),
        "{rem}"
    );
    // The profile ranks by time and shares add up to at most 100%.
    let top = r["top_statements"]["statements"].as_array().unwrap();
    assert!(top.len() >= 4 && top.len() <= 10, "{top:#?}");
    let shares: f64 = top.iter().map(|s| s["time_share"].as_f64().unwrap()).sum();
    assert!(shares <= 1.0001, "{shares}");
    assert!(
        top.windows(2)
            .all(|w| w[0]["time_seconds"].as_f64() >= w[1]["time_seconds"].as_f64())
    );
    // Nothing of powerdiag's own or of the system schemas is listed.
    for s in top {
        let t = s["text"].as_str().unwrap();
        assert!(
            !t.contains("performance_schema") && !t.starts_with("SHOW"),
            "{t}"
        );
    }

    // The text report has the section too.
    let text = run(powerdiag().env("POWERDIAG_MARIADB_URL", &root).args([
        "doctor",
        "--no-probe",
        "--sample-window",
        "0",
        "--statements",
        "3",
    ]));
    assert!(text.stdout.contains("Top statements"), "{}", text.stdout);

    explain_story(server);

    // Fix, reset, and run the same pages written well.
    let dir = tempfile::tempdir().unwrap();
    let collect = |name: &str| collect_into(server, &dir.path().join(name));
    let before = collect("before.json");
    orm(server, &["fix"]);
    reset_digests(server);
    orm(server, &["good", "40"]);
    let r = doctor_json(&root, &["--no-probe"]).json();
    for code in RULES {
        assert_eq!(status(&r, code), "pass", "{code}: {:#}", check(&r, code));
    }

    // diff: the per-row lookup is only before, the JOIN only after.
    let after = collect("after.json");
    let d = run(powerdiag()
        .args(["diff", "--format", "json"])
        .arg(&before)
        .arg(&after));
    assert_eq!(d.code, 0, "{}", d.stderr);
    let st = &d.json()["statements"];
    let texts = |part: &str| st[part].to_string();
    assert!(
        texts("only_a").contains("`shop_person` WHERE `shop_person` . `id` = ?"),
        "{st:#}"
    );
    assert!(
        texts("only_b").contains("INNER JOIN `shop_person`"),
        "{st:#}"
    );
    let text = run(powerdiag().args(["diff"]).arg(&before).arg(&after));
    assert!(
        text.stdout.contains("Statements") && text.stdout.contains("only in A"),
        "{}",
        text.stdout
    );
}

#[test]
fn orm_pitfalls_fail_and_their_fixes_pass_on_11_8_and_vector_searches_are_not_scans() {
    let server = Server::get("stmt118");
    orm_story(&server);
    agent_story(&server);

    // k-NN searches are full scans to performance_schema; not a PD701/PD703 finding.
    orm(&server, &["vector-setup"]);
    reset_digests(&server);
    orm(&server, &["vector", "300"]);
    let r = doctor_json(&server.root_url(), &["--no-probe"]).json();
    let knn = &r["top_statements"]["statements"][0];
    assert!(
        knn["text"].as_str().unwrap().contains("VEC_DISTANCE") && knn["no_index_share"] == 1.0,
        "{knn:#}"
    );
    for code in ["PD701", "PD703"] {
        let s = status(&r, code);
        assert!(
            s == "not_applicable" || s == "pass",
            "{code}: {:#}",
            check(&r, code)
        );
    }
}

/// The check's status in the agent's /metrics (`powerdiag_check{code=...,status=...} 1`).
fn agent_status(port: u16, code: &str) -> Option<String> {
    let (_, _, body) = get(port, "/metrics")?;
    body.lines()
        .filter(|l| l.starts_with("powerdiag_check{") && l.contains(&format!("code=\"{code}\"")))
        .find_map(|l| {
            let rest = l.split("status=\"").nth(1)?;
            Some(rest.split('"').next()?.to_owned())
        })
}

/// Runs `args` in the background while `f` polls.
fn while_running<T>(server: &Server, args: &'static [&'static str], f: impl FnOnce() -> T) -> T {
    let s = server.clone();
    let worker = std::thread::spawn(move || orm(&s, args));
    let out = f();
    worker.join().unwrap();
    out
}

/// The agent judges intervals: the naive pages fail while they run; after the fixes the
/// rules pass within a couple of intervals, with no restart and no reset of the table.
fn agent_story(server: &Server) {
    orm(server, &["setup"]);
    let agent = start_agent(
        &server.root_url(),
        "[sample]\ninterval = \"1s\"\ntimeout = \"900ms\"\nwindow = \"0s\"\n[statements]\ninterval = \"2s\"\n",
    );
    let limit = Duration::from_secs(60);
    let failed = while_running(server, &["bad", "200"], || {
        eventually(limit, || {
            RULES
                .iter()
                .all(|c| agent_status(agent.port, c).as_deref() == Some("fail"))
        })
    });
    assert!(
        failed,
        "the agent did not fail PD701-PD704 while the naive pages ran: {:?}",
        RULES.map(|c| agent_status(agent.port, c))
    );
    // Counters per busiest digest, the rest in `other`, the text in an info metric.
    let (_, _, body) = get(agent.port, "/metrics").unwrap();
    for needle in [
        "powerdiag_mariadb_statement_calls_total{schema=\"orm\",digest=\"",
        "powerdiag_mariadb_statement_seconds_total{schema=\"orm\",digest=\"",
        "powerdiag_mariadb_statement_calls_total{schema=\"\",digest=\"other\"}",
        "powerdiag_mariadb_statement_info{schema=\"orm\",digest=\"",
        "FROM `shop_person` WHERE",
    ] {
        assert!(body.contains(needle), "{needle} missing from\n{body}");
    }
    let series = body
        .lines()
        .filter(|l| l.starts_with("powerdiag_mariadb_statement_calls_total{"))
        .count();
    assert!((2..=21).contains(&series), "{series} series:\n{body}");
    orm(server, &["fix"]);
    let passed = while_running(server, &["good", "400"], || {
        eventually(limit, || {
            RULES
                .iter()
                .all(|c| agent_status(agent.port, c).as_deref() == Some("pass"))
        })
    });
    assert!(
        passed,
        "the agent did not pass PD701-PD704 after the fixes: {:?}",
        RULES.map(|c| agent_status(agent.port, c))
    );
}

/// `stmt1011` is shared by two tests that reset its digest table: one at a time.
fn stmt1011_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn orm_pitfalls_on_10_11_and_what_blocks_the_digests() {
    let _one_at_a_time = stmt1011_lock();
    let server = Server::get("stmt1011");
    orm_story(&server);

    // A disabled consumer: insufficient_data with the UPDATE that fixes it.
    sql(
        &server,
        "UPDATE performance_schema.setup_consumers SET ENABLED = 'NO' WHERE NAME = 'statements_digest'",
    );
    let r = doctor_json(&server.root_url(), &["--no-probe"]).json();
    sql(
        &server,
        "UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME = 'statements_digest'",
    );
    for code in RULES {
        let c = check(&r, code);
        assert_eq!(c["status"], "insufficient_data", "{c:#}");
        let why = c["summary"].as_str().unwrap();
        assert!(
            why.contains("statements_digest consumer is disabled")
                && why.contains("UPDATE performance_schema.setup_consumers SET ENABLED = 'YES'"),
            "{why}"
        );
    }

    // A monitoring account without SELECT on performance_schema: the GRANT.
    for s in [
        "DROP USER IF EXISTS 'stmt_mon'@'127.0.0.1'",
        "CREATE USER 'stmt_mon'@'127.0.0.1' IDENTIFIED BY 'stmt-mon-pw'",
    ] {
        sql(&server, s);
    }
    let r = doctor_json(&server.url("stmt_mon", "stmt-mon-pw"), &["--no-probe"]).json();
    let why = check(&r, "PD701")["summary"].as_str().unwrap().to_owned();
    assert_eq!(status(&r, "PD701"), "insufficient_data");
    assert!(
        why.contains("GRANT SELECT ON performance_schema.* TO 'stmt_mon'@"),
        "{why}"
    );
    assert!(
        r["top_statements"]["unavailable"]
            .as_str()
            .unwrap()
            .contains("GRANT SELECT ON performance_schema.*")
    );
}

#[test]
fn performance_schema_off_is_insufficient_data_with_the_my_cnf_line() {
    let server = Server::m1011();
    let r = doctor_json(&server.root_url(), &["--no-probe"]).json();
    for code in RULES {
        let c = check(&r, code);
        assert_eq!(c["status"], "insufficient_data", "{c:#}");
        let why = c["summary"].as_str().unwrap();
        assert!(
            why.contains("performance_schema is OFF")
                && why.contains("`performance_schema = ON` under [mariadbd]")
                && why.contains("restart"),
            "{why}"
        );
    }
    assert_eq!(status(&r, "PD204"), "fail");
    let pd204 = check(&r, "PD204")["summary"].as_str().unwrap().to_owned();
    assert!(pd204.contains("PD701-PD704"), "{pd204}");
}

fn n1(server: &Server, args: &[&str]) {
    let port = server.port.to_string();
    let mut all = vec!["n1", port.as_str()];
    all.extend_from_slice(args);
    harness_script("orm.sh", &all);
}

/// PD702 by its signature: for Django and SQLAlchemy, a forward foreign key, a reverse
/// relation and a many-to-many each fail at fan-outs of 3, 9 and 50, naming the per-row
/// statement and its parent with the fan-out; the same pages with the ORM's eager loading
/// pass; so does a hot cache lookup read once by pages of several kinds, though one kind's
/// listing sends exactly as many rows as the cache is read.
#[test]
fn n_plus_one_by_its_signature_on_django_and_sqlalchemy() {
    let _one_at_a_time = stmt1011_lock();
    let server = Server::get("stmt1011");
    let root = server.root_url();
    n1(&server, &["setup"]);
    // What each shape's per-row statement and parent read, as both ORMs write them.
    let shapes = [
        (
            "fk",
            "FROM `n1app_author` WHERE",
            "FROM `n1app_book` WHERE",
            "id",
        ),
        (
            "reverse",
            "FROM `n1app_book` WHERE",
            "FROM `n1app_author` WHERE",
            "author_id",
        ),
        (
            "m2m",
            "`n1app_book_tags` . `book_id`",
            "FROM `n1app_book` WHERE",
            "book_id",
        ),
    ];
    for orm in ["django", "sqlalchemy"] {
        for (shape, child, parent, key) in shapes {
            for fanout in [3u64, 9, 50] {
                // At least 100 per-row calls (the rule's min_calls), 40 pages at least.
                let pages = 40.max(150 / fanout);
                reset_digests(&server);
                n1(
                    &server,
                    &["run", orm, shape, &fanout.to_string(), &pages.to_string()],
                );
                let r = doctor_json(&root, &["--no-probe"]).json();
                let c = check(&r, "PD702");
                let what = format!("{orm} {shape} fan-out {fanout}: {c:#}");
                assert_eq!(c["status"], "fail", "{what}");
                let summary = c["summary"].as_str().unwrap();
                assert!(
                    summary.starts_with(&format!(
                        "a statement runs once per row of another, {fanout}.0 times per call ({} calls",
                        pages * fanout
                    )),
                    "{what}"
                );
                let evidence = c["evidence"].as_array().unwrap();
                let per_row = evidence[0].as_str().unwrap();
                let its_parent = evidence[1].as_str().unwrap();
                assert!(per_row.contains(child), "{what}");
                assert!(
                    its_parent.starts_with("its parent: ")
                        && its_parent.contains(parent)
                        && its_parent.contains(&format!(
                            "{} rows sent in {pages} calls; the per-row statement ran {} times, 1.00 per parent row, keyed on `{key}`",
                            pages * fanout,
                            pages * fanout
                        )),
                    "{what}"
                );
                let idiom = match (orm, shape) {
                    ("django", "fk") => "select_related()",
                    ("django", _) => "prefetch_related()",
                    _ => "selectinload()",
                };
                assert!(c["remediation"].as_str().unwrap().contains(idiom), "{what}");
            }
            // The same pages with the ORM's eager loading.
            reset_digests(&server);
            n1(&server, &["run", orm, shape, "9", "40", "fixed"]);
            let r = doctor_json(&root, &["--no-probe"]).json();
            assert_eq!(
                status(&r, "PD702"),
                "pass",
                "{orm} {shape} fixed: {:#}",
                check(&r, "PD702")
            );
        }
    }
    // Not N+1: Django's database cache read once per page by pages of three kinds; the
    // author listing of every third page sends 3 rows, as many as the cache reads, but no
    // row carries its key.
    reset_digests(&server);
    n1(&server, &["hot", "600"]);
    let r = doctor_json(&root, &["--no-probe"]).json();
    let c = check(&r, "PD702");
    assert_eq!(c["status"], "pass", "{c:#}");
    assert!(
        c["evidence"][0]
            .as_str()
            .unwrap()
            .starts_with("the busiest keyed SELECT ran 600 times, but no statement of its schema sent as many rows")
            && c["evidence"][0].as_str().unwrap().contains("carry `cache_key`"),
        "{c:#}"
    );
}

/// A client in its own thread sending one indexed lookup after another, `pause` apart (none
/// while `spike` is set), until dropped.
struct Lookups {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    spike: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Lookups {
    fn start(server: &Server, pause: Duration) -> Lookups {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let spike = std::sync::Arc::new(AtomicBool::new(false));
        let (s, k, server) = (stop.clone(), spike.clone(), server.clone());
        let thread = std::thread::spawn(move || {
            block_on(async {
                use mysql_async::prelude::Queryable;
                let pool = server.pool();
                let mut c = pool.get_conn().await.unwrap();
                let mut n = 0u64;
                while !s.load(Ordering::Relaxed) {
                    let id = 1 + (n * 7919) % 5000;
                    // Text protocol, as PyMySQL sends: MariaDB keeps no digest of a prepared
                    // statement's executions.
                    let _: Vec<(u64, u64)> = c
                        .query(format!(
                            "SELECT id, total FROM pd_regress.orders WHERE customer_id = {id}"
                        ))
                        .await
                        .unwrap();
                    n += 1;
                    if !k.load(Ordering::Relaxed) {
                        tokio::time::sleep(pause).await;
                    }
                }
                drop(c);
                pool.disconnect().await.unwrap();
                n
            })
        });
        Lookups {
            stop,
            spike,
            thread: Some(thread),
        }
    }
}

impl Drop for Lookups {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// PD709 on the agent: a lookup runs steadily; a spike of calls at the same time per call
/// passes; its index dropped, the plan becomes a full scan and PD709 fails naming the digest
/// and the interval it started in; the index added back clears it within two intervals.
#[test]
fn a_dropped_index_regresses_a_statement_and_adding_it_back_clears_pd709() {
    let _one_at_a_time = stmt1011_lock();
    let server = Server::get("stmt1011");
    for s in [
        "DROP DATABASE IF EXISTS pd_regress",
        "CREATE DATABASE pd_regress",
        "CREATE TABLE pd_regress.orders (id INT PRIMARY KEY, customer_id INT NOT NULL, total INT NOT NULL, note CHAR(100) NOT NULL DEFAULT '', KEY by_customer (customer_id)) ENGINE=InnoDB",
        "INSERT INTO pd_regress.orders SELECT seq, 1 + seq % 5000, seq % 977, '' FROM pd_regress.seq_1_to_200000",
        "ANALYZE TABLE pd_regress.orders",
        // The statement history the agent's `[statements] samples` read.
        &format!("UPDATE {}", HISTORY_CONSUMERS.replace("{}", "YES")),
    ] {
        sql(&server, s);
    }
    // Concrete statements and their plans, redacted (the default).
    let agent = start_agent(
        &server.root_url(),
        "[sample]\ninterval = \"1s\"\ntimeout = \"900ms\"\nwindow = \"0s\"\n[probe]\nenabled = false\n[statements]\ninterval = \"2s\"\nsamples = true\nexplain = true\n",
    );
    let lookups = Lookups::start(&server, Duration::from_millis(5));
    let status = || agent_status(agent.port, "PD709").unwrap_or_default();
    let explain = || check(&crate::watcher::agent_report(agent.port), "PD709").clone();
    // Judged once three earlier intervals are known (the first interval lasts ≤ 60 s).
    assert!(
        eventually(Duration::from_secs(90), || status() == "pass"),
        "PD709 never passed on the steady lookups: {:#}",
        explain()
    );
    // Many more calls, each as fast: a load spike is no regression.
    lookups
        .spike
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_secs(8) {
        assert_eq!(
            status(),
            "pass",
            "a spike of calls failed PD709: {:#}",
            explain()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    lookups
        .spike
        .store(false, std::sync::atomic::Ordering::Relaxed);
    // A snapshot of a few seconds of the indexed lookups, for `diff` below.
    let dir = tempfile::tempdir().unwrap();
    let collect = |name: &str| {
        reset_digests(&server);
        std::thread::sleep(Duration::from_secs(3));
        collect_into(&server, &dir.path().join(name))
    };
    let before = collect("before.json");
    // The index dropped: every lookup scans 200,000 rows.
    let dropped = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    sql(
        &server,
        "ALTER TABLE pd_regress.orders DROP INDEX by_customer",
    );
    assert!(
        eventually(Duration::from_secs(20), || status() == "fail"),
        "PD709 did not fail with the index dropped: {:#}",
        explain()
    );
    let c = explain();
    let evidence = c["evidence"][0].as_str().unwrap().to_owned();
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("`total` FROM `pd_regress` . `orders` WHERE `customer_id` = ?"),
        "{c:#}"
    );
    assert!(evidence.starts_with("digest "), "{c:#}");
    // The interval it started in ends after the drop, within a few intervals.
    let end = evidence
        .split("slower since the interval ")
        .nth(1)
        .and_then(|r| r.split(" (").next())
        .and_then(|r| r.split('–').nth(1))
        .unwrap_or_else(|| panic!("no start in {c:#}"))
        .to_owned();
    assert!(
        (dropped..=dropped + 10).any(|t| powerdiag_rules::format_unix_utc(t) == end),
        "started {end}, the index was dropped at {}: {c:#}",
        powerdiag_rules::format_unix_utc(dropped)
    );
    assert!(
        c["remediation"]
            .as_str()
            .unwrap()
            .contains("SHOW INDEX FROM `pd_regress`.`orders`;"),
        "{c:#}"
    );
    // `[statements] samples` and `explain`: the lookup as it ran, its literal redacted, and the
    // plan that now reads every row; the index it lacks is the one dropped.
    let all = c["evidence"].to_string();
    assert!(
        all.contains("a recent execution (literals replaced by ?): SELECT id, total FROM pd_regress.orders WHERE customer_id = ?")
            && all.contains("its plan (EXPLAIN FORMAT=JSON): orders: ALL (every row), no key, ~"),
        "{c:#}"
    );
    assert!(
        c["remediation"].as_str().unwrap().contains(
            "CREATE INDEX `pd_orders_customer_id` ON `pd_regress`.`orders` (`customer_id`);"
        ),
        "{c:#}"
    );
    // diff: the statement on both sides, regressed from A to B, with its rows per call.
    let after = collect("after.json");
    let d = run(powerdiag()
        .args(["diff", "--format", "json"])
        .arg(&before)
        .arg(&after));
    let both = d.json()["statements"]["both"].clone();
    let lookup = both
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["text"]
                .as_str()
                .unwrap_or_default()
                .contains("`pd_regress` . `orders`")
        })
        .unwrap_or_else(|| panic!("the lookup is not on both sides: {both:#}"))
        .clone();
    assert_eq!(lookup["regressed"], true, "{lookup:#}");
    assert!(
        lookup["rows_examined_per_call_b"].as_f64().unwrap()
            > 100.0 * lookup["rows_examined_per_call_a"].as_f64().unwrap(),
        "{lookup:#}"
    );
    let text = run(powerdiag().args(["diff"]).arg(&before).arg(&after));
    assert!(text.stdout.contains("REGRESSED "), "{}", text.stdout);
    // The index back: the next intervals are as fast as before.
    sql(
        &server,
        "ALTER TABLE pd_regress.orders ADD INDEX by_customer (customer_id)",
    );
    assert!(
        eventually(Duration::from_secs(12), || status() == "pass"),
        "PD709 still failed after the index came back: {:#}",
        explain()
    );
    drop(lookups);
    sql(&server, "DROP DATABASE pd_regress");
    sql(
        &server,
        &format!("UPDATE {}", HISTORY_CONSUMERS.replace("{}", "NO")),
    );
}

const HISTORY_CONSUMERS: &str = "performance_schema.setup_consumers SET ENABLED = '{}' WHERE NAME IN ('events_statements_current', 'events_statements_history_long')";

/// `doctor --explain`: with the statement history on, the unindexed listing's recent
/// execution is explained — a full scan — and the index its plan asks for makes PD701 pass;
/// `--redact` leaves no literal; with the history off, the UPDATE that turns it on. Leaves
/// the server as it found it: no new index, history off, the naive pages' digests.
fn explain_story(server: &Server) {
    let root = server.root_url();
    let consumers = |on: &str| {
        sql(
            server,
            &format!("UPDATE {}", HISTORY_CONSUMERS.replace("{}", on)),
        )
    };
    consumers("YES");
    reset_digests(server);
    orm(server, &["bad", "8"]);
    let r = doctor_json(&root, &["--no-probe", "--explain"]).json();
    let c = check(&r, "PD701");
    assert_eq!(c["status"], "fail", "{c:#}");
    let evidence = c["evidence"].to_string();
    assert!(
        evidence.contains("a recent execution (literals from production; doctor's --redact or the agent's [statements] redact = true replaces them): SELECT `shop_patch`.`id`")
            && evidence.contains("its plan (EXPLAIN FORMAT=JSON): shop_patch: ALL (every row), no key, ~"),
        "{c:#}"
    );
    let rem = c["remediation"].as_str().unwrap();
    let create =
        "CREATE INDEX `pd_shop_patch_state_date_id` ON `orm`.`shop_patch` (`state`, `date`, `id`);";
    assert!(rem.contains(create), "{rem}");

    // Redacted: the sample and the plan's condition keep no literal.
    let r = doctor_json(&root, &["--no-probe", "--explain", "--redact"]).json();
    let c = check(&r, "PD701");
    let sample = c["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.as_str())
        .find(|e| e.starts_with("a recent execution"))
        .unwrap_or_else(|| panic!("no sample in {c:#}"))
        .to_owned();
    assert!(
        sample.starts_with("a recent execution (literals replaced by ?): ")
            && sample.contains("`state` = ?")
            && !sample
                .chars()
                .any(|ch| ch.is_ascii_digit() && !sample.contains("LIMIT ?")),
        "{sample}"
    );

    // The index the plan asked for: the listing no longer scans.
    sql(server, create);
    reset_digests(server);
    orm(server, &["bad", "8"]);
    let r = doctor_json(&root, &["--no-probe", "--explain"]).json();
    assert_eq!(status(&r, "PD701"), "pass", "{:#}", check(&r, "PD701"));

    // Without the history: the statement that turns it on, and its cost.
    sql(
        server,
        "ALTER TABLE orm.shop_patch DROP INDEX pd_shop_patch_state_date_id",
    );
    consumers("NO");
    reset_digests(server);
    orm(server, &["bad", "40"]);
    let r = doctor_json(&root, &["--no-probe", "--explain"]).json();
    let c = check(&r, "PD701");
    assert_eq!(c["status"], "fail", "{c:#}");
    assert!(
        c["evidence"].to_string().contains(
            "no concrete statement to EXPLAIN: performance_schema keeps no statement history"
        ) && c["evidence"].to_string().contains(&format!(
            "UPDATE {}",
            HISTORY_CONSUMERS.replace("{}", "YES")
        )),
        "{c:#}"
    );
}
