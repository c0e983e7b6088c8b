//! Any bytes given to the snapshot reader, and any snapshot it accepts given to the rules and
//! to diff: none of them may panic, hang or exhaust memory.
//!
//! cargo +nightly fuzz run read_snapshot corpus/read_snapshot ../../../examples -- -max_total_time=60
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(snapshot) = powerdiag_rules::read_snapshot(text) {
        let report = powerdiag_rules::evaluate(&snapshot);
        assert_eq!(report.checks.len(), powerdiag_rules::RULES.len());
        let _ = powerdiag_rules::diff(&snapshot, &snapshot);
    }
});
