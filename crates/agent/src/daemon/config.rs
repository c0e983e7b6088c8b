//! The agent's TOML configuration (`--config.file`), reloaded on SIGHUP. Unknown keys are
//! errors: a typo must not silently leave a setting at its default.

use std::{collections::BTreeSet, path::Path, time::Duration};

use serde::Deserialize;

/// Everything an agent sample needs besides where to connect.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub sample: SampleConfig,
    pub probe: ProbeConfig,
    pub rules: RulesConfig,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SampleConfig {
    /// Time between the starts of two samples.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Deadline for connecting and for each SQL statement.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// OS sample window for rates (steal, counters); 0 uses since-boot totals.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// How long the list and sizes of vector indexes are reused before being read again.
    #[serde(with = "humantime_serde")]
    pub vector_index_refresh: Duration,
}

impl Default for SampleConfig {
    fn default() -> Self {
        SampleConfig {
            interval: Duration::from_secs(15),
            timeout: Duration::from_secs(5),
            window: Duration::from_secs(1),
            vector_index_refresh: Duration::from_secs(300),
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

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RulesConfig {
    /// Rule codes or names not to evaluate (e.g. `["PD406", "allocator-default"]`).
    pub disabled: BTreeSet<String>,
}

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
        let c: Config =
            toml::from_str(text).map_err(|e| err(e.to_string().trim().replace('\n', " ")))?;
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
        if c.sample.window >= c.sample.interval {
            return Err(err(
                "sample.window must be shorter than sample.interval".into()
            ));
        }
        if c.probe.enabled && c.probe.interval < c.sample.interval {
            return Err(err(
                "probe.interval must not be shorter than sample.interval".into(),
            ));
        }
        if !(1..=1000).contains(&c.probe.queries) {
            return Err(err("probe.queries must be between 1 and 1000".into()));
        }
        for r in &c.rules.disabled {
            if powerdiag_rules::find_rule(r).is_none() {
                return Err(err(format!(
                    "rules.disabled: unknown rule {r:?} (`powerdiag rules` lists them)"
                )));
            }
        }
        Ok(c)
    }

    /// Reads and parses a file; the error names it.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|e| ConfigError {
            path: name.clone(),
            message: e.to_string(),
        })?;
        if meta.len() > 1 << 20 {
            return Err(ConfigError {
                path: name,
                message: "larger than 1 MiB; not an agent configuration".into(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: name.clone(),
            message: e.to_string(),
        })?;
        Config::parse(&text, &name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_a_full_file() {
        assert_eq!(Config::parse("", "x").unwrap(), Config::default());
        let c = Config::parse(
            "[sample]\ninterval = \"30s\"\ntimeout = \"2s\"\nwindow = \"500ms\"\n[probe]\nenabled = true\ninterval = \"15m\"\nqueries = 10\n[rules]\ndisabled = [\"PD406\", \"allocator-default\"]\n",
            "agent.toml",
        )
        .unwrap();
        assert_eq!(c.sample.interval, Duration::from_secs(30));
        assert!(c.probe.enabled && c.probe.queries == 10);
        assert_eq!(c.rules.disabled.len(), 2);
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
            ("[rules]\ndisabled = [\"PD999\"]\n", "PD999"),
            (
                "[probe]\nenabled = true\ninterval = \"1s\"\n",
                "probe.interval",
            ),
            ("not toml at all = = =", "agent.toml"),
        ] {
            let e = Config::parse(text, "agent.toml").unwrap_err().to_string();
            assert!(
                e.starts_with("agent.toml: ") && e.contains(needle),
                "{text:?}: {e}"
            );
        }
    }
}
