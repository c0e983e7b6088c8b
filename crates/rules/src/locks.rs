//! Who waits for whom: the sessions waiting for a lock, the sessions they wait for, and the
//! last deadlock (PD217–PD220, the report's "Blocking" section).
//!
//! The collector (doctor's and the agent's) reads these only when the status read says
//! something can be waiting
//! (`Innodb_row_lock_current_waits` above 0, or at least [`SCAN_THREADS_RUNNING`] statements
//! running); otherwise [`LockScan::Quiet`] records why nothing was read, so a rule can still
//! say "nothing waits" with the numbers behind it. Statement text is stored with its literals
//! replaced by `?` ([`mask_statement`]) and truncated: a snapshot never holds the values a
//! session was writing.

use serde::{Deserialize, Serialize};

use crate::{Gathered, MariadbFacts, Verdict, display_text, format_secs};

/// The sessions are read when at least this many statements run (`Threads_running`, the
/// status read itself included): two besides powerdiag's own, so one can wait for the other.
/// A lone session waiting for a metadata lock with nothing else running is below this, and
/// below PD219's smallest pile-up.
pub const SCAN_THREADS_RUNNING: u64 = 3;

/// Statement text kept per session or deadlock transaction, characters.
pub const STATEMENT_CHARS: usize = 256;

/// The lock-wait picture at one read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Locks {
    /// Whether the sessions were read, and if not why not.
    pub scan: LockScan,
    /// The sessions that wait or are waited for (and, for the PROCESSLIST-only metadata
    /// source, the probable holders), by thread id.
    pub sessions: Vec<LockSession>,
    /// Who waits for whom.
    pub waits: Vec<LockWait>,
    /// Where the holders of metadata locks came from.
    pub metadata_source: MetadataSource,
    /// Rows left out by the read's `LIMIT` (sessions or waits), when any.
    #[serde(default)]
    pub truncated: bool,
}

/// Whether the sessions were read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum LockScan {
    /// Read at this sample.
    #[default]
    Read,
    /// Not read: the status read showed no row-lock wait and fewer than
    /// [`SCAN_THREADS_RUNNING`] statements running, so nothing could be queued.
    Quiet {
        threads_running: u64,
        row_lock_current_waits: u64,
    },
}

/// One session (`information_schema.PROCESSLIST`, with its InnoDB transaction when open).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LockSession {
    /// The connection id: `KILL` takes it.
    pub id: u64,
    pub user: String,
    pub host: String,
    pub db: Option<String>,
    /// `Query`, `Sleep` (idle), …
    pub command: String,
    /// Seconds in the present command: a `Sleep` session's idle time.
    pub seconds: f64,
    /// `Waiting for table metadata lock`, `Sending data`, …
    pub state: Option<String>,
    /// The running statement, literals masked ([`mask_statement`]), truncated.
    pub statement: Option<String>,
    /// Its open InnoDB transaction (`INNODB_TRX`), if any.
    pub transaction: Option<SessionTransaction>,
}

/// A session's open InnoDB transaction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionTransaction {
    /// Seconds since it started.
    pub age_seconds: u64,
    /// `RUNNING`, `LOCK WAIT`, …
    pub state: String,
    pub rows_locked: u64,
    pub rows_modified: u64,
}

/// What a session waits for.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LockKind {
    /// An InnoDB row lock (`INNODB_LOCK_WAITS`).
    #[default]
    Row,
    /// A table's metadata lock (`Waiting for table metadata lock`).
    Metadata,
    /// Another metadata lock: schema, global read lock, backup lock, stored routine, flush.
    OtherMetadata,
    /// A table-level lock (`LOCK TABLES`, MyISAM/Aria: `Waiting for table level lock`).
    Table,
}

