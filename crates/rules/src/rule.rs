use std::{
    collections::HashMap,
    fmt,
    sync::{Mutex, OnceLock},
};

use serde::{Deserialize, Serialize};

use crate::{Limits, Snapshot, Threshold};

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
    /// Honours width and alignment (`{:<9}`), so severities line up in columns.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
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
    /// When it fails, in one line with its limits: the "fails when" column of the generated
    /// rule table (docs/rules.md).
    pub fails_when: &'static str,
    /// Why the rule has its severity, in one line starting with the severity word
    /// (`critical: …`): critical is harm measured now (requests failing, or a slowdown the
    /// rule quantifies), warning is harm likely under the present load, info is configuration
    /// advice. The "why" column of README.md's severity table.
    pub severity_why: &'static str,
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
/// (`impact: [...]` in [`declare_rule!`](crate::declare_rule)), read by [`diff`](crate::diff) as `Rule::NAME`.
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

    /// The general remediation text, platform blocks in the doc comment's order (headings
    /// rendered as `Linux:` lines).
    pub fn remediation(&self) -> String {
        self.remediation_for(&Platform::default())
    }

    /// The remediation with the blocks for `platform` first. A Remediation section may be
    /// split into platform blocks, each opened by a `#### HEADING` line (one of
    /// [`PLATFORM_HEADINGS`]); text before the first block applies everywhere and stays first.
    /// The blocks that match the host follow it, then the others in their doc order, so a
    /// reader on x86 does not start with PowerVM advice. Headings become `HEADING:` lines.
    ///
    /// Rendered once per rule and platform: the agent evaluates every rule each sample, and
    /// rendering the doc comment was ~6% of its CPU (tests/bench-peers.sh, perf).
    pub fn remediation_for(&self, platform: &Platform) -> String {
        type Memo = HashMap<(&'static str, usize, Platform), String>;
        static MEMO: OnceLock<Mutex<Memo>> = OnceLock::new();
        // A platform's strings come from the snapshot (a `--from` file): a bounded memo.
        const MAX_ENTRIES: usize = 1024;
        let key = (self.code, self.doc.as_ptr() as usize, platform.clone());
        let memo = MEMO.get_or_init(Default::default);
        if let Some(text) = memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return text;
        }
        let text = self.render_remediation(platform);
        if let Ok(mut m) = memo.lock() {
            if m.len() >= MAX_ENTRIES {
                m.clear();
            }
            m.insert(key, text.clone());
        }
        text
    }

    fn render_remediation(&self, platform: &Platform) -> String {
        let text = self.section("Remediation").unwrap_or_default();
        let mut general = String::new();
        let mut blocks: Vec<(&str, String)> = Vec::new();
        for line in text.lines() {
            if let Some(heading) = line.strip_prefix("#### ") {
                blocks.push((heading.trim(), format!("{}:\n", heading.trim())));
            } else if let Some((_, body)) = blocks.last_mut() {
                body.push_str(line);
                body.push('\n');
            } else {
                general.push_str(line);
                general.push('\n');
            }
        }
        let (first, rest): (Vec<_>, Vec<_>) = blocks
            .into_iter()
            .partition(|(heading, _)| platform.matches(heading) == Some(true));
        let mut parts = vec![general.trim().to_owned()];
        parts.extend(
            first
                .into_iter()
                .chain(rest)
                .map(|(_, b)| b.trim().to_owned()),
        );
        parts.retain(|p| !p.is_empty());
        parts.join("\n\n")
    }

    /// The rule's runbook (`docs/runbooks/PDxxx.md`, the page the alerts link to): the
    /// explanation as Markdown under a title, its thresholds and how to act on a finding.
    /// Generated from the doc comment like `powerdiag explain`, so the two cannot drift
    /// (tests/it/runbooks.rs fails when the committed file is stale).
    pub fn runbook(&self) -> String {
        let scope = match self.scope {
            Scope::Database => "database",
            Scope::Host => "host",
        };
        let mut o = format!(
            "<!-- Generated from the doc comment of {} ({}); do not edit here: change the rule, then\n     \
             POWERDIAG_BLESS=1 cargo test -p powerdiag --test it runbooks -->\n\n\
             # {} {}\n\n**{}** · severity **{}** · scope {scope}\n\n",
            self.type_name, self.code, self.code, self.name, self.summary, self.severity
        );
        // The explanation's `### Section` headings become `##` under the page's title, and
        // its `#### Platform` blocks `###`.
        for line in self.explanation().lines() {
            match line.strip_prefix("###") {
                Some(rest) if rest.starts_with(' ') || rest.starts_with("# ") => {
                    o.push_str("##");
                    o.push_str(rest);
                }
                _ => o.push_str(line),
            }
            o.push('\n');
        }
        if !self.thresholds.is_empty() {
            o.push_str(&format!(
                "\n## Thresholds\n\nSet under `[rules.thresholds.{}]` in the agent's configuration file \
                 (`powerdiag agent --config.file`, also read by `powerdiag doctor --config.file`).\n\n\
                 | key | default | range | meaning |\n|---|---|---|---|\n",
                self.code
            ));
            for t in self.thresholds {
                o.push_str(&format!(
                    "| `{}` | {} | {} to {} ({}) | {} |\n",
                    t.key,
                    t.format(t.default),
                    t.format(t.min),
                    t.format(t.max),
                    t.unit.as_str(),
                    t.doc.replace('|', "\\|")
                ));
            }
        }
        o.push_str(&format!(
            "\n## Acting on a finding\n\n\
             - `powerdiag doctor` on the host shows this check's evidence and the remediation with \
             the host's own values (the agent serves the same facts at `/api/v1/snapshot`).\n\
             - `powerdiag explain {code}` prints this text.\n\
             - To accept the finding, add `\"{code}\"` to `[rules] disabled` in the agent's \
             configuration file and reload it (SIGHUP).\n",
            code = self.code
        ));
        o
    }

    /// The `#### HEADING` lines of the Remediation section (the registry tests check each is
    /// one of [`PLATFORM_HEADINGS`]).
    pub fn remediation_headings(&self) -> Vec<String> {
        let text = self.section("Remediation").unwrap_or_default();
        text.lines()
            .filter_map(|l| l.strip_prefix("#### "))
            .map(|h| h.trim().to_owned())
            .collect()
    }
}

