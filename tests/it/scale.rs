//! A server with 10,000 tables and several vector indexes (tests/harness/many-tables.sh) on its
//! own MariaDB 11.8 (`scale`, started by tests/run.sh, used by nothing else, so its global
//! `Questions` counter is ours): doctor and the agent send exactly as many statements as
//! without those tables. Counts, not timings: tests/bench.sh times the same server.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::Value;

use crate::{
    agent::{Agent, eventually, get, metric, start_agent},
    support::*,
};

/// The statements one run of each sends, as the server counts them (`Questions`).
#[derive(Debug, PartialEq, Eq)]
struct Counts {
    /// Table definitions doctor (without the probe) opened, from empty caches
    /// (`Opened_table_definitions` after `FLUSH TABLES`): not compared, bounded.
    doctor_opened: NotCompared,
    doctor_no_probe: u64,
    /// Not compared: the probe stops a vector index's burst after 2 s and profiles what it
    /// can, so under load its count moves by one or two (bounded below).
    doctor_probe: NotCompared,
    agent_first: u64,
    agent_steady: u64,
    /// The agent's own counter for its steady sample.
    agent_steady_own: u64,
}

/// Runs tests/harness/many-tables.sh on the `scale` server.
fn many_tables(args: &[&str]) {
    harness_script("many-tables.sh", &[&["scale"], args].concat());
}

/// The statements of the agent's last sample, by its own counter.
fn agent_statements(agent: &Agent) -> Option<f64> {
    get(agent.port, "/metrics")
        .and_then(|(_, _, body)| metric(&body, "powerdiag_sample_sql_statements"))
}

/// A count left out of the equality of two [`Counts`].
#[derive(Debug, Eq)]
struct NotCompared(u64);

impl PartialEq for NotCompared {
    fn eq(&self, _: &NotCompared) -> bool {
        true
    }
}

fn counts(server: &Server) -> Counts {
    block_on(async {
        let pool = server.pool();
        let mut c = pool.get_conn().await.unwrap();
        let mut questions = async || -> u64 {
            c.query_first::<u64, _>(
                "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='QUESTIONS'",
            )
            .await
            .unwrap()
            .unwrap()
        };
        // Reading the counter is itself a question: subtract what two reads in a row differ by.
        let (a, b) = (questions().await, questions().await);
        let own = b - a;
        let url = server.root_url();
        let mut doctor = async |extra: &[&str]| {
            let q0 = questions().await;
            let r = doctor_json(&url, extra);
            assert!(r.code <= 2, "doctor failed: {}", r.stderr);
            let q1 = questions().await;
            q1 - q0 - own
        };
        let opened = async |c: &mut mysql_async::Conn| -> u64 {
            c.query_first::<u64, _>(
                "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='OPENED_TABLE_DEFINITIONS'",
            )
            .await
            .unwrap()
            .unwrap()
        };
        let mut c2 = pool.get_conn().await.unwrap();
        c2.query_drop("FLUSH TABLES").await.unwrap();
        let o0 = opened(&mut c2).await;
        let doctor_no_probe = doctor(&["--no-probe"]).await;
        let doctor_opened = NotCompared(opened(&mut c2).await - o0);
        drop(c2);
        let doctor_probe = NotCompared(doctor(&["--probe-queries", "5"]).await);
        let q0 = questions().await;
        let agent = start_agent(
            &url,
            "[sample]\ninterval = \"3s\"\ntimeout = \"2s\"\nwindow = \"0s\"\n[probe]\nenabled = false\n",
        );
        let taken = || {
            get(agent.port, "/metrics")
                .and_then(|(_, _, body)| metric(&body, "powerdiag_sample_timestamp_seconds"))
        };
        assert!(eventually(Duration::from_secs(10), || taken().is_some()));
        let first_at = taken();
        let q1 = questions().await;
        // The next sample starts 3 s after the first did: nothing else talks to this server.
        assert!(eventually(Duration::from_secs(10), || taken() != first_at));
        let q2 = questions().await;
        let agent_steady_own = agent_statements(&agent).unwrap() as u64;
        drop(agent);
        drop(c);
        pool.disconnect().await.unwrap();
        Counts {
            doctor_opened,
            doctor_no_probe,
            doctor_probe,
            agent_first: q1 - q0 - own,
            agent_steady: q2 - q1 - own,
            agent_steady_own,
        }
    })
}

