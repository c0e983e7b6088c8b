use crate::replication::or_none;
use crate::{
    LagReading, Limits, LockKind, ReplicaConnection, Rule, Snapshot, Threshold, Unit, Var,
    Verdict, declare_rule, display_text, format_secs,
};

declare_rule! {
    /// ### What it does
    /// On a replica, judges each replication connection whose SQL thread runs. Its lag is
    /// `Seconds_Behind_Master` less `SQL_Delay` (a delayed replica lags by design). The rule
    /// fails when the lag is above {max_lag_seconds} s and, at the rate it moved since an
    /// earlier read (the agent's previous samples, up to five minutes back; doctor's read as its
    /// sample window opened), it would not be gone within {catch_up_seconds} s: the mysqld
    /// mixin's `MySQLReplicationLag` (lag above 30 s and `predict_linear(lag[5m], 60 * 2) > 0`).
    /// `Seconds_Behind_Master` is a whole number of seconds, so the rate over a short span is
    /// uncertain: the verdict is taken only when the projection stays on one side of zero
    /// whatever that rounding; otherwise `insufficient_data` says how long to watch. One read
    /// alone (doctor `--sample-window 0`) decides only a lag within the limit.
    ///
    /// The clock and its limits: `Seconds_Behind_Master` is how far behind the replica's clock
    /// (corrected for the primary's) the event being applied was written. It is 0 when the SQL
    /// thread has applied everything received, even when the IO thread itself is behind the
    /// primary (a slow link; compare `Gtid_IO_Pos` with the primary's `@@gtid_binlog_pos`), and
    /// it jumps when a transaction that ran long on the primary starts to apply. MariaDB 11.6+
    /// also reports `Master_Slave_time_diff`, shown as evidence.
    ///
    /// The verdict names the probable cause from what the replica shows, in this order:
    /// - the SQL thread waits for a lock that a session on the replica holds (a long
    ///   transaction, `FLUSH TABLES WITH READ LOCK` of a backup): the session and its `KILL`,
    ///   from the lock read the lock rules (PD217, PD219) use;
    /// - the SQL thread applied nothing since the earlier read while inside a row event: one
    ///   large transaction, or a table without a primary key replicated in ROW format, where
    ///   every row of the event is searched with a full scan. The tables come from the relay
    ///   log (`SHOW RELAYLOG EVENTS` from the SQL thread's position, at most 8 events), and
    ///   which of them lack a primary key from the schema read (PD707's);
    /// - apply is single-threaded (`slave_parallel_threads = 0`) while the position moves:
    ///   the replica commits one transaction at a time what the primary committed in parallel;
    /// - else none visible on the replica: the primary writes faster than it applies, or its
    ///   storage is slower (PD802).
    ///
    /// ### Why is this bad?
    /// Reads served by a lagging replica return data as old as the lag, a failover to it must
    /// wait for it to apply what it received (or lose it), and semi-synchronous or
    /// `wsrep`-style guarantees do not cover apply lag. Lag that does not shrink will not go
    /// away by itself: the replica applies more slowly than the primary writes.
    ///
    /// ### Remediation
    /// - A session on the replica holds the lock the applier waits for: end it (`KILL` the
    ///   session the evidence names); schedule backups with `--no-lock`/`BACKUP STAGE` rather
    ///   than `FLUSH TABLES WITH READ LOCK` on busy replicas; keep reporting transactions on
    ///   replicas short.
    /// - A table without a primary key: give it one (on the primary; it replicates), e.g.
    ///   `ALTER TABLE t ADD COLUMN id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY`.
    ///   Until then, large `UPDATE`/`DELETE`s on it lag every replica by a full scan per row.
    /// - One large transaction: it applies as one on the replica; split bulk jobs on the
    ///   primary into transactions of a few thousand rows.
    /// - Single-threaded apply: `STOP REPLICA SQL_THREAD; SET GLOBAL slave_parallel_threads =
    ///   4; START REPLICA SQL_THREAD;` (up to the replica's CPUs; persist under `[mariadbd]`),
    ///   with `slave_parallel_mode = optimistic` (the default since 10.5).
    pub struct ReplicationLag {
        code: "PD222",
        name: "replication-lag",
        severity: Warning,
        scope: Database,
        summary: "a replica lags behind its primary and does not catch up",
        fails_when: "`Seconds_Behind_Master` − `SQL_Delay` > 30 s and, at its recent rate, not back to 0 within 120 s (the mysqld mixin's MySQLReplicationLag)",
        severity_why: "warning: the lag is measured now, but what it costs depends on who reads the replica",
        thresholds: [MAX_LAG, CATCH_UP],
    }
}

