//! The last deadlock InnoDB detected: the "LATEST DETECTED DEADLOCK" section of
//! `SHOW ENGINE INNODB STATUS` (its third column, `Status`), parsed into a [`Deadlock`].
//!
//! MariaDB 10.6 and later (10.11 and 11.8 print the section identically, captures in
//! `testdata/`) print, per transaction of the cycle, `*** (N) TRANSACTION:`, the
//! transaction's lines, the `MariaDB thread id …` line followed by the statement (any number
//! of lines), `*** WAITING FOR THIS LOCK TO BE GRANTED:` with the lock it waits for, and
//! `*** CONFLICTING WITH:` with the locks of the *next* transaction that block it; then
//! `*** WE ROLL BACK TRANSACTION (N)`. A conflicting lock is therefore filed under the
//! transaction whose `trx id` it carries. The older and MySQL layout (`*** (N) HOLDS THE
//! LOCK(S):`, `*** (N) WAITING FOR THIS LOCK TO BE GRANTED:`, `MySQL thread id`) is read too.
//!
//! Nothing a session wrote is kept: the statement goes through [`mask_statement`], and of each
//! lock only its one-line description (index, table, mode) is kept; the `Record lock, heap no …
//! PHYSICAL RECORD` lines and their hex dumps, which spell out the locked row's values, are
//! skipped. Every string and list is capped, and the parse is linear in the input whatever it
//! holds.

use std::net::IpAddr;

use powerdiag_rules::{Deadlock, DeadlockTransaction, STATEMENT_CHARS, mask_statement};

/// The statement whose third column (`Status`) holds the text [`parse_latest_deadlock`] reads.
pub(crate) const STATUS_SQL: &str = "SHOW ENGINE INNODB STATUS";

/// Transactions kept per deadlock (InnoDB prints the whole cycle, usually two).
const MAX_TRANSACTIONS: usize = 8;
/// Locks kept per transaction.
const MAX_LOCKS: usize = 8;
/// Characters kept of a lock description.
const LOCK_CHARS: usize = 300;
/// Characters kept of the user and of the host.
const NAME_CHARS: usize = 128;
/// Characters kept of the detection time.
const AT_CHARS: usize = 64;
/// Bytes of statement text handed to [`mask_statement`]: it keeps [`STATEMENT_CHARS`]
/// characters of its output, and this bounds its work on a huge statement. A cut inside a
/// literal is safe: an unterminated literal is masked to the end.
const STATEMENT_INPUT_BYTES: usize = 16 * 1024;

const HEADER: &str = "LATEST DETECTED DEADLOCK";

/// Where a lock line read now goes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Locks {
    /// Not in a lock list.
    None,
    /// The lock the current transaction waits for.
    Waits,
    /// Locks the current transaction holds (`HOLDS THE LOCK(S)`).
    Holds,
    /// Locks blocking the current transaction, held by the transaction named by their
    /// `trx id` (`CONFLICTING WITH`).
    Conflicting,
}

#[derive(Debug, Default)]
struct Trx {
    trx_id: Option<u64>,
    /// Statement lines, joined, at most [`STATEMENT_INPUT_BYTES`].
    statement: Option<String>,
    out: DeadlockTransaction,
}