#[test]
fn statements_do_not_grow_with_the_number_of_tables() {
    let server = Server::get("scale");
    many_tables(&["drop"]);
    many_tables(&["0", "1", "4"]);
    let few = counts(&server);
    many_tables(&["10000", "8", "4"]);
    let many = counts(&server);
    assert_eq!(
        few, many,
        "statements with 10,000 tables differ from without"
    );
    // The agent's budget: at most 5 statements per sample (probe aside), as the server counts
    // them and as the agent reports them.
    assert!(many.agent_steady <= 5, "{many:?}");
    assert_eq!(many.agent_steady, many.agent_steady_own, "{many:?}");
    // Vector discovery is bounded by the indexes (4 here), never by the tables; the statement
    // digests are two more (an aggregate and the busiest digests with a LIMIT), the InnoDB size
    // and the oldest transaction two more (one statement each; the oldest transaction's session
    // is one more, read only when a transaction is open), the error log's time-zone offset one
    // more (the agent keeps it an hour), the schema ten more (InnoDB's dictionary four, the
    // names it does not know one — performance_schema's writes, else the `.frm` listing —,
    // index sizes and foreign keys two, performance_schema's index reads one, information_schema
    // for what the dictionary cannot tell two: sent even with none to ask about, so the count
    // does not depend on the schema), the indexes of the statements' tables one, and the
    // replication connections one (`SHOW ALL REPLICAS STATUS`: the agent's first sample only
    // on a server that is no replica; doctor with a sample window one more as it opens, for
    // PD222's trend).
    assert!(
        many.agent_first <= 29 && many.doctor_no_probe <= 30,
        "{many:?}"
    );
    // The probe adds at most, per vector index it probes (3): its definition, columns, id
    // range and sample (4), the counters before (1), and each of 6 queries with the counters
    // after it (12); then the profile of 5 queries (9 statements): 3 × 17 + 9 = 60.
    assert!(
        many.doctor_probe.0 <= many.doctor_no_probe + 60
            && few.doctor_probe.0 <= few.doctor_no_probe + 60,
        "{few:?} {many:?}"
    );
    // The schema read opens at most 200 tables (information_schema for what InnoDB's
    // dictionary lacks), never all 10,000; the server's own tables and the vector
    // collector's are a few dozen more.
    assert!(many.doctor_opened.0 < 600, "{many:?}");
    dictionary_bound(&server, many.doctor_no_probe);
}