impl LockKind {
    /// The metric label and the report's word.
    pub fn label(self) -> &'static str {
        match self {
            LockKind::Row => "row",
            LockKind::Metadata => "metadata",
            LockKind::OtherMetadata => "other_metadata",
            LockKind::Table => "table",
        }
    }

    /// The kind of a PROCESSLIST state that is a lock wait, `None` for any other state.
    pub fn of_state(state: &str) -> Option<LockKind> {
        let s = state.trim();
        if !s.starts_with("Waiting for") {
            return None;
        }
        if s == "Waiting for table metadata lock" {
            Some(LockKind::Metadata)
        } else if s == "Waiting for table level lock" {
            Some(LockKind::Table)
        } else if s.ends_with("lock") || s == "Waiting for table flush" {
            Some(LockKind::OtherMetadata)
        } else {
            None
        }
    }
}

/// One session waiting for another (or for a holder not known).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LockWait {
    pub waiter: u64,
    /// The session holding the lock, when known.
    pub blocker: Option<u64>,
    pub kind: LockKind,
    /// Seconds the waiter has waited.
    pub seconds: f64,
    /// What is locked: "`shop`.`orders` index PRIMARY", "`shop`.`orders`".
    pub object: Option<String>,
    /// The blocker's lock mode (`X`, `SHARED_READ`…), when known.
    pub mode: Option<String>,
    /// The blocker is inferred (PROCESSLIST only: the oldest session that can hold the
    /// lock), not read from a lock table.
    #[serde(default)]
    pub probable: bool,
}

/// Where the holders of metadata locks came from, best first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum MetadataSource {
    /// No metadata-lock wait: no holder needed.
    #[default]
    NotNeeded,
    /// `performance_schema.metadata_locks` (granted and pending locks).
    PerformanceSchema,
    /// `information_schema.METADATA_LOCK_INFO` (the `metadata_lock_info` plugin: granted
    /// locks).
    MetadataLockInfo,
    /// The sessions' states alone (`performance_schema.threads` or `PROCESSLIST`): the
    /// holders are inferred; `better` says how to get a real source.
    Processlist { better: String },
}

impl MetadataSource {
    pub fn describe(&self) -> String {
        match self {
            MetadataSource::NotNeeded => "no metadata-lock wait".into(),
            MetadataSource::PerformanceSchema => "performance_schema.metadata_locks".into(),
            MetadataSource::MetadataLockInfo => "information_schema.METADATA_LOCK_INFO".into(),
            MetadataSource::Processlist { better } => {
                format!("the sessions' states only, holders inferred ({better})")
            }
        }
    }
}

/// The last deadlock InnoDB detected (`SHOW ENGINE INNODB STATUS`, "LATEST DETECTED
/// DEADLOCK").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Deadlock {
    /// When InnoDB detected it, as printed (the server's local time).
    pub at: Option<String>,
    /// The transactions, in the order printed (usually two).
    pub transactions: Vec<DeadlockTransaction>,
    /// The 1-based number of the transaction InnoDB rolled back.
    pub rolled_back: Option<usize>,
    /// `Innodb_deadlocks` when this was read.
    pub deadlocks: u64,
}

/// One transaction of a deadlock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeadlockTransaction {
    pub thread_id: Option<u64>,
    pub user: Option<String>,
    pub host: Option<String>,
    /// Its statement, literals masked, truncated.
    pub statement: Option<String>,
    /// The locks it held ("lock_mode X locks rec but not gap on index PRIMARY of table
    /// `lk`.`t`").
    pub holds: Vec<String>,
    /// The lock it waited for.
    pub waits_for: Option<String>,
}

impl Deadlock {
    /// Each transaction as lines: "(1) connection 21 app@10.0.0.21 — rolled back: UPDATE …",
    /// then "    held …" and "    waited for …" (outside text made safe for one line).
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, t) in self.transactions.iter().enumerate() {
            let who = match (t.thread_id, &t.user, &t.host) {
                (Some(id), Some(u), Some(h)) => format!(
                    "connection {id} {}@{}",
                    display_text(u, 48),
                    display_text(h, 64)
                ),
                (Some(id), _, _) => format!("connection {id}"),
                _ => "a session".into(),
            };
            let rolled = if self.rolled_back == Some(i + 1) {
                " — rolled back"
            } else {
                ""
            };
            out.push(format!(
                "({}) {who}{rolled}: {}",
                i + 1,
                t.statement
                    .as_deref()
                    .map(|s| display_text(s, 200))
                    .unwrap_or_else(|| "statement not shown".into())
            ));
            for h in t.holds.iter().take(3) {
                out.push(format!("    held {}", display_text(h, 200)));
            }
            if let Some(w) = &t.waits_for {
                out.push(format!("    waited for {}", display_text(w, 200)));
            }
        }
        out
    }
}

