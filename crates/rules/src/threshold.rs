//! A rule's tunable limits: [`Threshold`] (declared next to the rule), its [`Unit`], and
//! [`Limits`], the values in effect for one rule (the user's, over the defaults).

use std::collections::BTreeMap;

use crate::value::{format_bytes, parse_u64, pct};

/// How a threshold's value is read and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A share between 0 and 1; also written `"5%"`.
    Ratio,
    /// A whole number of things (queries, threads, instructions, µs).
    Count,
    /// A size in bytes; also written `"1G"`, `"512M"` (binary multiples).
    Bytes,
    /// A plain number (a factor, a rate).
    Number,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Ratio => "ratio",
            Unit::Count => "count",
            Unit::Bytes => "bytes",
            Unit::Number => "number",
        }
    }
}

/// One tunable limit of a rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    /// The key under `[rules.thresholds.CODE]`: snake_case, stable.
    pub key: &'static str,
    pub default: f64,
    /// The accepted range, inclusive: values outside it would make the rule meaningless.
    pub min: f64,
    pub max: f64,
    pub unit: Unit,
    /// One line: what the limit means for the verdict.
    pub doc: &'static str,
}

impl Threshold {
    /// Writes a value the way the unit reads best (`5%`, `1 GiB`, `10000000`, `1.5`).
    pub fn format(&self, value: f64) -> String {
        let whole = value >= 0.0 && value.fract() == 0.0 && value < u64::MAX as f64;
        match self.unit {
            Unit::Ratio => pct(value),
            Unit::Count if whole => format!("{}", value as u64),
            Unit::Bytes if whole => format_bytes(value as u64),
            _ => format!("{value}"),
        }
    }

    /// Writes a value for prose (the explanation's threshold markers): `10%` rather than
    /// `10.0%`, `1,000` rather than `1000`; otherwise as [`Threshold::format`].
    pub fn format_prose(&self, value: f64) -> String {
        let whole = value >= 0.0 && value.fract() == 0.0 && value < u64::MAX as f64;
        match self.unit {
            Unit::Ratio => format!("{}%", (value * 1000.0).round() / 10.0),
            Unit::Count if whole => {
                let digits = (value as u64).to_string();
                let mut out = String::with_capacity(digits.len() + digits.len() / 3);
                for (i, c) in digits.chars().enumerate() {
                    if i > 0 && (digits.len() - i).is_multiple_of(3) {
                        out.push(',');
                    }
                    out.push(c);
                }
                out
            }
            _ => self.format(value),
        }
    }

    /// Reads a value written as text (`"5%"`, `"1G"`, `"0.3"`), checking the unit and range.
    pub fn parse_text(&self, text: &str) -> Result<f64, String> {
        let t = text.trim();
        let value = match self.unit {
            Unit::Ratio if t.ends_with('%') => {
                let value = t[..t.len() - 1]
                    .trim()
                    .parse::<f64>()
                    .map(|p| p / 100.0)
                    .map_err(|_| format!("{t:?} is not a percentage"))?;
                // Written as a percentage already: out of range is out of range, without the
                // hint for a share mistaken for a percentage.
                return self.check_range(value, false);
            }
            Unit::Bytes => parse_u64(t)
                .map(|b| b as f64)
                .ok_or_else(|| format!("{t:?} is not a size (bytes, or with K/M/G/T)"))?,
            _ => t
                .parse::<f64>()
                .map_err(|_| format!("{t:?} is not a number"))?,
        };
        self.check_value(value)
    }

    /// Checks a numeric value against the unit and range.
    pub fn check_value(&self, value: f64) -> Result<f64, String> {
        self.check_range(value, true)
    }

    /// `hint`: a ratio above 1 may be a percentage written as a number (`5` for 5%): say how
    /// to write it.
    fn check_range(&self, value: f64, hint: bool) -> Result<f64, String> {
        if !value.is_finite() {
            return Err(format!("{value} is not a finite number"));
        }
        if matches!(self.unit, Unit::Count | Unit::Bytes) && value.fract() != 0.0 {
            return Err(format!("{value} must be a whole number"));
        }
        if value < self.min || value > self.max {
            let hint = if hint && self.unit == Unit::Ratio && value > 1.0 {
                format!(
                    " (a ratio: for {value}% write {} or \"{value}%\")",
                    value / 100.0
                )
            } else {
                String::new()
            };
            return Err(format!(
                "{} is not between {} and {}{hint}",
                self.format(value),
                self.format(self.min),
                self.format(self.max)
            ));
        }
        Ok(value)
    }
}

/// The limits one rule judges against: configured values over the defaults.
#[derive(Debug, Clone, Copy)]
pub struct Limits<'a> {
    pub(crate) overrides: Option<&'a BTreeMap<&'static str, f64>>,
}

impl Limits<'static> {
    /// Every threshold at its default.
    pub const DEFAULT: Limits<'static> = Limits { overrides: None };
}

impl Limits<'_> {
    /// The value in effect for `t`.
    pub fn get(&self, t: &Threshold) -> f64 {
        self.overrides
            .and_then(|o| o.get(t.key))
            .copied()
            .unwrap_or(t.default)
    }

    /// `get` for a whole-number threshold ([`Unit::Count`] or [`Unit::Bytes`]).
    pub fn count(&self, t: &Threshold) -> u64 {
        self.get(t) as u64
    }
}