/// The platform blocks a rule's Remediation may have (`#### Linux`, ...), matched against the
/// host by [`Platform::matches`].
pub const PLATFORM_HEADINGS: &[&str] = &[
    "Linux",
    "AIX",
    "PowerVM",
    "Other hypervisors",
    "POWER",
    "x86",
];

/// The host a snapshot was taken on, as far as remediation cares: which platform blocks to
/// show first. Each part is `None` when the snapshot does not say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Platform {
    /// `linux`, `aix`, ... (Rust's `target_os` spelling).
    pub os: Option<String>,
    /// `x86_64`, `aarch64`, `powerpc64le`, `powerpc64`.
    pub arch: Option<String>,
    /// A PowerVM logical partition (lparcfg or perfstat found one).
    pub powervm: Option<bool>,
}

impl Platform {
    /// The platform of the host `s` was taken on.
    pub fn of(s: &Snapshot) -> Platform {
        let host = s.host.as_ref().ok();
        let arch = host.map(|h| h.arch.clone());
        let powervm = match s.os.as_ref().ok().map(|o| o.partition.as_ref()) {
            Some(Ok(p)) => Some(p.is_some()),
            // No partition facts: AIX always runs in a partition; off POWER there is none.
            _ => match (host.map(|h| h.os.as_str()), arch.as_deref()) {
                (Some("aix"), _) => Some(true),
                (_, Some(a)) if !a.starts_with("powerpc") => Some(false),
                _ => None,
            },
        };
        Platform {
            os: host.map(|h| h.os.clone()),
            arch,
            powervm,
        }
    }

    /// Whether a remediation block headed `heading` is for this platform; `None` when the
    /// platform is unknown or the heading is not one of [`PLATFORM_HEADINGS`].
    pub fn matches(&self, heading: &str) -> Option<bool> {
        let arch = self.arch.as_deref();
        match heading {
            "Linux" => self.os.as_deref().map(|o| o == "linux"),
            "AIX" => self.os.as_deref().map(|o| o == "aix"),
            "PowerVM" => self.powervm,
            "Other hypervisors" => self.powervm.map(|p| !p),
            "POWER" => arch.map(|a| a.starts_with("powerpc")),
            "x86" => arch.map(|a| a == "x86_64" || a == "x86"),
            _ => None,
        }
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

/// A verdict's status, as it appears in JSON and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Fail,
    Pass,
    NotApplicable,
    InsufficientData,
}

impl Status {
    pub const ALL: [Status; 4] = [
        Status::Fail,
        Status::Pass,
        Status::NotApplicable,
        Status::InsufficientData,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Fail => "fail",
            Status::Pass => "pass",
            Status::NotApplicable => "not_applicable",
            Status::InsufficientData => "insufficient_data",
        }
    }
}

/// The static half of a rule, implemented by [`declare_rule!`](crate::declare_rule) (never by hand): its
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
    /// The status counters the verdict was judged over ([`crate::Counts::stamp`]): the report
    /// names the window in a fail's summary, and caps a verdict on counters since start-up at
    /// a warning.
    #[serde(skip)]
    pub basis: Option<crate::Basis>,
    /// The most severe this verdict may be reported (a rule whose harm is measured now in one
    /// case and only likely in another): `None` is the rule's declared severity.
    #[serde(skip)]
    pub cap: Option<Severity>,
}

impl Verdict {
    fn new(status: Status, summary: impl Into<String>) -> Verdict {
        Verdict {
            status,
            summary: summary.into(),
            evidence: Vec::new(),
            remediation: None,
            basis: None,
            cap: None,
        }
    }
    pub fn pass(summary: impl Into<String>) -> Verdict {
        Verdict::new(Status::Pass, summary)
    }
    pub fn fail(summary: impl Into<String>) -> Verdict {
        Verdict::new(Status::Fail, summary)
    }
    /// The counters this verdict was judged over (see [`Verdict::basis`]).
    pub fn with_basis(mut self, basis: Option<crate::Basis>) -> Verdict {
        self.basis = basis;
        self
    }
    /// Reported at most at `severity` (see [`Verdict::cap`]).
    pub fn at_most(mut self, severity: Severity) -> Verdict {
        self.cap = Some(severity);
        self
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
    /// Appends several evidence lines.
    pub fn with_evidence_lines(mut self, lines: impl IntoIterator<Item = String>) -> Verdict {
        self.evidence.extend(lines);
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
///         fails_when: "a vector index's estimated graph is larger than `mhnsw_max_cache_size`",
///         severity_why: "critical: every query on the index rebuilds its graph",
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
            summary: $summary:literal,
            fails_when: $fails_when:literal,
            severity_why: $severity_why:literal
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
                fails_when: $fails_when,
                severity_why: $severity_why,
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
