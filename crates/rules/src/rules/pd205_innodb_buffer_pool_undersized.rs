use crate::{
    Limits, Rule, Snapshot, StatusVar, Threshold, Unit, Var, Verdict,
    counters::{Evidence, MIN_UPTIME},
    stats::Estimate,
    declare_rule, format_bytes,
    os::pct,
    value::my_cnf_size,
};

use super::{
    fix::{restart_with, set_global},
    memory::memory_model,
    memory::MAX_WORST_CASE,
};

declare_rule! {
    /// ### What it does
    /// Compares the InnoDB data and indexes (`mysql.innodb_table_stats`: pages × page size, one
    /// statement whatever the number of tables) with `innodb_buffer_pool_size`, and when they
    /// do not fit, measures how often reads miss the pool: `Innodb_buffer_pool_reads` (pages
    /// read from disk) over `Innodb_buffer_pool_read_requests`. Fails when the data is larger
    /// than the pool **and** more than {max_miss_ratio} of page requests miss it.
    ///
    /// The miss ratio is measured over the shortest recent window whose 95% interval lies on
    /// one side of the limit (35% ± 1.1% of 7,705 requests decides; 2 of 150 does not): the
    /// agent's windows from its last sample up to `[sample] max_status_window`, doctor's
    /// sample window. Doctor alone then falls back to the counters since start-up of a server
    /// up at least {min_uptime} s, and says so; otherwise `insufficient_data`. MySQLTuner flags a pool smaller than the data on its own and a
    /// read efficiency below 90% since start-up; powerdiag departs on both: data larger than the
    /// pool is normal when the hot set fits (then reads hit), and 10% misses is already a disk
    /// read for every tenth page touched. The 1% limit is a heuristic.
    ///
    /// The data size comes from InnoDB's persistent statistics: tables without them
    /// (`STATS_PERSISTENT=0`, temporary tables) and the system tablespace are not counted, and
    /// a table's size is recalculated only after about 10% of its rows changed.
    ///
    /// ### Why is this bad?
    /// A page that is not in the buffer pool is a synchronous disk read in the middle of the
    /// query (a random read: ~0.1 ms on NVMe, 5–10 ms on spinning disks), against ~0.1 µs for a
    /// hit. With 1% misses and a thousand page touches per query, each query waits for ten disk
    /// reads. MariaDB's default pool, 128 MiB, is itself the pitfall on any server with more
    /// data than that: it is sized for a laptop, not a database host.
    ///
    /// ### Remediation
    /// Grow the pool towards the data size, within RAM (the finding sizes it with PD503's
    /// memory model, so the worst case stays under its limit):
    /// `SET GLOBAL innodb_buffer_pool_size = N;` resizes it online (in the background; the
    /// `Innodb_buffer_pool_resize_status` status says when it is done) up to
    /// `innodb_buffer_pool_size_max`; persist it as `innodb_buffer_pool_size = N` under
    /// `[mariadbd]`. Where RAM is short, make the hot set smaller instead (indexes that avoid
    /// scans, PD701/PD703; archive cold rows).
    pub struct InnodbBufferPoolUndersized {
        code: "PD205",
        name: "innodb-buffer-pool-undersized",
        severity: Warning,
        scope: Database,
        summary: "the InnoDB buffer pool is smaller than the data and reads miss it",
        fails_when: "InnoDB data + indexes (`mysql.innodb_table_stats`) exceed `innodb_buffer_pool_size` **and** > 1% of page requests miss the pool over the window *(heuristic)*",
        severity_why: "warning: page reads missing the pool are measured now, but not what they cost the queries",
        thresholds: [MAX_MISS_RATIO, MIN_UPTIME],
    }
}

const MAX_MISS_RATIO: Threshold = Threshold {
    key: "max_miss_ratio",
    default: 0.01,
    min: 0.0,
    max: 1.0,
    unit: Unit::Ratio,
    doc: "Innodb_buffer_pool_reads / Innodb_buffer_pool_read_requests (heuristic; MySQLTuner 2.9.1: requests / (requests + reads) < 90%, i.e. reads / requests > 11.1%, mysqltuner.pl 7517–7523, 11991–11993)",
};