const MAX_LAG: Threshold = Threshold {
    key: "max_lag_seconds",
    default: 30.0,
    min: 0.0,
    max: 1e9,
    unit: Unit::Count,
    doc: "seconds of Seconds_Behind_Master − SQL_Delay (the mysqld mixin's MySQLReplicationLag: 30)",
};
const CATCH_UP: Threshold = Threshold {
    key: "catch_up_seconds",
    default: 120.0,
    min: 0.0,
    max: 1e9,
    unit: Unit::Count,
    doc: "seconds within which the lag must be on course to reach 0 at its recent rate (the mysqld mixin: predict_linear(lag[5m], 60 * 2) > 0)",
};

/// How far back the rate is taken from (the mysqld mixin's `[5m]`); an agent sampling less
/// often uses its previous sample.
const TREND_SECONDS: f64 = 300.0;
/// Readings closer together than this give no rate.
const MIN_SPAN: f64 = 0.5;

/// How the lag moved since an earlier read.
struct Trend {
    /// Seconds between the two reads.
    span: f64,
    /// The lag then.
    then: u64,
    /// The SQL thread's position did not move (in any read since then).
    stuck: bool,
}

fn trend(c: &ReplicaConnection, earlier: &[LagReading]) -> Option<Trend> {
    let delay = c.sql_delay.unwrap_or(0);
    let points: Vec<(f64, u64, &str)> = earlier
        .iter()
        .filter(|r| r.seconds_before >= MIN_SPAN)
        .filter_map(|r| {
            let p = r.connections.iter().find(|p| p.name == c.name)?;
            Some((
                r.seconds_before,
                p.seconds_behind_master?.saturating_sub(delay),
                p.exec_position.as_str(),
            ))
        })
        .collect();
    let base = points
        .iter()
        .filter(|p| p.0 <= TREND_SECONDS)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .or_else(|| points.iter().min_by(|a, b| a.0.total_cmp(&b.0)))?;
    let stuck = !c.exec_position.is_empty()
        && points
            .iter()
            .filter(|p| p.0 <= base.0)
            .all(|p| p.2 == c.exec_position);
    Some(Trend {
        span: base.0,
        then: base.1,
        stuck,
    })
}

/// Where the lag is headed: `Some(true)` still above 0 after `catch_up` seconds at the rate
/// measured, `Some(false)` at 0 by then, `None` when the readings' rounding (each a whole
/// number of seconds, truncated) allows both.
fn stays(now: u64, t: &Trend, catch_up: f64) -> Option<bool> {
    let rate = (now as f64 - t.then as f64) / t.span;
    let slack = 1.0 / t.span;
    let low = now as f64 + (rate - slack) * catch_up;
    let high = now as f64 + 1.0 + (rate + slack) * catch_up;
    if low > 0.0 {
        Some(true)
    } else if high <= 0.0 {
        Some(false)
    } else {
        None
    }
}

fn rate_words(now: u64, t: &Trend) -> String {
    let rate = (now as f64 - t.then as f64) / t.span;
    let over = format_secs(t.span.round().max(1.0) as u64);
    if now == t.then {
        format!("unchanged over {over}")
    } else if rate > 0.0 {
        format!("growing {rate:.1} s per second over {over}")
    } else {
        format!("shrinking {:.1} s per second over {over}", -rate)
    }
}