/// Doctor's bound on the dictionary reads, lowered below the 10,000 tables: the schema read is
/// left out and PD705–PD708 say why and how to read it; the same vector indexes are listed
/// from InnoDB's persistent statistics, with a note; fewer statements. Then the schema
/// collector asked for by name reads the schema anyway.
fn dictionary_bound(server: &Server, unbounded_statements: u64) {
    let url = server.root_url();
    let collect = |extra: &[&str]| -> Value {
        let r = run(powerdiag()
            .env("POWERDIAG_MARIADB_URL", &url)
            .args(["collect", "--no-probe", "--sample-window", "0"])
            .args(extra));
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.json()
    };
    let names = |snap: &Value| -> Vec<String> {
        let mut v: Vec<String> = snap["mariadb"]["facts"]["vector_indexes"]["available"]
            .as_array()
            .unwrap_or_else(|| {
                panic!(
                    "no vector indexes: {:#}",
                    snap["mariadb"]["facts"]["vector_indexes"]
                )
            })
            .iter()
            .map(|i| format!("{}.{}", i["schema"], i["table"]))
            .collect();
        v.sort();
        v
    };
    let all = collect(&[]);
    let bounded = collect(&["--dictionary-max-tables", "5000"]);
    assert!(
        names(&all).len() >= 4,
        "{:#}",
        all["mariadb"]["facts"]["vector_indexes"]
    );
    // On the server's host (this test runs as root, which may list its data directory): the
    // graph tables and the InnoDB size from the files, no statement for either.
    assert_eq!(names(&bounded), names(&all));
    let notes = bounded["mariadb"]["facts"]["notes"].to_string();
    assert!(
        notes.contains("vector indexes listed from the graph tables' files")
            && notes
                .contains("above the dictionary bound of 5000 (doctor's --dictionary-max-tables)"),
        "{notes}"
    );
    let size = |snap: &Value| snap["mariadb"]["facts"]["innodb_size"]["available"].clone();
    let (stats, files) = (size(&all), size(&bounded));
    assert_eq!(
        (stats["from_files"].clone(), files["from_files"].clone()),
        (false.into(), true.into()),
        "{stats:#} {files:#}"
    );
    // One file per table with persistent statistics (and per graph table): the same count,
    // give or take the server's own tables outside file-per-table.
    let (n_stats, n_files) = (
        stats["tables"].as_u64().unwrap(),
        files["tables"].as_u64().unwrap(),
    );
    assert!(
        n_stats.abs_diff(n_files) <= 20,
        "statistics {n_stats} tables, files {n_files}"
    );
    assert!(
        files["data_bytes"].as_u64().unwrap() >= n_files * 16_384,
        "{files:#}"
    );
    // A doctor that cannot list the data directory (another user: it belongs to the server's)
    // asks the server: the statistics' sum and their list of graph tables.
    let elsewhere = {
        use std::os::unix::{fs::PermissionsExt, process::CommandExt};
        // A copy of the binary that user may run, wherever this checkout is.
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.path().join("powerdiag");
        std::fs::copy(env!("CARGO_BIN_EXE_powerdiag"), &bin).unwrap();
        let mut c = std::process::Command::new(&bin);
        c.uid(65534)
            .gid(65534)
            .env("HOME", dir.path())
            .env("NO_COLOR", "1")
            .env("POWERDIAG_MARIADB_URL", &url)
            .args(["collect", "--no-probe", "--sample-window", "0"])
            .args(["--dictionary-max-tables", "5000"]);
        let r = run(&mut c);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.json()
    };
    assert_eq!(names(&elsewhere), names(&all));
    let notes = elsewhere["mariadb"]["facts"]["notes"].to_string();
    assert!(
        notes.contains("vector indexes listed from InnoDB's persistent statistics"),
        "{notes}"
    );
    let sum = |v: &Value| {
        (
            v["from_files"].clone(),
            v["tables"].clone(),
            v["data_bytes"].clone(),
            v["index_bytes"].clone(),
        )
    };
    assert_eq!(
        sum(&size(&elsewhere)),
        sum(&stats),
        "the statistics' sum, as unbounded"
    );
    let why = bounded["mariadb"]["facts"]["schema"]["unavailable"]
        .as_str()
        .unwrap_or_else(|| {
            panic!(
                "the schema was read: {:#}",
                bounded["mariadb"]["facts"]["schema"]
            )
        })
        .to_owned();
    assert!(
        why.starts_with("left out: the server has ")
            && why.contains("doctor --collector.mariadb_schema"),
        "{why}"
    );
    let r = doctor_json(&url, &["--no-probe", "--dictionary-max-tables", "5000"]).json();
    for code in ["PD705", "PD706", "PD707", "PD708"] {
        let c = check(&r, code);
        assert_eq!(c["status"], "insufficient_data", "{code}: {c:#}");
        assert!(
            c["summary"]
                .as_str()
                .unwrap()
                .contains("left out: the server has "),
            "{code}: {c:#}"
        );
    }
    // The agent's own bound on the schema read (`[schema] max_dictionary_tables`), lowered
    // below the 10,000 tables: left out, saying how to read it.
    let agent = start_agent(
        &url,
        "[sample]\ninterval = \"1s\"\ntimeout = \"900ms\"\nwindow = \"0s\"\n[probe]\nenabled = false\n[schema]\nmax_dictionary_tables = 5000\n",
    );
    let mut schema = Value::Null;
    assert!(
        eventually(Duration::from_secs(30), || {
            schema = get(agent.port, "/api/v1/snapshot")
                .and_then(|(_, _, json)| serde_json::from_str::<Value>(&json).ok())
                .map(|v| v["mariadb"]["facts"]["schema"].clone())
                .unwrap_or_default();
            !schema.is_null()
        }),
        "no snapshot from the agent"
    );
    assert!(
        schema["unavailable"]
            .as_str()
            .is_some_and(|w| w.starts_with("left out: the server has ")
                && w.contains("above the agent's bound of 5000 ([schema] max_dictionary_tables)")),
        "{schema:#}"
    );
    drop(agent);
    // Asked for by name, the schema is read whatever the bound.
    let forced = collect(&[
        "--dictionary-max-tables",
        "5000",
        "--collector.mariadb_schema",
    ]);
    assert!(
        forced["mariadb"]["facts"]["schema"]["available"].is_object(),
        "{:#}",
        forced["mariadb"]["facts"]["schema"]
    );
    // And the bounded doctor sends fewer statements than the unbounded one.
    let bounded_statements = block_on(async {
        let pool = server.pool();
        let mut c = pool.get_conn().await.unwrap();
        let q = "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='QUESTIONS'";
        let q0: u64 = c.query_first(q).await.unwrap().unwrap();
        let q1: u64 = c.query_first(q).await.unwrap().unwrap();
        let r = doctor_json(&url, &["--no-probe", "--dictionary-max-tables", "5000"]);
        assert!(r.code <= 2, "{}", r.stderr);
        let q2: u64 = c.query_first(q).await.unwrap().unwrap();
        drop(c);
        pool.disconnect().await.unwrap();
        q2 - q1 - (q1 - q0)
    });
    assert!(
        bounded_statements < unbounded_statements,
        "bounded {bounded_statements}, unbounded {unbounded_statements}"
    );
    // A table cache raised above 2,000 handles, as servers with many tables often have it:
    // each row of performance_schema's index summary visits every open handle, so the index
    // counts are left out and PD706 says why; the rest of the schema is read.
    let cache = GlobalSet::new(server.clone(), "table_open_cache", |_| 4000);
    let raised = collect(&[]);
    let schema = &raised["mariadb"]["facts"]["schema"]["available"];
    assert!(
        schema["index_usage_unread"]
            .as_str()
            .is_some_and(|w| w
                .starts_with("not read: up to 4000 open table handles (table_open_cache 4000, ")),
        "{schema:#}"
    );
    let r = doctor_json(&url, &["--no-probe", "--sample-window", "0"]).json();
    let c = check(&r, "PD706");
    assert_eq!(c["status"], "insufficient_data", "{c:#}");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("the indexes' reads are unknown: not read: up to 4000 open table handles"),
        "{c:#}"
    );
    drop(cache);
}

