use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{RULES, Rule, Scope, Settings, Severity, Snapshot, Status};

/// One rule's verdict with the rule's identity, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub code: String,
    pub name: String,
    pub status: Status,
    pub severity: Severity,
    pub scope: Scope,
    pub summary: String,
    pub evidence: Vec<String>,
    /// What to do: specific to this snapshot when the rule computed it, else the rule's general
    /// remediation.
    pub remediation: String,
    /// The thresholds this verdict was judged against that differ from the rule's defaults
    /// (configured by the user); absent when every limit is the default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub thresholds: BTreeMap<String, f64>,
}

/// Every rule's verdict on one snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Every evaluated rule, in registry (code) order.
    pub checks: Vec<Check>,
}

impl Report {
    /// The failing checks, worst first (critical, then warning, then info; by code within).
    pub fn findings(&self) -> Vec<&Check> {
        let mut f: Vec<&Check> = self
            .checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .collect();
        f.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then_with(|| a.code.cmp(&b.code))
        });
        f
    }

    /// The worst severity among failing checks.
    pub fn worst(&self) -> Option<Severity> {
        self.checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.severity)
            .max()
    }

    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }
}

/// Evaluates every registered rule.
pub fn evaluate(snapshot: &Snapshot) -> Report {
    evaluate_with(snapshot, &Settings::default())
}

/// Evaluates every registered rule that `settings` does not disable, against the thresholds
/// it sets.
pub fn evaluate_with(snapshot: &Snapshot, settings: &Settings) -> Report {
    let checks = RULES
        .iter()
        .filter(|r| !settings.is_disabled(r.meta().code))
        .map(|r| check_one(*r, snapshot, settings))
        .collect();
    Report { checks }
}

/// A verdict judged over status counters names its window in the summary of a fail; one judged
/// over the counters since start-up (doctor only, when its window could not decide) says so
/// and is at most a warning: it describes the server's history, not its present.
fn with_basis(severity: Severity, v: &crate::Verdict) -> (Severity, String) {
    match (v.basis, v.status) {
        (
            Some(b @ (crate::Basis::SinceStartup { .. } | crate::Basis::SinceBoot)),
            Status::Fail | Status::Pass,
        ) => (
            severity.min(Severity::Warning),
            format!(
                "{} — judged {}, because doctor's window could not decide (history, not necessarily now)",
                v.summary,
                b.short()
            ),
        ),
        (Some(b @ crate::Basis::Window { .. }), Status::Fail) => {
            (severity, format!("{} ({})", v.summary, b.short()))
        }
        _ => (severity, v.summary.clone()),
    }
}

fn check_one(rule: &dyn Rule, snapshot: &Snapshot, settings: &Settings) -> Check {
    let meta = rule.meta();
    let verdict = rule
        .check(snapshot, &settings.limits(meta.code))
        .unwrap_or_else(|early| early);
    let declared = match verdict.cap {
        Some(cap) => meta.severity.min(cap),
        None => meta.severity,
    };
    let (severity, summary) = with_basis(declared, &verdict);
    Check {
        code: meta.code.to_owned(),
        name: meta.name.to_owned(),
        status: verdict.status,
        severity,
        scope: meta.scope,
        summary,
        evidence: verdict.evidence,
        thresholds: settings.changed(meta.code),
        remediation: verdict
            .remediation
            .unwrap_or_else(|| meta.remediation_for(&crate::Platform::of(snapshot))),
    }
}
