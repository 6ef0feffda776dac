//! How the agent writes its log: the format from `MESHFIT_LOG_FORMAT`, the filter from
//! `MESHFIT_LOG`. Both are variables, not configuration keys: the log is set up before the
//! configuration is read, so that a refused setting is reported in the format the log
//! shipper parses, one JSON object like every other line.

use std::fmt;

/// The variable that picks the format.
pub const FORMAT_ENV: &str = "MESHFIT_LOG_FORMAT";
/// The variable holding the `tracing` filter (`info`, `agent=debug`, ...).
pub const FILTER_ENV: &str = "MESHFIT_LOG";

/// The log's line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line per event, coloured on a terminal.
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields.message`, ...), as
    /// log shippers (Fluent Bit, Vector, Promtail) parse without a custom regex.
    Json,
}

/// A `MESHFIT_LOG_FORMAT` value that is neither format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadFormat(pub String);

impl fmt::Display for BadFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{FORMAT_ENV}={:?}: expected text or json", self.0)
    }
}

impl std::error::Error for BadFormat {}

impl LogFormat {
    /// The format a variable's value names; unset or empty is text, the default.
    pub fn parse(value: Option<&str>) -> Result<LogFormat, BadFormat> {
        match value.map(str::trim) {
            None | Some("") => Ok(LogFormat::Text),
            Some(v) if v.eq_ignore_ascii_case("text") => Ok(LogFormat::Text),
            Some(v) if v.eq_ignore_ascii_case("json") => Ok(LogFormat::Json),
            Some(v) => Err(BadFormat(v.to_string())),
        }
    }

    /// The format `MESHFIT_LOG_FORMAT` names in this process's environment.
    pub fn from_env() -> Result<LogFormat, BadFormat> {
        match std::env::var(FORMAT_ENV) {
            Ok(v) => LogFormat::parse(Some(&v)),
            Err(std::env::VarError::NotPresent) => LogFormat::parse(None),
            Err(std::env::VarError::NotUnicode(v)) => {
                Err(BadFormat(v.to_string_lossy().into_owned()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_and_empty_are_text_and_either_name_is_read_in_any_case() {
        assert_eq!(LogFormat::parse(None), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(Some(" ")), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(Some("TEXT")), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(Some("json")), Ok(LogFormat::Json));
        assert_eq!(LogFormat::parse(Some("Json ")), Ok(LogFormat::Json));
    }

    #[test]
    fn another_value_is_refused_naming_the_variable_and_the_value() {
        let e = LogFormat::parse(Some("logfmt")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "MESHFIT_LOG_FORMAT=\"logfmt\": expected text or json"
        );
    }
}