/// The agent reads the variables with `SELECT @@global...` after its first sample; doctor with
/// `SHOW GLOBAL VARIABLES`. Both must give the same facts, on 11.8 and on 10.11 (which has no
/// `mhnsw_*` variables: naming one would fail the statement).
#[test]
fn the_agent_reads_the_same_variables_as_doctor() {
    for (name, server) in [("11.8", Server::m118()), ("10.11", Server::m1011())] {
        let _lock = (name == "11.8").then(m118_lock);
        let url = server.root_url();
        let agent = start_agent(
            &url,
            // The lock read follows what else runs on this shared server (locks.rs counts it
            // on servers of its own): off, so the count is the variables' alone.
            "[sample]\ninterval = \"1s\"\ntimeout = \"900ms\"\nwindow = \"0s\"\nvariables_refresh = \"0s\"\n[probe]\nenabled = false\n[collectors]\nmariadb_locks = false\n",
        );
        let statements = || agent_statements(&agent);
        // The first sample reads with SHOW (and sets the session up); a later one with @@
        // (every sample: variables_refresh = 0).
        assert!(
            eventually(Duration::from_secs(10), || statements() == Some(2.0)),
            "{name}: the agent's steady sample is not 2 statements: {:?}",
            statements()
        );
        let (_, _, json) = get(agent.port, "/api/v1/snapshot").unwrap();
        let agent_vars: Value =
            serde_json::from_str::<Value>(&json).unwrap()["mariadb"]["facts"]["variables"].clone();
        let doctor = doctor_json(&url, &["--no-probe"]).json();
        let doctor_vars = &doctor["snapshot"]["mariadb"]["facts"]["variables"];
        assert!(
            agent_vars.as_object().is_some_and(|m| m.len() > 20),
            "{name}: {agent_vars}"
        );
        assert_eq!(&agent_vars, doctor_vars, "{name}");
        assert_eq!(agent_vars.get("mhnsw_default_m").is_some(), name == "11.8");
    }
}

