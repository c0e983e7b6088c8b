//! The agent's TOML configuration (`--config.file`), reloaded on SIGHUP. Unknown keys are
//! errors: a typo must not silently leave a setting at its default.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    time::Duration,
};

use powerdiag_rules::Settings;

use crate::collect::collector::{Selection, Source};
use serde::Deserialize;

/// Everything an agent sample needs besides where to connect.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub sample: SampleConfig,
    pub probe: ProbeConfig,
    pub statements: StatementsConfig,
    pub schema: SchemaConfig,
    pub rules: RulesConfig,
    /// Collectors turned on or off by name (`[collectors]` `cpu = false`), as doctor's
    /// `--collector.NAME` / `--no-collector.NAME`; `powerdiag collectors` lists the names.
    pub collectors: BTreeMap<String, bool>,
    /// `collectors`, validated against the registry by [`Config::parse`].
    #[serde(skip)]
    pub selection: Selection,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SampleConfig {
    /// Time between the starts of two samples. 60 s by default: the rules judge windows of
    /// minutes and the counters stay counters (rates over any range are right). A slower
    /// cadence does not make the server's share cheaper in proportion: what a sample's
    /// statements touch goes cold between samples, and on the test VM a sample after 5 minutes
    /// cost the server ~6.5 ms against ~1 ms after 1 minute (docs/performance.md, "Cost of observing").
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Deadline for connecting and for each SQL statement.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// OS sample window for rates (steal, counters); 0 uses since-boot totals.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// How long the sizes and row estimates of vector indexes are reused before being read
    /// again; their list and definitions are read again only after a schema or grant change.
    #[serde(with = "humantime_serde")]
    pub vector_index_refresh: Duration,
    /// The longest that server variables are reused on the same connection (status counters
    /// are read every sample). Within it they are read again as soon as the sample's status
    /// read shows a `SET`, a plugin installed or removed or the buffer pool resized, so 10
    /// minutes by default bounds only what changes without any of those; 0 reads them every
    /// sample.
    #[serde(with = "humantime_serde")]
    pub variables_refresh: Duration,
    /// The shortest window the rules judge status counters over: the difference from the
    /// oldest read at most this old (at least the previous sample's).
    #[serde(with = "humantime_serde")]
    pub status_window: Duration,
    /// The longest: status reads are kept this long, and a rule whose shorter windows hold
    /// too little evidence judges up to this far back — never the counters since start-up.
    #[serde(with = "humantime_serde")]
    pub max_status_window: Duration,
    /// How long the InnoDB data and index size (PD205) is reused. 30 minutes by default: it is
    /// a sum over every table's persistent statistics, whose cost grows with the tables (~2.7
    /// ms of server CPU at 10,000), and InnoDB itself rewrites those rows only when a table's
    /// statistics are recalculated.
    #[serde(with = "humantime_serde")]
    pub innodb_refresh: Duration,
    /// How long the open transactions (PD215) are reused. 10 minutes by default: a transaction
    /// is judged by the hour, and the read (~1 ms of server CPU at this cadence) does not grow
    /// with the tables.
    #[serde(with = "humantime_serde")]
    pub transactions_refresh: Duration,
    /// Every this many connected clients (`Threads_connected`) add one interval between two
    /// samples, never stretching the time between them beyond a minute: MariaDB adds up every
    /// connection's counters for each global status read, so a read costs the server more with
    /// every connection (at 5,000 idle ones ~7 ms at a 15 s rhythm, against ~1 ms with none),
    /// and more again after a longer pause (18 ms after 90 s, ~230 ms after 5 minutes here:
    /// their memory has gone cold). Between two spaced samples a watch read (one counter
    /// MariaDB keeps globally, `Innodb_row_lock_current_waits`: no sum) ends the spacing at
    /// the first interval that shows a row-lock wait. Only while at most 1 in 100 clients runs
    /// (`Threads_running`, which counts sessions waiting for a lock): a pile-up or a busy
    /// server is sampled at every interval. 1,000 by default (≤ 1,000 clients: every interval;
    /// 5,000 idle ones at a 15 s interval: every 4th, watched in between; at 60 s and longer
    /// intervals nothing is spaced); 0 samples every interval whatever the connections.
    pub spacing_connections: u64,
}

impl Default for SampleConfig {
    fn default() -> Self {
        SampleConfig {
            interval: Duration::from_secs(60),
            timeout: Duration::from_secs(5),
            window: Duration::from_secs(1),
            vector_index_refresh: Duration::from_secs(600),
            variables_refresh: Duration::from_secs(600),
            status_window: Duration::from_secs(60),
            max_status_window: Duration::from_secs(3600),
            innodb_refresh: Duration::from_secs(1800),
            transactions_refresh: Duration::from_secs(600),
            spacing_connections: 1000,
        }
    }
}

