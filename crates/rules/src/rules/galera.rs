//! What the Galera rules (PD225–PD227) share: whether the server is a Galera node, and a
//! status gauge's readings over the agent's recent windows.

use crate::{MariadbFacts, StatusVar, Var, Verdict};

/// `Ok` on a Galera node (`wsrep_on = ON`), else the `not_applicable` verdict.
pub(crate) fn node(db: &MariadbFacts) -> Result<(), Verdict> {
    if db.var_bool(Var::WsrepOn)? {
        Ok(())
    } else {
        Err(Verdict::not_applicable(
            "not a Galera node (wsrep_on = OFF)",
        ))
    }
}

/// A gauge's readings: `(seconds before the last read, value)`, the last read first, then
/// each window's start up to `max_age` seconds back (the agent's samples; doctor's window
/// start).
pub(crate) fn readings(db: &MariadbFacts, v: StatusVar, max_age: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    if let Ok(now) = db.status_f64(v) {
        out.push((0.0, now));
    }
    if let Ok(windows) = db.windows() {
        for c in windows.iter().filter(|c| c.seconds() <= max_age) {
            if let Some(x) = c.start_f64(v) {
                out.push((c.seconds(), x));
            }
        }
    }
    out
}