/// The "LATEST DETECTED DEADLOCK" section of `status_text`, `None` when there is none (no
/// deadlock since the server started) or when it holds neither a time nor a transaction.
///
/// `rolled_back` is set only when it names a transaction kept (the first
/// [`MAX_TRANSACTIONS`]); `deadlocks` is left 0 for the caller.
pub(crate) fn parse_latest_deadlock(status_text: &str) -> Option<Deadlock> {
    let lines: Vec<&str> = status_text.lines().collect();
    // The title between two dashed lines: a statement printed elsewhere (the TRANSACTIONS
    // section lists every session's) cannot pass for it by one line.
    let header = (0..lines.len()).find(|&h| {
        lines[h].trim() == HEADER
            && lines.get(h + 1).is_some_and(|l| is_dashes(l))
            && (h == 0 || is_dashes(lines[h - 1]))
    })?;
    let i = header + 2;

    let mut at = None;
    let mut trxs: Vec<Trx> = Vec::new();
    let mut conflicting: Vec<(u64, String)> = Vec::new();
    let mut rolled_back = None;
    let mut too_deep = false;
    // Whether the lines now read belong to a transaction kept (false past the cap).
    let mut in_kept = false;
    let mut in_statement = false;
    let mut locks = Locks::None;
    let mut seen_transactions = 0usize;

    for (n, &line) in lines.iter().enumerate().skip(i) {
        // The next section: a dashed line, a title, a dashed line.
        if is_dashes(line)
            && lines.get(n + 1).is_some_and(|l| is_title(l))
            && lines.get(n + 2).is_some_and(|l| is_dashes(l))
        {
            break;
        }
        if line.trim() == "END OF INNODB MONITOR OUTPUT" {
            break;
        }

        if let Some(marker) = line.strip_prefix("***") {
            in_statement = false;
            locks = Locks::None;
            let marker = marker.trim();
            if let Some(n) = marker.strip_prefix("WE ROLL BACK TRANSACTION") {
                rolled_back = number_in_parens(n);
            } else if marker.ends_with("TRANSACTION:") {
                // "(N) TRANSACTION:", or "TRANSACTION:" after "TOO DEEP OR LONG SEARCH".
                seen_transactions += 1;
                in_kept = trxs.len() < MAX_TRANSACTIONS;
                if in_kept {
                    trxs.push(Trx::default());
                }
            } else if marker.contains("WAITING FOR THIS LOCK TO BE GRANTED") {
                locks = Locks::Waits;
            } else if marker.contains("HOLDS THE LOCK") {
                locks = Locks::Holds;
            } else if marker.starts_with("CONFLICTING WITH") {
                locks = Locks::Conflicting;
            }
            continue;
        }
        if line.starts_with("TOO DEEP OR LONG SEARCH") {
            too_deep = true;
            in_statement = false;
            locks = Locks::None;
            continue;
        }

        if seen_transactions == 0 {
            // Before the first transaction: the time it was detected.
            if at.is_none() {
                at = detection_time(line);
            }
            continue;
        }
        if !in_kept {
            continue;
        }
        let Some(trx) = trxs.last_mut() else {
            continue;
        };

        if locks != Locks::None {
            let Some((trx_id, desc)) = describe_lock(line) else {
                // "Record lock, heap no …", the hex dump, blank lines: never kept.
                continue;
            };
            match locks {
                Locks::Waits => {
                    if trx.out.waits_for.is_none() {
                        trx.out.waits_for = Some(desc);
                    }
                }
                Locks::Holds => push_lock(&mut trx.out.holds, desc),
                Locks::Conflicting => {
                    if let Some(id) = trx_id
                        && conflicting.len() < MAX_TRANSACTIONS * MAX_LOCKS
                    {
                        conflicting.push((id, desc));
                    }
                }
                Locks::None => {}
            }
            continue;
        }

        if in_statement {
            let st = trx.statement.get_or_insert_with(String::new);
            if st.len() < STATEMENT_INPUT_BYTES {
                st.push('\n');
                push_bounded(st, line, STATEMENT_INPUT_BYTES);
            }
            continue;
        }

        if let Some(rest) = line.strip_prefix("TRANSACTION ") {
            if trx.trx_id.is_none() {
                trx.trx_id = leading_number(rest);
            }
        } else if let Some(rest) = line
            .strip_prefix("MariaDB thread id ")
            .or_else(|| line.strip_prefix("MySQL thread id "))
        {
            read_thread_line(rest, &mut trx.out);
            // The statement starts on the next line.
            in_statement = true;
        }
    }

    if at.is_none() && trxs.is_empty() {
        return None;
    }

    // A blocking lock belongs to the transaction with its trx id.
    for (id, desc) in conflicting {
        if let Some(t) = trxs.iter_mut().find(|t| t.trx_id == Some(id)) {
            push_lock(&mut t.out.holds, desc);
        }
    }
    if rolled_back.is_none() && too_deep && !trxs.is_empty() {
        // The search gave up and rolled back the one transaction it printed.
        rolled_back = Some(trxs.len());
    }
    let rolled_back = rolled_back.filter(|n| (1..=trxs.len()).contains(n));

    let transactions = trxs
        .into_iter()
        .map(|t| {
            let mut out = t.out;
            out.statement = t
                .statement
                .map(|s| mask_statement(&s, STATEMENT_CHARS))
                .filter(|s| !s.is_empty());
            out
        })
        .collect();
    Some(Deadlock {
        at,
        transactions,
        rolled_back,
        deadlocks: 0,
    })
}