/// One connection's judgement.
enum Judged {
    Within(String),
    Catching(String),
    Behind(Behind),
    Unknown(String),
}

struct Behind {
    summary: String,
    evidence: Vec<String>,
    remediation: Vec<String>,
}

/// The probable causes of `c`'s lag, each with its evidence line and its fix.
fn causes(s: &Snapshot, c: &ReplicaConnection, t: &Trend) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(db) = s.db() else {
        return out;
    };
    let name = c.sql_name();
    // 1. A lock held on the replica.
    let mut lock_named = false;
    if let Ok(l) = db.locks() {
        // The applier: `Slave_SQL`/`Slave_worker` in PROCESSLIST; performance_schema.threads
        // gives replication threads no PROCESSLIST_ID, so there a waiter the lock chain names
        // without a session is the applier (while the SQL thread is in an event).
        let applying = c.in_row_event() || LockKind::of_state(&c.sql_state).is_some();
        let applier = |id: u64| match l.session(id) {
            Some(x) => x.command.starts_with("Slave_"),
            None => applying,
        };
        for w in l.waits.iter().filter(|w| applier(w.waiter)) {
            let root = l.roots().into_iter().find(|r| r.queued.contains(&w.waiter));
            if let Some(r) = root {
                lock_named = true;
                out.push((
                    format!(
                        "the SQL thread (connection {}) waits for {} held on the replica by {}",
                        w.waiter,
                        lock_words(w.kind),
                        l.describe_session(r.id)
                    ),
                    format!(
                        "A session on the replica holds the lock the applier waits for: end it — `{}` — and keep transactions and `FLUSH TABLES WITH READ LOCK` (backups: `BACKUP STAGE` or `--no-lock`) short on replicas.",
                        l.kill_command(&r)
                    ),
                ));
                break;
            }
        }
    }
    if !lock_named && LockKind::of_state(&c.sql_state).is_some() {
        let why = match db.locks() {
            Ok(_) => "the lock read names no holder".to_owned(),
            Err(v) => v.summary,
        };
        out.push((
            format!(
                "the SQL thread is '{}': a session on the replica holds that lock ({why})",
                display_text(&c.sql_state, 120)
            ),
            "A session on the replica holds the lock the applier waits for: find it (`SHOW PROCESSLIST`: the oldest transaction, or a `FLUSH TABLES WITH READ LOCK` of a backup) and end it.".to_owned(),
        ));
    }
    // 2. One row event for the whole span: a large transaction or a table without a key.
    if t.stuck && c.in_row_event() {
        let schema = db.schema_facts().ok();
        let keyless: Vec<&str> = c
            .applying_tables
            .iter()
            .filter(|name| {
                schema.is_some_and(|sc| {
                    sc.tables.iter().any(|x| {
                        format!("{}.{}", x.schema, x.name) == **name
                            && x.clustered_key().is_none()
                    })
                })
            })
            .map(String::as_str)
            .collect();
        let stuck_for = format_secs(t.span.round().max(1.0) as u64);
        let tables = if c.applying_tables.is_empty() {
            String::new()
        } else {
            format!(
                " on {}",
                c.applying_tables
                    .iter()
                    .map(|t| display_text(t, 130))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        if !keyless.is_empty() {
            let shown: Vec<String> = keyless.iter().map(|t| display_text(t, 130)).collect();
            out.push((
                format!(
                    "the SQL thread stayed inside one row event{tables} for the {stuck_for} watched ('{}'): {} no primary key, so each row of the event is searched by a full scan (ROW format)",
                    display_text(&c.sql_state, 80),
                    if shown.len() == 1 {
                        format!("{} has", shown[0])
                    } else {
                        format!("{} have", shown.join(", "))
                    }
                ),
                format!(
                    "Give {} a primary key, on the primary (it replicates), e.g. `ALTER TABLE … ADD COLUMN id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY` (PD707 lists every such table); until then each bulk UPDATE or DELETE on it costs every replica a full scan per row.",
                    shown.join(", ")
                ),
            ));
        } else {
            let unknown = match (&c.applying_tables.is_empty(), db.schema_facts()) {
                (true, _) => " (the relay log was not read: the tables are unknown)".to_owned(),
                (false, Err(v)) => format!(" (whether they have a primary key is unknown: {})", v.summary),
                (false, Ok(_)) => String::new(),
            };
            out.push((
                format!(
                    "the SQL thread stayed inside one row event{tables} for the {stuck_for} watched ('{}'): one large transaction{unknown}",
                    display_text(&c.sql_state, 80)
                ),
                "One large transaction applies as one on the replica: split bulk jobs on the primary into transactions of a few thousand rows; check that the tables it changes have a primary key (PD707).".to_owned(),
            ));
        }
    }
    // 3. Single-threaded apply while the position moves.
    if !t.stuck && db.var_u64(Var::SlaveParallelThreads) == Ok(0) && out.is_empty() {
        out.push((
            "the SQL thread applies alone (slave_parallel_threads = 0): what the primary committed in parallel, the replica commits one transaction at a time".to_owned(),
            format!(
                "Apply in parallel: `STOP REPLICA{name} SQL_THREAD; SET GLOBAL slave_parallel_threads = 4; START REPLICA{name} SQL_THREAD;` (up to the replica's CPUs; `slave_parallel_threads = 4` under `[mariadbd]`), with `slave_parallel_mode = optimistic` (the default since 10.5)."
            ),
        ));
    }
    out
}

fn lock_words(k: LockKind) -> &'static str {
    match k {
        LockKind::Row => "a row lock",
        LockKind::Metadata => "a table metadata lock",
        LockKind::OtherMetadata => "a metadata lock (backup, global read or schema)",
        LockKind::Table => "a table lock",
    }
}