pub(crate) fn locks_not_recorded() -> Gathered<Locks> {
    Gathered::Unavailable("not recorded: the snapshot predates lock reads".into())
}

pub(crate) fn deadlock_not_recorded() -> Gathered<Option<Deadlock>> {
    Gathered::Unavailable("not recorded: the snapshot predates deadlock reads".into())
}

impl MariadbFacts {
    /// The lock waits, or the `insufficient_data` verdict naming why they are missing.
    pub fn locks(&self) -> Result<&Locks, Verdict> {
        match &self.locks {
            Gathered::Available(l) => Ok(l),
            Gathered::Unavailable(why) => Err(Verdict::insufficient(format!(
                "lock waits unavailable: {why}"
            ))),
        }
    }
}

impl Locks {
    pub fn session(&self, id: u64) -> Option<&LockSession> {
        self.sessions.iter().find(|s| s.id == id)
    }

    /// The waits of one kind, longest first.
    pub fn waits_of(&self, kind: LockKind) -> Vec<&LockWait> {
        let mut w: Vec<&LockWait> = self.waits.iter().filter(|w| w.kind == kind).collect();
        w.sort_by(|a, b| {
            b.seconds
                .total_cmp(&a.seconds)
                .then(a.waiter.cmp(&b.waiter))
        });
        w
    }

    /// Distinct sessions waiting for `kind`.
    pub fn waiting(&self, kind: LockKind) -> usize {
        let mut ids: Vec<u64> = self.waits_of(kind).iter().map(|w| w.waiter).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }

    /// The root blockers: sessions others wait for (directly or through a chain) that wait
    /// for nobody themselves, with every session queued behind each, most queued first.
    pub fn roots(&self) -> Vec<Root> {
        let waits_for = |id: u64| -> Vec<u64> {
            self.waits
                .iter()
                .filter(|w| w.waiter == id)
                .filter_map(|w| w.blocker)
                .collect()
        };
        let mut roots: Vec<Root> = Vec::new();
        let mut blockers: Vec<u64> = self.waits.iter().filter_map(|w| w.blocker).collect();
        blockers.sort_unstable();
        blockers.dedup();
        for b in blockers {
            if !waits_for(b).is_empty() {
                continue;
            }
            // Everyone who reaches b.
            let mut queued: Vec<u64> = Vec::new();
            let mut frontier = vec![b];
            while let Some(x) = frontier.pop() {
                for w in self.waits.iter().filter(|w| w.blocker == Some(x)) {
                    if w.waiter != b && !queued.contains(&w.waiter) {
                        queued.push(w.waiter);
                        frontier.push(w.waiter);
                    }
                }
            }
            queued.sort_unstable();
            let longest = self
                .waits
                .iter()
                .filter(|w| queued.contains(&w.waiter))
                .map(|w| w.seconds)
                .fold(0.0, f64::max);
            let probable = self
                .waits
                .iter()
                .filter(|w| w.blocker == Some(b))
                .all(|w| w.probable);
            roots.push(Root {
                id: b,
                queued,
                longest_wait: longest,
                probable,
            });
        }
        roots.sort_by(|a, b| {
            b.queued
                .len()
                .cmp(&a.queued.len())
                .then(b.longest_wait.total_cmp(&a.longest_wait))
                .then(a.id.cmp(&b.id))
        });
        roots
    }

    /// "connection 42 (app@10.0.0.5, idle in transaction for 3 min, 12 rows locked)".
    pub fn describe_session(&self, id: u64) -> String {
        match self.session(id) {
            Some(s) => format!("connection {id} ({})", s.describe()),
            None => format!("connection {id}"),
        }
    }
}