/// Runs one statement as root on a connection of its own; its first value, if any.
fn root_query(server: &Server, sql: &str) -> Option<u64> {
    block_on(async {
        let pool = server.pool();
        let mut c = pool.get_conn().await.unwrap();
        let v = c.query_first(sql).await.unwrap();
        drop(c);
        pool.disconnect().await.unwrap();
        v
    })
}

/// Sets a global variable for the life of the guard, then puts the old value back.
struct GlobalSet {
    server: Server,
    name: &'static str,
    old: u64,
}

impl GlobalSet {
    fn new(server: Server, name: &'static str, value: impl Fn(u64) -> u64) -> GlobalSet {
        let old = root_query(&server, &format!("SELECT @@global.{name}")).unwrap();
        root_query(&server, &format!("SET GLOBAL {name} = {}", value(old)));
        GlobalSet { server, name, old }
    }
}

impl Drop for GlobalSet {
    fn drop(&mut self) {
        root_query(
            &self.server,
            &format!("SET GLOBAL {} = {}", self.name, self.old),
        );
    }
}

/// While no setting changes, the agent's steady sample is the status read alone (the
/// variables are kept for an hour here), and a `SET GLOBAL` reaches its snapshot at the next
/// sample all the same: the status read shows `Com_set_option` moved.
#[test]
fn the_agent_reads_variables_again_after_a_set() {
    let server = Server::m118();
    let _lock = m118_lock();
    let agent = start_agent(
        &server.root_url(),
        // The lock read follows what else runs on this shared server (locks.rs counts it on
        // servers of its own): off, so the count is the status read's alone.
        "[sample]\ninterval = \"1s\"\ntimeout = \"900ms\"\nwindow = \"0s\"\nvariables_refresh = \"1h\"\n[probe]\nenabled = false\n[collectors]\nmariadb_locks = false\n",
    );
    let statements = || agent_statements(&agent);
    assert!(
        eventually(Duration::from_secs(10), || statements() == Some(1.0)),
        "no sample was the status read alone: {:?}",
        statements()
    );
    let max_connections = || -> Option<String> {
        let (_, _, json) = get(agent.port, "/api/v1/snapshot")?;
        let v: Value = serde_json::from_str(&json).ok()?;
        v["mariadb"]["facts"]["variables"]["max_connections"]
            .as_str()
            .map(str::to_owned)
    };
    let set = GlobalSet::new(server, "max_connections", |old| old + 7);
    let want = (set.old + 7).to_string();
    assert!(
        eventually(Duration::from_secs(10), || max_connections().as_deref()
            == Some(want.as_str())),
        "the agent never saw SET GLOBAL max_connections = {want}: {:?}",
        max_connections()
    );
    // And once read again, they are kept again.
    assert!(
        eventually(Duration::from_secs(10), || statements() == Some(1.0)),
        "after the SET no sample was the status read alone: {:?}",
        statements()
    );
}