fn judge(
    s: &Snapshot,
    c: &ReplicaConnection,
    earlier: &[LagReading],
    max: f64,
    catch_up: f64,
) -> Judged {
    let who = c.label();
    let Some(lag) = c.lag() else {
        return Judged::Unknown(format!(
            "{who}: Seconds_Behind_Master is NULL although the SQL thread runs (the IO thread is not connected: PD221)"
        ));
    };
    if lag as f64 <= max {
        return Judged::Within(format!("{who}: {}", lag_words(c, lag)));
    }
    let Some(t) = trend(c, earlier) else {
        return Judged::Unknown(format!(
            "{who} is {} behind at one read: whether it shrinks needs a second read (the agent's next sample, or doctor --sample-window 10s)",
            format_secs(lag)
        ));
    };
    let words = rate_words(lag, &t);
    match stays(lag, &t, catch_up) {
        None => Judged::Unknown(format!(
            "{who} is {} behind, {words}: too short to tell whether it catches up within {}; watch longer (doctor --sample-window 30s, or the agent)",
            format_secs(lag),
            format_secs(catch_up as u64)
        )),
        Some(false) => Judged::Catching(format!(
            "{who} is {} behind but {words}: on course to catch up within {}",
            format_secs(lag),
            format_secs(catch_up as u64)
        )),
        Some(true) => {
            let found = causes(s, c, &t);
            let mut evidence = vec![format!(
                "{who} from {}: {} now, {} at the read {} earlier ({words})",
                display_text(&c.source, 120),
                lag_words(c, lag),
                format_secs(t.then),
                format_secs(t.span.round().max(1.0) as u64),
            )];
            evidence.push(format!(
                "  applied to {} ({}), received to {}; Slave_SQL_Running_State: {}",
                or_none(&c.exec_position),
                if t.stuck {
                    "not moved since"
                } else {
                    "moving"
                },
                or_none(&c.read_position),
                display_text(&c.sql_state, 160)
            ));
            if let Some(d) = c.master_slave_time_diff {
                evidence.push(format!(
                    "  Master_Slave_time_diff {d} s (the primary's time of the last event received less that of the last applied)"
                ));
            }
            evidence.push("  clock: Seconds_Behind_Master — 0 while the IO thread itself is behind the primary, and it jumps when a long transaction starts to apply".to_owned());
            let cause = match found.first() {
                Some((line, _)) => line.clone(),
                None => "no cause visible on the replica".to_owned(),
            };
            for (line, _) in &found {
                evidence.push(format!("  probable cause: {line}"));
            }
            let mut remediation: Vec<String> = found.into_iter().map(|(_, fix)| fix).collect();
            if remediation.is_empty() {
                remediation.push(format!(
                    "{who}: nothing on the replica holds the applier up: the primary writes faster than the replica applies. Compare the primary's write rate (`Com_insert`/`Com_update`/`Com_delete`, the binary log's growth) with the replica's; check the replica's storage (PD802) and its buffer pool (PD205); apply in parallel (`slave_parallel_threads`)."
                ));
            }
            Judged::Behind(Behind {
                summary: format!(
                    "{who} is {} behind its primary, {words}: {cause}",
                    format_secs(lag)
                ),
                evidence,
                remediation,
            })
        }
    }
}