impl Locks {
    /// `KILL id;` with what it ends, for the session at the root of a queue: text for a
    /// human to run (powerdiag never runs it).
    pub fn kill_command(&self, r: &Root) -> String {
        let ends = match self.session(r.id) {
            Some(s) if s.transaction.is_some() => "rolls back its open transaction and",
            _ => "ends its statement and",
        };
        let probable = if r.probable {
            " (the probable holder: check it first)"
        } else {
            ""
        };
        format!(
            "KILL {};  -- {ends} releases its locks: {} queued behind it{probable}",
            r.id,
            r.queued.len()
        )
    }
}

/// A session at the root of a queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Root {
    pub id: u64,
    /// Every session queued behind it, directly or through others.
    pub queued: Vec<u64>,
    /// The longest wait among them, seconds.
    pub longest_wait: f64,
    /// Only inferred as the holder (PROCESSLIST only).
    pub probable: bool,
}

impl LockSession {
    /// Idle inside an open transaction: no statement running.
    pub fn idle_in_transaction(&self) -> bool {
        self.command == "Sleep" && self.transaction.is_some()
    }

    /// "app@10.0.0.5, idle in transaction for 3 min, transaction open 5 min, 12 rows locked"
    /// or "app@host, running for 40 s: SELECT … FROM `t` WHERE id = ?".
    pub fn describe(&self) -> String {
        let mut out = format!(
            "{}@{}",
            display_text(&self.user, 48),
            display_text(&self.host, 64)
        );
        let secs = format_secs(self.seconds.max(0.0) as u64);
        if self.command == "Sleep" {
            if self.transaction.is_some() {
                out.push_str(&format!(", idle in transaction for {secs}"));
            } else {
                out.push_str(&format!(", idle for {secs}"));
            }
        } else {
            out.push_str(&format!(", {} for {secs}", display_text(&self.command, 24)));
        }
        if let Some(t) = &self.transaction {
            out.push_str(&format!(
                ", transaction open {}, {} rows locked, {} modified",
                format_secs(t.age_seconds),
                t.rows_locked,
                t.rows_modified
            ));
        }
        if let Some(st) = &self.statement {
            out.push_str(&format!(": {}", display_text(st, STATEMENT_CHARS)));
        }
        out
    }
}