impl Rule for InnodbBufferPoolUndersized {
    fn check(&self, s: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let pool = db.var_u64(Var::InnodbBufferPoolSize)?;
        let size = db.innodb_size()?;
        let data = size.total_bytes();
        let size_line = if size.from_files {
            format!(
                "InnoDB tablespace files {} in {} files (the *.ibd files under the data directory: data and indexes with their free pages, an upper bound; doctor above --dictionary-max-tables reads them instead of summing mysql.innodb_table_stats); innodb_buffer_pool_size {}",
                format_bytes(data),
                size.tables,
                format_bytes(pool)
            )
        } else {
            format!(
                "InnoDB data {} + indexes {} = {} in {} tables (mysql.innodb_table_stats{}); innodb_buffer_pool_size {}",
                format_bytes(size.data_bytes),
                format_bytes(size.index_bytes),
                format_bytes(data),
                size.tables,
                size.oldest_stats_age_seconds
                    .map(|a| format!(", oldest statistics {} old", crate::format_secs(a)))
                    .unwrap_or_default(),
                format_bytes(pool)
            )
        };
        if data <= pool {
            return Ok(Verdict::pass(format!(
                "the InnoDB data ({}) fits in the buffer pool ({})",
                format_bytes(data),
                format_bytes(pool)
            ))
            .with_evidence(size_line));
        }
        let max_miss = limits.get(&MAX_MISS_RATIO);
        let measure = |c: &crate::Counts<'_>| -> Result<Estimate, Verdict> {
            Ok(Estimate::share(
                c.get(StatusVar::InnodbBufferPoolReads)?,
                c.get(StatusVar::InnodbBufferPoolReadRequests)?,
            ))
        };
        let c = s
            .judge(limits.count(&MIN_UPTIME), |c| {
                Ok(Evidence::of(
                    &measure(c)?,
                    max_miss,
                    "page requests missed the pool",
                ))
            })
            .map_err(|v| v.with_evidence(size_line.clone()))?;
        let miss = measure(&c)?.value;
        let evidence = vec![size_line, c.describe()];
        let mut v = if miss > max_miss {
            Verdict::fail(format!(
                "the buffer pool ({}) holds {:.0}% of the InnoDB data ({}) and {} of page requests miss it (limit {})",
                format_bytes(pool),
                pool as f64 * 100.0 / data as f64,
                format_bytes(data),
                pct(miss),
                pct(max_miss)
            ))
            .with_remediation(remedy(s, pool, data))
        } else {
            Verdict::pass(format!(
                "the data ({}) is larger than the buffer pool ({}) but its hot part fits: {} of page requests miss",
                format_bytes(data),
                format_bytes(pool),
                pct(miss)
            ))
        };
        v.evidence = evidence;
        Ok(c.stamp(v))
    }
}

