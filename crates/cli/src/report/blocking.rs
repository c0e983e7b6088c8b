//! The "Blocking" section: who waits for whom, as a tree from each session at the root of a
//! queue, the commands that end it, and the last deadlock.

use std::fmt::Write;

use powerdiag_rules::{
    Deadlock, Gathered, LockKind, LockScan, LockSession, LockWait, Locks, Snapshot, display_text,
    format_secs,
};
use serde::Serialize;

use super::esc;

/// Depth of the tree shown (a chain deeper than this is summarised).
const DEPTH: usize = 4;
/// Waiters shown under one session.
const WAITERS: usize = 10;

/// The section as data: what JSON writes and the text and Markdown forms render.
#[derive(Debug, Serialize)]
pub(crate) struct Blocking {
    /// Why the waits could not be read (the `PROCESS` grant, ...).
    pub(crate) unavailable: Option<String>,
    /// Not read, and why: nothing could wait (the status read said so).
    pub(crate) not_read: Option<String>,
    /// Sessions waiting now, by kind (`row`, `metadata`, `other_metadata`, `table`).
    pub(crate) waiting: Vec<(&'static str, usize)>,
    /// Where the metadata-lock holders came from.
    pub(crate) metadata_source: Option<String>,
    /// One tree per session at the root of a queue, most queued first.
    pub(crate) queues: Vec<Queue>,
    /// Waiting sessions whose blocker is not known.
    pub(crate) unattributed: Vec<Waiter>,
    /// What ends each queue: `KILL` lines to run by hand (powerdiag runs none).
    pub(crate) commands: Vec<String>,
    /// The last deadlock InnoDB detected, or why it is not known.
    pub(crate) last_deadlock: Option<Deadlock>,
    pub(crate) last_deadlock_unavailable: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Queue {
    pub(crate) blocker: Session,
    /// Every session queued behind it, directly or through others.
    pub(crate) queued: usize,
    /// The blocker was inferred from PROCESSLIST alone.
    pub(crate) probable: bool,
    pub(crate) waiters: Vec<Waiter>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Waiter {
    pub(crate) session: Session,
    pub(crate) kind: LockKind,
    pub(crate) wait_seconds: f64,
    pub(crate) object: Option<String>,
    pub(crate) blocker_mode: Option<String>,
    /// Sessions waiting for this one.
    pub(crate) waiters: Vec<Waiter>,
}

/// A session as the section shows it (the snapshot's, or its id alone when it ended).
#[derive(Debug, Serialize)]
pub(crate) struct Session {
    pub(crate) id: u64,
    /// `None`: the session ended between the reads.
    pub(crate) facts: Option<LockSession>,
}

impl Blocking {
    /// Worth a section in text and Markdown: something waits, or a deadlock is known.
    pub(crate) fn shown(&self) -> bool {
        !self.queues.is_empty() || !self.unattributed.is_empty() || self.last_deadlock.is_some()
    }
}

fn session(l: &Locks, id: u64) -> Session {
    Session {
        id,
        facts: l.session(id).cloned(),
    }
}

fn waiter(l: &Locks, w: &LockWait, seen: &mut Vec<u64>, depth: usize) -> Waiter {
    seen.push(w.waiter);
    let waiters = if depth >= DEPTH {
        Vec::new()
    } else {
        let below: Vec<&LockWait> = l
            .waits
            .iter()
            .filter(|x| x.blocker == Some(w.waiter) && !seen.contains(&x.waiter))
            .collect();
        below
            .into_iter()
            .map(|x| waiter(l, x, seen, depth + 1))
            .collect()
    };
    Waiter {
        session: session(l, w.waiter),
        kind: w.kind,
        wait_seconds: w.seconds,
        object: w.object.clone(),
        blocker_mode: w.mode.clone(),
        waiters,
    }
}

/// The section; `None` without MariaDB facts.
pub(crate) fn blocking(s: &Snapshot) -> Option<Blocking> {
    let f = s.mariadb.facts.as_ref()?;
    let (last_deadlock, last_deadlock_unavailable) = match &f.last_deadlock {
        Gathered::Available(d) => (d.clone(), None),
        Gathered::Unavailable(why) => (None, Some(why.clone())),
    };
    let mut b = Blocking {
        unavailable: None,
        not_read: None,
        waiting: Vec::new(),
        metadata_source: None,
        queues: Vec::new(),
        unattributed: Vec::new(),
        commands: Vec::new(),
        last_deadlock,
        last_deadlock_unavailable,
    };
    let l = match &f.locks {
        Gathered::Available(l) => l,
        Gathered::Unavailable(why) => {
            b.unavailable = Some(why.clone());
            return Some(b);
        }
    };
    if let LockScan::Quiet {
        threads_running,
        row_lock_current_waits,
    } = l.scan
    {
        b.not_read = Some(format!(
            "nothing could wait: Threads_running {threads_running}, Innodb_row_lock_current_waits {row_lock_current_waits}"
        ));
    }
    b.waiting = [
        LockKind::Row,
        LockKind::Metadata,
        LockKind::OtherMetadata,
        LockKind::Table,
    ]
    .into_iter()
    .map(|k| (k.label(), l.waiting(k)))
    .collect();
    if !matches!(
        l.metadata_source,
        powerdiag_rules::MetadataSource::NotNeeded
    ) {
        b.metadata_source = Some(l.metadata_source.describe());
    }
    for r in l.roots() {
        let mut seen = vec![r.id];
        let direct: Vec<&LockWait> = l.waits.iter().filter(|w| w.blocker == Some(r.id)).collect();
        let waiters = direct
            .into_iter()
            .filter(|w| !seen.contains(&w.waiter))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|w| waiter(l, w, &mut seen, 1))
            .collect();
        b.commands.push(l.kill_command(&r));
        b.queues.push(Queue {
            blocker: session(l, r.id),
            queued: r.queued.len(),
            probable: r.probable,
            waiters,
        });
    }
    let mut seen = Vec::new();
    b.unattributed = l
        .waits
        .iter()
        .filter(|w| w.blocker.is_none())
        .map(|w| waiter(l, w, &mut seen, DEPTH))
        .collect();
    Some(b)
}

fn describe(s: &Session) -> String {
    match &s.facts {
        Some(f) => format!("connection {} ({})", s.id, f.describe()),
        None => format!("connection {} (session ended)", s.id),
    }
}

fn waiter_line(w: &Waiter) -> String {
    let on = w
        .object
        .as_deref()
        .map(|o| format!(" on {}", display_text(o, 128)))
        .unwrap_or_default();
    let st = w
        .session
        .facts
        .as_ref()
        .and_then(|f| f.statement.as_deref())
        .map(|s| format!(": {}", display_text(s, 120)))
        .unwrap_or_default();
    let who = w
        .session
        .facts
        .as_ref()
        .map(|f| {
            format!(
                " {}@{}",
                display_text(&f.user, 32),
                display_text(&f.host, 48)
            )
        })
        .unwrap_or_default();
    format!(
        "connection {}{who} waits {} for a {} lock{on}{st}",
        w.session.id,
        format_secs(w.wait_seconds.round() as u64),
        w.kind.label().replace('_', " ")
    )
}

fn tree(o: &mut String, waiters: &[Waiter], prefix: &str) {
    let n = waiters.len();
    for (i, w) in waiters.iter().take(WAITERS).enumerate() {
        let last = i + 1 == n.min(WAITERS) && n <= WAITERS;
        let (branch, next) = if last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        let _ = writeln!(o, "{prefix}{branch}{}", esc(&waiter_line(w)));
        tree(o, &w.waiters, &format!("{prefix}{next}"));
    }
    if n > WAITERS {
        let _ = writeln!(o, "{prefix}└─ … and {} more", n - WAITERS);
    }
}

fn deadlock_title(d: &Deadlock) -> String {
    format!(
        "Last deadlock{} ({} since start-up)",
        d.at.as_deref()
            .map(|a| format!(" at {}", display_text(a, 40)))
            .unwrap_or_default(),
        d.deadlocks
    )
}

/// The text form (the caller prints the title).
pub(crate) fn text(b: &Blocking) -> String {
    let mut o = String::new();
    if let Some(src) = &b.metadata_source {
        let _ = writeln!(o, "  metadata-lock holders from {}", esc(src));
    }
    for q in &b.queues {
        let probable = if q.probable { " (probable holder)" } else { "" };
        let _ = writeln!(
            o,
            "  {}{probable} — {} queued",
            esc(&describe(&q.blocker)),
            q.queued
        );
        tree(&mut o, &q.waiters, "  ");
    }
    if !b.unattributed.is_empty() {
        let _ = writeln!(o, "  waiting, blocker not known:");
        tree(&mut o, &b.unattributed, "  ");
    }
    if !b.commands.is_empty() {
        let _ = writeln!(
            o,
            "  To end the queues (run by hand; powerdiag runs nothing):"
        );
        for c in &b.commands {
            let _ = writeln!(o, "    {}", esc(c));
        }
    }
    if let Some(d) = &b.last_deadlock {
        let _ = writeln!(o, "  {}:", esc(&deadlock_title(d)));
        for l in d.lines() {
            let _ = writeln!(o, "    {}", esc(&l));
        }
    }
    o
}

/// The Markdown form, with its heading.
pub(crate) fn markdown(b: &Blocking) -> String {
    let mut o = String::from("## Blocking\n\n");
    if let Some(src) = &b.metadata_source {
        let _ = writeln!(o, "Metadata-lock holders from {}.\n", esc(src));
    }
    let mut body = String::new();
    for q in &b.queues {
        let probable = if q.probable { " (probable holder)" } else { "" };
        let _ = writeln!(
            body,
            "{}{probable} — {} queued",
            esc(&describe(&q.blocker)),
            q.queued
        );
        tree(&mut body, &q.waiters, "");
    }
    if !b.unattributed.is_empty() {
        let _ = writeln!(body, "waiting, blocker not known:");
        tree(&mut body, &b.unattributed, "");
    }
    if !body.is_empty() {
        let fence = super::md_fence(&body);
        let _ = writeln!(o, "{fence}\n{}{fence}\n", body);
    }
    if !b.commands.is_empty() {
        let cmds = b.commands.join("\n");
        let fence = super::md_fence(&cmds);
        let _ = writeln!(
            o,
            "To end the queues (run by hand; powerdiag runs nothing):\n\n{fence}sql\n{cmds}\n{fence}\n"
        );
    }
    if let Some(d) = &b.last_deadlock {
        let lines = d.lines().join("\n");
        let fence = super::md_fence(&lines);
        let _ = writeln!(
            o,
            "{}:\n\n{fence}\n{lines}\n{fence}\n",
            esc(&deadlock_title(d))
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use powerdiag_rules::{LockSession, SessionTransaction, testing::SnapshotBuilder};

    use super::*;

    fn queue() -> Snapshot {
        let session = |id: u64, command: &str, statement: Option<&str>| LockSession {
            id,
            user: "app".into(),
            host: "10.0.0.7".into(),
            command: command.into(),
            seconds: 40.0,
            statement: statement.map(Into::into),
            ..Default::default()
        };
        let mut blocker = session(9, "Sleep", None);
        blocker.transaction = Some(SessionTransaction {
            age_seconds: 45,
            state: "RUNNING".into(),
            rows_locked: 3,
            rows_modified: 1,
        });
        let wait = |waiter: u64, blocker: u64, seconds: f64| LockWait {
            waiter,
            blocker: Some(blocker),
            kind: LockKind::Row,
            seconds,
            object: Some("`shop`.`orders` index PRIMARY".into()),
            mode: Some("X".into()),
            probable: false,
        };
        SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .locks(Locks {
                scan: LockScan::Read,
                sessions: vec![
                    blocker,
                    session(
                        11,
                        "Query",
                        Some("UPDATE `orders` SET `v` = ? WHERE `id` = ?"),
                    ),
                    session(
                        12,
                        "Query",
                        Some("UPDATE `orders` SET `v` = ? WHERE `id` = ?"),
                    ),
                    // A hostile user name: escaped on its way to the terminal.
                    LockSession {
                        user: "ev\u{1b}[31mil".into(),
                        ..session(13, "Query", Some("DELETE FROM `orders`"))
                    },
                ],
                waits: vec![wait(11, 9, 30.0), wait(12, 11, 20.0), wait(13, 9, 10.0)],
                ..Default::default()
            })
            .last_deadlock(None)
            .build()
    }

    #[test]
    fn the_queue_is_a_tree_under_its_blocker_with_the_kill_that_ends_it() {
        let b = blocking(&queue()).unwrap();
        assert!(b.shown());
        assert_eq!(b.queues.len(), 1);
        assert_eq!(b.queues[0].queued, 3);
        let t = text(&b);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("  connection 9 (app@10.0.0.7, idle in transaction for 40 s, transaction open 45 s, 3 rows locked, 1 modified) — 3 queued"),
            "{t}"
        );
        assert!(lines[1].starts_with("  ├─ connection 11 app@10.0.0.7 waits 30 s for a row lock on `shop`.`orders` index PRIMARY: UPDATE"), "{t}");
        assert!(lines[2].starts_with("  │  └─ connection 12 "), "{t}");
        assert!(
            lines[3].starts_with("  └─ connection 13 ev\\u{1b}[31mil@"),
            "{t}"
        );
        assert!(!t.contains('\u{1b}'), "{t}");
        assert!(
            t.contains("    KILL 9;  -- rolls back its open transaction"),
            "{t}"
        );
        let md = markdown(&b);
        assert!(md.starts_with("## Blocking\n\n```\nconnection 9 "), "{md}");
        assert!(md.contains("```sql\nKILL 9;"), "{md}");
        let json = serde_json::to_value(&b).unwrap();
        assert_eq!(json["queues"][0]["blocker"]["id"], 9);
        assert_eq!(
            json["queues"][0]["waiters"][0]["waiters"][0]["session"]["id"],
            12
        );
        assert_eq!(json["waiting"][0], serde_json::json!(["row", 3]));
    }

    #[test]
    fn nothing_waiting_is_no_section_and_unreadable_says_why() {
        let quiet = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .locks(Locks {
                scan: LockScan::Quiet {
                    threads_running: 1,
                    row_lock_current_waits: 0,
                },
                ..Default::default()
            })
            .last_deadlock(None)
            .build();
        let b = blocking(&quiet).unwrap();
        assert!(!b.shown());
        assert!(b.not_read.unwrap().contains("Threads_running 1"));
        let none = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        let b = blocking(&none).unwrap();
        assert_eq!(b.unavailable.as_deref(), Some("not read in this test"));
    }
}
