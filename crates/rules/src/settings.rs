//! What a user may change about the rules: which run, and the limits they judge against.
//!
//! A rule's tunable limits are [`Threshold`]s declared next to its code (`thresholds: [...]`
//! in [`declare_rule!`](crate::declare_rule)); the rule reads each through [`Limits::get`],
//! which gives the configured value or the default. [`Settings`] holds what the user chose and
//! validates it against the registry, so a typo in a configuration file is an error naming
//! the rule and the keys it has, never a silently ignored setting.

use std::collections::{BTreeMap, BTreeSet};

use crate::{Limits, RULES, Rule, Threshold, find_rule};

/// A setting that names no rule, no threshold, or a value the threshold cannot take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError(pub String);

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SettingsError {}

/// The user's choices for one evaluation: disabled rules and changed thresholds, by code.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    disabled: BTreeSet<&'static str>,
    thresholds: BTreeMap<&'static str, BTreeMap<&'static str, f64>>,
}

fn rule_named(code_or_name: &str) -> Result<&'static dyn Rule, SettingsError> {
    find_rule(code_or_name).ok_or_else(|| {
        SettingsError(format!(
            "unknown rule {code_or_name:?} (`powerdiag rules` lists them)"
        ))
    })
}

impl Settings {
    /// Stops `code_or_name` (`PD406` or `dscr-default`) from being evaluated.
    pub fn disable(&mut self, code_or_name: &str) -> Result<(), SettingsError> {
        self.disabled.insert(rule_named(code_or_name)?.meta().code);
        Ok(())
    }

