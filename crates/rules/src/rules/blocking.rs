//! What the lock rules (PD217–PD220) share: the queue behind a blocker in words, and the
//! `KILL` that ends it (text for a human to run; powerdiag never runs it).

use crate::{Locks, Root, Verdict, display_text, format_secs};

/// Roots and waiters shown per finding.
const ROOTS_SHOWN: usize = 3;
const WAITERS_SHOWN: usize = 5;

/// The lock waits, or a verdict: `insufficient_data` when they could not be read.
pub(crate) fn locks(s: &crate::Snapshot) -> Result<&Locks, Verdict> {
    let db = s.db()?;
    db.locks().map_err(|mut v| {
        if !v.summary.contains("GRANT") && v.summary.contains("denied") {
            v.summary
                .push_str(" (GRANT PROCESS ON *.* to the monitoring user)");
        }
        v
    })
}

/// "3 sessions wait for connection 9 (app@host, idle in transaction for 40 s, …)".
pub(crate) fn root_line(l: &Locks, r: &Root) -> String {
    let probable = if r.probable {
        ", probably the holder,"
    } else {
        ","
    };
    format!(
        "{} {} for {}{probable} the longest for {}",
        r.queued.len(),
        if r.queued.len() == 1 {
            "session waits"
        } else {
            "sessions wait"
        },
        l.describe_session(r.id),
        format_secs(r.longest_wait.round() as u64)
    )
}

/// The chain as lines: each root, then the sessions waiting directly for it.
pub(crate) fn chain_lines(l: &Locks, roots: &[Root]) -> Vec<String> {
    let mut out = Vec::new();
    for r in roots.iter().take(ROOTS_SHOWN) {
        out.push(root_line(l, r));
        let direct: Vec<_> = l.waits.iter().filter(|w| w.blocker == Some(r.id)).collect();
        for w in direct.iter().take(WAITERS_SHOWN) {
            let on = w
                .object
                .as_deref()
                .map(|o| format!(" on {}", display_text(o, 128)))
                .unwrap_or_default();
            let what = l
                .session(w.waiter)
                .and_then(|s| s.statement.as_deref())
                .map(|st| format!(": {}", display_text(st, 160)))
                .unwrap_or_default();
            let behind = l
                .waits
                .iter()
                .filter(|x| x.blocker == Some(w.waiter))
                .count();
            let behind = if behind > 0 {
                format!(" ({behind} more queued behind it)")
            } else {
                String::new()
            };
            out.push(format!(
                "  ← connection {} has waited {} for a {} lock{on}{what}{behind}",
                w.waiter,
                format_secs(w.seconds.round() as u64),
                w.kind.label().replace('_', " ")
            ));
        }
        if direct.len() > WAITERS_SHOWN {
            out.push(format!(
                "  ← and {} more sessions",
                direct.len() - WAITERS_SHOWN
            ));
        }
    }
    if roots.len() > ROOTS_SHOWN {
        out.push(format!("and {} more blockers", roots.len() - ROOTS_SHOWN));
    }
    out
}

/// `KILL id;` with what it ends, for the session at the root of a queue.
pub(crate) fn kill_line(l: &Locks, r: &Root) -> String {
    l.kill_command(r)
}