/// A line of at least three dashes and nothing else.
fn is_dashes(line: &str) -> bool {
    let l = line.trim_end();
    l.len() >= 3 && l.bytes().all(|b| b == b'-')
}

/// A section title of the monitor output: "TRANSACTIONS", "FILE I/O", "BUFFER POOL AND MEMORY".
fn is_title(line: &str) -> bool {
    let l = line.trim_end();
    !l.is_empty()
        && l.len() <= 80
        && l.bytes().any(|b| b.is_ascii_uppercase())
        && l.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b" /_-&().,".contains(&b))
}

/// "2026-11-27 16:40:20 0x7f10100936c0" → "2026-11-27 16:40:20" (the thread handle dropped);
/// older servers print "251127 16:40:20".
fn detection_time(line: &str) -> Option<String> {
    let mut words = line.split_whitespace();
    let date = words.next()?;
    let time = words.next()?;
    let ok = |w: &str, sep: u8| {
        w.bytes().next().is_some_and(|b| b.is_ascii_digit())
            && w.bytes().all(|b| b.is_ascii_digit() || b == sep)
    };
    if !ok(date, b'-') || !ok(time, b':') || !time.contains(':') {
        return None;
    }
    Some(cap(&format!("{date} {time}"), AT_CHARS))
}

/// The number in "(2)" (surrounding text ignored).
fn number_in_parens(s: &str) -> Option<usize> {
    let open = s.find('(')?;
    let rest = &s[open + 1..];
    let close = rest.find(')')?;
    rest[..close].trim().parse().ok()
}

/// The digits a string starts with: "53, ACTIVE 3 sec" → 53.
fn leading_number(s: &str) -> Option<u64> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

/// The thread line after "MariaDB thread id ": "18, OS thread handle 140322220156608, query
/// id 61 127.0.0.1 root Updating": the id, then after the query id the host, the IP address
/// when it differs from the host, the user and the state.
fn read_thread_line(rest: &str, out: &mut DeadlockTransaction) {
    out.thread_id = leading_number(rest);
    let Some(pos) = rest.find("query id ") else {
        return;
    };
    let after = &rest[pos + "query id ".len()..];
    let after = after.trim_start_matches(|c: char| c.is_ascii_digit());
    // Bounded: a huge line costs no more than its first few words.
    let words: Vec<&str> = after.split_whitespace().take(4).collect();
    if words.len() < 2 {
        // Only a state, or nothing: a background thread.
        return;
    }
    let user = if words.len() >= 3 && words[1].parse::<IpAddr>().is_ok() {
        words[2]
    } else {
        words[1]
    };
    out.host = Some(cap(words[0], NAME_CHARS));
    out.user = Some(cap(user, NAME_CHARS));
}