fn lag_words(c: &ReplicaConnection, lag: u64) -> String {
    match c.sql_delay.unwrap_or(0) {
        0 => format!("lag {}", format_secs(lag)),
        d => format!(
            "lag {} (Seconds_Behind_Master {} less SQL_Delay {d} s)",
            format_secs(lag),
            c.seconds_behind_master.unwrap_or(0)
        ),
    }
}


impl Rule for ReplicationLag {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let r = s.db()?.replication()?;
        if r.connections.is_empty() {
            return Err(Verdict::not_applicable(
                "not a replica (SHOW ALL REPLICAS STATUS lists no connection)",
            ));
        }
        let (max, catch_up) = (limits.get(&MAX_LAG), limits.get(&CATCH_UP));
        let mut within = Vec::new();
        let mut catching = Vec::new();
        let mut behind = Vec::new();
        let mut unknown = Vec::new();
        for c in &r.connections {
            if !c.sql_ok() {
                unknown.push(format!(
                    "{}: the SQL thread is stopped, so there is no lag to measure (PD221)",
                    c.label()
                ));
                continue;
            }
            match judge(s, c, &r.earlier, max, catch_up) {
                Judged::Within(l) => within.push(l),
                Judged::Catching(l) => catching.push(l),
                Judged::Behind(b) => behind.push(b),
                Judged::Unknown(l) => unknown.push(l),
            }
        }
        let others: Vec<String> = within
            .iter()
            .chain(&catching)
            .chain(&unknown)
            .cloned()
            .collect();
        if let Some(first) = behind.first() {
            let more = match behind.len() {
                1 => String::new(),
                n => format!(" ({n} connections behind)"),
            };
            return Ok(Verdict::fail(format!("{}{more}", first.summary))
                .with_evidence_lines(behind.iter().flat_map(|b| b.evidence.clone()))
                .with_evidence_lines(others)
                .with_remediation(
                    behind
                        .iter()
                        .flat_map(|b| b.remediation.clone())
                        .collect::<Vec<_>>()
                        .join("\n\n"),
                ));
        }
        if !unknown.is_empty() {
            return Err(Verdict::insufficient(unknown.join("; "))
                .with_evidence_lines(within.iter().chain(&catching).cloned()));
        }
        let n = r.connections.len();
        let summary = match catching.first() {
            Some(c) => c.clone(),
            None => format!(
                "{n} replication connection{} within {} of lag",
                if n == 1 { "" } else { "s" },
                format_secs(max as u64)
            ),
        };
        Ok(Verdict::pass(summary).with_evidence_lines(others))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        LagPoint, Status,
        testing::{SnapshotBuilder, replica, verdict},
    };

    fn lagging(sbm: u64, state: &str) -> ReplicaConnection {
        let mut c = replica("");
        c.seconds_behind_master = Some(sbm);
        c.sql_state = state.into();
        c.exec_position = "mariadb-bin.000001:1790".into();
        c
    }

    fn earlier(seconds_before: f64, sbm: u64, exec: &str) -> LagReading {
        LagReading {
            seconds_before,
            connections: vec![LagPoint {
                name: String::new(),
                seconds_behind_master: Some(sbm),
                exec_position: exec.into(),
            }],
        }
    }

    fn snapshot(c: ReplicaConnection, then: Vec<LagReading>) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("11.8.3-MariaDB")
            .var(Var::SlaveParallelThreads, "0")
            .replication(vec![c])
            .replication_earlier(then)
    }

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        let mut c = lagging(95, "Update_rows_log_event::find_row()");
        c.applying_tables = vec!["shop.events".into()];
        let t = crate::testing::schema_table("events", "InnoDB", vec![]);
        snapshot(c, vec![earlier(60.0, 35, "mariadb-bin.000001:1790")])
            .schema(vec![t])
            .build()
    }

    #[test]
    fn a_keyless_table_in_a_stuck_row_event_is_named() {
        let v = verdict(&ReplicationLag, &failing_example());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.starts_with("the default connection is 95 s behind its primary, growing 1.0 s per second over 60 s: the SQL thread stayed inside one row event on shop.events for the 60 s watched"), "{}", v.summary);
        assert!(v.summary.contains("shop.events has no primary key"), "{}", v.summary);
        assert!(v.remediation.unwrap().contains("Give shop.events a primary key"));
        assert!(v.evidence.iter().any(|e| e.contains("not moved since")), "{:?}", v.evidence);
    }

    #[test]
    fn within_the_limit_at_one_read_passes_above_it_needs_a_second() {
        let s = snapshot(lagging(3, ""), vec![]).build();
        assert_eq!(verdict(&ReplicationLag, &s).status, Status::Pass);
        let v = verdict(&ReplicationLag, &snapshot(lagging(300, ""), vec![]).build());
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("needs a second read"), "{}", v.summary);
    }

    #[test]
    fn catching_up_passes_and_a_short_flat_look_is_undecided() {
        // 400 s → 300 s in 20 s: 5 s per second, gone in a minute.
        let v = verdict(&ReplicationLag, &snapshot(lagging(300, ""), vec![earlier(20.0, 400, "x:1")]).build());
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.summary.contains("shrinking 5.0 s per second over 20 s: on course to catch up"), "{}", v.summary);
        // 40 s, unchanged over one second: the rounding allows both.
        let v = verdict(&ReplicationLag, &snapshot(lagging(40, ""), vec![earlier(1.0, 40, "x:1")]).build());
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        // An hour behind, unchanged over one second: cannot be gone in two minutes.
        let v = verdict(&ReplicationLag, &snapshot(lagging(3600, ""), vec![earlier(1.0, 3600, "x:1")]).build());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("slave_parallel_threads = 0"), "{}", v.summary);
    }

    #[test]
    fn the_rate_comes_from_the_last_five_minutes() {
        // 10 minutes ago 1000 s, 4 minutes ago 50 s, now 60 s: growing again.
        let c = lagging(60, "");
        let t = trend(&c, &[earlier(600.0, 1000, "a:1"), earlier(240.0, 50, "a:2")]).unwrap();
        assert_eq!((t.span, t.then), (240.0, 50));
        // A slower agent: its previous sample.
        let t = trend(&c, &[earlier(900.0, 10, "a:1")]).unwrap();
        assert_eq!(t.span, 900.0);
        assert!(!t.stuck);
    }

    #[test]
    fn a_delayed_replica_lags_by_design() {
        let mut c = lagging(3610, "Waiting until MASTER_DELAY seconds after master executed event");
        c.sql_delay = Some(3600);
        let v = verdict(&ReplicationLag, &snapshot(c.clone(), vec![]).build());
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.evidence[0].contains("lag 10 s (Seconds_Behind_Master 3610 less SQL_Delay 3600 s)"), "{:?}", v.evidence);
        // Its earlier reads are judged less the delay too: 3700 → 3650 is 100 s → 50 s.
        c.seconds_behind_master = Some(3650);
        let v = verdict(&ReplicationLag, &snapshot(c, vec![earlier(10.0, 3700, "x:1")]).build());
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.summary.contains("50 s behind but shrinking 5.0 s per second"), "{}", v.summary);
    }

    #[test]
    fn a_lock_held_on_the_replica_is_the_cause_with_its_kill() {
        use crate::{LockSession, LockWait, Locks, SessionTransaction};
        let c = lagging(200, "Waiting for backup lock");
        let locks = Locks {
            sessions: vec![
                LockSession {
                    id: 8,
                    user: "system user".into(),
                    command: "Slave_SQL".into(),
                    state: Some("Waiting for backup lock".into()),
                    ..Default::default()
                },
                LockSession {
                    id: 30,
                    user: "backup".into(),
                    host: "localhost".into(),
                    command: "Sleep".into(),
                    seconds: 250.0,
                    transaction: Some(SessionTransaction::default()),
                    ..Default::default()
                },
            ],
            waits: vec![LockWait {
                waiter: 8,
                blocker: Some(30),
                kind: LockKind::OtherMetadata,
                seconds: 190.0,
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = snapshot(c, vec![earlier(60.0, 140, "mariadb-bin.000001:1790")])
            .locks(locks)
            .build();
        let v = verdict(&ReplicationLag, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("the SQL thread (connection 8) waits for a metadata lock (backup, global read or schema) held on the replica by connection 30 (backup@localhost"), "{}", v.summary);
        assert!(v.remediation.unwrap().contains("KILL 30;"));
    }

    #[test]
    fn stopped_or_not_a_replica() {
        let mut c = replica("");
        c.sql_running = "No".into();
        c.seconds_behind_master = None;
        let v = verdict(&ReplicationLag, &snapshot(c, vec![]).build());
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("PD221"), "{}", v.summary);
        let s = SnapshotBuilder::new().mariadb("11.8.3-MariaDB").replication(vec![]).build();
        assert_eq!(verdict(&ReplicationLag, &s).status, Status::NotApplicable);
    }

    /// performance_schema.threads gives the applier no PROCESSLIST_ID: the row-lock chain
    /// names it (its transaction's thread id) without a session.
    #[test]
    fn a_row_lock_on_an_applier_without_a_session() {
        use crate::{LockSession, LockWait, Locks, SessionTransaction};
        let c = lagging(40, "Update_rows_log_event::find_row()");
        let locks = Locks {
            sessions: vec![LockSession {
                id: 52,
                user: "report".into(),
                host: "localhost".into(),
                command: "Query".into(),
                seconds: 45.0,
                transaction: Some(SessionTransaction::default()),
                ..Default::default()
            }],
            waits: vec![LockWait {
                waiter: 8,
                blocker: Some(52),
                kind: LockKind::Row,
                seconds: 30.0,
                object: Some("`shop`.`orders` index PRIMARY".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = snapshot(c, vec![earlier(2.0, 38, "mariadb-bin.000001:1790")])
            .locks(locks)
            .build();
        let v = verdict(&ReplicationLag, &s);
        assert!(v.summary.contains("waits for a row lock held on the replica by connection 52 (report@localhost"), "{}", v.summary);
        assert!(v.remediation.unwrap().contains("KILL 52;"));
    }
}
