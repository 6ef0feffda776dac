//! The value types of the settings: durations written as `6h30m`, and tokens that never
//! print.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A duration written like `6h`, `30m`, `5s`, `250ms` or `1h30m` (humantime's syntax).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span(pub Duration);

impl Span {
    /// `secs` seconds.
    pub const fn from_secs(secs: u64) -> Span {
        Span(Duration::from_secs(secs))
    }
}

impl FromStr for Span {
    type Err = String;

    /// humantime's syntax: a number and a unit, or several (`1h30m`, `1h 30m`).
    fn from_str(text: &str) -> std::result::Result<Span, String> {
        humantime::parse_duration(text.trim())
            .map(Span)
            .map_err(|_| {
                format!(
                    "duration `{text}`: expected a number and a unit, like 6h, 30m, 5s, 250ms or 1h30m"
                )
            })
    }
}

impl fmt::Display for Span {
    /// The largest unit that divides the duration: `6h`, `90s`, `250ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        for (unit, size) in [
            ("d", 86_400_000),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1000),
        ] {
            if ms > 0 && ms % size == 0 {
                return write!(f, "{}{unit}", ms / size);
            }
        }
        write!(f, "{ms}ms")
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Span, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A token, printed as `<hidden>` by `--print-config` and in logs.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<hidden>")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str("<hidden>")
    }
}

impl FromStr for Secret {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Secret, String> {
        Ok(Secret(text.to_string()))
    }
}