/// A lock line's trx id and description, `None` for any other line.
///
/// "RECORD LOCKS space id 10 page no 3 n bits 320 index PRIMARY of table `lk`.`t` trx id 53
/// lock_mode X locks rec but not gap waiting" → (53, "lock_mode X locks rec but not gap on
/// index PRIMARY of table `lk`.`t`"); "TABLE LOCK table `lk`.`t` trx id 53 lock mode IX" →
/// (53, "lock mode IX on table `lk`.`t`").
fn describe_lock(line: &str) -> Option<(Option<u64>, String)> {
    let line = line.trim();
    let object_start = if line.starts_with("RECORD LOCKS ") {
        line.find(" index ").map(|p| p + 1)
    } else if line.starts_with("TABLE LOCK ") {
        Some("TABLE LOCK ".len())
    } else {
        return None;
    }?;
    let rest = &line[object_start..];
    const TRX: &str = " trx id ";
    let (object, trx_id, mode) = match rest.find(TRX) {
        Some(p) => {
            let after = &rest[p + TRX.len()..];
            let id = leading_number(after);
            let mode = after
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim();
            (&rest[..p], id, mode)
        }
        None => (rest, None, ""),
    };
    let mode = mode.strip_suffix(" waiting").unwrap_or(mode).trim();
    let desc = if mode.is_empty() {
        cap(object.trim(), LOCK_CHARS)
    } else {
        // The mode first: the object (a long table name) is what a cut loses.
        cap(
            &format!("{} on {}", cap(mode, 80), object.trim()),
            LOCK_CHARS,
        )
    };
    Some((trx_id, desc))
}

fn push_lock(list: &mut Vec<String>, desc: String) {
    if list.len() < MAX_LOCKS && !list.contains(&desc) {
        list.push(desc);
    }
}

/// Appends `s` to `out` up to `max` bytes, cutting on a character boundary.
fn push_bounded(out: &mut String, s: &str, max: usize) {
    let room = max.saturating_sub(out.len());
    let mut end = room.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.push_str(&s[..end]);
}

