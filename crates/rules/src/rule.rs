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
    /// What the field reports measured for the difference this rule covers, used by
    /// [`diff`](crate::diff) to rank differences between two hosts; empty when nothing was
    /// measured.
    pub impact: &'static [Impact],
}

/// A measured effect of the difference a rule covers: declared next to the rule
/// (`impact: [...]` in [`declare_rule!`]), read by [`diff`](crate::diff) as `Rule::NAME`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Impact {
    /// A speed factor (3.0 = up to 3× faster on the better side). Differences are ranked by it.
    pub factor: f64,
    /// Where the factor comes from, one sentence with the measured numbers.
    pub evidence: &'static str,
}

impl RuleMeta {
    /// The full explanation as Markdown: what it does, why it matters, remediation. Each
    /// threshold marker `{key}` in the doc comment is replaced by that threshold's declared
    /// default (`{min_busy}` → `50%`), so the text cannot drift from the declaration.
    pub fn explanation(&self) -> String {
        let mut out = String::with_capacity(self.doc.len());
        for line in self.doc.lines() {
            out.push_str(&self.render_markers(line.strip_prefix(' ').unwrap_or(line)));
            out.push('\n');
        }
        out.trim().to_owned()
    }

    /// The threshold markers in the doc comment: every `{word}` whose word is a snake_case
    /// identifier, whether or not it names a declared threshold (the registry tests check it
    /// does).
    pub fn threshold_markers(&self) -> Vec<&'static str> {
        let mut found = Vec::new();
        let mut rest = self.doc;
        while let Some(open) = rest.find('{') {
            rest = &rest[open + 1..];
            if let Some(close) = rest.find('}') {
                let word = &rest[..close];
                if is_marker(word) {
                    found.push(word);
                }
            }
        }
        found
    }

    fn render_markers(&self, line: &str) -> String {
        let mut out = String::with_capacity(line.len());
        let mut rest = line;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let threshold = after.find('}').and_then(|close| {
                let word = &after[..close];
                let t = self.thresholds.iter().find(|t| t.key == word)?;
                Some((t, close))
            });
            match threshold {
                Some((t, close)) => {
                    out.push_str(&t.format_prose(t.default));
                    rest = &after[close + 1..];
                }
                None => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
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

/// Whether `word` has the shape of a threshold marker's key: snake_case, starting with a letter.
fn is_marker(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_lowercase())
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
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
            $(, thresholds: [$($threshold:ident),* $(,)?])?
            $(, impact: [$($impact:ident),* $(,)?])? $(,)?
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
                impact: &[$($($impact),*)?],
            };
            $($(
                #[doc = concat!("The measured impact `", stringify!($impact), "`, as listed in [`Self::META`].")]
                pub const $impact: $crate::Impact = $impact;
            )*)?
        }

        impl $crate::Declared for $Name {
            fn meta(&self) -> &'static $crate::RuleMeta {
                &Self::META
            }
        }
    };
}
