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