/// The vector probe in the agent: off unless enabled, on its own slower schedule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    pub enabled: bool,
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    pub queries: u32,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            enabled: false,
            interval: Duration::from_secs(600),
            queries: 20,
        }
    }
}

/// Statement digests (performance_schema): read on their own schedule; the statement rules
/// and metrics judge the difference between two reads. Every 10 minutes by default: each read
/// makes the server build every digest's text, twice (~2.9 ms of server CPU back to back at
/// 1,000 digests, more when it comes rarely, ~5× that with the table full at its default
/// 5,000), the largest single read the agent asks of the server. The first interval after a
/// start ends at the first sample a minute or more later, so verdicts do not wait ten minutes
/// (docs/performance.md, "Cost of observing").
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatementsConfig {
    pub enabled: bool,
    /// Time between two reads of the digest table (at a sample: at least `sample.interval`).
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Most digests read per read (the busiest by total time since reset).
    pub limit: u32,
    /// Digests exported as metrics (the busiest in the interval); the rest are summed into
    /// one `digest="other"` series.
    pub top: u32,
    /// Opt-in: one recent concrete execution of each statement PD701, PD703 and PD709 name,
    /// from performance_schema's statement history (its consumers `events_statements_current`
    /// and `events_statements_history_long` on), printed in their evidence and carried in
    /// `/api/v1/snapshot` — never in a metric. Two more statements per read when there is one
    /// to take.
    pub samples: bool,
    /// Opt-in: with it, their `EXPLAIN FORMAT=JSON` too (plain `SELECT`s only, read-only, at
    /// most 2 s each, at most 10 per read), which names the index the plan lacks. Implies
    /// `samples`.
    pub explain: bool,
    /// Replace the literals of those statements and plans by `?` before anything is kept (on
    /// by default: `false` lets production values reach the snapshot).
    pub redact: bool,
}

impl Default for StatementsConfig {
    fn default() -> Self {
        StatementsConfig {
            enabled: true,
            interval: Duration::from_secs(600),
            limit: 100,
            top: 20,
            samples: false,
            explain: false,
            redact: true,
        }
    }
}

/// The schema read (PD705–PD708): `information_schema.TABLES` and `STATISTICS`, whose cost
/// grows with the tables (docs/performance.md), so read rarely — and again after DDL, which
/// the status counters show, so a fix clears its finding at the next sample.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchemaConfig {
    /// Time between two reads without DDL in between. A day by default.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Most tables the snapshot lists (those a schema rule can judge, largest first); the
    /// verdicts say how many they left out.
    pub max_tables: usize,
    /// Above this many InnoDB tables (with persistent statistics) the schema read is left
    /// out, PD705–PD708 say so: it holds every table's dictionary rows at once, ~110 bytes a
    /// table (~10 MB of the agent's memory for some seconds at 100,000 tables, beyond its 16
    /// MB budget), and costs the server ~0.9 s of CPU there. Doctor's
    /// `--dictionary-max-tables` default, 20,000; 0 reads it whatever the tables.
    pub max_dictionary_tables: u64,
}

