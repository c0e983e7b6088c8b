//! The last deadlock from `SHOW ENGINE INNODB STATUS` (placeholder until the parser lands).

use powerdiag_rules::Deadlock;

pub(crate) const STATUS_SQL: &str = "SHOW ENGINE INNODB STATUS";

pub(crate) fn parse_latest_deadlock(_status_text: &str) -> Option<Deadlock> {
    None
}