/// The pool that holds the data with 10% headroom, limited by what RAM leaves (PD503).
fn remedy(s: &Snapshot, pool: u64, data: u64) -> String {
    let want = data.saturating_add(data / 10);
    let from_files = s
        .db()
        .ok()
        .and_then(|db| db.innodb_size().ok())
        .is_some_and(|z| z.from_files);
    let the_data = if from_files {
        "the tablespace files (an upper bound of the data; doctor under its --dictionary-max-tables bound, or the agent, sums the statistics instead)"
    } else {
        "the data"
    };
    let (target, note) = match memory_model(s) {
        Ok(m) => {
            let room = m.room(MAX_WORST_CASE.default);
            let fit = pool.saturating_add(room);
            if fit <= pool {
                return format!(
                    "No RAM to grow the pool into: {}. Add RAM, or free it first (PD503: per-connection buffers, max_connections), or make the hot set smaller (PD701/PD703).",
                    m.summary()
                );
            }
            if want <= fit {
                (want, format!("{the_data} + 10%"))
            } else {
                (
                    fit,
                    format!(
                        "as much as RAM allows ({the_data} + 10% would be {}, more than the {} left under PD503's limit)",
                        format_bytes(want),
                        format_bytes(room)
                    ),
                )
            }
        }
        Err(_) => (
            want,
            format!("{the_data} + 10%; check it against RAM (PD503 could not size it)"),
        ),
    };
    // A whole number of 128 MiB (InnoDB resizes in chunks; 11.x in 1 MiB units): round down.
    let target = (target / (128 << 20)).max(1) * (128 << 20);
    let cnf = my_cnf_size(target);
    let items = [("innodb_buffer_pool_size", target.to_string(), cnf.clone())];
    let max = s
        .db()
        .ok()
        .and_then(|db| db.var_u64(Var::InnodbBufferPoolSizeMax).ok());
    match max {
        Some(max) if target > max => format!(
            "{} ({note}); innodb_buffer_pool_size_max ({}) is below it, so raise both: {}",
            format_bytes(target),
            format_bytes(max),
            restart_with(&[
                ("innodb_buffer_pool_size_max", String::new(), cnf.clone()),
                ("innodb_buffer_pool_size", String::new(), cnf),
            ])
        ),
        _ => format!(
            "{}\n{} is {note}; the resize runs in the background (SHOW STATUS LIKE 'Innodb_buffer_pool_resize_status').",
            set_global(&items),
            format_bytes(target)
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Status,
        testing::{SnapshotBuilder, verdict},
    };

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::everyday_pitfalls()
    }

    fn busy(reads: &str) -> SnapshotBuilder {
        SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .innodb_size(900 << 20, 100 << 20)
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::InnodbBufferPoolReadRequests, "200000")
            .status(StatusVar::InnodbBufferPoolReads, reads)
            .window(
                5.0,
                &[
                    (StatusVar::InnodbBufferPoolReadRequests, "100000"),
                    (StatusVar::InnodbBufferPoolReads, "0"),
                ],
            )
    }

    #[test]
    fn misses_over_the_window_fail_with_a_pool_sized_to_ram() {
        let v = verdict(&InnodbBufferPoolUndersized, &busy("5000").build());
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.summary.contains("5.0% of page requests"), "{v:?}");
        let fix = v.remediation.unwrap();
        // 1000 MiB + 10% = 1100 MiB, rounded down to 1024 MiB.
        assert!(
            fix.starts_with("SET GLOBAL innodb_buffer_pool_size = 1073741824;"),
            "{fix}"
        );
        assert!(fix.contains("innodb_buffer_pool_size = 1G"), "{fix}");
    }

    #[test]
    fn a_pool_in_a_small_host_is_limited_by_ram() {
        let s = busy("5000")
            .host(|h| h.memory_total_bytes = Some(5 << 30))
            .innodb_size(8 << 30, 0)
            .build();
        let fix = verdict(&InnodbBufferPoolUndersized, &s)
            .remediation
            .unwrap();
        assert!(fix.contains("as much as RAM allows"), "{fix}");
    }

    #[test]
    fn sizes_from_the_files_say_they_are_an_upper_bound() {
        let mut s = busy("5000").build();
        if let crate::Gathered::Available(size) = &mut s.mariadb.facts.as_mut().unwrap().innodb_size {
            size.from_files = true;
            size.index_bytes = 0;
            size.data_bytes = 1 << 30;
        }
        let v = verdict(&InnodbBufferPoolUndersized, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(
            v.evidence[0].starts_with("InnoDB tablespace files 1 GiB in 10 files (the *.ibd files under the data directory: data and indexes with their free pages, an upper bound"),
            "{v:?}"
        );
        assert!(v.remediation.unwrap().contains("1 GiB is the tablespace files (an upper bound of the data"));
    }

    #[test]
    fn hits_pass_and_fitting_data_passes() {
        assert_eq!(
            verdict(&InnodbBufferPoolUndersized, &busy("50").build()).status,
            Status::Pass
        );
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .innodb_size(10 << 20, 1 << 20)
            .build();
        assert_eq!(
            verdict(&InnodbBufferPoolUndersized, &s).status,
            Status::Pass
        );
    }

    #[test]
    fn a_quiet_window_on_a_young_server_is_insufficient() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .innodb_size(900 << 20, 100 << 20)
            .status(StatusVar::Uptime, "600")
            .status(StatusVar::InnodbBufferPoolReadRequests, "200000")
            .status(StatusVar::InnodbBufferPoolReads, "100000")
            .window(1.0, &[(StatusVar::InnodbBufferPoolReadRequests, "199990")])
            .build();
        let v = verdict(&InnodbBufferPoolUndersized, &s);
        assert_eq!(v.status, Status::InsufficientData, "{v:?}");
        assert!(
            v.summary.contains("0 of 10 page requests missed the pool")
                && v.summary.contains("includes the limit 1.0%"),
            "{v:?}"
        );
        let s = SnapshotBuilder::new().mariadb("11.8.6-MariaDB").build();
        assert!(
            verdict(&InnodbBufferPoolUndersized, &s)
                .summary
                .contains("InnoDB data size unavailable")
        );
    }

    #[test]
    fn since_start_up_on_an_old_server_says_so() {
        let s = SnapshotBuilder::new()
            .mariadb("11.8.6-MariaDB")
            .innodb_size(900 << 20, 100 << 20)
            .status(StatusVar::Uptime, "864000")
            .status(StatusVar::InnodbBufferPoolReadRequests, "2000000")
            .status(StatusVar::InnodbBufferPoolReads, "100000")
            .build();
        let v = verdict(&InnodbBufferPoolUndersized, &s);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.evidence[1].contains("counters since start-up"), "{v:?}");
    }
}