impl Default for SchemaConfig {
    fn default() -> Self {
        SchemaConfig {
            interval: Duration::from_secs(86_400),
            max_tables: crate::collect::DEFAULT_MAX_TABLES,
            max_dictionary_tables: crate::collect::DEFAULT_DICTIONARY_MAX_TABLES,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RulesConfig {
    /// Rule codes or names not to evaluate (e.g. `["PD406", "allocator-default"]`).
    pub disabled: BTreeSet<String>,
    /// Changed limits, by rule code or name, then threshold key (`[rules.thresholds.PD403]`
    /// `max_steal = 0.10` or `"10%"`); `powerdiag explain CODE` lists a rule's keys.
    pub thresholds: BTreeMap<String, BTreeMap<String, toml::Value>>,
    /// `disabled` and `thresholds`, validated against the rule registry by [`Config::parse`].
    #[serde(skip)]
    pub settings: Settings,
}

impl RulesConfig {
    /// Validates the rule names, threshold keys and values against the registry; an error
    /// names the setting (`rules.thresholds.PD403: ...`) and what is accepted.
    pub fn to_settings(&self) -> Result<Settings, String> {
        let mut settings = Settings::default();
        for r in &self.disabled {
            settings
                .disable(r)
                .map_err(|e| format!("rules.disabled: {e}"))?;
        }
        for (rule, keys) in &self.thresholds {
            for (key, value) in keys {
                let set = match value {
                    toml::Value::Integer(i) => settings.set(rule, key, *i as f64),
                    toml::Value::Float(f) => settings.set(rule, key, *f),
                    toml::Value::String(s) => settings.set_text(rule, key, s),
                    other => {
                        return Err(format!(
                            "rules.thresholds.{rule}.{key}: expected a number or a string such as \"10%\" or \"2G\", found a {}",
                            other.type_str()
                        ));
                    }
                };
                set.map_err(|e| format!("rules.thresholds.{rule}: {e}"))?;
            }
        }
        Ok(settings)
    }
}

/// The largest agent configuration file read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The longest duration any setting accepts: longer ones are typos (`"15d"` for `"15s"`), and
/// bounded durations keep every sum and multiple of them (deadlines, `/healthz`'s staleness)
/// far from overflowing.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// A configuration that cannot be used, with the file and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl Config {
    /// Parses and validates a TOML text (`path` names it in errors).
    pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
        let err = |message: String| ConfigError {
            path: path.to_owned(),
            message,
        };
        let mut c: Config = toml::from_str(text).map_err(|e| err(toml_error(text, &e)))?;
        for (name, value) in [
            ("sample.interval", c.sample.interval),
            ("sample.timeout", c.sample.timeout),
            ("sample.window", c.sample.window),
            ("sample.vector_index_refresh", c.sample.vector_index_refresh),
            ("sample.variables_refresh", c.sample.variables_refresh),
            ("sample.status_window", c.sample.status_window),
            ("sample.max_status_window", c.sample.max_status_window),
            ("sample.innodb_refresh", c.sample.innodb_refresh),
            ("sample.transactions_refresh", c.sample.transactions_refresh),
            ("probe.interval", c.probe.interval),
            ("statements.interval", c.statements.interval),
            ("schema.interval", c.schema.interval),
        ] {
            if value > MAX_DURATION {
                return Err(err(format!(
                    "{name} ({}) must be at most {}",
                    humantime::format_duration(value),
                    humantime::format_duration(MAX_DURATION)
                )));
            }
        }
        if c.schema.interval < Duration::from_secs(60) {
            return Err(err("schema.interval must be at least 1m".into()));
        }
        if !(1..=1_000_000).contains(&c.schema.max_tables) {
            return Err(err(format!(
                "schema.max_tables must be between 1 and 1000000, not {}",
                c.schema.max_tables
            )));
        }
        if c.statements.interval < Duration::from_secs(1) {
            return Err(err("statements.interval must be at least 1s".into()));
        }
        if !(1..=1000).contains(&c.statements.limit) {
            return Err(err(format!(
                "statements.limit must be between 1 and 1000, not {}",
                c.statements.limit
            )));
        }
        if c.statements.top > c.statements.limit {
            return Err(err(format!(
                "statements.top ({}) must not exceed statements.limit ({})",
                c.statements.top, c.statements.limit
            )));
        }
        if c.sample.interval < Duration::from_secs(1) {
            return Err(err("sample.interval must be at least 1s".into()));
        }
        if c.sample.timeout.is_zero() || c.sample.timeout >= c.sample.interval {
            return Err(err(format!(
                "sample.timeout ({}) must be above 0 and below sample.interval ({}), or samples pile up",
                humantime::format_duration(c.sample.timeout),
                humantime::format_duration(c.sample.interval)
            )));
        }
        // A sample against a hung server spends the timeout (connect, or the kept connection's
        // first statement), then the OS window: both must fit the sample's budget (the
        // interval less 100 ms), or the sample is abandoned and the server never reads as down.
        let needed = c
            .sample
            .timeout
            .saturating_add(c.sample.window)
            .saturating_add(Duration::from_millis(100));
        if needed > c.sample.interval {
            return Err(err(format!(
                "sample.timeout ({}) + sample.window ({}) + 100ms must fit in sample.interval ({}): a sample against a hung server takes that long; raise the interval or lower the timeout or window",
                humantime::format_duration(c.sample.timeout),
                humantime::format_duration(c.sample.window),
                humantime::format_duration(c.sample.interval)
            )));
        }
        if c.sample.window >= c.sample.interval {
            return Err(err(
                "sample.window must be shorter than sample.interval".into()
            ));
        }
        if c.sample.max_status_window < c.sample.status_window {
            return Err(err(format!(
                "sample.max_status_window ({}) must be at least sample.status_window ({}): it is the longest window the counter rules look back over",
                humantime::format_duration(c.sample.max_status_window),
                humantime::format_duration(c.sample.status_window)
            )));
        }
        if c.probe.enabled && c.probe.interval < c.sample.interval {
            return Err(err(
                "probe.interval must not be shorter than sample.interval".into(),
            ));
        }
        if !(1..=1000).contains(&c.probe.queries) {
            return Err(err("probe.queries must be between 1 and 1000".into()));
        }
        c.rules.settings = c.rules.to_settings().map_err(err)?;
        c.selection = Selection::from_choices(
            &crate::collect::collectors(),
            c.collectors.iter().map(|(name, on)| (name.as_str(), *on)),
            Source::Config,
        )
        .map_err(|e| err(format!("collectors: {e}")))?;
        Ok(c)
    }

    /// Reads and parses a file; the error names it. Regular files of at most 1 MiB only: a FIFO
    /// or a device is refused at once, never read or waited on.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let err = |message: String| ConfigError {
            path: name.clone(),
            message,
        };
        let bytes = powerdiag_safe_read::read_regular_file(path, MAX_CONFIG_BYTES)
            .map_err(|e| err(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|_| err("not UTF-8 text".into()))?;
        Config::parse(&text, &name)
    }
}