    /// The threshold `key` of rule `code_or_name`, or an error listing the rule's keys.
    pub fn threshold(code_or_name: &str, key: &str) -> Result<&'static Threshold, SettingsError> {
        let meta = rule_named(code_or_name)?.meta();
        meta.thresholds
            .iter()
            .find(|t| t.key == key)
            .ok_or_else(|| {
                let keys: Vec<&str> = meta.thresholds.iter().map(|t| t.key).collect();
                SettingsError(if keys.is_empty() {
                    format!("{} ({}) has no thresholds", meta.code, meta.name)
                } else {
                    format!(
                        "{} ({}) has no threshold {key:?}; it has {}",
                        meta.code,
                        meta.name,
                        keys.join(", ")
                    )
                })
            })
    }

    /// Sets a threshold from a number, after checking its range.
    pub fn set(&mut self, code_or_name: &str, key: &str, value: f64) -> Result<(), SettingsError> {
        let t = Settings::threshold(code_or_name, key)?;
        let value = t
            .check_value(value)
            .map_err(|e| SettingsError(format!("{key}: {e}")))?;
        self.insert(code_or_name, t, value);
        Ok(())
    }

    /// Sets a threshold from text (`"5%"`, `"1G"`), after checking its unit and range.
    pub fn set_text(
        &mut self,
        code_or_name: &str,
        key: &str,
        text: &str,
    ) -> Result<(), SettingsError> {
        let t = Settings::threshold(code_or_name, key)?;
        let value = t
            .parse_text(text)
            .map_err(|e| SettingsError(format!("{key}: {e}")))?;
        self.insert(code_or_name, t, value);
        Ok(())
    }

    fn insert(&mut self, code_or_name: &str, t: &'static Threshold, value: f64) {
        if let Some(rule) = find_rule(code_or_name) {
            self.thresholds
                .entry(rule.meta().code)
                .or_default()
                .insert(t.key, value);
        }
    }

    pub fn is_disabled(&self, code: &str) -> bool {
        self.disabled.contains(code)
    }

    /// The disabled rules' codes.
    pub fn disabled(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.disabled.iter().copied()
    }

    /// The limits rule `code` judges against.
    pub fn limits(&self, code: &str) -> Limits<'_> {
        Limits {
            overrides: self.thresholds.get(code),
        }
    }

    /// The thresholds of rule `code` set to something else than their default.
    pub fn changed(&self, code: &str) -> BTreeMap<String, f64> {
        self.thresholds
            .get(code)
            .into_iter()
            .flatten()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect()
    }

    /// Every rule's every threshold with its value in effect, for metrics and `explain`.
    pub fn effective(&self) -> impl Iterator<Item = (&'static dyn Rule, &'static Threshold, f64)> {
        RULES.iter().flat_map(move |r| {
            let limits = self.limits(r.meta().code);
            r.meta()
                .thresholds
                .iter()
                .map(move |t| (*r, t, limits.get(t)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Unit;

    #[test]
    fn every_threshold_is_sane() {
        let mut seen = BTreeSet::new();
        for r in RULES {
            for t in r.meta().thresholds {
                let id = (r.meta().code, t.key);
                assert!(seen.insert(id), "{id:?} declared twice");
                assert!(
                    t.key
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                    "{id:?}: keys are snake_case"
                );
                assert!(
                    t.min <= t.default && t.default <= t.max,
                    "{id:?}: default in range"
                );
                assert_eq!(t.check_value(t.default), Ok(t.default), "{id:?}");
                assert!(!t.doc.is_empty(), "{id:?}: documented");
                if t.unit == Unit::Ratio {
                    assert!(t.min >= 0.0 && t.max <= 1.0, "{id:?}: a ratio is 0..=1");
                }
            }
        }
        assert!(seen.len() >= 10, "the heuristic limits are tunable");
    }

    /// What is wrong with how `m`'s explanation states its thresholds' defaults. A default
    /// reaches the explanation only from its declaration: the doc writes the marker `{key}`
    /// (rendered as the default); a value restated next to the key (`` `key` (default 50%) ``
    /// or `` `key` = 50% ``) must equal the declared default.
    fn default_drift(m: &crate::RuleMeta) -> Vec<String> {
        let mut problems = Vec::new();
        let markers = m.threshold_markers();
        for key in &markers {
            if !m.thresholds.iter().any(|t| t.key == *key) {
                problems.push(format!(
                    "{}: the doc's marker {{{key}}} names no declared threshold",
                    m.code
                ));
            }
        }
        let text = m.explanation();
        for t in m.thresholds {
            if !markers.contains(&t.key) {
                problems.push(format!(
                    "{}: state the limit `{}` in the doc with the marker {{{}}} (rendered as its default {})",
                    m.code,
                    t.key,
                    t.key,
                    t.format_prose(t.default)
                ));
            }
            let named = format!("`{}`", t.key);
            for (at, _) in text.match_indices(&named) {
                let after = &text[at + named.len()..];
                // The first word after the key's "(default" or "=": `1,000`, `10%`, `0.10,`.
                let restated = after
                    .strip_prefix(" (default ")
                    .or_else(|| after.strip_prefix(" = "))
                    .and_then(|v| v.split_whitespace().next())
                    .map(|v| v.trim_end_matches([',', ';', '.', ')']).replace(',', ""));
                if let Some(value) = restated
                    && t.parse_text(&value) != Ok(t.default)
                {
                    problems.push(format!(
                        "{}: the explanation restates `{}` as {value}, the declaration says {}",
                        m.code,
                        t.key,
                        t.format_prose(t.default)
                    ));
                }
            }
        }
        problems
    }

    #[test]
    fn explanations_render_defaults_from_their_declaration() {
        let problems: Vec<String> = RULES.iter().flat_map(|r| default_drift(r.meta())).collect();
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn a_restated_default_that_differs_is_caught() {
        const T: Threshold = Threshold {
            key: "min_busy",
            default: 0.5,
            min: 0.0,
            max: 1.0,
            unit: Unit::Ratio,
            doc: "share busy",
        };
        let meta = |doc: &'static str| crate::RuleMeta {
            code: "PD999",
            name: "example",
            severity: crate::Severity::Info,
            scope: crate::Scope::Host,
            summary: "example",
            fails_when: "never",
            severity_why: "info: an example",
            type_name: "Example",
            doc,
            thresholds: &[T],
            impact: &[],
        };
        let good = meta(" Judges at least {min_busy} busy; `min_busy` (default 50%).\n");
        assert_eq!(good.threshold_markers(), ["min_busy"]);
        assert_eq!(
            good.explanation(),
            "Judges at least 50% busy; `min_busy` (default 50%)."
        );
        assert_eq!(default_drift(&good), Vec::<String>::new());
        let stale = meta(" Judges at least {min_busy} busy; `min_busy` (default 40%).\n");
        assert_eq!(
            default_drift(&stale),
            ["PD999: the explanation restates `min_busy` as 40%, the declaration says 50%"]
        );
        let unmarked = meta(" Judges at least 50% busy; {min_bsy}.\n");
        assert_eq!(
            default_drift(&unmarked).len(),
            2,
            "{:?}",
            default_drift(&unmarked)
        );
    }

    #[test]
    fn settings_name_the_rule_and_the_fix() {
        let mut s = Settings::default();
        s.set("PD403", "max_steal", 0.1).unwrap();
        s.set_text("hypervisor-preemption", "max_far_dispatches", "15%")
            .unwrap();
        s.set_text("PD302", "min_rss_bytes", "2G").unwrap();
        s.disable("dscr-default").unwrap();
        assert!(s.is_disabled("PD406"));
        let l = s.limits("PD403");
        let t = Settings::threshold("PD403", "max_steal").unwrap();
        assert_eq!(l.get(t), 0.1);
        assert_eq!(
            s.limits("PD302")
                .count(Settings::threshold("PD302", "min_rss_bytes").unwrap()),
            2 << 30
        );
        assert_eq!(Limits::DEFAULT.get(t), 0.05);
        assert_eq!(s.changed("PD403").len(), 2);

        let e = |r: Result<(), SettingsError>| r.unwrap_err().0;
        assert_eq!(
            e(s.set("PD999", "x", 1.0)),
            "unknown rule \"PD999\" (`powerdiag rules` lists them)"
        );
        assert!(
            e(s.set("PD403", "max_stael", 0.1))
                .contains("has no threshold \"max_stael\"; it has max_steal, ")
        );
        assert!(e(s.set("PD405", "x", 0.1)).contains("PD405 (smt-disabled) has no thresholds"));
        assert!(e(s.set("PD403", "max_steal", 5.0)).contains("max_steal: 500.0% is not between 0.0% and 100.0% (a ratio: for 5% write 0.05 or \"5%\")"));
        // Written as a percentage already: no hint to write it as one.
        let over = e(s.set_text("PD403", "max_steal", "150%"));
        assert!(
            over.ends_with("max_steal: 150.0% is not between 0.0% and 100.0%"),
            "{over}"
        );
        assert!(e(s.set_text("PD403", "max_steal", "1.5")).contains("write 0.015 or \"1.5%\""));
        assert!(e(s.set("PD403", "max_steal", f64::NAN)).contains("not a finite number"));
        assert!(e(s.set_text("PD403", "max_steal", "lots")).contains("\"lots\" is not a number"));
        assert!(e(s.set_text("PD302", "min_rss_bytes", "1.5G")).contains("not a size"));
        assert!(e(s.set("PD303", "min_instructions", 1.5)).contains("whole number"));
        assert_eq!(
            s.limits("PD403").get(t),
            0.1,
            "a rejected value changes nothing"
        );
    }

    #[test]
    fn evaluation_honours_settings_and_says_so() {
        let s = crate::testing::SnapshotBuilder::new().build();
        let mut settings = Settings::default();
        settings.disable("PD406").unwrap();
        settings.set("PD403", "max_steal", 0.2).unwrap();
        let report = crate::evaluate_with(&s, &settings);
        assert_eq!(report.checks.len(), RULES.len() - 1);
        assert!(report.checks.iter().all(|c| c.code != "PD406"));
        let pd403 = report.checks.iter().find(|c| c.code == "PD403").unwrap();
        assert_eq!(pd403.thresholds.get("max_steal"), Some(&0.2));
        let json = serde_json::to_string(pd403).unwrap();
        assert!(
            json.contains("\"thresholds\":{\"max_steal\":0.2}"),
            "{json}"
        );
        let pd101 = report.checks.iter().find(|c| c.code == "PD101").unwrap();
        let json = serde_json::to_string(pd101).unwrap();
        assert!(
            !json.contains("thresholds"),
            "defaults are not repeated: {json}"
        );
    }

    #[test]
    fn effective_lists_every_threshold_once() {
        let total: usize = RULES.iter().map(|r| r.meta().thresholds.len()).sum();
        assert_eq!(Settings::default().effective().count(), total);
    }
}
