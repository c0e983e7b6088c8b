use crate::{Limits, Rule, Snapshot, Var, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// Reports when `performance_schema` is off, which is MariaDB's default.
    ///
    /// ### Why is this bad?
    /// Without it, powerdiag (and anyone) cannot see which statements take the server's time:
    /// the statement checks (PD701 statement-no-index, PD702 statement-n-plus-one, PD703
    /// statement-rows-examined-high, PD704 statement-temp-disk-tables) and the "Top
    /// statements" profile need its digest table, and per-statement latency is not available
    /// to monitoring. In the ORM field
    /// report, a page ran 177 queries where one JOIN sufficed, and a listing query became about
    /// 350× faster with covering indexes: problems found from per-statement counts. The
    /// instrumentation costs a few percent of CPU in the default configuration.
    ///
    /// ### Remediation
    /// ```ini
    /// [mariadbd]
    /// performance_schema = ON
    /// ```
    ///
    /// The variable is not dynamic: enabling it needs a restart. The defaults (statement digests
    /// on, stage and wait history off) are enough for powerdiag; grant the monitoring user
    /// `SELECT ON performance_schema.*`. If the `statements_digest` consumer was turned off,
    /// turn it back on (no restart):
    ///
    /// ```sql
    /// UPDATE performance_schema.setup_consumers SET ENABLED = 'YES'
    ///   WHERE NAME IN ('global_instrumentation', 'statements_digest');
    /// ```
    pub struct PerformanceSchemaOff {
        code: "PD204",
        name: "performance-schema-off",
        severity: Info,
        scope: Database,
        summary: "performance_schema is off, so statement-level checks cannot run",
        fails_when: "`performance_schema=OFF` (statement checks need it; enabling needs a restart)",
        severity_why: "info: nothing is slower; it is configuration that hides the statement checks",
    }
}

impl Rule for PerformanceSchemaOff {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let on = s.db()?.var_bool(Var::PerformanceSchema)?;
        let evidence = format!("performance_schema = {}", if on { "ON" } else { "OFF" });
        Ok(if on {
            Verdict::pass("performance_schema is on").with_evidence(evidence)
        } else {
            Verdict::fail(
                "performance_schema is OFF: the statement checks (PD701-PD704) and the top-statements profile are unavailable; enabling it needs a restart",
            )
            .with_evidence(evidence)
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Status, testing::SnapshotBuilder};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::old_server()
    }

    #[test]
    fn verdicts() {
        for (value, status) in [
            ("ON", Status::Pass),
            ("OFF", Status::Fail),
            ("?", Status::InsufficientData),
        ] {
            let s = SnapshotBuilder::new()
                .mariadb("11.8.6-MariaDB")
                .var(Var::PerformanceSchema, value)
                .build();
            assert_eq!(verdict(&PerformanceSchemaOff, &s).status, status, "{value}");
        }
        let s = SnapshotBuilder::new().build();
        assert_eq!(
            verdict(&PerformanceSchemaOff, &s).status,
            Status::InsufficientData
        );
    }
}