/// Many idle clients space the agent's samples (`[sample] spacing_connections`): a served
/// sample's interval is the configured one times ceil(Threads_connected / N) of its own status
/// read while at most 1 in 100 clients runs (else one interval), and the next sample starts
/// that much later; the clients gone, the spacing falls again. On the shared 10.11 server
/// (other tests' clients come and go), so each assertion compares one sample with itself.
#[test]
fn many_clients_space_the_samples() {
    const PER: f64 = 4.0;
    let server = Server::m1011();
    let agent = start_agent(
        &server.root_url(),
        "[sample]\ninterval = \"1s\"\ntimeout = \"900ms\"\nwindow = \"0s\"\nspacing_connections = 4\n[probe]\nenabled = false\n",
    );
    // (interval, start, clients, running) of the served sample, from one scrape.
    let served = || -> Option<(f64, f64, f64, f64)> {
        let (_, _, body) = get(agent.port, "/metrics")?;
        Some((
            metric(&body, "powerdiag_sample_interval_seconds")?,
            metric(&body, "powerdiag_sample_timestamp_seconds")?,
            metric(&body, "powerdiag_mariadb_threads_connected")?,
            metric(&body, "powerdiag_mariadb_threads_running")?,
        ))
    };
    let spaced = |(interval, _, clients, running): (f64, f64, f64, f64)| {
        let idle = running <= 1.0 + (clients / 100.0).floor();
        interval
            == if idle {
                (clients / PER).ceil().max(1.0)
            } else {
                1.0
            }
    };
    block_on(async {
        let pool = server.pool();
        let mut extra = Vec::new();
        for _ in 0..16 {
            extra.push(pool.get_conn().await.unwrap());
        }
        // 16 more idle clients: at least 5 intervals between samples (the agent's own status
        // read is the one running, unless another test's statement runs at that moment).
        let mut seen = None;
        assert!(
            eventually(Duration::from_secs(60), || {
                seen = served();
                seen.is_some_and(|s| s.2 >= 17.0 && s.0 >= 5.0)
            }),
            "the agent never spaced its samples for the 16 clients: {seen:?}"
        );
        let first = seen.unwrap();
        assert!(spaced(first), "{first:?}");
        // The next sample starts one served interval after this one.
        let mut next = None;
        assert!(
            eventually(Duration::from_secs(30), || {
                next = served();
                next.is_some_and(|s| s.1 > first.1)
            }),
            "no sample after {first:?}"
        );
        let next = next.unwrap();
        assert!(spaced(next), "{next:?}");
        let gap = next.1 - first.1;
        assert!(
            (gap - first.0).abs() <= 1.0,
            "samples {gap} s apart, served interval {first:?}"
        );
        drop(extra);
        pool.disconnect().await.unwrap();
        let mut last = None;
        assert!(
            eventually(Duration::from_secs(60), || {
                last = served();
                last.is_some_and(|s| s.0 < first.0)
            }),
            "the spacing did not fall when the clients left: {last:?}, with them {first:?}"
        );
        assert!(spaced(last.unwrap()), "{last:?}");
    });
}

