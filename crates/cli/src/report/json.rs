use powerdiag_rules::{
    Check, ConnectAttempt, DbError, HostFacts, Report, SCHEMA_VERSION, Severity, Snapshot,
};
use serde::Serialize;

/// The `--format json` document (docs/report-json.md documents every field).
#[derive(Debug, Serialize)]
pub(crate) struct DoctorJson<'a> {
    pub(crate) schema_version: u32,
    pub(crate) powerdiag_version: &'a str,
    pub(crate) taken_at: Option<&'a str>,
    pub(crate) exit_code: u8,
    pub(crate) host: Option<&'a HostFacts>,
    pub(crate) host_error: Option<&'a str>,
    pub(crate) mariadb: MariadbJson<'a>,
    pub(crate) summary: Summary,
    pub(crate) checks: &'a [Check],
    pub(crate) findings: Vec<&'a Check>,
    /// The busiest statements of the period (`--statements N`); absent without MariaDB facts
    /// or with `--statements 0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_statements: Option<&'a super::statements::TopStatements>,
    /// Who waits for whom, the commands that end it, and the last deadlock; absent without
    /// MariaDB facts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) blocking: Option<&'a super::blocking::Blocking>,
    pub(crate) snapshot: &'a Snapshot,
}

#[derive(Debug, Serialize)]
pub(crate) struct MariadbJson<'a> {
    pub(crate) reachable: bool,
    pub(crate) target: Option<&'a str>,
    pub(crate) version: Option<&'a str>,
    pub(crate) error: Option<&'a DbError>,
    pub(crate) attempts: &'a [ConnectAttempt],
    pub(crate) notes: &'a [String],
}

#[derive(Debug, Serialize)]
pub(crate) struct Summary {
    pub(crate) worst: Option<Severity>,
    /// checks, fail, pass, not_applicable, insufficient_data, insufficient_data_reasons, line.
    #[serde(flatten)]
    pub(crate) tally: super::Tally,
}

pub(crate) fn doctor_json<'a>(
    s: &'a Snapshot,
    r: &'a Report,
    code: u8,
    top_statements: Option<&'a super::statements::TopStatements>,
    blocking: Option<&'a super::blocking::Blocking>,
) -> DoctorJson<'a> {
    let (host, host_error) = match s.host.as_ref() {
        Ok(h) => (Some(h), None),
        Err(e) => (None, Some(e)),
    };
    let facts = s.mariadb.facts.as_ref();
    DoctorJson {
        schema_version: SCHEMA_VERSION,
        powerdiag_version: &s.powerdiag_version,
        taken_at: s.taken_at.as_deref(),
        exit_code: code,
        host,
        host_error,
        mariadb: MariadbJson {
            reachable: s.mariadb.reachable,
            target: s.mariadb.target.as_deref(),
            version: facts.map(|f| f.version.raw.as_str()),
            error: s.mariadb.error.as_ref(),
            attempts: &s.mariadb.attempts,
            notes: facts.map(|f| f.notes.as_slice()).unwrap_or_default(),
        },
        summary: Summary {
            worst: r.worst(),
            tally: super::Tally::of(r),
        },
        checks: &r.checks,
        findings: r.findings(),
        top_statements,
        blocking,
        snapshot: s,
    }
}