/// At most `max` characters of `s`, control characters replaced by spaces; an ellipsis
/// marks a cut.
fn cap(s: &str, max: usize) -> String {
    let mut chars = s.chars();
    let mut out = String::with_capacity(s.len().min(max * 4));
    for _ in 0..max {
        match chars.next() {
            Some(c) => out.push(if c.is_control() { ' ' } else { c }),
            None => return out,
        }
    }
    if chars.next().is_some() {
        out.pop();
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARIADB_11_8: &str = include_str!("testdata/deadlock-11.8.txt");
    const MARIADB_10_11: &str = include_str!("testdata/deadlock-10.11.txt");

    const WAITS_1: &str = "lock_mode X locks rec but not gap on index PRIMARY of table `lk`.`t`";

    fn all_text(d: &Deadlock) -> Vec<String> {
        let mut v: Vec<String> = d.at.iter().cloned().collect();
        for t in &d.transactions {
            v.extend(t.user.iter().cloned());
            v.extend(t.host.iter().cloned());
            v.extend(t.statement.iter().cloned());
            v.extend(t.holds.iter().cloned());
            v.extend(t.waits_for.iter().cloned());
        }
        v
    }

    fn assert_no_row_data(d: &Deadlock) {
        for s in all_text(d) {
            for bad in ["secret", "hex", "PHYSICAL", "heap no", "asc ", "len "] {
                assert!(!s.contains(bad), "{bad:?} kept in {s:?}");
            }
        }
    }

    /// Both captures: session B (socket, `localhost`) was rolled back, session A came over
    /// TCP (`127.0.0.1`); each wrote a string literal.
    fn check_capture(text: &str, first_thread: u64) {
        let d = parse_latest_deadlock(text).unwrap();
        assert_eq!(d.at.as_deref(), Some("2026-11-27 16:40:20"));
        assert_eq!(d.rolled_back, Some(1));
        assert_eq!(d.deadlocks, 0);
        assert_eq!(d.transactions.len(), 2);
        let (a, b) = (&d.transactions[0], &d.transactions[1]);
        assert_eq!(a.thread_id, Some(first_thread));
        assert_eq!(b.thread_id, Some(first_thread - 1));
        assert_eq!(a.user.as_deref(), Some("root"));
        assert_eq!(a.host.as_deref(), Some("localhost"));
        assert_eq!(b.user.as_deref(), Some("root"));
        assert_eq!(b.host.as_deref(), Some("127.0.0.1"));
        // Three lines, a stripped comment's trailing blank: one line, literals masked.
        assert_eq!(
            a.statement.as_deref(),
            Some("UPDATE lk.t SET name = ? WHERE id = ?")
        );
        assert_eq!(
            b.statement.as_deref(),
            Some("UPDATE lk.t SET name=?, v=? WHERE id=?")
        );
        // Each waits for the row the other holds.
        assert_eq!(a.waits_for.as_deref(), Some(WAITS_1));
        assert_eq!(b.waits_for.as_deref(), Some(WAITS_1));
        assert_eq!(a.holds, vec![WAITS_1.to_owned()]);
        assert_eq!(b.holds, vec![WAITS_1.to_owned()]);
        assert_no_row_data(&d);
        // The capture does hold the values: in the statements and the hex dumps.
        assert!(text.contains("'secret-value-a2'"));
        assert!(text.contains("asc secret-value-a1;;"));
    }

    #[test]
    fn deadlock_mariadb_11_8() {
        check_capture(MARIADB_11_8, 19);
    }

    #[test]
    fn deadlock_mariadb_10_11() {
        check_capture(MARIADB_10_11, 18);
    }

    #[test]
    fn deadlock_absent() {
        assert_eq!(parse_latest_deadlock(""), None);
        let without: String = {
            let start = MARIADB_11_8
                .find("------------------------\nLATEST")
                .unwrap();
            let end = MARIADB_11_8.find("------------\nTRANSACTIONS").unwrap();
            format!("{}{}", &MARIADB_11_8[..start], &MARIADB_11_8[end..])
        };
        assert!(!without.contains(HEADER));
        assert_eq!(parse_latest_deadlock(&without), None);
        // The title alone, say in a statement, is not the section.
        let quoted =
            format!("{without}\nSELECT 1\nLATEST DETECTED DEADLOCK\n*** (1) TRANSACTION:\n");
        assert_eq!(parse_latest_deadlock(&quoted), None);
        // A header with nothing recognisable under it.
        assert_eq!(
            parse_latest_deadlock("LATEST DETECTED DEADLOCK\n-----\n------------\nTRANSACTIONS\n"),
            None
        );
    }

    #[test]
    fn deadlock_truncated() {
        // Cut at every line end and at odd byte offsets: never a panic, never row data.
        let start = MARIADB_11_8.find(HEADER).unwrap();
        for (i, _) in MARIADB_11_8.char_indices().skip(start).step_by(7) {
            if let Some(d) = parse_latest_deadlock(&MARIADB_11_8[..i]) {
                assert_no_row_data(&d);
                assert!(d.transactions.len() <= 2);
            }
        }
        // Cut inside the first statement's literal: still masked.
        let cut = MARIADB_11_8.find("secret-value-b2").unwrap() + 3;
        let d = parse_latest_deadlock(&MARIADB_11_8[..cut]).unwrap();
        assert_eq!(d.transactions.len(), 1);
        assert_eq!(
            d.transactions[0].statement.as_deref(),
            Some("UPDATE lk.t SET name = ?")
        );
        assert_eq!(d.transactions[0].waits_for, None);
        assert_eq!(d.rolled_back, None);
        // Cut after the first transaction's locks: the second is missing, so its conflicting
        // lock (trx id 53) names nobody kept, and "(1)" is not rolled back yet.
        let cut = MARIADB_11_8.find("*** (2) TRANSACTION").unwrap();
        let d = parse_latest_deadlock(&MARIADB_11_8[..cut]).unwrap();
        assert_eq!(d.transactions.len(), 1);
        assert_eq!(d.transactions[0].waits_for.as_deref(), Some(WAITS_1));
        assert!(d.transactions[0].holds.is_empty());
    }

    #[test]
    fn deadlock_junk() {
        // Pseudo-random bytes, made text the way a caller would (lossy), with and without the
        // markers sprinkled in.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut bytes = Vec::new();
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bytes.push((x >> 24) as u8);
        }
        let junk = String::from_utf8_lossy(&bytes).into_owned();
        assert_eq!(parse_latest_deadlock(&junk), None);
        let markers = [
            "LATEST DETECTED DEADLOCK\n",
            "*** (1) TRANSACTION:\n",
            "TRANSACTION 9",
            "MariaDB thread id ",
            "query id ",
            "*** WAITING FOR THIS LOCK TO BE GRANTED:\n",
            "RECORD LOCKS space id 1 index ",
            " trx id ",
            "TABLE LOCK ",
            "*** CONFLICTING WITH:\n",
            "*** WE ROLL BACK TRANSACTION (",
            "\n",
            "'",
        ];
        let mut mixed = String::from("LATEST DETECTED DEADLOCK\n---\n");
        for (i, chunk) in junk.as_bytes().chunks(97).enumerate() {
            mixed.push_str(&String::from_utf8_lossy(chunk));
            mixed.push('\n');
            mixed.push_str(markers[i % markers.len()]);
        }
        let d = parse_latest_deadlock(&mixed).unwrap();
        assert_eq!(d.transactions.len(), MAX_TRANSACTIONS);
        assert!(d.transactions.iter().any(|t| t.waits_for.is_some()));
        for t in &d.transactions {
            assert!(t.holds.len() <= MAX_LOCKS);
            for s in t.holds.iter().chain(&t.waits_for) {
                assert!(s.chars().count() <= LOCK_CHARS);
                assert!(!s.chars().any(char::is_control));
            }
            for s in t.user.iter().chain(&t.host) {
                assert!(s.chars().count() <= NAME_CHARS);
            }
        }
        if let Some(n) = d.rolled_back {
            assert!((1..=d.transactions.len()).contains(&n));
        }
    }

    #[test]
    fn deadlock_huge_lines() {
        let big = "x".repeat(5_000_000);
        let text = format!(
            "LATEST DETECTED DEADLOCK\n------------------------\n2026-01-01 00:00:00 0x1{big}\n\
             *** (1) TRANSACTION:\nTRANSACTION 7, ACTIVE 1 sec\n\
             MariaDB thread id 3, OS thread handle 1, query id 2 h{big} u{big} Updating\n\
             UPDATE t SET a='{big}', b=1 WHERE c='{big}'\n\
             *** WAITING FOR THIS LOCK TO BE GRANTED:\n\
             RECORD LOCKS space id 1 page no 2 n bits 8 index `{big}` of table `d`.`t` trx id 7 \
             lock_mode X{big}\n\
             Record lock, heap no 2 PHYSICAL RECORD: n_fields 1; {big}\n\
             *** WE ROLL BACK TRANSACTION (1)\n"
        );
        let started = std::time::Instant::now();
        let d = parse_latest_deadlock(&text).unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(d.at.as_deref(), Some("2026-01-01 00:00:00"));
        let t = &d.transactions[0];
        assert_eq!(t.thread_id, Some(3));
        assert!(t.host.as_ref().unwrap().chars().count() <= NAME_CHARS);
        assert!(t.user.as_ref().unwrap().chars().count() <= NAME_CHARS);
        let st = t.statement.as_deref().unwrap();
        assert!(st.starts_with("UPDATE t SET a=?"), "{st}");
        assert!(st.chars().count() <= STATEMENT_CHARS + 1);
        assert!(!st.contains("xxx"));
        let w = t.waits_for.as_deref().unwrap();
        assert!(w.starts_with("lock_mode Xxx"), "{w}");
        assert!(w.chars().count() <= LOCK_CHARS);
        assert_eq!(d.rolled_back, Some(1));
    }

    /// The older (MariaDB ≤ 10.5, MySQL) layout, a table lock, and the caps.
    #[test]
    fn deadlock_older_layout_and_caps() {
        let mut text = String::from(
            "LATEST DETECTED DEADLOCK\n------------------------\n\
             211127 16:40:20\n",
        );
        for n in 1..=10u64 {
            text.push_str(&format!(
                "*** ({n}) TRANSACTION:\nTRANSACTION {id}, ACTIVE 1 sec\n\
                 MySQL thread id {n}, OS thread handle 1, query id 5 db.example 10.0.0.{n} app updating\n\
                 delete from t where k = 'v{n}'\n\n\
                 *** ({n}) HOLDS THE LOCK(S):\n",
                id = 100 + n
            ));
            for l in 0..12 {
                text.push_str(&format!(
                    "RECORD LOCKS space id 1 page no {l} n bits 8 index k{l} of table `d`.`t` \
                     trx id {id} lock_mode X\n\
                     Record lock, heap no 2 PHYSICAL RECORD: n_fields 1; compact format\n \
                     0: len 2; hex 7631; asc v1;;\n\n",
                    id = 100 + n
                ));
            }
            text.push_str(&format!(
                "*** ({n}) WAITING FOR THIS LOCK TO BE GRANTED:\n\
                 TABLE LOCK table `d`.`t` trx id {id} lock mode IS waiting\n",
                id = 100 + n
            ));
        }
        text.push_str(
            "*** WE ROLL BACK TRANSACTION (9)\n------------\nTRANSACTIONS\n------------\n\
             MySQL thread id 99, OS thread handle 1, query id 5 x y z\nnot a statement\n",
        );
        let d = parse_latest_deadlock(&text).unwrap();
        assert_eq!(d.at.as_deref(), Some("211127 16:40:20"));
        assert_eq!(d.transactions.len(), MAX_TRANSACTIONS);
        // The ninth was not kept.
        assert_eq!(d.rolled_back, None);
        let t = &d.transactions[1];
        assert_eq!(t.thread_id, Some(2));
        assert_eq!(t.host.as_deref(), Some("db.example"));
        assert_eq!(t.user.as_deref(), Some("app"));
        assert_eq!(t.statement.as_deref(), Some("delete from t where k = ?"));
        assert_eq!(t.holds.len(), MAX_LOCKS);
        assert_eq!(
            t.holds[0],
            "lock_mode X on index k0 of table `d`.`t`".to_owned()
        );
        assert_eq!(
            t.waits_for.as_deref(),
            Some("lock mode IS on table `d`.`t`")
        );
        for t in &d.transactions {
            assert_ne!(t.thread_id, Some(99));
        }
        assert_no_row_data(&d);
    }

    #[test]
    fn deadlock_helpers() {
        assert_eq!(cap("abcdef", 4), "abc…");
        assert_eq!(cap("abcd", 4), "abcd");
        assert_eq!(cap("a\u{0}b", 4), "a b");
        assert_eq!(number_in_parens(" (2)"), Some(2));
        assert_eq!(number_in_parens(" (x)"), None);
        assert_eq!(detection_time("0x7f10 2026"), None);
        assert_eq!(
            detection_time("2026-11-27 16:40:20"),
            Some("2026-11-27 16:40:20".into())
        );
        let mut s = String::from("ab");
        push_bounded(&mut s, "cé", 4);
        assert_eq!(s, "abc");
        let mut t = DeadlockTransaction::default();
        read_thread_line("5, OS thread handle 1, query id 9 Waiting", &mut t);
        assert_eq!((t.thread_id, t.user, t.host), (Some(5), None, None));
        assert_eq!(
            describe_lock("RECORD LOCKS space id 1 page no 2 n bits 8"),
            None
        );
        assert_eq!(
            describe_lock("Record lock, heap no 2 PHYSICAL RECORD"),
            None
        );
    }
}