/// Between spaced samples the agent reads one counter MariaDB keeps globally at every
/// interval (`collect::mariadb::watch`): a row-lock wait that starts while the samples are
/// spaced is sampled at the next interval, not at the spaced one, and the sample that follows
/// reads the wait. The clients and the wait on the shared 10.11 server; the gap compared with
/// the served interval of the same sample.
#[test]
fn a_row_lock_wait_ends_the_spacing_at_the_next_interval() {
    let server = Server::m1011();
    let mut agent = start_agent(
        &server.root_url(),
        "[sample]\ninterval = \"1s\"\ntimeout = \"900ms\"\nwindow = \"0s\"\nspacing_connections = 4\n[probe]\nenabled = false\n",
    );
    // (interval, start) of the served sample, and its row-lock waiters, from one scrape.
    let served = || -> Option<(f64, f64, f64)> {
        let (_, _, body) = get(agent.port, "/metrics")?;
        Some((
            metric(&body, "powerdiag_sample_interval_seconds")?,
            metric(&body, "powerdiag_sample_timestamp_seconds")?,
            metric(
                &body,
                "powerdiag_mariadb_lock_waiting_sessions{kind=\"row\"}",
            )
            .unwrap_or(0.0),
        ))
    };
    // Several threads: the blocked UPDATE runs while this thread polls the agent.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let pool = server.pool();
        let mut extra = Vec::new();
        for _ in 0..32 {
            extra.push(pool.get_conn().await.unwrap());
        }
        let mut c = pool.get_conn().await.unwrap();
        for sql in [
            "CREATE DATABASE IF NOT EXISTS pd_watch",
            "CREATE OR REPLACE TABLE pd_watch.r (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
            "INSERT INTO pd_watch.r VALUES (1, 0)",
        ] {
            c.query_drop(sql).await.unwrap();
        }
        // 33 more idle clients: at least 9 intervals between samples. Catch a sample as it is
        // served, so the wait starts early in its spacing.
        let mut seen = None;
        assert!(
            eventually(Duration::from_secs(90), || {
                let before = seen;
                seen = served();
                matches!((before, seen), (Some(b), Some(s)) if s.1 > b.1 && s.0 >= 9.0)
            }),
            "the agent never spaced its samples for the 33 clients: {seen:?}"
        );
        let first = seen.unwrap();
        c.query_drop("BEGIN").await.unwrap();
        c.query_drop("SELECT * FROM pd_watch.r WHERE id = 1 FOR UPDATE")
            .await
            .unwrap();
        let mut waiter = pool.get_conn().await.unwrap();
        waiter
            .query_drop("SET SESSION innodb_lock_wait_timeout = 60")
            .await
            .unwrap();
        let blocked = tokio::spawn(async move {
            let r = waiter
                .query_drop("UPDATE pd_watch.r SET v = v + 1 WHERE id = 1")
                .await;
            (waiter, r)
        });
        let mut next = None;
        let _ = eventually(Duration::from_secs(30), || {
            next = served();
            next.is_some_and(|s| s.1 > first.1 && s.2 >= 1.0)
        });
        c.query_drop("ROLLBACK").await.unwrap();
        let (waiter, r) = blocked.await.unwrap();
        r.unwrap();
        c.query_drop("DROP DATABASE pd_watch").await.unwrap();
        drop((waiter, extra, c));
        pool.disconnect().await.unwrap();
        let next = next.unwrap();
        assert!(
            next.1 > first.1 && next.2 >= 1.0,
            "no sample read the row-lock wait: {next:?} after {first:?}"
        );
        // The wait began within a second of `first` being served; the spaced sample was due
        // `first.0` seconds after it.
        assert!(
            next.1 - first.1 <= first.0 - 4.0,
            "the wait was sampled {} s after the sample served with a {} s interval",
            next.1 - first.1,
            first.0
        );
    });
    let _ = agent.child.kill();
    let _ = agent.child.wait();
    let log = crate::agent::stderr_of(&mut agent.child);
    assert!(
        log.contains("spaced samples: sampling now")
            && log.contains("waiting for a row lock (Innodb_row_lock_current_waits)"),
        "{log}"
    );
}