/// A TOML error as `line L, column C: MESSAGE`, then the line with the span underlined, as
/// compilers show it (toml's own text puts the location, the snippet and the message on
/// separate lines in that order; flattened onto one line it was unreadable).
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim();
    let Some(span) = e.span().filter(|s| s.start <= text.len()) else {
        return message.to_owned();
    };
    let start = span.start;
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line_no = text[..start].matches('\n').count() + 1;
    let column = text[line_start..start].chars().count() + 1;
    let line = &text[line_start..line_end];
    let width = text[start..span.end.clamp(start, line_end)]
        .chars()
        .count()
        .max(1);
    let gutter = " ".repeat(line_no.to_string().len());
    format!(
        "line {line_no}, column {column}: {message}\n  {line_no} | {line}\n  {gutter} | {}{}",
        " ".repeat(column - 1),
        "^".repeat(width)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration docs/agent.md shows, and the one deploy/systemd installs, are valid.
    #[test]
    fn the_documented_configurations_parse() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let doc = std::fs::read_to_string(format!("{root}/docs/agent.md")).unwrap();
        let start = doc
            .find("```toml\n")
            .expect("docs/agent.md has a TOML example")
            + 8;
        let end = start + doc[start..].find("```").unwrap();
        let c = Config::parse(&doc[start..end], "docs/agent.md").unwrap();
        assert!(
            !c.selection
                .is_enabled(crate::collect::find_collector("counters").unwrap())
        );
        let deployed =
            std::fs::read_to_string(format!("{root}/deploy/systemd/agent.toml")).unwrap();
        Config::parse(&deployed, "deploy/systemd/agent.toml").unwrap();
    }

    /// `[collectors]` turns collectors off by name; an unknown name is an error listing the
    /// names; the command line's choices win over the file's.
    #[test]
    fn collectors_by_name() {
        let c = Config::parse("[collectors]\ncpu = false\nswap = false\n", "agent.toml").unwrap();
        let all = crate::collect::collectors();
        assert_eq!(
            c.selection.disabled(&all).collect::<Vec<_>>(),
            ["cpu", "swap"]
        );
        let e = Config::parse("[collectors]\ncpus = false\n", "agent.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("agent.toml: collectors: unknown collector \"cpus\": the collectors are host, mariadb,"),
            "{e}"
        );
        let flags =
            Selection::from_choices(&all, [("swap", true), ("memory", false)], Source::Flags)
                .unwrap();
        let both = c.selection.overridden_by(&flags);
        assert_eq!(both.disabled(&all).collect::<Vec<_>>(), ["cpu", "memory"]);
        let cpu = crate::collect::find_collector("cpu").unwrap();
        let e = both.gate(cpu, None).unwrap_err().to_string();
        assert_eq!(
            e,
            "the cpu collector is disabled by [collectors] cpu = false in the configuration"
        );
    }

    #[test]
    fn toml_errors_keep_their_lines() {
        let e = Config::parse("[sample]\nintervall = \"30s\"\n", "agent.toml")
            .unwrap_err()
            .to_string();
        let mut lines = e.lines();
        let first = lines.next().unwrap();
        assert!(
            first.starts_with("agent.toml: line 2, column 1: unknown field `intervall`"),
            "{e}"
        );
        assert_eq!(lines.next(), Some("  2 | intervall = \"30s\""), "{e}");
        assert_eq!(lines.next(), Some("    | ^^^^^^^^^"), "{e}");
        assert_eq!(lines.next(), None, "{e}");
    }

    #[test]
    fn defaults_and_a_full_file() {
        assert_eq!(Config::parse("", "x").unwrap(), Config::default());
        let c = Config::parse(
            "[sample]\ninterval = \"30s\"\ntimeout = \"2s\"\nwindow = \"500ms\"\n[probe]\nenabled = true\ninterval = \"15m\"\nqueries = 10\n[rules]\ndisabled = [\"PD406\", \"allocator-default\"]\n[rules.thresholds.PD403]\nmax_steal = 0.1\nmax_far_dispatches = \"15%\"\n[rules.thresholds.small-pages-linux]\nmin_rss_bytes = \"4G\"\n[rules.thresholds.PD303]\nmin_instructions = 1000\n",
            "agent.toml",
        )
        .unwrap();
        assert_eq!(c.sample.interval, Duration::from_secs(30));
        assert!(c.probe.enabled && c.probe.queries == 10);
        assert_eq!(c.rules.disabled.len(), 2);
        let s = &c.rules.settings;
        assert!(s.is_disabled("PD406") && s.is_disabled("PD602"));
        let get = |code, key| s.limits(code).get(Settings::threshold(code, key).unwrap());
        assert_eq!(get("PD403", "max_steal"), 0.1);
        assert_eq!(get("PD403", "max_far_dispatches"), 0.15);
        assert_eq!(get("PD302", "min_rss_bytes"), (4u64 << 30) as f64);
        assert_eq!(get("PD303", "min_instructions"), 1000.0);
        assert_eq!(
            get("PD403", "max_dispersions"),
            0.30,
            "unset keys keep defaults"
        );
    }

    #[test]
    fn errors_name_the_file_and_the_problem() {
        for (text, needle) in [
            (
                "[sample]\nintervall = \"30s\"\n",
                "unknown field `intervall`",
            ),
            ("[sample]\ninterval = \"soon\"\n", "interval"),
            (
                "[sample]\ninterval = \"10s\"\ntimeout = \"10s\"\n",
                "samples pile up",
            ),
            // Issue 16: with the default 1 s window a hung server's sample could not finish in
            // its budget, so the agent went on serving `mariadb_up 1`.
            (
                "[sample]\ninterval = \"2s\"\ntimeout = \"1s\"\n",
                "+ 100ms must fit in sample.interval (2s)",
            ),
            (
                "[sample]\nstatus_window = \"10m\"\nmax_status_window = \"5m\"\n",
                "sample.max_status_window (5m) must be at least sample.status_window (10m)",
            ),
            ("[rules]\ndisabled = [\"PD999\"]\n", "PD999"),
            (
                "[rules.thresholds.PD403]\nmax_steal = 7\n",
                "rules.thresholds.PD403: max_steal: 700.0% is not between",
            ),
            (
                "[rules.thresholds.PD403]\nmax_steal = [1]\n",
                "rules.thresholds.PD403.max_steal: expected a number",
            ),
            ("[rules.thresholds]\nPD403 = 5\n", "line 2"),
            (
                "[rules.thresholds.PD303]\nmin_instructions = -1\n",
                "min_instructions: -1 is not between",
            ),
            (
                "[probe]\nenabled = true\ninterval = \"1s\"\n",
                "probe.interval",
            ),
            ("not toml at all = = =", "agent.toml"),
            (
                "[sample]\ninterval = \"100000000years\"\n",
                "sample.interval (100000000years) must be at most 7days",
            ),
            (
                "[sample]\nvariables_refresh = \"8d\"\n",
                "sample.variables_refresh (8days) must be at most 7days",
            ),
            (
                "[probe]\ninterval = \"30d\"\n",
                "probe.interval (30days) must be at most 7days",
            ),
        ] {
            let e = Config::parse(text, "agent.toml").unwrap_err().to_string();
            assert!(
                e.starts_with("agent.toml: ") && e.contains(needle),
                "{text:?}: {e}"
            );
        }
    }
}

#[cfg(all(test, unix))]
mod file_tests {
    use super::*;

    #[test]
    fn load_refuses_special_and_large_files_naming_them() {
        let e = Config::load(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/dev/zero: it is a character device, not a regular file"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("agent.toml");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::RUSR).unwrap();
        let e = Config::load(&fifo).unwrap_err().to_string();
        assert!(e.contains("a FIFO (named pipe), not a regular file"), "{e}");
        let big = dir.path().join("big.toml");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_CONFIG_BYTES + 1)
            .unwrap();
        let e = Config::load(&big).unwrap_err().to_string();
        assert!(e.contains("larger than 1024 KiB"), "{e}");
    }
}
