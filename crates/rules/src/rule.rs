use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Limits, Snapshot, Threshold, report::Status};

/// How bad a failing rule is. Ordered: `Info < Warning < Critical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which facts a rule judges: reports group checks by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Server variables, status and probes.
    Database,
    /// The operating system and hardware.
    Host,
}

/// A rule's static description. `doc` is the rule's doc comment: the single source of
/// `powerdiag explain` and the generated documentation.
#[derive(Debug)]
pub struct RuleMeta {
    /// Stable code, `PD` and three digits. Never reused.
    pub code: &'static str,
    /// Stable kebab-case name stating the problem.
    pub name: &'static str,
    pub severity: Severity,
    pub scope: Scope,
    /// One line for `powerdiag rules`.
    pub summary: &'static str,
    /// The Rust type's name; the registry tests check `name` is its kebab-case form.
    pub type_name: &'static str,
    /// Raw doc comment (each line keeps rustdoc's leading space).
    pub doc: &'static str,
    /// The limits a user may change (`[rules.thresholds.CODE]`), in declaration order.
    pub thresholds: &'static [Threshold],
}

impl RuleMeta {
    /// The full explanation as Markdown: what it does, why it matters, remediation.
    pub fn explanation(&self) -> String {
        let mut out = String::with_capacity(self.doc.len());
        for line in self.doc.lines() {
            out.push_str(line.strip_prefix(' ').unwrap_or(line));
            out.push('\n');
        }
        out.trim().to_owned()
    }

    /// One `### Heading` section of the explanation, without its heading.
    pub fn section(&self, heading: &str) -> Option<String> {
        let text = self.explanation();
        let marker = format!("### {heading}");
        let start = text.find(&marker)? + marker.len();
        let rest = &text[start..];
        let end = rest.find("\n### ").unwrap_or(rest.len());
        Some(rest[..end].trim().to_owned())
    }

    /// The general remediation text.
    pub fn remediation(&self) -> String {
        self.section("Remediation").unwrap_or_default()
    }
}

/// One rule: judge a snapshot against limits.
///
/// `check` returns `Err` for an early verdict (a missing fact, the wrong platform) so that
/// rules can use `?` on the snapshot's accessors; both arms are verdicts. Every tunable number
/// is read through `limits` ([`Limits::get`] of one of the rule's declared thresholds), never
/// from a bare constant, so configuration reaches it.
pub trait Rule: Sync + fmt::Debug + Declared {
    fn check(&self, snapshot: &Snapshot, limits: &Limits) -> Result<Verdict, Verdict>;
}

/// The static half of a rule, implemented by [`declare_rule!`] (never by hand): its
/// [`RuleMeta`].
pub trait Declared {
    fn meta(&self) -> &'static RuleMeta;
}

/// A rule's answer for one snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub status: Status,
    /// One sentence: what was found, with the decisive numbers.
    pub summary: String,
    /// The facts behind the verdict, one per line.
    pub evidence: Vec<String>,
    /// A remediation specific to this snapshot (exact values); `None` uses the rule's general one.
    pub remediation: Option<String>,
}

impl Verdict {
    fn new(status: Status, summary: impl Into<String>) -> Verdict {
        Verdict {
            status,
            summary: summary.into(),
            evidence: Vec::new(),
            remediation: None,
        }
    }
    pub fn pass(summary: impl Into<String>) -> Verdict {
        Verdict::new(Status::Pass, summary)
    }
    pub fn fail(summary: impl Into<String>) -> Verdict {
        Verdict::new(Status::Fail, summary)
    }
    pub fn not_applicable(reason: impl Into<String>) -> Verdict {
        Verdict::new(Status::NotApplicable, reason)
    }
    pub fn insufficient(missing: impl Into<String>) -> Verdict {
        Verdict::new(Status::InsufficientData, missing)
    }
    pub fn with_evidence(mut self, line: impl Into<String>) -> Verdict {
        self.evidence.push(line.into());
        self
    }
    pub fn with_remediation(mut self, text: impl Into<String>) -> Verdict {
        self.remediation = Some(text.into());
        self
    }
}

/// Declares a rule type whose doc comment becomes its explanation.
///
/// ```
/// powerdiag_rules::declare_rule! {
///     /// ### What it does
///     /// ...
///     /// ### Why is this bad?
///     /// ...
///     /// ### Remediation
///     /// ...
///     pub struct MhnswCacheUndersized {
///         code: "PD101", name: "mhnsw-cache-undersized", severity: Critical, scope: Database,
///         summary: "a vector index's graph does not fit mhnsw_max_cache_size",
///     }
/// }
///
/// assert_eq!(MhnswCacheUndersized::META.code, "PD101");
/// assert!(MhnswCacheUndersized::META.doc.contains("### Remediation"));
/// ```
#[macro_export]
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])*
        $vis:vis struct $Name:ident {
            code: $code:literal,
            name: $name:literal,
            severity: $severity:ident,
            scope: $scope:ident,
            summary: $summary:literal
            $(, thresholds: [$($threshold:ident),* $(,)?])? $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, Default)]
        $vis struct $Name;

        impl $Name {
            pub const META: $crate::RuleMeta = $crate::RuleMeta {
                code: $code,
                name: $name,
                severity: $crate::Severity::$severity,
                scope: $crate::Scope::$scope,
                summary: $summary,
                type_name: stringify!($Name),
                doc: concat!($($doc, "\n",)*),
                thresholds: &[$($($threshold),*)?],
            };
        }

        impl $crate::Declared for $Name {
            fn meta(&self) -> &'static $crate::RuleMeta {
                &Self::META
            }
        }
    };
}