/// `text` with its string, number and hexadecimal literals replaced by `?`, whitespace
/// collapsed, and at most `max` characters (an ellipsis marks a cut): the shape of a
/// statement without the values a session sent. Comments are dropped.
pub fn mask_statement(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 4));
    // Literals and comments may be long, but a statement shown in `max` characters never
    // needs more than this much of its text.
    let budget = max.saturating_mul(16).max(4096);
    let chars: Vec<char> = text.chars().take(budget).collect();
    let cut_input = text.chars().nth(budget).is_some();
    let mut i = 0;
    let mut space = false;
    let push = |out: &mut String, c: char, space: &mut bool| {
        if *space && !out.is_empty() {
            out.push(' ');
        }
        *space = false;
        out.push(c);
    };
    while i < chars.len() {
        if out.chars().count() > max {
            break;
        }
        let c = chars[i];
        match c {
            '\'' | '"' => {
                // A quoted string: skip to its closing quote (doubled quotes and backslash
                // escapes stay inside).
                let q = c;
                i += 1;
                while i < chars.len() {
                    if chars[i] == '\\' {
                        i += 2;
                        continue;
                    }
                    if chars[i] == q {
                        if chars.get(i + 1) == Some(&q) {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
                push(&mut out, '?', &mut space);
            }
            '`' => {
                // A quoted identifier: kept.
                push(&mut out, '`', &mut space);
                i += 1;
                while i < chars.len() && chars[i] != '`' {
                    out.push(chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    out.push('`');
                }
                i += 1;
            }
            '-' if chars.get(i + 1) == Some(&'-') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                space = true;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                space = true;
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
                space = true;
            }
            c if c.is_ascii_digit() => {
                // A number, unless it ends an identifier (t1, col_2).
                let prev = out.chars().last();
                let in_word =
                    !space && prev.is_some_and(|p| p.is_alphanumeric() || p == '_' || p == '$');
                if in_word {
                    out.push(c);
                    i += 1;
                    continue;
                }
                // 0x1F, 1.5e3, 42
                i += 1;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_')
                {
                    i += 1;
                }
                push(&mut out, '?', &mut space);
            }
            c if c.is_whitespace() => {
                space = true;
                i += 1;
            }
            c if c.is_control() => {
                i += 1;
            }
            c => {
                push(&mut out, c, &mut space);
                i += 1;
            }
        }
    }
    if out.chars().count() > max || i < chars.len() || cut_input {
        let cut: String = out.chars().take(max.saturating_sub(1)).collect();
        return format!("{}…", cut.trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_lose_their_literals_and_keep_their_shape() {
        assert_eq!(
            mask_statement(
                "UPDATE  t1 SET v = 'sec''ret', w=\"x\\\"y\" WHERE id IN (1, 2.5e3, 0x1F) -- c\n AND `col 2` = -3",
                200
            ),
            "UPDATE t1 SET v = ?, w=? WHERE id IN (?, ?, ?) AND `col 2` = -?"
        );
        assert_eq!(
            mask_statement("SELECT /* hint */ * FROM t_2 WHERE a=1", 200),
            "SELECT * FROM t_2 WHERE a=?"
        );
        assert_eq!(
            mask_statement("CREATE USER u IDENTIFIED BY 'hunter2'", 200),
            "CREATE USER u IDENTIFIED BY ?"
        );
        let long = format!("SELECT {} FROM t", "a, ".repeat(200));
        let m = mask_statement(&long, 40);
        assert_eq!(m.chars().count(), 40, "{m}");
        assert!(m.ends_with('…'));
        // Hostile input: unterminated quotes, control characters.
        assert_eq!(mask_statement("SELECT 'abc", 50), "SELECT ?");
        assert_eq!(mask_statement("SELECT\u{0}\u{7} 1", 50), "SELECT ?");
        assert_eq!(mask_statement("/* open", 50), "");
        // A huge literal costs a bounded amount of work, and the cut shows.
        let huge = format!("INSERT INTO t VALUES ('{}')", "x".repeat(10_000_000));
        assert_eq!(mask_statement(&huge, 64), "INSERT INTO t VALUES (?…");
    }

    #[test]
    fn states_name_their_lock() {
        assert_eq!(
            LockKind::of_state("Waiting for table metadata lock"),
            Some(LockKind::Metadata)
        );
        assert_eq!(
            LockKind::of_state("Waiting for global read lock"),
            Some(LockKind::OtherMetadata)
        );
        assert_eq!(
            LockKind::of_state("Waiting for table level lock"),
            Some(LockKind::Table)
        );
        assert_eq!(LockKind::of_state("Sending data"), None);
        assert_eq!(LockKind::of_state("Waiting for next activation"), None);
    }

    fn wait(waiter: u64, blocker: Option<u64>, seconds: f64) -> LockWait {
        LockWait {
            waiter,
            blocker,
            seconds,
            ..Default::default()
        }
    }

    #[test]
    fn roots_are_the_blockers_nobody_blocks() {
        let l = Locks {
            waits: vec![
                wait(2, Some(1), 5.0),
                wait(3, Some(1), 4.0),
                wait(4, Some(3), 2.0),
                wait(6, Some(5), 1.0),
                wait(7, None, 9.0),
            ],
            ..Default::default()
        };
        let r = l.roots();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].id, 1);
        assert_eq!(r[0].queued, vec![2, 3, 4]);
        assert_eq!(r[0].longest_wait, 5.0);
        assert_eq!(r[1].id, 5);
        // A cycle (a deadlock being resolved) has no root and does not loop.
        let c = Locks {
            waits: vec![wait(1, Some(2), 1.0), wait(2, Some(1), 1.0)],
            ..Default::default()
        };
        assert!(c.roots().is_empty());
    }
}
