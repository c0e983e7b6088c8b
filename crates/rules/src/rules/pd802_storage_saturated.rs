use crate::{Limits, Rule, Snapshot, Threshold, Unit, Verdict, declare_rule, os::pct};

declare_rule! {
    /// ### What it does
    /// Checks the block device under each of the server's filesystems (`datadir`, `tmpdir`,
    /// the InnoDB log directory) over the sample window: busy more than {max_busy} of the
    /// window (`/proc/diskstats` time doing I/O) **and** more than {max_in_flight} requests in
    /// flight on average (weighted I/O time over the window) fails. *Heuristic*: a busy share
    /// alone means little on SSDs and arrays that serve many requests at once, so both must
    /// hold. Without a window, or on a filesystem without a block device (tmpfs), the verdict
    /// is `insufficient_data` naming why.
    ///
    /// ### Why is this bad?
    /// When the device is saturated every InnoDB page read, redo write and temporary-table
    /// spill queues behind the others: latency grows with the queue while throughput stays
    /// flat, so the same database is slower on this box for reasons no server variable shows.
    /// The node-mixin alerts when the queue stays above 10 for 30 minutes; a one-second window
    /// cannot wait that long, so powerdiag uses a lower queue and asks for both conditions.
    ///
    /// ### Remediation
    /// Find what fills the queue (`iostat -x 1`, `pidstat -d 1`): reads missing the buffer pool
    /// (PD205), spills to disk (PD208, PD704), or flushing. Set `innodb_io_capacity` to what the
    /// device sustains (`SET GLOBAL innodb_io_capacity = N`), give InnoDB more memory, or move
    /// the datadir to faster storage.
    pub struct StorageSaturated {
        code: "PD802",
        name: "storage-saturated",
        severity: Warning,
        scope: Host,
        summary: "the device under the server's data is saturated",
        fails_when: "the device under the server's data was busy > 90% of the window with > 4 requests in flight on average *(heuristic)*",
        severity_why: "warning: a saturated device is measured now, but not the latency it adds to queries",
        thresholds: [MAX_BUSY, MAX_IN_FLIGHT],
    }
}

const MAX_BUSY: Threshold = Threshold {
    key: "max_busy",
    default: 0.90,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "share of the window the device was busy (heuristic)",
};
const MAX_IN_FLIGHT: Threshold = Threshold {
    key: "max_in_flight",
    default: 4.0,
    min: 0.0,
    max: 1e6,
    unit: Unit::Number,
    doc: "average requests in flight over the window (heuristic)",
};

impl Rule for StorageSaturated {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let filesystems = s.storage()?;
        let mut evidence = Vec::new();
        let mut saturated = Vec::new();
        // (reason, the roles it applies to): one reason said once.
        let mut unread: Vec<(String, Vec<String>)> = Vec::new();
        for f in filesystems {
            let (Some(busy), Some(queue)) = (f.busy_share, f.avg_in_flight) else {
                let why = f.io_unread.as_deref().unwrap_or("no device statistics");
                match unread.iter_mut().find(|(w, _)| w == why) {
                    Some((_, roles)) => roles.extend(f.roles.iter().cloned()),
                    None => unread.push((why.to_owned(), f.roles.clone())),
                }
                continue;
            };
            let device = f.device.as_deref().unwrap_or("?");
            evidence.push(format!(
                "{} on {device}: busy {}, {queue:.1} requests in flight ({})",
                f.roles.join(", "),
                pct(busy),
                f.io_basis.as_deref().unwrap_or("?")
            ));
            if busy > limits.get(&MAX_BUSY) && queue > limits.get(&MAX_IN_FLIGHT) {
                saturated.push(format!(
                    "{device} (under {}) was busy {} of the window with {queue:.1} requests in flight",
                    f.roles.join(", "),
                    pct(busy)
                ));
            }
        }
        let unread: Vec<String> = unread
            .into_iter()
            .map(|(why, roles)| format!("{}: {why}", roles.join(", ")))
            .collect();
        if saturated.is_empty() && evidence.is_empty() {
            return Err(Verdict::insufficient(if unread.is_empty() {
                "no filesystem of the server was read".to_owned()
            } else {
                unread.join("; ")
            }));
        }
        let mut v = if saturated.is_empty() {
            Verdict::pass("no device under the server's data was saturated during the window")
        } else {
            Verdict::fail(saturated.join("; "))
        };
        for e in evidence
            .into_iter()
            .chain(unread.into_iter().map(|u| format!("not measured: {u}")))
        {
            v = v.with_evidence(e);
        }
        Ok(v)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{Gathered, Status, testing::*};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::linux_host_pitfalls()
    }

    fn with(busy: Option<f64>, queue: Option<f64>) -> Verdict {
        let s = SnapshotBuilder::new()
            .os(|o| {
                if let Gathered::Available(fs) = &mut o.storage {
                    fs[0].busy_share = busy;
                    fs[0].avg_in_flight = queue;
                    if busy.is_none() {
                        fs[0].io_unread = Some("no sample window (--sample-window 0)".into());
                    }
                }
            })
            .build();
        verdict(&StorageSaturated, &s)
    }

    #[test]
    fn both_busy_and_queued_fail() {
        assert_eq!(with(Some(0.97), Some(12.0)).status, Status::Fail);
        // Busy alone (a deep-queue device serving one request at a time) is not saturation.
        assert_eq!(with(Some(0.97), Some(1.0)).status, Status::Pass);
        assert_eq!(with(Some(0.2), Some(9.0)).status, Status::Pass);
    }

    #[test]
    fn without_a_window_nothing_is_judged() {
        let v = with(None, None);
        assert_eq!(v.status, Status::InsufficientData);
        assert!(v.summary.contains("--sample-window 0"), "{}", v.summary);
    }
}
